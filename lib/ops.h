/* ops.h: forward and backward of everything a tiny GPT needs, on fp32 row-major arrays.
 *
 * Conventions (after llm.c):
 *   - B batch, T sequence, C channels, NH heads (head size HS = C/NH), V vocabulary,
 *     N rows (N = B*T for per-token ops), OC output channels, n elements.
 *   - Plain pointers. On the CPU build they are host memory; on the GPU build (GPU=1) the
 *     SAME functions take device memory (token and target arrays included) and run CUDA
 *     kernels and cuBLAS. Results land before the function returns, so a following MPI or
 *     host call sees them.
 *   - Backward functions ACCUMULATE (+=) into every gradient they write, so gradient
 *     accumulation over micro-batches, shared (tied) parameters and a residual stream that
 *     several ops feed all work by calling them in turn. Zero gradients with pl_zero first.
 *   - A gradient output of a backward that is NULL is not computed (e.g. no dinp for the
 *     first layer); a backward given no gradient to write at all returns after checking
 *     its sizes, charging nothing. The inputs it reads (dout, saved activations) must be
 *     given.
 *   - Ops keep no state and allocate no persistent memory; scratch goes through
 *     pl_mem_alloc(..., PL_MEM_WORK, PL_DEVICE) and is freed before returning.
 *   - Impossible sizes (zero, C not divisible by NH, a token outside [0, V)) are usage
 *     errors: a message saying what would be right, exit 2. A caller with nothing to do
 *     (an expert that received no tokens) skips the call; only the element-wise ops, the
 *     helpers and the row gather/scatter accept n == 0.
 *
 * FLOPs: each call adds its count to the ledger (pl_ledger_add_flops). Matrix products
 * count 2 per multiply-add of the dense product actually computed:
 *   matmul       forward 2*N*C*OC (+ N*OC with a bias);
 *                backward 2*N*C*OC for dinp, 2*N*C*OC for dweight, N*OC for dbias
 *                (each only when requested): 4*N*C*OC + N*OC with all three.
 *   attention    forward 4*B*T*T*C (Q K^T and att V counted as dense T x T products,
 *                though the CPU version skips most of the masked future) +
 *                PL_FLOPS_SOFTMAX_FWD per score (B*NH*T*T);
 *                backward 8*B*T*T*C (four products) + PL_FLOPS_SOFTMAX_BWD per score.
 *   flash attention  forward as attention's; backward as attention's, plus what it
 *                recomputes, counted also as recomputation (pl_ledger_recompute_begin):
 *                6*B*T*T*C (the scores twice, dO V^T once more) and 2 PL_FLOPS_SOFTMAX_FWD
 *                per score (the probabilities in each of its two passes).
 *   sgemm        2*M*N*K.
 *   pl_scatter_add_rows and pl_row_dot 2*n*C; pl_sum n; pl_gather_rows, pl_zero, pl_copy
 *   and the host/device copies nothing.
 * Element-wise ops count the PL_FLOPS_* constants below per element they touch (per
 * N*C element for layernorm, per N*V element for softmax and cross-entropy). */
#ifndef PL_OPS_H
#define PL_OPS_H

#include <stddef.h>
#include <stdint.h>
#include "ops_const.h"

#ifdef __cplusplus
extern "C" {
#endif

/* FLOPs per element of the element-wise ops (a tanh or exp counts 1). */
#define PL_FLOPS_ENCODER_FWD 1   /* wte + wpe */
#define PL_FLOPS_ENCODER_BWD 2   /* two accumulations */
#define PL_FLOPS_LAYERNORM_FWD 8 /* mean, variance, normalise, scale and shift */
#define PL_FLOPS_LAYERNORM_BWD 14
/* of which the parameters' gradients (dweight and dbias) are 5, dinp the other 9 */
#define PL_FLOPS_LAYERNORM_BWD_PARAMS 5
#define PL_FLOPS_GELU_FWD 8
#define PL_FLOPS_GELU_BWD 16
#define PL_FLOPS_RESIDUAL_FWD 1
#define PL_FLOPS_RESIDUAL_BWD 2
#define PL_FLOPS_SOFTMAX_FWD 4   /* max, subtract, exp, normalise */
#define PL_FLOPS_SOFTMAX_BWD 4
#define PL_FLOPS_XENT_FWD 3      /* per element: max, exp of the difference, sum */
#define PL_FLOPS_XENT_BWD 3      /* per element: (p - onehot) * dloss, accumulate */
#define PL_FLOPS_DROPOUT 2       /* compare, scale (forward and backward alike) */
#define PL_FLOPS_ADAMW 16
#define PL_FLOPS_NORM_SQ 2       /* pl_grad_norm_sq */
#define PL_FLOPS_SCALE 1         /* pl_scale, pl_accumulate */

/* PL_LAYERNORM_EPS: ops_const.h (included above). */

/* ---- embedding ---------------------------------------------------------------------- */
/* out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:].  tokens [B,T] in [0,V), wte [V,C], wpe [T',C]
 * with T' >= T (only the first T rows are read). */
void pl_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe,
                        int B, int T, int C, int V);
/* dwte[tokens[b,t],:] += dout[b,t,:]; dwpe[t,:] += dout[b,t,:]. Either may be NULL. */
void pl_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens,
                         int B, int T, int C, int V);

/* ---- layernorm over the last dimension ----------------------------------------------- */
/* out[N,C] = (inp - mean) * rstd * weight + bias, per row. mean[N] and rstd[N] are saved
 * for the backward (either may be NULL when no backward follows). */
void pl_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                          const float *weight, const float *bias, int N, int C);
/* dinp, dweight[C], dbias[C] += the gradients; mean and rstd from the forward. Any of dinp,
 * dweight, dbias may be NULL: dinp alone charges PL_FLOPS_LAYERNORM_BWD -
 * PL_FLOPS_LAYERNORM_BWD_PARAMS per element, the parameters alone the rest, so a backward
 * split in two (dinp now, the parameters later) charges what one call does. */
void pl_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                           const float *inp, const float *weight, const float *mean,
                           const float *rstd, int N, int C);

/* ---- linear layer ---------------------------------------------------------------------- */
/* out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC] (bias may be NULL), as nn.Linear. */
void pl_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                       int N, int C, int OC);
/* dinp[N,C] += dout @ weight; dweight[OC,C] += dout^T @ inp; dbias[OC] += sum_n dout.
 * Any of dinp, dweight, dbias may be NULL. */
void pl_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, int N, int C, int OC);

/* The MLP's fc layer and its GELU fused: h[N,OC] = inp[N,C] weight^T + bias (bias may be
 * NULL) and g[N,OC] = gelu(h), the bias and the activation in one pass over h after the
 * product. h and g are distinct. FLOPs as pl_matmul_forward plus pl_gelu_forward. */
void pl_matmul_gelu_forward(float *h, float *g, const float *inp, const float *weight,
                            const float *bias, int N, int C, int OC);
/* The backward of out[N,OC] = gelu(h)[N,C] weight^T + bias through both: dh[N,C] =
 * gelu'(h) * (dout weight), written (dh need not be zeroed; it is the gradient of h alone),
 * dweight += dout^T g and dbias += the column sums of dout (either may be NULL), with g the
 * saved gelu(h). FLOPs as pl_matmul_backward plus pl_gelu_backward. */
void pl_matmul_gelu_backward(float *dh, float *dweight, float *dbias, const float *dout,
                             const float *g, const float *h, const float *weight, int N, int C,
                             int OC);

/* General row-major product: C[M,N] = alpha * op(A) @ op(B) + beta * C, where op(X) is X
 * or X^T (trans_a/trans_b nonzero), op(A) is M x K, op(B) is K x N, and lda/ldb/ldc are
 * the row strides of A, B, C as stored. cblas_sgemm on the CPU, cublasSgemm on the GPU. */
void pl_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* The precision of the products: the linear layers' (pl_matmul_forward and _backward,
 * pl_matmul_gelu_forward and _backward, pl_sgemm) and the materialised attention's
 * (pl_attention_forward and _backward: Q K^T, P V and their gradients; the softmax stays
 * fp32, and so do flash attention's tiles). PL_MATMUL_FP32, the default, is fp32 products
 * and sums. PL_MATMUL_BF16 reads each input rounded to bf16 (pl_k_bf16: nearest, ties to
 * even) and sums in fp32, what a bf16 tensor core does and torch's
 * set_float32_matmul_precision("medium") asks for: on the GPU build cublasGemmEx with
 * CUBLAS_COMPUTE_32F_FAST_16BF on the fp32 arrays; on the CPU build the inputs rounded into
 * workspace and cblas_sgemm (the product of two bf16 values is exact in fp32, so this is
 * the bf16 product with fp32 sums, in OpenBLAS's fp32 speed). Outputs stay fp32. A setting
 * of the process, as cuBLAS's math mode is one of its handle: the model's bf16 mode
 * (model.h, cfg.precision) sets it around its passes and puts the old one back.
 * Returns the setting it replaced. */
enum pl_matmul_precision { PL_MATMUL_FP32 = 0, PL_MATMUL_BF16 = 1 };
enum pl_matmul_precision pl_set_matmul_precision(enum pl_matmul_precision p);
enum pl_matmul_precision pl_matmul_precision(void);

/* ---- causal multi-head self-attention ------------------------------------------------- */
/* qkv [B,T,3C] holds per token [q | k | v], each C wide; head h uses channels
 * [h*HS, (h+1)*HS) of each. out[B,T,C] (heads concatenated, before the output projection).
 * att [B,NH,T,T] receives the softmax probabilities softmax(q k^T / sqrt(HS)) with the
 * future masked (row t is zero beyond column t); the backward needs it.
 * C and NH are whatever the caller's qkv holds: any C that NH divides, each head HS = C/NH
 * channels, the heads independent of each other. */
void pl_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C,
                          int NH);
/* dqkv[B,T,3C] += the gradient, given dout[B,T,C] and qkv, att from the forward. */
void pl_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att,
                           int B, int T, int C, int NH);
/* The same with the score gradients in work, pl_attention_backward_work(T, NH) floats of op
 * memory the caller holds (a model's scratch arena), so the call allocates nothing; work
 * NULL allocates them for the call, as pl_attention_backward does. Every element of work
 * the backward reads it writes first, so work need not be zeroed. */
size_t pl_attention_backward_work(int T, int NH);
void pl_attention_backward_in(float *dqkv, const float *dout, const float *qkv,
                              const float *att, int B, int T, int C, int NH, float *work);

/* Flash attention: the same causal attention, computed in tiles of keys with an online
 * softmax (kernels.h), so no T x T matrix is written. The forward saves lse [B,NH,T], the
 * log-sum-exp of each row of scaled scores, instead of att; the backward recomputes the
 * probabilities tile by tile from qkv, the forward's out and lse. Same results as the
 * materialised ops up to fp32 rounding (the sums run in another order). Two passes in the
 * backward (queries, then keys and values), so each gradient row has one writer and no
 * atomics are needed. HS = C/NH is at most PL_FLASH_SMEM (4096). work: NULL, or
 * pl_attention_flash_backward_work(B, T, NH) floats of op memory (D_i = dO_i.O_i), need not
 * be zeroed. dqkv accumulates (+=) as in pl_attention_backward. */
void pl_attention_flash_forward(float *out, float *lse, const float *qkv, int B, int T, int C,
                                int NH);
size_t pl_attention_flash_backward_work(int B, int T, int NH);
void pl_attention_flash_backward(float *dqkv, const float *dout, const float *qkv,
                                 const float *out, const float *lse, int B, int T, int C,
                                 int NH, float *work);

/* ---- element-wise ----------------------------------------------------------------------- */
/* GELU, tanh approximation (nn.GELU(approximate="tanh")). out may equal inp. */
void pl_gelu_forward(float *out, const float *inp, size_t n);
/* dinp += gelu'(inp) * dout. */
void pl_gelu_backward(float *dinp, const float *dout, const float *inp, size_t n);

/* out = a + b (out may equal a or b). */
void pl_residual_forward(float *out, const float *a, const float *b, size_t n);
/* da += dout; db += dout (either may be NULL). */
void pl_residual_backward(float *da, float *db, const float *dout, size_t n);

/* ---- softmax and cross-entropy over the last dimension -------------------------------- */
/* probs[N,V] = softmax(logits[N,V]) per row, max-subtracted. probs may equal logits. */
void pl_softmax_forward(float *probs, const float *logits, int N, int V);
/* dlogits += probs * (dprobs - sum_j dprobs_j probs_j), per row. */
void pl_softmax_backward(float *dlogits, const float *dprobs, const float *probs, int N, int V);

/* losses[n] = -log softmax(logits[n,:])[targets[n]], targets in [0, V), computed from the
 * logits as PyTorch does: max + log(sum_j exp(logits[n,j] - max)) - logits[n, target].
 * Taking the log of the softmax probability instead would give inf once that probability
 * underflows fp32 (a logit gap above ~104), where the true loss is large but finite. */
void pl_crossentropy_forward(float *losses, const float *logits, const int *targets, int N,
                             int V);
/* The two above in one pass over each row: probs[N,V] = softmax(logits) and losses[N] =
 * the cross-entropy for targets, the same numbers as pl_softmax_forward followed by
 * pl_crossentropy_forward (FLOPs: both counts). probs may equal logits. */
void pl_softmax_crossentropy_forward(float *probs, float *losses, const float *logits,
                                     const int *targets, int N, int V);
/* The fused softmax + cross-entropy backward: dlogits[n,:] += dloss * (probs[n,:] -
 * onehot(targets[n])). For the mean loss over N positions pass dloss = 1/N. */
void pl_crossentropy_softmax_backward(float *dlogits, const float *probs, const int *targets,
                                      float dloss, int N, int V);

/* ---- dropout with a counter-based mask ---------------------------------------------------
 * Element with GLOBAL index i (its flat index in the full, unsharded tensor) is kept when
 * pl_rng_uniform(seed, stream, i) >= p, and kept elements are scaled by 1/(1-p). The mask
 * is recomputed in the backward, never stored, and a shard reproduces exactly the slice of
 * the full tensor's mask when it passes the global index of its first element (offset) or
 * its place in the full matrix (the _block forms). p in [0, 1); p == 0 copies. Use a
 * different stream (or seed) per dropout site and per step. out may equal inp. */
void pl_dropout_forward(float *out, const float *inp, size_t n, float p, uint64_t seed,
                        uint64_t stream, uint64_t offset);
/* dinp += mask * dout / (1-p), same mask as the forward with the same arguments. */
void pl_dropout_backward(float *dinp, const float *dout, size_t n, float p, uint64_t seed,
                         uint64_t stream, uint64_t offset);
/* A rows x cols block of a full matrix with full_cols columns, starting at (row0, col0):
 * block element (r, c) uses global index (row0 + r) * full_cols + col0 + c. Blocks are
 * stored densely (row stride cols). A block is one contiguous run of the full matrix's
 * rows; for a column shard of a [N, C] activation pass col0. */
void pl_dropout_forward_block(float *out, const float *inp, size_t rows, size_t cols,
                              size_t full_cols, size_t row0, size_t col0, float p,
                              uint64_t seed, uint64_t stream);
void pl_dropout_backward_block(float *dinp, const float *dout, size_t rows, size_t cols,
                               size_t full_cols, size_t row0, size_t col0, float p,
                               uint64_t seed, uint64_t stream);

/* ---- optimizer ---------------------------------------------------------------------------
 * AdamW (PyTorch's torch.optim.AdamW), on any slice of the parameters, so a ZeRO rank
 * updates only its shard. t is the step number, starting at 1. Per element:
 *     param -= lr * weight_decay * param
 *     m = beta1 m + (1-beta1) g;   v = beta2 v + (1-beta2) g^2
 *     param -= lr * (m / (1-beta1^t)) / (sqrt(v / (1-beta2^t)) + eps)
 * Pass weight_decay = 0 for parameters that are not decayed (biases, layernorm). */
void pl_adamw_step(float *param, const float *grad, float *m, float *v, size_t n, int t,
                   float lr, float beta1, float beta2, float eps, float weight_decay);
/* The same step over n elements made of runs: run r ends (exclusive) at element ends[r]
 * (increasing, the last equal to n) and is decayed when decay[r] is nonzero, weight_decay
 * then, else 0. The same element formula as pl_adamw_step on each run, bit for bit; on the
 * GPU one launch for up to PL_ADAMW_RUNS_PER_LAUNCH runs (the whole model's tensors in one,
 * pl_model_adamw_flat), instead of one per tensor. ends and decay are host arrays. */
#define PL_ADAMW_RUNS_PER_LAUNCH 448
void pl_adamw_step_runs(float *param, const float *grad, float *m, float *v, size_t n,
                        const size_t *ends, const unsigned char *decay, int nruns, int t,
                        float lr, float beta1, float beta2, float eps, float weight_decay);

/* Sum of squares of g[0..n), accumulated in double; returned on the host. The global norm
 * is sqrt of the sum of this over every parameter (and every rank holding a shard). */
double pl_grad_norm_sq(const float *g, size_t n);
/* The factor that clips a gradient of global squared norm norm_sq to max_norm:
 * min(1, max_norm / (sqrt(norm_sq) + 1e-6)), as torch.nn.utils.clip_grad_norm_.
 * max_norm <= 0 means no clipping (1). Apply it with pl_scale. Pure arithmetic. */
float pl_clip_scale(double norm_sq, float max_norm);

/* ---- messages ------------------------------------------------------------------------------ */
/* The divisors of n as "1,2,4,8" into buf (cut short when buf is full); returns buf. For
 * messages that say which sizes would work: "choose n_heads in {1,2,4,8}". */
const char *pl_divisors(int n, char *buf, size_t len);

/* ---- small helpers on op memory (device memory on the GPU build) ---------------------- */
void pl_zero(float *x, size_t n);                           /* x = 0 */
void pl_scale(float *x, size_t n, float s);                 /* x *= s */
void pl_accumulate(float *dst, const float *src, size_t n); /* dst += src */
void pl_copy(float *dst, const float *src, size_t n);       /* dst = src, no overlap */
double pl_sum(const float *x, size_t n);                    /* sum in double, on the host */
/* bf16 storage (kernels.h's pl_k_bf16), 2 bytes an element, in op memory: the model's
 * bf16 working copy of its parameters and its bf16 gradients. Conversions and the zero
 * count no FLOPs (copies); the accumulation counts PL_FLOPS_SCALE per element. */
typedef uint16_t pl_bf16;
void pl_bf16_from_float(pl_bf16 *out, const float *in, size_t n); /* out = bf16(in) */
void pl_bf16_to_float(float *out, const pl_bf16 *in, size_t n);   /* out = in, exact */
void pl_bf16_accumulate(pl_bf16 *acc, const float *add, size_t n); /* acc = bf16(acc + add) */
void pl_bf16_zero(pl_bf16 *x, size_t n);                           /* x = +0 */
/* Returns once every op called so far has run. The CPU build runs each op as it is called,
 * so it returns at once; the GPU build queues ops on the compute stream, and the host waits
 * for an event recorded at its end (no device-wide synchronisation): what a time taken
 * around compute alone needs. */
void pl_ops_wait(void);

/* Between host memory and op memory (plain memcpy on the CPU build). */
void pl_to_device(void *dst_dev, const void *src_host, size_t bytes);
void pl_to_host(void *dst_host, const void *src_dev, size_t bytes);

/* ---- row gather / scatter, for routing tokens to experts ---------------------------------
 * out[i,:] = inp[rows[i],:] for i < n (rows index inp, which has C columns). */
void pl_gather_rows(float *out, const float *inp, const int *rows, int n, int C);
/* out[rows[i],:] += scale[i] * inp[i,:] (scale NULL means 1). Rows may repeat. This is the
 * backward of pl_gather_rows and the weighted combine of expert outputs. */
void pl_scatter_add_rows(float *out, const float *inp, const int *rows, const float *scale,
                         int n, int C);
/* dot[i] += a[rows[i],:] . b[i,:]: the gradient of the scale of pl_scatter_add_rows
 * (a = dout of the combined rows, b = the expert outputs). */
void pl_row_dot(float *dot, const float *a, const int *rows, const float *b, int n, int C);

#ifdef __cplusplus
}
#endif

#endif
