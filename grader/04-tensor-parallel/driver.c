/* driver.c: the trusted test driver of Lab 4 (tensor parallelism), on the lab harness
 * (grader/common/harness.h). It builds the single-device oracle from the library (lib/model.h,
 * lib/ops.h) on randomised full tensors, gives each rank the row or column block of them
 * that its shard holds (lib/tp_shard.h), runs the student's TP functions (tp.h) and compares
 * outputs, input gradients and each shard's gradient with the matching block of the full
 * gradient. The all-reduces of each pass come from the traffic ledger, placement from its
 * link classes on a virtual 2 nodes x 4 ranks cluster, and time from the student's own
 * trace replayed on a cluster profile. Each rank records its verdict of every part while a
 * case runs; judge() gathers them to rank 0. This file plugs the ops (lab04.h) into the
 * harness.
 *
 *   driver --op conjugates|linear|mlp|attention|block --mode check [--parts correct,traffic]
 *          [--seed S]                                       t = the world size
 *   driver --op block --mode check --parts time             the block on the modelled timeline
 *   driver --op block --mode perf                           wall clock against the kit's parts
 *   driver --op placement --mode check [--parts correct,placement,order] [--seed S]
 *                                                           8 ranks: 2 nodes x 4, tp = 4
 *   driver --mode bench [--plots-dir DIR]                   8 ranks: the modelled cost of
 *                                                           TP inside and across nodes */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "lab04.h"
#include "parts.h"
#include "todo.h"

uint64_t base_seed = 1;

struct pl_model_config graded_config(void)
{
    struct pl_model_config c = pl_model_config_default();
    c.vocab = 256;
    c.d_model = 64;
    c.n_layers = 1;
    c.n_heads = 8;
    c.d_ff = 128;
    c.seq_len = 16;
    c.dropout = 0.0f;
    c.n_experts = 0;
    c.seed = base_seed;
    return c;
}

const struct lab04_case CASES[NCASES] = {{2, 16}, {1, 7}};

const char *const PART_NAMES[NPARTS] = {"correct", "traffic",  "memory",
                                        "placement", "order", "time"};

/* ---- the lab's part of the harness ---- */

enum kind { K_CONJ, K_LINEAR, K_MLP, K_ATTN, K_BLOCK, K_VOCAB, K_TRAIN, K_PLACE };

static const char *KIND_OPS[] = {"conjugates", "linear", "mlp",   "attention",
                                 "block",      "vocab",  "train", "placement"};
static const char *KIND_SUBJECTS[] = {"f and g",          "the parallel linears",
                                      "the TP MLP",       "the TP attention",
                                      "the TP block",     "the vocabulary-parallel loss",
                                      "TP training",      "the TP block"};

static enum kind the_kind;

/* The placement op and the bench run on a virtual 2 nodes x 4 ranks cluster. */
static void before_init(const char *op, const char *mode, int *nodes, int *per_node)
{
    if ((op && !strcmp(op, "placement")) || !strcmp(mode, "bench")) {
        *nodes = PLACE_NODES;
        *per_node = PLACE_PER_NODE;
    }
}

static struct pl_flag lab_flags[] = {
    {"--plots-dir", PL_FLAG_STR, &lab04_plots_dir, "DIR",
     "bench: also draw the handout's figures (f and g, your block's modelled timeline inside "
     "and across nodes) as SVGs in DIR (default none)", 0},
};

static void *setup(const struct gr_args *a)
{
    base_seed = a->seed;
    time_want(!strcmp(a->mode, "check") && strstr(a->parts, "time") != NULL);
    for (int k = 0; k <= K_PLACE; k++)
        if (!strcmp(a->op, KIND_OPS[k])) the_kind = (enum kind)k;
    struct pl_model_config c = graded_config();
    char err[256];
    if (the_kind == K_PLACE) {
        const struct pl_topo *topo = pl_topo();
        if (topo->nodes != PLACE_NODES || topo->per_node != PLACE_PER_NODE)
            pl_usage_error_all("--op placement runs on a virtual %d nodes x %d ranks (launch %d "
                               "ranks)", PLACE_NODES, PLACE_PER_NODE, PLACE_NODES * PLACE_PER_NODE);
    } else if (pl_tp_degree_error(&c, pl_size(), err, sizeof err)) {
        pl_usage_error_all("%d ranks form one TP group here: %s", pl_size(), err);
    } else if (pl_size() > pl_topo()->per_node) {
        pl_usage_error_all("%d ranks form one TP group here, larger than a node's %d ranks: "
                           "its all-reduces, four per block, would cross the network (section "
                           "8). Run tp <= %d per node, or on one node", pl_size(),
                           pl_topo()->per_node, pl_topo()->per_node);
    }
    return NULL;
}

static const char *subject(void *st)
{
    return KIND_SUBJECTS[the_kind];
}

static int count_cases(void *st)
{
    return the_kind == K_CONJ || the_kind == K_TRAIN ? 1 : the_kind == K_PLACE ? 2 : NCASES;
}

static void describe(void *st, int i, char *buf, size_t len)
{
    if (the_kind == K_CONJ) snprintf(buf, len, "f and g on 1000 floats, t=%d", pl_size());
    else if (the_kind == K_TRAIN)
        snprintf(buf, len, "%d AdamW steps of a %d-block GPT on %d sequences, t=%d",
                 TRAIN_STEPS, TRAIN_LAYERS, TRAIN_B, pl_size());
    else if (the_kind == K_PLACE)
        snprintf(buf, len, "TP block, tp=%d on %d nodes x %d ranks, order %s", PLACE_TP,
                 PLACE_NODES, PLACE_PER_NODE, i == 0 ? "tp-dp" : "dp-tp");
    else
        snprintf(buf, len, "%s, B=%d T=%d, t=%d", KIND_SUBJECTS[the_kind], CASES[i].B,
                 CASES[i].T, pl_size());
}

/* The world as one TP group, through the student's tp_group; NULL when it is a stub. */
static struct pl_comm *world_tp_group(void)
{
    struct pl_grid grid;
    char deg[32];
    snprintf(deg, sizeof deg, "tp=%d", pl_size());
    pl_grid_init_or_die(&grid, "tp", deg, pl_size());
    struct pl_comm *tp = tp_group(&grid, pl_comm_world());
    if (!tp && !pl_todo_what()) gr_fail("tp_group returned no communicator (section 2)");
    return tp;
}

/* perf mode: the block on the world as one TP group (perf.c). */
static struct pl_comm *perf_tp;

static int probe(void *st)
{
    if (the_kind != K_BLOCK)
        pl_usage_error_all("--mode perf: Lab 4 times --op block only");
    perf_tp = world_tp_group();
    if (!perf_tp) {
        if (!pl_todo_what()) gr_say("perf", "tp_group returned no communicator (section 2)");
        return 0;
    }
    return lab04_probe(perf_tp);
}

static double perf(void *st)
{
    double f = lab04_perf();
    pl_comm_free(perf_tp);
    perf_tp = NULL;
    return f;
}

static void run(void *st, int i)
{
    gr_parts_reset(PART_NAMES, NPARTS);
    if (the_kind == K_PLACE) {
        run_placement(i);
        return;
    }
    struct pl_comm *tp = world_tp_group();
    if (!tp) return;
    if (the_kind == K_CONJ) run_conjugates(tp);
    else if (the_kind == K_LINEAR) run_linear(tp, i);
    else if (the_kind == K_VOCAB) run_vocab(tp, i);
    else if (the_kind == K_TRAIN) run_train(tp);
    else run_sub(tp, (enum sub)(the_kind - K_MLP), i);
    pl_comm_free(tp);
}

static int judge(void *st, int i, const char *part)
{
    for (int p = 0; p < NPARTS; p++)
        if (!strcmp(part, PART_NAMES[p]))
            return gr_parts_gather((enum part)p, i == count_cases(st) - 1);
    pl_usage_error_all(
        "--parts %s: Lab 4 judges correct, traffic, memory, placement, order and time", part);
}

const struct gr_driver gr_lab_driver = {
    .flags = lab_flags,
    .nflags = (int)(sizeof lab_flags / sizeof lab_flags[0]),
    .setup = setup,
    .subject = subject,
    .correct_first = "must match the single device first",
    .ncases = count_cases,
    .describe = describe,
    .run = run,
    .judge = judge,
    .probe = probe,
    .perf = perf,
    .bench = lab04_bench,
    .before_init = before_init,
};
