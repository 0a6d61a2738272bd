/* shard_state.c: the sharded state and the kit's sharded step (shard_state.h). */
#include "shard_state.h"

#include <string.h>

#include "check.h"
#include "mem.h"
#include "ops.h"
#include "rng.h"

void pl_shard_range(size_t numel, int n, int r, size_t *offset, size_t *count)
{
    size_t a = (size_t)((unsigned __int128)numel * (unsigned)r / (unsigned)n);
    size_t b = (size_t)((unsigned __int128)numel * (unsigned)(r + 1) / (unsigned)n);
    *offset = a;
    *count = b - a;
}

uint64_t pl_shard_run_id(uint64_t seed)
{
    return pl_mix64(seed ^ 0x72756e2d69642d31ULL);
}

struct pl_shard_run pl_shard_run_default(uint64_t seed)
{
    struct pl_shard_run r;
    memset(&r, 0, sizeof r);
    r.cfg = pl_model_config_default();
    r.cfg.vocab = 62;
    r.cfg.d_model = 15;
    r.cfg.n_layers = 2;
    r.cfg.n_heads = 3;
    r.cfg.d_ff = 37;
    r.cfg.seq_len = 8;
    r.cfg.dropout = 0.1f;
    r.cfg.seed = pl_mix64(seed ^ 0x696e6974ULL);
    r.opt = pl_adamw_config_default();
    r.opt.lr = 3e-3f;
    r.opt.grad_clip = 0.0f;
    r.batch = 24;
    r.seed = seed;
    r.run_id = pl_shard_run_id(seed);
    return r;
}

/* A stream a model can learn: runs of four consecutive tokens from a drawn start. */
int pl_shard_token(const struct pl_shard_run *run, int64_t pos)
{
    uint64_t base = pl_rng_u64(run->seed, 0x64617461ULL, (uint64_t)(pos / 4));
    return (int)((base + (uint64_t)(pos % 4)) % (uint64_t)run->cfg.vocab);
}

static float *op_floats(size_t n, enum pl_mem_cat cat, const char *label)
{
    return pl_mem_alloc((n ? n : 1) * sizeof(float), cat, PL_DEVICE, label);
}

struct pl_shard_state *pl_shard_state_new(const struct pl_shard_run *run, struct pl_comm *comm)
{
    int n = pl_comm_size(comm);
    if (run->batch < 1 || run->batch % n) {
        char buf[256];
        pl_usage_error("the sharded step runs %d sequences per step, one microbatch each, so "
                       "it runs on a rank count that divides %d (one of %s), not %d",
                       run->batch, run->batch, pl_divisors(run->batch, buf, sizeof buf), n);
    }
    if (n > PL_SHARD_MAX_RANKS || run->batch > PL_SHARD_MAX_BATCH ||
        run->cfg.seq_len > PL_SHARD_MAX_SEQ)
        pl_usage_error("the sharded step runs on at most %d ranks, %d sequences of at most %d "
                       "tokens; this run asks for %d ranks, %d sequences of %d tokens",
                       PL_SHARD_MAX_RANKS, PL_SHARD_MAX_BATCH, PL_SHARD_MAX_SEQ, n, run->batch,
                       run->cfg.seq_len);
    struct pl_shard_state *s = pl_mem_alloc(sizeof *s, PL_MEM_WORK, PL_HOST, "shard state");
    s->run = *run;
    s->comm = comm;
    s->n = n;
    s->rank = pl_comm_rank(comm);
    s->model = pl_model_new(&run->cfg, PL_MODEL_PARAMS | PL_MODEL_GRADS);
    s->numel = s->model->layout.numel;
    pl_shard_range(s->numel, n, s->rank, &s->offset, &s->count);
    s->step = 0;
    s->rng = pl_mix64(run->seed ^ 0x726e672d73746174ULL);
    /* past 2^32 tokens, where a long run's stream is: a position kept in 32 bits wraps */
    s->data_pos = (int64_t)((1ULL << 32) + pl_rng_u64(run->seed, 0x706f73ULL, 0) % 100000u);
    s->params = op_floats(s->count, PL_MEM_PARAMS, "shard params");
    s->adam_m = op_floats(s->count, PL_MEM_OPTIM, "shard adam_m");
    s->adam_v = op_floats(s->count, PL_MEM_OPTIM, "shard adam_v");
    pl_model_init_flat(&s->model->layout, s->offset, s->count, s->params);
    size_t per = (size_t)(run->batch / n);
    s->send = op_floats(per * s->numel, PL_MEM_GRADS, "microbatch gradients out");
    s->recv = op_floats((size_t)run->batch * s->count, PL_MEM_GRADS, "microbatch gradients in");
    s->tokens = pl_mem_alloc((size_t)run->cfg.seq_len * sizeof(int), PL_MEM_WORK, PL_DEVICE,
                             "shard tokens");
    s->targets = pl_mem_alloc((size_t)run->cfg.seq_len * sizeof(int), PL_MEM_WORK, PL_DEVICE,
                              "shard targets");
    s->loss_mine = op_floats(per, PL_MEM_WORK, "microbatch losses");
    s->loss_all = op_floats((size_t)run->batch, PL_MEM_WORK, "batch losses");
    return s;
}

void pl_shard_state_free(struct pl_shard_state *s)
{
    if (!s) return;
    pl_model_free(s->model);
    pl_mem_free(s->params);
    pl_mem_free(s->adam_m);
    pl_mem_free(s->adam_v);
    pl_mem_free(s->send);
    pl_mem_free(s->recv);
    pl_mem_free(s->tokens);
    pl_mem_free(s->targets);
    pl_mem_free(s->loss_mine);
    pl_mem_free(s->loss_all);
    pl_mem_free(s);
}

/* Every rank's shard into the full copy: one all-to-all-v whose send blocks are all the
 * rank's own shard. */
static void gather_params(struct pl_shard_state *s, size_t *cnt, size_t *dsp, size_t *scnt,
                          size_t *sdsp)
{
    for (int j = 0; j < s->n; j++) {
        pl_shard_range(s->numel, s->n, j, &dsp[j], &cnt[j]);
        scnt[j] = s->count;
        sdsp[j] = 0;
    }
    pl_all_to_all_v(s->comm, s->params, scnt, sdsp, s->model->params, cnt, dsp);
}

double pl_shard_step(struct pl_shard_state *s)
{
    PL_REQUIRE(!s->on_host, "pl_shard_step on pl_shard_host_copy's copy: it cannot train");
    int n = s->n, T = s->run.cfg.seq_len, K = s->run.batch, per = K / n;
    size_t counts[4][PL_SHARD_MAX_RANKS];
    size_t *cnt = counts[0], *dsp = counts[1], *scnt = counts[2], *sdsp = counts[3];
    gather_params(s, cnt, dsp, scnt, sdsp);

    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1;
    ctx.seed = s->rng;
    ctx.step = (uint64_t)s->step + 1;
    ctx.loss_scale = 1.0f / (float)K;
    float losses[PL_SHARD_MAX_BATCH];
    int tok[PL_SHARD_MAX_SEQ + 1];
    for (int i = 0; i < per; i++) {
        int k = s->rank * per + i;
        int64_t p0 = s->data_pos + (int64_t)k * T;
        for (int t = 0; t <= T; t++) tok[t] = pl_shard_token(&s->run, p0 + t);
        pl_to_device(s->tokens, tok, (size_t)T * sizeof(int));
        pl_to_device(s->targets, tok + 1, (size_t)T * sizeof(int));
        ctx.seq0 = k;
        pl_model_zero_grad(s->model);
        losses[i] = (float)pl_model_forward(s->model, s->tokens, s->targets, 1, &ctx);
        pl_model_backward(s->model, &ctx);
        /* microbatch i's slice for owner j: block j holds per slices of cnt[j] */
        for (int j = 0; j < n; j++)
            pl_copy(s->send + (size_t)per * dsp[j] + (size_t)i * cnt[j],
                    s->model->grads + dsp[j], cnt[j]);
    }
    for (int j = 0; j < n; j++) {
        scnt[j] = (size_t)per * cnt[j];
        sdsp[j] = (size_t)per * dsp[j];
    }
    size_t rcnt[PL_SHARD_MAX_RANKS], rdsp[PL_SHARD_MAX_RANKS];
    for (int j = 0; j < n; j++) {
        rcnt[j] = (size_t)per * s->count;
        rdsp[j] = (size_t)j * per * s->count;
    }
    pl_all_to_all_v(s->comm, s->send, scnt, sdsp, s->recv, rcnt, rdsp);
    /* the recv holds microbatch k's slice at k * count: sum them in microbatch order */
    float *g = s->recv;
    for (int k = 1; k < K; k++) pl_accumulate(g, s->recv + (size_t)k * s->count, s->count);
    pl_model_adamw_flat(&s->model->layout, s->offset, s->count, s->params, g, s->adam_m,
                        s->adam_v, (int)s->step + 1, &s->run.opt);

    float all[PL_SHARD_MAX_BATCH];
    pl_to_device(s->loss_mine, losses, (size_t)per * sizeof(float));
    pl_all_gather(s->comm, s->loss_mine, s->loss_all, (size_t)per);
    pl_to_host(all, s->loss_all, (size_t)K * sizeof(float));
    double loss = 0;
    for (int k = 0; k < K; k++) loss += all[k];
    s->step++;
    s->rng = pl_mix64(s->rng);
    s->data_pos += (int64_t)K * T;
    pl_ops_wait();
    return loss / K;
}

struct pl_shard_state *pl_shard_host_copy(const struct pl_shard_state *s)
{
    struct pl_shard_state *h = pl_mem_alloc(sizeof *h, PL_MEM_WORK, PL_HOST, "shard host copy");
    *h = *s;
    h->comm = NULL, h->model = NULL, h->send = h->recv = NULL;
    h->tokens = h->targets = NULL, h->loss_mine = h->loss_all = NULL;
    const size_t b = s->count * sizeof(float);
    h->params = pl_mem_alloc(b, PL_MEM_PARAMS, PL_HOST, "shard host copy: params");
    h->adam_m = pl_mem_alloc(b, PL_MEM_OPTIM, PL_HOST, "shard host copy: adam_m");
    h->adam_v = pl_mem_alloc(b, PL_MEM_OPTIM, PL_HOST, "shard host copy: adam_v");
    pl_shard_get(s, h->params, h->adam_m, h->adam_v);
    h->on_host = 1;
    return h;
}

void pl_shard_get(const struct pl_shard_state *s, float *params, float *adam_m, float *adam_v)
{
    size_t b = s->count * sizeof(float);
    if (s->on_host) { /* no device call: a forked process may be reading it */
        if (params) memcpy(params, s->params, b);
        if (adam_m) memcpy(adam_m, s->adam_m, b);
        if (adam_v) memcpy(adam_v, s->adam_v, b);
        return;
    }
    if (params) pl_to_host(params, s->params, b);
    if (adam_m) pl_to_host(adam_m, s->adam_m, b);
    if (adam_v) pl_to_host(adam_v, s->adam_v, b);
}

void pl_shard_set(struct pl_shard_state *s, const float *params, const float *adam_m,
                  const float *adam_v)
{
    PL_REQUIRE(!s->on_host, "pl_shard_set on pl_shard_host_copy's copy: it is read-only");
    size_t b = s->count * sizeof(float);
    if (params) pl_to_device(s->params, params, b);
    if (adam_m) pl_to_device(s->adam_m, adam_m, b);
    if (adam_v) pl_to_device(s->adam_v, adam_v, b);
}
