/* comm_mpi.c: the MPI backend. On the CPU build it runs every operation on host buffers
 * with MPI's own collectives (nonblocking ones for the asynchronous calls). On the GPU
 * build, when ranks share a GPU and NCCL cannot be used, the same code serves device
 * buffers staged through host copies ("mpi-staged"). Counts above INT_MAX elements are
 * rejected with a usage error rather than split: MPI takes int counts, and no lab comes
 * near 8 GiB in one call. */
#include "comm_mpi.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "comm_buf.h"

int pl_mpi_count(size_t n, const char *what, const struct pl_comm *c)
{
    if (n > (size_t)INT_MAX)
        pl_usage_error("%s on group '%s': %zu elements is above the MPI backend's limit of "
                       "%d per call; split the buffer into pieces of at most that many",
                       what, c->name, n, INT_MAX);
    return (int)n;
}

void pl_mpi_comm_setup(MPI_Comm c)
{
    PL_CHECK_MPI(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
}

static float *host_alloc(size_t n)
{
    float *p = malloc(n ? n * sizeof(float) : 1);
    if (!p) pl_fatal("out of memory for a %zu-float staging buffer", n);
    return p;
}

/* Device buffers are mirrored in host buffers that keep their relative layout, so the
 * in-place cases look the same to the host code. Staging memory stays out of the memory
 * ledger: it is a property of this transport, and the labs' memory figures must not
 * depend on the backend. */
static void stage_in(struct pl_handle *h, const float **send, float **recv)
{
    const struct pl_op *op = &h->op;
    const struct pl_comm *c = h->comm;
    size_t ns, nr;
    pl_op_extents(op, c, &ns, &nr);
    int copy_in = 1, copy_back = 1;
    if (op->type == PL_OP_BROADCAST) {
        copy_in = c->rank == op->root;
        copy_back = !copy_in;
    }
    uintptr_t s0 = (uintptr_t)op->send, r0 = (uintptr_t)op->recv;
    uintptr_t s1 = s0 + ns * sizeof(float), r1 = r0 + nr * sizeof(float);
    float *hs = NULL, *hr = NULL;
    if (ns && nr && s0 < r1 && r0 < s1) {
        uintptr_t lo = s0 < r0 ? s0 : r0, hi = s1 > r1 ? s1 : r1;
        float *host = host_alloc((hi - lo) / sizeof(float));
        hs = host + (s0 - lo) / sizeof(float);
        hr = host + (r0 - lo) / sizeof(float);
        h->stage = host;
    } else {
        if (ns) hs = host_alloc(ns);
        if (nr) hr = host_alloc(nr);
        h->stage = hr;
        h->stage_extra = hs;
    }
    if (copy_in && ns) pl_copy_to_host(hs, op->send, ns);
    if (copy_back && nr) {
        h->stage_dst = op->recv;
        h->stage_src = hr;
        h->stage_n = nr;
    }
    *send = hs;
    *recv = hr;
}

/* A receive must get exactly the count it asked for: pl_recv cannot tell the caller that
 * fewer arrived, and a longer message means the two sides disagree. */
static void check_received(const struct pl_handle *h, int rc, MPI_Status *st, size_t want,
                           int src)
{
    const struct pl_comm *c = h->comm;
    if (rc != MPI_SUCCESS) {
        int cls = rc;
        MPI_Error_class(rc, &cls);
        if (cls == MPI_ERR_TRUNCATE || cls == MPI_ERR_IN_STATUS)
            pl_usage_error("pl_recv on group '%s': rank %d sent rank %d more than the "
                           "count=%zu it posted for tag %d (send and recv must pass the same "
                           "count)", c->name, src, c->rank, want, h->op.tag);
        pl_check_mpi_failed(__FILE__, __LINE__, "MPI receive", rc);
    }
    int got = 0;
    PL_CHECK_MPI(MPI_Get_count(st, MPI_FLOAT, &got));
    if ((size_t)got != want)
        pl_usage_error("pl_recv on group '%s': rank %d expected count=%zu from rank %d (tag "
                       "%d) but it sent count=%d (send and recv must pass the same count)",
                       c->name, c->rank, want, src, h->op.tag, got);
}

static void all_to_all_v(struct pl_handle *h, const float *send, float *recv)
{
    const struct pl_op *op = &h->op;
    const struct pl_comm *c = h->comm;
    int n = c->size;
    int *v = malloc(4 * (size_t)n * sizeof *v);
    if (!v) pl_fatal("out of memory");
    int *sc = v, *sd = v + n, *rc = v + 2 * n, *rd = v + 3 * n;
    for (int j = 0; j < n; j++) {
        sc[j] = pl_mpi_count(op->send_counts[j], "pl_all_to_all_v send_counts", c);
        sd[j] = pl_mpi_count(op->send_displs[j], "pl_all_to_all_v send_displs", c);
        rc[j] = pl_mpi_count(op->recv_counts[j], "pl_all_to_all_v recv_counts", c);
        rd[j] = pl_mpi_count(op->recv_displs[j], "pl_all_to_all_v recv_displs", c);
    }
    if (send == recv)
        PL_CHECK_MPI(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, recv, rc, rd,
                                   MPI_FLOAT, c->mpi));
    else
        PL_CHECK_MPI(MPI_Alltoallv(send, sc, sd, MPI_FLOAT, recv, rc, rd, MPI_FLOAT, c->mpi));
    free(v);
}

static void host_start(struct pl_handle *h, const float *send, float *recv)
{
    const struct pl_op *op = &h->op;
    const struct pl_comm *c = h->comm;
    MPI_Comm m = c->mpi;
    int b = h->blocking;
    MPI_Request *rq = &h->req;
    h->active = !b;
    size_t off = (size_t)c->rank * op->count;
    int cnt;
    switch (op->type) {
    case PL_OP_ALL_REDUCE: {
        cnt = pl_mpi_count(op->count, "pl_all_reduce", c);
        const void *sb = send == recv ? MPI_IN_PLACE : (const void *)send;
        if (b) PL_CHECK_MPI(MPI_Allreduce(sb, recv, cnt, MPI_FLOAT, MPI_SUM, m));
        else PL_CHECK_MPI(MPI_Iallreduce(sb, recv, cnt, MPI_FLOAT, MPI_SUM, m, rq));
        break;
    }
    case PL_OP_REDUCE_SCATTER: {
        cnt = pl_mpi_count(op->count, "pl_reduce_scatter", c);
        const void *sb = send;
        float *rb = recv;
        if (send == recv) {
            sb = MPI_IN_PLACE;
        } else if (recv == send + off) {
            /* MPI leaves an in-place result at the start of the buffer; this rank's
             * block is where the caller wants it. */
            sb = MPI_IN_PLACE;
            rb = (float *)send;
            h->post_dst = recv;
            h->post_src = send;
            h->post_n = op->count;
        }
        if (b) PL_CHECK_MPI(MPI_Reduce_scatter_block(sb, rb, cnt, MPI_FLOAT, MPI_SUM, m));
        else PL_CHECK_MPI(MPI_Ireduce_scatter_block(sb, rb, cnt, MPI_FLOAT, MPI_SUM, m, rq));
        break;
    }
    case PL_OP_ALL_GATHER: {
        cnt = pl_mpi_count(op->count, "pl_all_gather", c);
        const void *sb = send;
        if (send == recv || send == recv + off) {
            if (send != recv + off) memcpy(recv + off, send, op->count * sizeof(float));
            sb = MPI_IN_PLACE;
        }
        MPI_Datatype st = sb == MPI_IN_PLACE ? MPI_DATATYPE_NULL : MPI_FLOAT;
        if (b) PL_CHECK_MPI(MPI_Allgather(sb, cnt, st, recv, cnt, MPI_FLOAT, m));
        else PL_CHECK_MPI(MPI_Iallgather(sb, cnt, st, recv, cnt, MPI_FLOAT, m, rq));
        break;
    }
    case PL_OP_BROADCAST:
        cnt = pl_mpi_count(op->count, "pl_broadcast", c);
        PL_ASSERT(b);
        PL_CHECK_MPI(MPI_Bcast(recv, cnt, MPI_FLOAT, op->root, m));
        break;
    case PL_OP_ALL_TO_ALL:
        cnt = pl_mpi_count(op->count, "pl_all_to_all", c);
        PL_ASSERT(b);
        if (send == recv)
            PL_CHECK_MPI(MPI_Alltoall(MPI_IN_PLACE, cnt, MPI_DATATYPE_NULL, recv, cnt,
                                      MPI_FLOAT, m));
        else
            PL_CHECK_MPI(MPI_Alltoall(send, cnt, MPI_FLOAT, recv, cnt, MPI_FLOAT, m));
        break;
    case PL_OP_ALL_TO_ALL_V:
        PL_ASSERT(b);
        all_to_all_v(h, send, recv);
        break;
    case PL_OP_BARRIER:
        if (b) PL_CHECK_MPI(MPI_Barrier(m));
        else PL_CHECK_MPI(MPI_Ibarrier(m, rq));
        break;
    case PL_OP_SEND:
        cnt = pl_mpi_count(op->count, "pl_send", c);
        if (b) PL_CHECK_MPI(MPI_Send(send, cnt, MPI_FLOAT, op->peer, op->tag, m));
        else PL_CHECK_MPI(MPI_Isend(send, cnt, MPI_FLOAT, op->peer, op->tag, m, rq));
        break;
    case PL_OP_RECV:
        cnt = pl_mpi_count(op->count, "pl_recv", c);
        if (b) {
            MPI_Status st;
            int rc = MPI_Recv(recv, cnt, MPI_FLOAT, op->peer, op->tag, m, &st);
            check_received(h, rc, &st, op->count, op->peer);
        } else {
            PL_CHECK_MPI(MPI_Irecv(recv, cnt, MPI_FLOAT, op->peer, op->tag, m, rq));
        }
        break;
    case PL_OP_SENDRECV: {
        PL_ASSERT(b);
        cnt = pl_mpi_count(op->count, "pl_sendrecv", c);
        int rcnt = pl_mpi_count(op->recv_count, "pl_sendrecv", c);
        MPI_Status st;
        int rc;
        if (send == recv && cnt > 0)
            rc = MPI_Sendrecv_replace(recv, cnt, MPI_FLOAT, op->peer, op->tag, op->src,
                                      op->tag, m, &st);
        else
            rc = MPI_Sendrecv(send, cnt, MPI_FLOAT, op->peer, op->tag, recv, rcnt, MPI_FLOAT,
                              op->src, op->tag, m, &st);
        check_received(h, rc, &st, op->recv_count, op->src);
        break;
    }
    }
    if (op->red == PL_AVG &&
        (op->type == PL_OP_ALL_REDUCE || op->type == PL_OP_REDUCE_SCATTER)) {
        h->scale_buf = recv;
        h->scale_n = op->count;
        h->scale_div = c->size;
    }
}

/* ---- point-to-point with NCCL's completion rules ----
 * With pl_comm_set_p2p_like_nccl(1) (or PL_P2P_LIKE_NCCL=1) the MPI backend runs send and
 * receive as the NCCL backend (comm_nccl_gpu.c) does, so that code which would deadlock on
 * GPUs deadlocks here too: nothing is buffered (MPI_Issend, a send completes only when its
 * receive matches it); pl_isend and pl_irecv do nothing until the first wait or test on any
 * of them or the next blocking point-to-point call, which launch every one issued so far as
 * one group, as does the start of a collective; and completing a call completes its group
 * and every group launched before it on the same communicator (NCCL runs a communicator's
 * work in order on one stream). Receives match by order too, as NCCL's do: each is posted
 * for any tag, so it takes the peer's next send on the communicator (MPI keeps the messages
 * of one sender in order), and a message whose tag is not the receive's stops the job: the
 * two ranks posted their sends and receives in different orders, which MPI's matching by tag
 * forgives and NCCL does not. */

static int like_nccl;

/* Launched calls whose MPI request is not completed yet, and issued calls not launched. */
static struct {
    struct pl_handle **q;
    int n, cap;
} launched, deferred;

static void list_add(struct pl_handle ***q, int *n, int *cap, struct pl_handle *h)
{
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        *q = realloc(*q, (size_t)*cap * sizeof **q);
        if (!*q) pl_fatal("out of memory for point-to-point calls in flight");
    }
    (*q)[(*n)++] = h;
}

void pl_mpi_set_p2p_like_nccl(int on)
{
    if (launched.n || deferred.n)
        pl_usage_error("pl_comm_set_p2p_like_nccl(%d) with %d point-to-point calls in flight: "
                       "switch before the first pl_isend/pl_irecv or after the last pl_wait",
                       on, launched.n + deferred.n);
    like_nccl = on != 0;
}

int pl_mpi_p2p_like_nccl(void) { return like_nccl; }

static int is_p2p(const struct pl_handle *h)
{
    return h->op.type == PL_OP_SEND || h->op.type == PL_OP_RECV || h->op.type == PL_OP_SENDRECV;
}

/* Posts h's MPI request: a synchronous send, or a receive. */
static void post(struct pl_handle *h)
{
    const struct pl_op *op = &h->op;
    if (op->type == PL_OP_SEND)
        PL_CHECK_MPI(MPI_Issend(h->p2p_buf, pl_mpi_count(op->count, "pl_send", h->comm),
                                MPI_FLOAT, op->peer, op->tag, h->comm->mpi, &h->req));
    else
        PL_CHECK_MPI(MPI_Irecv((float *)h->p2p_buf, pl_mpi_count(op->count, "pl_recv", h->comm),
                               MPI_FLOAT, op->peer, MPI_ANY_TAG, h->comm->mpi, &h->req));
    h->active = 1;
    h->p2p_deferred = 0;
    h->p2p_upto = h->comm->p2p_issued;
    list_add(&launched.q, &launched.n, &launched.cap, h);
}

/* The group: every call issued and not launched yet, of every communicator. */
static void launch(void)
{
    for (int i = 0; i < deferred.n; i++) post(deferred.q[i]);
    deferred.n = 0;
}

/* Completes (block) or tests every launched call of comm up to place upto; 1 when none is
 * left. A completed receive is checked now: its status is not kept for its own wait. */
static int complete_upto(const struct pl_comm *comm, long upto, int block)
{
    int left = 0;
    for (int i = 0; i < launched.n;) {
        struct pl_handle *o = launched.q[i];
        if (o->comm != comm || o->p2p_seq > upto) {
            i++;
            continue;
        }
        MPI_Status st;
        int done = 1, rc = block ? MPI_Wait(&o->req, &st) : MPI_Test(&o->req, &done, &st);
        if (o->op.type == PL_OP_RECV && done && st.MPI_TAG != o->op.tag && st.MPI_TAG >= 0)
            pl_usage_error("pl_recv on group '%s': rank %d's receive from rank %d, posted for "
                           "tag %d, was matched with the message that rank sent with tag %d. "
                           "NCCL pairs the sends and receives between two ranks by their "
                           "order, not their tags: post them in the same order on both sides "
                           "(MPI's matching by tag forgave this; a GPU run would not)",
                           o->comm->name, o->comm->rank, o->op.peer, o->op.tag, st.MPI_TAG);
        if (o->op.type == PL_OP_RECV && (rc != MPI_SUCCESS || done))
            check_received(o, rc, &st, o->op.count, o->op.peer);
        else
            PL_CHECK_MPI(rc);
        if (!done) {
            left++;
            i++;
            continue;
        }
        o->active = 0;
        launched.q[i] = launched.q[--launched.n];
    }
    return left == 0;
}

/* A send or receive issued on comm: deferred, or (blocking) launched with every deferred
 * one and completed with its group. A blocking sendrecv is a send and a receive of one
 * group: the send goes from a copy when in place. */
static void nccl_like_start(struct pl_handle *h, const float *send, float *recv)
{
    const struct pl_op *op = &h->op;
    struct pl_comm *c = h->comm;
    h->p2p_seq = ++c->p2p_issued;
    h->p2p_buf = op->type == PL_OP_RECV ? recv : send;
    if (!h->blocking) {
        h->p2p_deferred = 1;
        list_add(&deferred.q, &deferred.n, &deferred.cap, h);
        return;
    }
    if (op->type != PL_OP_SENDRECV) {
        launch();
        post(h);
        complete_upto(c, h->p2p_upto, 1);
        return;
    }
    int cnt = pl_mpi_count(op->count, "pl_sendrecv", c);
    float *copy = NULL;
    if (send == recv && cnt > 0) {
        copy = host_alloc(op->count);
        memcpy(copy, send, op->count * sizeof(float));
        send = copy;
    }
    MPI_Request sreq;
    launch();
    PL_CHECK_MPI(MPI_Issend(send, cnt, MPI_FLOAT, op->peer, op->tag, c->mpi, &sreq));
    h->p2p_buf = recv;
    h->op.type = PL_OP_RECV; /* the receive half, as post() and the checks see it */
    h->op.count = op->recv_count;
    h->op.peer = op->src;
    post(h);
    complete_upto(c, h->p2p_upto, 1);
    PL_CHECK_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
    free(copy);
}

void pl_mpi_start(struct pl_handle *h, int staged)
{
    const float *send = h->op.send;
    float *recv = h->op.recv;
    if (staged) stage_in(h, &send, &recv);
    if (like_nccl && is_p2p(h)) {
        nccl_like_start(h, send, recv);
        return;
    }
    /* As on NCCL, sends and receives issued before a collective are on their way before it
     * (that the collective then also waits for them is not modelled). */
    if (like_nccl) launch();
    host_start(h, send, recv);
}

int pl_mpi_progress(struct pl_handle *h, int block)
{
    if (h->p2p_seq) {
        /* NCCL's rules: waiting or testing launches the group; its completion waits for
         * the whole group and the groups before it. */
        if (h->p2p_deferred) launch();
        if (!complete_upto(h->comm, h->p2p_upto, block)) return 0;
    } else if (h->active) {
        MPI_Status st;
        int done = 1, rc;
        if (block) rc = MPI_Wait(&h->req, &st);
        else rc = MPI_Test(&h->req, &done, &st);
        if (h->op.type == PL_OP_RECV) {
            if (rc != MPI_SUCCESS || done) check_received(h, rc, &st, h->op.count, h->op.peer);
        } else {
            PL_CHECK_MPI(rc);
        }
        if (!done) return 0;
        h->active = 0;
    }
    if (h->post_n) memcpy(h->post_dst, h->post_src, h->post_n * sizeof(float));
    if (h->scale_n) {
        float d = (float)h->scale_div;
        for (size_t i = 0; i < h->scale_n; i++) h->scale_buf[i] = h->scale_buf[i] / d;
    }
    if (h->stage_n && h->op.type == PL_OP_ALL_TO_ALL_V) {
        /* Only the received blocks: the gaps between them keep what the device held. */
        for (int j = 0; j < h->comm->size; j++)
            pl_copy_from_host(h->stage_dst + h->op.recv_displs[j],
                              h->stage_src + h->op.recv_displs[j], h->op.recv_counts[j]);
    } else if (h->stage_n) {
        pl_copy_from_host(h->stage_dst, h->stage_src, h->stage_n);
    }
    free(h->stage);
    free(h->stage_extra);
    h->post_n = h->scale_n = h->stage_n = 0;
    h->stage = NULL;
    h->stage_extra = NULL;
    return 1;
}
