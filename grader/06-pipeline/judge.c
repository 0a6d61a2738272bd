/* judge.c: Lab 6's verdicts (lab06.h), a pure function of the ranks' observations of a case:
 * no MPI, nothing read but its arguments. The balance of the partition (partition.c's
 * wording), and per pipeline the order of F and B each stage ran, the bubble of that order
 * replayed, each stage's memory, and every message's peer, tag and bytes; the training's
 * faults are worded in judge_train.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab06.h"
#include "unseen.h"
#include "units.h"

/* The case's figures: rank 0's observation; stage s of the pipeline judged: rank idx[s]. */
#define CASE(all) ((const struct l6_obs *)gr_obs_rank(all, 0))
#define STAGE(all, idx, s) ((const struct l6_obs *)gr_obs_rank(all, (idx)[s]))

/* Where a buffer outside the ledger was (outside.h). */
static const char *outside_where(int where)
{
    return where == L6_OUTSIDE_HEAP ? "in memory the ledger never saw (not from pl_comm_buf_alloc "
                                      "or pl_mem_alloc)"
                                    : gr_unseen_where(where);
}

static const char *op_text(const struct l6_sched_op *op, char *buf, size_t len)
{
    if (op->chunk > 0) snprintf(buf, len, "%c%d/c%d", op->phase, op->mb, op->chunk);
    else if (op->chunk < 0) snprintf(buf, len, "%c%d/c?", op->phase, op->mb);
    else snprintf(buf, len, "%c%d", op->phase, op->mb);
    return buf;
}

/* "F0 F1 F2 B0 ..." of up to n ops into buf. */
static const char *ops_text(const struct l6_sched_op *ops, int n, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        char one[24];
        size_t used = strlen(buf);
        if (used + 16 >= len) break;
        snprintf(buf + used, len - used, "%s%s", i ? " " : "", op_text(&ops[i], one, sizeof one));
    }
    return buf;
}

static const char *schedule_rule(enum pipe_schedule k)
{
    if (k == PIPE_AFAB)
        return "AFAB: every forward in microbatch order, then every backward in microbatch "
               "order (handout section 4)";
    if (k == PIPE_1F1B)
        return "1F1B on stage s: forwards and backwards each in microbatch order, the next "
               "forward whenever one is left and fewer than min(p - s, m) microbatches are in "
               "flight, otherwise the next backward (handout section 5)";
    if (k == PIPE_ZBH1)
        return "ZB-H1 on stage s: in slot x = 0, 1, ..., m + p - 2, the forward of microbatch x, "
               "the B of x - (p - 1 - s) and the W of x - (p - 1), those that exist, in that "
               "order: 1F1B's forwards and B's, each W p - 1 slots after its forward (handout "
               "section 9)";
    return "interleaved 1F1B: p microbatches through chunk 0, the same through chunk 1, ...; "
           "a warm-up of 2(p - s - 1) + (v - 1)p forwards (all of them when m = p), then one "
           "forward one backward, backwards through the chunks in reverse (handout section 8)";
}

static int judge_schedule(const struct gr_obs *all, const int *idx, struct gr_why *why)
{
    const struct l6_obs *o = CASE(all);
    enum pipe_schedule k = (enum pipe_schedule)o->k;
    int p = o->p, v = o->v, m = o->m, nops = l6_sched_nops(k, v, m);
    struct l6_sched_op want[L6_MAX_OPS];
    for (int s = 0; s < p; s++) {
        const struct l6_obs *st = STAGE(all, idx, s);
        const struct l6_sched_op *got = st->ops;
        int n = st->nops;
        l6_sched_order(k, p, v, s, m, want);
        int bad = n == nops ? -1 : (n < nops ? n : nops);
        for (int i = 0; i < nops && i < n && bad < 0; i++)
            if (got[i].phase != want[i].phase || got[i].mb != want[i].mb
                || got[i].chunk != want[i].chunk)
                bad = i;
        if (bad < 0) continue;
        char a[1024], b[1024];
        gr_why_say(why, "%s, %d stages, %d microbatches: stage %d ran %s; the schedule is %s",
                   l6_sched_name(k), p, m, s,
                   ops_text(got, n < L6_MAX_OPS ? n : L6_MAX_OPS, a, sizeof a),
                   ops_text(want, nops, b, sizeof b));
        if (bad < n && bad < nops) {
            char x[24], y[24];
            gr_why_say(why, "the first difference is operation %d: %s where the schedule has "
                       "%s", bad + 1, op_text(&got[bad], x, sizeof x),
                       op_text(&want[bad], y, sizeof y));
        }
        gr_why_say(why, "%s", schedule_rule(k));
        return 0;
    }
    return 1;
}

/* Idle fraction of the trace replayed with uniform stage times against the schedule as
 * defined, replayed the same way (and, for AFAB and 1F1B, against (p-1)/(m+p-1)). */
static int judge_bubble(const struct gr_obs *all, int g, struct gr_why *why)
{
    const struct l6_obs *o = CASE(all);
    const struct l6_bubble *r = &o->bub[g];
    enum pipe_schedule k = (enum pipe_schedule)o->k;
    int p = o->p, v = o->v, m = o->m;
    double got = r->got, best = r->best;
    double formula = l6_sched_bubble_formula(k, p, m);
    int ok = 0;
    if (r->failed == 1) {
        gr_why_say(why, "%s, %d microbatches: your step's trace could not be replayed: %s",
                   l6_sched_name(k), m, r->err);
    } else if (r->failed) {
        gr_why_say(why, "the ideal %s could not be replayed: %s", l6_sched_name(k), r->err);
    } else if (fabs(got - best) > L6_BUBBLE_TOL ||
               (formula >= 0 && fabs(best - formula) > L6_BUBBLE_TOL)) {
        if (formula >= 0 && k == PIPE_ZBH1)
            gr_why_say(why, "%s, %d stages, %d microbatches, uniform stage times (F %g, B %g, "
                       "W %g, free links): your stages idle %.4f of the step; the schedule idles "
                       "(p-1)/(3m+p-1) = %d/%d = %.4f, a third of 1F1B's idle time", 
                       l6_sched_name(k), p, m, L6_SCHED_UNIT_F,
                       L6_SCHED_UNIT_B - L6_SCHED_UNIT_W, L6_SCHED_UNIT_W, got, p - 1,
                       3 * m + p - 1, formula);
        else if (formula >= 0)
            gr_why_say(why, "%s, %d stages, %d microbatches, uniform stage times (F %g, B %g, "
                       "free links): your stages idle %.4f of the step; the schedule idles "
                       "(p-1)/(m+p-1) = %d/%d = %.4f", l6_sched_name(k), p, m, L6_SCHED_UNIT_F,
                       L6_SCHED_UNIT_B, got, p - 1, m + p - 1, formula);
        else if (k == PIPE_ZBH1)
            gr_why_say(why, "%s, %d stages, %d microbatches, uniform stage times (F %g, B %g, "
                       "W %g, free links): your stages idle %.4f of the step; the schedule as "
                       "defined idles %.4f", l6_sched_name(k), p, m, L6_SCHED_UNIT_F,
                       L6_SCHED_UNIT_B - L6_SCHED_UNIT_W, L6_SCHED_UNIT_W, got, best);
        else
            gr_why_say(why, "%s, %d stages, %d chunks each, %d microbatches, uniform chunk "
                       "times (F %g/%d, B %g/%d, free links): your stages idle %.4f of the step; "
                       "the schedule as defined idles %.4f", l6_sched_name(k), p, v, m,
                       L6_SCHED_UNIT_F, v, L6_SCHED_UNIT_B, v, got, best);
        gr_why_say(why, "%s", got > best ? (k == PIPE_ZBH1
                   ? "a stage waits where the schedule lets it work: a W where the schedule "
                     "runs a forward or a B holds up the stages waiting for it, or a blocking "
                     "send, a receive posted too early or a pl_test that found its group done "
                     "(traced as a wait there) does (handout sections 9 and 3.2)"
                   : "a stage waits where the schedule lets it work: a blocking send, a "
                     "receive posted too early or a pl_test that found its group done (traced "
                     "as a wait there) holds it (handout section 3.2)")
                   : "less idle time than the schedule allows: is some work missing from the "
                     "trace?");
    } else {
        ok = 1;
    }
    /* the same idle time can hide a stage that works late: every operation of AFAB and 1F1B
     * must start when the schedule starts it (interleaved, whose exchanges wait for a
     * step's messages together, is held to its idle time only) */
    if (ok && v == 1 && r->late) {
        char x[24];
        gr_why_say(why, "%s, %d stages, %d microbatches, uniform stage times (F %g, B %g%s, "
                   "free links): stage %d starts %s at %g, where the schedule starts it at %g: the "
                   "stage works in another order than the schedule, or waits where it could work, "
                   "so the pipeline's critical path runs through other operations (handout "
                   "section%s)", l6_sched_name(k), p, m, L6_SCHED_UNIT_F,
                   l6_sched_unit(k, 'B', 1), k == PIPE_ZBH1 ? ", W 1" : "",
                   r->late_stage, op_text(&r->late_op, x, sizeof x), r->t_got, r->t_want,
                   k == PIPE_1F1B ? "s 5 and 3.2: a forward runs only while fewer than "
                                     "min(p - s, m) microbatches are in flight"
                   : k == PIPE_ZBH1 ? "s 9 and 3.2: each W p - 1 slots after its forward"
                                    : "s 4 and 3.2");
        ok = 0;
    }
    return ok;
}

/* What the code holds from step to step and after pipe_free: not more live allocations after
 * every step than after the one before (a buffer allocated once, on first use, is no leak),
 * and nothing after pipe_free that it did not hold before pipe_new. */
static int judge_held(const struct gr_obs *all, const int *idx, struct gr_why *why)
{
    const struct l6_obs *o = CASE(all);
    enum pipe_schedule k = (enum pipe_schedule)o->k;
    int p = o->p, m = o->m;
    char a[32];
    for (int s = 0; s < p; s++) {
        const struct l6_obs *l = STAGE(all, idx, s);
        int every = 1;
        for (int i = 1; i < L6_K_STEPS; i++)
            every &= l->live[i - 1] >= 0 && l->live[i] > l->live[i - 1];
        if (every) {
            gr_why_say(why,
                       "%s, %d microbatches: stage %d held more live allocations after "
                       "every step than after the one before (%.0f after step 0, %.0f after step "
                       "%d): pipe_step keeps something it allocates, a receive buffer per "
                       "microbatch perhaps, so memory grows until a long training run runs out. "
                       "Free what a step allocates before pipe_step returns; what lasts from "
                       "step to step is allocated once, in pipe_new, and freed in pipe_free "
                       "(pipeline.h, handout section 3)", l6_sched_name(k), m, s, l->live[0],
                       l->live[L6_K_STEPS - 1], L6_K_STEPS - 1);
            return 0;
        }
        if (l->outside.where) {
            gr_why_say(why, "%s, %d microbatches: stage %d gave %s a buffer that lies %s: "
                       "what a stage sends and receives is memory the ledger counts, from "
                       "pl_comm_buf_alloc (device memory on the GPU build, where NCCL reads and "
                       "writes it; an array in the program is host memory it cannot use), "
                       "freed before pipe_step returns or, if kept, in pipe_free (pipeline.h, "
                       "handout section 3)", l6_sched_name(k), m, s, l->outside.call,
                       outside_where(l->outside.where));
            return 0;
        }
        if (l->left > 0) {
            gr_why_say(why, "%s, %d microbatches: after pipe_free stage %d still holds %s of "
                       "%s that it did not hold before pipe_new: pipe_free frees everything "
                       "pipe_new and pipe_step allocated (pipeline.h, handout section 3)",
                       l6_sched_name(k), m, s, pl_format_bytes(l->left, a, sizeof a),
                       pl_mem_cat_name((enum pl_mem_cat)l->left_cat));
            return 0;
        }
    }
    return 1;
}

/* No operation left in flight on the communicator pipe_new was given, after pipe_free: the
 * grader frees it then, and lib's pl_comm_free refuses one with operations in flight. */
static int judge_in_flight(const struct gr_obs *all, const int *idx, struct gr_why *why)
{
    const struct l6_obs *o = CASE(all);
    enum pipe_schedule k = (enum pipe_schedule)o->k;
    int p = o->p, m = o->m;
    for (int s = 0; s < p; s++) {
        const struct l6_obs *st = STAGE(all, idx, s);
        int n = st->in_flight, tag = st->unwaited_tag, peer = st->unwaited_peer;
        int type = st->unwaited_type;
        if (n <= 0) continue;
        gr_why_say(why, "%s, %d microbatches: after pipe_free stage %d still has %d "
                   "operation%s in flight on the communicator pipe_new was given, so it cannot be "
                   "freed (pl_comm_free refuses it): a pl_isend or pl_irecv whose handle was never "
                   "waited for", l6_sched_name(k), m, s, n, n > 1 ? "s" : "");
        if (type)
            gr_why_say(why, "in the last step, stage %d's %s with tag %d (%s %d) was never "
                       "waited for", s, type == PL_EV_ISEND ? "pl_isend" : "pl_irecv", tag,
                       type == PL_EV_ISEND ? "to rank" : "from rank", peer);
        gr_why_say(why, "until a wait completes it, a send may still read its buffer (on "
                   "GPUs the transfer runs on its own stream) and a receive may still write its "
                   "own: pl_wait every handle before its buffer is reused or freed, at the latest "
                   "before pipe_step returns (handout section 3.2)");
        return 0;
    }
    return 1;
}

/* The category other than activations that rose most above its level before the step. */
static int top_other_category(const struct l6_obs *st)
{
    int top = PL_MEM_WORK;
    for (int c = 0; c < PL_MEM_NCAT; c++)
        if (c != PL_MEM_ACTIV && st->cat_peak[c] > st->cat_peak[top]) top = c;
    return top;
}

/* Each stage's memory in the traced step, from the ledger, against figures computed from the
 * schedule's order (l6_sched_peak_acts: each microbatch's activations of a chunk held from its
 * forward until its backward is done): the activations at their peak exactly what the
 * order holds (within one boundary buffer), nothing left after the step, and the peak of
 * every category together at most those activations, the kit's own bookkeeping and
 * scratch, and max(v m, 4) + 2 boundary-sized buffers (two to receive into, and one per
 * microbatch and chunk for copies of what is sent or receives posted ahead: handout
 * section 6). */
static int judge_memory(const struct gr_obs *all, const int *idx, struct gr_why *why)
{
    const struct l6_obs *o = CASE(all);
    enum pipe_schedule k = (enum pipe_schedule)o->k;
    int p = o->p, v = o->v, m = o->m;
    double bnd = o->bnd;
    const char *rule = k == PIPE_1F1B
        ? "1F1B runs a forward only while the stage holds fewer than min(p - s, m) "
          "microbatches in flight and a backward otherwise, so a stage never holds more than "
          "p - s microbatches (handout section 5)"
        : k == PIPE_AFAB ? "AFAB holds at most the m microbatches of the step (handout section 4)"
        : k == PIPE_ZBH1 ? "ZB-H1 frees a microbatch's activations after its W, the last "
          "to read them, and what B kept for W with it; a W p - 1 slots after its forward keeps "
          "at most min(p, m) microbatches on a stage, and what B kept for W for at most s + 1 "
          "of them (handout section 9)"
        : "interleaved 1F1B frees a microbatch's activations of a chunk once that chunk's "
          "backward of it is done (once the gradient sent from them has gone, at the latest at "
          "the end of that step's exchange), as 1F1B does: stage s then holds at most its "
          "warm-up, 2(p - s - 1) + (v - 1)p chunk microbatches, plus one; on stage 0 about "
          "1 + (p-1)/(p v) times the p microbatches 1F1B holds there (handout section 8)";
    for (int s = 0; s < p; s++) {
        const struct l6_obs *st = STAGE(all, idx, s);
        char a[32], b[32], d[32], e[32];
        if (st->activ_left > 0) {
            gr_why_say(why, "%s, %d microbatches: stage %d still holds %s of activations "
                       "after pipe_step: free each microbatch's (pl_parts_acts_free) after its "
                       "%s%s",
                       l6_sched_name(k), m, s, pl_format_bytes(st->activ_left, a, sizeof a),
                       k == PIPE_ZBH1 ? "W, and run every W before pipe_step returns (handout "
                                        "section 9)" : "backward",
                       v > 1 ? ", once the gradient sent from them has gone (handout section 8)"
                         : "");
            return 0;
        }
        double per_stage = 0;
        for (int j = 0; j < v; j++) per_stage += st->chunk_acts[j];
        double acts = l6_sched_peak_acts(k, p, v, s, m, st->chunk_acts, st->chunk_wgrad);
        double kit = l6_sched_peak_acts(k, p, v, s, m, st->chunk_held, st->chunk_wgrad) +
                     st->kit_extra;
        int nbuf = (v * m > 4 ? v * m : 4) + 2;
        double allowed = kit + nbuf * bnd;
        if (st->activ_peak > acts + bnd) {
            gr_why_say(why, "%s, %d stages, %d microbatches: stage %d's activations peaked at %s, "
                       "%.2f microbatches of %s; the schedule holds at most %.2f there (%s)",
                       l6_sched_name(k), p, m, s, pl_format_bytes(st->activ_peak, a, sizeof a),
                       st->activ_peak / per_stage, pl_format_bytes(per_stage, b, sizeof b),
                       acts / per_stage, pl_format_bytes(acts, d, sizeof d));
            gr_why_say(why, "%s", rule);
            return 0;
        }
        if (st->activ_peak < acts - bnd) {
            gr_why_say(why, "%s, %d stages, %d microbatches: stage %d's activations peaked at "
                       "%.2f microbatches of %s, but the schedule's order holds %.2f there at "
                       "once (%s): every forward before the %s that frees it keeps its "
                       "activations (handout sections %s)", l6_sched_name(k), p, m, s,
                       st->activ_peak / per_stage, pl_format_bytes(per_stage, a, sizeof a),
                       acts / per_stage, pl_format_bytes(acts, b, sizeof b),
                       k == PIPE_ZBH1 ? "W" : "backward", k == PIPE_ZBH1 ? "9" : "4 and 5");
            return 0;
        }
        if (st->total_peak > allowed) {
            int top = top_other_category(st);
            char f[32];
            gr_why_say(why, "%s, %d stages, %d microbatch%s: stage %d held %s at its peak, every "
                       "category of the ledger together, %s more than the schedule allows (%s: "
                       "its activations in flight with the kit's own bookkeeping and scratch, and "
                       "max(v m, 4) + 2 = %d boundary-sized buffers of %s, to receive into and for "
                       "copies of what is sent); besides the activations, %s rose most (by %s)",
                       l6_sched_name(k), p, m, m > 1 ? "es" : "", s,
                       pl_format_bytes(st->total_peak, a, sizeof a),
                       pl_format_bytes(st->total_peak - allowed, b, sizeof b),
                       pl_format_bytes(allowed, d, sizeof d), nbuf,
                       pl_format_bytes(bnd, e, sizeof e),
                       pl_mem_cat_name((enum pl_mem_cat)top),
                       pl_format_bytes(st->cat_peak[top], f, sizeof f));
            gr_why_say(why, "a stage holds what its schedule keeps in flight, not a copy of "
                       "every microbatch's activations or scratch for the whole batch: free "
                       "scratch once its microbatch is done, and size it by one microbatch "
                       "(handout section 6)");
            return 0;
        }
    }
    return 1;
}

/* Every send of the traced step: to the next stage for an activation (even tag), the
 * previous for a gradient (odd tag), interleaved wrapping around from the last rank to the
 * first; tags PIPE_TAG_ACT/GRAD(j m + mb) for the sender's chunk j, each used once, and
 * only after that chunk's forward (backward) of mb ran, read from the marks before the
 * send; the activation's bytes; no collectives. */
static int judge_traffic(const struct gr_obs *all, const int *idx, struct gr_why *why)
{
    const struct l6_obs *o = CASE(all);
    enum pipe_schedule k = (enum pipe_schedule)o->k;
    int p = o->p, v = o->v, m = o->m;
    const char *name = l6_sched_name(k);
    char hb[32], x[24], chunk[32] = "";
    for (int s = 0; s < p; s++) {
        const struct l6_sent *e = &STAGE(all, idx, s)->sent;
        int grad = e->grad, tag = e->tag, mb = tag / 2 % m, j = tag / 2 / m;
        const char *what = grad ? "a gradient" : "an activation";
        switch (e->code) {
        case L6_T_NONE:
            continue;
        case L6_T_COLL:
            gr_why_say(why, "%s, %d microbatches: stage %d called a collective (%s): a pipeline "
                       "only sends to its neighbours", name, m, s,
                       pl_coll_kind_name((enum pl_coll_kind)e->kind));
            break;
        case L6_T_FAR:
            gr_why_say(why, "%s: stage %d sent a message (tag %d) to rank %d, which is not a "
                       "neighbouring stage: activations go to the next stage, gradients to the "
                       "previous one", name, s, tag, e->peer);
            break;
        case L6_T_PARITY:
            gr_why_say(why, "%s, %d microbatches: stage %d sent tag %d to stage %d, the %s "
                       "stage, so it carries %s; pipeline.h tags %s PIPE_TAG_%s(mb) = 2 mb%s, "
                       "an %s number. The receiver tells the two directions apart by the tag: "
                       "use the header's macros (handout section 3)", name, m, s, tag, e->peer,
                       grad ? "previous" : "next", what, grad ? "a gradient" : "an activation",
                       grad ? "GRAD" : "ACT", grad ? " + 1" : "", grad ? "odd" : "even");
            break;
        case L6_T_TAG:
            gr_why_say(why, "%s, %d microbatches: stage %d sent %s to stage %d with tag %d, %s",
                       name, m, s, what, e->peer, tag, tag >= 0 && tag < 2 * v * m
                       ? "a tag it had already used in this step: two microbatches' messages "
                         "can then be taken for each other"
                       : "not a tag pipeline.h gives it");
            gr_why_say(why, "microbatch i's activation goes with PIPE_TAG_ACT(i) = 2i and its "
                       "gradient with PIPE_TAG_GRAD(i) = 2i + 1 (handout section 3)");
            if (v > 1)
                gr_why_say(why, "interleaved, the sender's chunk j sends microbatch mb's "
                           "messages as \"microbatch\" j m + mb, PIPE_TAG_ACT(j * m + mb) and "
                           "PIPE_TAG_GRAD(j * m + mb): without the chunk, the %d chunks' "
                           "messages between the same two ranks share one tag (handout "
                           "section 8)", v);
            break;
        case L6_T_EARLY:
            if (v > 1) snprintf(chunk, sizeof chunk, " (chunk %d)", j);
            gr_why_say(why, "%s, %d microbatches: stage %d sent %s with tag %d, that of "
                       "microbatch %d%s, when it had not yet run that microbatch's %s (its last "
                       "operation was %s): a message carries the tag of the microbatch whose %s "
                       "it is, PIPE_TAG_%s(%s%d) (handout section 3)", name, m, s, what, tag, mb,
                       chunk, grad ? "backward" : "forward",
                       e->last.phase ? op_text(&e->last, x, sizeof x) : "none",
                       grad ? "gradient" : "activation", grad ? "GRAD" : "ACT",
                       v > 1 ? "j m + " : "", mb);
            break;
        case L6_T_BYTES:
            gr_why_say(why, "%s: stage %d's message to stage %d with tag %d has %.0f bytes; one "
                       "microbatch's activation is B/m x T x d_model floats = %.0f bytes (%s)",
                       name, s, e->peer, tag, e->bytes, o->bnd,
                       pl_format_bytes(o->bnd, hb, sizeof hb));
            break;
        default:
            gr_why_say(why, "%s, %d microbatches: stage %d sent %d messages; it sends one per "
                       "microbatch across each boundary of its chunks, %d", name, m, s,
                       e->nsend, e->want);
        }
        return 0;
    }
    return 1;
}
/* Pipeline g's ranks in stage order. */
static void stage_ranks(const struct gr_obs *all, int g, int *idx)
{
    for (int r = 0; r < all->nranks; r++) {
        const struct l6_obs *o = gr_obs_rank(all, r);
        if (o->pipe == g && o->stage >= 0 && o->stage < L6_MAX_STAGES) idx[o->stage] = r;
    }
}

/* One part of case i: the partition on the first case, the others on every pipeline. */
int l6_judge(int i, const char *part, const struct gr_obs *all, struct gr_why *why)
{
    const struct l6_obs *o = CASE(all);
    int idx[L6_MAX_STAGES] = {0};
    if (!strcmp(part, "correct")) return l6_judge_correct(all, why);
    if (!strcmp(part, "balance")) {
        int first[L6_MAX_STAGES], last[L6_MAX_STAGES];
        stage_ranks(all, 0, idx);
        for (int s = 0; s < o->p; s++)
            first[s] = STAGE(all, idx, s)->first, last[s] = STAGE(all, idx, s)->last;
        return i > 0 || (l6_part_judge_lab(first, last, o->p, &o->cfg, why)
                         && l6_part_judge_others(&o->cfg, o->other_first, o->other_last, why));
    }
    int which = !strcmp(part, "schedule") ? 0 : !strcmp(part, "bubble") ? 1
                : !strcmp(part, "memory") ? 2 : !strcmp(part, "traffic") ? 3 : -1;
    if (which < 0) {
        gr_why_say(why, "Lab 6 has no part '%s' (correct, balance, schedule, bubble, memory, "
                   "traffic)", part);
        return 0;
    }
    for (int g = 0; g < o->pipes; g++) {
        stage_ranks(all, g, idx);
        int ok = which == 0   ? judge_schedule(all, idx, why)
                 : which == 1 ? judge_bubble(all, g, why)
                 : which == 2 ? judge_memory(all, idx, why) && judge_held(all, idx, why)
                              : judge_in_flight(all, idx, why) && judge_traffic(all, idx, why);
        if (ok) continue;
        if (o->pipes > 1) {
            struct l6_grid gr;
            char who[160];
            l6_grid_make(&gr, all->nranks, o->pipes);
            gr_why_say(why, "in: pipeline %d of %d, %s (stage s is rank s of its communicator)",
                       g, o->pipes, l6_grid_text(&gr, g, who, sizeof who));
        }
        return 0;
    }
    return 1;
}
