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
 * The ranks need not hold as many sequences as one another: in the uneven-batch cases
 * (handout section 7) rank r's B differs from the other ranks' and from step to step (every
 * rank holds at least one sequence a microbatch); within one rank a step's microbatches all
 * have the same B, and every rank has the same `microbatches`. The gradient is that of the
 * mean over every sequence of the step, whichever rank holds it.
 * Only the pl_ calls of comm.h move data between ranks; the grader reads what they sent
 * from the traffic ledger and when, from the trace.
 *
 * The rules the grader enforces, every one of them:
 *   results   K = 4 AdamW steps against the single-device reference on the whole global
 *             batch: each step's gradient after ddp_finish_gradients to a relative L2 error
 *             of 1e-4 per tensor, the loss to 1e-5, the parameters after K steps to 1e-4 per
 *             tensor. The replicas are equal after ddp_new, and bit for bit after every
 *             step's update: every rank holds the same gradient, bit for bit. The grader
 *             gives each rank's replica a different initialisation.
 *   groups    comm is the group of ranks that share the model, not always the world: on an
 *             even rank count the grader also runs two groups of every other rank, each its
 *             own DDP on its own batches. Rank and rank count are comm's, and every
 *             collective runs on comm. Every case's comm is split from the world and freed
 *             after ddp_free: no operation may still be in flight on it then.
 *   traffic   from the traffic ledger, per rank per step, on 2 ranks and more: exactly
 *             2(n-1)/n x 4 Psi bytes of all-reduce for the gradient and nothing else; one
 *             all-reduce call per tensor (DDP_NAIVE) or per bucket of your plan (the
 *             others), each in place over its own range of m->grads; ddp_num_buckets and
 *             ddp_bucket_range report that plan exactly, and it keeps the contract of struct
 *             ddp_options below. Beside them a step may make ONE more all-reduce, of at most
 *             16 floats outside m->grads, to exchange what the ranks hold (the count
 *             exchange), from and into comm memory (pl_comm_buf_alloc, as every
 *             collective's buffers: the GPU build's are on the device): blocking or
 *             asynchronous, in any microbatch or in ddp_finish_gradients, every step; no
 *             second one. ddp_new sends (n-1) x 4 Psi
 *             in all. A microbatch before the last sends nothing but that count exchange.
 *             A pl_barrier moves no data and is not counted.
 *   timing    no all-reduce of m->grads starts before backward has written every gradient
 *             of its range
 *             (the trace says when each started). DDP_OVERLAPPED issues each bucket's
 *             all-reduce during the hook call that makes its range final, never in a later
 *             hook nor after backward, or its overlap earns nothing; it is graded on the
 *             modelled timeline of one step on 4 ranks (the handout, section 8): the share of
 *             all-reduce time hidden behind backward, full marks from 50%, none up to 5%; a
 *             pl_test that finds an all-reduce done counts as a wait where it is called. Each
 *             variant's step time is graded against the kit's own forward, backward, AdamW
 *             and all-reduces of the same ranges run one after the other: full marks from
 *             0.7x of that speed.
 *   memory    every byte through pl_mem_alloc (lib/mem.h), host bookkeeping included: the
 *             code may not call malloc, calloc, realloc or the rest of the C allocator
 *             family, mmap, sbrk or brk (the build lists the symbols the code calls, and a
 *             forbidden one fails every test before anything runs). A step after the first
 *             keeps no pl_mem_alloc memory it did not hold before, and ddp_free returns all
 *             of it.
 *   calls     communication only through lib's calls, by their own names: no MPI_*, PMPI_*,
 *             ompi_*, nccl*, dlopen, dlsym or syscall, nor __real_* or __wrap_* (the
 *             grader's wrappers of the kit's calls), and none of the calls that reach into
 *             the process or the kit's measurements (threads, signals, timers, atexit,
 *             mprotect, fdopen and dup, the ledger's and trace's own functions). The build
 *             lists the symbols the code calls; a forbidden one fails every test before
 *             anything runs.
 * Traffic, overlap and step time count only once the variant trains correctly. */
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
    /* DDP_BUCKETED and DDP_OVERLAPPED: the most bytes of gradients one bucket holds. The
     * bucket plan is yours to design within this contract, which the grader checks on the
     * plan ddp_num_buckets and ddp_bucket_range report (and each all-reduce against it):
     *   - a bucket is a run of whole, consecutive tensors of m->layout.tensors, so one
     *     contiguous range of m->grads; together the buckets cover every tensor once;
     *   - buckets are numbered in the order backward completes them: bucket 0 ends at the
     *     end of the flat buffer, and bucket i+1 ends where bucket i begins;
     *   - a bucket holds at most bucket_bytes of gradients, unless it is a single tensor
     *     larger than that;
     *   - the plan has the fewest buckets any plan keeping the rules above can have, for
     *     this layout and bucket_bytes.
     * Several plans keep it (handout section 5); which one you build is your choice. */
    size_t bucket_bytes;
};

/* Your state, defined in ddp.c. */
struct ddp;

/* ---- what you implement (ddp.c) ---- */

/* Called by every rank of comm with its own replica m. Makes every replica's parameters
 * equal to rank 0's (the ranks may have initialised theirs differently), plans the buckets
 * and installs the backward hook the variant needs. Section 3. */
struct ddp *ddp_new(struct pl_comm *comm, struct pl_model *m, const struct ddp_options *opt);
/* Frees everything ddp_new and the steps allocated, and takes the hook off the model: the
 * model outlives the struct ddp, and its next backward must not call into freed state. */
void ddp_free(struct ddp *d);

/* One microbatch: forward and backward of B sequences of this rank's slice (tokens and
 * targets are B x seq_len, op memory); a step's microbatches all have the same B on one
 * rank, and their count is `microbatches`, the same on every rank, which differs between
 * the grader's cases. B may differ between ranks and between steps, and no rank knows the
 * others' B unless they tell it. The contract: once the step's last microbatch is done (and
 * ddp_finish_gradients has returned), m->grads holds the gradient of the step's loss, the
 * mean over every sequence of every microbatch of every rank (each sequence weighs the
 * same, whichever rank holds it), and nothing of an earlier step; m->grads is graded only
 * then, so the weighting may happen before, during or after the all-reduces. Only the LAST
 * microbatch may send the gradients; the others send nothing but the one count exchange of
 * a step the traffic rule allows, which may come in any microbatch. Returns this
 * microbatch's mean loss over its B sequences, as the model computes it, weighted by
 * nothing. The grading model has no dropout (the handout, section 2). Section 7. */
double ddp_forward_backward(struct ddp *d, const int *tokens, const int *targets, int B,
                            int microbatch, int microbatches);

/* Returns when every rank's m->grads holds the gradient of the step's loss (above), the
 * same bits on every rank, so that the optimizer step is the same everywhere. With equal
 * slices that is the mean over ranks of their gradients; with unequal ones it is not. The
 * overlapped variant waits here for the all-reduces it started during backward. Sections 4
 * to 7. */
void ddp_finish_gradients(struct ddp *d);

/* The bucket plan, for the grader: how many buckets, and bucket i's range of the flat
 * gradient buffer in floats (a plan of struct ddp_options' contract, bucket 0 at its end).
 * 0 buckets for DDP_NAIVE. */
int ddp_num_buckets(const struct ddp *d);
void ddp_bucket_range(const struct ddp *d, int i, size_t *offset, size_t *numel);

/* ---- what the kit gives you ---- */

/* The stubs call lab_todo(what, section) (lib/todo.h): it tells the grader (and you) that
 * `what` is not written yet and where the handout explains it, then returns so the grader
 * can go on. */

#endif
