/* tp_shard.h: the trusted pieces of Megatron-style tensor parallelism labs build on: which
 * degrees t a model allows, where each rank's shard of a transformer block lies in the full
 * tensors (a row or column block), copying and initialising a shard as exactly that block,
 * the activations one rank of a TP block keeps, and a bias added over rows on either backend.
 * The tensor-parallel lab's kit and grader use it; sequence parallelism and the 4D capstone
 * reuse it.
 *
 * Rank r of t holds of block l (C = d_model, F = d_ff, NH = n_heads):
 *     ln1.w ln1.b        replicated                                      [C]
 *     attn.w_qkv         rows of q, k and v for heads [r NH/t, (r+1) NH/t):
 *                        [q_r | k_r | v_r], each C/t rows                [3C/t, C]
 *     attn.b_qkv         the same three slices                           [3C/t]
 *     attn.w_proj        columns [r C/t, (r+1) C/t)                      [C, C/t]
 *     attn.b_proj        replicated                                      [C]
 *     ln2.w ln2.b        replicated                                      [C]
 *     mlp.w_fc           rows [r F/t, (r+1) F/t)                         [F/t, C]
 *     mlp.b_fc           the same slice                                  [F/t]
 *     mlp.w_fc2          columns [r F/t, (r+1) F/t)                      [C, F/t]
 *     mlp.b_fc2          replicated                                      [C]
 * one after the other in that order (the full block's) in a flat shard of
 * pl_tp_block_numel(c, t) floats, which pl_tp_block_bind views through struct
 * pl_block_params (the same fields as a full block, the sizes above). The names are that
 * struct's fields; the model's layout (and pl_tp_tensor.name) calls the MLP's second layer
 * mlp.w_proj and mlp.b_proj. Dense blocks only. */
#ifndef PL_TP_SHARD_H
#define PL_TP_SHARD_H

#include <stddef.h>

#include "model.h"

/* 0 when t tensor-parallel ranks can split the model (t >= 1 divides n_heads, d_ff and
 * vocab); otherwise -1 and a message that lists the degrees that would work, e.g.
 * "tp=3 does not divide n_heads=4 (choose tp in {1,2,4})". */
int pl_tp_degree_error(const struct pl_model_config *c, int t, char *err, size_t len);
/* The degrees that divide n_heads, d_ff and vocab, as "1,2,4" into buf. */
const char *pl_tp_degrees(const struct pl_model_config *c, char *buf, size_t len);

/* ---- where a shard lies in the full tensors ---- */

#define PL_TP_BLOCK_TENSORS 12
#define PL_TP_MAX_RECTS 3

enum pl_tp_split {
    PL_TP_REPLICATED, /* every rank holds all of it */
    PL_TP_ROWS,       /* split along dim 0 (the output features of a column-parallel linear) */
    PL_TP_COLS        /* split along dim 1 (the input features of a row-parallel linear) */
};

struct pl_tp_tensor {
    char name[PL_NAME_LEN];  /* "h.3.attn.w_qkv": the full tensor's name in the layout */
    enum pl_tp_split split;
    int groups;              /* row groups split each on their own: 3 for q, k, v; else 1 */
    size_t rows, cols;       /* of the full tensor; a vector is rows x 1 */
    size_t full_offset;      /* in the full block (pl_model_part_range's order) */
    size_t shard_offset;     /* in the shard */
    size_t shard_numel;
    int decay;               /* AdamW weight decay applies (pl_tp_model_tensors only) */
};

/* A rows x cols block of a full matrix with its first element at (row0, col0). */
struct pl_tp_rect {
    size_t row0, col0, rows, cols;
};

/* The block's tensors with their split, for t ranks; returns PL_TP_BLOCK_TENSORS. */
int pl_tp_block_tensors(const struct pl_model_config *c, int layer, int t,
                        struct pl_tp_tensor *out);
/* The blocks of the full tensor that rank r holds, in the order they follow each other in
 * its shard (densely, row by row); returns how many (1, or 3 for q, k, v). */
int pl_tp_tensor_rects(const struct pl_tp_tensor *d, int t, int r, struct pl_tp_rect *out);
/* Floats in one rank's shard of a block. */
size_t pl_tp_block_numel(const struct pl_model_config *c, int t);
/* Views a shard of pl_tp_block_numel floats at base. */
void pl_tp_block_bind(const struct pl_model_config *c, int t, float *base,
                      struct pl_block_params *out);

/* dst (rect.rows x rect.cols, dense) = that block of src (a full matrix with full_cols
 * columns), and the reverse. Op memory. */
void pl_tp_copy_rect_out(float *dst, const float *src, size_t full_cols,
                         const struct pl_tp_rect *rect);
void pl_tp_copy_rect_in(float *dst, size_t full_cols, const float *src,
                        const struct pl_tp_rect *rect);

/* shard (pl_tp_block_numel floats) = rank r's blocks of full (one full block, the model's
 * layout), e.g. of a gradient to compare a shard's with. Op memory. */
void pl_tp_block_slice(const struct pl_model_config *c, int t, int r, const float *full,
                       float *shard);
/* The reverse: rank r's blocks of full = shard (replicated tensors too). */
void pl_tp_block_unslice(const struct pl_model_config *c, int t, int r, const float *shard,
                         float *full);
/* Initialises rank r's shard of block `layer` with the counter RNG: bit for bit the slice
 * of the full model's initial values, without ever building the full tensors. */
void pl_tp_block_init(const struct pl_model_layout *lay, int layer, int t, int r, float *shard);

/* ---- the whole model on one rank of t ----
 * Every tensor of the dense model in its flat order (model.h), each held as above: a
 * block's by the table of this header, the token embedding wte and the LM head head.w by
 * vocabulary rows [r V/t, (r+1) V/t), the position embedding and the final layernorm
 * replicated. A rank's shard is those blocks one after the other, pl_tp_model_numel
 * floats: [wte_r, wpe][block 0 shard]...[block L-1 shard][lnf.w, lnf.b, head_r]. */

/* How many tensors the model has: 5 + 12 n_layers. */
int pl_tp_model_ntensors(const struct pl_model_config *c);
/* The model's tensors with their split, offsets and decay flag, into out
 * (pl_tp_model_ntensors of them); returns that count. */
int pl_tp_model_tensors(const struct pl_model_layout *lay, int t, struct pl_tp_tensor *out);
size_t pl_tp_model_numel(const struct pl_model_layout *lay, int t);
/* shard = rank r's blocks of the full flat model (op memory), and its initial values by the
 * counter RNG (the same as slicing the full model's). */
void pl_tp_model_slice(const struct pl_model_layout *lay, int t, int r, const float *full,
                       float *shard);
void pl_tp_model_init(const struct pl_model_layout *lay, int t, int r, float *shard);

/* ---- what one rank keeps between a TP block's forward and backward ---- */

struct pl_tp_attn_acts {
    int B, T, t;
    float *x;                 /* [N, C] the half's input (replicated) */
    float *ln, *mean, *rstd;  /* ln1 output [N, C], statistics [N] */
    float *qkv;               /* [N, 3C/t]: this rank's heads, [q_r | k_r | v_r] per row */
    float *att;               /* [B, NH/t, T, T] */
    float *y;                 /* [N, C/t] this rank's heads concatenated */
};

struct pl_tp_mlp_acts {
    int B, T, t;
    float *x;
    float *ln, *mean, *rstd;  /* ln2 output [N, C], statistics [N] */
    float *h;                 /* [N, F/t] fc1 output, before GELU */
    float *g;                 /* [N, F/t] GELU output */
};

struct pl_tp_block_acts {
    struct pl_tp_attn_acts attn;
    struct pl_tp_mlp_acts mlp;
};

/* Activations (PL_MEM_ACTIV, op memory) for B sequences of T tokens on one of t ranks. */
void pl_tp_block_acts_new(struct pl_tp_block_acts *a, const struct pl_model_config *c, int t,
                          int B, int T);
void pl_tp_block_acts_free(struct pl_tp_block_acts *a);
/* Activation bytes one rank of t keeps for a block of B sequences of T tokens (what
 * pl_tp_block_acts_new allocates): the replicated terms (inputs, layernorm outputs and
 * statistics) and the split ones (q, k, v, scores, heads, fc1, GELU). */
double pl_tp_block_act_bytes(const struct pl_model_config *c, int t, int B, int T);

/* y[n, :] += b for each of the N rows (op memory), on either backend. */
void pl_tp_add_bias(float *y, const float *b, int N, int OC);

/* ---- the vocabulary-parallel embedding and cross-entropy ----
 * Rank r of t holds rows [r V/t, (r+1) V/t) of the token embedding wte and of the LM head
 * (both [V, C]); the position embedding is replicated. Its logits [N, V/t] are columns
 * [r V/t, (r+1) V/t) of the full logits, which never exist on one rank. The per-row pieces
 * of a cross-entropy split that way are below; each reads and writes op memory (on the GPU
 * build through host copies: the vocabulary of a lab model is small). */

struct pl_tp_head_acts {
    int B, T, t;
    float *logits;       /* [N, V/t] this rank's columns */
    float *shift;        /* [N] the row's maximum over the whole vocabulary */
    float *sumexp;       /* [N] sum over the whole vocabulary of exp(logit - shift) */
    float *target_logit; /* [N] the target's logit */
};

void pl_tp_head_acts_new(struct pl_tp_head_acts *a, const struct pl_model_config *c, int t,
                         int B, int T);
void pl_tp_head_acts_free(struct pl_tp_head_acts *a);

/* max[n] = the largest of logits[n, 0..V). */
void pl_tp_row_max(float *max, const float *logits, int N, int V);
/* out[n] = the largest of blocks[k*N + n] over k < nblocks. */
void pl_tp_max_of_blocks(float *out, const float *blocks, int nblocks, int N);
/* sum[n] = sum over j < V of exp(logits[n, j] - shift[n]). */
void pl_tp_row_sumexp(float *sum, const float *logits, const float *shift, int N, int V);
/* out[n] = logits[n, targets[n] - v0] when v0 <= targets[n] < v0 + V, else 0: the target's
 * logit on the one rank whose columns hold it. */
void pl_tp_pick_target(float *out, const float *logits, const int *targets, int v0, int N,
                       int V);
/* The mean over n of log(sumexp[n]) + shift[n] - target_logit[n] (in double): the mean
 * cross-entropy once the three are summed (or maximised) over the vocabulary. */
double pl_tp_xent_mean(const float *shift, const float *sumexp, const float *target_logit,
                       int N);
/* dlogits[n, j] += dloss * (exp(logits[n, j] - shift[n]) / sumexp[n] - [j == targets[n] - v0]):
 * this rank's columns of softmax minus one-hot. */
void pl_tp_xent_backward(float *dlogits, const float *logits, const float *shift,
                         const float *sumexp, const int *targets, int v0, float dloss, int N,
                         int V);

#endif
