/* checks.c: the checks of one case of Lab 2 in flight (lab02.h): the replicas after ddp_new
 * and its broadcast, the bucket plan, each step's traffic from the ledger and the ranges of
 * its all-reduces (calls.c), the issue times of the overlapped all-reduces, the averaged
 * gradient, the loss, the replicas after the update, the parameters after K steps, and the
 * memory a step or ddp_free kept. Every check is collective; rank 0 says why. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "lab02.h"

/* Rank 0: why the gradients are wrong, from figures every rank computed. What the step's
 * microbatches did comes first: traffic during accumulation or a gradient zeroed at every
 * microbatch explains every other symptom (ranks that differ, a wrong ratio). */
static void explain_grads(const struct gr_reference *ref, const struct l2_case *c, int step,
                          const struct gr_param_verdict *v, int replicas_equal, int bad_rank,
                          size_t bad_elem, double ratio, int world_mean, int kept_last,
                          const struct l2_accum *acc, const struct l2_calls *calls,
                          int zeroed_each)
{
    char what[512], b[32], w[32];
    const struct pl_model_layout *lay = &ref->layout;
    int n = l2_dp_size(c);
    gr_describe_param_error(ref, v, what, sizeof what);
    gr_say("correct", "step %d: after ddp_finish_gradients the gradient differs from the "
           "single-device gradient of the whole batch: %s (tolerance %.0e)", step + 1, what,
           GR_TOL_GRADS);
    if (acc->mb >= 0) {
        gr_say("correct", "step %d, microbatch %d of %d: rank %d sent %s in %ld collective "
               "calls. Only the last microbatch may communicate: an all-reduce made during "
               "accumulation averages a partial gradient, and what the later microbatches add "
               "is never averaged%s. Accumulate the gradients locally and all-reduce once per "
               "step, during or after the last microbatch's backward (handout section 7)",
               step + 1, acc->mb + 1, c->microbatches, acc->rank,
               pl_format_bytes(acc->bytes, b, sizeof b), acc->calls,
               c->opt.variant == DDP_OVERLAPPED
                   ? ": your hook started its buckets in an accumulation microbatch's "
                     "backward, where it must start them only in the last one's (tell it "
                     "which microbatch is running, from ddp_forward_backward)"
                   : "");
        return;
    }
    if (zeroed_each) {
        gr_say("correct", "step %d: your gradient is the average of the last microbatch's "
               "alone: the gradients were zeroed at every microbatch, so each microbatch's "
               "backward replaced the ones before it instead of adding to them. Zero them "
               "once per step, when microbatch 0 begins (pl_model_zero_grad; ddp.h, handout "
               "section 7)", step + 1);
        return;
    }
    if (!replicas_equal) {
        const struct pl_param_desc *d = gr_tensor_at(lay, bad_elem);
        double whole = pl_ring_bytes_sent(PL_ALL_REDUCE, n, 4.0 * (double)ref->numel);
        char sent[256] = "";
        if (acc->late_bytes < whole * (1 - 1e-9))
            snprintf(sent, sizeof sent, " Rank %d sent %s in the last microbatch and "
                     "ddp_finish_gradients together, where all-reducing the whole gradient "
                     "sends %s a rank.", acc->late_rank,
                     pl_format_bytes(acc->late_bytes, b, sizeof b),
                     pl_format_bytes(whole, w, sizeof w));
        gr_say("correct", "rank %d's gradient of %s differs from rank 0's (element %zu of "
               "the flat buffer): after ddp_finish_gradients every rank must hold the same "
               "average.%s A tensor that no all-reduce covered keeps each rank's own gradient "
               "-- is one missing from your loop or your buckets%s? (handout sections %s)",
               bad_rank, d ? d->name : "?", bad_elem, sent,
               c->opt.variant == DDP_OVERLAPPED
                   ? ", or one the hook never started in the last microbatch's backward" : "",
               c->opt.variant == DDP_OVERLAPPED ? "4 to 6" : "4 and 5");
        return;
    }
    if (kept_last) {
        gr_say("correct", "step %d: your gradient is this step's plus the last step's (as "
               "the optimizer's clipping left it): the gradients were not zeroed when this "
               "step began. m->grads still holds the last step's average when the next step's "
               "first ddp_forward_backward is called; microbatch 0 starts a new step, so zero "
               "them there (pl_model_zero_grad), every step (ddp.h, handout section 7)", step + 1);
        return;
    }
    if (world_mean) {
        gr_say("correct", "every rank's gradient is the mean over all %d ranks of the job: "
               "the %d groups train on different batches, and your all-reduce mixed them. "
               "Each group is its own DDP: every collective goes on the comm ddp_new was "
               "given (d->comm), never pl_comm_world() (handout section 2)", pl_size(),
               c->groups);
        return;
    }
    int as_ranks = n > 1 && fabs(ratio - n) < 0.02 * n;
    if (c->groups > 1 && fabs(ratio * pl_size() - n) < 0.02 * n) {
        gr_say("correct", "your gradient is %.3g times the reference's, %d/%d: the sum over "
               "a group of %d ranks divided by all %d ranks of the job. Take the rank count "
               "from the comm ddp_new was given (pl_comm_size(d->comm)), not pl_size() "
               "(handout section 2)", ratio, n, pl_size(), n, pl_size());
        return;
    }
    int as_mbs = c->microbatches > 1 && fabs(ratio - c->microbatches) < 0.02 * c->microbatches;
    /* n ranks and n microbatches scale alike: the recorded reduction tells them apart. An
     * asynchronous PL_AVG never waited for holds the ranks' sum: the division is the wait's. */
    if (as_ranks && !l2_calls_summed(calls) && l2_calls_async_avg(calls))
        gr_say("correct", "your gradient is %.3g times the reference's on %d ranks, though "
               "your all-reduces asked for PL_AVG: the ranks' sum has arrived but not the "
               "division by %d, which a pl_all_reduce_async makes when pl_wait or pl_wait_all "
               "completes it. ddp_finish_gradients must wait for every all-reduce it started "
               "before it returns (handout section 6)", ratio, n, n);
    else if (as_ranks && (l2_calls_summed(calls) || !as_mbs))
        gr_say("correct", "your gradient is %.3g times the reference's, and %d ranks: the "
               "all-reduce summed the ranks' gradients. Average them: PL_AVG (handout section "
               "4)", ratio, n);
    else if (as_mbs)
        gr_say("correct", "your gradient is %.3g times the reference's with %d microbatches: "
               "scale each microbatch's loss by 1/microbatches (ctx.loss_scale) so the sum "
               "over microbatches is the mean (handout section 7)", ratio, c->microbatches);
    else if (c->microbatches > 1 && fabs(ratio * c->microbatches - 1) >= 0.02 &&
             fabs(c->microbatches / ratio - round(c->microbatches / ratio)) < 0.02)
        gr_say("correct", "your gradient is %.3g times the reference's with %d microbatches: "
               "each microbatch's loss was scaled by 1/%.0f, not by 1/microbatches = 1/%d. Take "
               "the scale from this call's microbatches argument, never a fixed count "
               "(ctx.loss_scale, handout section 7)", ratio, c->microbatches,
               c->microbatches / ratio, c->microbatches);
    else if (c->microbatches > 1 && fabs(ratio * c->microbatches - 1) < 0.02)
        gr_say("correct", "your gradient is 1/%d of the reference's: were the gradients "
               "zeroed before every microbatch instead of once per step? (handout section 7)",
               c->microbatches);
}

int l2_judge_step_traffic(const struct l2_run *r0, int step)
{
    const struct l2_setup *s = r0->s;
    const struct l2_case *c = r0->c;
    const struct pl_ledger *all = r0->all;
    int n = l2_dp_size(c);
    double psi = (double)s->ref.numel;
    double want = pl_ring_bytes_sent(PL_ALL_REDUCE, n, 4.0 * psi);
    long want_calls = c->opt.variant == DDP_NAIVE ? s->ref.layout.n_tensors : r0->nplan;
    for (int r = 0; r < pl_size(); r++) {
        const struct pl_ledger *l = &all[r];
        double got = gr_ledger_total_bytes(l), ar = pl_ledger_bytes(l, PL_ALL_REDUCE, -1);
        long calls = l->calls[PL_ALL_REDUCE], other = l2_data_calls(l) - calls;
        int bytes = fabs(got - want) > 1e-9 * want || fabs(ar - want) > 1e-9 * want;
        if (!bytes && calls == want_calls && other == 0) continue;
        *r0->tfig = (struct l2_tfig){.code = bytes ? L2_T_STEP_BYTES : L2_T_STEP_CALLS,
                                     .step = step, .rank = r, .n = n, .world = pl_size(),
                                     .calls = calls, .other = other, .want_calls = want_calls,
                                     .got = got, .ar = ar, .want = want};
        return 0;
    }
    return 1;
}

static int judge_broadcast_traffic(const struct l2_setup *s, const struct l2_case *c,
                                   const struct pl_ledger *all, struct l2_tfig *f)
{
    int n = l2_dp_size(c);
    double S = 4.0 * (double)s->ref.numel, sum = 0, want = c->groups * (n - 1) * S;
    for (int r = 0; r < pl_size(); r++) sum += pl_ledger_bytes(&all[r], PL_BROADCAST, -1);
    if (fabs(sum - want) <= 1e-9 * S) return 1;
    *f = (struct l2_tfig){.code = L2_T_BROADCAST, .n = n, .world = pl_size(), .got = sum,
                          .want = want};
    return 0;
}

/* Rank 0: the student's plan against the header's rule. */
static int judge_plan(const struct l2_setup *s, const struct l2_case *c, int got_n,
                      const size_t *got_off, const size_t *got_len, struct l2_tfig *f)
{
    const struct pl_model_layout *lay = &s->ref.layout;
    size_t *off = malloc((size_t)lay->n_tensors * sizeof *off);
    size_t *len = malloc((size_t)lay->n_tensors * sizeof *len);
    int want_n = l2_expected_plan(lay, c->opt.bucket_bytes, off, len), ok = 1;
    for (int i = 0; i < want_n && i < got_n && ok; i++) {
        if (got_off[i] == off[i] && got_len[i] == len[i]) continue;
        *f = (struct l2_tfig){.code = L2_T_PLAN_RANGE, .bucket = i, .off = off[i],
                              .len = len[i], .got_off = got_off[i], .got_len = got_len[i]};
        ok = 0;
    }
    if (ok && want_n != got_n) {
        *f = (struct l2_tfig){.code = L2_T_PLAN_COUNT, .want_n = want_n, .got_n = got_n};
        ok = 0;
    }
    free(off);
    free(len);
    return ok;
}

/* Collective: 1 on every rank when every rank's n elements (op memory) equal those of its
 * group's rank 0 bit for bit; otherwise 0 with the first differing rank (in the world) and
 * element. The groups hold different data, so only the replicas of a group must agree. The
 * ranks compare 64-bit digests of their replicas (FNV-1a of the bytes); only when one differs
 * from its group's rank 0 are the elements sent, to find the first that differs. */
static int group_replicas_equal(const struct l2_run *r, const float *x, size_t n, int *bad_rank,
                                size_t *bad_elem)
{
    int nranks = pl_size(), groups = r->c->groups, k = 0;
    float *mine = malloc(n * sizeof *mine);
    pl_to_host(mine, x, n * sizeof *mine);
    uint64_t d = pl_fnv1a(PL_FNV1A_START, mine, n * sizeof *mine);
    uint64_t *all = malloc((size_t)nranks * sizeof *all);
    PL_CHECK_MPI(MPI_Allgather(&d, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD));
    /* rank k's group (pl_rank() % groups) has world rank k % groups as its rank 0 */
    while (k < nranks && all[k] == all[k % groups]) k++;
    free(all);
    if (k == nranks) {
        free(mine);
        return 1;
    }
    float *root = malloc(n * sizeof *root);
    memcpy(root, mine, n * sizeof *mine);
    PL_CHECK_MPI(MPI_Bcast(root, (int)n, MPI_FLOAT, 0, r->group));
    long first = 0;
    if (pl_rank() == k)
        while ((size_t)first < n && !memcmp(&mine[first], &root[first], sizeof(float))) first++;
    PL_CHECK_MPI(MPI_Bcast(&first, 1, MPI_LONG, k, MPI_COMM_WORLD));
    *bad_rank = k;
    *bad_elem = (size_t)first;
    free(root);
    free(mine);
    return 0;
}

/* Rank 0's traffic verdict on every rank, when traffic is judged. */
void l2_traffic_verdict(struct l2_run *r, int ok)
{
    if (!ok) r->out->traffic = 0;
    r->out->traffic = gr_agree(r->out->traffic);
}

/* Collective: rank 0's replica, initialised as the reference's, is what every rank must take;
 * replicas equal to one another but not to it were broadcast from another root. */
static int rank0_kept_own(const struct l2_run *r)
{
    size_t numel = r->ref->numel, bad = numel;
    if (pl_rank() == 0) {
        float *host = malloc(numel * sizeof *host);
        pl_to_host(host, r->m->params, numel * sizeof *host);
        for (size_t i = 0; i < numel && bad == numel; i++)
            if (host[i] != r->ref->init[i]) bad = i;
        free(host);
    }
    int ok = gr_agree(bad == numel);
    if (!ok && pl_rank() == 0) {
        const struct pl_param_desc *t = gr_tensor_at(&r->ref->layout, bad);
        gr_say("correct", "after ddp_new, rank 0's parameters are no longer the ones it was "
               "initialised with (tensor %s, element %zu of the flat buffer): every replica "
               "must take rank 0's, so broadcast m->params from root 0 (handout section 3)",
               t ? t->name : "?", bad);
    }
    return ok;
}

/* Section 3: replicas equal to rank 0's after ddp_new, and what it broadcast; section 5: the
 * bucket plan against the rule of ddp.h. Returns 0 when the case cannot go on. */
int l2_check_setup(struct l2_run *r, const struct pl_ledger *delta)
{
    int bad_rank = -1, me = pl_rank();
    size_t bad_elem = 0;
    if (!rank0_kept_own(r)) {
        r->out->correct = 0;
        return 0;
    }
    if (!gr_replicas_equal(r->m->params, r->ref->numel, &bad_rank, &bad_elem)) {
        const struct pl_param_desc *t = gr_tensor_at(&r->ref->layout, bad_elem);
        gr_say("correct", "after ddp_new, rank %d's parameters differ from rank 0's (tensor "
               "%s, element %zu of the flat buffer): the ranks initialise their replicas "
               "differently, so ddp_new must broadcast rank 0's parameters (handout "
               "section 3)", bad_rank, t ? t->name : "?", bad_elem);
        r->out->correct = 0;
        return 0;
    }
    r->nplan = r->c->opt.variant == DDP_NAIVE ? 0 : ddp_num_buckets(r->d);
    if (!r->want_traffic) return 1;
    gr_ledger_gather_world(delta, r->all);
    l2_traffic_verdict(r, me != 0 || judge_broadcast_traffic(r->s, r->c, r->all, r->tfig));
    int ok = 1;
    if (r->c->opt.variant != DDP_NAIVE && me == 0 && r->out->traffic) {
        size_t *off = calloc((size_t)(r->nplan > 0 ? r->nplan : 1), sizeof *off);
        size_t *len = calloc((size_t)(r->nplan > 0 ? r->nplan : 1), sizeof *len);
        for (int i = 0; i < r->nplan; i++) ddp_bucket_range(r->d, i, &off[i], &len[i]);
        ok = judge_plan(r->s, r->c, r->nplan, off, len, r->tfig);
        free(off);
        free(len);
    }
    l2_traffic_verdict(r, ok);
    return 1;
}

/* Accumulation microbatches send nothing: rank 0 checks what every rank sent. */
int l2_judge_silent_microbatch(const struct l2_run *r, int step, int mb)
{
    for (int k = 0; k < pl_size(); k++) {
        double by = gr_ledger_total_bytes(&r->all[k]);
        long calls = l2_data_calls(&r->all[k]);
        if (by == 0 && calls == 0) continue;
        *r->tfig = (struct l2_tfig){.code = L2_T_MICROBATCH, .step = step, .mb = mb, .rank = k,
                                    .got = by, .calls = calls};
        return 0;
    }
    return 1;
}

/* Collective: every all-reduce of the step covered one tensor (naive) or one bucket of the
 * header's rule, as the ledger's bytes and calls cannot tell. */
int l2_judge_call_ranges(const struct l2_run *r, int step)
{
    const struct pl_model_layout *lay = &r->ref->layout;
    size_t *off = malloc((size_t)lay->n_tensors * sizeof *off);
    size_t *len = malloc((size_t)lay->n_tensors * sizeof *len);
    int n;
    if (r->c->opt.variant == DDP_NAIVE) {
        for (n = 0; n < lay->n_tensors; n++) {
            off[n] = lay->tensors[n].offset;
            len[n] = lay->tensors[n].numel;
        }
    } else {
        n = l2_expected_plan(lay, r->c->opt.bucket_bytes, off, len);
    }
    struct l2_range_fig rf;
    int ok = l2_calls_judge_ranges(r->calls, step, off, len, n, &rf);
    if (!ok && pl_rank() == 0) *r->tfig = (struct l2_tfig){.code = L2_T_RANGES, .range = rf};
    free(off);
    free(len);
    return ok;
}

int l2_check_issue_times(const struct l2_run *r, int step)
{
    char msg[1024];
    if (l2_calls_judge_timing(r->calls, step, msg, sizeof msg)) return 1;
    if (pl_rank() == 0) gr_say("correct", "%s", msg);
    return 0;
}

/* The averaged gradient of step against the single-device gradient of the whole batch;
 * on a difference, rank 0 says why from figures every rank computed. */
int l2_check_grads(const struct l2_run *r, int step)
{
    size_t numel = r->ref->numel;
    struct gr_param_verdict v;
    gr_check_grads(r->ref, step, GR_REPLICATED, 0, numel, r->m->grads, GR_TOL_GRADS, &v);
    int bad_rank = -1;
    size_t bad_elem = 0;
    int eq = group_replicas_equal(r, r->m->grads, numel, &bad_rank, &bad_elem);
    if (v.ok && !eq) {
        const struct pl_param_desc *t = gr_tensor_at(&r->ref->layout, bad_elem);
        gr_say("correct", "step %d: after ddp_finish_gradients rank %d's gradient of %s differs "
               "from rank 0's in its last bits (element %zu of the flat buffer): close to the "
               "reference, but every rank must hold the same average bit for bit, or the "
               "replicas drift apart a little more each step. Take the all-reduce's result as "
               "it is on every rank (handout section 4)", step + 1, bad_rank, t ? t->name : "?",
               bad_elem);
        return 0;
    }
    if (v.ok) return 1;
    double g2 = 0, r2 = 0, g2all = 0, r2all = 0, e2 = 0, m2 = 0, mix = 0, k2 = 0, kept = 0;
    float *host = malloc(numel * sizeof *host);
    pl_to_host(host, r->m->grads, numel * sizeof *host);
    const float *want = r->ref->grads + (size_t)step * numel;
    /* Both groups' references averaged: what an all-reduce over the world gives. */
    int both = r->c->groups == 2 && r->s->has_other;
    const float *g0 = r->s->ref.grads + (size_t)step * numel;
    const float *g1 = both ? r->s->other.grads + (size_t)step * numel : g0;
    /* The last step's gradient left in: what code that never zeroes at microbatch 0 gives,
     * times the factor the optimizer's clipping scaled it by in place (fitted here). */
    const float *prev = step > 0 ? want - numel : NULL;
    double dp = 0, pp = 0;
    for (size_t i = 0; prev && i < numel; i++) {
        dp += ((double)host[i] - want[i]) * prev[i];
        pp += (double)prev[i] * prev[i];
    }
    double alpha = pp > 0 ? dp / pp : 0;
    for (size_t i = 0; i < numel; i++) {
        g2 += (double)host[i] * host[i];
        r2 += (double)want[i] * want[i];
        double w = 0.5 * ((double)g0[i] + g1[i]);
        e2 += (host[i] - w) * (host[i] - w);
        m2 += w * w;
        double k = prev ? (double)want[i] + alpha * prev[i] : 0;
        k2 += (host[i] - k) * (host[i] - k);
    }
    double zeroed = r->c->microbatches > 1
                        ? l2_accum_zeroed_each(&r->acc, r->group, host, want) : 1;
    free(host);
    double rel = m2 > 0 ? sqrt(e2 / m2) : 1;
    double krel = prev && r2 > 0 && alpha > 0.01 && alpha < 1.01 ? sqrt(k2 / r2) : 1;
    PL_CHECK_MPI(MPI_Reduce(&g2, &g2all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
    PL_CHECK_MPI(MPI_Reduce(&r2, &r2all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
    PL_CHECK_MPI(MPI_Reduce(&rel, &mix, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    PL_CHECK_MPI(MPI_Reduce(&krel, &kept, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    if (pl_rank() == 0)
        explain_grads(r->ref, r->c, step, &v, eq, bad_rank, bad_elem,
                      r2all > 0 ? sqrt(g2all / r2all) : 0, both && mix < 1e-3, kept < 1e-2,
                      &r->acc, r->calls, zeroed < 1e-3);
    return 0;
}

int l2_check_loss(const struct l2_run *r, int step, double loss)
{
    int n = 1;
    double global = 0;
    PL_CHECK_MPI(MPI_Allreduce(&loss, &global, 1, MPI_DOUBLE, MPI_SUM, r->group));
    PL_CHECK_MPI(MPI_Comm_size(r->group, &n));
    global /= n;
    /* The worst group's figures: the groups train on different batches. */
    struct {
        double e;
        int rank;
    } mine = {gr_rel_err(global, r->ref->loss[step]), pl_rank()}, worst;
    PL_CHECK_MPI(MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
    if (worst.e <= GR_TOL_LOSS) return 1;
    double fig[2] = {global, r->ref->loss[step]};
    PL_CHECK_MPI(MPI_Bcast(fig, 2, MPI_DOUBLE, worst.rank, MPI_COMM_WORLD));
    gr_say("correct", "step %d: the loss of the whole batch is %.7g, the single-device "
           "reference's %.7g (relative error %s, tolerance %.0e): ddp_forward_backward "
           "returns each microbatch's mean loss, unscaled", step + 1, fig[0], fig[1],
           gr_fmt_beyond(worst.e, GR_TOL_LOSS), GR_TOL_LOSS);
    return 0;
}

int l2_check_params(const struct l2_run *r)
{
    struct gr_param_verdict v;
    gr_check_params(r->ref, GR_REPLICATED, 0, r->ref->numel, r->m->params,
                    GR_TOL_PARAMS, &v);
    if (v.ok) return 1;
    char what[512];
    gr_say("correct", "after %d steps the parameters differ from the single-device reference's: "
           "%s (tolerance %.0e)", K_STEPS,
           gr_describe_param_error(r->ref, &v, what, sizeof what), GR_TOL_PARAMS);
    return 0;
}

/* Every replica's parameters after the update equal rank 0's bit for bit: checked directly,
 * the first rank and tensor that differ named. */
int l2_check_replicas(const struct l2_run *r, int step)
{
    int bad_rank = -1;
    size_t bad_elem = 0;
    if (group_replicas_equal(r, r->m->params, r->ref->numel, &bad_rank, &bad_elem)) return 1;
    const struct pl_param_desc *t = gr_tensor_at(&r->ref->layout, bad_elem);
    gr_say("correct", "step %d: after the update rank %d's parameters differ from rank 0's, bit "
           "for bit, first in %s (element %zu of the flat buffer): the replicas must stay "
           "identical, so every rank must update with the same averaged gradient (handout "
           "section 4)", step + 1, bad_rank, t ? t->name : "?", bad_elem);
    return 0;
}
/* Collective: 1 when no rank holds more of the ledger than at `before`; otherwise rank 0
 * says which rank kept how much (`when` it was measured, `since` what) and the fix. */
int l2_check_nothing_kept(double before, const char *when, const char *since,
                              const char *fix)
{
    struct {
        double bytes;
        int rank;
    } mine = {l2_mem_held() - before, pl_rank()}, most;
    PL_CHECK_MPI(MPI_Allreduce(&mine, &most, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
    if (most.bytes <= 0) return 1;
    char b[32];
    if (pl_rank() == 0)
        gr_say("correct", "%s rank %d holds %s more of pl_mem_alloc's memory than %s: %s",
               when, most.rank, pl_format_bytes(most.bytes, b, sizeof b), since, fix);
    return 0;
}

