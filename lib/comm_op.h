/* comm_op.h: one communication operation as the front end (comm.c, comm_check.c) and the
 * backends (comm_mpi.c, comm_nccl_gpu.c) both see it: the communicator, the operation and
 * the handle of an operation in flight. The front end validates, prints, traces and charges
 * the ledger; a backend only moves the bytes. Not for lab code. */
#ifndef PL_COMM_OP_H
#define PL_COMM_OP_H

#include <mpi.h>
#include <stddef.h>
#include "comm_kind.h"

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
    long p2p_issued;  /* point-to-point calls so far, when they follow NCCL's rules (comm_mpi.c) */
    long coll_calls;  /* collective calls so far on this rank: the status record numbers them */
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
    struct pl_handle *live_prev, *live_next; /* in flight: the list the free check walks */
    char freed_label[48];    /* a block it uses was freed while it was in flight: its label */
    unsigned long long send_sum; /* an isend's buffer hashed at its start (has_sum): the */
    int has_sum;                 /* CPU build's check that nothing writes it in flight */
    struct pl_op op;
    struct pl_comm *comm;
    int blocking;
    long id;                 /* trace handle, > 0 for asynchronous operations */
    long coll_call;          /* a collective's number among its communicator's (coll_calls) */
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
    /* MPI backend with NCCL's point-to-point rules (pl_comm_set_p2p_like_nccl) */
    long p2p_seq;            /* this call's place among its communicator's p2p calls */
    long p2p_upto;           /* launched: completing it completes its communicator's p2p
                              * calls up to this place (its group and every earlier one) */
    int p2p_deferred;        /* issued, not launched yet: no MPI request exists */
    const float *p2p_buf;    /* the send's or receive's buffer (the host copy when staged) */
    /* NCCL backend */
    void *event;             /* cudaEvent_t recorded after the operation */
    int deferred;            /* a pl_isend/pl_irecv not launched yet (comm_nccl_gpu.c) */
    /* The argument check of an asynchronous collective, completed before the operation */
    MPI_Request check_req;
    long long *check_all;    /* every member's call, filled by the check; NULL: none */
};

/* One call of the public API: the op, on which communicator, from which function. */
struct pl_call {
    const char *fn; /* the public function, for messages */
    struct pl_comm *c;
    struct pl_op op;
    int async;
};

/* Elements the op reads from send and writes to recv on this rank. */
void pl_op_extents(const struct pl_op *op, const struct pl_comm *c, size_t *ns, size_t *nr);

/* Names for messages: "sum"/"avg"; "all_reduce", ..., "send", "recv", "sendrecv". */
const char *pl_red_name(enum pl_red op);
const char *pl_op_word(enum pl_op_type t);
/* The kind the ledger and trace account the op by. */
enum pl_coll_kind pl_op_kind(enum pl_op_type t);

#endif
