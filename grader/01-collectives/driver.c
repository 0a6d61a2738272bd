/* driver.c: the trusted test driver of Lab 1 (collectives from point-to-point), on the lab
 * harness's new shape (grader/common/harness.h): the state, made here on the heap; each case
 * run by cases.c into this rank's observation; the verdicts by judge.c on rank 0 from every
 * rank's; the speed test and the benchmark by bench.c.
 *
 *   driver --op OP --mode check [--parts correct,traffic,memory] [--seed S] [--record FILE]
 *   driver --op recursive_doubling --mode check --parts crossover   its race with the ring
 *   driver --op hierarchical|hierarchical_3_nodes --mode check      on 2 (3) virtual nodes
 *   driver --op OP --mode perf [--size-mib M]          busbw beside the library's collective
 *   driver --mode bench [--op OP] [--max-mib M]        nccl-tests' table, yours and the library's */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab01.h"

static const struct pl_flag OPTIONS[] = {
    {"--size-mib", PL_FLAG_DOUBLE, NULL, "M", "perf: the buffer's size in MiB (default 16)", 0},
    {"--max-mib", PL_FLAG_DOUBLE, NULL, "M", "bench: the largest size in MiB (default 16)", 0},
};

static void *setup(const struct gr_args *a)
{
    double size_mib = a->opt[0].d;
    if (size_mib < 0 || size_mib != size_mib || a->opt[1].d < 0 || a->opt[1].d != a->opt[1].d)
        pl_usage_error_all("--size-mib and --max-mib must be positive");
    struct l1_state *st = calloc(1, sizeof *st);
    if (!st) pl_fatal("out of memory");
    st->op = (enum l1_op)l1_find_op(a->op);
    st->seed = a->seed;
    st->size_mib = size_mib > 0 ? size_mib : 16;
    const struct pl_topo *t = pl_topo();
    st->world = pl_size();
    st->nodes = t->nodes;
    st->per_node = t->per_node;
    if (st->op == L1_HIER && (t->nodes < 2 || t->nodes * t->per_node != pl_size()))
        pl_usage_error_all("--op hierarchical runs on 2 nodes or more of equal size (%d ranks "
                           "on %d node%s here): launch an even number of ranks (%s: a "
                           "multiple of 3), the grader splits them over 2 (3) virtual nodes",
                           pl_size(), t->nodes, t->nodes == 1 ? "" : "s", L1_HIER_3_NODES);
    if (!strcmp(a->mode, "check")) {
        st->want_crossover = strstr(a->parts, "crossover") != NULL;
    }
    st->ncases = l1_make_cases(st->op, st->world, st->seed, st->cases);
    return st;
}

static void finish(void *st)
{
    free(st);
}

static const char *subject(void *st)
{
    return L1_OPS[((struct l1_state *)st)->op].func;
}

static int ncases(void *st)
{
    return ((struct l1_state *)st)->ncases;
}

static void describe(void *vst, int i, char *buf, size_t len)
{
    const struct l1_state *st = vst;
    char cs[384];
    l1_describe_case(st->op, &st->cases[i], st->world, cs, sizeof cs);
    snprintf(buf, len, "%s(%s)", L1_OPS[st->op].func, cs);
}

static size_t obs_size(const void *st, int i)
{
    (void)st;
    (void)i;
    return sizeof(struct l1_obs);
}

static void observe(void *st, int i, void *obs)
{
    l1_observe(st, i, obs);
}

static int judge(const void *vst, int i, const char *part, const struct gr_obs *all,
                 struct gr_why *why)
{
    const struct l1_state *st = vst;
    return l1_judge(st->op, i, st->ncases, part, all, why);
}

static int probe(void *st)
{
    return l1_probe(st);
}

static double perf(void *st)
{
    return l1_perf(st);
}

/* The two-level all-reduce runs on 2 virtual nodes (the ranks split evenly between them), or
 * on 3 as L1_HIER_3_NODES.
 * The speed test on NCCL races the library's collective restricted to what a point-to-point
 * ring can use, the ring algorithm and the Simple protocol (read when NCCL's communicator is
 * made; point-to-point is unaffected), judged from bench.c's L1_NCCL_BAR (docs/gpu.md). */
static void before_init(const char *op, const char *mode, int *nodes, int *per_node)
{
    (void)per_node;
    if (op && !strcmp(op, "hierarchical")) *nodes = 2;
    if (op && !strcmp(op, L1_HIER_3_NODES)) *nodes = 3;
#ifdef PL_GPU
    if (!strcmp(mode, "perf")) {
        setenv("NCCL_ALGO", "Ring", 0);
        setenv("NCCL_PROTO", "Simple", 0);
    }
#else
    (void)mode;
#endif
}

const struct gr_driver gr_lab_driver = {
    .options = OPTIONS,
    .noptions = (int)(sizeof OPTIONS / sizeof OPTIONS[0]),
    .setup = setup,
    .subject = subject,
    .correct_first = "must give correct results first",
    .ncases = ncases,
    .describe = describe,
    .obs_size = obs_size,
    .observe = observe,
    .judge_obs = judge,
    .probe = probe,
    .perf = perf,
    .bench = l1_bench,
    .finish = finish,
    .before_init = before_init,
};
