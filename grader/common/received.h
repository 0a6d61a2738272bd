/* received.h: the bytes a rank's code receives by point-to-point, which the traffic ledger
 * (it records what a rank sends) does not hold: a rank that collects everything is spotted by
 * what it receives. A lab wraps pl_recv, pl_irecv and pl_sendrecv (its lab.mk's --wrap) and
 * each wrapper calls gr_received_note; the count being collected is the caller's struct, so
 * that a lab's folder holds no mutable state of its own (Lab 1). */
#ifndef GR_RECEIVED_H
#define GR_RECEIVED_H

#include <stddef.h>

struct gr_received {
    double bytes;           /* received by pl_recv, pl_irecv and pl_sendrecv */
    double recv_only_calls; /* pl_recv and pl_irecv calls, which send nothing */
};

/* Starts counting into r (zeroed); only one count is collected at a time. */
void gr_received_begin(struct gr_received *r);
/* Stops counting into r. */
void gr_received_end(struct gr_received *r);
/* From a wrapper: floats received by one call; recv_only 1 for pl_recv and pl_irecv. Does
 * nothing when no count is being collected. */
void gr_received_note(size_t floats, int recv_only);

#endif
