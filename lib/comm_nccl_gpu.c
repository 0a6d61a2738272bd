/* comm_nccl_gpu.c: the GPU build's communication backend. One rank per GPU: NCCL
 * communicators (the world one bootstrapped by broadcasting an ncclUniqueId over MPI, the
 * others made by ncclCommSplit), each with its own CUDA stream, so communication overlaps
 * the compute stream. Every operation is ordered after the work already queued on the
 * compute stream (an event recorded there, waited on by the communicator's stream) and
 * records an event when it is done; completing it makes the compute stream wait on that
 * event and waits on the host for that one event, never for the whole device. When two
 * ranks of a node share a physical GPU (same PCI bus id), NCCL cannot run and the layer
 * uses the MPI backend on staged copies instead ("mpi-staged"); this file then only picks
 * the device and copies.
 *
 * Point-to-point keeps MPI's meaning on NCCL. NCCL runs a send or receive issued on its own
 * as one operation that waits for its peer before anything queued after it on the stream,
 * so a rank that posts a receive and then a send (both outstanding) would block its own
 * send behind its receive. pl_isend and pl_irecv are therefore deferred: they are launched
 * together, in one ncclGroupStart/ncclGroupEnd, at the first wait or test on any of them or
 * at the next blocking call, which joins the same group. A blocking pl_send completes when
 * its receive runs (NCCL never buffers, where MPI buffers small messages), so code in which
 * every rank sends before it receives cannot complete; a blocking point-to-point call that
 * waits longer than PL_P2P_TIMEOUT_S (60 s) stops the job with a message saying so.
 *
 * NCCL matches a send with a receive by their order between two ranks; tags label the
 * trace and the MPI backend only. */
#include "comm_nccl_gpu.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "kernels.h"
#include "proc.h"

/* The compute stream: the legacy default stream, on which the kit's kernels, cuBLAS calls
 * and memcpys run. */
#define COMPUTE_STREAM ((cudaStream_t)0)

struct pl_nccl_comm {
    ncclComm_t nc;
    cudaStream_t stream;
    cudaEvent_t ready;  /* recorded on the compute stream before each operation */
    float *scratch;     /* one float for the barrier's all-reduce */
};

#define BUS_ID_LEN 32 /* "0000:00:00.0" and then some */

/* Whether two ranks would share a GPU is a question about physical devices, not about how
 * many devices each rank sees: under srun --gpus-per-task=1 every rank sees exactly one
 * (its own), and on a plain node every rank sees all of them. So each rank names the
 * device it picked by PCI bus id, and the node's ranks compare the names. Returns 1 when
 * every rank of this node has a GPU of its own; fills a description of a clash otherwise,
 * and *most with the most ranks of this node on one GPU. */
static int own_gpus_on_node(MPI_Comm world, char *clash, size_t len, int *most)
{
    int rank = 0, dev = 0;
    PL_CHECK_MPI(MPI_Comm_rank(world, &rank));
    PL_CHECK_CUDA(cudaGetDevice(&dev));
    char bus[BUS_ID_LEN] = {0};
    PL_CHECK_CUDA(cudaDeviceGetPCIBusId(bus, BUS_ID_LEN, dev));
    MPI_Comm node;
    int local_size = 1;
    PL_CHECK_MPI(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    PL_CHECK_MPI(MPI_Comm_size(node, &local_size));
    char *all = calloc((size_t)local_size, BUS_ID_LEN);
    int *world_of = calloc((size_t)local_size, sizeof *world_of);
    if (!all || !world_of) pl_fatal("out of memory");
    PL_CHECK_MPI(MPI_Allgather(bus, BUS_ID_LEN, MPI_CHAR, all, BUS_ID_LEN, MPI_CHAR, node));
    PL_CHECK_MPI(MPI_Allgather(&rank, 1, MPI_INT, world_of, 1, MPI_INT, node));
    PL_CHECK_MPI(MPI_Comm_free(&node));
    int own = 1;
    *most = 1;
    for (int a = 0; a < local_size; a++) {
        int same = 1;
        for (int b = a + 1; b < local_size; b++)
            if (!strncmp(all + (size_t)a * BUS_ID_LEN, all + (size_t)b * BUS_ID_LEN, BUS_ID_LEN)) {
                if (own)
                    snprintf(clash, len, "ranks %d and %d both use the GPU at PCI bus %.*s",
                             world_of[a], world_of[b], BUS_ID_LEN, all + (size_t)a * BUS_ID_LEN);
                own = 0;
                same++;
            }
        if (same > *most) *most = same;
    }
    free(all);
    free(world_of);
    return own;
}

/* The node-local rank as the launcher states it before MPI starts: Open MPI's mpirun, Slurm's
 * srun, MPICH/Intel MPI's Hydra, PMIx. -1 when none is set. */
static int launcher_local_rank(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID",
                                 "PMIX_LOCAL_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end = NULL;
        long r = v && *v ? strtol(v, &end, 10) : -1;
        if (v && *v && *end == '\0' && r >= 0 && r < INT_MAX) return (int)r;
    }
    return -1;
}

static int device_chosen = -1; /* the local rank the device was picked from, or -1 */

void pl_gpu_pick_device(void)
{
    int ndev = 0, local = launcher_local_rank();
    if (local < 0 || cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) return;
    if (cudaSetDevice(local % ndev) == cudaSuccess) device_chosen = local;
}

int pl_gpu_comm_startup(MPI_Comm world, int *per_device)
{
    int ndev = 0, rank = 0;
    cudaError_t err = cudaGetDeviceCount(&ndev);
    if (err != cudaSuccess) ndev = 0;
    PL_CHECK_MPI(MPI_Comm_rank(world, &rank));
    int fewest = ndev; /* every rank must see a GPU */
    PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &fewest, 1, MPI_INT, MPI_MIN, world));
    if (fewest == 0)
        pl_usage_error_all("this is the GPU build (make GPU=1) but a rank sees no CUDA device "
                           "(%s); use the CPU build (make) on machines without GPUs, or check "
                           "CUDA_VISIBLE_DEVICES", cudaGetErrorString(err));
    /* Normally picked before MPI_Init (pl_gpu_pick_device), so that MPI's and NCCL's own
     * set-up already runs on this rank's device; otherwise (a launcher that states no local
     * rank) from the node-local rank MPI computed. */
    if (device_chosen < 0) PL_CHECK_CUDA(cudaSetDevice(pl_local_rank() % ndev));

    char clash[128] = "";
    int own = own_gpus_on_node(world, clash, sizeof clash, per_device);
    PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, per_device, 1, MPI_INT, MPI_MAX, world));
    /* NCCL on every rank or on none; the lowest rank that saw a clash explains it. */
    int all_own = own, reporter = own ? INT_MAX : rank;
    PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &all_own, 1, MPI_INT, MPI_MIN, world));
    PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &reporter, 1, MPI_INT, MPI_MIN, world));
    if (!all_own && rank == reporter) {
        printf("paralab: %s, and NCCL needs a GPU of its own for every rank: communication "
               "runs on MPI with device buffers staged through host memory (backend "
               "mpi-staged); give each rank its own GPU to use NCCL\n", clash);
        fflush(stdout);
    }
    return all_own;
}

static void launch_pending(void);

static struct pl_nccl_comm *nccl_state(ncclComm_t nc)
{
    struct pl_nccl_comm *g = calloc(1, sizeof *g);
    if (!g) pl_fatal("out of memory for an NCCL communicator");
    g->nc = nc;
    PL_CHECK_CUDA(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
    PL_CHECK_CUDA(cudaEventCreateWithFlags(&g->ready, cudaEventDisableTiming));
    return g;
}

void pl_nccl_comm_world(struct pl_comm *world)
{
    ncclUniqueId id;
    if (world->rank == 0) PL_CHECK_NCCL(ncclGetUniqueId(&id));
    PL_CHECK_MPI(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, world->mpi));
    ncclComm_t nc;
    PL_CHECK_NCCL(ncclCommInitRank(&nc, world->size, id, world->rank));
    world->gpu = nccl_state(nc);
}

void pl_nccl_comm_split(struct pl_comm *child, const struct pl_comm *parent, int color,
                        int key)
{
    const struct pl_nccl_comm *p = parent->gpu;
    ncclComm_t nc = NULL;
    /* Same color and key as MPI_Comm_split, which orders ranks the same way. */
    PL_CHECK_NCCL(ncclCommSplit(p->nc, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &nc, NULL));
    if (!child) return;
    int r = -1;
    PL_CHECK_NCCL(ncclCommUserRank(nc, &r));
    PL_ASSERT(r == child->rank);
    child->gpu = nccl_state(nc);
}

void pl_nccl_comm_free(struct pl_comm *c)
{
    struct pl_nccl_comm *g = c->gpu;
    launch_pending(); /* none may stay queued for a stream about to go */
    PL_CHECK_CUDA(cudaStreamSynchronize(g->stream));
    PL_CHECK_NCCL(ncclCommFinalize(g->nc));
    PL_CHECK_NCCL(ncclCommDestroy(g->nc));
    if (g->scratch) PL_CHECK_CUDA(cudaFree(g->scratch));
    PL_CHECK_CUDA(cudaEventDestroy(g->ready));
    PL_CHECK_CUDA(cudaStreamDestroy(g->stream));
    free(g);
    c->gpu = NULL;
}

/* A stream-ordered copy of n floats of src, freed after the operation on the same stream. */
static float *stream_copy(const float *src, size_t n, cudaStream_t s)
{
    void *tmp = NULL;
    PL_CHECK_CUDA(cudaMallocAsync(&tmp, n ? n * sizeof(float) : sizeof(float), s));
    if (n) PL_CHECK_CUDA(cudaMemcpyAsync(tmp, src, n * sizeof(float), cudaMemcpyDeviceToDevice, s));
    return tmp;
}

static void copy_d2d(float *dst, const float *src, size_t n, cudaStream_t s)
{
    if (n && dst != src)
        PL_CHECK_CUDA(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, s));
}

/* All-to-all(-v) as one group of sends and receives; the rank's own block is a copy. */
static void exchange(const struct pl_comm *c, const float *send, const size_t *sc,
                     const size_t *sd, float *recv, const size_t *rc, const size_t *rd,
                     cudaStream_t s)
{
    const struct pl_nccl_comm *g = c->gpu;
    PL_CHECK_NCCL(ncclGroupStart());
    for (int j = 0; j < c->size; j++) {
        if (j == c->rank) continue;
        if (sc[j]) PL_CHECK_NCCL(ncclSend(send + sd[j], sc[j], ncclFloat, j, g->nc, s));
        if (rc[j]) PL_CHECK_NCCL(ncclRecv(recv + rd[j], rc[j], ncclFloat, j, g->nc, s));
    }
    PL_CHECK_NCCL(ncclGroupEnd());
    copy_d2d(recv + rd[c->rank], send + sd[c->rank], rc[c->rank], s);
}

static void all_to_all(const struct pl_comm *c, const float *send, float *recv, size_t count,
                       cudaStream_t s)
{
    size_t n = (size_t)c->size;
    size_t *v = malloc(2 * n * sizeof *v);
    if (!v) pl_fatal("out of memory");
    for (size_t j = 0; j < n; j++) {
        v[j] = count;
        v[n + j] = j * count;
    }
    exchange(c, send, v, v + n, recv, v, v + n, s);
    free(v);
}

/* ---- deferred point-to-point ---- */

/* A pl_isend/pl_irecv (or the blocking call that launches them) waiting for its group. */
struct p2p {
    struct pl_handle *h; /* gets the done event; NULL for the send half of a sendrecv */
    struct pl_nccl_comm *g;
    int is_send;
    const float *send;
    float *recv;
    size_t count;
    int peer;
    cudaEvent_t ready; /* the compute stream when the call was made */
};

static struct {
    struct p2p *q;
    int n, cap;
} pending;

static void defer(struct pl_handle *h, struct pl_nccl_comm *g, int is_send, const float *send,
                  float *recv, size_t count, int peer)
{
    if (pending.n == pending.cap) {
        pending.cap = pending.cap ? 2 * pending.cap : 16;
        pending.q = realloc(pending.q, (size_t)pending.cap * sizeof *pending.q);
        if (!pending.q) pl_fatal("out of memory for pending point-to-point operations");
    }
    struct p2p *p = &pending.q[pending.n++];
    *p = (struct p2p){.h = h, .g = g, .is_send = is_send, .send = send, .recv = recv,
                      .count = count, .peer = peer};
    /* Ordered after what the program queued before the call, not before the launch. */
    PL_CHECK_CUDA(cudaEventCreateWithFlags(&p->ready, cudaEventDisableTiming));
    PL_CHECK_CUDA(cudaEventRecord(p->ready, COMPUTE_STREAM));
    if (h) h->deferred = 1;
}

/* Launches every deferred send and receive, of every communicator, as one NCCL group: the
 * one way NCCL completes a pattern in which a rank's send and receive wait on each other. */
static void launch_pending(void)
{
    if (!pending.n) return;
    for (int i = 0; i < pending.n; i++) {
        struct p2p *p = &pending.q[i];
        PL_CHECK_CUDA(cudaStreamWaitEvent(p->g->stream, p->ready, 0));
        PL_CHECK_CUDA(cudaEventDestroy(p->ready));
    }
    PL_CHECK_NCCL(ncclGroupStart());
    for (int i = 0; i < pending.n; i++) {
        struct p2p *p = &pending.q[i];
        if (!p->count) continue;
        if (p->is_send) PL_CHECK_NCCL(ncclSend(p->send, p->count, ncclFloat, p->peer, p->g->nc,
                                               p->g->stream));
        else PL_CHECK_NCCL(ncclRecv(p->recv, p->count, ncclFloat, p->peer, p->g->nc,
                                    p->g->stream));
    }
    PL_CHECK_NCCL(ncclGroupEnd());
    for (int i = 0; i < pending.n; i++) {
        struct pl_handle *h = pending.q[i].h;
        if (!h) continue;
        cudaEvent_t done;
        PL_CHECK_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
        PL_CHECK_CUDA(cudaEventRecord(done, pending.q[i].g->stream));
        h->event = done;
        h->deferred = 0;
    }
    pending.n = 0;
}

/* Point-to-point: deferred, and launched now by a blocking call. */
static void start_p2p(struct pl_handle *h, struct pl_nccl_comm *g)
{
    const struct pl_op *op = &h->op;
    switch (op->type) {
    case PL_OP_SEND: defer(h, g, 1, op->send, NULL, op->count, op->peer); break;
    case PL_OP_RECV: defer(h, g, 0, NULL, op->recv, op->count, op->peer); break;
    default: {
        const float *send = op->send;
        if (send == op->recv && op->count) {
            /* In place: the send reads a stream-ordered copy taken before the receive lands. */
            void *tmp = NULL;
            size_t bytes = op->count * sizeof(float);
            PL_CHECK_CUDA(cudaMallocAsync(&tmp, bytes, COMPUTE_STREAM));
            PL_CHECK_CUDA(cudaMemcpyAsync(tmp, send, bytes, cudaMemcpyDeviceToDevice,
                                          COMPUTE_STREAM));
            send = tmp;
        }
        defer(NULL, g, 1, send, NULL, op->count, op->peer);
        defer(h, g, 0, NULL, op->recv, op->recv_count, op->src);
        launch_pending();
        if (send != op->send) PL_CHECK_CUDA(cudaFreeAsync((void *)send, g->stream));
        return;
    }
    }
    if (h->blocking) launch_pending();
}

void pl_nccl_start(struct pl_handle *h)
{
    const struct pl_op *op = &h->op;
    const struct pl_comm *c = h->comm;
    struct pl_nccl_comm *g = c->gpu;
    cudaStream_t s = g->stream;
    ncclComm_t nc = g->nc;
    if (op->type == PL_OP_SEND || op->type == PL_OP_RECV || op->type == PL_OP_SENDRECV) {
        start_p2p(h, g);
        return;
    }
    /* Sends and receives issued before the collective are on their way before it. */
    launch_pending();
    PL_CHECK_CUDA(cudaEventRecord(g->ready, COMPUTE_STREAM));
    PL_CHECK_CUDA(cudaStreamWaitEvent(s, g->ready, 0));

    const float *send = op->send;
    float *recv = op->recv;
    size_t count = op->count, off = (size_t)c->rank * count;
    /* PL_AVG is a sum here, divided by the group's size once the operation completes
     * (pl_nccl_progress), as the MPI backend divides: the same result bit for bit on every
     * backend, and no reliance on ncclAvg, which left the last elements of some counts
     * unwritten on a real GPU (an out-of-place all-reduce of 786433 floats, NCCL 2.28). */
    const ncclRedOp_t red = ncclSum;
    if (op->red == PL_AVG &&
        (op->type == PL_OP_ALL_REDUCE || op->type == PL_OP_REDUCE_SCATTER)) {
        h->scale_buf = recv;
        h->scale_n = count;
        h->scale_div = c->size;
    }
    float *tmp = NULL;
    /* Every member passes the same count (checked when checks are on), so skipping empty
     * collectives is consistent across the group. */
    switch (op->type) {
    case PL_OP_ALL_REDUCE:
        if (count) PL_CHECK_NCCL(ncclAllReduce(send, recv, count, ncclFloat, red, nc, s));
        break;
    case PL_OP_REDUCE_SCATTER:
        if (!count) break;
        if (send == recv) {
            /* NCCL's in place is recv == send + rank*count; the API's puts it first. */
            float *mine = (float *)send + off;
            PL_CHECK_NCCL(ncclReduceScatter(send, mine, count, ncclFloat, red, nc, s));
            copy_d2d(recv, mine, count, s);
        } else {
            PL_CHECK_NCCL(ncclReduceScatter(send, recv, count, ncclFloat, red, nc, s));
        }
        break;
    case PL_OP_ALL_GATHER:
        if (!count) break;
        if (send == recv) {
            copy_d2d(recv + off, send, count, s);
            send = recv + off;
        }
        PL_CHECK_NCCL(ncclAllGather(send, recv, count, ncclFloat, nc, s));
        break;
    case PL_OP_BROADCAST:
        if (count) PL_CHECK_NCCL(ncclBroadcast(recv, recv, count, ncclFloat, op->root, nc, s));
        break;
    case PL_OP_ALL_TO_ALL:
        if (send == recv) send = tmp = stream_copy(send, (size_t)c->size * count, s);
        all_to_all(c, send, recv, count, s);
        break;
    case PL_OP_ALL_TO_ALL_V:
        if (send == recv) {
            size_t ns, nr;
            pl_op_extents(op, c, &ns, &nr);
            send = tmp = stream_copy(send, ns, s);
        }
        exchange(c, send, op->send_counts, op->send_displs, recv, op->recv_counts,
                 op->recv_displs, s);
        break;
    case PL_OP_BARRIER:
        if (!g->scratch) PL_CHECK_CUDA(cudaMalloc((void **)&g->scratch, sizeof(float)));
        PL_CHECK_NCCL(ncclAllReduce(g->scratch, g->scratch, 1, ncclFloat, ncclSum, nc, s));
        break;
    default: /* point-to-point: start_p2p */
        break;
    }
    if (tmp) PL_CHECK_CUDA(cudaFreeAsync(tmp, s));

    cudaEvent_t done;
    PL_CHECK_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    PL_CHECK_CUDA(cudaEventRecord(done, s));
    h->event = done;
}

static double p2p_timeout_s(void)
{
    const char *v = getenv("PL_P2P_TIMEOUT_S");
    double t = v && *v ? atof(v) : 60.0;
    return t > 0 ? t : 60.0;
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits for a point-to-point operation's event, polling so that a pattern NCCL cannot
 * complete is reported with its fix instead of hanging the job. */
static void wait_p2p(const struct pl_handle *h, cudaEvent_t done)
{
    double t0 = seconds(), limit = p2p_timeout_s();
    for (long polls = 0;; polls++) {
        cudaError_t e = cudaEventQuery(done);
        if (e == cudaSuccess) return;
        if (e != cudaErrorNotReady) PL_CHECK_CUDA(e);
        if (polls > 1000) {
            struct timespec ts = {0, 50 * 1000};
            nanosleep(&ts, NULL);
        }
        if (seconds() - t0 > limit) break;
    }
    const struct pl_op *op = &h->op;
    const char *what = op->type == PL_OP_SEND ? "send to" : op->type == PL_OP_RECV
                                                                ? "receive from" : "sendrecv with";
    pl_usage_error("%s %s rank %d on group '%s' (%zu floats) has waited %.0f s for its peer "
                   "(PL_P2P_TIMEOUT_S). On NCCL a send completes only when its receive runs, "
                   "and nothing is buffered: if every rank sends before it receives (a ring), "
                   "every rank waits. Use pl_sendrecv for a ring step, or post pl_irecv first, "
                   "then pl_send or pl_isend, then pl_wait; check also that the peer makes the "
                   "matching call", h->blocking ? "blocking" : "pl_wait on a", what, op->peer,
                   h->comm->name, op->count, limit);
}

int pl_nccl_progress(struct pl_handle *h, int block)
{
    /* Waiting on (or testing) a deferred send or receive launches its group. */
    if (h->deferred) launch_pending();
    cudaEvent_t done = h->event;
    if (!block) {
        cudaError_t e = cudaEventQuery(done);
        if (e == cudaErrorNotReady) return 0;
        PL_CHECK_CUDA(e);
    }
    PL_CHECK_CUDA(cudaStreamWaitEvent(COMPUTE_STREAM, done, 0));
    if (h->kind == PL_P2P) wait_p2p(h, done);
    else PL_CHECK_CUDA(cudaEventSynchronize(done));
    PL_CHECK_CUDA(cudaEventDestroy(done));
    h->event = NULL;
    /* PL_AVG's division, queued on the compute stream behind the sum: every kernel, copy
     * and later communication (which waits for the compute stream) sees the average. */
    if (h->scale_n) pl_gpu_divide(h->scale_buf, h->scale_n, (float)h->scale_div);
    h->scale_n = 0;
    return 1;
}

void pl_comm_gpu_copy(void *dst, const void *src, size_t bytes, int to_host)
{
    PL_CHECK_CUDA(cudaMemcpy(dst, src, bytes,
                             to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice));
}
