/* plan.c: the descriptor and test plan of Lab 8 (placement), read by the grader.
 *
 * Every test runs on one rank: the lab is arithmetic on a model and a cluster. The student's
 * memory and step-time estimates against the kit's planner (lib/plan.h) on a table of 17
 * configurations (one with m < p, ZeRO-0 across nodes, 4-GPU nodes, a rank order other than
 * the default) and three more drawn by the seed (25 and 20 points); the student's search
 * on ten visible cases (7B on 8 GPUs, 70B on 64, a MoE on 32, and with a 1M-token batch
 * 175B on 512 and 8B on 1024; then the cases where a rule binds: 7B with 64K-token
 * sequences on 8, where context parallelism is needed, a MoE with a 1M-token batch on 512,
 * where an ep group across nodes and too few microbatches would be fastest, DeepSeek-V3
 * with a 1M-token batch on 1024, where the bubble's bound binds; 7B with 2K-token sequences
 * on 128, where 4 sequences per microbatch win, and a MoE with a 1M-token batch on 32
 * GPUs in nodes of 4, where ep = 8 crosses the network), and six cases drawn by the seed
 * from the whole space of bench --sweep: every placement rule obeyed (20), and the chosen
 * configuration within 3% of the step time of the kit's exhaustive best (20); the student's step time on published frontier runs within 5 points
 * of their published MFU (5); the answers to the handout's three numeric questions (10);
 * memory per GPU of three configurations with the switches of section 3.3 (fp32,
 * no_dropout, vocab_whole), against the kit's planner (5). 105 points in all. The hidden suite: three more search cases drawn by the seed, two from
 * a table of other presets, clusters (4-GPU nodes among them) and node counts and one from
 * the whole space of bench --sweep (5 + 5), and a published run the handout does not name
 * (5). The free-text answers (Q1's why, the data-parallel modelling choice) are
 * labs/08-placement/questions.txt, collected by grader/08-placement/questions.c. */
#include <stdio.h>

#include "grade.h"
#include "rules/symbols.h"

#define LAB08_TIMEOUT 120

#ifndef GR_LAB_ORACLE
#error "GR_LAB_ORACLE: grader.mk defines it from grader/08-placement/lab.mk's GRADER_ORACLE_08-placement"
#endif

static int lab08_runs(int np)
{
    return np == 1;
}

static void lab08_plan(const struct gr_plan_opts *o)
{
    static const struct gr_spec visible[] = {
        {"memory per GPU vs the kit's model [18 configurations, 3 drawn by the seed]", "memory",
         "check", "correct", "memory", 1, 25, LAB08_TIMEOUT, 0, NULL},
        {"step time vs the kit's model [18 configurations, 3 drawn by the seed]", "time",
         "check", "correct", "performance", 1, 20, LAB08_TIMEOUT, 0, NULL},
        {"search obeys the placement rules [7B on 8, at 64K and at 2K on 128, 70B on 64, MoE on "
         "32, on 32 in 4-GPU nodes and on 512, 175B on 512, 8B on 1024, DeepSeek-V3 on 1024 "
         "GPUs, 6 seeded cases]", "search", "check", "correct", "placement", 1, 20, LAB08_TIMEOUT, 0, NULL},
        {"search within 3% of the exhaustive best [7B on 8, at 64K and at 2K on 128, 70B on 64, "
         "MoE on 32, on 32 in 4-GPU nodes and on 512, 175B on 512, 8B on 1024, DeepSeek-V3 on "
         "1024 GPUs, 6 seeded cases]", "search", "check", "quality", "placement", 1, 20, LAB08_TIMEOUT, 0, NULL},
        {"published runs within 5 points of their MFU [Llama 3 405B on 8K and 16K H100]",
         "sanity", "check", "correct", "performance", 1, 5, LAB08_TIMEOUT, 0, NULL},
        {"answers to the handout's questions [3 questions]", "questions", "check", "correct",
         "placement", 1, 10, LAB08_TIMEOUT, 0, NULL},
        {"memory per GPU with the configuration's switches fp32, no_dropout, vocab_whole [3 "
         "configurations]", "switches", "check", "correct", "memory", 1, 5, LAB08_TIMEOUT, 0,
         NULL},
    };
    static const struct gr_spec hidden[] = {
        {"hidden: search obeys the placement rules [3 seeded cases]", "search_hidden", "check",
         "correct", "placement", 1, 5, LAB08_TIMEOUT, 1, NULL},
        {"hidden: search within 3% of the exhaustive best [3 seeded cases]", "search_hidden",
         "check", "quality", "placement", 1, 5, LAB08_TIMEOUT, 1, NULL},
        {"hidden: a published run within 5 points of its MFU", "sanity_hidden", "check",
         "correct", "performance", 1, 5, LAB08_TIMEOUT, 1, NULL},
    };
    for (size_t i = 0; i < sizeof visible / sizeof visible[0]; i++) gr_add(&visible[i]);
    if (o->hidden)
        for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++) gr_add(&hidden[i]);
}

/* make bench LAB=08: the student's search time beside the kit's (driver.c's bench). */
static const struct gr_lab lab08 = {
    .dir = "08-placement",
    .title = "placement",
    .plan = lab08_plan,
    .metric = NULL,
    .metric_title = NULL,
    .bench_args = "--seed 1", /* not empty: the bench script splits the fields on tabs */
    .bench_np = "1",
    /* What its code may call (grader/rules/symbols.h): checked before anything runs. */
    .forbidden_symbols = GR_SYMBOLS_BELOW_KIT,
    .allowed_symbols = "MPI_Abort ompi_mpi_comm_world", /* stops the job; it moves no data */
    .runs_on = lab08_runs,
    .runs_on_words = "1 rank",
    .runs_on_why = "are more than Lab 8 uses: its work is arithmetic",
    .symbol_rule = "Lab 8 plans from the kit's model and cluster arithmetic (lib/plan.h, "
                   "lib/rules.h); it runs nothing on other ranks, so it calls no MPI_* or nccl*",
    .oracle_symbols = GR_LAB_ORACLE, /* lab.mk's GRADER_ORACLE_08-placement: the planner */
    .oracle_sources = GR_LAB_ORACLE_SRC, /* its GRADER_ORACLE_SRC_: the planner's source */
};
GR_REGISTER_LAB(lab08)
