/* comm_op.c: one communication operation as the front end and the backends both see it
 * (comm_op.h): its names for messages and the extent of its buffers. */
#include "comm_op.h"

const char *pl_red_name(enum pl_red op) { return op == PL_AVG ? "avg" : "sum"; }

enum pl_coll_kind pl_op_kind(enum pl_op_type t)
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

const char *pl_op_word(enum pl_op_type t)
{
    switch (t) {
    case PL_OP_SEND: return "send";
    case PL_OP_RECV: return "recv";
    case PL_OP_SENDRECV: return "sendrecv";
    default: return pl_coll_kind_name(pl_op_kind(t));
    }
}

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
