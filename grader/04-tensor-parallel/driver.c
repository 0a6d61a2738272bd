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

uint64_t grading_seed = 1, base_seed = 1;

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

const struct lab04_case CASES[2] = {{2, 16}, {1, 7}};

/* The third shape: B in 2..4 and T in 3..seq_len-1 from the grading seed, so that positions
 * counted from seq_len rather than T, or a batch of one sequence assumed, show. */
struct lab04_case case_shape(int i)
{
    if (i < 2) return CASES[i];
    uint64_t u = pl_rng_u64(grading_seed, pl_rng_stream("lab04.shape"), 0);
    struct lab04_case c = {2 + (int)(u % 3), 3 + (int)((u >> 8) % 12)};
    return c;
}

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

/* The grid of a case: t ranks per TP group, dp groups, and the axes' order. */
struct case_grid {
    int t, dp;
    const char *order;
};

/* The world as one TP group, except for the TP x DP case (from 4 ranks up: the last case of
 * each op, the second of f and g and of training): dp = 2 groups of t = np/2, or on 8 ranks
 * t = 2 x dp = 4 for some seeds, in an order drawn from the grading seed ("tp-dp" puts a
 * group on consecutive ranks, "dp-tp" strides it). Each DP replica draws its own data. */
static struct case_grid case_grid(int i)
{
    int np = pl_size(), last = the_kind == K_CONJ || the_kind == K_TRAIN ? 1 : NCASES - 1;
    struct case_grid g = {np, 1, "tp-dp"};
    if (i == last && np >= 4) {
        uint64_t u = pl_rng_u64(grading_seed, pl_rng_stream("lab04.grid"), 0);
        g.t = np >= 8 && (u & 1) ? 2 : np / 2;
        g.dp = np / g.t;
        g.order = (u >> 1) & 1 ? "dp-tp" : "tp-dp";
    }
    return g;
}

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
    grading_seed = base_seed = a->seed;
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
    if (the_kind == K_CONJ || the_kind == K_TRAIN) return pl_size() >= 4 ? 2 : 1;
    return the_kind == K_PLACE ? 2 : NCASES;
}

/* ", t=2 x dp=2 (order dp-tp), each DP replica its own data", or ", t=4". */
static void describe_grid(int i, char *buf, size_t len)
{
    struct case_grid g = case_grid(i);
    if (g.dp > 1)
        snprintf(buf, len, ", t=%d x dp=%d (order %s), each DP replica its own data", g.t, g.dp,
                 g.order);
    else
        snprintf(buf, len, ", t=%d", g.t);
}

static void describe(void *st, int i, char *buf, size_t len)
{
    char grid[96];
    describe_grid(i, grid, sizeof grid);
    if (the_kind == K_CONJ) snprintf(buf, len, "f and g on 1000 floats%s", grid);
    else if (the_kind == K_TRAIN)
        snprintf(buf, len, "%d AdamW steps of a %d-block GPT on %d sequences%s", TRAIN_STEPS,
                 TRAIN_LAYERS, TRAIN_B, grid);
    else if (the_kind == K_PLACE)
        snprintf(buf, len, "TP block, tp=%d on %d nodes x %d ranks, order %s", PLACE_TP,
                 PLACE_NODES, PLACE_PER_NODE, i == 0 ? "tp-dp" : "dp-tp");
    else
        snprintf(buf, len, "%s, B=%d T=%d%s%s", KIND_SUBJECTS[the_kind], case_shape(i).B,
                 case_shape(i).T, grid,
                 the_kind == K_VOCAB && i == NCASES - 1 ? ", logits past exp's float range" : "");
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

/* The student's TP group on the case's grid over `world`, checked against the grid's own
 * (size and members); NULL when it is a stub or wrong. dp gets this rank's DP coordinate. */
static struct pl_comm *case_tp_group(const struct case_grid *cg, struct pl_comm *world,
                                     int *dp)
{
    struct pl_grid grid;
    char deg[32], desc[64];
    snprintf(deg, sizeof deg, "tp=%d,dp=%d", cg->t, cg->dp);
    pl_grid_init_or_die(&grid, cg->order, deg, pl_comm_size(world));
    pl_grid_describe(&grid, desc, sizeof desc);
    *dp = pl_grid_coord(&grid, pl_comm_rank(world), pl_grid_axis(&grid, "dp"));
    struct pl_comm *tp = tp_group(&grid, world);
    if (!tp) {
        if (!pl_todo_what()) gr_fail("tp_group returned no communicator (section 2)");
        return NULL;
    }
    int want[64], n = pl_grid_group(&grid, pl_comm_rank(world), pl_grid_axis(&grid, "tp"), want);
    int same = pl_comm_size(tp) == n;
    for (int m = 0; same && m < n; m++)
        same = pl_comm_world_rank(tp, m) == pl_comm_world_rank(world, want[m]);
    if (!same) {
        gr_fail("on grid %s tp_group gave rank %d a group of %d ranks that is not its TP group "
                "of %d (the ranks that share its coordinate on every axis but tp, ordered by "
                "the tp coordinate: pl_grid_comm on the tp axis, section 2)", desc, pl_rank(),
                pl_comm_size(tp), n);
        pl_comm_free(tp);
        return NULL;
    }
    return tp;
}

/* Each case runs on a communicator split from the world and freed after the lab's work (a
 * free refuses operations still in flight), its TP groups built from it. */
static void run(void *st, int i)
{
    gr_parts_reset(PART_NAMES, NPARTS);
    if (the_kind == K_PLACE) {
        run_placement(i);
        return;
    }
    struct case_grid cg = case_grid(i);
    struct pl_comm *world = pl_comm_split(pl_comm_world(), 0, pl_rank(), "lab04");
    int dp = 0;
    struct pl_comm *tp = case_tp_group(&cg, world, &dp);
    if (tp) {
        /* every DP replica its own inputs: a sum or a slice over the world shows */
        base_seed = cg.dp > 1 ? pl_mix64(grading_seed + 0x9e3779b97f4a7c15ull * (uint64_t)(dp + 1))
                              : grading_seed;
        if (the_kind == K_CONJ) run_conjugates(tp);
        else if (the_kind == K_LINEAR) run_linear(tp, i);
        else if (the_kind == K_VOCAB) run_vocab(tp, i);
        else if (the_kind == K_TRAIN) run_train(tp);
        else run_sub(tp, (enum sub)(the_kind - K_MLP), i);
        base_seed = grading_seed;
        pl_comm_free(tp);
    }
    pl_comm_free(world);
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
