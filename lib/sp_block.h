/* sp_block.h: one transformer block with tensor and sequence parallelism on a TP group, as
 * a library call: the composition of sp_shard.h's local compute with the two conjugates
 * (all-gather before the TP region, reduce-scatter after it) and dropout drawn by global
 * token position (Korthikanti et al., 2022). The sequence-parallel lab asks students to
 * write exactly this, so its grader refuses these calls (GRADER_ORACLE in its lab.mk); the
 * 4D capstone composes them with a pipeline and data parallelism.
 *
 * Layout: sp_shard.h's (rank r of t holds tokens [r T/t, (r+1) T/t) of each sequence) and
 * tp_shard.h's parameter shard. x and y are [B*T/t, C], this rank's tokens. */
#ifndef PL_SP_BLOCK_H
#define PL_SP_BLOCK_H

#include "comm.h"
#include "model.h"
#include "recompute.h"
#include "sp_shard.h"

/* y = block(x) for this rank's tokens; fills a (pl_sp_block_acts_new for B x T). ctx
 * chooses dropout masks (NULL: none); ctx->seq0 is the global index of the first sequence. */
void pl_sp_block_forward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                         const struct pl_block_params *p, struct pl_sp_block_acts *a,
                         const struct pl_model_ctx *ctx, const float *x, float *y);
/* dx = the gradient of x from dy, the gradient of y; accumulates the shard's parameter
 * gradients into g: the split tensors whole, the replicated ones (layernorms, b_proj,
 * b_fc2) as this rank's tokens' part, which pl_sp_block_sync_grads sums over the group. */
void pl_sp_block_backward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                          const struct pl_block_params *p, const struct pl_block_params *g,
                          const struct pl_sp_block_acts *a, const struct pl_model_ctx *ctx,
                          const float *dy, float *dx);
/* Sums the replicated tensors' gradients (ln1, b_proj, ln2, b_fc2) over the TP group, so
 * every rank holds the whole gradient of each: one all-reduce of the six vectors. */
void pl_sp_block_sync_grads(struct pl_comm *tp, const struct pl_model_config *c,
                            const struct pl_block_params *g);

/* ---- activation recomputation (recompute.h) on one rank of the block ----
 * What one microbatch keeps between the block's forward and its backward, for choice r:
 *   none       pl_sp_block_acts_new's every buffer;
 *   selective  all but the attention scores att [B, NH/t, T, T]: the forward writes them into
 *              scratch, the backward reruns the attention core from the saved q, k, v;
 *   full       only the block's input x1 [B*T/t, C]: the backward reruns the whole forward
 *              (its all-gathers and reduce-scatters too) before the block's backward.
 * The rerun's FLOPs count in the ledger's flops_recompute; the gradients are bit for bit
 * those of none (the same ops on the same values, the same dropout masks). */
struct pl_sp_block_saved {
    enum pl_recompute r;
    struct pl_sp_block_acts acts; /* the buffers r keeps; the others NULL */
};
void pl_sp_block_saved_new(struct pl_sp_block_saved *s, const struct pl_model_config *c, int t,
                           int B, int T, enum pl_recompute r);
void pl_sp_block_saved_free(struct pl_sp_block_saved *s);
/* Bytes one rank keeps (what pl_sp_block_saved_new allocates as activations), fp32:
 *   none       pl_sp_block_act_bytes: 4/t (8NC + 2NF + 4N + B NH T^2)
 *   selective  4/t (8NC + 2NF + 4N)
 *   full       4/t NC                                                    N = B*T */
double pl_sp_block_saved_bytes(const struct pl_model_config *c, int t, int B, int T,
                               enum pl_recompute r);
void pl_sp_block_forward_saved(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                               const struct pl_block_params *p, struct pl_sp_block_saved *s,
                               const struct pl_model_ctx *ctx, const float *x, float *y);
void pl_sp_block_backward_saved(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                                const struct pl_block_params *p, const struct pl_block_params *g,
                                const struct pl_sp_block_saved *s, const struct pl_model_ctx *ctx,
                                const float *dy, float *dx);

/* full [B*T, C] (sequence order) = every rank's local [B*T/t, C], and the reverse
 * conjugate: local = this rank's rows of the sum over ranks of full. */
void pl_sp_gather(struct pl_comm *tp, float *full, const float *local, int B, int T, int C);
void pl_sp_reduce_scatter(struct pl_comm *tp, float *local, const float *full, int B, int T,
                          int C);

#endif
