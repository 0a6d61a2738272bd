/* pipeline.c: Lab 6, your pipeline-parallel training step.
 *
 * Read docs/labs/06-pipeline.md first (sections 2 to 5, 8 and 9 derive what each function
 * below must achieve), then replace each lab_todo() call with your code. Each comment states
 * a function's contract: what it is given, what it must leave where, and what the grader
 * checks. Which messages to post when, which to wait for, what each microbatch's context
 * says and where your state lives are yours to work out (one plan, call by call, is in
 * docs/labs/06-pipeline-hints.md, for when you are stuck). Grade your work with
 *     make grade LAB=06                    every test of this lab
 *     make grade LAB=06 TEST=1F1B          the tests whose name contains "1F1B"
 *     make grade LAB=06 NP=3               only 3 stages
 * and see your schedules drawn from your own runs with `make plots LAB=06` (section 6).
 *
 * What you may call: lib/pipe_parts.h (pl_part_flops, pl_parts_forward, pl_parts_backward,
 * pl_parts_backward_b, pl_parts_backward_w, pl_parts_acts_free, pl_parts_boundary_numel),
 * the model (pl_model_zero_grad, pl_model_ctx_eval, struct pl_model_ctx, m->cfg, m->adam_t),
 * the point-to-point calls of lib/comm.h on the communicator pipe_new is given (pl_send,
 * pl_isend, pl_recv, pl_irecv, pl_wait, pl_wait_all, pl_test, pl_comm_rank, pl_comm_size,
 * pl_comm_buf_alloc, pl_comm_buf_free) and lib/mem.h (pl_mem_alloc, pl_mem_free). The grader
 * reads your order of work and every message from the trace, so every byte must go through a
 * pl_ call, and it runs them under NCCL's rules, as on GPUs (section 3.2). Every rule it
 * enforces is in pipeline.h: results, order, bubble, memory, messages, the partition and the
 * calls you may make (a call to malloc or its family, to the MPI or NCCL API, or to
 * pl_rank, pl_size or pl_comm_world fails every test before anything runs). */
#include "pipeline.h"

#include "check.h"
#include "mem.h"

/* Your state: what a step needs to keep between microbatches and from step to step is yours
 * to choose (section 3). pipe_new must leave here what pipe_stage_parts reports, and
 * pipe_free must give back all that pipe_new and the steps kept. Allocate with pl_mem_alloc
 * (zero-filled) and free with pl_mem_free; buffers that messages read or write come from
 * pl_comm_buf_alloc. */
struct pipe {
    struct pl_comm *comm;     /* the pipeline's: stage = pl_comm_rank, p = pl_comm_size */
    struct pl_model *m;
    struct pipe_options opt;
    int first, last;          /* this stage's parts (interleaved: those of its chunk 0) */
};

/* Section 2. Contract: cut the L + 2 parts (part -1 the embedding, 0..L-1 the blocks, L the
 * head) into `stages` contiguous stages, none empty, in order, stage s holding parts
 * first[s]..last[s], so that the largest stage's FLOPs (the sum of pl_part_flops(cfg, part,
 * B, T) over its parts) are as small as any contiguous cut allows. Graded exactly, for any
 * model, stage count and B x T the grader gives: on the lab's model and seven others. The
 * same answer on every rank (it is arithmetic, no messages). */
void pipe_partition(const struct pl_model_config *cfg, int stages, int B, int T, int *first,
                    int *last)
{
    lab_todo("pipe_partition", "2");
    for (int s = 0; s < stages; s++) first[s] = last[s] = PL_PART_EMBED;
}

/* Section 3. Contract: called once by every rank of comm (all models equal); returns the
 * state pipe_step works from. The stage is the rank in comm and p its size, never the
 * world's: the grader also runs two pipelines side by side whose ranks the world numbers in
 * another order. The cut below is one stage a rank, what AFAB and 1F1B run; interleaved
 * (o->virtual_stages v > 1) gives each rank v chunks of a cut into p v (pipeline.h, section
 * 8), so this function grows with your design. */
struct pipe *pipe_new(struct pl_comm *comm, struct pl_model *m, const struct pipe_options *o)
{
    struct pipe *pp = pl_mem_alloc(sizeof *pp, PL_MEM_WORK, PL_HOST, "pipe state");
    pp->comm = comm;
    pp->m = m;
    pp->opt = *o;
    int stage = pl_comm_rank(comm), p = pl_comm_size(comm), first[64], last[64];
    PL_REQUIRE(p <= m->cfg.n_layers + 2, "%d stages but only %d parts (L + 2): a stage "
               "would be empty", p, m->cfg.n_layers + 2);
    pipe_partition(&m->cfg, p, 1, m->cfg.seq_len, first, last);
    pp->first = first[stage];
    pp->last = last[stage];
    return pp;
}

/* Section 3. Contract: gives back everything pipe_new and the steps kept (the grader checks
 * that the ledger holds nothing more than before pipe_new), with no operation left in
 * flight on the communicator, which the grader frees next. */
void pipe_free(struct pipe *pp)
{
    if (!pp) return;
    pl_mem_free(pp);
}

void pipe_stage_parts(const struct pipe *pp, int *first, int *last)
{
    *first = pp->first;
    *last = pp->last;
}

/* Section 3, a helper the schedules may share: the forward of microbatch mb on this stage.
 * Contract: the stage's input is the previous stage's output of mb (stage 0: the tokens),
 * and its output reaches the next stage as one message tagged PIPE_TAG_ACT(mb) (none from
 * the last stage); its activations stay in the ledger until mb's backward is done. The
 * microbatch's context makes this forward draw the masks one device would for the same
 * sequences at the same optimizer step, and weighs its loss so that the microbatches add up
 * to the batch's mean (section 3.1). No send may block a neighbour that is itself waiting
 * to send (section 3.2). */
__attribute__((unused)) /* until a schedule calls it */
static void forward(struct pipe *pp, int mb)
{
    lab_todo("forward", "3");
}

/* Section 3, the other helper: the backward of microbatch mb. Contract: it starts from the
 * gradient of the stage's output, the next stage's message tagged PIPE_TAG_GRAD(mb) (the
 * last stage: from its loss), adds this microbatch's share to m->grads, and sends the
 * gradient of the stage's input back as one message tagged PIPE_TAG_GRAD(mb) (none from
 * stage 0); mb's activations are freed once nothing reads them any more, and no buffer a
 * message still reads or writes is reused before its handle is waited for (section 3.2). */
__attribute__((unused)) /* until a schedule calls it */
static void backward(struct pipe *pp, int mb)
{
    lab_todo("backward", "3");
}

/* Section 4. AFAB (GPipe). Contract: the order of forwards and backwards on each stage is
 * section 4's definition, graded from the trace, with every operation starting when the
 * schedule as defined starts it under uniform stage times; the activation peak is what that
 * order holds; bubble (p-1)/(m+p-1). */
static void afab(struct pipe *pp)
{
    lab_todo("afab", "4");
}

/* Section 5. 1F1B. Contract: the order on each stage is section 5's definition (a stage
 * runs its next forward exactly when one is left and it holds fewer than min(p - stage, m)
 * microbatches in flight, else its next backward), graded from the trace, with every
 * operation starting when the schedule as defined starts it under uniform stage times; the
 * activation peak is what that order holds; bubble (p-1)/(m+p-1). */
static void one_f_one_b(struct pipe *pp)
{
    lab_todo("one_f_one_b", "5");
}

/* Section 8 (the lesser part). Interleaved 1F1B. Contract: the model is cut into p * v
 * chunks (pipe_partition with p * v stages), this rank holding chunks stage, stage + p, ...;
 * the order of its chunk forwards and backwards is section 8's definition; the sender's
 * chunk j tags microbatch mb's messages as j * m + mb (pipeline.h); a chunk microbatch's
 * activations are freed once its backward and the message sent from them are done; and the
 * schedule runs under NCCL's rules without deadlock, which one blocking receive per forward
 * and per backward does not (section 8 says why). m is a multiple of p. */
static void interleaved(struct pipe *pp)
{
    lab_todo("interleaved", "8");
}

/* Section 9 (the second part). ZB-H1: each backward as two calls, B (pl_parts_backward_b,
 * what the previous stage waits for) and W (pl_parts_backward_w, the weight gradients,
 * which nobody waits for). Contract: the order of F, B and W on each stage is section 9's
 * definition, graded from the trace; the messages are 1F1B's; a microbatch's activations
 * live until its W, and every W of the step runs before pipe_step returns. */
static void zb_h1(struct pipe *pp)
{
    lab_todo("zb_h1", "9");
}

/* Sections 3 to 5, 8 and 9. Contract (pipeline.h): one training step of the batch of B
 * sequences in o->microbatches microbatches, in the order of the schedule. Afterwards
 * m->grads holds, over this stage's parts, the gradient of the step's mean loss over the
 * whole batch, exactly what one device computes (section 3.1), with no activation left and
 * nothing in flight; returns the step's mean loss on the last stage, 0 on the others. */
double pipe_step(struct pipe *pp, const int *tokens, const int *targets, int B)
{
    if (pp->opt.schedule == PIPE_AFAB) afab(pp);
    else if (pp->opt.schedule == PIPE_1F1B) one_f_one_b(pp);
    else if (pp->opt.schedule == PIPE_ZBH1) zb_h1(pp);
    else interleaved(pp);
    return 0.0;
}
