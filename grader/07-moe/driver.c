/* driver.c: the trusted test driver of Lab 7 (MoE expert parallelism), on the lab harness
 * (grader/common/harness.h): the state, made here on the heap; the cases by cases*.c, the
 * bench by bench.c (lab07.h). It drives the student's router, permutation and expert-parallel
 * MoE (moe.h):
 *
 *   router / permute  the host functions on router probabilities the driver draws (skewed,
 *                     tied, a hot expert), against lib/model.h's pl_moe_capacity and
 *                     pl_moe_route and a counting sort of its own: exact (cases_route.c);
 *   top1 / top2       K training steps of the MoE-GPT on ep = world ranks, the driver running
 *                     every part but the MoE branch, against the single-device reference on
 *                     the same slices (cases_train.c, checks_train.c, oracle.c).
 *
 *   driver --op router|permute|top1|top2 --mode check [--parts correct,counts,traffic]
 *   driver --mode bench [--experts E] [--top-k K] [--capacity-factor F] [--skew S]
 *
 * run() records each rank's reasons per part and judge() gathers them to rank 0, which says
 * the first failing rank's. */
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "lab07.h"

const char *const L7_PART_NAMES[L7_NPARTS] = {"correct", "counts", "traffic", "placement",
                                              "time"};

/* ---- verdicts of several ranks: the first failing rank's reason, said by rank 0 ---- */

void l7_why(struct l7_state *st, const char *fmt, ...)
{
    char *text = L7_WHY_TEXT(st);
    size_t used = strlen(text);
    if (used + 2 >= L7_REASON) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text + used, L7_REASON - used - 1, fmt, ap);
    va_end(ap);
    strcat(text, "\n");
}

static int part_index(const char *part)
{
    for (int i = 0; i < L7_NPARTS; i++)
        if (!strcmp(part, L7_PART_NAMES[i])) return i;
    pl_usage_error_all("--parts %s: Lab 7 judges correct, counts, traffic, placement and time",
                       part);
}

/* Collective: 1 when no rank has a reason for part; otherwise rank 0 says the lowest
 * failing rank's. Clears the reasons. */
static int verdict(struct l7_state *st, const char *part)
{
    st->why_part = part_index(part);
    char *text = L7_WHY_TEXT(st);
    int ok = !text[0];
    int n = pl_size(), me = pl_rank();
    char *all = me == 0 ? pl_mem_alloc((size_t)n * L7_REASON, PL_MEM_WORK, PL_HOST,
                                       "verdict reasons")
                        : NULL;
    PL_CHECK_MPI(MPI_Gather(text, L7_REASON, MPI_CHAR, all, L7_REASON, MPI_CHAR, 0,
                            MPI_COMM_WORLD));
    int all_ok = 0;
    PL_CHECK_MPI(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (me == 0 && !all_ok)
        for (int r = 0; r < n; r++)
            if (all[(size_t)r * L7_REASON]) {
                char *line = all + (size_t)r * L7_REASON, *nl;
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
    text[0] = '\0';
    return all_ok;
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
        l7_describe_case(&st->cases[i], tokens_a_rank(st), d, sizeof d);
        snprintf(buf, len, "%s", d);
    }
}

static void run(void *vst, int i)
{
    struct l7_state *st = vst;
    for (int p = 0; p < L7_NPARTS; p++) st->reasons[p][0] = '\0';
    st->why_part = L7_CORRECT;
    if (st->op == L7_OP_ROUTER && i == 0) l7_run_capacity(st);
    else if (st->op == L7_OP_ROUTER) l7_run_route_case(st, &L7_ROUTE_CASES[i - 1], i - 1);
    else if (st->op == L7_OP_PERMUTE) l7_run_permute_case(st, &L7_ROUTE_CASES[i], i);
    else l7_run_training(st, &st->cases[i]);
}

static int judge(void *vst, int i, const char *part)
{
    struct l7_state *st = vst;
    int ok = verdict(st, part);
    if (!ok && st->op == L7_OP_TRAIN && pl_rank() == 0) {
        char d[512];
        l7_describe_case(&st->cases[i], tokens_a_rank(st), d, sizeof d);
        gr_say(part, "in: %s", d);
    }
    return ok;
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
    .run = run,
    .judge = judge,
    .bench = l7_bench,
    .finish = finish,
};
