/* cases_route.c: Lab 7's router and permutation cases (lab07.h): the student's host functions
 * on router probabilities drawn here (skewed, tied, a hot expert), against lib/model.h's
 * pl_moe_capacity and pl_moe_route and a counting sort of the grader's own: exact. */
#include <math.h>

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
    {36, 4, 1, 1.0f, 1.0f, 0.0f, 0.01f},   {40, 4, 2, 1.0f, 1.0f, 0.0f, 0.01f},
    {40, 8, 2, 0.5f, 2.0f, 0.0f, 0.3f},    {40, 8, 1, 1.25f, 1.0f, 2.0f, 0.01f},
    {40, 8, 2, 1.25f, 2.0f, 3.0f, 1e-3f},  {50, 4, 2, 1.1f, 1.0f, 1.0f, 0.01f},
    {32, 8, 2, 8.0f, 1.0f, 0.0f, 0.0f},    {7, 4, 1, 0.3f, 1.0f, 0.0f, 0.01f},
    {33, 4, 2, 1.0f, 0.0f, 0.0f, 2.0f},    {24, 8, 2, 1e10f, 1.0f, 0.0f, 0.05f},
    {24, 8, 1, INFINITY, 1.0f, 4.0f, 0.01f},
};
const int L7_N_ROUTE_CASES = (int)(sizeof L7_ROUTE_CASES / sizeof L7_ROUTE_CASES[0]);

int l7_run_capacity(struct l7_state *st)
{
    /* Not N = 40 with E = 4, top-1: a message would print the answer of the questions
     * capacity_n40_e4_cf10 and _cf11. N = 20, E = 4, top-2 meets the float factor 1.1 on an
     * integer product as N = 40 did. */
    static const int Ns[] = {7, 20, 32, 50, 100, 128};
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
                    l7_note(st, L7_R_CAPACITY, L7_V(Ns[a], e, k, got, want), L7_X(cfs[f]));
                    return 0;
                }
    return 1;
}

/* The first difference between two routings, recorded; 1 when equal. */
int l7_compare_routing(struct l7_state *st, const struct pl_moe_routing *got,
                       const struct pl_moe_routing *want)
{
    const int N = want->N, k = want->k, E = want->E;
    for (int i = 0; i < N * k; i++)
        if (got->expert[i] != want->expert[i]) {
            l7_note(st, L7_R_EXPERT, L7_V(i, k, got->expert[i], want->expert[i]), NULL);
            return 0;
        }
    for (int i = 0; i < N * k; i++)
        if ((got->slot[i] < 0) != (want->slot[i] < 0)) {
            l7_note(st, L7_R_KEPT, L7_V(i, k, want->expert[i], got->slot[i] < 0,
                                        want->slot[i] < 0), NULL);
            return 0;
        }
    for (int i = 0; i < N * k; i++)
        if (got->slot[i] != want->slot[i]) {
            l7_note(st, L7_R_SLOT, L7_V(i, k, want->expert[i], got->slot[i], want->slot[i]),
                    NULL);
            return 0;
        }
    for (int e = 0; e < E; e++)
        if (got->count[e] != want->count[e]) {
            l7_note(st, L7_R_COUNT, L7_V(e, got->count[e], want->count[e]), NULL);
            return 0;
        }
    if (got->dropped != want->dropped) {
        l7_note(st, L7_R_DROPPED, L7_V(got->dropped, want->dropped), NULL);
        return 0;
    }
    return 1;
}

static int compare_router_rest(struct l7_state *st, const struct pl_moe_routing *got,
                               const struct pl_moe_routing *want, float coef)
{
    const int k = want->k;
    for (int i = 0; i < want->N * k; i++)
        if (got->gate[i] != want->gate[i]) {
            l7_note(st, L7_R_GATE, L7_V(i, k), L7_X(got->gate[i], want->gate[i]));
            return 0;
        }
    for (int e = 0; e < want->E; e++)
        for (int s = 0; s < want->count[e]; s++) {
            size_t i = (size_t)e * want->cap + s;
            if (got->rows[i] != want->rows[i] || got->gates[i] != want->gates[i]) {
                l7_note(st, L7_R_ROW, L7_V(s, e, got->rows[i], want->rows[i]),
                        L7_X(got->gates[i], want->gates[i]));
                return 0;
            }
        }
    for (int e = 0; e < want->E; e++)
        if (fabs(got->f[e] - want->f[e]) > 1e-12 || fabs(got->P[e] - want->P[e]) > 1e-9) {
            l7_note(st, L7_R_FP, L7_V(e), L7_X(got->f[e], got->P[e], want->f[e], want->P[e]));
            return 0;
        }
    if (gr_rel_err(got->aux, want->aux) > 1e-9) {
        double sum = 0;
        for (int e = 0; e < want->E; e++) sum += want->f[e] * want->P[e];
        double a = sum > 0 ? got->aux / (want->E * sum) : 0;
        l7_note(st, L7_R_AUX, L7_V(sum > 0), L7_X(got->aux, want->aux, a, coef));
        return 0;
    }
    return 1;
}

/* The case, for the reason's last line. */
static void note_case(struct l7_state *st, const struct l7_route_case *c)
{
    l7_note(st, L7_R_IN_ROUTE, L7_V(c->N, c->E, c->k), L7_X(c->cf, c->sharp, c->hot, c->coef));
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
        int said = st->ob->n;
        struct pl_moe_routing *fresh = pl_moe_routing_new(c->N, c->E, c->k, cap);
        moe_route(fresh, p, c->coef);
        int fresh_ok = l7_compare_routing(st, fresh, want) &&
                       compare_router_rest(st, fresh, want, c->coef);
        st->ob->n = said;
        if (fresh_ok) l7_note(st, L7_R_FRESH, NULL, NULL);
        pl_moe_routing_free(fresh);
        note_case(st, c);
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
            l7_note(st, L7_R_START, L7_V(e, gs[e], ws[e]), NULL);
            ok = 0;
        }
    for (int q = 0; ok && q < ws[c->E]; q++)
        if (gp[q] != wp[q]) {
            l7_note(st, L7_R_PERM, L7_V(q, gp[q], wp[q]), NULL);
            ok = 0;
        }
    for (int i = 0; ok && i < nk; i++)
        if (gi[i] != wi[i]) {
            l7_note(st, L7_R_INV, L7_V(i, c->k, gi[i], wi[i]), NULL);
            ok = 0;
        }
    if (!ok && !pl_todo_what()) note_case(st, c);
    pl_mem_free(buf);
    pl_moe_routing_free(r);
    pl_mem_free(p);
    return ok;
}
