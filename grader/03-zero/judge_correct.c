/* judge_correct.c: Lab 3's verdict of the part "correct" and of the layout test, on rank 0
 * alone from every rank's observation (struct l3_obs), and their reasons' words: the state
 * and layout zero_new left, operations left in flight, the gradient AdamW was given, the
 * replicas after each step, the losses and the trained parameters. No MPI: the judge test
 * (tests/judge/03-zero.c) links it with judge.c alone. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab03.h"


static const struct l3_obs *rank_obs(const struct gr_obs *all, int r)
{
    return gr_obs_rank(all, r);
}

/* Whose layout d is, as its reasons begin. */
static void layout_whose(const struct l3_layout_diff *d, char *buf, size_t len)
{
    if (d->test)
        snprintf(buf, len, "Psi=%.0f parameters (n_layers=%d, d_model=%d, d_ff=%d, vocab=%d) "
                 "on n=%d, rank %d", d->psi, d->n_layers, d->d_model, d->d_ff, d->vocab, d->n,
                 d->rank);
    else snprintf(buf, len, "rank %d's z->zl (Psi=%.0f on %d ranks)", d->rank, d->psi, d->n);
}

/* Two units' ranges overlapping in a buffer, or one running past its end, in words. */
static void overlap_words(const struct l3_layout_diff *d, const char *what, struct gr_why *why)
{
    int shard = d->code == L3_LD_SHARD_OVERLAP;
    const char *buf = shard ? "its shard" : "a full buffer", *off = shard ? "shard_offset" :
                                                                            "full_offset";
    const char *len = shard ? "chunk" : "padded";
    if (d->unit2 < 0)
        gr_why_say(why, "%s: in %s, unit %d's [%s %.0f, + %s %.0f) runs past %s = %.0f: a "
                   "unit's %s elements must lie inside the buffer", what, buf, d->unit, off,
                   d->got[0], len, d->got[1], shard ? "shard_numel" : "full_numel", d->got[2],
                   len);
    else
        gr_why_say(why, "%s: in %s, unit %d's [%s %.0f, + %s %.0f) overlaps unit %d's [%.0f, + "
                   "%.0f): %s, so the %s of one would overwrite the other's elements. Each unit "
                   "needs its %s elements to itself, padding included", what, buf, d->unit, off,
                   d->got[0], len, d->got[1], d->unit2, d->want[0], d->want[1],
                   shard ? "two units' chunks share memory" :
                           "a unit's padding has no room of its own",
                   shard ? "reduce-scatter" : "all-gather", len);
}

/* The first invariant a layout breaks, in words: which, by how much, and why it holds. */
static void layout_words(const struct l3_layout_diff *d, struct gr_why *why)
{
    static const char *const field[11] = {"chunk", "padded", "full_offset", "shard_offset",
                                          "offset", "numel", "part", "nunits", "shard_numel",
                                          "full_numel", "numel"};
    char what[200], where[32] = "";
    layout_whose(d, what, sizeof what);
    switch (d->code) {
    case L3_LD_NRANK:
        gr_why_say(why, "%s: n=%.0f rank=%.0f stored, expected n=%.0f rank=%.0f", what,
                   d->got[0], d->got[1], d->want[0], d->want[1]);
        break;
    case L3_LD_NUNITS:
        gr_why_say(why, "%s: nunits is %.0f, expected %.0f (n_layers + 2: the embedding, every "
                   "block, the head)", what, d->got[0], d->want[0]);
        break;
    case L3_LD_PART:
        gr_why_say(why, "%s, unit %d: part is %.0f, expected %.0f (unit u holds part u - 1: the "
                   "embedding is -1, the blocks 0..L-1, the head L)", what, d->unit, d->got[0],
                   d->want[0]);
        break;
    case L3_LD_RANGE:
        gr_why_say(why, "%s, unit %d: offset %.0f, numel %.0f, but part %d is the %.0f elements "
                   "from %.0f (pl_model_part_range): elements of the model would be owned twice "
                   "or by no rank", what, d->unit, d->got[0], d->got[1], d->unit - 1,
                   d->want[1], d->want[0]);
        break;
    case L3_LD_GAP:
        gr_why_say(why, "%s, unit %d (%.0f elements): chunk %.0f: n chunks hold %.0f of its "
                   "elements, and the last %.0f belong to no rank, so no rank updates them. A "
                   "chunk needs at least ceil(numel / n) = %.0f elements", what, d->unit,
                   d->unit_numel, d->got[0], d->n * d->got[0],
                   d->unit_numel - d->n * d->got[0], d->want[0]);
        break;
    case L3_LD_EXCESS:
        gr_why_say(why, "%s, unit %d (%.0f elements): chunk %.0f is %.0f more than ceil(numel / "
                   "n) = %.0f; zero.h allows at most ZERO_MAX_ALIGN - 1 = %d more, enough to "
                   "round a chunk up to any alignment up to %d floats. Every element of padding "
                   "is memory each rank holds in each sharded category and bytes every "
                   "collective of the unit moves", what, d->unit, d->unit_numel, d->got[0],
                   d->got[0] - d->want[0], d->want[0], ZERO_MAX_ALIGN - 1, ZERO_MAX_ALIGN);
        break;
    case L3_LD_PADDED:
        gr_why_say(why, "%s, unit %d (%.0f elements): padded is %.0f, expected n x chunk = %.0f: "
                   "a reduce-scatter or all-gather of the unit moves one chunk per rank, so the "
                   "unit takes n x chunk elements in a full buffer", what, d->unit,
                   d->unit_numel, d->got[0], d->want[0]);
        break;
    case L3_LD_TOTALS:
        gr_why_say(why, "%s: numel %.0f, full_numel %.0f, shard_numel %.0f; expected Psi = %.0f, "
                   "%.0f (the sum of padded) and %.0f (the sum of chunks): the buffers hold the "
                   "units and nothing beside", what, d->got[0], d->got[1], d->got[2],
                   d->want[0], d->want[1], d->want[2]);
        break;
    case L3_LD_FULL_OVERLAP:
    case L3_LD_SHARD_OVERLAP:
        overlap_words(d, what, why);
        break;
    case L3_LD_UNEQUAL:
        if (d->unit >= 0) snprintf(where, sizeof where, "unit %d's ", d->unit);
        if (d->field == 2 || d->field == 3) { /* same sizes, placed differently */
            gr_why_say(why, "%s: %s%s is %.0f, rank 0's is %.0f. Every rank must place the "
                       "units alike, only rank differs: a collective of unit u reads and "
                       "writes the same offset on every rank (rank r's chunk lands at "
                       "full_offset + r x chunk in every full buffer), so each rank's units "
                       "must sit where rank 0's do, in the same order", what, where,
                       field[d->field], d->got[0], d->want[0]);
            break;
        }
        gr_why_say(why, "%s: %s%s is %.0f, rank 0's is %.0f. Every rank must cut the model "
                   "alike, only rank differs: reduce-scatter and all-gather move equally many "
                   "elements from every rank, so shards of different sizes (a unit spread "
                   "without padding, the first ranks taking one more) cannot be moved by them; "
                   "pad the last chunk instead", what, where, field[d->field % 11], d->got[0],
                   d->want[0]);
        break;
    default:
        gr_why_say(why, "zero_new(stage %.0f) stored stage %.0f in z->stage", d->want[0],
                   d->got[0]);
    }
}

int l3_judge_layouts(const struct l3_obs *o, struct gr_why *why)
{
    if (o->layout.code) layout_words(&o->layout, why);
    else gr_why_say(why, "%d layouts (model sizes x rank counts 1..9 x ranks) keep every "
                    "invariant of zero.h", o->layout_tried);
    return !o->layout.code;
}

/* The fields and layout of every rank's state. */
/* A buffer zero_new allocated shorter than zero.h asks, by the memory ledger's sizes. */
static int buffer_words(int stage, const struct gr_obs *all, struct gr_why *why)
{
    static const char *const field[] = {"", "z->params", "z->grads", "z->m", "z->v"};
    char b1[32], b2[32];
    for (int i = 0; i < all->nranks; i++) {
        const struct l3_obs *v = rank_obs(all, i);
        if (!v->short_buf.field) continue;
        int full = v->short_buf.want == 4 * v->shape.full && v->shape.full != v->shape.shard;
        gr_why_say(why, "rank %d: zero_new(stage %d) allocated %s with %.0f floats (%s), "
                   "where zero.h asks for %s = %.0f floats of your own layout (%s): every "
                   "read and write of the last units' chunks runs past its end, into whatever "
                   "the heap holds next (handout section %s)", i, stage,
                   field[v->short_buf.field % 5], v->short_buf.got / 4,
                   pl_format_bytes(v->short_buf.got, b1, sizeof b1),
                   full ? "full_numel" : "shard_numel", v->short_buf.want / 4,
                   pl_format_bytes(v->short_buf.want, b2, sizeof b2),
                   l3_section_of_stage(stage));
        return 0;
    }
    return 1;
}

/* A padding element of z->params that is not zero: the rank that saw it first. */
static int padding_words(const struct gr_obs *all, struct gr_why *why)
{
    int first = -1;
    for (int i = 0; i < all->nranks; i++) {
        int at = rank_obs(all, i)->pad.at;
        if (at && (first < 0 || at < rank_obs(all, first)->pad.at)) first = i;
    }
    if (first < 0) return 1;
    const struct l3_obs *v = rank_obs(all, first);
    char when[48];
    if (v->pad.at > 1) snprintf(when, sizeof when, "after zero_step %d", v->pad.at - 1);
    else snprintf(when, sizeof when, "after zero_new");
    char part[32];
    if (v->pad.part < 0) snprintf(part, sizeof part, "the embedding");
    else if (v->pad.part >= v->n_layers) snprintf(part, sizeof part, "the head");
    else snprintf(part, sizeof part, "block %d", v->pad.part);
    gr_why_say(why, "rank %d, %s: the padding of z->params (%s) is not zero: unit %d (%s), "
               "element %.0f of its padded range, past its numel, holds %.7g. zero.h: "
               "zero_new sets the padding to zero, and no update touches it (AdamW is "
               "given the parameters, never the padding). A padded chunk is reduced and "
               "gathered as data like any other: garbage there becomes garbage in a "
               "neighbour's sum as soon as a layout cuts the units differently, and a "
               "checkpoint or a reshard reads it (handout section 2)", first, when,
               v->pad.shard ? "this rank's shard" : "the full buffer", v->pad.unit, part,
               v->pad.elem, v->pad.value);
    return 0;
}

static int judge_state(int stage, const struct gr_obs *all, struct gr_why *why)
{
    static const char *const field[] = {"", "z->params", "z->grads", "z->m or z->v", "z->pass",
                                        "the state (zero_new returned NULL)"};
    for (int i = 0; i < all->nranks; i++) {
        const struct l3_obs *v = rank_obs(all, i);
        if (v->null_field) {
            gr_why_say(why, "rank %d: zero_new(stage %d) left %s NULL: allocate what the stage "
                       "keeps (handout section %s)", i, stage, field[v->null_field % 6],
                       l3_section_of_stage(stage));
            return 0;
        }
        /* A rank cut unlike rank 0 may break an invariant on its own too: the cut is said
         * first, being the cause. */
        int k = i;
        for (int r = 0; r < all->nranks && v->layout.code; r++)
            if (rank_obs(all, r)->layout.code == L3_LD_UNEQUAL) k = r;
        if (v->layout.code) {
            const struct l3_layout_diff *d = &rank_obs(all, k)->layout;
            layout_words(d, why);
            if (d->altered)
                gr_why_say(why, "rank %d's z->zl is not what zero_layout_init gives it for "
                           "its rank (the layout test judges that one): zero_new stored "
                           "another layout in z->zl. The shard layout decides every offset the "
                           "grader reads: z->zl must be zero_layout_init's (zero.h)", k);
            else
                gr_why_say(why, "the shard layout decides every offset the grader reads: fix "
                           "zero_layout_init first (handout section 2)");
            return 0;
        }
    }
    return buffer_words(stage, all, why) && padding_words(all, why);
}

/* Operations zero_new or zero_step started on the communicator and never waited for, still
 * in flight once zero_free returned. */
static int judge_in_flight(int stage, const struct gr_obs *all, struct gr_why *why)
{
    for (int r = 0; r < all->nranks; r++) {
        const struct l3_obs *v = rank_obs(all, r);
        if (!v->in_flight) continue;
        gr_why_say(why, "rank %d: after zero_free, %d operation(s) your code started on the "
                   "communicator zero_new was given were still in flight: a handle of "
                   "pl_all_gather_async or pl_reduce_scatter_async (a prefetch started for a "
                   "unit that never came, or a reduce-scatter left running) was never waited "
                   "for. The program that owns the communicator frees it after zero_free, and "
                   "pl_comm_free refuses one with operations in flight: pl_wait every handle "
                   "you start, before the step that started it returns (handout section %s)", r,
                   v->in_flight, l3_section_of_stage(stage));
        return 0;
    }
    return 1;
}

/* The mistake a group's first rank recognised in the gradient AdamW was given, in words. */
static void grads_words(const struct l3_grads_fig *f, struct gr_why *why)
{
    int s = f->step + 1;
    const char *after_clip = f->x[1] > 0 ? ", after your clip" : "";
    switch (f->code) {
    case L3_G_NONE_GIVEN:
        gr_why_say(why, "step %d: zero_step never called pl_model_adamw_flat: update your chunks "
                   "with it, at their flat offsets (handout section 2), so that weight decay "
                   "falls on the right tensors; the grader reads the gradient each call is "
                   "given", s);
        break;
    case L3_G_COUNT:
        gr_why_say(why, "step %d: flat element %.0f (%s, in rank %d's chunk) was given to "
                   "pl_model_adamw_flat %d times in the step, where every parameter is updated "
                   "exactly once, by the rank owning its chunk (handout section 2)", s, f->elem,
                   f->tensor, f->who, f->count);
        break;
    case L3_G_T:
        gr_why_say(why, "step %d: pl_model_adamw_flat was given t = %d, where this model has "
                   "taken %d AdamW step(s), this one included: t counts the steps since "
                   "zero_new (z->t, zero there and one more per zero_step), and AdamW's bias "
                   "correction divides by 1 - beta^t, so a wrong t scales the update. A count "
                   "kept outside struct zero goes on from one model to the next (handout "
                   "section 3)", s, f->who, s);
        break;
    case L3_G_TWICE:
        gr_why_say(why, "step %d: gradients averaged twice: off by a factor of 1/n = 1/%d "
                   "before clipping (AdamW was given %.4g times the gradient it needs%s). "
                   "Section 3 asks for the ranks' mean, before the clip", s, f->n, f->x[0],
                   after_clip);
        break;
    case L3_G_SUM:
        gr_why_say(why, "step %d: gradients summed, not averaged: off by a factor of n = %d "
                   "before clipping (AdamW was given %.4g times the gradient it needs%s). The "
                   "parameters barely show it (Lab 2's question why_average_unseen asks why); "
                   "the gradient shows it. Section 3 asks for the ranks' mean, before the clip",
                   s, f->n, f->x[0], after_clip);
        break;
    case L3_G_LOCAL_CLIP:
        gr_why_say(why, "step %d: clipped by the local gradient norm, not the global one: rank "
                   "%d scaled its chunks by %.4g, from the norm of its own shard (%.4g), where "
                   "the whole gradient's norm is %.4g and clipping at %g scales every chunk by "
                   "%.4g: the ranks scaled by factors of their own, where the clip is one "
                   "factor for the whole gradient (handout section 3)", s, f->who, f->x[0],
                   f->x[1], f->x[2], f->x[3], f->x[4]);
        break;
    case L3_G_NOT_CLIPPED:
        gr_why_say(why, "step %d: the gradient was not clipped: its norm %.4g is above "
                   "grad_clip %g, and AdamW was given it unscaled, where the single device's "
                   "clipped gradient is %.4g times it (handout section 3)", s, f->x[0], f->x[1],
                   f->x[2]);
        break;
    default:
        gr_why_say(why, "step %d: the gradient AdamW was given differs from the single-device "
                   "gradient of the whole batch%s: relative L2 error %.3g (tolerance %.0e); the "
                   "largest difference is at flat element %.0f (%s, rank %d's chunk): %.6g "
                   "where %.6g was expected%s", s,
                   f->x[3] != 0 ? ", clipped by its global norm" : "", f->x[0], GR_TOL_GRADS,
                   f->elem, f->tensor, f->who, f->x[1], f->x[2],
                   f->step > 0 ? ". The steps before were right, so look at what one step "
                                 "leaves for the next: zero_backward_part adds into the "
                                 "buffer it is given, and the update uses every AdamW "
                                 "setting of opt as given (zero.h)"
                               : "");
    }
}

/* The first rank of r's ZeRO group. */
static const struct l3_obs *group_first(const struct gr_obs *all, const struct l3_obs *v)
{
    for (int q = 0; q < all->nranks; q++) {
        const struct l3_obs *o = rank_obs(all, q);
        if (o->color == v->color && o->grp_rank == 0) return o;
    }
    return v;
}

/* The first step whose gradient was wrong on a group (its first rank's figures, the first
 * group in world order), or after which a rank's replica differed from its group's first
 * rank's, bit for bit (their digests). */
static int judge_grads(const struct gr_obs *all, struct gr_why *why)
{
    for (int r = 0; r < all->nranks; r++)
        if (rank_obs(all, r)->grads.code) {
            grads_words(&rank_obs(all, r)->grads, why);
            return 0;
        }
    for (int s = 0; s < L3_STEPS; s++)
        for (int r = 0; r < all->nranks; r++) {
            const struct l3_obs *v = rank_obs(all, r), *root = group_first(all, v);
            if (v->replica.steps <= s || root->replica.steps <= s ||
                v->replica.digest[s] == root->replica.digest[s])
                continue;
            gr_why_say(why, "after zero_step %d, rank %d's parameters differ from rank 0's%s, "
                       "bit for bit, first in %s (flat element %.0f, in rank %d's chunk): every "
                       "rank must end the step with the same model, each chunk as its owner "
                       "updated it, the last unit's included (handout section 3)", s + 1, r,
                       v->ngroups > 1 ? " of its ZeRO group" : "", v->replica.tensor,
                       v->replica.elem, v->replica.owner);
            return 0;
        }
    return 1;
}

/* Every rank's group loss against its group's reference; the first rank (in world order)
 * whose group's loss is off is named. */
static int judge_group_loss(int stage, const struct gr_obs *all, struct gr_why *why)
{
    for (int who = 0; who < all->nranks; who++) {
        const struct l3_obs *v = rank_obs(all, who);
        if (v->loss.step < 0) continue;
        char where[96] = "", b[32];
        if (v->ngroups > 1)
            snprintf(where, sizeof where, " (rank %d's group, on its own batches)", who);
        gr_why_say(why, "%s on %d ranks%s, step %d of %d: the loss (mean over the group's ranks) "
                   "is %.8g, the single-device model's on the same global batch %.8g: relative "
                   "error %s, more than %.0e", l3_stage_name(stage), v->grp_n, where,
                   v->loss.step + 1, L3_STEPS, v->loss.got, v->loss.want,
                   gr_fmt_beyond_into(v->loss.err, GR_TOL_LOSS, b, sizeof b), GR_TOL_LOSS);
        if (v->loss.step == 0)
            gr_why_say(why, "the first forward already differs: are the parameters initialised "
                       "with pl_model_init_flat at their flat offsets, and does every unit's "
                       "forward get its own parameters?");
        else
            gr_why_say(why, "the first %d step(s) agreed, so the forward is right and an update "
                       "went wrong: the gradient's average, the clip, AdamW on the own chunks, or "
                       "the model every rank holds after the update (handout sections 2 and 3)",
                       v->loss.step);
        return 0;
    }
    return 1;
}

/* The group losses first, then each rank's own loss against the reference's on its slice. */
static int judge_losses(int stage, const struct gr_obs *all, struct gr_why *why)
{
    if (!judge_group_loss(stage, all, why)) return 0;
    /* The mean agrees: each rank's own loss, named rank by rank in its group. */
    for (int who = 0; who < all->nranks; who++) {
        const struct l3_obs *v = rank_obs(all, who);
        if (!v->loss.rank_off) continue;
        int s = v->loss.rank_off - 1, same = 1;
        char got[512] = "", want[512] = "", b[32];
        for (int r = 0; r < all->nranks; r++) {
            const struct l3_obs *x = rank_obs(all, r);
            if (x->color != v->color) continue;
            size_t a = strlen(got), w = strlen(want);
            snprintf(got + a, sizeof got - a, "%srank %d %.5f", a ? ", " : "", r,
                     x->loss.mine[s]);
            snprintf(want + w, sizeof want - w, "%srank %d %.5f", w ? ", " : "", r,
                     x->loss.slice[s]);
            same &= x->loss.mine[s] == v->loss.mine[s];
        }
        gr_why_say(why, "%s on %d ranks, step %d of %d: zero_step returned %s; the single-device "
                   "model's loss on each rank's own slice of the batch is %s (rank %d off by "
                   "a relative error of %s, more than %.0e). zero.h: zero_step returns this "
                   "rank's loss, the mean over its own B sequences (zero_pass_loss), not the "
                   "batch's", l3_stage_name(stage), v->grp_n, s + 1, L3_STEPS, got, want, who,
                   gr_fmt_beyond_into(v->loss.rank_err, GR_TOL_LOSS, b, sizeof b),
                   GR_TOL_LOSS);
        if (same && v->grp_n > 1)
            gr_why_say(why, "every rank returned the same number, the mean over the ranks: the "
                       "loss was all-reduced, which the caller can do if it wants the batch's "
                       "(and which costs a collective the step does not need)");
        return 0;
    }
    return 1;
}


/* The parameters after K steps, the worst tensor of any rank against the reference. */
static int judge_params(int stage, const struct gr_obs *all, struct gr_why *why)
{
    int worst = 0, nonfinite = 0;
    for (int r = 0; r < all->nranks; r++) {
        const struct l3_params_fig *p = &rank_obs(all, r)->params;
        nonfinite += p->nonfinite;
        if (p->rel > rank_obs(all, worst)->params.rel) worst = r;
    }
    const struct l3_params_fig *p = &rank_obs(all, worst)->params;
    if (nonfinite == 0 && p->rel <= GR_TOL_PARAMS) return 1;
    char desc[512];
    if (nonfinite)
        snprintf(desc, sizeof desc, "rank %d, tensor %s %s: %d elements in all are NaN or Inf "
                 "(first bad element %.0f of this tensor)", worst, p->name, p->shape, nonfinite,
                 p->worst_elem);
    else
        snprintf(desc, sizeof desc, "rank %d, tensor %s %s: relative L2 error %.2e (largest "
                 "element error %.2e, at element %.0f), all parameters %.2e", worst, p->name,
                 p->shape, p->rel, p->max_abs, p->worst_elem, p->overall);
    gr_why_say(why, "%s on %d ranks: after %d steps the parameters%s differ from the "
               "single-device model's: %s", l3_stage_name(stage), rank_obs(all, 0)->grp_n,
               L3_STEPS, stage == 3 ? " (gathered from every rank's shard)" : "", desc);
    if (nonfinite)
        gr_why_say(why, "%d parameters are NaN or Inf: a chunk read past its unit, or moments "
                   "never zeroed?", nonfinite);
    else
        gr_why_say(why, "losses agreed, so the last update is off: the padding, or the "
                   "elements each rank updates (handout section 2)");
    return 0;
}

/* Every rank ran its steps and freed the stage (a stub or a wrong state stops it first). */
static int judge_trained(const struct l3_obs *o, struct gr_why *why)
{
    if (!o->trained) gr_why_say(why, "the stage did not train its %d steps", L3_STEPS);
    return o->trained;
}

int l3_judge_correct(int stage, int i, int ncases, const struct gr_obs *all, struct gr_why *why)
{
    const struct l3_obs *o = rank_obs(all, 0);
    if (!judge_in_flight(stage, all, why)) return 0;
    if (!judge_state(stage, all, why) || !judge_grads(all, why) || !judge_trained(o, why) ||
        !judge_losses(stage, all, why) || !judge_params(stage, all, why)) {
        if (stage == 3 && !l3_case_prefetch(3, i))
            gr_why_say(why, "this run called zero_new with prefetch = 0, and the run before it, "
                       "with prefetch = 1, was right: the stage must train the same either way, "
                       "so look at what your code does when z->prefetch is 0 (handout section "
                       "6), or at state kept from the previous zero_new");
        if (i == L3_CASE_GROUPS)
            gr_why_say(why, "this case split the %d ranks into 2 ZeRO groups of %d, each "
                       "training on batches of its own, and gave zero_new its group's "
                       "communicator: world rank r is not rank r of its group. The cases before "
                       "it, where the group was the whole world, were right: somewhere a rank, "
                       "a rank count or a collective was the world's, where zero.h's comm is "
                       "the data-parallel group (handout section 8). The case also has another "
                       "model shape (n_layers=%d, d_ff=%d, seq_len=%d, vocab=%d) and AdamW "
                       "setting (lr, betas, eps, weight decay, clip), which zero.h says are "
                       "used as given", all->nranks,
                       o->grp_n, o->n_layers, o->d_ff, o->seq_len, o->vocab);
        return 0;
    }
    if (i + 1 < ncases) return 1; /* said once, when every case agreed */
    char groups[96] = "";
    if (i == L3_CASE_GROUPS)
        snprintf(groups, sizeof groups, ", and in 2 ZeRO groups of %d on their own batches",
                 o->grp_n);
    gr_why_say(why, "%d steps on %d ranks, clipping at the default threshold, off, and between "
               "the ranks' shard norms%s%s, match the single-device reference (losses to %.0e, "
               "the gradient AdamW is given to %.0e, parameters to %.0e)", L3_STEPS,
               all->nranks, stage == 3 ? " (prefetch off in the run without clipping)" : "",
               groups, GR_TOL_LOSS, GR_TOL_GRADS, GR_TOL_PARAMS);
    return 1;
}
