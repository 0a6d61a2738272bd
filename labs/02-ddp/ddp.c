/* ddp.c: Lab 2, your data-parallel training step.
 *
 * Read docs/labs/02-ddp.md first (sections 3 to 7 derive what each function below must
 * achieve), then replace each lab_todo() call with your code. Each comment states the
 * function's contract; which collective, over which range, when, and where its handles
 * live are yours to work out (one plan, call by call, is in docs/labs/02-ddp-hints.md, for
 * when you are stuck). Grade your work with
 *     make grade LAB=02                    every test of this lab
 *     make grade LAB=02 TEST=bucketed      the tests whose name contains "bucketed"
 *     make grade LAB=02 NP=2               only 2 ranks
 * and see your step's timeline with `make bench LAB=02` (handout section 8).
 *
 * What you may call: the model of lib/model.h (its forward, backward, gradient and hook
 * calls, m->layout, m->params, m->grads) and the collectives of lib/comm.h. The grader reads
 * the bytes and calls you make from the traffic ledger, so every byte between ranks must go
 * through a pl_ call, and always on d->comm: the grader also runs your DDP on a group of
 * ranks that is not the world (section 2).
 * Every rule the grader enforces is in ddp.h: results, groups, traffic, timing, memory (all
 * of it through pl_mem_alloc: a call to malloc or its family fails every test before
 * anything runs) and the calls you may make. */
#include "ddp.h"

#include "check.h"
#include "mem.h"

/* Your state. The fields below are the ones the given code reads; what the overlapped
 * variant must remember between hook calls and steps is yours to design and add. Allocate
 * with pl_mem_alloc (zero-filled) and free it in ddp_free. */
struct ddp {
    struct pl_comm *comm;
    struct pl_model *m;
    struct ddp_options opt;
    int nbuckets;
    size_t *bucket_off, *bucket_len; /* [nbuckets]; bucket 0 at the end of the flat buffer */
};

/* Section 3. Contract: afterwards every replica holds rank 0's parameters, or the ranks
 * train different models from the first step on. m->params is one flat buffer of
 * m->layout.numel floats. */
static void broadcast_params(struct ddp *d)
{
    lab_todo("broadcast_params", "3");
}

/* Section 4. Contract: afterwards every rank's m->grads holds the gradient of the mean loss
 * over the whole global batch (section 1), the same bits on every rank, one all-reduce per
 * tensor (d->m->layout.tensors). Which reduction gives that is yours to work out; clipping
 * and AdamW would hide an answer n times too large, so the grader checks the gradient
 * itself. */
static void allreduce_per_tensor(struct ddp *d)
{
    lab_todo("allreduce_per_tensor", "4");
}

/* Section 5. Contract: a plan of struct ddp_options' contract in ddp.h (the grader checks
 * its invariants through ddp_bucket_range), bucket 0 holding the LAST tensors, since
 * backward finishes them first. Fill d->nbuckets, bucket_off and bucket_len. */
static void plan_buckets(struct ddp *d)
{
    lab_todo("plan_buckets", "5");
}

/* Section 5. Contract: as allreduce_per_tensor, but one all-reduce per bucket. */
static void allreduce_buckets(struct ddp *d)
{
    lab_todo("allreduce_buckets", "5");
}

/* Section 6. The model calls this after each part's backward: the head (part n_layers)
 * first, then blocks n_layers-1 .. 0, then the embedding (part -1). When it is called,
 * every gradient from the part's first element (pl_model_part_range) to the end of the
 * flat buffer is final. Contract: each bucket's all-reduce starts as soon as its gradients
 * are final, exactly once per step, and never during a microbatch that only accumulates
 * (your state must let the hook tell which). */
static void on_backward_part(struct pl_model *m, int part, void *arg)
{
    lab_todo("on_backward_part", "6");
}

/* Section 6. Contract: on return every bucket started this step has completed (an
 * asynchronous all-reduce's result is there only once waited for), and the state is ready
 * for the next step. */
static void wait_buckets(struct ddp *d)
{
    lab_todo("wait_buckets", "6");
}

struct ddp *ddp_new(struct pl_comm *comm, struct pl_model *m, const struct ddp_options *opt)
{
    struct ddp *d = pl_mem_alloc(sizeof *d, PL_MEM_WORK, PL_HOST, "ddp state");
    d->comm = comm;
    d->m = m;
    d->opt = *opt;
    broadcast_params(d);
    if (opt->variant != DDP_NAIVE) plan_buckets(d);
    if (opt->variant == DDP_OVERLAPPED) pl_model_set_hook(m, on_backward_part, d);
    return d;
}

void ddp_free(struct ddp *d)
{
    if (!d) return;
    if (d->opt.variant == DDP_OVERLAPPED) pl_model_set_hook(d->m, NULL, NULL);
    pl_mem_free(d->bucket_off);
    pl_mem_free(d->bucket_len);
    /* and whatever else your state allocated */
    pl_mem_free(d);
}

/* Section 7. One microbatch of this rank's slice, for every variant: its forward and
 * backward, and whichever of the all-reduces above this microbatch owes (the overlapped
 * variant's start in its hook). Contract: after the last microbatch
 * m->grads holds the gradient of the step's mean loss over every sequence of every
 * microbatch of every rank, nothing of the step before; the ranks may hold different
 * numbers of sequences (section 7, uneven batches: ddp.h says what a step may send to
 * handle them). Earlier microbatches send no gradient, which is the whole point of
 * accumulating, and the overlapped variant's hook must know which backward may start its
 * buckets. How a pass runs is set by its struct pl_model_ctx (lib/model.h); the grading
 * model has no dropout (section 2). Return the microbatch's mean loss, weighted by
 * nothing. */
double ddp_forward_backward(struct ddp *d, const int *tokens, const int *targets, int B,
                            int microbatch, int microbatches)
{
    (void)d, (void)tokens, (void)targets, (void)B, (void)microbatch, (void)microbatches;
    (void)allreduce_per_tensor, (void)allreduce_buckets; /* unused until you call them */
    lab_todo("ddp_forward_backward", "7");
    return 0.0;
}

/* Sections 4 to 6. The overlapped variant waits here for its buckets (wait_buckets); the
 * others have nothing left to do. */
void ddp_finish_gradients(struct ddp *d)
{
    if (d->opt.variant == DDP_OVERLAPPED) wait_buckets(d);
}

int ddp_num_buckets(const struct ddp *d)
{
    return d->nbuckets;
}

void ddp_bucket_range(const struct ddp *d, int i, size_t *offset, size_t *numel)
{
    *offset = d->bucket_off[i];
    *numel = d->bucket_len[i];
}
