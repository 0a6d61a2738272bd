/* driver.c: the trusted test driver of Lab 7 (MoE expert parallelism), on the lab harness
 * (grader/common/harness.h). It drives the student's router, permutation and expert-parallel
 * MoE (moe.h):
 *
 *   router / permute  the host functions on router probabilities the driver draws (skewed,
 *                     tied, a hot expert), against lib/model.h's pl_moe_capacity and
 *                     pl_moe_route and a counting sort of its own: exact;
 *   top1 / top2       K training steps of the MoE-GPT on ep = world ranks, the driver running
 *                     every part but the MoE branch (embedding, attention, layernorms, head,
 *                     AdamW), against the single-device reference on the same slices
 *                     (oracle.c): every step's MoE outputs, loss and
 *                     gradients, the parameters after K steps, branch written over stale
 *                     values, dln added into, no memory kept from step to step or after
 *                     moe_free (correct); the routing of the first step, exactly, and
 *                     none before it (counts); the all-to-all calls and bytes of the
 *                     first step from the ledger, against what the routing sends off-rank
 *                     (traffic).
 *
 *   driver --op router|permute|top1|top2 --mode check [--parts correct,counts,traffic]
 *   driver --mode bench [--experts E] [--top-k K] [--capacity-factor F] [--skew S]
 *
 * Every judge is its own function writing its reason with why(); run() records each rank's
 * reasons per part and judge() gathers them to rank 0, which says the first failing rank's. */
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moe.h"
#include "oracle.h"
#include "plots.h"
#include "timeline.h"
#include "units.h"
#include "ops.h"
#include "paralab.h"
#include "harness.h"
#include "train.h"
/* struct pl_comm's count of operations in flight: pl_comm_free refuses to free a
 * communicator with any, and the grader says so as a verdict before it frees its own. */

#define K_STEPS 3
#define CORPUS_TOKENS 32768
#define CF_NONE 0.0f /* "no dropping": the case uses a factor of E / k, 1e10 or infinity */

static uint64_t base_seed = 1;
/* The hidden suite's shapes (ops top1-hidden, top2-hidden): shorter sequences, other expert
 * counts on 6 ranks. */
static int hidden_shape;

/* Sequences per step: every rank count the lab runs on divides it (6 only in the hidden
 * suite). */
static int global_b(int n)
{
    return n == 6 ? 12 : 8;
}

static int seq_len(void)
{
    return hidden_shape ? 12 : 16;
}

/* The largest EP degree at n ranks: all of them up to 4 (and 6 ranks in the hidden suite);
 * at 8, EP groups of 4 (a node's worth on the placement test's 2 nodes of 4) and expert data
 * parallelism across them. */
static int ep_full(int n)
{
    return n <= 4 || n == 6 ? n : 4;
}

/* A smaller EP degree, so that several EP groups hold different slices of the batch (DP x
 * EP): a group mistaken for the world changes the numbers. */
static int ep_part(int n)
{
    return n == 1 ? 1 : n == 2 ? 1 : n == 6 ? 3 : 2;
}

struct train_case {
    int E, k, ep;
    float cf;    /* CF_NONE: no dropping */
    float coef;  /* the load-balancing loss's coefficient */
    float scale; /* the backward's loss_scale times n: 1 in most cases */
    float hot;   /* > 0: the router pushed to experts 0, 3, 6 and away from the others */
};

/* The factor of case c: CF_NONE is E / k for the smaller expert count, and a factor far
 * beyond it (1e10 for top-1, infinity for top-2) for the larger. */
static float case_cf(const struct train_case *c)
{
    if (c->cf != CF_NONE) return c->cf;
    if (c->E <= 6 || c->hot > 0) return (float)c->E / (float)c->k;
    return c->k == 1 ? 1e10f : INFINITY;
}

static struct pl_model_config lab_config(uint64_t seed, const struct train_case *tc)
{
    struct pl_model_config c = pl_model_config_default();
    c.vocab = PL_BYTE_VOCAB;
    c.d_model = 32;
    c.n_layers = 2;
    c.n_heads = 2;
    c.d_ff = hidden_shape ? 40 : 48;
    c.seq_len = seq_len();
    c.dropout = 0.0f;
    c.n_experts = tc->E;
    c.top_k = tc->k;
    c.capacity_factor = case_cf(tc);
    c.aux_loss_coef = tc->coef;
    c.seed = seed;
    return c;
}

/* ---- verdicts of several ranks: the first failing rank's reason, said by rank 0 ---- */

/* This rank's reasons, per part (correct, counts, traffic), and the part why() writes. */
static const char *const PARTS[] = {"correct", "counts", "traffic", "placement", "time"};
#define NPARTS 5
#define PART_TIME 4
static char reasons[NPARTS][1024];
static int why_part;
#define why_text (reasons[why_part])

/* Adds a line to this rank's reason of the current part. */
static void __attribute__((format(printf, 1, 2))) why(const char *fmt, ...)
{
    size_t used = strlen(why_text);
    if (used + 2 >= sizeof why_text) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why_text + used, sizeof why_text - used - 1, fmt, ap);
    va_end(ap);
    strcat(why_text, "\n");
}

static int part_index(const char *part)
{
    for (int i = 0; i < NPARTS; i++)
        if (!strcmp(part, PARTS[i])) return i;
    pl_usage_error_all("--parts %s: Lab 7 judges correct, counts, traffic, placement and time",
                       part);
}

/* Collective: 1 when no rank has a reason for part; otherwise rank 0 says the lowest
 * failing rank's. Clears the reasons. */
static int verdict(const char *part)
{
    why_part = part_index(part);
    int ok = !why_text[0];
    int n = pl_size(), me = pl_rank();
    char *all = me == 0 ? pl_mem_alloc((size_t)n * sizeof why_text, PL_MEM_WORK, PL_HOST,
                                       "verdict reasons")
                        : NULL;
    PL_CHECK_MPI(MPI_Gather(why_text, sizeof why_text, MPI_CHAR, all, sizeof why_text, MPI_CHAR,
                            0, MPI_COMM_WORLD));
    int all_ok = 0;
    PL_CHECK_MPI(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (me == 0 && !all_ok)
        for (int r = 0; r < n; r++)
            if (all[(size_t)r * sizeof why_text]) {
                char *line = all + (size_t)r * sizeof why_text, *nl;
                for (int first = 1; *line; line = nl + 1, first = 0) {
                    nl = strchr(line, '\n');
                    if (!nl) break;
                    *nl = '\0';
                    if (first && n > 1) gr_say(part, "rank %d: %s", r, line);
                    else gr_say(part, "%s", line);
                }
                break;
            }
    pl_mem_free(all);
    why_text[0] = '\0';
    return all_ok;
}

/* ---- router and permutation: host arithmetic on drawn probabilities ---- */

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

struct route_case {
    int N, E, k;
    float cf, sharp, hot;
    float coef; /* aux_coef: 0.01 as usual, and others, 0 included */
};

static const struct route_case ROUTE_CASES[] = {
    {40, 4, 1, 1.0f, 1.0f, 0.0f, 0.01f},   {40, 4, 2, 1.0f, 1.0f, 0.0f, 0.01f},
    {40, 8, 2, 0.5f, 2.0f, 0.0f, 0.3f},    {40, 8, 1, 1.25f, 1.0f, 2.0f, 0.01f},
    {40, 8, 2, 1.25f, 2.0f, 3.0f, 1e-3f},  {50, 4, 2, 1.1f, 1.0f, 1.0f, 0.01f},
    {32, 8, 2, 8.0f, 1.0f, 0.0f, 0.0f},    {7, 4, 1, 0.3f, 1.0f, 0.0f, 0.01f},
    {33, 4, 2, 1.0f, 0.0f, 0.0f, 2.0f},    {24, 8, 2, 1e10f, 1.0f, 0.0f, 0.05f},
    {24, 8, 1, INFINITY, 1.0f, 4.0f, 0.01f},
};
#define N_ROUTE_CASES ((int)(sizeof ROUTE_CASES / sizeof ROUTE_CASES[0]))

static int judge_capacity(void)
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
                    why("moe_capacity(N=%d, E=%d, k=%d, cf=%g) = %d, the kit's "
                           "rule gives %d: ceil(cf x N x k / E) computed in double from the "
                           "float factor, at least 1 and at most N (section 2)%s",
                           Ns[a], e, k, (double)cfs[f], got, want,
                           got == want - 1 ? "; yours rounds down where the rule rounds up"
                           : !(product < 2147483647.0)
                               ? "; here cf x N x k / E does not fit an int, so converting it "
                                 "before the clamp gives nonsense: clamp to N in double first, "
                                 "then convert (appendix)"
                               : "");
                    return 0;
                }
    return 1;
}

static void describe_route_case(const struct route_case *c, char *buf, size_t len)
{
    snprintf(buf, len, "N=%d tokens, E=%d experts, top-%d, capacity factor %g (%d slots), "
             "aux_coef %g%s%s", c->N, c->E, c->k, (double)c->cf,
             pl_moe_capacity(c->N, c->E, c->k, c->cf), (double)c->coef,
             c->hot > 0 ? ", a hot expert 0" : "", c->sharp == 0 ? ", all experts tied" : "");
}

/* The first difference between two routings, said with its meaning; 1 when equal. */
static int compare_routing(const struct pl_moe_routing *got, const struct pl_moe_routing *want)
{
    const int N = want->N, k = want->k, E = want->E;
    for (int i = 0; i < N * k; i++)
        if (got->expert[i] != want->expert[i]) {
            why("choice %d of token %d: expert %d, the reference picks %d (top-k by "
                   "probability, ties to the lower expert index)", i % k + 1, i / k,
                   got->expert[i], want->expert[i]);
            return 0;
        }
    static const char *const order = "Slots fill choice by choice: every first choice in "
                                     "token order, then every second choice; a choice "
                                     "finding its expert full is dropped (section 2)";
    for (int i = 0; i < N * k; i++)
        if ((got->slot[i] < 0) != (want->slot[i] < 0)) {
            why("choice %d of token %d (expert %d): %s, the reference %s. %s", i % k + 1, i / k,
                want->expert[i], got->slot[i] < 0 ? "dropped" : "kept",
                want->slot[i] < 0 ? "drops it" : "keeps it", order);
            return 0;
        }
    for (int i = 0; i < N * k; i++)
        if (got->slot[i] != want->slot[i]) {
            why("choice %d of token %d (expert %d) is in slot %d, the reference's slot %d. %s",
                i % k + 1, i / k, want->expert[i], got->slot[i], want->slot[i], order);
            return 0;
        }
    for (int e = 0; e < E; e++)
        if (got->count[e] != want->count[e]) {
            why("expert %d holds %d tokens, the reference %d", e, got->count[e],
                   want->count[e]);
            return 0;
        }
    if (got->dropped != want->dropped) {
        why("%ld choices dropped, the reference drops %ld", got->dropped,
               want->dropped);
        return 0;
    }
    return 1;
}

static int compare_router_rest(const struct pl_moe_routing *got,
                               const struct pl_moe_routing *want, float coef)
{
    for (int i = 0; i < want->N * want->k; i++)
        if (got->gate[i] != want->gate[i]) {
            why("gate of choice %d of token %d is %g, the reference %g: the "
                   "gate is the router probability itself, not renormalised",
                   i % want->k + 1, i / want->k, (double)got->gate[i], (double)want->gate[i]);
            return 0;
        }
    for (int e = 0; e < want->E; e++)
        for (int s = 0; s < want->count[e]; s++) {
            size_t i = (size_t)e * want->cap + s;
            if (got->rows[i] != want->rows[i] || got->gates[i] != want->gates[i]) {
                why("slot %d of expert %d holds token %d (gate %g), the "
                       "reference token %d (gate %g)", s, e, got->rows[i],
                       (double)got->gates[i], want->rows[i], (double)want->gates[i]);
                return 0;
            }
        }
    for (int e = 0; e < want->E; e++)
        if (fabs(got->f[e] - want->f[e]) > 1e-12 || fabs(got->P[e] - want->P[e]) > 1e-9) {
            why("expert %d: f = %.9g, P = %.9g; the reference f = %.9g (its "
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
        why("aux loss %.9g, the reference %.9g = a x E x sum_i f_i P_i%s",
               got->aux, want->aux, hint);
        return 0;
    }
    return 1;
}

static int judge_route_case(const struct route_case *c, int index)
{
    int cap = pl_moe_capacity(c->N, c->E, c->k, c->cf);
    float *p = pl_mem_alloc((size_t)c->N * c->E * sizeof(float), PL_MEM_WORK, PL_HOST,
                            "router test probs");
    draw_probs(p, c->N, c->E, pl_mix64(base_seed + 31u * (uint64_t)index), c->sharp, c->hot);
    struct pl_moe_routing *got = pl_moe_routing_new(c->N, c->E, c->k, cap);
    struct pl_moe_routing *want = pl_moe_routing_new(c->N, c->E, c->k, cap);
    pl_moe_route(want, p, c->coef);
    /* moe_forward routes a layer into the same routing step after step: route another draw,
     * with expert 0 hotter, into it first */
    float *q = pl_mem_alloc((size_t)c->N * c->E * sizeof(float), PL_MEM_WORK, PL_HOST,
                            "router test probs before");
    draw_probs(q, c->N, c->E, pl_mix64(base_seed + 31u * (uint64_t)index + 7u), c->sharp + 1.0f,
               c->hot + 2.0f);
    moe_route(got, q, c->coef + 0.5f);
    moe_route(got, p, c->coef);
    int ok = !pl_todo_what() && compare_routing(got, want) &&
             compare_router_rest(got, want, c->coef);
    if (!ok && !pl_todo_what()) {
        /* the same probabilities into a fresh routing: right there, it carried state over */
        size_t said = strlen(why_text);
        struct pl_moe_routing *fresh = pl_moe_routing_new(c->N, c->E, c->k, cap);
        moe_route(fresh, p, c->coef);
        int fresh_ok = compare_routing(fresh, want) && compare_router_rest(fresh, want, c->coef);
        why_text[said] = '\0';
        if (fresh_ok)
            why("this was the second call into one routing; into a fresh one yours is right. "
                "moe_route sets every field on every call (moe_forward routes each layer into "
                "the same routing step after step): count, f, P and dropped start again from "
                "zero, not from the last call's (section 2)");
        pl_moe_routing_free(fresh);
        char d[200];
        describe_route_case(c, d, sizeof d);
        why("in: %s", d);
    }
    pl_moe_routing_free(got);
    pl_moe_routing_free(want);
    pl_mem_free(q);
    pl_mem_free(p);
    return ok;
}


static int judge_permute_case(const struct route_case *c, int index)
{
    int cap = pl_moe_capacity(c->N, c->E, c->k, c->cf), nk = c->N * c->k;
    float *p = pl_mem_alloc((size_t)c->N * c->E * sizeof(float), PL_MEM_WORK, PL_HOST,
                            "permute test probs");
    draw_probs(p, c->N, c->E, pl_mix64(base_seed + 31u * (uint64_t)index), c->sharp, c->hot);
    struct pl_moe_routing *r = pl_moe_routing_new(c->N, c->E, c->k, cap);
    pl_moe_route(r, p, c->coef);
    int *buf = pl_mem_alloc((size_t)(2 * (c->E + 1) + 4 * nk) * sizeof(int), PL_MEM_WORK,
                            PL_HOST, "permute test");
    int *ws = buf, *wp = ws + c->E + 1, *wi = wp + nk;
    int *gs = wi + nk, *gp = gs + c->E + 1, *gi = gp + nk;
    or_permutation(r, ws, wp, wi);
    moe_permute(r, gs, gp, gi);
    int ok = !pl_todo_what();
    for (int e = 0; ok && e <= c->E; e++)
        if (gs[e] != ws[e]) {
            why("start[%d] = %d, expected %d: the kept choices of experts "
                   "0..%d (an exclusive prefix sum of count)", e, gs[e], ws[e], e - 1);
            ok = 0;
        }
    for (int q = 0; ok && q < ws[c->E]; q++)
        if (gp[q] != wp[q]) {
            why("perm[%d] = %d, expected token %d: position start[e] + slot "
                   "holds the token of expert e's slot", q, gp[q], wp[q]);
            ok = 0;
        }
    for (int i = 0; ok && i < nk; i++)
        if (gi[i] != wi[i]) {
            why("inv[%d] (choice %d of token %d) = %d, expected %d%s", i,
                   i % c->k + 1, i / c->k, gi[i], wi[i],
                   wi[i] < 0 ? " (-1: it was dropped)" : "");
            ok = 0;
        }
    if (!ok && !pl_todo_what()) {
        char d[200];
        describe_route_case(c, d, sizeof d);
        why("in: %s", d);
    }
    pl_mem_free(buf);
    pl_moe_routing_free(r);
    pl_mem_free(p);
    return ok;
}


/* ---- training: the driver's pass around the student's MoE branch ---- */

/* Set while the step traced for part time runs: the student's calls are recorded. */
static int tl7_tracing;

struct pass {
    const struct pl_model_config *c;
    int B, T, N;
    struct pl_attn_acts *attn;  /* [L] */
    float **xm, **ln, **mean, **rstd; /* [L]: the MLP half's input, ln2 and its statistics */
    struct pl_head_acts head;
    const int *tokens; /* of the last forward */
    float *x, *branch, *dln, *dbranch;
    float *stale_h; /* host [L*N*C]: what branch held before each moe_forward */
};

static float *activ(size_t n, const char *label)
{
    return pl_mem_alloc(n * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, label);
}

static void pass_new(struct pass *ps, const struct pl_model_config *c, int B)
{
    memset(ps, 0, sizeof *ps);
    const int L = c->n_layers, C = c->d_model;
    ps->c = c;
    ps->B = B;
    ps->T = c->seq_len;
    ps->N = B * c->seq_len;
    const size_t NC = (size_t)ps->N * C;
    ps->attn = pl_mem_alloc((size_t)L * sizeof *ps->attn, PL_MEM_WORK, PL_HOST, "pass attn");
    float ***lists[] = {&ps->xm, &ps->ln, &ps->mean, &ps->rstd};
    for (int i = 0; i < 4; i++)
        *lists[i] = pl_mem_alloc((size_t)L * sizeof(float *), PL_MEM_WORK, PL_HOST, "pass");
    for (int l = 0; l < L; l++) {
        pl_attn_acts_new(&ps->attn[l], c, B, ps->T);
        ps->xm[l] = activ(NC, "pass mlp input");
        ps->ln[l] = activ(NC, "pass ln2");
        ps->mean[l] = activ((size_t)ps->N, "pass ln2 mean");
        ps->rstd[l] = activ((size_t)ps->N, "pass ln2 rstd");
    }
    pl_head_acts_new(&ps->head, c, B, ps->T);
    ps->x = activ(NC, "pass residual");
    ps->branch = activ(NC, "pass branch");
    ps->dln = activ(NC, "pass d ln2");
    ps->dbranch = activ(NC, "pass d branch");
    ps->stale_h = pl_mem_alloc((size_t)L * NC * sizeof(float), PL_MEM_WORK, PL_HOST,
                               "pass stale branch");
}

static void pass_free(struct pass *ps)
{
    for (int l = 0; l < ps->c->n_layers; l++) {
        pl_attn_acts_free(&ps->attn[l]);
        pl_mem_free(ps->xm[l]);
        pl_mem_free(ps->ln[l]);
        pl_mem_free(ps->mean[l]);
        pl_mem_free(ps->rstd[l]);
    }
    pl_mem_free(ps->attn);
    pl_mem_free(ps->xm);
    pl_mem_free(ps->ln);
    pl_mem_free(ps->mean);
    pl_mem_free(ps->rstd);
    pl_head_acts_free(&ps->head);
    pl_mem_free(ps->x);
    pl_mem_free(ps->branch);
    pl_mem_free(ps->dln);
    pl_mem_free(ps->dbranch);
    pl_mem_free(ps->stale_h);
}

/* The forward of lib/model.c with the MoE branch the student's; branches_h (host [L*N*C],
 * or NULL) receives each layer's branch, and ps->stale_h then what branch held before: ln,
 * not zeros, since moe.h says moe_forward writes branch. Returns this rank's objective. */
static double pass_forward(struct pass *ps, struct pl_model *m, struct moe *s,
                           const struct gr_batch *b, float *branches_h)
{
    const struct pl_model_config *c = ps->c;
    const int N = ps->N, C = c->d_model;
    const size_t NC = (size_t)N * C;
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ps->tokens = b->tokens;
    pl_embed_forward(c, &m->embed, b->tokens, ps->B, ps->T, ps->x);
    double aux = 0.0;
    for (int l = 0; l < c->n_layers; l++) {
        const struct pl_block_params *p = &m->blocks[l];
        pl_attn_forward(c, l, p, &ps->attn[l], &ctx, ps->x, ps->xm[l]);
        pl_layernorm_forward(ps->ln[l], ps->mean[l], ps->rstd[l], ps->xm[l], p->ln2_w, p->ln2_b,
                             N, C);
        pl_copy(ps->branch, ps->ln[l], NC);
        if (branches_h) pl_to_host(ps->stale_h + (size_t)l * NC, ps->branch, NC * sizeof(float));
        if (tl7_tracing) tl7_begin("F moe_forward");
        aux += moe_forward(s, l, ps->ln[l], ps->branch);
        if (tl7_tracing) tl7_end();
        if (branches_h) pl_to_host(branches_h + (size_t)l * NC, ps->branch, NC * sizeof(float));
        pl_residual_forward(ps->x, ps->xm[l], ps->branch, NC);
    }
    return pl_head_forward(c, &m->head, &ps->head, ps->x, b->targets) + aux;
}

static void pass_backward(struct pass *ps, struct pl_model *m, struct moe *s, float scale)
{
    const struct pl_model_config *c = ps->c;
    const int N = ps->N, C = c->d_model;
    const size_t NC = (size_t)N * C;
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.loss_scale = scale;
    float *dx = ps->x;
    pl_head_backward(c, &m->head, &m->head_g, &ps->head, &ctx, dx);
    for (int l = c->n_layers - 1; l >= 0; l--) {
        const struct pl_block_params *p = &m->blocks[l], *g = &m->blocks_g[l];
        pl_copy(ps->dbranch, dx, NC);
        pl_zero(ps->dln, NC);
        if (tl7_tracing) tl7_begin("B moe_backward");
        moe_backward(s, l, ps->dbranch, ps->dln, scale);
        if (tl7_tracing) tl7_end();
        pl_layernorm_backward(dx, g->ln2_w, g->ln2_b, ps->dln, ps->xm[l], p->ln2_w, ps->mean[l],
                              ps->rstd[l], N, C);
        pl_attn_backward(c, l, p, g, &ps->attn[l], &ctx, dx, dx);
    }
    pl_embed_backward(c, &m->embed_g, ps->tokens, ps->B, ps->T, dx);
}

/* ---- training cases ---- */

/* The cases of top-k at n ranks: two expert counts, four capacity factors, then the router
 * pushed to a few experts so that the others receive no tokens. Every contract parameter
 * takes several values: the EP degree (all ranks, or groups smaller than the world), the
 * aux-loss coefficient (0.01, another, and 0), the loss scale (1/n, and others), the factor
 * (dropping, none at E/k, 1e10 and infinity). The hidden suite pairs them differently. */
static int make_cases(int k, int n, int hidden, struct train_case *cs)
{
    static const float cfs[] = {0.5f, 1.0f, 1.25f, CF_NONE};
    const int Es[2] = {n == 6 ? 6 : 4, n == 6 ? 12 : 8};
    int count = 0;
    for (int i = 0; i < 2; i++)
        for (int f = 0; f < 4; f++) {
            int odd = (f % 2) ^ hidden;
            struct train_case c = {Es[i], k, odd ? ep_part(n) : ep_full(n), cfs[f], 0.01f, 1.0f, 0};
            if (f == 1) c.coef = hidden ? 0.05f : 0.2f;
            if (f == 3 && i == 1) c.coef = 0.0f;
            if (f == (hidden ? 0 : 1)) c.scale = hidden ? 0.6f : 0.3f;
            if (f == 3) c.scale = 2.0f;
            cs[count++] = c;
        }
    cs[count++] = (struct train_case){Es[1], k, ep_full(n), CF_NONE, 0.01f, 1.0f, 4.0f};
    return count;
}

static void describe_case(const struct train_case *c, int N, char *buf, size_t len)
{
    char cf[64];
    float factor = case_cf(c);
    if (c->cf == CF_NONE) snprintf(cf, sizeof cf, "no capacity limit (factor %g)", (double)factor);
    else snprintf(cf, sizeof cf, "capacity factor %g", (double)c->cf);
    char groups[64] = "";
    if (c->ep < pl_size()) snprintf(groups, sizeof groups, " (EP groups of %d)", c->ep);
    snprintf(buf, len, "%d experts on %d ranks%s, top-%d, %s (%d slots for %d tokens a rank), "
             "aux_coef %g, loss_scale %g/n, %d steps of %d sequences%s", c->E, pl_size(), groups,
             c->k, cf, pl_moe_capacity(N, c->E, c->k, factor), N, (double)c->coef,
             (double)c->scale, K_STEPS, global_b(pl_size()),
             c->hot > 0 ? "; the router pushed to experts 0, 3, 6: the others get no tokens" : "");
}

/* How far got is from want over n floats: ||got - want|| / max(||want||, floor); *scale is
 * the least-squares factor got ~ scale * want. */
static double rel_l2(const float *got, const float *want, size_t n, double floor, double *scale,
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
static double tensor_error(const struct or_reference *o, int t, const float *got,
                           const float *want, double all, double *scale, int *bad)
{
    size_t off, n;
    or_owned_range(&o->layout, t, o->ep_rank, o->ep, &off, &n);
    double floor = sqrt(all) * sqrt((double)n / (double)o->numel);
    *bad = 0;
    return rel_l2(got + off, want + off, n, floor, scale, bad);
}

/* What a message quotes: the error of this rank's part of tensor t against that part's own
 * reference norm (never the floor's), so that "yours is 1/2 of it" reads 5.00e-01; when
 * the reference part is all zeros, the norm of the error itself, and *zero is set. */
static double own_error(const struct or_reference *o, int t, const float *got,
                        const float *want, int *zero)
{
    size_t off, n;
    or_owned_range(&o->layout, t, o->ep_rank, o->ep, &off, &n);
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
static int router_alone_wrong(const struct or_reference *o, const float *got, const float *want,
                              double all, double tol)
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
static int judge_tensors(const struct or_reference *o, const float *got, const float *want,
                         double tol, const char *what)
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
        int expert = or_is_expert_tensor(d);
        char hint[600] = "";
        if (bad)
            snprintf(hint, sizeof hint, "; %d elements are not numbers", bad);
        else if (router >= 0)
            snprintf(hint, sizeof hint, "; the last block's router gradient is off while its "
                     "experts' are right, so the router's backward is where it goes wrong "
                     "(%s is off too, as is every tensor the backward reaches after it): the "
                     "gates' gradient at the kept choices, and the load-balancing loss's "
                     "(loss_scale x a E f_e / N on every token, section 6)%s",
                     lay->tensors[first].name,
                     fabs(o->loss_scale * o->slices - 1) > 1e-6
                         ? ". This case's loss_scale is not 1/n: the aux term takes the "
                           "loss_scale argument, whatever the rank count"
                         : "");
        else if (expert && o->ep > 1 && fabs(scale * o->ep - 1) < 0.05 &&
                 !(o->slices > o->ep && fabs(scale * o->slices - o->ep) < 0.05 * o->ep))
            snprintf(hint, sizeof hint, "; yours is 1/%d of it: expert gradients were averaged "
                     "across the EP group, but its ranks hold different experts, whose "
                     "gradients already hold the group's tokens (section 7)", o->ep);
        else if (!expert && o->slices > 1 && fabs(scale * o->slices - 1) < 0.05)
            snprintf(hint, sizeof hint, "; yours is 1/%d of it: the backward already scaled "
                     "each rank's loss by 1/n, so the ranks' shares are summed, not averaged "
                     "(section 7)", o->slices);
        else if (expert && o->slices > o->ep && fabs(scale * o->slices - o->ep) < 0.05 * o->ep)
            snprintf(hint, sizeof hint, "; yours is %d/%d of it: only your EP group's tokens "
                     "are in it, or their sum was divided by the %d copies. Sum each expert's "
                     "gradient over its copies in the other EP groups (the expert-data-"
                     "parallel group), and do not average: each rank's backward already scaled "
                     "by 1/n (section 7)", o->ep, o->slices, o->slices / o->ep);
        int zero;
        double own = own_error(o, t, got, want, &zero);
        if (bad)
            why("%s of %s%s: not finite%s", what, d->name,
                expert ? " (this rank's experts)" : "", hint);
        else if (zero)
            why("%s of %s%s: the reference's is all zeros and yours is not (L2 norm %.2e)%s",
                what, d->name, expert ? " (this rank's experts)" : "", own, hint);
        else
            why("%s of %s%s: relative L2 error %.2e (against that tensor's own norm), more "
                "than %.0e%s", what, d->name, expert ? " (this rank's experts)" : "", own, tol,
                hint);
        return 0;
    }
    return 1;
}

/* 1 when some expert of layer l, in the first step, received no rows from any member of
 * this rank's EP group while a later expert did. */
static int empty_expert(const struct or_reference *o, int l)
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
static int judge_branches(const struct or_reference *o, const float *got, const float *stale,
                          int C, int step)
{
    const size_t NC = (size_t)o->N * C;
    const int L = o->layout.cfg.n_layers;
    const double tol = step == 0 ? GR_TOL_LOSS : GR_TOL_PARAMS;
    const float *want = o->branch + (size_t)step * L * NC;
    const float *ungated_want = o->ungated + (size_t)step * L * NC;
    for (int l = 0; l < L; l++) {
        double scale, su, sa;
        int bad = 0;
        double rel = rel_l2(got + l * NC, want + l * NC, NC, 0, &scale, &bad);
        if (!bad && rel <= tol) continue;
        double ungated = rel_l2(got + l * NC, ungated_want + l * NC, NC, 0, &su, &bad);
        float *added = pl_mem_alloc(NC * sizeof(float), PL_MEM_WORK, PL_HOST, "branch added");
        for (size_t i = 0; i < NC; i++) added[i] = got[l * NC + i] - stale[l * NC + i];
        /* the sum onto ln rounds at ln's scale: a hint, not a verdict, so a loose bound */
        double onto = rel_l2(added, want + l * NC, NC, 0, &sa, &bad);
        pl_mem_free(added);
        why("step %d: block %d's MoE output: relative L2 error %.2e against the reference, "
            "more than %.0e%s", step, l, rel, tol,
            ungated <= tol ? "; it equals the experts' outputs summed WITHOUT the gates: the "
                             "combine multiplies each expert's output by its gate (section 5)"
            : onto <= 1e-3 ? "; it equals the reference added onto what branch held before "
                             "the call: moe_forward writes branch (moe.h), so zero it before "
                             "the combine adds into it (section 5)"
            : step > 0     ? "; step 0's outputs were right, so something your layer keeps "
                             "from one call to the next carried over: zero every buffer you "
                             "scatter or add into (pl_scatter_add_rows and pl_row_dot add) on "
                             "each call, not once (appendix)"
            : empty_expert(o, l) ? "; in this case some experts receive no tokens (the "
                                   "router is pushed to experts 0, 3, 6): an expert without "
                                   "rows is skipped, and every expert after it still runs on "
                                   "its own rows, at the right offset (section 5)"
                           : "");
        return ungated > tol && onto <= 1e-3 ? -1 : 0;
    }
    return 1;
}

/* The routing of the first step: per layer, the same choices kept and dropped. */
static int judge_counts(const struct or_reference *o, const struct moe *st)
{
    const struct pl_model_config *c = &o->layout.cfg;
    for (int l = 0; l < c->n_layers; l++) {
        const struct pl_moe_routing *got = moe_last_routing(st, l);
        const struct or_routing *w = &o->route[(size_t)o->me * c->n_layers + l];
        if (!got) {
            why("moe_last_routing(%d) is NULL after a forward", l);
            return 0;
        }
        if (got->N != o->N || got->E != c->n_experts || got->k != c->top_k || got->cap != w->cap) {
            why("block %d's routing is for N=%d E=%d k=%d with %d slots; the reference routes "
                "N=%d tokens to E=%d experts, top-%d, %d slots", l, got->N, got->E, got->k,
                got->cap, o->N, c->n_experts, c->top_k, w->cap);
            return 0;
        }
        struct pl_moe_routing want = {.N = o->N, .E = c->n_experts, .k = c->top_k,
                                      .cap = w->cap, .expert = w->expert, .slot = w->slot,
                                      .count = w->count, .dropped = w->dropped};
        if (!compare_routing(got, &want)) {
            why("in block %d", l);
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
static int judge_grad_sums(const struct or_reference *o, const struct pl_ledger *d)
{
    const struct pl_model_layout *lay = &o->layout;
    const int n = o->slices, copies = o->slices / o->ep;
    double dense = 0, mine = 0, experts = 0;
    for (int t = 0; t < lay->n_tensors; t++) {
        size_t off, len;
        or_owned_range(lay, t, o->ep_rank, o->ep, &off, &len);
        if (or_is_expert_tensor(&lay->tensors[t])) {
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
    char g[32], w[32];
    why("the gradient sums sent %s from this rank in a step; finishing the gradients needs %s "
        "(by the ring): the non-expert gradients, %.0f floats, summed over all %d ranks, %s",
        pl_format_bytes(got, g, sizeof g), pl_format_bytes(want, w, sizeof w), dense, n,
        copies > 1 ? "and this rank's experts' rows, summed over their copies in the other "
                     "EP groups"
                   : "and nothing for the experts, with a single EP group");
    double whole = pl_ring_bytes_sent(PL_ALL_REDUCE, n, f * (dense + experts));
    if (got >= whole * (1 - 1e-9) - 1)
        why("yours sums the experts' whole tensors (%.0f floats, every expert of every block) "
            "where this rank holds %.0f of them: the rows of other ranks' experts are zero "
            "here and belong to other ranks. Sum only this rank's experts' rows, over the "
            "expert-data-parallel group (section 7)", experts, mine);
    else
        why("sum the non-expert tensors over the world and only this rank's experts' rows "
            "over the expert-data-parallel group (section 7)");
    return 0;
}

/* The ledger of the first step against what its routing must send: per MoE layer one
 * pl_all_to_all of the counts and four pl_all_to_all_v (dispatch, combine, and both in
 * reverse), whose off-rank bytes are the rows of kept choices crossing ranks. */
static int judge_traffic(const struct or_reference *o, const struct pl_ledger *d)
{
    const struct pl_model_config *c = &o->layout.cfg;
    const int L = c->n_layers, El = c->n_experts / o->ep;
    const double row = (double)c->d_model * sizeof(float);
    double want = 0, balanced = 0;
    for (int l = 0; l < L; l++) {
        long dispatch, combine;
        or_a2a_rows(o, l, &dispatch, &combine);
        want += 2.0 * (double)(dispatch + combine) * row;
    }
    balanced = 2.0 * L * 2.0 * (o->ep - 1) / o->ep * o->N * c->top_k * row;
    double got = pl_ledger_bytes(d, PL_ALL_TO_ALL_V, -1);
    double counts = pl_ledger_bytes(d, PL_ALL_TO_ALL, -1);
    double want_counts = (double)L * (o->ep - 1) * El * sizeof(float);
    char g[32], w[32], b[32];
    if (d->calls[PL_ALL_TO_ALL_V] != 4L * L || d->calls[PL_ALL_TO_ALL] != L) {
        why("%ld pl_all_to_all and %ld pl_all_to_all_v in a step of %d MoE layers; expected %d "
            "and %d: per layer one all-to-all of the counts, then dispatch and combine "
            "forward and the same two in reverse backward (moe.h)", d->calls[PL_ALL_TO_ALL],
            d->calls[PL_ALL_TO_ALL_V], L, L, 4 * L);
        return 0;
    }
    if (pl_ledger_bytes(d, PL_P2P, -1) > 0) {
        why("%s sent point to point: the tokens travel in the all-to-all-v calls only",
            pl_format_bytes(pl_ledger_bytes(d, PL_P2P, -1), g, sizeof g));
        return 0;
    }
    if (counts != want_counts) {
        why("the counts exchange sent %s; %d layers x %d peers x %d experts each x 4 bytes = "
            "%s", pl_format_bytes(counts, g, sizeof g), L, o->ep - 1, El,
            pl_format_bytes(want_counts, w, sizeof w));
        return 0;
    }
    if (got != want) {
        double padded = 2.0 * L * 2.0 * (o->ep - 1) * El * o->route[0].cap * row;
        why("all-to-all-v sent %s off this rank in a step; the routing sends %s (the rows of "
            "kept choices whose expert lives on another rank, and the outputs of this rank's "
            "experts for other ranks' tokens, both ways)%s",
            pl_format_bytes(got, g, sizeof g), pl_format_bytes(want, w, sizeof w),
            got == padded ? ": yours is every expert's whole capacity. Exchange the counts "
                            "first and send only the rows that exist (section 4)"
                          : "");
        why("for scale: a balanced routing would send (ep-1)/ep x N x k x C x 4 bytes each "
            "way, %s a step", pl_format_bytes(balanced, b, sizeof b));
        return 0;
    }
    return judge_grad_sums(o, d);
}

/* The code under test's EP group, from moe_ep_comm: its size must be the lab's EP degree;
 * the grader then follows whichever experts each rank owns. 0 with a reason otherwise. */
static int learn_ep_group(struct or_reference *o, const struct moe *st, struct pl_comm *lab,
                          int want)
{
    struct pl_comm *c = moe_ep_comm(st);
    if (!c || pl_comm_size(c) != want) {
        why("moe_ep_comm gives %s; with %d ranks and ep = %d the EP groups have %d ranks "
            "(moe_new's ep)", c ? "a group of another size" : "no group", pl_size(), want, want);
        return 0;
    }
    o->ep = want;
    o->ep_rank = pl_comm_rank(c);
    int ordered = 1;
    char list[160] = "";
    for (int i = 0; i < want; i++) {
        o->world[i] = pl_comm_world_rank(c, i);
        o->members[i] = -1;
        for (int j = 0; j < pl_comm_size(lab); j++)
            if (pl_comm_world_rank(lab, j) == o->world[i]) o->members[i] = j;
        if (i && o->members[i] <= o->members[i - 1]) ordered = 0;
        size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, "%s%d", i ? ", " : "", o->members[i]);
    }
    if (ordered) return 1;
    why("moe_ep_comm's ranks 0..%d are ranks %s of the communicator moe_new was given, not in "
        "its order. The grader hands moe_new a communicator split from the job's world with "
        "its ranks in another order, as a caller with several groups would: build the rank "
        "grid on it (pl_grid_comm(&g, world, ...), where world is moe_new's argument), not on "
        "pl_comm_world(), and take ranks and sizes from it, not from pl_rank() or pl_size() "
        "(section 4)", want - 1, list);
    return 0;
}

/* Where the EP group sits on a cluster of 2 nodes (the world's ranks split in two, as
 * `--nodes 2` places them): inside one node, or across, flagged with what this step's
 * all-to-all bytes would cost on dgx-h100's network instead of its NVLink. */
static int judge_placement(const struct or_reference *o, const struct pl_ledger *d)
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
    char list[128] = "";
    int sorted[OR_MAX_EP];
    memcpy(sorted, o->world, (size_t)o->ep * sizeof(int));
    for (int i = 1; i < o->ep; i++)
        for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
            int t_ = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t_;
        }
    for (int i = 0; i < o->ep; i++) {
        size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, "%s%d", i ? ", " : "", sorted[i]);
    }
    why("your EP group (world ranks %s) spans both nodes of 2 x %d: every all-to-all crosses "
        "the network. On dgx-h100 this step's all-to-all bytes take %.1f us across nodes "
        "against %.1f us inside one (%.1fx). Build the grid in the default order, ep before "
        "dp, so that an EP group is %d consecutive ranks (section 4)", list, n / 2, inter * 1e6,
        intra * 1e6, inter / intra, o->ep);
    return 0;
}

/* AdamW step t on what this rank holds: the non-expert tensors and its experts. */
static void update_owned(struct pl_model *m, int ep, int ep_rank, int t,
                         const struct pl_adamw_config *opt)
{
    const struct pl_model_layout *lay = &m->layout;
    for (int i = 0; i < lay->n_tensors; i++) {
        size_t off, n;
        or_owned_range(lay, i, ep_rank, ep, &off, &n);
        pl_model_adamw_flat(lay, off, n, m->params + off, m->grads + off, m->adam_m + off,
                            m->adam_v + off, t, opt);
    }
}

struct run {
    struct pl_comm *lab; /* what moe_new is given: split from the world, freed after moe_free */
    float loss_scale;
    struct gr_train_setup setup;
    struct or_reference ref;
    struct pl_model *m;
    struct gr_batch batch;
    struct pass pass;
    struct moe *st;
    float *host;     /* [numel] */
    float *branches; /* [L * N * C] the last step's MoE outputs */
};

/* lab: the communicator the case runs on (this rank's slice is its rank there); the run
 * frees it after moe_free. */
static void run_open(struct run *r, const struct pl_tokens *data, const struct train_case *c,
                     int steps, int with_reference, struct pl_comm *lab)
{
    int n = pl_comm_size(lab), me = pl_comm_rank(lab);
    memset(r, 0, sizeof *r);
    r->lab = lab;
    r->loss_scale = c->scale / (float)n;
    r->setup.cfg = lab_config(pl_mix64(base_seed ^ 0x1417), c);
    r->setup.opt = pl_adamw_config_default();
    r->setup.opt.grad_clip = 0;
    r->setup.data = data;
    r->setup.global_B = global_b(n);
    r->setup.steps = steps;
    r->setup.data_seed = pl_mix64(base_seed ^ 0x5eed);
    if (with_reference) or_reference_run(&r->ref, &r->setup, n, me, r->loss_scale, c->hot);
    r->m = pl_model_new(&r->setup.cfg, PL_MODEL_ALL);
    if (c->hot > 0) or_push_router(r->m, c->hot);
    gr_batch_new(&r->batch, &r->setup, me, n);
    pass_new(&r->pass, &r->m->cfg, r->batch.B);
    r->host = pl_mem_alloc(r->m->layout.numel * sizeof(float), PL_MEM_WORK, PL_HOST,
                           "grader host");
    r->branches = pl_mem_alloc((size_t)r->m->cfg.n_layers * r->pass.N * r->m->cfg.d_model *
                               sizeof(float), PL_MEM_WORK, PL_HOST, "grader branches");
}

/* Frees the case's communicator after moe_free, as a caller would; one with operations
 * still in flight cannot be freed (pl_comm_free refuses), which is a verdict of part
 * correct. Collective: every rank agrees whether to free it. */
static void free_lab_comm(struct run *r)
{
    if (!r->lab || r->lab == pl_comm_world()) return;
    int mine = pl_comm_in_flight(r->lab), most = 0;
    PL_CHECK_MPI(MPI_Allreduce(&mine, &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (mine) {
        int saved = why_part;
        why_part = 0;
        why("after moe_free, %d operation(s) you started on the communicator moe_new was given "
            "are still in flight: a handle of pl_all_reduce_async (or another async call) was "
            "never waited. The caller frees that communicator after moe_free, and pl_comm_free "
            "refuses one with operations in flight; pl_wait every handle before the call that "
            "started it returns (section 7)", mine);
        why_part = saved;
    }
    if (!most) pl_comm_free(r->lab);
    r->lab = NULL;
}

static void run_close(struct run *r)
{
    if (r->st) moe_free(r->st);
    r->st = NULL;
    free_lab_comm(r);
    pass_free(&r->pass);
    gr_batch_free(&r->batch);
    pl_model_free(r->m);
    or_reference_free(&r->ref);
    pl_mem_free(r->host);
    pl_mem_free(r->branches);
}

/* One training step of the student's MoE; 0 when a stub was reached. */
static int train_step(struct run *r, int step, double *loss)
{
    pl_model_zero_grad(r->m);
    gr_batch_load(&r->batch, step);
    double mine = pass_forward(&r->pass, r->m, r->st, &r->batch, r->branches);
    if (gr_todo_any()) return 0;
    pass_backward(&r->pass, r->m, r->st, r->loss_scale);
    moe_finish_gradients(r->st);
    if (gr_todo_any()) return 0;
    *loss = gr_global_loss(mine);
    return 1;
}

/* The judges of one step: what went wrong first goes into the part's reason. */
static int judge_step(struct run *r, int step, double loss, const struct pl_ledger *delta)
{
    const int C = r->m->cfg.d_model;
    if (step == 0) {
        why_part = 1;
        judge_counts(&r->ref, r->st);
        why_part = 2;
        if (pl_size() > 1) judge_traffic(&r->ref, delta);
        why_part = 3;
        judge_placement(&r->ref, delta);
    }
    why_part = 0;
    int branches = judge_branches(&r->ref, r->branches, r->pass.stale_h, C, step);
    if (branches != 1) {
        if (step == 0 && branches == 0 && reasons[1][0])
            why("your routing differs from the reference's: %.*s",
                (int)strcspn(reasons[1], "\n"), reasons[1]);
        return 0;
    }
    double e = gr_rel_err(loss, r->ref.loss[step]);
    if (!(e <= GR_TOL_LOSS)) {
        why("step %d: loss %.7f, the reference %.7f (relative error %.1e, more than %.0e)", step,
            loss, r->ref.loss[step], e, GR_TOL_LOSS);
        return 0;
    }
    pl_to_host(r->host, r->m->grads, r->ref.numel * sizeof(float));
    char what[64];
    snprintf(what, sizeof what, "step %d: the gradient", step);
    return judge_tensors(&r->ref, r->host, r->ref.grads + (size_t)step * r->ref.numel,
                         GR_TOL_GRADS, what);
}

/* The case part time is judged on: 8 experts, so that each of up to 4 ranks owns several,
 * and capacity factor 1.25, so that most choices are kept. */
static int timed_case(const struct train_case *c)
{
    return c->E == 8 && c->cf == 1.25f && c->hot == 0 && !hidden_shape;
}

static void model_scale(int N, const struct pl_model_config *c, double *flops_x,
                        double *bytes_x);

/* Part time on the first step just traced (collective). */
static void judge_time(struct run *r)
{
    double fx, bx;
    char figures[640];
    model_scale(r->pass.N, &r->m->cfg, &fx, &bx);
    double fraction = tl7_judge(&r->ref, fx, bx, figures, sizeof figures);
    why_part = PART_TIME;
    if (fraction <= 0) why("%s", figures);
    else if (pl_rank() == 0) {
        gr_partial("time", fraction);
        gr_say("time", "%s", figures);
    }
    why_part = 0;
}

/* After the last step (collective): moe.h says moe_backward adds into dln. The last block's
 * forward and backward twice on the same batch and parameters, from dln = 0 and from dln =
 * dbranch: the second must be the first plus dbranch. The gradients it accumulates are no
 * longer judged. */
static void judge_dln_adds(struct run *r)
{
    struct pass *ps = &r->pass;
    const int l = ps->c->n_layers - 1;
    const size_t NC = (size_t)ps->N * ps->c->d_model;
    const float scale = r->loss_scale;
    float *h = pl_mem_alloc(3 * NC * sizeof(float), PL_MEM_WORK, PL_HOST, "dln probe");
    float *first = h, *second = h + NC, *held = h + 2 * NC;
    pass_forward(ps, r->m, r->st, &r->batch, NULL);
    pl_zero(ps->dln, NC);
    moe_backward(r->st, l, ps->dbranch, ps->dln, scale);
    pl_to_host(first, ps->dln, NC * sizeof(float));
    pass_forward(ps, r->m, r->st, &r->batch, NULL);
    pl_copy(ps->dln, ps->dbranch, NC);
    pl_to_host(held, ps->dln, NC * sizeof(float));
    moe_backward(r->st, l, ps->dbranch, ps->dln, scale);
    pl_to_host(second, ps->dln, NC * sizeof(float));
    for (size_t i = 0; i < NC; i++) second[i] -= first[i];
    double sc;
    int bad = 0;
    double rel = rel_l2(second, held, NC, 0, &sc, &bad);
    why_part = 0;
    if (bad || rel > 1e-3)
        why("moe_backward of block %d, called with dln holding other gradients, %s; moe.h "
            "says dln += d(objective)/d(ln): the caller may sum several branches' gradients "
            "in it, so add into it and never zero it (section 6)", l,
            fabs(sc) < 0.05 ? "threw them away" : "did not keep them as they were");
    pl_mem_free(h);
}

/* What the code under test holds: not more allocations after every step than after the
 * one before (a buffer allocated once on first use, or replaced by a larger one, is no
 * leak), and nothing after moe_free that it did not hold before moe_new. before: the ledger
 * before moe_new; held[s]: after step s; freed: after moe_free (NULL: not yet). */
static void judge_held(const struct pl_mem_stats *before, const struct pl_mem_stats *held,
                       const struct pl_mem_stats *freed)
{
    char b[32];
    int cat, every = 1;
    why_part = 0;
    for (int s = 1; s < K_STEPS; s++) every &= held[s].live_allocs > held[s - 1].live_allocs;
    double more = gr_mem_grown(&held[0], &held[K_STEPS - 1], &cat);
    if (!freed && every) {
        why("every step left more allocations live than the one before (%zu after step 0, "
            "%zu after step %d; %s more %s): moe_forward or moe_backward keeps what it "
            "allocates, so memory grows until a long run runs out. Free each call's scratch "
            "before it returns; what lasts from step to step is allocated once, in moe_new "
            "(section 4)", held[0].live_allocs, held[K_STEPS - 1].live_allocs, K_STEPS - 1,
            pl_format_bytes(more, b, sizeof b), pl_mem_cat_name((enum pl_mem_cat)cat));
        return;
    }
    more = freed ? gr_mem_grown(before, freed, &cat) : 0;
    if (more > 0)
        why("after moe_free the ledger still holds %s of %s that it did not hold before "
            "moe_new: moe_free frees everything moe_new and the calls allocated (section 4)",
            pl_format_bytes(more, b, sizeof b), pl_mem_cat_name((enum pl_mem_cat)cat));
}

/* Trains case c for K steps, every rank recording its reasons per part. */
static void run_training(const struct pl_tokens *data, const struct train_case *c)
{
    struct run r;
    /* the case's ranks in reverse order of the world's: code that takes pl_rank() or
     * pl_comm_world() for the communicator it was given gets other groups and experts */
    int n = pl_size();
    struct pl_comm *lab = pl_comm_split(pl_comm_world(), 0, n - 1 - pl_rank(), "moe lab");
    run_open(&r, data, c, K_STEPS, 1, lab);
    struct pl_mem_stats before, held[K_STEPS];
    pl_mem_get_stats(&before);
    r.st = moe_new(lab, r.m, r.pass.N, c->ep);
    if (gr_todo_any()) {
        run_close(&r);
        return;
    }
    why_part = 0;
    if (!learn_ep_group(&r.ref, r.st, lab, c->ep)) {
        run_close(&r);
        return;
    }
    why_part = 1;
    if (moe_last_routing(r.st, 0))
        why("moe_last_routing(0) gives a routing before any moe_forward has run; moe.h says "
            "NULL until then, so that a caller cannot take an empty routing for a real one");
    int ok = 1, timed = tl7_wanted() && timed_case(c);
    for (int step = 0; step < K_STEPS; step++) {
        struct pl_ledger mark, delta;
        gr_ledger_mark(&mark);
        double loss = 0;
        tl7_tracing = timed && step == 0;
        if (tl7_tracing) tl7_start();
        int ran = train_step(&r, step, &loss);
        tl7_tracing = 0;
        if (!ran) {
            run_close(&r);
            return;
        }
        if (timed && step == 0) judge_time(&r);
        gr_ledger_since(&mark, &delta);
        if (ok) ok = judge_step(&r, step, loss, &delta);
        update_owned(r.m, r.ref.ep, r.ref.ep_rank, step + 1, &r.setup.opt);
        pl_mem_get_stats(&held[step]);
    }
    pl_to_host(r.host, r.m->params, r.ref.numel * sizeof(float));
    why_part = 0;
    if (ok) ok = judge_tensors(&r.ref, r.host, r.ref.params, GR_TOL_PARAMS,
                               "after the last step, the parameters");
    judge_held(&before, held, NULL);
    judge_dln_adds(&r);
    moe_free(r.st);
    r.st = NULL;
    struct pl_mem_stats freed;
    pl_mem_get_stats(&freed);
    if (!why_text[0]) judge_held(&before, held, &freed);
    free_lab_comm(&r);
    run_close(&r);
}

/* ---- bench: all-to-all volume and balance as routing skews towards expert 0 ---- */

/* The MoE layer the bench's time models: Mixtral-sized experts and tokens per rank. */
#define MODEL_C 4096.0
#define MODEL_F 14336.0
#define MODEL_TOKENS 8192.0
#define MAX_E 64

/* Makes expert 0 hot: ln2's bias gets a 1 in channel 0 and the router's row 0 a weight of
 * `skew` on it, so expert 0's logit rises by about skew for every token. */
static void make_hot(struct pl_model *m, float skew)
{
    for (int l = 0; l < m->cfg.n_layers; l++) {
        float one = 1.0f, w;
        pl_to_device(m->blocks[l].ln2_b, &one, sizeof one);
        pl_to_host(&w, m->blocks[l].w_router, sizeof w);
        w += skew;
        pl_to_device(m->blocks[l].w_router, &w, sizeof w);
    }
}

/* Block 0's time on the busiest rank for the modelled layer, forward and backward: its
 * experts' FLOPs (4 C F per row forward, twice that backward) and its all-to-all-v bytes
 * (dispatch and combine, both ways) at the intra-node rate, plus one latency per call. cnt
 * is [n][E]: rank r's kept choices per expert. */
static double model_layer_time(const long *cnt, int n, int E, int N, const struct pl_profile *p)
{
    const int El = E / n;
    const double scale = MODEL_TOKENS / N, row = MODEL_C * sizeof(float);
    double worst = 0;
    for (int r = 0; r < n; r++) {
        double rows = 0, off = 0;
        for (int s = 0; s < n; s++)
            for (int e = 0; e < E; e++) {
                int mine = e / El == r;
                if (mine) rows += (double)cnt[s * E + e];
                if ((s == r && !mine) || (s != r && mine)) off += (double)cnt[s * E + e];
            }
        double t = 3.0 * rows * scale * 4.0 * MODEL_C * MODEL_F / p->flops +
                   2.0 * off * scale * row / p->bw[PL_LINK_INTRA] +
                   5.0 * p->latency[PL_LINK_INTRA];
        if (t > worst) worst = t;
    }
    return worst;
}

struct bench_result {
    long total[MAX_E]; /* kept choices per expert, all ranks, block 0 */
    double layer_time; /* seconds, the modelled layer */
    double step_time;  /* seconds, the traced step replayed (-1: could not be) */
};

/* The factors from the graded layer of N tokens a rank to the modelled one: FLOPs (tokens
 * and both widths) and bytes (tokens and the model width). */
static void model_scale(int N, const struct pl_model_config *c, double *flops_x,
                        double *bytes_x)
{
    double tokens = MODEL_TOKENS / N;
    *flops_x = tokens * (MODEL_C * MODEL_F) / ((double)c->d_model * c->d_ff);
    *bytes_x = tokens * MODEL_C / c->d_model;
}

/* Rank 0: the merged trace of one step replayed on p, every compute event's FLOPs and every
 * transfer's bytes scaled to the modelled layer's size (tokens and widths). */
static double replay_step(const struct pl_merged_trace *t, const struct pl_profile *p, int N,
                          const struct pl_model_config *c)
{
    double flops_x, bytes_x;
    model_scale(N, c, &flops_x, &bytes_x);
    struct gr_overlap ov;
    char err[256];
    if (gr_overlap_replay(t, p, flops_x, bytes_x, NULL, NULL, &ov, err, sizeof err) != 0)
        return -1;
    return ov.step_time;
}

static int bench_row(const struct pl_tokens *data, int E, int k, float cf, float skew,
                     const struct pl_profile *prof, struct bench_result *out)
{
    struct train_case c = {E, k, pl_size(), cf, 0.01f, 1.0f, 0};
    struct run r;
    int n = pl_size(), me = pl_rank();
    run_open(&r, data, &c, 1, 0, pl_comm_world());
    make_hot(r.m, skew);
    r.st = moe_new(pl_comm_world(), r.m, r.pass.N, n);
    struct pl_ledger mark, d, *all = pl_mem_alloc((size_t)n * sizeof *all, PL_MEM_WORK, PL_HOST,
                                                   "bench ledgers");
    gr_ledger_mark(&mark);
    double loss;
    pl_trace_enable(1);
    pl_trace_clear();
    int ran = !gr_todo_any() && train_step(&r, 0, &loss);
    pl_trace_flush();
    pl_trace_enable(0);
    struct pl_merged_trace trace;
    memset(&trace, 0, sizeof trace);
    pl_trace_gather(&trace);
    gr_ledger_since(&mark, &d);
    gr_ledger_gather_world(&d, all);
    long counts[MAX_E] = {0}, *cnt = pl_mem_alloc((size_t)n * MAX_E * sizeof(long), PL_MEM_WORK,
                                                   PL_HOST, "bench counts");
    const struct pl_moe_routing *rt = ran ? moe_last_routing(r.st, 0) : NULL;
    for (int e = 0; e < E && rt; e++) counts[e] = rt->count[e];
    long mydrop = rt ? rt->dropped : 0, dropped = 0;
    PL_CHECK_MPI(MPI_Gather(counts, E, MPI_LONG, cnt, E, MPI_LONG, 0, MPI_COMM_WORLD));
    PL_CHECK_MPI(MPI_Reduce(&mydrop, &dropped, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
    memset(out, 0, sizeof *out);
    if (me == 0 && ran) {
        double vmax = 0, vsum = 0;
        for (int i = 0; i < n; i++) {
            double v = pl_ledger_bytes(&all[i], PL_ALL_TO_ALL_V, -1);
            vsum += v;
            if (v > vmax) vmax = v;
        }
        long hot = 0, sum = 0;
        for (int e = 0; e < E; e++) {
            for (int i = 0; i < n; i++) out->total[e] += cnt[i * E + e];
            sum += out->total[e];
            if (out->total[e] > hot) hot = out->total[e];
        }
        out->layer_time = model_layer_time(cnt, n, E, r.pass.N, prof);
        out->step_time = replay_step(&trace, prof, r.pass.N, &r.m->cfg);
        char cf_s[16], v[32];
        if (cf == CF_NONE) snprintf(cf_s, sizeof cf_s, "none");
        else snprintf(cf_s, sizeof cf_s, "%g", (double)cf);
        printf("%4d %3d %5s %5.3f %10s %9.2f %8.2f %8.1f%% %11.3f %10.3f   ", E, k, cf_s,
               (double)skew, pl_format_bytes(vsum / n, v, sizeof v),
               vsum > 0 ? vmax / (vsum / n) : 1.0, sum ? (double)hot * E / sum : 0.0,
               100.0 * dropped / ((double)r.pass.N * n * k), out->layer_time * 1e3,
               out->step_time * 1e3);
        for (int e = 0; e < E; e++) printf("%s%ld", e ? "," : "", out->total[e]);
        printf("\n");
    }
    if (!ran && me == 0)
        printf("not run: %s is still a stub (see docs/labs/07-moe.md section %s)\n",
               pl_todo_what() ? pl_todo_what() : "?", pl_todo_section() ? pl_todo_section() : "?");
    pl_trace_merged_free(&trace);
    pl_mem_free(cnt);
    pl_mem_free(all);
    run_close(&r);
    return ran;
}

/* The figures docs/labs/07-moe.md quotes, one "# handout: TEXT" line each, TEXT verbatim
 * as the handout says it (tests/handout_figures.sh): the capacity rule on a factor binary
 * floating point cannot hold exactly. */
static void handout_figures(void)
{
    const float cf = 1.1f;
    printf("# handout: 1.1 becomes %.11f...\n", (double)cf);
    printf("# handout: for N k / E = 10 the kit computes %.7f and gives %d slots where exact "
           "decimal arithmetic says 11\n",
           (double)cf * 40 * 1 / 4, pl_moe_capacity(40, 4, 1, cf));
}

static void bench_mode(int E, int k, float cf, float skew, const char *plots_dir)
{
    if (pl_rank() == 0) handout_figures();
    struct pl_tokens data = pl_corpus_tokens(pl_mix64(base_seed ^ 0xda7a), CORPUS_TOKENS);
    const struct pl_profile *prof = pl_profile_find("dgx-h100");
    if (pl_rank() == 0) {
        printf("# MoE all-to-all volume and balance, %d ranks, %d tokens a rank, block 0's "
               "routing, one training step\n", pl_size(), global_b(pl_size()) / pl_size() * seq_len());
        printf("# a2a/rank: all-to-all-v bytes sent per rank (mean, all blocks); max/mean: the "
               "busiest rank's share; hot: the busiest expert's tokens / the mean;\n# layer: "
               "block 0 forward+backward modelled on %s for a layer of C %.0f, F %.0f, %.0f "
               "tokens a rank (the busiest rank's expert FLOPs and all-to-all bytes);\n"
               "# step: your step's trace replayed on %s, FLOPs and bytes scaled to that size\n",
               prof->name, MODEL_C, MODEL_F, MODEL_TOKENS, prof->name);
        printf("%4s %3s %5s %5s %10s %9s %8s %9s %11s %10s   %s\n", "E", "k", "cf", "skew ",
               "a2a/rank", "max/mean", "hot", "dropped", "layer(ms)", "step(ms)",
               "tokens per expert");
    }
    struct bench_result res;
    if (skew >= 0) {
        bench_row(&data, E, k, cf, skew, prof, &res);
        pl_tokens_free(&data);
        return;
    }
    enum { NCF = 3, NSKEW = 5 };
    static const float cfs[NCF] = {1.0f, 1.25f, CF_NONE};
    static const float skews[NSKEW] = {0.0f, 0.025f, 0.05f, 0.1f, 0.2f};
    double times[NCF][NSKEW];
    long tokens[2][MAX_E];
    int ok = 1;
    for (int i = 0; i < NCF && ok; i++)
        for (int j = 0; j < NSKEW && ok; j++) {
            ok = bench_row(&data, E, k, cfs[i], skews[j], prof, &res);
            times[i][j] = res.step_time * 1e3;
            if (skews[j] == 0.1f && i != 1) memcpy(tokens[i ? 1 : 0], res.total, sizeof res.total);
        }
    if (ok && plots_dir && pl_rank() == 0) {
        char path[512];
        snprintf(path, sizeof path, "%s/07-moe-tokens.svg", plots_dir);
        plot_tokens(path, E, tokens[0], tokens[1], "capacity factor 1.0", "no capacity limit",
                    "tokens per expert (4 ranks, top-2, skew 0.1: expert 0 hot)");
        printf("wrote %s\n", path);
        snprintf(path, sizeof path, "%s/07-moe-skew.svg", plots_dir);
        const char *labels[NCF] = {"capacity factor 1.0", "capacity factor 1.25",
                                   "no capacity limit"};
        plot_lines(path, NSKEW, skews, NCF, &times[0][0], labels,
                   "your step's trace replayed on dgx-h100 (ms) vs skew towards expert 0",
                   "skew");
        printf("wrote %s\n", path);
    }
    pl_tokens_free(&data);
}

/* ---- the lab's part of the harness ---- */

enum op { OP_ROUTER, OP_PERMUTE, OP_TRAIN };

struct state {
    enum op op;
    struct train_case cases[16];
    int ncases;
    struct pl_tokens data;
};

/* Lab flags: the bench's configuration (and what a misconfigured course would pass). */
static int flag_experts = 8, flag_top_k = 2;
static float flag_cf = 1.25f, flag_skew = -1;
static const char *flag_plots_dir;

static struct pl_flag lab07_flags[] = {
    {"--experts", PL_FLAG_INT, &flag_experts, "E", "bench: experts per MoE layer", 0},
    {"--top-k", PL_FLAG_INT, &flag_top_k, "K", "bench: experts per token", 0},
    {"--capacity-factor", PL_FLAG_FLOAT, &flag_cf, "F", "bench: capacity factor, > 0", 0},
    {"--skew", PL_FLAG_FLOAT, &flag_skew, "S",
     "bench: one row with expert 0's logit raised by S (default: a table of skews)", 0},
    {"--plots-dir", PL_FLAG_STR, &flag_plots_dir, "DIR",
     "bench: write the figures 07-moe-tokens.svg and 07-moe-skew.svg there (default none)", 0},
};

/* The configuration errors a course's student or instructor can make, exit 2. */
static void check_moe_args(int E, int k, float cf)
{
    int n = pl_size();
    if (E < 1 || E > 64)
        pl_usage_error_all("--experts %d: choose from 1 to 64 experts", E);
    if (E % n) {
        char d[128];
        pl_usage_error_all("n_experts=%d is not divisible by ep=%d ranks: every rank must own "
                           "the same number of experts (choose n_experts a multiple of %d, or "
                           "ep in {%s})", E, n, n, pl_divisors(E, d, sizeof d));
    }
    if (k < 1 || k > E)
        pl_usage_error_all("top_k=%d: a token picks k distinct experts of n_experts=%d "
                           "(choose top_k from 1 to %d)", k, E, E);
    if (!(cf > 0))
        pl_usage_error_all("capacity factor %g must be > 0 (1.0 gives each expert its even "
                           "share of the choices; a factor >= n_experts/top_k never drops)",
                           (double)cf);
}

static void *setup(const struct gr_args *a)
{
    static struct state st;
    base_seed = a->seed;
    int n = pl_size();
    st.op = !strcmp(a->op, "router") ? OP_ROUTER : !strcmp(a->op, "permute") ? OP_PERMUTE
                                                                             : OP_TRAIN;
    if (st.op == OP_TRAIN) {
        /* top1, top2, and the hidden suite's top1-hidden, top2-hidden */
        int k = !strncmp(a->op, "top1", 4) ? 1 : !strncmp(a->op, "top2", 4) ? 2 : 0;
        hidden_shape = strstr(a->op, "-hidden") != NULL;
        if (!k)
            pl_usage_error_all("--op %s: Lab 7's ops are router, permute, top1 and top2", a->op);
        if (!(n == 1 || n == 2 || n == 4 || n == 8 || (hidden_shape && n == 6)))
            pl_usage_error_all("%d ranks: Lab 7 trains on 1, 2, 4 or 8 ranks (they must divide "
                               "the global batch of %d sequences, and the EP groups the 4 "
                               "experts)", n, global_b(n));
        st.ncases = make_cases(k, n, hidden_shape, st.cases);
        tl7_want(!strcmp(a->mode, "check") && strstr(a->parts, "time") != NULL);
        st.data = pl_corpus_tokens(pl_mix64(base_seed ^ 0xda7a), CORPUS_TOKENS);
    } else {
        st.ncases = st.op == OP_ROUTER ? N_ROUTE_CASES + 1 : N_ROUTE_CASES;
    }
    return &st;
}

static const char *subject(void *vst)
{
    const struct state *st = vst;
    return st->op == OP_ROUTER ? "moe_route" : st->op == OP_PERMUTE ? "moe_permute"
                                                                     : "the expert-parallel MoE";
}

static int count_cases(void *vst)
{
    return ((const struct state *)vst)->ncases;
}

static void describe(void *vst, int i, char *buf, size_t len)
{
    const struct state *st = vst;
    char d[512];
    if (st->op == OP_ROUTER && i == 0) {
        snprintf(buf, len, "moe_capacity over N, E, k and factors 0.3 to 8");
    } else if (st->op != OP_TRAIN) {
        describe_route_case(&ROUTE_CASES[st->op == OP_ROUTER ? i - 1 : i], d, sizeof d);
        snprintf(buf, len, "%s(%s)", subject(vst), d);
    } else {
        describe_case(&st->cases[i], global_b(pl_size()) / pl_size() * seq_len(), d, sizeof d);
        snprintf(buf, len, "%s", d);
    }
}

static void run(void *vst, int i)
{
    const struct state *st = vst;
    for (int p = 0; p < NPARTS; p++) reasons[p][0] = '\0';
    why_part = 0;
    if (st->op == OP_ROUTER && i == 0) judge_capacity();
    else if (st->op == OP_ROUTER) judge_route_case(&ROUTE_CASES[i - 1], i - 1);
    else if (st->op == OP_PERMUTE) judge_permute_case(&ROUTE_CASES[i], i);
    else run_training(&st->data, &st->cases[i]);
}

static int judge(void *vst, int i, const char *part)
{
    const struct state *st = vst;
    int ok = verdict(part);
    if (!ok && st->op == OP_TRAIN && pl_rank() == 0) {
        char d[512];
        describe_case(&st->cases[i], global_b(pl_size()) / pl_size() * seq_len(), d, sizeof d);
        gr_say(part, "in: %s", d);
    }
    return ok;
}

static void finish(void *vst)
{
    struct state *st = vst;
    if (st->op == OP_TRAIN) pl_tokens_free(&st->data);
}

static void bench(const struct gr_args *a)
{
    base_seed = a->seed;
    if (pl_size() > 4)
        pl_usage_error_all("the bench runs on 1, 2 or 4 ranks (one EP group), not %d",
                           pl_size());
    check_moe_args(flag_experts, flag_top_k, flag_cf);
    bench_mode(flag_experts, flag_top_k, flag_cf, flag_skew, flag_plots_dir);
}

const struct gr_driver gr_lab_driver = {
    .flags = lab07_flags,
    .nflags = (int)(sizeof lab07_flags / sizeof lab07_flags[0]),
    .setup = setup,
    .subject = subject,
    .correct_first = "must train as the single-device MoE first",
    .ncases = count_cases,
    .describe = describe,
    .run = run,
    .judge = judge,
    .bench = bench,
    .finish = finish,
};
