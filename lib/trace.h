/* trace.h: per rank, the ordered events of a step: compute segments (label, FLOPs), the
 * issue and the wait of each collective (kind, group, bytes, handle), sends and receives
 * (peer, tag, bytes). Compute segments are cut automatically: every communication event
 * first closes the FLOPs counted since the previous event into a compute event carrying the
 * current span label. Traces are merged across ranks and written as Chrome trace JSON that
 * Perfetto opens; replay.h turns a merged trace into a modelled timeline.
 *
 * When PL_STATUS_DIR is set, each rank keeps its current span or call in a small file
 * there, so a supervisor that kills a hung job can say where every rank was. */
#ifndef PL_TRACE_H
#define PL_TRACE_H

#include <stdio.h>
#include "comm_kind.h"
#include "trace_status.h"

enum pl_ev_type {
    PL_EV_COMPUTE, /* flops, label */
    PL_EV_ISSUE,   /* collective started: kind, group, bytes (S), handle */
    PL_EV_WAIT,    /* wait for handle (a collective, isend or irecv) */
    PL_EV_SEND,    /* blocking send: peer, tag, bytes */
    PL_EV_RECV,    /* blocking recv */
    PL_EV_ISEND,   /* handle, with peer, tag, bytes as for a send */
    PL_EV_IRECV,   /* handle, with peer, tag, bytes as for a recv */
    PL_EV_NTYPES
};
const char *pl_ev_type_name(enum pl_ev_type t);

#define PL_LABEL_LEN 40

struct pl_event {
    enum pl_ev_type type;
    char label[PL_LABEL_LEN];
    double flops;
    enum pl_coll_kind kind;
    int group;    /* pl_comm_id of the communicator */
    double bytes; /* S for collectives, message bytes for p2p */
    int peer;     /* world rank, p2p only */
    int tag;
    long handle;  /* > 0 for asynchronous operations, shared by issue and wait */
    double t0, t1; /* wall clock, seconds since pl_init */
};

/* A group as the merged trace knows it: the world ranks of communicator `id`. */
struct pl_group_def {
    int id;
    int n;
    int *ranks;
};

struct pl_merged_trace {
    int nranks;
    int *nevents;            /* per rank */
    struct pl_event **events;/* per rank, in program order */
    int ngroups;
    struct pl_group_def *groups;
};

/* Recording is off until enabled (pl_init enables it for --trace FILE or PL_TRACE=FILE). */
void pl_trace_enable(int on);
int pl_trace_enabled(void);
void pl_trace_clear(void); /* forget this rank's events, e.g. after warm-up steps */

/* Names the compute that follows (until the next span): "fwd block 3", "adamw". The FLOPs
 * counted before it are first closed into a compute event of the previous span. The first
 * letter of a label is its letter in text timelines (F, B, W, A, ...). */
void pl_span(const char *label);
/* The label of the span the compute now counted belongs to ("" before any). */
const char *pl_span_label(void);
/* Closes the FLOPs counted since the last event into a compute event. */
void pl_trace_flush(void);
/* Appends an event (the comm layer calls this; tests build traces by hand with it). */
void pl_trace_add(const struct pl_event *ev);
/* This rank's events (call pl_trace_flush first to include the compute since the last). */
int pl_trace_count(void);
const struct pl_event *pl_trace_events(void);

/* Collective over world (raw MPI, so it records and charges nothing; without MPI it copies
 * this rank's trace): rank 0 receives every rank's events and the group table; on the
 * other ranks out is left empty (nranks 0). Flushes the pending compute first. */
void pl_trace_gather(struct pl_merged_trace *out);
void pl_trace_merged_free(struct pl_merged_trace *m);
/* Chrome trace JSON, one process per rank, compute and comm as two threads ("X" events,
 * microseconds, args with flops, bytes, peer, tag, handle). Returns 0, or -1 when the file
 * cannot be written. */
int pl_trace_write_json(const struct pl_merged_trace *m, const char *path);
/* Group bookkeeping used by the comm layer and by hand-built traces. */
void pl_trace_register_group(int id, int n, const int *world_ranks);

#endif
