/* fourd.c: Lab 9, data x tensor (with sequence) x pipeline parallelism: the reference
 * solution. Each function is a section of the handout (docs/labs/09-4d.md): the grid, the
 * model's shards, the 1F1B step with TP+SP blocks in each stage, the sums over the groups,
 * the global norm. */
#include "fourd.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- section 1: the grid ---- */

int fourd_grid_new(struct fourd_grid *g, struct pl_comm *world, const char *order, int dp,
                   int tp, int pp)
{
    struct pl_grid grid;
    char degrees[64], err[256];
    snprintf(degrees, sizeof degrees, "tp=%d,pp=%d,dp=%d", tp, pp, dp);
    if (pl_grid_init(&grid, order, degrees, pl_comm_size(world), err, sizeof err) != 0)
        return -1;
    /* the three axes and no other: an order naming cp or ep is not this lab's grid */
    if (grid.naxes != 3 || pl_grid_axis(&grid, "tp") < 0 || pl_grid_axis(&grid, "pp") < 0 ||
        pl_grid_axis(&grid, "dp") < 0)
        return -1;
    const int rank = pl_comm_rank(world);
    const int atp = pl_grid_axis(&grid, "tp"), app = pl_grid_axis(&grid, "pp"),
              adp = pl_grid_axis(&grid, "dp");
    g->dp = dp, g->tp = tp, g->pp = pp;
    g->tp_rank = pl_grid_coord(&grid, rank, atp);
    g->pp_rank = pl_grid_coord(&grid, rank, app);
    g->dp_rank = pl_grid_coord(&grid, rank, adp);
    g->tp_comm = pl_grid_comm(&grid, world, atp);
    g->pp_comm = pl_grid_comm(&grid, world, app);
    g->dp_comm = pl_grid_comm(&grid, world, adp);
    return 0;
}

void fourd_grid_free(struct fourd_grid *g)
{
    pl_comm_free(g->tp_comm);
    pl_comm_free(g->pp_comm);
    pl_comm_free(g->dp_comm);
    memset(g, 0, sizeof *g);
}

/* ---- section 2: the model's shards ---- */

/* A run of floats this rank holds and updates: its blocks' shards (seg[0], flat -1), or the
 * embedding's or the head's range of rep (flat: its offset in rep's layout). Under ZeRO-1
 * DP rank d updates its share [lo, lo + own) = [d c, min((d+1) c, n)), c = ceil(n / dp)
 * (fourd.h), and keeps moments for it alone, from mo in adam_m and adam_v; else all of it. */
struct seg {
    float *p, *g;
    size_t n, c, lo, own, mo;
    long flat;
};

struct priv {
    struct pl_model_layout lay;
    struct pl_tp_tensor *tensors; /* the whole model's on t ranks: decay flags and offsets */
    struct seg seg[3];            /* the blocks', then the embedding's and the head's */
    int nseg;
};

static float *param_buf(size_t n, int cat, const char *label)
{
    float *p = pl_mem_alloc(n * sizeof(float), cat, PL_DEVICE, label);
    pl_zero(p, n);
    return p;
}

struct fourd_model *fourd_model_new(const struct pl_model_config *cfg,
                                    const struct pl_adamw_config *opt,
                                    const struct fourd_grid *g)
{
    struct fourd_model *m = pl_mem_alloc(sizeof *m, PL_MEM_WORK, PL_HOST, "4d model");
    memset(m, 0, sizeof *m);
    struct priv *pv = pl_mem_alloc(sizeof *pv, PL_MEM_WORK, PL_HOST, "4d private");
    memset(pv, 0, sizeof *pv);
    m->priv = pv;
    m->cfg = *cfg;
    m->opt = *opt;
    m->g = g;
    fourd_stage_blocks(cfg->n_layers, g->pp, g->pp_rank, &m->b0, &m->b1);
    m->has_embed = g->pp_rank == 0;
    m->has_head = g->pp_rank == g->pp - 1;
    m->block_numel = pl_tp_block_numel(cfg, g->tp);
    pl_model_layout_init(&pv->lay, cfg);
    int nt = pl_tp_model_ntensors(cfg);
    pv->tensors = pl_mem_alloc((size_t)nt * sizeof *pv->tensors, PL_MEM_WORK, PL_HOST,
                               "4d tensors");
    pl_tp_model_tensors(&pv->lay, g->tp, pv->tensors);
    const size_t n = (size_t)(m->b1 - m->b0) * m->block_numel;
    m->params = param_buf(n, PL_MEM_PARAMS, "4d block shards");
    m->grads = param_buf(n, PL_MEM_GRADS, "4d block grads");
    for (int l = m->b0; l < m->b1; l++)
        pl_tp_block_init(&pv->lay, l, g->tp, g->tp_rank,
                         m->params + (size_t)(l - m->b0) * m->block_numel);
    pv->seg[pv->nseg++] = (struct seg){.p = m->params, .g = m->grads, .n = n, .flat = -1};
    /* the moments are ours (the first step sizes them), so rep is made without any */
    if (m->has_embed || m->has_head)
        m->rep = pl_model_new_ends(cfg, PL_MODEL_PARAMS | PL_MODEL_GRADS,
                                   (m->has_embed ? PL_ENDS_EMBED : 0) |
                                       (m->has_head ? PL_ENDS_HEAD : 0));
    for (int part = -1; m->rep && part <= cfg->n_layers; part += cfg->n_layers + 1) {
        if (part == -1 ? !m->has_embed : !m->has_head) continue;
        size_t off, cnt;
        pl_model_part_range(&m->rep->layout, part, &off, &cnt);
        pv->seg[pv->nseg++] = (struct seg){.p = m->rep->params + off, .g = m->rep->grads + off,
                                           .n = cnt, .flat = (long)off};
    }
    return m;
}

/* The moments, at the first step, once m->zero is known: under ZeRO-1 each run's share
 * alone (a full set allocated first would be the very peak ZeRO-1 removes). */
static void alloc_moments(struct fourd_model *m)
{
    struct priv *pv = m->priv;
    const struct fourd_grid *g = m->g;
    size_t total = 0;
    for (int k = 0; k < pv->nseg; k++) {
        struct seg *s = &pv->seg[k];
        s->c = (s->n + (size_t)g->dp - 1) / (size_t)g->dp;
        s->lo = m->zero ? s->c * (size_t)g->dp_rank : 0;
        if (s->lo > s->n) s->lo = s->n;
        s->own = m->zero ? (s->n - s->lo < s->c ? s->n - s->lo : s->c) : s->n;
        s->mo = total;
        total += s->own;
    }
    m->adam_m = param_buf(total ? total : 1, PL_MEM_OPTIM, "4d adam m");
    m->adam_v = param_buf(total ? total : 1, PL_MEM_OPTIM, "4d adam v");
}

void fourd_model_free(struct fourd_model *m)
{
    if (!m) return;
    struct priv *pv = m->priv;
    float *f[] = {m->params, m->grads, m->adam_m, m->adam_v};
    for (int i = 0; i < 4; i++) pl_mem_free(f[i]);
    if (m->rep) pl_model_free(m->rep);
    pl_mem_free(pv->tensors);
    pl_model_layout_free(&pv->lay);
    pl_mem_free(pv);
    pl_mem_free(m);
}

/* ---- section 2.1: the head, vocabulary-parallel across the TP group ----
 * TP rank r of t keeps rep whole (fourd.h) but computes with rows [r V/t, (r+1) V/t) of the
 * LM head alone: the final layernorm on its own T/t tokens of each sequence (the blocks'
 * sequence-parallel layout), those tokens gathered, then the logits of its vocabulary
 * slice for every token of the microbatch. The cross-entropy combines the slices with
 * three numbers per token (tp_shard.h's pieces): the rows' maxima (gathered, lib has no
 * max reduction), the sums of exp(logit - max) and the target's logit (summed). */
struct head_acts {
    float *x, *mean, *rstd;  /* [n/t, C], [n/t], [n/t]: the stage's output, lnf's statistics */
    float *ln;               /* [n, C] lnf(x) of every token of the microbatch */
    float *logits;           /* [n, V/t] this rank's vocabulary slice */
    float *stat;             /* [3n] the rows' maxima, sums of exponentials, target logits */
    const int *targets;
};

static float *acts_buf(size_t n, const char *label)
{
    return pl_mem_alloc(n * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, label);
}

static float *work_buf(size_t n, const char *label)
{
    float *p = pl_mem_alloc(n * sizeof(float), PL_MEM_WORK, PL_DEVICE, label);
    pl_zero(p, n);
    return p;
}

/* The mean cross-entropy of the microbatch's n = Bm T tokens; x: this rank's [n/t, C]. */
static double head_forward(struct fourd_model *m, struct head_acts *h, const float *x,
                           const int *targets, int Bm, int T)
{
    const struct fourd_grid *g = m->g;
    const struct pl_head_params *p = &m->rep->head;
    const int C = m->cfg.d_model, t = g->tp, Vt = m->cfg.vocab / t, n = Bm * T, nl = n / t;
    h->x = acts_buf((size_t)nl * C, "4d head x");
    h->mean = acts_buf((size_t)nl, "4d head lnf mean");
    h->rstd = acts_buf((size_t)nl, "4d head lnf rstd");
    pl_copy(h->x, x, (size_t)nl * C);
    float *ln = work_buf((size_t)nl * C, "4d head lnf local");
    pl_layernorm_forward(ln, h->mean, h->rstd, h->x, p->lnf_w, p->lnf_b, nl, C);
    h->ln = acts_buf((size_t)n * C, "4d head lnf");
    pl_sp_gather(g->tp_comm, h->ln, ln, Bm, T, C);
    pl_mem_free(ln);
    h->logits = acts_buf((size_t)n * Vt, "4d head logits slice");
    pl_matmul_forward(h->logits, h->ln, p->w_head + (size_t)g->tp_rank * Vt * C, NULL, n, C,
                      Vt);
    h->stat = acts_buf((size_t)3 * n, "4d head loss statistics");
    float *mx = h->stat, *se = mx + n, *tl = se + n;
    float *all = work_buf((size_t)t * n, "4d head maxima");
    pl_tp_row_max(mx, h->logits, n, Vt);
    pl_all_gather(g->tp_comm, mx, all, (size_t)n);
    pl_tp_max_of_blocks(mx, all, t, n);
    pl_mem_free(all);
    pl_tp_row_sumexp(se, h->logits, mx, n, Vt);
    pl_tp_pick_target(tl, h->logits, targets, g->tp_rank * Vt, n, Vt);
    pl_all_reduce(g->tp_comm, se, se, (size_t)2 * n, PL_SUM);
    h->targets = targets;
    return pl_tp_xent_mean(mx, se, tl, n);
}

/* dx [n/t, C] = the gradient of this rank's tokens; the slice's rows of the LM head's
 * gradient and this rank's tokens' share of lnf's accumulate into rep->grads. */
static void head_backward(struct fourd_model *m, struct head_acts *h,
                          const struct pl_model_ctx *ctx, float *dx, int Bm, int T)
{
    const struct fourd_grid *g = m->g;
    const struct pl_head_params *p = &m->rep->head, *hg = &m->rep->head_g;
    const int C = m->cfg.d_model, t = g->tp, Vt = m->cfg.vocab / t, n = Bm * T, nl = n / t;
    const size_t row0 = (size_t)g->tp_rank * Vt * C;
    float *dlogits = work_buf((size_t)n * Vt, "4d head d logits");
    pl_tp_xent_backward(dlogits, h->logits, h->stat, h->stat + n, h->targets, g->tp_rank * Vt,
                        ctx->loss_scale / (float)n, n, Vt);
    float *dln = work_buf((size_t)n * C, "4d head d lnf");
    pl_matmul_backward(dln, hg->w_head + row0, NULL, dlogits, h->ln, p->w_head + row0, n, C,
                       Vt);
    pl_mem_free(dlogits);
    float *dlocal = work_buf((size_t)nl * C, "4d head d lnf local");
    pl_sp_reduce_scatter(g->tp_comm, dlocal, dln, Bm, T, C);
    pl_mem_free(dln);
    pl_zero(dx, (size_t)nl * C);
    pl_layernorm_backward(dx, hg->lnf_w, hg->lnf_b, dlocal, h->x, p->lnf_w, h->mean, h->rstd,
                          nl, C);
    pl_mem_free(dlocal);
}

static void head_acts_free(struct head_acts *h)
{
    float *f[] = {h->x, h->mean, h->rstd, h->ln, h->logits, h->stat};
    for (int i = 0; i < 6; i++) pl_mem_free(f[i]);
    memset(h, 0, sizeof *h);
}

/* After the last microbatch's head backward: each TP rank holds its slice's rows of the LM
 * head's gradient, complete, and its tokens' share of lnf's. The slices are gathered (every rank
 * sends its V/t C floats once; an all-reduce of the zero-padded whole would move twice the
 * bytes to the same end) and lnf's shares summed, as the blocks' layernorms are: rep's
 * gradient whole and equal on every TP rank, before the DP sum. */
static void head_grads_whole(struct fourd_model *m)
{
    const struct fourd_grid *g = m->g;
    if (!m->has_head || g->tp == 1) return;
    const struct pl_head_params *hg = &m->rep->head_g;
    const size_t C = (size_t)m->cfg.d_model, slice = (size_t)m->cfg.vocab / g->tp * C;
    pl_all_gather(g->tp_comm, hg->w_head + (size_t)g->tp_rank * slice, hg->w_head, slice);
    /* model.h's layout: lnf.w then lnf.b, C floats each */
    pl_all_reduce(g->tp_comm, hg->lnf_w, hg->lnf_w, 2 * C, PL_SUM);
}

/* ---- section 2: one microbatch through this stage ----
 * What one microbatch leaves on this stage between its forward and its backward. */
struct mb {
    struct pl_parts_acts embed;        /* when the stage has it */
    struct head_acts head;             /* when the stage has the head */
    struct pl_sp_block_saved *blocks;  /* one per block of the stage: what m->recompute keeps */
    struct pl_handle *sent;            /* the forward's send to the next stage */
    float *out;                        /* what it sent */
};

struct step {
    struct fourd_model *m;
    struct pl_model_ctx ctx;
    const int *tokens, *targets;
    int Bm, T, micro;
    size_t nl;                         /* floats of one microbatch's local activation */
    struct mb *mbs;
    struct pl_handle **back_sent;      /* the backward's sends to the previous stage */
    float **back_out;
    double loss;                       /* sum of the microbatches' losses (last stage) */
    struct bucket *dp;                 /* the DP sums started in the cool-down (section 3) */
    int ndp;
};

/* One bucket of the DP sum in flight: floats [a, a + n) of run s, summed in place (buf ==
 * s->g + a), or under ZeRO-1 the whole run reduce-scattered through buf. */
struct bucket {
    struct pl_handle *h;
    struct seg *s;
    float *buf;
};

static void dp_start(struct step *st, struct seg *s, size_t a, size_t n);

/* The head's bucket (section 3.3), in the last microbatch after the stage's first block
 * backward (the last stage has one): final, but on t > 1 a TP rank holds its slice's rows of
 * the LM head's gradient and its tokens' share of lnf's. Made whole over tp_comm first, the
 * whole run is DP-summed as one bucket: the replicas' whole heads in the all-reduce, and
 * under ZeRO-1 a reduce-scatter whose shares, cut over the run, see it whole. Not inside the
 * head's run (its tp_comm carries the statistics alone, 2.1), nor after the cool-down. */
static void head_sum_start(struct step *st)
{
    struct priv *pv = st->m->priv;
    if (!st->m->has_head) return;
    head_grads_whole(st->m);
    dp_start(st, &pv->seg[pv->nseg - 1], 0, pv->seg[pv->nseg - 1].n);
}

static void block_view(const struct fourd_model *m, float *base, int l,
                       struct pl_block_params *out)
{
    pl_tp_block_bind(&m->cfg, m->g->tp, base + (size_t)(l - m->b0) * m->block_numel, out);
}

static size_t seq_of(const struct step *s, int i)
{
    const struct fourd_model *m = s->m;
    return (size_t)m->g->dp_rank * (size_t)(s->Bm * s->micro) + (size_t)i * (size_t)s->Bm;
}

static void forward(struct step *s, int i)
{
    struct fourd_model *m = s->m;
    const struct fourd_grid *g = m->g;
    const struct pl_model_config *c = &m->cfg;
    struct mb *b = &s->mbs[i];
    const int C = c->d_model, Bm = s->Bm, T = s->T, nb = m->b1 - m->b0;
    const size_t off = seq_of(s, i) * (size_t)T;
    s->ctx.seq0 = (int64_t)seq_of(s, i);
    float *x = pl_comm_buf_alloc(s->nl, "4d x"), *y = pl_comm_buf_alloc(s->nl, "4d y");
    if (m->has_embed) {
        pl_parts_forward(m->rep, -1, -1, i, &b->embed, &s->ctx, s->tokens + off, NULL, Bm, T,
                         NULL);
        pl_sp_slice(x, b->embed.x, Bm, T, C, g->tp, g->tp_rank);
    } else {
        pl_recv(g->pp_comm, x, s->nl, g->pp_rank - 1, i);
    }
    b->blocks = pl_mem_alloc((size_t)(nb ? nb : 1) * sizeof *b->blocks, PL_MEM_ACTIV, PL_HOST,
                             "4d block acts");
    for (int l = m->b0; l < m->b1; l++) {
        struct pl_block_params p;
        block_view(m, m->params, l, &p);
        pl_sp_block_saved_new(&b->blocks[l - m->b0], c, g->tp, Bm, T, m->recompute);
        pl_sp_block_forward_saved(g->tp_comm, c, l, &p, &b->blocks[l - m->b0], &s->ctx, x, y);
        float *t = x; x = y; y = t;
    }
    pl_comm_buf_free(y);
    if (m->has_head) {
        s->loss += head_forward(m, &b->head, x, s->targets + off, Bm, T);
        pl_comm_buf_free(x);
    } else {
        b->out = x;
        b->sent = pl_isend(g->pp_comm, x, s->nl, g->pp_rank + 1, i);
    }
}

static void backward(struct step *s, int i)
{
    struct fourd_model *m = s->m;
    struct priv *pv = m->priv;
    const struct fourd_grid *g = m->g;
    const struct pl_model_config *c = &m->cfg;
    struct mb *b = &s->mbs[i];
    const int C = c->d_model, Bm = s->Bm, T = s->T;
    s->ctx.seq0 = (int64_t)seq_of(s, i);
    float *dy = pl_comm_buf_alloc(s->nl, "4d dy"), *dx = pl_comm_buf_alloc(s->nl, "4d dx");
    if (m->has_head) {
        head_backward(m, &b->head, &s->ctx, dy, Bm, T);
        head_acts_free(&b->head);
    } else {
        pl_recv(g->pp_comm, dy, s->nl, g->pp_rank + 1, i);
    }
    for (int l = m->b1 - 1; l >= m->b0; l--) {
        struct pl_block_params p, gr;
        block_view(m, m->params, l, &p);
        block_view(m, m->grads, l, &gr);
        pl_sp_block_backward_saved(g->tp_comm, c, l, &p, &gr, &b->blocks[l - m->b0], &s->ctx,
                                   dy, dx);
        pl_sp_block_saved_free(&b->blocks[l - m->b0]);
        float *t = dx; dx = dy; dy = t;
        /* the last microbatch: block l's gradient is final, its DP sum starts while the
         * blocks before it run their backwards (under ZeRO-1 the run, once whole) */
        if (i == s->micro - 1 && !m->zero)
            dp_start(s, &pv->seg[0], (size_t)(l - m->b0) * m->block_numel, m->block_numel);
        if (i == s->micro - 1 && l == m->b1 - 1) head_sum_start(s);
    }
    if (i == s->micro - 1 && m->zero) dp_start(s, &pv->seg[0], 0, pv->seg[0].n);
    pl_mem_free(b->blocks);
    pl_comm_buf_free(dx);
    if (m->has_embed) {
        float *full = pl_comm_buf_alloc(s->nl * (size_t)g->tp, "4d embed d");
        pl_sp_gather(g->tp_comm, full, dy, Bm, T, C);
        pl_parts_backward(m->rep, &b->embed, &s->ctx, full);
        if (i == s->micro - 1) dp_start(s, &pv->seg[1], 0, pv->seg[1].n);
        pl_parts_acts_free(&b->embed);
        pl_comm_buf_free(full);
        pl_comm_buf_free(dy);
    } else {
        s->back_out[i] = dy;
        s->back_sent[i] = pl_isend(g->pp_comm, dy, s->nl, g->pp_rank - 1, i);
    }
}

/* ---- section 3: the sums over the groups and the global norm ---- */

/* The floats of [a, a + n) of a run that this rank updates, from *at (0: none of them). */
static size_t in_share(const struct seg *s, size_t a, size_t n, size_t *at)
{
    size_t lo = a > s->lo ? a : s->lo, hi = a + n < s->lo + s->own ? a + n : s->lo + s->own;
    *at = lo;
    return hi > lo ? hi - lo : 0;
}

/* Block l's tensor k: its descriptor, and where it starts in the blocks' run. */
static const struct pl_tp_tensor *block_tensor(const struct fourd_model *m, int l, int k,
                                               size_t *at)
{
    const struct priv *pv = m->priv;
    const struct pl_tp_tensor *first = &pv->tensors[2 + PL_TP_BLOCK_TENSORS * l];
    *at = (size_t)(l - m->b0) * m->block_numel + (first[k].shard_offset - first->shard_offset);
    return first + k;
}

/* Every parameter once: a split tensor's squares summed over the TP group, a tensor every
 * TP rank holds whole (layernorms, replicated biases, the embedding and the head) counted on
 * TP rank 0 alone, the stages summed over the pipeline, and the DP replicas, which hold the
 * same summed gradient, not at all; under ZeRO-1 each holds the sum on its share alone, and
 * the shares are summed over the DP group. */
static double global_norm_sq(const struct fourd_model *m)
{
    const struct priv *pv = m->priv;
    const struct fourd_grid *g = m->g;
    double sq = 0;
    for (int l = m->b0; l < m->b1; l++) {
        for (int k = 0; k < PL_TP_BLOCK_TENSORS; k++) {
            size_t a, at, cnt;
            const struct pl_tp_tensor *d = block_tensor(m, l, k, &a);
            if (d->split == PL_TP_REPLICATED && g->tp_rank != 0) continue;
            if ((cnt = in_share(&pv->seg[0], a, d->shard_numel, &at)))
                sq += pl_grad_norm_sq(m->grads + at, cnt);
        }
    }
    for (int k = 1; k < pv->nseg && g->tp_rank == 0; k++)
        sq += pl_grad_norm_sq(pv->seg[k].g + pv->seg[k].lo, pv->seg[k].own);
    sq = pl_sum_over_ranks(g->pp_comm, pl_sum_over_ranks(g->tp_comm, sq));
    return m->zero ? pl_sum_over_ranks(g->dp_comm, sq) : sq;
}

/* ZeRO-1's gradient sum of one run: padded to dp chunks of c floats (a copy only when dp
 * does not divide it), reduce-scattered so that chunk d of the sum lands on DP rank d. */
static float *reduce_scatter_share(const struct fourd_grid *g, struct seg *s,
                                   struct pl_handle **h)
{
    const size_t padded = s->c * (size_t)g->dp;
    float *buf = s->g;
    if (padded != s->n) {
        buf = pl_comm_buf_alloc(padded, "4d zero grads");
        pl_copy(buf, s->g, s->n);
        pl_zero(buf + s->n, padded - s->n);
    }
    *h = pl_reduce_scatter_async(g->dp_comm, buf, buf + s->c * (size_t)g->dp_rank, s->c,
                                 PL_SUM);
    return buf;
}

/* Its end: this rank's chunk of the sum back into its share. */
static void reduce_scatter_done(struct seg *s, float *buf)
{
    if (buf == s->g) return;
    if (s->own) pl_copy(s->g + s->lo, buf + s->lo, s->own);
    pl_comm_buf_free(buf);
}

/* And back: every DP rank's updated share of the run gathered into every replica's. */
static void all_gather_share(const struct fourd_grid *g, struct seg *s)
{
    const size_t padded = s->c * (size_t)g->dp;
    float *buf = padded == s->n ? s->p : pl_comm_buf_alloc(padded, "4d zero params");
    float *mine = buf + s->c * (size_t)g->dp_rank;
    if (buf != s->p) {
        pl_zero(mine, s->c);
        if (s->own) pl_copy(mine, s->p + s->lo, s->own);
    }
    pl_all_gather(g->dp_comm, mine, buf, s->c);
    if (buf == s->p) return;
    pl_copy(s->p, buf, s->n);
    pl_comm_buf_free(buf);
}

/* The DP sum of floats [a, a + n) of run s, started as soon as the last microbatch's
 * backward has made them final (a bucket): in place, an all-reduce; under ZeRO-1 only a
 * whole run, as the shares are cut per run (a block's floats are no DP rank's equal part). */
static void dp_start(struct step *st, struct seg *s, size_t a, size_t n)
{
    struct fourd_model *m = st->m;
    const struct fourd_grid *g = m->g;
    if (!n) return;
    struct bucket *k = &st->dp[st->ndp++];
    k->s = s;
    if (m->zero) k->buf = reduce_scatter_share(g, s, &k->h);
    else k->buf = s->g + a, k->h = pl_all_reduce_async(g->dp_comm, k->buf, k->buf, n, PL_SUM);
}

/* The replicas' gradients summed: every bucket started in the cool-down, waited for before
 * the norm, so that every microbatch of every replica is in them. */
static void dp_sum(struct fourd_model *m, struct step *st)
{
    for (int j = 0; j < st->ndp; j++) {
        pl_wait(st->dp[j].h);
        if (m->zero) reduce_scatter_done(st->dp[j].s, st->dp[j].buf);
    }
    st->ndp = 0;
}

/* The TP sums of the replicated block tensors, the norm, the clip, AdamW on what this rank
 * updates, and under ZeRO-1 the updated shares gathered back. */
static void sync_and_update(struct fourd_model *m)
{
    const struct fourd_grid *g = m->g;
    struct priv *pv = m->priv;
    for (int l = m->b0; l < m->b1; l++) {
        struct pl_block_params gr;
        block_view(m, m->grads, l, &gr);
        pl_sp_block_sync_grads(g->tp_comm, &m->cfg, &gr);
    }
    double sq = global_norm_sq(m);
    m->grad_norm = sqrt(sq);
    float scale = pl_clip_scale(sq, m->opt.grad_clip);
    m->step++;
    const struct pl_adamw_config *o = &m->opt;
    for (int k = 0; k < pv->nseg && scale < 1.0f; k++)
        if (pv->seg[k].own) pl_scale(pv->seg[k].g + pv->seg[k].lo, pv->seg[k].own, scale);
    const struct seg *b = &pv->seg[0];
    for (int l = m->b0; l < m->b1; l++) {
        for (int k = 0; k < PL_TP_BLOCK_TENSORS; k++) {
            size_t a, at, cnt;
            const struct pl_tp_tensor *d = block_tensor(m, l, k, &a);
            if (!(cnt = in_share(b, a, d->shard_numel, &at))) continue;
            const size_t mo = b->mo + (at - b->lo);
            pl_adamw_step(m->params + at, m->grads + at, m->adam_m + mo, m->adam_v + mo, cnt,
                          m->step, o->lr, o->beta1, o->beta2, o->eps,
                          d->decay ? o->weight_decay : 0.0f);
        }
    }
    for (int k = 1; k < pv->nseg; k++) {
        const struct seg *s = &pv->seg[k];
        if (s->own)
            pl_model_adamw_flat(&m->rep->layout, (size_t)s->flat + s->lo, s->own, s->p + s->lo,
                                s->g + s->lo, m->adam_m + s->mo, m->adam_v + s->mo, m->step, o);
    }
    for (int k = 0; m->zero && k < pv->nseg; k++)
        if (pv->seg[k].n) all_gather_share(g, &pv->seg[k]);
}

/* ---- section 2: the step, 1F1B across the stages ---- */

double fourd_step(struct fourd_model *m, const int *tokens, const int *targets, int B,
                  int micro)
{
    const struct fourd_grid *g = m->g;
    struct step s = {.m = m, .tokens = tokens, .targets = targets, .micro = micro,
                     .T = m->cfg.seq_len};
    s.Bm = B / g->dp / micro;
    s.nl = (size_t)s.Bm * (size_t)s.T / (size_t)g->tp * (size_t)m->cfg.d_model;
    s.ctx = pl_model_ctx_eval();
    s.ctx.train = 1;
    s.ctx.step = (uint64_t)m->step + 1;
    s.ctx.loss_scale = 1.0f / (float)(g->dp * micro);
    s.mbs = pl_mem_alloc((size_t)micro * sizeof *s.mbs, PL_MEM_WORK, PL_HOST, "4d microbatches");
    memset(s.mbs, 0, (size_t)micro * sizeof *s.mbs);
    s.back_sent = pl_mem_alloc((size_t)micro * sizeof *s.back_sent, PL_MEM_WORK, PL_HOST,
                               "4d back sends");
    s.back_out = pl_mem_alloc((size_t)micro * sizeof *s.back_out, PL_MEM_WORK, PL_HOST,
                              "4d back buffers");
    memset(s.back_sent, 0, (size_t)micro * sizeof *s.back_sent);
    s.dp = pl_mem_alloc((size_t)(m->b1 - m->b0 + 2) * sizeof *s.dp, PL_MEM_WORK, PL_HOST,
                        "4d dp buckets");
    if (!m->adam_m) alloc_moments(m);
    pl_zero(m->grads, (size_t)(m->b1 - m->b0) * m->block_numel);
    if (m->rep) pl_model_zero_grad(m->rep);

    const int p = g->pp, st = g->pp_rank;
    int warm = p - st - 1 < micro ? p - st - 1 : micro;
    for (int i = 0; i < warm; i++) forward(&s, i);
    for (int i = 0; i < micro - warm; i++) {
        forward(&s, warm + i);
        backward(&s, i);
    }
    for (int i = micro - warm; i < micro; i++) backward(&s, i);
    dp_sum(m, &s); /* the buckets the cool-down started, done */
    for (int i = 0; i < micro; i++) {
        if (s.mbs[i].sent) pl_wait(s.mbs[i].sent), pl_comm_buf_free(s.mbs[i].out);
        if (s.back_sent[i]) pl_wait(s.back_sent[i]), pl_comm_buf_free(s.back_out[i]);
    }
    sync_and_update(m);

    /* the loss lives on the last stage of each pipeline: the replica's mean, then the batch's */
    double mine = m->has_head && g->tp_rank == 0 ? s.loss / micro : 0.0;
    double loss = pl_sum_over_ranks(g->pp_comm, pl_sum_over_ranks(g->tp_comm, mine));
    loss = pl_sum_over_ranks(g->dp_comm, loss) / g->dp;
    pl_mem_free(s.dp);
    pl_mem_free(s.back_out);
    pl_mem_free(s.back_sent);
    pl_mem_free(s.mbs);
    return loss;
}
