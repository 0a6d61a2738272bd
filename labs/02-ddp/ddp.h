/* ddp.h: Lab 2, data parallelism. The fixed surface between your ddp.c and the grader: do
 * not change this file. Gradescope takes only your .c file and compiles it against the
 * original; `make grade` here uses this copy as it is, so an edit could pass here and fail
 * there. The handout is docs/labs/02-ddp.md.
 *
 * Every rank holds a whole replica of the reference GPT (lib/model.h) and its slice of each
 * global batch. The grader drives a training step like this, on every rank at once:
 *
 *     d = ddp_new(world, model, &options);                  once
 *     for each step:
 *         for mb in 0 .. microbatches-1:
 *             ddp_forward_backward(d, tokens_mb, targets_mb, B_mb, mb, microbatches);
 *         ddp_finish_gradients(d);
 *         pl_model_update(model, &adamw);                   the reference optimizer step
 *     ddp_free(d);
 *
 * and checks that the gradients after ddp_finish_gradients, each step's loss and the
 * parameters after K steps equal the single-device reference's on the whole global batch.
 * Only the pl_ calls of comm.h move data between ranks; the grader reads what they sent
 * from the traffic ledger and when, from the trace. */
#ifndef LAB_DDP_H
#define LAB_DDP_H

#include <stddef.h>

#include "comm.h"
#include "model.h"
#include "todo.h"

enum ddp_variant {
    DDP_NAIVE,      /* after backward, one all-reduce per parameter tensor (section 4) */
    DDP_BUCKETED,   /* after backward, one all-reduce per bucket (section 5) */
    DDP_OVERLAPPED  /* during backward, each bucket's all-reduce starts as soon as its
                       gradients exist (section 6) */
};

struct ddp_options {
    enum ddp_variant variant;
    /* DDP_BUCKETED and DDP_OVERLAPPED: the most bytes of gradients one bucket holds.
     * Buckets hold whole tensors and are filled in the order backward produces gradients,
     * from the LAST tensor of the flat buffer to the first: a bucket takes the next tensor
     * while its bytes stay within bucket_bytes, otherwise that tensor starts the next
     * bucket; a tensor larger than bucket_bytes has a bucket to itself. So bucket 0 ends
     * at the end of the flat buffer, and each bucket is one contiguous range of m->grads. */
    size_t bucket_bytes;
};

/* Your state, defined in ddp.c. */
struct ddp;

/* ---- what you implement (ddp.c) ---- */

/* Called by every rank of comm with its own replica m. Makes every replica's parameters
 * equal to rank 0's (the ranks may have initialised theirs differently), plans the buckets
 * and installs the backward hook the variant needs. Section 3. */
struct ddp *ddp_new(struct pl_comm *comm, struct pl_model *m, const struct ddp_options *opt);
void ddp_free(struct ddp *d);

/* One microbatch: forward and backward of B sequences of this rank's slice (tokens and
 * targets are B x seq_len, op memory), gradients accumulated into m->grads as
 * d(mean loss of the whole step)/d(params), that is scaled by 1/microbatches. Microbatch 0
 * starts a new step (zero the gradients first). Only the LAST microbatch may communicate;
 * the others send nothing. Returns this microbatch's mean loss (unscaled). Section 7. */
double ddp_forward_backward(struct ddp *d, const int *tokens, const int *targets, int B,
                            int microbatch, int microbatches);

/* Returns when every rank's m->grads holds the mean over ranks of their gradients, so
 * that the optimizer step is the same everywhere. The overlapped variant waits here for
 * the all-reduces it started during backward. Sections 4 to 6. */
void ddp_finish_gradients(struct ddp *d);

/* The bucket plan, for the grader: how many buckets, and bucket i's range of the flat
 * gradient buffer (bucket 0 at its end, as in struct ddp_options). 0 for DDP_NAIVE. */
int ddp_num_buckets(const struct ddp *d);
void ddp_bucket_range(const struct ddp *d, int i, size_t *offset, size_t *numel);

/* ---- what the kit gives you ---- */

/* The stubs call lab_todo(what, section) (lib/todo.h): it tells the grader (and you) that
 * `what` is not written yet and where the handout explains it, then returns so the grader
 * can go on. */

#endif
