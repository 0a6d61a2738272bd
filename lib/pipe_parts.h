/* pipe_parts.h: a contiguous range of the model's parts run as one unit, per microbatch --
 * what a pipeline stage computes. A stage holds parts [first, last] of the order
 *     embedding (-1), block 0, ..., block L-1, head (L)
 * (model.h's part numbers). Its forward takes the tokens (when it holds the embedding) or
 * the activation the previous stage sent, and gives the activation for the next stage or
 * the loss (when it holds the head); its backward takes the gradient the next stage sent
 * (or starts from the loss) and gives the gradient for the previous stage. What the
 * backward needs is kept in one struct pl_parts_acts per microbatch in flight, allocated as
 * activations in the memory ledger, so a schedule's activation memory is what it holds.
 *
 * Every forward and backward also leaves a mark in the trace: an event named "pipe F 3 @2"
 * or "pipe B 3 @2" (microbatch 3, the range starting at part 2; "pipe W 3 @2" for the
 * weight-gradient half of a split backward) before its compute, so a stage's order of work can be read
 * back from its own trace and replayed with uniform stage times. */
#ifndef PL_PIPE_PARTS_H
#define PL_PIPE_PARTS_H

#include <stddef.h>

#include "model.h"

/* What one microbatch leaves on a stage between its forward and its backward. */
struct pl_parts_acts {
    int first, last;             /* the parts */
    int B, T;
    int mb;                      /* the microbatch, for the trace */
    float *x;                    /* [B*T, C] the residual stream: the stage's output after
                                    the forward, then the gradient during the backward */
    int nblocks;
    struct pl_block_acts *blocks;/* one per block the stage holds */
    struct pl_head_acts head;    /* when the stage holds the head */
    const int *tokens;           /* when it holds the embedding: the caller's, kept */
    struct pl_block_wgrad *wgrad;/* between pl_parts_backward_b and _w: one per block */
};

/* The label prefix of the marks ("pipe F 3"). */
#define PL_PIPE_MARK "pipe "

/* Usage error (exit 2) unless -1 <= first <= last <= L: a stage holds at least one part. */
void pl_parts_check(const struct pl_model_config *c, int first, int last);
/* Number of values one microbatch's activation (or its gradient) between two stages
 * holds: B*T*d_model. */
size_t pl_parts_boundary_numel(const struct pl_model_config *c, int B, int T);

/* Forward of microbatch mb (B sequences of T tokens) through parts [first, last] of m,
 * allocating a's activations. tokens: op memory, needed when first is the embedding (kept
 * until the backward); x_in: the previous stage's output [B*T, C] otherwise. When last is
 * the head, targets are used and the mean cross-entropy is returned; otherwise the output
 * is in a->x (and 0 is returned). */
double pl_parts_forward(struct pl_model *m, int first, int last, int mb,
                        struct pl_parts_acts *a, const struct pl_model_ctx *ctx,
                        const int *tokens, const int *targets, int B, int T,
                        const float *x_in);
/* Backward of the microbatch whose forward filled a: dy is the gradient of the stage's
 * output (NULL when the stage holds the head: it starts from ctx->loss_scale x the loss).
 * Parameter gradients accumulate (+=) into m->grads; the gradient of the stage's input is
 * left in a->x (unless the stage holds the embedding). The activations stay allocated
 * until pl_parts_acts_free, so a->x may still be sent. */
void pl_parts_backward(struct pl_model *m, struct pl_parts_acts *a,
                       const struct pl_model_ctx *ctx, const float *dy);
/* The same backward in two calls, for zero-bubble schedules (dense models). B computes the
 * gradient of the stage's input (left in a->x, as pl_parts_backward leaves it) and, when
 * the stage holds the head, the head's gradients; it keeps what W needs in a->wgrad
 * (pl_parts_wgrad_bytes more activations). W, later, adds the blocks' parameter gradients
 * from it and, when the stage holds the embedding, the embedding's (which are all W: nothing
 * upstream waits for them), then frees what B kept. B then W gives pl_parts_backward's
 * gradients bit for bit; the marks read "pipe B 3 @2" and "pipe W 3 @2". The acts stay
 * allocated until pl_parts_acts_free (which also frees what a W never run kept). */
void pl_parts_backward_b(struct pl_model *m, struct pl_parts_acts *a,
                         const struct pl_model_ctx *ctx, const float *dy);
void pl_parts_backward_w(struct pl_model *m, struct pl_parts_acts *a);
/* Bytes B keeps for W on a stage of parts [first, last], for B x T tokens. */
size_t pl_parts_wgrad_bytes(const struct pl_model_config *c, int first, int last, int B, int T);
void pl_parts_acts_free(struct pl_parts_acts *a);

/* Bytes of activations one microbatch of B x T holds on a stage of parts [first, last]
 * between its forward and its backward, as the memory ledger counts them. */
size_t pl_parts_acts_bytes(const struct pl_model_config *c, int first, int last, int B, int T);

/* FLOPs (the kit's count, ops.h) of one forward plus backward of `part` for B x T tokens,
 * measured by running it once on a scratch copy of the part. */
double pl_part_flops(const struct pl_model_config *c, int part, int B, int T);

#endif
