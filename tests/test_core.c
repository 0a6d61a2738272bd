/* test_core: the memory ledger, the counter-based RNG, tensors, and the error paths.
 *     test_core            all checks (any rank count: on several ranks, also that each rank's
 *                          ledger holds only its own allocations and that every rank draws
 *                          the same random numbers)
 *     test_core double-free | leak | zero-dim | hang | crash     one failure on purpose
 *     test_core device-cap   (with PL_DEVICE_MEM=4096) a device allocation past the cap */
#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "blas_threads.h"
#include "paralab.h"
#include "testing.h"


static void test_mem_ledger(void)
{
    struct pl_mem_stats s0, s;
    pl_mem_reset_peak(); /* peaks from here on are exactly what this test allocates */
    pl_mem_get_stats(&s0);
    void *a = pl_mem_alloc(1000, PL_MEM_PARAMS, PL_HOST, "a");
    void *b = pl_mem_alloc(3000, PL_MEM_GRADS, PL_HOST, "b");
    void *c = pl_mem_alloc(500, PL_MEM_PARAMS, PL_HOST, "c");
    pl_mem_get_stats(&s);
    CHECK(s.current[PL_MEM_PARAMS] - s0.current[PL_MEM_PARAMS] == 1500,
          "params current grew by %zu, expected 1500", s.current[PL_MEM_PARAMS] - s0.current[PL_MEM_PARAMS]);
    CHECK(s.current[PL_MEM_GRADS] - s0.current[PL_MEM_GRADS] == 3000, "grads current");
    CHECK(s.live_allocs - s0.live_allocs == 3, "3 live allocations, got %zu", s.live_allocs - s0.live_allocs);
    CHECK(pl_mem_size(b) == 3000, "pl_mem_size(b) = %zu, expected 3000", pl_mem_size(b));
    CHECK(((size_t)a % 64) == 0, "allocations are 64-byte aligned");
    enum pl_where where = PL_DEVICE;
    const char *label = NULL;
    CHECK(pl_mem_block_of((char *)b + 2999, &where, &label) && where == PL_HOST &&
              label && !strcmp(label, "b"),
          "pl_mem_block_of finds b from its last byte, with its place and label");
    CHECK(!pl_mem_block_of(&where, NULL, NULL), "a stack address lies in no ledger block");

    pl_mem_free(b);
    void *d = pl_mem_alloc(100, PL_MEM_GRADS, PL_HOST, "d");
    pl_mem_get_stats(&s);
    CHECK(s.current[PL_MEM_GRADS] - s0.current[PL_MEM_GRADS] == 100, "grads after free+alloc");
    CHECK(s.peak[PL_MEM_GRADS] == s0.current[PL_MEM_GRADS] + 3000,
          "grads peak is b's 3000 bytes, got %zu", s.peak[PL_MEM_GRADS] - s0.current[PL_MEM_GRADS]);
    CHECK(s.peak[PL_MEM_PARAMS] == s0.current[PL_MEM_PARAMS] + 1500,
          "params peak is a+c = 1500 bytes, got %zu",
          s.peak[PL_MEM_PARAMS] - s0.current[PL_MEM_PARAMS]);
    CHECK(s.peak_total == s0.current_total + 4500, "total peak is a+b+c = 4500 bytes, got %zu",
          s.peak_total - s0.current_total);

    pl_mem_reset_peak();
    pl_mem_get_stats(&s);
    CHECK(s.peak[PL_MEM_GRADS] == s.current[PL_MEM_GRADS], "reset_peak sets peak to current");

    void *z = pl_mem_alloc(0, PL_MEM_WORK, PL_HOST, "empty");
    CHECK(z != NULL && z != a, "a zero-byte allocation is a unique pointer");
    pl_mem_free(z);
    pl_mem_free(a);
    pl_mem_free(c);
    pl_mem_free(d);
    pl_mem_free(NULL);
    pl_mem_get_stats(&s);
    for (int k = 0; k < PL_MEM_NCAT; k++)
        CHECK(s.current[k] == s0.current[k], "category %s back to its start", pl_mem_cat_name(k));

    /* Many allocations force the table to grow and rehash. */
    enum { N = 5000 };
    static void *many[N];
    for (int i = 0; i < N; i++) many[i] = pl_mem_alloc((size_t)i, PL_MEM_ACTIV, PL_HOST, "many");
    size_t expect = 0;
    for (int i = 0; i < N; i++) expect += (size_t)i;
    pl_mem_get_stats(&s);
    CHECK(s.current[PL_MEM_ACTIV] - s0.current[PL_MEM_ACTIV] == expect, "activations after %d allocs", N);
    for (int i = 0; i < N; i += 2) pl_mem_free(many[i]);
    for (int i = 1; i < N; i += 2) CHECK(pl_mem_size(many[i]) == (size_t)i, "size after rehash");
    for (int i = 1; i < N; i += 2) pl_mem_free(many[i]);
    pl_mem_get_stats(&s);
    CHECK(s.current_total == s0.current_total && s.live_allocs == s0.live_allocs, "all freed");
}

static void test_rng_shards(void)
{
    enum { ROWS = 37, COLS = 29, N = ROWS * COLS };
    static float full[N], part[N];
    uint64_t seed = 1234, stream = pl_rng_stream("h.0.mlp.w_fc");
    CHECK(stream != pl_rng_stream("h.0.mlp.w_proj"), "different names give different streams");
    pl_rng_fill_normal(full, N, seed, stream, 0, 0.0f, 0.02f);

    /* 1-D shards of uneven size (as ZeRO pads): each equals the slice, bit for bit. */
    for (int parts = 1; parts <= 7; parts++) {
        size_t off = 0;
        for (int p = 0; p < parts; p++) {
            size_t len = N / parts + ((size_t)p < N % parts);
            pl_rng_fill_normal(part, len, seed, stream, off, 0.0f, 0.02f);
            CHECK(memcmp(part, full + off, len * sizeof(float)) == 0,
                  "1-D shard %d of %d differs from the slice of the full tensor", p, parts);
            off += len;
        }
    }
    /* Column blocks (tensor parallel) and row blocks. */
    size_t col0 = 5, cols = 11, row0 = 7, rows = 13;
    pl_rng_fill_normal_block(part, COLS, row0, col0, rows, cols, seed, stream, 0.02f);
    int same = 1;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            if (memcmp(&part[r * cols + c], &full[(row0 + r) * COLS + col0 + c], sizeof(float)))
                same = 0;
    CHECK(same, "a 2-D block differs from the same block of the full matrix");

    /* Integer fill: in range and deterministic. */
    pl_rng_fill_int(part, N, 7, 3, 0, -5, 9);
    int in_range = 1;
    for (int i = 0; i < N; i++)
        if (part[i] < -5 || part[i] > 9 || part[i] != floorf(part[i])) in_range = 0;
    CHECK(in_range, "pl_rng_fill_int gives whole numbers in [-5, 9]");

    /* Moments of 100k normals: mean within 5 standard errors of 0, variance near 1. */
    double sum = 0, sq = 0;
    const int M = 100000;
    for (int i = 0; i < M; i++) {
        double x = pl_rng_normal(99, 1, (uint64_t)i);
        sum += x;
        sq += x * x;
    }
    double mean = sum / M, var = sq / M - mean * mean;
    CHECK(fabs(mean) < 5.0 / sqrt(M), "normal mean %g is too far from 0", mean);
    CHECK(fabs(var - 1.0) < 5.0 * sqrt(2.0 / M), "normal variance %g is too far from 1", var);
}

static void test_tensor(void)
{
    struct pl_tensor t = pl_tensor_3d("x", PL_MEM_ACTIV, 2, 3, 4);
    CHECK(t.numel == 24 && pl_tensor_bytes(&t) == 96, "3-D tensor has 24 elements / 96 bytes");
    CHECK(pl_mem_size(t.data) == 96, "the tensor's buffer is in the memory ledger");
    char buf[64];
    CHECK(!strcmp(pl_tensor_describe(&t, buf, sizeof buf), "x[2x3x4]"), "describe gave %s", buf);
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 5};
    size_t at = 0;
    CHECK(pl_max_abs_diff(a, b, 4, &at) == 1.0 && at == 3, "max abs diff at index 3");
    CHECK(fabs(pl_rel_l2(a, b, 4) - 1.0 / sqrt(1 + 4 + 9 + 25)) < 1e-12, "relative L2");
    b[1] = NAN;
    CHECK(!pl_all_finite(b, 4, &at) && at == 1, "NaN found at index 1");
    pl_tensor_free(&t);
    CHECK(t.data == NULL, "free clears the tensor");
}

/* Every rank holds its own ledger and draws the same numbers: rank r allocates (r+1) KB and
 * must see exactly that; a fill must be bit-identical to rank 0's. */
static void test_across_ranks(void)
{
    int n = pl_size(), me = pl_rank();
    struct pl_mem_stats s0, s;
    pl_mem_get_stats(&s0);
    void *p = pl_mem_alloc((size_t)(me + 1) * 1000, PL_MEM_WORK, PL_HOST, "per-rank work");
    pl_mem_get_stats(&s);
    unsigned long long mine = s.current[PL_MEM_WORK] - s0.current[PL_MEM_WORK];
    unsigned long long *all = calloc((size_t)n, sizeof *all);
    MPI_Allgather(&mine, 1, MPI_UNSIGNED_LONG_LONG, all, 1, MPI_UNSIGNED_LONG_LONG,
                  MPI_COMM_WORLD);
    for (int r = 0; r < n; r++)
        CHECK(all[r] == (unsigned long long)(r + 1) * 1000,
              "rank %d's ledger grew by %llu bytes, expected its own %d", r, all[r], (r + 1) * 1000);
    pl_mem_free(p);
    free(all);

    enum { N = 4096 };
    static float mine_f[N], rank0[N];
    pl_rng_fill_normal(mine_f, N, 77, pl_rng_stream("h.0.attn.w_qkv"), 12345, 0.0f, 1.0f);
    memcpy(rank0, mine_f, sizeof rank0);
    MPI_Bcast(rank0, N, MPI_FLOAT, 0, MPI_COMM_WORLD);
    CHECK(memcmp(mine_f, rank0, sizeof rank0) == 0,
          "rank %d's random fill differs from rank 0's for the same (seed, stream, index)", me);
}

/* A device's size: its forms parsed, and the cap counting PL_DEVICE blocks only. */
static void test_device_cap(void)
{
    static const struct { const char *text; double bytes; } good[] = {
        {"65536", 65536.0}, {"80GB", 80e9}, {"1.5 GiB", 1610612736.0}, {"512mib", 536870912.0},
        {"2kB", 2000.0}, {"3 KiB", 3072.0}, {"7b", 7.0}, {"1TB", 1e12}};
    static const char *const bad[] = {"", "x", "-1", "5 XB", "GB", ".5GB", "inf", "12 GB s"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        size_t b = 0;
        CHECK(pl_mem_parse_bytes(good[i].text, &b) == 0 && (double)b == good[i].bytes,
              "'%s' reads as %zu bytes, expected %.0f", good[i].text, b, good[i].bytes);
    }
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        size_t b = 0;
        CHECK(pl_mem_parse_bytes(bad[i], &b) == -1, "'%s' is not a size, read as %zu", bad[i],
              b);
    }
    const size_t was = pl_mem_device_cap();
    struct pl_mem_stats s0, s;
    pl_mem_reset_peak();
    pl_mem_get_stats(&s0);
    pl_mem_set_device_cap(s0.device_current + 10000);
    void *a = pl_mem_alloc(6000, PL_MEM_ACTIV, PL_DEVICE, "a");
    void *h = pl_mem_alloc(50000, PL_MEM_WORK, PL_HOST, "host, not on the device");
    void *b = pl_mem_alloc(4000, PL_MEM_GRADS, PL_DEVICE, "b: the cap exactly");
    pl_mem_get_stats(&s);
    CHECK(s.device_current - s0.device_current == 10000,
          "device bytes grew by %zu, expected 10000 (host blocks not counted)",
          s.device_current - s0.device_current);
    pl_mem_free(a);
    void *c = pl_mem_alloc(6000, PL_MEM_ACTIV, PL_DEVICE, "c: a's room again");
    pl_mem_get_stats(&s);
    CHECK(s.device_peak - s0.device_current == 10000, "device peak %zu over the start, "
          "expected 10000", s.device_peak - s0.device_current);
    /* at the peak (b's allocation) the device held a's 6000 activations and b's 4000
     * gradients; c's later 6000 reached the peak again without passing it */
    CHECK(s.device_peak_cat[PL_MEM_ACTIV] - s0.device_cat[PL_MEM_ACTIV] == 6000 &&
              s.device_peak_cat[PL_MEM_GRADS] - s0.device_cat[PL_MEM_GRADS] == 4000 &&
              s.device_peak_cat[PL_MEM_WORK] == s0.device_cat[PL_MEM_WORK],
          "at the device peak: activ +%zu, grads +%zu, work +%zu; expected 6000, 4000, 0 (the "
          "host block not counted)", s.device_peak_cat[PL_MEM_ACTIV] - s0.device_cat[PL_MEM_ACTIV],
          s.device_peak_cat[PL_MEM_GRADS] - s0.device_cat[PL_MEM_GRADS],
          s.device_peak_cat[PL_MEM_WORK] - s0.device_cat[PL_MEM_WORK]);
    size_t sum = 0;
    for (int k = 0; k < PL_MEM_NCAT; k++) sum += s.device_cat[k];
    CHECK(sum == s.device_current, "the categories' device bytes add up to %zu, held %zu", sum,
          s.device_current);
    pl_mem_free(b);
    pl_mem_free(c);
    pl_mem_free(h);
    pl_mem_set_device_cap(was);
    CHECK(pl_mem_device_cap() == was, "the cap is set back");
}

/* The cores are shared out between a node's ranks, never below one thread each. */
static void test_blas_threads(void)
{
    const int cases[][3] = {{2, 2, 1}, {2, 1, 2}, {16, 4, 4}, {16, 3, 5}, {2, 8, 1}, {1, 1, 1},
                            {8, 0, 8}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int got = pl_blas_threads_for(cases[i][0], cases[i][1]);
        CHECK(got == cases[i][2], "%d cores, %d ranks on the node: %d BLAS threads per rank, "
              "expected %d", cases[i][0], cases[i][1], got, cases[i][2]);
    }
    CHECK(pl_cores_available() >= 1, "at least one core available, got %d",
          pl_cores_available());
}

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    const char *mode = argc > 1 ? argv[1] : "all";
    if (!strcmp(mode, "double-free")) {
        void *p = pl_mem_alloc(64, PL_MEM_GRADS, PL_HOST, "grad bucket 3");
        pl_mem_free(p);
        pl_mem_free(p);
    } else if (!strcmp(mode, "leak")) {
        pl_mem_alloc(128, PL_MEM_OPTIM, PL_HOST, "adam m shard");
    } else if (!strcmp(mode, "overrun")) {
        /* 100 floats given, 101 written: the free names the buffer. */
        float *x = pl_mem_alloc(100 * sizeof(float), PL_MEM_ACTIV, PL_HOST, "moe d expert in");
        for (int i = 0; i <= 100; i++) x[i] = 1.0f;
        pl_mem_free(x);
    } else if (!strcmp(mode, "underrun")) {
        float *x = pl_mem_alloc(100 * sizeof(float), PL_MEM_WORK, PL_HOST, "row scratch");
        x[-1] = 1.0f;
        pl_mem_free(x);
    } else if (!strcmp(mode, "device-cap")) {
        /* Run with PL_DEVICE_MEM=4096: host memory is not capped, device memory is. */
        void *h = pl_mem_alloc(8192, PL_MEM_WORK, PL_HOST, "host scratch");
        pl_mem_free(h);
        pl_mem_alloc(8192, PL_MEM_ACTIV, PL_DEVICE, "activations of block 3");
    } else if (!strcmp(mode, "zero-dim")) {
        pl_tensor_2d("w_qkv", PL_MEM_PARAMS, 4, 0);
    } else if (!strcmp(mode, "hang")) {
        for (;;) pause();
    } else if (!strcmp(mode, "crash")) {
        if (pl_rank() == pl_size() - 1) raise(SIGSEGV);
        pl_barrier(pl_comm_world());
    } else {
        test_mem_ledger();
        test_rng_shards();
        test_tensor();
        test_across_ranks();
        test_blas_threads();
        test_device_cap();
        printf("[rank %d] test_core: %d checks, %d failed\n", pl_rank(), checks, failures);
    }
    pl_finalize();
    return failures ? 1 : 0;
}
