/* driver.c: the trusted test driver of Lab 6. It owns main, gives every rank the same tiny
 * GPT and the whole global batch of each step, drives the student's pipeline (pipeline.h)
 * for K steps per case (AFAB, 1F1B or interleaved 1F1B, m = 1..8 microbatches) on p =
 * world-size stages and, from 4 ranks up, one case more on a grid of two pipelines of n/2
 * stages numbered against world order, each on its own data (grid.h), and judges, each in
 * its own function so the parts stay separate (every pipeline of a grid on its own):
 *   correct   every step's loss (last stage) and gradients, the parameters after K steps,
 *             each stage's parts assembled into one model, against the single-device
 *             reference of the pipeline's own data (grader/common);
 *   balance   the student's partition against the best contiguous cut by the kit's FLOPs,
 *             on the lab's model and on seven others (partition.c);
 *   schedule  the order of F and B each rank ran, read from its own trace (the marks of
 *             lib/pipe_parts), against the schedule's definition (schedule.c);
 *   bubble    that trace replayed with uniform stage times against (p-1)/(m+p-1) and the
 *             ideal run of the definition (AFAB and 1F1B: every operation's start too);
 *   memory    each stage's peak in the memory ledger, its activations and every category
 *             together, against the figure of the schedule's order (l6_sched_peak_acts), and
 *             what the code holds from step to step and after pipe_free;
 *   traffic   every message's peer, tag and bytes from the trace: one per microbatch per
 *             boundary, the activation's size.
 * The training runs with point-to-point under NCCL's rules (pl_comm_set_p2p_like_nccl), so
 * a schedule that completes on MPI only because MPI buffers small messages deadlocks on the
 * CPU build as it would on GPUs.
 * main, flags, the case loop and the report are the lab harness's (grader/common/harness.h);
 * the state is on the heap (struct l6_state): a case in cases.c, what a wrong training says in
 * cases_check.c, the judges of the trace and the ledger in judge.c, bench mode in bench.c.
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
static void free_traces(struct l6_state *st)
{
    for (int g = 0; g < L6_GRID_MAX_PIPES; g++) pl_trace_merged_free(&st->o[g].trace);
}

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

static void run(void *p, int i)
{
    struct l6_state *st = p;
    free_traces(st);
    l6_run_case(&st->s, st->k, st->cases[i], st->pipes[i], st->o);
    if (st->cases[i] == 1) st->s.one_mb_ok = st->o[0].correct;
}

static int judge(void *p, int i, const char *part)
{
    struct l6_state *st = p;
    int m = st->cases[i], pipes = st->pipes[i];
    const struct pl_model_config *c = &st->s.train.cfg;
    if (!strcmp(part, "correct")) {
        if (!st->o[0].correct && pl_rank() == 0)
            gr_say("correct", "in: %s, %s%d stages, %d microbatch%s", l6_sched_name(st->k),
                   pipes > 1 ? "2 pipelines of " : "", pl_size() / pipes, m,
                   m > 1 ? "es" : "");
        return st->o[0].correct;
    }
    if (pl_rank() != 0) return 1;
    if (!strcmp(part, "balance"))
    {
        int first[L6_MAX_STAGES], last[L6_MAX_STAGES], p = pl_size();
        for (int s = 0; s < p; s++) first[s] = st->o[0].st[s].first, last[s] = st->o[0].st[s].last;
        return i > 0 || (l6_part_judge_lab(first, last, p, c) && l6_part_judge_others(c));
    }
    if (strcmp(part, "schedule") && strcmp(part, "bubble") && strcmp(part, "memory")
        && strcmp(part, "traffic")) {
        gr_say(part, "Lab 6 has no part '%s' (correct, balance, schedule, bubble, memory, "
               "traffic)", part);
        return 0;
    }
    for (int g = 0; g < pipes; g++) {
        if (l6_judge_pipe(st->k, m, part, &st->o[g], c)) continue;
        if (pipes > 1) {
            struct l6_grid gr;
            char who[160];
            l6_grid_make(&gr, pl_size(), pipes);
            gr_say(part, "in: pipeline %d of %d, %s (stage s is rank s of its communicator)", g,
                   pipes, l6_grid_text(&gr, g, who, sizeof who));
        }
        return 0;
    }
    return 1;
}

static void finish(void *p)
{
    struct l6_state *st = p;
    free_traces(st);
    l6_setup_free(&st->s);
    free(st);
}

/* ---- bench mode: bubble, memory and modelled step per schedule and m ---- */
const struct gr_driver gr_lab_driver = {
    .setup = setup,
    .subject = subject,
    .correct_first = "must train correctly first",
    .ncases = count_cases,
    .describe = describe,
    .run = run,
    .judge = judge,
    .bench = l6_bench,
    .finish = finish,
    .options = L6_OPTIONS,
    .noptions = (int)(sizeof L6_OPTIONS / sizeof L6_OPTIONS[0]),
};
