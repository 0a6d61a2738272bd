/* ledger.c: the traffic ledger of ledger.h: the ring algorithms' volumes and times, this
 * rank's running counts and their printing (the gather over a group is comm_ledger.c). */
#include "ledger.h"
#include "units.h"

#include <math.h>
#include <string.h>

#include "check.h"

double pl_ring_bytes_sent(enum pl_coll_kind kind, int n, double S)
{
    if (n <= 1) return 0.0;
    double frac = (double)(n - 1) / n;
    switch (kind) {
    case PL_ALL_REDUCE: return 2.0 * frac * S; /* reduce-scatter then all-gather */
    case PL_REDUCE_SCATTER:
    case PL_ALL_GATHER:
    case PL_ALL_TO_ALL:
    case PL_ALL_TO_ALL_V: return frac * S;     /* n-1 blocks of S/n each */
    case PL_BROADCAST:
    case PL_P2P: return S;
    case PL_BARRIER: return 0.0;
    default: pl_fatal("unknown collective kind %d", (int)kind);
    }
}

double pl_busbw_factor(enum pl_coll_kind kind, int n)
{
    if (n <= 1) return kind == PL_BROADCAST || kind == PL_P2P ? 1.0 : 0.0;
    double frac = (double)(n - 1) / n;
    switch (kind) {
    case PL_ALL_REDUCE: return 2.0 * frac;
    case PL_REDUCE_SCATTER:
    case PL_ALL_GATHER:
    case PL_ALL_TO_ALL:
    case PL_ALL_TO_ALL_V: return frac;
    case PL_BROADCAST:
    case PL_P2P: return 1.0;
    case PL_BARRIER: return 0.0;
    default: pl_fatal("unknown collective kind %d", (int)kind);
    }
}

double pl_coll_time(enum pl_coll_kind kind, int n, double S, double lat, double bw)
{
    if (n <= 1 && kind != PL_P2P) return 0.0;
    double steps, frac = (double)(n - 1) / n;
    switch (kind) {
    case PL_ALL_REDUCE: return 2.0 * (n - 1) * lat + 2.0 * frac * S / bw;
    case PL_REDUCE_SCATTER:
    case PL_ALL_GATHER:
    case PL_ALL_TO_ALL:
    case PL_ALL_TO_ALL_V: return (n - 1) * lat + frac * S / bw;
    /* A pipelined chain: the data streams through at link speed after n-1 hops start up. */
    case PL_BROADCAST: return (n - 1) * lat + S / bw;
    case PL_P2P: return lat + S / bw;
    /* Dissemination barrier: ceil(log2 n) rounds of empty messages. */
    case PL_BARRIER:
        steps = ceil(log2((double)n));
        return steps * lat;
    default: pl_fatal("unknown collective kind %d", (int)kind);
    }
}

/* The runtime context of this rank's ledger, the FLOPs counter no reset touches, and how
 * deep in recomputation the ops now run. */
static struct pl_ledger ledger;
static double flops_ever;
static int recompute_depth;

struct pl_ledger *pl_ledger(void) { return &ledger; }

void pl_ledger_reset(void) { memset(&ledger, 0, sizeof ledger); }

void pl_ledger_add_flops(double flops)
{
    ledger.flops += flops;
    if (recompute_depth > 0) ledger.flops_recompute += flops;
    flops_ever += flops;
}

void pl_ledger_recompute_begin(void) { recompute_depth++; }

void pl_ledger_recompute_end(void)
{
    PL_ASSERT(recompute_depth > 0);
    recompute_depth--;
}

double pl_ledger_flops_total(void) { return flops_ever; }

static void check_kind(enum pl_coll_kind kind)
{
    if ((int)kind < 0 || kind >= PL_NKINDS) pl_fatal("unknown collective kind %d", (int)kind);
}

void pl_ledger_charge(enum pl_coll_kind kind, enum pl_link link, double bytes)
{
    check_kind(kind);
    if ((int)link < 0 || link >= PL_NLINKS) pl_fatal("unknown link class %d", (int)link);
    ledger.bytes[kind][link] += bytes;
}

void pl_ledger_count_call(enum pl_coll_kind kind)
{
    check_kind(kind);
    ledger.calls[kind]++;
}

void pl_ledger_diff(const struct pl_ledger *after, const struct pl_ledger *before,
                    struct pl_ledger *out)
{
    struct pl_ledger d;
    for (int k = 0; k < PL_NKINDS; k++) {
        for (int l = 0; l < PL_NLINKS; l++) d.bytes[k][l] = after->bytes[k][l] - before->bytes[k][l];
        d.calls[k] = after->calls[k] - before->calls[k];
    }
    d.flops = after->flops - before->flops;
    d.flops_recompute = after->flops_recompute - before->flops_recompute;
    *out = d;
}

double pl_ledger_bytes(const struct pl_ledger *l, int kind, int link)
{
    double sum = 0.0;
    for (int k = 0; k < PL_NKINDS; k++) {
        if (kind >= 0 && k != kind) continue;
        for (int j = 0; j < PL_NLINKS; j++)
            if (link < 0 || j == link) sum += l->bytes[k][j];
    }
    return sum;
}

/* The kinds whose every member sends in the ring algorithm whenever the group has two ranks
 * or more and the buffer is not empty. */
static int ring_kind(int k)
{
    return k == PL_ALL_REDUCE || k == PL_REDUCE_SCATTER || k == PL_ALL_GATHER;
}

double pl_ledger_modelled_time(const struct pl_ledger *l, const struct pl_profile *p)
{
    double t = l->flops / p->flops;
    for (int j = 0; j < PL_NLINKS; j++) t += pl_ledger_bytes(l, -1, j) / p->bw[j];
    /* The ledger does not keep a call's link class, so a kind that sent anything across
     * nodes pays the network latency per call, as its ring would at its slowest hop. Nor
     * does it keep a call's group; but on two ranks or more every member of a ring
     * all-reduce, reduce-scatter or all-gather sends, so one of those kinds that sent no
     * byte at all ran on groups of one (tensor parallelism with t = 1, say) or on empty
     * buffers, waited for no one and costs nothing, as pl_coll_time says. The other kinds
     * may wait without sending (a receive, the end of a broadcast chain, a barrier): they
     * pay their latency always. */
    for (int k = 0; k < PL_NKINDS; k++) {
        if (ring_kind(k) && pl_ledger_bytes(l, k, -1) <= 0) continue;
        enum pl_link link = l->bytes[k][PL_LINK_INTER] > 0 ? PL_LINK_INTER : PL_LINK_INTRA;
        t += (double)l->calls[k] * p->latency[link];
    }
    return t;
}

void pl_ledger_print(FILE *f, const struct pl_ledger *all, int nranks)
{
    /* Only the columns some rank used, so a DDP run shows one kind and not eight. */
    int used[PL_NKINDS][PL_NLINKS] = {{0}};
    int ncols = 0;
    for (int r = 0; r < nranks; r++)
        for (int k = 0; k < PL_NKINDS; k++)
            for (int l = 0; l < PL_NLINKS; l++)
                if (all[r].bytes[k][l] != 0.0 && !used[k][l]) {
                    used[k][l] = 1;
                    ncols++;
                }
    char name[64], cell[32];
    fprintf(f, "%5s", "rank");
    for (int k = 0; k < PL_NKINDS; k++)
        for (int l = 0; l < PL_NLINKS; l++)
            if (used[k][l]) {
                snprintf(name, sizeof name, "%s:%s", pl_coll_kind_name(k), pl_link_name(l));
                fprintf(f, " %20s", name);
            }
    fprintf(f, " %14s %14s\n", "total sent", "GFLOP");
    for (int r = 0; r < nranks; r++) {
        fprintf(f, "%5d", r);
        for (int k = 0; k < PL_NKINDS; k++)
            for (int l = 0; l < PL_NLINKS; l++)
                if (used[k][l]) {
                    pl_format_bytes(all[r].bytes[k][l], cell, sizeof cell);
                    fprintf(f, " %20s", cell);
                }
        pl_format_bytes(pl_ledger_bytes(&all[r], -1, -1), cell, sizeof cell);
        fprintf(f, " %14s %14.3f\n", cell, all[r].flops / 1e9);
    }
    if (ncols == 0) fprintf(f, "(no bytes sent)\n");
}
