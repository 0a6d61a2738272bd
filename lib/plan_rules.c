/* plan_rules.c: the placement rules of plan_rules.h, with messages that name the rule, the
 * numbers that break it, and what would hold. */
#include "plan_rules.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "torus.h"
#include "util.h"

/* Product of the sizes of the axes left of axis: how far apart consecutive members of one
 * of its groups are. */
static long axis_stride(const struct pl_grid *g, int axis)
{
    long s = 1;
    for (int i = 0; i < axis; i++) s *= g->size[i];
    return s;
}

int pl_rule_inside_node(const struct pl_grid *g, const char *axis, int per_node, char *err,
                        size_t errlen)
{
    int a = pl_grid_axis(g, axis);
    if (a < 0 || g->size[a] == 1) return 0;
    long stride = axis_stride(g, a), span = stride * g->size[a];
    if (span <= per_node && per_node % span == 0) return 0;
    char desc[128] = "";
    if (err && errlen) pl_grid_describe(g, desc, sizeof desc);
    if (stride == 1)
        return pl_err(err, errlen,
                      "rule \"%s inside a node\": %s=%d is more than the %d GPUs of a node, so each "
                      "%s group crosses the network; keep %s <= %d and scale with pp and dp",
                      axis, axis, g->size[a], per_node, axis, axis, per_node);
    return pl_err(err, errlen,
                  "rule \"%s inside a node\": in %s the members of a %s group are %ld ranks apart "
                  "(the axes left of %s), so a group spans %ld ranks, more than a node's %d GPUs; "
                  "put %s further left in the order, or make the axes left of it smaller",
                  axis, desc, axis, stride, axis, span, per_node, axis);
}

/* The first side of dims longer than 1: the ring that the leftmost axis' consecutive ranks
 * run along. */
static int first_side(const int dims[3])
{
    for (int d = 0; d < 3; d++)
        if (dims[d] > 1) return dims[d];
    return 1;
}

int pl_rule_torus_ring(const struct pl_grid *g, const char *axis, const int dims[3], char *err,
                       size_t errlen)
{
    int a = pl_grid_axis(g, axis);
    if (a < 0 || g->size[a] == 1) return 0;
    int n = g->size[a], *members = malloc((size_t)n * sizeof *members);
    PL_ASSERT(members);
    int bad = -1, worst = 0;
    for (int r = 0; r < g->world && bad < 0; r++) {
        if (pl_grid_coord(g, r, a) != 0) continue;
        pl_grid_group(g, r, a, members);
        worst = pl_torus_ring_hops(dims, members, n);
        if (worst > 1) bad = r;
    }
    int from = 0, to = 0, cf[3], ct[3];
    for (int i = 0; bad >= 0 && i < n; i++)
        if (pl_torus_hops(dims, members[i], members[(i + 1) % n]) == worst) {
            from = members[i], to = members[(i + 1) % n];
            break;
        }
    free(members);
    if (bad < 0) return 0;
    pl_torus_coords(dims, from, cf);
    pl_torus_coords(dims, to, ct);
    return pl_err(err, errlen,
                  "rule \"%s on a torus ring\": on the %d x %d x %d torus the %s group of rank %d "
                  "(%s=%d) steps %d links from rank %d (%d,%d,%d) to rank %d (%d,%d,%d); a ring "
                  "collective waits for its longest step, and those links carry other steps "
                  "too. A torus has no node to keep %s in: make each %s group a ring of "
                  "neighbours, %s=2 or %s=%d (a whole side of the torus) with %s leftmost in "
                  "the order",
                  axis, dims[0], dims[1], dims[2], axis, bad, axis, n, worst, from, cf[0], cf[1],
                  cf[2], to, ct[0], ct[1], ct[2], axis, axis, axis, axis, first_side(dims), axis);
}

/* Rank of an axis in the wanted nesting: 0 innermost. cp and ep share a rank. */
static int nesting(const char *axis)
{
    if (!strcmp(axis, "tp")) return 0;
    if (!strcmp(axis, "cp") || !strcmp(axis, "ep")) return 1;
    if (!strcmp(axis, "pp")) return 2;
    return 3; /* dp */
}

int pl_rule_order(const struct pl_grid *g, char *err, size_t errlen)
{
    int prev = -1;
    const char *prev_name = NULL;
    for (int i = 0; i < g->naxes; i++) {
        if (g->size[i] == 1) continue;
        int n = nesting(g->axis[i]);
        if (n < prev) {
            char desc[128];
            pl_grid_describe(g, desc, sizeof desc);
            return pl_err(err, errlen,
                          "rule \"rank order\": %s varies faster than %s in %s; the order must "
                          "put tp innermost (leftmost), then cp/ep, then pp, and dp outermost, "
                          "e.g. \"tp-cp-ep-pp-dp\", so that the busiest groups share a node",
                          prev_name, g->axis[i], desc);
        }
        prev = n;
        prev_name = g->axis[i];
    }
    return 0;
}

int pl_rule_memory(double bytes, double hbm, char *err, size_t errlen)
{
    double limit = PL_RULE_MEM_SHARE * hbm;
    if (bytes <= limit) return 0;
    return pl_err(err, errlen,
                  "rule \"memory fits\": %.1f GB per GPU is more than %.0f%% of the %.0f GB HBM "
                  "(%.1f GB); shard more (a higher ZeRO stage, more tp or pp), recompute "
                  "activations, or use smaller microbatches",
                  bytes / 1e9, 100 * PL_RULE_MEM_SHARE, hbm / 1e9, limit / 1e9);
}

int pl_rule_batch(int dp, int micro, int m, double batch_seqs, char *err, size_t errlen)
{
    double got = (double)dp * micro * m;
    if (fabs(got - batch_seqs) < 0.5) return 0;
    return pl_err(err, errlen,
                  "rule \"batch reached\": dp %d x microbatch %d x %d microbatches = %.0f "
                  "sequences per step, but the global batch is %.0f; choose micro and m with "
                  "dp x micro x m = %.0f exactly (a rounded-down count trains on fewer tokens)",
                  dp, micro, m, got, batch_seqs, batch_seqs);
}

double pl_rule_bubble(int p, int m, int v)
{
    if (p <= 1) return 0.0;
    return (double)(p - 1) / ((double)v * m + p - 1);
}

int pl_rule_microbatches(int p, int m, int v, char *err, size_t errlen)
{
    if (p <= 1) return 0;
    if (m < p)
        return pl_err(err, errlen,
                      "rule \"microbatches\": %d microbatches on %d pipeline stages; 1F1B needs "
                      "m >= p to fill the pipe (m >= %d keeps the bubble near 20%%)",
                      m, p, 4 * p);
    if (v > 1 && m % p != 0)
        return pl_err(err, errlen,
                      "rule \"microbatches\": the interleaved schedule (v=%d) needs m a multiple "
                      "of p, and %d is not a multiple of %d", v, m, p);
    double b = pl_rule_bubble(p, m, v);
    if (b <= PL_RULE_MAX_BUBBLE + 1e-12) return 0;
    return pl_err(err, errlen,
                  "rule \"microbatches\": the bubble (p-1)/(v m + p - 1) = %d/(%d x %d + %d) = "
                  "%.0f%% of the step, more than %.0f%%; use more microbatches (m >= %d), "
                  "interleave (v > 1), or fewer stages",
                  p - 1, v, m, p - 1, 100 * b, 100 * PL_RULE_MAX_BUBBLE, 4 * p);
}
