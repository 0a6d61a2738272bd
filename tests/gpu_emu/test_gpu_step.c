/* test_gpu_step: whole training steps of the GPU build on the CUDA/NCCL stand-in, with the
 * kit's kernels and cuBLAS calls run as host code, counted by the emulator: the
 * single-device reference step (pl_model_step), Lab 2's overlapped DDP step (the
 * reference solution's all-reduces started from the backward hook, waited on in
 * ddp_finish_gradients, then pl_model_update) and Lab 3's ZeRO-3 step with prefetch (the
 * reference solution's zero_step: units gathered ahead, gradients reduce-scattered, the
 * shard updated). Once the caching allocator is warm, none may synchronise the whole device
 * or call cudaMalloc: a step that did could not overlap communication with compute on a
 * GPU. The replicas' gradients must agree after the all-reduce and the losses stay finite;
 * the grader checks the numbers themselves. Also the reference step with flash attention
 * (cfg.attention) under the same two rules, AdamW over the whole model in one kernel
 * launch, and the launches of the fused ops. */
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ddp.h"
#include "emu_testing.h"
#include "zero.h"
#include "mem.h"
#include "ops.h"

#define STEPS 3
#define BATCH 2

/* The DDP and ZeRO solutions are linked as the code under test; they reach no stub. */
void lab_todo(const char *what, const char *section)
{
    pl_fatal("a lab solution reached the stub '%s' (%s)", what, section);
}

/* A batch of this rank's tokens in op memory: tokens and next-token targets. */
static int *batch(const struct pl_model_config *cfg, int step, int targets)
{
    size_t n = (size_t)BATCH * cfg->seq_len;
    int *h = malloc(n * sizeof *h);
    if (!h) pl_fatal("out of memory");
    for (size_t i = 0; i < n; i++)
        h[i] = (int)((i * 7 + (size_t)step * 13 + (size_t)pl_rank() * 29 + (size_t)targets) %
                     (size_t)cfg->vocab);
    int *d = pl_mem_alloc(n * sizeof *d, PL_MEM_ACTIV, PL_DEVICE, "tokens");
    pl_to_device(d, h, n * sizeof *h);
    free(h);
    return d;
}

/* The reference step's losses, rank 0's: on one rank ZeRO-3's must follow them. */
static double reference_loss[STEPS];

/* STEPS reference steps with attention at, each without a device-wide synchronisation: the
 * materialised path's losses are kept, flash attention's must equal them up to fp32
 * rounding. After the materialised steps, AdamW over the whole model is one launch. */
static void steps(const struct pl_model_config *cfg, enum pl_attention at)
{
    const int flash = at == PL_ATTENTION_FLASH;
    const char *what = flash ? "flash attention" : "reference";
    struct pl_model_config c = *cfg;
    c.attention = at;
    struct pl_model *m = pl_model_new(&c, PL_MODEL_ALL);
    struct pl_adamw_config opt = pl_adamw_config_default();
    for (int s = 0; s < STEPS; s++) {
        int *tok = batch(cfg, s, 0), *tgt = batch(cfg, s, 1);
        struct pl_emu_counts a, b;
        pl_emu_counts(&a);
        double loss = pl_model_step(m, tok, tgt, BATCH, &opt, NULL);
        pl_emu_counts(&b);
        expect_no_device_sync(what, s, &a, &b);
        if (flash)
            CHECK(fabs(loss - reference_loss[s]) <= 1e-5 * fabs(reference_loss[s]),
                  "flash attention step %d: loss %.9g, the reference's %.9g", s, loss,
                  reference_loss[s]);
        else {
            CHECK(isfinite(loss), "reference step %d: loss %g", s, loss);
            reference_loss[s] = loss;
        }
        pl_mem_free(tok);
        pl_mem_free(tgt);
    }
    if (!flash) { /* AdamW over the whole model: one launch (pl_adamw_step_runs) */
        struct pl_emu_counts a, b;
        pl_emu_counts(&a);
        pl_model_adamw_flat(&m->layout, 0, m->layout.numel, m->params, m->grads, m->adam_m,
                            m->adam_v, m->adam_t + 1, &opt);
        pl_emu_counts(&b);
        CHECK(b.kernels - a.kernels == 1, "AdamW over the model's %d tensors: %ld kernel "
              "launches, want 1", m->layout.n_tensors, b.kernels - a.kernels);
    }
    pl_model_free(m);
}

/* Kernel launches of the fused ops (cuBLAS calls are not kernels of the kit's): the fc
 * layer's bias and GELU after its product, one; flash attention's forward one and its
 * backward two (queries, then keys and values). */
static void fused_launches(void)
{
    const int N = 24, C = 8, OC = 12, B = 2, T = 12, NH = 2;
    float *buf = pl_mem_alloc((size_t)16 * N * OC * sizeof(float), PL_MEM_WORK, PL_DEVICE,
                              "fused ops' operands");
    float *h = buf, *g = h + N * OC, *x = g + N * OC, *w = x + N * C, *b = w + OC * C;
    float *qkv = b + OC, *out = qkv + 3 * B * T * C, *lse = out + B * T * C;
    float *dqkv = lse + B * NH * T, *dout = dqkv + 3 * B * T * C;
    struct pl_emu_counts a, z;
    long launches[3];
    pl_emu_counts(&a);
    pl_matmul_gelu_forward(h, g, x, w, b, N, C, OC);
    pl_emu_counts(&z);
    launches[0] = z.kernels - a.kernels;
    pl_attention_flash_forward(out, lse, qkv, B, T, C, NH);
    pl_emu_counts(&a);
    launches[1] = a.kernels - z.kernels;
    pl_attention_flash_backward(dqkv, dout, qkv, out, lse, B, T, C, NH, NULL);
    pl_emu_counts(&z);
    launches[2] = z.kernels - a.kernels;
    CHECK(launches[0] == 1 && launches[1] == 1 && launches[2] == 2, "kernel launches: fc with "
          "bias and GELU %ld (want 1), flash forward %ld (want 1), flash backward %ld (want 2)",
          launches[0], launches[1], launches[2]);
    pl_ops_wait();
    pl_mem_free(buf);
}

/* docs/gpu.md's figure: a dense model's tensors make 8L + 3 runs of one decay flag, so AdamW
 * over up to 55 blocks is one launch of PL_ADAMW_RUNS_PER_LAUNCH runs, over 56 two. */
static void adamw_launch_limit(void)
{
    for (int L = 55; L <= 56; L++) {
        struct pl_model_config c = pl_model_config_default();
        c.vocab = 8, c.d_model = 4, c.n_heads = 1, c.d_ff = 4, c.seq_len = 2, c.n_layers = L;
        struct pl_model_layout lay;
        pl_model_layout_init(&lay, &c);
        float *buf = pl_mem_alloc(4 * lay.numel * sizeof(float), PL_MEM_WORK, PL_DEVICE,
                                  "adamw state");
        struct pl_adamw_config opt = pl_adamw_config_default();
        struct pl_emu_counts a, b;
        pl_emu_counts(&a);
        pl_model_adamw_flat(&lay, 0, lay.numel, buf, buf + lay.numel, buf + 2 * lay.numel,
                            buf + 3 * lay.numel, 1, &opt);
        pl_emu_counts(&b);
        long want = (8 * L + 3 + PL_ADAMW_RUNS_PER_LAUNCH - 1) / PL_ADAMW_RUNS_PER_LAUNCH;
        CHECK(b.kernels - a.kernels == want && want == (L <= 55 ? 1 : 2),
              "AdamW over %d dense blocks: %ld launches, want %ld", L, b.kernels - a.kernels,
              want);
        pl_ops_wait();
        pl_mem_free(buf);
        pl_model_layout_free(&lay);
    }
}

/* Sum and sum of squares of a device buffer, for comparing replicas. */
static void checksum(const float *dev, size_t n, double out[2])
{
    float *h = malloc(n * sizeof *h);
    if (!h) pl_fatal("out of memory");
    pl_to_host(h, dev, n * sizeof *h);
    out[0] = out[1] = 0;
    for (size_t i = 0; i < n; i++) out[0] += h[i], out[1] += (double)h[i] * h[i];
    free(h);
}

static void ddp_steps(const struct pl_model_config *cfg)
{
    struct pl_model *m = pl_model_new(cfg, PL_MODEL_ALL);
    struct ddp_options o = {.variant = DDP_OVERLAPPED, .bucket_bytes = 64 * 1024};
    struct ddp *d = ddp_new(pl_comm_world(), m, &o);
    struct pl_adamw_config opt = pl_adamw_config_default();
    for (int s = 0; s < STEPS; s++) {
        int *tok = batch(cfg, s, 0), *tgt = batch(cfg, s, 1);
        struct pl_emu_counts a, b;
        pl_emu_counts(&a);
        double loss = ddp_forward_backward(d, tok, tgt, BATCH, 0, 1);
        ddp_finish_gradients(d);
        double grads[2], lo[2], hi[2];
        pl_emu_counts(&b);
        expect_no_device_sync("overlapped DDP", s, &a, &b);
        CHECK(isfinite(loss), "overlapped DDP step %d: loss %g", s, loss);
        checksum(m->grads, m->layout.numel, grads);
        MPI_Allreduce(grads, lo, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(grads, hi, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        CHECK(lo[0] == hi[0] && lo[1] == hi[1], "overlapped DDP step %d: the replicas' "
              "gradients differ after ddp_finish_gradients (sum %g..%g)", s, lo[0], hi[0]);
        pl_emu_counts(&a);
        pl_model_update(m, &opt);
        pl_emu_counts(&b);
        expect_no_device_sync("optimizer", s, &a, &b);
        pl_mem_free(tok);
        pl_mem_free(tgt);
    }
    ddp_free(d);
    pl_model_free(m);
}

/* ZeRO-3 with prefetch, the Lab 3 solution's zero_step: no step may synchronise the device,
 * and from the second on none may call cudaMalloc (the first warms the caching allocator
 * with the gathered units and the pass's scratch). On one rank it is the reference step on
 * the same batches, so its losses must be the reference's (fp32 sums in another order). */
static void zero3_steps(const struct pl_model_config *cfg)
{
    struct pl_adamw_config opt = pl_adamw_config_default();
    struct zero *z = zero_new(cfg, &opt, 3, 1, pl_comm_world());
    for (int s = 0; s < STEPS; s++) {
        int *tok = batch(cfg, s, 0), *tgt = batch(cfg, s, 1);
        struct pl_emu_counts a, b;
        pl_emu_counts(&a);
        double loss = zero_step(z, tok, tgt, BATCH);
        pl_emu_counts(&b);
        expect_no_device_sync("ZeRO-3 with prefetch", s, &a, &b);
        CHECK(isfinite(loss), "ZeRO-3 step %d: loss %g", s, loss);
        if (pl_size() == 1)
            CHECK(fabs(loss - reference_loss[s]) <= 1e-5 * fabs(reference_loss[s]),
                  "ZeRO-3 step %d on one rank: loss %.7f, the reference step's %.7f", s, loss,
                  reference_loss[s]);
        pl_mem_free(tok);
        pl_mem_free(tgt);
    }
    zero_free(z);
}

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    struct pl_model_config cfg = pl_model_config_default();
    cfg.d_model = 32;
    cfg.d_ff = 64;
    cfg.seq_len = 16;
    cfg.vocab = 64;
    if (pl_rank() == 0) steps(&cfg, PL_ATTENTION_MATERIALISED);
    if (pl_rank() == 0) steps(&cfg, PL_ATTENTION_FLASH);
    if (pl_rank() == 0) fused_launches();
    if (pl_rank() == 0) adamw_launch_limit();
    ddp_steps(&cfg);
    zero3_steps(&cfg);
    int fails = (int)world_sum(failures), all = (int)world_sum(checks);
    if (pl_rank() == 0)
        printf("test_gpu_step: %d ranks, backend %s: %d checks, %d failed\n", pl_size(),
               pl_comm_backend(), all, fails);
    pl_finalize();
    return fails ? 1 : 0;
}
