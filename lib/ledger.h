/* ledger.h: the traffic ledger. For every message a rank sends it adds the bytes by
 * collective kind and by link class; library collectives are charged as their ring
 * algorithm uses the links (all-reduce of S bytes on n ranks: 2(n-1)/n S sent per rank, on
 * the link to the next rank of the ring). Ops add their FLOPs. From FLOPs, bytes and a
 * cluster profile it gives a modelled time that is the same on any machine.
 *
 * Sizes S follow nccl-tests: all-reduce and broadcast S = buffer bytes; reduce-scatter the
 * whole input (n x output); all-gather the whole output; all-to-all the whole send buffer. */
#ifndef PL_LEDGER_H
#define PL_LEDGER_H

#include <stdio.h>
#include "comm_kind.h"
#include "topo.h"

struct pl_comm;

struct pl_ledger {
    double bytes[PL_NKINDS][PL_NLINKS]; /* bytes this rank sent */
    long calls[PL_NKINDS];              /* operations this rank took part in */
    double flops;                       /* every FLOP this rank's ops ran (hardware FLOPs) */
    double flops_recompute;             /* of flops, those run again to rebuild activations
                                         * (activation recomputation): not model FLOPs */
};

/* Bytes one rank sends in the library's ring algorithm for a collective of size S on n
 * ranks (broadcast: the ranks that forward, i.e. all but the last of the chain). */
double pl_ring_bytes_sent(enum pl_coll_kind kind, int n, double S);
/* nccl-tests' bus-bandwidth factor: busbw = algbw x factor. */
double pl_busbw_factor(enum pl_coll_kind kind, int n);
/* Modelled time of a collective of size S on n ranks over links of latency lat (s) and
 * bandwidth bw (bytes/s): ring all-reduce 2(n-1) lat + 2(n-1)/n S/bw, and so on. */
double pl_coll_time(enum pl_coll_kind kind, int n, double S, double lat, double bw);

/* This rank's running ledger. */
struct pl_ledger *pl_ledger(void);
void pl_ledger_reset(void);
void pl_ledger_add_flops(double flops);
/* Between begin and end (they nest) the FLOPs added count in flops_recompute as well: a
 * forward rerun to rebuild what was not saved, which a step's model FLOPs leave out. */
void pl_ledger_recompute_begin(void);
void pl_ledger_recompute_end(void);
/* Every FLOP added since the program started, untouched by pl_ledger_reset: the trace cuts
 * its compute events from this counter, so a reset between two events loses nothing. */
double pl_ledger_flops_total(void);
void pl_ledger_charge(enum pl_coll_kind kind, enum pl_link link, double bytes);
void pl_ledger_count_call(enum pl_coll_kind kind);

/* out = after - before, for measuring one step. */
void pl_ledger_diff(const struct pl_ledger *after, const struct pl_ledger *before,
                    struct pl_ledger *out);
double pl_ledger_bytes(const struct pl_ledger *l, int kind /* -1: all */, int link /* -1 */);
/* FLOPs at the profile's rate plus each link class's bytes at its bandwidth and each call's
 * latency: a serial (no overlap) modelled time. An all-reduce, reduce-scatter or all-gather
 * kind that sent no byte (every call on a group of one) costs no latency; the other kinds,
 * which may wait without sending, always do. */
double pl_ledger_modelled_time(const struct pl_ledger *l, const struct pl_profile *p);

/* Collective over comm: root (rank 0) receives every member's ledger into all[size].
 * Defined in comm_ledger.c, the one place the ledger meets a communicator's internals. */
void pl_ledger_gather(struct pl_comm *comm, const struct pl_ledger *mine, struct pl_ledger *all);
/* A table of bytes per kind and link class, one row per rank. */
void pl_ledger_print(FILE *f, const struct pl_ledger *all, int nranks);

#endif
