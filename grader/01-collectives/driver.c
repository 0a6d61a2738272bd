/* driver.c: Lab 1's part of its trusted driver (the harness, grader/common/harness.h, owns
 * main, flags and modes). It calls the student's collectives (collectives.h) on seeded
 * integer-valued data, compares every rank's result with a serial computation, reads the
 * bytes each rank sent from the traffic ledger and the buffers it held from the memory
 * ledger, and times the student's collectives against the library's in the same run.
 * Lab flags: --size-mib M (perf), --max-mib M (bench). */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives.h"
#include "paralab.h"
#include "units.h"
#include "harness.h"
#include "modelled.h"
#include "unseen.h"

/* The ring collectives of the first part, then the second part's all-reduces (section 11:
 * for small messages; section 12: on nodes), which have no speed test against the library. */
enum op { OP_RS, OP_AG, OP_AR, OP_BC, OP_A2A, OP_RD, OP_HIER, NOPS };

static const struct {
    const char *name;  /* --op */
    const char *func;  /* the student's function */
    const char *lib;   /* the library's counterpart */
    enum pl_coll_kind kind;
    const char *section; /* of the handout */
} OPS[NOPS] = {
    {"reduce_scatter", "ring_reduce_scatter", "pl_reduce_scatter", PL_REDUCE_SCATTER, "3"},
    {"all_gather", "ring_all_gather", "pl_all_gather", PL_ALL_GATHER, "4"},
    {"all_reduce", "ring_all_reduce", "pl_all_reduce", PL_ALL_REDUCE, "5"},
    {"broadcast", "pipelined_broadcast", "pl_broadcast", PL_BROADCAST, "6"},
    {"all_to_all", "pairwise_all_to_all", "pl_all_to_all", PL_ALL_TO_ALL, "7"},
    {"recursive_doubling", "recursive_doubling_all_reduce", "pl_all_reduce", PL_ALL_REDUCE,
     "11"},
    {"hierarchical", "hierarchical_all_reduce", "pl_all_reduce", PL_ALL_REDUCE, "12"},
};

/* Values in [-DATA_MAX, DATA_MAX]: sums over 8 ranks stay far below 2^24, so fp32 sums are
 * exact and results can be compared bit for bit. */
#define DATA_MAX 64
/* Put in every element the student must write, so an element never written is told apart
 * from one written wrong. Exactly representable, and no sum of inputs can reach it. */
#define SENTINEL (-999999.0f)
/* The cluster the second part's times are modelled on. */
#define MODEL_PROFILE "dgx-h100"
#define PERF_ROUNDS 6
#define PERF_BATCHES 5
/* The speed bar on NCCL, against its Ring/Simple collective (before_init): a ring of separate
 * point-to-point launches and reduction kernels reads each block twice and waits between
 * steps where NCCL's kernel fuses them (docs/gpu.md); MPI keeps GR_PERF_FULL_RATIO. */
#define LAB01_NCCL_BAR 0.5

/* ---- counting what the student's code receives, and where its buffers lie ---- */
/* The ledger records the bytes a rank sends; these wrappers (linked with --wrap) add the
 * bytes it receives, which is how a rank that collects everything is spotted. They also
 * place every buffer the code hands to a message or to coll_reduce / coll_copy: scratch on
 * the stack or in static storage never passes through the memory ledger (unseen.h). */

static int counting;
/* recv_only_calls: pl_recv and pl_irecv, which send nothing */
static double recv_bytes, recv_only_calls;

void __real_pl_send(struct pl_comm *comm, const float *buf, size_t count, int peer, int tag);
struct pl_handle *__real_pl_isend(struct pl_comm *comm, const float *buf, size_t count,
                                  int peer, int tag);
void __real_pl_recv(struct pl_comm *comm, float *buf, size_t count, int peer, int tag);
void __real_pl_sendrecv(struct pl_comm *comm, const float *send, size_t send_count, int dest,
                        float *recv, size_t recv_count, int src, int tag);
struct pl_handle *__real_pl_irecv(struct pl_comm *comm, float *buf, size_t count, int peer,
                                  int tag);
void __real_pl_accumulate(float *dst, const float *src, size_t n);
void __real_pl_copy(float *dst, const float *src, size_t n);

void __wrap_pl_send(struct pl_comm *comm, const float *buf, size_t count, int peer, int tag)
{
    if (count) gr_unseen_place(buf, "pl_send", "buffer", -2, "");
    __real_pl_send(comm, buf, count, peer, tag);
}

struct pl_handle *__wrap_pl_isend(struct pl_comm *comm, const float *buf, size_t count,
                                  int peer, int tag)
{
    if (count) gr_unseen_place(buf, "pl_isend", "buffer", -2, "");
    return __real_pl_isend(comm, buf, count, peer, tag);
}

void __wrap_pl_recv(struct pl_comm *comm, float *buf, size_t count, int peer, int tag)
{
    if (counting) {
        recv_bytes += 4.0 * (double)count;
        recv_only_calls++;
    }
    if (count) gr_unseen_place(buf, "pl_recv", "buffer", -2, "");
    __real_pl_recv(comm, buf, count, peer, tag);
}

void __wrap_pl_sendrecv(struct pl_comm *comm, const float *send, size_t send_count, int dest,
                        float *recv, size_t recv_count, int src, int tag)
{
    if (counting) recv_bytes += 4.0 * (double)recv_count;
    if (send_count) gr_unseen_place(send, "pl_sendrecv", "send buffer", -2, "");
    if (recv_count) gr_unseen_place(recv, "pl_sendrecv", "receive buffer", -2, "");
    __real_pl_sendrecv(comm, send, send_count, dest, recv, recv_count, src, tag);
}

struct pl_handle *__wrap_pl_irecv(struct pl_comm *comm, float *buf, size_t count, int peer,
                                  int tag)
{
    if (counting) {
        recv_bytes += 4.0 * (double)count;
        recv_only_calls++;
    }
    if (count) gr_unseen_place(buf, "pl_irecv", "buffer", -2, "");
    return __real_pl_irecv(comm, buf, count, peer, tag);
}

void __wrap_pl_accumulate(float *dst, const float *src, size_t n)
{
    if (n) {
        gr_unseen_place(dst, "coll_reduce", "destination", -2, "");
        gr_unseen_place(src, "coll_reduce", "source", -2, "");
    }
    __real_pl_accumulate(dst, src, n);
}

void __wrap_pl_copy(float *dst, const float *src, size_t n)
{
    if (n) {
        gr_unseen_place(dst, "coll_copy", "destination", -2, "");
        gr_unseen_place(src, "coll_copy", "source", -2, "");
    }
    __real_pl_copy(dst, src, n);
}

/* ---- a collectives.c from before the second part ---- */
/* It defines neither of the second part's functions. These weak stand-ins let it link and
 * have its first part graded as before, the second reported as not written yet; the code
 * under test's own definitions win at link time (the keep-list leaves weak symbols global). */

__attribute__((weak)) void recursive_doubling_all_reduce(struct pl_comm *comm, float *buf,
                                                         size_t count)
{
    (void)comm;
    (void)buf;
    (void)count;
    lab_todo("recursive_doubling_all_reduce", "11");
}

__attribute__((weak)) void hierarchical_all_reduce(struct pl_comm *comm, float *buf,
                                                   size_t count)
{
    (void)comm;
    (void)buf;
    (void)count;
    lab_todo("hierarchical_all_reduce", "12");
}

/* ---- one case: a size (and root) on the world or on a split group ---- */

struct test_case {
    size_t count;  /* the buffer (all-to-all: one block) */
    int root;      /* broadcast */
    int split;     /* 1: run on two interleaved groups with reversed rank order */
    char why[96];  /* what the case is for, in messages */
};

/* What one rank saw, gathered to rank 0 as plain bytes. */
struct verdict {
    int n, rank, world_rank;   /* the group this rank ran in */
    int root;
    long nwrong, first_bad, nonfinite, first_nonfinite;
    float expected, got;         /* at first_bad */
    float nonfinite_expected;
    double max_abs, max_rel;
    double sent, received;       /* bytes, point to point */
    double sent_inter;           /* of sent, bytes that crossed nodes */
    long wrong_in_share;         /* two-level: wrong elements of the rank's own share */
    double modelled;             /* the call's ledger on dgx-h100 (pl_ledger_modelled_time) */
    double sent_msgs;            /* point-to-point calls */
    double sends;                /* of them, those that sent a message */
    double coll_calls;           /* library collectives called */
    int coll_kind;
    double leaked, scratch;      /* bytes */
    int in_flight;               /* operations still in flight on comm after the call */
    struct gr_unseen unseen;     /* a buffer of the call's outside the memory ledger */
    double seconds;
};

static enum op the_op;
static uint64_t base_seed = 1;

static size_t buffer_count(enum op op, size_t count, int n)
{
    return op == OP_A2A ? count * (size_t)n : count;
}

/* The input of the rank with world rank w: elements [start, start+len) of its buffer. */
static void member_data(uint64_t seed, int w, size_t total, size_t start, size_t len,
                        float *out)
{
    pl_rng_fill_int(out, len, seed, pl_rng_stream("lab01.input"), (uint64_t)w * total + start,
                    -DATA_MAX, DATA_MAX);
}

static void host_fill(float *a, size_t n, float v)
{
    for (size_t i = 0; i < n; i++) a[i] = v;
}

/* Builds this rank's input (host) and the result it must end with (expected, with NAN where
 * any value is allowed). */
static void make_case(enum op op, const struct test_case *c, uint64_t seed, struct pl_comm *comm,
                      float *in, float *in2, float *expected)
{
    int n = pl_comm_size(comm), r = pl_comm_rank(comm);
    size_t total = buffer_count(op, c->count, n), off, len;
    int w = pl_comm_world_rank(comm, r);
    float *tmp = malloc((total ? total : 1) * sizeof *tmp);
    switch (op) {
    case OP_RS:
    case OP_AR:
    case OP_RD:
    case OP_HIER:
        member_data(seed, w, total, 0, total, in);
        host_fill(expected, total, 0.0f);
        for (int m = 0; m < n; m++) {
            member_data(seed, pl_comm_world_rank(comm, m), total, 0, total, tmp);
            for (size_t i = 0; i < total; i++) expected[i] += tmp[i];
        }
        if (op == OP_RS) {
            len = coll_chunk(total, n, r, &off);
            for (size_t i = 0; i < total; i++)
                if (i < off || i >= off + len) expected[i] = NAN;
        }
        break;
    case OP_AG:
        host_fill(in, total, SENTINEL);
        len = coll_chunk(total, n, r, &off);
        member_data(seed, w, total, off, len, in + off);
        for (int m = 0; m < n; m++) {
            len = coll_chunk(total, n, m, &off);
            member_data(seed, pl_comm_world_rank(comm, m), total, off, len, expected + off);
        }
        break;
    case OP_BC:
        if (r == c->root) member_data(seed, w, total, 0, total, in);
        else host_fill(in, total, SENTINEL);
        member_data(seed, pl_comm_world_rank(comm, c->root), total, 0, total, expected);
        break;
    case OP_A2A:
        member_data(seed, w, total, 0, total, in);
        host_fill(in2, total, SENTINEL);
        for (int m = 0; m < n; m++)
            member_data(seed, pl_comm_world_rank(comm, m), total, (size_t)r * c->count,
                        c->count, expected + (size_t)m * c->count);
        break;
    default:
        break;
    }
    free(tmp);
}

static void call_student(enum op op, struct pl_comm *comm, float *buf, float *buf2, size_t count,
                         int root)
{
    switch (op) {
    case OP_RS: ring_reduce_scatter(comm, buf, count); break;
    case OP_AG: ring_all_gather(comm, buf, count); break;
    case OP_AR: ring_all_reduce(comm, buf, count); break;
    case OP_BC: pipelined_broadcast(comm, buf, count, root); break;
    case OP_A2A: pairwise_all_to_all(comm, buf, buf2, count); break;
    case OP_RD: recursive_doubling_all_reduce(comm, buf, count); break;
    case OP_HIER: hierarchical_all_reduce(comm, buf, count); break;
    default: break;
    }
}

static void compare(const float *got, const float *expected, size_t total, struct verdict *v)
{
    v->first_bad = v->first_nonfinite = -1;
    for (size_t i = 0; i < total; i++) {
        float e = expected[i], g = got[i];
        if (isnan(e)) continue;
        if (!isfinite(g)) {
            if (v->nonfinite++ == 0) {
                v->first_nonfinite = (long)i;
                v->nonfinite_expected = e;
            }
        }
        if (g != e) {
            if (v->nwrong++ == 0) {
                v->first_bad = (long)i;
                v->expected = e;
                v->got = g;
            }
            double d = fabs((double)g - (double)e);
            if (!(d <= v->max_abs)) v->max_abs = d; /* NaN wins */
            double rel = d / (fabs((double)e) > 1 ? fabs((double)e) : 1.0);
            if (!(rel <= v->max_rel)) v->max_rel = rel;
        }
    }
}

/* Calls the student's collective once, and records in v what the ledgers saw: bytes sent
 * and received, library collectives called, memory left and held at peak, and the time. */
static void observe_call(enum op op, struct pl_comm *comm, float *buf, float *buf2, size_t count,
                         int root, struct verdict *v)
{
    struct pl_mem_stats m0, m1;
    pl_mem_get_stats(&m0);
    pl_mem_reset_peak();
    struct pl_ledger l0 = *pl_ledger(), l1, d;
    recv_bytes = recv_only_calls = 0;
    counting = 1;
    char where[96];
    snprintf(where, sizeof where, "in %s, before its first message", OPS[op].func);
    pl_trace_where(where);
    PL_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = pl_clock();
    gr_unseen_begin(1);
    call_student(op, comm, buf, buf2, count, root);
    v->unseen = gr_unseen_end();
    v->seconds = pl_clock() - t0;
    counting = 0;
    /* What a supervisor reads if the other ranks never come back. */
    snprintf(where, sizeof where, "returned from %s, waiting for the other ranks",
             OPS[op].func);
    pl_trace_where(where);
    l1 = *pl_ledger();
    pl_mem_get_stats(&m1);
    pl_ledger_diff(&l1, &l0, &d);
    v->sent = pl_ledger_bytes(&d, PL_P2P, -1);
    v->sent_inter = pl_ledger_bytes(&d, PL_P2P, PL_LINK_INTER);
    v->modelled = pl_ledger_modelled_time(&d, pl_profile_find(MODEL_PROFILE));
    v->sent_msgs = (double)d.calls[PL_P2P];
    v->sends = v->sent_msgs - recv_only_calls;
    v->received = recv_bytes;
    v->coll_kind = -1;
    for (int k = 0; k < PL_NKINDS; k++) {
        if (k == PL_P2P || k == PL_BARRIER) continue;
        if (d.calls[k] > 0 && v->coll_kind < 0) v->coll_kind = k;
        v->coll_calls += (double)d.calls[k];
    }
    v->leaked = (double)m1.current_total - (double)m0.current_total;
    v->scratch = (double)m1.peak_total - (double)m0.current_total;
}

/* Collective: frees the case's communicator unless some rank still has an operation in flight
 * on it (pl_comm_free would stop the job with a usage error; the verdict says so instead and
 * the communicator is left to the end of the run). */
static void free_case_comm(struct pl_comm *comm)
{
    int mine = pl_comm_in_flight(comm), most = 0;
    PL_CHECK_MPI(MPI_Allreduce(&mine, &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (!most) pl_comm_free(comm);
}

/* Runs one case on this rank and fills its verdict. Every case runs on a communicator of
 * its own, split from the world (the same ranks in the same order, or two interleaved
 * halves in reverse order), and freed after the call, as a caller that owns one would. */
static void run_case(enum op op, const struct test_case *c, int index, struct verdict *v)
{
    struct pl_comm *world = pl_comm_world(), *comm;
    int wr = pl_rank(), wn = pl_size();
    if (c->split) comm = pl_comm_split(world, wr % 2, wn - wr, "half");
    else comm = pl_comm_split(world, 0, wr, "world"); /* the same ranks, named alike */
    int n = pl_comm_size(comm), r = pl_comm_rank(comm);
    size_t total = buffer_count(op, c->count, n);
    uint64_t seed = pl_mix64(base_seed * 1000003u + (uint64_t)index);
    int root = c->root % n;
    struct test_case cc = *c;
    cc.root = root;

    size_t alloc = total ? total : 1;
    float *in = malloc(alloc * sizeof *in), *in2 = malloc(alloc * sizeof *in2);
    float *expected = malloc(alloc * sizeof *expected), *got = malloc(alloc * sizeof *got);
    make_case(op, &cc, seed, comm, in, in2, expected);
    float *buf = pl_comm_buf_alloc(total, "lab01 buffer");
    float *buf2 = pl_comm_buf_alloc(op == OP_A2A ? total : 0, "lab01 recv");
    pl_copy_from_host(buf, in, total);
    if (op == OP_A2A) pl_copy_from_host(buf2, in2, total);

    memset(v, 0, sizeof *v);
    v->n = n;
    v->rank = r;
    v->world_rank = wr;
    v->root = root;
    observe_call(op, comm, buf, buf2, c->count, root, v);
    v->in_flight = pl_comm_in_flight(comm);

    pl_copy_to_host(got, op == OP_A2A ? buf2 : buf, total);
    compare(got, expected, total, v);
    if (op == OP_HIER) { /* its own share: chunk l (its place on its node) of the node's L */
        int L = pl_topo()->per_node;
        size_t off, len = coll_chunk(total, L, r % L, &off);
        for (size_t i = off; i < off + len; i++) v->wrong_in_share += got[i] != expected[i];
    }

    pl_comm_buf_free(buf2);
    pl_comm_buf_free(buf);
    free(in);
    free(in2);
    free(expected);
    free(got);
    free_case_comm(comm);
}

/* Where element i of a rank's result sits, in the words of the handout. */
static void locate(enum op op, size_t count, int n, long i, char *buf, size_t len)
{
    if (op == OP_A2A) {
        size_t b = count ? (size_t)i / count : 0;
        snprintf(buf, len, "block %zu (from rank %zu), element %zu of %zu", b, b,
                 count ? (size_t)i % count : 0, count);
        return;
    }
    if (op == OP_BC || op >= OP_RD) {
        snprintf(buf, len, "element %ld of %zu", i, count);
        return;
    }
    for (int k = 0; k < n; k++) {
        size_t off, l = coll_chunk(count, n, k, &off);
        if ((size_t)i >= off && (size_t)i < off + l) {
            snprintf(buf, len, "chunk %d (elements %zu..%zu), element %ld", k, off,
                     off + l - 1, i);
            return;
        }
    }
    snprintf(buf, len, "element %ld", i);
}

/* n is the world size; a split case runs on two groups made from it. */
static void describe_case(const struct test_case *c, int n, char *buf, size_t len)
{
    char who[128], root[32] = "";
    if (c->split)
        snprintf(who, sizeof who, "%d ranks split in groups of %d and %d, group ranks in "
                 "reverse world order", n, (n + 1) / 2, n / 2);
    else
        snprintf(who, sizeof who, "%d ranks", n);
    if (the_op == OP_BC) snprintf(root, sizeof root, ", root %d", c->split ? 0 : c->root % n);
    snprintf(buf, len, "count %zu%s%s, %s (%s)", c->count, the_op == OP_A2A ? " per block" : "",
             root, who, c->why);
}

static int doubling_messages(int n);

/* 1 when the only wrong ranks of a recursive doubling on a rank count that is not a power
 * of two are among those that fold into a neighbour (the even ones of the first 2(n-p)). */
static int doubling_left_out(const struct verdict *all, int nranks)
{
    int n = all[0].n, p = 1;
    while (2 * p <= n) p *= 2;
    if (p == n || all[0].n != nranks) return 0;
    for (int i = 0; i < nranks; i++) {
        int folded = all[i].rank < 2 * (n - p) && all[i].rank % 2 == 0;
        if (all[i].nwrong && !folded) return 0;
    }
    return 1;
}

/* 1 when a rank of the two-level all-reduce got exactly the elements outside its own share
 * (its place l on its node: chunk l of the node's L) wrong. */
static int right_only_on_share(const struct test_case *c, const struct verdict *v)
{
    size_t off, len = coll_chunk(c->count, pl_topo()->per_node, v->rank % pl_topo()->per_node,
                                 &off);
    return len < c->count && v->nwrong > 0 && v->wrong_in_share == 0;
}

/* Returns 1 when every rank's result is right; otherwise says why (once). */
static int judge_correct(const struct test_case *c, const struct verdict *all, int nranks,
                         int divisible_passed)
{
    char cs[384], where[160];
    for (int i = 0; i < nranks; i++) {
        if (all[i].coll_calls > 0) {
            gr_say("correct", "rank %d called the library's %s: this lab builds every collective "
                "from pl_send/pl_recv/pl_sendrecv/pl_isend/pl_irecv, so library collectives "
                "do not count (handout section 2)", i,
                pl_coll_kind_name((enum pl_coll_kind)all[i].coll_kind));
            return 0;
        }
    }
    for (int i = 0; i < nranks; i++) {
        const struct verdict *v = &all[i];
        if (!v->nwrong) continue;
        describe_case(c, nranks, cs, sizeof cs);
        size_t total = buffer_count(the_op, c->count, v->n);
        gr_say("correct", "wrong result for %s", cs);
        const char *who = c->split ? "group rank" : "rank";
        if (v->nonfinite) {
            locate(the_op, c->count, v->n, v->first_nonfinite, where, sizeof where);
            gr_say("correct", "%s %d: %s is not a number (expected %g); %ld of %zu elements are "
                "NaN or Inf. NaN comes from arithmetic on memory that was never written "
                "(a scratch buffer received into the wrong place) or from 0/0", who, v->rank,
                where, (double)v->nonfinite_expected, v->nonfinite, total);
            return 0;
        }
        locate(the_op, c->count, v->n, v->first_bad, where, sizeof where);
        gr_say("correct", "%s %d: %s: expected %g, got %g; %ld of %zu elements wrong, max abs "
            "error %g, max rel error %.3g", who, v->rank, where, (double)v->expected,
            (double)v->got, v->nwrong, total, v->max_abs, v->max_rel);
        if (v->got == SENTINEL)
            gr_say("correct", "%g is the value the grader put there before the call: that "
                "element was never written (a chunk not received, or received elsewhere)",
                (double)SENTINEL);
        if (the_op == OP_HIER && right_only_on_share(c, v))
            gr_say("correct", "rank %d is right on its own 1/%d share of the buffer and wrong "
                "everywhere else: every rank must end with every share, gathered again inside "
                "its node (section 12)", v->rank, pl_topo()->per_node);
        if (the_op == OP_RD && doubling_left_out(all, nranks))
            gr_say("correct", "only ranks that are not among the %d exchanging ones are wrong: "
                "a rank folded into its neighbour must get the finished sum back from it "
                "(section 11)", 1 << (doubling_messages(v->n) - 1));
        if (divisible_passed && (c->count % (size_t)v->n) != 0 && the_op != OP_BC &&
            the_op != OP_A2A && the_op < OP_RD)
            gr_say("correct", "sizes that %d divides passed, this one does not divide: cut chunks "
                "with coll_chunk, which gives the first count %% n chunks one extra element",
                v->n);
        return 0;
    }
    for (int i = 0; i < nranks; i++) {
        if (!all[i].in_flight) continue;
        describe_case(c, nranks, cs, sizeof cs);
        gr_say("correct", "%s: the result is right, but when %s returned, %s %d still had %d "
            "operation(s) in flight on the communicator it was given: a handle of pl_isend or "
            "pl_irecv was never waited for. The caller frees that communicator after the call, "
            "and pl_comm_free refuses one with operations in flight; pl_wait (or pl_wait_all) "
            "every handle before the collective returns (handout section 2)", cs,
            OPS[the_op].func, c->split ? "group rank" : "rank", all[i].rank,
            all[i].in_flight);
        return 0;
    }
    return 1;
}

/* The bandwidth-optimal bytes a rank sends, as [lo, hi]: equal unless n does not divide the
 * count, when chunks differ by one element and the volume depends on which ones a rank
 * forwards. */
static void optimal_sent(enum op op, size_t count, int n, double *lo, double *hi)
{
    double fl = (double)(count / (size_t)n), ce = (double)((count + (size_t)n - 1) / (size_t)n);
    switch (op) {
    case OP_RS:
    case OP_AG:
        *lo = 4.0 * (n - 1) * fl;
        *hi = 4.0 * (n - 1) * ce;
        break;
    case OP_AR:
        *lo = 8.0 * (n - 1) * fl;
        *hi = 8.0 * (n - 1) * ce;
        break;
    case OP_A2A:
        *lo = *hi = 4.0 * (n - 1) * (double)count;
        break;
    default: /* broadcast is judged on the total and the busiest rank */
        *lo = 0;
        *hi = 8.0 * (double)count;
        break;
    }
}

static const char *formula(enum op op)
{
    switch (op) {
    case OP_RS:
    case OP_AG: return "(n-1)/n x S";
    case OP_AR: return "2(n-1)/n x S";
    case OP_A2A: return "(n-1)/n x S";
    default: return "S";
    }
}

/* A buffer of at least this many bytes is cut into segments by a pipelined broadcast
 * (a segment of the handout's size, or smaller, leaves at least two). */
#define BCAST_PIPELINED_BYTES (1024.0 * 1024.0)

/* Pipelined: from 3 ranks on (where a chain of whole buffers and a pipeline differ), a rank
 * that forwards a large buffer sends it in two messages or more, so the next rank forwards
 * the first segment while the second is still arriving. group: the split group, -1 none. */
static int judge_broadcast_segments(const struct verdict *all, int nranks, int group, int gn,
                                    const char *cs, double S)
{
    char a[32];
    if (gn < 3 || S < BCAST_PIPELINED_BYTES) return 1;
    for (int j = 0; j < nranks; j++) {
        if (group >= 0 && all[j].world_rank % 2 != group) continue;
        /* its sends only: receiving in segments and forwarding the whole is no pipeline */
        if (all[j].sent <= 0 || all[j].sent / all[j].sends <= S / 2) continue;
        gr_say("traffic",
               "%s: rank %d sent the %s buffer in %.0f message(s): the next rank can forward "
               "only once the whole buffer has arrived, so the time grows as (n-1) x S/B. A "
               "pipelined broadcast cuts the buffer into segments and forwards segment k "
               "while segment k+1 arrives (handout section 6)",
               cs, all[j].rank, pl_format_bytes(S, a, sizeof a), all[j].sends);
        return 0;
    }
    return 1;
}

/* Broadcast: every spanning tree sends n-1 copies in all; a pipelined chain one per rank, a
 * binary tree at most two (collectives.h allows both), a flat tree n-1 from the root: refused
 * where that is more than two, from 4 ranks on (on 3 the flat tree is the binary tree). Split
 * cases hold two groups. */
static int judge_broadcast_traffic(const struct test_case *c, const struct verdict *all,
                                   int nranks, const char *cs, double S)
{
    char a[32], b[32];
    for (int g = 0; g < (c->split ? 2 : 1); g++) {
        double sum = 0, max = 0;
        int busiest = -1, gn = 0;
        for (int j = 0; j < nranks; j++) {
            if (c->split && all[j].world_rank % 2 != g) continue;
            gn = all[j].n;
            sum += all[j].sent;
            if (busiest < 0 || all[j].sent > max) {
                max = all[j].sent;
                busiest = j;
            }
        }
        if (busiest < 0) continue;
        if (sum != (gn - 1) * S) {
            gr_say("traffic",
                   "%s: the ranks sent %s in all; a broadcast sends each of the "
                   "n-1 other ranks one copy: (n-1) x S = %s",
                   cs, pl_format_bytes(sum, a, sizeof a),
                   pl_format_bytes((gn - 1) * S, b, sizeof b));
            return 0;
        }
        /* A pipelined chain: every rank but the last forwards one copy; a tree two. */
        if (max > 2 * S) {
            gr_say("traffic",
                   "%s: rank %d sent %s, %.0f copies of the %s buffer: a rank that "
                   "sends everyone a copy makes its own link carry (n-1) x S while the other "
                   "links idle. In a pipelined chain every rank forwards one copy (in a binary "
                   "tree at most two), so the time stays near S/B whatever n (handout "
                   "section 6)",
                   cs, all[busiest].rank, pl_format_bytes(max, a, sizeof a), max / S,
                   pl_format_bytes(S, b, sizeof b));
            return 0;
        }
        if (!judge_broadcast_segments(all, nranks, c->split ? g : -1, gn, cs, S)) return 0;
    }
    return 1;
}

/* ---- the second part: latency (section 11) and nodes (section 12) ---- */

/* The most messages a rank of recursive doubling sends on n ranks: log2 n exchanges, and
 * one more (handing the result back) when n is not a power of two. */
static int doubling_messages(int n)
{
    int k = 0;
    while ((2 << k) <= n) k++; /* floor(log2 n) */
    return (1 << k) == n ? k : k + 1;
}

static int judge_doubling_traffic(const struct test_case *c, const struct verdict *all,
                                  int nranks, int last)
{
    static double most_msgs, most_x;
    static int at_n;
    char cs[384], a[32];
    describe_case(c, nranks, cs, sizeof cs);
    for (int i = 0; i < nranks; i++) {
        const struct verdict *v = &all[i];
        int n = v->n, k = doubling_messages(n);
        if (n < 2) continue;
        double S = 4.0 * (double)c->count;
        if (v->sends > k || v->sent > k * S) {
            gr_say("traffic", "%s: rank %d sent %.0f messages, %s; recursive doubling on %d "
                   "ranks sends at most %d (floor(log2 n)%s), each the whole buffer. Every "
                   "message pays the link's latency alpha: a ring's %d steps pay it %d times, "
                   "which is what small messages are made of (section 11)", cs, v->rank,
                   v->sends, pl_format_bytes(v->sent, a, sizeof a), n, k,
                   (1 << (k - 1)) * 2 == n ? "" : " + 1 to hand the result back",
                   2 * (n - 1), 2 * (n - 1));
            return 0;
        }
        if (S > 0 && v->sends >= most_msgs) {
            most_msgs = v->sends;
            most_x = v->sent / S > most_x ? v->sent / S : most_x;
            at_n = n;
        }
    }
    if (last && at_n > 1)
        gr_say("traffic", "your busiest rank on %d ranks sent %.0f message%s, %.1f times the "
               "buffer in all, where a ring rank sends %d of 1/%d of it: each message pays the "
               "link's latency alpha once, whatever its size. Where that wins in time is the "
               "crossover test's (section 11)", at_n, most_msgs, most_msgs == 1 ? "" : "s",
               most_x, 2 * (at_n - 1), at_n);
    return 1;
}

/* ---- the crossover, replayed: the student's doubling against the student's ring ---- */

static void call_rd(struct pl_comm *comm, float *buf, size_t count)
{
    recursive_doubling_all_reduce(comm, buf, count);
}

static void call_ring(struct pl_comm *comm, float *buf, size_t count)
{
    ring_all_reduce(comm, buf, count);
}

/* Rank 0, after tracing the student's ring: 1 when it was still a stub, said in part. */
static int ring_is_stub(const char *part)
{
    const char *what = pl_todo_what();
    if (!what) return 0;
    gr_say(part, "not graded: this part races your recursive doubling against your "
           "ring_all_reduce, and %s is still a stub (see %s section %s)", what, gr_handout(),
           pl_todo_section());
    return 1;
}

/* The student's two traces, and what the replay of both at one size gave. */
struct race {
    const struct pl_merged_trace *mine, *ring;
    double S0; /* bytes of the traced calls */
    const struct pl_profile *prof;
    char err[256];
    int failed;
};

/* Rank 0: modelled doubling minus ring at S bytes (negative: doubling is faster). */
static double race_gap(struct race *r, double S)
{
    double a = lab01_replay(r->mine, S / r->S0, r->prof, pl_topo(), r->err, sizeof r->err);
    double b = a < 0 ? -1 : lab01_replay(r->ring, S / r->S0, r->prof, pl_topo(), r->err,
                                         sizeof r->err);
    if (a < 0 || b < 0) r->failed = 1;
    return a - b;
}

/* Collective. In the alpha-beta model a ring all-reduce costs 2(n-1)(alpha + S/(nB)) and
 * recursive doubling k(alpha + S/B), k = log2 m exchanges (m the largest power of two not
 * above n) plus 2 rounds when ranks are folded in, so doubling wins below
 * S* = alpha B (2(n-1) - k) / (k - 2(n-1)/n). The student's two all-reduces, traced once and
 * replayed on the profile with their messages scaled, must cross within a factor of 2 of
 * S*: doubling faster at an eighth of S*, slower at 8 times S*. */
static int judge_crossover(void)
{
    int n = pl_size();
    size_t c0 = 1024 * (size_t)n;
    struct pl_merged_trace mine, ring;
    lab01_trace(call_rd, c0, &mine);
    lab01_trace(call_ring, c0, &ring);
    int ok = 1;
    if (pl_rank() == 0 && ring_is_stub("crossover")) {
        ok = 0;
    } else if (pl_rank() == 0) {
        struct race r = {&mine, &ring, 4.0 * (double)c0, pl_profile_find(MODEL_PROFILE), "", 0};
        double alpha = r.prof->latency[PL_LINK_INTRA], B = r.prof->bw[PL_LINK_INTRA];
        int m = 1, l = 0;
        while (2 * m <= n) {
            m *= 2;
            l++;
        }
        int k = l + (m < n ? 2 : 0);
        double star = alpha * B * (2.0 * (n - 1) - k) / (k - 2.0 * (n - 1) / n);
        char a[32], b[32], e[32];
        pl_format_bytes(star, e, sizeof e);
        double lo = star / 8, hi = star * 8, glo = race_gap(&r, lo), ghi = race_gap(&r, hi);
        if (r.failed) {
            gr_say("crossover", "your all-reduces' messages could not be replayed: %s", r.err);
            ok = 0;
        } else if (!(glo < 0) || !(ghi > 0)) {
            gr_say("crossover", "on %s's NVLink (alpha %.1f us, B %.0f GB/s), %d ranks: the "
                   "alpha-beta model puts the crossover at S* = alpha B (2(n-1) - k) / (k - "
                   "2(n-1)/n) = %s (k = %d rounds). Replayed, your recursive doubling is %s "
                   "than your ring at S*/8 = %s (by %.2f us) and %s at 8 S* = %s (by %.2f us): "
                   "it should win below S* and lose above (section 11)", MODEL_PROFILE,
                   alpha * 1e6, B / 1e9, n, e, k, glo < 0 ? "faster" : "not faster",
                   pl_format_bytes(lo, a, sizeof a), fabs(glo) * 1e6,
                   ghi > 0 ? "slower" : "not slower", pl_format_bytes(hi, b, sizeof b),
                   fabs(ghi) * 1e6);
            ok = 0;
        } else {
            for (int it = 0; it < 40 && !r.failed; it++) {
                double mid = sqrt(lo * hi);
                if (race_gap(&r, mid) < 0) lo = mid;
                else hi = mid;
            }
            double got = sqrt(lo * hi);
            ok = !r.failed && got >= star / 2 && got <= star * 2;
            gr_say("crossover", "%d ranks on %s: replayed, your recursive doubling and your "
                   "ring cross at %s; the alpha-beta model says S* = %s (k = %d rounds, alpha "
                   "%.1f us, B %.0f GB/s)%s", n, MODEL_PROFILE,
                   pl_format_bytes(got, a, sizeof a), e, k, alpha * 1e6, B / 1e9,
                   ok ? "" : ": more than a factor of 2 apart, so one of them sends more "
                             "messages or bytes than its algorithm needs (section 11)");
        }
    }
    pl_todo_reset();
    pl_trace_merged_free(&ring);
    pl_trace_merged_free(&mine);
    return ok;
}

/* The most bytes a rank of the two-level all-reduce sends across nodes: 2(N-1)/N of its
 * 1/L share, chunks rounded up. */
static double across_bound(size_t count, int N, int L)
{
    size_t share = (count + (size_t)L - 1) / (size_t)L;
    return 4.0 * 2.0 * (N - 1) * (double)((share + (size_t)N - 1) / (size_t)N);
}

static int judge_hierarchical_traffic(const struct test_case *c, const struct verdict *all,
                                      int nranks, int last)
{
    const struct pl_topo *t = pl_topo();
    const int N = t->nodes, L = t->per_node, n = all[0].n;
    const double S = 4.0 * (double)c->count, bound = across_bound(c->count, N, L);
    const double flat = 2.0 * (n - 1) / n * S; /* a ring rank next to another node */
    /* Inside the node a rank receives L-1 chunks of 1/L in the reduce-scatter and as many in
     * the all-gather, and across nodes what it sends there. A rank that collects its node's
     * whole buffers receives (L-1) x S before anything leaves the node. */
    const double chunk = 4.0 * (double)((c->count + (size_t)L - 1) / (size_t)L);
    const double received_bound = 2.0 * (L - 1) * chunk + bound;
    char cs[384], a[32], b[32], e[32];
    describe_case(c, nranks, cs, sizeof cs);
    double most = 0, slowest = 0;
    for (int i = 0; i < nranks; i++) {
        const struct verdict *v = &all[i];
        if (v->sent_inter > bound) {
            gr_say("traffic", "%s: rank %d sent %s across nodes, where a rank of the two-level "
                   "all-reduce sends at most 2(N-1)/N of its 1/L share: %s for N = %d nodes of "
                   "L = %d ranks. A flat ring sends %s across on each link between two nodes. "
                   "Reduce inside the node first, so that only 1/L of the buffer per rank goes "
                   "over the network (section 12)", cs, v->rank,
                   pl_format_bytes(v->sent_inter, a, sizeof a),
                   pl_format_bytes(bound, b, sizeof b), N, L,
                   pl_format_bytes(flat, e, sizeof e));
            /* One leader per node all-reducing the whole node sum: within that volume. */
            if (L > 1 && v->sent_inter <= across_bound(c->count, N, 1))
                gr_say("traffic", "rank %d moved its node's whole sum across: one leader per "
                       "node leaves the other %d ranks' network links idle, so the network "
                       "part takes L = %d times longer than it needs. Give each rank of the "
                       "node 1/L of the buffer to all-reduce across nodes (section 12)",
                       v->rank, L - 1, L);
            else if (N > 2)
                gr_say("traffic", "here the ranks run on %d nodes: take each rank's node from "
                       "coll_node_of; code that takes the nodes to be two halves of the ranks "
                       "runs its node rings across the network", N);
            return 0;
        }
        if (v->received > received_bound) {
            gr_say("traffic", "%s: rank %d received %s, where a rank of the two-level "
                   "all-reduce receives at most %s: 2(L-1) chunks of 1/L inside its node "
                   "(L = %d) and its share across nodes. A rank that collects the node's "
                   "whole buffers does the node's work alone while its neighbours' links "
                   "idle; reduce-scatter inside the node instead, so each rank reduces 1/L "
                   "(section 12)", cs, v->rank, pl_format_bytes(v->received, a, sizeof a),
                   pl_format_bytes(received_bound, b, sizeof b), L);
            return 0;
        }
        if (v->sent_inter > most) most = v->sent_inter;
        if (v->modelled > slowest) slowest = v->modelled;
    }
    const struct pl_profile *p = pl_profile_find(MODEL_PROFILE);
    double ring = pl_coll_time(PL_ALL_REDUCE, n, S, p->latency[PL_LINK_INTER],
                               p->bw[PL_LINK_INTER]);
    if (S >= 1048576.0 && slowest >= ring) {
        gr_say("traffic", "%s: modelled on %s, your slowest rank takes %.1f us, no faster than a "
               "flat ring's %.1f us: the network bytes are few but the steps are many or "
               "serial (section 12)", cs, MODEL_PROFILE, slowest * 1e6, ring * 1e6);
        return 0;
    }
    if (last)
        gr_say("traffic", "%s: your busiest rank sent %s across nodes (the bound, 2(N-1)/N x "
               "S/L for N = %d, L = %d: %s), where a flat ring sends %s on each link between "
               "nodes; modelled on %s your slowest rank takes %.1f us, a flat ring %.1f us", cs,
               pl_format_bytes(most, a, sizeof a), N, L, pl_format_bytes(bound, e, sizeof e),
               pl_format_bytes(flat, b, sizeof b), MODEL_PROFILE, slowest * 1e6, ring * 1e6);
    return 1;
}

/* Returns 1 when every rank sent the ring's volume; otherwise says why (once). */
static int judge_traffic(const struct test_case *c, const struct verdict *all, int nranks)
{
    int n = all[0].n;
    char cs[384], a[32], b[32], e[32];
    describe_case(c, nranks, cs, sizeof cs);
    double S = 4.0 * (double)buffer_count(the_op, c->count, n);
    if (the_op == OP_BC) return judge_broadcast_traffic(c, all, nranks, cs, S);
    for (int i = 0; i < nranks; i++) {
        const struct verdict *v = &all[i];
        double lo, hi;
        optimal_sent(the_op, c->count, v->n, &lo, &hi);
        if (v->sent >= lo && v->sent <= hi && v->received <= hi) continue;
        /* A rank that moves a whole buffer for each of the n-1 others is a hub; a ring rank
         * moves at most 2(n-1)/n of one. On 2 ranks the two are the same. */
        double whole = 4.0 * (double)c->count * (v->n - 1);
        int funnel = v->n > 2 && whole > 0 && (v->sent >= whole || v->received >= whole);
        if (lo == hi)
            snprintf(e, sizeof e, "%s", pl_format_bytes(lo, a, sizeof a));
        else
            snprintf(e, sizeof e, "%.0f..%.0f B", lo, hi);
        gr_say("traffic", "%s: rank %d sent %s and received %s; a ring rank sends %s = %s%s", cs,
               v->rank, pl_format_bytes(v->sent, a, sizeof a),
               pl_format_bytes(v->received, b, sizeof b), formula(the_op), e,
               lo == hi ? ""
                        : " (n does not divide the count, so chunks differ by one element "
                          "and so may the volumes, by at most one element per step)");
        if (funnel)
            gr_say("traffic", "rank %d moves a whole buffer for every other rank: your algorithm "
                "funnels the data through one rank, whose link carries (n-1) x S where a ring "
                "link carries %s, so its time grows with n. A ring keeps every link equally "
                "busy and the time flat whatever n (handout section 3)", v->rank,
                formula(the_op));
        else if (v->sent > hi)
            gr_say("traffic", "%.0f bytes more than the ring needs: is a chunk sent twice, or a "
                "whole buffer where a chunk would do?", v->sent - hi);
        else
            gr_say("traffic", "%.0f bytes fewer than any correct algorithm sends: were some "
                "messages sent outside pl_send/pl_isend/pl_sendrecv?", lo - v->sent);
        return 0;
    }
    return 1;
}

static int judge_memory(const struct test_case *c, const struct verdict *all, int nranks)
{
    char cs[384], a[32], b[32];
    for (int i = 0; i < nranks; i++) {
        const struct verdict *v = &all[i];
        double S = 4.0 * (double)buffer_count(the_op, c->count, v->n);
        describe_case(c, nranks, cs, sizeof cs);
        if (v->leaked != 0) {
            gr_say("memory", "%s: rank %d still holds %s allocated by %s after it returned: free "
                "every pl_comm_buf_alloc with pl_comm_buf_free", cs, v->rank,
                pl_format_bytes(v->leaked, a, sizeof a), OPS[the_op].func);
            return 0;
        }
        if (v->unseen.where) {
            gr_say("memory", "%s: rank %d: %s lay %s: the memory ledger never sees it, so the "
                "scratch your code holds cannot be measured, and on the GPU build a message "
                "cannot land there. Take scratch from pl_comm_buf_alloc and free it with "
                "pl_comm_buf_free (handout section 3)", cs, v->rank, v->unseen.what,
                gr_unseen_where(v->unseen.where));
            return 0;
        }
        if (v->scratch > S) {
            gr_say("memory", "%s: rank %d held %s of extra buffers at once, more than the %s "
                "buffer itself; %s", cs, v->rank, pl_format_bytes(v->scratch, a, sizeof a),
                pl_format_bytes(S, b, sizeof b),
                the_op == OP_RD ? "doubling needs one buffer of scratch, for the partner's "
                                  "buffer of each exchange, reused from round to round"
                : the_op == OP_HIER ? "the two levels need one chunk of scratch, 1/L of the "
                                      "buffer for the node's ring, which the ring across the "
                                      "nodes can reuse"
                                    : "a ring needs one chunk of scratch");
            return 0;
        }
    }
    return 1;
}

/* ---- check mode ---- */

static int add_case(struct test_case *cs, int k, size_t count, int root, int split,
                    const char *why)
{
    cs[k].count = count;
    cs[k].root = root;
    cs[k].split = split;
    snprintf(cs[k].why, sizeof cs[k].why, "%s", why);
    return k + 1;
}

/* Sizes every implementation must handle; one comes from the seed, so answers cannot be
 * written in advance. */
static int make_cases(enum op op, int n, struct test_case *cs)
{
    int k = 0;
    size_t n_ = (size_t)n;
    size_t rnd = 2001 + 2 * (size_t)(pl_mix64(base_seed ^ 0x1ab01) % 2000); /* odd */
    char why[96];
    if (op == OP_RD) { /* the sizes it is for, and some that are not */
        snprintf(why, sizeof why, "divisible by %d", n);
        k = add_case(cs, k, 64 * n_, 0, 0, why);
        k = add_case(cs, k, n_ + 1, 0, 0, "one more element than ranks");
        k = add_case(cs, k, 1, 0, 0, "one element");
        k = add_case(cs, k, 0, 0, 0, "empty");
        k = add_case(cs, k, rnd, 0, 0, "a size drawn from the seed");
        k = add_case(cs, k, 65537, 0, 0, "256 KiB and one element");
        if (n >= 3) k = add_case(cs, k, 1009, 0, 1, "ranks of a group are not world ranks");
        return k;
    }
    if (op == OP_HIER) { /* the world on its nodes */
        snprintf(why, sizeof why, "divisible by %d", n);
        k = add_case(cs, k, 64 * n_, 0, 0, why);
        k = add_case(cs, k, n_ + 1, 0, 0, "one more element than ranks");
        k = add_case(cs, k, 1009, 0, 0, "prime");
        k = add_case(cs, k, 1, 0, 0, "one element");
        k = add_case(cs, k, 0, 0, 0, "empty");
        k = add_case(cs, k, rnd, 0, 0, "a size drawn from the seed");
        k = add_case(cs, k, 262147, 0, 0, "1 MiB and 3 elements");
        return k;
    }
    if (op == OP_A2A) {
        k = add_case(cs, k, 64, 0, 0, "a small block");
        k = add_case(cs, k, 1, 0, 0, "one element per block");
        k = add_case(cs, k, 0, 0, 0, "empty blocks");
        k = add_case(cs, k, 257, 0, 0, "an odd block");
        snprintf(why, sizeof why, "a block size drawn from the seed");
        k = add_case(cs, k, rnd / 8, 0, 0, why);
        k = add_case(cs, k, 32768, 0, 0, "128 KiB blocks");
        if (n >= 3) k = add_case(cs, k, 257, 0, 1, "ranks of a group are not world ranks");
        return k;
    }
    snprintf(why, sizeof why, "divisible by %d", n);
    k = add_case(cs, k, 64 * n_, 0, 0, why);
    snprintf(why, sizeof why, "%d does not divide it", n);
    k = add_case(cs, k, n_ + 1, n - 1, 0, why);
    k = add_case(cs, k, 1009, 1, 0, n > 1 ? "prime" : "prime");
    k = add_case(cs, k, 1, n / 2, 0, "one element");
    if (n > 2) k = add_case(cs, k, n_ - 1, n - 1, 0, "fewer elements than ranks");
    k = add_case(cs, k, 0, 0, 0, "empty");
    k = add_case(cs, k, rnd, (int)(rnd % n_), 0, "a size drawn from the seed");
    k = add_case(cs, k, 262144, 0, 0, "1 MiB");
    k = add_case(cs, k, op == OP_BC ? 300007 : 262147, n - 1, 0,
                 op == OP_BC ? "not a whole number of segments" : "1 MiB and 3 elements");
    if (n >= 3) {
        k = add_case(cs, k, 1009, 0, 1, "ranks of a group are not world ranks");
        k = add_case(cs, k, rnd, 0, 1, "a group, a size drawn from the seed");
    }
    return k;
}

/* ---- perf and bench modes: the student's collective beside the library's ---- */

struct bench_bufs {
    float *a, *b;   /* a: the buffer (all-to-all: send), b: all-to-all recv or lib output */
    size_t count;   /* elements of a */
};

static void call_library(enum op op, struct pl_comm *comm, struct bench_bufs *x)
{
    int n = pl_comm_size(comm);
    switch (op) {
    case OP_RS: pl_reduce_scatter(comm, x->a, x->b, x->count / (size_t)n, PL_SUM); break;
    case OP_AG:
        pl_all_gather(comm, x->b, x->a, x->count / (size_t)n);
        break;
    case OP_AR:
    case OP_RD:
    case OP_HIER: pl_all_reduce(comm, x->a, x->a, x->count, PL_SUM); break;
    case OP_BC: pl_broadcast(comm, x->a, x->count, 0); break;
    case OP_A2A: pl_all_to_all(comm, x->a, x->b, x->count / (size_t)n); break;
    default: break;
    }
}

static void call_mine(enum op op, struct pl_comm *comm, struct bench_bufs *x)
{
    size_t per = op == OP_A2A ? x->count / (size_t)pl_comm_size(comm) : x->count;
    call_student(op, comm, x->a, x->b, per, 0);
}

/* Seconds per call, the slowest rank's, over iters calls. */
static double time_calls(int mine, enum op op, struct pl_comm *comm, struct bench_bufs *x,
                         int iters)
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
        double t = time_calls(1, the_op, c->comm, c->x, c->iters);
        c->sent += pl_ledger_bytes(pl_ledger(), PL_P2P, -1) - before;
        c->calls += c->iters;
        return t;
    }
    if (c->segments <= 1) return time_calls(0, the_op, c->comm, c->x, c->iters);
    PL_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = pl_clock();
    for (int i = 0; i < c->iters; i++) library_segmented(c->comm, c->x, c->segments);
    pl_ops_wait();
    double t = (pl_clock() - t0) / c->iters, tmax;
    PL_CHECK_MPI(MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    return tmax;
}

/* Segments of at least this many elements (256 KiB) keep a pipeline's per-message cost small
 * against its transfers (the handout suggests about 100 000): the baseline is never cut finer,
 * so a pipeline of needlessly many tiny messages is not forgiven its overhead. */
#define BC_MIN_SEGMENT 65536

/* The messages the root of the student's broadcast sends per call: its pipeline's segments
 * (counted from the traffic ledger over one call, on rank 0, told to every rank), at most
 * one per BC_MIN_SEGMENT elements. */
static int broadcast_segments(struct pl_comm *comm, struct bench_bufs *x)
{
    long before = pl_ledger()->calls[PL_P2P];
    time_calls(1, OP_BC, comm, x, 1);
    int k = (int)(pl_ledger()->calls[PL_P2P] - before);
    PL_CHECK_MPI(MPI_Bcast(&k, 1, MPI_INT, 0, MPI_COMM_WORLD));
    int most = (int)((x->count + BC_MIN_SEGMENT - 1) / BC_MIN_SEGMENT);
    return k < 1 ? 1 : k > most ? most : k;
}

/* Elements wrong on any rank after one call on integer data (the nccl-tests #wrong). */
static long count_wrong(int mine, enum op op, struct pl_comm *comm, size_t count)
{
    int n = pl_comm_size(comm), r = pl_comm_rank(comm);
    struct test_case c = {.count = op == OP_A2A ? count / (size_t)n : count, .root = 0};
    size_t total = count;
    float *in = malloc(total * sizeof *in), *in2 = malloc(total * sizeof *in2);
    float *exp = malloc(total * sizeof *exp), *got = malloc(total * sizeof *got);
    uint64_t seed = pl_mix64(base_seed + 77 + count);
    make_case(op, &c, seed, comm, in, in2, exp);
    struct bench_bufs x = {pl_comm_buf_alloc(total, "bench a"),
                           pl_comm_buf_alloc(total, "bench b"), total};
    pl_copy_from_host(x.a, in, total);
    pl_copy_from_host(x.b, in2, total);
    float *result_buf = x.a;
    if (mine) {
        call_mine(op, comm, &x);
        if (op == OP_A2A) result_buf = x.b;
    } else {
        size_t off, len = total / (size_t)n;
        switch (op) {
        case OP_RS:
            call_library(op, comm, &x);
            /* The library leaves rank r's block in b; put it where the lab expects it. */
            pl_copy_to_host(got, x.b, len);
            off = (size_t)r * len;
            pl_copy_from_host(x.a + off, got, len);
            break;
        case OP_AG:
            off = (size_t)r * len;
            pl_copy_to_host(got, x.a + off, len);
            pl_copy_from_host(x.b, got, len);
            call_library(op, comm, &x);
            break;
        case OP_A2A:
            call_library(op, comm, &x);
            result_buf = x.b;
            break;
        default:
            call_library(op, comm, &x);
        }
    }
    pl_copy_to_host(got, result_buf, total);
    struct verdict v;
    memset(&v, 0, sizeof v);
    compare(got, exp, total, &v);
    long wrong = v.nwrong, sum = 0;
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

static double size_mib = 16, max_mib = 16; /* --size-mib, --max-mib */

static size_t perf_count(void)
{
    return bench_count(size_mib * 1048576.0, pl_size());
}

static int probe(void *st)
{
    (void)st;
    if (!strcmp(pl_comm_backend(), "nccl")) gr_perf_set_bar(LAB01_NCCL_BAR);
    if (the_op >= OP_RD)
        pl_usage_error_all("--mode perf: %s has no speed test (its traffic test models its "
                           "time); choose reduce_scatter, all_gather, all_reduce, broadcast or "
                           "all_to_all", OPS[the_op].name);
    size_t count = perf_count();
    char sz[32];
    pl_format_bytes(4.0 * (double)count, sz, sizeof sz);
    gr_case("%s on %s, %d ranks, beside %s", OPS[the_op].func, sz, pl_size(), OPS[the_op].lib);
    long wrong = count_wrong(1, the_op, pl_comm_world(), count);
    if (wrong)
        gr_say("perf", "not graded: %s gave %ld wrong elements on %s (performance counts only "
               "for correct results)", OPS[the_op].func, wrong, sz);
    return wrong == 0;
}

/* Collective. 1 when the timed calls of the student's collective sent, all ranks together,
 * what as many calls must send (the table of handout section 8, every one on the same
 * buffer). The speed test checks one call's results; a call that moves nothing would time
 * nothing. */
static int timed_calls_moved_data(const struct perf_ctx *c, int n, double S)
{
    double sent = 0, per_call = (the_op == OP_AR ? 2.0 : 1.0) * (n - 1) * S;
    char a[32], b[32];
    PL_CHECK_MPI(MPI_Allreduce(&c->sent, &sent, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    if (sent >= c->calls * per_call) return 1;
    gr_say("perf", "not graded: your %.0f timed calls of %s sent %s in all (every rank "
           "together), where each call must send %s: results are checked on one call only, and "
           "a call that sends less than the collective needs has not done it",
           c->calls, OPS[the_op].func, pl_format_bytes(sent, a, sizeof a),
           pl_format_bytes(per_call, b, sizeof b));
    return 0;
}

static double perf(void *st)
{
    (void)st;
    struct pl_comm *comm = pl_comm_world();
    int n = pl_size();
    size_t count = perf_count();
    double S = 4.0 * (double)count;
    pl_comm_set_checks(0);
    struct bench_bufs x = {pl_comm_buf_alloc(count, "perf a"), pl_comm_buf_alloc(count, "perf b"),
                           count};
    time_calls(0, the_op, comm, &x, 1);
    time_calls(1, the_op, comm, &x, 1);
    int segments = the_op == OP_BC && n == 2 ? broadcast_segments(comm, &x) : 1;
    struct perf_ctx pc = {comm, &x, S >= 8 * 1048576.0 ? 2 : 4, segments, 0, 0};
    struct gr_perf pf;
    gr_perf_compare(perf_round, &pc, PERF_ROUNDS, PERF_BATCHES, &pf);
    pl_comm_set_checks(1);
    pl_comm_buf_free(x.b);
    pl_comm_buf_free(x.a);
    if (!timed_calls_moved_data(&pc, n, S)) return 0;

    double factor = pl_busbw_factor(OPS[the_op].kind, n);
    double bus_mine = S / pf.best_mine * factor / 1e9, bus_lib = S / pf.best_base * factor / 1e9;
    char seg[96] = "";
    if (segments > 1)
        snprintf(seg, sizeof seg, " on your %d segments, one call each,", segments);
    gr_say("perf", "yours %.3f GB/s busbw (%.0f us), library %s%s %.3f GB/s (%.0f us): %.2fx "
        "(%s); %s", bus_mine, pf.best_mine * 1e6, OPS[the_op].lib, seg,
        bus_lib, pf.best_base * 1e6, pf.ratio, gr_perf_how(&pf), gr_perf_bar_text());
    if (pf.fraction < 1)
        gr_say("perf", "a ring moves the same bytes as the library: look for blocking sends that "
            "serialize the steps, a scratch buffer allocated on every step, or copies the "
            "algorithm does not need");
    char metric[64];
    snprintf(metric, sizeof metric, "busbw_%s", OPS[the_op].name);
    gr_metric(metric, bus_mine);
    return pf.fraction;
}

static void bench_row(enum op op, size_t count)
{
    struct pl_comm *comm = pl_comm_world();
    int n = pl_size();
    double S = 4.0 * (double)count;
    int iters = S <= 65536 ? 50 : S <= 4194304 ? 10 : 3;
    long wrong_mine = count_wrong(1, op, comm, count);
    long wrong_lib = count_wrong(0, op, comm, count);
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
    double f = pl_busbw_factor(OPS[op].kind, n);
    pl_print0("%12.0f %12zu  float %10.1f %7.2f %7.2f %6ld %10.1f %7.2f %7.2f %6ld\n", S, count,
              tm * 1e6, S / tm / 1e9, S / tm / 1e9 * f, wrong_mine, tl * 1e6, S / tl / 1e9,
              S / tl / 1e9 * f, wrong_lib);
}

static void bench_mode(int only, double max_mib, const char *label)
{
    int n = pl_size();
    pl_print0("# Lab 1 collectives: %s beside the library's, %d ranks, backend %s\n", label, n,
              pl_comm_backend());
    pl_print0("# busbw = algbw x factor: all_reduce 2(n-1)/n, reduce_scatter, all_gather and "
              "all_to_all (n-1)/n, broadcast 1\n#\n");
    pl_print0("# %10s %12s  %5s %34s %34s\n", "", "", "", "--------------- lab code ------------",
              "------------- library -------------");
    pl_print0("# %10s %12s  %5s %10s %7s %7s %6s %10s %7s %7s %6s\n", "size", "count", "type",
              "time(us)", "algbw", "busbw", "#wrong", "time(us)", "algbw", "busbw", "#wrong");
    pl_print0("# %10s %12s  %5s %10s %7s %7s %6s %10s %7s %7s %6s\n", "(B)", "(elements)", "",
              "", "(GB/s)", "(GB/s)", "", "", "(GB/s)", "(GB/s)", "");
    for (int op = 0; op <= OP_RD; op++) { /* the two-level one needs nodes */
        if (only >= 0 && op != only) continue;
        pl_print0("# %s: %s vs %s\n", OPS[op].name, OPS[op].func, OPS[op].lib);
        for (double bytes = 1024; bytes <= max_mib * 1048576.0 + 1; bytes *= 4)
            bench_row((enum op)op, bench_count(bytes, n));
    }
}


/* ---- the lab's part of the harness ---- */

/* The cases of the op, and what every rank saw in the last one (gathered to rank 0). */
static struct test_case cases[16];
static int ncases;
static struct verdict *all;

/* The two-level all-reduce on 3 virtual nodes instead of 2: code that takes the nodes to be
 * two halves of the ranks, rather than asking coll_node_of, is right on 2 nodes only. */
#define HIER_3_NODES "hierarchical_3_nodes"

static int find_op(const char *name)
{
    if (!strcmp(name, HIER_3_NODES)) return OP_HIER;
    for (int i = 0; i < NOPS; i++)
        if (!strcmp(name, OPS[i].name)) return i;
    return -1;
}

static void *setup(const struct gr_args *a)
{
    if (!(size_mib > 0) || !(max_mib > 0))
        pl_usage_error_all("--size-mib and --max-mib must be positive");
    base_seed = a->seed;
    the_op = (enum op)find_op(a->op);
    const struct pl_topo *t = pl_topo();
    if (the_op == OP_HIER && (t->nodes < 2 || t->nodes * t->per_node != pl_size()))
        pl_usage_error_all("--op hierarchical runs on 2 nodes or more of equal size (%d ranks "
                           "on %d node%s here): launch an even number of ranks (%s: a "
                           "multiple of 3), the grader splits them over 2 (3) virtual nodes",
                           pl_size(), t->nodes,
                           t->nodes == 1 ? "" : "s", HIER_3_NODES);
    ncases = make_cases(the_op, pl_size(), cases);
    all = pl_rank() == 0 ? calloc((size_t)pl_size(), sizeof *all) : NULL;
    return NULL;
}

static const char *subject(void *st)
{
    (void)st;
    return OPS[the_op].func;
}

static int count_cases(void *st)
{
    (void)st;
    return ncases;
}

static void describe(void *st, int i, char *buf, size_t len)
{
    (void)st;
    char cs[384];
    describe_case(&cases[i], pl_size(), cs, sizeof cs);
    snprintf(buf, len, "%s(%s)", OPS[the_op].func, cs);
}

static void run(void *st, int i)
{
    (void)st;
    struct verdict v;
    run_case(the_op, &cases[i], i, &v);
    PL_CHECK_MPI(MPI_Gather(&v, (int)sizeof v, MPI_BYTE, all, (int)sizeof v, MPI_BYTE, 0,
                            MPI_COMM_WORLD));
}

/* On a pass, the figures the lab is about are shown too, once per part: those of the
 * largest case (the busiest rank's bytes sent and received, its peak scratch), said after
 * the last case. */
static void note_figures(const struct test_case *c, const struct verdict *all, int nranks,
                         const char *part, int last)
{
    static double best_S[2] = {-1, -1};
    static char text[2][512];
    int k = part[0] == 't' ? 0 : 1;
    double S = 4.0 * (double)buffer_count(the_op, c->count, all[0].n);
    if (S > best_S[k]) {
        double sent = 0, recv = 0, scratch = 0;
        for (int j = 0; j < nranks; j++) {
            if (all[j].sent > sent) sent = all[j].sent;
            if (all[j].received > recv) recv = all[j].received;
            if (all[j].scratch > scratch) scratch = all[j].scratch;
        }
        char cs[384], a[32], b[32], e[32];
        describe_case(c, nranks, cs, sizeof cs);
        pl_format_bytes(S, e, sizeof e);
        if (k == 0)
            snprintf(text[0], sizeof text[0], "%s: the busiest rank sent %s and received %s "
                     "of the %s buffer (%s)", cs, pl_format_bytes(sent, a, sizeof a),
                     pl_format_bytes(recv, b, sizeof b), e, formula(the_op));
        else
            snprintf(text[1], sizeof text[1], "%s: at most %s of scratch held at once beside "
                     "the %s buffer, nothing left after the call", cs,
                     pl_format_bytes(scratch, a, sizeof a), e);
        best_S[k] = S;
    }
    if (last && best_S[k] >= 0) gr_say(part, "%s", text[k]);
}

/* Rank 0 judges what it gathered. Case 0 is a size n divides: a failure after it points at
 * the chunking. */
static int judge(void *st, int i, const char *part)
{
    (void)st;
    /* Collective, judged once every case is right. */
    if (!strcmp(part, "crossover")) return i == ncases - 1 ? judge_crossover() : 1;
    if (pl_rank() != 0) return 1;
    int n = pl_size();
    if (!strcmp(part, "correct")) return judge_correct(&cases[i], all, n, i > 0);
    if (!strcmp(part, "traffic") && the_op == OP_RD)
        return judge_doubling_traffic(&cases[i], all, n, i == ncases - 1);
    if (!strcmp(part, "traffic") && the_op == OP_HIER)
        return judge_hierarchical_traffic(&cases[i], all, n, i == ncases - 1);
    if (!strcmp(part, "traffic") || !strcmp(part, "memory")) {
        int ok = part[0] == 't' ? judge_traffic(&cases[i], all, n)
                                : judge_memory(&cases[i], all, n);
        if (ok) note_figures(&cases[i], all, n, part, i == ncases - 1);
        return ok;
    }
    pl_usage_error("--parts %s: Lab 1 judges correct, traffic, memory and crossover", part);
}

static void finish(void *st)
{
    (void)st;
    free(all);
}

static void bench(const struct gr_args *a)
{
    bench_mode(a->op ? find_op(a->op) : -1, max_mib, a->label);
}

/* The two-level all-reduce runs on 2 virtual nodes (the ranks split evenly between them), or
 * on 3 as HIER_3_NODES.
 * The speed test on NCCL races the library's collective restricted to what a point-to-point
 * ring can use, the ring algorithm and the Simple protocol (read when NCCL's communicator is
 * made; point-to-point is unaffected), judged from LAB01_NCCL_BAR (docs/gpu.md). */
static void before_init(const char *op, const char *mode, int *nodes, int *per_node)
{
    (void)per_node;
    if (op && !strcmp(op, "hierarchical")) *nodes = 2;
    if (op && !strcmp(op, HIER_3_NODES)) *nodes = 3;
#ifdef PL_GPU
    if (!strcmp(mode, "perf")) {
        setenv("NCCL_ALGO", "Ring", 0);
        setenv("NCCL_PROTO", "Simple", 0);
    }
#else
    (void)mode;
#endif
}

static struct pl_flag lab01_flags[] = {
    {"--size-mib", PL_FLAG_DOUBLE, &size_mib, "M", "perf: the buffer's size in MiB", 0},
    {"--max-mib", PL_FLAG_DOUBLE, &max_mib, "M", "bench: the largest size in MiB", 0},
};

const struct gr_driver gr_lab_driver = {
    .flags = lab01_flags,
    .nflags = 2,
    .setup = setup,
    .subject = subject,
    .correct_first = "must give correct results first",
    .ncases = count_cases,
    .describe = describe,
    .run = run,
    .judge = judge,
    .probe = probe,
    .perf = perf,
    .bench = bench,
    .finish = finish,
    .before_init = before_init,
};
