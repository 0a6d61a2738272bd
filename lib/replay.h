/* replay.h: the modelled timeline. A merged trace is replayed on a cluster profile: each
 * rank has a compute stream and a communication stream; compute takes flops / rate; a
 * collective starts when every member has issued it and every member's comm stream is
 * free, and lasts pl_coll_time() over its slowest link class; a send occupies the sender's
 * comm stream for latency + bytes / bandwidth and the matching recv (same peer and tag, in
 * order) ends when it arrives; a wait or a blocking recv stalls the compute stream.
 * Deterministic on any machine: it is how overlap, bubbles and step time are judged on the
 * CPU build, where wall-clock overlap means little.
 *
 * Rules in detail. An ISSUE queues its collective on the rank's comm stream at the rank's
 * compute-stream time and does not stop compute; the k-th ISSUE of each member on a group
 * is the same collective, which starts at the latest of the members' issue times and of
 * their comm streams coming free, and ends on all members together. A WAIT stalls compute
 * until its handle's operation has ended; an ISSUE without a handle (handle <= 0) is
 * blocking and stalls by itself, and a WAIT without one is ignored. A SEND occupies the
 * sender's comm stream for latency + bytes / bandwidth and compute resumes when it is done;
 * the k-th send from a to b with tag t matches the k-th receive of b from a with tag t
 * (ISEND and IRECV alike; their WAIT completes them). Links are the topology's classes (a
 * group crossing nodes runs at the network's figures); with topo NULL every link is
 * intra-node. On a torus profile (topo.h's torus) the ranks form the torus of
 * pl_torus_shape(nranks) and every send and collective takes torus.h's time for its
 * route or group instead. Stalls count as exposed communication. */
#ifndef PL_REPLAY_H
#define PL_REPLAY_H

#include <stdio.h>
#include "topo.h"
#include "trace.h"

struct pl_span_time {
    double start, end; /* modelled seconds. COMPUTE: its run; ISSUE, SEND, ISEND: the
                          transfer on the comm stream; WAIT, RECV: the stall (possibly
                          empty); IRECV: the instant it is posted */
    int stream;        /* 0 compute, 1 comm */
};

struct pl_rank_time {
    double end;          /* when the rank's last event finished, on either stream */
    double compute;      /* busy time on the compute stream */
    double comm;         /* busy time on the comm stream */
    double exposed_comm; /* compute stream stalled waiting for communication */
    double idle;         /* step_time - compute */
};

struct pl_replay {
    int nranks;
    double step_time;           /* max over ranks of end */
    struct pl_rank_time *rank;  /* [nranks] */
    struct pl_span_time **span; /* [rank][event] */
};

/* Returns 0, or -1 with a message in err when the trace cannot complete (a collective some
 * member never issues, a recv without a send: the trace of a deadlock), naming rank and
 * event and what it waits for, or when it is malformed (unknown group or handle). out is
 * empty after a failure; free it with pl_replay_free after success. */
int pl_replay_run(const struct pl_merged_trace *m, const struct pl_profile *p,
                  const struct pl_topo *topo, struct pl_replay *out, char *err, size_t errlen);
/* How a rank's communication queues. PL_REPLAY_ONE_STREAM (pl_replay_run): on one comm
 * stream, in issue order, so an operation waits for every one issued before it.
 * PL_REPLAY_STREAM_PER_LINK: on one stream per link class, so a rank's operations across
 * nodes (its NIC) do not hold back those inside its node (NVLink), as collectives on
 * separate communicators and CUDA streams run side by side; those on the same class still
 * queue in issue order. A group's class is that of its widest link (topo.h), a send's that
 * of its two ranks; without a topology, or on a torus, every link is one class. */
enum pl_replay_streams { PL_REPLAY_ONE_STREAM, PL_REPLAY_STREAM_PER_LINK };
int pl_replay_run_streams(const struct pl_merged_trace *m, const struct pl_profile *p,
                          const struct pl_topo *topo, enum pl_replay_streams streams,
                          struct pl_replay *out, char *err, size_t errlen);
void pl_replay_free(struct pl_replay *r);

/* Sum over ranks of idle / (nranks x step_time): the pipeline bubble fraction. */
double pl_replay_idle_fraction(const struct pl_replay *r);
/* Per rank: end, compute, comm, exposed comm, idle. */
void pl_replay_print_summary(FILE *f, const struct pl_replay *r);
/* One text row per rank, width columns: F/B/letters for compute labels, '=' comm, '.' idle. */
void pl_replay_print_timeline(FILE *f, const struct pl_merged_trace *m,
                              const struct pl_replay *r, int width);
/* The same timeline as an SVG file. */
int pl_replay_write_svg(const struct pl_merged_trace *m, const struct pl_replay *r,
                        const char *title, const char *path);

/* A class of collectives in the SVG: its colour and its legend entry. */
struct pl_replay_svg_class {
    const char *name, *color;
};
/* How pl_replay_write_svg_styled colours the comm stream, e.g. by parallel axis:
 * group_class[g] (g indexes m->groups) picks the entry of classes that draws the collectives
 * on that group, -1 the default colour ("collective"); the legend lists the classes that
 * occur, in their order. send_name, when not NULL, names the sends' entry ("send");
 * compute_name, when not NULL, draws all compute in one colour under that name (not by the
 * spans' first letters); a comm-stream span is drawn at least min_comm_px wide (0: 0.5
 * pixel, as every span), so that short transfers show; note, when not NULL, is a line of
 * text under the legend. */
struct pl_replay_svg_style {
    int nclasses;
    const struct pl_replay_svg_class *classes;
    const int *group_class;
    const char *send_name;
    const char *compute_name;
    double min_comm_px;
    const char *note;
};
/* pl_replay_write_svg with style (NULL: as pl_replay_write_svg draws). */
int pl_replay_write_svg_styled(const struct pl_merged_trace *m, const struct pl_replay *r,
                               const char *title, const struct pl_replay_svg_style *style,
                               const char *path);

#endif
