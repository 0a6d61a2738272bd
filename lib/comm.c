/* comm.c: the front end of the communication layer, shared by every backend. Each call is
 * validated (arguments, and with checks on, agreement among members on which collective is
 * called, its count, op and root), printed under PL_VERBOSE=1, recorded in the trace and
 * charged to the traffic ledger as the ring algorithm uses the links; then a backend
 * (comm_mpi.c, comm_nccl_gpu.c) moves the bytes. Handles of asynchronous calls carry a
 * magic number and are recycled through a free list rather than returned to malloc, so a
 * handle waited on twice is reported, not a crash. */
#include "comm_internal.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "ledger.h"
#include "mem.h"
#include "runtime.h"
#include "topo.h"
#include "trace.h"

static struct {
    struct pl_comm *world;
    int checks;
    int use_nccl;      /* GPU build with one GPU per local rank */
    int staged;        /* MPI on copies staged through host buffers */
    long next_handle;
    int groups_led;    /* groups in which this rank is the lowest world rank: makes ids */
    int tag_ub;
} cs = {NULL, 1, 0, 0, 1, 0, 32767};

const char *pl_coll_kind_name(enum pl_coll_kind kind)
{
    static const char *names[PL_NKINDS] = {"all_reduce", "reduce_scatter", "all_gather",
                                           "broadcast",  "all_to_all",     "all_to_all_v",
                                           "p2p",        "barrier"};
    return (unsigned)kind < PL_NKINDS ? names[kind] : "unknown";
}

static const char *red_name(enum pl_red op) { return op == PL_AVG ? "avg" : "sum"; }

static enum pl_coll_kind kind_of(enum pl_op_type t)
{
    switch (t) {
    case PL_OP_ALL_REDUCE: return PL_ALL_REDUCE;
    case PL_OP_REDUCE_SCATTER: return PL_REDUCE_SCATTER;
    case PL_OP_ALL_GATHER: return PL_ALL_GATHER;
    case PL_OP_BROADCAST: return PL_BROADCAST;
    case PL_OP_ALL_TO_ALL: return PL_ALL_TO_ALL;
    case PL_OP_ALL_TO_ALL_V: return PL_ALL_TO_ALL_V;
    case PL_OP_BARRIER: return PL_BARRIER;
    default: return PL_P2P;
    }
}

/* ---- communicators ---- */

static struct pl_comm *comm_from_mpi(MPI_Comm mc, const char *name)
{
    struct pl_comm *c = calloc(1, sizeof *c);
    if (!c) pl_fatal("out of memory for communicator '%s'", name);
    c->mpi = mc;
    PL_CHECK_MPI(MPI_Comm_rank(mc, &c->rank));
    PL_CHECK_MPI(MPI_Comm_size(mc, &c->size));
    snprintf(c->name, sizeof c->name, "%s", name && *name ? name : "group");
    c->world_ranks = malloc((size_t)c->size * sizeof *c->world_ranks);
    if (!c->world_ranks) pl_fatal("out of memory for communicator '%s'", c->name);
    int me = pl_rank();
    PL_CHECK_MPI(MPI_Allgather(&me, 1, MPI_INT, c->world_ranks, 1, MPI_INT, mc));
    pl_mpi_comm_setup(mc);
    PL_CHECK_MPI(MPI_Comm_dup(mc, &c->check));
    pl_mpi_comm_setup(c->check);
    return c;
}

static struct pl_comm *require_world(void)
{
    if (!cs.world) pl_usage_error("the communication layer is not started: call pl_init first");
    return cs.world;
}

/* PL_COMM_BACKEND=mpi-staged forces the staged path: on the GPU build to compare it with
 * NCCL, on the CPU build (host copies standing in for device ones) to test it. */
static void choose_backend(MPI_Comm world)
{
    const char *want = getenv("PL_COMM_BACKEND");
    if (want && !*want) want = NULL;
#ifdef PL_GPU
    int nccl = pl_gpu_comm_startup(world);
    if (want && strcmp(want, "nccl") && strcmp(want, "mpi-staged"))
        pl_usage_error_all("PL_COMM_BACKEND=%s: the GPU build offers nccl or mpi-staged", want);
    if (want && !strcmp(want, "nccl") && !nccl)
        pl_usage_error_all("PL_COMM_BACKEND=nccl, but ranks share a GPU and NCCL needs one GPU "
                           "per rank; run as many ranks per node as GPUs, or use mpi-staged");
    cs.use_nccl = nccl && !(want && !strcmp(want, "mpi-staged"));
    cs.staged = !cs.use_nccl;
    if (cs.use_nccl) pl_nccl_comm_world(cs.world);
#else
    (void)world;
    if (want && strcmp(want, "mpi") && strcmp(want, "mpi-staged"))
        pl_usage_error_all("PL_COMM_BACKEND=%s: the CPU build offers mpi or mpi-staged%s", want,
                           strcmp(want, "nccl") ? "" : " (NCCL needs the GPU build, make GPU=1)");
    cs.staged = want && !strcmp(want, "mpi-staged");
#endif
}

void pl_comm_startup(void)
{
    if (cs.world) return;
    const char *chk = getenv("PL_CHECK_COUNTS");
    if (chk && !strcmp(chk, "0")) cs.checks = 0;
    int *ub = NULL, flag = 0;
    PL_CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag));
    if (flag && ub) cs.tag_ub = *ub;

    MPI_Comm dup;
    PL_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    cs.world = comm_from_mpi(dup, "world");
    cs.world->id = 0;
    pl_trace_register_group(0, cs.world->size, cs.world->world_ranks);
    choose_backend(dup);
}

static void comm_destroy(struct pl_comm *c)
{
#ifdef PL_GPU
    if (c->gpu) pl_nccl_comm_free(c);
#endif
    PL_CHECK_MPI(MPI_Comm_free(&c->check));
    PL_CHECK_MPI(MPI_Comm_free(&c->mpi));
    free(c->world_ranks);
    free(c);
}

/* ---- handles ---- */

#define HANDLE_LIVE 0x706c684cu /* "plhL" */
#define HANDLE_DONE 0x706c6844u /* "plhD" */
/* Completed handles wait this long in the free list before reuse, so that a stale handle
 * still reads as completed for the next this-many asynchronous calls. */
#define HANDLE_QUARANTINE 64

static struct {
    struct pl_handle *head, *tail; /* oldest first */
    int n;
} done_handles;

static struct pl_handle *handle_new(void)
{
    struct pl_handle *h;
    if (done_handles.n > HANDLE_QUARANTINE) {
        h = done_handles.head;
        done_handles.head = h->next_free;
        if (!done_handles.head) done_handles.tail = NULL;
        done_handles.n--;
    } else {
        h = malloc(sizeof *h);
        if (!h) pl_fatal("out of memory for a handle");
    }
    memset(h, 0, sizeof *h);
    h->magic = HANDLE_LIVE;
    return h;
}

static void handle_release(struct pl_handle *h)
{
    h->magic = HANDLE_DONE;
    h->next_free = NULL;
    if (done_handles.tail) done_handles.tail->next_free = h;
    else done_handles.head = h;
    done_handles.tail = h;
    done_handles.n++;
}

static void check_handle(const struct pl_handle *h, const char *fn)
{
    if (h->magic == HANDLE_LIVE) return;
    if (h->magic == HANDLE_DONE)
        pl_usage_error("%s: this handle was already completed by pl_wait/pl_test; each handle "
                       "is waited on once (set your copy to NULL after waiting: pl_wait(NULL) "
                       "does nothing, and pl_wait_all clears the handles it completes)", fn);
    pl_usage_error("%s: %p is not a handle from an asynchronous call (pl_*_async, pl_isend, "
                   "pl_irecv)", fn, (const void *)h);
}

void pl_comm_shutdown(void)
{
    if (!cs.world) return;
    comm_destroy(cs.world);
    cs.world = NULL;
    while (done_handles.head) {
        struct pl_handle *h = done_handles.head;
        done_handles.head = h->next_free;
        free(h);
    }
    done_handles.tail = NULL;
    done_handles.n = 0;
}

struct pl_comm *pl_comm_world(void) { return require_world(); }

struct pl_comm *pl_comm_split(struct pl_comm *parent, int color, int key, const char *name)
{
    require_world();
    if (!parent) pl_usage_error("pl_comm_split: parent communicator is NULL");
    char where[80];
    snprintf(where, sizeof where, "comm_split %s color=%d", parent->name, color);
    pl_trace_where(where);

    MPI_Comm mc;
    PL_CHECK_MPI(MPI_Comm_split(parent->mpi, color < 0 ? MPI_UNDEFINED : color, key, &mc));
    struct pl_comm *c = NULL;
    if (mc != MPI_COMM_NULL) {
        c = comm_from_mpi(mc, name);
        /* An id the same on every member and unique in the job without a job-wide
         * exchange: the lowest world rank of a group numbers the groups it leads. */
        int lead = 0;
        for (int r = 1; r < c->size; r++)
            if (c->world_ranks[r] < c->world_ranks[lead]) lead = r;
        int seq = 0;
        if (lead == c->rank) seq = ++cs.groups_led;
        PL_CHECK_MPI(MPI_Bcast(&seq, 1, MPI_INT, lead, mc));
        int world = pl_size();
        if (seq > (INT_MAX - world) / world)
            pl_fatal("too many communicators created by rank %d", c->world_ranks[lead]);
        c->id = seq * world + c->world_ranks[lead];
        pl_trace_register_group(c->id, c->size, c->world_ranks);
    }
#ifdef PL_GPU
    if (cs.use_nccl) pl_nccl_comm_split(c, parent, color, key);
#endif
    if (pl_verbose()) {
        if (c)
            printf("[rank %d] comm_split %s#%d color=%d key=%d -> %s#%d (%d ranks, rank %d)\n",
                   pl_rank(), parent->name, parent->id, color, key, c->name, c->id, c->size,
                   c->rank);
        else
            printf("[rank %d] comm_split %s#%d color=%d -> no group\n", pl_rank(), parent->name,
                   parent->id, color);
        fflush(stdout);
    }
    return c;
}

void pl_comm_free(struct pl_comm *comm)
{
    if (!comm) return;
    if (comm == cs.world)
        pl_usage_error("pl_comm_free: the world communicator belongs to the runtime and is "
                       "freed by pl_finalize; free only communicators from pl_comm_split");
    if (comm->in_flight)
        pl_usage_error("pl_comm_free('%s'): %d operation(s) still in flight; pl_wait them "
                       "before freeing the communicator", comm->name, comm->in_flight);
    comm_destroy(comm);
}

int pl_comm_rank(const struct pl_comm *comm) { return comm->rank; }
int pl_comm_size(const struct pl_comm *comm) { return comm->size; }
const char *pl_comm_name(const struct pl_comm *comm) { return comm->name; }
int pl_comm_id(const struct pl_comm *comm) { return comm->id; }

int pl_comm_world_rank(const struct pl_comm *comm, int rank)
{
    if (rank < 0 || rank >= comm->size)
        pl_usage_error("pl_comm_world_rank: rank %d is out of range for group '%s' of %d "
                       "ranks (0..%d)", rank, comm->name, comm->size, comm->size - 1);
    return comm->world_ranks[rank];
}

void pl_comm_set_checks(int on) { cs.checks = on != 0; }

const char *pl_comm_backend(void)
{
    return cs.use_nccl ? "nccl" : cs.staged ? "mpi-staged" : "mpi";
}

/* ---- errors every member reaches together ---- */

/* in_flight: operations may have been started (asynchronous calls); finalizing MPI over
 * them could hang, so the job is aborted instead of ended cleanly. */
static void group_error(const struct pl_comm *c, const char *msg, int in_flight)
    __attribute__((noreturn));
static void group_error(const struct pl_comm *c, const char *msg, int in_flight)
{
    if (c->size == pl_size() && !in_flight) pl_usage_error_all("%s", msg);
    if (c->rank == 0) pl_usage_error("%s", msg);
    /* Ranks outside the group (or operations in flight) keep the job from ending cleanly:
     * the group's rank 0 prints once and aborts the job; the others wait to be stopped by
     * it, and speak up themselves only if it never comes (it may reach its check later). */
    for (int i = 0; i < 60; i++) {
        struct timespec ts = {0, 500 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    pl_usage_error("%s", msg);
}

void pl_comm_group_usage_error(const struct pl_comm *c, const char *msg)
{
    group_error(c, msg, 0);
}

/* ---- validation ---- */

struct call {
    const char *fn; /* the public function, for messages */
    struct pl_comm *c;
    struct pl_op op;
    int async;
};

static size_t max_extent(const size_t *counts, const size_t *displs, int n)
{
    size_t m = 0;
    for (int j = 0; j < n; j++)
        if (counts[j] && displs[j] + counts[j] > m) m = displs[j] + counts[j];
    return m;
}

void pl_op_extents(const struct pl_op *op, const struct pl_comm *c, size_t *ns, size_t *nr)
{
    size_t n = (size_t)c->size;
    *ns = *nr = 0;
    switch (op->type) {
    case PL_OP_ALL_REDUCE: *ns = *nr = op->count; break;
    case PL_OP_REDUCE_SCATTER: *ns = n * op->count; *nr = op->count; break;
    case PL_OP_ALL_GATHER: *ns = op->count; *nr = n * op->count; break;
    case PL_OP_BROADCAST: *ns = *nr = op->count; break;
    case PL_OP_ALL_TO_ALL: *ns = *nr = n * op->count; break;
    case PL_OP_ALL_TO_ALL_V:
        *ns = max_extent(op->send_counts, op->send_displs, c->size);
        *nr = max_extent(op->recv_counts, op->recv_displs, c->size);
        break;
    case PL_OP_BARRIER: break;
    case PL_OP_SEND: *ns = op->count; break;
    case PL_OP_RECV: *nr = op->count; break;
    case PL_OP_SENDRECV: *ns = op->count; *nr = op->recv_count; break;
    }
}

static int overlap(const float *a, size_t na, const float *b, size_t nb)
{
    if (!na || !nb) return 0;
    uintptr_t a0 = (uintptr_t)a, a1 = a0 + na * sizeof(float);
    uintptr_t b0 = (uintptr_t)b, b1 = b0 + nb * sizeof(float);
    return a0 < b1 && b0 < a1;
}

/* The in-place layouts each op accepts, for the message when buffers overlap otherwise. */
static const char *in_place_rule(enum pl_op_type t)
{
    switch (t) {
    case PL_OP_REDUCE_SCATTER:
        return "send == recv (result in the first recv_count elements) or "
               "recv == send + rank*recv_count";
    case PL_OP_ALL_GATHER:
        return "send == recv (this rank's block first) or send == recv + rank*send_count";
    case PL_OP_ALL_TO_ALL_V:
        return "send == recv with equal send and recv counts and displacements";
    case PL_OP_SENDRECV: return "send == recv with send_count == recv_count";
    default: return "send == recv";
    }
}

static int layout_ok(const struct pl_op *op, const struct pl_comm *c)
{
    const float *s = op->send, *r = op->recv;
    if (s == r) {
        if (op->type == PL_OP_SENDRECV) return op->count == op->recv_count;
        if (op->type == PL_OP_ALL_TO_ALL_V) {
            size_t n = (size_t)c->size;
            return !memcmp(op->send_counts, op->recv_counts, n * sizeof(size_t)) &&
                   !memcmp(op->send_displs, op->recv_displs, n * sizeof(size_t));
        }
        return 1;
    }
    size_t off = (size_t)c->rank * op->count;
    if (op->type == PL_OP_REDUCE_SCATTER && r == s + off) return 1;
    if (op->type == PL_OP_ALL_GATHER && s == r + off) return 1;
    return 0;
}

static void check_buffer(const struct call *k, const char *what, const void *p, size_t need)
{
    if (!need) return;
    if (!p)
        pl_usage_error("%s on group '%s': %s is NULL but the call needs %zu elements there",
                       k->fn, k->c->name, what, need);
    if (!cs.checks) return;
    /* Only the start of a ledger allocation has a known size; other pointers pass. */
    size_t have = pl_mem_size(p) / sizeof(float);
    if (have && have < need)
        pl_usage_error("%s on group '%s': %s is an allocation of %zu floats but the call "
                       "uses %zu of them (check the count and the group size %d)",
                       k->fn, k->c->name, what, have, need, k->c->size);
}

static void validate_local(const struct call *k)
{
    const struct pl_op *op = &k->op;
    const struct pl_comm *c = k->c;
    if (op->type == PL_OP_ALL_TO_ALL_V) {
        if (!op->send_counts || !op->send_displs || !op->recv_counts || !op->recv_displs)
            pl_usage_error("%s on group '%s': the four count and displacement arrays must "
                           "be given (each with %d entries, one per rank)", k->fn, c->name,
                           c->size);
    }
    size_t ns, nr;
    pl_op_extents(op, c, &ns, &nr);
    if (op->type == PL_OP_BROADCAST) {
        check_buffer(k, "buf", op->recv, nr);
        return;
    }
    check_buffer(k, "send", op->send, ns);
    check_buffer(k, "recv", op->recv, nr);
    if (overlap(op->send, ns, op->recv, nr) && !layout_ok(op, c))
        pl_usage_error("%s on group '%s': send and recv overlap but are not in place (in "
                       "place means %s)", k->fn, c->name, in_place_rule(op->type));
}

static void check_peer(const struct call *k, const char *what, int peer)
{
    if (peer < 0 || peer >= k->c->size)
        pl_usage_error("%s on group '%s': %s=%d is out of range (the group has %d ranks: "
                       "%s must be in 0..%d)", k->fn, k->c->name, what, peer, k->c->size, what,
                       k->c->size - 1);
}

static void check_tag(const struct call *k)
{
    if (k->op.tag < 0 || k->op.tag > cs.tag_ub)
        pl_usage_error("%s on group '%s': tag=%d must be in 0..%d", k->fn, k->c->name,
                       k->op.tag, cs.tag_ub);
}

/* ---- agreement: with checks on, every member makes the same call ----
 * Each member's call (which collective, whether asynchronous, count, op, root) is gathered
 * on the communicator's check duplicate. A blocking call completes the gather before it
 * starts, so a mismatch stops every member with one message before anything can hang. An
 * asynchronous call only starts the gather and completes it in pl_wait/pl_test: issuing
 * stays nonblocking, so issue orders that are legal across communicators stay legal. */

enum { AG_CALL, AG_ASYNC, AG_COUNT, AG_OP, AG_ROOT, AG_NV };

static const char *op_word(enum pl_op_type t);

/* The public function a gathered call came from: "pl_all_reduce_async". */
static void call_name(char *buf, size_t len, const long long *v)
{
    snprintf(buf, len, "pl_%s%s", op_word((enum pl_op_type)v[AG_CALL]),
             v[AG_ASYNC] ? "_async" : "");
}

/* Starts the gather; the returned array holds every member's call once req completes
 * (and this rank's own after them, which the nonblocking gather reads meanwhile). */
static long long *agree_start(const struct call *k, MPI_Request *req)
{
    struct pl_comm *c = k->c;
    long long *all = malloc(((size_t)c->size + 1) * AG_NV * sizeof *all);
    if (!all) pl_fatal("out of memory");
    long long *mine = all + (size_t)c->size * AG_NV;
    mine[AG_CALL] = k->op.type;
    mine[AG_ASYNC] = k->async;
    mine[AG_COUNT] = (long long)k->op.count;
    mine[AG_OP] = k->op.red;
    mine[AG_ROOT] = k->op.root;
    PL_CHECK_MPI(MPI_Iallgather(mine, AG_NV, MPI_LONG_LONG, all, AG_NV, MPI_LONG_LONG, c->check,
                                req));
    return all;
}

/* Every member holds the same gathered calls, so all reach the same verdict: nothing, or one
 * message naming the first rank that differs from rank 0. Frees all. */
static void agree_finish(const struct pl_comm *c, long long *all)
{
    int bad = -1, r = 0, any_async = 0;
    for (int i = 0; i < c->size; i++) any_async |= all[(size_t)i * AG_NV + AG_ASYNC] != 0;
    for (int f = 0; f < AG_NV && bad < 0; f++)
        for (r = 1; r < c->size; r++)
            if (all[(size_t)r * AG_NV + f] != all[f]) {
                bad = f;
                break;
            }
    if (bad < 0) {
        free(all);
        return;
    }
    const long long *v0 = all, *vr = all + (size_t)r * AG_NV;
    char f0[48], fr[48], who[64] = "", msg[512];
    call_name(f0, sizeof f0, v0);
    call_name(fr, sizeof fr, vr);
    if (c->size != pl_size())
        snprintf(who, sizeof who, " (world ranks %d and %d)", c->world_ranks[r],
                 c->world_ranks[0]);
    if (bad == AG_CALL || bad == AG_ASYNC) {
        snprintf(msg, sizeof msg,
                 "collectives differ on group '%s': rank %d called %s but rank 0 called %s%s "
                 "(every member must make the same collective calls, in the same order)",
                 c->name, r, fr, f0, who);
    } else {
        static const char *names[AG_NV] = {"call", "async", "count", "op", "root"};
        char va[32], vz[32];
        if (bad == AG_OP) {
            snprintf(va, sizeof va, "%s", red_name((enum pl_red)vr[bad]));
            snprintf(vz, sizeof vz, "%s", red_name((enum pl_red)v0[bad]));
        } else {
            snprintf(va, sizeof va, "%lld", vr[bad]);
            snprintf(vz, sizeof vz, "%lld", v0[bad]);
        }
        snprintf(msg, sizeof msg,
                 "%s on group '%s': rank %d passed %s=%s but rank 0 passed %s=%s%s (every "
                 "member must pass the same %s)", f0, c->name, r, names[bad], va, names[bad], vz,
                 who, names[bad]);
    }
    free(all);
    group_error(c, msg, any_async);
}

/* all-to-all-v: what rank j sends to rank i must be what rank i expects from rank j. */
static void agree_pairwise(const struct call *k)
{
    struct pl_comm *c = k->c;
    int n = c->size;
    unsigned long long *sc = malloc((size_t)n * sizeof *sc), *got = malloc((size_t)n * sizeof *got);
    if (!sc || !got) pl_fatal("out of memory");
    for (int j = 0; j < n; j++) sc[j] = k->op.send_counts[j];
    PL_CHECK_MPI(MPI_Alltoall(sc, 1, MPI_UNSIGNED_LONG_LONG, got, 1, MPI_UNSIGNED_LONG_LONG,
                              c->mpi));
    int first = -1;
    for (int j = 0; j < n && first < 0; j++)
        if (got[j] != k->op.recv_counts[j]) first = j;
    int lowest = first >= 0 ? c->rank : n;
    PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, c->mpi));
    if (lowest < n) {
        unsigned long long info[3] = {0, 0, 0};
        if (lowest == c->rank) {
            info[0] = (unsigned long long)first;
            info[1] = got[first];
            info[2] = k->op.recv_counts[first];
        }
        PL_CHECK_MPI(MPI_Bcast(info, 3, MPI_UNSIGNED_LONG_LONG, lowest, c->mpi));
        char msg[512];
        snprintf(msg, sizeof msg,
                 "%s on group '%s': rank %llu sends send_counts[%d]=%llu to rank %d, but rank "
                 "%d expects recv_counts[%llu]=%llu (counts must agree pairwise: send_counts[j] "
                 "on rank i equals recv_counts[i] on rank j)", k->fn, c->name, info[0], lowest,
                 info[1], lowest, lowest, info[0], info[2]);
        pl_comm_group_usage_error(c, msg);
    }
    free(sc);
    free(got);
}

/* ---- verbose, trace, ledger ---- */

static double coll_bytes(const struct pl_op *op, int n)
{
    double f = (double)sizeof(float), N = (double)n;
    switch (op->type) {
    case PL_OP_ALL_REDUCE:
    case PL_OP_BROADCAST: return f * (double)op->count;
    case PL_OP_REDUCE_SCATTER:
    case PL_OP_ALL_GATHER:
    case PL_OP_ALL_TO_ALL: return f * N * (double)op->count;
    case PL_OP_ALL_TO_ALL_V: {
        double s = 0;
        for (int j = 0; j < n; j++) s += (double)op->send_counts[j];
        return f * s;
    }
    case PL_OP_SEND:
    case PL_OP_SENDRECV: return f * (double)op->count;
    case PL_OP_RECV: return f * (double)op->count;
    default: return 0;
    }
}

static void charge_link(enum pl_coll_kind kind, struct pl_comm *c, int peer, double bytes)
{
    int to = c->world_ranks[peer], me = pl_rank();
    if (bytes <= 0 || to == me) return;
    pl_ledger_charge(kind, pl_topo_link(pl_topo(), me, to), bytes);
}

static void charge(const struct pl_op *op, struct pl_comm *c, enum pl_coll_kind kind, double S)
{
    int n = c->size, next = (c->rank + 1) % n;
    pl_ledger_count_call(kind);
    switch (op->type) {
    case PL_OP_ALL_REDUCE:
    case PL_OP_REDUCE_SCATTER:
    case PL_OP_ALL_GATHER:
        charge_link(kind, c, next, pl_ring_bytes_sent(kind, n, S));
        break;
    case PL_OP_BROADCAST:
        /* The chain runs root, root+1, ...; its last rank forwards nothing. */
        if ((c->rank - op->root + n) % n != n - 1)
            charge_link(kind, c, next, pl_ring_bytes_sent(kind, n, S));
        break;
    case PL_OP_ALL_TO_ALL:
        for (int j = 0; j < n; j++) charge_link(kind, c, j, (double)sizeof(float) * op->count);
        break;
    case PL_OP_ALL_TO_ALL_V:
        for (int j = 0; j < n; j++)
            charge_link(kind, c, j, (double)sizeof(float) * op->send_counts[j]);
        break;
    case PL_OP_SEND:
    case PL_OP_SENDRECV: charge_link(kind, c, op->peer, (double)sizeof(float) * op->count); break;
    default: break;
    }
}

static void trace_event(enum pl_ev_type type, const struct pl_handle *h, int peer, int tag,
                        double bytes, double t0, double t1)
{
    if (!pl_trace_enabled()) return;
    struct pl_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = type;
    snprintf(ev.label, sizeof ev.label, "%s %s", pl_coll_kind_name(h->kind), h->comm->name);
    ev.kind = h->kind;
    ev.group = h->comm->id;
    ev.bytes = bytes;
    ev.peer = peer >= 0 ? h->comm->world_ranks[peer] : -1;
    ev.tag = tag;
    ev.handle = h->id;
    ev.t0 = t0;
    ev.t1 = t1;
    pl_trace_flush();
    pl_trace_add(&ev);
}

static const char *op_word(enum pl_op_type t)
{
    switch (t) {
    case PL_OP_SEND: return "send";
    case PL_OP_RECV: return "recv";
    case PL_OP_SENDRECV: return "sendrecv";
    default: return pl_coll_kind_name(kind_of(t));
    }
}

static void print_call(const struct call *k, const struct pl_handle *h)
{
    const struct pl_op *op = &k->op;
    const struct pl_comm *c = k->c;
    char what[160] = "", hs[32] = "";
    if (h->id) snprintf(hs, sizeof hs, " async h=%ld", h->id);
    size_t f = sizeof(float);
    switch (op->type) {
    case PL_OP_SEND:
    case PL_OP_RECV:
        snprintf(what, sizeof what, "%s %d (world %d) | count=%zu bytes=%zu tag=%d",
                 op->type == PL_OP_SEND ? "->" : "<-", op->peer, c->world_ranks[op->peer],
                 op->count, op->count * f, op->tag);
        break;
    case PL_OP_SENDRECV:
        snprintf(what, sizeof what, "-> %d (world %d) count=%zu, <- %d (world %d) count=%zu "
                 "| tag=%d", op->peer, c->world_ranks[op->peer], op->count, op->src,
                 c->world_ranks[op->src], op->recv_count, op->tag);
        break;
    case PL_OP_BROADCAST:
        snprintf(what, sizeof what, "(%d ranks) root=%d (world %d) | count=%zu bytes=%.0f",
                 c->size, op->root, c->world_ranks[op->root], op->count, h->bytes);
        break;
    case PL_OP_ALL_REDUCE:
    case PL_OP_REDUCE_SCATTER:
        snprintf(what, sizeof what, "(%d ranks) | count=%zu bytes=%.0f op=%s", c->size,
                 op->count, h->bytes, red_name(op->red));
        break;
    case PL_OP_ALL_TO_ALL_V: {
        size_t ns, nr;
        pl_op_extents(op, c, &ns, &nr);
        snprintf(what, sizeof what, "(%d ranks) | send bytes=%.0f recv extent=%zu", c->size,
                 h->bytes, nr);
        break;
    }
    default:
        snprintf(what, sizeof what, "(%d ranks) | count=%zu bytes=%.0f", c->size, op->count,
                 h->bytes);
        break;
    }
    printf("[rank %d] %s %s#%d %s%s\n", pl_rank(), op_word(op->type), c->name, c->id, what, hs);
    fflush(stdout);
}

/* ---- running an operation ---- */

static void backend_start(struct pl_handle *h)
{
#ifdef PL_GPU
    if (cs.use_nccl) {
        pl_nccl_start(h);
        return;
    }
#endif
    pl_mpi_start(h, cs.staged);
}

static int backend_progress(struct pl_handle *h, int block)
{
#ifdef PL_GPU
    if (cs.use_nccl) return pl_nccl_progress(h, block);
#endif
    return pl_mpi_progress(h, block);
}

static struct pl_handle *run(struct call *k)
{
    struct pl_comm *c = k->c;
    struct pl_op *op = &k->op;
    if (!c) pl_usage_error("%s: the communicator is NULL (was this rank left out of the "
                           "group by a negative color?)", k->fn);
    enum pl_coll_kind kind = kind_of(op->type);

    char where[96];
    snprintf(where, sizeof where, "%s %s count=%zu", op_word(op->type), c->name, op->count);
    pl_trace_where(where);

    int p2p = kind == PL_P2P;
    validate_local(k);
    long long *pending_check = NULL;
    MPI_Request check_req = MPI_REQUEST_NULL;
    if (p2p) {
        check_peer(k, op->type == PL_OP_SENDRECV ? "dest" : "peer", op->peer);
        if (op->type == PL_OP_SENDRECV) check_peer(k, "src", op->src);
        check_tag(k);
    } else {
        if (cs.checks) {
            long long *all = agree_start(k, &check_req);
            if (k->async) {
                pending_check = all;
            } else {
                PL_CHECK_MPI(MPI_Wait(&check_req, MPI_STATUS_IGNORE));
                agree_finish(c, all);
            }
        }
        if (op->type == PL_OP_BROADCAST && (op->root < 0 || op->root >= c->size)) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s on group '%s': root=%d is out of range (the group "
                     "has %d ranks: root must be in 0..%d)", k->fn, c->name, op->root, c->size,
                     c->size - 1);
            if (cs.checks) pl_comm_group_usage_error(c, msg);
            pl_usage_error("%s", msg);
        }
        if (cs.checks && op->type == PL_OP_ALL_TO_ALL_V) agree_pairwise(k);
    }

    /* A blocking call's handle never leaves this function. */
    struct pl_handle local, *owned = k->async ? handle_new() : NULL, *h = owned ? owned : &local;
    if (!owned) memset(&local, 0, sizeof local);
    h->check_req = check_req;
    h->check_all = pending_check;
    h->op = *op;
    h->comm = c;
    h->blocking = !k->async;
    h->kind = kind;
    h->bytes = coll_bytes(op, c->size);
    h->id = k->async ? cs.next_handle++ : 0;
    if (pl_verbose()) print_call(k, h);

    charge(op, c, kind, h->bytes);
    double t0 = pl_now();
    if (k->async) {
        enum pl_ev_type t = !p2p ? PL_EV_ISSUE : op->type == PL_OP_SEND ? PL_EV_ISEND
                                                                         : PL_EV_IRECV;
        backend_start(h);
        trace_event(t, h, p2p ? op->peer : -1, op->tag, h->bytes, t0, pl_now());
        c->in_flight++;
        return owned;
    }
    if (!p2p) trace_event(PL_EV_ISSUE, h, -1, 0, h->bytes, t0, t0);
    backend_start(h);
    backend_progress(h, 1);
    double t1 = pl_now();
    switch (op->type) {
    case PL_OP_SEND: trace_event(PL_EV_SEND, h, op->peer, op->tag, h->bytes, t0, t1); break;
    case PL_OP_RECV: trace_event(PL_EV_RECV, h, op->peer, op->tag, h->bytes, t0, t1); break;
    case PL_OP_SENDRECV:
        trace_event(PL_EV_SEND, h, op->peer, op->tag, h->bytes, t0, t1);
        trace_event(PL_EV_RECV, h, op->src, op->tag,
                    (double)sizeof(float) * (double)op->recv_count, t0, t1);
        break;
    default: trace_event(PL_EV_WAIT, h, -1, 0, h->bytes, t0, t1); break;
    }
    return NULL;
}

static void finish(struct pl_handle *h, double t0)
{
    int p2p = h->kind == PL_P2P;
    trace_event(PL_EV_WAIT, h, p2p ? h->op.peer : -1, p2p ? h->op.tag : 0, h->bytes, t0,
                pl_now());
    if (pl_verbose()) {
        printf("[rank %d] wait %s#%d h=%ld (%s)\n", pl_rank(), h->comm->name, h->comm->id,
               h->id, op_word(h->op.type));
        fflush(stdout);
    }
    h->comm->in_flight--;
    handle_release(h);
}

/* An asynchronous collective's argument check, before its completion can hang on it. */
static int check_done(struct pl_handle *h, int block)
{
    if (!h->check_all) return 1;
    int flag = 1;
    if (block) PL_CHECK_MPI(MPI_Wait(&h->check_req, MPI_STATUS_IGNORE));
    else PL_CHECK_MPI(MPI_Test(&h->check_req, &flag, MPI_STATUS_IGNORE));
    if (!flag) return 0;
    long long *all = h->check_all;
    h->check_all = NULL;
    agree_finish(h->comm, all);
    return 1;
}

void pl_wait(struct pl_handle *h)
{
    if (!h) return;
    check_handle(h, "pl_wait");
    double t0 = pl_now();
    char where[96];
    snprintf(where, sizeof where, "wait h=%ld %s %s", h->id, op_word(h->op.type),
             h->comm->name);
    pl_trace_where(where);
    check_done(h, 1);
    backend_progress(h, 1);
    finish(h, t0);
}

void pl_wait_all(struct pl_handle **hs, int n)
{
    for (int i = 0; i < n; i++) {
        pl_wait(hs[i]);
        hs[i] = NULL;
    }
}

int pl_test(struct pl_handle *h)
{
    if (!h) return 1;
    check_handle(h, "pl_test");
    double t0 = pl_now();
    if (!check_done(h, 0) || !backend_progress(h, 0)) return 0;
    finish(h, t0);
    return 1;
}

/* ---- the public calls ---- */

static struct pl_handle *coll(const char *fn, struct pl_comm *comm, enum pl_op_type type,
                              const float *send, float *recv, size_t count, enum pl_red op,
                              int async)
{
    struct call k = {.fn = fn, .c = comm, .async = async,
                     .op = {.type = type, .send = send, .recv = recv, .count = count, .red = op}};
    if (op != PL_SUM && op != PL_AVG)
        pl_usage_error("%s: op=%d is not a reduction (use PL_SUM or PL_AVG)", fn, (int)op);
    return run(&k);
}

void pl_all_reduce(struct pl_comm *comm, const float *send, float *recv, size_t count,
                   enum pl_red op)
{
    coll("pl_all_reduce", comm, PL_OP_ALL_REDUCE, send, recv, count, op, 0);
}

void pl_reduce_scatter(struct pl_comm *comm, const float *send, float *recv, size_t recv_count,
                       enum pl_red op)
{
    coll("pl_reduce_scatter", comm, PL_OP_REDUCE_SCATTER, send, recv, recv_count, op, 0);
}

void pl_all_gather(struct pl_comm *comm, const float *send, float *recv, size_t send_count)
{
    coll("pl_all_gather", comm, PL_OP_ALL_GATHER, send, recv, send_count, PL_SUM, 0);
}

void pl_broadcast(struct pl_comm *comm, float *buf, size_t count, int root)
{
    struct call k;
    memset(&k, 0, sizeof k);
    k.fn = "pl_broadcast";
    k.c = comm;
    k.op.type = PL_OP_BROADCAST;
    k.op.send = buf;
    k.op.recv = buf;
    k.op.count = count;
    k.op.root = root;
    run(&k);
}

void pl_all_to_all(struct pl_comm *comm, const float *send, float *recv, size_t count)
{
    coll("pl_all_to_all", comm, PL_OP_ALL_TO_ALL, send, recv, count, PL_SUM, 0);
}

void pl_all_to_all_v(struct pl_comm *comm, const float *send, const size_t *send_counts,
                     const size_t *send_displs, float *recv, const size_t *recv_counts,
                     const size_t *recv_displs)
{
    /* The agreed "count" of a v-collective is only that every member calls it. */
    struct call k = {.fn = "pl_all_to_all_v", .c = comm,
                     .op = {.type = PL_OP_ALL_TO_ALL_V, .send = send, .recv = recv,
                            .send_counts = send_counts, .send_displs = send_displs,
                            .recv_counts = recv_counts, .recv_displs = recv_displs}};
    run(&k);
}

void pl_barrier(struct pl_comm *comm)
{
    coll("pl_barrier", comm, PL_OP_BARRIER, NULL, NULL, 0, PL_SUM, 0);
}

struct pl_handle *pl_all_reduce_async(struct pl_comm *comm, const float *send, float *recv,
                                      size_t count, enum pl_red op)
{
    return coll("pl_all_reduce_async", comm, PL_OP_ALL_REDUCE, send, recv, count, op, 1);
}

struct pl_handle *pl_reduce_scatter_async(struct pl_comm *comm, const float *send, float *recv,
                                          size_t recv_count, enum pl_red op)
{
    return coll("pl_reduce_scatter_async", comm, PL_OP_REDUCE_SCATTER, send, recv, recv_count,
                op, 1);
}

struct pl_handle *pl_all_gather_async(struct pl_comm *comm, const float *send, float *recv,
                                      size_t send_count)
{
    return coll("pl_all_gather_async", comm, PL_OP_ALL_GATHER, send, recv, send_count, PL_SUM,
                1);
}

static struct pl_handle *p2p(const char *fn, struct pl_comm *comm, enum pl_op_type type,
                             const float *send, float *recv, size_t count, int peer, int tag,
                             int async)
{
    struct call k = {.fn = fn, .c = comm, .async = async,
                     .op = {.type = type, .send = send, .recv = recv, .count = count,
                            .peer = peer, .tag = tag}};
    return run(&k);
}

void pl_send(struct pl_comm *comm, const float *buf, size_t count, int peer, int tag)
{
    p2p("pl_send", comm, PL_OP_SEND, buf, NULL, count, peer, tag, 0);
}

void pl_recv(struct pl_comm *comm, float *buf, size_t count, int peer, int tag)
{
    p2p("pl_recv", comm, PL_OP_RECV, NULL, buf, count, peer, tag, 0);
}

void pl_sendrecv(struct pl_comm *comm, const float *send, size_t send_count, int dest,
                 float *recv, size_t recv_count, int src, int tag)
{
    struct call k = {.fn = "pl_sendrecv", .c = comm,
                     .op = {.type = PL_OP_SENDRECV, .send = send, .recv = recv,
                            .count = send_count, .recv_count = recv_count, .peer = dest,
                            .src = src, .tag = tag}};
    run(&k);
}

struct pl_handle *pl_isend(struct pl_comm *comm, const float *buf, size_t count, int peer,
                           int tag)
{
    return p2p("pl_isend", comm, PL_OP_SEND, buf, NULL, count, peer, tag, 1);
}

struct pl_handle *pl_irecv(struct pl_comm *comm, float *buf, size_t count, int peer, int tag)
{
    return p2p("pl_irecv", comm, PL_OP_RECV, NULL, buf, count, peer, tag, 1);
}

/* ---- buffers ---- */

float *pl_comm_buf_alloc(size_t count, const char *label)
{
    if (count > SIZE_MAX / sizeof(float))
        pl_usage_error("pl_comm_buf_alloc('%s'): count=%zu floats does not fit in memory",
                       label ? label : "comm buffer", count);
    return pl_mem_alloc(count * sizeof(float), PL_MEM_COMM, PL_DEVICE,
                        label ? label : "comm buffer");
}

void pl_comm_buf_free(float *buf) { pl_mem_free(buf); }

void pl_copy_to_host(float *host, const float *buf, size_t count)
{
    if (!count || host == buf) return;
#ifdef PL_GPU
    pl_comm_gpu_copy(host, buf, count * sizeof(float), 1);
#else
    memmove(host, buf, count * sizeof(float));
#endif
}

void pl_copy_from_host(float *buf, const float *host, size_t count)
{
    if (!count || host == buf) return;
#ifdef PL_GPU
    pl_comm_gpu_copy(buf, host, count * sizeof(float), 0);
#else
    memmove(buf, host, count * sizeof(float));
#endif
}
