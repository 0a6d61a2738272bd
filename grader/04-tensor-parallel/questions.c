/* questions.c: Lab 4's graded questions (labs/04-tensor-parallel/questions.txt). Expected
 * values come from the lab's formulas computed here and from lib's own shard layout and
 * activation formula (tp_shard.h) and the ledger's ring volume, for one GPT-3 block: b = 1,
 * s = 2048, h = 12288, 96 heads, d_ff = 4h, t = 8; the placement question for another block
 * (b = 1, s = 4096, h = 8192) from the dgx-h100 profile and the ledger's ring time, the
 * model the bench's GPT-3 table uses. None of the answers is printed in the handout: each
 * follows from it by a step of the student's own. */
#include <stdio.h>

#include "ledger.h"
#include "model.h"
#include "questions.h"
#include "topo.h"
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

/* Per-rank bytes of a block's four ring all-reduces of bsh bf16 values on t ranks, from the
 * ledger's own ring volume. */
static double block_sent(int t)
{
    return 4 * pl_ring_bytes_sent(PL_ALL_REDUCE, t, 2.0 * Q4_B * Q4_S * Q4_H);
}

static double bytes_t8_over_t2(char *why, size_t len)
{
    double v8 = block_sent(Q4_T), v2 = block_sent(2);
    snprintf(why, len, "each rank sends 4 x 2(t-1)/t x bsh x 2 bytes per block: %.4g bytes at "
             "t = %d, %.4g at t = 2, ratio (7/8)/(1/2) = %.4g; per-rank traffic grows towards "
             "twice the t = 2 figure while the compute per rank shrinks as 1/t", v8, Q4_T, v2,
             v8 / v2);
    return v8 / v2;
}

static double allreduces_recompute(char *why, size_t len)
{
    snprintf(why, len, "the forward's 2 (g after each row-parallel linear), the same 2 again "
             "when the backward reruns the block's forward to rebuild its activations, and "
             "the backward's 2 (f before each column-parallel input): 6");
    return 6;
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

/* The placement question's block: GPT-style (d_ff = 4h), 16-bit, on t = 8; not the bench's
 * GPT-3 block, whose ratio the handout quotes. */
#define QP_B 1
#define QP_S 4096
#define QP_H 8192

/* One block forward and backward modelled serially as bench.c's big-block table does it:
 * 72bsh^2(1 + s/6h) FLOPs split t ways at the profile's rate, plus four ring all-reduces of
 * bsh 16-bit values on the link class given. */
static double serial_block(const struct pl_profile *p, enum pl_link link, int t, double *comp)
{
    double b = QP_B, s = QP_S, h = QP_H;
    *comp = 72 * b * s * h * h * (1 + s / (6 * h)) / t / p->flops;
    return *comp + 4 * pl_coll_time(PL_ALL_REDUCE, t, b * s * h * 2, p->latency[link],
                                    p->bw[link]);
}

static double across_over_in(char *why, size_t len)
{
    const struct pl_profile *p = pl_profile_find("dgx-h100");
    double comp, in = serial_block(p, PL_LINK_INTRA, Q4_T, &comp),
                  out = serial_block(p, PL_LINK_INTER, Q4_T, &comp);
    snprintf(why, len, "compute 72bsh^2(1 + s/6h)/t at %.0f TFLOP/s = %.4g ms; 4 ring "
             "all-reduces of bsh x 2 bytes, each 2(t-1) x latency + 2(t-1)/t x bytes / "
             "bandwidth: %.4g ms on NVLink (%.0f GB/s, %.0f us), %.4g ms on the network "
             "(%.0f GB/s, %.0f us); (%.4g ms)/(%.4g ms) = %.4g", p->flops / 1e12, comp * 1e3,
             (in - comp) * 1e3, p->bw[PL_LINK_INTRA] / 1e9, p->latency[PL_LINK_INTRA] * 1e6,
             (out - comp) * 1e3, p->bw[PL_LINK_INTER] / 1e9, p->latency[PL_LINK_INTER] * 1e6,
             out * 1e3, in * 1e3, out / in);
    return out / in;
}

static const struct gr_question LAB04_QUESTIONS[] = {
    {"block_bytes_t8_over_t2", bytes_t8_over_t2, 0.01, 1},
    {"allreduces_with_recompute", allreduces_recompute, 0.0, 1},
    {"block_params_per_rank", params_per_rank, 0.01, 1},
    {"block_activation_bytes", act_bytes, 0.01, 1},
    {"block_across_over_in_h8192", across_over_in, 0.01, 1},
    {"why_kv_heads_limit_t", NULL, 0, 0},
    {"why_ln_grads_equal", NULL, 0, 0},
    {"why_dropout_masks", NULL, 0, 0},
    {"across_nodes_instead", NULL, 0, 0},
    {"replicated_activation_terms", NULL, 0, 0},
};

static const struct gr_questions lab04_questions = {
    "04-tensor-parallel", LAB04_QUESTIONS,
    (int)(sizeof LAB04_QUESTIONS / sizeof LAB04_QUESTIONS[0])};
GR_REGISTER_QUESTIONS(lab04_questions);

/* Asked before: their answers were printed in the handout (sections 1, 4, 7 and 8; the
 * last, the GPT-3 block's across-nodes ratio, in section 8's bench table and text). */
static const struct gr_retired_question LAB04_RETIRED[] = {
    {"04-tensor-parallel", "block_bytes_per_rank", "block_bytes_t8_over_t2"},
    {"04-tensor-parallel", "allreduces_per_block", "allreduces_with_recompute"},
    {"04-tensor-parallel", "why_rows_then_columns", "why_kv_heads_limit_t"},
    {"04-tensor-parallel", "bias_before_g", "why_dropout_masks"},
    {"04-tensor-parallel", "placement_across_nodes", "block_across_over_in_h8192"},
};
GR_REGISTER_RETIRED_QUESTIONS(LAB04_RETIRED)
