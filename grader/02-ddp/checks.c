/* checks.c: the checks of one case of Lab 2 in flight (lab02.h): the replicas after ddp_new
 * and its broadcast, the bucket plan, each step's traffic from the ledger and the ranges of
 * its all-reduces (calls.c), the issue times of the overlapped all-reduces, the averaged
 * gradient, the loss, the replicas after the update, the parameters after K steps, and the
 * memory a step or ddp_free kept. Every check is collective and agreed; it records why in the
 * rank's observation (struct l2_obs), in figures that judge.c words. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "lab02.h"

int l2_judge_step_traffic(const struct l2_run *r0, int step)
{
    const struct l2_setup *s = r0->s;
    const struct l2_case *c = r0->c;
    const struct pl_ledger *all = r0->all;
    int n = l2_dp_size(c);
    double psi = (double)s->ref.numel;
    double want = pl_ring_bytes_sent(PL_ALL_REDUCE, n, 4.0 * psi);
    /* the count exchange: one all-reduce of at most L2_COUNT_FLOATS floats, or none */
    double count = pl_ring_bytes_sent(PL_ALL_REDUCE, n, 4.0 * L2_COUNT_FLOATS), eps = 1e-9 * want;
    long want_calls = c->opt.variant == DDP_NAIVE ? s->ref.layout.n_tensors : r0->nplan;
    for (int r = 0; r < pl_size(); r++) {
        const struct pl_ledger *l = &all[r];
        double got = gr_ledger_total_bytes(l), ar = pl_ledger_bytes(l, PL_ALL_REDUCE, -1);
        long calls = l->calls[PL_ALL_REDUCE], other = l2_data_calls(l) - calls;
        long extra = calls - want_calls;
        int counts = other == 0 && extra > 1 && ar >= want - eps && ar <= want + extra * count + eps;
        int bytes = !counts && (fabs(got - ar) > eps || ar < want - eps ||
                                ar > want + (extra == 1 ? count : 0) + eps);
        if (!bytes && !counts && (extra == 0 || extra == 1) && other == 0) continue;
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

/* Every rank: the plan ddp_bucket_range reports, into r->plan_off and plan_len (room for
 * every tensor); its ranges are read only for a count a plan can have. Rank 0, when judge
 * is set (no traffic failure recorded before): the plan against the invariants of ddp.h's
 * contract (buckets.c), the first one broken recorded. */
static int read_plan(struct l2_run *r, int judge)
{
    const struct pl_model_layout *lay = &r->s->ref.layout;
    size_t room = (size_t)lay->n_tensors;
    r->plan_off = calloc(room, sizeof *r->plan_off);
    r->plan_len = calloc(room, sizeof *r->plan_len);
    for (int i = 0; i < r->nplan && (size_t)r->nplan <= room; i++)
        ddp_bucket_range(r->d, i, &r->plan_off[i], &r->plan_len[i]);
    if (pl_rank() != 0 || !judge) return 1;
    struct l2_plan_fig pf;
    if (l2_judge_plan(lay, r->c->opt.bucket_bytes, r->nplan, r->plan_off, r->plan_len, &pf))
        return 1;
    *r->tfig = (struct l2_tfig){.code = L2_T_PLAN, .plan = pf};
    return 0;
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
    if (!ok) {
        r->ob->code = L2_C_INIT_CHANGED;
        r->ob->bad_elem = bad;
    }
    return ok;
}

/* Section 3: replicas equal to rank 0's after ddp_new, and what it broadcast; section 5: the
 * bucket plan against the contract of ddp.h. Returns 0 when the case cannot go on. */
int l2_check_setup(struct l2_run *r, const struct pl_ledger *delta)
{
    int bad_rank = -1, me = pl_rank();
    size_t bad_elem = 0;
    if (!rank0_kept_own(r)) {
        r->out->correct = 0;
        return 0;
    }
    if (!gr_replicas_equal(r->m->params, r->ref->numel, &bad_rank, &bad_elem)) {
        r->ob->code = L2_C_NOT_BROADCAST;
        r->ob->bad_rank = bad_rank;
        r->ob->bad_elem = bad_elem;
        r->out->correct = 0;
        return 0;
    }
    r->nplan = r->c->opt.variant == DDP_NAIVE ? 0 : ddp_num_buckets(r->d);
    if (!r->want_traffic) return 1;
    gr_ledger_gather_world(delta, r->all);
    l2_traffic_verdict(r, me != 0 || judge_broadcast_traffic(r->s, r->c, r->all, r->tfig));
    if (r->c->opt.variant != DDP_NAIVE) l2_traffic_verdict(r, read_plan(r, r->out->traffic));
    return 1;
}

/* Accumulation microbatches send nothing but the step's one count exchange: rank 0 checks
 * what every rank sent. */
int l2_judge_silent_microbatch(const struct l2_run *r, int step, int mb)
{
    double count = pl_ring_bytes_sent(PL_ALL_REDUCE, l2_dp_size(r->c), 4.0 * L2_COUNT_FLOATS);
    for (int k = 0; k < pl_size(); k++) {
        double by = gr_ledger_total_bytes(&r->all[k]);
        long calls = l2_data_calls(&r->all[k]);
        if (by == 0 && calls == 0) continue;
        int small = calls == 1 && r->all[k].calls[PL_ALL_REDUCE] == 1 && by <= count * (1 + 1e-9);
        if (small && !r->counted[k]++) continue;
        *r->tfig = (struct l2_tfig){.code = small ? L2_T_COUNT_AGAIN : L2_T_MICROBATCH,
                                    .step = step, .mb = mb, .rank = k, .got = by,
                                    .calls = calls};
        return 0;
    }
    return 1;
}

/* Collective: every all-reduce of the step covered one tensor (naive) or one bucket of the
 * plan this rank reported (judged already on rank 0), as the ledger's bytes and calls
 * cannot tell. */
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
        n = r->plan_off && r->nplan > 0 && r->nplan <= lay->n_tensors ? r->nplan : 0;
        memcpy(off, r->plan_off, (size_t)n * sizeof *off);
        memcpy(len, r->plan_len, (size_t)n * sizeof *len);
    }
    struct l2_range_fig rf;
    int ok = l2_calls_judge_ranges(r->calls, step, off, len, n, L2_COUNT_FLOATS, &rf);
    if (!ok && pl_rank() == 0) *r->tfig = (struct l2_tfig){.code = L2_T_RANGES, .range = rf};
    free(off);
    free(len);
    return ok;
}

int l2_check_issue_times(const struct l2_run *r, int step)
{
    if (l2_calls_judge_timing(r->calls, step, &r->ob->early)) return 1;
    r->ob->code = L2_C_EARLY_START;
    r->ob->step = step;
    return 0;
}

/* The averaged gradient of step against the single-device gradient of the whole batch;
 * on a difference, rank 0 records why from figures every rank computed. */
int l2_check_grads(const struct l2_run *r, int step)
{
    size_t numel = r->ref->numel;
    struct gr_param_verdict v;
    gr_check_grads(r->ref, step, GR_REPLICATED, 0, numel, r->m->grads, GR_TOL_GRADS, &v);
    int bad_rank = -1;
    size_t bad_elem = 0;
    int eq = group_replicas_equal(r, r->m->grads, numel, &bad_rank, &bad_elem);
    if (v.ok && eq) return 1;
    r->ob->step = step;
    r->ob->bad_rank = bad_rank;
    r->ob->bad_elem = bad_elem;
    if (v.ok) {
        r->ob->code = L2_C_GRAD_BITS;
        return 0;
    }
    r->ob->code = L2_C_GRADS;
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
    double zeroed = r->c->microbatches > 1 && !r->c->uneven
                        ? l2_accum_zeroed_each(&r->acc, r->group, host, want) : 1;
    if (r->c->uneven) l2_uneven_figures(r, step, host, want);
    free(host);
    double rel = m2 > 0 ? sqrt(e2 / m2) : 1;
    double krel = prev && r2 > 0 && alpha > 0.01 && alpha < 1.01 ? sqrt(k2 / r2) : 1;
    PL_CHECK_MPI(MPI_Reduce(&g2, &g2all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
    PL_CHECK_MPI(MPI_Reduce(&r2, &r2all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
    PL_CHECK_MPI(MPI_Reduce(&rel, &mix, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    PL_CHECK_MPI(MPI_Reduce(&krel, &kept, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    if (pl_rank() == 0)
        r->ob->grads = (struct l2_gfig){
            .v = v, .replicas_equal = eq, .bad_rank = bad_rank, .bad_elem = bad_elem,
            .ratio = r2all > 0 ? sqrt(g2all / r2all) : 0, .world_mean = both && mix < 1e-3,
            .kept_last = kept < 1e-2, .zeroed_each = zeroed < 1e-3,
            .summed = l2_calls_summed(r->calls), .async_avg = l2_calls_async_avg(r->calls),
            .acc_mb = r->acc.mb, .acc_rank = r->acc.rank, .late_rank = r->acc.late_rank,
            .acc_bytes = r->acc.bytes, .late_bytes = r->acc.late_bytes,
            .acc_calls = r->acc.calls};
    return 0;
}

/* The loss of the whole batch (the mean over this rank's group, each rank's weighted by its
 * sequences) against its reference: each rank records its group's; the worst group's fails
 * the case. */
int l2_check_loss(const struct l2_run *r, int step, double loss)
{
    double global = 0, mine = loss * r->B;
    PL_CHECK_MPI(MPI_Allreduce(&mine, &global, 1, MPI_DOUBLE, MPI_SUM, r->group));
    global /= r->all_B;
    struct l2_loss_fig f = {global, r->ref->loss[step], gr_rel_err(global, r->ref->loss[step]),
                            loss};
    double worst = 0;
    PL_CHECK_MPI(MPI_Allreduce(&f.err, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    r->ob->loss = f;
    if (worst <= GR_TOL_LOSS) return 1;
    r->ob->code = L2_C_LOSS;
    r->ob->step = step;
    return 0;
}

int l2_check_params(const struct l2_run *r)
{
    struct gr_param_verdict v;
    gr_check_params(r->ref, GR_REPLICATED, 0, r->ref->numel, r->m->params,
                    GR_TOL_PARAMS, &v);
    if (v.ok) return 1;
    r->ob->code = L2_C_PARAMS;
    r->ob->params = v;
    return 0;
}

/* Every replica's parameters after the update equal rank 0's bit for bit: checked directly,
 * the first rank and element that differ recorded. */
int l2_check_replicas(const struct l2_run *r, int step)
{
    int bad_rank = -1;
    size_t bad_elem = 0;
    if (group_replicas_equal(r, r->m->params, r->ref->numel, &bad_rank, &bad_elem)) return 1;
    r->ob->code = L2_C_REPLICAS;
    r->ob->step = step;
    r->ob->bad_rank = bad_rank;
    r->ob->bad_elem = bad_elem;
    return 0;
}

/* Collective: 1 when no rank holds more of the ledger than at `before`; *mine: the bytes this
 * rank holds more. */
int l2_check_nothing_kept(double before, double *mine)
{
    double most = 0;
    *mine = l2_mem_held() - before;
    PL_CHECK_MPI(MPI_Allreduce(mine, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    return most <= 0;
}
