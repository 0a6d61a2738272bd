/* driver.c: the trusted test driver of Lab 4 (tensor parallelism), on the lab harness's new
 * shape (grader/common/harness.h): the state, made here on the heap; each case run by
 * cases*.c into this rank's observation; the verdicts by judge.c on rank 0 from every rank's.
 * The single-device oracle comes from the library (lib/model.h, lib/ops.h) on randomised
 * full tensors; each rank gets the row or column block of them that its shard holds
 * (lib/tp_shard.h). The all-reduces of each pass come from the traffic ledger, placement
 * from its link classes on a virtual 2 nodes x 4 ranks cluster, and time from the student's
 * own trace replayed on a cluster profile.
 *
 *   driver --op conjugates|linear|mlp|attention|block --mode check [--parts correct,traffic]
 *          [--seed S] [--record FILE]                      t = the world size
 *   driver --op block --mode check --parts time             the block on the modelled timeline
 *   driver --op block --mode perf                           wall clock against the kit's parts
 *   driver --op placement --mode check [--parts correct,placement,order] [--seed S]
 *                                                           8 ranks: 2 nodes x 4, tp = 4
 *   driver --mode bench [--plots-dir DIR]                   8 ranks: the modelled cost of
 *                                                           TP inside and across nodes */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "lab04.h"
#include "todo.h"

/* The placement op and the bench run on a virtual 2 nodes x 4 ranks cluster. */
static void before_init(const char *op, const char *mode, int *nodes, int *per_node)
{
    if ((op && !strcmp(op, "placement")) || !strcmp(mode, "bench")) {
        *nodes = L4_PLACE_NODES;
        *per_node = L4_PLACE_PER_NODE;
    }
}

static const struct pl_flag OPTIONS[] = {
    {"--plots-dir", PL_FLAG_STR, NULL, "DIR",
     "bench: also draw the handout's figures (f and g, your block's modelled timeline inside "
     "and across nodes) as SVGs in DIR (default none)", 0},
};

static void *setup(const struct gr_args *a)
{
    struct l4_state *st = calloc(1, sizeof *st);
    if (!st) pl_fatal("out of memory");
    st->grading_seed = st->base_seed = a->seed;
    st->want_time = !strcmp(a->mode, "check") && strstr(a->parts, "time") != NULL;
    for (int k = 0; k <= L4_PLACE; k++)
        if (!strcmp(a->op, L4_KIND_OPS[k])) st->kind = (enum l4_kind)k;
    struct pl_model_config c = l4_config(st);
    char err[256];
    if (st->kind == L4_PLACE) {
        const struct pl_topo *topo = pl_topo();
        if (topo->nodes != L4_PLACE_NODES || topo->per_node != L4_PLACE_PER_NODE)
            pl_usage_error_all("--op placement runs on a virtual %d nodes x %d ranks (launch %d "
                               "ranks)", L4_PLACE_NODES, L4_PLACE_PER_NODE,
                               L4_PLACE_NODES * L4_PLACE_PER_NODE);
    } else if (pl_tp_degree_error(&c, pl_size(), err, sizeof err)) {
        pl_usage_error_all("%d ranks form one TP group here: %s", pl_size(), err);
    } else if (pl_size() > pl_topo()->per_node) {
        pl_usage_error_all("%d ranks form one TP group here, larger than a node's %d ranks: "
                           "its all-reduces, four per block, would cross the network (section "
                           "8). Run tp <= %d per node, or on one node", pl_size(),
                           pl_topo()->per_node, pl_topo()->per_node);
    }
    st->ncases = l4_ncases(st);
    return st;
}

static void finish(void *st)
{
    free(st);
}

static const char *subject(void *st)
{
    return L4_KIND_SUBJECTS[((struct l4_state *)st)->kind];
}

static int ncases(void *st)
{
    return ((struct l4_state *)st)->ncases;
}

static void describe(void *st, int i, char *buf, size_t len)
{
    l4_describe(st, i, buf, len);
}

static size_t obs_size(const void *st, int i)
{
    (void)st;
    (void)i;
    return sizeof(struct l4_obs);
}

static void observe(void *vst, int i, void *obs)
{
    struct l4_state *st = vst;
    st->ob = obs;
    st->cur = L4_CORRECT;
    if (st->kind == L4_PLACE) l4_run_placement(st, i);
    else l4_run_case(st, i);
    st->ob = NULL;
}

static int judge(const void *vst, int i, const char *part, const struct gr_obs *all,
                 struct gr_why *why)
{
    const struct l4_state *st = vst;
    return l4_judge(st->kind, i, st->ncases, part, all, why);
}

/* perf mode: the block on the world as one TP group (bench.c). */
static int probe(void *vst)
{
    struct l4_state *st = vst;
    if (st->kind != L4_BLOCK) pl_usage_error_all("--mode perf: Lab 4 times --op block only");
    struct pl_grid grid;
    char deg[32];
    snprintf(deg, sizeof deg, "tp=%d", pl_size());
    pl_grid_init_or_die(&grid, "tp", deg, pl_size());
    st->perf_tp = tp_group(&grid, pl_comm_world());
    if (!st->perf_tp) {
        if (!pl_todo_what()) gr_say("perf", "tp_group returned no communicator (section 2)");
        return 0;
    }
    return l4_probe(st, st->perf_tp);
}

static double perf(void *vst)
{
    struct l4_state *st = vst;
    double f = l4_perf(st);
    pl_comm_free(st->perf_tp);
    st->perf_tp = NULL;
    return f;
}

const struct gr_driver gr_lab_driver = {
    .options = OPTIONS,
    .noptions = (int)(sizeof OPTIONS / sizeof OPTIONS[0]),
    .setup = setup,
    .subject = subject,
    .correct_first = "must match the single device first",
    .ncases = ncases,
    .describe = describe,
    .obs_size = obs_size,
    .observe = observe,
    .judge_obs = judge,
    .probe = probe,
    .perf = perf,
    .bench = l4_bench,
    .finish = finish,
    .before_init = before_init,
};
