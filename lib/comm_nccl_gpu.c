/* comm_nccl_gpu.c: the GPU build's communication backend. One rank per GPU: NCCL
 * communicators (the world one bootstrapped by broadcasting an ncclUniqueId over MPI, the
 * others made by ncclCommSplit), each with its own CUDA stream. Every operation is ordered
 * after the work already queued on the compute stream (an event recorded there, waited on by
 * the communicator's stream) and records an event when it is done; completing it makes the
 * compute stream wait on that event and synchronizes the host, so the blocking API means
 * what it says. When two ranks of a node share a physical GPU (same PCI bus id), NCCL cannot
 * run and the layer uses the MPI backend on staged copies instead ("mpi-staged"); this file
 * then only picks the device and copies.
 *
 * NCCL matches a send with a receive by their order between two ranks; tags label the
 * trace and the MPI backend only. */
#include "comm_internal.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runtime.h"

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
 * every rank of this node has a GPU of its own; fills a description of a clash otherwise. */
static int own_gpus_on_node(MPI_Comm world, char *clash, size_t len)
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
    for (int a = 0; a < local_size && own; a++)
        for (int b = a + 1; b < local_size && own; b++)
            if (!strncmp(all + (size_t)a * BUS_ID_LEN, all + (size_t)b * BUS_ID_LEN, BUS_ID_LEN)) {
                own = 0;
                snprintf(clash, len, "ranks %d and %d both use the GPU at PCI bus %.*s",
                         world_of[a], world_of[b], BUS_ID_LEN, all + (size_t)a * BUS_ID_LEN);
            }
    free(all);
    free(world_of);
    return own;
}

int pl_gpu_comm_startup(MPI_Comm world)
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
    PL_CHECK_CUDA(cudaSetDevice(pl_local_rank() % ndev));

    char clash[128] = "";
    int own = own_gpus_on_node(world, clash, sizeof clash);
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

void pl_nccl_start(struct pl_handle *h)
{
    const struct pl_op *op = &h->op;
    const struct pl_comm *c = h->comm;
    struct pl_nccl_comm *g = c->gpu;
    cudaStream_t s = g->stream;
    ncclComm_t nc = g->nc;
    PL_CHECK_CUDA(cudaEventRecord(g->ready, COMPUTE_STREAM));
    PL_CHECK_CUDA(cudaStreamWaitEvent(s, g->ready, 0));

    const float *send = op->send;
    float *recv = op->recv;
    size_t count = op->count, off = (size_t)c->rank * count;
    ncclRedOp_t red = op->red == PL_AVG ? ncclAvg : ncclSum;
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
    case PL_OP_SEND:
        if (count) PL_CHECK_NCCL(ncclSend(send, count, ncclFloat, op->peer, nc, s));
        break;
    case PL_OP_RECV:
        if (count) PL_CHECK_NCCL(ncclRecv(recv, count, ncclFloat, op->peer, nc, s));
        break;
    case PL_OP_SENDRECV:
        if (send == recv && count) send = tmp = stream_copy(send, count, s);
        PL_CHECK_NCCL(ncclGroupStart());
        if (count) PL_CHECK_NCCL(ncclSend(send, count, ncclFloat, op->peer, nc, s));
        if (op->recv_count)
            PL_CHECK_NCCL(ncclRecv(recv, op->recv_count, ncclFloat, op->src, nc, s));
        PL_CHECK_NCCL(ncclGroupEnd());
        break;
    }
    if (tmp) PL_CHECK_CUDA(cudaFreeAsync(tmp, s));

    cudaEvent_t done;
    PL_CHECK_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    PL_CHECK_CUDA(cudaEventRecord(done, s));
    h->event = done;
}

int pl_nccl_progress(struct pl_handle *h, int block)
{
    cudaEvent_t done = h->event;
    if (!block) {
        cudaError_t e = cudaEventQuery(done);
        if (e == cudaErrorNotReady) return 0;
        PL_CHECK_CUDA(e);
    }
    PL_CHECK_CUDA(cudaStreamWaitEvent(COMPUTE_STREAM, done, 0));
    PL_CHECK_CUDA(cudaEventSynchronize(done));
    PL_CHECK_CUDA(cudaEventDestroy(done));
    h->event = NULL;
    return 1;
}

void pl_comm_gpu_copy(void *dst, const void *src, size_t bytes, int to_host)
{
    PL_CHECK_CUDA(cudaMemcpy(dst, src, bytes,
                             to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice));
}
