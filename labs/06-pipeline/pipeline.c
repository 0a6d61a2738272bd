/* pipeline.c: Lab 6, your pipeline-parallel training step.
 *
 * Read docs/labs/06-pipeline.md first (sections 2 to 5 explain each function below), then
 * replace each lab_todo() call with your code. Grade your work with
 *     make grade LAB=06                    every test of this lab
 *     make grade LAB=06 TEST=1F1B          the tests whose name contains "1F1B"
 *     make grade LAB=06 NP=3               only 3 stages
 * and see your schedules drawn from your own runs with `make plots LAB=06` (section 6).
 *
 * What you may call: lib/pipe_parts.h (pl_part_flops, pl_parts_forward,
 * pl_parts_backward, pl_parts_backward_b, pl_parts_backward_w, pl_parts_acts_free,
 * pl_parts_boundary_numel), the model
 * (pl_model_zero_grad, pl_model_ctx_eval, m->cfg, m->adam_t) and the point-to-point calls
 * of lib/comm.h (pl_send, pl_isend, pl_recv, pl_irecv, pl_wait, pl_wait_all,
 * pl_comm_buf_alloc). The grader reads your order of work and every message from the trace,
 * so every byte must go through a pl_ call. It runs them under NCCL's rules, as on GPUs
 * (section 3.2): nothing is buffered, and a wait or a blocking call completes every send and
 * receive posted before it. */
#include "pipeline.h"

#include "check.h"
#include "mem.h"

/* Your state. The fields below are a suggestion that the solution's shape fits; add what
 * you need. Allocate with pl_mem_alloc (zero-filled) and free with pl_mem_free. */
struct pipe {
    struct pl_comm *comm;
    struct pl_model *m;
    struct pipe_options opt;
    int stage, p;
    int first, last;              /* this stage's parts */
    struct pl_parts_acts *acts;   /* [microbatches]: those in flight */
    struct pl_handle **act_sent;  /* [microbatches]: the activation's isend */
    float *inbuf;                 /* one boundary: what the neighbour sent */
    const int *tokens, *targets;
    int Bmb, T;
    double loss;                  /* sum of the microbatches' losses (last stage) */
};

/* Section 2. Cut the L + 2 parts (embedding, L blocks, head) into `stages` contiguous
 * stages so that the largest stage's FLOPs are as small as any such cut allows, for any
 * model, stage count and B x T (graded exactly). The cost of a part is
 * pl_part_flops(cfg, part, B, T). Write stage s's parts into first[s] and last[s] (part
 * numbers: -1 is the embedding, L the head). */
void pipe_partition(const struct pl_model_config *cfg, int stages, int B, int T, int *first,
                    int *last)
{
    lab_todo("pipe_partition", "2");
    for (int s = 0; s < stages; s++) first[s] = last[s] = PL_PART_EMBED;
}

struct pipe *pipe_new(struct pl_comm *comm, struct pl_model *m, const struct pipe_options *o)
{
    struct pipe *pp = pl_mem_alloc(sizeof *pp, PL_MEM_WORK, PL_HOST, "pipe state");
    pp->comm = comm;
    pp->m = m;
    pp->opt = *o;
    pp->stage = pl_comm_rank(comm);
    pp->p = pl_comm_size(comm);
    int first[64], last[64];
    PL_REQUIRE(pp->p <= m->cfg.n_layers + 2, "%d stages but only %d parts (L + 2): a stage "
               "would be empty", pp->p, m->cfg.n_layers + 2);
    pipe_partition(&m->cfg, pp->p, 1, m->cfg.seq_len, first, last);
    pp->first = first[pp->stage];
    pp->last = last[pp->stage];
    size_t mb = (size_t)(o->microbatches > 0 ? o->microbatches : 1);
    pp->acts = pl_mem_alloc(mb * sizeof *pp->acts, PL_MEM_WORK, PL_HOST, "pipe acts");
    pp->act_sent = pl_mem_alloc(mb * sizeof *pp->act_sent, PL_MEM_WORK, PL_HOST, "pipe sends");
    return pp;
}

void pipe_free(struct pipe *pp)
{
    if (!pp) return;
    pl_mem_free(pp->acts);
    pl_mem_free(pp->act_sent);
    pl_mem_free(pp);
}

void pipe_stage_parts(const struct pipe *pp, int *first, int *last)
{
    *first = pp->first;
    *last = pp->last;
}

/* Section 3. Microbatch mb of the step:
 *   - unless this is stage 0, pl_recv its activation from stage - 1 into pp->inbuf
 *     (pl_parts_boundary_numel floats, tag PIPE_TAG_ACT(mb));
 *   - run the stage: pl_parts_forward(m, first, last, mb, &pp->acts[mb], &ctx, tokens and
 *     targets of the microbatch, Bmb, T, pp->inbuf), with ctx = pl_model_ctx_eval(),
 *     ctx.train = 1, ctx.step = m->adam_t + 1, ctx.seq0 = mb * Bmb and
 *     ctx.loss_scale = 1/microbatches; add the loss it returns (non-zero on the last stage
 *     only) to pp->loss;
 *   - unless this is the last stage, send pp->acts[mb].x to stage + 1 with
 *     PIPE_TAG_ACT(mb). A blocking pl_send can deadlock once stages also send gradients
 *     back (section 3.2): pl_isend, and wait for it before the backward reuses the buffer. */
__attribute__((unused)) /* until afab or one_f_one_b calls it */
static void forward(struct pipe *pp, int mb)
{
    lab_todo("forward", "3");
}

/* Section 3. The backward of microbatch mb: unless this is the last stage, pl_recv the
 * gradient of the output from stage + 1 (PIPE_TAG_GRAD(mb)), then wait for the activation's
 * send (in that order: the wait completes every send posted before it, section 3.2);
 * pl_parts_backward(m, &pp->acts[mb], &ctx, dy) (dy NULL on the last
 * stage: it starts from the loss); unless this is stage 0, send pp->acts[mb].x (now the
 * gradient of the input) to stage - 1 with PIPE_TAG_GRAD(mb); then pl_parts_acts_free. */
__attribute__((unused)) /* until afab or one_f_one_b calls it */
static void backward(struct pipe *pp, int mb)
{
    lab_todo("backward", "3");
}

/* Section 4. AFAB (GPipe): every microbatch's forward, then every backward, both in
 * microbatch order 0, 1, ..., m-1. */
static void afab(struct pipe *pp)
{
    lab_todo("afab", "4");
}

/* Section 5. 1F1B: a warm-up of min(p - stage - 1, m) forwards, then one forward and one
 * backward at a time (forward of the next microbatch, backward of the oldest), then the
 * cool-down backwards. At most p - stage microbatches are ever in flight on a stage. */
static void one_f_one_b(struct pipe *pp)
{
    lab_todo("one_f_one_b", "5");
}

/* Section 8 (the lesser part). Interleaved 1F1B: the model is cut into p * v chunks
 * (pipe_partition with p * v stages) and this rank holds chunks stage, stage + p, ...; the
 * k-th forward of the rank is microbatch (k / (p v)) p + k % p of chunk (k / p) % v, and
 * the backwards take the chunks in reverse; a warm-up of 2(p - stage - 1) + (v - 1) p
 * forwards (all v m of them when m = p), then one forward one backward, then the
 * cool-down. Messages cross from the last rank back to rank 0 between chunks; the sender's
 * chunk j tags microbatch mb's messages as j * m + mb. Post each step's sends and receives
 * together and then wait for them all, so that every wait is matched by the neighbours'
 * (section 8): one blocking receive per forward and per backward deadlocks. */
static void interleaved(struct pipe *pp)
{
    lab_todo("interleaved", "8");
}

/* Section 9 (the second part). ZB-H1: each backward as two calls, B (pl_parts_backward_b,
 * what the previous stage waits for) and W (pl_parts_backward_w, the weight gradients,
 * which nobody waits for), with the W's where 1F1B leaves the stage idle and no stage
 * holding more microbatches than stage 0 does under 1F1B. A microbatch's activations live
 * until its W; every W of the step runs before pipe_step returns. The order of F, B and W
 * is graded against section 9's definition. */
static void zb_h1(struct pipe *pp)
{
    lab_todo("zb_h1", "9");
}

/* Sections 3 to 5. Zero the gradients once (they accumulate over the microbatches), set up
 * the microbatch size (B / microbatches) and the boundary buffer (pl_comm_buf_alloc), run
 * the schedule, free the buffer. Return the mean loss (pp->loss / m) on the last stage, 0
 * elsewhere. */
double pipe_step(struct pipe *pp, const int *tokens, const int *targets, int B)
{
    pp->tokens = tokens;
    pp->targets = targets;
    pp->Bmb = B / (pp->opt.microbatches > 0 ? pp->opt.microbatches : 1);
    pp->T = pp->m->cfg.seq_len;
    pp->loss = 0;
    if (pp->opt.schedule == PIPE_AFAB) afab(pp);
    else if (pp->opt.schedule == PIPE_1F1B) one_f_one_b(pp);
    else if (pp->opt.schedule == PIPE_ZBH1) zb_h1(pp);
    else interleaved(pp);
    return 0.0;
}
