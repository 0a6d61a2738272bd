/* test_ops: every op of lib/ops.h against an independent double-precision implementation
 * written here. Forwards are compared with the double forward; backwards with central
 * finite differences of the double forward, for the loss L = sum(out * w) with random w.
 * Gradient buffers start from random values, so the checks also prove that backwards
 * accumulate (+=). Also: dropout masks of shards equal slices of the full mask, AdamW
 * against its formula, grad norm against a double sum, each op's FLOP count, cross-entropy
 * where the target's probability underflows, backwards given NULL gradients, and sums into
 * shared outputs that repeat bit for bit (no atomics on the GPU).
 * Runs on either build (device memory on the GPU build).
 *     test_ops                                        all checks
 *     test_ops bad-heads | zero-size | bad-token | bad-dropout   one usage error on purpose */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "ops.h"
#include "paralab.h"
#include "testing.h"

/* fp32 op versus double reference: |got - ref| <= ATOL + RTOL * |ref|, for every tensor. */
#define ATOL 1e-4
#define RTOL 1e-3
#define FD_STEP 1e-6 /* central differences in double: error ~ step^2, far below ATOL */


/* ---- memory: host arrays in double, op arrays in op memory; freed after each case ---- */

#define MAX_LIVE 64
static void *host_live[MAX_LIVE], *dev_live[MAX_LIVE];
static int n_host, n_dev;

static double *hvec(size_t n)
{
    PL_ASSERT(n_host < MAX_LIVE);
    double *p = calloc(n ? n : 1, sizeof *p);
    PL_ASSERT(p);
    return host_live[n_host++] = p;
}

static void *dalloc(size_t bytes)
{
    PL_ASSERT(n_dev < MAX_LIVE);
    return dev_live[n_dev++] = pl_mem_alloc(bytes, PL_MEM_ACTIV, PL_DEVICE, "test_ops array");
}

static void release_all(void)
{
    while (n_host) free(host_live[--n_host]);
    while (n_dev) pl_mem_free(dev_live[--n_dev]);
}

static uint64_t next_stream = 1;

/* Normal fp32 values held in double, so both implementations see identical inputs. */
static double *rand_vec(size_t n, double std)
{
    double *x = hvec(n);
    uint64_t s = next_stream++;
    for (size_t i = 0; i < n; i++) x[i] = (float)(std * pl_rng_normal(2024, s, i));
    return x;
}

static int *rand_ints(size_t n, int hi)
{
    double *x = hvec(n); /* storage only: ints fit in the doubles' bytes */
    int *v = (int *)x;
    uint64_t s = next_stream++;
    for (size_t i = 0; i < n; i++) v[i] = (int)(pl_rng_u64(2024, s, i) % (uint64_t)hi);
    return v;
}

static float *to_dev(const double *x, size_t n)
{
    float *tmp = malloc((n ? n : 1) * sizeof *tmp);
    PL_ASSERT(tmp);
    for (size_t i = 0; i < n; i++) tmp[i] = (float)x[i];
    float *d = dalloc(n * sizeof *d);
    pl_to_device(d, tmp, n * sizeof *d);
    free(tmp);
    return d;
}

static int *to_dev_int(const int *x, size_t n)
{
    int *d = dalloc(n * sizeof *d);
    pl_to_device(d, x, n * sizeof *d);
    return d;
}

static double *from_dev(const float *d, size_t n)
{
    float *tmp = malloc((n ? n : 1) * sizeof *tmp);
    PL_ASSERT(tmp);
    pl_to_host(tmp, d, n * sizeof *tmp);
    double *x = hvec(n);
    for (size_t i = 0; i < n; i++) x[i] = tmp[i];
    free(tmp);
    return x;
}

/* A gradient as the op left it, minus the random value the buffer started from. */
static double *grad_from_dev(const float *d, const double *prior, size_t n)
{
    double *g = from_dev(d, n);
    for (size_t i = 0; i < n; i++) g[i] -= prior[i];
    return g;
}

/* ---- comparison ---------------------------------------------------------------------- */

static void expect_close(const char *label, const char *what, const double *ref,
                         const double *got, size_t n)
{
    size_t bad = 0, first = 0;
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs(got[i] - ref[i]);
        if (!(err <= ATOL + RTOL * fabs(ref[i]))) {
            if (!bad) first = i;
            bad++;
        }
        if (!(err <= worst)) worst = err;
    }
    CHECK(bad == 0, "%s: %s: %zu of %zu elements outside %g + %g|ref|; first [%zu] expected "
          "%.8g got %.8g; max abs error %.3g", label, what, bad, n, ATOL, RTOL, first,
          ref[first], got[first], worst);
}

static double flops_mark;
static void flops_start(void) { flops_mark = pl_ledger()->flops; }
static void expect_flops(const char *label, const char *what, double expected)
{
    double got = pl_ledger()->flops - flops_mark;
    CHECK(got == expected, "%s: %s added %.0f FLOPs to the ledger, ops.h documents %.0f", label,
          what, got, expected);
}

/* ---- finite differences on a double reference ----------------------------------------- */

#define MAX_IN 4
struct gcase {
    char label[96];
    int nin;
    const char *name[MAX_IN];
    size_t len[MAX_IN];
    double *x[MAX_IN];
    size_t nout;
    double *w; /* dL/dout */
    void (*ref)(const struct gcase *c, double *out);
    int d[4];       /* sizes, per op */
    const int *idx; /* tokens or targets */
    float p;
    uint64_t seed, stream, offset;
};

static double loss_of(const struct gcase *c, double *out)
{
    c->ref(c, out);
    double L = 0.0;
    for (size_t i = 0; i < c->nout; i++) L += out[i] * c->w[i];
    return L;
}

static void expect_grad(struct gcase *c, int k, const double *got)
{
    double *out = hvec(c->nout), *fd = hvec(c->len[k]);
    for (size_t i = 0; i < c->len[k]; i++) {
        double save = c->x[k][i], h = FD_STEP * fmax(1.0, fabs(save));
        c->x[k][i] = save + h;
        double lp = loss_of(c, out);
        c->x[k][i] = save - h;
        double lm = loss_of(c, out);
        c->x[k][i] = save;
        fd[i] = (lp - lm) / (2 * h);
    }
    char what[64];
    snprintf(what, sizeof what, "d%s vs finite differences", c->name[k]);
    expect_close(c->label, what, fd, got, c->len[k]);
}

static void expect_forward(const struct gcase *c, const double *got)
{
    double *ref = hvec(c->nout);
    c->ref(c, ref);
    expect_close(c->label, "forward", ref, got, c->nout);
}

/* ---- double references ------------------------------------------------------------------ */

static void ref_encoder(const struct gcase *c, double *out)
{
    int B = c->d[0], T = c->d[1], C = c->d[2];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int i = 0; i < C; i++)
                out[((size_t)b * T + t) * C + i] =
                    c->x[0][(size_t)c->idx[b * T + t] * C + i] + c->x[1][(size_t)t * C + i];
}

static void ref_layernorm(const struct gcase *c, double *out)
{
    int N = c->d[0], C = c->d[1];
    for (int n = 0; n < N; n++) {
        const double *x = c->x[0] + (size_t)n * C;
        double mean = 0, var = 0;
        for (int i = 0; i < C; i++) mean += x[i];
        mean /= C;
        for (int i = 0; i < C; i++) var += (x[i] - mean) * (x[i] - mean);
        var /= C;
        double rstd = 1.0 / sqrt(var + (double)PL_LAYERNORM_EPS);
        for (int i = 0; i < C; i++)
            out[(size_t)n * C + i] = (x[i] - mean) * rstd * c->x[1][i] + c->x[2][i];
    }
}

static void ref_matmul(const struct gcase *c, double *out)
{
    int N = c->d[0], C = c->d[1], OC = c->d[2];
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = c->nin > 2 ? c->x[2][o] : 0.0;
            for (int i = 0; i < C; i++) s += c->x[0][(size_t)n * C + i] * c->x[1][(size_t)o * C + i];
            out[(size_t)n * OC + o] = s;
        }
}

static void ref_attention(const struct gcase *c, double *out)
{
    int B = c->d[0], T = c->d[1], C = c->d[2], NH = c->d[3], HS = C / NH;
    double scale = 1.0 / sqrt((double)HS), p[320];
    PL_ASSERT(T <= 320);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const double *q = c->x[0] + ((size_t)b * T + t) * 3 * C + h * HS;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j <= t; j++) {
                    const double *k = c->x[0] + ((size_t)b * T + j) * 3 * C + C + h * HS;
                    double s = 0;
                    for (int i = 0; i < HS; i++) s += q[i] * k[i];
                    p[j] = s * scale;
                    mx = fmax(mx, p[j]);
                }
                for (int j = 0; j <= t; j++) sum += (p[j] = exp(p[j] - mx));
                for (int i = 0; i < HS; i++) {
                    double o = 0;
                    for (int j = 0; j <= t; j++)
                        o += p[j] / sum * c->x[0][((size_t)b * T + j) * 3 * C + 2 * C + h * HS + i];
                    out[((size_t)b * T + t) * C + h * HS + i] = o;
                }
            }
}

static double gelu_d(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static void ref_gelu(const struct gcase *c, double *out)
{
    for (size_t i = 0; i < c->nout; i++) out[i] = gelu_d(c->x[0][i]);
}

static void ref_residual(const struct gcase *c, double *out)
{
    for (size_t i = 0; i < c->nout; i++) out[i] = c->x[0][i] + c->x[1][i];
}

static void softmax_d(double *out, const double *x, int V)
{
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < V; j++) mx = fmax(mx, x[j]);
    for (int j = 0; j < V; j++) sum += (out[j] = exp(x[j] - mx));
    for (int j = 0; j < V; j++) out[j] /= sum;
}

static void ref_softmax(const struct gcase *c, double *out)
{
    int N = c->d[0], V = c->d[1];
    for (int n = 0; n < N; n++) softmax_d(out + (size_t)n * V, c->x[0] + (size_t)n * V, V);
}

static void ref_crossentropy(const struct gcase *c, double *out)
{
    int N = c->d[0], V = c->d[1];
    double *p = malloc((size_t)V * sizeof *p);
    PL_ASSERT(p);
    for (int n = 0; n < N; n++) {
        softmax_d(p, c->x[0] + (size_t)n * V, V);
        out[n] = -log(p[c->idx[n]]);
    }
    free(p);
}

/* The mask as ops.h defines it, from the RNG directly rather than through kernels.h. */
static double dropout_mult_d(uint64_t seed, uint64_t stream, uint64_t idx, double p)
{
    return pl_rng_uniform(seed, stream, idx) >= (float)p ? 1.0 / (1.0 - p) : 0.0;
}

static void ref_dropout(const struct gcase *c, double *out)
{
    for (size_t i = 0; i < c->nout; i++)
        out[i] = dropout_mult_d(c->seed, c->stream, c->offset + i, c->p) * c->x[0][i];
}

/* ---- op tests ---------------------------------------------------------------------------- */

static void test_encoder(int B, int T, int C, int V)
{
    struct gcase c = {.nin = 2, .name = {"wte", "wpe"}, .ref = ref_encoder, .d = {B, T, C, V}};
    snprintf(c.label, sizeof c.label, "encoder B=%d T=%d C=%d V=%d", B, T, C, V);
    c.len[0] = (size_t)V * C;
    c.len[1] = (size_t)T * C;
    c.nout = (size_t)B * T * C;
    for (int k = 0; k < 2; k++) c.x[k] = rand_vec(c.len[k], 1.0);
    c.w = rand_vec(c.nout, 1.0);
    c.idx = rand_ints((size_t)B * T, V);

    float *out = dalloc(c.nout * sizeof(float));
    int *tok = to_dev_int(c.idx, (size_t)B * T);
    flops_start();
    pl_encoder_forward(out, tok, to_dev(c.x[0], c.len[0]), to_dev(c.x[1], c.len[1]), B, T, C, V);
    expect_flops(c.label, "forward", (double)PL_FLOPS_ENCODER_FWD * B * T * C);
    expect_forward(&c, from_dev(out, c.nout));

    double *p0 = rand_vec(c.len[0], 1.0), *p1 = rand_vec(c.len[1], 1.0);
    float *dwte = to_dev(p0, c.len[0]), *dwpe = to_dev(p1, c.len[1]);
    flops_start();
    pl_encoder_backward(dwte, dwpe, to_dev(c.w, c.nout), tok, B, T, C, V);
    expect_flops(c.label, "backward", (double)PL_FLOPS_ENCODER_BWD * B * T * C);
    expect_grad(&c, 0, grad_from_dev(dwte, p0, c.len[0]));
    expect_grad(&c, 1, grad_from_dev(dwpe, p1, c.len[1]));
    release_all();
}

static void test_layernorm(int N, int C)
{
    struct gcase c = {.nin = 3, .name = {"inp", "weight", "bias"}, .ref = ref_layernorm,
                      .d = {N, C}};
    snprintf(c.label, sizeof c.label, "layernorm N=%d C=%d", N, C);
    c.len[0] = (size_t)N * C;
    c.len[1] = c.len[2] = (size_t)C;
    c.nout = c.len[0];
    for (int k = 0; k < 3; k++) c.x[k] = rand_vec(c.len[k], 1.0);
    c.w = rand_vec(c.nout, 1.0);

    float *inp = to_dev(c.x[0], c.len[0]), *w = to_dev(c.x[1], C), *b = to_dev(c.x[2], C);
    float *out = dalloc(c.nout * sizeof(float)), *mean = dalloc(N * sizeof(float)),
          *rstd = dalloc(N * sizeof(float));
    flops_start();
    pl_layernorm_forward(out, mean, rstd, inp, w, b, N, C);
    expect_flops(c.label, "forward", (double)PL_FLOPS_LAYERNORM_FWD * N * C);
    expect_forward(&c, from_dev(out, c.nout));

    double *p[3];
    float *g[3];
    for (int k = 0; k < 3; k++) g[k] = to_dev(p[k] = rand_vec(c.len[k], 1.0), c.len[k]);
    flops_start();
    pl_layernorm_backward(g[0], g[1], g[2], to_dev(c.w, c.nout), inp, w, mean, rstd, N, C);
    expect_flops(c.label, "backward", (double)PL_FLOPS_LAYERNORM_BWD * N * C);
    for (int k = 0; k < 3; k++) expect_grad(&c, k, grad_from_dev(g[k], p[k], c.len[k]));
    release_all();
}

static void test_matmul(int N, int C, int OC, int with_bias)
{
    struct gcase c = {.nin = with_bias ? 3 : 2, .name = {"inp", "weight", "bias"},
                      .ref = ref_matmul, .d = {N, C, OC}};
    snprintf(c.label, sizeof c.label, "matmul N=%d C=%d OC=%d%s", N, C, OC,
             with_bias ? "" : " no bias");
    c.len[0] = (size_t)N * C;
    c.len[1] = (size_t)OC * C;
    c.len[2] = (size_t)OC;
    c.nout = (size_t)N * OC;
    for (int k = 0; k < c.nin; k++) c.x[k] = rand_vec(c.len[k], 1.0);
    c.w = rand_vec(c.nout, 1.0);

    float *inp = to_dev(c.x[0], c.len[0]), *w = to_dev(c.x[1], c.len[1]);
    float *b = with_bias ? to_dev(c.x[2], c.len[2]) : NULL;
    float *out = dalloc(c.nout * sizeof(float));
    flops_start();
    pl_matmul_forward(out, inp, w, b, N, C, OC);
    expect_flops(c.label, "forward", 2.0 * N * C * OC + (with_bias ? (double)N * OC : 0.0));
    expect_forward(&c, from_dev(out, c.nout));

    double *p[3];
    float *g[3] = {NULL, NULL, NULL};
    for (int k = 0; k < c.nin; k++) g[k] = to_dev(p[k] = rand_vec(c.len[k], 1.0), c.len[k]);
    float *dout = to_dev(c.w, c.nout);
    flops_start();
    pl_matmul_backward(g[0], g[1], g[2], dout, inp, w, N, C, OC);
    expect_flops(c.label, "backward", 4.0 * N * C * OC + (with_bias ? (double)N * OC : 0.0));
    for (int k = 0; k < c.nin; k++) expect_grad(&c, k, grad_from_dev(g[k], p[k], c.len[k]));

    /* Without dinp (the first layer): only the weight gradient is computed and charged. */
    float *g1 = to_dev(p[1], c.len[1]);
    flops_start();
    pl_matmul_backward(NULL, g1, NULL, dout, inp, w, N, C, OC);
    expect_flops(c.label, "backward without dinp, dbias", 2.0 * N * C * OC);
    expect_grad(&c, 1, grad_from_dev(g1, p[1], c.len[1]));
    release_all();
}

static void test_sgemm(int M, int N, int K)
{
    char label[64];
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            snprintf(label, sizeof label, "sgemm M=%d N=%d K=%d ta=%d tb=%d", M, N, K, ta, tb);
            /* Strides wider than the rows, as for a head's view into qkv. */
            int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
            int lda = ac + 3, ldb = bc + 2, ldc = N + 1;
            double *A = rand_vec((size_t)ar * lda, 1.0), *Bm = rand_vec((size_t)br * ldb, 1.0);
            double *C0 = rand_vec((size_t)M * ldc, 1.0), *ref = hvec((size_t)M * ldc);
            float alpha = 0.75f, beta = -0.5f;
            for (int i = 0; i < M; i++)
                for (int j = 0; j < ldc; j++) {
                    ref[(size_t)i * ldc + j] = C0[(size_t)i * ldc + j]; /* padding: untouched */
                    if (j >= N) continue; /* op(B) has N columns: nothing to read beyond */
                    double s = 0;
                    for (int k = 0; k < K; k++)
                        s += (ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) *
                             (tb ? Bm[(size_t)j * ldb + k] : Bm[(size_t)k * ldb + j]);
                    ref[(size_t)i * ldc + j] = alpha * s + beta * C0[(size_t)i * ldc + j];
                }
            float *Cd = to_dev(C0, (size_t)M * ldc);
            flops_start();
            pl_sgemm(ta, tb, M, N, K, alpha, to_dev(A, (size_t)ar * lda), lda,
                     to_dev(Bm, (size_t)br * ldb), ldb, beta, Cd, ldc);
            expect_flops(label, "sgemm", 2.0 * M * N * K);
            expect_close(label, "C (padding untouched)", ref, from_dev(Cd, (size_t)M * ldc),
                         (size_t)M * ldc);
            release_all();
        }
}

static void test_attention(int B, int T, int C, int NH)
{
    struct gcase c = {.nin = 1, .name = {"qkv"}, .ref = ref_attention, .d = {B, T, C, NH}};
    snprintf(c.label, sizeof c.label, "attention B=%d T=%d C=%d NH=%d", B, T, C, NH);
    c.len[0] = (size_t)B * T * 3 * C;
    c.nout = (size_t)B * T * C;
    c.x[0] = rand_vec(c.len[0], 1.0);
    c.w = rand_vec(c.nout, 1.0);

    size_t natt = (size_t)B * NH * T * T;
    float *qkv = to_dev(c.x[0], c.len[0]), *out = dalloc(c.nout * sizeof(float)),
          *att = dalloc(natt * sizeof(float));
    flops_start();
    pl_attention_forward(out, att, qkv, B, T, C, NH);
    expect_flops(c.label, "forward", 4.0 * B * T * T * C + (double)PL_FLOPS_SOFTMAX_FWD * natt);
    expect_forward(&c, from_dev(out, c.nout));

    /* The saved probabilities: rows sum to 1, the future is exactly zero. */
    double *a = from_dev(att, natt);
    size_t masked_nonzero = 0, bad_rows = 0;
    for (size_t r = 0; r < natt / T; r++) {
        int t = (int)(r % T);
        double s = 0;
        for (int j = 0; j < T; j++) {
            s += a[r * T + j];
            if (j > t && a[r * T + j] != 0.0) masked_nonzero++;
        }
        if (fabs(s - 1.0) > ATOL) bad_rows++;
    }
    CHECK(masked_nonzero == 0 && bad_rows == 0, "%s: att has %zu nonzero future entries and %zu "
          "rows not summing to 1", c.label, masked_nonzero, bad_rows);

    double *p0 = rand_vec(c.len[0], 1.0);
    float *dqkv = to_dev(p0, c.len[0]);
    flops_start();
    pl_attention_backward(dqkv, to_dev(c.w, c.nout), qkv, att, B, T, C, NH);
    expect_flops(c.label, "backward", 8.0 * B * T * T * C + (double)PL_FLOPS_SOFTMAX_BWD * natt);
    expect_grad(&c, 0, grad_from_dev(dqkv, p0, c.len[0]));

    /* With the score gradients in a caller's buffer (a model's arena, not zeroed): the
     * same gradient as the allocating call, bit for bit. */
    size_t nwork = pl_attention_backward_work(T, NH);
    float *work = to_dev(rand_vec(nwork, 1.0), nwork);
    float *dqkv_in = to_dev(p0, c.len[0]);
    pl_attention_backward_in(dqkv_in, to_dev(c.w, c.nout), qkv, att, B, T, C, NH, work);
    double *got = from_dev(dqkv_in, c.len[0]), *want = from_dev(dqkv, c.len[0]);
    CHECK(memcmp(got, want, c.len[0] * sizeof *got) == 0, "%s: pl_attention_backward_in with a "
          "work buffer differs from pl_attention_backward", c.label);
    release_all();
}

/* The fused fc + GELU ops against the separate ops they replace (matmul, gelu), checked
 * themselves above against the double reference: same outputs, same gradients
 * (accumulated where the separate ops accumulate), same FLOPs. */
static void test_matmul_gelu(int N, int C, int OC, int with_bias)
{
    char label[96];
    snprintf(label, sizeof label, "matmul_gelu N=%d C=%d OC=%d%s", N, C, OC,
             with_bias ? "" : " no bias");
    size_t nin = (size_t)N * C, nw = (size_t)OC * C, nout = (size_t)N * OC;
    float *inp = to_dev(rand_vec(nin, 1.0), nin), *w = to_dev(rand_vec(nw, 1.0), nw);
    float *b = with_bias ? to_dev(rand_vec((size_t)OC, 1.0), (size_t)OC) : NULL;
    float *h = dalloc(nout * sizeof(float)), *g = dalloc(nout * sizeof(float));
    float *h_ref = dalloc(nout * sizeof(float)), *g_ref = dalloc(nout * sizeof(float));
    flops_start();
    pl_matmul_gelu_forward(h, g, inp, w, b, N, C, OC);
    expect_flops(label, "forward", 2.0 * N * C * OC + (with_bias ? (double)N * OC : 0.0) +
                                       (double)PL_FLOPS_GELU_FWD * N * OC);
    pl_matmul_forward(h_ref, inp, w, b, N, C, OC);
    pl_gelu_forward(g_ref, h_ref, nout);
    expect_close(label, "h", from_dev(h_ref, nout), from_dev(h, nout), nout);
    expect_close(label, "gelu(h)", from_dev(g_ref, nout), from_dev(g, nout), nout);

    /* backward of y[N, C] = gelu(h)[N, OC] w2^T + b2, w2 [C, OC]: the fused op writes dh */
    float *w2 = to_dev(rand_vec(nw, 1.0), nw);
    double *dy = rand_vec(nin, 1.0), *pw = rand_vec(nw, 1.0), *pb = rand_vec((size_t)C, 1.0);
    float *dyd = to_dev(dy, nin);
    float *dh = to_dev(rand_vec(nout, 1.0), nout); /* any prior: it is overwritten */
    float *dw = to_dev(pw, nw), *db = to_dev(pb, (size_t)C);
    float *dg_ref = dalloc(nout * sizeof(float)), *dh_ref = dalloc(nout * sizeof(float));
    float *dw_ref = to_dev(pw, nw), *db_ref = to_dev(pb, (size_t)C);
    flops_start();
    pl_matmul_gelu_backward(dh, dw, db, dyd, g, h, w2, N, OC, C);
    expect_flops(label, "backward", 4.0 * N * C * OC + (double)N * C +
                                        (double)PL_FLOPS_GELU_BWD * N * OC);
    pl_matmul_backward(dg_ref, dw_ref, db_ref, dyd, g, w2, N, OC, C);
    pl_gelu_backward(dh_ref, dg_ref, h, nout);
    expect_close(label, "dh", from_dev(dh_ref, nout), from_dev(dh, nout), nout);
    expect_close(label, "dweight", from_dev(dw_ref, nw), from_dev(dw, nw), nw);
    expect_close(label, "dbias", from_dev(db_ref, (size_t)C), from_dev(db, (size_t)C),
                 (size_t)C);
    release_all();
}

static void test_gelu_residual(size_t n)
{
    struct gcase g = {.nin = 1, .name = {"inp"}, .ref = ref_gelu, .nout = n, .len = {n}};
    snprintf(g.label, sizeof g.label, "gelu n=%zu", n);
    g.x[0] = rand_vec(n, 2.0);
    const double extremes[] = {-30.0, 30.0, -6.0, 6.0}; /* saturated tails stay finite */
    for (size_t i = 0; i < 4 && i < n; i++) g.x[0][i] = extremes[i];
    g.w = rand_vec(n, 1.0);
    float *inp = to_dev(g.x[0], n), *out = dalloc(n * sizeof(float));
    flops_start();
    pl_gelu_forward(out, inp, n);
    expect_flops(g.label, "forward", (double)PL_FLOPS_GELU_FWD * n);
    expect_forward(&g, from_dev(out, n));
    double *p0 = rand_vec(n, 1.0);
    float *dinp = to_dev(p0, n);
    flops_start();
    pl_gelu_backward(dinp, to_dev(g.w, n), inp, n);
    expect_flops(g.label, "backward", (double)PL_FLOPS_GELU_BWD * n);
    expect_grad(&g, 0, grad_from_dev(dinp, p0, n));

    struct gcase r = {.nin = 2, .name = {"a", "b"}, .ref = ref_residual, .nout = n,
                      .len = {n, n}};
    snprintf(r.label, sizeof r.label, "residual n=%zu", n);
    r.x[0] = rand_vec(n, 1.0);
    r.x[1] = rand_vec(n, 1.0);
    r.w = rand_vec(n, 1.0);
    flops_start();
    pl_residual_forward(out, to_dev(r.x[0], n), to_dev(r.x[1], n), n);
    expect_flops(r.label, "forward", (double)PL_FLOPS_RESIDUAL_FWD * n);
    expect_forward(&r, from_dev(out, n));
    double *pa = rand_vec(n, 1.0), *pb = rand_vec(n, 1.0);
    float *da = to_dev(pa, n), *db = to_dev(pb, n);
    flops_start();
    pl_residual_backward(da, db, to_dev(r.w, n), n);
    expect_flops(r.label, "backward", (double)PL_FLOPS_RESIDUAL_BWD * n);
    expect_grad(&r, 0, grad_from_dev(da, pa, n));
    expect_grad(&r, 1, grad_from_dev(db, pb, n));
    release_all();
}

static void test_softmax_xent(int N, int V)
{
    struct gcase s = {.nin = 1, .name = {"logits"}, .ref = ref_softmax, .d = {N, V}};
    snprintf(s.label, sizeof s.label, "softmax N=%d V=%d", N, V);
    s.len[0] = s.nout = (size_t)N * V;
    s.x[0] = rand_vec(s.nout, 3.0);
    s.w = rand_vec(s.nout, 1.0);
    float *logits = to_dev(s.x[0], s.nout), *probs = dalloc(s.nout * sizeof(float));
    flops_start();
    pl_softmax_forward(probs, logits, N, V);
    expect_flops(s.label, "forward", (double)PL_FLOPS_SOFTMAX_FWD * N * V);
    expect_forward(&s, from_dev(probs, s.nout));
    double *p0 = rand_vec(s.nout, 1.0);
    float *dl = to_dev(p0, s.nout);
    flops_start();
    pl_softmax_backward(dl, to_dev(s.w, s.nout), probs, N, V);
    expect_flops(s.label, "backward", (double)PL_FLOPS_SOFTMAX_BWD * N * V);
    expect_grad(&s, 0, grad_from_dev(dl, p0, s.nout));

    /* Cross-entropy of the mean loss: every position weighs dloss = 1/N. */
    struct gcase x = {.nin = 1, .name = {"logits"}, .ref = ref_crossentropy, .d = {N, V}};
    snprintf(x.label, sizeof x.label, "softmax+crossentropy N=%d V=%d", N, V);
    x.len[0] = s.len[0];
    x.x[0] = s.x[0];
    x.nout = (size_t)N;
    x.w = hvec((size_t)N);
    float dloss = 1.0f / (float)N;
    for (int n = 0; n < N; n++) x.w[n] = dloss;
    x.idx = rand_ints((size_t)N, V);
    int *tgt = to_dev_int(x.idx, (size_t)N);
    float *losses = dalloc((size_t)N * sizeof(float));
    flops_start();
    pl_crossentropy_forward(losses, logits, tgt, N, V);
    expect_flops(x.label, "forward", (double)PL_FLOPS_XENT_FWD * N * V);
    expect_forward(&x, from_dev(losses, (size_t)N));
    float *dx = to_dev(p0, s.nout);
    flops_start();
    pl_crossentropy_softmax_backward(dx, probs, tgt, dloss, N, V);
    expect_flops(x.label, "backward", (double)PL_FLOPS_XENT_BWD * N * V);
    expect_grad(&x, 0, grad_from_dev(dx, p0, s.nout));

    /* The fused forward gives the same probabilities and losses, bit for bit, and charges
     * both ops' FLOPs; in place (probs = logits) too. */
    float *fprobs = dalloc(s.nout * sizeof(float)), *flosses = dalloc((size_t)N * sizeof(float));
    flops_start();
    pl_softmax_crossentropy_forward(fprobs, flosses, logits, tgt, N, V);
    expect_flops(x.label, "fused forward",
                 (double)(PL_FLOPS_SOFTMAX_FWD + PL_FLOPS_XENT_FWD) * N * V);
    float *inplace = to_dev(s.x[0], s.nout);
    pl_softmax_crossentropy_forward(inplace, flosses, inplace, tgt, N, V);
    double *pa = from_dev(probs, s.nout), *pb = from_dev(fprobs, s.nout),
           *pc = from_dev(inplace, s.nout), *la = from_dev(losses, (size_t)N),
           *lb = from_dev(flosses, (size_t)N);
    size_t differ = 0;
    for (size_t i = 0; i < s.nout; i++) differ += pa[i] != pb[i] || pa[i] != pc[i];
    for (int n = 0; n < N; n++) differ += la[n] != lb[n];
    CHECK(differ == 0, "%s: the fused softmax+crossentropy forward differs from the two ops "
          "in %zu values", x.label, differ);
    release_all();
}

/* Logits so far apart that the target's softmax probability underflows fp32 (exp of a gap
 * above ~104 is below the smallest float): the loss is large but finite, and the op must
 * agree with log-sum-exp in double. */
static void test_xent_extreme(void)
{
    const int N = 4, V = 6;
    const double gaps[] = {120.0, 200.0, 104.5, 0.0};
    double *z = rand_vec((size_t)N * V, 1.0);
    int tgt[4];
    for (int n = 0; n < N; n++) {
        tgt[n] = n % V;
        z[(size_t)n * V + (tgt[n] + 1) % V] = z[(size_t)n * V + tgt[n]] + gaps[n];
    }
    float *losses = dalloc((size_t)N * sizeof(float));
    pl_crossentropy_forward(losses, to_dev(z, (size_t)N * V), to_dev_int(tgt, (size_t)N), N, V);
    double *got = from_dev(losses, (size_t)N), *ref = hvec((size_t)N);
    for (int n = 0; n < N; n++) {
        const double *row = z + (size_t)n * V;
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < V; j++) mx = fmax(mx, row[j]);
        for (int j = 0; j < V; j++) sum += exp(row[j] - mx);
        ref[n] = mx + log(sum) - row[tgt[n]];
        CHECK(isfinite(got[n]), "crossentropy: logit gap %g gives loss %g, expected %.6g "
              "(finite)", gaps[n], got[n], ref[n]);
    }
    expect_close("crossentropy with underflowing probabilities", "loss", ref, got, (size_t)N);
    release_all();
}

/* ---- dropout ---------------------------------------------------------------------------- */

static void test_dropout_grad(size_t n, float p, uint64_t offset)
{
    struct gcase c = {.nin = 1, .name = {"inp"}, .ref = ref_dropout, .nout = n, .len = {n},
                      .p = p, .seed = 7, .stream = pl_rng_stream("h.0.attn.drop"),
                      .offset = offset};
    snprintf(c.label, sizeof c.label, "dropout n=%zu p=%g offset=%llu", n, (double)p,
             (unsigned long long)offset);
    c.x[0] = rand_vec(n, 1.0);
    c.w = rand_vec(n, 1.0);
    float *inp = to_dev(c.x[0], n), *out = dalloc(n * sizeof(float));
    flops_start();
    pl_dropout_forward(out, inp, n, p, c.seed, c.stream, offset);
    expect_flops(c.label, "forward", (double)PL_FLOPS_DROPOUT * n);
    expect_forward(&c, from_dev(out, n));
    double *p0 = rand_vec(n, 1.0);
    float *dinp = to_dev(p0, n);
    flops_start();
    pl_dropout_backward(dinp, to_dev(c.w, n), n, p, c.seed, c.stream, offset);
    expect_flops(c.label, "backward", (double)PL_FLOPS_DROPOUT * n);
    expect_grad(&c, 0, grad_from_dev(dinp, p0, n));
    release_all();
}

static size_t count_diff(const double *a, const double *b, size_t n)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += a[i] != b[i];
    return d;
}

/* A shard (rows, columns, or a contiguous run) draws exactly the slice of the full mask. */
static void test_dropout_shards(void)
{
    const size_t R = 6, K = 10, n = R * K;
    const float p = 0.4f;
    const uint64_t seed = 11, stream = pl_rng_stream("h.1.mlp.drop");
    double *x = rand_vec(n, 1.0), *dy = rand_vec(n, 1.0);
    float *xd = to_dev(x, n), *dyd = to_dev(dy, n), *full = dalloc(n * sizeof(float));
    float *dfull = dalloc(n * sizeof(float));
    pl_dropout_forward_block(full, xd, R, K, K, 0, 0, p, seed, stream);
    pl_dropout_backward_block(dfull, dyd, R, K, K, 0, 0, p, seed, stream);
    double *fh = from_dev(full, n), *dfh = from_dev(dfull, n);

    /* contiguous form, whole tensor, equals the block form */
    float *flat = dalloc(n * sizeof(float));
    pl_dropout_forward(flat, xd, n, p, seed, stream, 0);
    CHECK(count_diff(from_dev(flat, n), fh, n) == 0, "dropout: contiguous and block forms of "
          "the full tensor differ");

    /* rows [2, 5) */
    size_t r0 = 2, rr = 3;
    float *rows = dalloc(rr * K * sizeof(float)), *drows = dalloc(rr * K * sizeof(float));
    pl_dropout_forward_block(rows, xd + r0 * K, rr, K, K, r0, 0, p, seed, stream);
    pl_dropout_backward_block(drows, dyd + r0 * K, rr, K, K, r0, 0, p, seed, stream);
    CHECK(count_diff(from_dev(rows, rr * K), fh + r0 * K, rr * K) == 0,
          "dropout: a row shard's forward differs from the slice of the full tensor");
    CHECK(count_diff(from_dev(drows, rr * K), dfh + r0 * K, rr * K) == 0,
          "dropout: a row shard's backward differs from the slice of the full tensor");

    /* columns [3, 7), packed densely as a column-parallel rank holds them */
    size_t c0 = 3, cc = 4;
    double *xs = hvec(R * cc), *dys = hvec(R * cc), *fs = hvec(R * cc), *dfs = hvec(R * cc);
    for (size_t r = 0; r < R; r++)
        for (size_t j = 0; j < cc; j++) {
            xs[r * cc + j] = x[r * K + c0 + j];
            dys[r * cc + j] = dy[r * K + c0 + j];
            fs[r * cc + j] = fh[r * K + c0 + j];
            dfs[r * cc + j] = dfh[r * K + c0 + j];
        }
    float *cols = dalloc(R * cc * sizeof(float)), *dcols = dalloc(R * cc * sizeof(float));
    pl_dropout_forward_block(cols, to_dev(xs, R * cc), R, cc, K, 0, c0, p, seed, stream);
    pl_dropout_backward_block(dcols, to_dev(dys, R * cc), R, cc, K, 0, c0, p, seed, stream);
    CHECK(count_diff(from_dev(cols, R * cc), fs, R * cc) == 0,
          "dropout: a column shard's forward differs from the slice of the full tensor");
    CHECK(count_diff(from_dev(dcols, R * cc), dfs, R * cc) == 0,
          "dropout: a column shard's backward differs from the slice of the full tensor");

    /* a contiguous run [23, 40) with its global offset */
    size_t o = 23, m = 17;
    float *run = dalloc(m * sizeof(float));
    pl_dropout_forward(run, xd + o, m, p, seed, stream, o);
    CHECK(count_diff(from_dev(run, m), fh + o, m) == 0,
          "dropout: a contiguous shard at offset %zu differs from the full tensor", o);

    /* in place, and p = 0 is a copy */
    pl_dropout_forward(xd, xd, n, p, seed, stream, 0);
    CHECK(count_diff(from_dev(xd, n), fh, n) == 0, "dropout: in place (out == inp) differs");
    pl_dropout_forward(flat, dyd, n, 0.0f, seed, stream, 0);
    CHECK(count_diff(from_dev(flat, n), dy, n) == 0, "dropout: p = 0 must copy the input");
    release_all();

    /* The kept fraction is 1-p within 5 standard deviations of a binomial. */
    size_t big = 200000;
    double *ones = hvec(big);
    for (size_t i = 0; i < big; i++) ones[i] = 1.0;
    float *od = to_dev(ones, big);
    pl_dropout_forward(od, od, big, p, seed, stream, 12345);
    double kept = pl_sum(od, big) * (1.0 - p);
    double sd = sqrt(big * p * (1.0 - p));
    CHECK(fabs(kept - big * (1.0 - p)) < 5 * sd, "dropout: kept %.0f of %zu at p=%g, expected "
          "%.0f +- %.0f", kept, big, (double)p, big * (1.0 - p), 5 * sd);
    release_all();
}

/* ---- optimizer and norms ------------------------------------------------------------------ */

static void test_adamw(void)
{
    const size_t n = 29;
    const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
    double *p = rand_vec(n, 1.0), *g = rand_vec(n, 1.0), *m = rand_vec(n, 0.1);
    double *v = rand_vec(n, 0.1);
    for (size_t i = 0; i < n; i++) v[i] = (float)(v[i] * v[i]);
    float *pd = to_dev(p, n), *gd = to_dev(g, n), *md = to_dev(m, n), *vd = to_dev(v, n);
    for (int t = 1; t <= 3; t++) {
        flops_start();
        pl_adamw_step(pd, gd, md, vd, n, t, lr, b1, b2, eps, wd);
        expect_flops("adamw", "step", (double)PL_FLOPS_ADAMW * n);
        for (size_t i = 0; i < n; i++) {
            m[i] = (double)b1 * m[i] + (1.0 - b1) * g[i];
            v[i] = (double)b2 * v[i] + (1.0 - b2) * g[i] * g[i];
            double mh = m[i] / (1.0 - pow(b1, t)), vh = v[i] / (1.0 - pow(b2, t));
            p[i] = p[i] - (double)lr * wd * p[i];
            p[i] -= lr * mh / (sqrt(vh) + eps);
        }
        char what[32];
        snprintf(what, sizeof what, "param after step %d", t);
        expect_close("adamw", what, p, from_dev(pd, n), n);
        expect_close("adamw", "m", m, from_dev(md, n), n);
        expect_close("adamw", "v", v, from_dev(vd, n), n);
    }

    /* A ZeRO shard [7, 20) updated alone matches the same slice of the full update. */
    double *q = rand_vec(n, 1.0), *z = hvec(n);
    float *full = to_dev(q, n), *shard = to_dev(q, n);
    float *mf = to_dev(z, n), *vf = to_dev(z, n), *ms = to_dev(z, n), *vs = to_dev(z, n);
    pl_adamw_step(full, gd, mf, vf, n, 1, lr, b1, b2, eps, wd);
    pl_adamw_step(shard + 7, gd + 7, ms + 7, vs + 7, 13, 1, lr, b1, b2, eps, wd);
    CHECK(count_diff(from_dev(full, n) + 7, from_dev(shard, n) + 7, 13) == 0,
          "adamw: a shard's update differs from the slice of the full update");
    release_all();
}

static void test_norms(void)
{
    const size_t n = 1001;
    double *g = rand_vec(n, 3.0), ref = 0, sum = 0;
    for (size_t i = 0; i < n; i++) {
        ref += g[i] * g[i];
        sum += g[i];
    }
    float *gd = to_dev(g, n);
    flops_start();
    double got = pl_grad_norm_sq(gd, n);
    expect_flops("grad norm", "pl_grad_norm_sq", (double)PL_FLOPS_NORM_SQ * n);
    CHECK(fabs(got - ref) <= 1e-12 * ref, "grad norm: sum of squares %.17g, expected %.17g",
          got, ref);
    double s = pl_sum(gd, n);
    CHECK(fabs(s - sum) <= 1e-12 * ref, "pl_sum: %.17g, expected %.17g", s, sum);

    /* clip factor: min(1, max_norm / (norm + 1e-6)) */
    float max_norm = 0.5f * (float)sqrt(ref);
    float f = pl_clip_scale(ref, max_norm);
    CHECK(fabs(f - max_norm / (sqrt(ref) + 1e-6)) <= 1e-6 * f, "clip scale %g, expected %g",
          (double)f, max_norm / (sqrt(ref) + 1e-6));
    CHECK(pl_clip_scale(ref, 2.0f * (float)sqrt(ref)) == 1.0f, "clip: a norm under max is kept");
    CHECK(pl_clip_scale(ref, 0.0f) == 1.0f, "clip: max_norm 0 means no clipping");

    flops_start();
    pl_scale(gd, n, f);
    expect_flops("grad norm", "pl_scale", (double)PL_FLOPS_SCALE * n);
    double after = pl_grad_norm_sq(gd, n);
    CHECK(fabs(sqrt(after) - max_norm) <= 1e-5 * max_norm, "clipped norm %g, expected %g",
          sqrt(after), (double)max_norm);

    /* helpers */
    float *h = dalloc(n * sizeof(float));
    pl_copy(h, gd, n);
    pl_accumulate(h, gd, n);
    double *hh = from_dev(h, n), *gg = from_dev(gd, n);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += hh[i] != 2 * gg[i];
    CHECK(bad == 0, "pl_copy + pl_accumulate: %zu elements differ from 2x", bad);
    pl_zero(h, n);
    CHECK(pl_grad_norm_sq(h, n) == 0.0, "pl_zero leaves nonzeros");
    release_all();
}

/* Gather, scatter-add and row-dot, as the MoE layer chains them: gather's backward is a
 * scatter-add, and the scatter-add's gradients are a gather scaled per row (for its input)
 * and the row-dot (for its scale). Forwards against double loops, backwards against finite
 * differences. Rows repeat (9 rows drawn from 5), so accumulation into one row is covered. */
static void ref_gather(const struct gcase *c, double *out)
{
    int n = c->d[0], C = c->d[1];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < C; j++) out[(size_t)i * C + j] = c->x[0][(size_t)c->idx[i] * C + j];
}

/* out = scatter of scale[i] * inp[i] into the rows (the prior value does not move L's
 * gradient, so the reference starts from zero). */
static void ref_scatter(const struct gcase *c, double *out)
{
    int n = c->d[0], C = c->d[1];
    memset(out, 0, c->nout * sizeof *out);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < C; j++)
            out[(size_t)c->idx[i] * C + j] += c->x[1][i] * c->x[0][(size_t)i * C + j];
}

static void test_rows(void)
{
    const int R = 5, n = 9, C = 7;
    int *rows = rand_ints((size_t)n, R);
    int *rd = to_dev_int(rows, (size_t)n);

    /* gather: out[i] = inp[rows[i]]; d inp = scatter-add of dout */
    struct gcase g = {.nin = 1, .name = {"inp"}, .ref = ref_gather, .d = {n, C}, .idx = rows};
    snprintf(g.label, sizeof g.label, "gather rows n=%d C=%d from %d", n, C, R);
    g.len[0] = (size_t)R * C;
    g.nout = (size_t)n * C;
    g.x[0] = rand_vec(g.len[0], 1.0);
    g.w = rand_vec(g.nout, 1.0);
    float *out = dalloc(g.nout * sizeof(float));
    flops_start();
    pl_gather_rows(out, to_dev(g.x[0], g.len[0]), rd, n, C);
    expect_flops(g.label, "pl_gather_rows", 0.0);
    expect_forward(&g, from_dev(out, g.nout));
    double *p0 = rand_vec(g.len[0], 1.0);
    float *dinp = to_dev(p0, g.len[0]);
    flops_start();
    pl_scatter_add_rows(dinp, to_dev(g.w, g.nout), rd, NULL, n, C);
    expect_flops(g.label, "pl_scatter_add_rows", 2.0 * n * C);
    expect_grad(&g, 0, grad_from_dev(dinp, p0, g.len[0]));

    /* scatter-add: out[rows[i]] += scale[i] * inp[i] */
    struct gcase s = {.nin = 2, .name = {"inp", "scale"}, .ref = ref_scatter, .d = {n, C},
                      .idx = rows};
    snprintf(s.label, sizeof s.label, "scatter-add rows n=%d C=%d into %d", n, C, R);
    s.len[0] = (size_t)n * C;
    s.len[1] = (size_t)n;
    s.nout = (size_t)R * C;
    s.x[0] = rand_vec(s.len[0], 1.0);
    s.x[1] = rand_vec(s.len[1], 1.0);
    s.w = rand_vec(s.nout, 1.0);
    double *prior = rand_vec(s.nout, 1.0);
    float *o = to_dev(prior, s.nout), *xd = to_dev(s.x[0], s.len[0]);
    float *scd = to_dev(s.x[1], s.len[1]);
    pl_scatter_add_rows(o, xd, rd, scd, n, C);
    double *got = grad_from_dev(o, prior, s.nout); /* what was added */
    expect_forward(&s, got);

    /* d inp[i] = scale[i] * dout[rows[i]]: a gather, then a scaled scatter onto rows 0..n-1 */
    float *dout = to_dev(s.w, s.nout), *picked = dalloc(s.len[0] * sizeof(float));
    pl_gather_rows(picked, dout, rd, n, C);
    int *iota = (int *)hvec((size_t)n); /* ints fit in the doubles' bytes */
    for (int i = 0; i < n; i++) iota[i] = i;
    double *pi = rand_vec(s.len[0], 1.0);
    float *dx = to_dev(pi, s.len[0]);
    pl_scatter_add_rows(dx, picked, to_dev_int(iota, (size_t)n), scd, n, C);
    expect_grad(&s, 0, grad_from_dev(dx, pi, s.len[0]));

    /* d scale[i] = dout[rows[i]] . inp[i]: the row-dot */
    double *ps = rand_vec(s.len[1], 1.0);
    float *dscale = to_dev(ps, s.len[1]);
    flops_start();
    pl_row_dot(dscale, dout, rd, xd, n, C);
    expect_flops(s.label, "pl_row_dot", 2.0 * n * C);
    expect_grad(&s, 1, grad_from_dev(dscale, ps, s.len[1]));
    release_all();
}

/* A backward given no gradient to write computes and charges nothing (ops.h), where a
 * NULL used to be refused by some of them. */
static void test_null_grads(void)
{
    const int B = 2, T = 3, C = 4, NH = 2, N = B * T, V = 5;
    double *x = rand_vec((size_t)N * 3 * C, 1.0); /* read by none of the calls */
    float *buf = to_dev(x, (size_t)N * 3 * C);
    int tg[6] = {0, 1, 2, 3, 4, 0};
    int *td = to_dev_int(tg, (size_t)N);
    flops_start();
    pl_attention_backward(NULL, buf, buf, buf, B, T, C, NH);
    pl_softmax_backward(NULL, buf, buf, N, V);
    pl_crossentropy_softmax_backward(NULL, buf, td, 1.0f, N, V);
    pl_dropout_backward(NULL, buf, (size_t)N * C, 0.5f, 1, 2, 0);
    pl_dropout_backward_block(NULL, buf, (size_t)N, (size_t)C, (size_t)C, 0, 0, 0.5f, 1, 2);
    pl_layernorm_backward(NULL, NULL, NULL, buf, buf, buf, buf, buf, N, C);
    pl_matmul_backward(NULL, NULL, NULL, buf, buf, buf, N, C, C);
    pl_encoder_backward(NULL, NULL, buf, td, B, T, C, V);
    pl_gelu_backward(NULL, buf, buf, (size_t)N * C);
    expect_flops("backwards with NULL gradients", "all of them", 0.0);
    release_all();
}

/* Sums into shared outputs (a token repeated in the batch, a row chosen twice, the total of
 * a reduction) come out the same bits on every run: on the GPU build no kernel may add with
 * atomics, whose order changes between runs. The encoder's gradients add in input order,
 * so they equal a sequential fp32 loop exactly. */
static void test_repeatable(void)
{
    const int B = 8, T = 16, C = 24, V = 3; /* 128 tokens of 3 ids: every id repeats */
    const size_t nbt = (size_t)B * T * C, nw = (size_t)V * C, np = (size_t)T * C;
    double *dout = rand_vec(nbt, 1.0);
    int *tok = rand_ints((size_t)B * T, V);
    float *dd = to_dev(dout, nbt);
    int *tk = to_dev_int(tok, (size_t)B * T);
    float *wte = malloc(nw * sizeof *wte), *wpe = malloc(np * sizeof *wpe);
    PL_ASSERT(wte && wpe);
    memset(wte, 0, nw * sizeof *wte);
    memset(wpe, 0, np * sizeof *wpe);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                float d = (float)dout[((size_t)b * T + t) * C + c];
                wte[(size_t)tok[b * T + t] * C + c] += d;
                wpe[(size_t)t * C + c] += d;
            }
    float *got_wte = malloc(nw * sizeof *got_wte), *got_wpe = malloc(np * sizeof *got_wpe);
    PL_ASSERT(got_wte && got_wpe);
    for (int run = 0; run < 3; run++) {
        float *dwte = dalloc(nw * sizeof(float)), *dwpe = dalloc(np * sizeof(float));
        pl_encoder_backward(dwte, dwpe, dd, tk, B, T, C, V);
        pl_to_host(got_wte, dwte, nw * sizeof(float));
        pl_to_host(got_wpe, dwpe, np * sizeof(float));
        CHECK(!memcmp(got_wte, wte, nw * sizeof(float)), "encoder backward run %d: dwte differs "
              "from the fp32 sum in token order", run);
        CHECK(!memcmp(got_wpe, wpe, np * sizeof(float)), "encoder backward run %d: dwpe differs "
              "from the fp32 sum in batch order", run);
    }
    free(wte);
    free(wpe);
    free(got_wte);
    free(got_wpe);

    /* scatter-add of 128 rows into 3, and a sum of squares over many blocks: three runs */
    const int n = B * T;
    double *sc = rand_vec((size_t)n, 1.0);
    float *scd = to_dev(sc, (size_t)n);
    double *first = NULL;
    for (int run = 0; run < 3; run++) {
        float *o = dalloc(nw * sizeof(float));
        pl_scatter_add_rows(o, dd, tk, scd, n, C);
        double *got = from_dev(o, nw);
        if (!first) first = got;
        CHECK(count_diff(got, first, nw) == 0, "scatter-add run %d differs from run 0", run);
    }
    const size_t big = (size_t)1 << 20;
    double *g = rand_vec(big, 1.0);
    float *gd = to_dev(g, big);
    double s0 = pl_grad_norm_sq(gd, big), t0 = pl_sum(gd, big);
    for (int run = 1; run < 3; run++) {
        double s = pl_grad_norm_sq(gd, big), t = pl_sum(gd, big);
        CHECK(!memcmp(&s, &s0, sizeof s) && !memcmp(&t, &t0, sizeof t),
              "run %d: grad norm %.17g and sum %.17g, run 0 gave %.17g and %.17g", run, s, t,
              s0, t0);
    }
    release_all();
}

/* ---- usage errors, one per run ---------------------------------------------------------- */

static int bad_input(const char *mode)
{
    float *buf = pl_mem_alloc(4096 * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, "bad input");
    if (!strcmp(mode, "bad-heads"))
        pl_attention_forward(buf, buf, buf, 1, 4, 12, 5);
    else if (!strcmp(mode, "zero-size"))
        pl_matmul_forward(buf, buf, buf, NULL, 0, 12, 7);
    else if (!strcmp(mode, "bad-token")) {
        int tok[4] = {1, 2, 9, 3};
        int *td = pl_mem_alloc(sizeof tok, PL_MEM_ACTIV, PL_DEVICE, "tokens");
        pl_to_device(td, tok, sizeof tok);
        pl_encoder_forward(buf, td, buf, buf, 1, 4, 8, 9);
        pl_mem_free(td);
    } else if (!strcmp(mode, "bad-dropout"))
        pl_dropout_forward(buf, buf, 16, 1.0f, 1, 2, 0);
    else {
        pl_mem_free(buf);
        pl_usage_error("test_ops: unknown mode '%s' (modes: bad-heads, zero-size, bad-token, "
                       "bad-dropout, or none for all checks)", mode);
    }
    pl_mem_free(buf);
    printf("test_ops %s: the op accepted bad input\n", mode);
    return 1;
}

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    if (argc > 1) {
        int rc = bad_input(argv[1]);
        pl_finalize();
        return rc;
    }
    test_encoder(2, 5, 12, 7);
    test_encoder(1, 3, 5, 11);
    test_layernorm(10, 12);
    test_layernorm(3, 7);
    test_layernorm(1, 33);
    test_layernorm(2, 300); /* rows longer than the GPU's largest row block (256 threads) */
    test_layernorm(41, 5);  /* more rows than the GPU's threads to a column (16) */
    test_matmul(10, 12, 7, 1);
    test_matmul(3, 5, 9, 0);
    test_matmul(13, 17, 36, 1);
    test_matmul(1, 1, 1, 1);
    test_matmul_gelu(10, 12, 7, 1);
    test_matmul_gelu(3, 5, 9, 0);
    test_matmul_gelu(130, 17, 36, 1);
    test_sgemm(5, 7, 3);
    test_sgemm(1, 9, 13);
    test_attention(2, 5, 12, 3);
    test_attention(1, 7, 10, 5);
    test_attention(3, 1, 6, 2);
    test_attention(2, 9, 8, 1);
    test_attention(1, 133, 8, 2); /* several blocks of query rows, the last one short */
    test_attention(1, 260, 2, 1); /* rows longer than the GPU's largest row block */
    test_gelu_residual(37);
    test_softmax_xent(10, 7);
    test_softmax_xent(3, 65);
    test_softmax_xent(2, 300);
    test_xent_extreme();
    test_dropout_grad(37, 0.3f, 0);
    test_dropout_grad(21, 0.5f, 1000003);
    test_dropout_shards();
    test_adamw();
    test_norms();
    test_rows();
    test_null_grads();
    test_repeatable();
    printf("test_ops: %d checks, %d failed\n", checks, failures);
    pl_finalize();
    return failures ? 1 : 0;
}
