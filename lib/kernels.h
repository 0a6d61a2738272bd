/* kernels.h: the per-element and per-row math of the ops, written once as PL_HD functions.
 * ops.c calls them in host loops; ops_gpu.cu calls the same functions from CUDA kernels,
 * so the CPU tests check the arithmetic the GPU runs. The bottom half declares the CUDA
 * entry points ops.c dispatches to on the GPU build (their arguments are validated and
 * their FLOPs charged in ops.c, once for both backends). */
#ifndef PL_KERNELS_H
#define PL_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include "hd.h"
#include "ops_const.h"
#include "rng.h"

/* The row and element functions are inlined into every CPU loop that calls them, so that
 * each instruction-set build of that loop (PL_CLONES in ops.c) gets its own vector code. */
#ifdef __CUDACC__
#define PL_HDI PL_HD
#else
#define PL_HDI static inline __attribute__((always_inline))
#endif

/* bf16, bfloat16: the top 16 bits of an fp32 (sign, the same 8 exponent bits, 7 of the 23
 * mantissa bits), so every float's range survives and only precision goes: about 3
 * significant digits. pl_k_bf16 rounds to the nearest bf16, ties to the even one (what
 * cuBLAS's and PyTorch's conversions do); infinities stay infinite, a float past the
 * largest bf16 rounds to infinity, and a NaN stays a (quiet) NaN rather than rounding into
 * an infinity. pl_k_bf16_float is exact. pl_k_bf16_round(x) is x rounded to bf16 and held
 * in a float: what a bf16 tensor core reads of an fp32 input. */
PL_HDI uint32_t pl_k_f32_bits(float x)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(x);
#else
    union { float f; uint32_t u; } b = {x};
    return b.u;
#endif
}

PL_HDI float pl_k_f32_of_bits(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    union { uint32_t u; float f; } b = {u};
    return b.f;
#endif
}

PL_HDI uint16_t pl_k_bf16(float x)
{
    uint32_t u = pl_k_f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

PL_HDI float pl_k_bf16_float(uint16_t h) { return pl_k_f32_of_bits((uint32_t)h << 16); }

PL_HDI float pl_k_bf16_round(float x) { return pl_k_bf16_float(pl_k_bf16(x)); }

/* exp(x) in plain float arithmetic, so that a loop calling it vectorises (glibc's expf is a
 * call the vectoriser cannot take without -ffast-math). x = n ln2 + r with |r| <= ln2/2,
 * exp(r) by a degree-7 polynomial (Taylor terms up to r^7: the truncation error is below
 * 1e-8 relative, so the result is within about 2 ulp of expf), times 2^n built from the
 * exponent bits in two halves so that neither factor overflows before the product does.
 * The clamp to [-104, 89] lets the product underflow to 0 and overflow to inf on its own
 * (exp(-inf) = 0, exp(inf) = inf); NaN propagates through the arithmetic. n is rounded by
 * the add-and-subtract of 1.5 * 2^23, which needs no rounding instruction. Where the CPU
 * has FMA, ops.c's loops contract each a * b + c here into one (-ffp-contract=fast). */
PL_HDI float pl_k_expf(float x)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    /* Both clamps test x itself: testing the first clamp's result instead lets gcc thread
     * the known outcome of the second test into a copy of the whole body per case, and the
     * vectorised loops then ran every case (three divisions per gelu_grad instead of one). */
    float lo = x < -104.0f ? -104.0f : x;
    float xc = x > 89.0f ? 89.0f : lo;
    float t = xc * 1.44269504088896341f + magic;
    float n = t - magic;
    float r = xc - n * 0.693145751953125f;  /* ln2, high bits (exact in the product) */
    r = r - n * 1.42860682030941723e-6f;    /* ln2, the rest */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    union { float f; int32_t i; } tb = {t}, s1, s2;
    int32_t ni = tb.i - 0x4B400000; /* the integer n, from the bits of magic + n */
    int32_t n1 = ni >> 1, n2 = ni - n1;
    s1.i = (n1 + 127) * (1 << 23);
    s2.i = (n2 + 127) * (1 << 23);
    return p * s1.f * s2.f;
}

/* Loops over a row are marked for the vectoriser: PL_SIMD for independent elements,
 * PL_SIMD_SUM(s), PL_SIMD_SUM2(s, t) and PL_SIMD_MAX(m) for sums or a maximum, which the
 * vectoriser may then gather in a different order (float rounding only; -fopenmp-simd
 * honours the marks without threads). CUDA ignores them (its row kernels are ops_gpu.cu's). */
#ifdef __CUDACC__
#define PL_SIMD
#define PL_SIMD_SUM(s)
#define PL_SIMD_SUM2(s, t)
#define PL_SIMD_MAX(m)
#else
#define PL_PRAGMA(x) _Pragma(#x)
#define PL_SIMD PL_PRAGMA(omp simd)
#define PL_SIMD_SUM(s) PL_PRAGMA(omp simd reduction(+ : s))
#define PL_SIMD_SUM2(s, t) PL_PRAGMA(omp simd reduction(+ : s, t))
#if defined(__clang__)
/* clang (16 at least) vectorises a float max reduction only when told NaNs and signed
 * zeros cannot occur (-ffast-math), which the kit does not assume: asked to, it leaves the
 * loop scalar and warns. gcc vectorises it as written. */
#define PL_SIMD_MAX(m)
#else
#define PL_SIMD_MAX(m) PL_PRAGMA(omp simd reduction(max : m))
#endif
#endif

#define PL_GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */
#define PL_GELU_CUBIC 0.044715f

/* 0.5 x (1 + tanh(u)) = x * sigmoid(2u): one expf instead of a tanhf, several times
 * faster in glibc and exact in form; the extremes give x or -0 without NaN. */
PL_HDI float pl_k_gelu(float x)
{
    float u = PL_GELU_SCALE * (x + PL_GELU_CUBIC * x * x * x);
    return x / (1.0f + pl_k_expf(-2.0f * u));
}

/* d/dx: s + x * 2 s (1 - s) du/dx with s = sigmoid(2u), since 1 - tanh(u)^2 = 4 s (1-s). */
PL_HDI float pl_k_gelu_grad(float x)
{
    float u = PL_GELU_SCALE * (x + PL_GELU_CUBIC * x * x * x);
    float s = 1.0f / (1.0f + pl_k_expf(-2.0f * u));
    float du = PL_GELU_SCALE * (1.0f + 3.0f * PL_GELU_CUBIC * x * x);
    return s + 2.0f * x * s * (1.0f - s) * du;
}

/* The dropout multiplier of the element with global index idx: 0 or 1/(1-p). */
PL_HD float pl_k_dropout_mult(uint64_t seed, uint64_t stream, uint64_t idx, float p)
{
    return pl_rng_uniform(seed, stream, idx) >= p ? 1.0f / (1.0f - p) : 0.0f;
}

/* Global index of element i of a dense rows x cols block at (row0, col0) of a matrix with
 * full_cols columns. */
PL_HD uint64_t pl_k_block_index(size_t i, size_t cols, size_t full_cols, size_t row0,
                                size_t col0)
{
    size_t r = i / cols, c = i % cols;
    return (uint64_t)(row0 + r) * full_cols + col0 + c;
}

/* One AdamW update of one element; bc1 = 1 - beta1^t, bc2 = 1 - beta2^t. */
PL_HDI void pl_k_adamw(float *param, float g, float *m, float *v, float lr, float beta1,
                      float beta2, float eps, float weight_decay, float bc1, float bc2)
{
    float mm = beta1 * *m + (1.0f - beta1) * g;
    float vv = beta2 * *v + (1.0f - beta2) * g * g;
    *m = mm;
    *v = vv;
    float p = *param - lr * weight_decay * *param;
    *param = p - lr * (mm / bc1) / (sqrtf(vv / bc2) + eps);
}

/* ---- rows ------------------------------------------------------------------------------- */

/* A layernorm's element math, shared by the CPU's row loops below and the GPU's row blocks
 * (ops_gpu.cu), which sum a row's entries in another order. */
PL_HDI float pl_k_rstd(float var) { return 1.0f / sqrtf(var + PL_LAYERNORM_EPS); }

PL_HDI float pl_k_layernorm_out(float x, float mean, float rstd, float w, float b)
{
    return (x - mean) * rstd * w + b;
}

/* The input gradient of one element, given the row's means of w dout (dnorm_mean) and of
 * w dout xhat (dnorm_norm_mean). */
PL_HDI float pl_k_layernorm_dinp(float x, float dout, float w, float mean, float rstd,
                                 float dnorm_mean, float dnorm_norm_mean)
{
    float xhat = (x - mean) * rstd;
    return (w * dout - dnorm_mean - xhat * dnorm_norm_mean) * rstd;
}

/* Layernorm of one row of C; saves mean and rstd when the pointers are given. */
PL_HDI void pl_k_layernorm_row(float *out, float *mean_out, float *rstd_out, const float *x,
                              const float *w, const float *b, int C)
{
    float mean = 0.0f;
    PL_SIMD_SUM(mean)
    for (int i = 0; i < C; i++) mean += x[i];
    mean /= (float)C;
    float var = 0.0f;
    PL_SIMD_SUM(var)
    for (int i = 0; i < C; i++) {
        float d = x[i] - mean;
        var += d * d;
    }
    var /= (float)C;
    float rstd = pl_k_rstd(var);
    PL_SIMD
    for (int i = 0; i < C; i++) out[i] = pl_k_layernorm_out(x[i], mean, rstd, w[i], b[i]);
    if (mean_out) *mean_out = mean;
    if (rstd_out) *rstd_out = rstd;
}

/* dinp += the layernorm input gradient of one row (the weight and bias gradients are
 * reductions over rows, done separately). */
PL_HDI void pl_k_layernorm_bwd_row(float *dinp, const float *dout, const float *x,
                                  const float *w, float mean, float rstd, int C)
{
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
    PL_SIMD_SUM2(dnorm_mean, dnorm_norm_mean)
    for (int i = 0; i < C; i++) {
        float xhat = (x[i] - mean) * rstd;
        float dnorm = w[i] * dout[i];
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * xhat;
    }
    dnorm_mean /= (float)C;
    dnorm_norm_mean /= (float)C;
    PL_SIMD
    for (int i = 0; i < C; i++)
        dinp[i] += pl_k_layernorm_dinp(x[i], dout[i], w[i], mean, rstd, dnorm_mean,
                                       dnorm_norm_mean);
}

/* Softmax of the first len entries of in into out (in place allowed); entries
 * [len, total) of out are set to 0 (the causal mask of attention). Each input is
 * multiplied by scale first. The loops run to body >= len: entries [len, body) are read
 * but masked by a select (pl_k_causal_softmax_row below says why). */
PL_HDI void pl_k_softmax_row_to(float *out, const float *in, int len, int body, int total,
                                float scale)
{
    float mx = -INFINITY;
    PL_SIMD_MAX(mx)
    for (int j = 0; j < body; j++) {
        float z = j < len ? scale * in[j] : -INFINITY;
        mx = z > mx ? z : mx;
    }
    float sum = 0.0f;
    PL_SIMD_SUM(sum)
    for (int j = 0; j < body; j++) {
        float e = pl_k_expf(scale * in[j] - mx);
        e = j < len ? e : 0.0f;
        out[j] = e;
        sum += e;
    }
    float inv = 1.0f / sum;
    PL_SIMD
    for (int j = 0; j < body; j++) out[j] *= inv;
    PL_SIMD
    for (int j = body; j < total; j++) out[j] = 0.0f;
}

/* The row of len entries, no masked lanes. */
PL_HDI void pl_k_softmax_row(float *out, const float *in, int len, int total, float scale)
{
    pl_k_softmax_row_to(out, in, len, len, total, scale);
}

/* Causal attention's rows. Row t keeps columns [0, t] of T, a length that is rarely a
 * whole number of vectors; left to the vectoriser's scalar remainder loop, up to 15
 * elements a row (each an expf) cost about as much as the vector body. So the loops run
 * to pl_k_causal_body(len, cap): len rounded up to PL_K_ROW_VEC lanes where that fits in
 * the cap columns the caller owns, and lanes past len are masked by a select (their
 * inputs are read but never used). */
#define PL_K_ROW_VEC 16

PL_HDI int pl_k_causal_body(int len, int cap)
{
    int body = (len + PL_K_ROW_VEC - 1) / PL_K_ROW_VEC * PL_K_ROW_VEC;
    return body <= cap ? body : len;
}

/* Softmax of scale * s[0, len) in place, zeros in [len, total). */
PL_HDI void pl_k_causal_softmax_row(float *s, int len, int total, float scale)
{
    pl_k_softmax_row_to(s, s, len, pl_k_causal_body(len, total), total, scale);
}

/* dS = scale * p * (dP - p.dP) over [0, len) in place (ds holds dP on entry), zeros in
 * [len, cols): the columns up to the block's edge that the products after it read. */
PL_HDI void pl_k_causal_softmax_bwd_row(float *ds, const float *p, int len, int cols,
                                        float scale)
{
    int body = pl_k_causal_body(len, cols);
    float dot = 0.0f;
    PL_SIMD_SUM(dot)
    for (int j = 0; j < body; j++) dot += j < len ? p[j] * ds[j] : 0.0f;
    PL_SIMD
    for (int j = 0; j < body; j++) {
        float g = scale * p[j] * (ds[j] - dot);
        ds[j] = j < len ? g : 0.0f;
    }
    PL_SIMD
    for (int j = body; j < cols; j++) ds[j] = 0.0f;
}

/* Softmax backward of one row of len: with beta == 1, dx += scale * p * (dp - p.dp);
 * with beta == 0, dx = the same (dx may then alias dp). */
PL_HDI void pl_k_softmax_bwd_row(float *dx, const float *dp, const float *p, int len,
                                float scale, float beta)
{
    float dot = 0.0f;
    PL_SIMD_SUM(dot)
    for (int j = 0; j < len; j++) dot += p[j] * dp[j];
    PL_SIMD
    for (int j = 0; j < len; j++) {
        float g = scale * p[j] * (dp[j] - dot);
        dx[j] = beta * dx[j] + g;
    }
}

/* Cross-entropy of one row of logits for target `target`, from the logits rather than from
 * the softmax probabilities: max + log(sum exp(z - max)) - z[target] stays finite where
 * the target's probability underflows fp32 and -log p would be inf. */
PL_HDI float pl_k_crossentropy_row(const float *z, int V, int target)
{
    float mx = -INFINITY;
    PL_SIMD_MAX(mx)
    for (int j = 0; j < V; j++) mx = z[j] > mx ? z[j] : mx;
    float sum = 0.0f;
    PL_SIMD_SUM(sum)
    for (int j = 0; j < V; j++) sum += pl_k_expf(z[j] - mx);
    return logf(sum) + (mx - z[target]);
}

/* Softmax of one row of logits z into probs (probs may equal z) and its cross-entropy for
 * `target`, in one pass over the exponentials: the same max, sum and loss formula as
 * pl_k_softmax_row and pl_k_crossentropy_row, so the fused op gives the same numbers. */
PL_HDI float pl_k_softmax_crossentropy_row(float *probs, const float *z, int V, int target)
{
    float zt = z[target];
    float mx = -INFINITY;
    PL_SIMD_MAX(mx)
    for (int j = 0; j < V; j++) mx = z[j] > mx ? z[j] : mx;
    float sum = 0.0f;
    PL_SIMD_SUM(sum)
    for (int j = 0; j < V; j++) {
        float e = pl_k_expf(z[j] - mx);
        probs[j] = e;
        sum += e;
    }
    float inv = 1.0f / sum;
    PL_SIMD
    for (int j = 0; j < V; j++) probs[j] *= inv;
    return logf(sum) + (mx - zt);
}

/* ---- flash attention: causal attention in tiles, no T x T matrix ---------------------------
 * Query row i (of one sequence and head) meets the keys in tiles of pl_k_flash_tile(HS)
 * rows: tile after tile it keeps the running maximum m of its scaled scores, the running sum
 * l of their exponentials (relative to m) and the unnormalised output acc = sum p_j v_j,
 * rescaling l and acc by exp(m_old - m_new) when a tile raises the maximum (the online
 * softmax). The output is acc / l, and the row keeps only lse = m + log l. The backward
 * recomputes each probability p_ij = exp(scale q_i.k_j - lse_i) tile by tile, with
 * D_i = dO_i.O_i standing in for the softmax backward's p.dP. Keys after i are never
 * visited: a row's last tile is cut at i (nk below). The CPU runs these functions in host
 * loops over qkv (attn_flash.c), the GPU in kernels that first stage each tile in shared
 * memory (attn_gpu.cu); both with the same tiles, so the sums run in the same order. */
#define PL_FLASH_TILE 32   /* at most this many rows to a tile */
#define PL_FLASH_SMEM 4096 /* floats of one staged tile (a GPU block's shared memory) */

/* Rows to a tile for head size HS: PL_FLASH_TILE, fewer when a tile of HS-float rows would
 * not fit PL_FLASH_SMEM floats. HS <= PL_FLASH_SMEM (ops check it). */
PL_HDI int pl_k_flash_tile(int HS)
{
    int r = PL_FLASH_SMEM / HS;
    return r < PL_FLASH_TILE ? (r > 0 ? r : 1) : PL_FLASH_TILE;
}

PL_HDI float pl_k_dot(const float *a, const float *b, int n)
{
    float s = 0.0f;
    PL_SIMD_SUM(s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Query row q takes in nk keys and values (rows ld floats apart, every one at or before the
 * query): updates m, l and acc[HS]. m = -inf and l = acc = 0 before the first tile. */
PL_HDI void pl_k_flash_fwd_tile(float *acc, float *m, float *l, const float *q, const float *k,
                                const float *v, int ld, int nk, int HS, float scale)
{
    float s[PL_FLASH_TILE];
    float mx = *m;
    for (int j = 0; j < nk; j++) {
        s[j] = scale * pl_k_dot(q, k + (size_t)j * ld, HS);
        mx = s[j] > mx ? s[j] : mx;
    }
    float corr = pl_k_expf(*m - mx); /* 0 on the first tile (m = -inf) */
    float sum = 0.0f;
    for (int j = 0; j < nk; j++) {
        s[j] = pl_k_expf(s[j] - mx);
        sum += s[j];
    }
    *l = *l * corr + sum;
    *m = mx;
    PL_SIMD
    for (int d = 0; d < HS; d++) acc[d] *= corr;
    for (int j = 0; j < nk; j++) {
        const float *vj = v + (size_t)j * ld;
        float p = s[j];
        PL_SIMD
        for (int d = 0; d < HS; d++) acc[d] += p * vj[d];
    }
}

/* The row's end: out = acc / l (out may be acc), *lse = m + log l. */
PL_HDI void pl_k_flash_fwd_finish(float *out, const float *acc, float m, float l, float *lse,
                                  int HS)
{
    float inv = 1.0f / l;
    PL_SIMD
    for (int d = 0; d < HS; d++) out[d] = acc[d] * inv;
    *lse = m + logf(l);
}

/* dQ of query row i from nk keys and values (rows ld apart, at or before i):
 * dq += scale * sum_j p_ij (dO_i.v_j - D_i) k_j. */
PL_HDI void pl_k_flash_bwd_dq_tile(float *dq, const float *q, const float *dO, float lse,
                                   float D, const float *k, const float *v, int ld, int nk,
                                   int HS, float scale)
{
    float ds[PL_FLASH_TILE];
    for (int j = 0; j < nk; j++) {
        float p = pl_k_expf(scale * pl_k_dot(q, k + (size_t)j * ld, HS) - lse);
        ds[j] = scale * p * (pl_k_dot(dO, v + (size_t)j * ld, HS) - D);
    }
    for (int j = 0; j < nk; j++) {
        const float *kj = k + (size_t)j * ld;
        float g = ds[j];
        PL_SIMD
        for (int d = 0; d < HS; d++) dq[d] += g * kj[d];
    }
}

/* dK and dV of key row (k, v) from the queries [first, nq) of a tile (query rows ldq apart,
 * their output gradients ldo apart, their lse and D in lse[], D[]): the queries before
 * `first` come before the key and do not see it. dv += sum_i p_ij dO_i,
 * dk += scale * sum_i p_ij (dO_i.v - D_i) q_i. */
PL_HDI void pl_k_flash_bwd_dkv_tile(float *dk, float *dv, const float *k, const float *v,
                                    const float *q, int ldq, const float *dO, int ldo,
                                    const float *lse, const float *D, int first, int nq, int HS,
                                    float scale)
{
    float p[PL_FLASH_TILE], ds[PL_FLASH_TILE];
    for (int i = first; i < nq; i++) {
        const float *qi = q + (size_t)i * ldq, *oi = dO + (size_t)i * ldo;
        p[i] = pl_k_expf(scale * pl_k_dot(qi, k, HS) - lse[i]);
        ds[i] = scale * p[i] * (pl_k_dot(oi, v, HS) - D[i]);
    }
    for (int i = first; i < nq; i++) {
        const float *qi = q + (size_t)i * ldq, *oi = dO + (size_t)i * ldo;
        float pi = p[i], g = ds[i];
        PL_SIMD
        for (int d = 0; d < HS; d++) {
            dv[d] += pi * oi[d];
            dk[d] += g * qi[d];
        }
    }
}

/* ---- accumulations into shared rows -------------------------------------------------------
 * Several inputs add into the same output element (a token repeated in a batch, a row
 * chosen twice, a position shared by every sequence). Each output element below receives
 * its contributions in input order, whoever computes it: the CPU runs a function over all
 * columns, the GPU one thread per column. No atomics, so the sums are the same bits on
 * every run and on both backends. */

/* Columns [c0, c1) of out[rows[i], :] += scale[i] * inp[i, :] for i = 0..n-1 in order
 * (scale NULL means 1). */
PL_HD void pl_k_scatter_add_cols(float *out, const float *inp, const int *rows,
                                 const float *scale, int n, int C, int c0, int c1)
{
    for (int i = 0; i < n; i++) {
        float s = scale ? scale[i] : 1.0f;
        float *o = out + (size_t)rows[i] * C;
        const float *x = inp + (size_t)i * C;
        for (int c = c0; c < c1; c++) o[c] += s * x[c];
    }
}

/* Elements [j0, j1) of the flattened dwpe[T, C] += dout[b, :, :] for b = 0..B-1 in order. */
PL_HD void pl_k_encoder_dwpe(float *dwpe, const float *dout, int B, size_t TC, size_t j0,
                             size_t j1)
{
    for (int b = 0; b < B; b++) {
        const float *d = dout + (size_t)b * TC;
        for (size_t j = j0; j < j1; j++) dwpe[j] += d[j];
    }
}

/* ---- CUDA entry points (GPU build) ----------------------------------------------------- */
#ifdef PL_GPU
#ifdef __cplusplus
extern "C" {
#endif
void pl_gpu_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe,
                            int B, int T, int C);
void pl_gpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens,
                             int B, int T, int C);
void pl_gpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                              const float *weight, const float *bias, int N, int C);
void pl_gpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                               const float *inp, const float *weight, const float *mean,
                               const float *rstd, int N, int C);
void pl_gpu_matmul_forward(float *out, const float *inp, const float *weight,
                           const float *bias, int N, int C, int OC);
void pl_gpu_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, int N, int C, int OC);
void pl_gpu_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc);
void pl_gpu_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C,
                              int NH);
void pl_gpu_attention_backward(float *dqkv, const float *dout, const float *qkv,
                               const float *att, int B, int T, int C, int NH, float *ds);
/* Flash attention (attn_gpu.cu): lse [B, NH, T]; work B*NH*T floats for D. */
void pl_gpu_attention_flash_forward(float *out, float *lse, const float *qkv, int B, int T,
                                    int C, int NH);
void pl_gpu_attention_flash_backward(float *dqkv, const float *dout, const float *qkv,
                                     const float *out, const float *lse, int B, int T, int C,
                                     int NH, float *work);
void pl_gpu_matmul_gelu_forward(float *h, float *g, const float *inp, const float *weight,
                                const float *bias, int N, int C, int OC);
void pl_gpu_matmul_gelu_backward(float *dh, float *dweight, float *dbias, const float *dout,
                                 const float *g, const float *h, const float *weight, int N,
                                 int C, int OC);
/* Causal attention's softmax over rows (b, h, t) of T columns, row t keeping columns 0..t,
 * in place, and its backward (ds holds dP on entry): ops_rows_gpu.cu. */
void pl_gpu_causal_softmax(float *att, int T, float scale, size_t rows);
/* dbias[c] += the sum over the N rows of dout[n, c] (ops_rows_gpu.cu). */
void pl_gpu_column_sums(float *dbias, const float *dout, int N, int C);
void pl_gpu_causal_softmax_backward(float *ds, const float *att, int T, float scale,
                                    size_t rows);
void pl_gpu_gelu_forward(float *out, const float *inp, size_t n);
void pl_gpu_gelu_backward(float *dinp, const float *dout, const float *inp, size_t n);
void pl_gpu_residual_forward(float *out, const float *a, const float *b, size_t n);
void pl_gpu_softmax_forward(float *probs, const float *logits, int N, int V);
void pl_gpu_softmax_backward(float *dlogits, const float *dprobs, const float *probs, int N,
                             int V);
void pl_gpu_crossentropy_forward(float *losses, const float *logits, const int *targets,
                                 int N, int V);
void pl_gpu_softmax_crossentropy_forward(float *probs, float *losses, const float *logits,
                                         const int *targets, int N, int V);
void pl_gpu_crossentropy_softmax_backward(float *dlogits, const float *probs,
                                          const int *targets, float dloss, int N, int V);
void pl_gpu_dropout_block(float *out, const float *inp, size_t rows, size_t cols,
                          size_t full_cols, size_t row0, size_t col0, float p, uint64_t seed,
                          uint64_t stream, int accumulate);
void pl_gpu_adamw_step(float *param, const float *grad, float *m, float *v, size_t n,
                       float lr, float beta1, float beta2, float eps, float weight_decay,
                       float bc1, float bc2);
/* Runs of pl_adamw_step_runs: one launch per PL_ADAMW_RUNS_PER_LAUNCH runs. */
void pl_gpu_adamw_step_runs(float *param, const float *grad, float *m, float *v,
                            const size_t *ends, const unsigned char *decay, int nruns, float lr,
                            float beta1, float beta2, float eps, float weight_decay, float bc1,
                            float bc2);
/* bf16 storage (ops.h): out = bf16(in); out = float(in); acc = bf16(float(acc) + add). */
void pl_gpu_bf16_from_float(uint16_t *out, const float *in, size_t n);
void pl_gpu_bf16_to_float(float *out, const uint16_t *in, size_t n);
void pl_gpu_bf16_accumulate(uint16_t *acc, const float *add, size_t n);
void pl_gpu_bf16_zero(uint16_t *x, size_t n);
double pl_gpu_sum(const float *x, size_t n, int squares);
void pl_gpu_zero(float *x, size_t n);
void pl_gpu_scale(float *x, size_t n, float s);
/* x[i] = x[i] / d: a true division, as the MPI backend's PL_AVG makes (not x * (1/d)). */
void pl_gpu_divide(float *x, size_t n, float d);
void pl_gpu_accumulate(float *dst, const float *src, size_t n);
void pl_gpu_copy(float *dst, const float *src, size_t n);
void pl_gpu_to_device(void *dst_dev, const void *src_host, size_t bytes);
void pl_gpu_to_host(void *dst_host, const void *src_dev, size_t bytes);
void pl_gpu_wait(void);
void pl_gpu_gather_rows(float *out, const float *inp, const int *rows, int n, int C);
void pl_gpu_scatter_add_rows(float *out, const float *inp, const int *rows,
                             const float *scale, int n, int C);
void pl_gpu_row_dot(float *dot, const float *a, const int *rows, const float *b, int n, int C);
#ifdef __cplusplus
}
#endif
#endif

#endif
