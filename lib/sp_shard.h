/* sp_shard.h: the trusted pieces of sequence parallelism on top of Megatron-style tensor
 * parallelism (Korthikanti et al., 2022), which the sequence-parallel lab's kit and grader
 * share: which sequence lengths a TP degree can split, where a rank's tokens lie in the
 * full [B*T, C] activation, reordering between the sequence order and the rank-major order
 * that pl_all_gather and pl_reduce_scatter use, the local compute of a TP block's attention
 * and MLP between the conjugates (no communication), the activations one rank of an SP
 * block keeps, and their size in bytes.
 *
 * Layout: rank r of t holds tokens [r T/t, (r+1) T/t) of each of the B sequences, as B*T/t
 * rows in sequence order (row b*T/t + i is token r*T/t + i of sequence b). The parameter
 * shard is Lab 4's (tp_shard.h): sequence parallelism changes where activations live, not
 * where weights do. */
#ifndef PL_SP_SHARD_H
#define PL_SP_SHARD_H

#include <stddef.h>

#include "model.h"

/* 0 when t ranks can split sequences of T tokens (t divides T; t a TP degree of c);
 * otherwise -1 and a message naming the valid values, e.g. "T=6 tokens per sequence is not
 * divisible by t=4 (choose T in {4,8,12,16} or t in {1,2})". */
int pl_sp_seq_error(const struct pl_model_config *c, int t, int T, char *err, size_t len);

/* Rank r's rows of a full [B*T, C] activation: local (B*T/t rows) = those rows of full,
 * and the reverse. Op memory. */
void pl_sp_slice(float *local, const float *full, int B, int T, int C, int t, int r);
void pl_sp_unslice(float *full, const float *local, int B, int T, int C, int t, int r);

/* pl_all_gather and pl_reduce_scatter put rank r's block r-th: [t][B*T/t][C]. These move a
 * full activation between that rank-major order and the sequence order [B][T][C]
 * (dst and src distinct; identical orders when B == 1). Op memory. */
void pl_sp_to_rank_major(float *dst, const float *seq, int B, int T, int C, int t);
void pl_sp_from_rank_major(float *seq, const float *dst, int B, int T, int C, int t);

/* ---- what one rank of an SP block keeps between forward and backward ---- */

struct pl_sp_block_acts {
    int B, T, t;              /* B sequences of T tokens; this rank holds T/t of each */
    /* attention half */
    float *x1;                /* [B*T/t, C] the half's input, this rank's tokens */
    float *ln1, *mean1, *rstd1; /* ln1 output [B*T/t, C], statistics [B*T/t] */
    float *qkv;               /* [B*T, 3C/t] every token, this rank's heads */
    float *att;               /* [B, NH/t, T, T] */
    float *heads;             /* [B*T, C/t] */
    /* MLP half */
    float *x2;
    float *ln2, *mean2, *rstd2;
    float *h, *g;             /* [B*T, F/t] fc1 output and GELU output */
};

/* Activations (PL_MEM_ACTIV, op memory). A T that t does not divide, or a t the model
 * cannot split, is a usage error (exit 2) naming the valid values. */
void pl_sp_block_acts_new(struct pl_sp_block_acts *a, const struct pl_model_config *c, int t,
                          int B, int T);
/* The same without the attention scores when scores is 0 (att left NULL): what selective
 * recomputation keeps (sp_block.h). */
void pl_sp_block_acts_new_scores(struct pl_sp_block_acts *a, const struct pl_model_config *c,
                                 int t, int B, int T, int scores);
void pl_sp_block_acts_free(struct pl_sp_block_acts *a);
/* Bytes one rank of t keeps for a block (what pl_sp_block_acts_new allocates): everything
 * is 1/t of the single device's, in fp32:
 *     4/t x (8NC + 2NF + 4N + B NH T^2)      N = B*T
 * (x, ln twice; q, k, v; heads; fc1 and GELU outputs; the statistics; the scores). */
double pl_sp_block_act_bytes(const struct pl_model_config *c, int t, int B, int T);

/* ---- the TP region's local compute (Lab 4's shard, no communication) ----
 * ln [B*T, C] the half's layernorm output of every token, p this rank's TP shard
 * (pl_tp_block_bind). The forwards fill the acts (qkv, att, heads; h, g) and write
 * partial [B*T, C]: this rank's term of the row-parallel sum, bias not added. The
 * backwards take dbranch [B*T, C], the gradient of the whole branch output, and write
 * dln [B*T, C], this rank's term of the layernorm output's gradient; they accumulate the
 * shard's gradients of the split tensors (w_qkv, b_qkv, w_proj; w_fc, b_fc, w_fc2), not
 * those of the replicated biases b_proj and b_fc2. */
void pl_sp_attn_core_forward(const struct pl_model_config *c, const struct pl_block_params *p,
                             struct pl_sp_block_acts *a, const float *ln, float *partial);
void pl_sp_attn_core_backward(const struct pl_model_config *c, const struct pl_block_params *p,
                              const struct pl_block_params *g, const struct pl_sp_block_acts *a,
                              const float *ln, const float *dbranch, float *dln);
void pl_sp_mlp_core_forward(const struct pl_model_config *c, const struct pl_block_params *p,
                            struct pl_sp_block_acts *a, const float *ln, float *partial);
void pl_sp_mlp_core_backward(const struct pl_model_config *c, const struct pl_block_params *p,
                             const struct pl_block_params *g, const struct pl_sp_block_acts *a,
                             const float *ln, const float *dbranch, float *dln);

/* db[OC] += the sum over the N rows of dy[N, OC]: the gradient of a bias added to every row
 * (pl_tp_add_bias's backward). Op memory. */
void pl_sp_bias_backward(float *db, const float *dy, int N, int OC);

#endif
