/* tp.h: Lab 4, tensor parallelism (Megatron-LM style). The fixed surface between your tp.c
 * and the grader: do not change this file. Gradescope takes only your .c file and compiles
 * it against the original; `make grade` here uses this copy as it is, so an edit could pass
 * here and fail there. The handout is docs/labs/04-tensor-parallel.md.
 *
 * t ranks (one TP group) hold one transformer block between them: each rank keeps 1/t of
 * every matrix, as a row or a column block of the full tensor (lib/tp_shard.h draws the
 * layout), and the whole activation x [N, C] (N = B*T tokens, C = d_model) enters and
 * leaves the block replicated on every rank. Two conjugate operators mark the edges of the
 * split region between: f (copy to the TP region) where it begins, before a column-parallel
 * linear, and g (reduce from the TP region) where it ends, after a row-parallel linear.
 * Each has a forward and a backward, and with them the block's forward and backward equal
 * one device's (section 3 derives what each of the four does).
 *
 * A column-parallel linear leaves its output split along the features; a row-parallel
 * linear takes that split input and leaves the full output. The MLP and the attention (by
 * whole heads) are each one of each, in that order.
 *
 * The rules the grader enforces, every one of them:
 *   results   outputs, input gradients and replicated gradients equal the single-device
 *             block's (lib/model.h) to a relative L2 error of 1e-5 (outputs, losses) and
 *             1e-4 (gradients; weights after K AdamW steps); every shard's gradient equals
 *             the matching row or column block of the full gradient. Backward functions
 *             WRITE (=) activation gradients (dx) and ACCUMULATE (+=) parameter gradients,
 *             as model.h does: the grader hands dx over holding junk and parameter
 *             gradients holding values.
 *   groups    every collective runs on the TP group it is given, never on the world: from 4
 *             ranks up the group is smaller than the world (a TP x DP grid, each DP replica
 *             with its own data). A rank's slice is its rank in the group. tp_group works
 *             with any grid order and any number of axes; group rank = tp coordinate. It
 *             builds the group itself (pl_comm_split over world): pl_grid_comm and
 *             pl_grid_group, the grid's own groups, are what
 *             the grader checks it against, and the calls rule refuses them.
 *   traffic   from the traffic ledger, on t >= 2: a block (and each of its MLP and
 *             attention) communicates only by all-reduces of [N, C] on the group, exactly
 *             two forward and two backward for a block (one and one for the MLP or the
 *             attention), nothing else. The embedding and loss together: two all-reduces of
 *             [N, C] and at most three collectives of N floats each, each sending at most an
 *             all-gather's (t-1)N floats per rank. A training step: at most the blocks' 4L
 *             all-reduces, the embedding's and loss's as above, and for the global norm at
 *             most two collectives in all, each of at most one float per tensor (not one
 *             per tensor); and at least a block forward's two all-reduces of [N, C] per
 *             block (a rank that runs the whole model fails).
 *   compute   a row-parallel linear's output holds its replicated bias once, as
 *             nn.Linear's does (results above). A training rank does about 1/t of the
 *             single device's FLOPs, at least 95% of 1/t and at most halfway to all of
 *             them (the ledger counts the kit's ops); the block's modelled time is graded
 *             against compute/t plus four all-reduces (full marks up to 1.10x, none from
 *             1.40x) and its wall-clock time against the kit's block on B/t sequences plus
 *             four all-reduces (full marks from 0.70x of that speed): no product with a
 *             full-size or zero-padded weight, no product written as loops of your own.
 *   memory    every byte through pl_mem_alloc (lib/mem.h), host bookkeeping included: the
 *             code may not call malloc, calloc, realloc or the rest of the C allocator
 *             family, mmap or sbrk (the build lists the symbols the code calls, and a
 *             forbidden one scores 0 on every test before anything runs). Nothing the size
 *             of the full [N, V] logits is ever held, allocated or as a static or stack
 *             array a collective fills. A training rank holds at most its shard's
 *             parameters, gradients and moments, the TP activations and one step's work
 *             buffers (the handout, section 11, gives the bound), over all memory categories
 *             together; what is live after a step does not grow from step to step, and
 *             after tp_gpt_free nothing is held that was not held before tp_gpt_new.
 *   calls     communication only through lib's collectives on the group (pl_all_reduce,
 *             pl_all_gather, ...): no point-to-point (pl_send, pl_recv, pl_sendrecv and
 *             their async forms), no MPI_*, nccl*, dlopen, dlsym or syscall, no
 *             pl_grid_comm or pl_grid_group (the group is yours to build), and none of
 *             the calls that reach into the process or the kit's measurements (threads,
 *             signals, timers, atexit, the ledger's and trace's own functions).
 *   placement with the default order ("tp" leftmost) a group lies inside a node; under
 *             another order the code still computes right wherever the group lies.
 * All float arrays are op memory (device memory on the GPU build); so are tokens and
 * targets. The block is the dense model without dropout (cfg->dropout == 0). */
#ifndef LAB_TP_H
#define LAB_TP_H

#include <stddef.h>

#include "comm.h"
#include "grid.h"
#include "model.h"
#include "todo.h"     /* lab_todo(), which the stubs call */
#include "tp_shard.h"

/* ---- the group (handout section 2) ---- */

/* This rank's tensor-parallel group: the ranks that share its coordinates on every axis of
 * the grid but "tp", ordered by their tp coordinate (group rank = tp coordinate). */
struct pl_comm *tp_group(const struct pl_grid *grid, struct pl_comm *world);

/* ---- the conjugate operators (section 3), in place on n floats ----
 * f forward: x, the same on every rank, becomes the input of this rank's branch of the
 * region. f backward: dx holds the gradient that this rank's branch gives x; it leaves the
 * gradient of x itself, as one device computes it, the same on every rank. g forward: x
 * holds this rank's term of the region's output, a sum over the ranks; it leaves that output,
 * the same on every rank. g backward: dx, the gradient of that output, the same on every
 * rank, becomes the gradient of this rank's term. */

void tp_copy_to_region_forward(struct pl_comm *tp, float *x, size_t n);      /* f */
void tp_copy_to_region_backward(struct pl_comm *tp, float *dx, size_t n);
void tp_reduce_from_region_forward(struct pl_comm *tp, float *x, size_t n);  /* g */
void tp_reduce_from_region_backward(struct pl_comm *tp, float *dx, size_t n);

/* ---- parallel linear layers (section 4), nn.Linear's shapes: weight [out, in] ---- */

/* Column-parallel: x [N, C] replicated (f acts on it in place, so it is not const),
 * w [OCt, C] this rank's rows, b [OCt], y [N, OCt] this
 * rank's columns of the output, left split. */
void tp_column_linear_forward(struct pl_comm *tp, float *y, float *x, const float *w,
                              const float *b, int N, int C, int OCt);
/* dx [N, C] = the full gradient of x (the same on every rank); dw [OCt, C] and db [OCt]
 * accumulate this rank's block of the full gradients. dy [N, OCt] this rank's columns. */
void tp_column_linear_backward(struct pl_comm *tp, float *dx, float *dw, float *db,
                               const float *dy, const float *x, const float *w, int N, int C,
                               int OCt);
/* Row-parallel: x [N, Ct] this rank's columns of the input, w [OC, Ct] this rank's columns
 * of the weight, b [OC] replicated, y [N, OC] the full output on every rank. */
void tp_row_linear_forward(struct pl_comm *tp, float *y, const float *x, const float *w,
                           const float *b, int N, int Ct, int OC);
/* dy [N, OC] replicated (g's backward acts on it in place); dx [N, Ct] written, dw [OC, Ct]
 * and db [OC] accumulate. */
void tp_row_linear_backward(struct pl_comm *tp, float *dx, float *dw, float *db, float *dy,
                            const float *x, const float *w, int N, int Ct, int OC);

/* ---- the MLP and the attention of a block (sections 5 and 6) ----
 * p and g are this rank's shard and its gradient (pl_tp_block_bind); x [N, C] is the
 * sub-layer's input (the layernorm's output in a block), kept by the caller until the
 * backward; y [N, C] its output before the residual, the same on every rank. The acts
 * (pl_tp_block_acts_new) keep the split activations: a->h and a->g of the MLP, a->qkv,
 * a->att and a->y of the attention. */
void tp_mlp_forward(struct pl_comm *tp, const struct pl_model_config *c,
                    const struct pl_block_params *p, struct pl_tp_mlp_acts *a, float *x,
                    float *y);
void tp_mlp_backward(struct pl_comm *tp, const struct pl_model_config *c,
                     const struct pl_block_params *p, const struct pl_block_params *g,
                     const struct pl_tp_mlp_acts *a, const float *x, float *dy, float *dx);
void tp_attention_forward(struct pl_comm *tp, const struct pl_model_config *c,
                          const struct pl_block_params *p, struct pl_tp_attn_acts *a, float *x,
                          float *y);
void tp_attention_backward(struct pl_comm *tp, const struct pl_model_config *c,
                           const struct pl_block_params *p, const struct pl_block_params *g,
                           const struct pl_tp_attn_acts *a, const float *x, float *dy,
                           float *dx);

/* ---- the whole block (section 7) ----
 * x_mid = x + attn(ln1(x)); y = x_mid + mlp(ln2(x_mid)), as pl_block_forward, with the
 * layernorms replicated. x and y [N, C] are distinct; dy and dx [N, C] are distinct (dy
 * may be changed). */
void tp_block_forward(struct pl_comm *tp, const struct pl_model_config *c,
                      const struct pl_block_params *p, struct pl_tp_block_acts *a,
                      const float *x, float *y);
void tp_block_backward(struct pl_comm *tp, const struct pl_model_config *c,
                       const struct pl_block_params *p, const struct pl_block_params *g,
                       const struct pl_tp_block_acts *a, float *dy, float *dx);

/* ---- the vocabulary-parallel embedding and loss (sections 9 and 10) ----
 * Rank r of t holds rows [r V/t, (r+1) V/t) of the token embedding and of the LM head, the
 * ids v0 = r V/t .. v0 + V/t - 1; the position embedding is replicated. tokens and targets
 * are op memory [B*T] (ints). The kit gives the loss's per-row arithmetic on your columns
 * (lib/tp_shard.h: row maxima, sums of exponentials, the target's logit, the mean loss and
 * its gradient) and struct pl_tp_head_acts; which numbers cross ranks, and in which
 * collectives, is yours (the rules above bound them). Logits reach the hundreds, every
 * shard's first and last id occur, and a batch may have B > 1 with T < seq_len. */

/* x [N, C] = wte[tokens] + wpe[position] on every rank. wte_r [V/t, C], wpe [seq_len, C]. */
void tp_embed_forward(struct pl_comm *tp, const struct pl_model_config *c, const float *wte_r,
                      const float *wpe, const int *tokens, int B, int T, float *x);
/* dwte_r [V/t, C] and dwpe [seq_len, C] accumulate; dx [N, C] is the same on every rank. */
void tp_embed_backward(struct pl_comm *tp, const struct pl_model_config *c, float *dwte_r,
                       float *dwpe, const int *tokens, int B, int T, const float *dx);

/* The LM head as a column-parallel linear (no bias) and the mean cross-entropy of its
 * logits against targets, without the full [N, V] logits on any rank. x [N, C] replicated
 * (the final layernorm's output; f acts on it in place), w_r [V/t, C]. Returns the loss,
 * the same on every rank; a (pl_tp_head_acts_new) keeps what the backward needs. */
double tp_head_loss_forward(struct pl_comm *tp, const struct pl_model_config *c,
                            const float *w_r, struct pl_tp_head_acts *a, float *x,
                            const int *targets);
/* dx [N, C] = d(loss)/dx (written, the same on every rank); dw_r accumulates. */
void tp_head_loss_backward(struct pl_comm *tp, const struct pl_model_config *c,
                           const float *w_r, float *dw_r, const struct pl_tp_head_acts *a,
                           const float *x, const int *targets, float *dx);

/* ---- training the whole model (section 11) ----
 * One rank of a TP group trains its shard of the kit's dense GPT (no dropout): the same
 * losses and, slice by slice, the same weights as pl_model_step on one device, with
 * gradient clipping by the global norm and AdamW. */
struct tp_gpt {
    struct pl_model_config cfg;
    struct pl_adamw_config opt;
    struct pl_comm *tp;             /* the TP group (not freed by tp_gpt_free) */
    struct pl_model_layout lay;     /* the full model's layout (names, decay flags) */
    int ntensors;
    struct pl_tp_tensor *tensors;   /* pl_tp_model_tensors: where each tensor's shard lies */
    size_t numel;                   /* pl_tp_model_numel */
    float *params, *grads, *m, *v;  /* this rank's shard, each through pl_mem_alloc in its
                                       category (PL_MEM_PARAMS, _GRADS, _OPTIM), PL_DEVICE */
    int step;                       /* AdamW steps taken */
};

/* Fills every field above; params initialised with pl_tp_model_init, the rest zero. */
struct tp_gpt *tp_gpt_new(const struct pl_model_config *cfg, const struct pl_adamw_config *opt,
                          struct pl_comm *tp);
void tp_gpt_free(struct tp_gpt *m);
/* One step on B sequences of cfg.seq_len tokens (op memory, the same on every rank of the
 * group): zero the gradients, forward, backward, clip, AdamW. Returns the loss. */
double tp_gpt_step(struct tp_gpt *m, const int *tokens, const int *targets, int B);

#endif
