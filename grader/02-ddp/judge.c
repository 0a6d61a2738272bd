/* judge.c: every reason of Lab 2's parts correct, traffic and overlap, worded from the
 * figures each rank of a case recorded (struct l2_obs, gathered by the harness): no MPI,
 * nothing read but the arguments, so tests/judge/02-ddp.c runs it alone. Tensors are named
 * from the layout of the model the observation records. The figures of a check are rank 0's
 * where one rank found them for all, each rank's own where a field of struct l2_obs says so:
 * then the judge names the rank. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab02.h"

static const struct l2_obs *obs_of(const struct gr_obs *all, int r)
{
    return gr_obs_rank(all, r);
}

static const char *tensor_name(const struct pl_model_layout *lay, size_t i)
{
    const struct pl_param_desc *t = l2_tensor_at(lay, i);
    return t ? t->name : "?";
}

/* ---- part traffic ---- */

/* A step's bytes: what the rank sent against the all-reduce of the gradient, and the likeliest
 * reason. */
static void step_bytes(const struct l2_tfig *f, double psi, struct gr_why *why)
{
    char a[32];
    gr_why_say(why, "step %d: rank %d sent %.0f B (%.0f B of it in all-reduces); the all-reduce "
               "of the gradient of Psi = %.0f parameters sends 2(n-1)/n x 4 Psi = %.0f B (%s) "
               "per rank on %d ranks", f->step + 1, f->rank, f->got, f->ar, psi, f->want,
               pl_format_bytes(f->want, a, sizeof a), f->n);
    if (f->n < f->world &&
        fabs(f->got - pl_ring_bytes_sent(PL_ALL_REDUCE, f->world, 4.0 * psi)) < 1e-9 * f->got)
        gr_why_say(why, "that is an all-reduce over all %d ranks, not over the group of %d "
                   "ddp_new was given: every collective goes on d->comm, never "
                   "pl_comm_world()", f->world, f->n);
    else if (f->got < f->want)
        gr_why_say(why, "less than the whole gradient: some gradients were not all-reduced, "
                   "or not with pl_all_reduce");
    else if (fabs(f->got / f->want - round(f->got / f->want)) < 1e-9)
        gr_why_say(why, "that is %.0f times the gradient: is it all-reduced more than once per "
                   "step?", f->got / f->want);
}

/* An all-reduce not in place over its range of m->grads: what ddp.h asks, and what the copy
 * costs. */
static void staged_words(const struct l2_case *c, const struct l2_range_fig *f, double psi,
                         const char *r, const char *on, struct gr_why *why)
{
    char a[32], b[32], into[320];
    if (f->staged == 3) {
        gr_why_say(why, "%sstep %d: the count exchange, an all-reduce of %zu float%s outside "
                   "m->grads, used a buffer that is not comm memory: the CPU build's MPI reads "
                   "any address, the GPU build's collectives need device memory (comm.h), a "
                   "buffer of pl_comm_buf_alloc", on, f->step + 1, f->count,
                   f->count == 1 ? "" : "s");
        return;
    }
    if (f->staged == 1 && f->recv_in_grads)
        snprintf(into, sizeof into, "into gradient elements %s, from a buffer of its own", r);
    else if (f->staged == 1)
        snprintf(into, sizeof into, "from gradient elements %s, into a buffer of its own", r);
    else
        snprintf(into, sizeof into, "from and into a buffer of its own, outside m->grads");
    gr_why_say(why, "%sstep %d: an all-reduce of %zu floats went %s: each all-reduce runs in "
               "place over its own range of m->grads, send and receive both m->grads + offset "
               "(ddp.h; handout section%s: the flat buffer makes a range of it the message, no "
               "copy)", on, f->step + 1, f->count, into, c->opt.variant == DDP_NAIVE
               ? "s 4 and 5" : " 5");
    gr_why_say(why, "the copy costs memory, a staging buffer as large as what it holds (%s for "
               "this call, up to 4 Psi = %s for the whole gradient), and time, one more pass "
               "that reads and writes the gradients every step%s", pl_format_bytes(4.0 *
               (double)f->count, a, sizeof a), pl_format_bytes(4.0 * psi, b, sizeof b),
               c->opt.variant == DDP_OVERLAPPED ? ", in the hook, before the all-reduce can "
               "start" : ", before the all-reduce can start");
}

/* An all-reduce outside the step's ranges, or not in place (calls.c's figures). */
static void call_range(const struct pl_model_layout *lay, const struct l2_case *c,
                       const struct l2_range_fig *f, double psi, struct gr_why *why)
{
    int naive = c->opt.variant == DDP_NAIVE;
    const char *what = naive ? "tensor" : "bucket";
    char r[256], o[320] = "", b[256], on[32] = "";
    l2_range_text(lay, f->off, f->count, r, sizeof r);
    if (f->rank != 0) snprintf(on, sizeof on, "on rank %d: ", f->rank);
    if (f->staged) {
        staged_words(c, f, psi, r, on, why);
        return;
    }
    if (f->overlap >= 0) {
        l2_range_text(lay, f->ooff, f->olen, b, sizeof b);
        snprintf(o, sizeof o, " (it overlaps %s %d, %s)", what, f->overlap, b);
    }
    gr_why_say(why, "%sstep %d: an all-reduce covered gradient elements %s, %s%s; each "
               "all-reduce covers exactly one %s, in place: %s", on, f->step + 1, r,
               f->repeated ? "a range already all-reduced in this step" : "which is not one of "
               "the step's ranges", o, what, naive ? "m->grads + tensors[t].offset, "
               "tensors[t].numel floats (handout section 4)" : "m->grads + bucket_off[b], "
               "bucket_len[b] floats, the same ranges ddp_bucket_range reports (handout "
               "section 5)");
}

/* The reason of a traffic failure f of case c, one gr_why_say per line. */
static void traffic_words(const struct l2_obs *o, const struct pl_model_layout *lay,
                          const struct l2_tfig *f, struct gr_why *why)
{
    const struct l2_case *c = &o->c;
    char a[32], b[32], g[64] = "";
    switch (f->code) {
    case L2_T_STEP_BYTES: step_bytes(f, (double)o->numel, why); break;
    case L2_T_STEP_CALLS:
        if (f->calls > f->want_calls + 1) l2_count_words(o, f, why);
        else if (c->opt.variant == DDP_NAIVE)
            gr_why_say(why, "step %d: rank %d made %ld all-reduce calls and %ld other collective "
                       "calls; naive DDP makes one all-reduce per parameter tensor: %ld calls "
                       "(handout section 4)", f->step + 1, f->rank, f->calls, f->other,
                       f->want_calls);
        else
            gr_why_say(why, "step %d: rank %d made %ld all-reduce calls and %ld other collective "
                       "calls; bucketed DDP makes one all-reduce per bucket: %ld calls for "
                       "bucket_bytes %zu (handout section 5)", f->step + 1, f->rank, f->calls,
                       f->other, f->want_calls, c->opt.bucket_bytes);
        break;
    case L2_T_BROADCAST:
        if (c->groups > 1)
            snprintf(g, sizeof g, ", in each of the %d groups of %d", c->groups, f->n);
        gr_why_say(why, "ddp_new: the ranks sent %s in broadcasts in all; broadcasting the Psi "
                   "= %zu parameters of rank 0 once sends (n-1) x 4 Psi%s = %s in all (handout "
                   "section 3)", pl_format_bytes(f->got, a, sizeof a), o->numel, g,
                   pl_format_bytes(f->want, b, sizeof b));
        if (c->groups > 1)
            gr_why_say(why, "each group starts from its own rank 0's parameters: the group "
                       "ddp_new was given, never the world (handout section 3)");
        break;
    case L2_T_PLAN: l2_plan_words(lay, &f->plan, why); break;
    case L2_T_MICROBATCH:
        gr_why_say(why, "step %d, microbatch %d of %d: rank %d sent %s in %ld collective calls. "
                   "Only the last microbatch may communicate: accumulate the gradients locally "
                   "and all-reduce once per step (handout section 7)", f->step + 1, f->mb + 1,
                   c->microbatches, f->rank, pl_format_bytes(f->got, a, sizeof a), f->calls);
        break;
    case L2_T_RANGES: call_range(lay, c, &f->range, (double)o->numel, why); break;
    case L2_T_COUNT_AGAIN: l2_count_words(o, f, why); break;
    default: break;
    }
}

/* The graded model (here, not in cases.c: the judge test builds the layout the judge names
 * tensors from with it, and links judge.c alone). */
struct pl_model_config l2_config(uint64_t seed)
{
    struct pl_model_config c = pl_model_config_default();
    c.vocab = PL_BYTE_VOCAB;
    c.d_model = 32;
    c.n_layers = 4;
    c.n_heads = 2;
    c.d_ff = 64;
    c.seq_len = 16;
    c.dropout = 0.0f;
    c.n_experts = 0;
    c.seed = seed;
    return c;
}

/* ---- part correct ---- */

/* The scale of a wrong gradient: the ranks, the microbatches, the world's size. */
static void grads_scale(const struct l2_obs *o, const struct l2_gfig *g, struct gr_why *why)
{
    const struct l2_case *c = &o->c;
    int n = l2_group_size(c, o->nranks), world = o->nranks;
    double ratio = g->ratio;
    int as_ranks = n > 1 && fabs(ratio - n) < 0.02 * n;
    if (c->groups > 1 && fabs(ratio * world - n) < 0.02 * n) {
        gr_why_say(why, "your gradient is %.3g times the reference's, %d/%d: the sum over a group "
                   "of %d ranks divided by all %d ranks of the job: the ranks averaged over are "
                   "the group's ddp_new was given, not the job's (handout section 2)", ratio, n,
                   world, n, world);
        return;
    }
    int mbs = c->microbatches, as_mbs = mbs > 1 && fabs(ratio - mbs) < 0.02 * mbs;
    if (n > 1 && n != mbs && !g->summed && fabs(ratio * n - 1) < 0.02) {
        gr_why_say(why, "your gradient is 1/%d of the reference's on %d ranks, and your "
                   "all-reduces average (PL_AVG): the ranks' gradients were divided by the %d "
                   "ranks twice, once in the weight each rank gave its backward and once more "
                   "by the average. Weights that already make the ranks' sum the step's mean "
                   "leave nothing for the all-reduce to divide (handout section 7, uneven "
                   "batches)", n, n, n);
        return;
    }
    /* n ranks and n microbatches scale alike: the recorded reduction tells them apart. An
     * asynchronous PL_AVG never waited for holds the ranks' sum: the division is the wait's. */
    if (as_ranks && !g->summed && g->async_avg)
        gr_why_say(why, "your gradient is %.3g times the reference's on %d ranks, though your "
                   "all-reduces asked for PL_AVG: the ranks' sum has arrived but not the division "
                   "by %d, which a pl_all_reduce_async makes when pl_wait or pl_wait_all "
                   "completes it. ddp_finish_gradients must wait for every all-reduce it started "
                   "before it returns (handout section 6)", ratio, n, n);
    else if (as_ranks && (g->summed || !as_mbs))
        gr_why_say(why, "your gradient is %.3g times the reference's, and %d ranks: the "
                   "ranks' gradients were summed where the step takes their mean (handout "
                   "sections 1 and 4)", ratio, n);
    else if (as_mbs)
        gr_why_say(why, "your gradient is %.3g times the reference's with %d microbatches: the "
                   "microbatches' gradients add up to the gradient of the sum of their losses, "
                   "where the step's loss is their mean (handout section 7)", ratio, mbs);
    else if (mbs > 1 && fabs(ratio * mbs - 1) >= 0.02 &&
             fabs(mbs / ratio - round(mbs / ratio)) < 0.02)
        gr_why_say(why, "your gradient is %.3g times the reference's with %d microbatches: each "
                   "microbatch was weighted as if there were %.0f of them, where this call has "
                   "%d (handout section 7)", ratio, mbs, mbs / ratio, mbs);
    else if (mbs > 1 && fabs(ratio * mbs - 1) < 0.02)
        gr_why_say(why, "your gradient is 1/%d of the reference's: one microbatch's gradient "
                   "is left where the step's should add up all %d (handout section 7)", mbs,
                   mbs);
}

/* Why a step's gradient is wrong. What the step's microbatches did comes first: traffic
 * during accumulation or a gradient zeroed at every microbatch explains every other symptom
 * (ranks that differ, a wrong ratio). */
static void grads_words(const struct gr_obs *all, const struct pl_model_layout *lay,
                        struct gr_why *why)
{
    const struct l2_obs *o = obs_of(all, 0);
    const struct l2_case *c = &o->c;
    const struct l2_gfig *g = &o->grads;
    char what[512], b[32], w[32];
    int step = o->step, n = l2_group_size(c, o->nranks), ovl = c->opt.variant == DDP_OVERLAPPED;
    gr_why_say(why, "step %d: after ddp_finish_gradients the gradient differs from the "
               "single-device gradient of the whole batch: %s (tolerance %.0e)", step + 1,
               gr_param_error_words(lay, &g->v, what, sizeof what), GR_TOL_GRADS);
    if (g->acc_mb >= 0) {
        gr_why_say(why, "step %d, microbatch %d of %d: rank %d sent %s in %ld collective calls. "
                   "Only the last microbatch may communicate: an all-reduce made during "
                   "accumulation averages a partial gradient, and what the later microbatches "
                   "add is never averaged%s. Accumulate the gradients locally and all-reduce "
                   "once per step, during or after the last microbatch's backward (handout "
                   "section 7)", step + 1, g->acc_mb + 1, c->microbatches, g->acc_rank,
                   pl_format_bytes(g->acc_bytes, b, sizeof b), g->acc_calls,
                   ovl ? ": your hook started its buckets in an accumulation microbatch's "
                         "backward, where it must start them only in the last one's (tell it "
                         "which microbatch is running, from ddp_forward_backward)"
                       : "");
    } else if (g->zeroed_each) {
        gr_why_say(why, "step %d: your gradient is the average of the last microbatch's alone: "
                   "the gradients were zeroed at every microbatch, so each microbatch's backward "
                   "replaced the ones before it instead of adding to them. Zero them once per "
                   "step, when microbatch 0 begins (pl_model_zero_grad; ddp.h, handout section "
                   "7)", step + 1);
    } else if (l2_uneven_words(all, why)) {
    } else if (!g->replicas_equal) {
        double whole = pl_ring_bytes_sent(PL_ALL_REDUCE, n, 4.0 * (double)o->numel);
        char sent[256] = "";
        if (g->late_bytes < whole * (1 - 1e-9))
            snprintf(sent, sizeof sent, " Rank %d sent %s in the last microbatch and "
                     "ddp_finish_gradients together, where all-reducing the whole gradient "
                     "sends %s a rank.", g->late_rank, pl_format_bytes(g->late_bytes, b, sizeof b),
                     pl_format_bytes(whole, w, sizeof w));
        gr_why_say(why, "rank %d's gradient of %s differs from rank 0's (element %zu of the flat "
                   "buffer): after ddp_finish_gradients every rank must hold the same average.%s "
                   "A tensor that no all-reduce covered keeps each rank's own gradient -- is one "
                   "missing from your loop or your buckets%s? (handout sections %s)", g->bad_rank,
                   tensor_name(lay, g->bad_elem), g->bad_elem, sent,
                   ovl ? ", or one the hook never started in the last microbatch's backward" : "",
                   ovl ? "4 to 6" : "4 and 5");
    } else if (g->kept_last) {
        gr_why_say(why, "step %d: your gradient is this step's plus the last step's (as the "
                   "optimizer's clipping left it): the gradients were not zeroed when this step "
                   "began. m->grads still holds the last step's average when the next step's "
                   "first ddp_forward_backward is called; microbatch 0 starts a new step, so "
                   "zero them there (pl_model_zero_grad), every step (ddp.h, handout section 7)",
                   step + 1);
    } else if (g->world_mean) {
        gr_why_say(why, "every rank's gradient is the mean over all %d ranks of the job: the %d "
                   "groups train on different batches, and your all-reduce mixed them. Each "
                   "group is its own DDP: every collective goes on the comm ddp_new was given "
                   "(d->comm), never pl_comm_world() (handout section 2)", o->nranks, c->groups);
    } else {
        grads_scale(o, g, why);
    }
}

/* The part of a hook, for a sentence. */
static void part_name(int part, int n_layers, char *buf, size_t len)
{
    if (part == L2_NO_PART) snprintf(buf, len, "before the hook of any part had run");
    else if (part == PL_PART_EMBED) snprintf(buf, len, "in the embedding's hook");
    else if (part == n_layers) snprintf(buf, len, "in the head's hook");
    else snprintf(buf, len, "in block %d's hook", part);
}

/* The lowest rank that started an all-reduce before its gradients were final. */
static void early_words(const struct gr_obs *all, const struct pl_model_layout *lay,
                        struct gr_why *why)
{
    int r = 0;
    while (r < all->nranks - 1 && !obs_of(all, r)->early.found) r++;
    const struct l2_obs *o = obs_of(all, r);
    const struct l2_early_fig *f = &o->early;
    char on[32] = "", rg[256], when[64], fin[256];
    if (r != 0) snprintf(on, sizeof on, "on rank %d: ", r);
    l2_range_text(lay, f->off, f->count, rg, sizeof rg);
    part_name(f->part, o->cfg.n_layers, when, sizeof when);
    int none = f->final >= o->numel;
    if (none) snprintf(fin, sizeof fin, "no gradient was final yet");
    else l2_range_text(lay, f->final, o->numel - f->final, fin, sizeof fin);
    gr_why_say(why, "%sstep %d: the all-reduce of gradient elements %s started %s of the last "
               "microbatch's backward, when only %s%s had their final gradients: it may send "
               "gradients backward has not written yet (on GPUs it would). A part's hook may "
               "start only the buckets whose FIRST element is at or after the part's first "
               "element (handout section 6)", on, f->step + 1, rg, when, none ? "" : "elements ",
               fin);
}

/* DDP_OVERLAPPED: the lowest rank whose all-reduce was issued after the hook call that made
 * its range final (ddp.h: each bucket's all-reduce starts as soon as its gradients exist);
 * 0 when none was. */
static int late_words(const struct gr_obs *all, struct gr_why *why)
{
    int r = 0;
    while (r < all->nranks && !obs_of(all, r)->late.found) r++;
    if (r == all->nranks) return 0;
    const struct l2_obs *o = obs_of(all, r);
    const struct l2_late_fig *f = &o->late;
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, &o->cfg);
    int ready = o->cfg.n_layers;
    size_t start = 0, n = 0;
    for (; ready >= PL_PART_EMBED; ready--) {
        pl_model_part_range(&lay, ready, &start, &n);
        if (start <= f->off) break;
    }
    char on[32] = "", rg[256], when[96], at[64];
    if (r != 0) snprintf(on, sizeof on, "on rank %d: ", r);
    l2_range_text(&lay, f->off, f->count, rg, sizeof rg);
    if (f->where == L2_IN_HOOK) part_name(f->part, o->cfg.n_layers, when, sizeof when);
    else snprintf(when, sizeof when, "%s", f->where == L2_IN_FINISH ? "in ddp_finish_gradients"
                  : "after the last microbatch's backward, outside the hook");
    part_name(ready, o->cfg.n_layers, at, sizeof at);
    gr_why_say(why, "%sstep %d: the all-reduce of gradient elements %s was issued %s, though "
               "its range was final %s, the call that could have started it: in DDP_OVERLAPPED "
               "each bucket's all-reduce starts as soon as its gradients exist (ddp.h), in the "
               "hook call of the part that holds its FIRST element (handout section 6). Every "
               "hook it waits leaves it a part's backward less to hide behind", on,
               f->step + 1, rg, when, at);
    pl_model_layout_free(&lay);
    return 1;
}

/* The rank with the largest figure (the lowest of equals): kept bytes, operations left. */
static int most_at(const struct gr_obs *all, int what, double *most)
{
    int best = 0;
    for (int r = 0; r < all->nranks; r++) {
        const struct l2_obs *o = obs_of(all, r);
        double x = what == 0 ? o->step_kept : what == 1 ? o->free_kept
                   : what == 2 ? (double)o->in_flight : o->loss.err;
        if (r == 0 || x > *most) {
            *most = x;
            best = r;
        }
    }
    return best;
}

static void kept_words(int rank, double bytes, const char *when, const char *since,
                       const char *fix, struct gr_why *why)
{
    char b[32];
    gr_why_say(why, "%s rank %d holds %s more of pl_mem_alloc's memory than %s: %s", when, rank,
               pl_format_bytes(bytes, b, sizeof b), since, fix);
}

/* A step's loss: the likeliest cause first. The ranks' own losses differ only as their
 * slices of one batch do (a few percent): far apart, some rank returned another quantity (0,
 * or nothing of its own); the reference's times 1/M, the microbatches' weight went in. */
static void loss_words(const struct gr_obs *all, struct gr_why *why)
{
    double most = 0, lo = 0, hi = 0;
    const struct l2_loss_fig *f = &obs_of(all, most_at(all, 3, &most))->loss;
    int M = obs_of(all, 0)->c.microbatches, step = obs_of(all, 0)->step;
    char b[32], each[512] = "", cause[768];
    for (int r = 0; r < all->nranks; r++) {
        double x = obs_of(all, r)->loss.mine;
        lo = r == 0 || x < lo ? x : lo;
        hi = r == 0 || x > hi ? x : hi;
        size_t at = strlen(each);
        snprintf(each + at, sizeof each - at, "%srank %d %.5g", r ? ", " : "", r, x);
    }
    if (all->nranks > 1 && hi - lo > 0.5 * fmax(fabs(hi), fabs(lo)))
        snprintf(cause, sizeof cause, "your ranks returned losses far apart, more than their "
                 "slices of one batch can make them differ (their mean of the step's "
                 "ddp_forward_backward returns: %s): every rank returns its own microbatch's "
                 "mean loss, whatever its rank, and the loss of the batch is the mean of the "
                 "ranks' (ddp.h, handout section 7)", each);
    else if (M > 1 && fabs(f->got * M / f->want - 1) < 1e-3)
        snprintf(cause, sizeof cause, "that is the reference's divided by the %d microbatches: "
                 "ddp_forward_backward returns each microbatch's mean loss unscaled; the weight "
                 "1/%d belongs in the gradient only, through ctx.loss_scale (ddp.h, handout "
                 "section 7)", M, M);
    else
        snprintf(cause, sizeof cause, "ddp_forward_backward returns each microbatch's mean "
                 "loss over its B sequences as the model computes it, unscaled (ddp.h, handout "
                 "section 7); the ranks returned %s", each);
    gr_why_say(why, "step %d: the loss of the whole batch is %.7g, the single-device reference's "
               "%.7g (relative error %s, tolerance %.0e): %s", step + 1, f->got, f->want,
               gr_fmt_beyond_into(f->err, GR_TOL_LOSS, b, sizeof b), GR_TOL_LOSS, cause);
}

/* The reason of the check that stopped the case's training; 0 when none did. */
static int stopped_words(const struct gr_obs *all, const struct pl_model_layout *lay,
                         struct gr_why *why)
{
    const struct l2_obs *o = obs_of(all, 0);
    char what[512], when[64];
    double most = 0;
    int r;
    switch (o->code) {
    case L2_C_INIT_CHANGED:
        gr_why_say(why, "after ddp_new, rank 0's parameters are no longer the ones it was "
                   "initialised with (tensor %s, element %zu of the flat buffer): every replica "
                   "must take rank 0's, so broadcast m->params from root 0 (handout section 3)",
                   tensor_name(lay, o->bad_elem), o->bad_elem);
        return 1;
    case L2_C_NOT_BROADCAST:
        gr_why_say(why, "after ddp_new, rank %d's parameters differ from rank 0's (tensor %s, "
                   "element %zu of the flat buffer): the ranks initialise their replicas "
                   "differently, so ddp_new must broadcast rank 0's parameters (handout section "
                   "3)", o->bad_rank, tensor_name(lay, o->bad_elem), o->bad_elem);
        return 1;
    case L2_C_EARLY_START: early_words(all, lay, why); return 1;
    case L2_C_STEP_KEPT:
        r = most_at(all, 0, &most);
        snprintf(when, sizeof when, "step %d: after ddp_finish_gradients", o->step + 1);
        kept_words(r, most, when, "before the step's first ddp_forward_backward", "a step must "
                   "free what it allocates (handles, staging buffers), or a long run leaks one "
                   "of them per step; keep what every step needs in struct ddp, allocated once "
                   "in ddp_new", why);
        return 1;
    case L2_C_GRAD_BITS:
        gr_why_say(why, "step %d: after ddp_finish_gradients rank %d's gradient of %s differs from "
                   "rank 0's in its last bits (element %zu of the flat buffer): close to the "
                   "reference, but every rank must hold the same average bit for bit, or the "
                   "replicas drift apart a little more each step. Take the all-reduce's result "
                   "as it is on every rank (handout section 4)", o->step + 1, o->bad_rank,
                   tensor_name(lay, o->bad_elem), o->bad_elem);
        return 1;
    case L2_C_GRADS: grads_words(all, lay, why); return 1;
    case L2_C_REPLICAS:
        gr_why_say(why, "step %d: after the update rank %d's parameters differ from rank 0's, bit "
                   "for bit, first in %s (element %zu of the flat buffer): the replicas must stay "
                   "identical, so every rank must update with the same averaged gradient "
                   "(handout section 4)", o->step + 1, o->bad_rank,
                   tensor_name(lay, o->bad_elem), o->bad_elem);
        return 1;
    case L2_C_LOSS: loss_words(all, why); return 1;
    case L2_C_PARAMS:
        gr_why_say(why, "after %d steps the parameters differ from the single-device reference's: "
                   "%s (tolerance %.0e)", K_STEPS,
                   gr_param_error_words(lay, &o->params, what, sizeof what), GR_TOL_PARAMS);
        return 1;
    default: return 0;
    }
}

/* The case trained: what ddp_free left, in flight on the case's comm or allocated. */
static int freed_words(const struct gr_obs *all, struct gr_why *why)
{
    double most = 0;
    int r = most_at(all, 2, &most);
    if (most > 0) {
        gr_why_say(why, "after ddp_free, rank %d still has %d operation(s) in flight on the "
                   "communicator ddp_new was given: a handle of pl_all_reduce_async (or another "
                   "asynchronous call) was never waited for. The caller frees that communicator "
                   "after ddp_free, and pl_comm_free refuses one with operations in flight; "
                   "pl_wait (or pl_wait_all) every handle, at the latest in ddp_finish_gradients "
                   "(handout section 6)", r, (int)most);
        return 1;
    }
    for (r = 0; r < all->nranks; r++) {
        if (!obs_of(all, r)->hook_left) continue;
        gr_why_say(why, "after ddp_free, rank %d's model still calls the backward hook ddp_new "
                   "installed: its next backward (a new ddp_new on the same model, an "
                   "evaluation pass with gradients) would call into the freed struct ddp. "
                   "ddp_free takes the hook off the model (pl_model_set_hook(m, NULL, NULL)) "
                   "before it frees what the hook reads (handout section 6)", r);
        return 1;
    }
    r = most_at(all, 1, &most);
    if (most <= 0) return 0;
    kept_words(r, most, "after ddp_free (and the model's own free)", "before the model and "
               "ddp_new", "ddp_free must pl_mem_free everything ddp_new and the steps allocated "
               "(a field added to struct ddp needs its pl_mem_free there too)", why);
    return 1;
}

/* ---- part overlap ---- */

/* Where the step sits between the serial sum and the perfect-overlap bound, both from its own
 * trace replayed: compute alone and the all-reduces alone. */
static int overlap_words(const struct l2_obs *o, struct gr_why *why)
{
    const struct l2_ofig *f = &o->overlap;
    if (!f->replayed) {
        gr_why_say(why, "your step's trace could not be replayed: %s", f->err);
        return 0;
    }
    double hid = f->hidden, serial = f->compute + f->comm;
    double perfect = f->compute > f->comm ? f->compute : f->comm;
    double fraction = hid >= OVERLAP_FULL ? 1.0 : hid <= OVERLAP_NONE ? 0.0
                      : (hid - OVERLAP_NONE) / (OVERLAP_FULL - OVERLAP_NONE);
    gr_why_say(why, "modelled on %s at GPT-2 small scale (%d ranks): your step hid %.0f%% of the "
               "all-reduce time behind backward (%.0f of %.0f us exposed); step %.0f us, between "
               "the perfect-overlap bound max(compute, all-reduce) = %.0f us and the serial sum "
               "compute + all-reduce = %.0f us; full marks from %.0f%% hidden, none up to %.0f%% "
               "(blocking all-reduces after backward hide nothing)", OVERLAP_PROFILE, o->nranks,
               100 * hid, 1e6 * f->exposed, 1e6 * f->comm, 1e6 * f->step_time, 1e6 * perfect,
               1e6 * serial, 100 * OVERLAP_FULL, 100 * OVERLAP_NONE);
    gr_why_say(why, "wall clock on this machine, not graded: rank 0's step took %.2f ms, %.2f ms "
               "of it in pl_wait (MPI progresses shared-memory transfers only inside MPI calls, "
               "on the cores that compute: handout section 8)", 1e3 * f->wall_step,
               1e3 * f->wall_wait);
    if (fraction < 1)
        gr_why_say(why, "start each bucket's pl_all_reduce_async from the backward hook as soon "
                   "as its last gradient is written, and wait only in ddp_finish_gradients "
                   "(handout section 6; a pl_test that finds an all-reduce done is a wait there "
                   "too, section 8)");
    gr_why_partial(why, fraction);
    return 1;
}

/* The case a failure was found in, as the last line of its reason; 0 (the verdict). */
static int say_case(const struct l2_obs *o, struct gr_why *why)
{
    char cs[384];
    l2_describe_case(&o->c, o->nranks, cs, sizeof cs);
    gr_why_say(why, "in: %s", cs);
    return 0;
}

int l2_judge(int i, const char *part, const struct gr_obs *all, struct gr_why *why)
{
    const struct l2_obs *o = obs_of(all, 0);
    int correct = !strcmp(part, "correct"), traffic = !strcmp(part, "traffic");
    /* every overlapped case's buckets start in their hook (the tiny buckets' case is where
     * buckets start at a part's first element); the traced first case's replay is graded */
    if (!strcmp(part, "overlap")) {
        if (!late_words(all, why)) return i > 0 || overlap_words(o, why);
        return say_case(o, why);
    }
    if (!correct && !traffic) {
        gr_why_say(why, "no part '%s': Lab 2 judges correct, traffic and overlap", part);
        return 0;
    }
    if (traffic && o->traffic.code == L2_T_NONE) return 1;
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, &o->cfg);
    int failed = 1;
    if (traffic) traffic_words(o, &lay, &o->traffic, why);
    else failed = stopped_words(all, &lay, why) || freed_words(all, why);
    pl_model_layout_free(&lay);
    return failed ? say_case(o, why) : 1;
}
