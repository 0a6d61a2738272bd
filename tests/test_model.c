/* test_model: the reference model of lib/model.h.
 *   - every parameter gradient of the dense and the MoE model against central finite
 *     differences of the loss (summed in double) on a tiny config with random parameters;
 *   - the MoE half's forward against a double-precision host computation of the routing
 *     rules, including capacity drops and tokens that pass through the residual only;
 *   - layout, and initialisation of slices and flat shards bit for bit against the full one;
 *   - the block-level surface chained by hand equals the whole-model passes bit for bit;
 *   - the backward hook: once per part, in reverse order, with that part's gradients final;
 *   - gradient accumulation over two half batches equals the full batch (dropout included);
 *   - AdamW training lowers the loss clearly, deterministically; memory ledger categories.
 * Modes:
 *   test_model                             all checks
 *   test_model bad-heads|bad-topk|zero-size   a bad config on purpose (exit 2)
 *   test_model adam-t0|backward-first|shard-past-end|part-past-head   a misuse of the model's
 *                                          calls a student can make (exit 2, a teaching error)
 *   test_model --dump FILE [--moe] [--flat] [--std S]   writes the model, a batch, its loss, logits and
 *                                          gradients for tests/torch_ref.py, format:
 *       "PLMODEL1" | int32 version=1 | int32 vocab d_model n_layers n_heads d_ff seq_len
 *       n_experts top_k B | float32 capacity_factor aux_loss_coef | int32 n_tensors |
 *       per tensor: char name[64], int32 ndim, int32 shape[4], float32 value[numel],
 *       float32 grad[numel] | int32 tokens[B*T] | int32 targets[B*T] |
 *       float64 loss loss_ce loss_aux | float32 logits[B*T*V]      (little-endian) */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "ops.h"
#include "paralab.h"
#include "testing.h"


/* Finite differences: 4-point central stencil, error O(h^4) from truncation and about
 * 1.5 * (fp32 rounding of the loss) / h from the forward running in fp32. */
#define FD_H 1e-2
#define FD_ATOL 5e-5
#define FD_RTOL 1e-3
/* Two fp32 computations of the same quantity that sum in a different order. */
#define FP32_REL 1e-5

/* ---- helpers ------------------------------------------------------------------------------ */

static float *to_host(const float *dev, size_t n)
{
    float *h = malloc((n ? n : 1) * sizeof *h);
    PL_ASSERT(h);
    pl_to_host(h, dev, n * sizeof *h);
    return h;
}

static int *ints_to_device(const int *h, size_t n)
{
    int *d = pl_mem_alloc(n * sizeof *d, PL_MEM_ACTIV, PL_DEVICE, "test tokens");
    pl_to_device(d, h, n * sizeof *d);
    return d;
}

static void set_param(struct pl_model *m, size_t i, float v)
{
    pl_to_device(m->params + i, &v, sizeof v);
}

static struct pl_model_config tiny_dense(void)
{
    struct pl_model_config c = pl_model_config_default();
    c.vocab = 11;
    c.d_model = 8;
    c.n_layers = 2;
    c.n_heads = 2;
    c.d_ff = 12;
    c.seq_len = 5;
    c.seed = 7;
    return c;
}

/* cf 0.75 leaves 16 slots for 20 choices: drops are certain */
static struct pl_model_config tiny_moe(void)
{
    struct pl_model_config c = tiny_dense();
    c.n_experts = 4;
    c.top_k = 2;
    c.capacity_factor = 0.75f;
    c.aux_loss_coef = 0.1f;
    return c;
}

/* Random batch: tokens and targets in [0, vocab), from the counter-based RNG. */
static void make_batch(const struct pl_model_config *c, int B, uint64_t seed, int *tok,
                       int *tgt)
{
    random_batch(c->vocab, (size_t)B * c->seq_len, seed, tok, tgt);
}

/* Parameters far from the initial point (layernorm weights near 1, everything else
 * O(0.3)), so every path carries a gradient well above the finite-difference noise. */
/* Every parameter drawn around its init's mean (1 for layernorm weights, else 0) with
 * standard deviation std, the embeddings (wte, wpe) with embed_std. */
static void randomize_params_std(struct pl_model *m, uint64_t seed, float std, float embed_std)
{
    const struct pl_model_layout *lay = &m->layout;
    float *h = malloc(lay->numel * sizeof *h);
    PL_ASSERT(h);
    for (int i = 0; i < lay->n_tensors; i++) {
        const struct pl_param_desc *d = &lay->tensors[i];
        int embedding = !strcmp(d->name, "wte") || !strcmp(d->name, "wpe");
        pl_rng_fill_normal(h + d->offset, d->numel, seed, pl_rng_stream(d->name), 0,
                           d->init == PL_INIT_ONES ? 1.0f : 0.0f, embedding ? embed_std : std);
    }
    pl_to_device(m->params, h, lay->numel * sizeof *h);
    free(h);
}

static void randomize_params(struct pl_model *m, uint64_t seed)
{
    randomize_params_std(m, seed, 0.3f, 0.3f);
}

static double rel_l2(const float *a, const float *b, size_t n) { return pl_rel_l2(a, b, n); }

/* ---- config validation ------------------------------------------------------------------------ */

static void test_config_errors(void)
{
    char buf[512];
    struct pl_model_config c = tiny_dense();
    CHECK(pl_model_config_error(&c, buf, sizeof buf) == NULL, "tiny config rejected: %s", buf);
    c = tiny_moe();
    CHECK(pl_model_config_error(&c, buf, sizeof buf) == NULL, "tiny MoE rejected: %s", buf);

    c = tiny_dense();
    c.d_model = 50;
    c.n_heads = 4;
    const char *e = pl_model_config_error(&c, buf, sizeof buf);
    CHECK(e && strstr(e, "d_model=50 is not divisible by n_heads=4 (choose n_heads in "
                         "{1,2,5,10,25,50})"),
          "d_model=50/n_heads=4 message: %s", e ? e : "(accepted)");
    c = tiny_moe();
    c.top_k = 5;
    e = pl_model_config_error(&c, buf, sizeof buf);
    CHECK(e && strstr(e, "top_k=5") && strstr(e, "n_experts=4"), "top_k > n_experts: %s",
          e ? e : "(accepted)");
    const char *names[] = {"vocab", "d_model", "n_layers", "n_heads", "d_ff", "seq_len"};
    for (int i = 0; i < 6; i++) {
        c = tiny_dense();
        int *f[] = {&c.vocab, &c.d_model, &c.n_layers, &c.n_heads, &c.d_ff, &c.seq_len};
        *f[i] = 0;
        char want[64];
        snprintf(want, sizeof want, "%s=0 must be positive", names[i]);
        e = pl_model_config_error(&c, buf, sizeof buf);
        CHECK(e && strstr(e, want), "zero %s: got %s", names[i], e ? e : "(accepted)");
    }
    c = tiny_dense();
    c.dropout = 1.0f;
    CHECK(pl_model_config_error(&c, buf, sizeof buf) != NULL, "dropout=1 accepted");
    c = tiny_moe();
    c.capacity_factor = 0.0f;
    CHECK(pl_model_config_error(&c, buf, sizeof buf) != NULL, "capacity_factor=0 accepted");
    c = tiny_moe();
    pl_model_config_describe(&c, buf, sizeof buf);
    CHECK(strstr(buf, "d_model=8") && strstr(buf, "n_experts=4 top_k=2"), "describe: %s", buf);
    c = tiny_dense();
    pl_model_config_describe(&c, buf, sizeof buf);
    CHECK(strstr(buf, "n_layers=2") && !strstr(buf, "n_experts"), "describe dense: %s", buf);
    c.top_k = 99; /* ignored by a dense model */
    CHECK(pl_model_config_error(&c, buf, sizeof buf) == NULL, "dense model checks top_k");
}

/* ---- layout and initialisation --------------------------------------------------------------- */

static void test_layout(const struct pl_model_config *c)
{
    struct pl_model *m = pl_model_new(c, PL_MODEL_PARAMS);
    const struct pl_model_layout *lay = &m->layout;
    size_t next = 0;
    int part = PL_PART_EMBED;
    for (int i = 0; i < lay->n_tensors; i++) {
        const struct pl_param_desc *d = &lay->tensors[i];
        CHECK(d->offset == next, "%s at offset %zu, expected %zu (contiguous)", d->name,
              d->offset, next);
        size_t numel = 1;
        for (int k = 0; k < d->ndim; k++) numel *= (size_t)d->shape[k];
        CHECK(numel == d->numel, "%s: numel %zu != product of shape %zu", d->name, d->numel,
              numel);
        CHECK(d->part >= part, "%s: part %d after part %d", d->name, d->part, part);
        part = d->part;
        size_t off, n;
        pl_model_part_range(lay, d->part, &off, &n);
        CHECK(d->offset >= off && d->offset + d->numel <= off + n,
              "%s outside its part %d range [%zu, %zu)", d->name, d->part, off, off + n);
        CHECK(pl_model_find_param(lay, d->name) == d, "find_param(%s)", d->name);
        next += d->numel;
    }
    CHECK(next == lay->numel, "tensors cover %zu of %zu", next, lay->numel);
    size_t off, n;
    pl_model_part_range(lay, c->n_layers, &off, &n);
    CHECK(off + n == lay->numel, "head range ends at %zu, numel %zu", off + n, lay->numel);

    /* the views point where the table says */
    char name[PL_NAME_LEN];
    for (int l = 0; l < c->n_layers; l++) {
        const struct pl_block_params *b = &m->blocks[l];
        struct {
            const char *suffix;
            const float *p;
        } v[] = {{"ln1.w", b->ln1_w},         {"attn.w_qkv", b->w_qkv},
                 {"attn.b_proj", b->b_proj},  {"ln2.b", b->ln2_b},
                 {c->n_experts ? "moe.w_fc" : "mlp.w_fc", b->w_fc},
                 {c->n_experts ? "moe.b_proj" : "mlp.b_proj", b->b_fc2}};
        for (size_t k = 0; k < sizeof v / sizeof *v; k++) {
            snprintf(name, sizeof name, "h.%d.%s", l, v[k].suffix);
            const struct pl_param_desc *d = pl_model_find_param(lay, name);
            CHECK(d && v[k].p == m->params + d->offset, "view of %s", name);
        }
        if (c->n_experts) {
            snprintf(name, sizeof name, "h.%d.moe.w_router", l);
            const struct pl_param_desc *d = pl_model_find_param(lay, name);
            CHECK(d && b->w_router == m->params + d->offset, "view of %s", name);
        }
    }
    const struct pl_param_desc *d = pl_model_find_param(lay, "head.w");
    CHECK(d && m->head.w_head == m->params + d->offset, "view of head.w");
    d = pl_model_find_param(lay, "wpe");
    CHECK(d && m->embed.wpe == m->params + d->offset, "view of wpe");

    /* parameter count from the architecture's formula */
    size_t C = (size_t)c->d_model, F = (size_t)c->d_ff, V = (size_t)c->vocab;
    size_t E = (size_t)c->n_experts;
    size_t mlp = E ? E * C + E * (F * C + F + C * F + C) : F * C + F + C * F + C;
    size_t block = 4 * C + 3 * C * C + 3 * C + C * C + C + mlp;
    size_t want = V * C + (size_t)c->seq_len * C + c->n_layers * block + 2 * C + V * C;
    CHECK(lay->numel == want && lay->block_numel == block, "numel %zu (block %zu), want %zu (%zu)",
          lay->numel, lay->block_numel, want, block);
    pl_model_free(m);
}

static void test_init_shards(const struct pl_model_config *c)
{
    struct pl_model *m = pl_model_new(c, PL_MODEL_PARAMS);
    const struct pl_model_layout *lay = &m->layout;
    float *full = to_host(m->params, lay->numel);
    float *buf = pl_mem_alloc(lay->numel * sizeof(float), PL_MEM_WORK, PL_DEVICE, "shard");

    /* each tensor in three uneven slices */
    int bad = 0;
    for (int i = 0; i < lay->n_tensors; i++) {
        const struct pl_param_desc *d = &lay->tensors[i];
        size_t cut[4] = {0, d->numel / 3, d->numel / 3 + (d->numel + 1) / 4, d->numel};
        for (int s = 0; s < 3; s++) {
            size_t n = cut[s + 1] - cut[s];
            pl_model_init_param_slice(lay, d, cut[s], n, buf);
            float *got = to_host(buf, n);
            if (memcmp(got, full + d->offset + cut[s], n * sizeof(float))) {
                bad++;
                printf("FAIL slice [%zu, %zu) of %s differs from the full init\n", cut[s],
                       cut[s + 1], d->name);
            }
            free(got);
        }
    }
    CHECK(bad == 0, "%d tensor slices differ from the full initialisation", bad);

    /* the flat buffer in 2, 3 and 7 shards (uneven: ZeRO padding sizes) */
    const int shards[] = {2, 3, 7};
    for (int k = 0; k < 3; k++) {
        size_t per = (lay->numel + shards[k] - 1) / shards[k];
        for (int r = 0; r < shards[k]; r++) {
            size_t lo = (size_t)r * per, hi = lo + per < lay->numel ? lo + per : lay->numel;
            if (lo >= hi) continue;
            pl_model_init_flat(lay, lo, hi - lo, buf);
            float *got = to_host(buf, hi - lo);
            CHECK(!memcmp(got, full + lo, (hi - lo) * sizeof(float)),
                  "flat shard %d of %d [%zu, %zu) differs from the full init", r, shards[k], lo,
                  hi);
            free(got);
        }
    }

    /* values: layernorm weights 1, biases 0, weights with the stated std */
    for (int i = 0; i < lay->n_tensors; i++) {
        const struct pl_param_desc *d = &lay->tensors[i];
        const float *v = full + d->offset;
        if (d->init != PL_INIT_NORMAL) {
            float want = d->init == PL_INIT_ONES ? 1.0f : 0.0f;
            int ok = 1;
            for (size_t j = 0; j < d->numel; j++) ok &= v[j] == want;
            CHECK(ok, "%s should be all %g", d->name, want);
            continue;
        }
        if (d->numel < 64) continue;
        double s2 = 0;
        for (size_t j = 0; j < d->numel; j++) s2 += (double)v[j] * v[j];
        double std = sqrt(s2 / d->numel);
        CHECK(fabs(std - d->std) < 0.3 * d->std, "%s: std %.4f, want %.4f", d->name, std,
              d->std);
    }
    /* another seed, other numbers */
    struct pl_model_config c2 = *c;
    c2.seed = c->seed + 1;
    struct pl_model *m2 = pl_model_new(&c2, PL_MODEL_PARAMS);
    float *other = to_host(m2->params, lay->numel);
    CHECK(memcmp(other, full, lay->embed_numel * sizeof(float)) != 0,
          "seed %llu and %llu give the same embedding", (unsigned long long)c->seed,
          (unsigned long long)c2.seed);
    free(other);
    pl_model_free(m2);
    free(full);
    pl_mem_free(buf);
    pl_model_free(m);
}

static void test_memory(const struct pl_model_config *c)
{
    struct pl_mem_stats s0, s1, s2;
    pl_mem_get_stats(&s0);
    struct pl_model *m = pl_model_new(c, PL_MODEL_PARAMS | PL_MODEL_GRADS);
    pl_mem_get_stats(&s1);
    size_t psi = m->layout.numel * sizeof(float);
    CHECK(s1.current[PL_MEM_PARAMS] - s0.current[PL_MEM_PARAMS] == psi,
          "params: %zu bytes, want 4 x %zu", s1.current[PL_MEM_PARAMS] - s0.current[PL_MEM_PARAMS],
          m->layout.numel);
    CHECK(s1.current[PL_MEM_GRADS] - s0.current[PL_MEM_GRADS] == psi, "grads: %zu bytes, want %zu",
          s1.current[PL_MEM_GRADS] - s0.current[PL_MEM_GRADS], psi);
    CHECK(s1.current[PL_MEM_OPTIM] == s0.current[PL_MEM_OPTIM], "optimizer state before a step");
    int *tok = malloc(2 * c->seq_len * sizeof *tok), *tgt = malloc(2 * c->seq_len * sizeof *tgt);
    make_batch(c, 2, 3, tok, tgt);
    int *dtok = ints_to_device(tok, 2 * c->seq_len), *dtgt = ints_to_device(tgt, 2 * c->seq_len);
    struct pl_adamw_config opt = pl_adamw_config_default();
    pl_model_step(m, dtok, dtgt, 2, &opt, NULL);
    pl_mem_get_stats(&s2);
    CHECK(s2.current[PL_MEM_OPTIM] - s0.current[PL_MEM_OPTIM] == 2 * psi,
          "optim after a step: %zu bytes, want 8 x %zu",
          s2.current[PL_MEM_OPTIM] - s0.current[PL_MEM_OPTIM], m->layout.numel);
    CHECK(s2.current[PL_MEM_ACTIV] > s0.current[PL_MEM_ACTIV], "activations held after a step");
    pl_model_free_acts(m);
    pl_mem_get_stats(&s2);
    CHECK(s2.current[PL_MEM_ACTIV] == s0.current[PL_MEM_ACTIV] + 2 * 2 * c->seq_len * sizeof(int),
          "activations left after pl_model_free_acts: %zu bytes",
          s2.current[PL_MEM_ACTIV] - s0.current[PL_MEM_ACTIV]);
    CHECK(s2.current[PL_MEM_WORK] == s1.current[PL_MEM_WORK],
          "workspace after a step: %zu bytes, before it %zu (scratch not freed)",
          s2.current[PL_MEM_WORK], s1.current[PL_MEM_WORK]);
    pl_mem_free(dtok);
    pl_mem_free(dtgt);
    free(tok);
    free(tgt);
    pl_model_free(m);
}

/* ---- finite differences ------------------------------------------------------------------------ */

/* Host copy of the routing decisions of every MoE block, to see whether a perturbation
 * moved a token to another expert (the loss is not differentiable there). */
static size_t routing_bytes(const struct pl_model *m)
{
    if (!m->cfg.n_experts) return 0;
    const struct pl_moe_routing *r = m->acts[0].mlp.route;
    return (size_t)m->cfg.n_layers * r->N * r->k * 2 * sizeof(int);
}

static void routing_snapshot(const struct pl_model *m, int *out)
{
    for (int l = 0; l < m->cfg.n_layers && m->cfg.n_experts; l++) {
        const struct pl_moe_routing *r = m->acts[l].mlp.route;
        size_t nk = (size_t)r->N * r->k;
        memcpy(out, r->expert, nk * sizeof(int));
        memcpy(out + nk, r->slot, nk * sizeof(int));
        out += 2 * nk;
    }
}

static void test_fd(const struct pl_model_config *c, const char *what)
{
    const int B = 2, N = B * c->seq_len;
    struct pl_model *m = pl_model_new(c, PL_MODEL_PARAMS | PL_MODEL_GRADS);
    randomize_params(m, 99);
    int *tok = malloc(N * sizeof *tok), *tgt = malloc(N * sizeof *tgt);
    make_batch(c, B, 5, tok, tgt);
    int *dtok = ints_to_device(tok, N), *dtgt = ints_to_device(tgt, N);

    pl_model_zero_grad(m);
    double loss0 = pl_model_forward(m, dtok, dtgt, B, NULL);
    pl_model_backward(m, NULL);
    CHECK(isfinite(loss0) && loss0 > 0, "%s: loss %g", what, loss0);
    if (c->n_experts) {
        long dropped = 0;
        for (int l = 0; l < c->n_layers; l++) dropped += m->acts[l].mlp.route->dropped;
        CHECK(dropped > 0, "%s: the FD config should drop some choices for capacity", what);
        CHECK(m->loss_aux > 0, "%s: aux loss %g", what, m->loss_aux);
    }
    size_t rb = routing_bytes(m);
    int *route0 = malloc(rb + 1), *route1 = malloc(rb + 1);
    routing_snapshot(m, route0);

    const struct pl_model_layout *lay = &m->layout;
    float *p = to_host(m->params, lay->numel), *g = to_host(m->grads, lay->numel);
    long skipped = 0, bad = 0;
    double worst = 0;
    for (int ti = 0; ti < lay->n_tensors; ti++) {
        const struct pl_param_desc *d = &lay->tensors[ti];
        double tensor_worst = 0;
        size_t worst_j = 0;
        double worst_fd = 0, worst_g = 0;
        for (size_t j = 0; j < d->numel; j++) {
            size_t i = d->offset + j;
            const double steps[4] = {-2, -1, 1, 2}, w[4] = {1, -8, 8, -1};
            double fd = 0;
            int moved = 0;
            for (int s = 0; s < 4; s++) {
                set_param(m, i, (float)(p[i] + steps[s] * FD_H));
                fd += w[s] * pl_model_forward(m, dtok, dtgt, B, NULL);
                if (rb) {
                    routing_snapshot(m, route1);
                    moved |= memcmp(route0, route1, rb) != 0;
                }
            }
            set_param(m, i, p[i]);
            if (moved) {
                skipped++;
                continue;
            }
            /* the actual steps are the fp32-rounded ones */
            double h = (double)(float)(p[i] + FD_H) - p[i];
            fd /= 12.0 * h;
            double err = fabs(g[i] - fd) / (FD_ATOL + FD_RTOL * fabs(fd));
            if (err > tensor_worst) {
                tensor_worst = err;
                worst_j = j;
                worst_fd = fd;
                worst_g = g[i];
            }
        }
        if (tensor_worst > 1) {
            bad++;
            printf("FAIL %s: grad of %s[%zu] = %.6g, finite differences %.6g (|diff| > %g + "
                   "%g |fd|)\n",
                   what, d->name, worst_j, worst_g, worst_fd, FD_ATOL, FD_RTOL);
        }
        if (tensor_worst > worst) worst = tensor_worst;
    }
    CHECK(bad == 0, "%s: %ld tensors with gradients off their finite differences", what, bad);
    CHECK(skipped * 20 < (long)lay->numel,
          "%s: %ld of %zu elements changed the routing under a step of %g", what, skipped,
          lay->numel, FD_H);
    printf("  %s: %zu gradients vs finite differences, worst at %.2f of the tolerance, %ld "
           "skipped (routing moved)\n",
           what, lay->numel, worst, skipped);
    free(p);
    free(g);
    free(route0);
    free(route1);
    free(tok);
    free(tgt);
    pl_mem_free(dtok);
    pl_mem_free(dtgt);
    pl_model_free(m);
}

/* ---- MoE forward against the rules in double ------------------------------------------------ */

static void ln_row(double *out, const float *x, const float *w, const float *b, int C)
{
    double mean = 0, var = 0;
    for (int i = 0; i < C; i++) mean += x[i];
    mean /= C;
    for (int i = 0; i < C; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= C;
    double rstd = 1.0 / sqrt(var + PL_LAYERNORM_EPS);
    for (int i = 0; i < C; i++) out[i] = (x[i] - mean) * rstd * w[i] + b[i];
}

static double gelu(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static void test_moe_reference(void)
{
    struct pl_model_config c = tiny_moe();
    c.capacity_factor = 0.5f; /* 12 slots for 20 choices: some tokens lose both */
    const int B = 2, T = c.seq_len, N = B * T, C = c.d_model, F = c.d_ff, E = c.n_experts;
    const int k = c.top_k;
    struct pl_model *m = pl_model_new(&c, PL_MODEL_PARAMS);
    randomize_params(m, 11);
    const struct pl_param_desc *d0 = pl_model_find_param(&m->layout, "h.0.ln1.w");
    float *p = to_host(m->params, m->layout.numel);
    struct pl_block_params hp;
    pl_block_bind(&c, p + d0->offset, &hp); /* host view of block 0 */

    float *x = malloc((size_t)N * C * sizeof *x);
    pl_rng_fill_normal(x, (size_t)N * C, 3, 4, 0, 0.0f, 1.0f);
    float *dx = pl_mem_alloc((size_t)N * C * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, "x");
    float *dy = pl_mem_alloc((size_t)N * C * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, "y");
    pl_to_device(dx, x, (size_t)N * C * sizeof *x);
    struct pl_mlp_acts a;
    pl_mlp_acts_new(&a, &c, B, T);
    pl_mlp_forward(&c, 0, &m->blocks[0], &a, NULL, dx, dy);
    float *y = to_host(dy, (size_t)N * C);
    const struct pl_moe_routing *r = a.route;
    const int want_cap = (int)ceil((double)c.capacity_factor * N * k / E);
    CHECK(a.cap == want_cap && r->cap == want_cap, "capacity %d, want ceil(%g * %d * %d / %d) = %d",
          a.cap, (double)c.capacity_factor, N, k, E, want_cap);

    /* routing in double from the same rules */
    double *ln = malloc((size_t)N * C * sizeof *ln), *probs = malloc((size_t)N * E * sizeof *probs);
    for (int t = 0; t < N; t++) {
        ln_row(ln + (size_t)t * C, x + (size_t)t * C, hp.ln2_w, hp.ln2_b, C);
        double mx = -1e300, sum = 0;
        for (int e = 0; e < E; e++) {
            double z = 0;
            for (int i = 0; i < C; i++) z += ln[(size_t)t * C + i] * hp.w_router[(size_t)e * C + i];
            probs[t * E + e] = z;
            mx = fmax(mx, z);
        }
        for (int e = 0; e < E; e++) sum += probs[t * E + e] = exp(probs[t * E + e] - mx);
        for (int e = 0; e < E; e++) probs[t * E + e] /= sum;
    }
    int count[16] = {0}, nkept[64] = {0};
    double f[16] = {0}, P[16] = {0};
    double *want = malloc((size_t)N * C * sizeof *want);
    for (size_t i = 0; i < (size_t)N * C; i++) want[i] = x[i];
    int choice[64][4];
    for (int t = 0; t < N; t++)
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int q = 0; q < j; q++) taken |= choice[t][q] == e;
                if (!taken && (best < 0 || probs[t * E + e] > probs[t * E + best])) best = e;
            }
            choice[t][j] = best;
            f[best] += 1.0 / (N * k);
        }
    for (int t = 0; t < N; t++)
        for (int e = 0; e < E; e++) P[e] += probs[t * E + e] / N;
    long dropped = 0;
    for (int j = 0; j < k; j++)
        for (int t = 0; t < N; t++) {
            int e = choice[t][j];
            CHECK(r->expert[t * k + j] == e, "token %d choice %d: expert %d, want %d", t, j,
                  r->expert[t * k + j], e);
            if (count[e] >= a.cap) {
                dropped++;
                CHECK(r->slot[t * k + j] == -1, "token %d choice %d should be dropped", t, j);
                continue;
            }
            CHECK(r->slot[t * k + j] == count[e], "token %d choice %d: slot %d, want %d", t, j,
                  r->slot[t * k + j], count[e]);
            count[e]++;
            nkept[t]++;
            /* expert e on token t, gated by its router probability */
            const float *w1 = hp.w_fc + (size_t)e * F * C, *b1 = hp.b_fc + (size_t)e * F;
            const float *w2 = hp.w_fc2 + (size_t)e * C * F, *b2 = hp.b_fc2 + (size_t)e * C;
            double hid[64];
            for (int o = 0; o < F; o++) {
                double z = b1[o];
                for (int i = 0; i < C; i++) z += w1[(size_t)o * C + i] * ln[(size_t)t * C + i];
                hid[o] = gelu(z);
            }
            for (int o = 0; o < C; o++) {
                double z = b2[o];
                for (int i = 0; i < F; i++) z += w2[(size_t)o * F + i] * hid[i];
                want[(size_t)t * C + o] += probs[t * E + e] * z;
            }
        }
    CHECK(r->dropped == dropped && dropped > 0, "dropped %ld choices, want %ld (> 0)", r->dropped,
          dropped);
    double aux = 0;
    for (int e = 0; e < E; e++) aux += f[e] * P[e];
    aux *= c.aux_loss_coef * E;
    CHECK(fabs(a.aux_loss - aux) <= 1e-6 * aux, "aux loss %.9g, want a*E*sum f P = %.9g",
          a.aux_loss, aux);
    double num = 0, den = 0;
    int passthrough = 0;
    for (int t = 0; t < N; t++) {
        for (int i = 0; i < C; i++) {
            double dd = y[(size_t)t * C + i] - want[(size_t)t * C + i];
            num += dd * dd;
            den += want[(size_t)t * C + i] * want[(size_t)t * C + i];
        }
        if (nkept[t] == 0) {
            passthrough++;
            CHECK(!memcmp(y + (size_t)t * C, x + (size_t)t * C, C * sizeof *y),
                  "token %d lost all its experts: its output must equal its input", t);
        }
    }
    CHECK(passthrough > 0, "the config should leave a token with no expert");
    CHECK(sqrt(num / den) < FP32_REL, "MoE half output rel L2 %.3g vs the double reference",
          sqrt(num / den));
    pl_mlp_acts_free(&a);
    pl_mem_free(dx);
    pl_mem_free(dy);
    free(x);
    free(y);
    free(ln);
    free(probs);
    free(want);
    free(p);
    pl_model_free(m);
}

/* ---- capacity --------------------------------------------------------------------------------- */

/* model.h's rule: ceil(cf * N * k / E) in exact arithmetic, at least 1, at most N. */
static int capacity_rule(int N, int E, int k, double cf)
{
    double want = ceil(cf * N * k / E);
    return want < 1 ? 1 : want > N ? N : (int)want;
}

static void test_capacity(void)
{
    const int shapes[][3] = {{10, 4, 2}, {512, 8, 2}, {4096, 64, 1}, {7, 3, 3}, {1, 1, 1}};
    const float factors[] = {1e-6f, 0.5f, 1.0f, 1.25f, 2.0f, 3.0f, 1000.0f, 1e8f, 1e30f, FLT_MAX};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (size_t j = 0; j < sizeof factors / sizeof factors[0]; j++) {
            int N = shapes[i][0], E = shapes[i][1], k = shapes[i][2];
            int got = pl_moe_capacity(N, E, k, factors[j]);
            int want = capacity_rule(N, E, k, factors[j]);
            CHECK(got == want, "pl_moe_capacity(N=%d, E=%d, k=%d, cf=%g) = %d, want %d", N, E,
                  k, (double)factors[j], got, want);
        }

    /* A factor far above E/k: every expert gets N slots and no choice is dropped. The
     * routing is bookkeeping, counted as workspace rather than activations. */
    struct pl_model_config c = tiny_moe();
    c.capacity_factor = 1e30f;
    const int B = 2, N = B * c.seq_len, C = c.d_model;
    struct pl_model *m = pl_model_new(&c, PL_MODEL_PARAMS);
    randomize_params(m, 5);
    float *xh = malloc((size_t)N * C * sizeof *xh);
    PL_ASSERT(xh);
    pl_rng_fill_normal(xh, (size_t)N * C, 3, 5, 0, 0.0f, 1.0f);
    float *x = pl_mem_alloc((size_t)N * C * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, "x");
    pl_to_device(x, xh, (size_t)N * C * sizeof *xh);
    free(xh);
    struct pl_mem_stats s0, s1;
    pl_mem_get_stats(&s0);
    struct pl_moe_routing *r = pl_moe_routing_new(N, c.n_experts, c.top_k, N);
    pl_mem_get_stats(&s1);
    CHECK(s1.current[PL_MEM_WORK] > s0.current[PL_MEM_WORK] &&
              s1.current[PL_MEM_ACTIV] == s0.current[PL_MEM_ACTIV],
          "routing memory: workspace +%zu, activations +%zu bytes; model.h counts it as "
          "workspace", s1.current[PL_MEM_WORK] - s0.current[PL_MEM_WORK],
          s1.current[PL_MEM_ACTIV] - s0.current[PL_MEM_ACTIV]);
    pl_moe_routing_free(r);
    struct pl_mlp_acts a;
    pl_mlp_acts_new(&a, &c, B, c.seq_len);
    pl_mlp_forward(&c, 0, &m->blocks[0], &a, NULL, x, x);
    CHECK(a.cap == N && a.route->dropped == 0, "capacity factor 1e30: cap %d (want N = %d), "
          "%ld choices dropped (want 0)", a.cap, N, a.route->dropped);
    pl_mlp_acts_free(&a);
    pl_mem_free(x);
    pl_model_free(m);
}

/* ---- the block-level surface equals the whole model ---------------------------------------- */

static void test_blocks_by_hand(struct pl_model_config c, const char *what)
{
    c.dropout = 0.2f;
    const int B = 3, T = c.seq_len, N = B * T, C = c.d_model, L = c.n_layers;
    struct pl_model *m = pl_model_new(&c, PL_MODEL_PARAMS | PL_MODEL_GRADS);
    randomize_params(m, 21);
    int *tok = malloc(N * sizeof *tok), *tgt = malloc(N * sizeof *tgt);
    make_batch(&c, B, 8, tok, tgt);
    int *dtok = ints_to_device(tok, N), *dtgt = ints_to_device(tgt, N);
    struct pl_model_ctx ctx = {.train = 1, .seed = 77, .step = 3, .seq0 = 5, .loss_scale = 0.7f};

    pl_model_zero_grad(m);
    double loss = pl_model_forward(m, dtok, dtgt, B, &ctx);
    float *logits = to_host(m->head_acts.logits, (size_t)N * c.vocab);
    pl_model_backward(m, &ctx);
    float *grads = to_host(m->grads, m->layout.numel);

    /* by hand: separate input and output buffers, odd blocks as two halves */
    pl_model_zero_grad(m);
    float *x0 = pl_mem_alloc((size_t)N * C * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, "x0");
    float *x1 = pl_mem_alloc((size_t)N * C * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, "x1");
    float *mid = pl_mem_alloc((size_t)N * C * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, "mid");
    struct pl_block_acts *acts = calloc(L, sizeof *acts);
    struct pl_head_acts ha;
    pl_embed_forward(&c, &m->embed, dtok, B, T, x0);
    double aux = 0;
    for (int l = 0; l < L; l++) {
        pl_block_acts_new(&acts[l], &c, B, T);
        if (l % 2 == 0) {
            pl_block_forward(&c, l, &m->blocks[l], &acts[l], &ctx, x0, x1);
        } else {
            pl_attn_forward(&c, l, &m->blocks[l], &acts[l].attn, &ctx, x0, mid);
            pl_mlp_forward(&c, l, &m->blocks[l], &acts[l].mlp, &ctx, mid, x1);
        }
        aux += acts[l].mlp.aux_loss;
        float *t = x0;
        x0 = x1;
        x1 = t;
    }
    pl_head_acts_new(&ha, &c, B, T);
    double loss2 = pl_head_forward(&c, &m->head, &ha, x0, dtgt) + aux;
    CHECK(loss2 == loss, "%s: loss by hand %.9g, whole model %.9g", what, loss2, loss);
    float *logits2 = to_host(ha.logits, (size_t)N * c.vocab);
    CHECK(!memcmp(logits, logits2, (size_t)N * c.vocab * sizeof(float)),
          "%s: logits by hand differ from the whole forward", what);

    pl_head_backward(&c, &m->head, &m->head_g, &ha, &ctx, x0);
    for (int l = L - 1; l >= 0; l--) {
        if (l % 2 == 0) {
            pl_block_backward(&c, l, &m->blocks[l], &m->blocks_g[l], &acts[l], &ctx, x0, x1);
        } else {
            pl_mlp_backward(&c, l, &m->blocks[l], &m->blocks_g[l], &acts[l].mlp, &ctx, x0, mid);
            pl_attn_backward(&c, l, &m->blocks[l], &m->blocks_g[l], &acts[l].attn, &ctx, mid, x1);
        }
        pl_block_acts_free(&acts[l]);
        float *t = x0;
        x0 = x1;
        x1 = t;
    }
    pl_embed_backward(&c, &m->embed_g, dtok, B, T, x0);
    float *grads2 = to_host(m->grads, m->layout.numel);
    int same = 1;
    for (int i = 0; i < m->layout.n_tensors && same; i++) {
        const struct pl_param_desc *d = &m->layout.tensors[i];
        if (memcmp(grads + d->offset, grads2 + d->offset, d->numel * sizeof(float))) {
            same = 0;
            printf("FAIL %s: gradient of %s by hand differs from the whole backward (rel %.3g)\n",
                   what, d->name, rel_l2(grads2 + d->offset, grads + d->offset, d->numel));
        }
    }
    CHECK(same, "%s: block-level backward equals the whole backward", what);

    /* dropout really acted: the eval loss differs */
    double eval = pl_model_loss(m, dtok, dtgt, B);
    CHECK(eval != loss, "%s: dropout 0.2 left the loss unchanged (%.9g)", what, loss);

    pl_head_acts_free(&ha);
    free(acts);
    pl_mem_free(x0);
    pl_mem_free(x1);
    pl_mem_free(mid);
    pl_mem_free(dtok);
    pl_mem_free(dtgt);
    free(tok);
    free(tgt);
    free(logits);
    free(logits2);
    free(grads);
    free(grads2);
    pl_model_free(m);
}

/* ---- the backward split into B and W ------------------------------------------------------------
 * Two microbatches through every block, dropout on, backward once with pl_block_backward
 * (B and W together, per microbatch) and once as the zero-bubble order runs it: both B's
 * first, then both W's. Stops: a W that reads the unmasked gradient or a buffer B reused; a
 * B that touches a parameter gradient (counted twice) or leaves dx unfinished; a kept buffer
 * not zeroed between microbatches; FLOPs that do not sum to one call's or land in the wrong
 * half; kept memory other than B*T*(7C + F) floats of activations, or not freed. */
/* dev[n] = normal draws of (seed), as the GPU build's tests fill device buffers */
static void fill_dev(float *dev, size_t n, uint64_t seed)
{
    float *h = malloc(n * sizeof *h);
    PL_ASSERT(h);
    pl_rng_fill_normal(h, n, seed, 1, 0, 0.0f, 1.0f);
    pl_to_device(dev, h, n * sizeof *h);
    free(h);
}

static double w_flops(const struct pl_model_config *c, int N)
{
    const double C = c->d_model, F = c->d_ff;
    /* dweight 2*N*IN*OUT and dbias N*OUT for proj, qkv, fc, fc2; two layernorms' parameters */
    return 2.0 * N * C * C + N * C + 2.0 * N * C * 3 * C + N * 3 * C + 2.0 * N * C * F + N * F +
           2.0 * N * F * C + N * C + 2.0 * PL_FLOPS_LAYERNORM_BWD_PARAMS * N * C;
}

static void test_split_backward(struct pl_model_config c)
{
    c.dropout = 0.2f;
    enum { MB = 2 };
    const int B = 2, T = c.seq_len, N = B * T, C = c.d_model, L = c.n_layers;
    struct pl_model *m = pl_model_new(&c, PL_MODEL_PARAMS | PL_MODEL_GRADS);
    randomize_params(m, 33);
    size_t nx = (size_t)N * C;
    struct pl_block_acts acts[MB][8];
    struct pl_block_wgrad w[MB][8];
    float *dy[MB], *dx[2][MB];
    PL_ASSERT(L <= 8);
    for (int mb = 0; mb < MB; mb++) {
        struct pl_model_ctx ctx = {.train = 1, .seed = 5, .step = 2, .seq0 = mb * B,
                                   .loss_scale = 0.5f};
        float *x = pl_mem_alloc(nx * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, "split x");
        fill_dev(x, nx, 40 + (uint64_t)mb);
        for (int l = 0; l < L; l++) {
            pl_block_acts_new(&acts[mb][l], &c, B, T);
            pl_block_forward(&c, l, &m->blocks[l], &acts[mb][l], &ctx, x, x);
        }
        pl_mem_free(x);
        dy[mb] = pl_mem_alloc(nx * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, "split dy");
        fill_dev(dy[mb], nx, 60 + (uint64_t)mb);
        for (int k = 0; k < 2; k++)
            dx[k][mb] = pl_mem_alloc(nx * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, "split dx");
    }

    /* one call per block and microbatch */
    pl_model_zero_grad(m);
    double f0 = pl_ledger_flops_total();
    for (int mb = 0; mb < MB; mb++) {
        struct pl_model_ctx ctx = {.train = 1, .seed = 5, .step = 2, .seq0 = mb * B,
                                   .loss_scale = 0.5f};
        pl_copy(dx[0][mb], dy[mb], nx);
        for (int l = L - 1; l >= 0; l--)
            pl_block_backward(&c, l, &m->blocks[l], &m->blocks_g[l], &acts[mb][l], &ctx,
                              dx[0][mb], dx[0][mb]);
    }
    double whole = pl_ledger_flops_total() - f0;
    float *g_whole = to_host(m->grads, m->layout.numel);

    /* B of both microbatches, then W of both */
    pl_model_zero_grad(m);
    struct pl_mem_stats s0, s1, s2;
    pl_mem_get_stats(&s0);
    f0 = pl_ledger_flops_total();
    for (int mb = 0; mb < MB; mb++) {
        struct pl_model_ctx ctx = {.train = 1, .seed = 5, .step = 2, .seq0 = mb * B,
                                   .loss_scale = 0.5f};
        pl_copy(dx[1][mb], dy[mb], nx);
        for (int l = L - 1; l >= 0; l--) {
            pl_block_wgrad_new(&w[mb][l], &c, B, T);
            pl_block_backward_b(&c, l, &m->blocks[l], &acts[mb][l], &ctx, &w[mb][l],
                                dx[1][mb], dx[1][mb]);
        }
    }
    double b_flops = pl_ledger_flops_total() - f0;
    pl_mem_get_stats(&s1);
    float *g_after_b = to_host(m->grads, m->layout.numel);
    size_t nonzero = 0;
    for (size_t i = 0; i < m->layout.numel; i++) nonzero += g_after_b[i] != 0.0f;
    CHECK(nonzero == 0, "split: B left %zu parameter gradients non-zero (B computes dx alone; "
          "the weights' gradients are W's)", nonzero);
    size_t kept = (size_t)MB * L * pl_block_wgrad_bytes(&c, B, T);
    CHECK(kept == (size_t)MB * L * N * (7 * C + c.d_ff) * sizeof(float),
          "split: pl_block_wgrad_bytes is B*T*(7C + F) floats");
    CHECK(s1.current[PL_MEM_ACTIV] - s0.current[PL_MEM_ACTIV] == kept &&
              s1.current[PL_MEM_WORK] == s0.current[PL_MEM_WORK],
          "split: B holds %zu bytes of activations and %zd of workspace more, where W's kept "
          "inputs are %zu", s1.current[PL_MEM_ACTIV] - s0.current[PL_MEM_ACTIV],
          (ssize_t)(s1.current[PL_MEM_WORK] - s0.current[PL_MEM_WORK]), kept);
    f0 = pl_ledger_flops_total();
    for (int mb = 0; mb < MB; mb++)
        for (int l = L - 1; l >= 0; l--) {
            pl_block_backward_w(&c, l, &m->blocks[l], &m->blocks_g[l], &acts[mb][l], &w[mb][l]);
            pl_block_wgrad_free(&w[mb][l]);
        }
    double wf = pl_ledger_flops_total() - f0;
    pl_mem_get_stats(&s2);
    CHECK(s2.current[PL_MEM_ACTIV] == s0.current[PL_MEM_ACTIV],
          "split: pl_block_wgrad_free gives back what B kept");
    float *g_split = to_host(m->grads, m->layout.numel);

    for (int mb = 0; mb < MB; mb++) {
        float *a = to_host(dx[0][mb], nx), *b = to_host(dx[1][mb], nx);
        CHECK(!memcmp(a, b, nx * sizeof(float)), "split: B's dx of microbatch %d differs from "
              "the one call's (rel %.3g)", mb, rel_l2(b, a, nx));
        free(a);
        free(b);
    }
    for (int i = 0; i < m->layout.n_tensors; i++) {
        const struct pl_param_desc *d = &m->layout.tensors[i];
        if (!strcmp(d->name, "wte") || !strcmp(d->name, "wpe") || !strncmp(d->name, "lnf", 3) ||
            !strcmp(d->name, "w_head"))
            continue;
        CHECK(!memcmp(g_whole + d->offset, g_split + d->offset, d->numel * sizeof(float)),
              "split: gradient of %s after B then W differs from one call's (rel %.3g)",
              d->name, rel_l2(g_split + d->offset, g_whole + d->offset, d->numel));
    }
    double want_w = MB * L * w_flops(&c, N);
    CHECK(b_flops + wf == whole, "split: B and W charge %.0f + %.0f FLOPs where one call "
          "charges %.0f", b_flops, wf, whole);
    CHECK(wf == want_w, "split: W charges %.0f FLOPs where the weights' products and sums are "
          "%.0f", wf, want_w);

    for (int mb = 0; mb < MB; mb++) {
        for (int l = 0; l < L; l++) pl_block_acts_free(&acts[mb][l]);
        pl_mem_free(dy[mb]);
        pl_mem_free(dx[0][mb]);
        pl_mem_free(dx[1][mb]);
    }
    free(g_whole);
    free(g_after_b);
    free(g_split);
    pl_model_free(m);
}

/* ---- hook ------------------------------------------------------------------------------------- */

struct hook_log {
    int n;
    int parts[64];
    float *snap[64]; /* the part's gradients when the hook ran */
};

static void record_hook(struct pl_model *m, int part, void *arg)
{
    struct hook_log *log = arg;
    PL_ASSERT(log->n < 64);
    size_t off, n;
    pl_model_part_range(&m->layout, part, &off, &n);
    log->snap[log->n] = to_host(m->grads + off, n);
    log->parts[log->n++] = part;
}

static void test_hook(const struct pl_model_config *cin)
{
    struct pl_model_config c = *cin;
    c.n_layers = 3;
    const int B = 2, N = B * c.seq_len;
    struct pl_model *m = pl_model_new(&c, PL_MODEL_PARAMS | PL_MODEL_GRADS);
    int *tok = malloc(N * sizeof *tok), *tgt = malloc(N * sizeof *tgt);
    make_batch(&c, B, 9, tok, tgt);
    int *dtok = ints_to_device(tok, N), *dtgt = ints_to_device(tgt, N);
    struct hook_log log = {0};
    pl_model_set_hook(m, record_hook, &log);
    pl_model_zero_grad(m);
    pl_model_forward(m, dtok, dtgt, B, NULL);
    CHECK(log.n == 0, "hook called %d times during the forward", log.n);
    pl_model_backward(m, NULL);
    CHECK(log.n == c.n_layers + 2, "hook called %d times, want %d (head, %d blocks, embedding)",
          log.n, c.n_layers + 2, c.n_layers);
    float *final = to_host(m->grads, m->layout.numel);
    for (int i = 0; i < log.n && i < c.n_layers + 2; i++) {
        int want = c.n_layers - i; /* L, L-1, ..., 0, -1 */
        CHECK(log.parts[i] == want, "hook call %d got part %d, want %d", i, log.parts[i], want);
        size_t off, n;
        pl_model_part_range(&m->layout, log.parts[i], &off, &n);
        CHECK(!memcmp(log.snap[i], final + off, n * sizeof(float)),
              "part %d's gradients changed after its hook", log.parts[i]);
        double nz = 0;
        for (size_t j = 0; j < n; j++) nz += fabs(log.snap[i][j]);
        CHECK(nz > 0, "part %d's gradients are all zero at its hook", log.parts[i]);
    }
    for (int i = 0; i < log.n; i++) free(log.snap[i]);
    free(final);
    pl_mem_free(dtok);
    pl_mem_free(dtgt);
    free(tok);
    free(tgt);
    pl_model_free(m);
}

/* ---- gradient accumulation --------------------------------------------------------------------- */

static void test_accumulation(struct pl_model_config c)
{
    c.dropout = 0.1f;
    const int B = 4, T = c.seq_len, N = B * T;
    struct pl_model *full = pl_model_new(&c, PL_MODEL_ALL);
    struct pl_model *acc = pl_model_new(&c, PL_MODEL_ALL);
    int *tok = malloc(N * sizeof *tok), *tgt = malloc(N * sizeof *tgt);
    make_batch(&c, B, 10, tok, tgt);
    int *dtok = ints_to_device(tok, N), *dtgt = ints_to_device(tgt, N);
    struct pl_adamw_config opt = pl_adamw_config_default();
    struct pl_model_ctx ctx = {.train = 1, .seed = 5, .step = 1, .seq0 = 0, .loss_scale = 1.0f};

    pl_model_zero_grad(full);
    double loss_full = pl_model_forward(full, dtok, dtgt, B, &ctx);
    pl_model_backward(full, &ctx);
    float *g_full = to_host(full->grads, full->layout.numel);
    pl_model_update(full, &opt);

    /* two microbatches of B/2 sequences, each scaled by 1/2, masks placed by seq0 */
    pl_model_zero_grad(acc);
    double loss_acc = 0;
    for (int mb = 0; mb < 2; mb++) {
        struct pl_model_ctx mc = ctx;
        mc.seq0 = mb * (B / 2);
        mc.loss_scale = 0.5f;
        size_t o = (size_t)mb * (B / 2) * T;
        loss_acc += 0.5 * pl_model_forward(acc, dtok + o, dtgt + o, B / 2, &mc);
        pl_model_backward(acc, &mc);
    }
    float *g_acc = to_host(acc->grads, acc->layout.numel);
    pl_model_update(acc, &opt);
    CHECK(fabs(loss_acc - loss_full) <= FP32_REL * fabs(loss_full),
          "accumulated loss %.9g, full batch %.9g", loss_acc, loss_full);
    for (int i = 0; i < full->layout.n_tensors; i++) {
        const struct pl_param_desc *d = &full->layout.tensors[i];
        double e = rel_l2(g_acc + d->offset, g_full + d->offset, d->numel);
        CHECK(e <= FP32_REL, "accumulated gradient of %s: rel L2 %.3g vs the full batch", d->name,
              e);
    }
    float *p_full = to_host(full->params, full->layout.numel);
    float *p_acc = to_host(acc->params, acc->layout.numel);
    double e = rel_l2(p_acc, p_full, full->layout.numel);
    CHECK(e <= FP32_REL, "parameters after an accumulated step: rel L2 %.3g", e);
    free(g_full);
    free(g_acc);
    free(p_full);
    free(p_acc);
    pl_mem_free(dtok);
    pl_mem_free(dtgt);
    free(tok);
    free(tgt);
    pl_model_free(full);
    pl_model_free(acc);
}

/* ---- training ---------------------------------------------------------------------------------- */

#define TRAIN_STEPS 40

static void train(const struct pl_model_config *c, double *losses, float *final_params)
{
    const int B = 4, N = B * c->seq_len;
    struct pl_model *m = pl_model_new(c, PL_MODEL_ALL);
    int *tok = malloc(N * sizeof *tok), *tgt = malloc(N * sizeof *tgt);
    make_batch(c, B, 12, tok, tgt);
    int *dtok = ints_to_device(tok, N), *dtgt = ints_to_device(tgt, N);
    struct pl_adamw_config opt = pl_adamw_config_default();
    opt.lr = 1e-2f;
    struct pl_model_ctx ctx = {.train = 1, .seed = 3, .loss_scale = 1.0f};
    for (int s = 0; s < TRAIN_STEPS; s++) losses[s] = pl_model_step(m, dtok, dtgt, B, &opt, &ctx);
    pl_to_host(final_params, m->params, m->layout.numel * sizeof(float));
    pl_mem_free(dtok);
    pl_mem_free(dtgt);
    free(tok);
    free(tgt);
    pl_model_free(m);
}

static void test_training(struct pl_model_config c, const char *what)
{
    c.vocab = 16;
    c.d_model = 32;
    c.n_heads = 4;
    c.d_ff = 64;
    c.seq_len = 16;
    c.dropout = 0.05f;
    if (c.n_experts) c.capacity_factor = 1.25f;
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, &c);
    double a[TRAIN_STEPS], b[TRAIN_STEPS];
    float *pa = malloc(lay.numel * sizeof *pa), *pb = malloc(lay.numel * sizeof *pb);
    train(&c, a, pa);
    train(&c, b, pb);
    CHECK(!memcmp(a, b, sizeof a) && !memcmp(pa, pb, lay.numel * sizeof *pa),
          "%s: two identical training runs differ", what);
    int finite = 1;
    for (int s = 0; s < TRAIN_STEPS; s++) finite &= isfinite(a[s]);
    CHECK(finite, "%s: non-finite loss during training", what);
    /* a random batch of 64 targets from 16 tokens: memorising it takes the loss from about
     * log(16) = 2.77 well below half of that */
    CHECK(a[TRAIN_STEPS - 1] < 0.5 * a[0], "%s: loss %.4f -> %.4f after %d steps, want < half",
          what, a[0], a[TRAIN_STEPS - 1], TRAIN_STEPS);
    printf("  %s: loss %.4f -> %.4f in %d AdamW steps\n", what, a[0], a[TRAIN_STEPS - 1],
           TRAIN_STEPS);
    free(pa);
    free(pb);
    pl_model_layout_free(&lay);
}

/* ---- dump for the PyTorch cross-check --------------------------------------------------------- */

static void put(FILE *f, const void *p, size_t bytes)
{
    if (fwrite(p, 1, bytes, f) != bytes) pl_fatal("writing the dump failed");
}

/* What a dump holds besides the model's kind: std scales every parameter's spread (0.3 is
 * the other tests'; a larger one saturates softmax and GELU, a smaller one leaves every
 * op near its linear range); flat draws the embeddings with a spread of 3e-3, so that a
 * block's input rows have a variance of the order of layernorm's eps (1e-5) and the output
 * depends on eps itself. */
struct dump_opts {
    int moe, flat;
    float std;
};

static int dump(const char *path, const struct dump_opts *o)
{
    const int moe = o->moe;
    struct pl_model_config c = moe ? tiny_moe() : tiny_dense();
    const int B = 2, N = B * c.seq_len;
    struct pl_model *m = pl_model_new(&c, PL_MODEL_PARAMS | PL_MODEL_GRADS);
    randomize_params_std(m, 31, o->std, o->flat ? 3e-3f : o->std);
    int *tok = malloc(N * sizeof *tok), *tgt = malloc(N * sizeof *tgt);
    make_batch(&c, B, 13, tok, tgt);
    int *dtok = ints_to_device(tok, N), *dtgt = ints_to_device(tgt, N);
    pl_model_zero_grad(m);
    double loss = pl_model_forward(m, dtok, dtgt, B, NULL);
    pl_model_backward(m, NULL);
    float *p = to_host(m->params, m->layout.numel), *g = to_host(m->grads, m->layout.numel);
    float *logits = to_host(m->head_acts.logits, (size_t)N * c.vocab);

    FILE *f = fopen(path, "wb");
    if (!f) pl_usage_error("cannot write the dump to '%s' (does its directory exist?)", path);
    put(f, "PLMODEL1", 8);
    int32_t hdr[] = {1, c.vocab, c.d_model, c.n_layers, c.n_heads, c.d_ff, c.seq_len,
                     c.n_experts, c.top_k, B};
    put(f, hdr, sizeof hdr);
    float fl[] = {c.capacity_factor, c.aux_loss_coef};
    put(f, fl, sizeof fl);
    int32_t nt = m->layout.n_tensors;
    put(f, &nt, sizeof nt);
    for (int i = 0; i < nt; i++) {
        const struct pl_param_desc *d = &m->layout.tensors[i];
        char name[64] = {0};
        snprintf(name, sizeof name, "%s", d->name);
        put(f, name, sizeof name);
        int32_t sh[5] = {d->ndim, 0, 0, 0, 0};
        for (int k = 0; k < d->ndim; k++) sh[1 + k] = (int32_t)d->shape[k];
        put(f, sh, sizeof sh);
        put(f, p + d->offset, d->numel * sizeof(float));
        put(f, g + d->offset, d->numel * sizeof(float));
    }
    put(f, tok, N * sizeof *tok);
    put(f, tgt, N * sizeof *tgt);
    double losses[3] = {loss, m->loss_ce, m->loss_aux};
    put(f, losses, sizeof losses);
    put(f, logits, (size_t)N * c.vocab * sizeof(float));
    if (fclose(f)) pl_fatal("closing the dump '%s' failed", path);
    printf("wrote %s: %s model, %zu parameters (spread %g%s), loss %.6f\n", path,
           moe ? "MoE" : "dense", m->layout.numel, (double)o->std,
           o->flat ? ", embeddings 3e-3: rows of variance near layernorm's eps" : "", loss);
    free(p);
    free(g);
    free(logits);
    free(tok);
    free(tgt);
    pl_mem_free(dtok);
    pl_mem_free(dtgt);
    pl_model_free(m);
    return 0;
}

/* ---- misuse a student can reach: a teaching error, exit 2, never a bare assertion ---- */

static int misuse(const char *mode)
{
    struct pl_model_config c = tiny_dense();
    struct pl_model *m = pl_model_new(&c, PL_MODEL_ALL);
    if (!strcmp(mode, "adam-t0")) {
        pl_model_adamw_flat(&m->layout, 0, m->layout.numel, m->params, m->grads, m->params,
                            m->params, 0, &(struct pl_adamw_config){.lr = 1e-3f});
    } else if (!strcmp(mode, "backward-first")) {
        pl_model_backward(m, NULL);
    } else if (!strcmp(mode, "shard-past-end")) {
        size_t n = m->layout.numel;
        pl_model_adamw_flat(&m->layout, n / 2, n, m->params, m->grads, m->params, m->params, 1,
                            &(struct pl_adamw_config){.lr = 1e-3f});
    } else {
        size_t off, numel;
        pl_model_part_range(&m->layout, c.n_layers + 1, &off, &numel);
    }
    pl_model_free(m);
    printf("FAIL the misuse '%s' was accepted\n", mode);
    return 1;
}

/* ---- main ----------------------------------------------------------------------------------- */

static int bad_config(const char *mode)
{
    struct pl_model_config c = tiny_dense();
    if (!strcmp(mode, "bad-heads")) {
        c.d_model = 50;
        c.n_heads = 4;
    } else if (!strcmp(mode, "bad-topk")) {
        c = tiny_moe();
        c.top_k = c.n_experts + 1;
    } else {
        c.d_ff = 0;
    }
    struct pl_model *m = pl_model_new(&c, PL_MODEL_ALL);
    pl_model_free(m);
    printf("FAIL the config of '%s' was accepted\n", mode);
    return 1;
}

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    int rc = -1;
    if (argc >= 2 && (!strcmp(argv[1], "bad-heads") || !strcmp(argv[1], "bad-topk") ||
                      !strcmp(argv[1], "zero-size"))) {
        rc = bad_config(argv[1]);
    } else if (argc >= 2 && (!strcmp(argv[1], "adam-t0") || !strcmp(argv[1], "backward-first") ||
                             !strcmp(argv[1], "shard-past-end") ||
                             !strcmp(argv[1], "part-past-head"))) {
        rc = misuse(argv[1]);
    } else if (argc >= 3 && !strcmp(argv[1], "--dump")) {
        struct dump_opts o = {.std = 0.3f};
        for (int i = 3; i < argc; i++) {
            char *end = NULL;
            if (!strcmp(argv[i], "--moe")) o.moe = 1;
            else if (!strcmp(argv[i], "--flat")) o.flat = 1;
            else if (!strcmp(argv[i], "--std") && i + 1 < argc &&
                     (o.std = strtof(argv[i + 1], &end)) > 0 && !*end) i++;
            else pl_usage_error("--dump FILE takes --moe, --flat and --std S (S > 0), not '%s'",
                                argv[i]);
        }
        rc = dump(argv[2], &o);
    } else if (argc > 1) {
        pl_usage_error("unknown mode '%s' (modes: bad-heads, bad-topk, zero-size, adam-t0, "
                       "backward-first, shard-past-end, part-past-head, --dump FILE "
                       "[--moe] [--flat] [--std S], or none for all checks)",
                       argv[1]);
    }
    if (rc >= 0) {
        pl_finalize();
        return rc;
    }

    struct pl_model_config dense = tiny_dense(), moe = tiny_moe();
    test_config_errors();
    test_layout(&dense);
    test_layout(&moe);
    test_init_shards(&dense);
    test_init_shards(&moe);
    test_memory(&dense);
    test_fd(&dense, "dense");
    test_fd(&moe, "MoE");
    test_moe_reference();
    test_capacity();
    test_blocks_by_hand(dense, "dense");
    test_blocks_by_hand(moe, "MoE");
    test_split_backward(dense);
    struct pl_model_config flash = dense; /* attention by tiles: tests/test_flash.c */
    flash.attention = PL_ATTENTION_FLASH;
    test_fd(&flash, "dense, flash attention");
    test_split_backward(flash);
    test_hook(&dense);
    test_hook(&moe);
    test_accumulation(dense);
    test_training(dense, "dense");
    test_training(moe, "MoE");

    printf("test_model: %d checks, %d failed\n", checks, failures);
    pl_finalize();
    return failures ? 1 : 0;
}
