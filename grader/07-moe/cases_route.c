/* cases_route.c: Lab 7's router and permutation cases (lab07.h): the student's host functions
 * on router probabilities drawn here (skewed, tied, a hot expert), against lib/model.h's
 * pl_moe_capacity and pl_moe_route and a counting sort of the grader's own: exact. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lab07.h"

/* Router probabilities of one test: a softmax of drawn logits, scaled by `sharp` (large:
 * confident routing), with `hot` added to expert 0's logit (a hot expert), and every fifth
 * token a copy of the previous one with two experts tied. */
static void draw_probs(float *p, int N, int E, uint64_t seed, float sharp, float hot)
{
    for (int t = 0; t < N; t++) {
        float *row = p + (size_t)t * E;
        double z[64], mx = -1e30, sum = 0;
        for (int e = 0; e < E; e++) {
            z[e] = sharp * pl_rng_normal(seed, 77, (uint64_t)t * E + e) + (e == 0 ? hot : 0);
            if (t % 5 == 4 && e == 1) z[e] = z[0];
            if (z[e] > mx) mx = z[e];
        }
        for (int e = 0; e < E; e++) sum += exp(z[e] - mx);
        for (int e = 0; e < E; e++) row[e] = (float)(exp(z[e] - mx) / sum);
    }
}

const struct l7_route_case L7_ROUTE_CASES[] = {
    {40, 4, 1, 1.0f, 1.0f, 0.0f, 0.01f},   {40, 4, 2, 1.0f, 1.0f, 0.0f, 0.01f},
    {40, 8, 2, 0.5f, 2.0f, 0.0f, 0.3f},    {40, 8, 1, 1.25f, 1.0f, 2.0f, 0.01f},
    {40, 8, 2, 1.25f, 2.0f, 3.0f, 1e-3f},  {50, 4, 2, 1.1f, 1.0f, 1.0f, 0.01f},
    {32, 8, 2, 8.0f, 1.0f, 0.0f, 0.0f},    {7, 4, 1, 0.3f, 1.0f, 0.0f, 0.01f},
    {33, 4, 2, 1.0f, 0.0f, 0.0f, 2.0f},    {24, 8, 2, 1e10f, 1.0f, 0.0f, 0.05f},
    {24, 8, 1, INFINITY, 1.0f, 4.0f, 0.01f},
};
const int L7_N_ROUTE_CASES = (int)(sizeof L7_ROUTE_CASES / sizeof L7_ROUTE_CASES[0]);

int l7_run_capacity(struct l7_state *st)
{
    static const int Ns[] = {7, 32, 40, 50, 100, 128};
    /* up to factors whose product overflows an int, and infinity: "no capacity limit" */
    static const float cfs[] = {0.3f, 0.5f, 1.0f, 1.1f, 1.25f, 2.0f, 8.0f, 3e9f, 1e10f,
                                INFINITY};
    const int ncf = (int)(sizeof cfs / sizeof cfs[0]);
    for (int a = 0; a < 6; a++)
        for (int e = 4; e <= 8; e += 4)
            for (int k = 1; k <= 2; k++)
                for (int f = 0; f < ncf; f++) {
                    int got = moe_capacity(Ns[a], e, k, cfs[f]);
                    int want = pl_moe_capacity(Ns[a], e, k, cfs[f]);
                    if (got == want) continue;
                    double product = (double)cfs[f] * Ns[a] * k / e;
                    l7_why(st, "moe_capacity(N=%d, E=%d, k=%d, cf=%g) = %d, the kit's "
                           "rule gives %d: ceil(cf x N x k / E) computed in double from the "
                           "float factor, at least 1 and at most N (section 2)%s",
                           Ns[a], e, k, (double)cfs[f], got, want,
                           got == want - 1 ? "; yours rounds down where the rule rounds up"
                           : !(product < 2147483647.0)
                               ? "; here cf x N x k / E does not fit an int, so converting it "
                                 "before the clamp gives nonsense: clamp to N in double first, "
                                 "then convert (docs/labs/07-moe-hints.md)"
                               : "");
                    return 0;
                }
    return 1;
}

void l7_describe_route_case(const struct l7_route_case *c, char *buf, size_t len)
{
    snprintf(buf, len, "N=%d tokens, E=%d experts, top-%d, capacity factor %g (%d slots), "
             "aux_coef %g%s%s", c->N, c->E, c->k, (double)c->cf,
             pl_moe_capacity(c->N, c->E, c->k, c->cf), (double)c->coef,
             c->hot > 0 ? ", a hot expert 0" : "", c->sharp == 0 ? ", all experts tied" : "");
}

/* The first difference between two routings, said with its meaning; 1 when equal. */
int l7_compare_routing(struct l7_state *st, const struct pl_moe_routing *got,
                       const struct pl_moe_routing *want)
{
    const int N = want->N, k = want->k, E = want->E;
    for (int i = 0; i < N * k; i++)
        if (got->expert[i] != want->expert[i]) {
            l7_why(st, "choice %d of token %d: expert %d, the reference picks %d (top-k by "
                   "probability, ties to the lower expert index)", i % k + 1, i / k,
                   got->expert[i], want->expert[i]);
            return 0;
        }
    static const char *const order = "Slots fill choice by choice: every first choice in "
                                     "token order, then every second choice; a choice "
                                     "finding its expert full is dropped (section 2)";
    for (int i = 0; i < N * k; i++)
        if ((got->slot[i] < 0) != (want->slot[i] < 0)) {
            l7_why(st, "choice %d of token %d (expert %d): %s, the reference %s. %s", i % k + 1,
                i / k,
                want->expert[i], got->slot[i] < 0 ? "dropped" : "kept",
                want->slot[i] < 0 ? "drops it" : "keeps it", order);
            return 0;
        }
    for (int i = 0; i < N * k; i++)
        if (got->slot[i] != want->slot[i]) {
            l7_why(st, "choice %d of token %d (expert %d) is in slot %d, the reference's slot %d. "
                       "%s",
                i % k + 1, i / k, want->expert[i], got->slot[i], want->slot[i], order);
            return 0;
        }
    for (int e = 0; e < E; e++)
        if (got->count[e] != want->count[e]) {
            l7_why(st, "expert %d holds %d tokens, the reference %d", e, got->count[e],
                   want->count[e]);
            return 0;
        }
    if (got->dropped != want->dropped) {
        l7_why(st, "%ld choices dropped, the reference drops %ld", got->dropped,
               want->dropped);
        return 0;
    }
    return 1;
}

static int compare_router_rest(struct l7_state *st, const struct pl_moe_routing *got,
                               const struct pl_moe_routing *want, float coef)
{
    for (int i = 0; i < want->N * want->k; i++)
        if (got->gate[i] != want->gate[i]) {
            l7_why(st, "gate of choice %d of token %d is %g, the reference %g: the "
                   "gate is the router probability itself, not renormalised",
                   i % want->k + 1, i / want->k, (double)got->gate[i], (double)want->gate[i]);
            return 0;
        }
    for (int e = 0; e < want->E; e++)
        for (int s = 0; s < want->count[e]; s++) {
            size_t i = (size_t)e * want->cap + s;
            if (got->rows[i] != want->rows[i] || got->gates[i] != want->gates[i]) {
                l7_why(st, "slot %d of expert %d holds token %d (gate %g), the "
                       "reference token %d (gate %g)", s, e, got->rows[i],
                       (double)got->gates[i], want->rows[i], (double)want->gates[i]);
                return 0;
            }
        }
    for (int e = 0; e < want->E; e++)
        if (fabs(got->f[e] - want->f[e]) > 1e-12 || fabs(got->P[e] - want->P[e]) > 1e-9) {
            l7_why(st, "expert %d: f = %.9g, P = %.9g; the reference f = %.9g (its "
                   "share of the N k choices, before dropping), P = %.9g (its mean "
                   "probability)", e, got->f[e], got->P[e], want->f[e], want->P[e]);
            return 0;
        }
    if (gr_rel_err(got->aux, want->aux) > 1e-9) {
        double sum = 0;
        for (int e = 0; e < want->E; e++) sum += want->f[e] * want->P[e];
        double a = sum > 0 ? got->aux / (want->E * sum) : 0;
        char hint[200] = "";
        if (sum > 0 && fabs(a - coef) > 1e-6 * (fabs(coef) + 1e-3))
            snprintf(hint, sizeof hint, ": yours is that sum times %.6g where a = aux_coef = %g "
                     "in this call; use the argument, not a fixed coefficient", a,
                     (double)coef);
        l7_why(st, "aux loss %.9g, the reference %.9g = a x E x sum_i f_i P_i%s",
               got->aux, want->aux, hint);
        return 0;
    }
    return 1;
}

int l7_run_route_case(struct l7_state *st, const struct l7_route_case *c, int index)
{
    int cap = pl_moe_capacity(c->N, c->E, c->k, c->cf);
    float *p = pl_mem_alloc((size_t)c->N * c->E * sizeof(float), PL_MEM_WORK, PL_HOST,
                            "router test probs");
    draw_probs(p, c->N, c->E, pl_mix64(st->seed + 31u * (uint64_t)index), c->sharp, c->hot);
    struct pl_moe_routing *got = pl_moe_routing_new(c->N, c->E, c->k, cap);
    struct pl_moe_routing *want = pl_moe_routing_new(c->N, c->E, c->k, cap);
    pl_moe_route(want, p, c->coef);
    /* moe_forward routes a layer into the same routing step after step: route another draw,
     * with expert 0 hotter, into it first */
    float *q = pl_mem_alloc((size_t)c->N * c->E * sizeof(float), PL_MEM_WORK, PL_HOST,
                            "router test probs before");
    draw_probs(q, c->N, c->E, pl_mix64(st->seed + 31u * (uint64_t)index + 7u), c->sharp + 1.0f,
               c->hot + 2.0f);
    moe_route(got, q, c->coef + 0.5f);
    moe_route(got, p, c->coef);
    int ok = !pl_todo_what() && l7_compare_routing(st, got, want) &&
             compare_router_rest(st, got, want, c->coef);
    if (!ok && !pl_todo_what()) {
        /* the same probabilities into a fresh routing: right there, it carried state over */
        size_t said = strlen(L7_WHY_TEXT(st));
        struct pl_moe_routing *fresh = pl_moe_routing_new(c->N, c->E, c->k, cap);
        moe_route(fresh, p, c->coef);
        int fresh_ok = l7_compare_routing(st, fresh, want) &&
                       compare_router_rest(st, fresh, want, c->coef);
        L7_WHY_TEXT(st)[said] = '\0';
        if (fresh_ok)
            l7_why(st, "this was the second call into one routing; into a fresh one yours is "
                       "right. moe_route sets every field on every call (moe_forward routes "
                       "each layer into the same routing step after step): count, f, P and "
                       "dropped start again from zero, not from the last call's (section 2)");
        pl_moe_routing_free(fresh);
        char d[200];
        l7_describe_route_case(c, d, sizeof d);
        l7_why(st, "in: %s", d);
    }
    pl_moe_routing_free(got);
    pl_moe_routing_free(want);
    pl_mem_free(q);
    pl_mem_free(p);
    return ok;
}


int l7_run_permute_case(struct l7_state *st, const struct l7_route_case *c, int index)
{
    int cap = pl_moe_capacity(c->N, c->E, c->k, c->cf), nk = c->N * c->k;
    float *p = pl_mem_alloc((size_t)c->N * c->E * sizeof(float), PL_MEM_WORK, PL_HOST,
                            "permute test probs");
    draw_probs(p, c->N, c->E, pl_mix64(st->seed + 31u * (uint64_t)index), c->sharp, c->hot);
    struct pl_moe_routing *r = pl_moe_routing_new(c->N, c->E, c->k, cap);
    pl_moe_route(r, p, c->coef);
    int *buf = pl_mem_alloc((size_t)(2 * (c->E + 1) + 4 * nk) * sizeof(int), PL_MEM_WORK,
                            PL_HOST, "permute test");
    int *ws = buf, *wp = ws + c->E + 1, *wi = wp + nk;
    int *gs = wi + nk, *gp = gs + c->E + 1, *gi = gp + nk;
    l7_or_permutation(r, ws, wp, wi);
    moe_permute(r, gs, gp, gi);
    int ok = !pl_todo_what();
    for (int e = 0; ok && e <= c->E; e++)
        if (gs[e] != ws[e]) {
            l7_why(st, "start[%d] = %d, expected %d: the kept choices of experts "
                   "0..%d (an exclusive prefix sum of count)", e, gs[e], ws[e], e - 1);
            ok = 0;
        }
    for (int q = 0; ok && q < ws[c->E]; q++)
        if (gp[q] != wp[q]) {
            l7_why(st, "perm[%d] = %d, expected token %d: position start[e] + slot "
                   "holds the token of expert e's slot", q, gp[q], wp[q]);
            ok = 0;
        }
    for (int i = 0; ok && i < nk; i++)
        if (gi[i] != wi[i]) {
            l7_why(st, "inv[%d] (choice %d of token %d) = %d, expected %d%s", i,
                   i % c->k + 1, i / c->k, gi[i], wi[i],
                   wi[i] < 0 ? " (-1: it was dropped)" : "");
            ok = 0;
        }
    if (!ok && !pl_todo_what()) {
        char d[200];
        l7_describe_route_case(c, d, sizeof d);
        l7_why(st, "in: %s", d);
    }
    pl_mem_free(buf);
    pl_moe_routing_free(r);
    pl_mem_free(p);
    return ok;
}
