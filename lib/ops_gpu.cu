/* ops_gpu.cu: the CUDA versions of the ops (GPU build only). Products go to cuBLAS; every
 * other op is a grid-stride kernel around the same kernels.h math the CPU loop calls, a
 * thread per element; the row-wise ops (layernorm, softmax, cross-entropy), a block per
 * row, are in ops_rows_gpu.cu, flash attention's tiled kernels in attn_gpu.cu.
 * Every op is queued on the compute stream (the legacy default stream) and returns without
 * waiting: what follows on that stream, the communication layer (whose streams wait on an
 * event recorded there) and host copies (cudaMemcpy on the same stream) are ordered after
 * it, so no op synchronises the device and communication can overlap compute. No kernel
 * uses atomics: where several inputs add into one output (repeated tokens and rows, sums
 * over a batch, reductions) a thread owns each output and adds in a fixed order, so a run
 * repeats bit for bit, as checkpoint resumes promise.
 * ops.c has already validated the arguments and charged the FLOPs. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* The library's C headers; ops.h and kernels.h carry their own extern "C". */
extern "C" {
#include "check.h"
#include "mem.h"
#include "rng.h"
}
#include "kernels.h"
#include "ops.h"

#define THREADS 256

static int blocks_for(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    return (int)(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

#define GRID_STRIDE(i, n)                                                                  \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);               \
         i += (size_t)gridDim.x * blockDim.x)

/* Surfaces a bad launch at the op that made it. Errors inside a running kernel surface at
 * the next call that waits for the stream (a copy to the host, a wait on communication). */
static void finish(void)
{
    PL_CHECK_CUDA(cudaGetLastError());
}

/* One cuBLAS handle for the process, made on first use (after the runtime chose the
 * device of this rank). */
static cublasHandle_t blas(void)
{
    static cublasHandle_t handle;
    static int ready;
    if (!ready) {
        PL_CHECK_CUBLAS(cublasCreate(&handle));
        ready = 1;
    }
    return handle;
}

static cublasOperation_t op_of(int trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands and
 * the M/N sizes; each row-major matrix read column-major is already its transpose. */
static void sgemm_rm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc)
{
    if (pl_matmul_precision() == PL_MATMUL_BF16) {
        /* the products in bf16 (ops.h): fp32 arrays, inputs read as bf16 by the tensor
         * cores, fp32 sums and output */
        PL_CHECK_CUBLAS(cublasGemmEx(blas(), op_of(tb), op_of(ta), N, M, K, &alpha, B,
                                     CUDA_R_32F, ldb, A, CUDA_R_32F, lda, &beta, C, CUDA_R_32F,
                                     ldc, CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT));
        return;
    }
    PL_CHECK_CUBLAS(cublasSgemm(blas(), op_of(tb), op_of(ta), N, M, K, &alpha, B, ldb, A, lda,
                                &beta, C, ldc));
}

static void sgemm_rm_batched(int ta, int tb, int M, int N, int K, float alpha, const float *A,
                             int lda, long long sa, const float *B, int ldb, long long sb,
                             float beta, float *C, int ldc, long long sc, int batch)
{
    if (pl_matmul_precision() == PL_MATMUL_BF16) { /* as sgemm_rm */
        PL_CHECK_CUBLAS(cublasGemmStridedBatchedEx(
            blas(), op_of(tb), op_of(ta), N, M, K, &alpha, B, CUDA_R_32F, ldb, sb, A, CUDA_R_32F,
            lda, sa, &beta, C, CUDA_R_32F, ldc, sc, batch, CUBLAS_COMPUTE_32F_FAST_16BF,
            CUBLAS_GEMM_DEFAULT));
        return;
    }
    PL_CHECK_CUBLAS(cublasSgemmStridedBatched(blas(), op_of(tb), op_of(ta), N, M, K, &alpha, B,
                                              ldb, sb, A, lda, sa, &beta, C, ldc, sc, batch));
}

/* ---- kernels ------------------------------------------------------------------------------ */

__global__ static void k_encoder_fwd(float *out, const int *tokens, const float *wte,
                                     const float *wpe, int T, int C, size_t n)
{
    GRID_STRIDE(i, n)
    {
        size_t bt = i / C, c = i % C;
        int t = (int)(bt % T);
        out[i] = wte[(size_t)tokens[bt] * C + c] + wpe[(size_t)t * C + c];
    }
}

/* A thread per element (t, c) of dwpe, summing over the batch in order. */
__global__ static void k_encoder_dwpe(float *dwpe, const float *dout, int B, size_t TC)
{
    GRID_STRIDE(j, TC) { pl_k_encoder_dwpe(dwpe, dout, B, TC, j, j + 1); }
}

__global__ static void k_fill_rows(float *out, const float *row, int OC, size_t n)
{
    GRID_STRIDE(i, n) { out[i] = row[i % OC]; }
}

__global__ static void k_gelu_fwd(float *out, const float *inp, size_t n)
{
    GRID_STRIDE(i, n) { out[i] = pl_k_gelu(inp[i]); }
}

/* The fc layer's epilogue in one pass over h, as the CPU's bias_gelu_rows: h += bias (bias
 * NULL: none), g = gelu(h). */
__global__ static void k_bias_gelu(float *h, float *g, const float *bias, int OC, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float x = bias ? h[i] + bias[i % OC] : h[i];
        h[i] = x;
        g[i] = pl_k_gelu(x);
    }
}

__global__ static void k_gelu_bwd(float *dinp, const float *dout, const float *inp, size_t n)
{
    GRID_STRIDE(i, n) { dinp[i] += pl_k_gelu_grad(inp[i]) * dout[i]; }
}

__global__ static void k_gelu_grad_scale(float *d, const float *inp, size_t n)
{
    GRID_STRIDE(i, n) { d[i] = pl_k_gelu_grad(inp[i]) * d[i]; }
}

__global__ static void k_add(float *out, const float *a, const float *b, size_t n)
{
    GRID_STRIDE(i, n) { out[i] = a[i] + b[i]; }
}

__global__ static void k_accumulate(float *dst, const float *src, size_t n)
{
    GRID_STRIDE(i, n) { dst[i] += src[i]; }
}

__global__ static void k_bf16_from_float(uint16_t *out, const float *in, size_t n)
{
    GRID_STRIDE(i, n) { out[i] = pl_k_bf16(in[i]); }
}

__global__ static void k_bf16_to_float(float *out, const uint16_t *in, size_t n)
{
    GRID_STRIDE(i, n) { out[i] = pl_k_bf16_float(in[i]); }
}

__global__ static void k_bf16_accumulate(uint16_t *acc, const float *add, size_t n)
{
    GRID_STRIDE(i, n) { acc[i] = pl_k_bf16(pl_k_bf16_float(acc[i]) + add[i]); }
}

__global__ static void k_scale(float *x, float s, size_t n)
{
    GRID_STRIDE(i, n) { x[i] *= s; }
}

__global__ static void k_divide(float *x, float d, size_t n)
{
    GRID_STRIDE(i, n) { x[i] = x[i] / d; }
}

__global__ static void k_xent_bwd(float *dlogits, const float *probs, const int *targets,
                                  float dloss, int V, size_t n)
{
    GRID_STRIDE(i, n)
    {
        size_t row = i / V;
        int j = (int)(i % V);
        dlogits[i] += dloss * (probs[i] - (j == targets[row] ? 1.0f : 0.0f));
    }
}

__global__ static void k_dropout(float *out, const float *inp, size_t cols, size_t full_cols,
                                 size_t row0, size_t col0, float p, uint64_t seed,
                                 uint64_t stream, int accumulate, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float y = pl_k_dropout_mult(seed, stream, pl_k_block_index(i, cols, full_cols, row0, col0),
                                    p) * inp[i];
        out[i] = accumulate ? out[i] + y : y;
    }
}

__global__ static void k_adamw(float *param, const float *grad, float *m, float *v, float lr,
                               float beta1, float beta2, float eps, float wd, float bc1,
                               float bc2, size_t n)
{
    GRID_STRIDE(i, n) { pl_k_adamw(param + i, grad[i], m + i, v + i, lr, beta1, beta2, eps, wd, bc1, bc2); }
}

/* A launch's runs, passed by value (kernel parameters, no copy to the device): run r ends
 * at element end[r] of the launch's range (counted from its start), its top bit set when
 * the run is decayed. 448 runs and the other arguments stay under the 4 KiB of parameters
 * every CUDA version takes. */
#define RUN_DECAY ((uint64_t)1 << 63)
struct adamw_runs {
    uint64_t end[PL_ADAMW_RUNS_PER_LAUNCH];
    int n;
};

/* Element i's run: the first whose end is past i (a binary search over the launch's runs;
 * the threads of a warp mostly share a run, so they read the same parameter words). */
__device__ static int run_of(const adamw_runs &r, uint64_t i)
{
    int lo = 0, hi = r.n - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if ((r.end[mid] & ~RUN_DECAY) > i) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

__global__ static void k_adamw_runs(float *param, const float *grad, float *m, float *v,
                                    adamw_runs runs, float lr, float beta1, float beta2,
                                    float eps, float wd, float bc1, float bc2, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float w = runs.end[run_of(runs, i)] & RUN_DECAY ? wd : 0.0f;
        pl_k_adamw(param + i, grad[i], m + i, v + i, lr, beta1, beta2, eps, w, bc1, bc2);
    }
}

/* The sum of every thread's s in a block, by a fixed tree in shared memory; valid in
 * thread 0. Launched with THREADS threads per block. */
__device__ static double block_sum(double s)
{
    __shared__ double part[THREADS];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    return part[0];
}

/* Each block sums its grid-stride share in double into partial[block]; k_sum_partials then
 * adds the partials in a fixed order, so the total does not depend on which block ends
 * first (an atomicAdd of the block totals would). */
__global__ static void k_sum_blocks(double *partial, const float *x, int squares, size_t n)
{
    double s = 0.0;
    GRID_STRIDE(i, n) { s += squares ? (double)x[i] * x[i] : (double)x[i]; }
    s = block_sum(s);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ static void k_sum_partials(double *out, const double *partial, int nblocks)
{
    double s = 0.0;
    for (int b = (int)threadIdx.x; b < nblocks; b += THREADS) s += partial[b];
    s = block_sum(s);
    if (threadIdx.x == 0) *out = s;
}

__global__ static void k_gather_rows(float *out, const float *inp, const int *rows, int C,
                                     size_t n)
{
    GRID_STRIDE(i, n) { out[i] = inp[(size_t)rows[i / C] * C + i % C]; }
}

/* A thread per column, adding the n rows in order (the encoder's dwte is this with the
 * tokens as rows). */
__global__ static void k_scatter_add_cols(float *out, const float *inp, const int *rows,
                                          const float *scale, int n, int C)
{
    GRID_STRIDE(c, (size_t)C)
    {
        pl_k_scatter_add_cols(out, inp, rows, scale, n, C, (int)c, (int)c + 1);
    }
}

__global__ static void k_row_dot(float *dot, const float *a, const int *rows, const float *b,
                                 int C, int n)
{
    GRID_STRIDE(i, (size_t)n)
    {
        const float *x = a + (size_t)rows[i] * C, *y = b + i * C;
        float s = 0.0f;
        for (int c = 0; c < C; c++) s += x[c] * y[c];
        dot[i] += s;
    }
}

/* ---- entry points ------------------------------------------------------------------------ */

extern "C" {

void pl_gpu_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    sgemm_rm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    finish();
}

void pl_gpu_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe,
                            int B, int T, int C)
{
    size_t n = (size_t)B * T * C;
    k_encoder_fwd<<<blocks_for(n), THREADS>>>(out, tokens, wte, wpe, T, C, n);
    finish();
}

void pl_gpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens,
                             int B, int T, int C)
{
    if (dwte)
        k_scatter_add_cols<<<blocks_for((size_t)C), THREADS>>>(dwte, dout, tokens, NULL, B * T, C);
    if (dwpe) {
        size_t TC = (size_t)T * C;
        k_encoder_dwpe<<<blocks_for(TC), THREADS>>>(dwpe, dout, B, TC);
    }
    finish();
}

void pl_gpu_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                           int N, int C, int OC)
{
    if (bias) {
        size_t n = (size_t)N * OC;
        k_fill_rows<<<blocks_for(n), THREADS>>>(out, bias, OC, n);
        PL_CHECK_CUDA(cudaGetLastError());
    }
    sgemm_rm(0, 1, N, OC, C, 1.0f, inp, C, weight, C, bias ? 1.0f : 0.0f, out, OC);
    finish();
}

/* The product first (beta 0: no bias copied into h beforehand), then the bias and GELU in
 * one kernel: two launches where a matmul with its bias and a GELU took three, and h is
 * read once for both. Adding the bias after the product rounds as beta = 1 on a
 * bias-filled h does (one rounding of the sum). */
void pl_gpu_matmul_gelu_forward(float *h, float *g, const float *inp, const float *weight,
                                const float *bias, int N, int C, int OC)
{
    size_t n = (size_t)N * OC;
    sgemm_rm(0, 1, N, OC, C, 1.0f, inp, C, weight, C, 0.0f, h, OC);
    k_bias_gelu<<<blocks_for(n), THREADS>>>(h, g, bias, OC, n);
    finish();
}

void pl_gpu_matmul_gelu_backward(float *dh, float *dweight, float *dbias, const float *dout,
                                 const float *g, const float *h, const float *weight, int N,
                                 int C, int OC)
{
    size_t n = (size_t)N * C;
    sgemm_rm(0, 0, N, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dh, C);
    k_gelu_grad_scale<<<blocks_for(n), THREADS>>>(dh, h, n);
    PL_CHECK_CUDA(cudaGetLastError());
    if (dweight) sgemm_rm(1, 0, OC, C, N, 1.0f, dout, OC, g, C, 1.0f, dweight, C);
    if (dbias) pl_gpu_column_sums(dbias, dout, N, OC);
    finish();
}

void pl_gpu_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, int N, int C, int OC)
{
    if (dinp) sgemm_rm(0, 0, N, C, OC, 1.0f, dout, OC, weight, C, 1.0f, dinp, C);
    if (dweight) sgemm_rm(1, 0, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
    if (dbias) pl_gpu_column_sums(dbias, dout, N, OC);
    finish();
}

/* Per sequence b, one strided batch over the NH heads: head h's Q, K, V start HS floats
 * apart inside each qkv row, its scores T*T floats apart inside att. */
void pl_gpu_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C,
                              int NH)
{
    int HS = C / NH;
    float scale = 1.0f / sqrtf((float)HS);
    long long tt = (long long)T * T;
    for (int b = 0; b < B; b++) {
        const float *q = qkv + (size_t)b * T * 3 * C, *k = q + C;
        float *s = att + (size_t)b * NH * tt;
        sgemm_rm_batched(0, 1, T, T, HS, 1.0f, q, 3 * C, HS, k, 3 * C, HS, 0.0f, s, T, tt, NH);
    }
    size_t rows = (size_t)B * NH * T;
    pl_gpu_causal_softmax(att, T, scale, rows);
    for (int b = 0; b < B; b++) {
        const float *v = qkv + (size_t)b * T * 3 * C + 2 * C;
        const float *s = att + (size_t)b * NH * tt;
        sgemm_rm_batched(0, 0, T, HS, T, 1.0f, s, T, tt, v, 3 * C, HS, 0.0f,
                         out + (size_t)b * T * C, C, HS, NH);
    }
    finish();
}

void pl_gpu_attention_backward(float *dqkv, const float *dout, const float *qkv,
                               const float *att, int B, int T, int C, int NH, float *ds)
{
    int HS = C / NH;
    float scale = 1.0f / sqrtf((float)HS);
    long long tt = (long long)T * T;
    for (int b = 0; b < B; b++) {
        size_t off = (size_t)b * T * 3 * C;
        const float *q = qkv + off, *k = q + C, *v = q + 2 * C;
        float *dq = dqkv + off, *dk = dq + C, *dv = dq + 2 * C;
        const float *p = att + (size_t)b * NH * tt;
        const float *dO = dout + (size_t)b * T * C;
        sgemm_rm_batched(0, 1, T, T, HS, 1.0f, dO, C, HS, v, 3 * C, HS, 0.0f, ds, T, tt, NH);
        sgemm_rm_batched(1, 0, T, HS, T, 1.0f, p, T, tt, dO, C, HS, 1.0f, dv, 3 * C, HS, NH);
        size_t rows = (size_t)NH * T;
        pl_gpu_causal_softmax_backward(ds, p, T, scale, rows);
        sgemm_rm_batched(0, 0, T, HS, T, 1.0f, ds, T, tt, k, 3 * C, HS, 1.0f, dq, 3 * C, HS, NH);
        sgemm_rm_batched(1, 0, T, HS, T, 1.0f, ds, T, tt, q, 3 * C, HS, 1.0f, dk, 3 * C, HS, NH);
    }
    finish();
}

void pl_gpu_gelu_forward(float *out, const float *inp, size_t n)
{
    k_gelu_fwd<<<blocks_for(n), THREADS>>>(out, inp, n);
    finish();
}

void pl_gpu_gelu_backward(float *dinp, const float *dout, const float *inp, size_t n)
{
    k_gelu_bwd<<<blocks_for(n), THREADS>>>(dinp, dout, inp, n);
    finish();
}

void pl_gpu_residual_forward(float *out, const float *a, const float *b, size_t n)
{
    k_add<<<blocks_for(n), THREADS>>>(out, a, b, n);
    finish();
}

void pl_gpu_crossentropy_softmax_backward(float *dlogits, const float *probs,
                                          const int *targets, float dloss, int N, int V)
{
    size_t n = (size_t)N * V;
    k_xent_bwd<<<blocks_for(n), THREADS>>>(dlogits, probs, targets, dloss, V, n);
    finish();
}

void pl_gpu_dropout_block(float *out, const float *inp, size_t rows, size_t cols,
                          size_t full_cols, size_t row0, size_t col0, float p, uint64_t seed,
                          uint64_t stream, int accumulate)
{
    size_t n = rows * cols;
    k_dropout<<<blocks_for(n), THREADS>>>(out, inp, cols, full_cols, row0, col0, p, seed, stream,
                                          accumulate, n);
    finish();
}

void pl_gpu_adamw_step(float *param, const float *grad, float *m, float *v, size_t n, float lr,
                       float beta1, float beta2, float eps, float weight_decay, float bc1,
                       float bc2)
{
    k_adamw<<<blocks_for(n), THREADS>>>(param, grad, m, v, lr, beta1, beta2, eps, weight_decay,
                                        bc1, bc2, n);
    finish();
}

void pl_gpu_adamw_step_runs(float *param, const float *grad, float *m, float *v,
                            const size_t *ends, const unsigned char *decay, int nruns, float lr,
                            float beta1, float beta2, float eps, float weight_decay, float bc1,
                            float bc2)
{
    for (int r0 = 0; r0 < nruns; r0 += PL_ADAMW_RUNS_PER_LAUNCH) {
        adamw_runs runs;
        size_t start = r0 ? ends[r0 - 1] : 0;
        runs.n = nruns - r0 < PL_ADAMW_RUNS_PER_LAUNCH ? nruns - r0 : PL_ADAMW_RUNS_PER_LAUNCH;
        for (int r = 0; r < runs.n; r++)
            runs.end[r] = (uint64_t)(ends[r0 + r] - start) | (decay[r0 + r] ? RUN_DECAY : 0);
        size_t n = ends[r0 + runs.n - 1] - start;
        k_adamw_runs<<<blocks_for(n), THREADS>>>(param + start, grad + start, m + start,
                                                 v + start, runs, lr, beta1, beta2, eps,
                                                 weight_decay, bc1, bc2, n);
        PL_CHECK_CUDA(cudaGetLastError());
    }
    finish();
}

double pl_gpu_sum(const float *x, size_t n, int squares)
{
    int nblocks = blocks_for(n);
    double *acc = (double *)pl_mem_alloc(((size_t)nblocks + 1) * sizeof(double), PL_MEM_WORK,
                                         PL_DEVICE, "sum partials");
    k_sum_blocks<<<nblocks, THREADS>>>(acc + 1, x, squares, n);
    PL_CHECK_CUDA(cudaGetLastError());
    k_sum_partials<<<1, THREADS>>>(acc, acc + 1, nblocks);
    finish();
    double s = 0.0;
    PL_CHECK_CUDA(cudaMemcpy(&s, acc, sizeof s, cudaMemcpyDeviceToHost));
    pl_mem_free(acc);
    return s;
}

void pl_gpu_zero(float *x, size_t n)
{
    PL_CHECK_CUDA(cudaMemsetAsync(x, 0, n * sizeof *x, 0));
    finish();
}

void pl_gpu_bf16_from_float(uint16_t *out, const float *in, size_t n)
{
    k_bf16_from_float<<<blocks_for(n), THREADS>>>(out, in, n);
    finish();
}

void pl_gpu_bf16_to_float(float *out, const uint16_t *in, size_t n)
{
    k_bf16_to_float<<<blocks_for(n), THREADS>>>(out, in, n);
    finish();
}

void pl_gpu_bf16_accumulate(uint16_t *acc, const float *add, size_t n)
{
    k_bf16_accumulate<<<blocks_for(n), THREADS>>>(acc, add, n);
    finish();
}

void pl_gpu_bf16_zero(uint16_t *x, size_t n)
{
    PL_CHECK_CUDA(cudaMemsetAsync(x, 0, n * sizeof *x, 0));
    finish();
}

void pl_gpu_scale(float *x, size_t n, float s)
{
    k_scale<<<blocks_for(n), THREADS>>>(x, s, n);
    finish();
}

void pl_gpu_divide(float *x, size_t n, float d)
{
    if (!n) return;
    k_divide<<<blocks_for(n), THREADS>>>(x, d, n);
    finish();
}

void pl_gpu_accumulate(float *dst, const float *src, size_t n)
{
    k_accumulate<<<blocks_for(n), THREADS>>>(dst, src, n);
    finish();
}

void pl_gpu_copy(float *dst, const float *src, size_t n)
{
    PL_CHECK_CUDA(cudaMemcpyAsync(dst, src, n * sizeof *dst, cudaMemcpyDeviceToDevice, 0));
    finish();
}

void pl_gpu_to_device(void *dst_dev, const void *src_host, size_t bytes)
{
    PL_CHECK_CUDA(cudaMemcpy(dst_dev, src_host, bytes, cudaMemcpyHostToDevice));
}

void pl_gpu_to_host(void *dst_host, const void *src_dev, size_t bytes)
{
    PL_CHECK_CUDA(cudaMemcpy(dst_host, src_dev, bytes, cudaMemcpyDeviceToHost));
}

/* The host waits for an event recorded behind every op queued so far on the compute stream:
 * that stream's work is done, and nothing else on the device is waited for. */
void pl_gpu_wait(void)
{
    static cudaEvent_t done;
    static int made;
    if (!made) {
        PL_CHECK_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
        made = 1;
    }
    PL_CHECK_CUDA(cudaEventRecord(done, 0));
    PL_CHECK_CUDA(cudaEventSynchronize(done));
}

void pl_gpu_gather_rows(float *out, const float *inp, const int *rows, int n, int C)
{
    size_t total = (size_t)n * C;
    k_gather_rows<<<blocks_for(total), THREADS>>>(out, inp, rows, C, total);
    finish();
}

void pl_gpu_scatter_add_rows(float *out, const float *inp, const int *rows, const float *scale,
                             int n, int C)
{
    k_scatter_add_cols<<<blocks_for((size_t)C), THREADS>>>(out, inp, rows, scale, n, C);
    finish();
}

void pl_gpu_row_dot(float *dot, const float *a, const int *rows, const float *b, int n, int C)
{
    k_row_dot<<<blocks_for((size_t)n), THREADS>>>(dot, a, rows, b, C, n);
    finish();
}

} /* extern "C" */
