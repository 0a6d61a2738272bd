/* plan.c: the descriptor and test plan of Lab 4 (tensor parallelism), read by the grader.
 *
 * On t = 1, 2 and 4 ranks (one TP group of the world; t = 1 is a sanity run worth no
 * points), against the single-device model with every shard compared to its block of the
 * full tensor: f and g exact (2 points each t), the column- and row-parallel linears (3),
 * the TP MLP and the TP attention (4 each), the whole block (8), the vocabulary-parallel
 * embedding and cross-entropy (4), K AdamW steps of the whole model, losses and weights
 * (6; each rank near 1/t of the single device's FLOPs, and sending at least g's forward
 * all-reduces). On 2 ranks and more the
 * communication of each from the traffic ledger (1, 1, 2, 2, 2, 1 points: the collectives
 * of each pass and their bytes, for the block 8bsh(t-1)/t x 4), for the loss no buffer the
 * size of the full logits (1), and for training the parameters, gradients and moments of a
 * shard with activations within the TP formula (1). On 8 ranks of a virtual 2 nodes x 4
 * cluster with tp = 4: the block correct under the default order (4), every TP byte on
 * intra-node links and each rank's group as the grid says, on a three-axis grid too (8), and
 * under order dp-tp the code still right and the placement violation reported with its
 * modelled cost (4). On 2 and 4 ranks the block's forward and backward replayed on
 * dgx-h100 at GPT-3 block scale, against compute/t plus its four ring all-reduces (3
 * each); on the perf ranks (4, or 2 on fewer than 4 cores) the block's wall-clock time
 * against the kit's single-device block on B/t sequences plus four all-reduces of the
 * activation, measured in the same run (4). 110 points in all. Every case runs on a
 * communicator split from the world and freed after it; from 4 ranks up the last case of each
 * op is on a TP x DP grid (groups smaller than the world, each DP replica with its own data);
 * gradients are handed over holding values (parameters' +=, dx's =); the loss sees ids at
 * every shard boundary and, in its last case, logits past exp's float range; the last shape
 * has B > 1 and T < seq_len (drawn from the seed); training's traffic is bounded on both
 * sides, its memory over every category, and its live memory must not grow step to step. The
 * hidden suite repeats the MLP, attention, block, loss and training on 2, 4 and 8 ranks (t =
 * 8: one head per rank; on 8 the TP x DP grid is 4 x 2 or 2 x 4) with the secret seed, which
 * draws its own shape, grid and order. */
#include <stdio.h>

#include "grade.h"
#include "rules/symbols.h"

#ifndef GR_LAB_ORACLE
#error "GR_LAB_ORACLE: grader.mk defines it from grader/04-tensor-parallel/lab.mk's GRADER_ORACLE_04-tensor-parallel"
#endif

static const struct {
    const char *title;
    const char *op;
    double correct, traffic, memory; /* points per rank count; memory 0: not judged */
} LAB04_OPS[] = {
    {"f and g conjugates", "conjugates", 2, 1, 0},
    {"column- and row-parallel linear", "linear", 3, 1, 0},
    {"TP MLP", "mlp", 4, 2, 0},
    {"TP attention (heads split)", "attention", 4, 2, 0},
    {"TP block", "block", 8, 2, 0},
    {"vocab-parallel embedding and cross-entropy", "vocab", 4, 1, 1},
    {"TP training, K AdamW steps", "train", 6, 0, 1},
};

#define LAB04_TIMEOUT 90

/* t must divide the graded model's 8 heads, d_ff 128 and vocabulary 256. */
static int lab04_runs(int np)
{
    return np == 1 || np == 2 || np == 4 || np == 8;
}

static void lab04_op_tests(int k, const int *nps, int hidden)
{
    char name[200];
    for (int i = 0; nps[i]; i++) {
        int np = nps[i];
        if (hidden && k < 2) continue;
        snprintf(name, sizeof name, "%s%s [np=%d]", hidden ? "hidden: " : "",
                 LAB04_OPS[k].title, np);
        gr_add(&(struct gr_spec){name, LAB04_OPS[k].op, "check", "correct", "correctness", np,
                                 np == 1 ? 0 : hidden ? 1 : LAB04_OPS[k].correct,
                                 LAB04_TIMEOUT, hidden, NULL});
        if (np >= 2 && !hidden && LAB04_OPS[k].traffic > 0) {
            snprintf(name, sizeof name, "%s traffic [np=%d]", LAB04_OPS[k].title, np);
            gr_add(&(struct gr_spec){name, LAB04_OPS[k].op, "check", "traffic", "performance",
                                     np, LAB04_OPS[k].traffic, LAB04_TIMEOUT, 0, NULL});
        }
        if (np >= 2 && !hidden && LAB04_OPS[k].memory > 0) {
            snprintf(name, sizeof name, "%s memory [np=%d]", LAB04_OPS[k].title, np);
            gr_add(&(struct gr_spec){name, LAB04_OPS[k].op, "check", "memory", "memory", np,
                                     LAB04_OPS[k].memory, LAB04_TIMEOUT, 0, NULL});
        }
    }
}

static void lab04_plan(const struct gr_plan_opts *o)
{
    static const int visible[] = {1, 2, 4, 0}, hidden[] = {2, 4, 8, 0};
    char name[200];
    int n = (int)(sizeof LAB04_OPS / sizeof LAB04_OPS[0]);
    for (int k = 0; k < n; k++) lab04_op_tests(k, o->np_given ? o->np : visible, 0);
    /* the block's modelled step against compute/t + its four all-reduces (section 8) */
    for (int i = 0; (o->np_given ? o->np : visible)[i]; i++) {
        int np = (o->np_given ? o->np : visible)[i];
        if (np < 2) continue;
        snprintf(name, sizeof name, "TP block on the modelled timeline [np=%d]", np);
        gr_add(&(struct gr_spec){name, "block", "check", "time", "performance", np, 3,
                                 LAB04_TIMEOUT, 0, "block"});
    }
    /* the block on the wall clock against the kit's block on B/t sequences + 4 all-reduces */
    if (lab04_runs(o->perf_np) && o->perf_np > 1) {
        snprintf(name, sizeof name, "TP block: time vs the kit's block and all-reduces alone "
                 "[np=%d]", o->perf_np);
        gr_add(&(struct gr_spec){name, "block", "perf", "perf", "performance", o->perf_np, 4,
                                 LAB04_TIMEOUT, 0, "block"});
    }
    int eight = !o->np_given;
    for (int i = 0; o->np_given && o->np[i]; i++) eight |= o->np[i] == 8;
    if (eight) {
        gr_add(&(struct gr_spec){"TP block on 2 nodes x 4 ranks, order tp-dp [np=8]",
                                 "placement", "check", "correct", "correctness", 8, 4,
                                 LAB04_TIMEOUT, 0, NULL});
        gr_add(&(struct gr_spec){"TP groups inside a node (placement) [np=8]", "placement",
                                 "check", "placement", "placement", 8, 8, LAB04_TIMEOUT, 0,
                                 "placement"});
        /* tagged performance: its verdict is the modelled cost, shown even when it passes */
        gr_add(&(struct gr_spec){"order dp-tp: TP across nodes reported and costed [np=8]",
                                 "placement", "check", "order", "performance", 8, 4,
                                 LAB04_TIMEOUT, 0, "placement"});
    }
    if (o->hidden)
        for (int k = 0; k < n; k++) lab04_op_tests(k, o->np_given ? o->np : hidden, 1);
}

static const struct gr_lab lab04 = {
    .dir = "04-tensor-parallel",
    .title = "tensor parallelism (Megatron-style)",
    .plan = lab04_plan,
    .metric = NULL,
    .metric_title = NULL,
    .bench_args = "--op placement",
    .bench_np = "8",
    /* What its code may call (grader/rules/symbols.h): checked before anything runs. */
    /* pl_grid_comm and pl_grid_group are the grid's own groups, which tp_group is judged
     * against: calling them would grade the kit against itself and leave section 2 with
     * no design in it. */
    .forbidden_symbols = GR_SYMBOLS_BELOW_KIT GR_SYMBOLS_RAW_ALLOC
                         "pl_send* pl_recv* pl_isend* pl_irecv* pl_sendrecv* "
                         "pl_grid_comm pl_grid_group ",
    .allowed_symbols = "MPI_Abort ompi_mpi_comm_world", /* stops the job; it moves no data */
    .oracle_symbols = GR_LAB_ORACLE, /* lab.mk's GRADER_ORACLE_04-tensor-parallel: the kit's SP block */
    .runs_on = lab04_runs,
    .runs_on_words = "1, 2, 4 or 8 ranks",
    .runs_on_why = "do not divide the graded model's 8 heads, d_ff of 128 and vocabulary of "
                   "256 into equal shards",
    .symbol_rule = "Lab 4 communicates only through lib's collectives on the TP group "
                   "(pl_all_reduce, pl_all_gather, ...; no MPI_* or nccl* below the ledger, no "
                   "point-to-point), takes its memory from pl_mem_alloc, and builds its TP group "
                   "itself with pl_comm_split: the kit's pl_grid_comm and pl_grid_group are the "
                   "grid's own groups, which tp_group is checked against",
};
GR_REGISTER_LAB(lab04)
