/* driver.c: Lab 2's part of its trusted driver (the harness, grader/common/harness.h, owns
 * main, flags and modes). It gives every rank a replica of a tiny GPT initialised
 * differently per rank and its slice of each global batch, drives the student's DDP (ddp.h)
 * for K steps, and compares every step's averaged gradients and loss, and the parameters
 * after K steps, with the single-device reference on the whole batch (grader/common), on
 * the world and, on an even rank count, on two groups of every other rank, each its own DDP
 * on the comm ddp_new is given. It reads what was sent from the traffic ledger (per
 * microbatch and per step), replays a traced step on the DGX H100 profile to judge overlap,
 * and times the student's step against the kit's own parts measured in the same run: the
 * model's step alone and the library's all-reduce of the gradient alone. Ops: naive,
 * bucketed, overlapped (one variant), accumulation (all three with microbatches) or uneven
 * (all three on ranks holding different numbers of sequences, uneven.c). Lab
 * options: --svg FILE, --bucket-bytes N. On the harness's new shape: a case is run into this
 * rank's observation (struct l2_obs, figures only), and judge.c words the verdict from every
 * rank's, on rank 0 with no MPI. The files and what each holds: lab02.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab02.h"

/* The lab's flags: entry k's value is gr_args.opt[k] (bench.c reads them in this order). */
static const struct pl_flag OPTIONS[] = {
    {"--svg", PL_FLAG_STR, NULL, "FILE", "write the overlapped step's modelled timeline", 0},
    {"--bucket-bytes", PL_FLAG_I64, NULL, "N", "bench: the bucket size in bytes (default 24576)",
     0},
};

static void *setup(const struct gr_args *a)
{
    struct l2_state *st = calloc(1, sizeof *st);
    if (!st) pl_fatal("out of memory");
    st->seed = a->seed;
    st->svg = a->opt[0].s;
    st->op = a->op;
    if (!strcmp(a->mode, "check")) {
        st->ncases = l2_make_cases(a->op, st->seed, st->cases);
        st->want_traffic = gr_has_part(a->parts, "traffic");
        st->want_overlap = gr_has_part(a->parts, "overlap");
        l2_setup_init(&st->s, st->seed, K_STEPS, pl_mix64(st->seed ^ 0x5eed), 1);
    }
    return st;
}

static const char *subject(void *vst)
{
    struct l2_state *st = vst;
    snprintf(st->subject, sizeof st->subject, "the %s variant", st->op);
    return st->subject;
}

static int count_cases(void *st) { return ((struct l2_state *)st)->ncases; }

static void describe(void *st, int i, char *buf, size_t len)
{
    l2_describe_case(&((struct l2_state *)st)->cases[i], pl_size(), buf, len);
}

static size_t obs_size(const void *st, int i)
{
    (void)st;
    (void)i;
    return sizeof(struct l2_obs);
}

/* Runs case i into this rank's observation; rank 0 replays the traced step of case 0 when
 * part overlap is asked for and the case trained correctly. */
static void observe(void *vst, int i, void *obs)
{
    struct l2_state *st = vst;
    struct l2_obs *ob = obs;
    int traced = i == 0 && st->want_overlap;
    pl_trace_merged_free(&st->last.trace);
    l2_run_case(st, i, traced ? K_STEPS - 1 : -1, ob);
    if (traced && st->last.correct && pl_rank() == 0) l2_observe_overlap(st, &ob->overlap);
}

static int judge(const void *st, int i, const char *part, const struct gr_obs *all,
                 struct gr_why *why)
{
    (void)st;
    return l2_judge(i, part, all, why);
}

static void finish(void *vst)
{
    struct l2_state *st = vst;
    pl_trace_merged_free(&st->last.trace);
    if (st->ncases) l2_setup_free(&st->s);
    free(st);
}

const struct gr_driver gr_lab_driver = {
    .options = OPTIONS,
    .noptions = (int)(sizeof OPTIONS / sizeof OPTIONS[0]),
    .setup = setup,
    .subject = subject,
    .correct_first = "must train correctly first",
    .ncases = count_cases,
    .describe = describe,
    .obs_size = obs_size,
    .observe = observe,
    .judge_obs = judge,
    .probe = l2_probe,
    .perf = l2_perf,
    .bench = l2_bench,
    .finish = finish,
};
