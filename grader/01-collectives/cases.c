/* cases.c: Lab 1's cases, each run on this rank into its observation (lab01.h). The
 * student's collective is called on seeded integer-valued data and its result compared with
 * a serial computation; the bytes the rank sent come from the traffic ledger, the bytes it
 * received from the wrappers below, the buffers it held from the memory ledger. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_comm.h"
#include "collectives.h"
#include "lab01.h"
#include "modelled.h"
#include "received.h"
#include "todo.h"
#include "unseen.h"

/* ---- counting what the student's code receives, and where its buffers lie ---- */
/* The ledger records the bytes a rank sends; these wrappers (linked with --wrap, lab.mk) add
 * the bytes it receives, which is how a rank that collects everything is spotted, into the
 * count the case owns (grader/common/received.h). They also place every buffer the code
 * hands to a message or to coll_reduce / coll_copy: scratch on the stack or in static
 * storage never passes through the memory ledger (unseen.h). */

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

/* Places one buffer of the table L1_PLACES (judge.c words it). */
static void place(const void *buf, enum l1_place p)
{
    gr_unseen_place(buf, L1_PLACES[p].call, L1_PLACES[p].arg, -2, "");
}

void __wrap_pl_send(struct pl_comm *comm, const float *buf, size_t count, int peer, int tag)
{
    if (count) place(buf, L1_P_SEND);
    __real_pl_send(comm, buf, count, peer, tag);
}

struct pl_handle *__wrap_pl_isend(struct pl_comm *comm, const float *buf, size_t count,
                                  int peer, int tag)
{
    if (count) place(buf, L1_P_ISEND);
    return __real_pl_isend(comm, buf, count, peer, tag);
}

void __wrap_pl_recv(struct pl_comm *comm, float *buf, size_t count, int peer, int tag)
{
    gr_received_note(count, 1);
    if (count) place(buf, L1_P_RECV);
    __real_pl_recv(comm, buf, count, peer, tag);
}

void __wrap_pl_sendrecv(struct pl_comm *comm, const float *send, size_t send_count, int dest,
                        float *recv, size_t recv_count, int src, int tag)
{
    gr_received_note(recv_count, 0);
    if (send_count) place(send, L1_P_SR_SEND);
    if (recv_count) place(recv, L1_P_SR_RECV);
    __real_pl_sendrecv(comm, send, send_count, dest, recv, recv_count, src, tag);
}

struct pl_handle *__wrap_pl_irecv(struct pl_comm *comm, float *buf, size_t count, int peer,
                                  int tag)
{
    gr_received_note(count, 1);
    if (count) place(buf, L1_P_IRECV);
    return __real_pl_irecv(comm, buf, count, peer, tag);
}

void __wrap_pl_accumulate(float *dst, const float *src, size_t n)
{
    if (n) {
        place(dst, L1_P_REDUCE_DST);
        place(src, L1_P_REDUCE_SRC);
    }
    __real_pl_accumulate(dst, src, n);
}

void __wrap_pl_copy(float *dst, const float *src, size_t n)
{
    if (n) {
        place(dst, L1_P_COPY_DST);
        place(src, L1_P_COPY_SRC);
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

/* ---- the cases ---- */

static int add_case(struct l1_case *cs, int k, size_t count, int root, int split, int kind)
{
    cs[k] = (struct l1_case){count, root, split, kind};
    return k + 1;
}

/* Sizes every implementation must handle; one comes from the seed, so answers cannot be
 * written in advance. */
int l1_make_cases(int op, int n, uint64_t seed, struct l1_case *cs)
{
    int k = 0;
    size_t n_ = (size_t)n;
    size_t rnd = 2001 + 2 * (size_t)(pl_mix64(seed ^ 0x1ab01) % 2000); /* odd */
    if (op == L1_RD) { /* the sizes it is for, and some that are not */
        k = add_case(cs, k, 64 * n_, 0, 0, L1_K_DIVISIBLE);
        k = add_case(cs, k, n_ + 1, 0, 0, L1_K_ONE_MORE);
        k = add_case(cs, k, 1, 0, 0, L1_K_ONE);
        k = add_case(cs, k, 0, 0, 0, L1_K_EMPTY);
        k = add_case(cs, k, rnd, 0, 0, L1_K_SEED);
        k = add_case(cs, k, 65537, 0, 0, L1_K_256K1);
        if (n >= 3) k = add_case(cs, k, 1009, 0, 1, L1_K_GROUP);
        return k;
    }
    if (op == L1_HIER) { /* the world on its nodes */
        k = add_case(cs, k, 64 * n_, 0, 0, L1_K_DIVISIBLE);
        k = add_case(cs, k, n_ + 1, 0, 0, L1_K_ONE_MORE);
        k = add_case(cs, k, 1009, 0, 0, L1_K_PRIME);
        k = add_case(cs, k, 1, 0, 0, L1_K_ONE);
        k = add_case(cs, k, 0, 0, 0, L1_K_EMPTY);
        k = add_case(cs, k, rnd, 0, 0, L1_K_SEED);
        k = add_case(cs, k, 262147, 0, 0, L1_K_MIB3);
        return k;
    }
    if (op == L1_A2A) {
        k = add_case(cs, k, 64, 0, 0, L1_K_SMALL_BLOCK);
        k = add_case(cs, k, 1, 0, 0, L1_K_ONE_PER_BLOCK);
        k = add_case(cs, k, 0, 0, 0, L1_K_EMPTY_BLOCKS);
        k = add_case(cs, k, 257, 0, 0, L1_K_ODD_BLOCK);
        k = add_case(cs, k, rnd / 8, 0, 0, L1_K_SEED_BLOCK);
        k = add_case(cs, k, 32768, 0, 0, L1_K_128K_BLOCKS);
        if (n >= 3) k = add_case(cs, k, 257, 0, 1, L1_K_GROUP);
        return k;
    }
    k = add_case(cs, k, 64 * n_, 0, 0, L1_K_DIVISIBLE);
    k = add_case(cs, k, n_ + 1, n - 1, 0, L1_K_NOT_DIVIDE);
    k = add_case(cs, k, 1009, 1, 0, L1_K_PRIME);
    k = add_case(cs, k, 1, n / 2, 0, L1_K_ONE);
    if (n > 2) k = add_case(cs, k, n_ - 1, n - 1, 0, L1_K_FEWER);
    k = add_case(cs, k, 0, 0, 0, L1_K_EMPTY);
    k = add_case(cs, k, rnd, (int)(rnd % n_), 0, L1_K_SEED);
    k = add_case(cs, k, 262144, 0, 0, L1_K_MIB);
    k = add_case(cs, k, op == L1_BC ? 300007 : 262147, n - 1, 0,
                 op == L1_BC ? L1_K_SEGMENTS : L1_K_MIB3);
    if (n >= 3) {
        k = add_case(cs, k, 1009, 0, 1, L1_K_GROUP);
        k = add_case(cs, k, rnd, 0, 1, L1_K_GROUP_SEED);
    }
    return k;
}

/* The input of the rank with world rank w: elements [start, start+len) of its buffer. */
static void member_data(uint64_t seed, int w, size_t total, size_t start, size_t len,
                        float *out)
{
    pl_rng_fill_int(out, len, seed, pl_rng_stream("lab01.input"), (uint64_t)w * total + start,
                    -L1_DATA_MAX, L1_DATA_MAX);
}

static void host_fill(float *a, size_t n, float v)
{
    for (size_t i = 0; i < n; i++) a[i] = v;
}

void l1_make_input(int op, const struct l1_case *c, uint64_t seed, struct pl_comm *comm,
                   float *in, float *in2, float *expected)
{
    int n = pl_comm_size(comm), r = pl_comm_rank(comm);
    size_t total = l1_buffer_count(op, c->count, n), off, len, block = (size_t)c->count;
    int w = pl_comm_world_rank(comm, r);
    float *tmp = malloc((total ? total : 1) * sizeof *tmp);
    if (op == L1_RS || op == L1_AR || op == L1_RD || op == L1_HIER) {
        member_data(seed, w, total, 0, total, in);
        host_fill(expected, total, 0.0f);
        for (int m = 0; m < n; m++) {
            member_data(seed, pl_comm_world_rank(comm, m), total, 0, total, tmp);
            for (size_t i = 0; i < total; i++) expected[i] += tmp[i];
        }
        if (op == L1_RS) {
            len = coll_chunk(total, n, r, &off);
            for (size_t i = 0; i < total; i++)
                if (i < off || i >= off + len) expected[i] = NAN;
        }
    } else if (op == L1_AG) {
        host_fill(in, total, L1_SENTINEL);
        len = coll_chunk(total, n, r, &off);
        member_data(seed, w, total, off, len, in + off);
        for (int m = 0; m < n; m++) {
            len = coll_chunk(total, n, m, &off);
            member_data(seed, pl_comm_world_rank(comm, m), total, off, len, expected + off);
        }
    } else if (op == L1_BC) {
        if (r == c->root) member_data(seed, w, total, 0, total, in);
        else host_fill(in, total, L1_SENTINEL);
        member_data(seed, pl_comm_world_rank(comm, c->root), total, 0, total, expected);
    } else if (op == L1_A2A) {
        member_data(seed, w, total, 0, total, in);
        host_fill(in2, total, L1_SENTINEL);
        for (int m = 0; m < n; m++)
            member_data(seed, pl_comm_world_rank(comm, m), total, (size_t)r * block, block,
                        expected + (size_t)m * block);
    }
    free(tmp);
}

void l1_call_student(int op, struct pl_comm *comm, float *buf, float *buf2, size_t count,
                     int root)
{
    switch (op) {
    case L1_RS: ring_reduce_scatter(comm, buf, count); break;
    case L1_AG: ring_all_gather(comm, buf, count); break;
    case L1_AR: ring_all_reduce(comm, buf, count); break;
    case L1_BC: pipelined_broadcast(comm, buf, count, root); break;
    case L1_A2A: pairwise_all_to_all(comm, buf, buf2, count); break;
    case L1_RD: recursive_doubling_all_reduce(comm, buf, count); break;
    case L1_HIER: hierarchical_all_reduce(comm, buf, count); break;
    default: break;
    }
}

static void compare(const float *got, const float *expected, size_t total, struct l1_obs *v)
{
    v->first_bad = v->first_nonfinite = -1;
    for (size_t i = 0; i < total; i++) {
        float e = expected[i], g = got[i];
        if (isnan(e)) continue;
        if (!isfinite(g) && v->nonfinite++ == 0) {
            v->first_nonfinite = (long)i;
            v->nonfinite_expected = e;
        }
        if (g == e) continue;
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

long l1_count_wrong(const float *got, const float *expected, size_t total)
{
    struct l1_obs v;
    memset(&v, 0, sizeof v);
    compare(got, expected, total, &v);
    return v.nwrong;
}

/* The place of the first buffer found outside the ledger (its call and argument). */
static int place_of(const struct gr_unseen *u)
{
    char what[96];
    for (int p = 1; p < L1_NPLACES; p++) {
        snprintf(what, sizeof what, "%s's %s", L1_PLACES[p].call, L1_PLACES[p].arg);
        if (!strcmp(what, u->what)) return p;
    }
    return L1_P_NONE;
}

/* Calls the student's collective once, and records in v what the ledgers saw: bytes sent
 * and received, library collectives called, memory left and held at peak, and the time. */
static void observe_call(int op, struct pl_comm *comm, float *buf, float *buf2, size_t count,
                         int root, struct l1_obs *v)
{
    struct pl_mem_stats m0, m1;
    pl_mem_get_stats(&m0);
    pl_mem_reset_peak();
    struct pl_ledger l0 = *pl_ledger(), l1, d;
    struct gr_received got;
    char where[96];
    snprintf(where, sizeof where, "in %s, before its first message", L1_OPS[op].func);
    pl_trace_where(where);
    PL_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = pl_clock();
    gr_received_begin(&got);
    gr_unseen_begin(1);
    l1_call_student(op, comm, buf, buf2, count, root);
    struct gr_unseen u = gr_unseen_end();
    gr_received_end(&got);
    v->seconds = pl_clock() - t0;
    v->unseen_where = u.where;
    v->unseen = u.where ? place_of(&u) : L1_P_NONE;
    /* What a supervisor reads if the other ranks never come back. */
    snprintf(where, sizeof where, "returned from %s, waiting for the other ranks",
             L1_OPS[op].func);
    pl_trace_where(where);
    l1 = *pl_ledger();
    pl_mem_get_stats(&m1);
    pl_ledger_diff(&l1, &l0, &d);
    v->sent = pl_ledger_bytes(&d, PL_P2P, -1);
    v->sent_inter = pl_ledger_bytes(&d, PL_P2P, PL_LINK_INTER);
    v->modelled = pl_ledger_modelled_time(&d, pl_profile_find(L1_MODEL_PROFILE));
    v->sent_msgs = (double)d.calls[PL_P2P];
    v->sends = v->sent_msgs - got.recv_only_calls;
    v->received = got.bytes;
    v->coll_kind = -1;
    for (int k = 0; k < PL_NKINDS; k++) {
        if (k == PL_P2P || k == PL_BARRIER) continue;
        if (d.calls[k] > 0 && v->coll_kind < 0) v->coll_kind = k;
        v->coll_calls += (double)d.calls[k];
    }
    v->leaked = (double)m1.current_total - (double)m0.current_total;
    v->scratch = (double)m1.peak_total - (double)m0.current_total;
}

/* Runs case c on this rank into v. Every case runs on a communicator of its own, split from
 * the world (the same ranks in the same order, or two interleaved halves in reverse order),
 * and freed after the call, as a caller that owns one would. */
static void run_case(const struct l1_state *st, int index, struct l1_obs *v)
{
    const struct l1_case *c = &st->cases[index];
    struct pl_comm *world = pl_comm_world(), *comm;
    int wr = pl_rank(), wn = pl_size(), op = st->op;
    if (c->split) comm = pl_comm_split(world, wr % 2, wn - wr, "half");
    else comm = pl_comm_split(world, 0, wr, "world"); /* the same ranks, named alike */
    int n = pl_comm_size(comm), r = pl_comm_rank(comm);
    size_t total = l1_buffer_count(op, c->count, n);
    uint64_t seed = pl_mix64(st->seed * 1000003u + (uint64_t)index);
    struct l1_case cc = *c;
    cc.root = c->root % n;

    size_t alloc = total ? total : 1;
    float *in = malloc(alloc * sizeof *in), *in2 = malloc(alloc * sizeof *in2);
    float *expected = malloc(alloc * sizeof *expected), *got = malloc(alloc * sizeof *got);
    l1_make_input(op, &cc, seed, comm, in, in2, expected);
    float *buf = pl_comm_buf_alloc(total, "lab01 buffer");
    float *buf2 = pl_comm_buf_alloc(op == L1_A2A ? total : 0, "lab01 recv");
    pl_copy_from_host(buf, in, total);
    if (op == L1_A2A) pl_copy_from_host(buf2, in2, total);

    v->n = n;
    v->rank = r;
    v->world_rank = wr;
    v->root = cc.root;
    observe_call(op, comm, buf, buf2, (size_t)c->count, cc.root, v);
    v->in_flight = pl_comm_in_flight(comm);

    pl_copy_to_host(got, op == L1_A2A ? buf2 : buf, total);
    compare(got, expected, total, v);
    if (op == L1_HIER) { /* its own share: chunk l (its place on its node) of the node's L */
        int L = st->per_node;
        size_t off, len = coll_chunk(total, L, r % L, &off);
        for (size_t i = off; i < off + len; i++) v->wrong_in_share += got[i] != expected[i];
    }

    pl_comm_buf_free(buf2);
    pl_comm_buf_free(buf);
    free(in);
    free(in2);
    free(expected);
    free(got);
    gr_case_comm_free(comm);
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

/* The student's two traces, and what the replay of both at one size gave. */
struct race {
    const struct pl_merged_trace *mine, *ring;
    double S0; /* bytes of the traced calls */
    const struct pl_profile *prof;
    struct l1_race *out;
};

/* Rank 0: modelled doubling minus ring at S bytes (negative: doubling is faster). */
static double race_gap(struct race *r, double S)
{
    char *err = r->out->err;
    size_t len = sizeof r->out->err;
    double a = l1_replay(r->mine, S / r->S0, r->prof, pl_topo(), err, len);
    double b = a < 0 ? -1 : l1_replay(r->ring, S / r->S0, r->prof, pl_topo(), err, len);
    if (a < 0 || b < 0) r->out->failed = 1;
    return a - b;
}

/* Rank 0: where the replayed doubling and ring cross, around the alpha-beta model's S*
 * (judge.c's judge_crossover states the model). */
static void race(struct race *r, int n)
{
    struct l1_race *o = r->out;
    o->alpha = r->prof->latency[PL_LINK_INTRA];
    o->B = r->prof->bw[PL_LINK_INTRA];
    int m = 1, l = 0;
    while (2 * m <= n) {
        m *= 2;
        l++;
    }
    o->n = n;
    o->k = l + (m < n ? 2 : 0);
    o->star = o->alpha * o->B * (2.0 * (n - 1) - o->k) / (o->k - 2.0 * (n - 1) / n);
    double lo = o->star / 8, hi = o->star * 8;
    o->gap_lo = race_gap(r, lo);
    o->gap_hi = race_gap(r, hi);
    if (o->failed || !(o->gap_lo < 0) || !(o->gap_hi > 0)) return;
    for (int it = 0; it < 40 && !o->failed; it++) {
        double mid = sqrt(lo * hi);
        if (race_gap(r, mid) < 0) lo = mid;
        else hi = mid;
    }
    o->cross = sqrt(lo * hi);
}

/* Collective: the student's two all-reduces traced once on the world and, on rank 0,
 * replayed on L1_MODEL_PROFILE with their messages scaled. A stub reached here is recorded
 * for the verdict and forgotten, so that the case run next is judged on its own. */
static void trace_race(struct l1_race *o)
{
    int n = pl_size();
    size_t c0 = 1024 * (size_t)n;
    struct pl_merged_trace mine, ring;
    l1_trace(call_rd, c0, &mine);
    pl_todo_reset();
    l1_trace(call_ring, c0, &ring);
    o->done = 1;
    if (pl_rank() == 0 && pl_todo_what()) {
        int op = L1_AR;
        for (int k = 0; k < L1_NOPS; k++)
            if (!strcmp(pl_todo_what(), L1_OPS[k].func)) op = k;
        o->ring_stub = 1 + op;
    } else if (pl_rank() == 0) {
        struct race r = {&mine, &ring, 4.0 * (double)c0, pl_profile_find(L1_MODEL_PROFILE), o};
        race(&r, n);
    }
    pl_todo_reset();
    pl_trace_merged_free(&ring);
    pl_trace_merged_free(&mine);
}

void l1_observe(struct l1_state *st, int i, struct l1_obs *o)
{
    o->op = st->op;
    o->world = st->world;
    o->nodes = st->nodes;
    o->per_node = st->per_node;
    o->c = st->cases[i];
    if (st->want_crossover && i == st->ncases - 1) trace_race(&o->race);
    run_case(st, i, o);
    if (st->npast < L1_MAX_CASES)
        st->past[st->npast++] = (struct l1_past){o->c, o->n, o->sent, o->received, o->scratch,
                                                 o->sends};
    o->npast = st->npast;
    memcpy(o->past, st->past, sizeof o->past);
}
