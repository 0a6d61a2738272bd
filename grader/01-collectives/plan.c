/* plan.c: the descriptor and test plan of Lab 1 (collectives from point-to-point), read by
 * the grader.
 *
 * Per collective: exact results on 2, 3, 5 and 8 ranks (2.5 points each) and on 1 rank (a
 * sanity test worth no points: one rank needs no message, so an empty body passes it); the
 * bytes each rank sends equal to the ring's volume on 2 ranks and more (1 point each); no
 * leaked or oversized buffers on the largest rank count (1 point; none when that is 1 rank);
 * bus bandwidth against the library's collective in the same run (5 points, full marks from
 * 0.7x, only once the collective is correct). 100 points in all. The second part: recursive
 * doubling exact on 2, 3, 5 and 8 ranks (2.5 each) with at most floor(log2 n) + 1 messages a
 * rank (1 each) and, from 3 ranks, its crossover with the student's ring replayed on
 * dgx-h100 against the alpha-beta model's (2 each), and the two-level all-reduce exact on 2
 * nodes of 2, 3 and 4 ranks and on 3 nodes of 2 (2.5 each) with no rank sending more across
 * nodes than 2(N-1)/N of its 1/L share (2 each), and each with no more scratch than the
 * buffer on the largest rank count (1 each): 40 points. The hidden suite repeats the
 * correctness and traffic tests on 4, 6 and 7 ranks with the secret seed (1 point each), and
 * the second part's results on 4, 6, 7 and on 2 nodes of 4. */
#include <stdio.h>

#include "grade.h"
#include "rules/symbols.h"

static const struct {
    const char *title;
    const char *op;
    const char *sizes; /* the range of sizes the driver tries, for the test name */
} L1_TESTED[] = {
    {"ring reduce-scatter", "reduce_scatter", "0 B..1 MiB"},
    {"ring all-gather", "all_gather", "0 B..1 MiB"},
    {"ring all-reduce", "all_reduce", "0 B..1 MiB"},
    {"pipelined broadcast", "broadcast", "0 B..1 MiB"},
    {"pairwise all-to-all", "all_to_all", "0 B..128 KiB blocks"},
};

#define L1_CHECK_TIMEOUT 60
#define L1_PERF_TIMEOUT 180
#define L1_PERF_MIB 16

static int largest(const int *nps)
{
    int most = 0;
    for (int i = 0; nps[i]; i++)
        if (nps[i] > most) most = nps[i];
    return most;
}

/* Names live as long as the plan: the orchestrator copies them. */
static void l1_check_tests(const char *title, const char *op, const char *sizes,
                              const int *nps, int hidden)
{
    char name[160];
    int most = largest(nps);
    const char *pre = hidden ? "hidden: " : "";
    for (int i = 0; nps[i]; i++) {
        int np = nps[i];
        snprintf(name, sizeof name, "%s%s [np=%d, %s]", pre, title, np, sizes);
        gr_add(&(struct gr_spec){name, op, "check", "correct", "correctness", np,
                                 np == 1 ? 0 : hidden ? 1 : 2.5, L1_CHECK_TIMEOUT, hidden,
                                 NULL});
        if (np >= 2) {
            snprintf(name, sizeof name, "%s%s traffic [np=%d]", pre, title, np);
            gr_add(&(struct gr_spec){name, op, "check", "traffic", "performance", np, 1,
                                     L1_CHECK_TIMEOUT, hidden, NULL});
        }
        if (np == most && !hidden) {
            snprintf(name, sizeof name, "%s%s memory [np=%d]", pre, title, np);
            gr_add(&(struct gr_spec){name, op, "check", "memory", "memory", np,
                                     np == 1 ? 0 : 1, L1_CHECK_TIMEOUT, hidden, NULL});
        }
    }
}

/* The second part (sections 11 and 12): recursive doubling on any rank count, graded on
 * its results and its messages, and from 3 ranks on its replayed crossover with the
 * student's own ring against the alpha-beta model's (2 points each); the two-level
 * all-reduce on 2 virtual nodes of 2, 3 and 4 ranks and on 3 of 2, graded on its results
 * and its bytes across nodes. Neither races the library: the alpha-beta model on the
 * ledger's counts, and the replay of the student's own messages, say where each wins. */
static void l1_second_part(const int *given, int hidden)
{
    static const int doubling[] = {1, 2, 3, 5, 8, 0}, doubling_hidden[] = {4, 6, 7, 0};
    static const int nodes[] = {4, 6, 8, 0}, nodes_hidden[] = {8, 0};
    const int *nps = given ? given : hidden ? doubling_hidden : doubling;
    const char *pre = hidden ? "hidden: " : "";
    char name[160];
    for (int i = 0; nps[i]; i++) {
        int np = nps[i];
        snprintf(name, sizeof name, "%srecursive-doubling all-reduce [np=%d, 0 B..256 KiB]", pre,
                 np);
        gr_add(&(struct gr_spec){name, "recursive_doubling", "check", "correct", "correctness",
                                 np, np == 1 ? 0 : hidden ? 1 : 2.5, L1_CHECK_TIMEOUT,
                                 hidden, NULL});
        if (np < 2 || hidden) continue;
        snprintf(name, sizeof name, "recursive-doubling all-reduce messages [np=%d]", np);
        gr_add(&(struct gr_spec){name, "recursive_doubling", "check", "traffic", "performance",
                                 np, 1, L1_CHECK_TIMEOUT, 0, NULL});
        if (np < 3) continue; /* on 2 ranks doubling beats the ring at every size */
        snprintf(name, sizeof name, "recursive-doubling vs your ring, replayed crossover [np=%d]",
                 np);
        gr_add(&(struct gr_spec){name, "recursive_doubling", "check", "crossover", "performance",
                                 np, 2, L1_CHECK_TIMEOUT, 0, NULL});
    }
    if (!hidden && largest(nps) >= 2) { /* one buffer of scratch, the partner's, at most */
        snprintf(name, sizeof name, "recursive-doubling all-reduce memory [np=%d]",
                 largest(nps));
        gr_add(&(struct gr_spec){name, "recursive_doubling", "check", "memory", "memory",
                                 largest(nps), 1, L1_CHECK_TIMEOUT, 0, NULL});
    }
    nps = given ? given : hidden ? nodes_hidden : nodes;
    int widest = 0; /* the most ranks the two-level all-reduce runs on */
    for (int i = 0; nps[i]; i++)
        if (nps[i] >= 4 && nps[i] % 2 == 0 && nps[i] > widest) widest = nps[i];
    for (int i = 0; nps[i]; i++) {
        int np = nps[i];
        if (np < 4 || np % 2) continue; /* 2 nodes of 2 ranks or more */
        snprintf(name, sizeof name,
                 "%shierarchical all-reduce on 2 nodes of %d [np=%d, 0 B..1 MiB]", pre, np / 2, np);
        gr_add(&(struct gr_spec){name, "hierarchical", "check", "correct", "correctness", np,
                                 hidden ? 1 : 2.5, L1_CHECK_TIMEOUT, hidden, NULL});
        if (hidden) continue;
        snprintf(name, sizeof name, "hierarchical all-reduce bytes across nodes [np=%d]", np);
        gr_add(&(struct gr_spec){name, "hierarchical", "check", "traffic", "placement", np, 2,
                                 L1_CHECK_TIMEOUT, 0, NULL});
        if (np == widest) {
            snprintf(name, sizeof name, "hierarchical all-reduce memory [np=%d]", np);
            gr_add(&(struct gr_spec){name, "hierarchical", "check", "memory", "memory", np, 1,
                                     L1_CHECK_TIMEOUT, 0, NULL});
        }
        if (np % 3) continue; /* and on 3 nodes, where two halves of the ranks are not nodes */
        snprintf(name, sizeof name,
                 "hierarchical all-reduce on 3 nodes of %d [np=%d, 0 B..1 MiB]", np / 3, np);
        gr_add(&(struct gr_spec){name, "hierarchical_3_nodes", "check", "correct", "correctness",
                                 np, 2.5, L1_CHECK_TIMEOUT, 0, NULL});
        snprintf(name, sizeof name, "hierarchical all-reduce bytes across 3 nodes [np=%d]", np);
        gr_add(&(struct gr_spec){name, "hierarchical_3_nodes", "check", "traffic", "placement",
                                 np, 2, L1_CHECK_TIMEOUT, 0, NULL});
    }
}

static void l1_plan(const struct gr_plan_opts *o)
{
    static const int visible[] = {1, 2, 3, 5, 8, 0}, hidden[] = {4, 6, 7, 0};
    int n = (int)(sizeof L1_TESTED / sizeof L1_TESTED[0]);
    for (int k = 0; k < n; k++)
        l1_check_tests(L1_TESTED[k].title, L1_TESTED[k].op, L1_TESTED[k].sizes,
                          o->np_given ? o->np : visible, 0);
    for (int k = 0; k < n; k++) {
        char name[160];
        snprintf(name, sizeof name, "%s busbw vs library [np=%d, %d MiB]", L1_TESTED[k].title,
                 o->perf_np, L1_PERF_MIB);
        gr_add(&(struct gr_spec){name, L1_TESTED[k].op, "perf", "perf", "performance",
                                 o->perf_np, 5, L1_PERF_TIMEOUT, 0, L1_TESTED[k].op});
    }
    l1_second_part(o->np_given ? o->np : NULL, 0);
    if (o->hidden) {
        for (int k = 0; k < n; k++)
            l1_check_tests(L1_TESTED[k].title, L1_TESTED[k].op, L1_TESTED[k].sizes,
                              o->np_given ? o->np : hidden, 1);
        l1_second_part(o->np_given ? o->np : NULL, 1);
    }
}

static const struct gr_lab l1_lab = {
    .dir = "01-collectives",
    .title = "collectives from point-to-point",
    .plan = l1_plan,
    .metric = "busbw_all_reduce",
    .metric_title = "Lab 1: ring all-reduce busbw (GB/s)",
    .bench_args = "--max-mib 16",
    .bench_np = "4",
    /* The lab builds collectives from point-to-point: no MPI, NCCL or library collective
     * underneath, and buffers from the kit's allocator, whose ledger the memory test reads. */
    .forbidden_symbols = GR_SYMBOLS_BELOW_KIT GR_SYMBOLS_RAW_ALLOC "pl_all_reduce* "
                         "pl_reduce_scatter* pl_all_gather* pl_broadcast* pl_all_to_all* "
                         "pl_barrier pl_comm_split",
    .symbol_rule = "Lab 1 builds every collective from lib's point-to-point calls (pl_send, "
                   "pl_recv, pl_sendrecv, pl_isend, pl_irecv, pl_wait) and the lab's helpers, "
                   "with buffers from pl_comm_buf_alloc (see the lab's handout)",
    .allowed_symbols = "MPI_Abort ompi_mpi_comm_world", /* stops the job; it moves no data */
};
GR_REGISTER_LAB(l1_lab)
