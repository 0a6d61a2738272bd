/* cases_layout.c: the shard layout judged by zero.h's invariants, never against one layout
 * (zero.h admits many: any chunk from ceil(numel/n) up to an alignment's worth more, the
 * units in any order in a full buffer and in a shard); the layout test on zero_layout_init;
 * the layout the stage cases read the student's buffers by; and a stage's parameters read
 * back whole. The first invariant broken is recorded in figures, worded by judge_correct.c. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab03.h"
#include "todo.h"

static size_t ceil_div(size_t a, size_t b)
{
    return a / b + (a % b != 0);
}

void l3_tight_layout(struct zero_layout *zl, const struct pl_model_layout *lay, int n, int rank)
{
    memset(zl, 0, sizeof *zl);
    zl->n = n;
    zl->rank = rank;
    zl->nunits = lay->cfg.n_layers + 2;
    zl->numel = lay->numel;
    for (int u = 0; u < zl->nunits; u++) {
        struct zero_unit *x = &zl->unit[u];
        x->part = u - 1;
        pl_model_part_range(lay, x->part, &x->offset, &x->numel);
        x->chunk = ceil_div(x->numel, (size_t)n);
        x->padded = x->chunk * (size_t)n;
        x->full_offset = zl->full_numel;
        x->shard_offset = zl->shard_numel;
        zl->full_numel += x->padded;
        zl->shard_numel += x->chunk;
    }
}

struct l3_shape l3_shape_of(const struct zero_layout *e)
{
    struct l3_shape f = {(double)e->numel, (double)e->full_numel, (double)e->shard_numel, 0,
                         0, e->n, 0};
    double w1 = 0, w2 = 0;
    for (int u = 0; u < e->nunits; u++) {
        double p = (double)e->unit[u].padded;
        if (p > w1) {
            w2 = w1;
            w1 = p;
        } else if (p > w2) {
            w2 = p;
        }
    }
    f.two_units = w1 + w2;
    f.one_unit = w1;
    f.head = e->nunits ? (double)e->unit[e->nunits - 1].padded : 0;
    return f;
}

static int broken(struct l3_layout_diff *d, int code, int unit, double g0, double g1,
                  double w0, double w1)
{
    d->code = code;
    d->unit = unit;
    d->got[0] = g0;
    d->got[1] = g1;
    d->want[0] = w0;
    d->want[1] = w1;
    return 0;
}

/* The first two units whose ranges [off, off + len) of a buffer of total elements overlap,
 * or one that runs past total (*v = -1): 1 when none does. */
static int tiles(const struct zero_layout *g, int shard, size_t total, int *u, int *v)
{
    for (int a = 0; a < g->nunits; a++) {
        const struct zero_unit *x = &g->unit[a];
        size_t xo = shard ? x->shard_offset : x->full_offset, xl = shard ? x->chunk : x->padded;
        if (xo > total || xl > total - xo) {
            *u = a;
            *v = -1;
            return 0;
        }
        for (int b = a + 1; b < g->nunits; b++) {
            const struct zero_unit *y = &g->unit[b];
            size_t yo = shard ? y->shard_offset : y->full_offset,
                   yl = shard ? y->chunk : y->padded;
            if (xo < yo + yl && yo < xo + xl && xl && yl) {
                *u = a;
                *v = b;
                return 0;
            }
        }
    }
    return 1;
}

/* The units of g, one by one, against the model's parts and the chunk's bounds. */
static int judge_units(const struct pl_model_layout *lay, int n, const struct zero_layout *g,
                       struct l3_layout_diff *d)
{
    for (int u = 0; u < g->nunits; u++) {
        const struct zero_unit *x = &g->unit[u];
        size_t off, len;
        d->unit_numel = (double)x->numel;
        if (x->part != u - 1) return broken(d, L3_LD_PART, u, x->part, 0, u - 1, 0);
        pl_model_part_range(lay, x->part, &off, &len);
        d->unit_numel = (double)len;
        if (x->offset != off || x->numel != len)
            return broken(d, L3_LD_RANGE, u, (double)x->offset, (double)x->numel, (double)off,
                          (double)len);
        size_t least = ceil_div(len, (size_t)n);
        if (x->chunk < least) return broken(d, L3_LD_GAP, u, (double)x->chunk, 0, (double)least, 0);
        if (x->chunk - least >= ZERO_MAX_ALIGN)
            return broken(d, L3_LD_EXCESS, u, (double)x->chunk, 0, (double)least, 0);
        if (x->padded != x->chunk * (size_t)n)
            return broken(d, L3_LD_PADDED, u, (double)x->padded, 0,
                          (double)(x->chunk * (size_t)n), 0);
    }
    return 1;
}

int l3_judge_layout(const struct pl_model_layout *lay, int n, int rank,
                    const struct zero_layout *g, struct l3_layout_diff *d)
{
    d->code = 0;
    if (g->n != n || g->rank != rank) {
        d->got[1] = g->rank;
        d->want[1] = rank;
        return broken(d, L3_LD_NRANK, -1, g->n, g->rank, n, rank);
    }
    int U = lay->cfg.n_layers + 2;
    if (g->nunits != U) return broken(d, L3_LD_NUNITS, -1, g->nunits, 0, U, 0);
    if (!judge_units(lay, n, g, d)) return 0;
    double padded = 0, chunks = 0;
    for (int u = 0; u < U; u++) {
        padded += (double)g->unit[u].padded;
        chunks += (double)g->unit[u].chunk;
    }
    d->unit_numel = 0;
    if (g->numel != lay->numel || (double)g->full_numel != padded ||
        (double)g->shard_numel != chunks) {
        d->got[2] = (double)g->shard_numel;
        d->want[2] = chunks;
        return broken(d, L3_LD_TOTALS, -1, (double)g->numel, (double)g->full_numel,
                      (double)lay->numel, padded);
    }
    /* With the totals the sums, ranges that never overlap and stay inside fill the buffer. */
    int u, v;
    for (int shard = 0; shard < 2; shard++)
        if (!tiles(g, shard, shard ? g->shard_numel : g->full_numel, &u, &v)) {
            const struct zero_unit *x = &g->unit[u], *y = &g->unit[v < 0 ? u : v];
            d->unit2 = v;
            d->got[2] = shard ? (double)g->shard_numel : (double)g->full_numel;
            return broken(d, shard ? L3_LD_SHARD_OVERLAP : L3_LD_FULL_OVERLAP, u,
                          (double)(shard ? x->shard_offset : x->full_offset),
                          (double)(shard ? x->chunk : x->padded),
                          (double)(shard ? y->shard_offset : y->full_offset),
                          (double)(shard ? y->chunk : y->padded));
        }
    return 1;
}

int l3_same_cut(const struct zero_layout *g, const struct zero_layout *g0,
                struct l3_layout_diff *d)
{
    d->code = 0;
    if (g->nunits != g0->nunits || g->nunits < 0 || g->nunits > ZERO_MAX_UNITS) {
        d->field = 7;
        return broken(d, L3_LD_UNEQUAL, -1, g->nunits, 0, g0->nunits, 0);
    }
    for (int u = 0; u < g->nunits; u++) {
        const struct zero_unit *x = &g->unit[u], *y = &g0->unit[u];
        const size_t got[6] = {x->chunk, x->padded, x->full_offset, x->shard_offset, x->offset,
                               x->numel};
        const size_t want[6] = {y->chunk, y->padded, y->full_offset, y->shard_offset,
                                y->offset, y->numel};
        d->unit_numel = (double)y->numel;
        for (int k = 0; k < 6; k++)
            if (got[k] != want[k]) {
                d->field = k;
                return broken(d, L3_LD_UNEQUAL, u, (double)got[k], 0, (double)want[k], 0);
            }
        if (x->part != y->part) {
            d->field = 6;
            return broken(d, L3_LD_UNEQUAL, u, x->part, 0, y->part, 0);
        }
    }
    const size_t got[3] = {g->shard_numel, g->full_numel, g->numel};
    const size_t want[3] = {g0->shard_numel, g0->full_numel, g0->numel};
    for (int k = 0; k < 3; k++)
        if (got[k] != want[k]) {
            d->field = 8 + k;
            return broken(d, L3_LD_UNEQUAL, -1, (double)got[k], 0, (double)want[k], 0);
        }
    return 1;
}

int l3_layout_of_code(struct zero_layout *e, const struct pl_model_layout *lay, int n,
                      int rank)
{
    struct l3_layout_diff d;
    memset(e, 0, sizeof *e);
    pl_todo_reset();
    zero_layout_init(e, lay, n, rank);
    int stub = pl_todo_what() != NULL;
    pl_todo_reset();
    if (!stub && l3_judge_layout(lay, n, rank, e, &d)) return 1;
    l3_tight_layout(e, lay, n, rank);
    return 0;
}

/* Notes the model a layout-test failure was found on. */
static void note_model(struct l3_layout_diff *d, const struct pl_model_config *c, double psi,
                       int n, int rank)
{
    d->test = 1;
    d->psi = psi;
    d->n_layers = c->n_layers;
    d->d_model = c->d_model;
    d->d_ff = c->d_ff;
    d->vocab = c->vocab;
    d->n = n;
    d->rank = rank;
}

/* zero_layout_init for every rank of n (n when all are right, -1 at a stub, else the rank
 * whose layout broke, d saying how): each rank's stores its n and rank, every rank's
 * cut is rank 0's (checked before rank 0's invariants, so that a cut that gives ranks
 * different shards is named for that), and rank 0's keeps the invariants. */
static int layouts_of_n(const struct pl_model_layout *lay, int n, struct zero_layout *g,
                        struct l3_layout_diff *d, int *tried)
{
    for (int rank = 0; rank < n; rank++) {
        memset(&g[rank], 0, sizeof g[rank]);
        zero_layout_init(&g[rank], lay, n, rank);
        ++*tried;
        if (pl_todo_what()) return -1;
        if (g[rank].n != n || g[rank].rank != rank) {
            l3_judge_layout(lay, n, rank, &g[rank], d);
            return rank;
        }
    }
    for (int rank = 1; rank < n; rank++)
        if (!l3_same_cut(&g[rank], &g[0], d)) return rank;
    return l3_judge_layout(lay, n, 0, &g[0], d) ? n : 0;
}

/* The layout test: zero_layout_init on model sizes drawn from the seed, on 1 to 9 ranks,
 * judged by the invariants. Stops at the first layout broken (kept in d) or stub. */
int l3_run_layouts(uint64_t seed, struct l3_layout_diff *d, int *tried)
{
    uint64_t r = pl_mix64(seed ^ 0x1ab03);
    struct zero_layout *g = malloc(9 * sizeof *g);
    *tried = 0;
    int ok = 1;
    for (int k = 0; k < 24 && ok; k++) {
        struct pl_model_config c = l3_graded_config(seed);
        if (k > 0) { /* sizes drawn from the seed: odd widths, few and many layers */
            r = pl_mix64(r + (uint64_t)k);
            c.n_heads = 1 + (int)(r % 3);
            c.d_model = c.n_heads * (1 + (int)((r >> 8) % 13));
            c.n_layers = 1 + (int)((r >> 16) % 9);
            c.d_ff = 1 + (int)((r >> 24) % 97);
            c.seq_len = 1 + (int)((r >> 32) % 23);
            c.vocab = 2 + (int)((r >> 40) % 300);
        }
        struct pl_model_layout lay;
        pl_model_layout_init(&lay, &c);
        for (int n = 1; n <= 9 && ok; n++) {
            int got = layouts_of_n(&lay, n, g, d, tried);
            if (got == n) continue;
            ok = 0;
            if (got >= 0) note_model(d, &c, (double)lay.numel, n, got);
        }
        pl_model_layout_free(&lay);
    }
    free(g);
    return ok;
}

/* ---- reading a stage's parameters back ---- */

/* The model's flat parameters (Psi floats, host) as this rank's state holds them: stages 1
 * and 2 from the full padded buffer, stage 3 gathered from every shard of the group (raw
 * MPI over group, so the ledger does not see it). zl is this rank's layout, judged by the
 * invariants and the same on every rank of the group but for rank. */
float *l3_flat_params(const struct zero *z, const struct zero_layout *zl, MPI_Comm group)
{
    float *flat = malloc((zl->numel ? zl->numel : 1) * sizeof *flat);
    if (z->stage != 3) {
        for (int u = 0; u < zl->nunits; u++) {
            const struct zero_unit *x = &zl->unit[u];
            pl_to_host(flat + x->offset, z->params + x->full_offset, x->numel * sizeof(float));
        }
        return flat;
    }
    size_t s = zl->shard_numel;
    float *mine = malloc((s ? s : 1) * sizeof *mine);
    float *all = malloc((s ? s : 1) * (size_t)zl->n * sizeof *all);
    pl_to_host(mine, z->params, s * sizeof(float));
    PL_CHECK_MPI(MPI_Allgather(mine, (int)s, MPI_FLOAT, all, (int)s, MPI_FLOAT, group));
    for (int u = 0; u < zl->nunits; u++) {
        const struct zero_unit *x = &zl->unit[u];
        for (int r = 0; r < zl->n; r++) {
            size_t start = (size_t)r * x->chunk;
            if (start >= x->numel) break;
            size_t len = x->numel - start < x->chunk ? x->numel - start : x->chunk;
            memcpy(flat + x->offset + start, all + (size_t)r * s + x->shard_offset,
                   len * sizeof(float));
        }
    }
    free(mine);
    free(all);
    return flat;
}
