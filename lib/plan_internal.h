/* plan_internal.h: what plan.c shares with plan_search.c (the per-degree work the search
 * does once for many configurations of the same degrees), plan_report.c and the graders
 * that hold a run to the plan (Lab 9's step time: which stage paces the pipeline). Lab 8's
 * oracle list names every function here. */
#ifndef PL_PLAN_INTERNAL_H
#define PL_PLAN_INTERNAL_H

#include "plan.h"

/* The link class of each axis' groups under cfg's degrees and order. */
void pl_plan_links(const struct pl_plan_cluster *c, const struct pl_plan_config *cfg,
                   enum pl_link *link);
double pl_plan_time_links(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                          const struct pl_plan_config *cfg, const enum pl_link *link,
                          struct pl_plan_time *out);
/* The stage whose microbatch paces the pipeline: its layers, and 1 when it runs the output
 * head (the last stage, or the only one), 0 when it is the first stage. */
int pl_plan_pacing_stage(const struct pl_plan_model *m, const struct pl_plan_config *cfg,
                         int *with_head);
/* The rules that depend on the degrees and order alone (shape, inside a node, order), and
 * those that depend on the rest (batch, microbatches, memory). */
int pl_plan_check_placement(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                            const struct pl_plan_config *cfg, char *err, size_t errlen);
int pl_plan_check_step(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                       const struct pl_plan_config *cfg, int memory, char *err, size_t errlen);

#endif
