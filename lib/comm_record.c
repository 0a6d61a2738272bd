/* comm_record.c: what every communication call leaves behind, apart from moving the bytes:
 * its size as nccl-tests counts it, its charge to the traffic ledger as the ring algorithm
 * uses the links, its events in the trace, and its line under PL_VERBOSE=1 (comm_record.h). */
#include "comm_record.h"

#include <stdio.h>
#include <string.h>

#include "ledger.h"
#include "proc.h"
#include "topo.h"

double pl_comm_bytes(const struct pl_op *op, int n)
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

void pl_comm_charge(const struct pl_op *op, struct pl_comm *c, enum pl_coll_kind kind, double S)
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

void pl_comm_event(enum pl_ev_type type, const struct pl_handle *h, int peer, int tag,
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

void pl_comm_print(const struct pl_call *k, const struct pl_handle *h)
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
                 op->count, h->bytes, pl_red_name(op->red));
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
    printf("[rank %d] %s %s#%d %s%s\n", pl_rank(), pl_op_word(op->type), c->name, c->id, what, hs);
    fflush(stdout);
}
