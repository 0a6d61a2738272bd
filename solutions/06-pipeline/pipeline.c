/* pipeline.c: Lab 6, pipeline parallelism -- the reference solution. The model is cut into
 * stages balanced by FLOPs; each microbatch's activation goes forward and its gradient back
 * with one tagged message per boundary; AFAB runs every forward before any backward, 1F1B
 * bounds the microbatches in flight by the stage's distance to the end of the pipeline,
 * interleaved 1F1B runs it over v chunks per rank, and ZB-H1 splits each backward in two and
 * runs the weight-gradient halves where 1F1B idles. The handout's sections 2 to 5, 8 and 9
 * in C. */
#include "pipeline.h"

#include "check.h"
#include "mem.h"

struct pipe {
    struct pl_comm *comm;
    struct pl_model *m;
    struct pipe_options opt;
    int stage, p;
    int v;                        /* chunks per rank: 1, or v when interleaved */
    int first[8], last[8];        /* parts of each chunk of this rank */
    struct pl_parts_acts *acts;   /* [v * microbatches]: those in flight, chunk-major */
    struct pl_handle **act_sent;  /* [v * microbatches]: the activation's isend */
    struct pl_handle **grad_sent; /* [v * microbatches]: the gradient's isend (interleaved) */
    float *inbuf;                 /* one boundary: the activation the previous stage sent */
    float *gradbuf;               /* one boundary: the gradient the next stage sent */
    const int *tokens, *targets;
    int Bmb, T;
    double loss;                  /* sum of the microbatches' losses (last stage) */
};

/* ---- section 2: the partition ---- */

/* cost[k] of part k - 1 (the embedding at k = 0, the head at k = L + 1). */
static void part_costs(const struct pl_model_config *cfg, int B, int T, double *cost)
{
    double embed = pl_part_flops(cfg, PL_PART_EMBED, B, T);
    double block = pl_part_flops(cfg, 0, B, T);
    double head = pl_part_flops(cfg, PL_PART_HEAD(cfg), B, T);
    int n = cfg->n_layers + 2;
    for (int k = 0; k < n; k++) cost[k] = k == 0 ? embed : k == n - 1 ? head : block;
}

/* Minimise the largest stage: best[j][k] is the smallest largest stage when the first k
 * parts make j stages; cut[j][k] is where the last of those stages starts. */
void pipe_partition(const struct pl_model_config *cfg, int stages, int B, int T, int *first,
                    int *last)
{
    enum { MAXP = 64 };
    int n = cfg->n_layers + 2;
    PL_REQUIRE(stages >= 1 && stages <= n && n <= MAXP,
               "%d stages for %d parts: a stage needs at least one part (1 <= p <= L + 2 = %d)",
               stages, n, n);
    double cost[MAXP], pre[MAXP + 1] = {0}, best[MAXP + 1][MAXP + 1];
    int cut[MAXP + 1][MAXP + 1];
    part_costs(cfg, B, T, cost);
    for (int k = 0; k < n; k++) pre[k + 1] = pre[k] + cost[k];
    for (int k = 1; k <= n; k++) best[1][k] = pre[k], cut[1][k] = 0;
    for (int j = 2; j <= stages; j++)
        for (int k = j; k <= n; k++) {
            best[j][k] = 1e300;
            for (int i = j - 1; i < k; i++) {
                double worst = best[j - 1][i] > pre[k] - pre[i] ? best[j - 1][i] : pre[k] - pre[i];
                if (worst < best[j][k]) best[j][k] = worst, cut[j][k] = i;
            }
        }
    for (int j = stages, k = n; j >= 1; j--) {
        first[j - 1] = cut[j][k] - 1;
        last[j - 1] = k - 2;
        k = cut[j][k];
    }
}

/* ---- section 3: the stage and its messages ---- */

struct pipe *pipe_new(struct pl_comm *comm, struct pl_model *m, const struct pipe_options *o)
{
    PL_REQUIRE(o->microbatches >= 1, "microbatches=%d: a step needs at least one",
               o->microbatches);
    struct pipe *pp = pl_mem_alloc(sizeof *pp, PL_MEM_WORK, PL_HOST, "pipe state");
    pp->comm = comm;
    pp->m = m;
    pp->opt = *o;
    pp->stage = pl_comm_rank(comm);
    pp->p = pl_comm_size(comm);
    pp->v = o->schedule == PIPE_INTERLEAVED ? o->virtual_stages : 1;
    int chunks = pp->p * pp->v, first[64], last[64];
    PL_REQUIRE(pp->v >= 1 && pp->v <= 8, "virtual_stages=%d: choose 1 to 8", pp->v);
    PL_REQUIRE(chunks <= m->cfg.n_layers + 2, "%d stages x %d chunks but only %d parts (L + 2): "
               "a chunk would be empty", pp->p, pp->v, m->cfg.n_layers + 2);
    PL_REQUIRE(pp->v == 1 || o->microbatches % pp->p == 0, "interleaved 1F1B runs microbatches "
               "in groups of p = %d: m = %d is not a multiple", pp->p, o->microbatches);
    pipe_partition(&m->cfg, chunks, 1, m->cfg.seq_len, first, last);
    for (int j = 0; j < pp->v; j++) {
        pp->first[j] = first[j * pp->p + pp->stage];
        pp->last[j] = last[j * pp->p + pp->stage];
    }
    size_t n = (size_t)o->microbatches * (size_t)pp->v;
    pp->acts = pl_mem_alloc(n * sizeof *pp->acts, PL_MEM_WORK, PL_HOST, "pipe acts");
    pp->act_sent = pl_mem_alloc(n * sizeof *pp->act_sent, PL_MEM_WORK, PL_HOST, "pipe sends");
    pp->grad_sent = pl_mem_alloc(n * sizeof *pp->grad_sent, PL_MEM_WORK, PL_HOST, "pipe sends");
    return pp;
}

void pipe_free(struct pipe *pp)
{
    if (!pp) return;
    pl_mem_free(pp->acts);
    pl_mem_free(pp->act_sent);
    pl_mem_free(pp->grad_sent);
    pl_mem_free(pp);
}

void pipe_stage_parts(const struct pipe *pp, int *first, int *last)
{
    *first = pp->first[0];
    *last = pp->last[0];
}

static struct pl_model_ctx microbatch_ctx(const struct pipe *pp, int mb)
{
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1;
    ctx.step = (uint64_t)pp->m->adam_t + 1;
    ctx.seq0 = (int64_t)mb * pp->Bmb;
    ctx.loss_scale = 1.0f / (float)pp->opt.microbatches;
    return ctx;
}

/* The virtual stage of this rank's chunk j, and the last one of the pipeline. */
static int vstage(const struct pipe *pp, int j) { return j * pp->p + pp->stage; }
static int vlast(const struct pipe *pp) { return pp->v * pp->p - 1; }

/* The tags of what chunk j receives for microbatch mb: the message of the sender's chunk i
 * carries "microbatch" i m + mb. The stage before this one is rank stage - 1, or, for rank
 * 0's later chunks, the last rank's previous chunk; the stage after it is rank stage + 1, or,
 * for the last rank's earlier chunks, rank 0's next chunk. */
static int act_tag_in(const struct pipe *pp, int j, int mb)
{
    int from_chunk = pp->stage > 0 ? j : j - 1;
    return PIPE_TAG_ACT(from_chunk * pp->opt.microbatches + mb);
}

static int grad_tag_in(const struct pipe *pp, int j, int mb)
{
    int from_chunk = pp->stage < pp->p - 1 ? j : j + 1;
    return PIPE_TAG_GRAD(from_chunk * pp->opt.microbatches + mb);
}

/* Receive microbatch mb's activation for chunk j (unless it is the first virtual stage;
 * interleaved, the step before received it in its exchange), run the chunk, send it
 * on (unless last). The send is asynchronous: its buffer, the chunk's output, stays
 * untouched until the backward of mb (interleaved: this step's exchange) waits for it. */
static void forward(struct pipe *pp, int j, int mb)
{
    int m = pp->opt.microbatches, c = vstage(pp, j), slot = j * m + mb;
    size_t n = pl_parts_boundary_numel(&pp->m->cfg, pp->Bmb, pp->T);
    size_t at = (size_t)mb * (size_t)pp->Bmb * (size_t)pp->T;
    if (c > 0 && pp->v == 1)
        pl_recv(pp->comm, pp->inbuf, n, (pp->stage + pp->p - 1) % pp->p,
                act_tag_in(pp, j, mb));
    struct pl_model_ctx ctx = microbatch_ctx(pp, mb);
    pp->loss += pl_parts_forward(pp->m, pp->first[j], pp->last[j], mb, &pp->acts[slot], &ctx,
                                 pp->tokens + at, pp->targets + at, pp->Bmb, pp->T, pp->inbuf);
    if (c < vlast(pp))
        pp->act_sent[slot] = pl_isend(pp->comm, pp->acts[slot].x, n, (pp->stage + 1) % pp->p,
                                      PIPE_TAG_ACT(slot));
}

/* Receive the gradient of the chunk's output (unless last; interleaved, the step before
 * received it in its exchange), run the backward, send the gradient of its input back
 * (unless first), and free what the forward kept. With one chunk per rank the gradient goes
 * with a blocking send: the previous stage is waiting in its receive for exactly it.
 * Interleaved, it goes asynchronously from the activations' own buffer, so they are freed
 * once this step's exchange has waited for it (step_exchange). */
static void backward(struct pipe *pp, int j, int mb)
{
    int m = pp->opt.microbatches, c = vstage(pp, j), slot = j * m + mb;
    size_t n = pl_parts_boundary_numel(&pp->m->cfg, pp->Bmb, pp->T);
    const float *dy = c < vlast(pp) ? pp->gradbuf : NULL;
    if (c < vlast(pp) && pp->v == 1) {
        /* The gradient is received before the output's send is waited for: on NCCL a wait
         * launches every send posted so far with it, and the next stage takes the later
         * microbatches' activations only after it has sent this gradient (handout 5). */
        pl_recv(pp->comm, pp->gradbuf, n, (pp->stage + 1) % pp->p, grad_tag_in(pp, j, mb));
        pl_wait(pp->act_sent[slot]);
    }
    struct pl_model_ctx ctx = microbatch_ctx(pp, mb);
    pl_parts_backward(pp->m, &pp->acts[slot], &ctx, dy);
    int to = (pp->stage + pp->p - 1) % pp->p;
    if (c > 0 && pp->v > 1) {
        pp->grad_sent[slot] = pl_isend(pp->comm, pp->acts[slot].x, n, to, PIPE_TAG_GRAD(slot));
        return;
    }
    if (c > 0) pl_send(pp->comm, pp->acts[slot].x, n, to, PIPE_TAG_GRAD(slot));
    pl_parts_acts_free(&pp->acts[slot]);
}

/* ---- section 9: the backward split in two ---- */

/* B of microbatch mb: as backward(), but pl_parts_backward_b computes only the gradient of
 * the stage's input and keeps what W needs; the activations stay until W. */
static void backward_b(struct pipe *pp, int mb)
{
    size_t n = pl_parts_boundary_numel(&pp->m->cfg, pp->Bmb, pp->T);
    int last = pp->stage == pp->p - 1;
    if (!last) {
        pl_recv(pp->comm, pp->gradbuf, n, pp->stage + 1, PIPE_TAG_GRAD(mb));
        pl_wait(pp->act_sent[mb]);
    }
    struct pl_model_ctx ctx = microbatch_ctx(pp, mb);
    pl_parts_backward_b(pp->m, &pp->acts[mb], &ctx, last ? NULL : pp->gradbuf);
    if (pp->stage > 0) pl_send(pp->comm, pp->acts[mb].x, n, pp->stage - 1, PIPE_TAG_GRAD(mb));
}

/* W of microbatch mb: the weight gradients from what its B kept; then nothing of mb is
 * needed any more. */
static void backward_w(struct pipe *pp, int mb)
{
    pl_parts_backward_w(pp->m, &pp->acts[mb]);
    pl_parts_acts_free(&pp->acts[mb]);
}

/* ---- sections 4, 5 and 9: the schedules ---- */

static void afab(struct pipe *pp)
{
    int m = pp->opt.microbatches;
    for (int i = 0; i < m; i++) forward(pp, 0, i);
    for (int i = 0; i < m; i++) backward(pp, 0, i);
}

static void one_f_one_b(struct pipe *pp)
{
    int m = pp->opt.microbatches;
    int warmup = pp->p - pp->stage - 1 < m ? pp->p - pp->stage - 1 : m;
    for (int i = 0; i < warmup; i++) forward(pp, 0, i);
    for (int i = 0; i < m - warmup; i++) {
        forward(pp, 0, warmup + i);
        backward(pp, 0, i);
    }
    for (int i = m - warmup; i < m; i++) backward(pp, 0, i);
}

/* Slot x of stage s runs the forward of x, the B of x - (p - 1 - s) and the W of
 * x - (p - 1), those that exist: 1F1B's forwards and B's, each W p - 1 slots after its
 * forward, so no stage holds more than the p microbatches stage 0 holds under 1F1B. */
static void zb_h1(struct pipe *pp)
{
    int m = pp->opt.microbatches, p = pp->p, s = pp->stage;
    for (int x = 0; x < m + p - 1; x++) {
        int b = x - (p - 1 - s), w = x - (p - 1);
        if (x < m) forward(pp, 0, x);
        if (b >= 0 && b < m) backward_b(pp, b);
        if (w >= 0 && w < m) backward_w(pp, w);
    }
}

/* ---- section 8: interleaved 1F1B ---- */

/* The chunk and microbatch of this rank's k-th forward (or backward): microbatches go
 * through the chunks in groups of p; backwards take the chunks in reverse. */
static void interleaved_op(const struct pipe *pp, int fwd, int k, int *j, int *mb)
{
    int p = pp->p, v = pp->v;
    *j = (k % (p * v)) / p;
    if (!fwd) *j = v - 1 - *j;
    *mb = (k / (p * v)) * p + k % p;
}

/* The exchange that ends step `step` (-1: the one before the first): this step's sends
 * (the forward's activation, the backward's gradient) and the next step's receives, posted
 * together and waited for together; then the backward's activations, whose buffer the
 * gradient went from, are freed, so a rank holds no more than 1F1B's warm-up plus one. Stage s + 1 runs two fewer warm-up forwards than stage
 * s, so stage s's exchange of step t meets exactly stage s + 1's of step t - 1 and stage
 * s - 1's of step t + 1: what one sends there, the other receives there (with m = p, every
 * forward first, the exchanges meet that way forwards, and backwards the other way round).
 * On NCCL, where nothing is buffered and a wait completes every send and receive posted
 * before it, each exchange completes once the neighbours reach theirs: no deadlock. */
static void step_exchange(struct pipe *pp, int step, int warmup)
{
    int m = pp->opt.microbatches, total = pp->v * m, j, mb;
    size_t n = pl_parts_boundary_numel(&pp->m->cfg, pp->Bmb, pp->T);
    struct pl_handle *done[4] = {NULL, NULL, NULL, NULL};
    if (step >= 0 && step < total) {
        interleaved_op(pp, 1, step, &j, &mb);
        if (vstage(pp, j) < vlast(pp)) done[0] = pp->act_sent[j * m + mb];
    }
    int freed = -1;
    if (step >= warmup) {
        interleaved_op(pp, 0, step - warmup, &j, &mb);
        if (vstage(pp, j) > 0) done[1] = pp->grad_sent[j * m + mb], freed = j * m + mb;
    }
    if (step + 1 < total) {
        interleaved_op(pp, 1, step + 1, &j, &mb);
        if (vstage(pp, j) > 0)
            done[2] = pl_irecv(pp->comm, pp->inbuf, n, (pp->stage + pp->p - 1) % pp->p,
                               act_tag_in(pp, j, mb));
    }
    if (step + 1 >= warmup && step + 1 - warmup < total) {
        interleaved_op(pp, 0, step + 1 - warmup, &j, &mb);
        if (vstage(pp, j) < vlast(pp))
            done[3] = pl_irecv(pp->comm, pp->gradbuf, n, (pp->stage + 1) % pp->p,
                               grad_tag_in(pp, j, mb));
    }
    pl_wait_all(done, 4);
    if (freed >= 0) pl_parts_acts_free(&pp->acts[freed]);
}

/* Step t runs forward t (while there is one) and then backward t - warmup (once the
 * warm-up is over), and ends with its exchange. */
static void interleaved(struct pipe *pp)
{
    int m = pp->opt.microbatches, total = pp->v * m, j, mb;
    int warmup = m == pp->p ? total : (pp->p - pp->stage - 1) * 2 + (pp->v - 1) * pp->p;
    if (warmup > total) warmup = total;
    step_exchange(pp, -1, warmup);
    for (int step = 0; step < warmup + total; step++) {
        if (step < total) {
            interleaved_op(pp, 1, step, &j, &mb);
            forward(pp, j, mb);
        }
        if (step >= warmup) {
            interleaved_op(pp, 0, step - warmup, &j, &mb);
            backward(pp, j, mb);
        }
        step_exchange(pp, step, warmup);
    }
}

double pipe_step(struct pipe *pp, const int *tokens, const int *targets, int B)
{
    int m = pp->opt.microbatches;
    PL_REQUIRE(B % m == 0, "B=%d sequences do not split into %d equal microbatches", B, m);
    pp->tokens = tokens;
    pp->targets = targets;
    pp->Bmb = B / m;
    pp->T = pp->m->cfg.seq_len;
    pp->loss = 0;
    size_t n = pl_parts_boundary_numel(&pp->m->cfg, pp->Bmb, pp->T);
    pp->inbuf = pl_comm_buf_alloc(n, "pipe boundary");
    pp->gradbuf = pl_comm_buf_alloc(n, "pipe boundary gradient");
    pl_model_zero_grad(pp->m);
    if (pp->opt.schedule == PIPE_AFAB) afab(pp);
    else if (pp->opt.schedule == PIPE_1F1B) one_f_one_b(pp);
    else if (pp->opt.schedule == PIPE_ZBH1) zb_h1(pp);
    else interleaved(pp);
    pl_comm_buf_free(pp->inbuf);
    pl_comm_buf_free(pp->gradbuf);
    pp->inbuf = pp->gradbuf = NULL;
    return pp->stage == vlast(pp) % pp->p ? pp->loss / m : 0.0;
}
