/* recompute.h: activation recomputation, the one choice the planner (plan.h) costs and the
 * reference model (model.h) runs, so that a plan's "recompute selective" has a run to match:
 *   none       every activation the backward reads is saved by the forward;
 *   selective  Korthikanti et al. (2022): the attention core's T x T intermediates are not
 *              saved; the backward reruns the attention core from its saved input;
 *   full       each transformer block saves only its input; the backward reruns the
 *              block's forward from it before the block's backward. */
#ifndef PL_RECOMPUTE_H
#define PL_RECOMPUTE_H

enum pl_recompute { PL_RECOMPUTE_NONE, PL_RECOMPUTE_SELECTIVE, PL_RECOMPUTE_FULL };

/* The valid names, for messages. */
#define PL_RECOMPUTE_NAMES "none, selective or full"

const char *pl_recompute_name(enum pl_recompute r); /* "none", "selective", "full" */
/* 0 with *out set when text is one of the names, else -1 (out untouched). */
int pl_recompute_parse(const char *text, enum pl_recompute *out);

#endif
