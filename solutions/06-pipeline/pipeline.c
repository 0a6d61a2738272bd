/* pipeline.c: Lab 6, pipeline parallelism -- the reference solution. The model is cut into
 * stages balanced by FLOPs; each microbatch's activation goes forward and its gradient back
 * with one tagged message per boundary; AFAB runs every forward before any backward, 1F1B
 * bounds the microbatches in flight by the stage's distance to the end of the pipeline.
 * The handout's sections 2 to 5 in C. */
#include "pipeline.h"

#include "check.h"
#include "mem.h"

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
    int first[64], last[64];
    PL_REQUIRE(pp->p <= m->cfg.n_layers + 2, "%d stages but only %d parts (L + 2): a stage "
               "would be empty", pp->p, m->cfg.n_layers + 2);
    pipe_partition(&m->cfg, pp->p, 1, m->cfg.seq_len, first, last);
    pp->first = first[pp->stage];
    pp->last = last[pp->stage];
    size_t mb = (size_t)o->microbatches;
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

static struct pl_model_ctx microbatch_ctx(const struct pipe *pp, int mb)
{
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1;
    ctx.step = (uint64_t)pp->m->adam_t + 1;
    ctx.seq0 = (int64_t)mb * pp->Bmb;
    ctx.loss_scale = 1.0f / (float)pp->opt.microbatches;
    return ctx;
}

/* Receive microbatch mb's activation (unless first), run the stage, send it on (unless
 * last). The send is asynchronous: its buffer, the stage's output, stays untouched until
 * the backward of mb waits for it. */
static void forward(struct pipe *pp, int mb)
{
    size_t n = pl_parts_boundary_numel(&pp->m->cfg, pp->Bmb, pp->T);
    size_t at = (size_t)mb * (size_t)pp->Bmb * (size_t)pp->T;
    if (pp->stage > 0) pl_recv(pp->comm, pp->inbuf, n, pp->stage - 1, PIPE_TAG_ACT(mb));
    struct pl_model_ctx ctx = microbatch_ctx(pp, mb);
    pp->loss += pl_parts_forward(pp->m, pp->first, pp->last, mb, &pp->acts[mb], &ctx,
                                 pp->tokens + at, pp->targets + at, pp->Bmb, pp->T, pp->inbuf);
    if (pp->stage < pp->p - 1)
        pp->act_sent[mb] = pl_isend(pp->comm, pp->acts[mb].x, n, pp->stage + 1,
                                    PIPE_TAG_ACT(mb));
}

/* Receive the gradient of mb's output (unless last), run the backward, send the gradient
 * of its input back (unless first), and free what the forward kept. */
static void backward(struct pipe *pp, int mb)
{
    size_t n = pl_parts_boundary_numel(&pp->m->cfg, pp->Bmb, pp->T);
    const float *dy = NULL;
    if (pp->stage < pp->p - 1) {
        pl_wait(pp->act_sent[mb]);
        pl_recv(pp->comm, pp->inbuf, n, pp->stage + 1, PIPE_TAG_GRAD(mb));
        dy = pp->inbuf;
    }
    struct pl_model_ctx ctx = microbatch_ctx(pp, mb);
    pl_parts_backward(pp->m, &pp->acts[mb], &ctx, dy);
    if (pp->stage > 0)
        pl_send(pp->comm, pp->acts[mb].x, n, pp->stage - 1, PIPE_TAG_GRAD(mb));
    pl_parts_acts_free(&pp->acts[mb]);
}

/* ---- sections 4 and 5: the schedules ---- */

static void afab(struct pipe *pp)
{
    int m = pp->opt.microbatches;
    for (int i = 0; i < m; i++) forward(pp, i);
    for (int i = 0; i < m; i++) backward(pp, i);
}

static void one_f_one_b(struct pipe *pp)
{
    int m = pp->opt.microbatches;
    int warmup = pp->p - pp->stage - 1 < m ? pp->p - pp->stage - 1 : m;
    for (int i = 0; i < warmup; i++) forward(pp, i);
    for (int i = 0; i < m - warmup; i++) {
        forward(pp, warmup + i);
        backward(pp, i);
    }
    for (int i = m - warmup; i < m; i++) backward(pp, i);
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
    pp->inbuf = pl_comm_buf_alloc(pl_parts_boundary_numel(&pp->m->cfg, pp->Bmb, pp->T),
                                  "pipe boundary");
    pl_model_zero_grad(pp->m);
    if (pp->opt.schedule == PIPE_AFAB) afab(pp);
    else one_f_one_b(pp);
    pl_comm_buf_free(pp->inbuf);
    pp->inbuf = NULL;
    return pp->stage == pp->p - 1 ? pp->loss / m : 0.0;
}
