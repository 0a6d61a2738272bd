/* questions.c: Lab 4's graded questions (labs/04-tensor-parallel/questions.txt). Expected
 * values come from the lab's formulas computed here and from lib's own shard layout and
 * activation formula (tp_shard.h), for one GPT-3 block: b = 1, s = 2048, h = 12288, 96
 * heads, d_ff = 4h, t = 8. */
#include <stdio.h>

#include "model.h"
#include "questions.h"
#include "tp_shard.h"

#define Q4_B 1
#define Q4_S 2048
#define Q4_H 12288
#define Q4_HEADS 96
#define Q4_T 8

static struct pl_model_config gpt3_block(void)
{
    struct pl_model_config c = pl_model_config_default();
    c.d_model = Q4_H;
    c.n_heads = Q4_HEADS;
    c.d_ff = 4 * Q4_H;
    c.seq_len = Q4_S;
    return c;
}

static double block_bytes(char *why, size_t len)
{
    double bsh = (double)Q4_B * Q4_S * Q4_H, v = 8 * bsh * (Q4_T - 1) / Q4_T * 2;
    snprintf(why, len, "4 all-reduces of the [b s, h] activation, each a ring sending "
             "2(t-1)/t of it: 8bsh(t-1)/t = 8 x %.0f x %d/%d values x 2 bytes = %.4g bytes",
             bsh, Q4_T - 1, Q4_T, v);
    return v;
}

static double allreduces(char *why, size_t len)
{
    snprintf(why, len, "forward: g after attention's output projection and after the MLP's "
             "fc2; backward: f's all-reduce before each of the two column-parallel inputs");
    return 4;
}

static double params_per_rank(char *why, size_t len)
{
    struct pl_model_config c = gpt3_block();
    double n = (double)pl_tp_block_numel(&c, Q4_T), h = Q4_H;
    snprintf(why, len, "12h^2/t of split weights + 7h/t of split biases (qkv, fc) + 6h "
             "replicated (ln1, ln2, b_proj, b_fc2) = %.0f + %.0f + %.0f = %.0f values "
             "(lib's shard layout: %.0f)", 12 * h * h / Q4_T, 7 * h / Q4_T, 6 * h,
             12 * h * h / Q4_T + 7 * h / Q4_T + 6 * h, n);
    return n;
}

static double act_bytes(char *why, size_t len)
{
    struct pl_model_config c = gpt3_block();
    double v = pl_tp_block_act_bytes(&c, Q4_T, Q4_B, Q4_S);
    snprintf(why, len, "4 bytes x (replicated 4NC + 4N: x and the two layernorm outputs with "
             "their mean and rstd; split 3NC/t + B(nh/t)T^2 + NC/t + 2NF/t) with N = bs = %d, "
             "C = %d, F = %d, nh = %d: %.4g bytes", Q4_B * Q4_S, Q4_H, 4 * Q4_H, Q4_HEADS, v);
    return v;
}

static const struct gr_question LAB04_QUESTIONS[] = {
    {"block_bytes_per_rank", block_bytes, 0.01, 1},
    {"allreduces_per_block", allreduces, 0.0, 1},
    {"block_params_per_rank", params_per_rank, 0.01, 1},
    {"block_activation_bytes", act_bytes, 0.01, 1},
    {"why_rows_then_columns", NULL, 0, 0},
    {"why_ln_grads_equal", NULL, 0, 0},
    {"bias_before_g", NULL, 0, 0},
    {"placement_across_nodes", NULL, 0, 0},
    {"replicated_activation_terms", NULL, 0, 0},
};

static const struct gr_questions lab04_questions = {
    "04-tensor-parallel", LAB04_QUESTIONS,
    (int)(sizeof LAB04_QUESTIONS / sizeof LAB04_QUESTIONS[0])};
GR_REGISTER_QUESTIONS(lab04_questions);
