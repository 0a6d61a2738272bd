/* bench_comm: the library's collectives timed in nccl-tests' table shape (size, count,
 * type, redop, root, time, algbw, busbw, #wrong), from 1 KB to 64 MB, and a large memcpy
 * as the ceiling of shared-memory transport on this machine. A benchmark, not a test:
 * the numbers describe the machine.
 *     bench_comm [-b MINBYTES] [-e MAXBYTES] [-f FACTOR]    (sizes take K, M, G) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paralab.h"

struct sizes {
    size_t min, max, factor;
};

static size_t parse_size(const char *flag, const char *s)
{
    char *end = NULL;
    double v = strtod(s, &end);
    double mult = 1;
    if (*end == 'K' || *end == 'k') mult = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') mult = 1024.0 * 1024.0, end++;
    else if (*end == 'G' || *end == 'g') mult = 1024.0 * 1024.0 * 1024.0, end++;
    if (*end || v < 1)
        pl_usage_error_all("%s expects a size in bytes such as 1024, 64K or 64M, got '%s'", flag,
                           s);
    return (size_t)(v * mult);
}

static void parse_args(int argc, char **argv, struct sizes *z)
{
    *z = (struct sizes){1024, 64u << 20, 4};
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) pl_usage_error_all("%s needs a value (-b MIN -e MAX -f FACTOR)", argv[i]);
        if (!strcmp(argv[i], "-b")) z->min = parse_size("-b", argv[++i]);
        else if (!strcmp(argv[i], "-e")) z->max = parse_size("-e", argv[++i]);
        else if (!strcmp(argv[i], "-f")) z->factor = parse_size("-f", argv[++i]);
        else pl_usage_error_all("unknown option '%s' (-b MIN -e MAX -f FACTOR)", argv[i]);
    }
    if (z->factor < 2) pl_usage_error_all("-f must be at least 2, got %zu", z->factor);
    if (z->min > z->max) pl_usage_error_all("-b %zu is above -e %zu", z->min, z->max);
}

/* Fewer repetitions for big sizes keeps the whole run short on a small machine. */
static int iterations(size_t bytes)
{
    size_t it = (128u << 20) / (bytes ? bytes : 1);
    return it < 2 ? 2 : it > 100 ? 100 : (int)it;
}

static void run_size(struct pl_comm *w, enum pl_coll_kind kind, size_t bytes, double *busbw_sum,
                     int *rows)
{
    int n = pl_comm_size(w), r = pl_comm_rank(w);
    int blocked = kind == PL_REDUCE_SCATTER || kind == PL_ALL_GATHER || kind == PL_ALL_TO_ALL;
    size_t total = bytes / sizeof(float);
    size_t per = blocked ? total / (size_t)n : total;
    if (per == 0) return;
    if (blocked) total = per * (size_t)n;
    size_t nsend = kind == PL_ALL_GATHER ? per : total;
    size_t nrecv = kind == PL_REDUCE_SCATTER ? per : total;
    float *send = pl_comm_buf_alloc(nsend, "bench send");
    float *recv = pl_comm_buf_alloc(nrecv, "bench recv");
    float *host = malloc((nsend > nrecv ? nsend : nrecv) * sizeof(float));
    if (!host) pl_fatal("out of memory");
    for (size_t i = 0; i < nsend; i++) host[i] = (float)(r + 1);
    pl_copy_from_host(send, host, nsend);
    if (kind == PL_BROADCAST) pl_copy_from_host(recv, host, nrecv);

    int iters = iterations(total * sizeof(float));
    double t = 0;
    for (int it = -1; it < iters; it++) { /* iteration -1 warms up */
        if (it == 0) {
            pl_ops_wait(); /* the warm-up's device work is not timed */
            pl_barrier(w);
            t = pl_clock();
        }
        switch (kind) {
        case PL_ALL_REDUCE: pl_all_reduce(w, send, recv, total, PL_SUM); break;
        case PL_REDUCE_SCATTER: pl_reduce_scatter(w, send, recv, per, PL_SUM); break;
        case PL_ALL_GATHER: pl_all_gather(w, send, recv, per); break;
        case PL_BROADCAST: pl_broadcast(w, recv, total, 0); break;
        case PL_ALL_TO_ALL: pl_all_to_all(w, send, recv, per); break;
        default: pl_fatal("no benchmark for %s", pl_coll_kind_name(kind));
        }
    }
    pl_ops_wait(); /* a collective completes into the compute stream on the GPU build */
    t = (pl_clock() - t) / iters;
    PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));

    /* Every rank sent r+1 everywhere, so each result element has a known value. */
    pl_copy_to_host(host, recv, nrecv);
    long wrong = 0;
    for (size_t i = 0; i < nrecv; i++) {
        float want = (float)n * (float)(n + 1) / 2.0f;
        if (kind == PL_ALL_GATHER || kind == PL_ALL_TO_ALL) want = (float)(i / per + 1);
        if (kind == PL_BROADCAST) want = 1.0f;
        wrong += host[i] != want;
    }
    PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));

    double S = (double)total * sizeof(float);
    double algbw = S / t / 1e9, busbw = algbw * pl_busbw_factor(kind, n);
    int reduces = kind == PL_ALL_REDUCE || kind == PL_REDUCE_SCATTER;
    if (r == 0)
        printf("%12.0f  %12zu  %8s  %6s  %6d  %9.1f  %7.3f  %7.3f  %6ld\n", S, total, "float",
               reduces ? "sum" : "none", kind == PL_BROADCAST ? 0 : -1, t * 1e6, algbw, busbw,
               wrong);
    *busbw_sum += busbw;
    (*rows)++;
    free(host);
    pl_comm_buf_free(send);
    pl_comm_buf_free(recv);
}

static void bench_kind(struct pl_comm *w, enum pl_coll_kind kind, const struct sizes *z)
{
    pl_print0("#\n# %s on %d ranks (backend %s, checks off)\n", pl_coll_kind_name(kind),
              pl_comm_size(w), pl_comm_backend());
    pl_print0("#%11s  %12s  %8s  %6s  %6s  %9s  %7s  %7s  %6s\n", "size", "count", "type",
              "redop", "root", "time", "algbw", "busbw", "#wrong");
    pl_print0("#%11s  %12s  %8s  %6s  %6s  %9s  %7s  %7s  %6s\n", "(B)", "(elements)", "", "",
              "", "(us)", "(GB/s)", "(GB/s)", "");
    double sum = 0;
    int rows = 0;
    for (size_t b = z->min; b <= z->max; b *= z->factor) run_size(w, kind, b, &sum, &rows);
    pl_print0("# Avg bus bandwidth    : %g GB/s\n", rows ? sum / rows : 0.0);
}

/* One core copying a large buffer: what moving bytes through shared memory can reach. */
static void bench_memcpy(void)
{
    size_t bytes = 256u << 20;
    char *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b) pl_fatal("out of memory for the memcpy benchmark");
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    int reps = 5;
    memcpy(b, a, bytes);
    double t = pl_clock();
    for (int i = 0; i < reps; i++) memcpy(i % 2 ? a : b, i % 2 ? b : a, bytes);
    t = (pl_clock() - t) / reps;
    printf("# memcpy of %zu MB on one core: %.3f GB/s (%.1f us); the ceiling of shared-memory "
           "transport\n", bytes >> 20, (double)bytes / t / 1e9, t * 1e6);
    free(a);
    free(b);
}

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    struct sizes z;
    parse_args(argc, argv, &z);
    pl_comm_set_checks(0);
    struct pl_comm *w = pl_comm_world();
    pl_print0("# bench_comm: %d ranks, %zu B .. %zu B x%zu\n", pl_size(), z.min, z.max,
              z.factor);
    static const enum pl_coll_kind kinds[] = {PL_ALL_REDUCE, PL_REDUCE_SCATTER, PL_ALL_GATHER,
                                              PL_BROADCAST, PL_ALL_TO_ALL};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) bench_kind(w, kinds[k], &z);
    pl_barrier(w);
    if (pl_rank() == 0) bench_memcpy();
    pl_barrier(w);
    fflush(stdout);
    pl_finalize();
    return 0;
}
