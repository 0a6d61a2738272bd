/* checks_train.c: the checks of Lab 7's training cases (lab07.h), each recording what this
 * rank finds in figures with l7_note (judge.c words them): a step's MoE outputs against the
 * reference's, the loss, the gradients and parameters tensor by tensor, the routing of the
 * first step, its all-to-all and gradient-sum traffic, the code's EP group and where it sits
 * on 2 nodes. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lab07.h"

/* How far got is from want over n floats: ||got - want|| / max(||want||, floor); *scale is
 * the least-squares factor got ~ scale * want. */
double l7_rel_l2(const float *got, const float *want, size_t n, double floor, double *scale,
                 int *nonfinite)
{
    double d = 0, w = 0, gw = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) (*nonfinite)++;
        double e = (double)got[i] - want[i];
        d += e * e;
        w += (double)want[i] * want[i];
        gw += (double)got[i] * want[i];
    }
    *scale = w > 0 ? gw / w : 1.0;
    double den = sqrt(w) > floor ? sqrt(w) : floor;
    return den > 0 ? sqrt(d) / den : sqrt(d);
}

/* The relative error of this rank's part of tensor t; scale and nonfinite as rel_l2's. It
 * decides: a tensor whose reference norm is below the whole buffer's RMS times sqrt(its
 * size) is measured against that floor, so that rounding alone never fails it. */
static double tensor_error(const struct l7_or_reference *o, int t, const float *got,
                           const float *want, double all, double *scale, int *bad)
{
    size_t off, n;
    l7_or_owned_range(&o->layout, t, o->ep_rank, o->ep, &off, &n);
    double floor = sqrt(all) * sqrt((double)n / (double)o->numel);
    *bad = 0;
    return l7_rel_l2(got + off, want + off, n, floor, scale, bad);
}

/* What a message quotes: the error of this rank's part of tensor t against that part's own
 * reference norm (never the floor's), so that "yours is 1/2 of it" reads 5.00e-01; when
 * the reference part is all zeros, the norm of the error itself, and *zero is set. */
static double own_error(const struct l7_or_reference *o, int t, const float *got,
                        const float *want, int *zero)
{
    size_t off, n;
    l7_or_owned_range(&o->layout, t, o->ep_rank, o->ep, &off, &n);
    double d = 0, w = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)got[off + i] - want[off + i];
        d += e * e;
        w += (double)want[off + i] * want[off + i];
    }
    *zero = w == 0;
    return w > 0 ? sqrt(d / w) : sqrt(d);
}

/* The index of tensor name, or -1. */
static int tensor_index(const struct pl_model_layout *lay, const char *name)
{
    for (int t = 0; t < lay->n_tensors; t++)
        if (!strcmp(lay->tensors[t].name, name)) return t;
    return -1;
}

/* The last block's router tensor when its gradient is off while its experts' are right
 * (the experts' backward saw the right d outputs, so the router's backward is where it
 * went wrong), or -1. */
static int router_alone_wrong(const struct l7_or_reference *o, const float *got,
                              const float *want, double all, double tol)
{
    char router[PL_NAME_LEN], fc[PL_NAME_LEN];
    int L = o->layout.cfg.n_layers;
    snprintf(router, sizeof router, "h.%d.moe.w_router", L - 1);
    snprintf(fc, sizeof fc, "h.%d.moe.w_fc", L - 1);
    int r = tensor_index(&o->layout, router), f = tensor_index(&o->layout, fc), bad;
    double scale;
    return r >= 0 && f >= 0 && tensor_error(o, r, got, want, all, &scale, &bad) > tol &&
                   !bad && tensor_error(o, f, got, want, all, &scale, &bad) <= tol
               ? r
               : -1;
}

/* This rank's part of every tensor (got, host [numel]) against want: the first tensor off by
 * more than tol fails with a reason that names it, and what the pattern of errors suggests.
 * A wrong router gradient spreads to every tensor the backward reaches after it (wte
 * first in flat order), so when the router alone is wrong it is the tensor named. */
int l7_judge_tensors(struct l7_state *st, const struct l7_or_reference *o, const float *got,
                     const float *want, double tol, int step)
{
    const struct pl_model_layout *lay = &o->layout;
    double all = 0;
    for (size_t i = 0; i < o->numel; i++) all += (double)want[i] * want[i];
    for (int first = 0; first < lay->n_tensors; first++) {
        double scale;
        int bad;
        double rel = tensor_error(o, first, got, want, all, &scale, &bad);
        if (!bad && rel <= tol) continue;
        int router = bad ? -1 : router_alone_wrong(o, got, want, all, tol);
        int t = router >= 0 ? router : first;
        if (t != first) tensor_error(o, t, got, want, all, &scale, &bad);
        const struct pl_param_desc *d = &lay->tensors[t];
        int zero;
        double own = own_error(o, t, got, want, &zero);
        struct l7_reason *w = l7_note(st, L7_R_TENSOR,
                                      L7_V(step, l7_or_is_expert_tensor(d), bad, zero,
                                           router >= 0, o->ep, o->slices),
                                      L7_X(own, tol, scale, o->loss_scale));
        snprintf(w->name[0], sizeof w->name[0], "%s", d->name);
        snprintf(w->name[1], sizeof w->name[1], "%s", lay->tensors[first].name);
        return 0;
    }
    return 1;
}

/* 1 when some expert of layer l, in the first step, received no rows from any member of
 * this rank's EP group while a later expert did. */
static int empty_expert(const struct l7_or_reference *o, int l)
{
    const int L = o->layout.cfg.n_layers, E = o->layout.cfg.n_experts;
    int seen_empty = 0;
    for (int e = 0; e < E; e++) {
        int rows = 0;
        for (int m = 0; m < o->ep; m++) rows += o->route[(size_t)o->members[m] * L + l].count[e];
        if (!rows) seen_empty = 1;
        else if (seen_empty) return 1;
    }
    return 0;
}

/* The MoE outputs of step `step` against the reference's for this rank's tokens; stale is
 * what branch held before each call. After the first step the parameters differ from the
 * reference's by rounding, hence the looser bound. 1 when right; 0 when wrong, and -1 when
 * wrong by keeping stale (the later blocks' routing then differs only because their input
 * does). */
int l7_judge_branches(struct l7_state *st, const struct l7_or_reference *o, const float *got,
                      const float *stale, int C, int step)
{
    const size_t NC = (size_t)o->N * C;
    const int L = o->layout.cfg.n_layers;
    const double tol = step == 0 ? GR_TOL_LOSS : GR_TOL_PARAMS;
    const float *want = o->branch + (size_t)step * L * NC;
    const float *ungated_want = o->ungated + (size_t)step * L * NC;
    for (int l = 0; l < L; l++) {
        double scale, su, sa;
        int bad = 0;
        double rel = l7_rel_l2(got + l * NC, want + l * NC, NC, 0, &scale, &bad);
        if (!bad && rel <= tol) continue;
        double ungated = l7_rel_l2(got + l * NC, ungated_want + l * NC, NC, 0, &su, &bad);
        float *added = pl_mem_alloc(NC * sizeof(float), PL_MEM_WORK, PL_HOST, "branch added");
        for (size_t i = 0; i < NC; i++) added[i] = got[l * NC + i] - stale[l * NC + i];
        /* the sum onto ln rounds at ln's scale: a hint, not a verdict, so a loose bound */
        double onto = l7_rel_l2(added, want + l * NC, NC, 0, &sa, &bad);
        pl_mem_free(added);
        l7_note(st, L7_R_BRANCH, L7_V(step, l, empty_expert(o, l)),
                L7_X(rel, tol, ungated, onto));
        return ungated > tol && onto <= 1e-3 ? -1 : 0;
    }
    return 1;
}

/* The routing of the first step: per layer, the same choices kept and dropped. */
int l7_judge_counts(struct l7_state *st, const struct l7_or_reference *o,
                    const struct moe *moe)
{
    const struct pl_model_config *c = &o->layout.cfg;
    for (int l = 0; l < c->n_layers; l++) {
        const struct pl_moe_routing *got = moe_last_routing(moe, l);
        const struct l7_or_routing *w = &o->route[(size_t)o->me * c->n_layers + l];
        if (!got) {
            l7_note(st, L7_R_LAST_NULL, L7_V(l), NULL);
            return 0;
        }
        if (got->N != o->N || got->E != c->n_experts || got->k != c->top_k || got->cap != w->cap) {
            l7_note(st, L7_R_SHAPE, L7_V(l, got->N, got->E, got->k, got->cap, o->N,
                                         c->n_experts, c->top_k, w->cap), NULL);
            return 0;
        }
        struct pl_moe_routing want = {.N = o->N, .E = c->n_experts, .k = c->top_k,
                                      .cap = w->cap, .expert = w->expert, .slot = w->slot,
                                      .count = w->count, .dropped = w->dropped};
        if (!l7_compare_routing(st, got, &want)) {
            l7_note(st, L7_R_IN_BLOCK, L7_V(l), NULL);
            return 0;
        }
    }
    return 1;
}

/* The bytes the gradient sums of moe_finish_gradients send from this rank, at most: the
 * non-expert gradients summed over all n ranks, and this rank's experts' rows over the
 * n/ep copies of them in the other EP groups, each by the library's ring. Any collective
 * other than the all-to-alls counts (an all-reduce, or a reduce-scatter with an
 * all-gather, send the same). 0 with a reason when more went. */
static int judge_grad_sums(struct l7_state *st, const struct l7_or_reference *o,
                           const struct pl_ledger *d)
{
    const struct pl_model_layout *lay = &o->layout;
    const int n = o->slices, copies = o->slices / o->ep;
    double dense = 0, mine = 0, experts = 0;
    for (int t = 0; t < lay->n_tensors; t++) {
        size_t off, len;
        l7_or_owned_range(lay, t, o->ep_rank, o->ep, &off, &len);
        if (l7_or_is_expert_tensor(&lay->tensors[t])) {
            mine += (double)len;
            experts += (double)lay->tensors[t].numel;
        } else {
            dense += (double)len;
        }
    }
    const double f = sizeof(float);
    double want = pl_ring_bytes_sent(PL_ALL_REDUCE, n, f * dense) +
                  pl_ring_bytes_sent(PL_ALL_REDUCE, copies, f * mine);
    double got = 0;
    for (int k = 0; k < PL_NKINDS; k++)
        if (k != PL_ALL_TO_ALL && k != PL_ALL_TO_ALL_V && k != PL_P2P)
            got += pl_ledger_bytes(d, k, -1);
    if (got <= want * (1 + 1e-9) + 1) return 1;
    double whole = pl_ring_bytes_sent(PL_ALL_REDUCE, n, f * (dense + experts));
    l7_note(st, L7_R_SUMS, L7_V(n, copies), L7_X(got, want, dense));
    l7_note(st, L7_R_SUMS_HOW, L7_V(got >= whole * (1 - 1e-9) - 1), L7_X(experts, mine));
    return 0;
}

/* The ledger of the first step against what its routing must send: per MoE layer one
 * pl_all_to_all of the counts and four pl_all_to_all_v (dispatch, combine, and both in
 * reverse), whose off-rank bytes are the rows of kept choices crossing ranks; no
 * point-to-point and no barrier (it moves no bytes, so only its count shows it). */
int l7_judge_traffic(struct l7_state *st, const struct l7_or_reference *o,
                     const struct pl_ledger *d)
{
    const struct pl_model_config *c = &o->layout.cfg;
    const int L = c->n_layers, El = c->n_experts / o->ep;
    const double row = (double)c->d_model * sizeof(float);
    double want = 0, balanced = 0;
    for (int l = 0; l < L; l++) {
        long dispatch, combine;
        l7_or_a2a_rows(o, l, &dispatch, &combine);
        want += 2.0 * (double)(dispatch + combine) * row;
    }
    balanced = 2.0 * L * 2.0 * (o->ep - 1) / o->ep * o->N * c->top_k * row;
    double got = pl_ledger_bytes(d, PL_ALL_TO_ALL_V, -1);
    double counts = pl_ledger_bytes(d, PL_ALL_TO_ALL, -1);
    double want_counts = (double)L * (o->ep - 1) * El * sizeof(float);
    if (d->calls[PL_ALL_TO_ALL_V] != 4L * L || d->calls[PL_ALL_TO_ALL] != L) {
        l7_note(st, L7_R_CALLS, L7_V(d->calls[PL_ALL_TO_ALL], d->calls[PL_ALL_TO_ALL_V], L),
                NULL);
        return 0;
    }
    if (pl_ledger_bytes(d, PL_P2P, -1) > 0) {
        l7_note(st, L7_R_P2P, NULL, L7_X(pl_ledger_bytes(d, PL_P2P, -1)));
        return 0;
    }
    if (d->calls[PL_BARRIER] > 0) {
        l7_note(st, L7_R_BARRIER, L7_V(d->calls[PL_BARRIER], L), NULL);
        return 0;
    }
    if (counts != want_counts) {
        l7_note(st, L7_R_COUNTS_BYTES, L7_V(L, o->ep - 1, El), L7_X(counts, want_counts));
        return 0;
    }
    if (got != want) {
        double padded = 2.0 * L * 2.0 * (o->ep - 1) * El * o->route[0].cap * row;
        l7_note(st, L7_R_A2AV, L7_V(got == padded), L7_X(got, want));
        l7_note(st, L7_R_BALANCED, NULL, L7_X(balanced));
        return 0;
    }
    return judge_grad_sums(st, o, d);
}

/* The code under test's EP group, from moe_ep_comm: its size must be the lab's EP degree;
 * the grader then follows whichever experts each rank owns. 0 with a reason otherwise. */
int l7_learn_ep_group(struct l7_state *st, struct l7_or_reference *o, const struct moe *moe,
                      struct pl_comm *lab, int want)
{
    struct pl_comm *c = moe_ep_comm(moe);
    if (!c || pl_comm_size(c) != want) {
        l7_note(st, L7_R_EP_SIZE, L7_V(c != NULL, pl_size(), want), NULL);
        return 0;
    }
    o->ep = want;
    o->ep_rank = pl_comm_rank(c);
    int ordered = 1;
    for (int i = 0; i < want; i++) {
        o->world[i] = pl_comm_world_rank(c, i);
        o->members[i] = -1;
        for (int j = 0; j < pl_comm_size(lab); j++)
            if (pl_comm_world_rank(lab, j) == o->world[i]) o->members[i] = j;
        if (i && o->members[i] <= o->members[i - 1]) ordered = 0;
    }
    if (ordered) return 1;
    struct l7_reason *w = l7_note(st, L7_R_EP_ORDER, L7_V(want), NULL);
    memcpy(w->list, o->members, (size_t)(want < L7_LIST ? want : L7_LIST) * sizeof(int));
    return 0;
}

/* Where the EP group sits on a cluster of 2 nodes (the world's ranks split in two, as
 * `--nodes 2` places them): inside one node, or across, flagged with what this step's
 * all-to-all bytes would cost on dgx-h100's network instead of its NVLink. */
int l7_judge_placement(struct l7_state *st, const struct l7_or_reference *o,
                       const struct pl_ledger *d)
{
    int n = pl_size();
    if (n < 2 || n % 2) return 1;
    struct pl_topo t;
    char err[200];
    if (pl_topo_virtual(&t, n, 2, n / 2, err, sizeof err) != 0) pl_fatal("%s", err);
    if (pl_topo_group_link(&t, o->world, o->ep) == PL_LINK_INTRA) return 1;
    const struct pl_profile *p = pl_profile_find("dgx-h100");
    double bytes = pl_ledger_bytes(d, PL_ALL_TO_ALL_V, -1) + pl_ledger_bytes(d, PL_ALL_TO_ALL, -1);
    long calls = d->calls[PL_ALL_TO_ALL_V] + d->calls[PL_ALL_TO_ALL];
    double intra = bytes / p->bw[PL_LINK_INTRA] + calls * p->latency[PL_LINK_INTRA];
    double inter = bytes / p->bw[PL_LINK_INTER] + calls * p->latency[PL_LINK_INTER];
    struct l7_reason *w = l7_note(st, L7_R_PLACE, L7_V(n / 2, o->ep), L7_X(inter, intra));
    int *sorted = w->list, m = o->ep < L7_LIST ? o->ep : L7_LIST;
    memcpy(sorted, o->world, (size_t)m * sizeof(int));
    for (int i = 1; i < m; i++)
        for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
            int t_ = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t_;
        }
    return 0;
}
