/* questions.c: Lab 9's graded questions (labs/09-4d/questions.txt). Expected values come
 * from the formulas computed here: the grid's layout (lib/grid.h) and the planner's memory
 * model (lib/plan.h, Korthikanti et al.'s activations), for Llama 3 405B at the published
 * degrees TP 8, PP 16, DP 128 on 2048 DGX H100 nodes. */
#include <math.h>
#include <stdio.h>

#include "grid.h"
#include "plan.h"
#include "questions.h"
#include "topo.h"

static double norm_over_replicas(char *why, size_t len)
{
    const int dp = 4;
    snprintf(why, len, "after the DP sum every replica holds the same gradient g: summing the "
             "squares over %d replicas gives %d |g|^2, a norm sqrt(%d) = %.0f times the true "
             "one", dp, dp, dp, sqrt((double)dp));
    return sqrt((double)dp);
}

/* TP groups that span two nodes of 4 under dp-pp-tp with (dp, tp, pp) = (2, 2, 2). */
static double tp_groups_across(char *why, size_t len)
{
    struct pl_grid g;
    char err[128];
    if (pl_grid_init(&g, "dp-pp-tp", "tp=2,pp=2,dp=2", 8, err, sizeof err) != 0) return NAN;
    int axis = pl_grid_axis(&g, "tp"), across = 0, groups = 0;
    for (int r = 0; r < 8; r++) {
        int members[8];
        int n = pl_grid_group(&g, r, axis, members);
        if (members[0] != r) continue; /* each group once, from its first member */
        groups++;
        across += members[0] / 4 != members[n - 1] / 4;
    }
    snprintf(why, len, "dp-pp-tp: rank = dp + 2 (pp + 2 tp), so a TP group is {r, r + 4}: "
             "%d of the %d groups span nodes 0 and 1", across, groups);
    return across;
}

static double llama405b_gb(enum pl_recompute r, char *why, size_t len)
{
    const struct pl_plan_model *m = pl_plan_model_find("llama3-405b");
    const struct pl_profile *p = pl_profile_find("dgx-h100");
    if (!m || !p) return NAN;
    struct pl_plan_cluster c;
    pl_plan_cluster_from_profile(&c, p, 2048);
    struct pl_plan_config cfg;
    char err[160], text[160];
    pl_plan_config_default(&cfg);
    snprintf(text, sizeof text, "tp=8,pp=16,dp=128,micro=1,m=16,v=7,zero=1,recompute=%s",
             pl_recompute_name(r));
    if (pl_plan_config_parse(&cfg, text, err, sizeof err) != 0) return NAN;
    struct pl_plan_memory mem;
    pl_plan_memory(m, &c, &cfg, &mem);
    snprintf(why, len, "%s: parameters %.2f + gradients %.2f + optimizer %.2f (ZeRO-1 over "
             "128) + activations %.2f GB (%.3g GB a layer and microbatch, %.0f layers, %.0f "
             "microbatches in flight on the first stage) = %.2f GB", text, mem.params / 1e9,
             mem.grads / 1e9, mem.optim / 1e9, mem.activ / 1e9, mem.activ_layer / 1e9,
             mem.layers_stage, mem.in_flight, mem.total / 1e9);
    return mem.total / 1e9;
}

static double llama_none(char *why, size_t len)
{
    return llama405b_gb(PL_RECOMPUTE_NONE, why, len);
}

static double llama_selective(char *why, size_t len)
{
    return llama405b_gb(PL_RECOMPUTE_SELECTIVE, why, len);
}

static double llama_full(char *why, size_t len)
{
    return llama405b_gb(PL_RECOMPUTE_FULL, why, len);
}

static const struct gr_question LAB09_QUESTIONS[] = {
    {"norm_ratio_counted_per_replica_dp4", norm_over_replicas, 0.001, 1},
    {"tp_groups_across_nodes_dp_pp_tp", tp_groups_across, 0.0, 1},
    {"llama405b_gb_per_gpu_recompute_none", llama_none, 0.02, 1},
    {"llama405b_gb_per_gpu_recompute_selective", llama_selective, 0.02, 1},
    {"llama405b_gb_per_gpu_recompute_full", llama_full, 0.02, 1},
    {"why_dp_last", NULL, 0, 0},
};

static const struct gr_questions lab09_questions = {
    "09-4d", LAB09_QUESTIONS, (int)(sizeof LAB09_QUESTIONS / sizeof LAB09_QUESTIONS[0])};
GR_REGISTER_QUESTIONS(lab09_questions);
