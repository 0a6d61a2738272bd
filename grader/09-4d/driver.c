/* driver.c: the trusted test driver of Lab 9. It owns no main (the lab harness does,
 * grader/common/harness.h): it gives every rank the same tiny GPT and the whole global
 * batch of each step, runs the student's grid and 4D training (fourd.h) on each case's
 * (dp, tp, pp) grid, laid out by "tp-pp-dp" on a virtual cluster (8 ranks: 2 nodes of 4;
 * 6 ranks: 3 nodes of 2), and has each rank observe what it held and sent (cases.c); the
 * harness gathers the observations once and judge.c judges each part on rank 0 with no
 * MPI. The state is on the heap (struct l9_state, lab09.h); bench mode is in bench.c, its
 * timeline picture in timeline.c.
 *
 *   driver --op train|train-hidden --mode check
 *          [--parts correct,clip,grid,traffic,bubble,recompute] [--seed S]
 *   driver --op capped --mode check [--parts cap] [--recompute none|selective|full]
 *   driver --mode bench [--svg FILE] [--timeline-svg FILE] [--plan-svg FILE] */
#include <stdlib.h>
#include <string.h>

#include "lab09.h"

/* The lab's flags: entry k's value is gr_args.opt[k] (bench.c reads them). */
static const struct pl_flag L9_OPTIONS[] = {
    {"--svg", PL_FLAG_STR, NULL, "FILE",
     "bench, 8 ranks: the picture of make plots LAB=09: each rank's activation peak with "
     "recompute none, selective and full on the (2,2,2) grid, beside section 3.1's formula", 0},
    {"--timeline-svg", PL_FLAG_STR, NULL, "FILE",
     "bench, 8 ranks: the other picture of make plots LAB=09: one step of the (2,2,2) grid "
     "on the modelled timeline, its collectives coloured by axis", 0},
    {"--plan-svg", PL_FLAG_STR, NULL, "FILE",
     "bench, 8 ranks: the third picture of make plots LAB=09: each run's memory by category "
     "on stage 0 beside Lab 8's planner's figure (section 3.4)", 0},
    {"--recompute", PL_FLAG_STR, NULL, PL_RECOMPUTE_NAMES,
     "--op capped: run under the cap with this recomputation rather than the planner's "
     "choice, to see a configuration the planner refuses stopped by the cap", 0},
};

static void *setup(const struct gr_args *a)
{
    int force = -1;
    const char *rc = a->opt[3].s;
    if (rc) {
        enum pl_recompute r;
        if (!a->op || strcmp(a->op, "capped"))
            pl_usage_error_all("--recompute is for --op capped: the other runs set their "
                               "recomputation themselves");
        if (pl_recompute_parse(rc, &r) != 0)
            pl_usage_error_all("--recompute %s: expected " PL_RECOMPUTE_NAMES, rc);
        force = (int)r;
    }
    return l9_setup(a->seed, pl_size(), a->op, force);
}

static const char *subject(void *p)
{
    (void)p;
    return "the 4D training";
}

static int count_cases(void *p)
{
    return ((struct l9_state *)p)->ncases;
}

static void describe(void *p, int i, char *buf, size_t len)
{
    l9_describe(p, i, buf, len);
}

static size_t obs_size(const void *p, int i)
{
    (void)p, (void)i;
    return sizeof(struct l9_obs);
}

static void observe(void *p, int i, void *obs)
{
    l9_observe(p, i, obs);
}

static int judge_obs(const void *p, int i, const char *part, const struct gr_obs *all,
                     struct gr_why *why)
{
    return l9_judge(p, i, part, all, why);
}

static void finish(void *p)
{
    l9_finish(p);
}

/* The TP groups must lie inside a node for the placement to mean anything: 8 ranks on 2
 * nodes of 4, 6 on 3 nodes of 2 (every graded TP group has 1, 2 or 4 ranks). */
static void before_init(const char *op, const char *mode, int *nodes, int *per_node)
{
    (void)op, (void)mode, (void)nodes;
    const char *np = getenv("OMPI_COMM_WORLD_SIZE");
    if (!np) np = getenv("PMI_SIZE");
    if (!np) np = getenv("SLURM_NTASKS");
    *per_node = np && atoi(np) == 6 ? 2 : 4;
}

const struct gr_driver gr_lab_driver = {
    .setup = setup,
    .subject = subject,
    .correct_first = "must train correctly first",
    .ncases = count_cases,
    .describe = describe,
    .bench = l9_bench,
    .finish = finish,
    .before_init = before_init,
    .obs_size = obs_size,
    .observe = observe,
    .judge_obs = judge_obs,
    .options = L9_OPTIONS,
    .noptions = (int)(sizeof L9_OPTIONS / sizeof L9_OPTIONS[0]),
};
