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

static int compare_unit(const struct zero_unit *e, const struct zero_unit *g, char *msg,
                        size_t len, const char *where)
{
#define FIELD(f, why)                                                                      \
    if (e->f != g->f) {                                                                    \
        snprintf(msg, len, "%s: " #f " is %zu, expected %zu: " why, where, (size_t)g->f,    \
                 (size_t)e->f);                                                            \
        return 0;                                                                          \
    }
    if (e->part != g->part) {
        snprintf(msg, len, "%s: part is %d, expected %d (unit u holds part u - 1: the "
                 "embedding is -1, the blocks 0..L-1, the head L)", where, g->part, e->part);
        return 0;
    }
    FIELD(offset, "the part's first element, from pl_model_part_range")
    FIELD(numel, "the part's elements, from pl_model_part_range")
    FIELD(chunk, "ceil(numel / n), so that n chunks cover the unit and only the last one "
                 "needs padding")
    FIELD(padded, "n x chunk, what every reduce-scatter and all-gather of the unit moves")
    FIELD(full_offset, "the sum of the padded sizes of the units before it")
    FIELD(shard_offset, "the sum of the chunks of the units before it")
#undef FIELD
    return 1;
}

/* 1 when got equals the trusted layout; otherwise a message saying where it differs. */
int l3_compare_layout(const struct zero_layout *e, const struct zero_layout *g, char *msg,
                          size_t len, const char *what)
{
    char where[160];
    if (g->n != e->n || g->rank != e->rank) {
        snprintf(msg, len, "%s: n=%d rank=%d stored, expected n=%d rank=%d", what, g->n,
                 g->rank, e->n, e->rank);
        return 0;
    }
    if (g->nunits != e->nunits) {
        snprintf(msg, len, "%s: nunits is %d, expected %d (n_layers + 2: the embedding, every "
                 "block, the head)", what, g->nunits, e->nunits);
        return 0;
    }
    for (int u = 0; u < e->nunits; u++) {
        snprintf(where, sizeof where, "%s, unit %d (%zu elements)", what, u, e->unit[u].numel);
        if (!compare_unit(&e->unit[u], &g->unit[u], msg, len, where)) return 0;
    }
    if (g->numel != e->numel || g->full_numel != e->full_numel ||
        g->shard_numel != e->shard_numel) {
        snprintf(msg, len, "%s: numel %zu, full_numel %zu, shard_numel %zu; expected %zu, %zu "
                 "(the sum of padded) and %zu (the sum of chunks)", what, g->numel,
                 g->full_numel, g->shard_numel, e->numel, e->full_numel, e->shard_numel);
        return 0;
    }
    return 1;
}

/* The layout test: zero_layout_init on model sizes drawn from the seed, on 1 to 9 ranks,
 * against l3_expected_layout. Stops at the first difference (kept in msg) or stub. */
int l3_run_layouts(uint64_t seed, char *msg, size_t len, int *tried)
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
                char what[200];
                snprintf(what, sizeof what, "Psi=%zu parameters (n_layers=%d, d_model=%d, "
                         "d_ff=%d, vocab=%d) on n=%d, rank %d", lay.numel, c.n_layers,
                         c.d_model, c.d_ff, c.vocab, n, rank);
                if (ok && !l3_compare_layout(&e, &g, msg, len, what)) ok = 0;
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
