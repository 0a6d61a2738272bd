/* test_precision: the bf16 mode (model.h "precision", ops.h pl_set_matmul_precision and the
 * pl_bf16_* storage ops). Each check names the wrong code it stops.
 *   - rounding (pl_bf16_from_float): every case against a reference written here from the
 *     two bf16 neighbours of the float, compared in double: exact values, ties both ways
 *     (to even), one ulp past a tie, negatives, -0, subnormals, the largest float (rounds
 *     to infinity), infinities, NaN (stays NaN), and 2^16 random floats. Stops truncation,
 *     round-half-up, a NaN rounded into an infinity. Back to float is exact; accumulate is
 *     bf16(acc + add) per element (stops an accumulate that overwrites or skips rounding);
 *   - the products: with PL_MATMUL_BF16, pl_matmul_forward and _backward,
 *     pl_matmul_gelu_forward and pl_sgemm against a double product of the inputs rounded
 *     to bf16 (fp32-sum tolerance), and farther than that from the fp32 inputs' product
 *     (stops a setting that is ignored); the materialised attention's output against a
 *     double attention whose two products read bf16-rounded inputs; the setting returns
 *     the one it replaced;
 *   - the model: the ledger holds 2 + 2 + 12 bytes per parameter in bf16 (2 + 4 + 12 with
 *     grads_fp32; 4 + 4 + 8 in fp32), and two fp32 stages of the largest part as workspace
 *     (stops a mode that keeps fp32 copies); the working copy is the master rounded, after
 *     the model is made and after every step (stops a copy not refreshed); the first loss
 *     differs from the fp32 model's and from its own bf16 weights multiplied in fp32 (stops
 *     a mode that computes in fp32, or whose passes leave the products fp32) by less than
 *     bf16 rounding allows; the gradients are close to the fp32 model's and two backwards hold
 *     twice one (stops gradients overwritten per backward); an update equals AdamW on the
 *     master with the unpacked, clipped gradients, bit for bit (stops an update of the bf16
 *     copy); 40 steps train as fp32 does (the final loss within 3%); the MoE model steps;
 *     a checkpoint's parameters reach the working copy; bad configs name the valid values.
 * Runs on either build (through the CUDA stand-in too). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "kernels.h"
#include "model.h"
#include "ops.h"
#include "paralab.h"
#include "testing.h"

/* The bf16 nearest to x, ties to the even one, from its two neighbours in double; a value
 * at or past the midpoint between the largest bf16 and 2^128 rounds to infinity. */
static uint16_t ref_bf16(float x)
{
    uint32_t u = pl_k_f32_bits(x);
    if (isnan(x)) return 0xffff; /* any NaN: checked as a NaN, not by bits */
    if (isinf(x)) return (uint16_t)(u >> 16);
    uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u; /* toward zero, away from zero */
    double dl = fabs((double)pl_k_f32_of_bits(lo));
    double dh = (hi & 0x7fffffffu) == 0x7f800000u ? ldexp(1.0, 128) : fabs((double)pl_k_f32_of_bits(hi));
    double ax = fabs((double)x);
    if (ax - dl < dh - ax) return (uint16_t)(lo >> 16);
    if (ax - dl > dh - ax) return (uint16_t)(hi >> 16);
    return (uint16_t)(((lo >> 16) & 1u) ? hi >> 16 : lo >> 16);
}

static void test_rounding(void)
{
    const uint32_t cases[] = {
        0x3f800000u, /* 1: exact */
        0x3f808000u, /* a tie between 1 and the next bf16 (odd): stays 1 */
        0x3f818000u, /* a tie with an odd lower neighbour: rounds up to even */
        0x3f808001u, /* one ulp past a tie: up */
        0x3f807fffu, /* one ulp short of a tie: down */
        0xbf818000u, /* negative tie */
        0x80000000u, /* -0 */
        0x00000001u, /* the smallest subnormal */
        0x00018000u, /* a subnormal tie */
        0x7f7fffffu, /* the largest float: past the midpoint, infinity */
        0x7f7f7fffu, /* just under the largest bf16's midpoint: the largest bf16 */
        0xff7fffffu, /* -largest: -infinity */
        0x7f800000u, /* infinity */
        0xff800000u, /* -infinity */
        0x7fc00000u, /* NaN */
        0x7f800001u, /* a NaN whose payload rounding would carry into an infinity */
        0xffffffffu, /* NaN with every bit */
    };
    const size_t nc = sizeof cases / sizeof cases[0], nr = 1u << 16, n = nc + nr;
    float *h = malloc(n * sizeof *h);
    uint16_t *b = malloc(n * sizeof *b);
    float *back = malloc(n * sizeof *back);
    PL_ASSERT(h && b && back);
    for (size_t i = 0; i < nc; i++) h[i] = pl_k_f32_of_bits(cases[i]);
    for (size_t i = 0; i < nr; i++) /* random bit patterns: every exponent, both signs */
        h[nc + i] = pl_k_f32_of_bits((uint32_t)pl_rng_u64(5, 1, i));
    float *d = op_from_host(h, n * sizeof *h);
    uint16_t *db = op_alloc(n * sizeof *db);
    float *dback = op_alloc(n * sizeof *dback);
    pl_bf16_from_float(db, d, n);
    pl_bf16_to_float(dback, db, n);
    pl_to_host(b, db, n * sizeof *b);
    pl_to_host(back, dback, n * sizeof *back);
    size_t bad = 0, first = n;
    for (size_t i = 0; i < n; i++) {
        int ok;
        if (isnan(h[i])) ok = (b[i] & 0x7f80u) == 0x7f80u && (b[i] & 0x7fu) != 0;
        else ok = b[i] == ref_bf16(h[i]);
        ok = ok && pl_k_f32_bits(back[i]) == (uint32_t)b[i] << 16; /* back to float: exact */
        if (!ok && !bad++) first = i;
    }
    CHECK(bad == 0, "bf16 rounding: %zu of %zu values wrong; first: float bits 0x%08x gave "
          "bf16 0x%04x, nearest (ties to even) is 0x%04x", bad, n,
          first < n ? pl_k_f32_bits(h[first]) : 0, first < n ? b[first] : 0,
          first < n ? ref_bf16(h[first]) : 0);
    /* accumulate: acc = bf16(acc + add), element by element */
    float *add = malloc(nr * sizeof *add);
    uint16_t *acc = malloc(nr * sizeof *acc);
    PL_ASSERT(add && acc);
    for (size_t i = 0; i < nr; i++) add[i] = (float)pl_rng_normal(5, 2, i);
    float *dadd = op_from_host(add, nr * sizeof *add);
    uint16_t *dacc = op_alloc(nr * sizeof *dacc);
    pl_bf16_from_float(dacc, d + nc, nr); /* random floats, NaNs and infinities included */
    pl_bf16_accumulate(dacc, dadd, nr);
    pl_to_host(acc, dacc, nr * sizeof *acc);
    bad = 0;
    for (size_t i = 0; i < nr; i++) {
        float want = pl_k_f32_of_bits((uint32_t)b[nc + i] << 16) + add[i];
        uint16_t r = ref_bf16(want);
        int ok = isnan(want) ? (acc[i] & 0x7fffu) > 0x7f80u : acc[i] == r;
        if (!ok && !bad++) first = i;
    }
    CHECK(bad == 0, "bf16 accumulate: %zu of %zu elements are not bf16(acc + add); first at "
          "%zu: 0x%04x", bad, nr, first, bad ? acc[first] : 0);
    pl_bf16_zero(dacc, nr);
    pl_to_host(acc, dacc, nr * sizeof *acc);
    bad = 0;
    for (size_t i = 0; i < nr; i++) bad += acc[i] != 0;
    CHECK(bad == 0, "pl_bf16_zero left %zu non-zero elements", bad);
    pl_mem_free(d);
    pl_mem_free(db);
    pl_mem_free(dback);
    pl_mem_free(dadd);
    pl_mem_free(dacc);
    free(h);
    free(b);
    free(back);
    free(add);
    free(acc);
}

/* ---- the products ------------------------------------------------------------------------ */

static double bf16_of(float x) { return pl_k_f32_of_bits((uint32_t)ref_bf16(x) << 16); }

static float *rand_host(size_t n, uint64_t stream)
{
    float *h = malloc(n * sizeof *h);
    PL_ASSERT(h);
    for (size_t i = 0; i < n; i++) h[i] = (float)pl_rng_normal(11, stream, i);
    return h;
}

/* out[N,OC] = X[N,K] W[OC,K]^T in double, the inputs rounded to bf16 or not. */
static double *ref_xwt(const float *X, const float *W, int N, int K, int OC, int round)
{
    double *o = calloc((size_t)N * OC, sizeof *o);
    PL_ASSERT(o);
    for (int n = 0; n < N; n++)
        for (int j = 0; j < OC; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) {
                float a = X[(size_t)n * K + k], b = W[(size_t)j * K + k];
                s += round ? bf16_of(a) * bf16_of(b) : (double)a * b;
            }
            o[(size_t)n * OC + j] = s;
        }
    return o;
}

/* got against the bf16 reference (fp32 sums: K terms of about 1, 1e-5 relative), and
 * farther from the fp32 inputs' reference than that somewhere. */
static void check_product(const char *what, const float *got, const double *bf,
                          const double *f32, size_t n, double scale)
{
    double worst = 0, apart = 0;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs(got[i] - bf[i]));
        apart = fmax(apart, fabs(got[i] - f32[i]));
    }
    CHECK(worst <= 2e-5 * scale, "%s in bf16: %.3g from the product of the bf16-rounded "
          "inputs (fp32 sums allow %.3g)", what, worst, 2e-5 * scale);
    CHECK(apart > 1e-3 * scale, "%s in bf16: within %.3g of the fp32 inputs' product: the "
          "inputs were not rounded to bf16", what, apart);
}

/* Causal attention's output in double, q, k, v and the probabilities rounded to bf16 for
 * the two products (round) or not. */
static double *ref_attention(const float *qkv, int B, int T, int C, int NH, int round)
{
    const int HS = C / NH;
    double *out = calloc((size_t)B * T * C, sizeof *out), *p = malloc(T * sizeof *p);
    PL_ASSERT(out && p);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                const float *q = qkv + ((size_t)b * T + i) * 3 * C + (size_t)h * HS;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j <= i; j++) {
                    const float *k = qkv + ((size_t)b * T + j) * 3 * C + C + (size_t)h * HS;
                    double d = 0;
                    for (int e = 0; e < HS; e++)
                        d += round ? bf16_of(q[e]) * bf16_of(k[e]) : (double)q[e] * k[e];
                    p[j] = d / sqrt((double)HS);
                    mx = fmax(mx, p[j]);
                }
                for (int j = 0; j <= i; j++) sum += (p[j] = exp(p[j] - mx));
                for (int j = 0; j <= i; j++) {
                    p[j] /= sum;
                    if (round) p[j] = bf16_of((float)p[j]);
                }
                for (int e = 0; e < HS; e++) {
                    double o = 0;
                    for (int j = 0; j <= i; j++) {
                        float v = qkv[((size_t)b * T + j) * 3 * C + 2 * C + (size_t)h * HS + e];
                        o += p[j] * (round ? bf16_of(v) : v);
                    }
                    out[((size_t)b * T + i) * C + (size_t)h * HS + e] = o;
                }
            }
    free(p);
    return out;
}

static void test_products(void)
{
    const int N = 24, K = 70, OC = 33; /* not multiples of anything */
    float *x = rand_host((size_t)N * K, 1), *w = rand_host((size_t)OC * K, 2),
          *dy = rand_host((size_t)N * OC, 3);
    float *dx_ = op_from_host(x, (size_t)N * K * 4), *dw_ = op_from_host(w, (size_t)OC * K * 4),
          *ddy = op_from_host(dy, (size_t)N * OC * 4);
    float *out = op_alloc((size_t)N * OC * 4), *h = op_alloc((size_t)N * OC * 4),
          *g = op_alloc((size_t)N * OC * 4), *dinp = op_alloc((size_t)N * K * 4),
          *dwt = op_alloc((size_t)OC * K * 4);
    float *host = malloc((size_t)N * K * OC * 4);
    PL_ASSERT(host);
    CHECK(pl_matmul_precision() == PL_MATMUL_FP32, "the matmul precision starts as %d, not fp32",
          (int)pl_matmul_precision());
    enum pl_matmul_precision old = pl_set_matmul_precision(PL_MATMUL_BF16);
    CHECK(old == PL_MATMUL_FP32 && pl_matmul_precision() == PL_MATMUL_BF16,
          "pl_set_matmul_precision returned %d and left %d", (int)old,
          (int)pl_matmul_precision());
    double scale = sqrt((double)K);
    /* forward: X W^T */
    double *bf = ref_xwt(x, w, N, K, OC, 1), *f32 = ref_xwt(x, w, N, K, OC, 0);
    pl_matmul_forward(out, dx_, dw_, NULL, N, K, OC);
    pl_to_host(host, out, (size_t)N * OC * 4);
    check_product("pl_matmul_forward", host, bf, f32, (size_t)N * OC, scale);
    pl_sgemm(0, 1, N, OC, K, 1.0f, dx_, K, dw_, K, 0.0f, out, OC);
    pl_to_host(host, out, (size_t)N * OC * 4);
    check_product("pl_sgemm", host, bf, f32, (size_t)N * OC, scale);
    pl_matmul_gelu_forward(h, g, dx_, dw_, NULL, N, K, OC);
    pl_to_host(host, h, (size_t)N * OC * 4);
    check_product("pl_matmul_gelu_forward's h", host, bf, f32, (size_t)N * OC, scale);
    free(bf);
    free(f32);
    /* backward: dinp = dY W (N x K: dY [N,OC] times W [OC,K]), dW = dY^T X */
    float *wt = malloc((size_t)OC * K * 4), *dyt = malloc((size_t)N * OC * 4),
          *xt = malloc((size_t)N * K * 4);
    PL_ASSERT(wt && dyt && xt);
    for (int j = 0; j < OC; j++)
        for (int k = 0; k < K; k++) wt[(size_t)k * OC + j] = w[(size_t)j * K + k];
    for (int n = 0; n < N; n++)
        for (int j = 0; j < OC; j++) dyt[(size_t)j * N + n] = dy[(size_t)n * OC + j];
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) xt[(size_t)k * N + n] = x[(size_t)n * K + k];
    pl_matmul_backward(dinp, dwt, NULL, ddy, dx_, dw_, N, K, OC);
    bf = ref_xwt(dy, wt, N, OC, K, 1);
    f32 = ref_xwt(dy, wt, N, OC, K, 0);
    pl_to_host(host, dinp, (size_t)N * K * 4);
    check_product("pl_matmul_backward's dinp", host, bf, f32, (size_t)N * K, sqrt((double)OC));
    free(bf);
    free(f32);
    bf = ref_xwt(dyt, xt, OC, N, K, 1);
    f32 = ref_xwt(dyt, xt, OC, N, K, 0);
    pl_to_host(host, dwt, (size_t)OC * K * 4);
    check_product("pl_matmul_backward's dweight", host, bf, f32, (size_t)OC * K,
                  sqrt((double)N));
    free(bf);
    free(f32);
    /* the materialised attention's products too: Q K^T and P V on bf16 inputs */
    const int B = 2, T = 9, C = 12, NH = 3;
    float *qkv_h = rand_host((size_t)B * T * 3 * C, 4);
    float *qkv = op_from_host(qkv_h, (size_t)B * T * 3 * C * 4);
    float *y1 = op_alloc((size_t)B * T * C * 4), *y2 = op_alloc((size_t)B * T * C * 4),
          *att = op_alloc((size_t)B * NH * T * T * 4);
    pl_attention_forward(y1, att, qkv, B, T, C, NH);
    pl_set_matmul_precision(PL_MATMUL_FP32);
    pl_attention_forward(y2, att, qkv, B, T, C, NH);
    float *a1 = malloc((size_t)B * T * C * 4), *a2 = malloc((size_t)B * T * C * 4);
    PL_ASSERT(a1 && a2);
    pl_to_host(a1, y1, (size_t)B * T * C * 4);
    pl_to_host(a2, y2, (size_t)B * T * C * 4);
    double *ab = ref_attention(qkv_h, B, T, C, NH, 1), *af = ref_attention(qkv_h, B, T, C, NH, 0);
    check_product("pl_attention_forward", a1, ab, af, (size_t)B * T * C, 1.0);
    free(ab);
    free(af);
    void *bufs[] = {dx_, dw_, ddy, out, h, g, dinp, dwt, qkv, y1, y2, att};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) pl_mem_free(bufs[i]);
    free(x), free(w), free(dy), free(host), free(wt), free(dyt), free(xt), free(qkv_h);
    free(a1), free(a2);
}

/* ---- the model --------------------------------------------------------------------------- */

static struct pl_model_config small_config(enum pl_precision p, int grads_fp32, int experts)
{
    struct pl_model_config c = pl_model_config_default();
    c.d_model = 48;
    c.n_heads = 4;
    c.d_ff = 160;
    c.seq_len = 24;
    c.n_layers = 2;
    c.n_experts = experts;
    c.precision = p;
    c.grads_fp32 = grads_fp32;
    return c;
}

static void test_memory(enum pl_precision p, int grads_fp32)
{
    struct pl_model_config c = small_config(p, grads_fp32, 0);
    struct pl_mem_stats s0, s1;
    pl_mem_get_stats(&s0);
    struct pl_model *m = pl_model_new(&c, PL_MODEL_ALL);
    pl_mem_get_stats(&s1);
    const double psi = (double)m->layout.numel;
    double want[3] = {p == PL_PRECISION_BF16 ? 2 : 4,
                      p == PL_PRECISION_BF16 && !grads_fp32 ? 2 : 4,
                      p == PL_PRECISION_BF16 ? 12 : 8};
    const char *name[3] = {"params", "grads", "optim"};
    for (int k = 0; k < 3; k++) {
        double got = (double)(s1.current[k] - s0.current[k]) / psi;
        CHECK(got == want[k], "%s%s: the ledger holds %g bytes of %s per parameter, want %g "
              "(mixed-precision Adam: 2 + 2 + 12)", pl_precision_name(p),
              grads_fp32 ? " with grads_fp32" : "", got, name[k], want[k]);
    }
    if (p == PL_PRECISION_BF16) {
        size_t part = m->layout.block_numel; /* the largest part of this config */
        size_t stages = (grads_fp32 ? 1 : 2) * part * sizeof(float);
        size_t work = s1.current[PL_MEM_WORK] - s0.current[PL_MEM_WORK];
        CHECK(work >= stages && work < stages + 64 * 1024,
              "bf16: %zu bytes of workspace, want the stages' %zu plus the layout tables",
              work, stages);
    }
    pl_model_free(m);
}

static float *host_params(const struct pl_model *m)
{
    size_t n = m->layout.numel;
    float *h = malloc(n * sizeof *h);
    PL_ASSERT(h);
    pl_to_host(h, m->params, n * sizeof *h);
    return h;
}

static void check_working_copy(const struct pl_model *m, const char *when)
{
    size_t n = m->layout.numel, bad = 0, at = 0;
    float *p = host_params(m);
    uint16_t *w = malloc(n * sizeof *w);
    PL_ASSERT(w);
    pl_to_host(w, m->params16, n * sizeof *w);
    for (size_t i = 0; i < n; i++)
        if (w[i] != ref_bf16(p[i]) && !bad++) at = i;
    CHECK(bad == 0, "%s: %zu of %zu bf16 parameters are not the fp32 master's rounded (first "
          "at %zu: 0x%04x, want 0x%04x)", when, bad, n, at, bad ? w[at] : 0,
          bad ? ref_bf16(p[at]) : 0);
    free(p);
    free(w);
}

/* The model's gradients as floats on the host. */
static float *host_grads(const struct pl_model *m)
{
    size_t n = m->layout.numel;
    float *h = malloc(n * sizeof *h);
    PL_ASSERT(h);
    if (m->grads16) {
        uint16_t *b = malloc(n * sizeof *b);
        PL_ASSERT(b);
        pl_to_host(b, m->grads16, n * sizeof *b);
        for (size_t i = 0; i < n; i++) h[i] = pl_k_f32_of_bits((uint32_t)b[i] << 16);
        free(b);
    } else {
        pl_to_host(h, m->grads, n * sizeof *h);
    }
    return h;
}

static double rel_l2(const float *a, const float *b, size_t n, double k)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = a[i] - k * b[i];
        num += d * d;
        den += (double)a[i] * a[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

/* B sequences of cfg's length of random tokens and targets, in op memory. */
static void batch_new(const struct pl_model_config *c, int B, uint64_t seed, int **dtok,
                      int **dtgt)
{
    const int N = B * c->seq_len;
    int *tok = malloc(N * sizeof *tok), *tgt = malloc(N * sizeof *tgt);
    PL_ASSERT(tok && tgt);
    random_batch(c->vocab, (size_t)N, seed, tok, tgt);
    *dtok = op_from_host(tok, N * sizeof *tok);
    *dtgt = op_from_host(tgt, N * sizeof *tgt);
    free(tok);
    free(tgt);
}

static void test_model(int grads_fp32)
{
    const char *mode = grads_fp32 ? "bf16 with grads_fp32" : "bf16";
    struct pl_model_config cb = small_config(PL_PRECISION_BF16, grads_fp32, 0);
    struct pl_model_config cf = small_config(PL_PRECISION_FP32, 0, 0);
    const int B = 4;
    int *dtok, *dtgt;
    batch_new(&cb, B, 9, &dtok, &dtgt);
    struct pl_model *mb = pl_model_new(&cb, PL_MODEL_ALL), *mf = pl_model_new(&cf, PL_MODEL_ALL);
    check_working_copy(mb, "after pl_model_new");
    /* the first loss and gradients: bf16 against fp32 */
    pl_model_zero_grad(mb);
    pl_model_zero_grad(mf);
    double lb = pl_model_forward(mb, dtok, dtgt, B, NULL);
    double lf = pl_model_forward(mf, dtok, dtgt, B, NULL);
    CHECK(fabs(lb - lf) > 1e-6 * lf && fabs(lb - lf) < 1e-2 * lf,
          "%s: the first loss %.9g against fp32's %.9g: want a difference of bf16 rounding "
          "(between 1e-6 and 1e-2 relative)", mode, lb, lf);
    CHECK(pl_matmul_precision() == PL_MATMUL_FP32,
          "%s: the forward left the matmul precision at %d", mode, (int)pl_matmul_precision());
    /* the same bf16 weights multiplied in fp32: the mode's products are bf16 too */
    struct pl_model *mr = pl_model_new(&cf, PL_MODEL_ALL);
    {
        size_t np = mb->layout.numel;
        uint16_t *w = malloc(np * sizeof *w);
        float *f = malloc(np * sizeof *f);
        PL_ASSERT(w && f);
        pl_to_host(w, mb->params16, np * sizeof *w);
        for (size_t i = 0; i < np; i++) f[i] = pl_k_f32_of_bits((uint32_t)w[i] << 16);
        pl_to_device(mr->params, f, np * sizeof *f);
        free(w);
        free(f);
    }
    double lr = pl_model_forward(mr, dtok, dtgt, B, NULL);
    CHECK(fabs(lb - lr) > 1e-7 * lr && fabs(lb - lr) < 1e-2 * lr,
          "%s: the first loss %.9g against %.9g of its bf16 weights multiplied in fp32: want "
          "a difference of bf16 products (between 1e-7 and 1e-2 relative)", mode, lb, lr);
    pl_model_free(mr);
    pl_model_backward(mb, NULL);
    pl_model_backward(mf, NULL);
    float *g1 = host_grads(mb), *gf = host_grads(mf);
    size_t n = mb->layout.numel;
    double e = rel_l2(gf, g1, n, 1.0);
    CHECK(e < 2e-2, "%s: the gradients are %.3g (relative L2) from fp32's, more than bf16 "
          "rounding makes", mode, e);
    /* a second backward on the same activations accumulates: twice the first */
    pl_model_backward(mb, NULL);
    float *g2 = host_grads(mb);
    e = rel_l2(g2, g1, n, 2.0);
    CHECK(e < 1e-2, "%s: two backwards hold %.3g (relative L2) from twice one: gradients are "
          "to accumulate", mode, e);
    /* an update: AdamW on the master with the unpacked gradients, clipped */
    struct pl_adamw_config opt = pl_adamw_config_default();
    opt.grad_clip = 0.5f; /* clips here: the norm of two backwards is above it */
    float *p0 = host_params(mb);
    double norm_sq = 0;
    for (size_t i = 0; i < n; i++) norm_sq += (double)g2[i] * g2[i];
    float sc = pl_clip_scale(norm_sq, opt.grad_clip);
    CHECK(sc < 1.0f, "%s: the test's update does not clip (norm %g)", mode, sqrt(norm_sq));
    for (size_t i = 0; i < n; i++) g2[i] *= sc;
    float *dp = op_from_host(p0, n * 4), *dg = op_from_host(g2, n * 4), *dm = op_alloc(n * 4),
          *dv = op_alloc(n * 4);
    pl_model_adamw_flat(&mb->layout, 0, n, dp, dg, dm, dv, 1, &opt);
    double norm = pl_model_update(mb, &opt);
    CHECK(fabs(norm - sqrt(norm_sq)) <= 1e-6 * sqrt(norm_sq),
          "%s: pl_model_update returned the norm %.9g, the gradients' is %.9g", mode, norm,
          sqrt(norm_sq));
    float *want = malloc(n * 4), *got = host_params(mb);
    PL_ASSERT(want);
    pl_to_host(want, dp, n * 4);
    size_t bad = 0, at = 0;
    for (size_t i = 0; i < n; i++)
        if (pl_k_f32_bits(want[i]) != pl_k_f32_bits(got[i]) && !bad++) at = i;
    CHECK(bad == 0, "%s: the update left %zu of %zu master weights unlike AdamW on the fp32 "
          "master with the clipped gradients (first at %zu: %.9g, want %.9g)", mode, bad, n,
          at, bad ? got[at] : 0.0, bad ? want[at] : 0.0);
    check_working_copy(mb, "after an update");
    /* 40 steps on one batch: bf16 trains as fp32 does */
    opt = pl_adamw_config_default();
    double first = 0, last_b = 0, last_f = 0;
    struct pl_model *tb = pl_model_new(&cb, PL_MODEL_ALL), *tf = pl_model_new(&cf, PL_MODEL_ALL);
    for (int s = 0; s < 40; s++) {
        last_b = pl_model_step(tb, dtok, dtgt, B, &opt, NULL);
        last_f = pl_model_step(tf, dtok, dtgt, B, &opt, NULL);
        if (s == 0) first = last_b;
    }
    CHECK(last_b < 0.8 * first && fabs(last_b - last_f) < 0.03 * last_f,
          "%s: 40 steps took the loss from %.4f to %.4f; fp32 reached %.4f (want within 3%%)",
          mode, first, last_b, last_f);
    check_working_copy(tb, "after 40 steps");
    pl_model_free(tb);
    pl_model_free(tf);
    pl_model_free(mb);
    pl_model_free(mf);
    void *bufs[] = {dtok, dtgt, dp, dg, dm, dv};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) pl_mem_free(bufs[i]);
    free(g1), free(gf), free(g2), free(p0), free(want), free(got);
}

static void test_moe_and_checkpoint(void)
{
    struct pl_model_config c = small_config(PL_PRECISION_BF16, 0, 4);
    const int B = 2;
    int *dtok, *dtgt;
    batch_new(&c, B, 10, &dtok, &dtgt);
    struct pl_model *m = pl_model_new(&c, PL_MODEL_ALL);
    struct pl_adamw_config opt = pl_adamw_config_default();
    double l0 = pl_model_step(m, dtok, dtgt, B, &opt, NULL), l1 = l0;
    for (int s = 0; s < 5; s++) l1 = pl_model_step(m, dtok, dtgt, B, &opt, NULL);
    CHECK(isfinite(l0) && l1 < l0, "bf16 MoE: 6 steps took the loss from %g to %g", l0, l1);
    check_working_copy(m, "bf16 MoE after 6 steps");
    /* a checkpoint holds the master; loading it reaches the working copy */
    char path[] = "/tmp/paralab_precision_XXXXXX";
    int fd = mkstemp(path);
    PL_ASSERT(fd >= 0);
    struct pl_train_state st = {.step = 6, .batch = B, .opt = opt};
    pl_checkpoint_save(path, m, &st);
    struct pl_model *r = pl_model_new(&c, PL_MODEL_ALL);
    pl_checkpoint_load(path, r, &st);
    remove(path);
    float *a = host_params(m), *b = host_params(r);
    CHECK(!memcmp(a, b, m->layout.numel * 4), "bf16: a checkpoint's master weights came back "
          "changed");
    check_working_copy(r, "bf16 after a checkpoint load");
    double la = pl_model_loss(m, dtok, dtgt, B), lr = pl_model_loss(r, dtok, dtgt, B);
    CHECK(la == lr, "bf16: the loaded model's loss %.9g, the saved one's %.9g", lr, la);
    pl_model_free(m);
    pl_model_free(r);
    pl_mem_free(dtok);
    pl_mem_free(dtgt);
    free(a), free(b);
}

static void test_config_errors(void)
{
    char buf[512];
    struct pl_model_config c = small_config(PL_PRECISION_FP32, 0, 0);
    c.precision = (enum pl_precision)2;
    const char *e = pl_model_config_error(&c, buf, sizeof buf);
    CHECK(e && strstr(e, "precision=2 is not a choice (fp32 or bf16)"),
          "precision 2: the config error is '%s'", e ? e : "(none)");
    c.precision = PL_PRECISION_FP32;
    c.grads_fp32 = 1;
    e = pl_model_config_error(&c, buf, sizeof buf);
    CHECK(e && strstr(e, "grads_fp32=1 is for precision=bf16"),
          "grads_fp32 in fp32: the config error is '%s'", e ? e : "(none)");
    enum pl_precision p;
    CHECK(pl_precision_parse("bf16", &p) == 0 && p == PL_PRECISION_BF16 &&
              pl_precision_parse("fp16", &p) == -1,
          "pl_precision_parse: bf16 or an unknown name");
}

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    if (argc > 1) {
        if (strcmp(argv[1], "bf16-ends"))
            pl_usage_error("test_precision: unknown mode '%s' (modes: bf16-ends, or none for "
                           "all checks)", argv[1]);
        struct pl_model_config c = small_config(PL_PRECISION_BF16, 0, 0);
        pl_model_free(pl_model_new_ends(&c, PL_MODEL_ALL, PL_ENDS_EMBED));
        printf("test_precision bf16-ends: a bf16 model of the ends was made\n");
        pl_finalize();
        return 1;
    }
    test_rounding();
    test_products();
    test_memory(PL_PRECISION_FP32, 0);
    test_memory(PL_PRECISION_BF16, 0);
    test_memory(PL_PRECISION_BF16, 1);
    test_model(0);
    test_model(1);
    test_moe_and_checkpoint();
    test_config_errors();
    printf("test_precision: %d checks, %d failed\n", checks, failures);
    pl_finalize();
    return failures ? 1 : 0;
}
