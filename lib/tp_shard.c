/* tp_shard.c: the trusted pieces of tensor parallelism (tp_shard.h): degrees, the shard
 * layout of a block and of the whole model as row and column blocks of the full tensors,
 * copies and counter-RNG initialisation of a shard, a TP block's activations, the
 * row-broadcast bias and the vocabulary-parallel cross-entropy's per-row pieces. */
#include "tp_shard.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ledger.h"
#include "mem.h"
#include "ops.h"

static int gcd(int a, int b)
{
    while (b) {
        int r = a % b;
        a = b;
        b = r;
    }
    return a;
}

const char *pl_tp_degrees(const struct pl_model_config *c, char *buf, size_t len)
{
    return pl_divisors(gcd(gcd(c->n_heads, c->d_ff), c->vocab), buf, len);
}

int pl_tp_degree_error(const struct pl_model_config *c, int t, char *err, size_t len)
{
    char ok[128];
    pl_tp_degrees(c, ok, sizeof ok);
    const char *what = NULL;
    int n = 0;
    if (t < 1) what = "is not a rank count";
    else if (c->n_heads % t) what = "n_heads", n = c->n_heads;
    else if (c->d_ff % t) what = "d_ff", n = c->d_ff;
    else if (c->vocab % t) what = "vocab", n = c->vocab;
    if (!what) return 0;
    if (t < 1)
        snprintf(err, len, "tp=%d %s (choose tp in {%s})", t, what, ok);
    else
        snprintf(err, len, "tp=%d does not divide %s=%d: each rank must hold whole heads and "
                 "equal slices of d_ff and the vocabulary (choose tp in {%s})", t, what, n, ok);
    return -1;
}

/* ---- the shard layout ---- */

int pl_tp_block_tensors(const struct pl_model_config *c, int layer, int t,
                        struct pl_tp_tensor *out)
{
    PL_REQUIRE(c->n_experts == 0, "tensor parallelism here splits dense blocks (n_experts=%d; "
               "set it to 0)", c->n_experts);
    const size_t C = (size_t)c->d_model, F = (size_t)c->d_ff;
    static const struct {
        const char *suffix;
        enum pl_tp_split split;
        int groups;
        int rows, cols; /* 'C', 'F', '3' (3C) or '1' */
    } T[PL_TP_BLOCK_TENSORS] = {
        {"ln1.w", PL_TP_REPLICATED, 1, 'C', '1'},
        {"ln1.b", PL_TP_REPLICATED, 1, 'C', '1'},
        {"attn.w_qkv", PL_TP_ROWS, 3, '3', 'C'},
        {"attn.b_qkv", PL_TP_ROWS, 3, '3', '1'},
        {"attn.w_proj", PL_TP_COLS, 1, 'C', 'C'},
        {"attn.b_proj", PL_TP_REPLICATED, 1, 'C', '1'},
        {"ln2.w", PL_TP_REPLICATED, 1, 'C', '1'},
        {"ln2.b", PL_TP_REPLICATED, 1, 'C', '1'},
        {"mlp.w_fc", PL_TP_ROWS, 1, 'F', 'C'},
        {"mlp.b_fc", PL_TP_ROWS, 1, 'F', '1'},
        {"mlp.w_proj", PL_TP_COLS, 1, 'C', 'F'},
        {"mlp.b_proj", PL_TP_REPLICATED, 1, 'C', '1'},
    };
    size_t full = 0, shard = 0;
    for (int i = 0; i < PL_TP_BLOCK_TENSORS; i++) {
        struct pl_tp_tensor *d = &out[i];
        snprintf(d->name, sizeof d->name, "h.%d.%s", layer, T[i].suffix);
        d->split = T[i].split;
        d->groups = T[i].groups;
        int dims[2] = {T[i].rows, T[i].cols};
        size_t n[2];
        for (int k = 0; k < 2; k++)
            n[k] = dims[k] == 'C' ? C : dims[k] == 'F' ? F : dims[k] == '3' ? 3 * C : 1;
        d->rows = n[0];
        d->cols = n[1];
        d->full_offset = full;
        d->shard_offset = shard;
        d->shard_numel = d->split == PL_TP_REPLICATED ? n[0] * n[1] : n[0] * n[1] / (size_t)t;
        full += n[0] * n[1];
        shard += d->shard_numel;
    }
    return PL_TP_BLOCK_TENSORS;
}

int pl_tp_tensor_rects(const struct pl_tp_tensor *d, int t, int r, struct pl_tp_rect *out)
{
    if (d->split == PL_TP_REPLICATED) {
        out[0] = (struct pl_tp_rect){0, 0, d->rows, d->cols};
        return 1;
    }
    if (d->split == PL_TP_COLS) {
        size_t w = d->cols / (size_t)t;
        out[0] = (struct pl_tp_rect){0, (size_t)r * w, d->rows, w};
        return 1;
    }
    size_t group = d->rows / (size_t)d->groups, h = group / (size_t)t;
    for (int k = 0; k < d->groups; k++)
        out[k] = (struct pl_tp_rect){(size_t)k * group + (size_t)r * h, 0, h, d->cols};
    return d->groups;
}

size_t pl_tp_block_numel(const struct pl_model_config *c, int t)
{
    struct pl_tp_tensor d[PL_TP_BLOCK_TENSORS];
    pl_tp_block_tensors(c, 0, t, d);
    return d[PL_TP_BLOCK_TENSORS - 1].shard_offset + d[PL_TP_BLOCK_TENSORS - 1].shard_numel;
}

void pl_tp_block_bind(const struct pl_model_config *c, int t, float *base,
                      struct pl_block_params *out)
{
    struct pl_tp_tensor d[PL_TP_BLOCK_TENSORS];
    pl_tp_block_tensors(c, 0, t, d);
    memset(out, 0, sizeof *out);
    float **f[PL_TP_BLOCK_TENSORS] = {&out->ln1_w, &out->ln1_b, &out->w_qkv,  &out->b_qkv,
                                      &out->w_proj, &out->b_proj, &out->ln2_w, &out->ln2_b,
                                      &out->w_fc,  &out->b_fc,  &out->w_fc2, &out->b_fc2};
    for (int i = 0; i < PL_TP_BLOCK_TENSORS; i++) *f[i] = base + d[i].shard_offset;
}

/* ---- copies and initialisation ---- */

void pl_tp_copy_rect_out(float *dst, const float *src, size_t full_cols,
                         const struct pl_tp_rect *q)
{
    if (q->cols == full_cols) {
        pl_copy(dst, src + q->row0 * full_cols, q->rows * q->cols);
        return;
    }
    for (size_t i = 0; i < q->rows; i++)
        pl_copy(dst + i * q->cols, src + (q->row0 + i) * full_cols + q->col0, q->cols);
}

void pl_tp_copy_rect_in(float *dst, size_t full_cols, const float *src,
                        const struct pl_tp_rect *q)
{
    if (q->cols == full_cols) {
        pl_copy(dst + q->row0 * full_cols, src, q->rows * q->cols);
        return;
    }
    for (size_t i = 0; i < q->rows; i++)
        pl_copy(dst + (q->row0 + i) * full_cols + q->col0, src + i * q->cols, q->cols);
}

typedef void (*rect_fn)(const struct pl_tp_tensor *d, const struct pl_tp_rect *q,
                        size_t shard_at, void *arg);

/* Calls fn on each block of the n tensors d that rank r holds, with where it starts in the
 * shard. */
static void for_rects(const struct pl_tp_tensor *d, int n, int t, int r, rect_fn fn, void *arg)
{
    PL_REQUIRE(r >= 0 && r < t, "TP rank %d is not in [0, %d)", r, t);
    for (int i = 0; i < n; i++) {
        struct pl_tp_rect q[PL_TP_MAX_RECTS];
        int nq = pl_tp_tensor_rects(&d[i], t, r, q);
        size_t at = d[i].shard_offset;
        for (int k = 0; k < nq; k++) {
            fn(&d[i], &q[k], at, arg);
            at += q[k].rows * q[k].cols;
        }
    }
}

static void each_rect(const struct pl_model_config *c, int layer, int t, int r, rect_fn fn,
                      void *arg)
{
    struct pl_tp_tensor d[PL_TP_BLOCK_TENSORS];
    pl_tp_block_tensors(c, layer, t, d);
    for_rects(d, PL_TP_BLOCK_TENSORS, t, r, fn, arg);
}

struct copy_arg {
    const float *src;
    float *dst;
};

static void slice_one(const struct pl_tp_tensor *d, const struct pl_tp_rect *q, size_t at,
                      void *arg)
{
    struct copy_arg *a = arg;
    pl_tp_copy_rect_out(a->dst + at, a->src + d->full_offset, d->cols, q);
}

static void unslice_one(const struct pl_tp_tensor *d, const struct pl_tp_rect *q, size_t at,
                        void *arg)
{
    struct copy_arg *a = arg;
    pl_tp_copy_rect_in(a->dst + d->full_offset, d->cols, a->src + at, q);
}

void pl_tp_block_slice(const struct pl_model_config *c, int t, int r, const float *full,
                       float *shard)
{
    struct copy_arg a = {full, shard};
    each_rect(c, 0, t, r, slice_one, &a);
}

void pl_tp_block_unslice(const struct pl_model_config *c, int t, int r, const float *shard,
                         float *full)
{
    struct copy_arg a = {shard, full};
    each_rect(c, 0, t, r, unslice_one, &a);
}

struct init_arg {
    const struct pl_model_layout *lay;
    float *shard;
};

/* Row by row: element (i, j) of the block draws the full tensor's index of its place. */
static void init_one(const struct pl_tp_tensor *d, const struct pl_tp_rect *q, size_t at,
                     void *arg)
{
    struct init_arg *a = arg;
    const struct pl_param_desc *p = pl_model_find_param(a->lay, d->name);
    PL_REQUIRE(p, "the model has no tensor %s", d->name);
    for (size_t i = 0; i < q->rows; i++)
        pl_model_init_param_slice(a->lay, p, (q->row0 + i) * d->cols + q->col0, q->cols,
                                  a->shard + at + i * q->cols);
}

void pl_tp_block_init(const struct pl_model_layout *lay, int layer, int t, int r, float *shard)
{
    PL_REQUIRE(layer >= 0 && layer < lay->cfg.n_layers, "block %d is not in [0, %d)", layer,
               lay->cfg.n_layers);
    struct init_arg a = {lay, shard};
    each_rect(&lay->cfg, layer, t, r, init_one, &a);
}

/* ---- the whole model ---- */

int pl_tp_model_ntensors(const struct pl_model_config *c)
{
    return 5 + PL_TP_BLOCK_TENSORS * c->n_layers;
}

int pl_tp_model_tensors(const struct pl_model_layout *lay, int t, struct pl_tp_tensor *out)
{
    const struct pl_model_config *c = &lay->cfg;
    int n = pl_tp_model_ntensors(c);
    PL_REQUIRE(lay->n_tensors == n, "tensor parallelism here splits the dense model (%d "
               "tensors in the layout, %d expected; set n_experts to 0)", lay->n_tensors, n);
    struct pl_tp_tensor blk[PL_TP_BLOCK_TENSORS];
    pl_tp_block_tensors(c, 0, t, blk);
    size_t shard = 0;
    for (int i = 0; i < n; i++) {
        const struct pl_param_desc *p = &lay->tensors[i];
        struct pl_tp_tensor *d = &out[i];
        memset(d, 0, sizeof *d);
        snprintf(d->name, sizeof d->name, "%s", p->name);
        d->rows = (size_t)p->shape[0];
        d->cols = p->ndim == 2 ? (size_t)p->shape[1] : 1;
        d->groups = 1;
        d->decay = p->decay;
        if (i >= 2 && i < n - 3) {
            const struct pl_tp_tensor *b = &blk[(i - 2) % PL_TP_BLOCK_TENSORS];
            d->split = b->split;
            d->groups = b->groups;
        } else {
            /* the token embedding and the LM head split by vocabulary rows */
            d->split = !strcmp(p->name, "wte") || !strcmp(p->name, "head.w") ? PL_TP_ROWS
                                                                             : PL_TP_REPLICATED;
        }
        d->full_offset = p->offset;
        d->shard_offset = shard;
        d->shard_numel = d->split == PL_TP_REPLICATED ? p->numel : p->numel / (size_t)t;
        shard += d->shard_numel;
    }
    return n;
}

size_t pl_tp_model_numel(const struct pl_model_layout *lay, int t)
{
    int n = pl_tp_model_ntensors(&lay->cfg);
    struct pl_tp_tensor *d = pl_mem_alloc((size_t)n * sizeof *d, PL_MEM_WORK, PL_HOST, "tp t");
    pl_tp_model_tensors(lay, t, d);
    size_t numel = d[n - 1].shard_offset + d[n - 1].shard_numel;
    pl_mem_free(d);
    return numel;
}

/* fn over every block of every tensor of the model that rank r holds. */
static void model_rects(const struct pl_model_layout *lay, int t, int r, rect_fn fn, void *arg)
{
    char err[256];
    if (pl_tp_degree_error(&lay->cfg, t, err, sizeof err)) pl_usage_error("%s", err);
    int n = pl_tp_model_ntensors(&lay->cfg);
    struct pl_tp_tensor *d = pl_mem_alloc((size_t)n * sizeof *d, PL_MEM_WORK, PL_HOST, "tp t");
    pl_tp_model_tensors(lay, t, d);
    for_rects(d, n, t, r, fn, arg);
    pl_mem_free(d);
}

void pl_tp_model_slice(const struct pl_model_layout *lay, int t, int r, const float *full,
                       float *shard)
{
    struct copy_arg a = {full, shard};
    model_rects(lay, t, r, slice_one, &a);
}

void pl_tp_model_init(const struct pl_model_layout *lay, int t, int r, float *shard)
{
    struct init_arg a = {lay, shard};
    model_rects(lay, t, r, init_one, &a);
}

/* ---- activations ---- */

static float *activ(size_t n, const char *label)
{
    return pl_mem_alloc(n * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, label);
}

void pl_tp_block_acts_new(struct pl_tp_block_acts *a, const struct pl_model_config *c, int t,
                          int B, int T)
{
    char err[256];
    if (pl_tp_degree_error(c, t, err, sizeof err)) pl_usage_error("%s", err);
    PL_REQUIRE(B > 0 && T > 0 && T <= c->seq_len, "B=%d sequences of T=%d tokens (need B >= 1 "
               "and 1 <= T <= seq_len=%d)", B, T, c->seq_len);
    memset(a, 0, sizeof *a);
    size_t N = (size_t)B * T, C = (size_t)c->d_model, F = (size_t)c->d_ff;
    size_t nh = (size_t)(c->n_heads / t);
    struct pl_tp_attn_acts *at = &a->attn;
    struct pl_tp_mlp_acts *m = &a->mlp;
    at->B = m->B = B;
    at->T = m->T = T;
    at->t = m->t = t;
    at->x = activ(N * C, "tp attn x");
    at->ln = activ(N * C, "tp attn ln1");
    at->mean = activ(N, "tp attn ln1 mean");
    at->rstd = activ(N, "tp attn ln1 rstd");
    at->qkv = activ(N * 3 * C / (size_t)t, "tp attn qkv");
    at->att = activ((size_t)B * nh * (size_t)T * (size_t)T, "tp attn scores");
    at->y = activ(N * C / (size_t)t, "tp attn heads");
    m->x = activ(N * C, "tp mlp x");
    m->ln = activ(N * C, "tp mlp ln2");
    m->mean = activ(N, "tp mlp ln2 mean");
    m->rstd = activ(N, "tp mlp ln2 rstd");
    m->h = activ(N * F / (size_t)t, "tp mlp fc");
    m->g = activ(N * F / (size_t)t, "tp mlp gelu");
}

void pl_tp_block_acts_free(struct pl_tp_block_acts *a)
{
    float *p[] = {a->attn.x, a->attn.ln, a->attn.mean, a->attn.rstd, a->attn.qkv, a->attn.att,
                  a->attn.y, a->mlp.x,   a->mlp.ln,   a->mlp.mean,  a->mlp.rstd, a->mlp.h,
                  a->mlp.g};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) pl_mem_free(p[i]);
    memset(a, 0, sizeof *a);
}

double pl_tp_block_act_bytes(const struct pl_model_config *c, int t, int B, int T)
{
    double N = (double)B * T, C = c->d_model, F = c->d_ff, nh = (double)(c->n_heads / t);
    double replicated = 4 * N * C + 4 * N;                   /* x, ln twice; mean, rstd */
    double split = 3 * N * C / t + B * nh * T * T + N * C / t + 2 * N * F / t;
    return 4.0 * (replicated + split);
}

/* ---- the row-broadcast bias ---- */

void pl_tp_add_bias(float *y, const float *b, int N, int OC)
{
    PL_REQUIRE(N > 0 && OC > 0, "pl_tp_add_bias: N=%d rows of OC=%d (both must be positive)",
               N, OC);
    /* y += ones[N,1] @ b[1,OC]: a rank-1 product, so it runs through the kit's sgemm on
     * the host or the device alike. */
    float *ones = pl_mem_alloc((size_t)N * sizeof *ones, PL_MEM_WORK, PL_DEVICE, "tp ones");
    float *h = pl_mem_alloc((size_t)N * sizeof *h, PL_MEM_WORK, PL_HOST, "tp ones host");
    for (int i = 0; i < N; i++) h[i] = 1.0f;
    pl_to_device(ones, h, (size_t)N * sizeof *h);
    pl_sgemm(0, 0, N, OC, 1, 1.0f, ones, 1, b, OC, 1.0f, y, OC);
    pl_mem_free(h);
    pl_mem_free(ones);
}

/* ---- the vocabulary-parallel cross-entropy ---- */

void pl_tp_head_acts_new(struct pl_tp_head_acts *a, const struct pl_model_config *c, int t,
                         int B, int T)
{
    char err[256];
    if (pl_tp_degree_error(c, t, err, sizeof err)) pl_usage_error("%s", err);
    PL_REQUIRE(B > 0 && T > 0 && T <= c->seq_len, "B=%d sequences of T=%d tokens (need B >= 1 "
               "and 1 <= T <= seq_len=%d)", B, T, c->seq_len);
    size_t N = (size_t)B * T;
    a->B = B;
    a->T = T;
    a->t = t;
    a->logits = activ(N * (size_t)(c->vocab / t), "tp head logits");
    a->shift = activ(N, "tp head row max");
    a->sumexp = activ(N, "tp head sum exp");
    a->target_logit = activ(N, "tp head target logit");
}

void pl_tp_head_acts_free(struct pl_tp_head_acts *a)
{
    float *p[] = {a->logits, a->shift, a->sumexp, a->target_logit};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) pl_mem_free(p[i]);
    memset(a, 0, sizeof *a);
}

/* Host views of op memory: the memory itself on the CPU build; on the GPU build a staging
 * copy, transient and not counted by the memory ledger (it measures what an algorithm
 * holds, and these few rows are the helpers' way around having no kernel). */
static float *to_host_f(const float *x, size_t n)
{
#ifdef PL_GPU
    float *h = malloc((n ? n : 1) * sizeof *h);
    PL_REQUIRE(h, "out of host memory staging %zu floats", n);
    pl_to_host(h, x, n * sizeof *h);
    return h;
#else
    (void)n;
    return (float *)x;
#endif
}

static int *to_host_i(const int *x, size_t n)
{
#ifdef PL_GPU
    int *h = malloc((n ? n : 1) * sizeof *h);
    PL_REQUIRE(h, "out of host memory staging %zu ids", n);
    pl_to_host(h, x, n * sizeof *h);
    return h;
#else
    (void)n;
    return (int *)x;
#endif
}

/* Ends a view: written back to x when x is given. */
static void host_done(void *h, void *x, size_t bytes)
{
#ifdef PL_GPU
    if (x) pl_to_device(x, h, bytes);
    free(h);
#else
    (void)h;
    (void)x;
    (void)bytes;
#endif
}

void pl_tp_row_max(float *max, const float *logits, int N, int V)
{
    PL_REQUIRE(N > 0 && V > 0, "pl_tp_row_max: N=%d rows of V=%d (both must be positive)", N, V);
    float *l = to_host_f(logits, (size_t)N * V), *m = to_host_f(max, (size_t)N);
    for (int n = 0; n < N; n++) {
        m[n] = l[(size_t)n * V];
        for (int j = 1; j < V; j++) m[n] = fmaxf(m[n], l[(size_t)n * V + j]);
    }
    host_done(l, NULL, 0);
    host_done(m, max, (size_t)N * sizeof *m);
}

void pl_tp_max_of_blocks(float *out, const float *blocks, int nblocks, int N)
{
    PL_REQUIRE(nblocks > 0 && N > 0, "pl_tp_max_of_blocks: %d blocks of N=%d", nblocks, N);
    float *b = to_host_f(blocks, (size_t)nblocks * N), *o = to_host_f(out, (size_t)N);
    for (int n = 0; n < N; n++) {
        o[n] = b[n];
        for (int k = 1; k < nblocks; k++) o[n] = fmaxf(o[n], b[(size_t)k * N + n]);
    }
    host_done(b, NULL, 0);
    host_done(o, out, (size_t)N * sizeof *o);
}

void pl_tp_row_sumexp(float *sum, const float *logits, const float *shift, int N, int V)
{
    PL_REQUIRE(N > 0 && V > 0, "pl_tp_row_sumexp: N=%d rows of V=%d", N, V);
    float *l = to_host_f(logits, (size_t)N * V), *sh = to_host_f(shift, (size_t)N);
    float *s = to_host_f(sum, (size_t)N);
    for (int n = 0; n < N; n++) {
        double acc = 0;
        for (int j = 0; j < V; j++) acc += exp((double)l[(size_t)n * V + j] - sh[n]);
        s[n] = (float)acc;
    }
    pl_ledger_add_flops(2.0 * N * V);
    host_done(l, NULL, 0);
    host_done(sh, NULL, 0);
    host_done(s, sum, (size_t)N * sizeof *s);
}

void pl_tp_pick_target(float *out, const float *logits, const int *targets, int v0, int N,
                       int V)
{
    PL_REQUIRE(N > 0 && V > 0, "pl_tp_pick_target: N=%d rows of V=%d", N, V);
    float *l = to_host_f(logits, (size_t)N * V), *o = to_host_f(out, (size_t)N);
    int *tg = to_host_i(targets, (size_t)N);
    for (int n = 0; n < N; n++) {
        int j = tg[n] - v0;
        o[n] = j >= 0 && j < V ? l[(size_t)n * V + j] : 0.0f;
    }
    host_done(l, NULL, 0);
    host_done(tg, NULL, 0);
    host_done(o, out, (size_t)N * sizeof *o);
}

double pl_tp_xent_mean(const float *shift, const float *sumexp, const float *target_logit,
                       int N)
{
    PL_REQUIRE(N > 0, "pl_tp_xent_mean: N=%d rows", N);
    float *sh = to_host_f(shift, (size_t)N), *s = to_host_f(sumexp, (size_t)N);
    float *tl = to_host_f(target_logit, (size_t)N);
    double acc = 0;
    for (int n = 0; n < N; n++) acc += log((double)s[n]) + sh[n] - tl[n];
    host_done(sh, NULL, 0);
    host_done(s, NULL, 0);
    host_done(tl, NULL, 0);
    return acc / N;
}

void pl_tp_xent_backward(float *dlogits, const float *logits, const float *shift,
                         const float *sumexp, const int *targets, int v0, float dloss, int N,
                         int V)
{
    PL_REQUIRE(N > 0 && V > 0, "pl_tp_xent_backward: N=%d rows of V=%d", N, V);
    size_t nv = (size_t)N * V;
    float *d = to_host_f(dlogits, nv), *l = to_host_f(logits, nv);
    float *sh = to_host_f(shift, (size_t)N), *s = to_host_f(sumexp, (size_t)N);
    int *tg = to_host_i(targets, (size_t)N);
    for (int n = 0; n < N; n++)
        for (int j = 0; j < V; j++) {
            double p = exp((double)l[(size_t)n * V + j] - sh[n]) / s[n];
            d[(size_t)n * V + j] += (float)(dloss * (p - (j == tg[n] - v0)));
        }
    pl_ledger_add_flops(3.0 * N * V);
    host_done(l, NULL, 0);
    host_done(sh, NULL, 0);
    host_done(s, NULL, 0);
    host_done(tg, NULL, 0);
    host_done(d, dlogits, nv * sizeof *d);
}
