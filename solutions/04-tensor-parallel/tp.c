/* tp.c: Lab 4, tensor parallelism: the reference solution. Each function is a step of the
 * handout (docs/labs/04-tensor-parallel.md): the group, f and g, the column- and
 * row-parallel linears, the MLP and the attention built from them, and the block. */
#include "tp.h"

#include "mem.h"
#include "ops.h"

/* ---- the group ----
 * A TP group is named by its member whose tp coordinate is 0 (this rank's coordinates with
 * tp set to 0): one color per group whatever the other axes and their order, and the tp
 * coordinate as the key makes it the group rank. */

struct pl_comm *tp_group(const struct pl_grid *grid, struct pl_comm *world)
{
    int axis = pl_grid_axis(grid, "tp"), me = pl_comm_rank(world), coords[PL_GRID_MAX_AXES];
    if (axis < 0) return pl_comm_split(world, me, 0, "tp"); /* no tp axis: a group of one */
    pl_grid_coords(grid, me, coords);
    int key = coords[axis];
    coords[axis] = 0;
    return pl_comm_split(world, pl_grid_rank(grid, coords), key, "tp");
}

/* ---- f and g ---- */

void tp_copy_to_region_forward(struct pl_comm *tp, float *x, size_t n)
{
    /* every rank already holds all of x */
}

void tp_copy_to_region_backward(struct pl_comm *tp, float *dx, size_t n)
{
    /* each rank's branch saw all of x, so each holds a part of its gradient */
    pl_all_reduce(tp, dx, dx, n, PL_SUM);
}

void tp_reduce_from_region_forward(struct pl_comm *tp, float *x, size_t n)
{
    pl_all_reduce(tp, x, x, n, PL_SUM);
}

void tp_reduce_from_region_backward(struct pl_comm *tp, float *dx, size_t n)
{
    /* the sum's gradient reaches every term unchanged */
}

/* ---- parallel linears ---- */

static float *scratch(size_t n, const char *label)
{
    float *p = pl_mem_alloc(n * sizeof *p, PL_MEM_WORK, PL_DEVICE, label);
    return p;
}

void tp_column_linear_forward(struct pl_comm *tp, float *y, float *x, const float *w,
                              const float *b, int N, int C, int OCt)
{
    tp_copy_to_region_forward(tp, x, (size_t)N * C);
    pl_matmul_forward(y, x, w, b, N, C, OCt);
}

void tp_column_linear_backward(struct pl_comm *tp, float *dx, float *dw, float *db,
                               const float *dy, const float *x, const float *w, int N, int C,
                               int OCt)
{
    pl_zero(dx, (size_t)N * C);
    pl_matmul_backward(dx, dw, db, dy, x, w, N, C, OCt);
    tp_copy_to_region_backward(tp, dx, (size_t)N * C);
}

void tp_row_linear_forward(struct pl_comm *tp, float *y, const float *x, const float *w,
                           const float *b, int N, int Ct, int OC)
{
    pl_matmul_forward(y, x, w, NULL, N, Ct, OC);
    tp_reduce_from_region_forward(tp, y, (size_t)N * OC);
    /* after the sum: added on every rank before it, the bias would count t times */
    pl_tp_add_bias(y, b, N, OC);
}

void tp_row_linear_backward(struct pl_comm *tp, float *dx, float *dw, float *db, float *dy,
                            const float *x, const float *w, int N, int Ct, int OC)
{
    tp_reduce_from_region_backward(tp, dy, (size_t)N * OC);
    pl_zero(dx, (size_t)N * Ct);
    pl_matmul_backward(dx, dw, db, dy, x, w, N, Ct, OC);
}

/* ---- MLP: column-parallel fc1, GELU on the slice, row-parallel fc2 ---- */

void tp_mlp_forward(struct pl_comm *tp, const struct pl_model_config *c,
                    const struct pl_block_params *p, struct pl_tp_mlp_acts *a, float *x,
                    float *y)
{
    const int N = a->B * a->T, C = c->d_model, Ft = c->d_ff / pl_comm_size(tp);
    tp_column_linear_forward(tp, a->h, x, p->w_fc, p->b_fc, N, C, Ft);
    pl_gelu_forward(a->g, a->h, (size_t)N * Ft);
    tp_row_linear_forward(tp, y, a->g, p->w_fc2, p->b_fc2, N, Ft, C);
}

void tp_mlp_backward(struct pl_comm *tp, const struct pl_model_config *c,
                     const struct pl_block_params *p, const struct pl_block_params *g,
                     const struct pl_tp_mlp_acts *a, const float *x, float *dy, float *dx)
{
    const int N = a->B * a->T, C = c->d_model, Ft = c->d_ff / pl_comm_size(tp);
    float *dg = scratch((size_t)N * Ft, "tp mlp d gelu");
    float *dh = scratch((size_t)N * Ft, "tp mlp d fc");
    tp_row_linear_backward(tp, dg, g->w_fc2, g->b_fc2, dy, a->g, p->w_fc2, N, Ft, C);
    pl_gelu_backward(dh, dg, a->h, (size_t)N * Ft);
    tp_column_linear_backward(tp, dx, g->w_fc, g->b_fc, dh, x, p->w_fc, N, C, Ft);
    pl_mem_free(dg);
    pl_mem_free(dh);
}

/* ---- attention: q, k, v column-parallel by heads, output projection row-parallel ---- */

void tp_attention_forward(struct pl_comm *tp, const struct pl_model_config *c,
                          const struct pl_block_params *p, struct pl_tp_attn_acts *a, float *x,
                          float *y)
{
    const int t = pl_comm_size(tp), B = a->B, T = a->T, N = B * T, C = c->d_model;
    const int Ct = C / t, NHt = c->n_heads / t;
    tp_column_linear_forward(tp, a->qkv, x, p->w_qkv, p->b_qkv, N, C, 3 * Ct);
    /* whole heads: this rank's Ct channels of q, k and v are NHt heads of the full size */
    pl_attention_forward(a->y, a->att, a->qkv, B, T, Ct, NHt);
    tp_row_linear_forward(tp, y, a->y, p->w_proj, p->b_proj, N, Ct, C);
}

void tp_attention_backward(struct pl_comm *tp, const struct pl_model_config *c,
                           const struct pl_block_params *p, const struct pl_block_params *g,
                           const struct pl_tp_attn_acts *a, const float *x, float *dy,
                           float *dx)
{
    const int t = pl_comm_size(tp), B = a->B, T = a->T, N = B * T, C = c->d_model;
    const int Ct = C / t, NHt = c->n_heads / t;
    float *dheads = scratch((size_t)N * Ct, "tp attn d heads");
    float *dqkv = scratch((size_t)N * 3 * Ct, "tp attn d qkv");
    tp_row_linear_backward(tp, dheads, g->w_proj, g->b_proj, dy, a->y, p->w_proj, N, Ct, C);
    pl_zero(dqkv, (size_t)N * 3 * Ct);
    pl_attention_backward(dqkv, dheads, a->qkv, a->att, B, T, Ct, NHt);
    tp_column_linear_backward(tp, dx, g->w_qkv, g->b_qkv, dqkv, x, p->w_qkv, N, C, 3 * Ct);
    pl_mem_free(dheads);
    pl_mem_free(dqkv);
}

/* ---- the block: replicated layernorms and residuals around the two sub-layers ---- */

void tp_block_forward(struct pl_comm *tp, const struct pl_model_config *c,
                      const struct pl_block_params *p, struct pl_tp_block_acts *a,
                      const float *x, float *y)
{
    struct pl_tp_attn_acts *at = &a->attn;
    struct pl_tp_mlp_acts *m = &a->mlp;
    const int N = at->B * at->T, C = c->d_model;
    const size_t n = (size_t)N * C;
    float *branch = scratch(n, "tp block branch");
    pl_copy(at->x, x, n);
    pl_layernorm_forward(at->ln, at->mean, at->rstd, at->x, p->ln1_w, p->ln1_b, N, C);
    tp_attention_forward(tp, c, p, at, at->ln, branch);
    pl_residual_forward(m->x, at->x, branch, n);
    pl_layernorm_forward(m->ln, m->mean, m->rstd, m->x, p->ln2_w, p->ln2_b, N, C);
    tp_mlp_forward(tp, c, p, m, m->ln, branch);
    pl_residual_forward(y, m->x, branch, n);
    pl_mem_free(branch);
}

void tp_block_backward(struct pl_comm *tp, const struct pl_model_config *c,
                       const struct pl_block_params *p, const struct pl_block_params *g,
                       const struct pl_tp_block_acts *a, float *dy, float *dx)
{
    const struct pl_tp_attn_acts *at = &a->attn;
    const struct pl_tp_mlp_acts *m = &a->mlp;
    const int N = at->B * at->T, C = c->d_model;
    const size_t n = (size_t)N * C;
    float *dln = scratch(n, "tp block d ln");
    float *dmid = scratch(n, "tp block d mid");
    float *dbranch = scratch(n, "tp block d branch");
    /* MLP half: the residual passes dy on; the branch's gradient, already summed over the
     * group by f, reaches the replicated layernorm whole, so its gradient needs no
     * all-reduce */
    pl_copy(dbranch, dy, n);
    tp_mlp_backward(tp, c, p, g, m, m->ln, dbranch, dln);
    pl_copy(dmid, dy, n);
    pl_layernorm_backward(dmid, g->ln2_w, g->ln2_b, dln, m->x, p->ln2_w, m->mean, m->rstd, N,
                          C);
    /* attention half, the same way */
    pl_copy(dbranch, dmid, n);
    tp_attention_backward(tp, c, p, g, at, at->ln, dbranch, dln);
    pl_copy(dx, dmid, n);
    pl_layernorm_backward(dx, g->ln1_w, g->ln1_b, dln, at->x, p->ln1_w, at->mean, at->rstd, N,
                          C);
    pl_mem_free(dln);
    pl_mem_free(dmid);
    pl_mem_free(dbranch);
}

/* ---- the vocabulary-parallel embedding: each rank looks up the ids it owns ---- */

/* The positions of this rank's ids among the N tokens and their rows in its slice, in op
 * memory; returns how many. */
static int own_ids(const int *tokens, int N, int v0, int Vt, int **pos, int **rows)
{
    int *h = pl_mem_alloc((size_t)N * sizeof *h, PL_MEM_WORK, PL_HOST, "tp token ids");
    int *hp = pl_mem_alloc((size_t)N * sizeof *hp, PL_MEM_WORK, PL_HOST, "tp own positions");
    int *hr = pl_mem_alloc((size_t)N * sizeof *hr, PL_MEM_WORK, PL_HOST, "tp own rows");
    pl_to_host(h, tokens, (size_t)N * sizeof *h);
    int n = 0;
    for (int i = 0; i < N; i++)
        if (h[i] >= v0 && h[i] < v0 + Vt) {
            hp[n] = i;
            hr[n++] = h[i] - v0;
        }
    *pos = pl_mem_alloc((size_t)(n ? n : 1) * sizeof **pos, PL_MEM_WORK, PL_DEVICE, "pos");
    *rows = pl_mem_alloc((size_t)(n ? n : 1) * sizeof **rows, PL_MEM_WORK, PL_DEVICE, "rows");
    pl_to_device(*pos, hp, (size_t)n * sizeof *hp);
    pl_to_device(*rows, hr, (size_t)n * sizeof *hr);
    pl_mem_free(h);
    pl_mem_free(hp);
    pl_mem_free(hr);
    return n;
}

/* Position t of every token, [N] in op memory. */
static int *positions(int B, int T)
{
    int *h = pl_mem_alloc((size_t)B * T * sizeof *h, PL_MEM_WORK, PL_HOST, "tp positions");
    for (int i = 0; i < B * T; i++) h[i] = i % T;
    int *d = pl_mem_alloc((size_t)B * T * sizeof *d, PL_MEM_WORK, PL_DEVICE, "tp positions");
    pl_to_device(d, h, (size_t)B * T * sizeof *h);
    pl_mem_free(h);
    return d;
}

void tp_embed_forward(struct pl_comm *tp, const struct pl_model_config *c, const float *wte_r,
                      const float *wpe, const int *tokens, int B, int T, float *x)
{
    const int N = B * T, C = c->d_model, Vt = c->vocab / pl_comm_size(tp);
    int *pos, *rows;
    int n = own_ids(tokens, N, pl_comm_rank(tp) * Vt, Vt, &pos, &rows);
    /* the ids of other ranks contribute zero rows */
    pl_zero(x, (size_t)N * C);
    if (n) {
        float *mine = scratch((size_t)n * C, "tp embed own rows");
        pl_gather_rows(mine, wte_r, rows, n, C);
        pl_scatter_add_rows(x, mine, pos, NULL, n, C);
        pl_mem_free(mine);
    }
    tp_reduce_from_region_forward(tp, x, (size_t)N * C);
    /* the replicated position embedding, once, after the sum */
    int *tpos = positions(B, T);
    float *pe = scratch((size_t)N * C, "tp embed positions");
    pl_gather_rows(pe, wpe, tpos, N, C);
    pl_accumulate(x, pe, (size_t)N * C);
    pl_mem_free(pe);
    pl_mem_free(tpos);
    pl_mem_free(pos);
    pl_mem_free(rows);
}

void tp_embed_backward(struct pl_comm *tp, const struct pl_model_config *c, float *dwte_r,
                       float *dwpe, const int *tokens, int B, int T, const float *dx)
{
    const int N = B * T, C = c->d_model, Vt = c->vocab / pl_comm_size(tp);
    int *pos, *rows;
    int n = own_ids(tokens, N, pl_comm_rank(tp) * Vt, Vt, &pos, &rows);
    if (n) {
        float *d = scratch((size_t)n * C, "tp embed d own rows");
        pl_gather_rows(d, dx, pos, n, C);
        pl_scatter_add_rows(dwte_r, d, rows, NULL, n, C);
        pl_mem_free(d);
    }
    for (int b = 0; b < B; b++) pl_accumulate(dwpe, dx + (size_t)b * T * C, (size_t)T * C);
    pl_mem_free(pos);
    pl_mem_free(rows);
}

/* ---- the vocabulary-parallel head and cross-entropy ---- */

double tp_head_loss_forward(struct pl_comm *tp, const struct pl_model_config *c,
                            const float *w_r, struct pl_tp_head_acts *a, float *x,
                            const int *targets)
{
    const int t = pl_comm_size(tp), N = a->B * a->T, C = c->d_model, Vt = c->vocab / t;
    tp_column_linear_forward(tp, a->logits, x, w_r, NULL, N, C, Vt);
    /* the row maximum over the whole vocabulary: every rank's own, gathered */
    float *mx = scratch((size_t)N, "tp head own max");
    float *all = scratch((size_t)t * N, "tp head all max");
    pl_tp_row_max(mx, a->logits, N, Vt);
    pl_all_gather(tp, mx, all, (size_t)N);
    pl_tp_max_of_blocks(a->shift, all, t, N);
    /* sum of exponentials and the target's logit, summed over the ranks in one all-reduce */
    float *stats = scratch((size_t)2 * N, "tp head stats");
    pl_tp_row_sumexp(stats, a->logits, a->shift, N, Vt);
    pl_tp_pick_target(stats + N, a->logits, targets, pl_comm_rank(tp) * Vt, N, Vt);
    pl_all_reduce(tp, stats, stats, (size_t)2 * N, PL_SUM);
    pl_copy(a->sumexp, stats, (size_t)N);
    pl_copy(a->target_logit, stats + N, (size_t)N);
    pl_mem_free(mx);
    pl_mem_free(all);
    pl_mem_free(stats);
    return pl_tp_xent_mean(a->shift, a->sumexp, a->target_logit, N);
}

void tp_head_loss_backward(struct pl_comm *tp, const struct pl_model_config *c,
                           const float *w_r, float *dw_r, const struct pl_tp_head_acts *a,
                           const float *x, const int *targets, float *dx)
{
    const int t = pl_comm_size(tp), N = a->B * a->T, C = c->d_model, Vt = c->vocab / t;
    float *dlogits = scratch((size_t)N * Vt, "tp head d logits");
    pl_zero(dlogits, (size_t)N * Vt);
    pl_tp_xent_backward(dlogits, a->logits, a->shift, a->sumexp, targets,
                        pl_comm_rank(tp) * Vt, 1.0f / (float)N, N, Vt);
    tp_column_linear_backward(tp, dx, dw_r, NULL, dlogits, x, w_r, N, C, Vt);
    pl_mem_free(dlogits);
}

/* ---- training: the parts above in the model's order, then clip and AdamW ---- */

struct tp_gpt *tp_gpt_new(const struct pl_model_config *cfg, const struct pl_adamw_config *opt,
                          struct pl_comm *tp)
{
    struct tp_gpt *m = pl_mem_alloc(sizeof *m, PL_MEM_WORK, PL_HOST, "tp gpt");
    m->cfg = *cfg;
    m->opt = *opt;
    m->tp = tp;
    pl_model_layout_init(&m->lay, cfg);
    m->ntensors = pl_tp_model_ntensors(cfg);
    m->tensors = pl_mem_alloc((size_t)m->ntensors * sizeof *m->tensors, PL_MEM_WORK, PL_HOST,
                              "tp gpt tensors");
    pl_tp_model_tensors(&m->lay, pl_comm_size(tp), m->tensors);
    m->numel = pl_tp_model_numel(&m->lay, pl_comm_size(tp));
    size_t bytes = m->numel * sizeof(float);
    m->params = pl_mem_alloc(bytes, PL_MEM_PARAMS, PL_DEVICE, "tp params");
    m->grads = pl_mem_alloc(bytes, PL_MEM_GRADS, PL_DEVICE, "tp grads");
    m->m = pl_mem_alloc(bytes, PL_MEM_OPTIM, PL_DEVICE, "tp adamw m");
    m->v = pl_mem_alloc(bytes, PL_MEM_OPTIM, PL_DEVICE, "tp adamw v");
    pl_tp_model_init(&m->lay, pl_comm_size(tp), pl_comm_rank(tp), m->params);
    pl_zero(m->grads, m->numel);
    pl_zero(m->m, m->numel);
    pl_zero(m->v, m->numel);
    m->step = 0;
    return m;
}

void tp_gpt_free(struct tp_gpt *m)
{
    if (!m) return;
    float *p[] = {m->params, m->grads, m->m, m->v};
    for (int i = 0; i < 4; i++) pl_mem_free(p[i]);
    pl_mem_free(m->tensors);
    pl_model_layout_free(&m->lay);
    pl_mem_free(m);
}

/* The first element of tensor i in a flat shard buffer. */
static float *at(const struct tp_gpt *m, float *base, int i)
{
    return base + m->tensors[i].shard_offset;
}

/* Block l's shard inside a flat buffer: its first tensor is tensor 2 + 12 l. */
static void block_view(const struct tp_gpt *m, float *base, int l, struct pl_block_params *out)
{
    pl_tp_block_bind(&m->cfg, pl_comm_size(m->tp), at(m, base, 2 + PL_TP_BLOCK_TENSORS * l),
                     out);
}

/* Clipping needs the norm of the WHOLE gradient: a split tensor's squares are summed over
 * the group, but a replicated one is the same on every rank and must count once. */
static float clip_scale(const struct tp_gpt *m)
{
    double sq = 0;
    int t = pl_comm_size(m->tp);
    for (int i = 0; i < m->ntensors; i++) {
        const struct pl_tp_tensor *d = &m->tensors[i];
        double s = pl_grad_norm_sq(m->grads + d->shard_offset, d->shard_numel);
        sq += d->split == PL_TP_REPLICATED ? s / t : s;
    }
    float *buf = pl_comm_buf_alloc(1, "tp norm");
    float h = (float)sq;
    pl_copy_from_host(buf, &h, 1);
    pl_all_reduce(m->tp, buf, buf, 1, PL_SUM);
    pl_copy_to_host(&h, buf, 1);
    pl_comm_buf_free(buf);
    return pl_clip_scale(h, m->opt.grad_clip);
}

double tp_gpt_step(struct tp_gpt *m, const int *tokens, const int *targets, int B)
{
    const struct pl_model_config *c = &m->cfg;
    const int t = pl_comm_size(m->tp), T = c->seq_len, N = B * T, C = c->d_model, L = c->n_layers;
    const size_t n = (size_t)N * C;
    const int head = m->ntensors - 3; /* lnf.w, lnf.b, head.w */
    pl_zero(m->grads, m->numel);
    float *x = scratch(n, "tp x"), *y = scratch(n, "tp y"), *ln = scratch(n, "tp lnf");
    float *mean = scratch((size_t)N, "tp lnf mean"), *rstd = scratch((size_t)N, "tp lnf rstd");
    struct pl_tp_block_acts *acts = pl_mem_alloc((size_t)L * sizeof *acts, PL_MEM_ACTIV,
                                                 PL_HOST, "tp block acts");
    struct pl_tp_head_acts ha;
    pl_tp_head_acts_new(&ha, c, t, B, T);
    /* forward */
    tp_embed_forward(m->tp, c, at(m, m->params, 0), at(m, m->params, 1), tokens, B, T, x);
    for (int l = 0; l < L; l++) {
        struct pl_block_params p;
        block_view(m, m->params, l, &p);
        pl_tp_block_acts_new(&acts[l], c, t, B, T);
        tp_block_forward(m->tp, c, &p, &acts[l], x, y);
        float *s = x; x = y; y = s;
    }
    pl_layernorm_forward(ln, mean, rstd, x, at(m, m->params, head), at(m, m->params, head + 1),
                         N, C);
    double loss = tp_head_loss_forward(m->tp, c, at(m, m->params, head + 2), &ha, ln, targets);
    /* backward: y holds each part's input gradient in turn */
    float *dln = scratch(n, "tp d lnf");
    tp_head_loss_backward(m->tp, c, at(m, m->params, head + 2), at(m, m->grads, head + 2), &ha,
                          ln, targets, dln);
    pl_zero(y, n);
    pl_layernorm_backward(y, at(m, m->grads, head), at(m, m->grads, head + 1), dln, x,
                          at(m, m->params, head), mean, rstd, N, C);
    for (int l = L - 1; l >= 0; l--) {
        struct pl_block_params p, g;
        block_view(m, m->params, l, &p);
        block_view(m, m->grads, l, &g);
        tp_block_backward(m->tp, c, &p, &g, &acts[l], y, x);
        float *s = x; x = y; y = s;
        pl_tp_block_acts_free(&acts[l]);
    }
    tp_embed_backward(m->tp, c, at(m, m->grads, 0), at(m, m->grads, 1), tokens, B, T, y);
    /* clip by the global norm, then AdamW tensor by tensor */
    float scale = clip_scale(m);
    if (scale != 1.0f) pl_scale(m->grads, m->numel, scale);
    m->step++;
    const struct pl_adamw_config *o = &m->opt;
    for (int i = 0; i < m->ntensors; i++) {
        const struct pl_tp_tensor *d = &m->tensors[i];
        size_t off = d->shard_offset;
        pl_adamw_step(m->params + off, m->grads + off, m->m + off, m->v + off, d->shard_numel,
                      m->step, o->lr, o->beta1, o->beta2, o->eps, d->decay ? o->weight_decay : 0);
    }
    pl_tp_head_acts_free(&ha);
    pl_mem_free(acts);
    float *f[] = {x, y, ln, mean, rstd, dln};
    for (int i = 0; i < 6; i++) pl_mem_free(f[i]);
    return loss;
}
