/* judge.c: Lab 5's verdicts (lab05.h), on rank 0 from every rank's observation of a case. No
 * MPI and nothing but the arguments: tests/judge/05-sequence-parallel.c runs these on
 * recorded and hand-built observations. A rank records figures, never text: a part fails on
 * the first rank (in rank order) that recorded a failure (l5_reason words it) or whose
 * figures fail the part's rule, with "rank R: " before the reason; the rules that span a TP
 * group (its replicas bit for bit, its work in all) read every member's observation. On the
 * last case a part that passed says what rank 0's figures show. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lab05.h"

const char *const L5_PART_NAMES[L5_NPARTS] = {"correct", "replicas", "traffic", "memory",
                                              "time"};

static const char *const CONJ_NAMES[4] = {"sp_gather_forward", "sp_gather_backward",
                                          "sp_scatter_forward", "sp_scatter_backward"};

/* A ring all-gather or reduce-scatter of a full [N, C] sends (t-1)/t of it per rank. */
static double coll_bytes(double NC, int t)
{
    return (double)(t - 1) / t * NC * 4.0;
}

/* ---- a rank's failure in words ---- */

/* The hint of a comparison: what is likeliest wrong ("" when nothing is named). */
static void hint_text(const struct l5_hint *h, char *buf, size_t len)
{
    static const char *const fixed[] = {
        [L5_H_BIAS_NONE] = "your rows are the single device's without b_proj and b_fc2: the "
                           "row-parallel linears' biases are missing (section 5)",
        [L5_H_DX_ADDED] = "your rows are the right dx added to what the buffer held (the grader "
                          "hands it over holding this rank's x rows): sp_block_backward writes "
                          "(=) dx, as sp.h says; pl_layernorm_backward accumulates, so start dx "
                          "from dy with a copy (section 5)",
        [L5_H_DX_PARTS] = "your rows hold only this rank's part of the layernorm output's "
                          "gradient: every rank's TP branch used every token, and the "
                          "gather's backward is the gradient with respect to this rank's "
                          "rows, to which every rank's copy contributes (sp.h, section 3)",
        [L5_H_ALONE_EVAL] = "in evaluation (ctx->train = 0) dropout is off although the "
                            "configuration has p > 0: the branch passes unchanged (sp.h)",
        [L5_H_ALONE_MASK] = "each rank draws the single device's mask of the same global "
                            "tokens, for the block and site it is given (section 4)",
        [L5_H_DBRANCH_ADDED] = "your values are the right ones added to what the buffer held: "
                               "the backward writes (=) dbranch; pl_dropout_backward_block "
                               "accumulates, so zero dbranch first (section 4)",
        [L5_H_DBRANCH_WRITE] = "the backward writes (=) dbranch: dy through the forward's mask, "
                               "scaled by 1/(1-p), or dy itself when dropout is off (section 4)",
        [L5_H_ACCUM_LOST] = "the gradient buffers were handed over holding an earlier "
                            "micro-batch's gradients and your values lost them: "
                            "sp_block_backward ACCUMULATES (+=) parameter gradients (sp.h), as "
                            "pl_block_backward does, so that micro-batches add up before one "
                            "synchronisation; the kit's core adds into g, so never zero or "
                            "overwrite it (section 5)",
        [L5_H_SECOND_ONLY] = "it is the second micro-batch's gradient alone: the backward "
                             "writes (=) it instead of adding (+=) to what the buffer held, the "
                             "first micro-batch's. sp.h: backward functions ACCUMULATE "
                             "parameter gradients; pl_sp_bias_backward and "
                             "pl_layernorm_backward add, so never zero or copy over g "
                             "(section 5)",
        [L5_H_AVERAGED] = "it is 1/t of the single device's and the same on every rank: the "
                          "partial sums were averaged (PL_AVG). Each rank's sum covers its own "
                          "T/t tokens, and the whole gradient is their sum: PL_SUM (section 6)",
    };
    const double *v = h->h;
    buf[0] = '\0';
    if (h->kind == L5_H_GRID)
        snprintf(buf, len, "this case runs on a tp=%d x dp=%d grid (order %s), each DP "
                 "replica on its own sequences, and the cases whose TP group was the whole "
                 "world matched: the TP group is not the world. The group's rank and size are "
                 "pl_comm_rank(tp) and pl_comm_size(tp) and its collectives run on tp; "
                 "pl_rank(), pl_size() and pl_comm_world() are the world's (sections 4 and 6)",
                 (int)v[0], (int)v[1], h->order);
    else if (h->kind == L5_H_EVAL_DROPOUT)
        snprintf(buf, len, "this case evaluates (ctx->train = 0) with dropout configured "
                 "(p=%.1f): dropout is off outside training, the branch passes unchanged and "
                 "its gradient is dy (sp.h: off when ctx->train is 0 or c->dropout is 0)", v[0]);
    else if (h->kind == L5_H_DROPOUT_ROWS)
        snprintf(buf, len, "dropout is on in this case (p=%.2g, block %d, sequences from %d, "
                 "step %d, T=%d where the model's seq_len is %d) and the case without dropout "
                 "matched: your masks are not the single device's for the same global tokens. "
                 "A token's mask is fixed by its element's index in the whole batch's [B*T, C] "
                 "branch output (model.h, pl_model_dropout_stream), T the sequence length the "
                 "block is given (not the model's), and drawn with the configuration's p "
                 "(section 4)",
                 v[0], (int)v[1], (int)v[2], (int)v[3], (int)v[4], (int)v[5]);
    else if (h->kind == L5_H_BIAS_T)
        snprintf(buf, len, "your rows are the single device's with b_proj and b_fc2 added t = "
                 "%d times: each token's output holds its bias once (question "
                 "bias_after_scatter, section 5)", (int)v[0]);
    else if (h->kind == L5_H_SUMMED)
        snprintf(buf, len, "it is %d (= t) times the single device's: summed over the group "
                 "twice, or reduced where every rank already held it whole", (int)v[0]);
    else if (h->kind > 0 && h->kind < (int)(sizeof fixed / sizeof *fixed) && fixed[h->kind])
        snprintf(buf, len, "%s", fixed[h->kind]);
}

/* What a failure on a tp x dp grid of training adds: the rank's group, and that it is not the
 * world (v as L5_W_REPLICA_GRID). */
static void train_grid_text(const struct l5_said *s, char *buf, size_t len)
{
    const double *v = s->v;
    const int B = (int)v[4], t = (int)v[6];
    snprintf(buf, len, "this case runs on a tp=%d x dp=%d grid of %s TP groups: your TP group "
             "is world ranks %s, TP ranks 0 to %d in that order (not the world's), and replica "
             "%d holds its own %d sequence%s%s: the TP group is not the world. The rows of the "
             "dropout mask and the tokens a rank holds come from pl_comm_rank(tp) and "
             "pl_comm_size(tp), and the collectives run on tp; pl_rank(), pl_size() and "
             "pl_comm_world() are the world's (sections 4 and 6)", t, (int)v[5],
             v[7] ? "strided" : "consecutive", s->name[1], t - 1, (int)v[3], B,
             B > 1 ? "s" : "",
             v[8] ? ", and the case whose TP group was the whole world matched" : "");
}

void l5_reason(const struct l5_said *s, char *buf, size_t len)
{
    static const char *const rule[4] = {
        "every rank's T/t tokens of each sequence, each in its place",
        ("the gradient with respect to this rank's rows, to which every rank's copy of them "
         "contributes"),
        "this rank's tokens of the sum over the group",
        "the gradient with respect to this rank's partial sum, every token of it"};
    const double *v = s->v;
    char hint[L5_TEXT];
    switch (s->code) {
    case L5_W_COMPARE: {
        hint_text(&s->cmp.hint, hint, sizeof hint);
        gr_cmp_words(&s->cmp.fig, s->name[0], hint, buf, len);
        break;
    }
    case L5_W_CONJ: {
        const int k = (int)v[0] & 3;
        snprintf(buf, len, "%s: element %zu is %g, expected %g (%s)%s", CONJ_NAMES[k],
                 (size_t)v[1], v[2], v[3], rule[k],
                 v[4] ? ": the rows are in the collective's rank-major order; sequence b's "
                        "tokens from rank r belong at rows b T + r T/t "
                        "(the layout, sections 2 and 3)"
                      : "");
        break;
    }
    case L5_W_STEP_LOSS:
        snprintf(buf, len, "the loss of step %d is %.7g where the single device's is %.7g "
                 "(relative error %.2e): the SP blocks in a model with dropout on train a "
                 "different model (sections 4 to 6)", (int)v[0], v[1], v[2], v[3]);
        break;
    case L5_W_WEIGHTS:
        snprintf(buf, len, "%.64s (your shard) after %d steps: relative L2 error %.2e "
                 "(tolerance %.0e)%s", s->name[0], L5_TRAIN_STEPS, v[0], GR_TOL_PARAMS,
                 v[1] ? ": a replicated tensor whose gradient was not the whole one on every "
                        "rank steps differently (section 6)" : "");
        break;
    case L5_W_REPLICA_SUM:
    case L5_W_REPLICA_GRID:
        if (s->code == L5_W_REPLICA_SUM)
            snprintf(hint, sizeof hint, "it is the sum of all %d replicas' gradients, each on "
                     "its own sequences: sp_sync_replicated_grads reduced over ranks of other "
                     "replicas too (a tp=%d x dp=%d grid here). Each replica's gradient is its "
                     "own until the data-parallel reduction, the trainer's, averages them after "
                     "yours (section 6)", (int)v[5], (int)v[6], (int)v[5]);
        else
            train_grid_text(s, hint, sizeof hint);
        snprintf(buf, len, "gradient of %.64s (your shard%s) at step %d, after "
                 "sp_sync_replicated_grads and before the replicas are averaged: relative L2 "
                 "error %.2e against the single device's on replica %d's %d sequence%s "
                 "(tolerance %.0e): %s", s->name[0], v[0] ? ", replicated" : "", (int)v[1], v[2],
                 (int)v[3], (int)v[4], v[4] > 1 ? "s" : "", L5_TOL_BWD, hint);
        break;
    default:
        snprintf(buf, len, "a failure this build of the grader does not know (code %d)",
                 s->code);
    }
}

/* ---- figures against a part's rule: 1, or 0 with the reason in buf ---- */

/* Each conjugate's collectives from the ledger: exactly one all-gather or one reduce-scatter
 * of (t-1)/t of the full activation. */
static int conj_traffic(const struct l5_obs *o, char *buf, size_t len)
{
    const int t = o->figs.t;
    const double nf = (double)o->figs.B * o->figs.T * o->figs.C;
    for (int k = 0; k < 4 && t > 1; k++) {
        const struct l5_traffic *tr = &o->conj[k];
        int gathers = k == 0 || k == 3;
        long want_ag = gathers, want_rs = !gathers;
        double want = coll_bytes(nf, t);
        char a[32], b[32];
        const char *name = CONJ_NAMES[k];
        if (tr->ar)
            snprintf(buf, len, "%s made %ld all-reduce%s (%s): an all-reduce leaves the whole "
                     "sum on every rank and sends 2(t-1)/t of the buffer, where this function "
                     "returns only this rank's tokens and may send %s per rank, (t-1)/t of the "
                     "full [B*T, C] (section 3)", name, tr->ar, tr->ar == 1 ? "" : "s",
                     pl_format_bytes(tr->ar_bytes, a, sizeof a), pl_format_bytes(want, b, sizeof b));
        else if (tr->other || tr->ag != want_ag || tr->rs != want_rs ||
                 fabs(tr->ag_bytes + tr->rs_bytes - want) > 0.5)
            snprintf(buf, len, "%s sent %s per rank in %ld all-gather%s, %ld reduce-scatter%s and "
                     "%ld other operation%s where each conjugate is one collective of the full "
                     "[B*T, C] on tp, %s per rank ((t-1)/t of it; section 3)", name,
                     pl_format_bytes(tr->ag_bytes + tr->rs_bytes + tr->other_bytes, a, sizeof a),
                     tr->ag, tr->ag == 1 ? "" : "s", tr->rs, tr->rs == 1 ? "" : "s", tr->other,
                     tr->other == 1 ? "" : "s", pl_format_bytes(want, b, sizeof b));
        else
            continue;
        return 0;
    }
    return 1;
}

/* The block's passes: the forward's and backward's conjugates and the synchronisation. */
static int block_traffic(const struct l5_block_figs *bf, int t, int C, char *buf, size_t len)
{
    /* at most the six replicated vectors all-reduced: 2(t-1)/t of 6C floats (an all-reduce
     * done as its two halves, a reduce-scatter and an all-gather, may pad 6C to t equal
     * shares). Less is right too: a backward that sums the bias gradients from the gathered
     * gradient, the same on every rank, leaves only the layernorms' to reduce. */
    const double NC = bf->NC;
    const double sync = 2.0 * (t - 1) / t * 6 * C * 4.0;
    const double sync_padded = 2.0 * (t - 1) * ceil(6.0 * C / t) * 4.0;
    char a[32], b[32], e[32];
    const double one = coll_bytes(NC, t);
    /* Lab 4: two all-reduces of [N, C] per pass, 2(t-1)/t of each */
    const double lab4_pass = 2 * 2.0 * (t - 1) / t * NC * 4.0;
    const struct l5_traffic *f = &bf->fwd, *k = &bf->bwd, *s = &bf->sync;
    if (f->ar || k->ar)
        snprintf(buf, len,
                 "the %s made %ld all-reduce%s (%s): sequence parallelism replaces each of Lab 4's "
             "all-reduces by a reduce-scatter and an all-gather, so that between them the "
             "activation lives split along the sequence (section 3)",
             f->ar ? "forward" : "backward", f->ar ? f->ar : k->ar,
             (f->ar ? f->ar : k->ar) == 1 ? "" : "s",
             pl_format_bytes(f->ar ? f->ar_bytes : k->ar_bytes, a, sizeof a));
    else if (f->ag != 2 || f->rs != 2 || f->other ||
             fabs(f->ag_bytes + f->rs_bytes - lab4_pass) > 0.5)
        snprintf(buf, len,
                 "the forward sent %s per rank in %ld all-gather%s, %ld reduce-scatter%s and %ld "
             "other operation%s where Lab 4's block forward sends %s: each conjugate the "
             "forward passes through is one collective of the [B*T, C] activation, (t-1)/t of "
             "it per rank, and nothing else moves (sections 3 and 5)",
             pl_format_bytes(f->ag_bytes + f->rs_bytes + f->other_bytes, a, sizeof a), f->ag,
             f->ag == 1 ? "" : "s", f->rs, f->rs == 1 ? "" : "s", f->other,
             f->other == 1 ? "" : "s", pl_format_bytes(lab4_pass, b, sizeof b));
    else if (k->rs != 2 || k->ag < 2 || k->ag > 4 || k->other ||
             fabs(k->ag_bytes + k->rs_bytes - one * (double)(k->ag + k->rs)) > 0.5)
        snprintf(buf, len,
                 "the backward sent %s per rank in %ld all-gather%s, %ld reduce-scatter%s and %ld "
             "other operation%s where its conjugates send %s, Lab 4's block backward's bytes, "
             "and all-gathers of what the backward needs of the whole sequence at most %s "
             "more: each conjugate's backward is one collective of the [B*T, C] activation, "
             "(t-1)/t of it per rank (sections 3 and 5)",
             pl_format_bytes(k->ag_bytes + k->rs_bytes + k->other_bytes, a, sizeof a), k->ag,
             k->ag == 1 ? "" : "s", k->rs, k->rs == 1 ? "" : "s", k->other,
             k->other == 1 ? "" : "s", pl_format_bytes(lab4_pass, b, sizeof b),
             pl_format_bytes(2 * one, e, sizeof e));
    else if (s->ag != s->rs || s->other)
        snprintf(buf, len,
                 "sp_sync_replicated_grads made %ld all-gather%s, %ld reduce-scatter%s and %ld "
             "other operation%s (%s per rank) where the rule allows %s per rank, one "
             "all-reduce's worth of the six vectors of C floats: every rank receiving every "
             "other rank's whole copy moves more than the sum needs (section 6)", s->ag,
             s->ag == 1 ? "" : "s", s->rs, s->rs == 1 ? "" : "s", s->other,
             s->other == 1 ? "" : "s",
             pl_format_bytes(s->ar_bytes + s->ag_bytes + s->rs_bytes + s->other_bytes, a,
                            sizeof a), pl_format_bytes(sync, b, sizeof b));
    else if (s->ar_bytes + s->ag_bytes + s->rs_bytes > (s->ar ? sync : sync_padded) + 0.5)
        snprintf(buf, len,
                 "sp_sync_replicated_grads sent %s per rank in %ld all-reduce%s and %ld other "
             "operation%s where all-reducing the six replicated vectors of C floats sends %s, "
             "which is enough: reduce only the partial sums, each once (section 6)",
             pl_format_bytes(s->ar_bytes + s->ag_bytes + s->rs_bytes + s->other_bytes, a,
                            sizeof a), s->ar, s->ar == 1 ? "" : "s", s->ag + s->rs + s->other,
             s->ag + s->rs + s->other == 1 ? "" : "s",
             pl_format_bytes(sync, b, sizeof b));
    else
        return 1;
    return 0;
}

/* What the block held from its forward to its backward, and after. */
static int block_memory(const struct l5_block_figs *bf, char *buf, size_t len)
{
    static const char *const names[] = {"the attention half's input x",
                                        "the attention half's layernorm output",
                                        "the MLP half's input", "the MLP half's layernorm output"};
    char kept[L5_NAME] = "";
    if (bf->kept_tensor >= 0)
        snprintf(kept, sizeof kept, "%s, token row %zu of rank %d's", names[bf->kept_tensor & 3],
                 (size_t)bf->kept_row, bf->kept_member);
    const double want = bf->want_held, lab4 = bf->lab4_held, NC = bf->NC;
    char a[32], b[32], e[32], l4[32];
    if (bf->unseen.where)
        snprintf(buf, len,
                 "%s was an array in static storage: it outlives the forward where the memory "
             "ledger never sees it, so what the block holds between its forward and backward "
             "cannot be measured (a whole sequence's layernorm output kept there would be "
             "Lab 4's replicated activation again). Take every buffer from pl_mem_alloc "
             "(scratch as PL_MEM_WORK), free it before you return, and fetch again in the "
             "backward what it needs of the whole sequence, within the traffic rule's two "
             "extra all-gathers (section 5)", bf->unseen.what);
    else if (bf->kept_tensor >= 0)
        snprintf(buf, len,
                 "after your forward returned, static storage held %s (the grader searched it "
             "for every other rank's rows): a copy of the whole sequence kept outside the "
             "memory ledger, Lab 4's replicated activation again where no test can see it. "
             "Keep only this rank's shards in the acts, free the gathered buffers before you "
             "return, and fetch again in the backward what it needs of the whole sequence, "
             "within the traffic rule's two extra all-gathers (section 5)",
             kept);
    else if (bf->held > want + 0.5)
        snprintf(buf, len,
                 "your block held %s between its forward and its backward where TP+SP keeps %s "
             "(4/t (8NC + 2NF + 4N + B NH T^2), sp_shard.h); the extra %s is %.2f full "
             "[B*T, C] activations: something of the whole sequence was kept. Lab 4's TP block "
             "keeps %s; its replicated part, every token's half inputs, layernorm outputs and "
             "statistics, is what sequence parallelism splits, so that a rank keeps its own "
             "tokens of each and nothing of the whole sequence outlives the forward "
             "(sections 1 and 5)", pl_format_bytes(bf->held, a, sizeof a),
             pl_format_bytes(want, b, sizeof b), pl_format_bytes(bf->held - want, e, sizeof e),
             (bf->held - want) / (NC * 4.0), pl_format_bytes(lab4, l4, sizeof l4));
    else if (bf->left > 0.5 || bf->left < -0.5)
        snprintf(buf, len, "%s %s once the backward returned and the acts were freed: %s. Every "
             "buffer a pass takes from pl_mem_alloc is freed before it returns; the acts "
             "belong to the caller (section 5)", bf->left > 0 ? "your block still held"
             : "your block freed", pl_format_bytes(fabs(bf->left), a, sizeof a),
             bf->left > 0 ? "scratch never freed, which grows step after step"
                            : "memory it did not allocate");
    else
        return 1;
    return 0;
}

/* Rank r's observation of the member m of TP group g (NULL when none). */
static const struct l5_obs *member_of(const struct gr_obs *all, int g, int m)
{
    for (int w = 0; w < all->nranks; w++) {
        const struct l5_obs *o = gr_obs_rank(all, w);
        if (o->figs.group == g && o->figs.member == m) return o;
    }
    return NULL;
}

/* The replicated gradients after the synchronisation, bit for bit the same on every member
 * of rank r's TP group as on its rank 0 (the first tensor, member and element that differ). */
static int replicas_equal(const struct gr_obs *all, const struct l5_obs *o, char *buf,
                          size_t len)
{
    const struct l5_obs *root = member_of(all, o->figs.group, 0);
    if (!o->block.has_rep || !root) return 1;
    for (int i = 0; i < o->block.nrep && i < L5_REP; i++)
        for (int m = 1; m < o->figs.t; m++) {
            const struct l5_obs *q = member_of(all, o->figs.group, m);
            for (int e = 0; q && e < L5_C; e++)
                if (memcmp(&q->block.rep[i][e], &root->block.rep[i][e], sizeof(float))) {
                    snprintf(buf, len, "the gradient of %s (replicated on every rank) differs "
                             "between the ranks after sp_sync_replicated_grads: rank %d's "
                             "element %d is not rank 0's: every rank steps its copy with its "
                             "own gradient, and the replicas drift apart step after step "
                             "(section 6)",
                             o->block.rep_name[i], m, e);
                    return 0;
                }
        }
    return 1;
}

/* The work outside the kit's core, summed over the TP group, against the single device's
 * (its forward and backward less one pass of the core, which the group's cores split
 * evenly; a core run twice is the modelled timeline's to judge): the layernorms, residuals,
 * dropouts and biases run once per token in all, on the rank that owns it. Two-sided: at
 * least WORK_LO of the single device's (less is work skipped), at most WORK_HI of it plus
 * WORK_GATHERED FLOPs per element of the [B*T, C] activation for each rank beyond the first:
 * room for a few sums over the gathered sequence (the bias gradients summed from the
 * gathered gradient, 4 a rank), not for a layernorm forward on it (8 each) by every rank,
 * which is t times the work sequence parallelism exists to split. */
#define WORK_LO 0.75
#define WORK_HI 1.15
#define WORK_GATHERED 6.0

static int block_work(const struct gr_obs *all, const struct l5_obs *o, char *buf, size_t len)
{
    const int t = o->figs.t;
    double group = 0, core = 0;
    for (int m = 0; m < t; m++) {
        const struct l5_obs *q = member_of(all, o->figs.group, m);
        if (!q) continue;
        group += q->block.work;
        core += q->block.core_once;
    }
    const double single = o->block.oracle_flops - core;
    const double hi = WORK_HI * single + WORK_GATHERED * (t - 1) * o->block.activation_floats;
    if (!(single <= 0 || group < WORK_LO * single || group > hi)) return 1;
    snprintf(buf, len, "outside the TP region (the kit's core) your block's %d ranks did %.4g "
             "FLOPs in all, %.2fx the single device's %.4g for the same tokens (the FLOPs "
             "ledger; allowed %.2fx to %.2fx here, the most being %.2fx plus %.0f FLOPs per "
             "element of the [B*T, C] activation for each rank beyond the first): %s "
             "(section 5)", t, group, group / single, single, WORK_LO, hi / single, WORK_HI,
             WORK_GATHERED,
             group > single ? "work done more than once. The layernorms, dropouts, residual "
                              "adds and row-parallel biases act on each token alone, so each "
                              "rank runs them on its own T/t tokens only; a layernorm on the "
                              "gathered sequence by every rank does t times the work sequence "
                              "parallelism exists to split"
                            : "work missing: every token's layernorms, dropouts, residual "
                              "adds and biases run once, on the rank that owns it");
    return 0;
}

#define L5_TIME_COMM "the conjugates' all-gathers and reduce-scatters of bsh"
#define L5_TIME_SECTION "5"

/* Rank r's figures against part p's rule on case i. */
static int figures_pass(const struct gr_obs *all, int r, int p, int i, char *buf, size_t len,
                        struct gr_why *why)
{
    const struct l5_obs *o = gr_obs_rank(all, r);
    const struct l5_block_figs *bf = &o->block;
    if (p == L5_TRAFFIC && o->has_conj) return conj_traffic(o, buf, len);
    if (p == L5_TRAFFIC && bf->measured) return block_traffic(bf, o->figs.t, o->figs.C, buf, len);
    if (p == L5_MEMORY && bf->measured) return block_memory(bf, buf, len);
    if (p == L5_TIME && bf->measured && !block_work(all, o, buf, len))
        return 0;
    if (p == L5_TIME && o->has_time && i == 0) {
        double fraction;
        if (!gr_bt_decide(&o->time, L5_TIME_COMM, L5_TIME_SECTION, &fraction, buf, len))
            return 0;
        gr_why_partial(why, fraction);
    }
    return 1;
}

/* ---- what a passing part says on the last case: rank 0's figures ---- */

static void note(enum l5_kind kind, int p, const struct l5_obs *o, char *buf, size_t len)
{
    const struct l5_figs *f = &o->figs;
    const struct l5_block_figs *bf = &o->block;
    const int t = f->t;
    /* traffic, memory and replicas say case 0's figures, its TP group the world: the last
     * case may be a grid whose group is smaller (tp=1 on 2 ranks, which sends and saves
     * nothing sequence parallelism changes) */
    const struct l5_figs *nf = o->has_noted ? &o->noted_figs : f;
    const struct l5_block_figs *nb = o->has_noted ? &o->noted : bf;
    const char *which = o->has_noted ? ", the first case, whose TP group is the world" : "";
    char a[32], b[32], e[32];
    buf[0] = '\0';
    if (kind == L5_CONJ && p == L5_CORRECT)
        snprintf(buf, len, "both conjugates exact forward and backward on every rank (t=%d, "
                 "B=%d, T=%d, C=%d)", t, f->B, f->T, f->C);
    else if (kind == L5_CONJ && p == L5_TRAFFIC) {
        /* the figures only: which collective each of the four runs is section 3's question,
         * and this note is read by whoever passed it, not only by whoever derived it */
        double sent = 0;
        for (int k = 0; k < 4; k++) sent += o->conj[k].ag_bytes + o->conj[k].rs_bytes;
        snprintf(buf, len, "each of the four functions made one collective of (t-1)/t of the "
                 "full [B*T, C] per rank and no all-reduce: %s per rank in all (t=%d, B=%d, "
                 "T=%d, C=%d)", pl_format_bytes(sent, a, sizeof a), t, f->B, f->T, f->C);
    }
    else if (kind == L5_BLOCK && p == L5_CORRECT)
        snprintf(buf, len, "outputs, input gradients and every split shard's gradient match the "
                 "single device in %d cases: dropout off and on, gradients accumulated over two "
                 "micro-batches, evaluation with dropout configured, and (the last, B=%d T=%d) "
                 "t=%d on a %d-rank world split into %d TP group%s", L5_NCASES, f->B, f->T, t,
                 f->world, f->dp, f->dp == 1 ? "" : "s");
    else if (kind == L5_BLOCK && p == L5_REPLICAS)
        snprintf(buf, len, "ln1, ln2, b_proj and b_fc2: the same gradient on every rank, bit for "
                 "bit, equal to the single device's (t=%d%s), in every case", nf->t, which);
    else if (kind == L5_BLOCK && p == L5_TRAFFIC) {
        /* the conjugates' bytes as measured: both passes less the backward's re-gathers */
        const double one = coll_bytes(nb->NC, nf->t), re = (double)(nb->bwd.ag - 2) * one;
        const double sent = nb->fwd.ag_bytes + nb->fwd.rs_bytes + nb->bwd.ag_bytes +
                            nb->bwd.rs_bytes - re;
        const double lab4 = 2 * 2 * 2.0 * (nf->t - 1) / nf->t * nb->NC * 4.0;
        /* the backward's further all-gathers are named only when the block made them: for
         * a block that made none, naming them would hand over what the memory part asks */
        char regather[160] = "";
        if (re > 0.5)
            snprintf(regather, sizeof regather, ", and your backward's further all-gathers "
                     "%s more", pl_format_bytes(re, e, sizeof e));
        snprintf(buf, len, "no all-reduce in the block: its conjugates sent %s per rank, forward "
                 "and backward, = Lab 4's block's %s (b=%d, s=%d, h=%d, t=%d%s)%s; every case "
                 "on a TP group of 2 or more ranks held to the same rule",
                 pl_format_bytes(sent, a, sizeof a), pl_format_bytes(lab4, b, sizeof b), nf->B,
                 nf->T, nf->C, nf->t, which, regather);
    } else if (kind == L5_BLOCK && p == L5_MEMORY)
        snprintf(buf, len, "held %s between forward and backward (B=%d, T=%d, t=%d%s) = the "
                 "TP+SP formula 4/t (8NC + 2NF + 4N + B NH T^2); Lab 4's TP block keeps %s; peak "
                 "of the step %s; every case on a TP group of 2 or more ranks held its "
                 "formula's bytes", pl_format_bytes(nb->held, a, sizeof a), nf->B, nf->T, nf->t,
                 which, pl_format_bytes(nb->lab4_held, b, sizeof b),
                 pl_format_bytes(nb->peak, e, sizeof e));
    else if (kind == L5_BLOCK && p == L5_TIME && o->has_time)
        gr_bt_note(&o->time, L5_TIME_COMM, L5_TIME_SECTION, buf, len);
    else if (kind == L5_TRAIN && p == L5_CORRECT && f->dp > 1)
        snprintf(buf, len, "%d AdamW steps of a %d-block model with dropout p=%.1f: every loss "
                 "and every parameter shard match pl_model_step%s on a tp=%d x dp=%d grid of %s "
                 "TP groups numbered against the world's order, where each replica's gradients "
                 "after your synchronisation match the single device's on its own %d "
                 "sequence%s", L5_TRAIN_STEPS, f->layers, f->p,
                 f->grid_after_world ? " with the TP group the whole world and" : "", t, f->dp,
                 f->strided ? "strided" : "consecutive", f->B, f->B > 1 ? "s" : "");
    else if (kind == L5_TRAIN && p == L5_CORRECT)
        snprintf(buf, len, "%d AdamW steps of a %d-block model with dropout p=%.1f: every loss "
                 "and every parameter shard match pl_model_step (t=%d)", L5_TRAIN_STEPS,
                 f->layers, f->p, t);
}

/* ---- a part on one case ---- */

int l5_part_of(const char *const *names, int n, const char *what, const char *part,
               const struct gr_obs *all, struct gr_why *why)
{
    int p = 0;
    while (p < n && strcmp(part, names[p])) p++;
    if (p == n) {
        char list[200] = "";
        for (int k = 0; k < n; k++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                     k ? (k == n - 1 ? " and " : ", ") : "", names[k]);
        gr_why_say(why, "%s judges no part '%s' (%s)", what, part, list);
        return -1;
    }
    if (all->size != sizeof(struct l5_obs)) {
        gr_why_say(why, "an observation of %zu bytes where Lab 5's are %zu: a record of another "
                   "build", all->size, sizeof(struct l5_obs));
        return -1;
    }
    return p;
}

int l5_judge(enum l5_kind kind, int i, int ncases, const char *part, const struct gr_obs *all,
             struct gr_why *why)
{
    const int p = l5_part_of(L5_PART_NAMES, L5_NPARTS, "Lab 5", part, all, why);
    if (p < 0) return 0;
    char buf[L5_TEXT];
    for (int r = 0; r < all->nranks; r++) {
        const struct l5_obs *o = gr_obs_rank(all, r);
        if (p == L5_REPLICAS && !replicas_equal(all, o, buf, sizeof buf)) {
            /* the group's replicas differ: said before any comparison */
        } else if (o->part[p].code) {
            l5_reason(&o->part[p], buf, sizeof buf);
        } else if (figures_pass(all, r, p, i, buf, sizeof buf, why)) {
            continue;
        }
        gr_why_say(why, "rank %d: %s", r, buf);
        return 0;
    }
    if (i != ncases - 1) return 1;
    note(kind, p, gr_obs_rank(all, 0), buf, sizeof buf);
    if (buf[0]) gr_why_say(why, "%s", buf);
    return 1;
}
