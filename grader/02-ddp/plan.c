/* plan.c: the descriptor and test plan of Lab 2 (data parallelism), read by the grader.
 *
 * Per variant (naive, bucketed, overlapped) and for gradient accumulation: the same
 * training as one device on 1, 2, 3 and 4 ranks (gradients each step, losses, parameters
 * after K steps, no memory kept by a step or after ddp_free, nothing in flight on the
 * communicator the grader splits for each case and frees after ddp_free; 2 or 3 points
 * each); the same training on ranks holding different numbers of sequences, on 2, 3 and 4
 * ranks (all three variants, with and without microbatches: 4 points each, a test of its
 * own, so that code right on even batches keeps the variants' points and the reason names
 * this one decision); the traffic of each step from the ledger on 2 ranks and more (2 points
 * each; the uneven cases' traffic is that of the others, graded there); for the
 * overlapped variant, the share of all-reduce time left exposed on the modelled timeline at
 * the largest rank count (10 points); the step time of each variant against the kit's own
 * parts measured alone in the same run, the model's step then the library's all-reduces of
 * the same ranges (10 points in all, only once the variant trains correctly). 100 points in
 * all. The hidden suite repeats the correctness and traffic tests on 6 ranks, a count the
 * visible suite never runs (two groups of 3), with the secret seed. */
#include <stdio.h>
#include <string.h>

#include "grade.h"
#include "lab02.h"
#include "rules/symbols.h"

static const struct {
    const char *op;        /* driver --op */
    const char *what;      /* the correctness test's name */
    const char *traffic;   /* the traffic test's name, or NULL: none */
    double correct_points, traffic_points, perf_points;
} LAB02_OPS[] = {
    {"naive", "naive: same training as one device", "naive traffic: one all-reduce per tensor",
     2, 2, 3},
    {"bucketed", "bucketed: same training as one device",
     "bucketed traffic: one all-reduce per bucket", 3, 2, 3},
    {"overlapped", "overlapped: same training as one device",
     "overlapped traffic: one all-reduce per bucket", 3, 2, 4},
    {"accumulation", "accumulation: same training over microbatches",
     "accumulation traffic: nothing sent before the last microbatch", 3, 2, 0},
    {"uneven", "uneven: same training, ranks holding different numbers of sequences", NULL, 4,
     0, 0},
};

#define LAB02_CHECK_TIMEOUT 90
#define LAB02_PERF_TIMEOUT 120

static void lab02_check_tests(int k, const int *nps, int hidden)
{
    char name[200];
    int largest = 0;
    for (int i = 0; nps[i]; i++)
        if (nps[i] > largest) largest = nps[i];
    const char *pre = hidden ? "hidden: " : "";
    const char *op = LAB02_OPS[k].op;
    for (int i = 0; nps[i]; i++) {
        int np = nps[i];
        /* one rank holds as many sequences as itself: nothing uneven to test */
        if (!LAB02_OPS[k].traffic && np < 2) continue;
        snprintf(name, sizeof name, "%s%s [np=%d]", pre, LAB02_OPS[k].what, np);
        gr_add(&(struct gr_spec){name, op, "check", "correct", "correctness", np,
                                 hidden ? 1 : LAB02_OPS[k].correct_points, LAB02_CHECK_TIMEOUT,
                                 hidden, NULL});
        if (np >= 2 && LAB02_OPS[k].traffic) {
            snprintf(name, sizeof name, "%s%s [np=%d]", pre, LAB02_OPS[k].traffic, np);
            gr_add(&(struct gr_spec){name, op, "check", "traffic", "performance", np,
                                     hidden ? 1 : LAB02_OPS[k].traffic_points,
                                     LAB02_CHECK_TIMEOUT, hidden, NULL});
        }
        if (!hidden && np == largest && np >= 2 && !strcmp(op, "overlapped")) {
            snprintf(name, sizeof name, "overlapped: all-reduce hidden behind backward "
                     "(modelled dgx-h100) [np=%d]", np);
            gr_add(&(struct gr_spec){name, op, "check", "overlap", "performance", np, 10,
                                     LAB02_CHECK_TIMEOUT, 0, NULL});
        }
    }
}

/* The rank counts Lab 2 runs on (the descriptor's runs_on): the global batch of GLOBAL_B
 * sequences splits into equal slices of whole microbatches. */
static int l2_runs_on(int np)
{
    return np > 0 && GLOBAL_B % np == 0 && (GLOBAL_B / np) % MICROBATCHES == 0;
}

static void lab02_plan(const struct gr_plan_opts *o)
{
    static const int visible[] = {1, 2, 3, 4, 0}, hidden[] = {6, 0};
    int n = (int)(sizeof LAB02_OPS / sizeof LAB02_OPS[0]);
    for (int k = 0; k < n; k++) lab02_check_tests(k, o->np_given ? o->np : visible, 0);
    for (int k = 0; k < n; k++) {
        if (LAB02_OPS[k].perf_points <= 0) continue;
        char name[160];
        snprintf(name, sizeof name, "%s: step time vs compute + all-reduce alone [np=%d]",
                 LAB02_OPS[k].op, o->perf_np);
        gr_add(&(struct gr_spec){name, LAB02_OPS[k].op, "perf", "perf", "performance",
                                 o->perf_np, LAB02_OPS[k].perf_points, LAB02_PERF_TIMEOUT, 0,
                                 LAB02_OPS[k].op});
    }
    if (o->hidden)
        for (int k = 0; k < n; k++) lab02_check_tests(k, o->np_given ? o->np : hidden, 1);
}

static const struct gr_lab lab02 = {
    .dir = "02-ddp",
    .title = "data parallelism",
    .plan = lab02_plan,
    .metric = "tokens_per_s_overlapped",
    .metric_title = "Lab 2: overlapped DDP tokens/s",
    .bench_args = "",
    .bench_np = "1 2 4",
    /* Communication through lib (its ledger is the traffic test's evidence), memory from
     * pl_mem_alloc (its ledger is the memory test's). */
    .forbidden_symbols = GR_SYMBOLS_BELOW_KIT GR_SYMBOLS_RAW_ALLOC "__real_* __wrap_*",
    .allowed_symbols = "MPI_Abort ompi_mpi_comm_world", /* stops the job; it moves no data */
    .runs_on = l2_runs_on,
    .runs_on_words = "1, 2, 3, 4, 6 or 12 ranks",
    .runs_on_why = "do not divide the global batch of 24 sequences into slices of whole "
                   "microbatches",
    .symbol_rule = "Lab 2 communicates through lib's calls only, by their own names (the "
                   "grader sees each all-reduce's range through them), and takes its memory "
                   "from pl_mem_alloc, whose ledger the memory tests read",
};
GR_REGISTER_LAB(lab02)
