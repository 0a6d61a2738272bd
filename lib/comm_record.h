/* comm_record.h: what the front end (comm.c) records of each communication call
 * (comm_record.c): its size, its ledger charge, its trace events and its PL_VERBOSE line.
 * Not for lab code. */
#ifndef PL_COMM_RECORD_H
#define PL_COMM_RECORD_H

#include "comm_op.h"
#include "trace.h"

/* The op's size S as nccl-tests counts it (bytes): the trace's and the ledger's. */
double pl_comm_bytes(const struct pl_op *op, int n);
/* Charges this rank's share of the op to the traffic ledger, link by link. */
void pl_comm_charge(const struct pl_op *op, struct pl_comm *c, enum pl_coll_kind kind, double S);
/* Appends one event of h to the trace when it records (peer: a group rank, or -1). */
void pl_comm_event(enum pl_ev_type type, const struct pl_handle *h, int peer, int tag,
                   double bytes, double t0, double t1);
/* The PL_VERBOSE=1 line of a call. */
void pl_comm_print(const struct pl_call *k, const struct pl_handle *h);

#endif
