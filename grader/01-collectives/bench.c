/* bench.c: Lab 1's perf and bench modes, the student's collective beside the library's in
 * the same run: perf times both on one buffer and scores the bus bandwidth ratio; bench
 * prints nccl-tests' table over sizes. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab01.h"
#include "units.h"

#define PERF_ROUNDS 6
#define PERF_BATCHES 5
/* The speed bar on NCCL, against its Ring/Simple collective (driver.c's before_init): a ring
 * of separate point-to-point launches and reduction kernels reads each block twice and waits
 * between steps where NCCL's kernel fuses them (docs/gpu.md); MPI keeps GR_PERF_FULL_RATIO. */
#define L1_NCCL_BAR 0.5
/* Segments of at least this many elements (256 KiB) keep a pipeline's per-message cost small
 * against its transfers (the hints suggest about 100 000): the baseline is never cut finer,
 * so a pipeline of needlessly many tiny messages is not forgiven its overhead. */
#define BC_MIN_SEGMENT 65536

struct bench_bufs {
    float *a, *b;   /* a: the buffer (all-to-all: send), b: all-to-all recv or lib output */
    size_t count;   /* elements of a */
};

static void call_library(int op, struct pl_comm *comm, struct bench_bufs *x)
{
    size_t per = x->count / (size_t)pl_comm_size(comm);
    switch (op) {
    case L1_RS: pl_reduce_scatter(comm, x->a, x->b, per, PL_SUM); break;
    case L1_AG: pl_all_gather(comm, x->b, x->a, per); break;
    case L1_AR:
    case L1_RD:
    case L1_HIER: pl_all_reduce(comm, x->a, x->a, x->count, PL_SUM); break;
    case L1_BC: pl_broadcast(comm, x->a, x->count, 0); break;
    case L1_A2A: pl_all_to_all(comm, x->a, x->b, per); break;
    default: break;
    }
}

static void call_mine(int op, struct pl_comm *comm, struct bench_bufs *x)
{
    size_t per = op == L1_A2A ? x->count / (size_t)pl_comm_size(comm) : x->count;
    l1_call_student(op, comm, x->a, x->b, per, 0);
}

/* Seconds per call, the slowest rank's, over iters calls. */
static double time_calls(int mine, int op, struct pl_comm *comm, struct bench_bufs *x, int iters)
{
    PL_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = pl_clock();
    for (int i = 0; i < iters; i++) {
        if (mine) call_mine(op, comm, x);
        else call_library(op, comm, x);
    }
    pl_ops_wait(); /* GPU build: the calls' device work is part of their time */
    double t = (pl_clock() - t0) / iters, tmax;
    PL_CHECK_MPI(MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    return tmax;
}

/* One round of gr_perf_compare: iters calls of the library's collective or the student's.
 * segments > 1 (the broadcast): the library's broadcast is called once per segment of the
 * student's pipeline, so both pay the same per-message cost, which on a busy machine (a
 * receiver woken once per message) is what a pipeline's time is made of at np=2, where a
 * pipeline has nothing to overlap. */
struct perf_ctx {
    int op;
    struct pl_comm *comm;
    struct bench_bufs *x;
    int iters, segments;
    double calls, sent; /* the student's timed calls, and the bytes this rank sent in them */
};

static void library_segmented(struct pl_comm *comm, struct bench_bufs *x, int segments)
{
    size_t per = (x->count + (size_t)segments - 1) / (size_t)segments;
    for (size_t off = 0; off < x->count; off += per)
        pl_broadcast(comm, x->a + off, x->count - off < per ? x->count - off : per, 0);
}

static double perf_round(void *ctx, int mine)
{
    struct perf_ctx *c = ctx;
    if (mine) {
        double before = pl_ledger_bytes(pl_ledger(), PL_P2P, -1);
        double t = time_calls(1, c->op, c->comm, c->x, c->iters);
        c->sent += pl_ledger_bytes(pl_ledger(), PL_P2P, -1) - before;
        c->calls += c->iters;
        return t;
    }
    if (c->segments <= 1) return time_calls(0, c->op, c->comm, c->x, c->iters);
    PL_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = pl_clock();
    for (int i = 0; i < c->iters; i++) library_segmented(c->comm, c->x, c->segments);
    pl_ops_wait();
    double t = (pl_clock() - t0) / c->iters, tmax;
    PL_CHECK_MPI(MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    return tmax;
}

/* The messages the root of the student's broadcast sends per call: its pipeline's segments
 * (counted from the traffic ledger over one call, on rank 0, told to every rank), at most
 * one per BC_MIN_SEGMENT elements. */
static int broadcast_segments(struct pl_comm *comm, struct bench_bufs *x)
{
    long before = pl_ledger()->calls[PL_P2P];
    time_calls(1, L1_BC, comm, x, 1);
    int k = (int)(pl_ledger()->calls[PL_P2P] - before);
    PL_CHECK_MPI(MPI_Bcast(&k, 1, MPI_INT, 0, MPI_COMM_WORLD));
    int most = (int)((x->count + BC_MIN_SEGMENT - 1) / BC_MIN_SEGMENT);
    return k < 1 ? 1 : k > most ? most : k;
}

/* Elements wrong on any rank after one call on integer data (the nccl-tests #wrong). */
static long count_wrong(int mine, int op, uint64_t base_seed, struct pl_comm *comm,
                        size_t count)
{
    int n = pl_comm_size(comm), r = pl_comm_rank(comm);
    struct l1_case c = {.count = op == L1_A2A ? count / (size_t)n : count, .root = 0};
    size_t total = count, off, len = total / (size_t)n;
    float *in = malloc(total * sizeof *in), *in2 = malloc(total * sizeof *in2);
    float *exp = malloc(total * sizeof *exp), *got = malloc(total * sizeof *got);
    l1_make_input(op, &c, pl_mix64(base_seed + 77 + count), comm, in, in2, exp);
    struct bench_bufs x = {pl_comm_buf_alloc(total, "bench a"),
                           pl_comm_buf_alloc(total, "bench b"), total};
    pl_copy_from_host(x.a, in, total);
    pl_copy_from_host(x.b, in2, total);
    float *result_buf = x.a;
    if (mine) {
        call_mine(op, comm, &x);
        if (op == L1_A2A) result_buf = x.b;
    } else if (op == L1_RS) {
        call_library(op, comm, &x);
        /* The library leaves rank r's block in b; put it where the lab expects it. */
        pl_copy_to_host(got, x.b, len);
        off = (size_t)r * len;
        pl_copy_from_host(x.a + off, got, len);
    } else if (op == L1_AG) {
        off = (size_t)r * len;
        pl_copy_to_host(got, x.a + off, len);
        pl_copy_from_host(x.b, got, len);
        call_library(op, comm, &x);
    } else {
        call_library(op, comm, &x);
        if (op == L1_A2A) result_buf = x.b;
    }
    pl_copy_to_host(got, result_buf, total);
    long wrong = l1_count_wrong(got, exp, total), sum = 0;
    PL_CHECK_MPI(MPI_Allreduce(&wrong, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    pl_comm_buf_free(x.b);
    pl_comm_buf_free(x.a);
    free(in);
    free(in2);
    free(exp);
    free(got);
    return sum;
}

/* A count every rank count divides, as the library's reduce-scatter and all-gather want. */
static size_t bench_count(double bytes, int n)
{
    size_t c = (size_t)(bytes / 4.0);
    c -= c % (size_t)n;
    return c ? c : (size_t)n;
}

int l1_probe(struct l1_state *st)
{
    const struct l1_op_info *o = &L1_OPS[st->op];
    if (!strcmp(pl_comm_backend(), "nccl")) gr_perf_set_bar(L1_NCCL_BAR);
    if (st->op >= L1_RD)
        pl_usage_error_all("--mode perf: %s has no speed test (its traffic test models its "
                           "time); choose reduce_scatter, all_gather, all_reduce, broadcast or "
                           "all_to_all", o->name);
    size_t count = bench_count(st->size_mib * 1048576.0, pl_size());
    char sz[32];
    pl_format_bytes(4.0 * (double)count, sz, sizeof sz);
    gr_case("%s on %s, %d ranks, beside %s", o->func, sz, pl_size(), o->lib);
    long wrong = count_wrong(1, st->op, st->seed, pl_comm_world(), count);
    if (wrong)
        gr_say("perf", "not graded: %s gave %ld wrong elements on %s (performance counts only "
               "for correct results)", o->func, wrong, sz);
    return wrong == 0;
}

/* Collective. 1 when the timed calls of the student's collective sent, all ranks together,
 * what as many calls must send (the table of handout section 8, every one on the same
 * buffer). The speed test checks one call's results; a call that moves nothing would time
 * nothing. */
static int timed_calls_moved_data(const struct perf_ctx *c, int n, double S)
{
    double sent = 0, per_call = (c->op == L1_AR ? 2.0 : 1.0) * (n - 1) * S;
    char a[32], b[32];
    PL_CHECK_MPI(MPI_Allreduce(&c->sent, &sent, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    if (sent >= c->calls * per_call) return 1;
    gr_say("perf", "not graded: your %.0f timed calls of %s sent %s in all (every rank "
           "together), where each call must send %s: results are checked on one call only, and "
           "a call that sends less than the collective needs has not done it",
           c->calls, L1_OPS[c->op].func, pl_format_bytes(sent, a, sizeof a),
           pl_format_bytes(per_call, b, sizeof b));
    return 0;
}

double l1_perf(struct l1_state *st)
{
    const struct l1_op_info *o = &L1_OPS[st->op];
    struct pl_comm *comm = pl_comm_world();
    int n = pl_size();
    size_t count = bench_count(st->size_mib * 1048576.0, n);
    double S = 4.0 * (double)count;
    pl_comm_set_checks(0);
    struct bench_bufs x = {pl_comm_buf_alloc(count, "perf a"), pl_comm_buf_alloc(count, "perf b"),
                           count};
    time_calls(0, st->op, comm, &x, 1);
    time_calls(1, st->op, comm, &x, 1);
    int segments = st->op == L1_BC && n == 2 ? broadcast_segments(comm, &x) : 1;
    struct perf_ctx pc = {st->op, comm, &x, S >= 8 * 1048576.0 ? 2 : 4, segments, 0, 0};
    struct gr_perf pf;
    gr_perf_compare(perf_round, &pc, PERF_ROUNDS, PERF_BATCHES, &pf);
    pl_comm_set_checks(1);
    pl_comm_buf_free(x.b);
    pl_comm_buf_free(x.a);
    if (!timed_calls_moved_data(&pc, n, S)) return 0;

    double factor = pl_busbw_factor(o->kind, n);
    double bus_mine = S / pf.best_mine * factor / 1e9, bus_lib = S / pf.best_base * factor / 1e9;
    char seg[96] = "";
    if (segments > 1)
        snprintf(seg, sizeof seg, " on your %d segments, one call each,", segments);
    gr_say("perf", "yours %.3f GB/s busbw (%.0f us), library %s%s %.3f GB/s (%.0f us): %.2fx "
        "(%s); %s", bus_mine, pf.best_mine * 1e6, o->lib, seg,
        bus_lib, pf.best_base * 1e6, pf.ratio, gr_perf_how(&pf), gr_perf_bar_text());
    if (pf.fraction < 1)
        gr_say("perf", "a ring moves the same bytes as the library: look for blocking sends that "
            "serialize the steps, a scratch buffer allocated on every step, or copies the "
            "algorithm does not need");
    char metric[64];
    snprintf(metric, sizeof metric, "busbw_%s", o->name);
    gr_metric(metric, bus_mine);
    return pf.fraction;
}

static void bench_row(int op, uint64_t seed, size_t count)
{
    struct pl_comm *comm = pl_comm_world();
    int n = pl_size();
    double S = 4.0 * (double)count;
    int iters = S <= 65536 ? 50 : S <= 4194304 ? 10 : 3;
    long wrong_mine = count_wrong(1, op, seed, comm, count);
    long wrong_lib = count_wrong(0, op, seed, comm, count);
    struct bench_bufs x = {pl_comm_buf_alloc(count, "bench a"), pl_comm_buf_alloc(count, "bench b"),
                           count};
    pl_comm_set_checks(0);
    time_calls(1, op, comm, &x, 1);
    time_calls(0, op, comm, &x, 1);
    double tm = time_calls(1, op, comm, &x, iters);
    double tl = time_calls(0, op, comm, &x, iters);
    pl_comm_set_checks(1);
    pl_comm_buf_free(x.b);
    pl_comm_buf_free(x.a);
    double f = pl_busbw_factor(L1_OPS[op].kind, n);
    pl_print0("%12.0f %12zu  float %10.1f %7.2f %7.2f %6ld %10.1f %7.2f %7.2f %6ld\n", S, count,
              tm * 1e6, S / tm / 1e9, S / tm / 1e9 * f, wrong_mine, tl * 1e6, S / tl / 1e9,
              S / tl / 1e9 * f, wrong_lib);
}

/* bench mode: every op (or --op's) at sizes from 1 KiB to --max-mib by fours. */
void l1_bench(const struct gr_args *a)
{
    int n = pl_size(), only = a->op ? l1_find_op(a->op) : -1;
    double max_mib = a->opt[1].d > 0 ? a->opt[1].d : 16;
    if (a->opt[1].d < 0 || a->opt[1].d != a->opt[1].d)
        pl_usage_error_all("--max-mib %g: give a positive size in MiB", a->opt[1].d);
    pl_print0("# Lab 1 collectives: %s beside the library's, %d ranks, backend %s\n", a->label, n,
              pl_comm_backend());
    pl_print0("# busbw = algbw x factor: all_reduce 2(n-1)/n, reduce_scatter, all_gather and "
              "all_to_all (n-1)/n, broadcast 1\n#\n");
    pl_print0("# %10s %12s  %5s %34s %34s\n", "", "", "", "--------------- lab code ------------",
              "------------- library -------------");
    pl_print0("# %10s %12s  %5s %10s %7s %7s %6s %10s %7s %7s %6s\n", "size", "count", "type",
              "time(us)", "algbw", "busbw", "#wrong", "time(us)", "algbw", "busbw", "#wrong");
    pl_print0("# %10s %12s  %5s %10s %7s %7s %6s %10s %7s %7s %6s\n", "(B)", "(elements)", "",
              "", "(GB/s)", "(GB/s)", "", "", "(GB/s)", "(GB/s)", "");
    for (int op = 0; op <= L1_RD; op++) { /* the two-level one needs nodes */
        if (only >= 0 && op != only) continue;
        pl_print0("# %s: %s vs %s\n", L1_OPS[op].name, L1_OPS[op].func, L1_OPS[op].lib);
        for (double bytes = 1024; bytes <= max_mib * 1048576.0 + 1; bytes *= 4)
            bench_row(op, a->seed, bench_count(bytes, n));
    }
}
