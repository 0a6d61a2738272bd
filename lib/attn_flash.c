/* attn_flash.c: flash attention (ops.h, pl_attention_flash_*): the arguments checked, the
 * FLOPs charged, then the CPU loops below or, on the GPU build, attn_gpu.cu's kernels. Both
 * run kernels.h's pl_k_flash_* functions over the same tiles of pl_k_flash_tile(HS) rows:
 * here a row at a time reading qkv in place, there a block to a tile staging it in shared
 * memory. */
#include "ops.h"

#include <math.h>

#include "check.h"
#include "kernels.h"
#include "ledger.h"
#include "mem.h"

static void check_args(const char *op, int B, int T, int C, int NH)
{
    if (B <= 0 || T <= 0 || C <= 0 || NH <= 0)
        pl_usage_error("%s: sizes B=%d, T=%d, C=%d, NH=%d: every size must be at least 1 (a "
                       "caller with no rows to process skips the call)", op, B, T, C, NH);
    if (C % NH) {
        char divisors[256];
        pl_usage_error("%s: C=%d channels are not divisible by NH=%d heads (each head needs "
                       "C/NH channels; choose NH in {%s})", op, C, NH,
                       pl_divisors(C, divisors, sizeof divisors));
    }
    if (C / NH > PL_FLASH_SMEM)
        pl_usage_error("%s: head size C/NH=%d is more than the %d floats a tile row may hold "
                       "(use more heads, or the materialised pl_attention_forward)", op,
                       C / NH, PL_FLASH_SMEM);
}

static void check_ptr(const char *op, const char *name, const void *p)
{
    if (!p) pl_usage_error("%s: %s is NULL; it must point to the op's memory", op, name);
}

#ifndef PL_GPU
/* Query rows are visited tile by tile, each row against key tiles 0..its own, cut at the
 * row itself: the order the GPU's blocks use, so both backends add in the same order. */
static void cpu_flash_forward(float *out, float *lse, const float *qkv, int B, int T, int C,
                              int NH)
{
    const int HS = C / NH, R = pl_k_flash_tile(HS);
    const size_t ld = 3 * (size_t)C;
    const float scale = 1.0f / sqrtf((float)HS);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * T * ld + (size_t)h * HS;
            for (int i = 0; i < T; i++) {
                float *o = out + ((size_t)b * T + i) * C + (size_t)h * HS;
                float m = -INFINITY, l = 0.0f;
                for (int d = 0; d < HS; d++) o[d] = 0.0f;
                for (int j0 = 0; j0 <= i; j0 += R) {
                    int nk = i - j0 + 1 < R ? i - j0 + 1 : R;
                    pl_k_flash_fwd_tile(o, &m, &l, q + (size_t)i * ld, q + (size_t)j0 * ld + C,
                                        q + (size_t)j0 * ld + 2 * C, (int)ld, nk, HS, scale);
                }
                pl_k_flash_fwd_finish(o, o, m, l, lse + ((size_t)b * NH + h) * T + i, HS);
            }
        }
}

static void cpu_flash_backward(float *dqkv, const float *dout, const float *qkv,
                               const float *out, const float *lse, int B, int T, int C, int NH,
                               float *D)
{
    const int HS = C / NH, R = pl_k_flash_tile(HS);
    const size_t ld = 3 * (size_t)C;
    const float scale = 1.0f / sqrtf((float)HS);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const size_t bh = ((size_t)b * NH + h) * T;
            const float *q = qkv + (size_t)b * T * ld + (size_t)h * HS;
            const float *dO = dout + (size_t)b * T * C + (size_t)h * HS;
            const float *O = out + (size_t)b * T * C + (size_t)h * HS;
            float *dq = dqkv + (size_t)b * T * ld + (size_t)h * HS;
            /* queries: D_i, then dQ_i over the key tiles up to i */
            for (int i = 0; i < T; i++) {
                const float *dOi = dO + (size_t)i * C;
                D[bh + i] = pl_k_dot(dOi, O + (size_t)i * C, HS);
                for (int j0 = 0; j0 <= i; j0 += R) {
                    int nk = i - j0 + 1 < R ? i - j0 + 1 : R;
                    pl_k_flash_bwd_dq_tile(dq + (size_t)i * ld, q + (size_t)i * ld, dOi,
                                           lse[bh + i], D[bh + i], q + (size_t)j0 * ld + C,
                                           q + (size_t)j0 * ld + 2 * C, (int)ld, nk, HS, scale);
                }
            }
            /* keys and values: dK_j, dV_j over the query tiles from j's own to the last */
            for (int j = 0; j < T; j++) {
                const float *kj = q + (size_t)j * ld + C;
                float *dk = dq + (size_t)j * ld + C;
                for (int i0 = j / R * R; i0 < T; i0 += R) {
                    int nq = T - i0 < R ? T - i0 : R, first = j - i0 > 0 ? j - i0 : 0;
                    pl_k_flash_bwd_dkv_tile(dk, dk + C, kj, kj + C, q + (size_t)i0 * ld, (int)ld,
                                            dO + (size_t)i0 * C, C, lse + bh + i0, D + bh + i0,
                                            first, nq, HS, scale);
                }
            }
        }
}
#define FLASH(name) cpu_flash_##name
#else
#define FLASH(name) pl_gpu_attention_flash_##name
#endif

void pl_attention_flash_forward(float *out, float *lse, const float *qkv, int B, int T, int C,
                                int NH)
{
    const char *op = "pl_attention_flash_forward";
    check_args(op, B, T, C, NH);
    check_ptr(op, "out", out);
    check_ptr(op, "lse", lse);
    check_ptr(op, "qkv", qkv);
    pl_ledger_add_flops(4.0 * B * T * T * C + (double)PL_FLOPS_SOFTMAX_FWD * B * NH * T * T);
    FLASH(forward)(out, lse, qkv, B, T, C, NH);
}

size_t pl_attention_flash_backward_work(int B, int T, int NH)
{
    return (size_t)B * NH * T;
}

void pl_attention_flash_backward(float *dqkv, const float *dout, const float *qkv,
                                 const float *out, const float *lse, int B, int T, int C,
                                 int NH, float *work)
{
    const char *op = "pl_attention_flash_backward";
    check_args(op, B, T, C, NH);
    if (!dqkv) return;
    check_ptr(op, "dout", dout);
    check_ptr(op, "qkv", qkv);
    check_ptr(op, "out (saved by the forward)", out);
    check_ptr(op, "lse (saved by the forward)", lse);
    double scores = (double)B * NH * T * T;
    pl_ledger_add_flops(8.0 * B * T * T * C + (double)PL_FLOPS_SOFTMAX_BWD * scores);
    pl_ledger_recompute_begin();
    pl_ledger_add_flops(6.0 * B * T * T * C + 2.0 * PL_FLOPS_SOFTMAX_FWD * scores);
    pl_ledger_recompute_end();
    float *own = NULL;
    if (!work)
        work = own = pl_mem_alloc(pl_attention_flash_backward_work(B, T, NH) * sizeof(float),
                                  PL_MEM_WORK, PL_DEVICE, "flash attention D");
    FLASH(backward)(dqkv, dout, qkv, out, lse, B, T, C, NH, work);
    pl_mem_free(own);
}
