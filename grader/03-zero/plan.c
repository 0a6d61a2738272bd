/* plan.c: the descriptor and test plan of Lab 3 (ZeRO), read by the grader.
 *
 * The shard layout on many model sizes and rank counts (4 points). Per stage: K AdamW steps
 * on 1, 2, 3 and 4 ranks equal to the single-device reference (4 points each); on 2 ranks and
 * more, the bytes each rank sends per step (2 points each: reduce-scatter + all-gather of the
 * padded model, 2Psi(n-1)/n x 4 bytes for stages 1 and 2, 3Psi for stage 3, no full
 * all-reduce) and the peak memory per category against the ZeRO formulas for this model (2
 * points each); throughput against the kit's own parts of the stage run one after the other
 * in the same run (3 points, full marks from 0.7x, only once the stage is correct); ZeRO-3's
 * prefetch on the modelled timeline: the share of the all-gather time its own trace hides,
 * replayed on dgx-h100, against the most any step can hide (3 points, prefetch.h). 100
 * points in all.
 * Every case runs on a communicator split from the world and freed after zero_free; on 4
 * ranks and more a last case trains two ZeRO groups of n/2 ranks, each on its own batches,
 * with a model shape and AdamW setting drawn from the seed.
 * The hidden suite repeats the correctness tests with the secret seed on 3 ranks and on 6,
 * a rank count the visible suite does not run (there two groups of 3). */
#include <stdio.h>

#include "grade.h"
#include "rules/symbols.h"

#ifndef GR_LAB_ORACLE
#error "GR_LAB_ORACLE: grader.mk defines it from grader/03-zero/lab.mk's GRADER_ORACLE_03-zero"
#endif

static const struct {
    const char *title;
    const char *op;
} L3_STAGES[] = {
    {"ZeRO-1 (optimizer state sharded)", "zero1"},
    {"ZeRO-2 (+ gradients reduce-scattered)", "zero2"},
    {"ZeRO-3 (+ parameters gathered on demand)", "zero3"},
};

#define L3_CHECK_TIMEOUT 90
#define L3_PERF_POINTS 3
#define L3_PREFETCH_POINTS 3
#define L3_PERF_TIMEOUT 180

static void l3_stage_tests(const char *title, const char *op, const int *nps, int hidden)
{
    char name[200];
    const char *pre = hidden ? "hidden: " : "";
    for (int i = 0; nps[i]; i++) {
        int np = nps[i];
        snprintf(name, sizeof name, "%s%s [np=%d]", pre, title, np);
        gr_add(&(struct gr_spec){name, op, "check", "correct", "correctness", np,
                                 hidden ? 1 : 4, L3_CHECK_TIMEOUT, hidden, NULL});
        if (np >= 2 && !hidden) {
            snprintf(name, sizeof name, "%s traffic [np=%d]", title, np);
            gr_add(&(struct gr_spec){name, op, "check", "traffic", "performance", np, 2,
                                     L3_CHECK_TIMEOUT, 0, NULL});
            snprintf(name, sizeof name, "%s memory [np=%d]", title, np);
            gr_add(&(struct gr_spec){name, op, "check", "memory", "memory", np, 2,
                                     L3_CHECK_TIMEOUT, 0, NULL});
        }
    }
}

/* The driver splits a global batch of 12 sequences into equal slices. */
static int l3_runs(int np)
{
    return 12 % np == 0;
}

static void l3_plan(const struct gr_plan_opts *o)
{
    static const int visible[] = {1, 2, 3, 4, 0}, hidden[] = {3, 6, 0};
    int n = (int)(sizeof L3_STAGES / sizeof L3_STAGES[0]);
    gr_add(&(struct gr_spec){"shard layout [np=1, any size, 1..9 ranks]", "layout", "check",
                             "correct", "correctness", 1, 4, L3_CHECK_TIMEOUT, 0, NULL});
    for (int k = 0; k < n; k++)
        l3_stage_tests(L3_STAGES[k].title, L3_STAGES[k].op, o->np_given ? o->np : visible,
                          0);
    for (int k = 0; k < n; k++) {
        char name[200];
        snprintf(name, sizeof name, "%s throughput vs compute + collectives alone [np=%d]",
                 L3_STAGES[k].title, o->perf_np);
        gr_add(&(struct gr_spec){name, L3_STAGES[k].op, "perf", "perf", "performance",
                                 o->perf_np, L3_PERF_POINTS, L3_PERF_TIMEOUT, 0,
                                 L3_STAGES[k].op});
    }
    {
        char name[200];
        snprintf(name, sizeof name, "%s prefetch: all-gather hidden behind compute (modelled "
                 "dgx-h100) [np=%d]", L3_STAGES[n - 1].title, o->perf_np);
        /* gated like the throughput: a ZeRO-3 that keeps a full copy (its memory test
         * failed) earns no time points for hiding gathers it should not need */
        gr_add(&(struct gr_spec){name, "zero3", "check", "prefetch", "performance", o->perf_np,
                                 L3_PREFETCH_POINTS, L3_CHECK_TIMEOUT, 0, "zero3"});
    }
    if (o->hidden)
        for (int k = 0; k < n; k++)
            l3_stage_tests(L3_STAGES[k].title, L3_STAGES[k].op,
                              o->np_given ? o->np : hidden, 1);
}

static const struct gr_lab l3_lab = {
    .dir = "03-zero",
    .title = "ZeRO",
    .plan = l3_plan,
    .metric = "zero3_tokens_per_s",
    .metric_title = "Lab 3: ZeRO-3 tokens/s",
    .bench_args = "",
    .bench_np = "2 4",
    /* Communication through lib (its ledger is the traffic test's evidence), memory from
     * pl_mem_alloc (its ledger is the memory test's). */
    .forbidden_symbols = GR_SYMBOLS_BELOW_KIT GR_SYMBOLS_RAW_ALLOC "__real_* __wrap_*",
    .allowed_symbols = "MPI_Abort ompi_mpi_comm_world", /* stops the job; it moves no data */
    .runs_on = l3_runs,
    .runs_on_words = "1, 2, 3, 4, 6 or 12 ranks",
    .runs_on_why = "do not divide the global batch of 12 sequences",
    .symbol_rule = "Lab 3 communicates through lib's calls only, by their own names (the "
                   "grader sees each update's gradient and each pass's buffers through them), "
                   "and takes its memory from pl_mem_alloc, whose ledger the memory tests read",
    .oracle_symbols = GR_LAB_ORACLE, /* lab.mk's GRADER_ORACLE_03-zero: the sharded step */
};
GR_REGISTER_LAB(l3_lab)
