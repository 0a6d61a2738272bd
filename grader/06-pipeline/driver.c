/* driver.c: the trusted test driver of Lab 6. It owns main, gives every rank the same tiny
 * GPT and the whole global batch of each step, drives the student's pipeline (pipeline.h)
 * for K steps per case (AFAB, 1F1B or interleaved 1F1B, m = 1..8 microbatches) on p =
 * world-size stages and, from 4 ranks up, one case more on a grid of two pipelines of n/2
 * stages numbered against world order, each on its own data (grid.h). Lab 6 is on the
 * harness's new shape: each rank observes a case into a plain struct of figures (struct
 * l6_obs: its stage's parts, the marks of its traced step, its sends' first fault, its
 * memory; on rank 0 the training's first fault and each pipeline's replayed bubble), the
 * harness gathers them once, and judge.c (judge_train.c for "correct") judges each part on
 * rank 0 alone, with no MPI (every pipeline of a grid on its own):
 *   correct   every step's loss (last stage) and gradients, the parameters after K steps,
 *             each stage's parts assembled into one model, against the single-device
 *             reference of the pipeline's own data (grader/common);
 *   balance   the student's partition against the best contiguous cut by the kit's FLOPs,
 *             on the lab's model and on seven others (partition.c);
 *   schedule  the order of F and B each rank ran, read from its own trace (the marks of
 *             lib/pipe_parts), against the schedule's definition (schedule.c);
 *   bubble    the pipeline's trace replayed with uniform stage times against (p-1)/(m+p-1)
 *             and the ideal run of the definition (AFAB and 1F1B: every operation's start);
 *   memory    each stage's peak in the memory ledger, its activations and every category
 *             together, against the figure of the schedule's order (l6_sched_peak_acts), and
 *             what the code holds from step to step and after pipe_free;
 *   traffic   every message's peer, tag and bytes from the trace: one per microbatch per
 *             boundary, the activation's size.
 * The training runs with point-to-point under NCCL's rules (pl_comm_set_p2p_like_nccl), so
 * a schedule that completes on MPI only because MPI buffers small messages deadlocks on the
 * CPU build as it would on GPUs.
 * main, flags, the case loop, the gather and the report are the lab harness's
 * (grader/common/harness.h); the state is on the heap (struct l6_state): a case in cases.c,
 * its figures read in cases_check.c, the verdicts in judge.c, judge_train.c and
 * partition.c (tests/judge/06-pipeline.c runs them alone), bench mode in bench.c.
 *
 *   driver --op afab|1f1b|interleaved[-hidden] --mode check [--parts LIST] [--seed S]
 *   driver --mode bench [--op afab|1f1b|interleaved] [--microbatches M] [--svg-dir DIR] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab06.h"
#include "partition.h"

/* The lab's flags: entry k's value is gr_args.opt[k] (bench.c reads them in this order). */
static const struct pl_flag L6_OPTIONS[] = {
    {"--microbatches", PL_FLAG_INT, NULL, "M", "bench: only m = M microbatches", 0},
    {"--svg-dir", PL_FLAG_STR, NULL, "DIR",
     "bench: draw each schedule's timeline, yours and the ideal, into DIR", 0},
};
static void *setup(const struct gr_args *a)
{
    struct l6_state *st = calloc(1, sizeof *st);
    PL_ASSERT(st);
    int hidden = 0;
    st->k = l6_schedule_of(a->op, &hidden);
    struct pl_model_config c = l6_config(hidden, 1);
    l6_check_stages(&c, st->k);
    for (int i = 0; i < L6_NCASES; i++)
        if (l6_sched_runs(st->k, pl_size(), L6_CASES[i]))
            st->pipes[st->ncases] = 1, st->cases[st->ncases++] = L6_CASES[i];
    /* From 4 ranks up, one case more: two pipelines of n/2 stages (grid.h), m = 2 p, which
     * every schedule runs with (m > p: 1F1B reaches its steady state). */
    if (l6_grid_fits() && l6_sched_runs(st->k, pl_size() / 2, pl_size()))
        st->pipes[st->ncases] = 2, st->cases[st->ncases++] = pl_size();
    l6_setup_init(&st->s, a->seed, hidden, 1);
    /* Point-to-point as NCCL runs it (nothing buffered, a wait completes the whole group):
     * a pipeline that deadlocks on GPUs deadlocks here too, not only on a GPU node. */
    pl_comm_set_p2p_like_nccl(1);
    return st;
}

static const char *subject(void *p)
{
    return l6_sched_name(((struct l6_state *)p)->k);
}

static int count_cases(void *p)
{
    return ((struct l6_state *)p)->ncases;
}

static void describe(void *p, int i, char *buf, size_t len)
{
    struct l6_state *st = p;
    int m = st->cases[i], pipes = st->pipes[i], stages = pl_size() / pipes;
    char chunks[32] = "", grid[64] = "";
    if (st->k == PIPE_INTERLEAVED)
        snprintf(chunks, sizeof chunks, " x %d chunks", l6_chunks_for(st->s.hidden, stages));
    if (pipes > 1)
        snprintf(grid, sizeof grid, "%d pipelines (each on its own data) of ", pipes);
    snprintf(buf, len, "%s, %s%d stages%s, %d microbatch%s of %d sequences, %d steps",
             l6_sched_name(st->k), grid, stages, chunks, m, m > 1 ? "es" : "", L6_GLOBAL_B / m,
             L6_K_STEPS);
}

static size_t obs_size(const void *p, int i)
{
    (void)p, (void)i;
    return sizeof(struct l6_obs);
}

/* Collective: case i run and observed; on the first case rank 0 also asks pipe_partition to
 * cut the other models the balance is judged on. */
static void observe(void *p, int i, void *obs)
{
    struct l6_state *st = p;
    struct l6_obs *ob = obs;
    l6_run_case(&st->s, st->k, st->cases[i], st->pipes[i], ob, NULL);
    if (st->cases[i] == 1) st->s.one_mb_ok = !ob->train.wrong && !ob->todo;
    for (int j = 0; j < L6_PART_OTHERS && i == 0 && pl_rank() == 0 && !ob->train.wrong; j++) {
        int q, B, T;
        struct pl_model_config c = l6_part_other(&st->s.train.cfg, j, &q, &B, &T);
        pipe_partition(&c, q, B, T, ob->other_first[j], ob->other_last[j]);
    }
}

static int judge_obs(const void *p, int i, const char *part, const struct gr_obs *all,
                     struct gr_why *why)
{
    (void)p;
    return l6_judge(i, part, all, why);
}

static void finish(void *p)
{
    struct l6_state *st = p;
    l6_setup_free(&st->s);
    free(st);
}

const struct gr_driver gr_lab_driver = {
    .setup = setup,
    .subject = subject,
    .correct_first = "must train correctly first",
    .ncases = count_cases,
    .describe = describe,
    .bench = l6_bench,
    .finish = finish,
    .obs_size = obs_size,
    .observe = observe,
    .judge_obs = judge_obs,
    .options = L6_OPTIONS,
    .noptions = (int)(sizeof L6_OPTIONS / sizeof L6_OPTIONS[0]),
};
