/* driver.c: Lab 3's part of its trusted driver (the harness, grader/common/harness.h, owns
 * main, flags and modes). It trains the tiny GPT for K AdamW steps with the student's ZeRO
 * stage (zero.h) on every rank's slice of each global batch, and compares losses and
 * parameters with the single-device reference (grader/common). It checks the shard layout
 * against the header's rule computed here, reads each step's bytes by collective kind from
 * the traffic ledger and each category's peak from the memory ledger, and judges them
 * against the ZeRO formulas computed in code (formulas.h) for this model; it times the
 * student's stage against the kit's own parts measured alone in the same run (the model's
 * compute, then the library's collectives of the stage). Ops: layout, zero1, zero2, zero3.
 * Lab options: --svg FILE (bench: the memory bar chart), --plots DIR (bench: one ZeRO-3
 * step's memory over time and modelled timelines, prefetch.c).
 *
 * On the lab harness's new shape (harness.h): the state is made here on the heap; a case is
 * run by cases.c into this rank's observation (struct l3_obs, figures only), the harness
 * gathers every rank's once, and judge.c and judge_correct.c judge them on rank 0 with no
 * MPI; timed and benchmarked by bench.c (lab03.h says what each file holds). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab03.h"
#include "prefetch.h"
#include "wrap_ctx.h"

static const struct pl_flag OPTIONS[] = {
    {"--svg", PL_FLAG_STR, NULL, "FILE", "bench: write the memory bar chart (none)", 0},
    {"--plots", PL_FLAG_STR, NULL, "DIR",
     "bench: write one ZeRO-3 step's memory over time and modelled timelines there (none)", 0},
};

static void *setup(const struct gr_args *a)
{
    struct l3_state *l = calloc(1, sizeof *l);
    if (!l) pl_fatal("out of memory");
    l->seed = a->seed;
    l->grp = (struct l3_group){NULL, MPI_COMM_NULL, 1, 0, 0, 1};
    l->stage = strcmp(a->op, "layout") ? a->op[4] - '0' : 0;
    l->ncases = l->stage ? L3_NCASES - !l3_has_groups() : 1;
    l->trace_prefetch = l->stage == 3 && gr_has_part(a->parts, "prefetch");
    if (!l->stage && strcmp(a->mode, "check"))
        pl_usage_error_all("--op layout has only a check mode");
    l->data = pl_corpus_tokens(pl_mix64(l->seed + 5), L3_CORPUS_TOKENS);
    l->setup = l3_graded_setup(&l->data, l->seed);
    pl_model_layout_init(&l->lay, &l->setup.cfg);
    if (l->stage) l3_layout_of_code(&l->e0, &l->lay, pl_size(), 0);
    gr_wrap_ctx_set(&l->watch);
    return l;
}

static void finish(void *st)
{
    struct l3_state *l = st;
    gr_wrap_ctx_set(NULL);
    l3_prefetch_free(&l->pf);
    free(l->flat);
    if (l->z) zero_free(l->z);
    l3_group_close(&l->grp, NULL);
    if (l->ref.loss) gr_reference_free(&l->ref);
    l3_grads_free(&l->watch);
    pl_model_layout_free(&l->lay);
    pl_tokens_free(&l->data);
    free(l);
}

static const char *subject(void *st)
{
    struct l3_state *l = st;
    return l->stage ? l3_stage_name(l->stage) : "zero_layout_init";
}

static int count_cases(void *st)
{
    return ((struct l3_state *)st)->ncases;
}

static void describe(void *st, int i, char *buf, size_t len)
{
    struct l3_state *l = st;
    static const char *const clip[L3_NCASES] = {
        "clipping at the default threshold",
        "clipping off: AdamW gets the averaged gradient itself",
        ("clipping at a norm between the ranks' shard norms: only the whole gradient's norm "
         "clips every rank alike")};
    if (!l->stage) snprintf(buf, len, "zero_layout_init on many model sizes and rank counts");
    else if (i == L3_CASE_GROUPS)
        snprintf(buf, len, "%s: %d AdamW steps in each of 2 ZeRO groups of %d ranks split from "
                 "the world, each on its own batches, another model shape and AdamW setting%s",
                 l3_stage_name(l->stage), L3_STEPS, pl_size() / 2,
                 l->stage == 3 ? ", prefetch on" : "");
    else snprintf(buf, len, "%s: %d AdamW steps on %d ranks, %s%s", l3_stage_name(l->stage),
                  L3_STEPS, pl_size(), clip[i],
                  l->stage == 3 ? l3_case_prefetch(3, i) ? ", prefetch on" : ", prefetch off"
                                : "");
}

static size_t obs_size(const void *st, int i)
{
    (void)st;
    (void)i;
    return sizeof(struct l3_obs);
}

static void observe(void *st, int i, void *obs)
{
    struct l3_state *l = st;
    l->ob = obs;
    l3_run(l, i);
    l->ob = NULL;
}

static int judge(const void *st, int i, const char *part, const struct gr_obs *all,
                 struct gr_why *why)
{
    const struct l3_state *l = st;
    return l3_judge(l->stage, i, l->ncases, part, all, why);
}

static int probe(void *st)
{
    return l3_probe(st);
}

static double perf(void *st)
{
    return l3_perf(st);
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
    .probe = probe,
    .perf = perf,
    .bench = l3_bench,
    .finish = finish,
};
