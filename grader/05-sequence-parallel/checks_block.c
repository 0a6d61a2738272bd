/* checks_block.c: this rank's checks of an SP block case: its rows and gradients against
 * the single device's, the replicated gradients after the synchronisation, the traffic of
 * each pass, the bytes held, and the work outside the TP region. */
#include <math.h>
#include <mpi.h>
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

/* Whether every rank's n floats (op memory) equal those of the rank 0 of its TP group, bit
 * for bit (collective over the world; the groups may be smaller than it). 0 with the first
 * group rank and element that differ. */
static int group_replicas_equal(struct pl_comm *tp, const float *x, size_t n, int *bad_rank,
                                size_t *bad)
{
    const int nw = pl_size(), t = pl_comm_size(tp);
    float *mine = gr_host_copy(x, n), *all = malloc((size_t)nw * n * sizeof *all);
    PL_CHECK_MPI(MPI_Allgather(mine, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT,
                               MPI_COMM_WORLD));
    const float *root = all + (size_t)pl_comm_world_rank(tp, 0) * n;
    int equal = 1;
    for (int m = 1; m < t && equal; m++) {
        const float *o = all + (size_t)pl_comm_world_rank(tp, m) * n;
        for (size_t e = 0; e < n && equal; e++)
            if (memcmp(&o[e], &root[e], sizeof *o)) equal = 0, *bad_rank = m, *bad = e;
    }
    free(mine);
    free(all);
    return equal;
}

/* The replicated tensors after the synchronisation: bitwise equal on every rank of the TP
 * group (collective), then equal to the single device's. last: the expected gradient of
 * the second micro-batch alone (accumulating cases), or NULL. */

void l5_judge_replicas(struct pl_comm *tp, const struct sp_case *kc,
                           const struct pl_model_config *c, int t, const float *shard_g,
                           const float *want, const float *last)
{
    struct pl_tp_tensor d[PL_TP_BLOCK_TENSORS];
    pl_tp_block_tensors(c, 0, t, d);
    char grid[600];
    l5_grid_hint(kc, t, grid, sizeof grid);
    /* collective first, every tensor on every rank; then each rank's values */
    for (int i = 0; i < PL_TP_BLOCK_TENSORS; i++) {
        if (d[i].split != PL_TP_REPLICATED) continue;
        int bad_rank = -1;
        size_t bad = 0;
        if (!group_replicas_equal(tp, shard_g + d[i].shard_offset, d[i].shard_numel, &bad_rank,
                                  &bad) && gr_parts_ok())
            gr_fail("the gradient of %s (replicated on every rank) differs between the ranks "
                 "after sp_sync_replicated_grads: rank %d's element %zu is not rank 0's. Each "
                 "rank's layernorm and bias saw only its own T/t tokens, so its gradient is a "
                 "partial sum: all-reduce it over the TP group, or every rank steps its copy "
                 "differently and the replicas drift apart (section 6)", d[i].name, bad_rank,
                 bad);
    }
    for (int i = 0; i < PL_TP_BLOCK_TENSORS && gr_parts_ok(); i++) {
        if (d[i].split != PL_TP_REPLICATED) continue;
        const float *got = shard_g + d[i].shard_offset, *ref = want + d[i].shard_offset;
        double s = gr_scale_of(got, ref, d[i].shard_numel);
        char why[700] = "", what[PL_NAME_LEN + 128];
        if (last && l5_rel_l2(got, last + d[i].shard_offset, d[i].shard_numel) <= TOL_BWD)
            snprintf(why, sizeof why, "it is the second micro-batch's gradient alone: the "
                     "backward writes (=) it instead of adding (+=) to what the buffer held, "
                     "the first micro-batch's. sp.h: backward functions ACCUMULATE parameter "
                     "gradients; pl_sp_bias_backward and pl_layernorm_backward add, so never "
                     "zero or copy over g (section 5)");
        else if (grid[0])
            snprintf(why, sizeof why, "%s", grid);
        else if (t > 1 && fabs(s - t) < 1e-3 * t)
            snprintf(why, sizeof why, "it is %d (= t) times the single device's: summed over "
                     "the group twice, or reduced where every rank already held it whole", t);
        else if (t > 1 && fabs(s - 1.0 / t) < 1e-2 / t)
            /* equal on every rank (checked above), so reduced, but averaged */
            snprintf(why, sizeof why, "it is 1/t of the single device's and the same on "
                     "every rank: the partial sums were averaged (PL_AVG). Each rank's sum "
                     "covers its own T/t tokens, and the whole gradient is their sum: PL_SUM "
                     "(section 6)");
        snprintf(what, sizeof what, "gradient of %.64s (replicated) after the synchronisation%s",
                 d[i].name, last ? " of two micro-batches" : "");
        gr_compare(what, got, ref, d[i].shard_numel, TOL_BWD, why[0] ? why : NULL);
    }
}

/* Whether this rank's output rows are the single device's with the row-parallel biases
 * (b_proj, b_fc2) scaled by s: added on every rank before the reduce-scatter (s = t), or
 * never (s = 0). */
static int rows_with_biases_times(const struct block_case *k, float s)
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
    int same = l5_rel_l2(k->ly, mine, k->nl) <= TOL_FWD;
    pl_mem_free(mine);
    pl_mem_free(y);
    pl_mem_free(full);
    return same;
}

/* Output and input gradient rows against the single device's; 1 when the output matched. */
int l5_judge_block_rows(const struct block_case *k, const struct sp_case *kc)
{
    const int B = k->B, T = k->T, C = k->C, t = k->t, r = k->r;
    char what[PL_NAME_LEN + 128], hint[800] = "";
    if (kc->dp > 1)
        l5_grid_hint(kc, t, hint, sizeof hint);
    else if (kc->dropout && !kc->train)
        snprintf(hint, sizeof hint, "this case evaluates (ctx->train = 0) with dropout "
                 "configured (p=%.1f): dropout is off outside training, the branch passes "
                 "unchanged and its gradient is dy (sp.h: off when ctx->train is 0 or "
                 "c->dropout is 0)", (double)kc->p);
    else if (kc->dropout)
        snprintf(hint, sizeof hint, "dropout is on in this case (p=%.2g, block %d, sequences "
                 "from %d, step %d, T=%d where the model's seq_len is %d) and the case without "
                 "dropout matched: each rank must draw the single device's mask of the same "
                 "global tokens, row (seq0 + b) T + r T/t + i of the full [B*T, C], with T the "
                 "sequence length the block is given and the configuration's p (section 4)",
                 (double)kc->p, kc->layer, kc->seq0, kc->step, T, k->c.seq_len);
    float *want = gr_op_alloc(k->nl, "expected rows");
    pl_sp_slice(want, k->y, B, T, C, t, r);
    if (!kc->dropout && t > 1 && l5_rel_l2(k->ly, want, k->nl) > TOL_FWD) {
        if (rows_with_biases_times(k, (float)t))
            snprintf(hint, sizeof hint, "your rows are the single device's with b_proj and "
                     "b_fc2 added t = %d times: every rank added the row-parallel bias to its "
                     "partial sum before the reduce-scatter, which sums the copies. Add it "
                     "after the reduce-scatter, once per token, on your own rows (section 5)",
                     t);
        else if (rows_with_biases_times(k, 0.0f))
            snprintf(hint, sizeof hint, "your rows are the single device's without b_proj "
                     "and b_fc2: add the row-parallel biases after the reduce-scatter, once "
                     "per token, on your own rows (section 5)");
    }
    snprintf(what, sizeof what, "output y, your T/t tokens (B=%d, T=%d, t=%d)", B, T, t);
    int fwd_ok = gr_compare(what, k->ly, want, k->nl, TOL_FWD, hint[0] ? hint : NULL);
    pl_sp_slice(want, k->dx, B, T, C, t, r);
    snprintf(what, sizeof what, "input gradient dx, your T/t tokens (B=%d, T=%d, t=%d)", B, T, t);
    float *added = gr_op_alloc(k->nl, "expected rows added to x");
    pl_copy(added, k->lx, k->nl);
    pl_accumulate(added, want, k->nl);
    if (fwd_ok && l5_rel_l2(k->ldx, added, k->nl) <= TOL_BWD)
        snprintf(hint, sizeof hint, "your rows are the right dx added to what the buffer held "
                 "(the grader hands it over holding this rank's x rows): sp_block_backward "
                 "writes (=) dx, as sp.h says; pl_layernorm_backward accumulates, so start dx "
                 "from dy with a copy (section 5)");
    pl_mem_free(added);
    if (fwd_ok)
        gr_compare(what, k->ldx, want, k->nl, TOL_BWD, hint[0] ? hint : "every rank's TP branch "
                "saw every token, so its layernorm-output gradient is a part of the whole: the "
                "gather's backward sums the parts and keeps this rank's tokens (section 3)");
    pl_mem_free(want);
    return fwd_ok;
}

/* sp_dropout_forward and sp_dropout_backward called on their own, on this rank's rows of
 * another block and site than the block's: the forward must be the single device's mask of
 * the same tokens, and the backward must write (=) dbranch as sp.h says, so its buffer is
 * handed over holding other values first. (The student's own block may hand it a fresh,
 * zeroed buffer, where adding and writing look the same.) */
void l5_judge_dropout_alone(struct pl_comm *tp, const struct block_case *k)
{
    const int B = k->B, T = k->T, C = k->C, t = k->t, r = k->r, layer = 1, site = 1;
    char what[160], hint[400];
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
    int ok = gr_compare(what, mine, want, k->nl, TOL_FWD, !on && k->c.dropout > 0.0f
                        ? "in evaluation (ctx->train = 0) dropout is off although the "
                          "configuration has p > 0: the branch passes unchanged (sp.h)"
                        : "each rank draws the single device's mask of the same global tokens, "
                          "for the block and site it is given (section 4)");
    /* the backward, into a buffer that holds this rank's x rows */
    pl_zero(full, k->nc);
    pl_dropout_backward(full, k->dy, k->nc, p, k->ctx.seed, stream, at);
    pl_sp_slice(want, full, B, T, C, t, r);
    float *dbranch = l5_local_rows(k->x, B, T, C, t, r);
    if (ok) sp_dropout_backward(tp, &k->c, layer, site, &k->ctx, dbranch, k->ldy, B, T);
    float *added = l5_local_rows(k->x, B, T, C, t, r);
    pl_accumulate(added, want, k->nl);
    snprintf(hint, sizeof hint, "%s", l5_rel_l2(dbranch, added, k->nl) <= TOL_BWD
             ? "your values are the right ones added to what the buffer held: the backward "
               "writes (=) dbranch; pl_dropout_backward_block accumulates, so zero dbranch "
               "first (section 4)"
             : "the backward writes (=) dbranch: dy through the forward's mask, scaled by "
               "1/(1-p), or dy itself when dropout is off (section 4)");
    snprintf(what, sizeof what, "sp_dropout_backward alone, dbranch handed over not zero "
             "(block %d, site %d, B=%d, T=%d, t=%d)", layer, site, B, T, t);
    if (ok) gr_compare(what, dbranch, want, k->nl, TOL_BWD, hint);
    pl_mem_free(added);
    pl_mem_free(dbranch);
    pl_mem_free(mine);
    pl_mem_free(want);
    pl_mem_free(full);
}

/* Every split tensor's gradient (before the synchronisation, which must not touch it);
 * wg receives the expected shard gradients, wl (accumulating cases) the second
 * micro-batch's alone. */
void l5_judge_split_grads(const struct block_case *k, int fwd_ok, float *wg, float *wl)
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
    for (int i = 0; i < PL_TP_BLOCK_TENSORS && fwd_ok && gr_parts_ok(); i++) {
        if (d[i].split == PL_TP_REPLICATED) continue;
        const size_t o = d[i].shard_offset, n = d[i].shard_numel;
        const char *hint = NULL;
        if (w0 && (l5_rel_l2(k->shard_g + o, w0 + o, n) <= TOL_BWD ||
                   l5_rel_l2(k->shard_g + o, wl + o, n) <= TOL_BWD))
            hint = "the gradient buffers were handed over holding an earlier micro-batch's "
                   "gradients and your values lost them: sp_block_backward ACCUMULATES (+=) "
                   "parameter gradients (sp.h), as pl_block_backward does, so that micro-batches "
                   "add up before one synchronisation; the kit's core adds into g, so never zero "
                   "or overwrite it (section 5)";
        snprintf(what, sizeof what, "gradient of your shard of %.64s (%s)%s", d[i].name,
                 split_name(d[i].split), w0 ? ", two micro-batches added to what it held" : "");
        gr_compare(what, k->shard_g + o, wg + o, n, TOL_BWD, hint);
    }
    if (w0) pl_mem_free(w0);
}

void l5_judge_block_traffic(const struct block_run *run, int t, double NC, int C)
{
    /* at most the six replicated vectors all-reduced: 2(t-1)/t of 6C floats (an all-reduce
     * done as its two halves, a reduce-scatter and an all-gather, may pad 6C to t equal
     * shares). Less is right too: a backward that sums the bias gradients from the gathered
     * gradient, the same on every rank, leaves only the layernorms' to reduce. */
    const double sync = 2.0 * (t - 1) / t * 6 * C * 4.0;
    const double sync_padded = 2.0 * (t - 1) * ceil(6.0 * C / t) * 4.0;
    char a[32], b[32];
    const double one = l5_coll_bytes(NC, t);
    /* Lab 4: two all-reduces of [N, C] per pass, 2(t-1)/t of each */
    const double lab4_pass = 2 * 2.0 * (t - 1) / t * NC * 4.0;
    const struct pass_traffic *f = &run->fwd, *k = &run->bwd, *s = &run->sync;
    if (f->ar || k->ar)
        gr_fail("the %s made %ld all-reduce%s (%s): sequence parallelism replaces each of Lab 4's "
             "all-reduces by a reduce-scatter and an all-gather, so that between them the "
             "activation lives split along the sequence (section 3)",
             f->ar ? "forward" : "backward", f->ar ? f->ar : k->ar,
             (f->ar ? f->ar : k->ar) == 1 ? "" : "s",
             pl_format_bytes(f->ar ? f->ar_bytes : k->ar_bytes, a, sizeof a));
    else if (f->ag != 2 || f->rs != 2 || f->other)
        gr_fail("the forward made %ld all-gathers, %ld reduce-scatters and %ld other operations "
             "where a block needs 2 and 2: one gather entering and one scatter leaving each of "
             "the two TP regions (section 5)", f->ag, f->rs, f->other);
    else if (fabs(f->ag_bytes + f->rs_bytes - lab4_pass) > 0.5)
        gr_fail("the forward sent %s per rank where 2 all-gathers and 2 reduce-scatters of the "
             "[B*T, C] activation send %s, Lab 4's two all-reduces' worth: gather and scatter "
             "exactly the layernorm output and the branch",
             pl_format_bytes(f->ag_bytes + f->rs_bytes, a, sizeof a),
             pl_format_bytes(lab4_pass, b, sizeof b));
    else if (k->rs != 2 || k->ag < 2 || k->ag > 4 || k->other)
        gr_fail("the backward made %ld all-gathers, %ld reduce-scatters and %ld other operations "
             "where a block needs 2 reduce-scatters (the gathers' backward) and 2 all-gathers "
             "(the scatters' backward), plus at most 2 all-gathers of the stored layernorm "
             "shards (section 5)", k->ag, k->rs, k->other);
    else if (fabs(k->ag_bytes + k->rs_bytes - one * (double)(k->ag + k->rs)) > 0.5)
        gr_fail("the backward sent %s per rank where its %ld collectives of the [B*T, C] "
             "activation send %s", pl_format_bytes(k->ag_bytes + k->rs_bytes, a, sizeof a),
             k->ag + k->rs, pl_format_bytes(one * (double)(k->ag + k->rs), b, sizeof b));
    else if (s->ag != s->rs || s->other)
        gr_fail("sp_sync_replicated_grads made %ld all-gather%s, %ld reduce-scatter%s and %ld "
             "other operation%s (%s per rank): each rank's replicated gradients are partial "
             "sums over its own tokens, and one all-reduce (PL_SUM) of the six vectors of C "
             "floats adds them (or its two halves, a reduce-scatter and an all-gather of the "
             "sums), %s per rank; all-gathering every rank's copy to add them locally sends "
             "(t-1) x 6C floats, t/2 times that (section 6)", s->ag,
             s->ag == 1 ? "" : "s", s->rs, s->rs == 1 ? "" : "s", s->other,
             s->other == 1 ? "" : "s",
             pl_format_bytes(s->ar_bytes + s->ag_bytes + s->rs_bytes + s->other_bytes, a,
                            sizeof a), pl_format_bytes(sync, b, sizeof b));
    else if (s->ar_bytes + s->ag_bytes + s->rs_bytes > (s->ar ? sync : sync_padded) + 0.5)
        gr_fail("sp_sync_replicated_grads sent %s per rank in %ld all-reduce%s and %ld other "
             "operation%s where all-reducing the six replicated vectors of C floats sends %s, "
             "which is enough: reduce only the partial sums, each once (section 6)",
             pl_format_bytes(s->ar_bytes + s->ag_bytes + s->rs_bytes + s->other_bytes, a,
                            sizeof a), s->ar, s->ar == 1 ? "" : "s", s->ag + s->rs + s->other,
             s->ag + s->rs + s->other == 1 ? "" : "s",
             pl_format_bytes(sync, b, sizeof b));
}

void l5_judge_block_memory(const struct block_run *run, const struct pl_model_config *c,
                               int t, int B, int T)
{
    const double want = pl_sp_block_act_bytes(c, t, B, T);
    const double lab4 = pl_tp_block_act_bytes(c, t, B, T), NC = (double)B * T * c->d_model;
    char a[32], b[32], e[32], l4[32];
    if (run->unseen.where)
        gr_fail("%s was an array in static storage: it outlives the forward where the memory "
             "ledger never sees it, so what the block holds between its forward and backward "
             "cannot be measured (a whole sequence's layernorm output kept there would be "
             "Lab 4's replicated activation again). Take every buffer from pl_mem_alloc "
             "(scratch as PL_MEM_WORK), free it before you return, and re-gather the stored "
             "layernorm shard in the backward (section 5)", run->unseen.what);
    else if (run->kept[0])
        gr_fail("after your forward returned, static storage held %s (the grader searched it "
             "for every other rank's rows): a copy of the whole sequence kept outside the "
             "memory ledger, Lab 4's replicated activation again where no test can see it. "
             "Keep only this rank's shards in the acts, free the gathered buffers before you "
             "return, and re-gather the stored layernorm shard in the backward (section 5)",
             run->kept);
    else if (run->held > want + 0.5)
        gr_fail("your block held %s between its forward and its backward where TP+SP keeps %s "
             "(4/t (8NC + 2NF + 4N + B NH T^2), sp_shard.h); the extra %s is %.2f full "
             "[B*T, C] activations: something of the whole sequence was kept. Lab 4's TP block "
             "keeps %s, its replicated part (inputs, layernorm outputs and statistics of every "
             "token) is what the layernorm on your T/t tokens removes: gather after the "
             "layernorm, just before the TP region, and keep only the local shards "
             "(section 5)", pl_format_bytes(run->held, a, sizeof a),
             pl_format_bytes(want, b, sizeof b), pl_format_bytes(run->held - want, e, sizeof e),
             (run->held - want) / (NC * 4.0), pl_format_bytes(lab4, l4, sizeof l4));
    else if (run->left > 0.5 || run->left < -0.5)
        gr_fail("%s %s once the backward returned and the acts were freed: %s. Every "
             "buffer a pass takes from pl_mem_alloc is freed before it returns; the acts "
             "belong to the caller (section 5)", run->left > 0 ? "your block still held"
             : "your block freed", pl_format_bytes(fabs(run->left), a, sizeof a),
             run->left > 0 ? "scratch never freed, which grows step after step"
                           : "memory it did not allocate");
}

/* The work outside the kit's core, summed over the TP group, against the single device's
 * (its forward and backward less one pass of the core, which the group's cores split
 * evenly; a core run twice is the modelled timeline's to judge): the
 * layernorms, residuals, dropouts and biases run once per token in all, on the rank that
 * owns it. Two-sided: at least WORK_LO of the single device's (less is work skipped), at
 * most WORK_HI of it plus WORK_GATHERED FLOPs per element of the [B*T, C] activation for
 * each rank beyond the first: room for a few sums over the gathered sequence (the bias
 * gradients summed from the gathered gradient, 4 a rank), not for a layernorm forward on it
 * (8 each) by every rank, which is t times the work sequence parallelism exists to split.
 * Collective over the world. */
#define WORK_LO 0.75
#define WORK_HI 1.15
#define WORK_GATHERED 6.0

void l5_judge_block_work(struct pl_comm *tp, const struct block_run *run, int t)
{
    const int nw = pl_size();
    double mine[2] = {run->flops - run->core_flops, run->core_once};
    double *all = malloc((size_t)nw * 2 * sizeof *all), group = 0, core = 0;
    PL_CHECK_MPI(MPI_Allgather(mine, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, MPI_COMM_WORLD));
    for (int m = 0; m < t; m++) {
        group += all[2 * pl_comm_world_rank(tp, m)];
        core += all[2 * pl_comm_world_rank(tp, m) + 1];
    }
    free(all);
    const double single = run->oracle_flops - core;
    const double hi = WORK_HI * single + WORK_GATHERED * (t - 1) * run->activation_floats;
    if (single <= 0 || group < WORK_LO * single || group > hi)
        gr_fail("outside the TP region (the kit's core) your block's %d ranks did %.4g FLOPs "
             "in all, %.2fx the single device's %.4g for the same tokens (the FLOPs ledger; "
             "allowed %.2fx to %.2fx here, the most being %.2fx plus %.0f FLOPs per element of "
             "the [B*T, C] activation for each rank beyond the first): %s (section 5)", t, group,
             group / single, single, WORK_LO, hi / single, WORK_HI, WORK_GATHERED,
             group > single ? "work done more than once. The layernorms, dropouts, residual "
                              "adds and row-parallel biases act on each token alone, so each "
                              "rank runs them on its own T/t tokens only; a layernorm on the "
                              "gathered sequence by every rank does t times the work sequence "
                              "parallelism exists to split: gather after the layernorm"
                            : "work missing: every token's layernorms, dropouts, residual "
                              "adds and biases run once, on the rank that owns it");
}
