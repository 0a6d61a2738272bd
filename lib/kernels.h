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
#include "ops.h"
#include "rng.h"

#define PL_GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */
#define PL_GELU_CUBIC 0.044715f

/* 0.5 x (1 + tanh(u)) = x * sigmoid(2u): one expf instead of a tanhf, several times
 * faster in glibc and exact in form; the extremes give x or -0 without NaN. */
PL_HD float pl_k_gelu(float x)
{
    float u = PL_GELU_SCALE * (x + PL_GELU_CUBIC * x * x * x);
    return x / (1.0f + expf(-2.0f * u));
}

/* d/dx: s + x * 2 s (1 - s) du/dx with s = sigmoid(2u), since 1 - tanh(u)^2 = 4 s (1-s). */
PL_HD float pl_k_gelu_grad(float x)
{
    float u = PL_GELU_SCALE * (x + PL_GELU_CUBIC * x * x * x);
    float s = 1.0f / (1.0f + expf(-2.0f * u));
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
PL_HD void pl_k_adamw(float *param, float g, float *m, float *v, float lr, float beta1,
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

/* Layernorm of one row of C; saves mean and rstd when the pointers are given. */
PL_HD void pl_k_layernorm_row(float *out, float *mean_out, float *rstd_out, const float *x,
                              const float *w, const float *b, int C)
{
    float mean = 0.0f;
    for (int i = 0; i < C; i++) mean += x[i];
    mean /= (float)C;
    float var = 0.0f;
    for (int i = 0; i < C; i++) {
        float d = x[i] - mean;
        var += d * d;
    }
    var /= (float)C;
    float rstd = 1.0f / sqrtf(var + PL_LAYERNORM_EPS);
    for (int i = 0; i < C; i++) out[i] = (x[i] - mean) * rstd * w[i] + b[i];
    if (mean_out) *mean_out = mean;
    if (rstd_out) *rstd_out = rstd;
}

/* dinp += the layernorm input gradient of one row (the weight and bias gradients are
 * reductions over rows, done separately). */
PL_HD void pl_k_layernorm_bwd_row(float *dinp, const float *dout, const float *x,
                                  const float *w, float mean, float rstd, int C)
{
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
    for (int i = 0; i < C; i++) {
        float xhat = (x[i] - mean) * rstd;
        float dnorm = w[i] * dout[i];
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * xhat;
    }
    dnorm_mean /= (float)C;
    dnorm_norm_mean /= (float)C;
    for (int i = 0; i < C; i++) {
        float xhat = (x[i] - mean) * rstd;
        float dnorm = w[i] * dout[i];
        dinp[i] += (dnorm - dnorm_mean - xhat * dnorm_norm_mean) * rstd;
    }
}

/* Softmax of the first len entries of in into out (in place allowed); entries
 * [len, total) of out are set to 0 (the causal mask of attention). Each input is
 * multiplied by scale first. */
PL_HD void pl_k_softmax_row(float *out, const float *in, int len, int total, float scale)
{
    float mx = -INFINITY;
    for (int j = 0; j < len; j++) mx = fmaxf(mx, scale * in[j]);
    float sum = 0.0f;
    for (int j = 0; j < len; j++) {
        float e = expf(scale * in[j] - mx);
        out[j] = e;
        sum += e;
    }
    float inv = 1.0f / sum;
    for (int j = 0; j < len; j++) out[j] *= inv;
    for (int j = len; j < total; j++) out[j] = 0.0f;
}

/* Softmax backward of one row of len: with beta == 1, dx += scale * p * (dp - p.dp);
 * with beta == 0, dx = the same (dx may then alias dp). */
PL_HD void pl_k_softmax_bwd_row(float *dx, const float *dp, const float *p, int len,
                                float scale, float beta)
{
    float dot = 0.0f;
    for (int j = 0; j < len; j++) dot += p[j] * dp[j];
    for (int j = 0; j < len; j++) {
        float g = scale * p[j] * (dp[j] - dot);
        dx[j] = beta * dx[j] + g;
    }
}

/* Cross-entropy of one row of logits for target `target`, from the logits rather than from
 * the softmax probabilities: max + log(sum exp(z - max)) - z[target] stays finite where
 * the target's probability underflows fp32 and -log p would be inf. */
PL_HD float pl_k_crossentropy_row(const float *z, int V, int target)
{
    float mx = -INFINITY;
    for (int j = 0; j < V; j++) mx = fmaxf(mx, z[j]);
    float sum = 0.0f;
    for (int j = 0; j < V; j++) sum += expf(z[j] - mx);
    return logf(sum) + (mx - z[target]);
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
                               const float *att, int B, int T, int C, int NH);
void pl_gpu_gelu_forward(float *out, const float *inp, size_t n);
void pl_gpu_gelu_backward(float *dinp, const float *dout, const float *inp, size_t n);
void pl_gpu_residual_forward(float *out, const float *a, const float *b, size_t n);
void pl_gpu_softmax_forward(float *probs, const float *logits, int N, int V);
void pl_gpu_softmax_backward(float *dlogits, const float *dprobs, const float *probs, int N,
                             int V);
void pl_gpu_crossentropy_forward(float *losses, const float *logits, const int *targets,
                                 int N, int V);
void pl_gpu_crossentropy_softmax_backward(float *dlogits, const float *probs,
                                          const int *targets, float dloss, int N, int V);
void pl_gpu_dropout_block(float *out, const float *inp, size_t rows, size_t cols,
                          size_t full_cols, size_t row0, size_t col0, float p, uint64_t seed,
                          uint64_t stream, int accumulate);
void pl_gpu_adamw_step(float *param, const float *grad, float *m, float *v, size_t n,
                       float lr, float beta1, float beta2, float eps, float weight_decay,
                       float bc1, float bc2);
double pl_gpu_sum(const float *x, size_t n, int squares);
void pl_gpu_zero(float *x, size_t n);
void pl_gpu_scale(float *x, size_t n, float s);
void pl_gpu_accumulate(float *dst, const float *src, size_t n);
void pl_gpu_copy(float *dst, const float *src, size_t n);
void pl_gpu_to_device(void *dst_dev, const void *src_host, size_t bytes);
void pl_gpu_to_host(void *dst_host, const void *src_dev, size_t bytes);
void pl_gpu_gather_rows(float *out, const float *inp, const int *rows, int n, int C);
void pl_gpu_scatter_add_rows(float *out, const float *inp, const int *rows,
                             const float *scale, int n, int C);
void pl_gpu_row_dot(float *dot, const float *a, const int *rows, const float *b, int n, int C);
#ifdef __cplusplus
}
#endif
#endif

#endif
