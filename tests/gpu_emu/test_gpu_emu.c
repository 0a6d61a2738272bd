/* test_gpu_emu: how the GPU build uses the device, checked on the CUDA/NCCL stand-in
 * (tests/gpu_emu). Two training-step skeletons run their communication exactly as the labs
 * do (an overlapped DDP step: one asynchronous all-reduce per layer issued during the
 * backward pass; a ZeRO-3 step: all-gathers prefetched one layer ahead and reduce-scatters
 * issued during the backward pass, with full-parameter buffers allocated and freed per
 * layer), with stream-ordered copies standing in for the kernels. Each step's results are
 * checked exactly, and the emulator's counters must show no device-wide synchronisation and
 * no cudaMalloc once the caching allocator is warm. Then point-to-point patterns that
 * complete under MPI must complete on NCCL too.
 *     test_gpu_emu                     the checks above
 *     test_gpu_emu --mode send-first   every rank pl_send to the next, then pl_recv: must be
 *                                      refused with a message that teaches the fix */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "emu_testing.h"
#include "mem.h"

#define LAYERS 4
#define STEPS 3

static int me, nw;

/* Every rank's value for element i of layer l: small integers, so sums are exact. */
static float value(int rank, int l, size_t i) { return (float)((rank + 1) * (l + 2) + (int)(i % 7)); }

static float *device_filled(size_t n, int rank, int l, const char *label)
{
    float *h = malloc(n * sizeof *h), *d = pl_comm_buf_alloc(n, label);
    if (!h) pl_fatal("out of memory");
    for (size_t i = 0; i < n; i++) h[i] = value(rank, l, i);
    pl_copy_from_host(d, h, n);
    free(h);
    return d;
}

/* The stand-in for a kernel: a copy queued on the compute stream. */
static void kernel_copy(float *dst, const float *src, size_t n)
{
    PL_CHECK_CUDA(cudaMemcpyAsync(dst, src, n * sizeof *dst, cudaMemcpyDeviceToDevice, 0));
}

static size_t ddp_count(int l) { return 1000 + 37 * (size_t)l; }

/* Data parallelism with the gradient all-reduce overlapped with the backward pass. */
static void ddp_steps(void)
{
    struct pl_comm *w = pl_comm_world();
    float *src[LAYERS], *grad[LAYERS];
    for (int l = 0; l < LAYERS; l++) {
        src[l] = device_filled(ddp_count(l), me, l, "ddp local grads");
        grad[l] = pl_comm_buf_alloc(ddp_count(l), "ddp grads");
    }
    for (int s = 0; s < STEPS; s++) {
        struct pl_emu_counts a, b;
        pl_emu_counts(&a);
        struct pl_handle *h[LAYERS];
        for (int l = LAYERS - 1; l >= 0; l--) {
            size_t n = ddp_count(l);
            float *act = pl_mem_alloc(n * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, "ddp act");
            kernel_copy(act, src[l], n);
            kernel_copy(grad[l], act, n);
            pl_mem_free(act);
            h[l] = pl_all_reduce_async(w, grad[l], grad[l], n, PL_AVG);
        }
        pl_wait_all(h, LAYERS);
        pl_emu_counts(&b);
        expect_no_device_sync("DDP", s, &a, &b);
        for (int l = 0; l < LAYERS; l++) {
            size_t n = ddp_count(l), bad = 0;
            float *got = malloc(n * sizeof *got);
            pl_copy_to_host(got, grad[l], n);
            for (size_t i = 0; i < n; i++) {
                double want = 0;
                for (int r = 0; r < nw; r++) want += value(r, l, i);
                bad += got[i] != (float)(want / nw);
            }
            CHECK(!bad, "DDP step %d layer %d: %zu of %zu averaged gradients wrong", s, l, bad, n);
            free(got);
        }
    }
    for (int l = 0; l < LAYERS; l++) {
        pl_comm_buf_free(src[l]);
        pl_comm_buf_free(grad[l]);
    }
}

static size_t zero_shard(int l) { return 200 + 13 * (size_t)l; }

static struct pl_handle *gather(float **full, float *const *shard, int l)
{
    *full = pl_mem_alloc(zero_shard(l) * (size_t)nw * sizeof(float), PL_MEM_PARAMS, PL_DEVICE,
                         "zero3 full params");
    return pl_all_gather_async(pl_comm_world(), shard[l], *full, zero_shard(l));
}

/* ZeRO-3: parameters gathered a layer ahead, gradients reduce-scattered during backward. */
static void zero3_steps(void)
{
    float *shard[LAYERS], *gshard[LAYERS];
    for (int l = 0; l < LAYERS; l++) {
        shard[l] = device_filled(zero_shard(l), me, l, "zero3 shard");
        gshard[l] = pl_comm_buf_alloc(zero_shard(l), "zero3 grad shard");
    }
    for (int s = 0; s < STEPS; s++) {
        struct pl_emu_counts a, b;
        pl_emu_counts(&a);
        float *full[LAYERS + 1], *gfull[LAYERS];
        struct pl_handle *ag[LAYERS + 1], *rs[LAYERS];
        /* Forward: layer l computes while layer l+1 is gathered. */
        ag[0] = gather(&full[0], shard, 0);
        for (int l = 0; l < LAYERS; l++) {
            pl_wait(ag[l]);
            if (l + 1 < LAYERS) ag[l + 1] = gather(&full[l + 1], shard, l + 1);
            float *act = pl_mem_alloc(zero_shard(l) * (size_t)nw * sizeof(float), PL_MEM_ACTIV,
                                      PL_DEVICE, "zero3 act");
            kernel_copy(act, full[l], zero_shard(l) * (size_t)nw);
            pl_mem_free(act);
            pl_mem_free(full[l]);
        }
        /* Backward: gather again, make the layer's full gradient, reduce-scatter it. */
        ag[LAYERS - 1] = gather(&full[LAYERS - 1], shard, LAYERS - 1);
        for (int l = LAYERS - 1; l >= 0; l--) {
            pl_wait(ag[l]);
            if (l > 0) ag[l - 1] = gather(&full[l - 1], shard, l - 1);
            size_t n = zero_shard(l) * (size_t)nw;
            gfull[l] = pl_mem_alloc(n * sizeof(float), PL_MEM_GRADS, PL_DEVICE, "zero3 grads");
            kernel_copy(gfull[l], full[l], n);
            pl_mem_free(full[l]);
            rs[l] = pl_reduce_scatter_async(pl_comm_world(), gfull[l], gshard[l], zero_shard(l),
                                            PL_SUM);
        }
        pl_wait_all(rs, LAYERS);
        for (int l = 0; l < LAYERS; l++) pl_mem_free(gfull[l]);
        pl_emu_counts(&b);
        expect_no_device_sync("ZeRO-3", s, &a, &b);
        /* Every rank's full gradient is the gathered parameters: the sum is nw times them. */
        for (int l = 0; l < LAYERS; l++) {
            size_t n = zero_shard(l), bad = 0;
            float *got = malloc(n * sizeof *got);
            pl_copy_to_host(got, gshard[l], n);
            for (size_t i = 0; i < n; i++) bad += got[i] != (float)nw * value(me, l, i);
            CHECK(!bad, "ZeRO-3 step %d layer %d: %zu of %zu gradient shard values wrong", s, l,
                  bad, n);
            free(got);
        }
    }
    for (int l = 0; l < LAYERS; l++) {
        pl_comm_buf_free(shard[l]);
        pl_comm_buf_free(gshard[l]);
    }
}

static void expect_from(const char *what, const float *dev, int from, size_t n)
{
    float *got = malloc(n * sizeof *got);
    pl_copy_to_host(got, dev, n);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += got[i] != value(from, 0, i);
    CHECK(!bad, "%s: %zu of %zu values from rank %d wrong", what, bad, n, from);
    free(got);
}

/* Patterns that complete under MPI, in the orders the labs and handouts use. */
static void p2p_patterns(void)
{
    struct pl_comm *w = pl_comm_world();
    int next = (me + 1) % nw, prev = (me + nw - 1) % nw;
    size_t n = 4099;
    float *mine = device_filled(n, me, 0, "p2p send"), *in = pl_comm_buf_alloc(n, "p2p recv");

    /* The Lab 1 handout's advice: post the receive, then send, then wait. */
    struct pl_handle *h[2];
    h[0] = pl_irecv(w, in, n, prev, 1);
    h[1] = pl_isend(w, mine, n, next, 1);
    pl_wait_all(h, 2);
    expect_from("ring irecv, isend, wait", in, prev, n);

    /* The same with the send first, and waits in the other order. */
    h[1] = pl_isend(w, mine, n, next, 2);
    h[0] = pl_irecv(w, in, n, prev, 2);
    pl_wait(h[1]);
    pl_wait(h[0]);
    expect_from("ring isend, irecv, wait send first", in, prev, n);

    /* An asynchronous send completed by a blocking receive. */
    h[1] = pl_isend(w, mine, n, next, 3);
    pl_recv(w, in, n, prev, 3);
    pl_wait(h[1]);
    expect_from("ring isend, blocking recv", in, prev, n);

    /* A receive completed by polling with pl_test. */
    h[0] = pl_irecv(w, in, n, prev, 4);
    h[1] = pl_isend(w, mine, n, next, 4);
    while (!pl_test(h[0])) {}
    pl_wait(h[1]);
    expect_from("ring irecv polled with pl_test", in, prev, n);

    /* Pairwise exchange, receive first, with each partner in turn. */
    for (int k = 1; k < nw; k++) {
        int to = (me + k) % nw, from = (me - k + nw) % nw;
        h[0] = pl_irecv(w, in, n, from, 5);
        h[1] = pl_isend(w, mine, n, to, 5);
        pl_wait_all(h, 2);
        char what[64];
        snprintf(what, sizeof what, "pairwise exchange, distance %d", k);
        expect_from(what, in, from, n);
    }
    pl_comm_buf_free(mine);
    pl_comm_buf_free(in);
}

/* Correct under MPI only while messages are small enough to be buffered; never on NCCL. */
static void send_first_ring(void)
{
    struct pl_comm *w = pl_comm_world();
    size_t n = 64;
    float *mine = device_filled(n, me, 0, "ring send"), *in = pl_comm_buf_alloc(n, "ring recv");
    pl_send(w, mine, n, (me + 1) % nw, 0);
    pl_recv(w, in, n, (me + nw - 1) % nw, 0);
    pl_comm_buf_free(mine);
    pl_comm_buf_free(in);
}

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    me = pl_rank();
    nw = pl_size();
    if (argc == 3 && !strcmp(argv[1], "--mode") && !strcmp(argv[2], "send-first")) {
        send_first_ring();
        pl_finalize();
        return 0;
    }
    CHECK(!strcmp(pl_comm_backend(), "nccl"), "backend is %s, not nccl", pl_comm_backend());
    /* The launcher states the local rank: the device is chosen from it before MPI_Init. */
    struct pl_emu_counts n;
    pl_emu_counts(&n);
    int dev = -1, ndev = 0;
    PL_CHECK_CUDA(cudaGetDevice(&dev));
    PL_CHECK_CUDA(cudaGetDeviceCount(&ndev));
    if (getenv("OMPI_COMM_WORLD_LOCAL_RANK") || getenv("SLURM_LOCALID"))
        CHECK(n.device_before_mpi, "the device was set after MPI_Init, not before");
    CHECK(dev == pl_local_rank() % ndev, "rank %d (local %d) uses device %d of %d", me,
          pl_local_rank(), dev, ndev);
    ddp_steps();
    zero3_steps();
    if (nw > 1) p2p_patterns();

    struct pl_mem_stats st;
    pl_mem_get_stats(&st);
    CHECK(st.device_cached > 0, "the caching allocator keeps freed device blocks");
    CHECK(st.current_total == 0, "the ledger counts %zu bytes still held after every buffer "
          "was freed (the cache's reserve must not be counted)", st.current_total);

    int fails = (int)world_sum(failures), all = (int)world_sum(checks);
    if (me == 0)
        printf("test_gpu_emu: %d ranks, backend %s: %d checks, %d failed\n", nw,
               pl_comm_backend(), all, fails);
    pl_finalize();
    return fails ? 1 : 0;
}
