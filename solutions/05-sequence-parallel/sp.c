/* sp.c: Lab 5, sequence parallelism on top of tensor parallelism: the reference solution.
 * Each function is a step of the handout (docs/labs/05-sequence-parallel.md): the two
 * conjugates, dropout by global token position, the block, the replicated gradients. */
#include "sp.h"

#include "mem.h"
#include "ops.h"

static float *scratch(size_t n, const char *label)
{
    return pl_mem_alloc(n * sizeof(float), PL_MEM_WORK, PL_DEVICE, label);
}

/* ---- the conjugates: the collectives work in rank-major order, the model in sequence
 * order ---- */

void sp_gather_forward(struct pl_comm *tp, float *full, const float *local, int B, int T,
                       int C)
{
    const size_t nl = (size_t)B * T * C / (size_t)pl_comm_size(tp);
    float *ranks = scratch(nl * (size_t)pl_comm_size(tp), "sp gather rank-major");
    pl_all_gather(tp, local, ranks, nl);
    pl_sp_from_rank_major(full, ranks, B, T, C, pl_comm_size(tp));
    pl_mem_free(ranks);
}

void sp_gather_backward(struct pl_comm *tp, float *dlocal, const float *dfull, int B, int T,
                        int C)
{
    /* every rank's branch saw every token, so each holds a part of each token's gradient */
    const size_t nl = (size_t)B * T * C / (size_t)pl_comm_size(tp);
    float *ranks = scratch(nl * (size_t)pl_comm_size(tp), "sp gather d rank-major");
    pl_sp_to_rank_major(ranks, dfull, B, T, C, pl_comm_size(tp));
    pl_reduce_scatter(tp, ranks, dlocal, nl, PL_SUM);
    pl_mem_free(ranks);
}

void sp_scatter_forward(struct pl_comm *tp, float *local, const float *full, int B, int T,
                        int C)
{
    sp_gather_backward(tp, local, full, B, T, C);
}

void sp_scatter_backward(struct pl_comm *tp, float *dfull, const float *dlocal, int B, int T,
                         int C)
{
    /* the sum's gradient reaches every term: each rank needs every token's */
    sp_gather_forward(tp, dfull, dlocal, B, T, C);
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

void sp_dropout_forward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                        int site, const struct pl_model_ctx *ctx, float *branch, int B, int T)
{
    if (dropout_on(c, ctx)) dropout_pass(tp, c, layer, site, ctx, branch, branch, B, T, 0);
}

void sp_dropout_backward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
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
    sp_gather_forward(tp, full, ln, B, T, C);
    if (site == 0) pl_sp_attn_core_forward(c, p, a, full, partial);
    else pl_sp_mlp_core_forward(c, p, a, full, partial);
    pl_mem_free(full);
    float *branch = scratch((size_t)Nl * C, "sp branch");
    sp_scatter_forward(tp, branch, partial, B, T, C);
    pl_mem_free(partial);
    /* after the reduction, on this rank's tokens only: once per token */
    pl_tp_add_bias(branch, site == 0 ? p->b_proj : p->b_fc2, Nl, C);
    sp_dropout_forward(tp, c, layer, site, ctx, branch, B, T);
    pl_residual_forward(y, x, branch, (size_t)Nl * C);
    pl_mem_free(branch);
}

void sp_block_forward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
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
    sp_dropout_backward(tp, c, layer, site, ctx, dbranch, dy, B, T);
    pl_sp_bias_backward(site == 0 ? g->b_proj : g->b_fc2, dbranch, Nl, C);
    float *dfull = scratch((size_t)N * C, "sp d branch gathered");
    float *full = scratch((size_t)N * C, "sp ln re-gathered");
    float *dpartial = scratch((size_t)N * C, "sp d ln partial");
    sp_scatter_backward(tp, dfull, dbranch, B, T, C);
    /* the weight gradients need every token's layernorm output: gather the stored shard
     * again rather than keep the full sequence from the forward */
    sp_gather_forward(tp, full, ln, B, T, C);
    if (site == 0) pl_sp_attn_core_backward(c, p, g, a, full, dfull, dpartial);
    else pl_sp_mlp_core_backward(c, p, g, a, full, dfull, dpartial);
    pl_mem_free(dfull);
    pl_mem_free(full);
    float *dln = scratch((size_t)Nl * C, "sp d ln");
    sp_gather_backward(tp, dln, dpartial, B, T, C);
    pl_mem_free(dpartial);
    pl_copy(dx, dy, (size_t)Nl * C);
    pl_layernorm_backward(dx, site == 0 ? g->ln1_w : g->ln2_w, site == 0 ? g->ln1_b : g->ln2_b,
                          dln, x, site == 0 ? p->ln1_w : p->ln2_w, mean, rstd, Nl, C);
    pl_mem_free(dln);
    pl_mem_free(dbranch);
}

void sp_block_backward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
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

void sp_sync_replicated_grads(struct pl_comm *tp, const struct pl_model_config *c,
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

/* ==== the second part: context parallelism, causal ring attention (section 8) ==== */

/* Zigzag: rank r holds chunk r and its mirror 2cp-1-r, so under the causal mask every rank
 * has one early chunk (few keys to see) and one late (many). */
void cp_chunks(int cp, int r, int chunk[2])
{
    chunk[0] = r;
    chunk[1] = 2 * cp - 1 - r;
}

/* A rank's rows: sequence b's chunk j (0 or 1) starts at row b * 2Tc + j Tc. */
static size_t cp_row(int b, int j, int Tc)
{
    return (size_t)b * 2 * Tc + (size_t)j * Tc;
}

/* Merges one block's partial output po [Tc, C] and its lse pl [NH, Tc] into the running
 * ones, o and l (host memory): both are normalised softmax averages, so each is weighted
 * by its share of the row's exp-sum, exp(lse - m) with m the larger lse (exp of the lse
 * itself overflows for scores above 88). */
static void cp_merge(float *o, float *l, const float *po, const float *pl, int Tc, int C,
                     int NH)
{
    const int HS = C / NH;
    for (int h = 0; h < NH; h++)
        for (int i = 0; i < Tc; i++) {
            const float lb = pl[h * Tc + i], la = l[h * Tc + i];
            if (lb == -INFINITY) continue; /* the block is wholly in this query's future */
            const float m = la > lb ? la : lb;
            const float wa = expf(la - m), wb = expf(lb - m), s = wa + wb;
            float *oi = o + (size_t)i * C + h * HS;
            const float *pi = po + (size_t)i * C + h * HS;
            for (int c = 0; c < HS; c++) oi[c] = (oi[c] * wa + pi[c] * wb) / s;
            l[h * Tc + i] = m + logf(s);
        }
}

/* The ring's k, v (and in the backward dk, dv) in flight: cur is computed on while nxt
 * arrives. */
struct cp_ring {
    float *k[2], *v[2];
};

/* Step s of the ring: the keys held are rank src's; unless it is the last step, they start
 * on to the next rank, into the free buffers of ring. Returns src, its chunks in theirs. */
static int cp_step(struct pl_comm *cpg, int s, const float *kc, const float *vc,
                   const struct cp_ring *ring, size_t L, struct pl_ring_shift *sk,
                   struct pl_ring_shift *sv, int theirs[2])
{
    const int cp = pl_comm_size(cpg), src = (pl_comm_rank(cpg) - s + cp) % cp;
    *sk = *sv = (struct pl_ring_shift){NULL, NULL};
    if (s < cp - 1) {
        pl_ring_shift_start(cpg, kc, ring->k[s % 2], L, 1, 1, sk);
        pl_ring_shift_start(cpg, vc, ring->v[s % 2], L, 1, 2, sv);
    }
    cp_chunks(cp, src, theirs);
    return src;
}

void cp_attention_forward(struct pl_comm *cpg, float *out, float *lse, const float *q,
                          const float *k, const float *v, int B, int T, int C, int NH)
{
    const int cp = pl_comm_size(cpg), r = pl_comm_rank(cpg), Tc = T / (2 * cp);
    const size_t L = (size_t)B * 2 * Tc * C, nl = (size_t)B * 2 * NH * Tc;
    float *ho = pl_mem_alloc(L * sizeof(float), PL_MEM_WORK, PL_HOST, "cp running out");
    float *hl = pl_mem_alloc(nl * sizeof(float), PL_MEM_WORK, PL_HOST, "cp running lse");
    float *po = scratch((size_t)Tc * C, "cp block out"), *pl = scratch((size_t)NH * Tc, "cp lse");
    float *hpo = pl_mem_alloc((size_t)Tc * C * sizeof(float), PL_MEM_WORK, PL_HOST, "cp po");
    float *hpl = pl_mem_alloc((size_t)NH * Tc * sizeof(float), PL_MEM_WORK, PL_HOST, "cp pl");
    for (size_t i = 0; i < L; i++) ho[i] = 0.0f;
    for (size_t i = 0; i < nl; i++) hl[i] = -INFINITY;
    struct cp_ring ring = {{scratch(L, "cp k"), scratch(L, "cp k")},
                           {scratch(L, "cp v"), scratch(L, "cp v")}};
    const float *kc = k, *vc = v;
    int mine[2];
    cp_chunks(cp, r, mine);
    for (int s = 0; s < cp; s++) {
        /* the blocks of the keys held, while the next rank's arrive */
        struct pl_ring_shift sk, sv;
        int theirs[2];
        cp_step(cpg, s, kc, vc, &ring, L, &sk, &sv, theirs);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++) {
                    if (theirs[j] > mine[i]) continue; /* wholly in the future */
                    pl_attn_block_forward(po, pl, q + cp_row(b, i, Tc) * C,
                                          kc + cp_row(b, j, Tc) * C, vc + cp_row(b, j, Tc) * C,
                                          Tc, Tc, C, NH, mine[i] * Tc, theirs[j] * Tc);
                    pl_to_host(hpo, po, (size_t)Tc * C * sizeof(float));
                    pl_to_host(hpl, pl, (size_t)NH * Tc * sizeof(float));
                    cp_merge(ho + cp_row(b, i, Tc) * C, hl + (size_t)(2 * b + i) * NH * Tc, hpo,
                             hpl, Tc, C, NH);
                }
        pl_ring_shift_wait(&sk);
        pl_ring_shift_wait(&sv);
        kc = ring.k[s % 2], vc = ring.v[s % 2];
    }
    pl_to_device(out, ho, L * sizeof(float));
    pl_to_device(lse, hl, nl * sizeof(float));
    float *fr[] = {ho, hl, po, pl, hpo, hpl, ring.k[0], ring.k[1], ring.v[0], ring.v[1]};
    for (int i = 0; i < 10; i++) pl_mem_free(fr[i]);
}

void cp_attention_backward(struct pl_comm *cpg, float *dq, float *dk, float *dv,
                           const float *dout, const float *q, const float *k, const float *v,
                           const float *out, const float *lse, int B, int T, int C, int NH)
{
    const int cp = pl_comm_size(cpg), r = pl_comm_rank(cpg), Tc = T / (2 * cp);
    const size_t L = (size_t)B * 2 * Tc * C, nl = (size_t)B * 2 * NH * Tc;
    /* the softmax backward's row term, from the merged output: lse's layout */
    float *delta = scratch(nl, "cp delta");
    for (int b = 0; b < B; b++)
        for (int i = 0; i < 2; i++)
            pl_attn_block_delta(delta + (size_t)(2 * b + i) * NH * Tc,
                                dout + cp_row(b, i, Tc) * C, out + cp_row(b, i, Tc) * C, Tc, C,
                                NH);
    pl_zero(dq, L);
    /* k, v travel as in the forward; each block's dk, dv accumulators travel with them and
     * take one step more at the end, back to the rank that owns those keys */
    struct cp_ring kv = {{scratch(L, "cp k"), scratch(L, "cp k")},
                         {scratch(L, "cp v"), scratch(L, "cp v")}};
    struct cp_ring dkv = {{scratch(L, "cp dk"), scratch(L, "cp dk")},
                          {scratch(L, "cp dv"), scratch(L, "cp dv")}};
    const float *kc = k, *vc = v;
    float *dkc = dkv.k[1], *dvc = dkv.v[1];
    pl_zero(dkc, L), pl_zero(dvc, L);
    int mine[2];
    cp_chunks(cp, r, mine);
    for (int s = 0; s < cp; s++) {
        struct pl_ring_shift sk, sv, sdk, sdv;
        int theirs[2];
        cp_step(cpg, s, kc, vc, &kv, L, &sk, &sv, theirs);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++) {
                    if (theirs[j] > mine[i]) continue;
                    const size_t qr = cp_row(b, i, Tc) * C, kr = cp_row(b, j, Tc) * C;
                    const size_t st = (size_t)(2 * b + i) * NH * Tc;
                    pl_attn_block_backward(dq + qr, dkc + kr, dvc + kr, dout + qr, q + qr,
                                           kc + kr, vc + kr, lse + st, delta + st, Tc, Tc, C,
                                           NH, mine[i] * Tc, theirs[j] * Tc);
                }
        /* the accumulators on to the next rank; the last step's land at their owner */
        float *dkn = s == cp - 1 ? dk : dkv.k[s % 2], *dvn = s == cp - 1 ? dv : dkv.v[s % 2];
        pl_ring_shift_start(cpg, dkc, dkn, L, 1, 3, &sdk);
        pl_ring_shift_start(cpg, dvc, dvn, L, 1, 4, &sdv);
        pl_ring_shift_wait(&sk), pl_ring_shift_wait(&sv);
        pl_ring_shift_wait(&sdk), pl_ring_shift_wait(&sdv);
        kc = kv.k[s % 2], vc = kv.v[s % 2];
        dkc = dkn, dvc = dvn;
    }
    float *fr[] = {delta, kv.k[0], kv.k[1], kv.v[0], kv.v[1],
                   dkv.k[0], dkv.k[1], dkv.v[0], dkv.v[1]};
    for (int i = 0; i < 9; i++) pl_mem_free(fr[i]);
}
