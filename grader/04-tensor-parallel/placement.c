/* placement.c: Lab 4's op placement (lab04.h), the TP block on a virtual 2 nodes x 4 ranks
 * cluster under the default order and under one that puts TP across nodes, costed from the
 * ledger's link classes on dgx-h100; and the bench's tables of the same. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab04.h"
#include "parts.h"
#include "units.h"

/* ---- op placement: 2 nodes x 4 ranks, tp = 4 ---- */

/* The ranks of this rank's TP group, in world ranks, as "{0,1,2,3}". */
static void describe_members(struct pl_comm *tp, char *buf, size_t len)
{
    size_t at = 0;
    at += (size_t)snprintf(buf + at, len - at, "{");
    for (int m = 0; m < pl_comm_size(tp) && at < len; m++)
        at += (size_t)snprintf(buf + at, len - at, "%s%d", m ? "," : "",
                               pl_comm_world_rank(tp, m));
    if (at < len) snprintf(buf + at, len - at, "}");
}

/* world ranks as "{0,1,2,3}". */
static void describe_list(const int *ranks, int n, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "{");
    for (int m = 0; m < n && at < len; m++)
        at += (size_t)snprintf(buf + at, len - at, "%s%d", m ? "," : "", ranks[m]);
    if (at < len) snprintf(buf + at, len - at, "}");
}

/* The group tp_group gave under grid g against the grid's own (lib/grid.h): the ranks that
 * share every coordinate but tp, group rank = tp coordinate. Each rank judges its own. */
static void check_group(const struct pl_grid *g, struct pl_comm *tp)
{
    int want[64], got[64], n = pl_grid_group(g, pl_rank(), pl_grid_axis(g, "tp"), want);
    int size = tp ? pl_comm_size(tp) : 0, same = size == n, members = same;
    for (int m = 0; m < size && m < 64; m++) got[m] = pl_comm_world_rank(tp, m);
    for (int m = 0; same && m < n; m++) same = got[m] == want[m];
    for (int m = 0; members && m < n; m++) {
        int found = 0;
        for (int j = 0; j < n; j++) found |= got[j] == want[m];
        members = found;
    }
    char grid[64], a[200], b[200];
    pl_grid_describe(g, grid, sizeof grid);
    describe_list(got, size < 64 ? size : 64, a, sizeof a);
    describe_list(want, n, b, sizeof b);
    if (!same && members)
        gr_fail("on grid %s tp_group gave rank %d the right ranks in the wrong order, %s by "
                "group rank where the tp coordinates give %s: group rank must be the tp "
                "coordinate, so that rank r of the group holds block r of every split tensor "
                "(section 2)", grid, pl_rank(), a, b);
    else if (!same)
        gr_fail("on grid %s tp_group gave rank %d the group %s where its TP group is %s: the "
                "ranks that share its coordinate on every axis but tp, whatever the axes and "
                "their order (pl_grid_comm on the tp axis, section 2)", grid, pl_rank(),
                size ? a : "{} (none)", b);
}

/* tp_group on a grid of three axes with tp in the middle, where a group built from one
 * other axis's coordinate (dp's, say) merges groups. */
static void check_three_axes(void)
{
    struct pl_grid grid;
    pl_grid_init_or_die(&grid, "pp-tp-dp", "tp=2,pp=2", pl_size());
    struct pl_comm *tp = tp_group(&grid, pl_comm_world());
    check_group(&grid, tp);
    pl_comm_free(tp);
}

/* Modelled time on dgx-h100 of one block's forward and backward as traced in delta, and of
 * the same bytes had they all stayed on NVLink. */
static void modelled_cost(const struct pl_ledger *d, double *as_run, double *inside)
{
    const struct pl_profile *p = pl_profile_find("dgx-h100");
    struct pl_ledger in = *d;
    for (int k = 0; k < PL_NKINDS; k++) {
        in.bytes[k][PL_LINK_INTRA] += in.bytes[k][PL_LINK_INTER];
        in.bytes[k][PL_LINK_INTER] = 0;
    }
    *as_run = pl_ledger_modelled_time(d, p);
    *inside = pl_ledger_modelled_time(&in, p);
}

/* One block under grid order `order`; judges correctness, and returns the ledger delta. */
static void placement_run(const char *order, struct pl_grid *g, struct pl_comm **tp_out,
                          struct pl_ledger *delta)
{
    struct pl_grid grid;
    char deg[32];
    snprintf(deg, sizeof deg, "tp=%d", PLACE_TP);
    pl_grid_init_or_die(&grid, order, deg, pl_size());
    *g = grid;
    struct pl_comm *tp = tp_group(&grid, pl_comm_world());
    *tp_out = tp;
    memset(delta, 0, sizeof *delta);
    if (!tp && pl_todo_what()) return;
    if (!tp || pl_comm_size(tp) != PLACE_TP) {
        gr_fail("tp_group gave a group of %d ranks under order %s, where the grid's tp axis has %d",
             tp ? pl_comm_size(tp) : 0, order, PLACE_TP);
        pl_comm_free(tp);
        *tp_out = NULL;
        return;
    }
    /* each group its own data, named by its first member: the group tp_group gave, so that
     * a group formed wrongly still computes right and placement judges it */
    uint64_t first = (uint64_t)pl_comm_world_rank(tp, 0);
    base_seed = pl_mix64(grading_seed + 0x9e3779b97f4a7c15ull * (first + 1));
    struct sub_run run;
    run_sub_case(tp, SUB_BLOCK, CASES[0].B, CASES[0].T, 0, &run);
    base_seed = grading_seed;
    *delta = run.code;
}

/* Case 0: the default order tp-dp, every TP group inside a node. Case 1: order dp-tp,
 * which puts each TP group across the nodes: the code must still be right, and the grader
 * reports the violation with its modelled cost. */
void run_placement(int i)
{
    const char *order = i == 0 ? "tp-dp" : "dp-tp";
    struct pl_comm *tp = NULL;
    struct pl_ledger d;
    struct pl_grid grid;
    placement_run(order, &grid, &tp, &d);
    if (!tp) return;
    char mem[64], a[32], b[32];
    describe_members(tp, mem, sizeof mem);
    /* the slowest rank's modelled time and the busiest rank's network bytes: a ring
     * charges each rank the link to its successor, so only some members cross nodes */
    double v[3];
    modelled_cost(&d, &v[0], &v[1]);
    v[2] = pl_ledger_bytes(&d, -1, PL_LINK_INTER);
    PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, v, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    double run = v[0], inside = v[1], inter = v[2], mine = pl_ledger_bytes(&d, -1, PL_LINK_INTER);
    gr_parts_say_ok(P_CORRECT, "the block matches the single device in every TP group under orders "
           "tp-dp and dp-tp");
    if (i == 0) {
        gr_parts_set(P_PLACEMENT);
        if (mine > 0)
            gr_fail("your TP group %s spans nodes: %s of its %s crossed the network. Modelled on "
                 "dgx-h100 this block takes %.2f us where inside a node it takes %.2f us "
                 "(%.1fx). With tp leftmost in the order the grid puts a TP group on "
                 "consecutive ranks, one node: build the group from the grid's tp axis "
                 "(section 2)", mem, pl_format_bytes(mine, a, sizeof a),
                 pl_format_bytes(pl_ledger_bytes(&d, -1, -1), b, sizeof b), run * 1e6,
                 inside * 1e6, run / inside);
        /* which ranks form the group, and in what order, is the placement: the grid's,
         * under this order and on a grid of three axes (once no group spans nodes, that
         * failure being the one to teach; inter is every rank's, so all ranks agree) */
        if (inter <= 0) {
            check_group(&grid, tp);
            check_three_axes();
        }
        gr_parts_say_ok(P_PLACEMENT, "every TP group of order tp-dp lies inside a node: all of its "
               "all-reduce bytes on intra-node links; modelled on dgx-h100 %.2f us per block "
               "forward+backward", run * 1e6);
    } else {
        gr_parts_set(P_ORDER);
        if (inter <= 0)
            gr_fail("under order dp-tp the TP group %s should cross nodes, yet no byte went "
                 "inter-node: does tp_group follow the grid it is given?", mem);
        gr_parts_say_ok(
            P_ORDER,
            "order dp-tp is a placement violation, found and costed: TP group %s "
            "crosses nodes, up to %s per rank inter-node; modelled on dgx-h100 %.2f us per "
            "block forward+backward vs %.2f us inside a node (%.1fx slower). Your code gave "
            "the right numbers under this order too",
            mem, pl_format_bytes(inter, a, sizeof a), run * 1e6, inside * 1e6, run / inside);
    }
    gr_parts_set(P_CORRECT);
    pl_comm_free(tp);
}

/* ---- bench: the modelled cost of one block per TP degree and order ---- */

/* Rank 0: the traced block of this row on the modelled timeline at GPT-3 block scale, drawn
 * to PLOTS_DIR/04-tensor-parallel-timeline[-across].svg with --plots-dir. */
static void timeline_figure(const struct sub_run *run, int t, int across)
{
    if (pl_rank() != 0) return;
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/04-tensor-parallel-timeline%s.svg",
             lab04_plots_dir ? lab04_plots_dir : ".", across ? "-across" : "");
    struct gr_bt_verdict r;
    if (time_measure(run, t, across, lab04_plots_dir ? path : NULL, &r, err, sizeof err) != 0) {
        printf("# no timeline: %s\n", err);
        return;
    }
    if (lab04_plots_dir) printf("wrote %s\n", path);
    printf("# handout: the block at GPT-3 175B block scale, tp = %d %s: %.2f ms modelled on "
           "dgx-h100, %.2fx the least a TP block takes inside a node (compute/t + 4 "
           "all-reduces)\n", t, across ? "across nodes" : "inside a node", r.r.step * 1e3,
           r.ratio);
}

/* One row of the table; returns the slowest rank's modelled time (s), -1 when no row. */
static double bench_row(int t, const char *order)
{
    struct pl_grid grid;
    char deg[32];
    snprintf(deg, sizeof deg, "tp=%d", t);
    pl_grid_init_or_die(&grid, order, deg, pl_size());
    pl_todo_reset();
    struct pl_comm *tp = tp_group(&grid, pl_comm_world());
    if (gr_todo_any() || !tp) {
        pl_print0("%-8s %4d   tp_group is still a stub: no row\n", order, t);
        return -1;
    }
    struct sub_run run;
    int traced = t == PLACE_TP;
    run_sub_case(tp, SUB_BLOCK, CASES[0].B, CASES[0].T, traced, &run);
    struct pl_ledger d = run.code;
    double v[4];
    modelled_cost(&d, &v[0], &v[1]);
    v[2] = pl_ledger_bytes(&d, -1, PL_LINK_INTRA);
    v[3] = pl_ledger_bytes(&d, -1, PL_LINK_INTER);
    PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    int ok = gr_parts_ok_of(P_CORRECT), all_ok = 0;
    PL_CHECK_MPI(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    pl_print0("%-8s %4d %14.0f %14.0f %16.2f %16.2f %8s\n", order, t, v[2], v[3], v[0] * 1e6,
              v[1] * 1e6, all_ok ? "yes" : "NO");
    if (traced) {
        timeline_figure(&run, t, strcmp(order, "tp-dp") != 0);
        gr_bt_free();
    }
    gr_parts_reset(PART_NAMES, NPARTS);
    pl_comm_free(tp);
    return v[0];
}

/* The tiny graded block is latency-bound; a GPT-3 sized block shows what TP buys and what
 * the network costs: compute 72bsh^2(1 + s/(6h)) FLOPs per block forward and backward,
 * split t ways, plus four ring all-reduces of bsh 16-bit values (docs/design.md's 8bsh(t-1)/t
 * per rank), on dgx-h100's links inside and across nodes. */
static void big_block_table(void)
{
    const struct pl_profile *p = pl_profile_find("dgx-h100");
    const double b = 1, sq = 2048, h = 12288, S = 2 * b * sq * h;
    const double flops = 72 * b * sq * h * h * (1 + sq / (6 * h));
    double two = 0;
    pl_print0("#\n# one GPT-3 175B block (b=1, s=2048, h=12288, bf16) forward and backward on "
              "dgx-h100, modelled serially:\n# compute/t + 4 ring all-reduces of bsh values\n");
    pl_print0("# %4s %14s %16s %16s %12s\n", "tp", "compute (ms)", "TP in node (ms)",
              "TP across (ms)", "across/in");
    for (int t = 1; t <= 8; t *= 2) {
        double comp = flops / t / p->flops;
        double in = 4 * pl_coll_time(PL_ALL_REDUCE, t, S, p->latency[PL_LINK_INTRA],
                                     p->bw[PL_LINK_INTRA]);
        double out = 4 * pl_coll_time(PL_ALL_REDUCE, t, S, p->latency[PL_LINK_INTER],
                                      p->bw[PL_LINK_INTER]);
        pl_print0("  %4d %14.3f %16.3f %16.3f %12.2f\n", t, comp * 1e3, (comp + in) * 1e3,
                  (comp + out) * 1e3, (comp + out) / (comp + in));
        if (t == 8)
            pl_print0("# handout: a GPT-3 175B block on tp = 8 takes %.3f ms inside a node and "
                      "%.3f ms across nodes (%.2fx), where tp = 2 inside a node takes %.3f ms\n",
                      (comp + in) * 1e3, (comp + out) * 1e3, (comp + out) / (comp + in), two);
        if (t == 2) two = (comp + in) * 1e3;
    }
}

void lab04_bench(const struct gr_args *args)
{
    grading_seed = base_seed = args->seed;
    gr_parts_reset(PART_NAMES, NPARTS);
    if (lab04_plots_dir && pl_rank() == 0) lab04_plot_fg();
    const struct pl_topo *topo = pl_topo();
    struct pl_model_config c = graded_config();
    pl_print0("# Lab 4 tensor parallelism: %s, one block (b=%d, s=%d, h=%d, %d heads) forward "
              "and backward\n# on %d nodes x %d ranks, modelled on dgx-h100 (the slowest "
              "rank; bytes of the busiest rank)\n#\n", args->label, CASES[0].B, CASES[0].T,
              c.d_model, c.n_heads, topo->nodes, topo->per_node);
    pl_print0("# %-6s %4s %14s %14s %16s %16s %8s\n", "order", "tp", "intra (B)", "inter (B)",
              "modelled (us)", "in a node (us)", "correct");
    static const int degrees[] = {1, 2, 4, 8};
    for (int k = 0; k < 4; k++) {
        int t = degrees[k];
        if (t > topo->per_node) {
            pl_print0("%-8s %4d   refused: a TP group of %d ranks is larger than a node's %d "
                      "and would cross the network on every all-reduce\n", "tp-dp", t, t,
                      topo->per_node);
            continue;
        }
        double in = bench_row(t, "tp-dp");
        double across = t > 1 ? bench_row(t, "dp-tp") : -1;
        if (t == PLACE_TP && in > 0 && across > 0)
            pl_print0("# handout: with tp = %d across nodes the graded block's modelled time on "
                      "dgx-h100 grows from %.2f us to %.2f us (%.1fx)\n", t, in * 1e6,
                      across * 1e6, across / in);
    }
    big_block_table();
    pl_print0("#\n# activation bytes per rank of one TP block (fp32, the ledger's PL_MEM_ACTIV "
              "of pl_tp_block_acts_new)\n# beside Korthikanti et al.'s 16-bit sbh(10 + 24/t + "
              "5as/(ht)) for the same shape\n");
    pl_print0("# %4s %14s %14s %16s\n", "tp", "measured (B)", "kit formula", "Korthikanti");
    for (int t = 1; t <= 4; t *= 2) {
        struct pl_mem_stats before, after;
        pl_mem_get_stats(&before);
        struct pl_tp_block_acts a;
        pl_tp_block_acts_new(&a, &c, t, CASES[0].B, CASES[0].T);
        pl_mem_get_stats(&after);
        double measured = (double)(after.current[PL_MEM_ACTIV] - before.current[PL_MEM_ACTIV]);
        pl_tp_block_acts_free(&a);
        double s = CASES[0].T, b = CASES[0].B, h = c.d_model, as = c.n_heads;
        double korth = s * b * h * (10 + 24.0 / t + 5 * as * s / (h * t));
        pl_print0("  %4d %14.0f %14.0f %16.0f\n", t, measured,
                  pl_tp_block_act_bytes(&c, t, CASES[0].B, CASES[0].T), korth);
        pl_print0("# handout: t = %d: %.0f bytes measured, %.0f by Korthikanti's formula\n", t,
                  measured, korth);
    }
}
