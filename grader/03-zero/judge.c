/* judge.c: Lab 3's verdicts, on rank 0 alone from every rank's observation (struct l3_obs),
 * with no MPI: the bytes by collective kind against the stage's volumes, each category's peak
 * against the ZeRO formulas computed in code (formulas.h) for this model, the prefetch's
 * modelled step; and their reasons' words. The part "correct" is judge_correct.c's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab03.h"
#include "prefetch.h"

const char *l3_stage_name(int stage)
{
    return stage == 1 ? "ZeRO-1" : stage == 2 ? "ZeRO-2" : "ZeRO-3";
}

const char *l3_section_of_stage(int stage)
{
    return stage == 1 ? "3" : stage == 2 ? "4" : "5";
}

/* zero_new's prefetch flag in case i. zero.h takes both values, and a stage 3 often has a
 * path of its own without prefetch (a blocking gather, no handle to keep), so stage 3 trains
 * once with it off: in the clip-off case, which no other part judges. */
int l3_case_prefetch(int stage, int i)
{
    return stage == 3 && i != L3_CASE_CLIP_OFF;
}

struct l3_allowance l3_stage_allowance(int stage, const struct l3_shape *zl, int prefetch)
{
    struct l3_allowance a;
    a.prefetch = prefetch;
    a.psi = zl->psi;
    a.full = zl->full;
    a.shard = zl->shard;
    a.two_units = zl->two_units;
    a.formula = zero_fp32(stage, a.psi, zl->n);
    /* The same formula with padded counts: a sharded category holds shard elements, a
     * replicated one a full padded buffer (stages) or Psi (DDP). */
    double rep = stage == 0 ? a.psi : a.full;
    a.allowed.optim = 8.0 * (stage >= 1 ? a.shard : rep);
    a.allowed.grads = stage >= 2 ? 4.0 * (a.shard + a.two_units) : 4.0 * rep;
    /* stage 3 without prefetch gathers a unit only when it computes: one at a time */
    a.allowed.params = stage >= 3 ? 4.0 * (a.shard + (prefetch ? a.two_units : zl->one_unit))
                                  : 4.0 * rep;
    return a;
}

static const char *cat_what(int c)
{
    switch (c) {
    case PL_MEM_PARAMS: return "parameters";
    case PL_MEM_GRADS: return "gradients";
    case PL_MEM_OPTIM: return "AdamW moments m and v";
    default: return pl_mem_cat_name((enum pl_mem_cat)c);
    }
}

/* What a stage keeps of category c, in words, for messages. */
static const char *cat_rule(int stage, int c, int prefetch)
{
    if (c == PL_MEM_PARAMS && stage == 3 && !prefetch)
        return "stage 3 with prefetch = 0 keeps the parameter shard (4 bytes x shard_numel) and "
               "one gathered unit at a time, the one computing, freed right after use";
    if (c == PL_MEM_OPTIM)
        return "every stage keeps m and v of its own shard only: 8 bytes x shard_numel";
    if (c == PL_MEM_GRADS)
        return stage == 1 ? "stage 1 keeps the full (padded) gradient: 4 bytes x full_numel"
                          : "stages 2 and 3 keep the gradient shard (4 bytes x shard_numel) "
                            "and at most two units' gradient buckets at a time, each freed "
                            "as soon as it is reduce-scattered";
    return stage == 3 ? "stage 3 keeps the parameter shard (4 bytes x shard_numel) and at "
                        "most two gathered units at a time (the one computing and the next, "
                        "prefetched), each freed right after use"
                      : "stages 1 and 2 keep the full (padded) parameters: 4 bytes x "
                        "full_numel";
}

/* Why a category overflowed, for each stage and category. */
static const char *cat_hint(int stage, int c, double peak, const struct l3_allowance *a)
{
    double full = (c == PL_MEM_OPTIM ? 8.0 : 4.0) * a->psi;
    int sharded = (c == PL_MEM_OPTIM) || (c == PL_MEM_GRADS && stage >= 2) ||
                  (c == PL_MEM_PARAMS && stage >= 3);
    if (sharded && peak >= full) {
        if (c == PL_MEM_OPTIM)
            return "that is the whole model's optimizer state, where every stage keeps m and "
                   "v of its own shard alone (handout section 3)";
        if (c == PL_MEM_GRADS)
            return "that is a full gradient, where stages 2 and 3 never hold one: at most "
                   "the shard and two units' buckets at once (handout section 4)";
        return "that is a full copy of the parameters, where stage 3 never holds one: at "
               "most the shard and two gathered units at once (handout section 5)";
    }
    if (c == PL_MEM_PARAMS && stage == 3 && !a->prefetch)
        return "more than one gathered unit was alive at once with z->prefetch = 0: without "
               "prefetch a unit is gathered when it is about to compute, and nothing is "
               "gathered ahead of it, so the largest unit is all the stage holds beside its "
               "shard (handout section 6)";
    if (c == PL_MEM_PARAMS && stage == 3)
        return "more gathered units were alive at once than the two the stage allows "
               "(handout section 5)";
    if (c == PL_MEM_GRADS && stage >= 2)
        return "more gradient buckets were alive at once than the two the stage allows "
               "(handout section 4)";
    return "allocate exactly what the stage keeps (struct zero in zero.h says which buffers "
           "each stage holds, and handout section 8 how many bytes of each)";
}

/* What a rank may hold in all, whatever category each buffer was given: the stage's
 * parameters, gradients and optimizer state, its share of the batch's activations and of the
 * ops' workspace (the single-device reference's on the whole batch, over n), and the slack
 * of its bookkeeping. A copy filed under another category still counts here. */
static double total_allowed(const struct l3_allowance *a, int n, const double *ddp,
                            double pass_work)
{
    return a->allowed.params + a->allowed.grads + a->allowed.optim + ddp[4] / n +
           L3_MEM_SLACK_ACTIV + pass_work + L3_MEM_SLACK_WORK + L3_MEM_SLACK_COMM;
}

/* The report under the memory test: rank 0's measured bytes beside the formula, and what
 * DDP holds. */
static void memory_report(struct gr_why *why, int stage, const struct l3_obs *v0, int n,
                          const struct l3_allowance *pa, const double *ddp, double pass_work)
{
    struct l3_allowance a = *pa;
    char b1[32], b2[32], b3[32];
    const int cats[3] = {PL_MEM_PARAMS, PL_MEM_GRADS, PL_MEM_OPTIM};
    const double allowed[3] = {a.allowed.params, a.allowed.grads, a.allowed.optim};
    const double formula[3] = {a.formula.params, a.formula.grads, a.formula.optim};
    gr_why_say(why, "per rank (fp32, Psi=%.0f, n=%d; formula %s = %s): measured on rank 0 "
           "(formula, accepted):", a.psi, n, zero_fp32_text(stage),
           pl_format_bytes(zero_bytes_total(a.formula), b1, sizeof b1));
    for (int k = 0; k < 3; k++)
        gr_why_say(why, "  %-6s %10s  (%s, <= %s)", pl_mem_cat_name((enum pl_mem_cat)cats[k]),
               pl_format_bytes(v0->peak[cats[k]], b1, sizeof b1),
               pl_format_bytes(formula[k], b2, sizeof b2),
               pl_format_bytes(allowed[k], b3, sizeof b3));
    gr_why_say(why, "  %-6s %10s  (the single-device reference's on the whole batch / %d "
           "ranks, <= %s)", "activ", pl_format_bytes(v0->peak[PL_MEM_ACTIV], b1, sizeof b1), n,
           pl_format_bytes(ddp[4] / n + L3_MEM_SLACK_ACTIV, b2, sizeof b2));
    gr_why_say(why, "  total  %10s  (every category together at its peak, <= %s)",
           pl_format_bytes(v0->peak_total, b1, sizeof b1),
           pl_format_bytes(total_allowed(&a, n, ddp, pass_work), b2, sizeof b2));
    gr_why_say(why, "  DDP holds params %s, grads %s, optim %s (measured on the single-device "
           "reference); padding: full_numel %.0f, shard_numel %.0f",
           pl_format_bytes(ddp[0], b1, sizeof b1), pl_format_bytes(ddp[1], b2, sizeof b2),
           pl_format_bytes(ddp[2], b3, sizeof b3), a.full, a.shard);
}

/* A buffer the step computed on that the ledger never saw (rank i). */
static int judge_unseen(struct gr_why *why, int stage, int i, const struct l3_obs *v)
{
    const struct gr_unseen *s = &v->unseen;
    if (!s->where) return 1;
    gr_why_say(why, "rank %d: %s lay %s: the memory ledger never sees that buffer, so what "
           "the stage holds cannot be measured. Every buffer a stage keeps or computes on "
           "goes through pl_mem_alloc with the category of what it holds (here %s), and one "
           "a step allocates is freed once used (zero.h, handout section %s)", i, s->what,
           gr_unseen_where(s->where), s->category, l3_section_of_stage(stage));
    return 0;
}

/* A buffer the step computed on that was allocated with PL_HOST (rank i). */
static int judge_on_host(struct gr_why *why, int stage, int i, const struct l3_obs *v)
{
    if (!v->on_host.seen) return 1;
    gr_why_say(why, "rank %d: %s lay in memory allocated with PL_HOST (\"%s\"): zero.h asks "
           "for PL_DEVICE for every buffer a stage keeps or computes on. This CPU build "
           "cannot tell the two apart; on a GPU the kit's kernels read device memory, and "
           "the stage fails there (zero.h, handout section %s)", i, v->on_host.what,
           v->on_host.label, l3_section_of_stage(stage));
    return 0;
}

/* A step that left memory allocated (rank i). */
static int judge_leak(struct gr_why *why, int i, const struct l3_obs *v)
{
    char b1[32];
    if (v->leak_step >= 0) {
        for (int c = 0; c < PL_MEM_NCAT; c++)
            if (v->leak[c] > 0) {
                gr_why_say(why, "rank %d: zero_step %d left %s of %s allocated that it "
                       "did not hold before the step: %s",
                       i, v->leak_step + 1, pl_format_bytes(v->leak[c], b1, sizeof b1),
                       pl_mem_cat_name((enum pl_mem_cat)c),
                       c == PL_MEM_PARAMS ? "a gathered unit never freed? (handout "
                                            "section 5)"
                                          : "every buffer a step allocates must be freed "
                                            "before it returns");
                return 0;
            }
    }
    return 1;
}

/* What zero_free left allocated of what zero_new and the steps allocated (rank i). */
static int judge_freed(struct gr_why *why, int i, const struct l3_obs *v)
{
    char b1[32];
    for (int c = 0; c < PL_MEM_NCAT; c++) {
        if (v->left[c] <= 0) continue;
        gr_why_say(why, "rank %d: after zero_free, %s of %s (%s) that zero_new and zero_step "
               "allocated were still allocated: zero_free frees everything the stage "
               "allocated (zero.h), or every model a program makes and frees leaves that much "
               "behind", i, pl_format_bytes(v->left[c], b1, sizeof b1),
               pl_mem_cat_name((enum pl_mem_cat)c), cat_what(c));
        return 0;
    }
    return 1;
}

static int judge_memory(struct gr_why *why, int stage, const struct gr_obs *all, int report)
{
    const struct l3_obs *v0 = gr_obs_rank(all, 0);
    const double *ddp = v0->ddp, pass_work = v0->pass_work;
    int n = all->nranks;
    /* report: the run with prefetch (stage 3), else the one without */
    struct l3_allowance a = l3_stage_allowance(stage, &v0->shape, report);
    char b1[32], b2[32], b3[32];
    const int cats[3] = {PL_MEM_PARAMS, PL_MEM_GRADS, PL_MEM_OPTIM};
    const double allowed[3] = {a.allowed.params, a.allowed.grads, a.allowed.optim};
    const double formula[3] = {a.formula.params, a.formula.grads, a.formula.optim};
    if (report) memory_report(why, stage, v0, n, &a, ddp, pass_work);
    for (int i = 0; i < n; i++) {
        const struct l3_obs *v = gr_obs_rank(all, i);
        if (!judge_unseen(why, stage, i, v) || !judge_on_host(why, stage, i, v) ||
            !judge_leak(why, i, v) || !judge_freed(why, i, v))
            return 0;
        for (int k = 0; k < 3; k++) {
            if (v->peak[cats[k]] <= allowed[k]) continue;
            gr_why_say(why, "rank %d held %s of %s (%s) at peak; ZeRO-%d on %d ranks accepts "
                   "%s (formula %s): %s",
                   i, pl_format_bytes(v->peak[cats[k]], b1, sizeof b1),
                   pl_mem_cat_name((enum pl_mem_cat)cats[k]), cat_what(cats[k]), stage, n,
                   pl_format_bytes(allowed[k], b2, sizeof b2),
                   pl_format_bytes(formula[k], b3, sizeof b3),
                   cat_rule(stage, cats[k], a.prefetch));
            gr_why_say(why, "%s", cat_hint(stage, cats[k], v->peak[cats[k]], &a));
            return 0;
        }
        /* And at least: stages 2 and 3 compute each unit's gradient into a bucket of it, so
         * at some moment the shard and the last unit's bucket (half of it, whatever its
         * padding) are held as gradients; less means the buckets were filed elsewhere. */
        double floor_grads = 4.0 * (v0->shape.shard + 0.5 * v0->shape.head);
        if (stage >= 2 && v->peak[PL_MEM_GRADS] < floor_grads) {
            gr_why_say(why, "rank %d held %s of grads at peak, less than the gradient shard and "
                   "half the last unit's bucket (%s): stages 2 and 3 compute each unit's "
                   "gradient into a bucket, which holds gradients. Filed under another "
                   "category (workspace, activations) it hides from the formula the stage is "
                   "measured by: pl_mem_alloc it with PL_MEM_GRADS (zero.h)", i,
                   pl_format_bytes(v->peak[PL_MEM_GRADS], b1, sizeof b1),
                   pl_format_bytes(floor_grads, b2, sizeof b2));
            return 0;
        }
        /* Workspace: the ops' scratch, which the single-device reference on the whole
         * batch needs at least as much of, plus bookkeeping. */
        /* Activations: the category a copy filed elsewhere would hide in. */
        const int other[3] = {PL_MEM_COMM, PL_MEM_WORK, PL_MEM_ACTIV};
        const double limit[3] = {L3_MEM_SLACK_COMM, ddp[3] + L3_MEM_SLACK_WORK,
                                 ddp[4] / n + L3_MEM_SLACK_ACTIV};
        for (int k = 0; k < 3; k++) {
            if (v->peak[other[k]] <= limit[k]) continue;
            gr_why_say(why, "rank %d held %s of %s at peak, more than the %s a stage needs "
                   "there: parameters, gradients and optimizer state belong in their own "
                   "categories (pl_mem_alloc with PL_MEM_PARAMS, PL_MEM_GRADS or "
                   "PL_MEM_OPTIM, not pl_comm_buf_alloc or PL_MEM_ACTIV), where the formulas "
                   "count them",
                   i, pl_format_bytes(v->peak[other[k]], b1, sizeof b1),
                   pl_mem_cat_name((enum pl_mem_cat)other[k]),
                   pl_format_bytes(limit[k], b2, sizeof b2));
            return 0;
        }
        if (v->peak_total > total_allowed(&a, n, ddp, pass_work)) {
            gr_why_say(why, "rank %d held %s in all at its peak, more than the %s ZeRO-%d on %d ranks "
                   "holds (its parameters, gradients and optimizer state as accepted above, "
                   "its share of the activations and the workspace of the kit's own pass on "
                   "its slice): whatever category a buffer is filed under, it counts here. A "
                   "full copy of %s kept somewhere? (handout section %s)",
                   i, pl_format_bytes(v->peak_total, b1, sizeof b1),
                   pl_format_bytes(total_allowed(&a, n, ddp, pass_work), b2, sizeof b2), stage, n,
                   stage == 3 ? "the parameters (gathered units kept alive)"
                              : stage == 2 ? "the gradient" : "the optimizer state",
                   l3_section_of_stage(stage));
            return 0;
        }
    }
    return 1;
}

/* The bytes by collective kind rank i sent in step s, against the stage's volumes. */
static int judge_step_bytes(struct gr_why *why, int stage, int i, int s, const double *by,
                            const long *calls, int n, const struct l3_shape *e)
{
    char b1[32], b2[32], b3[32], b4[32];
    double per = 4.0 * (double)(n - 1) / n; /* bytes sent per element of a collective's size */
    double rs = per * e->full, ag = per * e->full;
    double head = per * e->head;
    double ag_lo = stage == 3 ? 2 * ag - head : ag, ag_hi = stage == 3 ? 2 * ag : ag;
    /* The norm's all-reduce: one call of one float, exactly what zero.h allows (none when the
     * clip is off); more than a few numbers is the gradient itself. */
    double scalar = pl_ring_bytes_sent(PL_ALL_REDUCE, n, 4.0);
    scalar *= 1 + 1e-9; /* the ledger's bytes are differences of running sums: rounding */
    double few = pl_ring_bytes_sent(PL_ALL_REDUCE, n, 4.0 * 4);
    if (calls[PL_BARRIER] > 0) {
        gr_why_say(why, "rank %d, step %d: %ld pl_barrier call(s), where a step needs none: a "
               "barrier moves no data and makes every rank wait for the slowest, and the "
               "reduce-scatters and all-gathers already carry every dependency between ranks "
               "(zero.h, traffic)", i, s + 1, calls[PL_BARRIER]);
        return 0;
    }
    for (int k = 0; k < PL_NKINDS; k++) {
        if (k == PL_REDUCE_SCATTER || k == PL_ALL_GATHER || k == PL_ALL_REDUCE || by[k] == 0)
            continue;
        gr_why_say(why, "rank %d, step %d: %s of %s: ZeRO needs only reduce-scatter "
               "(gradients) and all-gather (parameters)",
               i, s + 1, pl_format_bytes(by[k], b1, sizeof b1),
               pl_coll_kind_name((enum pl_coll_kind)k));
        return 0;
    }
    if (by[PL_ALL_REDUCE] <= few && (calls[PL_ALL_REDUCE] > 1 || by[PL_ALL_REDUCE] > scalar)) {
        gr_why_say(why, "rank %d, step %d: %ld all-reduce call(s) sending %s in all, where the "
               "only all-reduce a step makes is the gradient norm's: one call of one float "
               "(zero_sum_over_ranks once), %s on %d ranks. A second number all-reduced (the "
               "loss? zero_step returns this rank's own, which needs no collective) is a "
               "collective on every step that nothing reads (zero.h, traffic)", i, s + 1,
               calls[PL_ALL_REDUCE], pl_format_bytes(by[PL_ALL_REDUCE], b1, sizeof b1),
               pl_format_bytes(scalar, b2, sizeof b2), n);
        return 0;
    }
    if (by[PL_ALL_REDUCE] > scalar) {
        gr_why_say(why, "rank %d, step %d: all-reduce of %s: %s", i, s + 1,
               pl_format_bytes(by[PL_ALL_REDUCE], b1, sizeof b1),
               stage == 1
                   ? "the only all-reduce a stage makes is the norm's few bytes. With the "
                     "all-gather of the parameters on top, this step sends more than "
                     "DDP's 2Psi(n-1)/n a rank, where stage 1 must send no more than "
                     "DDP: every rank received more of the averaged gradient than its "
                     "update reads (handout section 3)"
                   : "the only all-reduce a stage makes is the norm's few bytes. The "
                     "gradient was all-reduced whole: every rank received all of the "
                     "averaged gradient, where its update reads its own chunks, and "
                     "held a full gradient, which the stage promises not to hold "
                     "(handout section 4)");
        return 0;
    }
    if (fabs(by[PL_REDUCE_SCATTER] - rs) > 0.5) {
        gr_why_say(why, "rank %d, step %d: reduce-scatter sent %s; the gradient of "
               "every unit, padded, reduce-scattered once: 4 x full_numel x (n-1)/n = "
               "%s%s", i, s + 1, pl_format_bytes(by[PL_REDUCE_SCATTER], b1, sizeof b1),
               pl_format_bytes(rs, b2, sizeof b2),
               by[PL_REDUCE_SCATTER] > rs ? " (a unit reduced twice?)"
                                          : " (a unit's gradient not reduced?)");
        return 0;
    }
    if (by[PL_ALL_GATHER] < ag_lo - 0.5 || by[PL_ALL_GATHER] > ag_hi + 0.5) {
        if (stage == 3)
            gr_why_say(why, "rank %d, step %d: all-gather sent %s; stage 3's "
                   "all-gathers, as section 5 counts them for the padded model, send %s "
                   "(%s if the head stays gathered from its forward to its backward)",
                   i, s + 1, pl_format_bytes(by[PL_ALL_GATHER], b1, sizeof b1),
                   pl_format_bytes(ag_hi, b2, sizeof b2),
                   pl_format_bytes(ag_lo, b3, sizeof b3));
        else
            gr_why_say(why, "rank %d, step %d: all-gather sent %s; after the update "
                   "every unit's parameters are gathered once: 4 x full_numel x "
                   "(n-1)/n = %s",
                   i, s + 1, pl_format_bytes(by[PL_ALL_GATHER], b1, sizeof b1),
                   pl_format_bytes(ag, b4, sizeof b4));
        return 0;
    }
    return 1;
}

static int judge_traffic(struct gr_why *why, int stage, const struct gr_obs *all, int report)
{
    char b1[32], b2[32], b3[32];
    const struct l3_obs *v0 = gr_obs_rank(all, 0);
    const struct l3_shape *e = &v0->shape;
    int n = all->nranks;
    double unit = 4.0 * (double)(n - 1) / n * e->psi; /* 4 Psi (n-1)/n */
    double tot0 = 0;
    for (int k = 0; k < PL_NKINDS; k++) tot0 += v0->bytes[0][k];
    if (report) {
        /* Stage 3's formula is what question zero3_traffic_over_ddp asks for: there the
         * report gives the measured multiple alone. */
        char formula[32] = "";
        if (stage != 3)
            snprintf(formula, sizeof formula, "formula %.0fPsi(n-1)/n; ", zero_comm_psi(stage));
        gr_why_say(why, "rank 0 sent per step: reduce-scatter %s, all-gather %s, all-reduce %s: "
               "%.3f x Psi(n-1)/n floats (%spadded to full_numel=%.0f)",
               pl_format_bytes(v0->bytes[0][PL_REDUCE_SCATTER], b1, sizeof b1),
               pl_format_bytes(v0->bytes[0][PL_ALL_GATHER], b2, sizeof b2),
               pl_format_bytes(v0->bytes[0][PL_ALL_REDUCE], b3, sizeof b3),
               unit > 0 ? tot0 / unit : 0.0, formula, e->full);
    }
    for (int i = 0; i < n; i++) {
        const struct l3_obs *v = gr_obs_rank(all, i);
        for (int s = 0; s < v->steps_done && s < L3_STEPS; s++)
            if (!judge_step_bytes(why, stage, i, s, v->bytes[s], v->calls[s], n, e)) return 0;
    }
    return 1;
}

/* The traced step of the first case, replayed on rank 0 with and without prefetch: the share
 * of its all-gather time hidden against the most that any step can hide (prefetch.c). */
static int judge_prefetch(const struct l3_prefetch_fig *r, struct gr_why *why)
{
    if (!r->traced) {
        gr_why_say(why, "no step was traced: the stage did not run to its last step");
        return 0;
    }
    if (!r->replayed) {
        gr_why_say(why, "your step's trace could not be replayed: %s", r->err);
        return 0;
    }
    double reach = r->ideal > 0 ? r->hidden / r->ideal : 1.0;
    double fraction = reach >= L3_PREFETCH_FULL ? 1.0 : reach <= L3_PREFETCH_NONE ? 0.0
                      : (reach - L3_PREFETCH_NONE) / (L3_PREFETCH_FULL - L3_PREFETCH_NONE);
    gr_why_say(why, "modelled on %s at GPT-2 small scale (%d ranks): your step hid %.0f%% of its "
               "all-gather time behind compute; the compute waited %.0f us for all-gathers "
               "(step %.0f us), and %.0f us without prefetch (step %.0f us: the same trace with "
               "each all-gather waited for where it was issued)", L3_PREFETCH_PROFILE, r->n,
               100 * r->hidden, 1e6 * r->with_exposed, 1e6 * r->with_step,
               1e6 * r->without_exposed, 1e6 * r->without_step);
    gr_why_say(why, "the model's bound: no step hides more than %.0f%%, however early and "
               "however many gathers it has in flight (the first gather has no compute before "
               "it, and the comm stream runs one gather at a time, so a gather longer than the "
               "compute before it stays partly exposed); you reached %.0f%% of it; full marks "
               "from %.0f%% of it, none up to %.0f%%", 100 * r->ideal, 100 * reach,
               100 * L3_PREFETCH_FULL, 100 * L3_PREFETCH_NONE);
    if (fraction < 1)
        gr_why_say(why, "%s (z->prefetch is 1 here; handout section 6)",
                   r->hidden < 0.01 ? "nothing was hidden: every all-gather was waited for "
                                      "before any compute could run beside it"
                                    : "part of the gathers were waited for before the "
                                      "compute that could have covered them");
    gr_why_partial(why, fraction);
    return fraction > 0;
}

int l3_judge(int stage, int i, int ncases, const char *part, const struct gr_obs *all,
             struct gr_why *why)
{
    const struct l3_obs *o = gr_obs_rank(all, 0);
    if (!stage) return l3_judge_layouts(o, why);
    if (!strcmp(part, "correct")) return l3_judge_correct(stage, i, ncases, all, why);
    int known = !strcmp(part, "traffic") || !strcmp(part, "memory") || !strcmp(part, "prefetch");
    if (!known) {
        gr_why_say(why, "no part '%s': Lab 3 judges correct, traffic, memory and prefetch", part);
        return 0;
    }
    if (i == L3_CASE_GROUPS) { /* lifetimes only: traffic and memory were judged on the world */
        if (strcmp(part, "memory")) return 1;
        for (int r = 0; r < all->nranks; r++)
            if (!judge_leak(why, r, gr_obs_rank(all, r)) ||
                !judge_freed(why, r, gr_obs_rank(all, r))) {
                gr_why_say(why, "that was the case of 2 ZeRO groups of %d ranks", o->grp_n);
                return 0;
            }
        return 1;
    }
    /* Traffic and memory are the same in every case: judged (and reported) once, and for
     * stage 3 again, unreported, on the run without prefetch, a path of its own. */
    int again = stage == 3 && !l3_case_prefetch(3, i);
    if (i != L3_CASE_CLIP_DEFAULT && !again) return 1;
    if (!strcmp(part, "prefetch")) return again || judge_prefetch(&o->prefetch, why);
    int ok = !strcmp(part, "traffic") ? judge_traffic(why, stage, all, !again)
                                      : judge_memory(why, stage, all, !again);
    if (!ok && again)
        gr_why_say(why, "that was the run with zero_new's prefetch = 0; with prefetch = 1 the "
                   "stage kept within it: look at what your code does when z->prefetch is 0 "
                   "(handout section 6)");
    return ok;
}
