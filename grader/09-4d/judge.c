/* judge.c: Lab 9's verdicts, on rank 0 alone from every rank's observation (lab09.h); no
 * MPI, nothing read but the arguments:
 *   correct   every step's loss and every rank's parameters after K steps against the
 *             single-device reference (the slice of it the rank holds);
 *   clip      every step's global norm and the last step's clipped gradient against the
 *             reference's: the norm counts every parameter once;
 *   grid      each rank's coordinates and groups against lib/grid.h's layout of the order;
 *   traffic   the SP conjugates' bytes never cross a node; each rank's point-to-point bytes
 *             against the pipeline's formula;
 *   recompute the (2,2,2) run again with selective and full recomputation: the same
 *             training bit for bit, and each rank's activation peak lowered by what the
 *             choice leaves unsaved in the blocks in flight (sp_block.h's formulas);
 *   bubble    bubble.c; zero (ZeRO-1 across the DP group) zero.c; vocab (the
 *             vocabulary-parallel head on the last stage) vocab.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "grid.h"
#include "lab09.h"
#include "sp_block.h"
#include "tp_shard.h"

/* 4 blocks of width 32, 4 heads, 8 tokens: t = 1, 2, 4 divide the heads, the MLP and the
 * sequence; no dropout (the reference's masks are the whole batch's). */
struct pl_model_config l9_config(uint64_t seed)
{
    struct pl_model_config c = pl_model_config_default();
    c.vocab = PL_BYTE_VOCAB;
    c.d_model = 32;
    c.n_layers = 4;
    c.n_heads = 4;
    c.d_ff = 64;
    c.seq_len = 8;
    c.dropout = 0.0f;
    c.n_experts = 0;
    c.seed = seed;
    return c;
}

int l9_in_flight(int p, int s, int m)
{
    return p - s < m ? p - s : m;
}

double l9_p2p_bytes(const struct pl_model_config *c, const struct l9_case *k, int stage, int B)
{
    int neighbours = (stage > 0) + (stage < k->pp - 1);
    double floats = (double)(B / (k->dp * L9_MICRO)) * c->seq_len / k->tp * c->d_model;
    return neighbours * (double)L9_MICRO * floats * sizeof(float);
}

double l9_dp_floats(const struct pl_model_config *c, const struct pl_model_layout *lay,
                    const struct l9_case *k, int stage, double *blocks, double *embed,
                    double *head)
{
    int b0, b1;
    size_t off, n;
    fourd_stage_blocks(c->n_layers, k->pp, stage, &b0, &b1);
    *blocks = (double)(b1 - b0) * (double)pl_tp_block_numel(c, k->tp);
    pl_model_part_range(lay, -1, &off, &n);
    *embed = stage == 0 ? (double)n : 0;
    pl_model_part_range(lay, c->n_layers, &off, &n);
    *head = stage == k->pp - 1 ? (double)n : 0;
    return *blocks + *embed + *head;
}

static const struct l9_obs *rank_obs(const struct gr_obs *all, int r)
{
    return gr_obs_rank(all, r);
}

/* "8, 10, ?, 14": the first batch rows of n calls ("?": rows that are no run of the batch). */
static const char *feed_rows(const struct l9_feed *f, int n, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (int j = 0; j < n && j < L9_MICRO && at < len; j++) {
        int w = f[j].seq >= 0 ? snprintf(buf + at, len - at, "%s%d", j ? ", " : "", f[j].seq)
                              : snprintf(buf + at, len - at, "%s?", j ? ", " : "");
        if (w < 0) break;
        at += (size_t)w;
    }
    return buf;
}

/* fourd.h's data invariant, read from the embedding's tokens (stage 0) and the head's
 * targets (the last stage): DP replica d's microbatch j is the step's sequences from
 * d B/dp + j B/(dp micro), B/(dp micro) of them. A stage that runs its end without
 * pl_parts_forward is not observed. */
static int judge_feed(const struct l9_state *st, int i, const struct gr_obs *all,
                      struct gr_why *why)
{
    const struct l9_case *k = &st->cases[i];
    const int Bm = L9_MB_SEQS, per = L9_MICRO * L9_MB_SEQS;
    char got[96], want[96];
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = rank_obs(all, r);
        const int d = o->coord[0], stage = o->coord[2];
        for (int e = 0; e < 2; e++) {
            if (e == 0 ? stage != 0 : stage != k->pp - 1) continue;
            const char *part = e == 0 ? "embedding's tokens" : "head's targets";
            for (int s = 0; s < L9_K_STEPS; s++) {
                const int n = e == 0 ? o->emb_calls[s] : o->head_calls[s];
                const struct l9_feed *f = e == 0 ? o->emb[s] : o->head[s];
                if (n == 0) continue;
                int ok = n == L9_MICRO;
                struct l9_feed right[L9_MICRO];
                for (int j = 0; j < L9_MICRO; j++) {
                    right[j].seq = d * per + j * Bm, right[j].rows = Bm;
                    ok = ok && f[j].seq == right[j].seq && f[j].rows == Bm;
                }
                if (ok) continue;
                const int rows = f[0].rows;
                gr_why_say(why, "step %d: rank %d (dp %d, tp %d, stage %d) ran %d microbatches "
                           "through pl_parts_forward with the %s of %d sequences each, from "
                           "the batch's sequences %s in turn; DP replica d trains on sequences "
                           "[d B/dp, (d+1) B/dp) cut into micro microbatches of B/(dp micro) "
                           "in order (fourd.h's invariants): replica %d's %d microbatches start "
                           "at %s, with %d sequences each (B = %d, dp = %d, micro = %d)", s,
                           r, d, o->coord[1], stage, n, part, rows,
                           feed_rows(f, n, got, sizeof got), d, L9_MICRO,
                           feed_rows(right, L9_MICRO, want, sizeof want), Bm, k->dp * per,
                           k->dp, L9_MICRO);
                gr_why_say(why, "with no dropout the summed gradient and the mean loss may come "
                           "out the same for another split, but a data loader's place, a "
                           "checkpoint's resume point and dropout's masks (keyed by the global "
                           "sequence index, ctx.seq0) all depend on which replica and "
                           "microbatch trained which sequence");
                return 0;
            }
        }
    }
    return 1;
}

static int judge_correct(const struct l9_state *st, int i, const struct gr_obs *all,
                         struct gr_why *why)
{
    const struct gr_reference *ref = &st->free[i];
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = rank_obs(all, r);
        if (o->grid_ret != 0) {
            gr_why_say(why, "fourd_grid_new returned %d on rank %d for order %s, dp=%d tp=%d "
                       "pp=%d on %d ranks, a grid that exists: see section 1", o->grid_ret, r,
                       L9_ORDER, st->cases[i].dp, st->cases[i].tp, st->cases[i].pp,
                       all->nranks);
            return 0;
        }
        if (o->model_null) {
            gr_why_say(why, "fourd_model_new returned NULL on rank %d", r);
            return 0;
        }
    }
    /* the split is given (fourd_stage_blocks): a cut of one's own trains the same numbers but
     * is not the stages the plan, the memory bounds and the other grids assume */
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = rank_obs(all, r);
        int b0, b1;
        fourd_stage_blocks(st->train[i].cfg.n_layers, st->cases[i].pp, o->coord[2], &b0, &b1);
        if (o->stage_b0 != b0 || o->stage_b1 != b1) {
            gr_why_say(why, "rank %d, stage %d of %d: the model holds blocks [%d, %d), where "
                       "fourd_stage_blocks gives that stage [%d, %d) of the %d: the stages' "
                       "blocks are fourd.h's given split, which the plan and every bound of "
                       "this lab assume (m->b0 and m->b1 from fourd_stage_blocks)", r,
                       o->coord[2], st->cases[i].pp, o->stage_b0, o->stage_b1, b0, b1,
                       st->train[i].cfg.n_layers);
            return 0;
        }
    }
    if (!judge_feed(st, i, all, why)) return 0;
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = rank_obs(all, r);
        for (int s = 0; s < L9_K_STEPS; s++) {
            double err = gr_rel_err(o->loss[s], ref->loss[s]);
            if (!(err <= GR_TOL_LOSS)) {
                gr_why_say(why, "step %d: rank %d's fourd_step returned loss %.7g, one device "
                           "%.7g on the same batch (relative error %.2g, at most %g): the "
                           "return is the whole batch's mean, the same on every rank", s, r,
                           o->loss[s], ref->loss[s], err, GR_TOL_LOSS);
                return 0;
            }
        }
    }
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = rank_obs(all, r);
        if (!(o->params.rel <= GR_TOL_PARAMS)) {
            gr_why_say(why, "after %d steps (no clipping) rank %d (dp %d, tp %d, stage %d) holds %s with "
                       "relative L2 error %.3g against the single device's (at most %g)%s",
                       L9_K_STEPS, r, o->coord[0], o->coord[1], o->coord[2], o->params.name,
                       o->params.rel, GR_TOL_PARAMS,
                       o->params.nonfinite ? ", with NaN or Inf elements" : "");
            l9_vocab_hint(all, why);
            return 0;
        }
    }
    return 1;
}

/* The squares of step s's reference gradient on the tensors every TP rank holds whole: the
 * blocks' layernorms and replicated biases (*blocks) and the embedding and head (*ends). */
static void replicated_sq(const struct l9_state *st, int i, int s, double *blocks, double *ends)
{
    const struct gr_reference *ref = &st->ref[i];
    const struct pl_model_config *c = &st->train[i].cfg;
    const float *g = ref->grads + (size_t)s * ref->numel;
    *blocks = *ends = 0;
    for (int l = 0; l < c->n_layers; l++) {
        size_t off, n;
        pl_model_part_range(&ref->layout, l, &off, &n);
        struct pl_tp_tensor d[PL_TP_BLOCK_TENSORS];
        pl_tp_block_tensors(c, l, st->cases[i].tp, d);
        for (int k = 0; k < PL_TP_BLOCK_TENSORS; k++) {
            if (d[k].split != PL_TP_REPLICATED) continue;
            for (size_t j = 0; j < d[k].rows * d[k].cols; j++) {
                double x = g[off + d[k].full_offset + j];
                *blocks += x * x;
            }
        }
    }
    for (int t = 0; t < ref->layout.n_tensors; t++) {
        const struct pl_param_desc *d = &ref->layout.tensors[t];
        if (d->part != -1 && d->part != c->n_layers) continue;
        for (size_t j = 0; j < d->numel; j++) *ends += (double)g[d->offset + j] * g[d->offset + j];
    }
}

/* The first grid's clipped run again with L9_MICRO_ALT microbatches: the same norms and
 * gradient as one device's, whatever m is (a loss scale fitted to m = 4 is off by
 * L9_MICRO_ALT / L9_MICRO). */
static int judge_other_micro(const struct l9_state *st, int i, const struct gr_obs *all,
                             struct gr_why *why)
{
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = rank_obs(all, r);
        if (!o->has_micro) continue;
        for (int s = 0; s < L9_K_STEPS; s++) {
            double want = st->ref_norm[i][s], got = o->micro_norm[s];
            if (gr_rel_err(got, want) <= L9_TOL_NORM) continue;
            double ratio = got / want, fitted = (double)L9_MICRO_ALT / L9_MICRO;
            gr_why_say(why, "with m = %d microbatches of %d sequence%s (the other runs use m = "
                       "%d): step %d's global gradient norm on rank %d is %.6g, one device's "
                       "%.6g (ratio %.4f)", L9_MICRO_ALT, L9_MB_SEQS * L9_MICRO / L9_MICRO_ALT,
                       L9_MB_SEQS * L9_MICRO / L9_MICRO_ALT == 1 ? "" : "s", L9_MICRO, s, r,
                       got, want, ratio);
            if (fabs(ratio - fitted) < 1e-3 || fabs(ratio - 1 / fitted) < 1e-3)
                gr_why_say(why, "the loss scale is fitted to m = %d: each microbatch's loss is "
                           "a 1/(dp m) share of the batch's mean, with this step's m (the "
                           "micro argument of fourd_step)", L9_MICRO);
            return 0;
        }
        if (!(o->micro_grads.rel <= GR_TOL_GRADS)) {
            gr_why_say(why, "with m = %d microbatches: the last step's gradient on rank %d "
                       "(dp %d, tp %d, stage %d): %s has relative L2 error %.3g against one "
                       "device's clipped gradient (at most %g)", L9_MICRO_ALT, r, o->coord[0],
                       o->coord[1], o->coord[2], o->micro_grads.name, o->micro_grads.rel,
                       GR_TOL_GRADS);
            return 0;
        }
    }
    return 1;
}

static int judge_clip(const struct l9_state *st, int i, const struct gr_obs *all,
                      struct gr_why *why)
{
    const struct l9_case *k = &st->cases[i];
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = rank_obs(all, r);
        for (int s = 0; s < L9_K_STEPS; s++) {
            double want = st->ref_norm[i][s], got = o->norm[s];
            double err = gr_rel_err(got, want);
            if (err <= L9_TOL_NORM) continue;
            double ratio = got / want, rb, re;
            replicated_sq(st, i, s, &rb, &re);
            const double t = k->tp, w2 = want * want;
            double as_blocks = sqrt(w2 + (t - 1) * rb), as_all = sqrt(w2 + (t - 1) * (rb + re));
            gr_why_say(why, "step %d: rank %d's global gradient norm %.6g, one device's %.6g "
                       "(ratio %.4f; relative error at most %g)", s, r, got, want, ratio,
                       L9_TOL_NORM);
            if (k->dp > 1 && fabs(ratio - sqrt((double)k->dp)) < 1e-3)
                gr_why_say(why, "that is sqrt(dp) = sqrt(%d) too large: after the DP sum every "
                           "replica holds the same gradient, so summing the squares over the "
                           "DP group counts each parameter %d times", k->dp, k->dp);
            else if (k->tp > 1 && (gr_rel_err(got, as_blocks) < 1e-4 ||
                                   gr_rel_err(got, as_all) < 1e-4))
                gr_why_say(why, "that is one device's norm with the %s counted t = %d times, "
                           "once per TP rank: a tensor every TP rank holds whole is one "
                           "parameter, counted once (section 3)",
                           gr_rel_err(got, as_blocks) < 1e-4
                               ? "blocks' layernorms and replicated biases (b_proj, b_fc2)"
                               : "replicated tensors (layernorms, b_proj, b_fc2, embedding, head)",
                           k->tp);
            else if (ratio > 1)
                gr_why_say(why, "too large: something is counted more than once. A tensor every "
                           "TP rank holds whole (layernorms, b_proj, b_fc2, the embedding and "
                           "the head) counts once, not t = %d times; a split one is summed over "
                           "the TP group; the stages over the pipeline (section 3)", k->tp);
            else
                gr_why_say(why, "too small: some parameters' squares never reach the sum (every "
                           "stage's, every TP shard's)");
            return 0;
        }
    }
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = rank_obs(all, r);
        if (!(o->grads.rel <= GR_TOL_GRADS)) {
            gr_why_say(why, "the last step's gradient AdamW was given on rank %d (dp %d, tp %d, "
                       "stage %d): %s has relative L2 error %.3g against one device's clipped "
                       "gradient (at most %g)", r, o->coord[0], o->coord[1], o->coord[2],
                       o->grads.name, o->grads.rel, GR_TOL_GRADS);
            return 0;
        }
        if (!(o->clipped_params.rel <= GR_TOL_PARAMS)) {
            gr_why_say(why, "after %d clipped steps rank %d (dp %d, tp %d, stage %d) holds %s "
                       "with relative L2 error %.3g against the single device's (at most %g)",
                       L9_K_STEPS, r, o->coord[0], o->coord[1], o->coord[2],
                       o->clipped_params.name, o->clipped_params.rel, GR_TOL_PARAMS);
            return 0;
        }
    }
    return judge_other_micro(st, i, all, why);
}

static const char *AXES[3] = {"dp", "tp", "pp"};

const char *const L9_ORDERS[L9_NORDERS] = {L9_ORDER, "tp-dp-pp", "pp-tp-dp", "pp-dp-tp",
                                          "dp-tp-pp", "dp-pp-tp"};
const struct l9_bad L9_BAD[L9_NBAD] = {
    {"tp-cp-pp-dp", 1}, {"tp-pp", 1}, {"tp-tp-dp", 1}, {"tp-pp-dp-", 1}, {L9_ORDER, 2}};

/* Rank r's view of its grid under one order (the main order's from its own fields). */
static struct l9_grid_obs view_of(const struct l9_obs *o, int order)
{
    if (order > 0) return o->orders[order];
    struct l9_grid_obs v;
    memset(&v, 0, sizeof v);
    v.ret = o->grid_ret;
    memcpy(v.coord, o->coord, sizeof v.coord);
    memcpy(v.size, o->size, sizeof v.size);
    memcpy(v.members, o->members, sizeof v.members);
    return v;
}

/* Every rank's coordinates and groups under L9_ORDERS[order] against lib/grid.h's. */
static int check_order(const struct l9_case *k, int order, const struct gr_obs *all,
                       struct gr_why *why)
{
    const char *name = L9_ORDERS[order];
    struct pl_grid g;
    char degrees[64], err[256];
    snprintf(degrees, sizeof degrees, "tp=%d,pp=%d,dp=%d", k->tp, k->pp, k->dp);
    if (pl_grid_init(&g, name, degrees, all->nranks, err, sizeof err) != 0) {
        gr_why_say(why, "internal: the case's grid: %s", err);
        return 0;
    }
    const int per_node = all->nranks == 6 ? 2 : 4;
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_grid_obs o = view_of(rank_obs(all, r), order);
        if (o.ret != 0) {
            gr_why_say(why, "rank %d: fourd_grid_new(world, \"%s\", dp=%d, tp=%d, pp=%d) "
                       "returned %d: a permutation of tp, pp and dp whose degrees multiply to "
                       "the world's %d ranks describes it", r, name, k->dp, k->tp, k->pp,
                       o.ret, all->nranks);
            return 0;
        }
        for (int a = 0; a < 3; a++) {
            int axis = pl_grid_axis(&g, AXES[a]), want[L9_MAX_RANKS];
            int n = pl_grid_group(&g, r, axis, want);
            int same = o.size[a] == n && o.coord[a] == pl_grid_coord(&g, r, axis);
            for (int j = 0; same && j < n; j++) same = o.members[a][j] == want[j];
            if (same) continue;
            char got[96] = "", exp[96] = "";
            for (int j = 0; j < o.size[a] && j < L9_MAX_RANKS; j++)
                snprintf(got + strlen(got), sizeof got - strlen(got), "%s%d", j ? "," : "",
                         o.members[a][j]);
            for (int j = 0; j < n; j++)
                snprintf(exp + strlen(exp), sizeof exp - strlen(exp), "%s%d", j ? "," : "",
                         want[j]);
            gr_why_say(why, "rank %d: its %s group is ranks {%s} at coordinate %d; order %s "
                       "(leftmost varies fastest) makes it {%s} at coordinate %d", r, AXES[a],
                       got, o.coord[a], name, exp, pl_grid_coord(&g, r, axis));
            if (order == 0 && a == 1 && o.size[a] > 1 &&
                o.members[a][0] / per_node != o.members[a][o.size[a] - 1] / per_node)
                gr_why_say(why, "that TP group spans nodes of %d ranks: its all-gathers and "
                           "reduce-scatters, one pair per block half and microbatch, would "
                           "cross the network; tp innermost keeps them inside a node",
                           per_node);
            if (order > 0)
                gr_why_say(why, "the order string decides the layout: the grid test asks "
                           "every permutation of the three axes on (dp,tp,pp) = (%d,%d,%d)",
                           k->dp, k->tp, k->pp);
            return 0;
        }
    }
    return 1;
}

static int judge_grid(const struct l9_state *st, int i, const struct gr_obs *all,
                      struct gr_why *why)
{
    const struct l9_case *k = &st->cases[i];
    const struct l9_obs *o0 = rank_obs(all, 0);
    for (int order = 0; order < (o0->has_orders ? L9_NORDERS : 1); order++)
        if (!check_order(k, order, all, why)) return 0;
    for (int r = 0; o0->has_orders && r < all->nranks; r++)
        for (int j = 0; j < L9_NBAD; j++) {
            if (rank_obs(all, r)->bad_ret[j] == -1) continue;
            gr_why_say(why, "rank %d: fourd_grid_new(world, \"%s\", dp=%d, tp=%d, pp=%d) "
                       "returned %d on %d ranks, where fourd.h's contract is -1: %s", r,
                       L9_BAD[j].order, k->dp * L9_BAD[j].dp_times, k->tp, k->pp,
                       rank_obs(all, r)->bad_ret[j], all->nranks,
                       L9_BAD[j].dp_times != 1 ? "the degrees' product is not the world's size"
                                               : "the order is not a permutation of tp, pp "
                                                 "and dp joined by '-'");
            return 0;
        }
    return 1;
}

static int judge_traffic(const struct l9_state *st, int i, const struct gr_obs *all,
                         struct gr_why *why)
{
    const struct l9_case *k = &st->cases[i];
    const struct pl_model_config *c = &st->train[i].cfg;
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = rank_obs(all, r);
        if (o->sp_inter > 0) {
            gr_why_say(why, "rank %d sent %.0f bytes of all-gathers and reduce-scatters (the SP "
                       "conjugates) across nodes: under %s every TP group is inside a node, so "
                       "none may cross; are the blocks given the TP communicator?", r,
                       o->sp_inter, L9_ORDER);
            return 0;
        }
        double want = L9_K_STEPS * l9_p2p_bytes(c, k, o->coord[2], st->train[i].global_B);
        if (fabs(o->p2p_bytes - want) > 0.5) {
            gr_why_say(why, "rank %d (stage %d of %d) sent %.0f bytes point to point in %d "
                       "steps; the pipeline sends one activation per microbatch to the next "
                       "stage and one gradient to the previous, each (B/(dp m)) T/t C floats "
                       "= %.0f bytes: %.0f in all", r, o->coord[2], k->pp, o->p2p_bytes,
                       L9_K_STEPS,
                       (double)(st->train[i].global_B / (k->dp * L9_MICRO)) * c->seq_len /
                           k->tp * c->d_model * sizeof(float),
                       want);
            if (o->p2p_bytes > want)
                gr_why_say(why, "more than that: a whole sequence sent where a rank's T/t "
                           "tokens would do, or the head's or embedding's work sent on");
            return 0;
        }
    }
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = rank_obs(all, r);
        double blocks, embed, head;
        const double g = l9_dp_floats(c, &st->ref[i].layout, k, o->coord[2], &blocks, &embed,
                                      &head);
        /* once a step, every gradient the rank holds; the loss's few floats on top */
        const double lo = k->dp > 1 ? L9_K_STEPS * g : 0, hi = L9_K_STEPS * (g + L9_DP_SLACK);
        if (o->dp_floats >= lo && o->dp_floats <= hi) continue;
        gr_why_say(why, "rank %d (dp %d, stage %d of %d) all-reduced %.0f floats over its DP "
                   "group in %d calls in %d steps; the replicas sum each gradient the rank "
                   "holds once a step, after the last microbatch's backward: %.0f floats "
                   "(its %.0f of block shards%s%s) a step, %.0f in %d steps%s", r,
                   o->coord[0], o->coord[2], k->pp, o->dp_floats, o->dp_calls, L9_K_STEPS, g,
                   blocks, embed > 0 ? ", the embedding's" : "",
                   head > 0 ? ", the head's" : "", L9_K_STEPS * g, L9_K_STEPS,
                   k->dp > 1 ? "" : " at most (with dp = 1 the sum may be skipped)");
        if (o->dp_floats > hi)
            gr_why_say(why, "%.2f times that: the gradients crossed the DP group more than "
                       "once a step (a sum per microbatch moves them m = %d times, a second "
                       "pass to make sure the replicas agree twice); the replicas agree after "
                       "one sum of the accumulated gradients (section 4)",
                       o->dp_floats / (L9_K_STEPS * g), L9_MICRO);
        else if (o->dp_floats < lo)
            gr_why_say(why, "fewer: some gradients were never summed over the DP group (the "
                       "embedding's and the head's too, on the stages that hold them; the "
                       "head whole, after its slices are gathered, not a slice each: section "
                       "3.3)");
        return 0;
    }
    return 1;
}

static int judge_recompute(const struct l9_state *st, int i, const struct gr_obs *all,
                           struct gr_why *why)
{
    const struct l9_case *k = &st->cases[i];
    const struct pl_model_config *c = &st->train[i].cfg;
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = rank_obs(all, r);
        if (o->leak_bytes <= 0) continue;
        gr_why_say(why, "rank %d (stage %d): after fourd_model_free and fourd_grid_free, %.0f "
                   "bytes of %s it allocated are still held (memory ledger): every buffer "
                   "the model or a step took, send and receive buffers included, is freed by "
                   "them; a step that leaks grows until the device is full", r, o->coord[2],
                   o->leak_bytes, pl_mem_cat_name((enum pl_mem_cat)o->leak_cat));
        return 0;
    }
    if (!rank_obs(all, 0)->has_recompute) return 1;
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = rank_obs(all, r);
        const int fl = l9_in_flight(k->pp, o->coord[2], L9_MICRO);
        const double blocks = (double)fl * o->stage_blocks;
        const double none = pl_sp_block_saved_bytes(c, k->tp, L9_MB_SEQS, c->seq_len,
                                                    PL_RECOMPUTE_NONE);
        for (int rc = PL_RECOMPUTE_SELECTIVE; rc <= PL_RECOMPUTE_FULL; rc++) {
            const char *name = pl_recompute_name((enum pl_recompute)rc);
            if (o->digest[rc] != o->digest[PL_RECOMPUTE_NONE]) {
                gr_why_say(why, "rank %d (stage %d): with recompute %s the losses or the "
                           "parameters after %d steps differ from recompute none's; a rerun "
                           "forward computes the same values from the same inputs (and the "
                           "same dropout masks), so the training is bit for bit the same",
                           r, o->coord[2], name, L9_K_STEPS);
                return 0;
            }
            double kept = pl_sp_block_saved_bytes(c, k->tp, L9_MB_SEQS, c->seq_len,
                                                  (enum pl_recompute)rc);
            /* full: less one block's whole activations, which its rerun needs while it runs;
             * selective reruns into scratch (workspace), so nothing is taken off */
            const double slack = rc == PL_RECOMPUTE_FULL ? none : 0;
            double want = blocks * (none - kept) - slack;
            double saved = o->activ_peak[PL_RECOMPUTE_NONE] - o->activ_peak[rc];
            /* and at most what the microbatches in flight leave unsaved (a tenth and 2 kB
             * over for the bookkeeping of one's own design): more is a schedule that holds
             * more microbatches than 1F1B, with none, than the min(p - s, m) it needs */
            double most = 1.1 * blocks * (none - kept) + 2048;
            if (saved > most) {
                gr_why_say(why, "rank %d (stage %d of %d, %d blocks): recompute %s lowers its "
                           "activation peak by %.0f bytes, more than the %d microbatches 1F1B "
                           "holds at once on this stage can leave unsaved (%.0f blocks x %.0f "
                           "= %.0f): with none it holds more microbatches' activations than "
                           "min(p - s, m) = %d (are a microbatch's saved activations freed "
                           "right after its backward, and does the warm-up run p - s - 1 "
                           "forwards?)", r, o->coord[2], k->pp, o->stage_blocks, name, saved,
                           fl, blocks, none - kept, blocks * (none - kept), fl);
                return 0;
            }
            if (saved + 0.5 < want) {
                gr_why_say(why, "rank %d (stage %d of %d, %d blocks, %d microbatches in flight "
                           "under 1F1B): its activation peak with recompute %s is %.0f bytes, "
                           "with none %.0f: %.0f saved, where a block keeps %.0f bytes "
                           "instead of %.0f, so the choice saves at least %.0f blocks x %.0f "
                           "less %.0f (a full rerun's one block) = %.0f", r, o->coord[2], k->pp,
                           o->stage_blocks, fl, name, o->activ_peak[rc],
                           o->activ_peak[PL_RECOMPUTE_NONE], saved, kept, none, blocks,
                           none - kept, slack, want);
                gr_why_say(why, "is m->recompute given to every block of every microbatch "
                           "(pl_sp_block_saved_new), and freed only after its backward?");
                return 0;
            }
        }
    }
    return 1;
}

int l9_judge(const struct l9_state *st, int i, const char *part, const struct gr_obs *all,
             struct gr_why *why)
{
    /* the capped run's own op: its training is judged by its part */
    if (st->capped) return strcmp(part, "cap") ? 1 : l9_judge_cap(st, i, all, why);
    if (!strcmp(part, "correct")) return judge_correct(st, i, all, why);
    if (!strcmp(part, "clip")) return judge_clip(st, i, all, why);
    if (!strcmp(part, "grid")) return judge_grid(st, i, all, why);
    if (!strcmp(part, "traffic")) return judge_traffic(st, i, all, why);
    if (!strcmp(part, "recompute")) return judge_recompute(st, i, all, why);
    if (!strcmp(part, "bubble")) return l9_judge_bubble(st, i, all, why);
    if (!strcmp(part, "overlap")) return l9_judge_overlap(st, i, all, why);
    if (!strcmp(part, "zero")) return l9_judge_zero(st, i, all, why);
    if (!strcmp(part, "vocab")) return l9_judge_vocab(st, i, all, why);
    if (!strcmp(part, "plan")) return l9_judge_plan(st, i, all, why);
    if (!strcmp(part, "time")) return l9_judge_time(st, i, all, why);
    gr_why_say(why, "internal: no part %s", part);
    return 0;
}
