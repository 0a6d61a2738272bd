/* attn_gpu.cu: flash attention on the GPU (GPU build only): causal attention in tiles of
 * keys, no T x T matrix in memory (ops.h, pl_attention_flash_*). The arithmetic is
 * kernels.h's pl_k_flash_* functions, the ones the CPU build runs in host loops over the
 * same tiles; here a block of R = pl_k_flash_tile(HS) threads owns one tile of R rows of one
 * (sequence, head), a thread to a row, and stages the tiles it reads in shared memory, each
 * element loaded once per block instead of once per row.
 *   forward    a block per query tile: key and value tiles 0..its own staged in turn; each
 *              thread runs its row's online softmax into its own output row (the
 *              accumulator) and writes the row's lse.
 *   backward   two kernels, so that every gradient row has one writer (no atomics, the
 *              same bits on every run): a block per query tile stages key and value tiles
 *              and accumulates dQ (and writes D_i = dO_i.O_i for the next kernel); then a
 *              block per key tile stages query and output-gradient tiles (with their lse
 *              and D) from its own tile to the last and accumulates dK and dV.
 * The probabilities are recomputed in both backward kernels. fp32 on the CUDA cores: the
 * point is the memory (no B*NH*T*T buffer in the forward or the backward); no speed figure
 * has been measured (docs/gpu.md). ops.c-style validation and FLOPs are in attn_flash.c. */
#include <cuda_runtime.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "check.h"
}
#include "kernels.h"

/* Where block x's tile is: sequence b, head h, tile index t of `tiles` per (b, h). */
struct flash_at {
    int b, h, t;
};

__device__ static flash_at flash_block(int tiles, int NH)
{
    flash_at a;
    int bh = (int)blockIdx.x / tiles;
    a.t = (int)blockIdx.x % tiles;
    a.b = bh / NH;
    a.h = bh % NH;
    return a;
}

/* Rows [r0, r0 + n) of a strided matrix (rows ld apart, HS floats used) into a dense tile. */
__device__ static void stage(float *tile, const float *src, size_t ld, int r0, int n, int HS)
{
    for (int e = (int)threadIdx.x; e < n * HS; e += (int)blockDim.x)
        tile[e] = src[(size_t)(r0 + e / HS) * ld + e % HS];
}

__device__ static void stage_row(float *tile, const float *src, int r0, int n)
{
    for (int e = (int)threadIdx.x; e < n; e += (int)blockDim.x) tile[e] = src[r0 + e];
}

__global__ static void k_flash_fwd(float *out, float *lse, const float *qkv, int T, int C,
                                   int NH, int R, float scale)
{
    __shared__ float ks[PL_FLASH_SMEM], vs[PL_FLASH_SMEM];
    const int HS = C / NH, tiles = (T + R - 1) / R;
    flash_at at = flash_block(tiles, NH);
    const int i = at.t * R + (int)threadIdx.x;
    const size_t ld = 3 * (size_t)C;
    const float *q = qkv + (size_t)at.b * T * ld + (size_t)at.h * HS;
    float *o = out + ((size_t)at.b * T + i) * C + (size_t)at.h * HS;
    float m = -INFINITY, l = 0.0f;
    if (i < T)
        for (int d = 0; d < HS; d++) o[d] = 0.0f;
    for (int kt = 0; kt <= at.t; kt++) {
        int j0 = kt * R, nk = T - j0 < R ? T - j0 : R;
        stage(ks, q + C, ld, j0, nk, HS);
        stage(vs, q + 2 * C, ld, j0, nk, HS);
        __syncthreads();
        if (i < T) {
            int vis = i - j0 + 1 < nk ? i - j0 + 1 : nk;
            pl_k_flash_fwd_tile(o, &m, &l, q + (size_t)i * ld, ks, vs, HS, vis, HS, scale);
        }
        __syncthreads();
    }
    if (i < T)
        pl_k_flash_fwd_finish(o, o, m, l, lse + ((size_t)at.b * NH + at.h) * T + i, HS);
}

__global__ static void k_flash_dq(float *dqkv, float *Dout, const float *dout,
                                  const float *qkv, const float *out, const float *lse, int T,
                                  int C, int NH, int R, float scale)
{
    __shared__ float ks[PL_FLASH_SMEM], vs[PL_FLASH_SMEM];
    const int HS = C / NH, tiles = (T + R - 1) / R;
    flash_at at = flash_block(tiles, NH);
    const int i = at.t * R + (int)threadIdx.x;
    const size_t ld = 3 * (size_t)C, row = (size_t)at.b * T + i;
    const size_t bh = ((size_t)at.b * NH + at.h) * T;
    const float *q = qkv + (size_t)at.b * T * ld + (size_t)at.h * HS;
    const float *dO = dout + row * C + (size_t)at.h * HS;
    float *dq = dqkv + row * ld + (size_t)at.h * HS;
    float D = 0.0f, L = 0.0f;
    if (i < T) {
        D = pl_k_dot(dO, out + row * C + (size_t)at.h * HS, HS);
        Dout[bh + i] = D;
        L = lse[bh + i];
    }
    for (int kt = 0; kt <= at.t; kt++) {
        int j0 = kt * R, nk = T - j0 < R ? T - j0 : R;
        stage(ks, q + C, ld, j0, nk, HS);
        stage(vs, q + 2 * C, ld, j0, nk, HS);
        __syncthreads();
        if (i < T) {
            int vis = i - j0 + 1 < nk ? i - j0 + 1 : nk;
            pl_k_flash_bwd_dq_tile(dq, q + (size_t)i * ld, dO, L, D, ks, vs, HS, vis, HS, scale);
        }
        __syncthreads();
    }
}

__global__ static void k_flash_dkv(float *dqkv, const float *Din, const float *dout,
                                   const float *qkv, const float *lse, int T, int C, int NH,
                                   int R, float scale)
{
    __shared__ float qs[PL_FLASH_SMEM], os[PL_FLASH_SMEM];
    __shared__ float ls[PL_FLASH_TILE], Ds[PL_FLASH_TILE];
    const int HS = C / NH, tiles = (T + R - 1) / R;
    flash_at at = flash_block(tiles, NH);
    const int j = at.t * R + (int)threadIdx.x;
    const size_t ld = 3 * (size_t)C;
    const size_t bh = ((size_t)at.b * NH + at.h) * T;
    const float *q = qkv + (size_t)at.b * T * ld + (size_t)at.h * HS;
    const float *dO = dout + (size_t)at.b * T * C + (size_t)at.h * HS;
    float *dk = dqkv + ((size_t)at.b * T + j) * ld + C + (size_t)at.h * HS, *dv = dk + C;
    for (int qt = at.t; qt < tiles; qt++) {
        int i0 = qt * R, nq = T - i0 < R ? T - i0 : R;
        stage(qs, q, ld, i0, nq, HS);
        stage(os, dO, (size_t)C, i0, nq, HS);
        stage_row(ls, lse + bh, i0, nq);
        stage_row(Ds, Din + bh, i0, nq);
        __syncthreads();
        if (j < T) {
            int first = j - i0 > 0 ? j - i0 : 0;
            const float *kj = q + (size_t)j * ld + C;
            pl_k_flash_bwd_dkv_tile(dk, dv, kj, kj + C, qs, HS, os, HS, ls, Ds, first, nq, HS,
                                    scale);
        }
        __syncthreads();
    }
}

extern "C" {

static void launch_dims(int B, int T, int C, int NH, int *R, int *blocks, float *scale)
{
    int HS = C / NH;
    *R = pl_k_flash_tile(HS);
    *blocks = B * NH * ((T + *R - 1) / *R);
    *scale = 1.0f / sqrtf((float)HS);
}

void pl_gpu_attention_flash_forward(float *out, float *lse, const float *qkv, int B, int T,
                                    int C, int NH)
{
    int R, blocks;
    float scale;
    launch_dims(B, T, C, NH, &R, &blocks, &scale);
    k_flash_fwd<<<blocks, R>>>(out, lse, qkv, T, C, NH, R, scale);
    PL_CHECK_CUDA(cudaGetLastError());
}

void pl_gpu_attention_flash_backward(float *dqkv, const float *dout, const float *qkv,
                                     const float *out, const float *lse, int B, int T, int C,
                                     int NH, float *work)
{
    int R, blocks;
    float scale;
    launch_dims(B, T, C, NH, &R, &blocks, &scale);
    k_flash_dq<<<blocks, R>>>(dqkv, work, dout, qkv, out, lse, T, C, NH, R, scale);
    PL_CHECK_CUDA(cudaGetLastError());
    k_flash_dkv<<<blocks, R>>>(dqkv, work, dout, qkv, lse, T, C, NH, R, scale);
    PL_CHECK_CUDA(cudaGetLastError());
}

} /* extern "C" */
