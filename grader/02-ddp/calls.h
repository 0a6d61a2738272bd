/* calls.h: what Lab 2's grader sees of the gradient all-reduces the code under test makes,
 * and when. lab.mk wraps pl_all_reduce, pl_all_reduce_async and pl_model_set_hook: each
 * all-reduce's range of m->grads is recorded with how far backward had got when it was
 * issued, told by a hook of the grader's own that runs before the student's (the student's
 * hook, set by pl_model_set_hook or by hand, is called from it). The ledger sees bytes and
 * calls only: these records say which elements each call covered, so a plan reported right
 * but all-reduced over other ranges, or a bucket started before backward had written all of
 * it, is told apart from the right step. */
#ifndef L2_CALLS_H
#define L2_CALLS_H

#include <stddef.h>

#include "model.h"

/* What one case records (calls.c), made by l2_calls_watch on the heap. */
struct l2_calls;

/* Follows m's backward from now on: installs the grader's hook (before ddp_new) and names
 * the record the wrappers write into (grader/common/wrap_ctx.h). */
struct l2_calls *l2_calls_watch(struct pl_model *m);
/* Stops following and frees w. */
void l2_calls_unwatch(struct l2_calls *w);
/* After ddp_free: 1 when the student's backward hook is still the model's (set through
 * pl_model_set_hook or by hand), which the next backward would call into freed state. */
int l2_calls_hook_left(const struct l2_calls *w);

/* Starts recording one step's all-reduces on this rank. */
void l2_calls_step_begin(struct l2_calls *w);
/* Around one microbatch's ddp_forward_backward; last: the step's last microbatch, whose
 * backward makes the gradients final part by part. */
void l2_calls_microbatch(struct l2_calls *w, int last);
/* After the last microbatch's ddp_forward_backward: every gradient is final. */
void l2_calls_backward_over(struct l2_calls *w);
void l2_calls_step_end(struct l2_calls *w);

/* 1 when one of this rank's all-reduces of the step's gradients used PL_SUM. */
int l2_calls_summed(const struct l2_calls *w);
/* 1 when one of them was a pl_all_reduce_async with PL_AVG, whose division by the rank
 * count happens only when a wait completes it. */
int l2_calls_async_avg(const struct l2_calls *w);

/* The part whose hook had run last when an all-reduce was made: none yet. */
#define L2_NO_PART (-1000)

/* An all-reduce of the last microbatch started before backward had written every gradient
 * in its range, in figures (judge.c words it): this rank's first such call. */
struct l2_early_fig {
    int found, step;
    size_t off, count;    /* the call's elements of m->grads */
    size_t final;         /* elements from here on were final when it was issued */
    int part;             /* the part whose hook ran last (L2_NO_PART: none yet) */
};

/* Collective (raw MPI): 1 on every rank when no rank started an all-reduce of the last
 * microbatch before backward had written every gradient in its range; otherwise 0 and, on
 * each rank that did, its first such call in f. step counts from 0; messages count steps
 * from 1, as Lab 3's do. */
int l2_calls_judge_timing(const struct l2_calls *w, int step, struct l2_early_fig *f);

/* Where an overlapped bucket's all-reduce was issued, for a late one (struct l2_late_fig). */
enum l2_where { L2_IN_HOOK, L2_OUT_OF_HOOK, L2_IN_FINISH };

/* DDP_OVERLAPPED: an all-reduce of the last microbatch issued after the hook call in which
 * its range became final, in figures (judge.c words it): this rank's first such call. */
struct l2_late_fig {
    int found, step;
    size_t off, count;    /* the call's elements of m->grads */
    int where;            /* enum l2_where */
    int part;             /* L2_IN_HOOK: the part whose hook issued it */
};

/* Collective: nothing. This rank's first all-reduce of the step's last microbatch that was
 * not issued during the hook call that made its range final (a hook that ran after, the
 * rest of ddp_forward_backward, or ddp_finish_gradients) into f when f holds none yet. Not
 * judged when the student's hook replaced the grader's by hand. */
void l2_calls_judge_late(const struct l2_calls *w, int step, struct l2_late_fig *f);

/* An all-reduce of a step outside the ranges it should cover, or not in place over them, in
 * figures (judge.c words it): the lowest rank that made one, and the first such call of
 * that rank. */
struct l2_range_fig {
    int rank, step;
    /* not in place: 1 sent from a buffer other than the one it received into, 2 both
     * outside m->grads (a staging copy reduced and copied back); 0 in place; 3 the count
     * exchange made from or into memory that is not a comm buffer (host memory, the stack) */
    int staged;
    int recv_in_grads;    /* staged 1: the result landed in m->grads at off */
    int repeated;         /* the range was already all-reduced in this step */
    int overlap;          /* not a wanted range: the wanted one it overlaps, or -1 */
    size_t off, count;    /* the call's elements of m->grads */
    size_t ooff, olen;    /* the wanted range it overlaps */
};

/* Collective (raw MPI): 1 on every rank when every rank's all-reduces of the step covered
 * exactly the n ranges [off[i], off[i]+len[i]) of m->grads, one call each, in any order,
 * each in place (send == recv, inside m->grads: ddp.h), beside at most one all-reduce of at
 * most count_floats floats outside m->grads (the count exchange). Otherwise 0 and, on rank
 * 0, the first such call in f (step as l2_calls_judge_timing's). */
int l2_calls_judge_ranges(const struct l2_calls *w, int step, const size_t *off,
                          const size_t *len, int n, size_t count_floats,
                          struct l2_range_fig *f);

#endif
