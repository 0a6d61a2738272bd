/* driver.c: the trusted test driver of Lab 7 (MoE expert parallelism), on the lab harness's
 * new shape (grader/common/harness.h): the state, made here on the heap; each case run by
 * cases*.c and checks_train.c into this rank's observation, in figures (l7_note); the
 * verdicts by judge.c on rank 0 from every rank's; the bench by bench.c (lab07.h). It
 * drives the student's router, permutation and expert-parallel MoE (moe.h):
 *
 *   router / permute  the host functions on router probabilities the driver draws (skewed,
 *                     tied, a hot expert), against lib/model.h's pl_moe_capacity and
 *                     pl_moe_route and a counting sort of its own: exact (cases_route.c);
 *   top1 / top2       K training steps of the MoE-GPT on ep = world ranks, the driver running
 *                     every part but the MoE branch, against the single-device reference on
 *                     the same slices (cases_train.c, checks_train.c, oracle.c).
 *
 *   driver --op router|permute|top1|top2 --mode check [--parts correct,counts,traffic]
 *          [--record FILE]
 *   driver --mode bench [--experts E] [--top-k K] [--capacity-factor F] [--skew S]
 *
 * A part fails on the lowest rank that found something for it, said in that rank's order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "lab07.h"

/* ---- what a rank records ---- */

struct l7_reason *l7_note(struct l7_state *st, enum l7_code code, const long *v,
                          const double *x)
{
    struct l7_obs *o = st->ob;
    struct l7_reason *r = o && o->n < L7_MAX_REASONS ? &o->r[o->n++] : &st->spare;
    memset(r, 0, sizeof *r);
    r->part = st->why_part;
    r->code = code;
    if (v) memcpy(r->v, v, sizeof r->v);
    if (x) memcpy(r->x, x, sizeof r->x);
    return r;
}

int l7_noted(const struct l7_state *st, int part)
{
    for (int k = 0; st->ob && k < st->ob->n; k++)
        if (st->ob->r[k].part == part) return 1;
    return 0;
}

/* ---- the lab's part of the harness ---- */

/* The lab's options: the bench's configuration (and what a misconfigured course would pass);
 * entry k's value is gr_args.opt[k] (enum l7_opt). */
static const struct pl_flag OPTIONS[] = {
    {"--experts", PL_FLAG_INT, NULL, "E", "bench: experts per MoE layer (default 8)", 0},
    {"--top-k", PL_FLAG_INT, NULL, "K", "bench: experts per token (default 2)", 0},
    {"--capacity-factor", PL_FLAG_FLOAT, NULL, "F", "bench: capacity factor, > 0 (default 1.25)",
     0},
    {"--skew", PL_FLAG_FLOAT, NULL, "S",
     "bench: one row with expert 0's logit raised by S (default: a table of skews)", 0},
    {"--plots-dir", PL_FLAG_STR, NULL, "DIR",
     "bench: write the figures 07-moe-tokens.svg and 07-moe-skew.svg there (default none)", 0},
};

static int tokens_a_rank(const struct l7_state *st)
{
    return l7_global_b(pl_size()) / pl_size() * l7_seq_len(st);
}

static void *setup(const struct gr_args *a)
{
    struct l7_state *st = calloc(1, sizeof *st);
    if (!st) pl_fatal("out of memory");
    st->seed = a->seed;
    int n = pl_size();
    st->op = !strcmp(a->op, "router")    ? L7_OP_ROUTER
             : !strcmp(a->op, "permute") ? L7_OP_PERMUTE
                                         : L7_OP_TRAIN;
    if (st->op == L7_OP_TRAIN) {
        /* top1, top2, and the hidden suite's top1-hidden, top2-hidden */
        int k = !strncmp(a->op, "top1", 4) ? 1 : !strncmp(a->op, "top2", 4) ? 2 : 0;
        st->hidden = strstr(a->op, "-hidden") != NULL;
        if (!k)
            pl_usage_error_all("--op %s: Lab 7's ops are router, permute, top1 and top2", a->op);
        if (!(n == 1 || n == 2 || n == 4 || n == 8 || (st->hidden && n == 6)))
            pl_usage_error_all("%d ranks: Lab 7 trains on 1, 2, 4 or 8 ranks (they must divide "
                               "the global batch of %d sequences, and the EP groups the 4 "
                               "experts)", n, l7_global_b(n));
        st->ncases = l7_make_cases(k, n, st->hidden, st->cases);
        st->tl.wanted = !strcmp(a->mode, "check") && strstr(a->parts, "time") != NULL;
        st->data = pl_corpus_tokens(pl_mix64(st->seed ^ 0xda7a), L7_CORPUS_TOKENS);
    } else {
        st->ncases = st->op == L7_OP_ROUTER ? L7_N_ROUTE_CASES + 1 : L7_N_ROUTE_CASES;
    }
    return st;
}

static const char *subject(void *vst)
{
    const struct l7_state *st = vst;
    return st->op == L7_OP_ROUTER    ? "moe_route"
           : st->op == L7_OP_PERMUTE ? "moe_permute"
                                     : "the expert-parallel MoE";
}

static int count_cases(void *vst)
{
    return ((const struct l7_state *)vst)->ncases;
}

static void describe(void *vst, int i, char *buf, size_t len)
{
    const struct l7_state *st = vst;
    char d[512];
    if (st->op == L7_OP_ROUTER && i == 0) {
        snprintf(buf, len, "moe_capacity over N, E, k and factors 0.3 to 8");
    } else if (st->op != L7_OP_TRAIN) {
        int r = st->op == L7_OP_ROUTER ? i - 1 : i;
        l7_describe_route_case(&L7_ROUTE_CASES[r], d, sizeof d);
        snprintf(buf, len, "%s(%s)", subject(vst), d);
    } else {
        l7_describe_case(&st->cases[i], tokens_a_rank(st), pl_size(), d, sizeof d);
        snprintf(buf, len, "%s", d);
    }
}

static size_t obs_size(const void *st, int i)
{
    return sizeof(struct l7_obs);
}

static void observe(void *vst, int i, void *obs)
{
    struct l7_state *st = vst;
    st->ob = obs;
    st->ob->op = (int)st->op;
    st->why_part = L7_CORRECT;
    if (st->op == L7_OP_ROUTER && i == 0) l7_run_capacity(st);
    else if (st->op == L7_OP_ROUTER) l7_run_route_case(st, &L7_ROUTE_CASES[i - 1], i - 1);
    else if (st->op == L7_OP_PERMUTE) l7_run_permute_case(st, &L7_ROUTE_CASES[i], i);
    else {
        st->ob->tc = st->cases[i];
        st->ob->N = tokens_a_rank(st);
        l7_run_training(st, &st->cases[i]);
    }
    st->ob = NULL;
}

static int judge(const void *st, int i, const char *part, const struct gr_obs *all,
                 struct gr_why *why)
{
    return l7_judge(part, all, why);
}

static void finish(void *vst)
{
    struct l7_state *st = vst;
    if (st->op == L7_OP_TRAIN) pl_tokens_free(&st->data);
    free(st);
}

const struct gr_driver gr_lab_driver = {
    .options = OPTIONS,
    .noptions = (int)(sizeof OPTIONS / sizeof OPTIONS[0]),
    .setup = setup,
    .subject = subject,
    .correct_first = "must train as the single-device MoE first",
    .ncases = count_cases,
    .describe = describe,
    .bench = l7_bench,
    .finish = finish,
    .obs_size = obs_size,
    .observe = observe,
    .judge_obs = judge,
};
