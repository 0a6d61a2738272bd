/* plan.c: the descriptor and test plan of Lab 5 (sequence parallelism on top of tensor
 * parallelism), read by the grader.
 *
 * On t = 1, 2 and 4 ranks (one TP group of the world; t = 1 is a sanity run worth no
 * points): the gather and scatter conjugates exact on integer data (6 points each t) and
 * their collectives from the traffic ledger (3); the SP block against the single-device
 * model with dropout off and on (10), the replicated gradients bitwise equal on every rank
 * after the synchronisation and equal to the single device's (8), its traffic per pass
 * from the ledger against Lab 4's TP volume (6), and the bytes it holds between forward
 * and backward against the kit's TP+SP activation formula (13); 3 AdamW steps of a 2-block
 * model with dropout on against pl_model_step, losses and every parameter, on 4 ranks also on
 * a tp=2 x dp=2 grid of strided TP groups numbered against the world's order, each replica
 * on its own sequences and its gradients checked after the synchronisation (4); the block's
 * forward and backward replayed on dgx-h100 at GPT-3 block scale against compute/t plus its
 * conjugates' all-gathers and reduce-scatters (3, grader/common/block_time.h); on the perf ranks
 * (4, or 2 on fewer than 4 cores) the block's wall-clock time against the kit's
 * single-device block on B/t sequences and the same collectives, measured in the same run
 * (4). The second part, causal ring attention with the world as the ring (cp = 1, 2, 4):
 * output and gradients against the single device's attention (6 each cp >= 2), the
 * point-to-point bytes of each pass from the traffic ledger (2), the memory held above the
 * arguments (2), each rank's attention FLOPs within 2% of the mean (3), the forward's K/V
 * exchange hidden behind its compute when replayed on dgx-h100 at 128K tokens (2). 140
 * points. The block's cases: dropout off; on, with the gradients handed over
 * holding other values and a second micro-batch; a shape drawn from the seed; evaluation
 * with dropout configured (B > 1, T < seq_len); a tp x dp grid whose replicas hold their own
 * data. The hidden suite repeats the block on 2, 4 and 8 ranks with the secret seed, strided
 * TP groups (and dp = 4 on 8 ranks), and the shapes drawn from the seed; and the training on
 * 4 and 8 ranks on another grid (consecutive groups on 4 ranks; on 8, dp = 2 or 4 and the
 * groups' shape drawn) with B drawn from the seed. */
#include <stdio.h>

#include "grade.h"
#include "rules/symbols.h"

#ifndef GR_LAB_ORACLE
#error "GR_LAB_ORACLE: grader.mk defines it from grader/05-sequence-parallel/lab.mk's GRADER_ORACLE_05-sequence-parallel"
#endif

#define LAB05_TIMEOUT 90

static int lab05_runs(int np)
{
    return np == 1 || np == 2 || np == 4 || np == 8;
}

static void lab05_tests(int np, int hidden)
{
    char name[200];
    const char *h = hidden ? "hidden: " : "";
    double zero = np == 1;
    if (!hidden) {
        snprintf(name, sizeof name, "gather and scatter conjugates [np=%d]", np);
        gr_add(&(struct gr_spec){name, "conjugates", "check", "correct", "correctness", np,
                                 zero ? 0 : 6, LAB05_TIMEOUT, 0, NULL});
        if (np >= 2) {
            snprintf(name, sizeof name, "gather and scatter conjugates traffic [np=%d]", np);
            gr_add(&(struct gr_spec){name, "conjugates", "check", "traffic", "performance", np,
                                     3, LAB05_TIMEOUT, 0, NULL});
        }
    }
    /* the hidden suite's block cases: other grids (strided TP groups, dp = 4 on 8 ranks) and
     * the shapes of the evaluation and grid cases drawn from the seed */
    const char *op = hidden ? "block-hidden" : "block";
    snprintf(name, sizeof name, "%sSP block, dropout off and on [np=%d]", h, np);
    gr_add(&(struct gr_spec){name, op, "check", "correct", "correctness", np,
                             zero ? 0 : hidden ? 2 : 10, LAB05_TIMEOUT, hidden, NULL});
    snprintf(name, sizeof name, "%sSP block replicated gradients equal on every rank [np=%d]",
             h, np);
    gr_add(&(struct gr_spec){name, op, "check", "replicas", "correctness", np,
                             zero ? 0 : hidden ? 1 : 8, LAB05_TIMEOUT, hidden, NULL});
    if (np >= 2 && !hidden) {
        snprintf(name, sizeof name, "SP block traffic [np=%d]", np);
        gr_add(&(struct gr_spec){name, "block", "check", "traffic", "performance", np, 6,
                                 LAB05_TIMEOUT, 0, NULL});
        snprintf(name, sizeof name, "SP block activation memory [np=%d]", np);
        gr_add(&(struct gr_spec){name, "block", "check", "memory", "memory", np, 13,
                                 LAB05_TIMEOUT, 0, NULL});
        snprintf(name, sizeof name, "SP block on the modelled timeline [np=%d]", np);
        gr_add(&(struct gr_spec){name, "block", "check", "time", "performance", np, 3,
                                 LAB05_TIMEOUT, 0, "block"});
    }
    /* the second part: causal ring attention with the ring the world, cp = np */
    if (!hidden) {
        snprintf(name, sizeof name, "ring attention vs one device [np=%d]", np);
        gr_add(&(struct gr_spec){name, "ring", "check", "correct", "correctness", np,
                                 zero ? 0 : 6, LAB05_TIMEOUT, 0, NULL});
        /* what the ring costs, judged once its results are right */
        static const struct {
            const char *what, *part, *tag;
            double points;
        } cost[] = {{"traffic", "traffic", "performance", 2},
                    {"memory", "memory", "memory", 2},
                    {"FLOPs balanced", "balance", "performance", 3},
                    {"exchange hidden on the modelled timeline", "overlap", "performance", 2}};
        for (size_t k = 0; np >= 2 && k < sizeof cost / sizeof cost[0]; k++) {
            snprintf(name, sizeof name, "ring attention %s [np=%d]", cost[k].what, np);
            gr_add(&(struct gr_spec){name, "ring", "check", cost[k].part, cost[k].tag, np,
                                     cost[k].points, LAB05_TIMEOUT, 0, NULL});
        }
    } else if (np >= 8) {
        snprintf(name, sizeof name, "hidden: ring attention vs one device [np=%d]", np);
        gr_add(&(struct gr_spec){name, "ring-hidden", "check", "correct", "correctness", np, 1,
                                 LAB05_TIMEOUT, hidden, NULL});
        /* the balance beyond the visible ring's 4 ranks: a chunk layout fitted to them (a
         * table up to 4, contiguous beyond) trains right here and is unbalanced */
        snprintf(name, sizeof name, "hidden: ring attention FLOPs balanced [np=%d]", np);
        gr_add(&(struct gr_spec){name, "ring-hidden", "check", "balance", "performance", np, 1,
                                 LAB05_TIMEOUT, hidden, NULL});
    }
    if (!hidden) {
        snprintf(name, sizeof name, "SP training, %s [np=%d]", "3 AdamW steps with dropout", np);
        gr_add(&(struct gr_spec){name, "train", "check", "correct", "correctness", np,
                                 zero ? 0 : 4, LAB05_TIMEOUT, 0, NULL});
    } else if (np >= 4) {
        /* another grid than the visible one: its groups' shape, dp and B from the seed */
        snprintf(name, sizeof name, "hidden: SP training on a tp x dp grid [np=%d]", np);
        gr_add(&(struct gr_spec){name, "train-hidden", "check", "correct", "correctness", np, 1,
                                 LAB05_TIMEOUT, hidden, NULL});
    }
}

static void lab05_plan(const struct gr_plan_opts *o)
{
    static const int visible[] = {1, 2, 4, 0}, hidden[] = {2, 4, 8, 0};
    const int *nps = o->np_given ? o->np : visible;
    for (int i = 0; nps[i]; i++) lab05_tests(nps[i], 0);
    /* the block on the wall clock against the kit's block on B/t sequences + its collectives */
    if (lab05_runs(o->perf_np) && o->perf_np > 1) {
        char name[200];
        snprintf(name, sizeof name, "SP block: time vs the kit's block and collectives alone "
                 "[np=%d]", o->perf_np);
        gr_add(&(struct gr_spec){name, "block", "perf", "perf", "performance", o->perf_np, 4,
                                 LAB05_TIMEOUT, 0, "block"});
    }
    if (o->hidden)
        for (int i = 0; (o->np_given ? o->np : hidden)[i]; i++)
            lab05_tests((o->np_given ? o->np : hidden)[i], 1);
}

static const struct gr_lab lab05 = {
    .dir = "05-sequence-parallel",
    .title = "sequence parallelism on top of tensor parallelism",
    .plan = lab05_plan,
    .metric = NULL,
    .metric_title = NULL,
    .bench_args = "",
    .bench_np = "4",
    /* What its code may call (grader/rules/symbols.h): checked before anything runs. */
    .forbidden_symbols = GR_SYMBOLS_BELOW_KIT GR_SYMBOLS_RAW_ALLOC
                         "pl_send* pl_recv* pl_isend* pl_irecv* pl_sendrecv* "
                         "__real_* __wrap_* ",
    .allowed_symbols = "MPI_Abort ompi_mpi_comm_world", /* stops the job; it moves no data */
    .oracle_symbols = GR_LAB_ORACLE, /* lab.mk's GRADER_ORACLE_05-sequence-parallel: the kit's SP block */
    .runs_on = lab05_runs,
    .runs_on_words = "1, 2, 4 or 8 ranks",
    .runs_on_why = "do not divide the graded model's 8 heads, d_ff of 128 and vocabulary of "
                   "256, and the 16 tokens of a sequence, into equal shards",
    .symbol_rule = "Lab 5 communicates only through lib's collectives on the TP group "
                   "(pl_all_gather, pl_reduce_scatter, ...) and its second part through the "
                   "kit's ring step (pl_ring_shift_start, _wait; no MPI_* or nccl* below the "
                   "ledger, no other point-to-point), calls the kit by its own names (the grader sees the core's "
                   "buffers through them) and takes its memory from pl_mem_alloc, whose ledger "
                   "the activation memory test reads",
};
GR_REGISTER_LAB(lab05)
