/* gpu_emu.c: a CPU stand-in for the part of the CUDA runtime and NCCL that the kit's GPU
 * build uses, so that its communication layer and memory ledger run in CI without a GPU.
 *
 * The model is the one that matters for correctness on a real device:
 *   - device memory is host memory, known to a table so that NCCL and copy calls can refuse
 *     host pointers where the device needs device ones;
 *   - every stream is a queue run in order by one "device" thread, concurrently with the
 *     host, so the host never waits for device work unless it synchronises;
 *   - events complete when their stream reaches them; cudaStreamWaitEvent orders streams;
 *   - NCCL calls are stream work over MPI on communicators of their own; a send completes
 *     only once the matching receive runs (MPI_Issend: no eager buffering), and each group
 *     (or each call outside a group) is one launch, so ungrouped point-to-point deadlocks
 *     exactly where it would on a GPU. The host reports that as a hang with the stream's
 *     blocked operation instead of hanging;
 *   - device-wide synchronisations (cudaDeviceSynchronize, and cudaFree, which implies one)
 *     are counted, so tests can assert that a training step has none;
 *   - faults seen on real GPUs can be played on request (PL_EMU_NCCL_AVG_TAIL), so a test
 *     shows that the kit does not depend on what a given NCCL gets wrong.
 * MPI_Init is wrapped to ask for MPI_THREAD_MULTIPLE, which the device thread needs. */
#include <cblas.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cublas_v2.h"
#include "cuda_runtime.h"
#include "gpu_emu.h"
#include "mem.h"
#include "nccl.h"

enum item_kind { IT_COPY, IT_SET, IT_RECORD, IT_WAIT, IT_FREE, IT_NCCL, IT_HOST };
enum nop_kind { NOP_SEND, NOP_RECV, NOP_ALL_REDUCE, NOP_REDUCE_SCATTER, NOP_ALL_GATHER,
                NOP_BROADCAST };

struct pl_emu_nccl_comm {
    MPI_Comm ctl;  /* host thread only: splits */
    MPI_Comm data; /* device thread only: the operations */
    int rank, size;
};

struct nccl_op {
    enum nop_kind kind;
    const void *send;
    void *recv;
    size_t count;
    int peer; /* send/recv peer, broadcast root */
    ncclRedOp_t red;
    struct pl_emu_nccl_comm *comm;
    cudaStream_t stream;
    float *tmp;
    MPI_Request req;
    float tail[3]; /* PL_EMU_NCCL_AVG_TAIL: what recv held where ncclAvg leaves it unwritten */
    size_t ntail;
};

struct pl_emu_event {
    long recorded, completed; /* sequence numbers of the last record and the last reached */
    double t_done;
    unsigned flags;
    int refs, destroyed;
};

struct item {
    enum item_kind kind;
    struct item *next;
    void *dst;
    const void *src;
    size_t bytes;
    int value;
    struct pl_emu_event *ev;
    long seq;
    struct nccl_op *ops;
    int nops, started;
    void (*fn)(void *); /* IT_HOST: a kernel or a cuBLAS call */
    void *arg;
};

struct pl_emu_stream {
    struct item *head, *tail;
    struct pl_emu_stream *next;
    int id;
};

struct alloc {
    char *p;
    size_t bytes;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    pthread_t thread;
    int running, quit;
    struct pl_emu_stream legacy; /* stream 0; every created stream follows in the list */
    int next_stream_id;
    long seq, items_done;
    struct pl_emu_counts n;
    int device, device_set;
    struct alloc *allocs;
    size_t nallocs, cap_allocs;
    int group_depth;
    struct nccl_op *group;
    int ngroup, cap_group;
} E = {.mu = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER,
       .done = PTHREAD_COND_INITIALIZER, .next_stream_id = 1};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "gpu_emu: out of host memory\n");
        abort();
    }
    return p;
}

static cudaStream_t stream_of(cudaStream_t s) { return s ? s : &E.legacy; }

/* ---- device memory: the table of live allocations ---- */

static void alloc_add(void *p, size_t bytes)
{
    if (E.nallocs == E.cap_allocs) {
        E.cap_allocs = E.cap_allocs ? 2 * E.cap_allocs : 256;
        E.allocs = realloc(E.allocs, E.cap_allocs * sizeof *E.allocs);
        if (!E.allocs) abort();
    }
    E.allocs[E.nallocs++] = (struct alloc){p, bytes};
}

static int alloc_remove(void *p)
{
    for (size_t i = 0; i < E.nallocs; i++)
        if (E.allocs[i].p == p) {
            E.allocs[i] = E.allocs[--E.nallocs];
            return 1;
        }
    return 0;
}

/* Whether [p, p+bytes) lies inside one device allocation. */
static int on_device(const void *p, size_t bytes)
{
    const char *c = p;
    for (size_t i = 0; i < E.nallocs; i++)
        if (c >= E.allocs[i].p && c + bytes <= E.allocs[i].p + E.allocs[i].bytes) return 1;
    return 0;
}

/* ---- the device thread ---- */

static void event_unref(struct pl_emu_event *e)
{
    if (--e->refs == 0 && e->destroyed) free(e);
}

/* PL_EMU_NCCL_AVG_TAIL=1 plays a fault seen on a real GPU (NCCL 2.28.9): ncclAvg left the
 * end of its output unwritten (an out-of-place all-reduce of 786433 floats its last
 * element, a reduce-scatter of 786434 its last two) while ncclSum was right. The stand-in
 * leaves the last count % 4 elements as they were, which fits both. The kit must not
 * depend on ncclAvg. */
static int avg_tail_fault(const struct nccl_op *o)
{
    const char *v = getenv("PL_EMU_NCCL_AVG_TAIL");
    return v && *v && strcmp(v, "0") && o->red == ncclAvg &&
           (o->kind == NOP_ALL_REDUCE || o->kind == NOP_REDUCE_SCATTER);
}

static void nccl_start(struct nccl_op *o)
{
    MPI_Comm c = o->comm->data;
    int n = (int)o->count, size = o->comm->size;
    size_t f = sizeof(float);
    if (avg_tail_fault(o)) {
        o->ntail = o->count % 4;
        memcpy(o->tail, (float *)o->recv + (o->count - o->ntail), o->ntail * f);
    }
    switch (o->kind) {
    case NOP_SEND: MPI_Issend(o->send, n, MPI_FLOAT, o->peer, 0, c, &o->req); break;
    case NOP_RECV: MPI_Irecv(o->recv, n, MPI_FLOAT, o->peer, 0, c, &o->req); break;
    case NOP_ALL_REDUCE:
        o->tmp = xcalloc(o->count, f);
        memcpy(o->tmp, o->send, o->count * f);
        MPI_Iallreduce(o->tmp, o->recv, n, MPI_FLOAT, MPI_SUM, c, &o->req);
        break;
    case NOP_REDUCE_SCATTER:
        o->tmp = xcalloc(o->count * (size_t)size, f);
        memcpy(o->tmp, o->send, o->count * (size_t)size * f);
        MPI_Ireduce_scatter_block(o->tmp, o->recv, n, MPI_FLOAT, MPI_SUM, c, &o->req);
        break;
    case NOP_ALL_GATHER:
        o->tmp = xcalloc(o->count, f);
        memcpy(o->tmp, o->send, o->count * f);
        MPI_Iallgather(o->tmp, n, MPI_FLOAT, o->recv, n, MPI_FLOAT, c, &o->req);
        break;
    case NOP_BROADCAST:
        if (o->comm->rank == o->peer && o->send != o->recv) memmove(o->recv, o->send, o->count * f);
        MPI_Ibcast(o->recv, n, MPI_FLOAT, o->peer, c, &o->req);
        break;
    }
}

static void nccl_finish(struct nccl_op *o)
{
    if (o->red == ncclAvg && (o->kind == NOP_ALL_REDUCE || o->kind == NOP_REDUCE_SCATTER)) {
        float *r = o->recv;
        for (size_t i = 0; i < o->count; i++) r[i] /= (float)o->comm->size;
        memcpy(r + (o->count - o->ntail), o->tail, o->ntail * sizeof *r);
    }
    free(o->tmp);
    o->tmp = NULL;
}

/* Runs the item at the head of a stream as far as it goes: 1 when it is done. */
static int step(struct item *it)
{
    switch (it->kind) {
    case IT_COPY: memmove(it->dst, it->src, it->bytes); return 1;
    case IT_SET: memset(it->dst, it->value, it->bytes); return 1;
    case IT_RECORD:
        if (it->seq > it->ev->completed) it->ev->completed = it->seq;
        it->ev->t_done = now();
        event_unref(it->ev);
        return 1;
    case IT_WAIT:
        if (it->ev->completed < it->seq) return 0;
        event_unref(it->ev);
        return 1;
    case IT_FREE:
        alloc_remove(it->dst);
        free(it->dst);
        return 1;
    case IT_HOST: it->fn(it->arg); return 1;
    case IT_NCCL:
        if (!it->started) {
            for (int i = 0; i < it->nops; i++) nccl_start(&it->ops[i]);
            it->started = 1;
        }
        for (int i = 0; i < it->nops; i++) {
            int flag = 0;
            if (it->ops[i].req != MPI_REQUEST_NULL) MPI_Test(&it->ops[i].req, &flag,
                                                             MPI_STATUS_IGNORE);
            if (it->ops[i].req != MPI_REQUEST_NULL) return 0;
        }
        for (int i = 0; i < it->nops; i++) nccl_finish(&it->ops[i]);
        free(it->ops);
        return 1;
    }
    return 1;
}

static void *device_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&E.mu);
    while (!E.quit) {
        int progressed = 0, in_flight = 0;
        for (struct pl_emu_stream *s = &E.legacy; s; s = s->next)
            while (s->head) {
                if (!step(s->head)) {
                    in_flight |= s->head->kind == IT_NCCL && s->head->started;
                    break;
                }
                struct item *done = s->head;
                s->head = done->next;
                if (!s->head) s->tail = NULL;
                free(done);
                E.items_done++;
                progressed = 1;
            }
        if (progressed) {
            pthread_cond_broadcast(&E.done);
        } else if (in_flight) {
            /* MPI progresses only when called: poll, letting the host in between. */
            pthread_mutex_unlock(&E.mu);
            struct timespec ts = {0, 50 * 1000};
            nanosleep(&ts, NULL);
            pthread_mutex_lock(&E.mu);
        } else {
            pthread_cond_wait(&E.work, &E.mu);
        }
    }
    pthread_mutex_unlock(&E.mu);
    return NULL;
}

/* Called with the lock held. */
static void enqueue(cudaStream_t s, struct item *it)
{
    if (!E.running) {
        E.running = 1;
        if (pthread_create(&E.thread, NULL, device_main, NULL)) {
            fprintf(stderr, "gpu_emu: cannot start the device thread\n");
            abort();
        }
    }
    s = stream_of(s);
    if (s->tail) s->tail->next = it;
    else s->head = it;
    s->tail = it;
    pthread_cond_signal(&E.work);
}

static struct item *item_new(enum item_kind kind)
{
    struct item *it = xcalloc(1, sizeof *it);
    it->kind = kind;
    return it;
}

/* ---- host waits, and what a hang looks like ---- */

static const char *nop_name(enum nop_kind k)
{
    static const char *names[] = {"ncclSend", "ncclRecv", "ncclAllReduce", "ncclReduceScatter",
                                  "ncclAllGather", "ncclBroadcast"};
    return names[k];
}

static void report_hang(const char *what, double waited)
{
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "gpu_emu: rank %d: %s made no progress for %.0f s: on a GPU this hangs.\n",
            rank, what, waited);
    for (struct pl_emu_stream *s = &E.legacy; s; s = s->next) {
        struct item *it = s->head;
        if (!it) continue;
        if (it->kind == IT_NCCL) {
            fprintf(stderr, "  stream %d is blocked in a launch of %d NCCL operation%s:", s->id,
                    it->nops, it->nops == 1 ? "" : "s");
            for (int i = 0; i < it->nops; i++) {
                const struct nccl_op *o = &it->ops[i];
                fprintf(stderr, " %s(%s %d, %zu floats)", nop_name(o->kind),
                        o->kind == NOP_SEND ? "to" : o->kind == NOP_RECV ? "from" : "root",
                        o->peer, o->count);
            }
            fprintf(stderr, "\n");
        } else if (it->kind == IT_WAIT) {
            fprintf(stderr, "  stream %d waits for an event that another stream has not "
                    "reached\n", s->id);
        }
    }
    fprintf(stderr, "  NCCL runs a send or receive issued outside ncclGroupStart/ncclGroupEnd "
            "as one operation that waits for its peer before anything queued after it on the "
            "stream; a send and a receive that are outstanding together must be issued in one "
            "group.\n");
    fflush(stderr);
    pthread_mutex_unlock(&E.mu);
    MPI_Abort(MPI_COMM_WORLD, 3);
    exit(3);
}

static double hang_seconds(void)
{
    const char *v = getenv("PL_EMU_HANG_S");
    double s = v && *v ? atof(v) : 20.0;
    return s > 0 ? s : 20.0;
}

typedef int (*pred_fn)(const void *arg);

/* Waits, with the lock held, until pred holds; no progress for PL_EMU_HANG_S is a hang. */
static void wait_until(pred_fn pred, const void *arg, const char *what)
{
    pthread_cond_signal(&E.work);
    long last = E.items_done;
    double since = now(), limit = hang_seconds();
    while (!pred(arg)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&E.done, &E.mu, &ts);
        if (E.items_done != last) {
            last = E.items_done;
            since = now();
        } else if (now() - since > limit) {
            report_hang(what, now() - since);
        }
    }
}

static int stream_idle(const void *s) { return ((const struct pl_emu_stream *)s)->head == NULL; }

static int all_idle(const void *unused)
{
    (void)unused;
    for (struct pl_emu_stream *s = &E.legacy; s; s = s->next)
        if (s->head) return 0;
    return 1;
}

static int item_gone(const void *seqp)
{
    /* The legacy stream's items run in order: ours is gone once the stream is past it. */
    long seq = *(const long *)seqp;
    for (struct item *it = E.legacy.head; it; it = it->next)
        if (it->seq == seq) return 0;
    return 1;
}

static int event_done(const void *e)
{
    const struct pl_emu_event *ev = e;
    return ev->completed >= ev->recorded;
}

/* ---- the CUDA runtime ---- */

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    }
    return "unknown error";
}

static void report_side(const char *call, const char *what, const void *p, int want_device);

/* A launch refused by pl_emu_launch_check, returned (and cleared) by the next call. */
static cudaError_t last_error = cudaSuccess;

cudaError_t cudaGetLastError(void)
{
    pthread_mutex_lock(&E.mu);
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    pthread_mutex_unlock(&E.mu);
    return e;
}

int pl_emu_launch_check(const char *kernel, int arg, const void *p)
{
    pthread_mutex_lock(&E.mu);
    int ok = !p || on_device(p, 0);
    if (!ok) {
        char what[160];
        snprintf(what, sizeof what, "kernel %s", kernel);
        char which[32];
        snprintf(which, sizeof which, "argument %d", arg + 1);
        report_side(what, which, p, 1);
        last_error = cudaErrorInvalidValue;
    }
    pthread_mutex_unlock(&E.mu);
    return ok;
}

static int emulated_devices(void)
{
    const char *v = getenv("PL_EMU_DEVICES");
    return v && *v ? atoi(v) : 8;
}

cudaError_t cudaGetDeviceCount(int *n)
{
    *n = emulated_devices();
    return *n > 0 ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaSetDevice(int dev)
{
    if (dev < 0 || dev >= emulated_devices()) return cudaErrorInvalidDevice;
    E.device = dev;
    E.device_set = 1;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *dev)
{
    *dev = E.device;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int dev)
{
    snprintf(bus, (size_t)len, "0000:%02x:00.0", dev + 1);
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v)
{
    *v = 13000;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = 13000;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    pthread_mutex_lock(&E.mu);
    E.n.device_syncs++;
    wait_until(all_idle, NULL, "cudaDeviceSynchronize");
    pthread_mutex_unlock(&E.mu);
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    *p = xcalloc(1, bytes ? bytes : 1);
    pthread_mutex_lock(&E.mu);
    E.n.mallocs++;
    alloc_add(*p, bytes);
    pthread_mutex_unlock(&E.mu);
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    if (!p) return cudaSuccess;
    pthread_mutex_lock(&E.mu);
    /* cudaFree waits for all work on the device before it returns the memory. */
    E.n.device_syncs++;
    wait_until(all_idle, NULL, "cudaFree (which synchronises the device)");
    int known = alloc_remove(p);
    pthread_mutex_unlock(&E.mu);
    if (!known) return cudaErrorInvalidValue;
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t s)
{
    (void)s;
    *p = xcalloc(1, bytes ? bytes : 1);
    pthread_mutex_lock(&E.mu);
    alloc_add(*p, bytes);
    pthread_mutex_unlock(&E.mu);
    return cudaSuccess;
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t s)
{
    pthread_mutex_lock(&E.mu);
    if (!on_device(p, 0)) {
        pthread_mutex_unlock(&E.mu);
        return cudaErrorInvalidValue;
    }
    struct item *it = item_new(IT_FREE);
    it->dst = p;
    enqueue(s, it);
    pthread_mutex_unlock(&E.mu);
    return cudaSuccess;
}

/* A pointer on the wrong side, told the way a student can act on: which call, which pointer,
 * what it is (a pl_mem_alloc block and its label, or memory the ledger never saw) and where
 * op memory comes from. A GPU says only "invalid argument" or "illegal memory access". */
static void report_side(const char *call, const char *what, const void *p, int want_device)
{
    enum pl_where where;
    const char *label = NULL;
    char origin[200];
    if (pl_mem_block_of(p, &where, &label))
        snprintf(origin, sizeof origin, "in pl_mem_alloc's block '%s', allocated %s", label,
                 where == PL_HOST ? "PL_HOST" : "PL_DEVICE");
    else
        snprintf(origin, sizeof origin,
                 "not from pl_mem_alloc: malloc'd, on the stack or in static storage");
    if (want_device)
        fprintf(stderr,
                "gpu_emu: %s: %s %p is host memory (%s), where the call needs device memory. "
                "On the GPU build the kit's ops and collectives take op memory: allocate it "
                "with pl_mem_alloc(bytes, cat, PL_DEVICE, label) and move host data in and out "
                "with pl_to_device and pl_to_host (lib/ops.h)\n",
                call, what, p, origin);
    else
        fprintf(stderr,
                "gpu_emu: %s: %s %p is device memory, where the call needs host memory: copy "
                "op memory to a host buffer with pl_to_host (lib/ops.h) before reading it on "
                "the host\n",
                call, what, p);
}

static const char *kind_name(enum cudaMemcpyKind k)
{
    switch (k) {
    case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDeviceToDevice: return "cudaMemcpyDeviceToDevice";
    case cudaMemcpyHostToHost: return "cudaMemcpyHostToHost";
    case cudaMemcpyDefault: return "cudaMemcpyDefault";
    }
    return "?";
}

/* Whether each side of a copy is where its kind says: host pointers given to the device (or
 * the reverse) are errors on a real GPU without unified addressing of pageable memory. A
 * wrong side is reported (report_side) and refused. */
static int copy_sides_ok(const char *call, const void *dst, const void *src, size_t bytes,
                         enum cudaMemcpyKind k)
{
    if (k == cudaMemcpyDefault) return 1;
    int want_dd = k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice;
    int want_sd = k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice;
    int dd = on_device(dst, bytes), sd = on_device(src, bytes);
    if (dd == want_dd && sd == want_sd) return 1;
    char what[160];
    snprintf(what, sizeof what, "%s(dst, src, %zu bytes, %s)", call, bytes, kind_name(k));
    if (dd != want_dd) report_side(what, "dst", dst, want_dd);
    if (sd != want_sd) report_side(what, "src", src, want_sd);
    return 0;
}

/* Queues a copy on s, with the lock held; its sequence number in *seq. */
static cudaError_t queue_copy(const char *call, void *dst, const void *src, size_t bytes,
                              enum cudaMemcpyKind kind, cudaStream_t s, long *seq)
{
    if (bytes && !copy_sides_ok(call, dst, src, bytes, kind)) return cudaErrorInvalidValue;
    struct item *it = item_new(IT_COPY);
    it->dst = dst;
    it->src = src;
    it->bytes = bytes;
    *seq = it->seq = ++E.seq;
    enqueue(s, it);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t s)
{
    long seq;
    pthread_mutex_lock(&E.mu);
    cudaError_t e = queue_copy("cudaMemcpyAsync", dst, src, bytes, kind, s, &seq);
    pthread_mutex_unlock(&E.mu);
    return e;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    long seq;
    pthread_mutex_lock(&E.mu);
    cudaError_t e = queue_copy("cudaMemcpy", dst, src, bytes, kind, NULL, &seq);
    if (e == cudaSuccess) {
        /* A synchronous copy returns once the default stream has done it: a wait on one
         * stream, not on the device. */
        E.n.host_waits++;
        wait_until(item_gone, &seq, "cudaMemcpy on the default stream");
    }
    pthread_mutex_unlock(&E.mu);
    return e;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s)
{
    pthread_mutex_lock(&E.mu);
    if (bytes && !on_device(p, bytes)) {
        report_side("cudaMemsetAsync", "p", p, 1);
        pthread_mutex_unlock(&E.mu);
        return cudaErrorInvalidValue;
    }
    struct item *it = item_new(IT_SET);
    it->dst = p;
    it->value = value;
    it->bytes = bytes;
    enqueue(s, it);
    pthread_mutex_unlock(&E.mu);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int value, size_t bytes)
{
    return cudaMemsetAsync(p, value, bytes, NULL);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    /* The legacy default stream's implicit ordering with blocking streams is not emulated,
     * and the kit creates none. */
    if (!(flags & cudaStreamNonBlocking)) return cudaErrorInvalidValue;
    struct pl_emu_stream *st = xcalloc(1, sizeof *st);
    pthread_mutex_lock(&E.mu);
    st->id = E.next_stream_id++;
    struct pl_emu_stream *last = &E.legacy;
    while (last->next) last = last->next;
    last->next = st;
    pthread_mutex_unlock(&E.mu);
    *s = st;
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    if (!s) return cudaErrorInvalidResourceHandle;
    pthread_mutex_lock(&E.mu);
    wait_until(stream_idle, s, "cudaStreamDestroy");
    for (struct pl_emu_stream *p = &E.legacy; p; p = p->next)
        if (p->next == s) {
            p->next = s->next;
            break;
        }
    pthread_mutex_unlock(&E.mu);
    free(s);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    pthread_mutex_lock(&E.mu);
    E.n.host_waits++;
    wait_until(stream_idle, stream_of(s), "cudaStreamSynchronize");
    pthread_mutex_unlock(&E.mu);
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
    (void)flags;
    if (!e) return cudaErrorInvalidResourceHandle;
    pthread_mutex_lock(&E.mu);
    if (e->recorded) {
        struct item *it = item_new(IT_WAIT);
        it->ev = e;
        it->seq = e->recorded;
        e->refs++;
        enqueue(s, it);
    }
    pthread_mutex_unlock(&E.mu);
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    *e = xcalloc(1, sizeof **e);
    (*e)->flags = flags;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    if (!e) return cudaErrorInvalidResourceHandle;
    pthread_mutex_lock(&E.mu);
    struct item *it = item_new(IT_RECORD);
    it->ev = e;
    it->seq = e->recorded = ++E.seq;
    e->refs++;
    enqueue(s, it);
    pthread_mutex_unlock(&E.mu);
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
    pthread_mutex_lock(&E.mu);
    int done = event_done(e);
    pthread_cond_signal(&E.work);
    pthread_mutex_unlock(&E.mu);
    return done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    pthread_mutex_lock(&E.mu);
    E.n.host_waits++;
    wait_until(event_done, e, "cudaEventSynchronize");
    pthread_mutex_unlock(&E.mu);
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if ((start->flags | end->flags) & cudaEventDisableTiming) return cudaErrorInvalidResourceHandle;
    pthread_mutex_lock(&E.mu);
    int ready = event_done(start) && event_done(end) && start->recorded && end->recorded;
    double d = end->t_done - start->t_done;
    pthread_mutex_unlock(&E.mu);
    if (!ready) return cudaErrorNotReady;
    *ms = (float)(1e3 * d);
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    if (!e) return cudaErrorInvalidResourceHandle;
    pthread_mutex_lock(&E.mu);
    e->destroyed = 1;
    int gone = e->refs == 0;
    pthread_mutex_unlock(&E.mu);
    if (gone) free(e);
    return cudaSuccess;
}

void pl_emu_note_kernel(void)
{
    pthread_mutex_lock(&E.mu);
    E.n.kernels++;
    pthread_mutex_unlock(&E.mu);
}

void pl_emu_counts(struct pl_emu_counts *out)
{
    pthread_mutex_lock(&E.mu);
    *out = E.n;
    pthread_mutex_unlock(&E.mu);
}

void pl_emu_enqueue_host(cudaStream_t s, void (*fn)(void *), void *arg)
{
    pthread_mutex_lock(&E.mu);
    struct item *it = item_new(IT_HOST);
    it->fn = fn;
    it->arg = arg;
    enqueue(s, it);
    pthread_mutex_unlock(&E.mu);
}

/* ---- cuBLAS: OpenBLAS in stream order ---- */

struct pl_emu_cublas {
    int unused;
};

struct gemm {
    cublasOperation_t ta, tb;
    int m, n, k, lda, ldb, ldc, batch;
    int bf16; /* CUBLAS_COMPUTE_32F_FAST_16BF: the inputs read as bf16 */
    float alpha, beta;
    const float *A, *B;
    float *C;
    long long sa, sb, sc;
};

/* A column-major matrix of `rows` rows and `cols` columns at stride ld, rounded to bf16
 * (nearest, ties to even, as the tensor cores convert) into a copy of its span. */
static float *bf16_span(const float *X, int rows, int cols, int ld)
{
    size_t span = (size_t)(cols - 1) * ld + rows;
    float *c = xcalloc(span, sizeof *c);
    for (size_t i = 0; i < span; i++) {
        uint32_t u;
        memcpy(&u, &X[i], sizeof u);
        if ((u & 0x7fffffffu) > 0x7f800000u) u |= 0x00400000u;
        else u += 0x7fffu + ((u >> 16) & 1u);
        u &= 0xffff0000u;
        memcpy(&c[i], &u, sizeof u);
    }
    return c;
}

static void run_gemm(void *arg)
{
    struct gemm *g = arg;
    for (int i = 0; i < g->batch; i++) {
        const float *A = g->A + i * g->sa, *B = g->B + i * g->sb;
        float *a = NULL, *b = NULL;
        if (g->bf16 && g->m && g->n && g->k) {
            A = a = bf16_span(A, g->ta == CUBLAS_OP_T ? g->k : g->m,
                              g->ta == CUBLAS_OP_T ? g->m : g->k, g->lda);
            B = b = bf16_span(B, g->tb == CUBLAS_OP_T ? g->n : g->k,
                              g->tb == CUBLAS_OP_T ? g->k : g->n, g->ldb);
        }
        cblas_sgemm(CblasColMajor, g->ta == CUBLAS_OP_T ? CblasTrans : CblasNoTrans,
                    g->tb == CUBLAS_OP_T ? CblasTrans : CblasNoTrans, g->m, g->n, g->k,
                    g->alpha, A, g->lda, B, g->ldb, g->beta, g->C + i * g->sc, g->ldc);
        free(a);
        free(b);
    }
    free(g);
}

cublasStatus_t cublasCreate(cublasHandle_t *handle)
{
    *handle = xcalloc(1, sizeof **handle);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle)
{
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t gemm_enqueue(cublasHandle_t handle, cublasOperation_t ta,
                                   cublasOperation_t tb, int m, int n, int k,
                                   const float *alpha, const float *A, int lda,
                                   long long strideA, const float *B, int ldb,
                                   long long strideB, const float *beta, float *C, int ldc,
                                   long long strideC, int batch, int bf16);

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t ta,
                                         cublasOperation_t tb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda,
                                         long long strideA, const float *B, int ldb,
                                         long long strideB, const float *beta, float *C,
                                         int ldc, long long strideC, int batch)
{
    return gemm_enqueue(handle, ta, tb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta,
                        C, ldc, strideC, batch, 0);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType Atype,
                                          int lda, long long strideA, const void *B,
                                          cudaDataType Btype, int ldb, long long strideB,
                                          const void *beta, void *C, cudaDataType Ctype,
                                          int ldc, long long strideC, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    if (Atype != CUDA_R_32F || Btype != CUDA_R_32F || Ctype != CUDA_R_32F ||
        (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_16BF) ||
        algo != CUBLAS_GEMM_DEFAULT)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    return gemm_enqueue(handle, ta, tb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta,
                        C, ldc, strideC, batch, compute == CUBLAS_COMPUTE_32F_FAST_16BF);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb,
                            int m, int n, int k, const void *alpha, const void *A,
                            cudaDataType Atype, int lda, const void *B, cudaDataType Btype,
                            int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    return cublasGemmStridedBatchedEx(handle, ta, tb, m, n, k, alpha, A, Atype, lda, 0, B,
                                      Btype, ldb, 0, beta, C, Ctype, ldc, 0, 1, compute, algo);
}

static cublasStatus_t gemm_enqueue(cublasHandle_t handle, cublasOperation_t ta,
                                   cublasOperation_t tb, int m, int n, int k,
                                   const float *alpha, const float *A, int lda,
                                   long long strideA, const float *B, int ldb,
                                   long long strideB, const float *beta, float *C, int ldc,
                                   long long strideC, int batch, int bf16)
{
    if (!handle || m < 0 || n < 0 || k < 0 || batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
    const void *ptrs[3] = {A, B, C};
    const char *names[3] = {"A", "B", "C"};
    int sides_ok = 1;
    pthread_mutex_lock(&E.mu);
    for (int i = 0; i < 3; i++)
        if (m && n && (k || i == 2) && !on_device(ptrs[i], 0)) {
            report_side("cublasSgemm", names[i], ptrs[i], 1);
            sides_ok = 0;
        }
    pthread_mutex_unlock(&E.mu);
    if (!sides_ok) return CUBLAS_STATUS_INVALID_VALUE;
    struct gemm *g = xcalloc(1, sizeof *g);
    /* The default pointer mode: alpha and beta are read on the host, at the call. */
    *g = (struct gemm){.ta = ta, .tb = tb, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb,
                       .ldc = ldc, .batch = batch, .alpha = *alpha, .beta = *beta, .A = A,
                       .B = B, .C = C, .sa = strideA, .sb = strideB, .sc = strideC,
                       .bf16 = bf16};
    pl_emu_enqueue_host(NULL, run_gemm, g);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb,
                           int m, int n, int k, const float *alpha, const float *A, int lda,
                           const float *B, int ldb, const float *beta, float *C, int ldc)
{
    return cublasSgemmStridedBatched(handle, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta,
                                     C, ldc, 0, 1);
}

/* ---- NCCL ---- */

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    }
    return "unknown result code";
}

ncclResult_t ncclGetVersion(int *version)
{
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0, sizeof *id);
    unsigned v = (unsigned)time(NULL) ^ (unsigned)clock();
    memcpy(id->internal, &v, sizeof v);
    return ncclSuccess;
}

static struct pl_emu_nccl_comm *comm_from(MPI_Comm ctl)
{
    struct pl_emu_nccl_comm *c = xcalloc(1, sizeof *c);
    c->ctl = ctl;
    MPI_Comm_dup(ctl, &c->data);
    MPI_Comm_rank(ctl, &c->rank);
    MPI_Comm_size(ctl, &c->size);
    return c;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    /* Every rank of the job that holds this id joins one communicator. */
    unsigned color = 0;
    memcpy(&color, id.internal, sizeof color);
    MPI_Comm ctl;
    if (MPI_Comm_split(MPI_COMM_WORLD, (int)(color & 0x7fffffff), rank, &ctl) != MPI_SUCCESS)
        return ncclSystemError;
    *comm = comm_from(ctl);
    if ((*comm)->size != nranks || (*comm)->rank != rank) return ncclInvalidArgument;
    return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *out,
                           ncclConfig_t *config)
{
    (void)config;
    MPI_Comm ctl;
    if (MPI_Comm_split(comm->ctl, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key,
                       &ctl) != MPI_SUCCESS)
        return ncclSystemError;
    *out = ctl == MPI_COMM_NULL ? NULL : comm_from(ctl);
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    *count = comm->size;
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    (void)comm;
    pthread_mutex_lock(&E.mu);
    wait_until(all_idle, NULL, "ncclCommFinalize");
    pthread_mutex_unlock(&E.mu);
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    MPI_Comm_free(&comm->data);
    MPI_Comm_free(&comm->ctl);
    free(comm);
    return ncclSuccess;
}

/* One launch: the operations of a group (or one call), queued on each stream they use. */
static void launch(struct nccl_op *ops, int n)
{
    E.n.nccl_groups++;
    for (int i = 0; i < n; i++) {
        if (!ops[i].comm) continue; /* already queued with an earlier op of its stream */
        cudaStream_t s = ops[i].stream;
        int k = 0;
        for (int j = i; j < n; j++)
            if (ops[j].comm && ops[j].stream == s) k++;
        struct item *it = item_new(IT_NCCL);
        it->ops = xcalloc((size_t)k, sizeof *it->ops);
        for (int j = i; j < n; j++)
            if (ops[j].comm && ops[j].stream == s) {
                it->ops[it->nops] = ops[j];
                it->ops[it->nops++].req = MPI_REQUEST_NULL;
                ops[j].comm = NULL;
            }
        enqueue(s, it);
    }
}

ncclResult_t ncclGroupStart(void)
{
    pthread_mutex_lock(&E.mu);
    E.group_depth++;
    pthread_mutex_unlock(&E.mu);
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    pthread_mutex_lock(&E.mu);
    if (E.group_depth == 0) {
        pthread_mutex_unlock(&E.mu);
        return ncclInvalidUsage;
    }
    if (--E.group_depth == 0 && E.ngroup) {
        launch(E.group, E.ngroup);
        E.ngroup = 0;
    }
    pthread_mutex_unlock(&E.mu);
    return ncclSuccess;
}

static ncclResult_t submit(struct nccl_op op, size_t send_elems, size_t recv_elems)
{
    if (!op.comm) return ncclInvalidArgument;
    size_t f = sizeof(float);
    pthread_mutex_lock(&E.mu);
    ncclResult_t r = ncclSuccess;
    if ((send_elems && !on_device(op.send, send_elems * f)) ||
        (recv_elems && !on_device(op.recv, recv_elems * f))) {
        if (send_elems && !on_device(op.send, send_elems * f))
            report_side(nop_name(op.kind), "sendbuff", op.send, 1);
        if (recv_elems && !on_device(op.recv, recv_elems * f))
            report_side(nop_name(op.kind), "recvbuff", op.recv, 1);
        r = ncclInvalidArgument;
    } else if ((op.kind == NOP_SEND || op.kind == NOP_RECV || op.kind == NOP_BROADCAST) &&
               (op.peer < 0 || op.peer >= op.comm->size)) {
        r = ncclInvalidArgument;
    } else if (op.count > (size_t)0x7fffffff) {
        r = ncclInvalidArgument; /* the MPI underneath counts in int */
    } else {
        op.stream = stream_of(op.stream);
        if (E.group_depth > 0) {
            if (E.ngroup == E.cap_group) {
                E.cap_group = E.cap_group ? 2 * E.cap_group : 64;
                E.group = realloc(E.group, (size_t)E.cap_group * sizeof *E.group);
                if (!E.group) abort();
            }
            E.group[E.ngroup++] = op;
        } else {
            launch(&op, 1);
        }
    }
    pthread_mutex_unlock(&E.mu);
    return r;
}

ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, cudaStream_t s)
{
    if (type != ncclFloat) return ncclInvalidArgument;
    struct nccl_op op = {.kind = NOP_SEND, .send = buf, .count = count, .peer = peer,
                         .comm = comm, .stream = s};
    return submit(op, count, 0);
}

ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t s)
{
    if (type != ncclFloat) return ncclInvalidArgument;
    struct nccl_op op = {.kind = NOP_RECV, .recv = buf, .count = count, .peer = peer,
                         .comm = comm, .stream = s};
    return submit(op, 0, count);
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t red, ncclComm_t comm, cudaStream_t s)
{
    if (type != ncclFloat || (red != ncclSum && red != ncclAvg)) return ncclInvalidArgument;
    struct nccl_op op = {.kind = NOP_ALL_REDUCE, .send = send, .recv = recv, .count = count,
                         .red = red, .comm = comm, .stream = s};
    return submit(op, count, count);
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recv_count,
                               ncclDataType_t type, ncclRedOp_t red, ncclComm_t comm,
                               cudaStream_t s)
{
    if (type != ncclFloat || (red != ncclSum && red != ncclAvg) || !comm)
        return ncclInvalidArgument;
    struct nccl_op op = {.kind = NOP_REDUCE_SCATTER, .send = send, .recv = recv,
                         .count = recv_count, .red = red, .comm = comm, .stream = s};
    return submit(op, recv_count * (size_t)comm->size, recv_count);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t send_count, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t s)
{
    if (type != ncclFloat || !comm) return ncclInvalidArgument;
    struct nccl_op op = {.kind = NOP_ALL_GATHER, .send = send, .recv = recv,
                         .count = send_count, .comm = comm, .stream = s};
    return submit(op, send_count, send_count * (size_t)comm->size);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type,
                           int root, ncclComm_t comm, cudaStream_t s)
{
    if (type != ncclFloat || !comm) return ncclInvalidArgument;
    struct nccl_op op = {.kind = NOP_BROADCAST, .send = send, .recv = recv, .count = count,
                         .peer = root, .comm = comm, .stream = s};
    return submit(op, comm->rank == root ? count : 0, count);
}

/* ---- MPI: the device thread calls MPI beside the host ---- */

int MPI_Init(int *argc, char ***argv)
{
    E.n.device_before_mpi = E.device_set;
    int provided = 0;
    int rc = PMPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (rc == MPI_SUCCESS && provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "gpu_emu: this MPI does not provide MPI_THREAD_MULTIPLE, which the "
                "emulated device thread needs; build Open MPI with thread support\n");
        PMPI_Abort(MPI_COMM_WORLD, 2);
    }
    return rc;
}

int MPI_Finalize(void)
{
    pthread_mutex_lock(&E.mu);
    int running = E.running;
    if (running) {
        wait_until(all_idle, NULL, "MPI_Finalize");
        E.quit = 1;
        pthread_cond_signal(&E.work);
    }
    pthread_mutex_unlock(&E.mu);
    if (running) pthread_join(E.thread, NULL);
    E.running = 0;
    return PMPI_Finalize();
}
