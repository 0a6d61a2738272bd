/* comm.c: the front end of the communication layer, shared by every backend. Each call is
 * validated (comm_check.c: arguments, and with checks on, agreement among members on which
 * collective is called, its count, op and root), printed under PL_VERBOSE=1, recorded in
 * the trace and charged to the traffic ledger as the ring algorithm uses the links
 * (comm_record.c); then a backend (comm_mpi.c, comm_nccl_gpu.c) moves the bytes. Handles of
 * asynchronous calls carry a magic number and are recycled through a free list rather than
 * returned to malloc, so a handle waited on twice is reported, not a crash. */
#include "comm.h"
#include "comm_internal.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "comm_check.h"
#include "comm_mpi.h"
#include "comm_nccl_gpu.h"
#include "comm_op.h"
#include "comm_record.h"
#include "mem.h"
#include "proc.h"
#include "trace.h"

static struct {
    struct pl_comm *world;
    int use_nccl;      /* GPU build with one GPU per local rank */
    int staged;        /* MPI on copies staged through host buffers */
    int per_device;    /* most ranks of one node on one GPU; 0 on the CPU build */
    long next_handle;
    int groups_led;    /* groups in which this rank is the lowest world rank: makes ids */
    struct pl_handle *live; /* asynchronous calls issued and not completed, newest first */
} cs = {NULL, 0, 0, 0, 1, 0, NULL};

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
    int nccl = pl_gpu_comm_startup(world, &cs.per_device);
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

static int check_free(const void *p, size_t bytes, const char *label);

void pl_comm_startup(void)
{
    if (cs.world) return;
    pl_comm_check_startup();
    pl_mem_set_free_check(check_free);

    MPI_Comm dup;
    PL_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    cs.world = comm_from_mpi(dup, "world");
    cs.world->id = 0;
    pl_trace_register_group(0, cs.world->size, cs.world->world_ranks);
    choose_backend(dup);
    const char *like = getenv("PL_P2P_LIKE_NCCL");
    if (like && *like && strcmp(like, "0") && strcmp(like, "1"))
        pl_usage_error_all("PL_P2P_LIKE_NCCL=%s: set 1 to give point-to-point NCCL's rules on "
                           "the MPI backend, or 0 (or leave it unset) for MPI's", like);
    if (like && !strcmp(like, "1")) pl_comm_set_p2p_like_nccl(1);
}

void pl_comm_set_p2p_like_nccl(int on)
{
    /* The NCCL backend has these rules already. */
    if (!cs.use_nccl) pl_mpi_set_p2p_like_nccl(on);
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

/* pl_mem_free's check: a block that a call in flight sends from or receives into is freed
 * too early. On NCCL (and under its rules here) a send reads its buffer only when its group
 * launches, and a receive writes whenever it completes, so this makes wrong numbers far
 * from the cause. The call keeps the block's label, and its completion (finish) names
 * both; a call never completed is reported as such where the code that started it ends.
 * Until then the block's memory stays allocated (returns 1): a receive still lands there,
 * not in whatever the heap gave out next. */
static int check_free(const void *p, size_t bytes, const char *label)
{
    const char *lo = p, *hi = lo + bytes;
    int used = 0;
    for (struct pl_handle *h = cs.live; h; h = h->live_next) {
        size_t ns = 0, nr = 0;
        pl_op_extents(&h->op, h->comm, &ns, &nr);
        const char *s = (const char *)h->op.send, *r = (const char *)h->op.recv;
        int in_send = s && ns && s < hi && lo < s + ns * sizeof(float);
        int in_recv = r && nr && r < hi && lo < r + nr * sizeof(float);
        if (!in_send && !in_recv) continue;
        used = 1;
        if (!h->freed_label[0]) snprintf(h->freed_label, sizeof h->freed_label, "%s", label);
    }
    return used;
}

/* An FNV-1a-style hash of an isend's floats, a 32-bit word at a time: taken when the send
 * starts and again when it completes, on the CPU build with checks on (benchmarks turn them
 * off), where op memory is host memory. A send buffer written in between is a race: MPI may
 * send either values, and NCCL sends what the buffer holds when the send's group launches. */
#ifndef PL_GPU
static unsigned long long send_hash(const struct pl_handle *h)
{
    size_t ns = 0, nr = 0;
    pl_op_extents(&h->op, h->comm, &ns, &nr);
    const float *p = h->op.send;
    unsigned long long x = 1469598103934665603ull;
    for (size_t i = 0; p && i < ns; i++) {
        uint32_t w;
        memcpy(&w, p + i, sizeof w);
        x = (x ^ w) * 1099511628211ull;
    }
    return x;
}

/* The completion of an isend whose buffer changed in flight (send_hash). */
static void written_in_flight(const struct pl_handle *h)
{
    pl_usage_error("the isend h=%ld with rank %d (tag %d) on group '%s' completed after its "
                   "buffer was written (between the pl_isend and this wait): write a buffer "
                   "only after the pl_wait or successful pl_test of every send from it. MPI "
                   "may send the old values or the new, and NCCL sends what the buffer holds "
                   "when the send's group launches, at a later wait",
                   h->id, h->op.peer, h->op.tag, h->comm->name);
}
#endif

/* The completion of a call whose block was freed in flight (check_free). */
static void freed_in_flight(const struct pl_handle *h)
{
    char peer[48] = "";
    if (h->kind == PL_P2P)
        snprintf(peer, sizeof peer, " with rank %d (tag %d)", h->op.peer, h->op.tag);
    pl_usage_error("the %s h=%ld%s on group '%s' completed after its buffer was freed "
                   "(pl_mem_free('%s') came before this wait): free a buffer only after the "
                   "pl_wait or successful pl_test of every call that uses it (on NCCL a send "
                   "reads its buffer only when its group launches, at a later wait)",
                   pl_op_word(h->op.type), h->id, peer, h->comm->name, h->freed_label);
}

static void live_add(struct pl_handle *h)
{
    h->live_prev = NULL;
    h->live_next = cs.live;
    if (cs.live) cs.live->live_prev = h;
    cs.live = h;
}

static void live_remove(struct pl_handle *h)
{
    if (h->live_prev) h->live_prev->live_next = h->live_next;
    else cs.live = h->live_next;
    if (h->live_next) h->live_next->live_prev = h->live_prev;
    h->live_prev = h->live_next = NULL;
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
    /* Calls still in flight at the end keep pointers to communicators freed here: the free
     * check forgets them, so that a block freed after the runtime ends reads none. */
    pl_mem_set_free_check(NULL);
    cs.live = NULL;
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
    pl_trace_where_done();
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
int pl_comm_in_flight(const struct pl_comm *comm) { return comm->in_flight; }
int pl_comm_id(const struct pl_comm *comm) { return comm->id; }

int pl_comm_world_rank(const struct pl_comm *comm, int rank)
{
    if (rank < 0 || rank >= comm->size)
        pl_usage_error("pl_comm_world_rank: rank %d is out of range for group '%s' of %d "
                       "ranks (0..%d)", rank, comm->name, comm->size, comm->size - 1);
    return comm->world_ranks[rank];
}

const char *pl_comm_backend(void)
{
    return cs.use_nccl ? "nccl" : cs.staged ? "mpi-staged" : "mpi";
}

int pl_comm_ranks_per_device(void)
{
    return cs.per_device;
}

int pl_comm_device_emulated(void)
{
#ifdef PL_GPU_STAND_IN
    return 1;
#else
    return 0;
#endif
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

static struct pl_handle *run(struct pl_call *k)
{
    struct pl_comm *c = k->c;
    struct pl_op *op = &k->op;
    if (!c) pl_usage_error("%s: the communicator is NULL (was this rank left out of the "
                           "group by a negative color?)", k->fn);
    enum pl_coll_kind kind = pl_op_kind(op->type);

    char where[192];
    long coll_call = 0;
    if (kind == PL_P2P && op->type == PL_OP_SENDRECV)
        snprintf(where, sizeof where, "%s %s to %d from %d tag=%d count=%zu",
                 pl_op_word(op->type), c->name, op->peer, op->src, op->tag, op->count);
    else if (kind == PL_P2P)
        snprintf(where, sizeof where, "%s %s %s %d tag=%d count=%zu", pl_op_word(op->type),
                 c->name, op->type == PL_OP_SEND ? "to" : "from",
                 op->peer, op->tag, op->count);
    else
        snprintf(where, sizeof where, PL_WHERE_COLL_FMT, pl_op_word(op->type), c->name,
                 op->count, coll_call = ++c->coll_calls, c->id, c->size);
    pl_trace_where(where);

    int p2p = kind == PL_P2P;
    pl_comm_validate(k);
    long long *pending_check = NULL;
    MPI_Request check_req = MPI_REQUEST_NULL;
    if (p2p) {
        pl_comm_check_peer(k, op->type == PL_OP_SENDRECV ? "dest" : "peer", op->peer);
        if (op->type == PL_OP_SENDRECV) pl_comm_check_peer(k, "src", op->src);
        pl_comm_check_tag(k);
    } else {
        if (pl_comm_checks()) {
            long long *all = pl_comm_agree_start(k, &check_req);
            if (k->async) {
                pending_check = all;
            } else {
                PL_CHECK_MPI(MPI_Wait(&check_req, MPI_STATUS_IGNORE));
                pl_comm_agree_finish(c, all);
            }
        }
        if (op->type == PL_OP_BROADCAST && (op->root < 0 || op->root >= c->size)) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s on group '%s': root=%d is out of range (the group "
                     "has %d ranks: root must be in 0..%d)", k->fn, c->name, op->root, c->size,
                     c->size - 1);
            if (pl_comm_checks()) pl_comm_group_usage_error(c, msg);
            pl_usage_error("%s", msg);
        }
        if (pl_comm_checks() && op->type == PL_OP_ALL_TO_ALL_V) pl_comm_agree_pairwise(k);
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
    h->bytes = pl_comm_bytes(op, c->size);
    h->id = k->async ? cs.next_handle++ : 0;
    h->coll_call = coll_call;
    if (pl_verbose()) pl_comm_print(k, h);

    pl_comm_charge(op, c, kind, h->bytes);
    double t0 = pl_now();
    if (k->async) {
        enum pl_ev_type t = !p2p ? PL_EV_ISSUE : op->type == PL_OP_SEND ? PL_EV_ISEND
                                                                         : PL_EV_IRECV;
#ifndef PL_GPU
        h->has_sum = op->type == PL_OP_SEND && pl_comm_checks();
        if (h->has_sum) h->send_sum = send_hash(h);
#endif
        backend_start(h);
        pl_comm_event(t, h, p2p ? op->peer : -1, op->tag, h->bytes, t0, pl_now());
        c->in_flight++;
        live_add(h);
        pl_trace_where_done();
        return owned;
    }
    if (!p2p) pl_comm_event(PL_EV_ISSUE, h, -1, 0, h->bytes, t0, t0);
    backend_start(h);
    backend_progress(h, 1);
    double t1 = pl_now();
    switch (op->type) {
    case PL_OP_SEND: pl_comm_event(PL_EV_SEND, h, op->peer, op->tag, h->bytes, t0, t1); break;
    case PL_OP_RECV: pl_comm_event(PL_EV_RECV, h, op->peer, op->tag, h->bytes, t0, t1); break;
    case PL_OP_SENDRECV:
        pl_comm_event(PL_EV_SEND, h, op->peer, op->tag, h->bytes, t0, t1);
        pl_comm_event(PL_EV_RECV, h, op->src, op->tag,
                    (double)sizeof(float) * (double)op->recv_count, t0, t1);
        break;
    default: pl_comm_event(PL_EV_WAIT, h, -1, 0, h->bytes, t0, t1); break;
    }
    pl_trace_where_done();
    return NULL;
}

static void finish(struct pl_handle *h, double t0)
{
    int p2p = h->kind == PL_P2P;
    pl_comm_event(PL_EV_WAIT, h, p2p ? h->op.peer : -1, p2p ? h->op.tag : 0, h->bytes, t0,
                pl_now());
    if (pl_verbose()) {
        printf("[rank %d] wait %s#%d h=%ld (%s)\n", pl_rank(), h->comm->name, h->comm->id,
               h->id, pl_op_word(h->op.type));
        fflush(stdout);
    }
    h->comm->in_flight--;
    live_remove(h);
    if (h->freed_label[0]) freed_in_flight(h);
#ifndef PL_GPU
    if (h->has_sum && send_hash(h) != h->send_sum) written_in_flight(h);
#endif
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
    pl_comm_agree_finish(h->comm, all);
    return 1;
}

void pl_wait(struct pl_handle *h)
{
    if (!h) return;
    check_handle(h, "pl_wait");
    double t0 = pl_now();
    char where[224];
    int n = snprintf(where, sizeof where, "wait h=%ld ", h->id);
    if (h->kind == PL_P2P)
        snprintf(where + n, sizeof where - (size_t)n, "%s %s", pl_op_word(h->op.type),
                 h->comm->name);
    else
        snprintf(where + n, sizeof where - (size_t)n, PL_WHERE_COLL_FMT,
                 pl_op_word(h->op.type), h->comm->name, h->op.count, h->coll_call,
                 h->comm->id, h->comm->size);
    pl_trace_where(where);
    check_done(h, 1);
    backend_progress(h, 1);
    finish(h, t0);
    pl_trace_where_done();
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
    struct pl_call k = {.fn = fn, .c = comm, .async = async,
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
    struct pl_call k;
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
    struct pl_call k = {.fn = "pl_all_to_all_v", .c = comm,
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
    struct pl_call k = {.fn = fn, .c = comm, .async = async,
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
    struct pl_call k = {.fn = "pl_sendrecv", .c = comm,
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

