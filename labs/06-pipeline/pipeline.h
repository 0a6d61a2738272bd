/* pipeline.h: Lab 6, pipeline parallelism. The fixed surface between your pipeline.c and
 * the grader: do not change this file. Gradescope takes only your .c file and compiles it
 * against the original. The handout is docs/labs/06-pipeline.md.
 *
 * The model's parts -- the embedding (-1), blocks 0..L-1, the head (L) -- are cut into p
 * contiguous stages, one per rank of the pipeline communicator (stage = rank). Every rank
 * holds a whole pl_model but computes, and updates, only its own stage's parts. The grader
 * drives a training step like this, on every rank at once:
 *
 *     pp = pipe_new(comm, model, &options);                          once
 *     for each step:
 *         loss = pipe_step(pp, tokens, targets, B);                  forward and backward
 *         AdamW on the flat range of this stage's parts              the grader's
 *     pipe_free(pp);
 *
 * (after the first step it frees the pipe and gives the trained model to a new one for the
 * other steps, as a run resumed from a checkpoint would: the model's m->adam_t is then
 * not 0 at pipe_new)
 *
 * and checks each step's loss (from the last stage), the gradients of every stage and the
 * parameters after K steps against the single-device reference on the same global batch;
 * the order of forwards and backwards each rank ran, read from its own trace (the marks
 * pl_parts_forward/backward leave), against the schedule's definition; the bubble of that
 * trace replayed with uniform stage times; the peak activation memory of each stage from
 * the memory ledger; and every message's peer, tag and size from the trace.
 *
 * The rules the grader enforces, every one of them:
 *   results   3 AdamW steps of a GPT with dropout on, m = 1, 2, 3, 4, 6 and 8 microbatches
 *             of a batch of 24 sequences (interleaved: the m that are multiples of p), on 2,
 *             3 and 4 stages (the hidden suite: another model, more stages): each step's
 *             loss on the last stage to a relative error of 1e-5, every stage's gradients
 *             and the parameters after the steps to a relative L2 error of 1e-4 per tensor,
 *             against the single-device reference on the whole batch with the same dropout
 *             masks (handout section 3.1).
 *   groups    comm is the pipeline's, not always the world: from 4 ranks up the grader also
 *             runs two pipelines of n/2 stages side by side, each on its own data, whose
 *             comms number their ranks in another order than the world. The stage is the
 *             rank in comm and p comm's size. comm is split from the world and freed after
 *             pipe_free: no operation may still be in flight on it then (section 3).
 *   order     the marks in each rank's own trace (microbatch, and chunk when interleaved;
 *             B and W apart under ZB-H1) against the schedule's definition: sections 4, 5,
 *             8 and 9.
 *   bubble    the trace replayed with uniform stage times (F 1, B 2, a chunk 1/v of that,
 *             free links; under ZB-H1 B 1 and W 1) against the schedule as defined, replayed
 *             the same way; AFAB and 1F1B also against (p-1)/(m+p-1), ZB-H1 with m >= p
 *             against (p-1)/(3m+p-1); under AFAB, 1F1B and ZB-H1 every operation starts when
 *             the schedule as defined starts it (section 6).
 *   memory    every byte through pl_mem_alloc (lib/mem.h) or pl_comm_buf_alloc, host
 *             bookkeeping included: the code may not call malloc, calloc, realloc or the
 *             rest of the C allocator family, mmap, sbrk or brk (the build lists the symbols
 *             the code calls, and a forbidden one fails every test before anything runs).
 *             Every buffer sent or received is ledger memory from pl_comm_buf_alloc (device
 *             memory on the GPU build), never an array in the program, static or on the
 *             stack. Per stage, from the ledger: the activation peak equal to what the
 *             schedule's order holds, each microbatch's activations of a chunk held from its
 *             forward until its backward is done (under ZB-H1 until its W, with what B keeps
 *             for W from the B to the W), within one boundary buffer; the peak of every
 *             category together at most those activations, the kit's own bookkeeping and
 *             scratch for them, and max(v m, 4) + 2 buffers of one boundary message; no
 *             activation left when pipe_step returns; no more live allocations after a step
 *             than after the one before; nothing left after pipe_free that pipe_new found
 *             free (section 6).
 *   messages  from the trace: activations only to the next stage and gradients only to the
 *             previous, one message per microbatch (and chunk) per boundary, each of
 *             B/m x T x d_model floats, tagged PIPE_TAG_ACT or PIPE_TAG_GRAD below, each tag
 *             used once per step; no collectives; every pl_isend and pl_irecv waited for.
 *             The training runs under NCCL's point-to-point rules, as on GPUs: nothing is
 *             buffered, a pl_isend or pl_irecv starts only at the next wait, test or
 *             blocking call, and a wait completes every send and receive posted before it
 *             (section 3.2); a run in which every rank waits on another is stopped as a
 *             deadlock, naming where each rank waits.
 *   partition the largest stage of pipe_partition's cut exactly as small as the best
 *             contiguous cut's by pl_part_flops (one FLOP more fails), on the lab's model and
 *             seven others, for the B x T it is given (section 2).
 *   calls     communication only through lib's point-to-point calls, by their own names: no
 *             MPI_*, PMPI_*, ompi_*, nccl*, dlopen, dlsym or syscall; not pl_rank, pl_size or
 *             pl_comm_world (debugging prints included: use pl_comm_rank(comm)), nor
 *             pl_comm_set_p2p_like_nccl (the grader sets the rules); and none of the calls
 *             that reach into the process or the kit's measurements (threads, signals,
 *             timers, atexit, the ledger's and trace's own functions).
 * Order, bubble, memory and messages count only once the schedule trains correctly. */
#ifndef LAB_PIPELINE_H
#define LAB_PIPELINE_H

#include <stddef.h>

#include "comm.h"
#include "model.h"
#include "pipe_parts.h"
#include "todo.h"

enum pipe_schedule {
    PIPE_AFAB,       /* all forwards, then all backwards (GPipe): section 4 */
    PIPE_1F1B,       /* warm-up, one forward one backward, cool-down: section 5 */
    PIPE_INTERLEAVED,/* 1F1B over v chunks per rank (Megatron-LM): section 8 */
    PIPE_ZBH1        /* zero bubble, the second part: each backward as B then W, the W's
                        where 1F1B idles (Qi et al. 2024): section 9 */
};

struct pipe_options {
    enum pipe_schedule schedule;
    int microbatches;   /* m >= 1; it divides the B of every pipe_step (interleaved: m is
                           also a multiple of p) */
    int virtual_stages; /* v: chunks per rank, PIPE_INTERLEAVED only (1 otherwise) */
};

/* Tags of the point-to-point messages: microbatch mb's activation (stage s to s+1) and its
 * gradient (s+1 back to s). Distinct per microbatch and direction: on MPI they pair the
 * messages; NCCL pairs them by order, and under its rules a message taken for another's
 * stops the run (section 3.2). Interleaved, a message sent by the sender's chunk j
 * carries the tag of "microbatch" j * m + mb (section 8). */
#define PIPE_TAG_ACT(mb) (2 * (mb))
#define PIPE_TAG_GRAD(mb) (2 * (mb) + 1)

/* Your state, defined in pipeline.c. */
struct pipe;

/* ---- what you implement (pipeline.c) ---- */

/* The partition: stage s holds parts first[s]..last[s] (arrays of `stages`), contiguous,
 * in order, none empty: first[0] = -1 (the embedding), last[stages-1] = L (the head),
 * first[s+1] = last[s] + 1. Balanced: the largest stage's compute (forward + backward
 * FLOPs of its parts for microbatches of B x T, pl_part_flops) is as small as any
 * contiguous cut allows. 1 <= stages <= L + 2. Pure arithmetic, the same on every rank.
 * Section 2. */
void pipe_partition(const struct pl_model_config *cfg, int stages, int B, int T, int *first,
                    int *last);

/* Called by every rank of comm (stage = its rank in comm, p = its size) with its model m
 * (all ranks' models start equal). Section 3. */
struct pipe *pipe_new(struct pl_comm *comm, struct pl_model *m, const struct pipe_options *o);
void pipe_free(struct pipe *pp);

/* This stage's parts, as pipe_partition cut them for this pipe. Interleaved, the parts of
 * its chunk 0; the model is cut into p v chunks and rank s holds chunks s, s + p, ... */
void pipe_stage_parts(const struct pipe *pp, int *first, int *last);

/* One training step's forward and backward of a global batch of B sequences (tokens and
 * targets: B x seq_len, op memory, the same on every rank) in o->microbatches microbatches
 * of B/m sequences each (microbatch i: sequences i*B/m .. (i+1)*B/m - 1), in the order of
 * the schedule. Afterwards m->grads holds, over this stage's parts, the gradient of the
 * step's mean loss over the whole batch, as one device computes it with the same dropout
 * masks (section 3.1), and every activation is freed. Activations go forward and gradients
 * backward with pl_send/pl_isend and pl_recv/pl_irecv on comm, one message per microbatch
 * per boundary, tagged PIPE_TAG_ACT/PIPE_TAG_GRAD, under NCCL's rules as on GPUs (the grader
 * sets them): nothing is buffered, and a wait or a blocking call completes every send and
 * receive posted before it (section 3.2). Every buffer sent or received is ledger memory
 * (a receive buffer from pl_comm_buf_alloc, freed before pipe_step returns or, if kept,
 * in pipe_free; never an array in the program). Returns the step's mean loss on the last
 * stage (which alone computes it) and 0 on the others. Sections 3 to 5, 8 and 9. */
double pipe_step(struct pipe *pp, const int *tokens, const int *targets, int B);

/* What the kit gives you besides: lab_todo(what, section) (todo.h), which the stubs call
 * so that an unwritten function fails its tests with a pointer to the handout. */

#endif
