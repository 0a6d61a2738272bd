/* questions.c: Lab 7's graded questions (labs/07-moe/questions.txt). Expected values come
 * from lib's own capacity rule (pl_moe_capacity, the one the reference MoE and the grader's
 * oracle use) and from the placement of a balanced routing, computed here. */
#include <stdio.h>

#include "ledger.h"
#include "model.h"
#include "questions.h"
#include "torus.h"

static double capacity(int N, int E, int k, float cf, char *why, size_t len)
{
    int cap = pl_moe_capacity(N, E, k, cf);
    snprintf(why, len, "pl_moe_capacity: ceil(cf x N x k / E) computed in double from the float "
             "cf = %.9g, at least 1, at most N: ceil(%.9g x %d x %d / %d) = %d", (double)cf,
             (double)cf, N, k, E, cap);
    return cap;
}

static double cap_cf10(char *why, size_t len) { return capacity(40, 4, 1, 1.0f, why, len); }
static double cap_cf11(char *why, size_t len) { return capacity(40, 4, 1, 1.1f, why, len); }
static double cap_top2(char *why, size_t len) { return capacity(64, 8, 2, 1.25f, why, len); }

static double cross_node(char *why, size_t len)
{
    const int ep = 8, per_node = 4;
    double share = (double)(ep - per_node) / ep;
    snprintf(why, len, "a balanced routing sends a token to each of the ep = %d ranks equally "
             "often; %d of them are on the other node: %d/%d = %.2f", ep, ep - per_node,
             ep - per_node, ep, share);
    return share;
}

/* The all-to-all's time on the tpu-v4 torus at 4096 chips (16 x 16 x 16) over its time at 64
 * (4 x 4 x 4), bandwidth alone (no latency), from torus.h's model: the bisection of the
 * group's longest side bounds it. */
static double torus_scaling(char *why, size_t len)
{
    static int ranks[4096];
    int small[3], big[3];
    for (int i = 0; i < 4096; i++) ranks[i] = i;
    pl_torus_shape(64, small);
    pl_torus_shape(4096, big);
    double S = 1e9, bw = 50e9;
    double t64 = pl_torus_coll_time(small, PL_ALL_TO_ALL, ranks, 64, S, 0, bw);
    double t4k = pl_torus_coll_time(big, PL_ALL_TO_ALL, ranks, 4096, S, 0, bw);
    snprintf(why, len, "the cut across a side of k chips carries (k/2)^2 n S / k^2 = n S / 4 "
             "bytes each way over 2 n / k links (the side wraps): S k / (8 bw). k = 4: S / (2 "
             "bw); k = 16: 2 S / bw (above each chip's injection over its 6 links): %.4g / %.4g "
             "= %.3g", t4k, t64, t4k / t64);
    return t4k / t64;
}

static const struct gr_question LAB07_QUESTIONS[] = {
    {"capacity_n40_e4_cf10", cap_cf10, 0.0, 1},
    {"capacity_n40_e4_cf11", cap_cf11, 0.0, 1},
    {"capacity_n64_e8_top2_cf125", cap_top2, 0.0, 1},
    {"cross_node_share_ep8_2x4", cross_node, 0.01, 1},
    {"why_capacity_cf11", NULL, 0, 0},
    {"drop_order", NULL, 0, 0},
    {"hot_expert", NULL, 0, 0},
    {"aux_loss", NULL, 0, 0},
    {"expert_gradients", NULL, 0, 0},
    {"placement", NULL, 0, 0},
    {"a2a_torus_4096_over_64", torus_scaling, 0.01, 1},
};

static const struct gr_questions lab07_questions = {
    "07-moe", LAB07_QUESTIONS, (int)(sizeof LAB07_QUESTIONS / sizeof LAB07_QUESTIONS[0])};
GR_REGISTER_QUESTIONS(lab07_questions);
