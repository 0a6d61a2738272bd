/* sp_block.c: the TP+SP block on a TP group (sp_block.h): the conjugates work in rank-major
 * order, the model in sequence order; dropout by global token position. */
#include "sp_block.h"

#include <stdint.h>
#include <string.h>

#include "check.h"
#include "ledger.h"
#include "mem.h"
#include "ops.h"
#include "tp_shard.h"

static float *scratch(size_t n, const char *label)
{
    return pl_mem_alloc(n * sizeof(float), PL_MEM_WORK, PL_DEVICE, label);
}

/* ---- the conjugates: the collectives work in rank-major order, the model in sequence
 * order ---- */

void pl_sp_gather(struct pl_comm *tp, float *full, const float *local, int B, int T, int C)
{
    const size_t nl = (size_t)B * T * C / (size_t)pl_comm_size(tp);
    float *ranks = scratch(nl * (size_t)pl_comm_size(tp), "sp gather rank-major");
    pl_all_gather(tp, local, ranks, nl);
    pl_sp_from_rank_major(full, ranks, B, T, C, pl_comm_size(tp));
    pl_mem_free(ranks);
}

void pl_sp_reduce_scatter(struct pl_comm *tp, float *local, const float *full, int B, int T,
                          int C)
{
    /* every rank's term covers every token: each rank keeps its own tokens' sum */
    const size_t nl = (size_t)B * T * C / (size_t)pl_comm_size(tp);
    float *ranks = scratch(nl * (size_t)pl_comm_size(tp), "sp reduce-scatter rank-major");
    pl_sp_to_rank_major(ranks, full, B, T, C, pl_comm_size(tp));
    pl_reduce_scatter(tp, ranks, local, nl, PL_SUM);
    pl_mem_free(ranks);
}

/* ---- dropout: sequence b's local rows start at global row (seq0 + b) T + r T/t ---- */

static int dropout_on(const struct pl_model_config *c, const struct pl_model_ctx *ctx)
{
    return ctx && ctx->train && c->dropout > 0.0f;
}

static void dropout_pass(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                         int site, const struct pl_model_ctx *ctx, float *out, const float *in,
                         int B, int T, int backward)
{
    const int t = pl_comm_size(tp), r = pl_comm_rank(tp), Ts = T / t, C = c->d_model;
    const uint64_t stream = pl_model_dropout_stream(layer, site, ctx->step);
    for (int b = 0; b < B; b++) {
        size_t row0 = (size_t)(ctx->seq0 + b) * (size_t)T + (size_t)r * Ts;
        size_t at = (size_t)b * Ts * C;
        if (backward)
            pl_dropout_backward_block(out + at, in + at, (size_t)Ts, (size_t)C, (size_t)C, row0,
                                      0, c->dropout, ctx->seed, stream);
        else
            pl_dropout_forward_block(out + at, in + at, (size_t)Ts, (size_t)C, (size_t)C, row0,
                                     0, c->dropout, ctx->seed, stream);
    }
}

static void dropout_forward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                        int site, const struct pl_model_ctx *ctx, float *branch, int B, int T)
{
    if (dropout_on(c, ctx)) dropout_pass(tp, c, layer, site, ctx, branch, branch, B, T, 0);
}

static void dropout_backward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                         int site, const struct pl_model_ctx *ctx, float *dbranch,
                         const float *dy, int B, int T)
{
    const size_t n = (size_t)B * T / (size_t)pl_comm_size(tp) * (size_t)c->d_model;
    pl_zero(dbranch, n);
    if (dropout_on(c, ctx)) dropout_pass(tp, c, layer, site, ctx, dbranch, dy, B, T, 1);
    else pl_copy(dbranch, dy, n);
}

/* ---- the block ---- */

/* One half: y = x + drop(core(ln(x))) with ln on the local rows, the core on every token. */
static void half_forward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                         int site, const struct pl_block_params *p, struct pl_sp_block_acts *a,
                         const struct pl_model_ctx *ctx, float *x, float *ln, float *mean,
                         float *rstd, float *y)
{
    const int B = a->B, T = a->T, C = c->d_model, N = B * T, Nl = N / a->t;
    const float *lw = site == 0 ? p->ln1_w : p->ln2_w, *lb = site == 0 ? p->ln1_b : p->ln2_b;
    pl_layernorm_forward(ln, mean, rstd, x, lw, lb, Nl, C);
    float *full = scratch((size_t)N * C, "sp ln gathered");
    float *partial = scratch((size_t)N * C, "sp branch partial");
    pl_sp_gather(tp, full, ln, B, T, C);
    if (site == 0) pl_sp_attn_core_forward(c, p, a, full, partial);
    else pl_sp_mlp_core_forward(c, p, a, full, partial);
    pl_mem_free(full);
    float *branch = scratch((size_t)Nl * C, "sp branch");
    pl_sp_reduce_scatter(tp, branch, partial, B, T, C);
    pl_mem_free(partial);
    /* after the reduction, on this rank's tokens only: once per token */
    pl_tp_add_bias(branch, site == 0 ? p->b_proj : p->b_fc2, Nl, C);
    dropout_forward(tp, c, layer, site, ctx, branch, B, T);
    pl_residual_forward(y, x, branch, (size_t)Nl * C);
    pl_mem_free(branch);
}

void pl_sp_block_forward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                      const struct pl_block_params *p, struct pl_sp_block_acts *a,
                      const struct pl_model_ctx *ctx, const float *x, float *y)
{
    const size_t nl = (size_t)a->B * a->T / (size_t)a->t * (size_t)c->d_model;
    pl_copy(a->x1, x, nl);
    half_forward(tp, c, layer, 0, p, a, ctx, a->x1, a->ln1, a->mean1, a->rstd1, a->x2);
    half_forward(tp, c, layer, 1, p, a, ctx, a->x2, a->ln2, a->mean2, a->rstd2, y);
}

/* dx = dy + ln's backward of the branch's gradient, on the local rows. */
static void half_backward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                          int site, const struct pl_block_params *p,
                          const struct pl_block_params *g, const struct pl_sp_block_acts *a,
                          const struct pl_model_ctx *ctx, const float *x, const float *ln,
                          const float *mean, const float *rstd, const float *dy, float *dx)
{
    const int B = a->B, T = a->T, C = c->d_model, N = B * T, Nl = N / a->t;
    float *dbranch = scratch((size_t)Nl * C, "sp d branch");
    dropout_backward(tp, c, layer, site, ctx, dbranch, dy, B, T);
    pl_sp_bias_backward(site == 0 ? g->b_proj : g->b_fc2, dbranch, Nl, C);
    float *dfull = scratch((size_t)N * C, "sp d branch gathered");
    float *full = scratch((size_t)N * C, "sp ln re-gathered");
    float *dpartial = scratch((size_t)N * C, "sp d ln partial");
    pl_sp_gather(tp, dfull, dbranch, B, T, C);
    /* the weight gradients need every token's layernorm output: gather the stored shard
     * again rather than keep the full sequence from the forward */
    pl_sp_gather(tp, full, ln, B, T, C);
    if (site == 0) pl_sp_attn_core_backward(c, p, g, a, full, dfull, dpartial);
    else pl_sp_mlp_core_backward(c, p, g, a, full, dfull, dpartial);
    pl_mem_free(dfull);
    pl_mem_free(full);
    float *dln = scratch((size_t)Nl * C, "sp d ln");
    pl_sp_reduce_scatter(tp, dln, dpartial, B, T, C);
    pl_mem_free(dpartial);
    pl_copy(dx, dy, (size_t)Nl * C);
    pl_layernorm_backward(dx, site == 0 ? g->ln1_w : g->ln2_w, site == 0 ? g->ln1_b : g->ln2_b,
                          dln, x, site == 0 ? p->ln1_w : p->ln2_w, mean, rstd, Nl, C);
    pl_mem_free(dln);
    pl_mem_free(dbranch);
}

void pl_sp_block_backward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                       const struct pl_block_params *p, const struct pl_block_params *g,
                       const struct pl_sp_block_acts *a, const struct pl_model_ctx *ctx,
                       const float *dy, float *dx)
{
    const size_t nl = (size_t)a->B * a->T / (size_t)a->t * (size_t)c->d_model;
    float *dmid = scratch(nl, "sp d mid");
    half_backward(tp, c, layer, 1, p, g, a, ctx, a->x2, a->ln2, a->mean2, a->rstd2, dy, dmid);
    half_backward(tp, c, layer, 0, p, g, a, ctx, a->x1, a->ln1, a->mean1, a->rstd1, dmid, dx);
    pl_mem_free(dmid);
}

/* ---- the replicated gradients: one all-reduce of the six vectors packed together ---- */

void pl_sp_block_sync_grads(struct pl_comm *tp, const struct pl_model_config *c,
                              const struct pl_block_params *g)
{
    const size_t C = (size_t)c->d_model;
    float *v[] = {g->ln1_w, g->ln1_b, g->b_proj, g->ln2_w, g->ln2_b, g->b_fc2};
    const int nv = (int)(sizeof v / sizeof v[0]);
    float *pack = scratch(nv * C, "sp replicated grads");
    for (int i = 0; i < nv; i++) pl_copy(pack + i * C, v[i], C);
    pl_all_reduce(tp, pack, pack, nv * C, PL_SUM);
    for (int i = 0; i < nv; i++) pl_copy(v[i], pack + i * C, C);
    pl_mem_free(pack);
}

/* ---- activation recomputation ---- */

static size_t att_numel(const struct pl_model_config *c, int t, int B, int T)
{
    return (size_t)B * (size_t)(c->n_heads / t) * (size_t)T * (size_t)T;
}

void pl_sp_block_saved_new(struct pl_sp_block_saved *s, const struct pl_model_config *c, int t,
                           int B, int T, enum pl_recompute r)
{
    memset(s, 0, sizeof *s);
    s->r = r;
    if (r != PL_RECOMPUTE_FULL) {
        pl_sp_block_acts_new_scores(&s->acts, c, t, B, T, r == PL_RECOMPUTE_NONE);
        return;
    }
    char err[320];
    if (pl_sp_seq_error(c, t, T, err, sizeof err)) pl_usage_error("%s", err);
    s->acts.B = B, s->acts.T = T, s->acts.t = t;
    s->acts.x1 = pl_mem_alloc((size_t)B * T / (size_t)t * (size_t)c->d_model * sizeof(float),
                              PL_MEM_ACTIV, PL_DEVICE, "sp block input (full recompute)");
}

void pl_sp_block_saved_free(struct pl_sp_block_saved *s)
{
    if (s->r == PL_RECOMPUTE_FULL) pl_mem_free(s->acts.x1);
    else pl_sp_block_acts_free(&s->acts);
    memset(s, 0, sizeof *s);
}

double pl_sp_block_saved_bytes(const struct pl_model_config *c, int t, int B, int T,
                               enum pl_recompute r)
{
    double N = (double)B * T, C = c->d_model, F = c->d_ff;
    switch (r) {
    case PL_RECOMPUTE_NONE: return pl_sp_block_act_bytes(c, t, B, T);
    case PL_RECOMPUTE_SELECTIVE: return 4.0 / t * (8 * N * C + 2 * N * F + 4 * N);
    case PL_RECOMPUTE_FULL: return 4.0 / t * N * C;
    }
    return 0;
}

void pl_sp_block_forward_saved(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                               const struct pl_block_params *p, struct pl_sp_block_saved *s,
                               const struct pl_model_ctx *ctx, const float *x, float *y)
{
    struct pl_sp_block_acts *a = &s->acts;
    if (s->r == PL_RECOMPUTE_NONE) {
        pl_sp_block_forward(tp, c, layer, p, a, ctx, x, y);
    } else if (s->r == PL_RECOMPUTE_SELECTIVE) {
        /* the scores live only while the forward runs */
        a->att = scratch(att_numel(c, a->t, a->B, a->T), "sp attn scores (selective)");
        pl_sp_block_forward(tp, c, layer, p, a, ctx, x, y);
        pl_mem_free(a->att);
        a->att = NULL;
    } else {
        struct pl_sp_block_acts run;
        pl_sp_block_acts_new(&run, c, a->t, a->B, a->T);
        pl_sp_block_forward(tp, c, layer, p, &run, ctx, x, y);
        pl_copy(a->x1, run.x1, (size_t)a->B * a->T / (size_t)a->t * (size_t)c->d_model);
        pl_sp_block_acts_free(&run);
    }
}

void pl_sp_block_backward_saved(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                                const struct pl_block_params *p, const struct pl_block_params *g,
                                const struct pl_sp_block_saved *s, const struct pl_model_ctx *ctx,
                                const float *dy, float *dx)
{
    const struct pl_sp_block_acts *a = &s->acts;
    const int t = a->t, N = a->B * a->T, Ct = c->d_model / t;
    if (s->r == PL_RECOMPUTE_NONE) {
        pl_sp_block_backward(tp, c, layer, p, g, a, ctx, dy, dx);
    } else if (s->r == PL_RECOMPUTE_SELECTIVE) {
        struct pl_sp_block_acts run = *a;
        run.att = scratch(att_numel(c, t, a->B, a->T), "sp attn scores (rerun)");
        float *heads = scratch((size_t)N * Ct, "sp attn heads (rerun)");
        pl_ledger_recompute_begin();
        pl_attention_forward(heads, run.att, a->qkv, a->B, a->T, Ct, c->n_heads / t);
        pl_ledger_recompute_end();
        pl_sp_block_backward(tp, c, layer, p, g, &run, ctx, dy, dx);
        pl_mem_free(heads);
        pl_mem_free(run.att);
    } else {
        struct pl_sp_block_acts run;
        pl_sp_block_acts_new(&run, c, t, a->B, a->T);
        float *y = scratch((size_t)N / (size_t)t * (size_t)c->d_model, "sp block y (rerun)");
        pl_ledger_recompute_begin();
        pl_sp_block_forward(tp, c, layer, p, &run, ctx, a->x1, y);
        pl_ledger_recompute_end();
        pl_sp_block_backward(tp, c, layer, p, g, &run, ctx, dy, dx);
        pl_mem_free(y);
        pl_sp_block_acts_free(&run);
    }
}
