/* plan_rules.h: the placement rules, one function each, so that every lab that places ranks
 * (tensor parallel, pipeline, MoE, placement) checks the same thing by the same words. Each
 * returns 0 when the rule holds, or -1 with a message in err that names the rule and the
 * numbers that break it. Pure arithmetic on a grid (grid.h) and a few counts. */
#ifndef PL_PLAN_RULES_H
#define PL_PLAN_RULES_H

#include <stddef.h>

#include "grid.h"

/* Memory per GPU may use at most this share of its HBM: the rest is for the CUDA context,
 * NCCL buffers, allocator fragmentation and workspaces the model does not count. */
#define PL_RULE_MEM_SHARE 0.90
/* Pipeline: the bubble (p-1)/(v m + p - 1) may be at most this share of the step (the rule
 * of thumb m >= 4p keeps plain 1F1B at 20% or less). */
#define PL_RULE_MAX_BUBBLE 0.25

/* The groups of axis (e.g. "tp", "ep") each sit inside one node of per_node GPUs, given the
 * grid's order: the axis' stride (product of the sizes left of it) times its size must
 * divide per_node. An axis the grid lacks holds trivially. */
int pl_rule_inside_node(const struct pl_grid *g, const char *axis, int per_node, char *err,
                        size_t errlen);
/* On a torus (torus.h: the grid's world ranks laid out by pl_torus_coords on dims), where
 * there is no node: every group of axis is a ring of neighbours, each member one link from
 * the next and the last one link from the first (pl_torus_ring_hops is 1), so each step of
 * a ring collective crosses one link that no other member of the group needs. It takes
 * "inside a node"'s place for tp: with tp leftmost, tp is 2 or the torus's first side. An
 * axis the grid lacks holds trivially, as does one of size 1. */
int pl_rule_torus_ring(const struct pl_grid *g, const char *axis, const int dims[3], char *err,
                       size_t errlen);
/* Rank order: tp innermost, then cp and ep (either order), then pp, dp outermost. Axes the
 * order lacks, or of size 1, are ignored. */
int pl_rule_order(const struct pl_grid *g, char *err, size_t errlen);
/* bytes fit PL_RULE_MEM_SHARE of hbm. */
int pl_rule_memory(double bytes, double hbm, char *err, size_t errlen);
/* data-parallel degree x microbatch x microbatches = the global batch, in sequences. */
int pl_rule_batch(int dp, int micro, int m, double batch_seqs, char *err, size_t errlen);
/* m >= p (1F1B fills the pipe), the bubble within PL_RULE_MAX_BUBBLE, and, interleaved
 * (v > 1), m a multiple of p (Megatron's schedule needs it). p = 1 holds trivially. */
int pl_rule_microbatches(int p, int m, int v, char *err, size_t errlen);
/* The pipeline bubble's share of the step: (p-1)/(v m + p - 1). */
double pl_rule_bubble(int p, int m, int v);

#endif
