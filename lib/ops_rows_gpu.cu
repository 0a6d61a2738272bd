/* ops_rows_gpu.cu: the CUDA versions of the row-wise ops (GPU build only): layernorm,
 * softmax, causal attention's softmax, cross-entropy and the fused softmax + cross-entropy,
 * and the sums over rows (bias and layernorm weight gradients).
 * A row is read by a block of threads, thread k taking entries k, k + the block's size, ...,
 * so that neighbouring threads load neighbouring floats, and the block combines its
 * threads' partial sums and maxima in shared memory. The element math is kernels.h's, as
 * in the CPU loops; the sums run in another order than those loops', so the two builds
 * agree to float rounding, not bit for bit. The combining tree is fixed, so a run repeats
 * bit for bit, and no kernel uses atomics. Every op is queued on the compute stream and
 * returns without waiting, as in ops_gpu.cu; ops.c has validated the arguments and charged
 * the FLOPs. */
#include <cuda_runtime.h>
#include <math.h>
#include <stddef.h>

extern "C" {
#include "check.h"
}
#include "kernels.h"

/* One block of row_threads(len) threads per row (a power of two from ROW_MIN, a warp, to
 * ROW_MAX), the grid striding over rows. The CPU stand-in of the tests runs every CUDA
 * thread as a context of its own and switches at each barrier, so there a row gets 8
 * threads: the same code (the tree, the strided lanes, rows shorter and longer than the
 * block) at a cost its training tests can afford. */
#define ROW_MAX 256
#ifdef PL_GPU_STAND_IN
#define ROW_MIN 8
#define ROW_CAP 8
#else
#define ROW_MIN 32
#define ROW_CAP ROW_MAX
#endif

static int row_threads(int len)
{
    int t = ROW_MIN;
    while (t < ROW_CAP && t < len) t *= 2;
    return t;
}

static int row_blocks(size_t rows)
{
    return (int)(rows < 65535 ? (rows > 0 ? rows : 1) : 65535);
}

#define ROW_STRIDE(r, rows) for (size_t r = blockIdx.x; r < (rows); r += gridDim.x)
#define ROW_LANES(j, len) for (int j = (int)threadIdx.x; j < (len); j += (int)blockDim.x)

/* The sum (max = 0) or maximum (max = 1) of every thread's v over the block, returned to
 * every thread. A fixed tree over sh (ROW_MAX floats of shared memory), so the same inputs
 * give the same bits on every run; the maximum keeps the CPU loops' z > m ? z : m, which
 * passes over NaN. The last barrier lets the next call overwrite sh. */
__device__ static float row_reduce(float v, float *sh, int max)
{
    unsigned t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h /= 2) {
        if (t < h) {
            float a = sh[t], b = sh[t + h];
            sh[t] = max ? (b > a ? b : a) : a + b;
        }
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

/* ---- kernels ------------------------------------------------------------------------------ */

__global__ static void k_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                                       const float *w, const float *b, int N, int C)
{
    __shared__ float sh[ROW_MAX];
    ROW_STRIDE(n, (size_t)N)
    {
        const float *x = inp + n * C;
        float s = 0.0f;
        ROW_LANES(i, C) s += x[i];
        float mu = row_reduce(s, sh, 0) / (float)C;
        float q = 0.0f;
        ROW_LANES(i, C)
        {
            float d = x[i] - mu;
            q += d * d;
        }
        float rs = pl_k_rstd(row_reduce(q, sh, 0) / (float)C);
        ROW_LANES(i, C) out[n * C + i] = pl_k_layernorm_out(x[i], mu, rs, w[i], b[i]);
        if (threadIdx.x == 0) {
            if (mean) mean[n] = mu;
            if (rstd) rstd[n] = rs;
        }
    }
}

__global__ static void k_layernorm_bwd_rows(float *dinp, const float *dout, const float *inp,
                                            const float *w, const float *mean,
                                            const float *rstd, int N, int C)
{
    __shared__ float sh[ROW_MAX];
    ROW_STRIDE(n, (size_t)N)
    {
        const float *x = inp + n * C, *d = dout + n * C;
        float mu = mean[n], rs = rstd[n], s1 = 0.0f, s2 = 0.0f;
        ROW_LANES(i, C)
        {
            float dnorm = w[i] * d[i];
            s1 += dnorm;
            s2 += dnorm * (x[i] - mu) * rs;
        }
        float dm = row_reduce(s1, sh, 0) / (float)C;
        float dnm = row_reduce(s2, sh, 0) / (float)C;
        ROW_LANES(i, C) dinp[n * C + i] += pl_k_layernorm_dinp(x[i], d[i], w[i], mu, rs, dm, dnm);
    }
}

/* Sums over the rows of [N, C] matrices, column by column (a bias's or a layernorm's
 * weight gradient): a block takes COL_X neighbouring columns, COL_Y threads to a column, so
 * that a warp loads COL_X neighbouring floats of one row; thread y adds rows y, y + COL_Y,
 * ... in order, and the column's COL_Y partial sums are added in order of y. No atomics:
 * each output has one writer, so the sums repeat bit for bit. */
#define COL_X 32
#define COL_Y 16

static int col_blocks(int C)
{
    int b = (C + COL_X - 1) / COL_X;
    return b < 65535 ? b : 65535;
}

/* dbias[c] += sum over n of dout[n, c]. */
__global__ static void k_column_sums(float *dbias, const float *dout, int N, int C)
{
    __shared__ float sh[COL_Y][COL_X];
    const int x = (int)threadIdx.x % COL_X, y = (int)threadIdx.x / COL_X;
    for (size_t c0 = (size_t)blockIdx.x * COL_X; c0 < (size_t)C; c0 += (size_t)gridDim.x * COL_X) {
        size_t c = c0 + x;
        float s = 0.0f;
        if (c < (size_t)C)
            for (int n = y; n < N; n += COL_Y) s += dout[(size_t)n * C + c];
        sh[y][x] = s;
        __syncthreads();
        if (y == 0 && c < (size_t)C) {
            float t = 0.0f;
            for (int k = 0; k < COL_Y; k++) t += sh[k][x];
            dbias[c] += t;
        }
        __syncthreads();
    }
}

/* The layernorm's weight and bias gradients: dweight[c] += sum of dout xhat, dbias[c] +=
 * sum of dout, over the rows n. */
__global__ static void k_layernorm_bwd_params(float *dweight, float *dbias, const float *dout,
                                              const float *inp, const float *mean,
                                              const float *rstd, int N, int C)
{
    __shared__ float shw[COL_Y][COL_X], shb[COL_Y][COL_X];
    const int x = (int)threadIdx.x % COL_X, y = (int)threadIdx.x / COL_X;
    for (size_t c0 = (size_t)blockIdx.x * COL_X; c0 < (size_t)C; c0 += (size_t)gridDim.x * COL_X) {
        size_t c = c0 + x;
        float dw = 0.0f, db = 0.0f;
        if (c < (size_t)C)
            for (int n = y; n < N; n += COL_Y) {
                float d = dout[(size_t)n * C + c];
                dw += d * (inp[(size_t)n * C + c] - mean[n]) * rstd[n];
                db += d;
            }
        shw[y][x] = dw;
        shb[y][x] = db;
        __syncthreads();
        if (y == 0 && c < (size_t)C) {
            float tw = 0.0f, tb = 0.0f;
            for (int k = 0; k < COL_Y; k++) {
                tw += shw[k][x];
                tb += shb[k][x];
            }
            if (dweight) dweight[c] += tw;
            if (dbias) dbias[c] += tb;
        }
        __syncthreads();
    }
}

/* Softmax of scale * in[0, len) into out[0, len) (in place allowed), zeros in [len, total):
 * one row, run by its block. */
__device__ static void softmax_row_block(float *out, const float *in, int len, int total,
                                         float scale, float *sh)
{
    float mx = -INFINITY;
    ROW_LANES(j, len)
    {
        float z = scale * in[j];
        mx = z > mx ? z : mx;
    }
    mx = row_reduce(mx, sh, 1);
    float sum = 0.0f;
    ROW_LANES(j, len)
    {
        float e = pl_k_expf(scale * in[j] - mx);
        out[j] = e;
        sum += e;
    }
    float inv = 1.0f / row_reduce(sum, sh, 0);
    ROW_LANES(j, len) out[j] *= inv;
    for (int j = len + (int)threadIdx.x; j < total; j += (int)blockDim.x) out[j] = 0.0f;
}

/* dx = beta dx + scale p (dp - p.dp) over [0, len) (with beta 0, dx is not read and may
 * alias dp), zeros in [len, total): one row, run by its block. Each thread writes only the
 * entries it reads, after the block's sum. */
__device__ static void softmax_bwd_row_block(float *dx, const float *dp, const float *p,
                                             int len, int total, float scale, float beta,
                                             float *sh)
{
    float dot = 0.0f;
    ROW_LANES(j, len) dot += p[j] * dp[j];
    dot = row_reduce(dot, sh, 0);
    ROW_LANES(j, len)
    {
        float g = scale * p[j] * (dp[j] - dot);
        dx[j] = beta != 0.0f ? beta * dx[j] + g : g;
    }
    for (int j = len + (int)threadIdx.x; j < total; j += (int)blockDim.x) dx[j] = 0.0f;
}

/* Rows of att are (b, h, t); row t sees columns 0..t. */
__global__ static void k_causal_softmax(float *att, int T, float scale, size_t rows)
{
    __shared__ float sh[ROW_MAX];
    ROW_STRIDE(r, rows)
    {
        float *row = att + r * T;
        softmax_row_block(row, row, (int)(r % T) + 1, T, scale, sh);
    }
}

__global__ static void k_causal_softmax_bwd(float *ds, const float *att, int T, float scale,
                                            size_t rows)
{
    __shared__ float sh[ROW_MAX];
    ROW_STRIDE(r, rows)
    {
        float *row = ds + r * T;
        softmax_bwd_row_block(row, row, att + r * T, (int)(r % T) + 1, T, scale, 0.0f, sh);
    }
}

__global__ static void k_softmax_fwd(float *probs, const float *logits, int N, int V)
{
    __shared__ float sh[ROW_MAX];
    ROW_STRIDE(n, (size_t)N) softmax_row_block(probs + n * V, logits + n * V, V, V, 1.0f, sh);
}

__global__ static void k_softmax_bwd(float *dlogits, const float *dprobs, const float *probs,
                                     int N, int V)
{
    __shared__ float sh[ROW_MAX];
    ROW_STRIDE(n, (size_t)N)
    {
        softmax_bwd_row_block(dlogits + n * V, dprobs + n * V, probs + n * V, V, V, 1.0f, 1.0f,
                              sh);
    }
}

/* max + log(sum exp(z - max)) - z[target], as pl_k_crossentropy_row. */
__global__ static void k_xent_fwd(float *losses, const float *logits, const int *targets, int N,
                                  int V)
{
    __shared__ float sh[ROW_MAX];
    ROW_STRIDE(n, (size_t)N)
    {
        const float *z = logits + n * V;
        float mx = -INFINITY;
        ROW_LANES(j, V) mx = z[j] > mx ? z[j] : mx;
        mx = row_reduce(mx, sh, 1);
        float sum = 0.0f;
        ROW_LANES(j, V) sum += pl_k_expf(z[j] - mx);
        sum = row_reduce(sum, sh, 0);
        if (threadIdx.x == 0) losses[n] = logf(sum) + (mx - z[targets[n]]);
    }
}

/* Softmax of each row of logits into probs (in place allowed) and its cross-entropy, as
 * pl_k_softmax_crossentropy_row: the same max, sum and loss formula as the two ops apart. */
__global__ static void k_softmax_xent(float *probs, float *losses, const float *logits,
                                      const int *targets, int N, int V)
{
    __shared__ float sh[ROW_MAX];
    ROW_STRIDE(n, (size_t)N)
    {
        const float *z = logits + n * V;
        float zt = z[targets[n]];
        float mx = -INFINITY;
        ROW_LANES(j, V) mx = z[j] > mx ? z[j] : mx;
        mx = row_reduce(mx, sh, 1);
        float sum = 0.0f;
        ROW_LANES(j, V)
        {
            float e = pl_k_expf(z[j] - mx);
            probs[n * V + j] = e;
            sum += e;
        }
        sum = row_reduce(sum, sh, 0);
        float inv = 1.0f / sum;
        ROW_LANES(j, V) probs[n * V + j] *= inv;
        if (threadIdx.x == 0) losses[n] = logf(sum) + (mx - zt);
    }
}

/* ---- entry points ------------------------------------------------------------------------ */

/* Surfaces a bad launch at the op that made it. */
static void finish(void)
{
    PL_CHECK_CUDA(cudaGetLastError());
}

extern "C" {

void pl_gpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                              const float *weight, const float *bias, int N, int C)
{
    k_layernorm_fwd<<<row_blocks((size_t)N), row_threads(C)>>>(out, mean, rstd, inp, weight,
                                                               bias, N, C);
    finish();
}

void pl_gpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                               const float *inp, const float *weight, const float *mean,
                               const float *rstd, int N, int C)
{
    if (dinp)
        k_layernorm_bwd_rows<<<row_blocks((size_t)N), row_threads(C)>>>(dinp, dout, inp,
                                                                        weight, mean, rstd, N,
                                                                        C);
    if (dweight || dbias)
        k_layernorm_bwd_params<<<col_blocks(C), COL_X * COL_Y>>>(dweight, dbias, dout, inp,
                                                                 mean, rstd, N, C);
    finish();
}

void pl_gpu_softmax_forward(float *probs, const float *logits, int N, int V)
{
    k_softmax_fwd<<<row_blocks((size_t)N), row_threads(V)>>>(probs, logits, N, V);
    finish();
}

void pl_gpu_softmax_backward(float *dlogits, const float *dprobs, const float *probs, int N,
                             int V)
{
    k_softmax_bwd<<<row_blocks((size_t)N), row_threads(V)>>>(dlogits, dprobs, probs, N, V);
    finish();
}

void pl_gpu_crossentropy_forward(float *losses, const float *logits, const int *targets,
                                 int N, int V)
{
    k_xent_fwd<<<row_blocks((size_t)N), row_threads(V)>>>(losses, logits, targets, N, V);
    finish();
}

void pl_gpu_softmax_crossentropy_forward(float *probs, float *losses, const float *logits,
                                         const int *targets, int N, int V)
{
    k_softmax_xent<<<row_blocks((size_t)N), row_threads(V)>>>(probs, losses, logits, targets,
                                                              N, V);
    finish();
}

void pl_gpu_column_sums(float *dbias, const float *dout, int N, int C)
{
    k_column_sums<<<col_blocks(C), COL_X * COL_Y>>>(dbias, dout, N, C);
    finish();
}

/* Rows of att are (b, h, t) of T columns; row t keeps columns 0..t. */
void pl_gpu_causal_softmax(float *att, int T, float scale, size_t rows)
{
    k_causal_softmax<<<row_blocks(rows), row_threads(T)>>>(att, T, scale, rows);
    finish();
}

void pl_gpu_causal_softmax_backward(float *ds, const float *att, int T, float scale,
                                    size_t rows)
{
    k_causal_softmax_bwd<<<row_blocks(rows), row_threads(T)>>>(ds, att, T, scale, rows);
    finish();
}

} /* extern "C" */
