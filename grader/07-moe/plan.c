/* plan.c: the descriptor and test plan of Lab 7 (MoE expert parallelism), read by the grader.
 *
 * The router (capacity, top-k, gates, drops, aux loss) and the permutation on one rank,
 * exactly against lib/model.h's routing (5 points each: the router is specified in full by
 * the handout, and the kit's own is there to read, so it carries few points); per top-k (1 and 2): the same
 * training as the single-device MoE on the ranks' slices on 1, 2, 4 ranks (ep = all of them)
 * and 8 (EP groups of 4), over 4 and 8 experts and capacity factors 0.5, 1, 1.25 and none
 * (8 points each); the exact routing of every rank (tokens per expert, the dropped
 * choices) on 2, 4 and 8 ranks (2 each); the all-to-all calls and bytes from the ledger
 * against what the routing sends off-rank, and the gradient sums' bytes against section 7's,
 * on 2, 4 and 8 ranks (1.5 each); the EP groups inside a node of a 2-node cluster on 8
 * ranks (2.5); for top-2 on 2 and 4 ranks, the student's MoE calls of the first step traced
 * and replayed on dgx-h100, each rank's compute against what its experts' routed rows and
 * its router need (2 each). 104 points in all. The cases vary every contract parameter: the
 * EP degree (groups smaller than the world on 2, 4 and 8 ranks), the aux-loss coefficient,
 * the loss scale, the capacity factor (up to 1e10 and infinity), and a router pushed so that
 * some experts get no tokens; they run on a communicator split from the world in reverse
 * order, freed after moe_free. The hidden suite runs the training and count tests on 6 and
 * 8 ranks with the secret seed, other shapes (shorter sequences, 6 and 12 experts on 6
 * ranks) and the parameters paired differently (1 point each). */
#include <stdio.h>
#include <string.h>

#include "grade.h"
#include "rules/symbols.h"

#define LAB07_TIMEOUT 120

#ifndef GR_LAB_ORACLE
#error "GR_LAB_ORACLE: grader.mk defines it from grader/07-moe/lab.mk's GRADER_ORACLE_07-moe"
#endif

/* The rank counts Lab 7 runs on (the descriptor's runs_on): the visible model's on 1, 2, 4
 * and 8, and the hidden suite's other model on 6 as well. */
static int lab07_visible_runs(int np)
{
    return np == 1 || np == 2 || np == 4 || np == 8;
}

static int lab07_runs(int np)
{
    return lab07_visible_runs(np) || np == 6;
}

/* nps without the counts only the hidden model runs on, said once when --np named one. */
static void lab07_visible_nps(const int *nps, int *out)
{
    int k = 0;
    for (int i = 0; nps[i]; i++)
        if (lab07_visible_runs(nps[i])) out[k++] = nps[i];
        else printf("07-moe trains its visible model on 1, 2, 4 or 8 ranks; NP=%d is the "
                    "hidden suite's only\n", nps[i]);
    out[k] = 0;
}

static void lab07_train_tests(const char *op, const char *title, const int *nps, int hidden)
{
    static const double correct_points[] = {0, 8, 8, 0, 8, 0, 0, 0, 8};
    char name[200], hop[32];
    const char *pre = hidden ? "hidden: " : "";
    if (hidden) {
        /* the driver's hidden shapes and pairings */
        snprintf(hop, sizeof hop, "%s-hidden", op);
        op = hop;
    }
    for (int i = 0; nps[i]; i++) {
        int np = nps[i];
        snprintf(name, sizeof name, "%s%s: same training as the single-device MoE [np=%d]", pre,
                 title, np);
        gr_add(&(struct gr_spec){name, op, "check", "correct", "correctness", np,
                                 hidden ? 1 : correct_points[np], LAB07_TIMEOUT, hidden, NULL});
        if (np < 2) continue;
        snprintf(name, sizeof name, "%s%s: tokens per expert and dropped choices exact [np=%d]",
                 pre, title, np);
        gr_add(&(struct gr_spec){name, op, "check", "counts", "correctness", np, hidden ? 1 : 2,
                                 LAB07_TIMEOUT, hidden, NULL});
        if (hidden) continue;
        snprintf(name, sizeof name, "%s: all-to-all calls and bytes from the routing [np=%d]",
                 title, np);
        gr_add(&(struct gr_spec){name, op, "check", "traffic", "performance", np, 1.5,
                                 LAB07_TIMEOUT, 0, NULL});
        if (!strcmp(op, "top2") && (np == 2 || np == 4)) {
            snprintf(name, sizeof name, "%s: experts run only their rows, on the modelled "
                     "timeline [np=%d]", title, np);
            gr_add(&(struct gr_spec){name, op, "check", "time", "performance", np, 2,
                                     LAB07_TIMEOUT, 0, op});
        }
        if (np < 8) continue;
        snprintf(name, sizeof name, "%s: EP groups inside a node of 2 x %d [np=%d]", title,
                 np / 2, np);
        gr_add(&(struct gr_spec){name, op, "check", "placement", "placement", np, 2.5,
                                 LAB07_TIMEOUT, 0, NULL});
    }
}

static void lab07_plan(const struct gr_plan_opts *o)
{
    static const int visible[] = {1, 2, 4, 8, 0}, hidden[] = {6, 8, 0};
    int given[GR_MAX_NP];
    if (o->np_given) lab07_visible_nps(o->np, given);
    gr_add(&(struct gr_spec){"router: capacity, top-k, gates, drops and aux loss exact [np=1]",
                             "router", "check", "correct", "correctness", 1, 5, 60, 0, NULL});
    gr_add(&(struct gr_spec){"permutation: counting sort and its inverse exact [np=1]",
                             "permute", "check", "correct", "correctness", 1, 5, 60, 0, NULL});
    lab07_train_tests("top1", "top-1 expert parallel", o->np_given ? given : visible, 0);
    lab07_train_tests("top2", "top-2 expert parallel", o->np_given ? given : visible, 0);
    if (o->hidden) {
        lab07_train_tests("top1", "top-1 expert parallel", o->np_given ? o->np : hidden, 1);
        lab07_train_tests("top2", "top-2 expert parallel", o->np_given ? o->np : hidden, 1);
    }
}

static const struct gr_lab lab07 = {
    .dir = "07-moe",
    .title = "MoE expert parallelism",
    .plan = lab07_plan,
    .metric = NULL,
    .metric_title = NULL,
    /* the defaults, spelt out: bench.sh reads the descriptor's fields tab-separated, and
     * the shell's read folds an empty field away */
    .bench_args = "--experts 8 --top-k 2",
    .bench_np = "4",
    /* What its code may call (grader/rules/symbols.h): checked before anything runs. */
    .forbidden_symbols = GR_SYMBOLS_BELOW_KIT GR_SYMBOLS_RAW_ALLOC,
    .allowed_symbols = "MPI_Abort ompi_mpi_comm_world", /* stops the job; it moves no data */
    .runs_on = lab07_runs,
    .runs_on_words = "1, 2, 4, 6 or 8 ranks",
    .runs_on_why = "do not divide the global batch and the experts evenly",
    .symbol_rule = "Lab 7 dispatches and combines tokens with lib's pl_all_to_all and "
                   "pl_all_to_all_v only (MPI_Alltoallv or any other MPI_* or nccl* call is below "
                   "the ledger the all-to-all volume is judged by) and takes its memory from "
                   "pl_mem_alloc",
    .oracle_symbols = GR_LAB_ORACLE, /* lab.mk's GRADER_ORACLE_07-moe: the router */
    .oracle_sources = GR_LAB_ORACLE_SRC, /* its GRADER_ORACLE_SRC_: the router's source */
};
GR_REGISTER_LAB(lab07)
