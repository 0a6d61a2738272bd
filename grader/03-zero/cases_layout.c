/* cases_layout.c: the shard layout zero.h's rule gives, computed here (handout section 2);
 * the layout test against the student's zero_layout_init; and a stage's parameters read
 * back whole. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab03.h"
#include "todo.h"

void l3_expected_layout(struct zero_layout *zl, const struct pl_model_layout *lay, int n,
                            int rank)
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
        x->chunk = x->numel / (size_t)n + (x->numel % (size_t)n != 0);
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
                         0, e->n};
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
    f.head = e->nunits ? (double)e->unit[e->nunits - 1].padded : 0;
    return f;
}

static int differ(struct l3_layout_diff *d, int code, double got, double want)
{
    d->code = code;
    d->got[0] = got;
    d->want[0] = want;
    return 0;
}

int l3_compare_layout(const struct zero_layout *e, const struct zero_layout *g,
                      struct l3_layout_diff *d)
{
    if (g->n != e->n || g->rank != e->rank) {
        d->got[1] = g->rank;
        d->want[1] = e->rank;
        return differ(d, L3_LD_NRANK, g->n, e->n);
    }
    if (g->nunits != e->nunits) return differ(d, L3_LD_NUNITS, g->nunits, e->nunits);
    for (int u = 0; u < e->nunits; u++) {
        const struct zero_unit *x = &e->unit[u], *y = &g->unit[u];
        const size_t want[6] = {x->offset, x->numel, x->chunk, x->padded, x->full_offset,
                                x->shard_offset};
        const size_t got[6] = {y->offset, y->numel, y->chunk, y->padded, y->full_offset,
                               y->shard_offset};
        d->unit = u;
        d->unit_numel = (double)x->numel;
        if (x->part != y->part) return differ(d, L3_LD_PART, y->part, x->part);
        for (int k = 0; k < 6; k++)
            if (want[k] != got[k]) {
                d->field = k;
                return differ(d, L3_LD_FIELD, (double)got[k], (double)want[k]);
            }
    }
    if (g->numel != e->numel || g->full_numel != e->full_numel ||
        g->shard_numel != e->shard_numel) {
        d->got[1] = (double)g->full_numel;
        d->got[2] = (double)g->shard_numel;
        d->want[1] = (double)e->full_numel;
        d->want[2] = (double)e->shard_numel;
        return differ(d, L3_LD_TOTALS, (double)g->numel, (double)e->numel);
    }
    return 1;
}

/* The layout test: zero_layout_init on model sizes drawn from the seed, on 1 to 9 ranks,
 * against l3_expected_layout. Stops at the first difference (kept in d) or stub. */
int l3_run_layouts(uint64_t seed, struct l3_layout_diff *d, int *tried)
{
    uint64_t r = pl_mix64(seed ^ 0x1ab03);
    *tried = 0;
    for (int k = 0; k < 24; k++) {
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
        int ok = 1;
        for (int n = 1; n <= 9 && ok; n++)
            for (int rank = 0; rank < n && ok; rank++) {
                struct zero_layout e, g;
                memset(&g, 0, sizeof g);
                l3_expected_layout(&e, &lay, n, rank);
                zero_layout_init(&g, &lay, n, rank);
                ++*tried;
                if (pl_todo_what()) ok = 0;
                if (ok && !l3_compare_layout(&e, &g, d)) {
                    ok = 0;
                    d->test = 1;
                    d->psi = (double)lay.numel;
                    d->n_layers = c.n_layers;
                    d->d_model = c.d_model;
                    d->d_ff = c.d_ff;
                    d->vocab = c.vocab;
                    d->n = n;
                    d->rank = rank;
                }
            }
        pl_model_layout_free(&lay);
        if (!ok) return 0;
    }
    return 1;
}

/* ---- reading a stage's parameters back ---- */

/* The model's flat parameters (Psi floats, host) as this rank's state holds them: stages 1
 * and 2 from the full padded buffer, stage 3 gathered from every shard of the group (raw
 * MPI over group, so the ledger does not see it). zl is the trusted layout. */
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
