/* plan.c: the descriptor and test plan of Lab 6 (pipeline parallelism), read by the grader.
 *
 * Per schedule on 2, 3 and 4 stages, one run each covering m = 1, 2, 3, 4, 6 and 8
 * microbatches (the interleaved schedule: those that are multiples of p) and, on 4 ranks, a
 * grid of two pipelines of 2 stages numbered in another order than the world, each on its
 * own data: the same training as one device, the order of F and B per stage from the trace,
 * the bubble with uniform stage times, the memory per stage from the ledger (activations in
 * flight, and every category together), one tagged message per microbatch per boundary --
 * AFAB 5, 2, 2, 1, 1 points, 1F1B 5, 2, 2, 3, 2, interleaved 1F1B (v = 3 chunks per rank on
 * 2 stages, 2 on 3 and 4: the lesser part) 1, 1, 1, 1, 1; and the partition's balance by
 * FLOPs (3, 3 and 4 points on 2, 3 and 4 stages): 100 points; the second part, ZB-H1 (zero
 * bubble), 2, 1, 1, 1, 1 on each of 2, 3 and 4 stages: 18 more. The hidden suite runs
 * every test on another model (7 blocks, width 40, 4 heads, 12 tokens) with the secret
 * seed: AFAB and 1F1B on 5 and 6 stages (6: a grid of two pipelines of 3), interleaved on 4
 * ranks (two pipelines of 2, 3 chunks each), ZB-H1 and the partition on 5 stages. */
#include <stdio.h>
#include <string.h>

#include "grade.h"
#include "rules/symbols.h"

static const struct {
    const char *op;   /* driver --op */
    const char *name; /* as test names show it */
    int max_np;       /* the most stages the schedule runs on with the lab's 6 blocks */
    double points[5]; /* of LAB06_PARTS, in order */
} LAB06_OPS[] = {
    {"afab", "AFAB (GPipe)", 8, {5, 2, 2, 1, 1}},
    {"1f1b", "1F1B", 8, {5, 2, 2, 3, 2}},
    /* "interleaved", not "interleaved 1F1B": TEST=1F1B picks the 1F1B tests alone */
    {"interleaved", "interleaved", 4, {1, 1, 1, 1, 1}},
    /* the second part: zero bubble (handout section 9) */
    {"zbh1", "ZB-H1", 8, {2, 1, 1, 1, 1}},
};

static const struct {
    const char *part, *tag, *what;
} LAB06_PARTS[] = {
    {"correct", "correctness", "same training as one device"},
    {"schedule", "correctness", "order of F and B per stage"},
    {"bubble", "performance", "bubble with uniform stage times"},
    {"memory", "memory", "activations in flight per stage"},
    {"traffic", "performance", "one tagged message per microbatch per boundary"},
};

#define LAB06_TIMEOUT 90

static int lab06_runs(int np)
{
    return np >= 1 && np <= 8; /* the lab's model has 6 blocks: at most L + 2 stages */
}

static void lab06_tests(int k, int np, int hidden)
{
    char name[200], op[64];
    if (np > LAB06_OPS[k].max_np) return;
    /* the hidden suite's runs are the driver's NAME-hidden: its other model */
    snprintf(op, sizeof op, "%s%s", LAB06_OPS[k].op, hidden ? "-hidden" : "");
    const char *pre = hidden ? "hidden: " : "";
    for (int i = 0; i < 5; i++) {
        if (!hidden && LAB06_OPS[k].points[i] <= 0) continue;
        snprintf(name, sizeof name, "%s%s: %s [np=%d]", pre, LAB06_OPS[k].name,
                 LAB06_PARTS[i].what, np);
        double points = hidden ? 1 : np == 1 ? 0 : LAB06_OPS[k].points[i];
        gr_add(&(struct gr_spec){name, op, "check", LAB06_PARTS[i].part, LAB06_PARTS[i].tag, np,
                                 points, LAB06_TIMEOUT, hidden, NULL});
    }
    if (k == 0 && (!hidden || np == 5)) {
        snprintf(name, sizeof name, "%spartition balanced by FLOPs, embedding and head counted "
                 "[np=%d]", pre, np);
        gr_add(&(struct gr_spec){name, op, "check", "balance", "performance", np,
                                 hidden ? 1 : np == 1 ? 0 : np == 4 ? 4 : 3, LAB06_TIMEOUT,
                                 hidden, NULL});
    }
}

static void lab06_plan(const struct gr_plan_opts *o)
{
    static const int visible[] = {2, 3, 4, 0}, hidden[] = {5, 6, 0}, hidden_il[] = {4, 0},
                     hidden_zb[] = {5, 0};
    const int *nps = o->np_given ? o->np : visible;
    for (int k = 0; k < 4; k++)
        for (int i = 0; nps[i]; i++) lab06_tests(k, nps[i], 0);
    if (o->hidden)
        for (int k = 0; k < 4; k++) {
            const int *h = o->np_given ? o->np : k == 2 ? hidden_il : k == 3 ? hidden_zb : hidden;
            for (int i = 0; h[i]; i++) lab06_tests(k, h[i], 1);
        }
}

static const struct gr_lab lab06 = {
    .dir = "06-pipeline",
    .title = "pipeline parallelism: AFAB and 1F1B, bubbles and memory measured",
    .plan = lab06_plan,
    .bench_args = "",
    .bench_np = "4",
    /* What its code may call (grader/rules/symbols.h): checked before anything runs. */
    .forbidden_symbols = GR_SYMBOLS_BELOW_KIT GR_SYMBOLS_RAW_ALLOC
        "pl_rank pl_size pl_comm_world pl_comm_set_p2p_like_nccl",
    .allowed_symbols = "MPI_Abort ompi_mpi_comm_world", /* stops the job; it moves no data */
    .runs_on = lab06_runs,
    .runs_on_words = "1 to 8 ranks",
    .runs_on_why = "are more stages than the lab's model has parts: a pipeline has at most "
                   "L + 2 = 8 stages, its 6 blocks, the embedding and the head",
    .symbol_rule = "Lab 6 moves activations and gradients between stages with lib's point-to-point "
                   "calls only (no MPI_* or nccl* below the ledger and the trace the schedule is "
                   "judged by) and takes its memory from pl_mem_alloc, whose ledger counts the "
                   "microbatches in flight; its stage and p are its rank in the communicator "
                   "pipe_new is given and that communicator's size (pl_comm_rank, pl_comm_size), "
                   "never the world's (pl_rank, pl_size, pl_comm_world): in Lab 8 a pipeline is "
                   "one group of a larger grid; and it leaves the rules of point-to-point to "
                   "the grader (pl_comm_set_p2p_like_nccl)",
    .deadlock_rule = "The training runs with NCCL's point-to-point rules, as on GPUs: nothing is "
                     "buffered (a send completes only when its receive runs), and a wait, or a "
                     "blocking send or receive, completes every send and receive posted before "
                     "it. So a stage must never wait while its neighbour waits for something "
                     "it has not yet posted: post each step's sends and receives together, "
                     "then wait for all of them (handout sections 3.2 and 8).",
};
GR_REGISTER_LAB(lab06)
