/* bench_train: training-step throughput of the reference model on one device, beside the two
 * baselines measured in the same run: the sgemm rate of the backend the step runs on
 * (OpenBLAS on the CPU build, cuBLAS on the GPU build: the step's fraction of matmul peak)
 * and, where python3 (on PATH, else /usr/bin/python3) can import torch, the same model
 * stepped by PyTorch (tests/bench_train.py): on the CPU with the same thread count on the
 * CPU build; on the same GPU on the GPU build, in fp32 with TF32 off (the kit's math) and,
 * for reference, in bf16 autocast with PyTorch's fused attention.
 *
 *     bench_train [--seconds S] [--threads N]   (default: 2 s per measurement; 1 thread and
 *                                                 the machine's core count)
 *     bench_train --model [--rounds R] [--seconds S]
 *         (`make bench-model`) the three model sizes of the step-speed target at one thread,
 *         kit and PyTorch interleaved round by round, median of R rounds (default 5), and
 *         the share of the square-sgemm rate the step reaches, beside the rate of the step's
 *         own linear-layer sgemm shapes run alone. On the GPU build (`make bench-model
 *         GPU=1`) three sizes up to GPT-2 small (d 768, 12 layers, 12 heads, T 1024, B 8;
 *         vocab 256) on the GPU, against PyTorch fp32 and bf16 on the same GPU.
 *         The GPU table steps the kit in fp32 and in its bf16 mode (cfg.precision), beside
 *         PyTorch fp32 and bf16 autocast, with each precision's share of cuBLAS's peak.
 *     --attention materialised|flash   how the kit's model computes attention (cfg.attention;
 *         default materialised); PyTorch's side is unchanged.
 *     --precision fp32|bf16   the kit's precision where one is stepped (cfg.precision; default
 *         fp32); the GPU --model table steps both. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "data.h"
#include "model.h"
#include "ops.h"
#include "paralab.h"

struct bench_config {
    const char *name;
    int d_model, layers, heads, d_ff, seq_len, batch, experts, top_k;
};

static const struct bench_config CONFIGS[] = {
    {"small", 64, 2, 4, 256, 64, 8, 0, 2},
    {"medium", 128, 4, 4, 512, 128, 8, 0, 2},
    {"moe-small", 64, 2, 4, 256, 64, 8, 4, 2},
};
#define NCONFIGS ((int)(sizeof CONFIGS / sizeof CONFIGS[0]))

#ifdef PL_GPU
/* The GPU build's sizes (`--model`): up to GPT-2 small's shape, with the kit's vocabulary. */
static const struct bench_config GPU_MODEL_CONFIGS[] = {
    {"gpt2-tiny", 384, 6, 6, 1536, 512, 8, 0, 2},
    {"gpt2-mini", 512, 8, 8, 2048, 1024, 8, 0, 2},
    {"gpt2-small", 768, 12, 12, 3072, 1024, 8, 0, 2},
};
#define NGPU_MODEL_CONFIGS ((int)(sizeof GPU_MODEL_CONFIGS / sizeof GPU_MODEL_CONFIGS[0]))
#else
/* The step-speed target's sizes (`--model`): every config at one thread. */
static const struct bench_config MODEL_CONFIGS[] = {
    {"tiny", 64, 2, 4, 256, 64, 8, 0, 2},
    {"medium", 128, 4, 4, 512, 128, 8, 0, 2},
    {"large", 256, 4, 8, 1024, 256, 8, 0, 2},
};
#define NMODEL_CONFIGS ((int)(sizeof MODEL_CONFIGS / sizeof MODEL_CONFIGS[0]))
#endif

static double seconds_per_measure = 2.0;

/* The peak is measured with pl_sgemm on op memory, so it is the library the model's own
 * matmuls run on: OpenBLAS on the CPU build, cuBLAS on the GPU build. */
#ifdef PL_GPU
#define SGEMM_NAME "cuBLAS"
#else
#define SGEMM_NAME "OpenBLAS"
#endif

/* Best sgemm rate over repeated C[n,n] = A[n,n] B[n,n] for a fixed time. The GPU build only
 * queues the product on the compute stream, so each timing waits for it (pl_ops_wait)
 * before reading the clock; the CPU build's pl_sgemm has finished when it returns. */
static double sgemm_gflops(int n)
{
    size_t count = (size_t)n * n, bytes = count * sizeof(float);
    float *h = pl_mem_alloc(bytes, PL_MEM_WORK, PL_HOST, "bench host");
    float *a = pl_mem_alloc(bytes, PL_MEM_WORK, PL_DEVICE, "bench A");
    float *b = pl_mem_alloc(bytes, PL_MEM_WORK, PL_DEVICE, "bench B");
    float *c = pl_mem_alloc(bytes, PL_MEM_WORK, PL_DEVICE, "bench C");
    pl_rng_fill_uniform(h, count, 1, 1, 0, -1, 1);
    pl_to_device(a, h, bytes);
    pl_rng_fill_uniform(h, count, 1, 2, 0, -1, 1);
    pl_to_device(b, h, bytes);
    double best = 0, t_end = pl_now() + seconds_per_measure / 4;
    for (int rep = 0; rep < 3 || pl_now() < t_end; rep++) {
        pl_ops_wait();
        double t0 = pl_now();
        pl_sgemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        pl_ops_wait();
        double rate = 2.0 * n * n * n / (pl_now() - t0) / 1e9;
        if (rate > best) best = rate;
    }
    pl_mem_free(h);
    pl_mem_free(a);
    pl_mem_free(b);
    pl_mem_free(c);
    return best;
}

static enum pl_attention bench_attention = PL_ATTENTION_MATERIALISED;
static enum pl_precision bench_precision = PL_PRECISION_FP32;

static struct pl_model_config model_config(const struct bench_config *bc)
{
    struct pl_model_config c = pl_model_config_default();
    c.attention = bench_attention;
    c.precision = bench_precision;
    c.d_model = bc->d_model;
    c.n_layers = bc->layers;
    c.n_heads = bc->heads;
    c.d_ff = bc->d_ff;
    c.seq_len = bc->seq_len;
    c.n_experts = bc->experts;
    c.top_k = bc->top_k;
    return c;
}

struct result {
    double ms, tok_s, gflops;
    size_t params;
    double cpu_ms; /* the calling thread's CPU time per step */
};

/* CPU seconds of the calling thread: at one thread the whole step runs on it, and unlike
 * wall-clock time it leaves out the time other programs held the core. */
static double thread_cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Steps the reference model (pl_model_step) for the measuring time after a short warm-up. */
static struct result bench_c(const struct bench_config *bc, const struct pl_tokens *data)
{
    struct pl_model_config cfg = model_config(bc);
    struct pl_model *m = pl_model_new(&cfg, PL_MODEL_ALL);
    struct pl_adamw_config opt = pl_adamw_config_default();
    const int B = bc->batch, T = bc->seq_len;
    struct pl_loader l;
    pl_loader_init(&l, data, B, T, 0, 1, 1);
    size_t bytes = (size_t)B * T * sizeof(int);
    int *in = pl_mem_alloc(bytes, PL_MEM_WORK, PL_HOST, "bench inputs");
    int *tg = pl_mem_alloc(bytes, PL_MEM_WORK, PL_HOST, "bench targets");
    int *in_d = pl_mem_alloc(bytes, PL_MEM_ACTIV, PL_DEVICE, "bench inputs (op memory)");
    int *tg_d = pl_mem_alloc(bytes, PL_MEM_ACTIV, PL_DEVICE, "bench targets (op memory)");

    int64_t step = 0;
    double flops = 0, t0 = 0, c0 = 0;
    int n = 0;
    for (int warm = 3;; step++) {
        if (warm == 0 && n == 0) {
            pl_ops_wait(); /* the warm-up steps' device work is not timed */
            t0 = pl_now();
            c0 = thread_cpu_seconds();
            flops = pl_ledger()->flops;
        }
        pl_loader_batch(&l, step, in, tg);
        pl_to_device(in_d, in, bytes);
        pl_to_device(tg_d, tg, bytes);
        pl_model_step(m, in_d, tg_d, B, &opt, NULL);
        if (warm > 0) {
            warm--;
            continue;
        }
        n++;
        pl_ops_wait(); /* a step is done when the device is (the GPU build queues ops) */
        if (n >= 5 && pl_now() - t0 >= seconds_per_measure) break;
    }
    double dt = (pl_now() - t0) / n, cpu = (thread_cpu_seconds() - c0) / n;
    struct result r = {dt * 1e3, B * T / dt, (pl_ledger()->flops - flops) / n / dt / 1e9,
                       m->layout.numel, cpu * 1e3};
    pl_mem_free(in);
    pl_mem_free(tg);
    pl_mem_free(in_d);
    pl_mem_free(tg_d);
    pl_loader_free(&l);
    pl_model_free(m);
    return r;
}

#ifdef PL_GPU
#define TORCH_DEVICE "cuda"
#define TORCH_CHECK "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
#else
#define TORCH_DEVICE "cpu"
#define TORCH_CHECK "import torch"
#endif

/* The python that runs tests/bench_train.py: python3 on PATH (GPU nodes keep torch in a
 * virtual environment or a pip install), else /usr/bin/python3 (Debian's python3-torch). */
static const char *torch_python = "/usr/bin/python3";

/* 1 when one of those pythons imports torch (and, on the GPU build, sees a GPU). */
static int torch_available(void)
{
    static const char *const candidates[] = {"python3", "/usr/bin/python3"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "%s -c '" TORCH_CHECK "' >/dev/null 2>&1", candidates[i]);
        if (system(cmd) == 0) {
            torch_python = candidates[i];
            return 1;
        }
    }
    return 0;
}

/* Runs tests/bench_train.py with the same config and threads; 0 tok/s when it fails. On the
 * GPU build it runs on the GPU and *bf16 (when not NULL) gets its bf16 autocast run.
 * wait_policy is OpenMP's: PyTorch's threads spin by default, which collapses its speed when
 * another process shares a core, so with several threads both policies are tried and the
 * baseline gets the better one. */
static struct result bench_torch_policy(const struct bench_config *bc, const char *data_path,
                                        int threads, const char *wait_policy,
                                        struct result *bf16)
{
    struct result r = {0, 0, 0, 0, 0};
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "OMP_WAIT_POLICY=%s OMP_NUM_THREADS=%d %s tests/bench_train.py "
             "--data %s --threads %d "
             "--d-model %d --layers %d --heads %d --d-ff %d --seq-len %d --batch %d "
             "--experts %d --top-k %d --seconds %g --device " TORCH_DEVICE " 2>&1",
             wait_policy, threads, torch_python, data_path, threads, bc->d_model, bc->layers,
             bc->heads, bc->d_ff, bc->seq_len, bc->batch, bc->experts, bc->top_k,
             seconds_per_measure);
    if (bf16) *bf16 = r;
    FILE *p = popen(cmd, "r");
    if (!p) return r;
    char line[512];
    while (fgets(line, sizeof line, p)) {
        double tok, ms, cpu_ms = 0;
        unsigned long params;
        int threads_seen;
        if (sscanf(line, "torch-bf16 tok/s %lf ms/step %lf params %lu", &tok, &ms, &params) == 3) {
            if (bf16) *bf16 = (struct result){ms, tok, 0, params, 0};
        } else if (sscanf(line, "torch tok/s %lf ms/step %lf params %lu threads %d "
                                "cpu_ms/step %lf", &tok, &ms, &params, &threads_seen,
                          &cpu_ms) >= 3) {
            r.tok_s = tok;
            r.ms = ms;
            r.params = params;
            r.cpu_ms = cpu_ms;
        } else {
            printf("#   torch: %s", line);
        }
    }
    pclose(p);
    return r;
}

static struct result bench_torch(const struct bench_config *bc, const char *data_path,
                                 int threads)
{
    struct result r = bench_torch_policy(bc, data_path, threads, "ACTIVE", NULL);
    if (threads > 1) {
        struct result q = bench_torch_policy(bc, data_path, threads, "PASSIVE", NULL);
        if (q.tok_s > r.tok_s) r = q;
    }
    return r;
}

static void run_at(int threads, const struct pl_tokens *data, const char *data_path, int torch)
{
    openblas_set_num_threads(threads);
    /* The matmul peak is the best rate over square sizes around the model's matrices. */
    const int sizes[] = {256, 512, 1024};
    double rate[3], peak = 0;
    for (int i = 0; i < 3; i++) {
        rate[i] = sgemm_gflops(sizes[i]);
        if (rate[i] > peak) peak = rate[i];
    }
    printf("\n# threads %d: " SGEMM_NAME " sgemm GFLOP/s %.1f at 256^3, %.1f at 512^3, %.1f at "
           "1024^3; peak %.1f\n",
           threads, rate[0], rate[1], rate[2], peak);
    printf("# %-10s %8s %9s %9s %10s %9s %7s | %13s %11s %6s\n", "config", "params", "B x T",
           "ms/step", "tok/s", "GFLOP/s", "%peak", "torch ms/step", "torch tok/s", "ratio");
    for (int i = 0; i < NCONFIGS; i++) {
        const struct bench_config *bc = &CONFIGS[i];
        struct result c = bench_c(bc, data);
        char bt[32];
        snprintf(bt, sizeof bt, "%d x %d", bc->batch, bc->seq_len);
        printf("  %-10s %8zu %9s %9.2f %10.0f %9.2f %6.1f%%", bc->name, c.params, bt, c.ms,
               c.tok_s, c.gflops, 100.0 * c.gflops / peak);
        fflush(stdout);
        if (torch) {
            struct result t = bench_torch(bc, data_path, threads);
            if (t.tok_s > 0) {
                if (t.params != c.params)
                    printf("\n#   warning: the torch model has %zu parameters, the C model %zu\n",
                           t.params, c.params);
                printf(" | %13.2f %11.0f %5.2fx\n", t.ms, t.tok_s, c.tok_s / t.tok_s);
            } else {
                printf(" | %13s %11s %6s\n", "failed", "-", "-");
            }
        } else {
            printf(" | %13s %11s %6s\n", "-", "-", "-");
        }
        fflush(stdout);
    }
}

/* ---- `--model`: the step-speed table ------------------------------------------------------ */

#ifndef PL_GPU
/* Seconds for one pl_sgemm of these shapes and flags, best of a few (op memory, zeroed). */
static double sgemm_seconds(int ta, int tb, int M, int N, int K)
{
    size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    float *a = pl_mem_alloc(na * sizeof(float), PL_MEM_WORK, PL_DEVICE, "bench A");
    float *b = pl_mem_alloc(nb * sizeof(float), PL_MEM_WORK, PL_DEVICE, "bench B");
    float *c = pl_mem_alloc(nc * sizeof(float), PL_MEM_WORK, PL_DEVICE, "bench C");
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = pl_now();
        pl_sgemm(ta, tb, M, N, K, 1.0f, a, ta ? M : K, b, tb ? K : N, 1.0f, c, N);
        double dt = pl_now() - t0;
        if (dt < best) best = dt;
    }
    pl_mem_free(a);
    pl_mem_free(b);
    pl_mem_free(c);
    return best;
}

/* The rate of the step's own linear layers run alone: every (N, C -> OC) product of one
 * step, forward (out = inp W^T) and both backward products (dinp = dout W, dW = dout^T
 * inp), timed one by one with the flags pl_matmul_* use; total FLOPs over total time. */
static double linear_shapes_gflops(const struct bench_config *bc)
{
    const int N = bc->batch * bc->seq_len, C = bc->d_model, F = bc->d_ff, V = 256;
    const int in[] = {C, C, C, F, C}, out[] = {3 * C, C, F, C, V};
    double flops = 0, secs = 0;
    for (int i = 0; i < 5; i++) {
        int times = i < 4 ? bc->layers : 1, K = in[i], OC = out[i];
        double t = sgemm_seconds(0, 1, N, OC, K) + sgemm_seconds(0, 0, N, K, OC) +
                   sgemm_seconds(1, 0, OC, K, N);
        secs += times * t;
        flops += times * 6.0 * N * K * OC;
    }
    return flops / secs / 1e9;
}

#endif

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#define MAX_ROUNDS 99

#ifndef PL_GPU
/* One thread; each round steps every config with the kit, then with PyTorch, so a slow
 * spell of a shared machine lands on both; the medians over the rounds are reported. */
static void model_table(int rounds, const struct pl_tokens *data, const char *data_path,
                        int torch)
{
    openblas_set_num_threads(1);
    const int sizes[] = {256, 512, 1024};
    double peak = 0;
    for (int i = 0; i < 3; i++) {
        double r = sgemm_gflops(sizes[i]);
        if (r > peak) peak = r;
    }
    double kit[NMODEL_CONFIGS][MAX_ROUNDS], pt[NMODEL_CONFIGS][MAX_ROUNDS],
        gf[NMODEL_CONFIGS][MAX_ROUNDS], kit_cpu[NMODEL_CONFIGS][MAX_ROUNDS],
        pt_cpu[NMODEL_CONFIGS][MAX_ROUNDS], gf_cpu[NMODEL_CONFIGS][MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        printf("# round %d of %d:", r + 1, rounds);
        for (int i = 0; i < NMODEL_CONFIGS; i++) {
            const struct bench_config *bc = &MODEL_CONFIGS[i];
            struct result c = bench_c(bc, data);
            struct result t = {0, 0, 0, 0, 0};
            if (torch) t = bench_torch(bc, data_path, 1);
            double tokens = (double)bc->batch * bc->seq_len;
            kit[i][r] = c.tok_s;
            gf[i][r] = c.gflops;
            kit_cpu[i][r] = tokens / (c.cpu_ms / 1e3);
            gf_cpu[i][r] = c.gflops * c.ms / c.cpu_ms;
            pt[i][r] = t.tok_s;
            pt_cpu[i][r] = t.cpu_ms > 0 ? tokens / (t.cpu_ms / 1e3) : 0;
            printf(" %s %.0f/%.0f", MODEL_CONFIGS[i].name, kit[i][r], pt[i][r]);
            fflush(stdout);
        }
        printf(" tok/s (kit/torch)\n");
    }
    printf("\n# step speed at 1 thread, median of %d interleaved rounds; " SGEMM_NAME
           " square-sgemm peak %.1f GFLOP/s\n"
           "# %%peak = the step's GFLOP/s (ledger FLOPs) over that peak; lin-shapes = the\n"
           "# step's own linear-layer sgemm shapes run alone, over the same peak; the cpu\n"
           "# columns count the step's thread CPU time instead of wall-clock time (on a\n"
           "# shared machine they leave out the time other programs held the core)\n",
           rounds, peak);
    printf("# %-8s %-19s %9s %11s %6s %9s %6s %10s | %9s %9s\n", "config", "C/L/H/F/T/B",
           "kit tok/s", "torch tok/s", "ratio", "GFLOP/s", "%peak", "lin-shapes", "cpu ratio",
           "cpu %peak");
    for (int i = 0; i < NMODEL_CONFIGS; i++) {
        const struct bench_config *bc = &MODEL_CONFIGS[i];
        char shape[64];
        snprintf(shape, sizeof shape, "%d/%d/%d/%d/%d/%d", bc->d_model, bc->layers, bc->heads,
                 bc->d_ff, bc->seq_len, bc->batch);
        double k = median(kit[i], rounds), t = median(pt[i], rounds), g = median(gf[i], rounds);
        double kc = median(kit_cpu[i], rounds), tc = median(pt_cpu[i], rounds),
               gc = median(gf_cpu[i], rounds);
        double lin = linear_shapes_gflops(bc);
        char ratio[16] = "-", torch_tok[16] = "-", cpu_ratio[16] = "-";
        if (t > 0) {
            snprintf(ratio, sizeof ratio, "%.2fx", k / t);
            snprintf(torch_tok, sizeof torch_tok, "%.0f", t);
        }
        if (tc > 0) snprintf(cpu_ratio, sizeof cpu_ratio, "%.2fx", kc / tc);
        printf("  %-8s %-19s %9.0f %11s %6s %9.2f %5.1f%% %9.1f%% | %9s %8.1f%%\n", bc->name,
               shape, k, torch_tok, ratio, g, 100.0 * g / peak, 100.0 * lin / peak, cpu_ratio,
               100.0 * gc / peak);
    }
}

#endif

#ifdef PL_GPU
/* The best rate of square products over sizes where a GPU reaches its peak, in the
 * precision given (PL_MATMUL_BF16: the bf16 tensor-core rate the bf16 mode's products get). */
static double gemm_peak(enum pl_matmul_precision p)
{
    const int sizes[] = {1024, 2048, 4096};
    enum pl_matmul_precision old = pl_set_matmul_precision(p);
    double peak = 0;
    for (int i = 0; i < 3; i++) {
        double r = sgemm_gflops(sizes[i]);
        if (r > peak) peak = r;
    }
    pl_set_matmul_precision(old);
    return peak;
}

/* "-" or the number, and "-" or the ratio a / b. */
static void cell(char *num, char *ratio, size_t len, double a, double b)
{
    snprintf(num, len, "-");
    snprintf(ratio, len, "-");
    if (b > 0) {
        snprintf(num, len, "%.0f", b);
        snprintf(ratio, len, "%.2fx", a / b);
    }
}

/* The GPU build's table: each round steps every size with the kit in fp32 and in bf16
 * (cfg.precision), then with PyTorch on the same GPU (fp32 without TF32, then bf16 autocast
 * with fused attention); medians over the rounds. The peaks are cuBLAS's square products,
 * fp32 (sgemm) and bf16 (the bf16 mode's GEMMs), at sizes where a GPU reaches them. */
static void gpu_model_table(int rounds, const struct pl_tokens *data, const char *data_path,
                            int torch)
{
    double peak = gemm_peak(PL_MATMUL_FP32), peak16 = gemm_peak(PL_MATMUL_BF16);
    double kit[NGPU_MODEL_CONFIGS][MAX_ROUNDS], pt[NGPU_MODEL_CONFIGS][MAX_ROUNDS],
        bf[NGPU_MODEL_CONFIGS][MAX_ROUNDS], gf[NGPU_MODEL_CONFIGS][MAX_ROUNDS],
        kit16[NGPU_MODEL_CONFIGS][MAX_ROUNDS], gf16[NGPU_MODEL_CONFIGS][MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        printf("# round %d of %d:", r + 1, rounds);
        for (int i = 0; i < NGPU_MODEL_CONFIGS; i++) {
            const struct bench_config *bc = &GPU_MODEL_CONFIGS[i];
            bench_precision = PL_PRECISION_FP32;
            struct result c = bench_c(bc, data), t = {0, 0, 0, 0, 0}, b = t;
            bench_precision = PL_PRECISION_BF16;
            struct result c16 = bench_c(bc, data);
            if (torch) t = bench_torch_policy(bc, data_path, 1, "PASSIVE", &b);
            kit[i][r] = c.tok_s;
            gf[i][r] = c.gflops;
            kit16[i][r] = c16.tok_s;
            gf16[i][r] = c16.gflops;
            pt[i][r] = t.tok_s;
            bf[i][r] = b.tok_s;
            if (t.tok_s > 0 && t.params != c.params)
                printf("\n#   warning: the torch model has %zu parameters, the kit's %zu\n",
                       t.params, c.params);
            printf(" %s %.0f/%.0f/%.0f/%.0f", bc->name, kit[i][r], pt[i][r], kit16[i][r],
                   bf[i][r]);
            fflush(stdout);
        }
        printf(" tok/s (kit fp32/torch fp32/kit bf16/torch bf16)\n");
    }
    printf("\n# step speed on this GPU, median of %d interleaved rounds; cuBLAS square-product "
           "peaks %.1f GFLOP/s\n# (fp32 sgemm) and %.1f GFLOP/s (bf16 inputs, fp32 sums: the "
           "bf16 mode's GEMMs)\n"
           "# torch fp32 = PyTorch on the same GPU with TF32 off (the kit's fp32 math); kit bf16 "
           "= the\n# kit's --precision bf16 (bf16 products, fp32 activations); torch bf16 = bf16 "
           "autocast with\n# fused attention (scaled_dot_product_attention); %%peak = the kit's "
           "GFLOP/s (ledger FLOPs)\n# over the peak of its precision\n",
           rounds, peak, peak16);
    printf("# %-10s %-22s %9s %10s %6s %9s %10s %6s %6s %6s\n", "config", "C/L/H/F/T/B",
           "kit fp32", "torch fp32", "ratio", "kit bf16", "torch bf16", "ratio", "%peak",
           "%pk16");
    for (int i = 0; i < NGPU_MODEL_CONFIGS; i++) {
        const struct bench_config *bc = &GPU_MODEL_CONFIGS[i];
        char shape[64], tf[16], tr[16], bft[16], bfr[16];
        snprintf(shape, sizeof shape, "%d/%d/%d/%d/%d/%d", bc->d_model, bc->layers, bc->heads,
                 bc->d_ff, bc->seq_len, bc->batch);
        double k = median(kit[i], rounds), k16 = median(kit16[i], rounds);
        cell(tf, tr, sizeof tf, k, median(pt[i], rounds));
        cell(bft, bfr, sizeof bft, k16, median(bf[i], rounds));
        printf("  %-10s %-22s %9.0f %10s %6s %9.0f %10s %6s %5.1f%% %5.1f%%\n", bc->name,
               shape, k, tf, tr, k16, bft, bfr, 100.0 * median(gf[i], rounds) / peak,
               100.0 * median(gf16[i], rounds) / peak16);
    }
}
#endif

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    int only_threads = 0, model = 0, rounds = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            seconds_per_measure = atof(argv[++i]);
            PL_REQUIRE(seconds_per_measure > 0, "--seconds must be positive");
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            only_threads = atoi(argv[++i]);
            PL_REQUIRE(only_threads > 0, "--threads must be a positive whole number");
        } else if (!strcmp(argv[i], "--attention") && i + 1 < argc) {
            if (pl_attention_parse(argv[++i], &bench_attention) != 0)
                pl_usage_error("--attention '%s' is not a choice: use " PL_ATTENTION_NAMES,
                               argv[i]);
        } else if (!strcmp(argv[i], "--precision") && i + 1 < argc) {
            if (pl_precision_parse(argv[++i], &bench_precision) != 0)
                pl_usage_error("--precision '%s' is not a choice: use " PL_PRECISION_NAMES,
                               argv[i]);
        } else if (!strcmp(argv[i], "--model")) {
            model = 1;
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = atoi(argv[++i]);
            PL_REQUIRE(rounds >= 1 && rounds <= MAX_ROUNDS,
                       "--rounds must be between 1 and %d", MAX_ROUNDS);
        } else {
            pl_usage_error("unknown argument '%s' (bench_train [--seconds S] [--threads N] | "
                           "bench_train --model [--rounds R] [--seconds S]) "
                           "[--attention materialised|flash] [--precision fp32|bf16]",
                           argv[i]);
        }
    }
    int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    struct pl_tokens data = pl_corpus_tokens(1, 1000000);
    char path[] = "/tmp/pl-bench-train-XXXXXX";
    int fd = mkstemp(path);
    PL_REQUIRE(fd >= 0, "cannot create a temporary file in /tmp");
    close(fd);
    pl_tokens_write(path, &data);
    int torch = torch_available();

#ifdef PL_GPU
    const char *torch_where = "; PyTorch on the same GPU";
    const char *torch_missing = "\n# torch: skipped, neither python3 nor /usr/bin/python3 "
                                "imports a torch that sees a GPU (pip install torch)";
#else
    const char *torch_where = "";
    const char *torch_missing = "\n# torch: skipped, neither python3 nor /usr/bin/python3 "
                                "can import torch (python3-torch)";
#endif
    printf("# training-step throughput of the reference model (pl_model_step: forward, backward,\n"
           "# clip, AdamW) on the synthetic corpus; %%peak = achieved GFLOP/s (ledger FLOPs) over\n"
           "# the " SGEMM_NAME " sgemm rate of the same device; ratio = our tok/s over PyTorch's\n"
           "# (same model, same threads%s)%s\n",
           torch_where, torch ? "" : torch_missing);
    if (torch) printf("# torch: %s\n", torch_python);
    const char *precision = pl_precision_name(bench_precision);
#ifdef PL_GPU
    if (model) precision = "fp32 and bf16 (both columns)";
#endif
    printf("# the kit's attention: %s; precision: %s\n", pl_attention_name(bench_attention),
           precision);
    if (model) {
#ifdef PL_GPU
        gpu_model_table(rounds, &data, path, torch);
#else
        model_table(rounds, &data, path, torch);
#endif
    }
    else if (only_threads)
        run_at(only_threads, &data, path, torch);
    else {
        run_at(1, &data, path, torch);
        if (cores > 1) run_at(cores, &data, path, torch);
    }
    unlink(path);
    pl_tokens_free(&data);
    pl_finalize();
    return 0;
}
