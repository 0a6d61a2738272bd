/* timeline.h: Lab 7's MoE layers on the modelled timeline. In the first step of a training
 * case the student's moe_forward and moe_backward calls (and only they) are traced; the
 * trace is replayed on dgx-h100 at a Mixtral-sized layer, and each rank's compute on that
 * timeline is set against the work its experts must do: the single-device reference's
 * routing says how many rows each expert gets, and lib's own expert and router ops on that
 * many rows say what they cost. An expert that runs every received row and keeps its own
 * does E/ep times that work and shows here, though its numbers and bytes are right. */
#ifndef LAB07_TIMELINE_H
#define LAB07_TIMELINE_H

#include "model.h"
#include "oracle.h"

#define L7_TL_PROFILE "dgx-h100"
/* Full marks up to L7_TL_FULL times the work, none from L7_TL_NONE, linear between. */
#define L7_TL_FULL 1.25
#define L7_TL_NONE 1.60

/* Part time's figures on this rank (a member of the lab's state). */
struct l7_timeline {
    int wanted;   /* check mode grades part time (from --parts) */
    int was_on;   /* tracing before the student's call */
    double flops; /* this rank's, inside the student's calls */
};

/* Before the traced step: forgets earlier events and FLOPs. */
void l7_tl_start(struct l7_timeline *tl);
/* Around each of the student's calls in the traced step: starts recording under label
 * (e.g. "F moe"), and stops, adding the FLOPs between to this rank's count. */
void l7_tl_begin(struct l7_timeline *tl, const char *label);
void l7_tl_end(struct l7_timeline *tl);
/* Collective, after the traced step: this rank's FLOPs in the student's calls against the
 * work of o's routing (its EP group's members' counts for its experts, and its router), at
 * the size bench mode models (FLOPs times flops_x, bytes times bytes_x): fig gets what it
 * computes and what it needs (ms on L7_TL_PROFILE), their ratio, and on rank 0 the step
 * time of the trace replayed there (*replayed 1 when it could be). judge.c grades them: full
 * marks up to L7_TL_FULL times the work on the rank that did most beyond it, none from
 * L7_TL_NONE. */
void l7_tl_record(struct l7_timeline *tl, const struct l7_or_reference *o, double flops_x,
                  double bytes_x, double fig[4], int *replayed);

#endif
