/* driver.c: Lab 8's part of its trusted driver, on the lab harness's new shape (the harness,
 * grader/common/harness.h, owns main, flags, modes and the gather of observations). The
 * oracle is the kit's planner (lib/plan.h), reached as __real_pl_plan_* because lab.mk wraps
 * its entry points: a wrapper called while the code under test runs means the student called
 * the oracle, and that test fails.
 *
 *   memory, time     the student's estimates against the planner's on a table of
 *                    configurations and L8_N_DRAWN more drawn by the seed, every field
 *                    within its tolerance (L8_TOL);
 *   search           the student's choice on the visible cases (L8_SEARCHES): part "correct"
 *                    every rule (the planner's pl_plan_check), part "quality" its step time
 *                    (by the planner) within L8_TOL_QUALITY of the planner's exhaustive best;
 *   search_hidden    the same on three cases drawn by the seed, two of a table, one of the
 *                    sweep's space;
 *   bench --sweep    the student's search against the planner's on every preset, both
 *                    clusters, 1 to 128 nodes and three batch shapes (a project test);
 *   bench --tolerance  the student's worst deviation per field over every configuration the
 *                    memory and time tests can grade (tests/lab08_tolerance.sh);
 *   sanity(_hidden)  the student's step time on published runs (the published degrees, the
 *                    rest planned by the kit) within L8_SANITY_POINTS of their published MFU;
 *   questions        the numeric answers of placement_answers against the planner's.
 *
 * The state is made here on the heap; a case is built by cases.c and observed there into
 * struct l8_obs (the student's figures and the oracle's, no sentences); judge.c gives the
 * verdict from the observation alone, without MPI or the planner (tests/judge/08-placement.c
 * runs it on hand-built and recorded observations); bench.c is the bench mode (lab08.h says
 * what each file holds). */

#include "lab08.h"

/* The lab's flags: entry k's value is gr_args.opt[k] (bench.c reads them in this order;
 * all default to none). */
static const struct pl_flag OPTIONS[] = {
    {"--sweep", PL_FLAG_STR, NULL, "MODEL",
     "bench: your search against the kit's on every preset (all) or one, both clusters, 1 to "
     "128 nodes, three batch shapes; exits 1 on a disagreement", 0},
    {"--svg", PL_FLAG_STR, NULL, "FILE",
     "bench: the picture of section 1 drawn from your code (make plots LAB=08): your search's "
     "choice and your estimates of every set of degrees", 0},
    {"--tolerance", PL_FLAG_SWITCH, NULL, NULL,
     "bench: your estimates' worst deviation from the kit's, field by field, over every "
     "configuration the memory and time tests can grade; exits 1 when one is over", 0},
};

static void *setup(const struct gr_args *a)
{
    int op = l8_find_op(a->op);
    struct l8_state *st = l8_state_new(op < 0 ? L8_NOPS : (enum l8_op)op, a->seed);
    l8_setup_cases(st);
    return st;
}

static void finish(void *st)
{
    l8_state_free(st);
}

static const char *subject(void *st)
{
    return L8_OP_FUNCS[((const struct l8_state *)st)->op];
}

static int count_cases(void *st)
{
    return ((const struct l8_state *)st)->ncases;
}

static void describe(void *vst, int i, char *buf, size_t len)
{
    const struct l8_state *st = vst;
    struct l8_where w;
    l8_where_of(&st->cases[i], &w);
    l8_describe_where(&w, st->op != L8_OP_SEARCH && st->op != L8_OP_SEARCH_HIDDEN, buf, len);
}

static size_t obs_size(const void *st, int i)
{
    (void)st;
    (void)i;
    return sizeof(struct l8_obs);
}

static void observe(void *st, int i, void *obs)
{
    l8_observe(st, i, obs);
}

static int judge(const void *st, int i, const char *part, const struct gr_obs *all,
                 struct gr_why *why)
{
    (void)i;
    return l8_judge(((const struct l8_state *)st)->op, part, all, why);
}

const struct gr_driver gr_lab_driver = {
    .setup = setup,
    .subject = subject,
    .correct_first = "must obey every placement rule first",
    .ncases = count_cases,
    .describe = describe,
    .obs_size = obs_size,
    .observe = observe,
    .judge_obs = judge,
    .bench = l8_bench,
    .finish = finish,
    .options = OPTIONS,
    .noptions = (int)(sizeof OPTIONS / sizeof OPTIONS[0]),
};
