/* ops.c: the GPT ops. Each public function validates its sizes, charges its FLOPs to the
 * ledger, then runs the CPU version below (OpenBLAS for the products, plain loops over the
 * kernels.h math for the rest) or, on the GPU build, the CUDA version in ops_gpu.cu. */
#include "ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "kernels.h"
#include "ledger.h"
#include "mem.h"

#ifdef PL_GPU
#define BACKEND(name) pl_gpu_##name
/* pl_gpu_sgemm reads pl_matmul_precision itself */
#define pl_gpu_sgemm_prec pl_gpu_sgemm
#else
#include <cblas.h>
#define BACKEND(name) cpu_##name
#endif

/* ---- validation ------------------------------------------------------------------------- */

/* names: "N C OC", the sizes in that order (at most 4). */
static void require_sizes(const char *op, const char *names, int a, int b, int c, int d)
{
    int v[4] = {a, b, c, d}, count = 1;
    for (const char *s = names; *s; s++) count += *s == ' ';
    for (int i = 0; i < count; i++)
        if (v[i] <= 0) {
            char all[128];
            size_t len = 0;
            const char *s = names;
            for (int j = 0; j < count && len < sizeof all; j++) {
                int w = (int)strcspn(s, " ");
                len += (size_t)snprintf(all + len, sizeof all - len, "%s%.*s=%d",
                                        j ? ", " : "", w, s, v[j]);
                s += w + (s[w] == ' ');
            }
            pl_usage_error("%s: sizes %s: every size must be at least 1 (a caller with no "
                           "rows to process skips the call)", op, all);
        }
}

static void require_ptr(const char *op, const char *name, const void *p)
{
    if (!p) pl_usage_error("%s: %s is NULL; it must point to the op's memory", op, name);
}

const char *pl_divisors(int n, char *buf, size_t len)
{
    size_t used = 0;
    if (len) buf[0] = '\0';
    for (int d = 1; d <= n && used + 1 < len; d++) {
        if (n % d) continue;
        int w = snprintf(buf + used, len - used, "%s%d", used ? "," : "", d);
        if (w < 0 || (size_t)w >= len - used) break;
        used += (size_t)w;
    }
    return buf;
}

static void require_heads(const char *op, int C, int NH)
{
    if (C % NH == 0) return;
    char divisors[256];
    pl_usage_error("%s: C=%d channels are not divisible by NH=%d heads (each head needs "
                   "C/NH channels; choose NH in {%s})", op, C, NH,
                   pl_divisors(C, divisors, sizeof divisors));
}

static void require_p(const char *op, float p)
{
    if (!(p >= 0.0f && p < 1.0f))
        pl_usage_error("%s: dropout probability p=%g must be in [0, 1)", op, (double)p);
}

/* Indices (tokens, targets) are read on the host; on the GPU build that costs a copy of
 * N ints, small beside the op, and an index out of range would otherwise read past a row. */
static void require_indices(const char *op, const char *name, const int *idx, size_t n, int V)
{
    const int *h = idx;
    int *copy = NULL;
#ifdef PL_GPU
    copy = pl_mem_alloc(n * sizeof *copy, PL_MEM_WORK, PL_HOST, "index check");
    pl_gpu_to_host(copy, idx, n * sizeof *copy);
    h = copy;
#endif
    for (size_t i = 0; i < n; i++)
        if (h[i] < 0 || h[i] >= V)
            pl_usage_error("%s: %s[%zu] = %d is outside the vocabulary [0, %d)", op, name, i,
                           h[i], V);
    pl_mem_free(copy);
}

static void charge(double flops) { pl_ledger_add_flops(flops); }

/* ---- CPU versions ------------------------------------------------------------------------ */
#ifndef PL_GPU

/* The element-wise loops vectorise at the portable flags (SSE2 on x86-64); PL_CLONES
 * builds the function also for x86-64-v3 (AVX2, FMA) and x86-64-v4 (AVX-512), and the
 * loader picks the widest the running CPU has, so one binary runs everywhere and uses what
 * it finds. This file alone is compiled with -ffp-contract=fast (lib/speed.mk), so the
 * v3 and v4 builds fuse a * b + c into one multiply-add. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__)
#define PL_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define PL_CLONES
#endif

static void cpu_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta, float *C,
                      int ldc)
{
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
}

PL_CLONES static void round_bf16(float *restrict out, const float *restrict in, size_t n)
{
    PL_SIMD
    for (size_t i = 0; i < n; i++) out[i] = pl_k_bf16_round(in[i]);
}

/* A row-major matrix of `rows` rows `cols` wide at stride ld, rounded to bf16 into a
 * workspace copy of the same stride (the span it occupies, so the gaps are copied too). */
static float *bf16_copy(const float *X, int rows, int cols, int ld)
{
    size_t span = (size_t)(rows - 1) * ld + cols;
    float *c = pl_mem_alloc(span * sizeof *c, PL_MEM_WORK, PL_DEVICE, "bf16 matmul input");
    round_bf16(c, X, span);
    return c;
}

/* The products of the linear layers and of the materialised attention, in the precision
 * pl_set_matmul_precision chose: bf16 inputs are exact in fp32 and so are their products,
 * so sgemm on the rounded copies is the bf16 product summed in fp32. */
static void cpu_sgemm_prec(int trans_a, int trans_b, int M, int N, int K, float alpha,
                           const float *A, int lda, const float *B, int ldb, float beta,
                           float *C, int ldc)
{
    if (pl_matmul_precision() != PL_MATMUL_BF16) {
        cpu_sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    float *a = bf16_copy(A, trans_a ? K : M, trans_a ? M : K, lda);
    float *b = bf16_copy(B, trans_b ? N : K, trans_b ? K : N, ldb);
    cpu_sgemm(trans_a, trans_b, M, N, K, alpha, a, lda, b, ldb, beta, C, ldc);
    pl_mem_free(a);
    pl_mem_free(b);
}

static void cpu_encoder_forward(float *out, const int *tokens, const float *wte,
                                const float *wpe, int B, int T, int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *we = wte + (size_t)tokens[b * T + t] * C;
            const float *pe = wpe + (size_t)t * C;
            for (int i = 0; i < C; i++) o[i] = we[i] + pe[i];
        }
}

static void cpu_encoder_backward(float *dwte, float *dwpe, const float *dout,
                                 const int *tokens, int B, int T, int C)
{
    if (dwte) pl_k_scatter_add_cols(dwte, dout, tokens, NULL, B * T, C, 0, C);
    if (dwpe) pl_k_encoder_dwpe(dwpe, dout, B, (size_t)T * C, 0, (size_t)T * C);
}

PL_CLONES static void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                  const float *weight, const float *bias, int N, int C)
{
    for (int n = 0; n < N; n++)
        pl_k_layernorm_row(out + (size_t)n * C, mean ? mean + n : NULL, rstd ? rstd + n : NULL,
                           inp + (size_t)n * C, weight, bias, C);
}

PL_CLONES static void cpu_layernorm_backward(float *dinp, float *restrict dweight,
                                             float *restrict dbias, const float *dout,
                                             const float *inp, const float *weight,
                                             const float *mean, const float *rstd, int N,
                                             int C)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
        if (dinp) pl_k_layernorm_bwd_row(dinp + (size_t)n * C, d, x, weight, mean[n], rstd[n], C);
        if (dweight) {
            float mu = mean[n], rs = rstd[n];
            PL_SIMD
            for (int i = 0; i < C; i++) dweight[i] += d[i] * (x[i] - mu) * rs;
        }
        if (dbias) {
            PL_SIMD
            for (int i = 0; i < C; i++) dbias[i] += d[i];
        }
    }
}

static void cpu_matmul_forward(float *out, const float *inp, const float *weight,
                               const float *bias, int N, int C, int OC)
{
    if (bias)
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, (size_t)OC * sizeof *out);
    cpu_sgemm_prec(0, 1, N, OC, C, 1.0f, inp, C, weight, C, bias ? 1.0f : 0.0f, out, OC);
}

/* dbias[OC] += the column sums of dout[N, OC], row by row (the rows of dout are
 * contiguous, so the inner loop is a vector add). */
PL_CLONES static void bias_grad(float *restrict dbias, const float *restrict dout, int N, int OC)
{
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * OC;
        PL_SIMD
        for (int o = 0; o < OC; o++) dbias[o] += d[o];
    }
}

static void cpu_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                const float *inp, const float *weight, int N, int C, int OC)
{
    if (dinp) cpu_sgemm_prec(0, 0, N, C, OC, 1.0f, dout, OC, weight, C, 1.0f, dinp, C);
    if (dweight) cpu_sgemm_prec(1, 0, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
    if (dbias) bias_grad(dbias, dout, N, OC);
}

/* h += bias row by row (bias may be NULL) and g = gelu(h), in one pass. */
PL_CLONES static void bias_gelu_rows(float *restrict h, float *restrict g,
                                     const float *restrict bias, int N, int OC)
{
    for (int n = 0; n < N; n++) {
        float *restrict hr = h + (size_t)n * OC, *restrict gr = g + (size_t)n * OC;
        if (bias) {
            PL_SIMD
            for (int o = 0; o < OC; o++) {
                float x = hr[o] + bias[o];
                hr[o] = x;
                gr[o] = pl_k_gelu(x);
            }
        } else {
            PL_SIMD
            for (int o = 0; o < OC; o++) gr[o] = pl_k_gelu(hr[o]);
        }
    }
}

/* d *= gelu'(h), element by element. */
PL_CLONES static void gelu_grad_scale(float *restrict d, const float *restrict h, size_t n)
{
    PL_SIMD
    for (size_t i = 0; i < n; i++) d[i] = pl_k_gelu_grad(h[i]) * d[i];
}

/* The product first (beta 0: h needs no bias copy), then the bias and GELU in one pass;
 * adding the bias after the product rounds as sgemm's beta = 1 on a bias-filled h does. */
static void cpu_matmul_gelu_forward(float *h, float *g, const float *inp, const float *weight,
                                    const float *bias, int N, int C, int OC)
{
    cpu_sgemm_prec(0, 1, N, OC, C, 1.0f, inp, C, weight, C, 0.0f, h, OC);
    bias_gelu_rows(h, g, bias, N, OC);
}

static void cpu_matmul_gelu_backward(float *dh, float *dweight, float *dbias, const float *dout,
                                     const float *g, const float *h, const float *weight, int N,
                                     int C, int OC)
{
    cpu_sgemm_prec(0, 0, N, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dh, C);
    gelu_grad_scale(dh, h, (size_t)N * C);
    if (dweight) cpu_sgemm_prec(1, 0, OC, C, N, 1.0f, dout, OC, g, C, 1.0f, dweight, C);
    if (dbias) bias_grad(dbias, dout, N, OC);
}

/* Causal attention in blocks of query rows: rows [r0, r1) attend to keys [0, r1) only, so
 * the products skip the masked upper triangle of the scores except inside the diagonal
 * block (about half the work at long T). OpenBLAS packs its operands, so Q, K, V stay
 * strided views into qkv (row stride 3C) and no copies are made. */
#define ATT_BLOCK 32

/* Softmax of score rows [r0, r1) of one head in place; row t keeps columns [0, t]. */
PL_CLONES static void attention_softmax_rows(float *s, int r0, int r1, int T, float scale)
{
    for (int t = r0; t < r1; t++) pl_k_causal_softmax_row(s + (size_t)t * T, t + 1, T, scale);
}

/* dS = softmax backward of dP for score rows [r0, r1) in place; the masked columns up to
 * the block's edge are zeroed, since the products that follow read them. */
PL_CLONES static void attention_dsoftmax_rows(float *ds, const float *p, int r0, int r1, int T,
                                              float scale)
{
    for (int t = r0; t < r1; t++)
        pl_k_causal_softmax_bwd_row(ds + (size_t)t * T, p + (size_t)t * T, t + 1, r1, scale);
}

static void cpu_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C,
                                  int NH)
{
    int HS = C / NH;
    float scale = 1.0f / sqrtf((float)HS);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * T * 3 * C + (size_t)h * HS;
            const float *k = q + C, *v = q + 2 * C;
            float *s = att + ((size_t)b * NH + h) * T * T;
            float *o = out + (size_t)b * T * C + (size_t)h * HS;
            for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
                int r1 = r0 + ATT_BLOCK < T ? r0 + ATT_BLOCK : T, rows = r1 - r0;
                cpu_sgemm_prec(0, 1, rows, r1, HS, 1.0f, q + (size_t)r0 * 3 * C, 3 * C, k,
                               3 * C, 0.0f, s + (size_t)r0 * T, T);
                attention_softmax_rows(s, r0, r1, T, scale);
                cpu_sgemm_prec(0, 0, rows, HS, r1, 1.0f, s + (size_t)r0 * T, T, v, 3 * C,
                               0.0f, o + (size_t)r0 * C, C);
            }
        }
}

static void cpu_attention_backward(float *dqkv, const float *dout, const float *qkv,
                                   const float *att, int B, int T, int C, int NH, float *ds)
{
    int HS = C / NH;
    float scale = 1.0f / sqrtf((float)HS);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t off = (size_t)b * T * 3 * C + (size_t)h * HS;
            const float *q = qkv + off, *k = q + C, *v = q + 2 * C;
            float *dq = dqkv + off, *dk = dq + C, *dv = dq + 2 * C;
            const float *p = att + ((size_t)b * NH + h) * T * T;
            const float *dO = dout + (size_t)b * T * C + (size_t)h * HS;
            for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
                int r1 = r0 + ATT_BLOCK < T ? r0 + ATT_BLOCK : T, rows = r1 - r0;
                const float *pb = p + (size_t)r0 * T, *dOb = dO + (size_t)r0 * C;
                float *dsb = ds + (size_t)r0 * T;
                /* dP = dO V^T; dV += P^T dO */
                cpu_sgemm_prec(0, 1, rows, r1, HS, 1.0f, dOb, C, v, 3 * C, 0.0f, dsb, T);
                cpu_sgemm_prec(1, 0, r1, HS, rows, 1.0f, pb, T, dOb, C, 1.0f, dv, 3 * C);
                attention_dsoftmax_rows(ds, p, r0, r1, T, scale);
                /* dQ += dS K; dK += dS^T Q */
                cpu_sgemm_prec(0, 0, rows, HS, r1, 1.0f, dsb, T, k, 3 * C, 1.0f,
                               dq + (size_t)r0 * 3 * C, 3 * C);
                cpu_sgemm_prec(1, 0, r1, HS, rows, 1.0f, dsb, T, q + (size_t)r0 * 3 * C, 3 * C,
                               1.0f, dk, 3 * C);
            }
        }
}

PL_CLONES static void cpu_gelu_forward(float *out, const float *inp, size_t n)
{
    PL_SIMD
    for (size_t i = 0; i < n; i++) out[i] = pl_k_gelu(inp[i]);
}

PL_CLONES static void cpu_gelu_backward(float *restrict dinp, const float *restrict dout,
                                        const float *restrict inp, size_t n)
{
    PL_SIMD
    for (size_t i = 0; i < n; i++) dinp[i] += pl_k_gelu_grad(inp[i]) * dout[i];
}

PL_CLONES static void cpu_residual_forward(float *out, const float *a, const float *b, size_t n)
{
    PL_SIMD
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

PL_CLONES static void cpu_softmax_forward(float *probs, const float *logits, int N, int V)
{
    for (int n = 0; n < N; n++)
        pl_k_softmax_row(probs + (size_t)n * V, logits + (size_t)n * V, V, V, 1.0f);
}

PL_CLONES static void cpu_softmax_backward(float *dlogits, const float *dprobs, const float *probs,
                                 int N, int V)
{
    for (int n = 0; n < N; n++)
        pl_k_softmax_bwd_row(dlogits + (size_t)n * V, dprobs + (size_t)n * V,
                             probs + (size_t)n * V, V, 1.0f, 1.0f);
}

PL_CLONES static void cpu_crossentropy_forward(float *losses, const float *logits,
                                               const int *targets, int N, int V)
{
    for (int n = 0; n < N; n++)
        losses[n] = pl_k_crossentropy_row(logits + (size_t)n * V, V, targets[n]);
}

PL_CLONES static void cpu_softmax_crossentropy_forward(float *probs, float *losses,
                                                       const float *logits, const int *targets,
                                                       int N, int V)
{
    for (int n = 0; n < N; n++)
        losses[n] = pl_k_softmax_crossentropy_row(probs + (size_t)n * V, logits + (size_t)n * V,
                                                  V, targets[n]);
}

PL_CLONES static void cpu_crossentropy_softmax_backward(float *dlogits, const float *probs,
                                                        const int *targets, float dloss, int N,
                                                        int V)
{
    for (int n = 0; n < N; n++) {
        float *restrict d = dlogits + (size_t)n * V;
        const float *restrict p = probs + (size_t)n * V;
        PL_SIMD
        for (int j = 0; j < V; j++) d[j] += dloss * p[j];
        d[targets[n]] -= dloss;
    }
}

static void cpu_dropout_block(float *out, const float *inp, size_t rows, size_t cols,
                              size_t full_cols, size_t row0, size_t col0, float p, uint64_t seed,
                              uint64_t stream, int accumulate)
{
    for (size_t r = 0; r < rows; r++) {
        uint64_t base = (uint64_t)(row0 + r) * full_cols + col0;
        float *o = out + r * cols;
        const float *x = inp + r * cols;
        if (accumulate)
            for (size_t c = 0; c < cols; c++)
                o[c] += pl_k_dropout_mult(seed, stream, base + c, p) * x[c];
        else
            for (size_t c = 0; c < cols; c++)
                o[c] = pl_k_dropout_mult(seed, stream, base + c, p) * x[c];
    }
}

PL_CLONES static void cpu_adamw_step(float *restrict param, const float *restrict grad,
                                     float *restrict m, float *restrict v, size_t n, float lr,
                                     float beta1, float beta2, float eps, float weight_decay,
                                     float bc1, float bc2)
{
    PL_SIMD
    for (size_t i = 0; i < n; i++)
        pl_k_adamw(param + i, grad[i], m + i, v + i, lr, beta1, beta2, eps, weight_decay, bc1,
                   bc2);
}

PL_CLONES static double cpu_sum(const float *x, size_t n, int squares)
{
    double s = 0.0;
    if (squares) {
        PL_SIMD_SUM(s)
        for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    } else {
        PL_SIMD_SUM(s)
        for (size_t i = 0; i < n; i++) s += x[i];
    }
    return s;
}

static void cpu_zero(float *x, size_t n) { memset(x, 0, n * sizeof *x); }

PL_CLONES static void cpu_scale(float *x, size_t n, float s)
{
    PL_SIMD
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

PL_CLONES static void cpu_accumulate(float *restrict dst, const float *restrict src,
                                     size_t n)
{
    PL_SIMD
    for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

static void cpu_copy(float *dst, const float *src, size_t n)
{
    memmove(dst, src, n * sizeof *dst);
}

PL_CLONES static void cpu_bf16_from_float(uint16_t *restrict out, const float *restrict in,
                                          size_t n)
{
    PL_SIMD
    for (size_t i = 0; i < n; i++) out[i] = pl_k_bf16(in[i]);
}

PL_CLONES static void cpu_bf16_to_float(float *restrict out, const uint16_t *restrict in,
                                        size_t n)
{
    PL_SIMD
    for (size_t i = 0; i < n; i++) out[i] = pl_k_bf16_float(in[i]);
}

PL_CLONES static void cpu_bf16_accumulate(uint16_t *restrict acc, const float *restrict add,
                                          size_t n)
{
    PL_SIMD
    for (size_t i = 0; i < n; i++) acc[i] = pl_k_bf16(pl_k_bf16_float(acc[i]) + add[i]);
}

static void cpu_bf16_zero(uint16_t *x, size_t n) { memset(x, 0, n * sizeof *x); }

static void cpu_to_device(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
static void cpu_to_host(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }

static void cpu_gather_rows(float *out, const float *inp, const int *rows, int n, int C)
{
    for (int i = 0; i < n; i++)
        memcpy(out + (size_t)i * C, inp + (size_t)rows[i] * C, (size_t)C * sizeof *out);
}

static void cpu_scatter_add_rows(float *out, const float *inp, const int *rows,
                                 const float *scale, int n, int C)
{
    pl_k_scatter_add_cols(out, inp, rows, scale, n, C, 0, C);
}

static void cpu_row_dot(float *dot, const float *a, const int *rows, const float *b, int n,
                        int C)
{
    for (int i = 0; i < n; i++) {
        const float *x = a + (size_t)rows[i] * C, *y = b + (size_t)i * C;
        float s = 0.0f;
        for (int c = 0; c < C; c++) s += x[c] * y[c];
        dot[i] += s;
    }
}

#endif /* !PL_GPU */

/* ---- public ops ---------------------------------------------------------------------------- */

void pl_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe,
                        int B, int T, int C, int V)
{
    require_sizes("pl_encoder_forward", "B T C V", B, T, C, V);
    require_ptr("pl_encoder_forward", "out", out);
    require_ptr("pl_encoder_forward", "tokens", tokens);
    require_ptr("pl_encoder_forward", "wte", wte);
    require_ptr("pl_encoder_forward", "wpe", wpe);
    require_indices("pl_encoder_forward", "tokens", tokens, (size_t)B * T, V);
    charge((double)PL_FLOPS_ENCODER_FWD * B * T * C);
    BACKEND(encoder_forward)(out, tokens, wte, wpe, B, T, C);
}

void pl_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B,
                         int T, int C, int V)
{
    require_sizes("pl_encoder_backward", "B T C V", B, T, C, V);
    require_ptr("pl_encoder_backward", "dout", dout);
    require_ptr("pl_encoder_backward", "tokens", tokens);
    if (!dwte && !dwpe) return;
    require_indices("pl_encoder_backward", "tokens", tokens, (size_t)B * T, V);
    charge((double)PL_FLOPS_ENCODER_BWD * B * T * C);
    BACKEND(encoder_backward)(dwte, dwpe, dout, tokens, B, T, C);
}

void pl_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                          const float *weight, const float *bias, int N, int C)
{
    require_sizes("pl_layernorm_forward", "N C", N, C, 1, 1);
    require_ptr("pl_layernorm_forward", "out", out);
    require_ptr("pl_layernorm_forward", "inp", inp);
    require_ptr("pl_layernorm_forward", "weight", weight);
    require_ptr("pl_layernorm_forward", "bias", bias);
    charge((double)PL_FLOPS_LAYERNORM_FWD * N * C);
    BACKEND(layernorm_forward)(out, mean, rstd, inp, weight, bias, N, C);
}

void pl_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                           const float *inp, const float *weight, const float *mean,
                           const float *rstd, int N, int C)
{
    require_sizes("pl_layernorm_backward", "N C", N, C, 1, 1);
    if (!dinp && !dweight && !dbias) return;
    require_ptr("pl_layernorm_backward", "dout", dout);
    require_ptr("pl_layernorm_backward", "inp", inp);
    require_ptr("pl_layernorm_backward", "weight", weight);
    require_ptr("pl_layernorm_backward", "mean (saved by the forward)", mean);
    require_ptr("pl_layernorm_backward", "rstd (saved by the forward)", rstd);
    double per = (dinp ? PL_FLOPS_LAYERNORM_BWD - PL_FLOPS_LAYERNORM_BWD_PARAMS : 0) +
                 (dweight || dbias ? PL_FLOPS_LAYERNORM_BWD_PARAMS : 0);
    charge(per * N * C);
    BACKEND(layernorm_backward)(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

void pl_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                       int N, int C, int OC)
{
    require_sizes("pl_matmul_forward", "N C OC", N, C, OC, 1);
    require_ptr("pl_matmul_forward", "out", out);
    require_ptr("pl_matmul_forward", "inp", inp);
    require_ptr("pl_matmul_forward", "weight", weight);
    charge(2.0 * N * C * OC + (bias ? (double)N * OC : 0.0));
    BACKEND(matmul_forward)(out, inp, weight, bias, N, C, OC);
}

void pl_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, int N, int C, int OC)
{
    require_sizes("pl_matmul_backward", "N C OC", N, C, OC, 1);
    if (!dinp && !dweight && !dbias) return;
    require_ptr("pl_matmul_backward", "dout", dout);
    if (dinp) require_ptr("pl_matmul_backward", "weight", weight);
    if (dweight) require_ptr("pl_matmul_backward", "inp", inp);
    charge((dinp ? 2.0 * N * C * OC : 0.0) + (dweight ? 2.0 * N * C * OC : 0.0) +
           (dbias ? (double)N * OC : 0.0));
    BACKEND(matmul_backward)(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}

void pl_matmul_gelu_forward(float *h, float *g, const float *inp, const float *weight,
                            const float *bias, int N, int C, int OC)
{
    const char *op = "pl_matmul_gelu_forward";
    require_sizes(op, "N C OC", N, C, OC, 1);
    require_ptr(op, "h", h);
    require_ptr(op, "g", g);
    require_ptr(op, "inp", inp);
    require_ptr(op, "weight", weight);
    if (h == g)
        pl_usage_error("%s: h and g are the same buffer; the op keeps both the fc output h "
                       "(the backward reads it) and gelu(h), so give it two", op);
    charge(2.0 * N * C * OC + (bias ? (double)N * OC : 0.0) +
           (double)PL_FLOPS_GELU_FWD * N * OC);
    BACKEND(matmul_gelu_forward)(h, g, inp, weight, bias, N, C, OC);
}

void pl_matmul_gelu_backward(float *dh, float *dweight, float *dbias, const float *dout,
                             const float *g, const float *h, const float *weight, int N, int C,
                             int OC)
{
    const char *op = "pl_matmul_gelu_backward";
    require_sizes(op, "N C OC", N, C, OC, 1);
    require_ptr(op, "dh", dh);
    require_ptr(op, "dout", dout);
    require_ptr(op, "h", h);
    require_ptr(op, "weight", weight);
    if (dweight) require_ptr(op, "g", g);
    charge(2.0 * N * C * OC + (dweight ? 2.0 * N * C * OC : 0.0) +
           (dbias ? (double)N * OC : 0.0) + (double)PL_FLOPS_GELU_BWD * N * C);
    BACKEND(matmul_gelu_backward)(dh, dweight, dbias, dout, g, h, weight, N, C, OC);
}

void pl_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    require_sizes("pl_sgemm", "M N K", M, N, K, 1);
    require_ptr("pl_sgemm", "A", A);
    require_ptr("pl_sgemm", "B", B);
    require_ptr("pl_sgemm", "C", C);
    int a_cols = trans_a ? M : K, b_cols = trans_b ? K : N;
    if (lda < a_cols || ldb < b_cols || ldc < N)
        pl_usage_error("pl_sgemm: row strides lda=%d ldb=%d ldc=%d are shorter than the rows "
                       "they step over (need lda >= %d, ldb >= %d, ldc >= %d)",
                       lda, ldb, ldc, a_cols, b_cols, N);
    charge(2.0 * M * N * K);
    BACKEND(sgemm_prec)(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void pl_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH)
{
    require_sizes("pl_attention_forward", "B T C NH", B, T, C, NH);
    require_heads("pl_attention_forward", C, NH);
    require_ptr("pl_attention_forward", "out", out);
    require_ptr("pl_attention_forward", "att", att);
    require_ptr("pl_attention_forward", "qkv", qkv);
    charge(4.0 * B * T * T * C + (double)PL_FLOPS_SOFTMAX_FWD * B * NH * T * T);
    BACKEND(attention_forward)(out, att, qkv, B, T, C, NH);
}

size_t pl_attention_backward_work(int T, int NH)
{
#ifdef PL_GPU
    return (size_t)NH * T * T; /* the score gradients of every head, for batched products */
#else
    (void)NH;
    return (size_t)T * T; /* one head's score gradients at a time */
#endif
}

void pl_attention_backward_in(float *dqkv, const float *dout, const float *qkv,
                              const float *att, int B, int T, int C, int NH, float *work)
{
    require_sizes("pl_attention_backward", "B T C NH", B, T, C, NH);
    require_heads("pl_attention_backward", C, NH);
    if (!dqkv) return;
    require_ptr("pl_attention_backward", "dout", dout);
    require_ptr("pl_attention_backward", "qkv", qkv);
    require_ptr("pl_attention_backward", "att (saved by the forward)", att);
    charge(8.0 * B * T * T * C + (double)PL_FLOPS_SOFTMAX_BWD * B * NH * T * T);
    float *own = NULL;
    if (!work)
        work = own = pl_mem_alloc(pl_attention_backward_work(T, NH) * sizeof(float),
                                  PL_MEM_WORK, PL_DEVICE, "attention dscores");
    BACKEND(attention_backward)(dqkv, dout, qkv, att, B, T, C, NH, work);
    pl_mem_free(own);
}

void pl_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att,
                           int B, int T, int C, int NH)
{
    pl_attention_backward_in(dqkv, dout, qkv, att, B, T, C, NH, NULL);
}

void pl_gelu_forward(float *out, const float *inp, size_t n)
{
    if (n == 0) return;
    require_ptr("pl_gelu_forward", "out", out);
    require_ptr("pl_gelu_forward", "inp", inp);
    charge((double)PL_FLOPS_GELU_FWD * n);
    BACKEND(gelu_forward)(out, inp, n);
}

void pl_gelu_backward(float *dinp, const float *dout, const float *inp, size_t n)
{
    if (n == 0 || !dinp) return;
    require_ptr("pl_gelu_backward", "dout", dout);
    require_ptr("pl_gelu_backward", "inp", inp);
    charge((double)PL_FLOPS_GELU_BWD * n);
    BACKEND(gelu_backward)(dinp, dout, inp, n);
}

void pl_residual_forward(float *out, const float *a, const float *b, size_t n)
{
    if (n == 0) return;
    require_ptr("pl_residual_forward", "out", out);
    require_ptr("pl_residual_forward", "a", a);
    require_ptr("pl_residual_forward", "b", b);
    charge((double)PL_FLOPS_RESIDUAL_FWD * n);
    BACKEND(residual_forward)(out, a, b, n);
}

void pl_residual_backward(float *da, float *db, const float *dout, size_t n)
{
    if (n == 0) return;
    require_ptr("pl_residual_backward", "dout", dout);
    charge((double)PL_FLOPS_RESIDUAL_BWD * n);
    if (da) BACKEND(accumulate)(da, dout, n);
    if (db) BACKEND(accumulate)(db, dout, n);
}

void pl_softmax_forward(float *probs, const float *logits, int N, int V)
{
    require_sizes("pl_softmax_forward", "N V", N, V, 1, 1);
    require_ptr("pl_softmax_forward", "probs", probs);
    require_ptr("pl_softmax_forward", "logits", logits);
    charge((double)PL_FLOPS_SOFTMAX_FWD * N * V);
    BACKEND(softmax_forward)(probs, logits, N, V);
}

void pl_softmax_backward(float *dlogits, const float *dprobs, const float *probs, int N, int V)
{
    require_sizes("pl_softmax_backward", "N V", N, V, 1, 1);
    if (!dlogits) return;
    require_ptr("pl_softmax_backward", "dprobs", dprobs);
    require_ptr("pl_softmax_backward", "probs", probs);
    charge((double)PL_FLOPS_SOFTMAX_BWD * N * V);
    BACKEND(softmax_backward)(dlogits, dprobs, probs, N, V);
}

void pl_crossentropy_forward(float *losses, const float *logits, const int *targets, int N,
                             int V)
{
    require_sizes("pl_crossentropy_forward", "N V", N, V, 1, 1);
    require_ptr("pl_crossentropy_forward", "losses", losses);
    require_ptr("pl_crossentropy_forward", "logits", logits);
    require_ptr("pl_crossentropy_forward", "targets", targets);
    require_indices("pl_crossentropy_forward", "targets", targets, (size_t)N, V);
    charge((double)PL_FLOPS_XENT_FWD * N * V);
    BACKEND(crossentropy_forward)(losses, logits, targets, N, V);
}

void pl_crossentropy_softmax_backward(float *dlogits, const float *probs, const int *targets,
                                      float dloss, int N, int V)
{
    require_sizes("pl_crossentropy_softmax_backward", "N V", N, V, 1, 1);
    if (!dlogits) return;
    require_ptr("pl_crossentropy_softmax_backward", "probs", probs);
    require_ptr("pl_crossentropy_softmax_backward", "targets", targets);
    require_indices("pl_crossentropy_softmax_backward", "targets", targets, (size_t)N, V);
    charge((double)PL_FLOPS_XENT_BWD * N * V);
    BACKEND(crossentropy_softmax_backward)(dlogits, probs, targets, dloss, N, V);
}

void pl_softmax_crossentropy_forward(float *probs, float *losses, const float *logits,
                                     const int *targets, int N, int V)
{
    const char *op = "pl_softmax_crossentropy_forward";
    require_sizes(op, "N V", N, V, 1, 1);
    require_ptr(op, "probs", probs);
    require_ptr(op, "losses", losses);
    require_ptr(op, "logits", logits);
    require_ptr(op, "targets", targets);
    require_indices(op, "targets", targets, (size_t)N, V);
    charge((double)(PL_FLOPS_SOFTMAX_FWD + PL_FLOPS_XENT_FWD) * N * V);
    BACKEND(softmax_crossentropy_forward)(probs, losses, logits, targets, N, V);
}

static void dropout(const char *op, float *out, const float *inp, size_t rows, size_t cols,
                    size_t full_cols, size_t row0, size_t col0, float p, uint64_t seed,
                    uint64_t stream, int accumulate)
{
    require_p(op, p);
    if (rows == 0 || cols == 0 || (accumulate && !out)) return;
    require_ptr(op, "out", out);
    require_ptr(op, accumulate ? "dout" : "inp", inp);
    if (col0 + cols > full_cols)
        pl_usage_error("%s: block columns [%zu, %zu) run past the full matrix's %zu columns",
                       op, col0, col0 + cols, full_cols);
    charge((double)PL_FLOPS_DROPOUT * rows * cols);
    BACKEND(dropout_block)(out, inp, rows, cols, full_cols, row0, col0, p, seed, stream,
                           accumulate);
}

/* A contiguous run of n elements from global index offset is a 1 x n block at column
 * offset of a single row as wide as the run's end. */
void pl_dropout_forward(float *out, const float *inp, size_t n, float p, uint64_t seed,
                        uint64_t stream, uint64_t offset)
{
    dropout("pl_dropout_forward", out, inp, 1, n, offset + n, 0, offset, p, seed, stream, 0);
}

void pl_dropout_backward(float *dinp, const float *dout, size_t n, float p, uint64_t seed,
                         uint64_t stream, uint64_t offset)
{
    dropout("pl_dropout_backward", dinp, dout, 1, n, offset + n, 0, offset, p, seed, stream, 1);
}

void pl_dropout_forward_block(float *out, const float *inp, size_t rows, size_t cols,
                              size_t full_cols, size_t row0, size_t col0, float p,
                              uint64_t seed, uint64_t stream)
{
    dropout("pl_dropout_forward_block", out, inp, rows, cols, full_cols, row0, col0, p, seed,
            stream, 0);
}

void pl_dropout_backward_block(float *dinp, const float *dout, size_t rows, size_t cols,
                               size_t full_cols, size_t row0, size_t col0, float p,
                               uint64_t seed, uint64_t stream)
{
    dropout("pl_dropout_backward_block", dinp, dout, rows, cols, full_cols, row0, col0, p, seed,
            stream, 1);
}

void pl_adamw_step(float *param, const float *grad, float *m, float *v, size_t n, int t,
                   float lr, float beta1, float beta2, float eps, float weight_decay)
{
    if (t < 1) pl_usage_error("pl_adamw_step: step t=%d; steps count from 1", t);
    if (!(beta1 >= 0.0f && beta1 < 1.0f) || !(beta2 >= 0.0f && beta2 < 1.0f))
        pl_usage_error("pl_adamw_step: beta1=%g, beta2=%g must be in [0, 1) (usual: 0.9, "
                       "0.999)", (double)beta1, (double)beta2);
    if (!(eps > 0.0f)) pl_usage_error("pl_adamw_step: eps=%g must be positive (usual: 1e-8)",
                                      (double)eps);
    if (n == 0) return;
    require_ptr("pl_adamw_step", "param", param);
    require_ptr("pl_adamw_step", "grad", grad);
    require_ptr("pl_adamw_step", "m", m);
    require_ptr("pl_adamw_step", "v", v);
    float bc1 = (float)(1.0 - pow(beta1, t)), bc2 = (float)(1.0 - pow(beta2, t));
    charge((double)PL_FLOPS_ADAMW * n);
    BACKEND(adamw_step)(param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, bc1, bc2);
}

double pl_grad_norm_sq(const float *g, size_t n)
{
    if (n == 0) return 0.0;
    require_ptr("pl_grad_norm_sq", "g", g);
    charge((double)PL_FLOPS_NORM_SQ * n);
    return BACKEND(sum)(g, n, 1);
}

float pl_clip_scale(double norm_sq, float max_norm)
{
    if (max_norm <= 0.0f) return 1.0f;
    double s = max_norm / (sqrt(norm_sq) + 1e-6);
    return s < 1.0 ? (float)s : 1.0f;
}

void pl_zero(float *x, size_t n)
{
    if (n == 0) return;
    require_ptr("pl_zero", "x", x);
    BACKEND(zero)(x, n);
}

void pl_scale(float *x, size_t n, float s)
{
    if (n == 0) return;
    require_ptr("pl_scale", "x", x);
    charge((double)PL_FLOPS_SCALE * n);
    BACKEND(scale)(x, n, s);
}

void pl_accumulate(float *dst, const float *src, size_t n)
{
    if (n == 0) return;
    require_ptr("pl_accumulate", "dst", dst);
    require_ptr("pl_accumulate", "src", src);
    charge((double)PL_FLOPS_SCALE * n);
    BACKEND(accumulate)(dst, src, n);
}

void pl_bf16_from_float(pl_bf16 *out, const float *in, size_t n)
{
    if (n == 0) return;
    require_ptr("pl_bf16_from_float", "out", out);
    require_ptr("pl_bf16_from_float", "in", in);
    BACKEND(bf16_from_float)(out, in, n);
}

void pl_bf16_to_float(float *out, const pl_bf16 *in, size_t n)
{
    if (n == 0) return;
    require_ptr("pl_bf16_to_float", "out", out);
    require_ptr("pl_bf16_to_float", "in", in);
    BACKEND(bf16_to_float)(out, in, n);
}

void pl_bf16_accumulate(pl_bf16 *acc, const float *add, size_t n)
{
    if (n == 0) return;
    require_ptr("pl_bf16_accumulate", "acc", acc);
    require_ptr("pl_bf16_accumulate", "add", add);
    charge((double)PL_FLOPS_SCALE * n);
    BACKEND(bf16_accumulate)(acc, add, n);
}

void pl_bf16_zero(pl_bf16 *x, size_t n)
{
    if (n == 0) return;
    require_ptr("pl_bf16_zero", "x", x);
    BACKEND(bf16_zero)(x, n);
}

static enum pl_matmul_precision matmul_precision = PL_MATMUL_FP32;

enum pl_matmul_precision pl_set_matmul_precision(enum pl_matmul_precision p)
{
    if (p != PL_MATMUL_FP32 && p != PL_MATMUL_BF16)
        pl_usage_error("pl_set_matmul_precision: %d is not a precision (PL_MATMUL_FP32 = 0 "
                       "or PL_MATMUL_BF16 = 1)", (int)p);
    enum pl_matmul_precision old = matmul_precision;
    matmul_precision = p;
    return old;
}

enum pl_matmul_precision pl_matmul_precision(void) { return matmul_precision; }

void pl_copy(float *dst, const float *src, size_t n)
{
    if (n == 0 || dst == src) return;
    require_ptr("pl_copy", "dst", dst);
    require_ptr("pl_copy", "src", src);
    BACKEND(copy)(dst, src, n);
}

double pl_sum(const float *x, size_t n)
{
    if (n == 0) return 0.0;
    require_ptr("pl_sum", "x", x);
    charge((double)n);
    return BACKEND(sum)(x, n, 0);
}

void pl_to_device(void *dst_dev, const void *src_host, size_t bytes)
{
    if (bytes == 0) return;
    require_ptr("pl_to_device", "dst_dev", dst_dev);
    require_ptr("pl_to_device", "src_host", src_host);
    BACKEND(to_device)(dst_dev, src_host, bytes);
}

void pl_to_host(void *dst_host, const void *src_dev, size_t bytes)
{
    if (bytes == 0) return;
    require_ptr("pl_to_host", "dst_host", dst_host);
    require_ptr("pl_to_host", "src_dev", src_dev);
    BACKEND(to_host)(dst_host, src_dev, bytes);
}

void pl_ops_wait(void)
{
#ifdef PL_GPU
    pl_gpu_wait();
#endif
}

void pl_gather_rows(float *out, const float *inp, const int *rows, int n, int C)
{
    if (n == 0) return;
    require_sizes("pl_gather_rows", "n C", n, C, 1, 1);
    require_ptr("pl_gather_rows", "out", out);
    require_ptr("pl_gather_rows", "inp", inp);
    require_ptr("pl_gather_rows", "rows", rows);
    BACKEND(gather_rows)(out, inp, rows, n, C);
}

void pl_scatter_add_rows(float *out, const float *inp, const int *rows, const float *scale,
                         int n, int C)
{
    if (n == 0) return;
    require_sizes("pl_scatter_add_rows", "n C", n, C, 1, 1);
    require_ptr("pl_scatter_add_rows", "out", out);
    require_ptr("pl_scatter_add_rows", "inp", inp);
    require_ptr("pl_scatter_add_rows", "rows", rows);
    charge(2.0 * n * C);
    BACKEND(scatter_add_rows)(out, inp, rows, scale, n, C);
}

void pl_row_dot(float *dot, const float *a, const int *rows, const float *b, int n, int C)
{
    if (n == 0) return;
    require_sizes("pl_row_dot", "n C", n, C, 1, 1);
    require_ptr("pl_row_dot", "dot", dot);
    require_ptr("pl_row_dot", "a", a);
    require_ptr("pl_row_dot", "rows", rows);
    require_ptr("pl_row_dot", "b", b);
    charge(2.0 * n * C);
    BACKEND(row_dot)(dot, a, rows, b, n, C);
}
