/* core_count.h: the FLOPs the kit's core charged while a lab's code ran (Lab 5's bound on the
 * work outside the TP region). The lab wraps the core's calls (its lab.mk's --wrap) and each
 * wrapper hands gr_core_note what its call charged; the count being collected is the
 * caller's struct, so that a lab's folder holds no mutable state of its own. */
#ifndef GR_CORE_COUNT_H
#define GR_CORE_COUNT_H

#include <stddef.h>

#define GR_CORE_KINDS 4

struct gr_core_count {
    double total;               /* every call's FLOPs */
    double last[GR_CORE_KINDS]; /* the last call's of each kind */
    /* optional, set after gr_core_begin: shown each message a wrapper of the kit's ring step
     * sees (gr_core_send), with what it sends and how many places on */
    void (*on_send)(void *ctx, const float *send, size_t count, int shift);
    void *ctx;
};

/* Starts collecting into c (zeroed); only one count is collected at a time. */
void gr_core_begin(struct gr_core_count *c);
/* Stops collecting into c. */
void gr_core_end(struct gr_core_count *c);
/* From a wrapper, after the wrapped call: a call of kind (0 to GR_CORE_KINDS - 1) charged
 * flops; nothing when no count is being collected. */
void gr_core_note(int kind, double flops);
/* From a wrapper of the kit's ring step, before the step: the message it sends; nothing
 * when no count is being collected or it has no on_send. */
void gr_core_send(const float *send, size_t count, int shift);
/* One call of each kind: the last ones' FLOPs added. */
double gr_core_once(const struct gr_core_count *c);

#endif
