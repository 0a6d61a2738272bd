/* judge.c: Lab 6's judges of one pipeline's trace and ledger (rank 0; lab06.h): the order of
 * F and B each stage ran, the bubble of that order replayed, each stage's memory, and every
 * message's peer, tag and bytes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab06.h"
#include "units.h"

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
        return "1F1B on stage s: min(p - s - 1, m) warm-up forwards, then F of the next "
               "microbatch and B of the oldest in turn, then the remaining backwards (handout "
               "section 5)";
    return "interleaved 1F1B: p microbatches through chunk 0, the same through chunk 1, ...; "
           "a warm-up of 2(p - s - 1) + (v - 1)p forwards (all of them when m = p), then one "
           "forward one backward, backwards through the chunks in reverse (handout section 8)";
}

static int judge_schedule(enum pipe_schedule k, int m, const struct l6_outcome *o)
{
    const struct pl_merged_trace *t = &o->trace;
    int p = t->nranks, v = o->chunks.n / p, nops = 2 * v * m;
    struct l6_sched_op want[L6_MAX_OPS], got[L6_MAX_OPS];
    for (int s = 0; s < p; s++) {
        int chunk_first[L6_MAX_STAGES];
        for (int j = 0; j < v; j++) chunk_first[j] = o->chunks.first[j * p + s];
        l6_sched_order(k, p, v, s, m, want);
        int n = l6_sched_read_marks(t->events[s], t->nevents[s], chunk_first, v, got, L6_MAX_OPS);
        int bad = n == nops ? -1 : (n < nops ? n : nops);
        for (int i = 0; i < nops && i < n && bad < 0; i++)
            if (got[i].phase != want[i].phase || got[i].mb != want[i].mb
                || got[i].chunk != want[i].chunk)
                bad = i;
        if (bad < 0) continue;
        char a[1024], b[1024];
        gr_say("schedule", "%s, %d stages, %d microbatches: stage %d ran %s; the schedule is %s",
               l6_sched_name(k), p, m, s,
               ops_text(got, n < L6_MAX_OPS ? n : L6_MAX_OPS, a, sizeof a),
               ops_text(want, nops, b, sizeof b));
        if (bad < n && bad < nops) {
            char x[24], y[24];
            gr_say("schedule",
                   "the first difference is operation %d: %s where the schedule has "
                   "%s",
                   bad + 1, op_text(&got[bad], x, sizeof x), op_text(&want[bad], y, sizeof y));
        }
        gr_say("schedule", "%s", schedule_rule(k));
        return 0;
    }
    return 1;
}

/* Idle fraction of the trace replayed with uniform stage times against the schedule as
 * defined, replayed the same way (and, for AFAB and 1F1B, against (p-1)/(m+p-1)). */
static int judge_bubble(enum pipe_schedule k, int m, const struct l6_outcome *o)
{
    const struct pl_merged_trace *t = &o->trace;
    int p = t->nranks, v = o->chunks.n / p;
    struct pl_merged_trace uni, ideal;
    l6_sched_uniform_copy(t, v, &uni);
    l6_sched_ideal_trace(k, p, v, m, 1.0, &ideal);
    double got = 0, best = 0;
    double formula = k == PIPE_INTERLEAVED ? -1 : l6_sched_bubble_formula(k, p, m);
    char err[512];
    int ok = 0;
    if (l6_sched_replay_bubble(&uni, NULL, NULL, &got, err, sizeof err) != 0) {
        gr_say("bubble", "%s, %d microbatches: your step's trace could not be replayed: %s",
               l6_sched_name(k), m, err);
    } else if (l6_sched_replay_bubble(&ideal, NULL, NULL, &best, err, sizeof err) != 0) {
        gr_say("bubble", "the ideal %s could not be replayed: %s", l6_sched_name(k), err);
    } else if (fabs(got - best) > L6_BUBBLE_TOL ||
               (formula >= 0 && fabs(best - formula) > L6_BUBBLE_TOL)) {
        if (formula >= 0)
            gr_say("bubble", "%s, %d stages, %d microbatches, uniform stage times (F %g, B %g, "
                   "free links): your stages idle %.4f of the step; the schedule idles "
                   "(p-1)/(m+p-1) = %d/%d = %.4f", l6_sched_name(k), p, m, L6_SCHED_UNIT_F,
                   L6_SCHED_UNIT_B, got, p - 1, m + p - 1, formula);
        else
            gr_say("bubble", "%s, %d stages, %d chunks each, %d microbatches, uniform chunk "
                   "times (F %g/%d, B %g/%d, free links): your stages idle %.4f of the step; "
                   "the schedule as defined idles %.4f", l6_sched_name(k), p, v, m, L6_SCHED_UNIT_F,
                   v, L6_SCHED_UNIT_B, v, got, best);
        gr_say("bubble", "%s", got > best ? "a stage waits where the schedule lets it work: a "
               "blocking send or a receive posted too early holds it (handout section 3.2)"
               : "less idle time than the schedule allows: is some work missing from the trace?");
    } else {
        ok = 1;
    }
    /* the same idle time can hide a stage that works late: every operation of AFAB and 1F1B
     * must start when the schedule starts it (interleaved, whose exchanges wait for a
     * step's messages together, is held to its idle time only) */
    int s = 0;
    struct l6_sched_op op;
    double t_got = 0, t_want = 0;
    if (ok && v == 1
        && l6_sched_first_late(k, p, v, m, t, &uni, o->chunks.first, &s, &op, &t_got, &t_want,
                            err, sizeof err) > 0) {
        char x[24];
        gr_say("bubble", "%s, %d stages, %d microbatches, uniform stage times (F %g, B %g, "
               "free links): stage %d starts %s at %g, where the schedule starts it at %g: the "
               "stage works in another order than the schedule, or waits where it could work, "
               "so the pipeline's critical path runs through other operations (handout "
               "section%s)", l6_sched_name(k), p, m, L6_SCHED_UNIT_F, L6_SCHED_UNIT_B, s,
               op_text(&op, x, sizeof x), t_got, t_want,
               k == PIPE_1F1B ? "s 5 and 3.2: the warm-up is min(p - s - 1, m) forwards"
                              : "s 4 and 3.2");
        ok = 0;
    }
    pl_trace_merged_free(&uni);
    pl_trace_merged_free(&ideal);
    return ok;
}

/* What the code holds from step to step and after pipe_free: not more live allocations after
 * every step than after the one before (a buffer allocated once, on first use, is no leak),
 * and nothing after pipe_free that it did not hold before pipe_new. */
static int judge_held(enum pipe_schedule k, int m, const struct l6_outcome *o)
{
    int p = o->trace.nranks;
    char a[32];
    for (int s = 0; s < p; s++) {
        const struct l6_lifetime *l = &o->life[s];
        int every = 1;
        for (int i = 1; i < L6_K_STEPS; i++)
            every &= l->live[i - 1] >= 0 && l->live[i] > l->live[i - 1];
        if (every) {
            gr_say("memory",
                   "%s, %d microbatches: stage %d held more live allocations after "
                   "every step than after the one before (%.0f after step 0, %.0f after step "
                   "%d): pipe_step keeps something it allocates, a receive buffer per "
                   "microbatch perhaps, so memory grows until a long training run runs out. "
                   "Free what a step allocates before pipe_step returns; what lasts from step "
                   "to step is allocated once, in pipe_new, and freed in pipe_free (pipeline.h, "
                   "handout section 3)",
                   l6_sched_name(k), m, s, l->live[0], l->live[L6_K_STEPS - 1], L6_K_STEPS - 1);
            return 0;
        }
        if (l->outside.where) {
            gr_say("memory", "%s, %d microbatches: stage %d gave %s a buffer that lies %s: "
                   "what a stage sends and receives is memory the ledger counts, from "
                   "pl_comm_buf_alloc (device memory on the GPU build, where NCCL reads and "
                   "writes it; an array in the program is host memory it cannot use), "
                   "freed before pipe_step returns or, if kept, in pipe_free (pipeline.h, "
                   "handout section 3)", l6_sched_name(k), m, s, l->outside.call,
                   l6_outside_where(l->outside.where));
            return 0;
        }
        if (l->left > 0) {
            gr_say("memory", "%s, %d microbatches: after pipe_free stage %d still holds %s of "
                   "%s that it did not hold before pipe_new: pipe_free frees everything "
                   "pipe_new and pipe_step allocated (pipeline.h, handout section 3)",
                   l6_sched_name(k), m, s, pl_format_bytes(l->left, a, sizeof a),
                   pl_mem_cat_name((enum pl_mem_cat)l->left_cat));
            return 0;
        }
    }
    return 1;
}

/* An asynchronous send or receive of stage s's traced step that was never waited for: its
 * tag and peer into *tag and *peer, the event type as the result (0: none found). */
static int unwaited(const struct pl_merged_trace *t, int s, int *tag, int *peer)
{
    for (int i = 0; i < t->nevents[s]; i++) {
        const struct pl_event *e = &t->events[s][i];
        if (e->type != PL_EV_ISEND && e->type != PL_EV_IRECV) continue;
        int waited = 0;
        for (int j = i + 1; j < t->nevents[s] && !waited; j++)
            waited = t->events[s][j].type == PL_EV_WAIT && t->events[s][j].handle == e->handle;
        if (!waited) {
            *tag = e->tag, *peer = e->peer;
            return e->type;
        }
    }
    return 0;
}

/* No operation left in flight on the communicator pipe_new was given, after pipe_free: the
 * grader frees it then, and lib's pl_comm_free refuses one with operations in flight. */
static int judge_in_flight(enum pipe_schedule k, int m, const struct l6_outcome *o)
{
    int p = o->trace.nranks;
    for (int s = 0; s < p; s++) {
        int n = o->life[s].in_flight, tag = 0, peer = 0, type;
        if (n <= 0) continue;
        gr_say("traffic", "%s, %d microbatches: after pipe_free stage %d still has %d "
               "operation%s in flight on the communicator pipe_new was given, so it cannot be "
               "freed (pl_comm_free refuses it): a pl_isend or pl_irecv whose handle was never "
               "waited for", l6_sched_name(k), m, s, n, n > 1 ? "s" : "");
        if ((type = unwaited(&o->trace, s, &tag, &peer)))
            gr_say("traffic", "in the last step, stage %d's %s with tag %d (%s %d) was never "
                   "waited for", s, type == PL_EV_ISEND ? "pl_isend" : "pl_irecv", tag,
                   type == PL_EV_ISEND ? "to rank" : "from rank", peer);
        gr_say("traffic", "until a wait completes it, a send may still read its buffer (on "
               "GPUs the transfer runs on its own stream) and a receive may still write its "
               "own: pl_wait every handle before its buffer is reused or freed, at the latest "
               "before pipe_step returns (handout section 3.2)");
        return 0;
    }
    return 1;
}

/* What the kit itself holds for one microbatch on parts [first, last] between its forward
 * and its backward, every category together (*held: the activations and their bookkeeping),
 * and how far above that its forward and backward reach for scratch of their own
 * (*transient), measured on a scratch copy of the parts as pl_parts_acts_bytes measures the
 * activations. */
static void kit_stage_bytes(const struct pl_model_config *c, int first, int last, int B,
                            int T, double *held, double *transient)
{
    int was = pl_trace_enabled();
    pl_trace_enable(0);
    struct pl_model *m = pl_model_new(c, PL_MODEL_PARAMS | PL_MODEL_GRADS);
    size_t N = (size_t)B * (size_t)T, n = pl_parts_boundary_numel(c, B, T);
    int *tok = pl_mem_alloc(N * sizeof(int), PL_MEM_WORK, PL_DEVICE, "grader kit tokens");
    float *x = pl_mem_alloc(n * sizeof(float), PL_MEM_WORK, PL_DEVICE, "grader kit input");
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1;
    struct pl_parts_acts a;
    struct pl_mem_stats before, mid, after;
    pl_mem_reset_peak();
    pl_mem_get_stats(&before);
    pl_parts_forward(m, first, last, 0, &a, &ctx, tok, tok, B, T, x);
    pl_mem_get_stats(&mid);
    pl_parts_backward(m, &a, &ctx, x);
    pl_mem_get_stats(&after);
    *held = (double)mid.current_total - (double)before.current_total;
    *transient = (double)after.peak_total - (double)before.current_total - *held;
    pl_parts_acts_free(&a);
    pl_mem_free(x);
    pl_mem_free(tok);
    pl_model_free(m);
    pl_trace_enable(was);
}

/* The category other than activations that rose most above its level before the step. */
static int top_other_category(const struct l6_stage_stats *st)
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
static int judge_memory(enum pipe_schedule k, int m, const struct l6_outcome *o,
                        const struct pl_model_config *c)
{
    int p = o->trace.nranks, v = o->chunks.n / p, Bmb = L6_GLOBAL_B / m, T = c->seq_len;
    double bnd = 4.0 * (double)pl_parts_boundary_numel(c, Bmb, T);
    const char *rule = k == PIPE_1F1B
        ? "1F1B bounds the warm-up by min(p - s - 1, m) forwards and runs a backward after "
          "every later forward, so a stage never holds more than p - s microbatches (handout "
          "section 5)"
        : k == PIPE_AFAB ? "AFAB holds at most the m microbatches of the step (handout section 4)"
        : "interleaved 1F1B frees a microbatch's activations of a chunk once that chunk's "
          "backward of it is done (once the gradient sent from them has gone, at the latest at "
          "the end of that step's exchange), as 1F1B does: stage s then holds at most its "
          "warm-up, 2(p - s - 1) + (v - 1)p chunk microbatches, plus one; on stage 0 about "
          "1 + (p-1)/(p v) times the p microbatches 1F1B holds there (handout section 8)";
    for (int s = 0; s < p; s++) {
        const struct l6_stage_stats *st = &o->st[s];
        char a[32], b[32], d[32], e[32];
        if (st->activ_left > 0) {
            gr_say("memory", "%s, %d microbatches: stage %d still holds %s of activations after "
                   "pipe_step: free each microbatch's (pl_parts_acts_free) after its backward%s",
                   l6_sched_name(k), m, s, pl_format_bytes(st->activ_left, a, sizeof a),
                   v > 1 ? ", once the gradient sent from them has gone (handout section 8)"
                         : "");
            return 0;
        }
        double chunk[L6_MAX_STAGES], held[L6_MAX_STAGES], kit_extra = 0, per_stage = 0;
        for (int j = 0; j < v; j++) {
            int f = o->chunks.first[j * p + s], l = o->chunks.last[j * p + s];
            double tr;
            chunk[j] = (double)pl_parts_acts_bytes(c, f, l, Bmb, T);
            per_stage += chunk[j];
            kit_stage_bytes(c, f, l, Bmb, T, &held[j], &tr);
            if (tr > kit_extra) kit_extra = tr;
        }
        double acts = l6_sched_peak_acts(k, p, v, s, m, chunk);
        double kit = l6_sched_peak_acts(k, p, v, s, m, held) + kit_extra;
        int nbuf = (v * m > 4 ? v * m : 4) + 2;
        double allowed = kit + nbuf * bnd;
        if (st->activ_peak > acts + bnd) {
            gr_say("memory", "%s, %d stages, %d microbatches: stage %d's activations peaked at %s, "
                   "%.2f microbatches of %s; the schedule holds at most %.2f there (%s)",
                   l6_sched_name(k), p, m, s, pl_format_bytes(st->activ_peak, a, sizeof a),
                   st->activ_peak / per_stage, pl_format_bytes(per_stage, b, sizeof b),
                   acts / per_stage, pl_format_bytes(acts, d, sizeof d));
            gr_say("memory", "%s", rule);
            return 0;
        }
        if (st->activ_peak < acts - bnd) {
            gr_say("memory", "%s, %d stages, %d microbatches: stage %d's activations peaked at "
                   "%.2f microbatches of %s, but the schedule's order holds %.2f there at once "
                   "(%s): every forward before the backward that frees it keeps its activations "
                   "(handout sections 4 and 5)", l6_sched_name(k), p, m, s,
                   st->activ_peak / per_stage, pl_format_bytes(per_stage, a, sizeof a),
                   acts / per_stage, pl_format_bytes(acts, b, sizeof b));
            return 0;
        }
        if (st->total_peak > allowed) {
            int top = top_other_category(st);
            char f[32];
            gr_say("memory", "%s, %d stages, %d microbatch%s: stage %d held %s at its peak, every "
                   "category of the ledger together, %s more than the schedule allows (%s: "
                   "its activations in flight with the kit's own bookkeeping and scratch, and "
                   "max(v m, 4) + 2 = %d boundary-sized buffers of %s, to receive into and for "
                   "copies of what is sent); besides the activations, %s rose most (by %s)",
                   l6_sched_name(k), p, m, m > 1 ? "es" : "", s,
                   pl_format_bytes(st->total_peak, a, sizeof a),
                   pl_format_bytes(st->total_peak - allowed, b, sizeof b),
                   pl_format_bytes(allowed, d, sizeof d), nbuf, pl_format_bytes(bnd, e, sizeof e),
                   pl_mem_cat_name((enum pl_mem_cat)top),
                   pl_format_bytes(st->cat_peak[top], f, sizeof f));
            gr_say("memory", "a stage holds what its schedule keeps in flight, not a copy of "
                   "every microbatch's activations or scratch for the whole batch: free scratch "
                   "once its microbatch is done, and size it by one microbatch (handout "
                   "section 6)");
            return 0;
        }
    }
    return 1;
}

/* Which direction a send to `peer` goes from stage s: 0 forward (an activation), 1 back (a
 * gradient), -1 not to a neighbour. Interleaved the pipeline wraps around, and on 2 ranks
 * both neighbours are the same rank: then the tag's parity says which it is. */
static int send_direction(int s, int p, int v, int peer, int tag)
{
    int next = v > 1 ? (s + 1) % p : s + 1, prev = v > 1 ? (s + p - 1) % p : s - 1;
    if (peer == next && peer == prev) return tag >= 0 && tag % 2;
    return peer == next ? 0 : peer == prev ? 1 : -1;
}

/* Every send of the traced step: to the next stage for an activation (even tag), the
 * previous for a gradient (odd tag), interleaved wrapping around from the last rank to the
 * first; tags PIPE_TAG_ACT/GRAD(j m + mb) for the sender's chunk j, each used once, and
 * only after that chunk's forward (backward) of mb ran, read from the marks before the
 * send; the activation's bytes; no collectives. */
static int judge_traffic(enum pipe_schedule k, int m, const struct l6_outcome *o,
                         const struct pl_model_config *c)
{
    const struct pl_merged_trace *t = &o->trace;
    int p = t->nranks, v = o->chunks.n / p, nc = o->chunks.n;
    double bytes = 4.0 * (double)pl_parts_boundary_numel(c, L6_GLOBAL_B / m, c->seq_len);
    char hb[32];
    for (int s = 0; s < p; s++) {
        int seen[2 * L6_MAX_OPS] = {0}, ran[2 * L6_MAX_OPS] = {0}, nsend = 0, want = 0;
        int chunk_first[L6_MAX_STAGES];
        struct l6_sched_op last = {0, 0, 0};
        for (int j = 0; j < v; j++) chunk_first[j] = o->chunks.first[j * p + s];
        for (int j = 0; j < v; j++) want += m * ((j * p + s > 0) + (j * p + s < nc - 1));
        for (int i = 0; i < t->nevents[s]; i++) {
            const struct pl_event *e = &t->events[s][i];
            struct l6_sched_op op;
            if (l6_sched_read_marks(e, 1, chunk_first, v, &op, 1) == 1) {
                int at = op.chunk * m + op.mb;
                if (op.chunk >= 0 && op.mb >= 0 && op.mb < m) ran[2 * at + (op.phase == 'B')] = 1;
                last = op;
                continue;
            }
            if (e->type == PL_EV_ISSUE) {
                gr_say("traffic", "%s, %d microbatches: stage %d called a collective (%s): a "
                       "pipeline only sends to its neighbours", l6_sched_name(k), m, s,
                       pl_coll_kind_name(e->kind));
                return 0;
            }
            if (e->type != PL_EV_SEND && e->type != PL_EV_ISEND) continue;
            nsend++;
            int grad = send_direction(s, p, v, e->peer, e->tag);
            const char *what = grad ? "a gradient" : "an activation";
            if (grad < 0) {
                gr_say("traffic", "%s: stage %d sent a message (tag %d) to rank %d, which is not "
                       "a neighbouring stage: activations go to the next stage, gradients to "
                       "the previous one", l6_sched_name(k), s, e->tag, e->peer);
                return 0;
            }
            if (e->tag >= 0 && e->tag % 2 != grad) {
                gr_say("traffic", "%s, %d microbatches: stage %d sent tag %d to stage %d, the "
                       "%s stage, so it carries %s; pipeline.h tags %s PIPE_TAG_%s(mb) = 2 mb%s, "
                       "an %s number. The receiver tells the two directions apart by the tag: "
                       "use the header's macros (handout section 3)", l6_sched_name(k), m, s,
                       e->tag, e->peer, grad ? "previous" : "next", what,
                       grad ? "a gradient" : "an activation", grad ? "GRAD" : "ACT",
                       grad ? " + 1" : "", grad ? "odd" : "even");
                return 0;
            }
            if (e->tag < 0 || e->tag >= 2 * v * m || seen[e->tag]++) {
                gr_say("traffic", "%s, %d microbatches: stage %d sent %s to stage %d with tag %d, "
                       "%s", l6_sched_name(k), m, s, what, e->peer,
                       e->tag, e->tag >= 0 && e->tag < 2 * v * m
                       ? "a tag it had already used in this step: two microbatches' messages "
                         "can then be taken for each other"
                       : "not a tag pipeline.h gives it");
                gr_say("traffic", "microbatch i's activation goes with PIPE_TAG_ACT(i) = 2i and "
                       "its gradient with PIPE_TAG_GRAD(i) = 2i + 1 (handout section 3)");
                if (v > 1)
                    gr_say("traffic", "interleaved, the sender's chunk j sends microbatch mb's "
                           "messages as \"microbatch\" j m + mb, PIPE_TAG_ACT(j * m + mb) and "
                           "PIPE_TAG_GRAD(j * m + mb): without the chunk, the %d chunks' "
                           "messages between the same two ranks share one tag (handout "
                           "section 8)", v);
                return 0;
            }
            if (!ran[e->tag]) {
                int mb = e->tag / 2 % m, j = e->tag / 2 / m;
                char chunk[32] = "", x[24];
                if (v > 1) snprintf(chunk, sizeof chunk, " (chunk %d)", j);
                gr_say("traffic", "%s, %d microbatches: stage %d sent %s with tag %d, that of "
                       "microbatch %d%s, when it had not yet run that microbatch's %s (its "
                       "last operation was %s): a message carries the tag of the microbatch "
                       "whose %s it is, PIPE_TAG_%s(%s%d) (handout section 3)", l6_sched_name(k),
                       m, s, what,
                       e->tag, mb, chunk, grad ? "backward" : "forward",
                       last.phase ? op_text(&last, x, sizeof x) : "none", grad ? "gradient"
                       : "activation", grad ? "GRAD" : "ACT", v > 1 ? "j m + " : "", mb);
                return 0;
            }
            if (e->bytes != bytes) {
                gr_say("traffic", "%s: stage %d's message to stage %d with tag %d has %.0f bytes; "
                       "one microbatch's activation is B/m x T x d_model floats = %.0f bytes "
                       "(%s)", l6_sched_name(k), s, e->peer, e->tag, e->bytes, bytes,
                       pl_format_bytes(bytes, hb, sizeof hb));
                return 0;
            }
        }
        if (nsend != want) {
            gr_say("traffic", "%s, %d microbatches: stage %d sent %d messages; it sends one per "
                   "microbatch across each boundary of its chunks, %d", l6_sched_name(k), m, s,
                   nsend, want);
            return 0;
        }
    }
    return 1;
}
/* One judge of the trace and the ledger on pipeline g's outcome. */
int l6_judge_pipe(enum pipe_schedule k, int m, const char *part, const struct l6_outcome *o,
                  const struct pl_model_config *c)
{
    if (!strcmp(part, "schedule")) return judge_schedule(k, m, o);
    if (!strcmp(part, "bubble")) return judge_bubble(k, m, o);
    if (!strcmp(part, "memory")) return judge_memory(k, m, o, c) && judge_held(k, m, o);
    return judge_in_flight(k, m, o) && judge_traffic(k, m, o, c);
}
