/* checks_block.c: this rank's checks of an SP block case, recorded in its observation
 * (lab05.h): its rows and gradients against the single device's, with the likeliest mistake
 * named by a class, and the replicated gradients after the synchronisation (their equality
 * over the TP group is judge.c's, from every rank's). The traffic of each pass, the bytes
 * held and the work outside the TP region are figures judge.c sets against their rules. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab05.h"


static const char *split_name(enum pl_tp_split s)
{
    return s == PL_TP_REPLICATED ? "replicated"
           : s == PL_TP_ROWS     ? "a row block"
                                 : "a column block";
}

/* The replicated tensors after the synchronisation: this rank's values recorded for the
 * judge, which sets them against its TP group's rank 0 bit for bit, then each against the
 * single device's. last: the expected gradient of the second micro-batch alone
 * (accumulating cases), or NULL. */
void l5_check_replicas(struct l5_state *st, const struct l5_case *kc,
                       const struct pl_model_config *c, int t, const float *shard_g,
                       const float *want, const float *last)
{
    struct pl_tp_tensor d[PL_TP_BLOCK_TENSORS];
    pl_tp_block_tensors(c, 0, t, d);
    struct l5_block_figs *bf = &st->ob->block;
    bf->has_rep = 1;
    for (int i = 0; i < PL_TP_BLOCK_TENSORS; i++) {
        if (d[i].split != PL_TP_REPLICATED) continue;
        if (bf->nrep == L5_REP || d[i].shard_numel != L5_C)
            pl_fatal("lab05: the block's replicated vectors are not %d of %d floats", L5_REP,
                     L5_C);
        snprintf(bf->rep_name[bf->nrep], sizeof bf->rep_name[bf->nrep], "%.47s", d[i].name);
        pl_to_host(bf->rep[bf->nrep++], shard_g + d[i].shard_offset, L5_C * sizeof(float));
    }
    const struct l5_hint grid = l5_grid_hint(kc, t);
    for (int i = 0; i < PL_TP_BLOCK_TENSORS && l5_ok(st); i++) {
        if (d[i].split != PL_TP_REPLICATED) continue;
        const float *got = shard_g + d[i].shard_offset, *ref = want + d[i].shard_offset;
        double s = gr_scale_of(got, ref, d[i].shard_numel);
        char what[PL_NAME_LEN + 128];
        struct l5_hint h = l5_hint_of(L5_H_NONE);
        if (last && l5_rel_l2(got, last + d[i].shard_offset, d[i].shard_numel) <= L5_TOL_BWD)
            h.kind = L5_H_SECOND_ONLY;
        else if (grid.kind)
            h = grid;
        else if (t > 1 && fabs(s - t) < 1e-3 * t)
            h = (struct l5_hint){.kind = L5_H_SUMMED, .h = {t}};
        else if (t > 1 && fabs(s - 1.0 / t) < 1e-2 / t)
            /* equal on every rank (the judge's first check), so reduced, but averaged */
            h.kind = L5_H_AVERAGED;
        snprintf(what, sizeof what, "gradient of %.64s (replicated) after the synchronisation%s",
                 d[i].name, last ? " of two micro-batches" : "");
        l5_compare(st, what, got, ref, d[i].shard_numel, L5_TOL_BWD, h);
    }
}

/* Whether this rank's output rows are the single device's with the row-parallel biases
 * (b_proj, b_fc2) scaled by s: added on every rank before the reduce-scatter (s = t), or
 * never (s = 0). */
static int rows_with_biases_times(const struct l5_block *k, float s)
{
    float *full = gr_op_alloc(k->full_numel, "lab05 biases scaled");
    pl_copy(full, k->full, k->full_numel);
    struct pl_block_params q;
    pl_block_bind(&k->c, full, &q);
    pl_scale(q.b_proj, (size_t)k->C, s);
    pl_scale(q.b_fc2, (size_t)k->C, s);
    float *y = gr_op_alloc(k->nc, "lab05 y biases scaled"), *mine = gr_op_alloc(k->nl, "");
    struct pl_block_acts ra;
    pl_block_acts_new(&ra, &k->c, k->B, k->T);
    pl_block_forward(&k->c, k->layer, &q, &ra, &k->ctx, k->x, y);
    pl_block_acts_free(&ra);
    pl_sp_slice(mine, y, k->B, k->T, k->C, k->t, k->r);
    int same = l5_rel_l2(k->ly, mine, k->nl) <= L5_TOL_FWD;
    pl_mem_free(mine);
    pl_mem_free(y);
    pl_mem_free(full);
    return same;
}

/* Output and input gradient rows against the single device's; 1 when the output matched. */
int l5_check_block_rows(struct l5_state *st, const struct l5_block *k, const struct l5_case *kc)
{
    const int B = k->B, T = k->T, C = k->C, t = k->t, r = k->r;
    char what[PL_NAME_LEN + 128];
    struct l5_hint hint = l5_hint_of(L5_H_NONE);
    if (kc->dp > 1)
        hint = l5_grid_hint(kc, t);
    else if (kc->dropout && !kc->train)
        hint = (struct l5_hint){.kind = L5_H_EVAL_DROPOUT, .h = {kc->p}};
    else if (kc->dropout)
        hint = (struct l5_hint){.kind = L5_H_DROPOUT_ROWS,
                                .h = {kc->p, kc->layer, kc->seq0, kc->step, T, k->c.seq_len}};
    float *want = gr_op_alloc(k->nl, "expected rows");
    pl_sp_slice(want, k->y, B, T, C, t, r);
    if (!kc->dropout && t > 1 && l5_rel_l2(k->ly, want, k->nl) > L5_TOL_FWD) {
        if (rows_with_biases_times(k, (float)t))
            hint = (struct l5_hint){.kind = L5_H_BIAS_T, .h = {t}};
        else if (rows_with_biases_times(k, 0.0f))
            hint = l5_hint_of(L5_H_BIAS_NONE);
    }
    snprintf(what, sizeof what, "output y, your T/t tokens (B=%d, T=%d, t=%d)", B, T, t);
    int fwd_ok = l5_compare(st, what, k->ly, want, k->nl, L5_TOL_FWD, hint);
    pl_sp_slice(want, k->dx, B, T, C, t, r);
    snprintf(what, sizeof what, "input gradient dx, your T/t tokens (B=%d, T=%d, t=%d)", B, T, t);
    float *added = gr_op_alloc(k->nl, "expected rows added to x");
    pl_copy(added, k->lx, k->nl);
    pl_accumulate(added, want, k->nl);
    if (fwd_ok && l5_rel_l2(k->ldx, added, k->nl) <= L5_TOL_BWD) hint = l5_hint_of(L5_H_DX_ADDED);
    pl_mem_free(added);
    if (fwd_ok)
        l5_compare(st, what, k->ldx, want, k->nl, L5_TOL_BWD,
                   hint.kind ? hint : l5_hint_of(L5_H_DX_PARTS));
    pl_mem_free(want);
    return fwd_ok;
}

/* sp_dropout_forward and sp_dropout_backward called on their own, on this rank's rows of
 * another block and site than the block's: the forward must be the single device's mask of
 * the same tokens, and the backward must write (=) dbranch as sp.h says, so its buffer is
 * handed over holding other values first. (The student's own block may hand it a fresh,
 * zeroed buffer, where adding and writing look the same.) */
void l5_check_dropout_alone(struct l5_state *st, struct pl_comm *tp, const struct l5_block *k)
{
    const int B = k->B, T = k->T, C = k->C, t = k->t, r = k->r, layer = 1, site = 1;
    char what[160];
    float *full = gr_op_alloc(k->nc, "lab05 dropout full"), *want = gr_op_alloc(k->nl, "");
    float *mine = l5_local_rows(k->x, B, T, C, t, r);
    /* the single device's dropout of the whole branch: global index from seq0's first row */
    const int on = k->ctx.train && k->c.dropout > 0.0f;
    const float p = on ? k->c.dropout : 0.0f;
    const uint64_t stream = pl_model_dropout_stream(layer, site, k->ctx.step);
    const uint64_t at = (uint64_t)k->ctx.seq0 * (uint64_t)T * (uint64_t)C;
    pl_dropout_forward(full, k->x, k->nc, p, k->ctx.seed, stream, at);
    pl_sp_slice(want, full, B, T, C, t, r);
    sp_dropout_forward(tp, &k->c, layer, site, &k->ctx, mine, B, T);
    snprintf(what, sizeof what, "sp_dropout_forward alone (block %d, site %d, sequences from "
             "%lld, B=%d, T=%d, t=%d), your T/t tokens", layer, site, (long long)k->ctx.seq0,
             B, T, t);
    int ok = l5_compare(st, what, mine, want, k->nl, L5_TOL_FWD,
                        l5_hint_of(!on && k->c.dropout > 0.0f ? L5_H_ALONE_EVAL
                                                               : L5_H_ALONE_MASK));
    /* the backward, into a buffer that holds this rank's x rows */
    pl_zero(full, k->nc);
    pl_dropout_backward(full, k->dy, k->nc, p, k->ctx.seed, stream, at);
    pl_sp_slice(want, full, B, T, C, t, r);
    float *dbranch = l5_local_rows(k->x, B, T, C, t, r);
    if (ok) sp_dropout_backward(tp, &k->c, layer, site, &k->ctx, dbranch, k->ldy, B, T);
    float *added = l5_local_rows(k->x, B, T, C, t, r);
    pl_accumulate(added, want, k->nl);
    const struct l5_hint hint = l5_hint_of(l5_rel_l2(dbranch, added, k->nl) <= L5_TOL_BWD
                                               ? L5_H_DBRANCH_ADDED : L5_H_DBRANCH_WRITE);
    snprintf(what, sizeof what, "sp_dropout_backward alone, dbranch handed over not zero "
             "(block %d, site %d, B=%d, T=%d, t=%d)", layer, site, B, T, t);
    if (ok) l5_compare(st, what, dbranch, want, k->nl, L5_TOL_BWD, hint);
    pl_mem_free(added);
    pl_mem_free(dbranch);
    pl_mem_free(mine);
    pl_mem_free(want);
    pl_mem_free(full);
}

/* Every split tensor's gradient (before the synchronisation, which must not touch it);
 * wg receives the expected shard gradients, wl (accumulating cases) the second
 * micro-batch's alone. */
void l5_check_split_grads(struct l5_state *st, const struct l5_block *k, int fwd_ok, float *wg,
                          float *wl)
{
    char what[PL_NAME_LEN + 128];
    pl_tp_block_slice(&k->c, k->t, k->r, k->full_g, wg);
    float *w0 = NULL;
    if (k->g0) {
        pl_tp_block_slice(&k->c, k->t, k->r, k->g_last, wl);
        w0 = gr_op_alloc(k->shard_numel, "expected shard grads without what they held");
        pl_tp_block_slice(&k->c, k->t, k->r, k->g0, w0);
        pl_scale(w0, k->shard_numel, -1.0f);
        pl_accumulate(w0, wg, k->shard_numel);
    }
    struct pl_tp_tensor d[PL_TP_BLOCK_TENSORS];
    pl_tp_block_tensors(&k->c, 0, k->t, d);
    for (int i = 0; i < PL_TP_BLOCK_TENSORS && fwd_ok && l5_ok(st); i++) {
        if (d[i].split == PL_TP_REPLICATED) continue;
        const size_t o = d[i].shard_offset, n = d[i].shard_numel;
        struct l5_hint hint = l5_hint_of(L5_H_NONE);
        if (w0 && (l5_rel_l2(k->shard_g + o, w0 + o, n) <= L5_TOL_BWD ||
                   l5_rel_l2(k->shard_g + o, wl + o, n) <= L5_TOL_BWD))
            hint.kind = L5_H_ACCUM_LOST;
        snprintf(what, sizeof what, "gradient of your shard of %.64s (%s)%s", d[i].name,
                 split_name(d[i].split), w0 ? ", two micro-batches added to what it held" : "");
        l5_compare(st, what, k->shard_g + o, wg + o, n, L5_TOL_BWD, hint);
    }
    if (w0) pl_mem_free(w0);
}
