/* sp.h: Lab 5, sequence parallelism on top of tensor parallelism (Korthikanti et al.). The
 * fixed surface between your sp.c and the grader: do not change this file. Gradescope takes
 * only your .c file and compiles it against the original. The handout is
 * docs/labs/05-sequence-parallel.md.
 *
 * In Lab 4 the layernorms, the dropouts and the residual adds ran on the whole [B*T, C]
 * activation on every rank of the TP group: the same work and the same stored tensors t
 * times. Here each of the t ranks keeps only its T/t tokens of every sequence outside the
 * TP region (sp_shard.h draws the layout), and two conjugate operators replace f and g:
 *
 *     gather  (entering the TP region)  forward: all-gather along T   backward: reduce-scatter
 *     scatter (leaving the TP region)   forward: reduce-scatter       backward: all-gather
 *
 * An all-reduce is a reduce-scatter followed by an all-gather, so a block moves the bytes of
 * Lab 4's four all-reduces; the backward all-gathers each stored layernorm shard once more
 * (the weight gradients need every token), the price of storing 1/t of it.
 *
 * Invariants the grader checks:
 *   - outputs and input gradients equal the single-device block's rows of this rank, with
 *     dropout on too (the masks of the same global token positions); every split tensor's
 *     gradient equals its block of the full gradient;
 *   - after sp_sync_replicated_grads every replicated tensor's gradient (ln1, ln2, and the
 *     biases b_proj and b_fc2 added after the reduce-scatter) is bitwise equal on every
 *     rank and equals the single device's;
 *   - per block, forward: 2 all-gathers and 2 reduce-scatters of [B*T, C], no all-reduce;
 *     backward: 2 reduce-scatters, 2 all-gathers, and at most 2 more re-gathering the
 *     stored layernorm shards;
 *   - the bytes held between forward and backward are pl_sp_block_act_bytes: nothing of
 *     the full sequence is kept.
 * All float arrays are op memory. Backward functions WRITE (=) activation gradients and
 * ACCUMULATE (+=) parameter gradients, as model.h does. T is always the FULL sequence
 * length; local arrays are [B*T/t, C] (B*T/t rows, this rank's tokens). */
#ifndef LAB_SP_H
#define LAB_SP_H

#include <stddef.h>

#include "comm.h"
#include "model.h"
#include "sp_shard.h"
#include "todo.h" /* lab_todo(), which the stubs call */
#include "tp_shard.h"

/* ---- the conjugates (handout section 3) ----
 * full [B*T, C] in sequence order on every rank; local [B*T/t, C] this rank's tokens. */

/* full = every rank's local rows, each in its place (all-gather along the sequence). */
void sp_gather_forward(struct pl_comm *tp, float *full, const float *local, int B, int T,
                       int C);
/* dlocal = this rank's rows of the sum over the group of dfull (reduce-scatter). */
void sp_gather_backward(struct pl_comm *tp, float *dlocal, const float *dfull, int B, int T,
                        int C);
/* local = this rank's rows of the sum over the group of full (reduce-scatter). */
void sp_scatter_forward(struct pl_comm *tp, float *local, const float *full, int B, int T,
                        int C);
/* dfull = every rank's dlocal rows, each in its place (all-gather). */
void sp_scatter_backward(struct pl_comm *tp, float *dfull, const float *dlocal, int B, int T,
                         int C);

/* ---- dropout on the local rows (section 4) ----
 * Dropout site `site` (0 attention, 1 MLP) of block `layer` on this rank's branch output
 * [B*T/t, C], in place, with exactly the mask the single device draws for the same global
 * token positions (model.h: pl_model_dropout_stream, ctx->seq0). Off (a copy) when
 * ctx->train is 0 or c->dropout is 0. The backward writes dbranch from dy. */
void sp_dropout_forward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                        int site, const struct pl_model_ctx *ctx, float *branch, int B, int T);
void sp_dropout_backward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                         int site, const struct pl_model_ctx *ctx, float *dbranch,
                         const float *dy, int B, int T);

/* ---- the block (section 5) ----
 * x_mid = x + drop(attn(ln1(x))); y = x_mid + drop(mlp(ln2(x_mid))), as pl_block_forward,
 * on this rank's rows x, y [B*T/t, C] (distinct). p and g: Lab 4's TP shard and its
 * gradient (pl_tp_block_bind). a from pl_sp_block_acts_new(c, t, B, T). The TP region's
 * compute is the kit's (pl_sp_attn_core_*, pl_sp_mlp_core_*). dy and dx distinct. */
void sp_block_forward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                      const struct pl_block_params *p, struct pl_sp_block_acts *a,
                      const struct pl_model_ctx *ctx, const float *x, float *y);
void sp_block_backward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                       const struct pl_block_params *p, const struct pl_block_params *g,
                       const struct pl_sp_block_acts *a, const struct pl_model_ctx *ctx,
                       const float *dy, float *dx);

/* ---- the replicated gradients (section 6) ----
 * After the backward, each rank's gradients of ln1.w, ln1.b, ln2.w, ln2.b, b_proj and b_fc2
 * cover its own tokens only: make them the whole gradient, the same on every rank. */
void sp_sync_replicated_grads(struct pl_comm *tp, const struct pl_model_config *c,
                              const struct pl_block_params *g);

#endif
