/* comm_internal.h: what the comm front end (comm.c) shares with its backends (comm_mpi.c,
 * and comm_nccl_gpu.c on the GPU build) and with the runtime, which starts and stops the
 * layer. The front end validates, prints, traces and charges the ledger; a backend only
 * moves the bytes. Not for lab code. */
#ifndef PL_COMM_INTERNAL_H
#define PL_COMM_INTERNAL_H

#include <mpi.h>
#include <stddef.h>
#include "comm.h"

/* Called by pl_init after MPI_Init and once the topology is known: creates the world
 * communicator; on the GPU build picks this rank's device, chooses NCCL or mpi-staged and
 * bootstraps the NCCL world communicator. */
void pl_comm_startup(void);
/* Called by pl_finalize before MPI_Finalize. */
void pl_comm_shutdown(void);

#define PL_COMM_NAME_LEN 32

struct pl_comm {
    MPI_Comm mpi;
    MPI_Comm check;   /* a duplicate for the argument checks: a check in flight never matches
                       * a data operation, whatever order ranks issue them in */
    int rank, size;
    int id;
    char name[PL_COMM_NAME_LEN];
    int *world_ranks; /* [size] */
    int in_flight;    /* handles not yet completed */
    void *gpu;        /* backend state of the GPU build (struct pl_nccl_comm) */
};

enum pl_op_type {
    PL_OP_ALL_REDUCE,
    PL_OP_REDUCE_SCATTER,
    PL_OP_ALL_GATHER,
    PL_OP_BROADCAST,
    PL_OP_ALL_TO_ALL,
    PL_OP_ALL_TO_ALL_V,
    PL_OP_BARRIER,
    PL_OP_SEND,
    PL_OP_RECV,
    PL_OP_SENDRECV
};

/* One operation as the backends see it. Counts follow the public API: count is the
 * all-reduce/broadcast count, the reduce-scatter recv_count, the all-gather send_count,
 * the all-to-all per-peer count, the send or recv count. send == recv marks in place;
 * the layouts the front end accepts are listed in comm.h. */
struct pl_op {
    enum pl_op_type type;
    const float *send;
    float *recv;
    size_t count;
    size_t recv_count; /* sendrecv */
    enum pl_red red;
    int root;
    int peer; /* send/recv peer, sendrecv destination (group ranks) */
    int src;  /* sendrecv source */
    int tag;
    const size_t *send_counts, *send_displs, *recv_counts, *recv_displs;
};

struct pl_handle {
    unsigned magic;          /* live or completed: catches a second pl_wait on a handle */
    struct pl_handle *next_free;
    struct pl_op op;
    struct pl_comm *comm;
    int blocking;
    long id;                 /* trace handle, > 0 for asynchronous operations */
    enum pl_coll_kind kind;  /* ledger/trace kind */
    double bytes;            /* trace bytes: S for collectives, message bytes for p2p */
    /* MPI backend */
    MPI_Request req;
    int active;              /* req must be completed */
    float *post_dst;         /* on completion: copy post_n floats post_src -> post_dst ... */
    const float *post_src;
    size_t post_n;
    float *scale_buf;        /* ... then divide scale_n floats by scale_div (PL_AVG) ... */
    size_t scale_n;
    int scale_div;
    float *stage;            /* ... then copy the staged host result back to the device */
    float *stage_dst;
    const float *stage_src;
    size_t stage_n;
    void *stage_extra;       /* a second staging buffer, freed with the first */
    /* NCCL backend */
    void *event;             /* cudaEvent_t recorded after the operation */
    int deferred;            /* a pl_isend/pl_irecv not launched yet (comm_nccl_gpu.c) */
    /* The argument check of an asynchronous collective, completed before the operation */
    MPI_Request check_req;
    long long *check_all;    /* every member's call, filled by the check; NULL: none */
};

/* Elements the op reads from send and writes to recv on this rank. */
void pl_op_extents(const struct pl_op *op, const struct pl_comm *c, size_t *ns, size_t *nr);

/* The MPI backend. staged: the op's buffers are device memory, copied through host
 * buffers around a host MPI operation. */
void pl_mpi_start(struct pl_handle *h, int staged);
/* Completes h when block, or tests it; returns 1 when done (completion actions run). */
int pl_mpi_progress(struct pl_handle *h, int block);
/* Communicator options every MPI communicator of the layer gets (errors returned, so a
 * truncated message can be reported as the usage error it is). */
void pl_mpi_comm_setup(MPI_Comm c);
/* MPI passes counts as int: larger counts are rejected with a usage error naming the op. */
int pl_mpi_count(size_t n, const char *what, const struct pl_comm *c);

/* The verdict of a check every member reached together: one message, exit code 2. */
void pl_comm_group_usage_error(const struct pl_comm *c, const char *msg)
    __attribute__((noreturn));

#ifdef PL_GPU
/* The GPU build (comm_nccl_gpu.c). */
/* Called by pl_init before MPI_Init: sets this rank's device from the node-local rank the
 * launcher exports (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, ...), so that everything
 * MPI and NCCL set up afterwards lands on it. Does nothing when no launcher variable is set;
 * pl_gpu_comm_startup then picks by MPI's node-local rank. */
void pl_gpu_pick_device(void);
/* Sets this rank's device by local rank and decides the backend, the same on every rank
 * of world: returns 1 for NCCL (no two ranks of a node on one physical GPU), 0 for
 * mpi-staged. */
int pl_gpu_comm_startup(MPI_Comm world);
void pl_nccl_comm_world(struct pl_comm *world);
void pl_nccl_comm_split(struct pl_comm *child, const struct pl_comm *parent, int color,
                        int key);
void pl_nccl_comm_free(struct pl_comm *c);
void pl_nccl_start(struct pl_handle *h);
int pl_nccl_progress(struct pl_handle *h, int block);
/* cudaMemcpy between host and device (to_host: device -> host). */
void pl_comm_gpu_copy(void *dst, const void *src, size_t bytes, int to_host);
#endif

#endif
