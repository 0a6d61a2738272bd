/* plan.c: the descriptor and test plan of Lab 9, the capstone (data x tensor with sequence x
 * pipeline parallelism), read by the grader.
 *
 * One run on 8 ranks (a virtual cluster of 2 nodes of 4) covers the grids (dp, tp, pp) =
 * (2,2,2), (1,2,4), (2,4,1), (4,1,2), laid out by "tp-pp-dp", each K = 2 steps with a clip
 * that binds: the same training as one device (40), the global norm and the clipped
 * gradient (20), the grid's groups (10), the traffic by link class and the pipeline's bytes
 * (5), each pipeline's order of work replayed with uniform stage times against 1F1B's bubble
 * and each stage's DP sum started before any collective over its pipeline (5), each
 * stage of two blocks or more starting its DP sum in buckets inside its cool-down (5), (2,2,2)
 * again with selective and full recomputation: the same training bit for bit
 * and the activations saved (5), the grids with dp > 1 again with ZeRO-1 across the DP group:
 * the same training, each rank's moments of its shares alone, the gradients summed and the
 * parameters gathered once a step (10), the grids with t > 1: the last stage's head
 * vocabulary-parallel, a t-th of its work and logits per TP rank, the cross-entropy combined
 * from per-token statistics on tp_comm, rep's head equal on every TP rank, and the loss with
 * logits in the hundreds (10), every run's memory (params, grads, optim and activations at
 * their peaks) within 10% of the kit's planner's figure for its configuration (10), each
 * grid's step replayed at a real model's scale within 10% of the planner's step time (10);
 * and in a run of its own, (2,2,2) on a device that Lab 8's rule leaves too small without
 * full recomputation (capped.c): the steps finish under the cap, every allocation
 * counted, with one device's results (5);
 * one run on 6 ranks (3 nodes of 2), (1,2,3) with stages of 1,
 * 1 and 2 blocks and (3,2,1) with a vocabulary that leaves runs dp = 3 does not divide: the
 * training (10) and the clipping (10), and (3,2,1) with ZeRO-1: its shares' bounds where dp
 * does not divide a run, and the head's decay flags in each share (5). 160 points. The hidden
 * suite: (1,4,2), (2,1,4), (8,1,1) on 8 ranks with the secret seed, training and clipping,
 * 1 point each. */
#include <stdio.h>
#include <string.h>

#include "grade.h"
#include "rules/symbols.h"

#define LAB09_TIMEOUT 240

static int lab09_runs(int np)
{
    return np == 6 || np == 8;
}

/* The hidden suite: (1,4,2), (2,1,4), (8,1,1) on 8 ranks with the secret seed, the training
 * and the clipping, 1 point each. */
static void lab09_hidden(int np)
{
    char name[200];
    snprintf(name, sizeof name, "hidden: 4D: same training as one device, grids (1,4,2), "
             "(2,1,4), (8,1,1) [np=%d]", np);
    gr_add(&(struct gr_spec){name, "train-hidden", "check", "correct", "correctness", np, 1,
                             LAB09_TIMEOUT, 1, NULL});
    snprintf(name, sizeof name, "hidden: 4D: global-norm clipping, every parameter once "
             "[np=%d]", np);
    gr_add(&(struct gr_spec){name, "train-hidden", "check", "clip", "correctness", np, 1,
                             LAB09_TIMEOUT, 1, NULL});
}

static void lab09_plan(const struct gr_plan_opts *o)
{
    static const int visible[] = {8, 6, 0};
    const int *nps = o->np_given ? o->np : visible;
    for (int i = 0; nps[i]; i++) {
        int np = nps[i], eight = np == 8;
        const char *grids = eight ? "(2,2,2), (1,2,4), (2,4,1), (4,1,2)"
                                  : "(1,2,3), uneven stages, and (3,2,1)";
        char name[200];
        snprintf(name, sizeof name, "4D: same training as one device, grids %s [np=%d]", grids,
                 np);
        gr_add(&(struct gr_spec){name, "train", "check", "correct", "correctness", np,
                                 eight ? 40 : 10, LAB09_TIMEOUT, 0, NULL});
        snprintf(name, sizeof name, "4D: global-norm clipping, every parameter once [np=%d]", np);
        gr_add(&(struct gr_spec){name, "train", "check", "clip", "correctness", np,
                                 eight ? 20 : 10, LAB09_TIMEOUT, 0, NULL});
        if (!eight) {
            snprintf(name, sizeof name, "4D: ZeRO-1 across the DP group, grid (3,2,1): runs "
                     "dp does not divide, shares' bounds and decay flags [np=%d]", np);
            gr_add(&(struct gr_spec){name, "train", "check", "zero", "memory", np, 5,
                                     LAB09_TIMEOUT, 0, NULL});
            continue;
        }
        snprintf(name, sizeof name, "4D: TP, PP and DP groups of every order of the axes [np=%d]", np);
        gr_add(&(struct gr_spec){name, "train", "check", "grid", "placement", np, 10,
                                 LAB09_TIMEOUT, 0, NULL});
        snprintf(name, sizeof name, "4D: SP conjugates inside a node, pipeline and DP bytes [np=%d]", np);
        gr_add(&(struct gr_spec){name, "train", "check", "traffic", "performance", np, 5,
                                 LAB09_TIMEOUT, 0, NULL});
        snprintf(name, sizeof name, "4D: 1F1B bubble and each stage's DP sum, from your "
                 "order of work [np=%d]", np);
        gr_add(&(struct gr_spec){name, "train", "check", "bubble", "performance", np, 5,
                                 LAB09_TIMEOUT, 0, NULL});
        snprintf(name, sizeof name, "4D: each stage's DP sum in buckets inside its "
                 "cool-down [np=%d]", np);
        gr_add(&(struct gr_spec){name, "train", "check", "overlap", "performance", np, 5,
                                 LAB09_TIMEOUT, 0, NULL});
        snprintf(name, sizeof name, "4D: recomputation, same training, activations saved; "
                 "nothing left after fourd_model_free [np=%d]", np);
        gr_add(&(struct gr_spec){name, "train", "check", "recompute", "memory", np, 5,
                                 LAB09_TIMEOUT, 0, NULL});
        snprintf(name, sizeof name, "4D: ZeRO-1 across the DP group, grids (2,2,2), (2,4,1), "
                 "(4,1,2): same training, moments of the shares, one sum and one gather "
                 "[np=%d]", np);
        gr_add(&(struct gr_spec){name, "train", "check", "zero", "memory", np, 10,
                                 LAB09_TIMEOUT, 0, NULL});
        snprintf(name, sizeof name, "4D: vocabulary-parallel loss on the last stage: a "
                 "t-th of the head's work and logits, per-token statistics on tp_comm [np=%d]",
                 np);
        gr_add(&(struct gr_spec){name, "train", "check", "vocab", "performance", np, 10,
                                 LAB09_TIMEOUT, 0, NULL});
        snprintf(name, sizeof name, "4D: memory held to the plan: every run's state and "
                 "activations within 10%% of Lab 8's planner [np=%d]", np);
        gr_add(&(struct gr_spec){name, "train", "check", "plan", "memory", np, 10,
                                 LAB09_TIMEOUT, 0, NULL});
        snprintf(name, sizeof name, "4D: step time held to the plan: each grid's step "
                 "replayed at scale within 10%% of Lab 8's planner [np=%d]", np);
        gr_add(&(struct gr_spec){name, "train", "check", "time", "performance", np, 10,
                                 LAB09_TIMEOUT, 0, NULL});
        snprintf(name, sizeof name, "4D: under a device cap that only full recomputation "
                 "meets, grid (2,2,2) trains as one device [np=%d]", np);
        gr_add(&(struct gr_spec){name, "capped", "check", "cap", "memory", np, 5,
                                 LAB09_TIMEOUT, 0, "train"});
    }
    int eight = !o->np_given;
    for (int i = 0; o->np_given && o->np[i]; i++) eight |= o->np[i] == 8;
    if (o->hidden && eight) lab09_hidden(8);
}

static const struct gr_lab lab09 = {
    .dir = "09-4d",
    .title = "the capstone: data x tensor (with sequence) x pipeline parallelism",
    .plan = lab09_plan,
    .bench_args = "",
    .bench_np = "8",
    /* What its code may call (grader/rules/symbols.h): checked before anything runs. */
    .forbidden_symbols = GR_SYMBOLS_BELOW_KIT GR_SYMBOLS_RAW_ALLOC
        "pl_rank pl_size pl_comm_set_p2p_like_nccl",
    .allowed_symbols = "MPI_Abort ompi_mpi_comm_world", /* stops the job; it moves no data */
    .runs_on = lab09_runs,
    .runs_on_words = "6 or 8 ranks",
    .runs_on_why = "are not the lab's grids: (2,2,2), (1,2,4), (2,4,1), (4,1,2) on 8 and "
                   "(1,2,3) and (3,2,1) on 6",
    .symbol_rule = "Lab 9 communicates only through lib's collectives and point-to-point calls "
                   "on the grid's communicators (no MPI_* or nccl* below the ledger its traffic "
                   "is judged by), takes its memory from pl_mem_alloc, and finds its place in "
                   "the grid from the world communicator it is given (not pl_rank or pl_size)",
};
GR_REGISTER_LAB(lab09)
