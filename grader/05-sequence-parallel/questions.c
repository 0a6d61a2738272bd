/* questions.c: Lab 5's graded questions (labs/05-sequence-parallel/questions.txt). Expected
 * values come from the lab's formulas computed here and from lib's activation formulas
 * (tp_shard.h for Lab 4's TP block, sp_shard.h for TP + SP), for one GPT-3 block: b = 1,
 * s = 2048, h = 12288, 96 heads, d_ff = 4h. */
#include <stdio.h>

#include "gpt3.h"
#include "model.h"
#include "questions.h"
#include "sp_shard.h"
#include "tp_shard.h"

static double conjugates(char *why, size_t len)
{
    snprintf(why, len, "forward: an all-gather before attention and before the MLP, a "
             "reduce-scatter after each (2 + 2); backward: their conjugates, a reduce-scatter "
             "for each all-gather and an all-gather for each reduce-scatter (2 + 2)");
    return 8;
}

static double regather(char *why, size_t len)
{
    const int t = 8;
    double bsh = (double)L5_Q_B * L5_Q_S * L5_Q_H, v = 2 * bsh * (t - 1) / t * 2;
    snprintf(why, len, "2 all-gathers of the [b s, h] layernorm output, each a ring sending "
             "(t-1)/t of it: 2 x %.0f x 7/8 values x 2 bytes = %.4g bytes", bsh, v);
    return v;
}

static double fraction(int t, char *why, size_t len)
{
    struct pl_model_config c = l5_gpt3_block();
    double sp = pl_sp_block_act_bytes(&c, t, L5_Q_B, L5_Q_S);
    double tp = pl_tp_block_act_bytes(&c, t, L5_Q_B, L5_Q_S);
    snprintf(why, len, "TP + SP keeps 4/t (8NC + 2NF + 4N + B NH T^2) = %.4g bytes; Lab 4's TP "
             "block 4 (4NC + 4N + 3NC/t + B(NH/t)T^2 + NC/t + 2NF/t) = %.4g bytes (t = %d, "
             "N = %d, C = %d, F = %d, NH = %d): %.4f", sp, tp, t, L5_Q_B * L5_Q_S, L5_Q_H,
             4 * L5_Q_H, L5_Q_HEADS, sp / tp);
    return sp / tp;
}

static double fraction_t2(char *why, size_t len) { return fraction(2, why, len); }
static double fraction_t4(char *why, size_t len) { return fraction(4, why, len); }

/* The second part (section 8): ring attention on cp ranks, chunks of T/(2cp) tokens; the
 * causal mask leaves chunk c's queries c+1 chunks of keys. */
static double contiguous_imbalance(char *why, size_t len)
{
    const int cp = 8;
    double last = 0, sum = 0; /* blocks of Tc x Tc a rank computes, per sequence */
    for (int r = 0; r < cp; r++) {
        const double blocks = (2 * r + 1) + (2 * r + 2); /* chunks 2r and 2r+1 */
        sum += blocks;
        if (r == cp - 1) last = blocks;
    }
    snprintf(why, len, "contiguous chunks 2r and 2r+1: rank r computes (2r+1) + (2r+2) = 4r+3 "
             "blocks; the last %.0f, the mean %.0f (2cp+1, what a balanced layout gives every "
             "rank): %.4f = (4cp-1)/(2cp+1)", last, sum / cp, last / (sum / cp));
    return last / (sum / cp);
}

static double ring_forward_bytes(char *why, size_t len)
{
    const double cp = 16, T = 131072, kv = 1024, bytes = 2; /* 8 KV heads of 128, bf16 */
    double v = 2 * (cp - 1) / cp * T * kv * bytes;
    snprintf(why, len, "each rank sends its K and V of T/cp tokens on cp-1 times: 2 (cp-1)/cp "
             "x T x %.0f channels x 2 bytes = %.0f bytes per layer", kv, v);
    return v;
}

static const struct gr_question LAB05_QUESTIONS[] = {
    {"conjugate_collectives_per_block", conjugates, 0.0, 1},
    {"regather_bytes_per_block", regather, 0.01, 1},
    {"sp_over_tp_activations_t2", fraction_t2, 0.01, 1},
    {"sp_over_tp_activations_t4", fraction_t4, 0.01, 1},
    {"same_bytes", NULL, 0, 0},
    {"ln_grads_need_all_reduce", NULL, 0, 0},
    {"bias_after_scatter", NULL, 0, 0},
    {"dropout_index", NULL, 0, 0},
    {"missing_terms", NULL, 0, 0},
    {"cp_contiguous_imbalance_cp8", contiguous_imbalance, 0.01, 1},
    {"cp_ring_forward_bytes", ring_forward_bytes, 0.01, 1},
    {"cp_merge_rescale", NULL, 0, 0},
    {"cp_hidden_exchange", NULL, 0, 0},
};

static const struct gr_questions lab05_questions = {
    "05-sequence-parallel", LAB05_QUESTIONS,
    (int)(sizeof LAB05_QUESTIONS / sizeof LAB05_QUESTIONS[0])};
GR_REGISTER_QUESTIONS(lab05_questions);
