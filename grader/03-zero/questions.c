/* questions.c: Lab 3's graded questions (labs/03-zero/questions.txt). Expected values come
 * from the ZeRO paper's formulas (formulas.h): the fewest H100-80GB devices on which the
 * model state of mixed-precision Adam (2 + 2 + 12 bytes per parameter) fits, per stage,
 * activations and buffers left out; the traffic of stage 3 against DDP; and when stage 3's
 * extra all-gather costs time, from the kit's model of a collective (ledger.h's
 * pl_coll_time) on the dgx-h100 profile (topo.c): a layer's all-gather across nodes against
 * the forward of the layer before it. */
#include <math.h>
#include <stdio.h>

#include "formulas.h"
#include "ledger.h"
#include "questions.h"
#include "topo.h"

#define Q3_HIDE_PROFILE "dgx-h100"
#define Q3_HIDE_RANKS 16         /* 2 nodes of 8: the ring crosses the network */
#define Q3_HIDE_LAYER_PARAMS 1e8 /* parameters of one layer, gathered in bf16 */
#define Q3_HIDE_BYTES_PER_PARAM 2.0
#define Q3_HIDE_TOKENS 4096.0    /* tokens per rank per step, for the exposed time */

#define Q3_DEVICE_BYTES 80e9
#define Q3_MAX_DEVICES 100000

/* The fewest devices nd on which stage's bytes per device fit, or 0 when none does (the
 * unsharded part alone is too large). */
static double fewest_devices(int stage, double psi, char *why, size_t len)
{
    for (int nd = 1; nd <= Q3_MAX_DEVICES; nd++)
        if (zero_bytes_total(zero_mixed(stage, psi, nd, ZERO_PAPER_K)) <= Q3_DEVICE_BYTES) {
            double at = zero_bytes_total(zero_mixed(stage, psi, nd, ZERO_PAPER_K));
            snprintf(why, len, "%s: %s <= 80e9 bytes with Psi = %.3g: nd = %d gives %.4g "
                     "bytes%s", zero_stage_name(stage), zero_mixed_text(stage), psi, nd, at,
                     at == Q3_DEVICE_BYTES ? ", exactly 80e9, which fits (at most 80e9, as the "
                                             "question says)" : "");
            return nd;
        }
    snprintf(why, len, "%s: %s never fits 80e9 bytes with Psi = %.3g: the unsharded part "
             "alone is %.4g bytes, so the answer is 0", zero_stage_name(stage),
             zero_mixed_text(stage), psi,
             zero_bytes_total(zero_mixed(stage, psi, Q3_MAX_DEVICES, ZERO_PAPER_K)));
    return 0;
}

static double ddp_13b(char *why, size_t len) { return fewest_devices(0, 13e9, why, len); }
static double zero1_13b(char *why, size_t len) { return fewest_devices(1, 13e9, why, len); }
static double zero2_13b(char *why, size_t len) { return fewest_devices(2, 13e9, why, len); }
static double zero3_13b(char *why, size_t len) { return fewest_devices(3, 13e9, why, len); }
static double zero2_70b(char *why, size_t len) { return fewest_devices(2, 70e9, why, len); }
static double zero3_70b(char *why, size_t len) { return fewest_devices(3, 70e9, why, len); }

static double zero3_traffic_ratio(char *why, size_t len)
{
    snprintf(why, len, "stage 3 moves %g x Psi(n-1)/n floats per step, DDP %g: parameters gathered "
             "for the forward and again for the backward", zero_comm_psi(3), zero_comm_psi(0));
    return zero_comm_psi(3) / zero_comm_psi(0);
}

/* The all-gather of one layer over the network, in seconds, and its derivation. */
static double layer_gather_s(const struct pl_profile **pp, char *why, size_t len)
{
    const struct pl_profile *p = pl_profile_find(Q3_HIDE_PROFILE);
    *pp = p;
    double S = Q3_HIDE_LAYER_PARAMS * Q3_HIDE_BYTES_PER_PARAM;
    double t = pl_coll_time(PL_ALL_GATHER, Q3_HIDE_RANKS, S, p->latency[PL_LINK_INTER],
                            p->bw[PL_LINK_INTER]);
    snprintf(why, len, "all-gather of S = %.3g bytes on n = %d: (n-1) x %.3g s + (n-1)/n x "
             "S / %.3g B/s = %.4g s", S, Q3_HIDE_RANKS, p->latency[PL_LINK_INTER],
             p->bw[PL_LINK_INTER], t);
    return t;
}

/* Below this many tokens per rank, a layer's forward (2 FLOPs a parameter a token) ends
 * before the next layer's all-gather: prefetch cannot hide it, and stage 3 is slower than
 * stage 2 by what stays exposed. */
static double hiding_tokens(char *why, size_t len)
{
    const struct pl_profile *p;
    char ag[200];
    double t = layer_gather_s(&p, ag, sizeof ag);
    double tokens = t * p->flops / (2.0 * Q3_HIDE_LAYER_PARAMS);
    snprintf(why, len, "%s; the forward of a layer takes 2 x %.3g x tokens / %.3g FLOP/s, "
             "equal at %.0f tokens", ag, Q3_HIDE_LAYER_PARAMS, p->flops, tokens);
    return tokens;
}

/* Milliseconds of each layer's all-gather left exposed at Q3_HIDE_TOKENS tokens per rank. */
static double exposed_ms(char *why, size_t len)
{
    const struct pl_profile *p;
    char ag[200];
    double t = layer_gather_s(&p, ag, sizeof ag);
    double fwd = 2.0 * Q3_HIDE_LAYER_PARAMS * Q3_HIDE_TOKENS / p->flops;
    snprintf(why, len, "%s; the forward at %.0f tokens takes %.4g s; exposed: the difference",
             ag, Q3_HIDE_TOKENS, fwd);
    return 1e3 * fmax(0.0, t - fwd);
}

static const struct gr_question L3_QUESTIONS[] = {
    {"devices_ddp_13b", ddp_13b, 0.0, 1},
    {"devices_zero1_13b", zero1_13b, 0.0, 1},
    {"devices_zero2_13b", zero2_13b, 0.0, 1},
    {"devices_zero3_13b", zero3_13b, 0.0, 1},
    {"devices_zero2_70b", zero2_70b, 0.0, 1},
    {"devices_zero3_70b", zero3_70b, 0.0, 1},
    {"zero3_traffic_over_ddp", zero3_traffic_ratio, 0.01, 1},
    {"zero3_hiding_tokens", hiding_tokens, 0.02, 1},
    {"zero3_exposed_ms_per_layer", exposed_ms, 0.02, 1},
    {"when_zero3_costs_more", NULL, 0, 0},
};

static const struct gr_questions l3_questions = {
    "03-zero", L3_QUESTIONS, (int)(sizeof L3_QUESTIONS / sizeof L3_QUESTIONS[0])};
GR_REGISTER_QUESTIONS(l3_questions);
