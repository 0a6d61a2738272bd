/* schedule.h: the grader's own definitions for Lab 6, computed independently of any
 * solution: the order of forwards (F) and backwards (B) per stage for each schedule, the
 * best contiguous partition by FLOPs, the bubble formula, and the ideal run of a schedule
 * as a merged trace (marks, tagged sends and receives) that lib/replay turns into the
 * exact bubble and the ideal timeline drawn beside the student's. */
#ifndef LAB06_SCHEDULE_H
#define LAB06_SCHEDULE_H

#include <stddef.h>

#include "pipeline.h"
#include "trace.h"

/* Units of the uniform stage times: a forward of one microbatch on any stage takes
 * UNIT_F, its backward UNIT_B (a backward is about twice a forward); split in two (ZB-H1),
 * the backward is a B of UNIT_B - UNIT_W and a W of UNIT_W, each as long as a forward. */
#define L6_SCHED_UNIT_F 1.0
#define L6_SCHED_UNIT_B 2.0
#define L6_SCHED_UNIT_W 1.0

struct l6_sched_op {
    char phase; /* 'F', 'B' or 'W' (ZB-H1's weight-gradient half) */
    int mb;
    int chunk;  /* the rank's model chunk: 0, or 0..v-1 when interleaved */
};

/* Virtual stages per rank: v for the interleaved schedule, 1 for the others. */
int l6_sched_chunks(enum pipe_schedule k, int v);
/* Whether the schedule runs with p stages and m microbatches (interleaved: m a multiple of
 * p, as Megatron-LM's schedule needs). */
int l6_sched_runs(enum pipe_schedule k, int p, int m);
/* Operations a stage runs in a step: 2 v m (a forward and a backward per microbatch and
 * chunk), or 3 m for ZB-H1 (F, B and W). */
int l6_sched_nops(enum pipe_schedule k, int v, int m);
/* Stage s of p, m microbatches, v chunks: its l6_sched_nops operations in order into ops.
 * ZB-H1: slot x = 0 .. m + p - 2 runs F of x, B of x - (p - 1 - s), W of x - (p - 1), those
 * that exist. */
void l6_sched_order(enum pipe_schedule k, int p, int v, int s, int m, struct l6_sched_op *ops);
/* "AFAB (GPipe)", "1F1B", "interleaved 1F1B" or "ZB-H1". */
const char *l6_sched_name(enum pipe_schedule k);
/* The uniform time of an operation of phase under schedule k with v chunks per rank. */
double l6_sched_unit(enum pipe_schedule k, char phase, int v);
/* The fraction of a step every stage idles when stage times are uniform: (p-1)/(m+p-1)
 * for AFAB and 1F1B (docs/design.md); ZB-H1, with F, B and W of one unit each and m >= p,
 * (p-1)/(3m+p-1): (p-1)(F+B-W) of idle against 1F1B's (p-1)(F+B+W). -1 where no formula
 * holds (interleaved; ZB-H1 with m < p). */
double l6_sched_bubble_formula(enum pipe_schedule k, int p, int m);
/* The most activation bytes stage s holds at once when it runs the schedule's order and
 * frees each microbatch's activations of a chunk once that chunk's backward of it is done:
 * chunk_bytes[j] is what one microbatch holds on the rank's chunk j (v of them). AFAB: m
 * microbatches; 1F1B: min(p - s, m); interleaved: its warm-up plus one, of chunks. ZB-H1
 * holds them until the W, and from its B to its W also wgrad_bytes[0] more (what B keeps
 * for W; NULL: nothing). */
double l6_sched_peak_acts(enum pipe_schedule k, int p, int v, int s, int m,
                          const double *chunk_bytes, const double *wgrad_bytes);

/* The ideal run of the schedule with uniform times, boundary messages of `bytes`, tagged
 * as pipeline.h says. */
void l6_sched_ideal_trace(enum pipe_schedule k, int p, int v, int m, double bytes,
                       struct pl_merged_trace *out);

/* The smallest largest stage of a contiguous cut of the n costs into p stages; start, when
 * not NULL, gets the index of the first cost of each of the p stages of one such cut. */
double l6_sched_best_max(const double *cost, int n, int p, int *start);

/* A merged trace with every compute event's FLOPs set to the uniform time of the mark it
 * carries under schedule k (l6_sched_unit: "pipe F 3" L6_SCHED_UNIT_F / v, "pipe B 3"
 * L6_SCHED_UNIT_B / v, a chunk being 1/v of a stage; ZB-H1's B and W one unit each) and
 * every other compute set to 0, into out (free with pl_trace_merged_free). */
void l6_sched_uniform_copy(enum pipe_schedule k, const struct pl_merged_trace *in, int v,
                           struct pl_merged_trace *out);
/* Replays t with uniform stage times and free communication; *bubble is the mean idle
 * fraction of the stages. svg non-NULL also draws it. Returns 0, or -1 with err. */
int l6_sched_replay_bubble(const struct pl_merged_trace *t, const char *svg, const char *title,
                        double *bubble, char *err, size_t errlen);

/* Both replayed with uniform stage times: the first operation, stage by stage, that starts
 * later in `uni` (l6_sched_uniform_copy of the run t, whose marks name the operations) than
 * the same operation in the schedule's ideal run. chunk_first[j * p + s] is the first part
 * of rank s's chunk j. Returns 1 with *stage, *op and the two start times, 0 when none
 * starts late, -1 with err when a trace cannot be replayed. */
int l6_sched_first_late(enum pipe_schedule k, int p, int v, int m, const struct pl_merged_trace *t,
                     const struct pl_merged_trace *uni, const int *chunk_first, int *stage,
                     struct l6_sched_op *op, double *t_got, double *t_ideal, char *err,
                     size_t errlen);

/* The marks of one rank's trace, in order: up to cap into ops; returns how many. A mark's
 * chunk is the j whose chunk_first[j] (v of them) is the first part it names, -1 if none. */
int l6_sched_read_marks(const struct pl_event *ev, int n, const int *chunk_first, int v,
                     struct l6_sched_op *ops, int cap);

#endif
