/* questions.c: Lab 8's questions in labs/08-placement/questions.txt. The numeric answers of
 * section 6 are code (placement_answers in placement.c), judged by the driver against the
 * kit's planner; the reasons behind them go here, read by a person. One number is asked here
 * too, about section 2.1's torus, computed with the kit's planner: the students' functions
 * are not graded on a torus, so it asks what the kit's model says there. */
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "plan.h"
#include "questions.h"
#include "torus.h"

/* Mixtral 8x7B on 64 chips of tpu-v4: the configuration the planner chooses there, timed on
 * the torus and on 8 DGX H100 nodes; its expert-parallel all-to-alls' exposed time per step,
 * the torus's over the switched cluster's. */
static double ep_torus_over_h100(char *why, size_t len)
{
    const struct pl_plan_model *m = pl_plan_model_find("mixtral-8x7b");
    struct pl_plan_cluster torus, dgx;
    pl_plan_cluster_from_profile(&torus, pl_profile_find("tpu-v4"), 64);
    pl_plan_cluster_from_profile(&dgx, pl_profile_find("dgx-h100"), 8);
    struct pl_plan_result *res = malloc(sizeof *res);
    PL_ASSERT(res);
    if (pl_plan_search(m, &torus, NULL, res) == 0) pl_fatal("no plan for mixtral-8x7b on tpu-v4");
    struct pl_plan_config cfg = res->best[0].cfg;
    free(res);
    struct pl_plan_time on_torus, on_dgx;
    pl_plan_time(m, &torus, &cfg, &on_torus);
    pl_plan_time(m, &dgx, &cfg, &on_dgx);
    int dims[3], ext[3], ranks[64];
    pl_plan_torus_dims(&torus, dims);
    int n = pl_plan_group(&cfg, 1u << PL_AX_EP, ranks);
    pl_torus_extent(dims, ranks, n, ext);
    char desc[160];
    double ratio = on_torus.exposed[PL_AX_EP] / on_dgx.exposed[PL_AX_EP];
    enum pl_link l = on_dgx.link[PL_AX_EP];
    snprintf(why, len, "the planner's choice on 64 chips, %s: its ep group of %d chips spans "
             "%d x %d x %d of the %d x %d x %d torus, and its all-to-alls take %.4g s a step "
             "(pl_torus_coll_time: the larger of each chip's injection over its links and the "
             "box's bisection, at %.0f GB/s a link); on dgx-h100 the group is on %s-node links "
             "(%.0f GB/s): %.4g s; %.4g / %.4g = %.3g",
             pl_plan_config_describe(&cfg, desc, sizeof desc), n, ext[0], ext[1], ext[2],
             dims[0], dims[1], dims[2], on_torus.exposed[PL_AX_EP],
             torus.bw[PL_LINK_INTRA] / 1e9, pl_link_name(l), dgx.bw[l] / 1e9,
             on_dgx.exposed[PL_AX_EP], on_torus.exposed[PL_AX_EP], on_dgx.exposed[PL_AX_EP],
             ratio);
    return ratio;
}

static const struct gr_question LAB08_QUESTIONS[] = {
    {"q1_why_zero", NULL, 0, 0},
    {"q2_why_interleave", NULL, 0, 0},
    {"dp_overlap", NULL, 0, 0},
    {"model_choices", NULL, 0, 0},
    {"ep_a2a_torus_over_h100", ep_torus_over_h100, 0.01, 1},
};

static const struct gr_questions lab08_questions = {
    "08-placement", LAB08_QUESTIONS, (int)(sizeof LAB08_QUESTIONS / sizeof LAB08_QUESTIONS[0])};
GR_REGISTER_QUESTIONS(lab08_questions);
