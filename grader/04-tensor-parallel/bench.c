/* bench.c: Lab 4's bench mode, perf mode and figures (lab04.h). The bench: the modelled cost
 * of one block per TP degree and order on a virtual 2 nodes x 4 ranks cluster, a GPT-3 block
 * on dgx-h100, and activation bytes against Korthikanti's formula, each figure the handout
 * quotes printed as "# handout: ..."; with --plots-dir the f/g figure and the student's block
 * on the modelled timeline inside and across nodes, drawn through lib/svg.h. The perf mode:
 * the student's TP block, forward and backward, timed on the wall clock against the kit's
 * parts of the same work measured in the same run: the single-device block (lib/model.h) on
 * B/t of the sequences, which does the same products as one rank's shard does on all B,
 * then the library's four all-reduces of the [N, C] activation on the TP group. The harness
 * pairs the rounds and takes the median ratio (report.h). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab04.h"
#include "svg.h"
#include "units.h"

/* ---- figures ---- */

static FILE *svg_open(const char *dir, const char *name, char *path, size_t len, int w, int h)
{
    snprintf(path, len, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        pl_usage_error("--plots-dir %s: cannot write %s (does the folder exist?)",
                       dir, path);
    pl_svg_begin(f, w, h, 12);
    return f;
}

static void svg_close(FILE *f, const char *path)
{
    int bad = pl_svg_end(f) != 0;
    if (fclose(f) != 0 || bad) pl_fatal("could not write %s", path);
    printf("wrote %s\n", path);
}

/* A box of w x h at (x, y) with one or two centred lines of text. */
static void box(FILE *f, double x, double y, double w, double h, const char *fill,
                const char *l1, const char *l2)
{
    pl_svg_rect(f, x, y, w, h, fill, "stroke=\"#444\" rx=\"4\"");
    const char *mid = "text-anchor=\"middle\"";
    if (l2) {
        pl_svg_text(f, x + w / 2, y + h / 2 - 3, mid, l1);
        pl_svg_text(f, x + w / 2, y + h / 2 + 12, mid, l2);
    } else {
        pl_svg_text(f, x + w / 2, y + h / 2 + 4, mid, l1);
    }
}

static void arrow(FILE *f, double x1, double y1, double x2, double y2)
{
    pl_svg_line(f, x1, y1, x2, y2, "#444", "stroke-width=\"1.5\"");
    double d = x2 >= x1 ? -6 : 6;
    pl_svg_line(f, x2, y2, x2 + d, y2 - 4, "#444", "stroke-width=\"1.5\"");
    pl_svg_line(f, x2, y2, x2 + d, y2 + 4, "#444", "stroke-width=\"1.5\"");
}

/* text with each '#' replaced by rank r (r < 10) */
static void with_rank(char *out, size_t len, const char *text, int r)
{
    size_t n = 0;
    for (const char *c = text; *c && n + 1 < len; c++) out[n++] = *c == '#' ? (char)('0' + r) : *c;
    out[n] = '\0';
}

/* One panel: x -> f -> t lanes of three ops -> g -> z, at height y0. */
static void panel(FILE *f, double y0, const char *title, const char *const ops[3][2], int t,
                  const char *out)
{
    const double bw = 150, bh = 44, gap = 30, lane = 62, fw = 70;
    const double xin = 20, xf = xin + 70 + gap, x0 = xf + fw + gap;
    const double xg = x0 + 3 * bw + 2 * gap + gap, xz = xg + fw + gap;
    double mid = y0 + 24 + (t * lane - (lane - bh)) / 2;
    pl_svg_text(f, 10, y0 + 10, "font-weight=\"bold\"", title);
    box(f, xin, mid - bh / 2, 70, bh, "#f3e0cf", "x [N, C]", "every rank");
    arrow(f, xin + 70, mid, xf, mid);
    box(f, xf, mid - bh / 2, fw, bh, "#fde2e2", "f", NULL);
    box(f, xg, mid - bh / 2, fw, bh, "#fde2e2", "g", NULL);
    for (int r = 0; r < t; r++) {
        double y = y0 + 24 + r * lane, ym = y + bh / 2;
        arrow(f, xf + fw, mid, x0, ym);
        for (int k = 0; k < 3; k++) {
            char l1[96], l2[96];
            with_rank(l1, sizeof l1, ops[k][0], r);
            with_rank(l2, sizeof l2, ops[k][1], r);
            box(f, x0 + k * (bw + gap), y, bw, bh, k == 1 ? "#e6f0e0" : "#dce8f6", l1, l2);
            if (k < 2) arrow(f, x0 + k * (bw + gap) + bw, ym, x0 + (k + 1) * (bw + gap), ym);
        }
        arrow(f, x0 + 3 * bw + 2 * gap, ym, xg, mid);
    }
    arrow(f, xg + fw, mid, xz, mid);
    box(f, xz, mid - bh / 2, 120, bh, "#f3e0cf", out, "every rank");
}

static void plot_fg(const struct l4_state *st)
{
    struct pl_model_config c = l4_config(st);
    const int t = 2;
    char path[1024];
    FILE *f = svg_open(st->plots_dir, "04-tensor-parallel-fg.svg", path, sizeof path, 1000, 420);
    char fc1[64], fc2[64], qkv[64], att[64], proj[64];
    snprintf(fc1, sizeof fc1, "[N, %d] of d_ff = %d", c.d_ff / t, c.d_ff);
    snprintf(fc2, sizeof fc2, "partial [N, %d]", c.d_model);
    snprintf(qkv, sizeof qkv, "%d of %d heads", c.n_heads / t, c.n_heads);
    snprintf(att, sizeof att, "[N, %d]: its heads", c.d_model / t);
    snprintf(proj, sizeof proj, "partial [N, %d]", c.d_model);
    const char *const mlp[3][2] = {{"fc1 A_# (column-par.)", fc1},
                                   {"GELU", "on the slice"},
                                   {"fc2 B_# (row-par.)", fc2}};
    const char *const attn[3][2] = {{"q, k, v of rank #", qkv},
                                    {"causal attention", att},
                                    {"proj rows B_#", proj}};
    char title[160];
    snprintf(title, sizeof title, "MLP, t = %d (the graded model: C = %d, d_ff = %d)", t,
             c.d_model, c.d_ff);
    panel(f, 20, title, mlp, t, "z = sum + bias");
    snprintf(title, sizeof title, "Self-attention by heads, t = %d (%d heads of %d channels)",
             t, c.n_heads, c.d_model / c.n_heads);
    panel(f, 190, title, attn, t, "z = sum + bias");
    pl_svg_text(f, 10, 372, "", "f: where the split region begins, before a column-parallel "
                "linear.   g: where it ends, after a row-parallel linear (section 3).");
    pl_svg_text(f, 10, 392, "fill=\"#555\"", "Blue: split by columns or rows of the weights "
                "(each rank its own); the biases of the row-parallel linears are replicated.");
    svg_close(f, path);
}

/* ---- the block on the modelled timeline (block_time.h) ---- */

static int time_measure(const struct l4_sub_run *run, int t, int across, const char *svg,
                 struct gr_bt_verdict *out, char *err, size_t len)
{
    char title[200];
    snprintf(title, sizeof title, "TP block forward and backward, t = %d %s, %s, GPT-3 175B "
             "block scale", t, across ? "across nodes" : "inside a node", GR_BT_PROFILE);
    return gr_bt_replay(run->oracle_flops, run->activation_floats, t, svg, title, out, err,
                        len);
}

/* ---- bench: the modelled cost of one block per TP degree and order ---- */

/* Rank 0: the traced block of this row on the modelled timeline at GPT-3 block scale, drawn
 * to PLOTS_DIR/04-tensor-parallel-timeline[-across].svg with --plots-dir. */
static void timeline_figure(struct l4_state *st, const struct l4_sub_run *run, int t, int across)
{
    if (pl_rank() != 0) return;
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/04-tensor-parallel-timeline%s.svg",
             st->plots_dir ? st->plots_dir : ".", across ? "-across" : "");
    struct gr_bt_verdict r;
    if (time_measure(run, t, across, st->plots_dir ? path : NULL, &r, err, sizeof err) != 0) {
        printf("# no timeline: %s\n", err);
        return;
    }
    if (st->plots_dir) printf("wrote %s\n", path);
    printf("# handout: the block at GPT-3 175B block scale, tp = %d %s: %.2f ms modelled on "
           "dgx-h100, %.2fx the least a TP block takes inside a node (compute/t + 4 "
           "all-reduces)\n", t, across ? "across nodes" : "inside a node", r.r.step * 1e3,
           r.ratio);
}

/* One row of the table; returns the slowest rank's modelled time (s), -1 when no row. */
static double bench_row(struct l4_state *st, int t, const char *order)
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
    struct l4_sub_run run;
    int traced = t == L4_PLACE_TP;
    l4_run_sub_case(st, tp, L4_SUB_BLOCK, L4_SHAPES[0].B, L4_SHAPES[0].T, traced, &run);
    struct pl_ledger d = run.code;
    double v[4];
    l4_modelled_cost(&d, &v[0], &v[1]);
    v[2] = pl_ledger_bytes(&d, -1, PL_LINK_INTRA);
    v[3] = pl_ledger_bytes(&d, -1, PL_LINK_INTER);
    PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    int ok = !st->ob->part[L4_CORRECT].code, all_ok = 0;
    PL_CHECK_MPI(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    pl_print0("%-8s %4d %14.0f %14.0f %16.2f %16.2f %8s\n", order, t, v[2], v[3], v[0] * 1e6,
              v[1] * 1e6, all_ok ? "yes" : "NO");
    if (traced) {
        timeline_figure(st, &run, t, strcmp(order, "tp-dp") != 0);
        gr_bt_free();
    }
    memset(st->ob, 0, sizeof *st->ob);
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
    const double S = gr_bt_bytes(), flops = gr_bt_flops();
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

void l4_bench(const struct gr_args *args)
{
    struct l4_obs *ob = calloc(1, sizeof *ob);
    if (!ob) pl_fatal("out of memory");
    struct l4_state state = {.grading_seed = args->seed, .base_seed = args->seed,
                             .kind = L4_PLACE, .plots_dir = args->opt[0].s, .ob = ob};
    struct l4_state *st = &state;
    if (st->plots_dir && pl_rank() == 0) plot_fg(st);
    const struct pl_topo *topo = pl_topo();
    struct pl_model_config c = l4_config(st);
    pl_print0("# Lab 4 tensor parallelism: %s, one block (b=%d, s=%d, h=%d, %d heads) forward "
              "and backward\n# on %d nodes x %d ranks, modelled on dgx-h100 (the slowest "
              "rank; bytes of the busiest rank)\n#\n", args->label, L4_SHAPES[0].B, L4_SHAPES[0].T,
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
        double in = bench_row(st, t, "tp-dp");
        double across = t > 1 ? bench_row(st, t, "dp-tp") : -1;
        if (t == L4_PLACE_TP && in > 0 && across > 0)
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
        pl_tp_block_acts_new(&a, &c, t, L4_SHAPES[0].B, L4_SHAPES[0].T);
        pl_mem_get_stats(&after);
        double measured = (double)(after.current[PL_MEM_ACTIV] - before.current[PL_MEM_ACTIV]);
        pl_tp_block_acts_free(&a);
        double s = L4_SHAPES[0].T, b = L4_SHAPES[0].B, h = c.d_model, as = c.n_heads;
        double korth = s * b * h * (10 + 24.0 / t + 5 * as * s / (h * t));
        pl_print0("  %4d %14.0f %14.0f %16.0f\n", t, measured,
                  pl_tp_block_act_bytes(&c, t, L4_SHAPES[0].B, L4_SHAPES[0].T), korth);
        pl_print0("# handout: t = %d: %.0f bytes measured, %.0f by Korthikanti's formula\n", t,
                  measured, korth);
    }
    free(ob);
}

/* ---- perf mode: the block on the wall clock ---- */

#define PERF_B 8      /* sequences: every t of 1, 2, 4 and 8 divides it */
#define PERF_REPS 10  /* blocks per timed round */
#define PERF_ROUNDS 5
#define PERF_BATCHES 3

struct l4_perf {
    struct pl_comm *tp;
    struct l4_block k;
    struct pl_tp_block_acts a;
    struct pl_block_acts ra;
    struct pl_model_ctx ctx;
    float *gx, *gy, *gdy, *gdx; /* the student's: [N, C] */
    float *by, *bdx, *ar;       /* the baseline's: [N/t, C], and the all-reduced [N, C] */
};

/* One TP block forward and backward, as the check mode runs it. */
static void student_block(void *ctx)
{
    struct l4_perf *pf = ctx;
    const size_t nc = (size_t)pf->k.N * pf->k.cfg.d_model;
    pl_copy(pf->gdy, pf->k.dy, nc); /* g's backward may work on dy in place */
    tp_block_forward(pf->tp, &pf->k.cfg, &pf->k.sp, &pf->a, pf->gx, pf->gy);
    tp_block_backward(pf->tp, &pf->k.cfg, &pf->k.sp, &pf->k.sg, &pf->a, pf->gdy, pf->gdx);
}

static void kit_parts(void *ctx)
{
    struct l4_perf *pf = ctx;
    const size_t nc = (size_t)pf->k.N * pf->k.cfg.d_model;
    pl_block_forward(&pf->k.cfg, 0, &pf->k.p, &pf->ra, &pf->ctx, pf->k.x, pf->by);
    pl_block_backward(&pf->k.cfg, 0, &pf->k.p, &pf->k.g, &pf->ra, &pf->ctx, pf->k.dy, pf->bdx);
    for (int i = 0; i < 4; i++) pl_all_reduce(pf->tp, pf->ar, pf->ar, nc, PL_AVG);
}

/* Seconds per block of one side, the slowest rank's. */
static double round_of(void *ctx, int mine)
{
    return gr_perf_round(kit_parts, student_block, ctx, PERF_REPS, mine);
}

int l4_probe(struct l4_state *st, struct pl_comm *tp)
{
    struct l4_perf *pf = calloc(1, sizeof *pf);
    if (!pf) pl_fatal("out of memory");
    st->perf = pf;
    pf->tp = tp;
    const int t = pl_comm_size(tp), T = L4_SHAPES[0].T;
    l4_block_new(st, &pf->k, t, pl_comm_rank(tp), PERF_B, T);
    gr_case("TP block of %d sequences, t=%d, beside the kit's block on %d and 4 all-reduces",
            PERF_B, t, PERF_B / t);
    const size_t nc = (size_t)pf->k.N * pf->k.cfg.d_model;
    pl_tp_block_acts_new(&pf->a, &pf->k.cfg, t, PERF_B, T);
    pl_block_acts_new(&pf->ra, &pf->k.cfg, PERF_B / t, T);
    pf->ctx = pl_model_ctx_eval();
    pf->gx = gr_op_alloc(nc, "perf x");
    pf->gy = gr_op_alloc(nc, "perf y");
    pf->gdy = gr_op_alloc(nc, "perf dy");
    pf->gdx = gr_op_alloc(nc, "perf dx");
    pf->by = gr_op_alloc(nc / t, "perf kit y");
    pf->bdx = gr_op_alloc(nc / t, "perf kit dx");
    pf->ar = gr_op_alloc(nc, "perf all-reduced");
    pl_copy(pf->gx, pf->k.x, nc);
    pl_copy(pf->ar, pf->k.x, nc);
    student_block(pf);
    return 1;
}

double l4_perf(struct l4_state *st)
{
    struct l4_perf *pf = st->perf;
    pl_comm_set_checks(0);
    kit_parts(pf);
    struct gr_perf p;
    gr_perf_compare(round_of, pf, PERF_ROUNDS, PERF_BATCHES, &p);
    pl_comm_set_checks(1);
    char base[160];
    snprintf(base, sizeof base, "the kit's block on %d sequences and the library's 4 "
             "all-reduces of [N, C], one after the other,", PERF_B / pf->k.t);
    double f = gr_perf_report_step(&p, (double)pf->k.N, base,
                                   "the same products and the same bytes in both: look for "
                                   "hand-written loops where lib has an op, buffers allocated "
                                   "or zeroed that the block does not need, or copies of whole "
                                   "activations (section 8)",
                                   "tokens_per_s_tp_block");
    float *bufs[] = {pf->gx, pf->gy, pf->gdy, pf->gdx, pf->by, pf->bdx, pf->ar};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) pl_mem_free(bufs[i]);
    pl_tp_block_acts_free(&pf->a);
    pl_block_acts_free(&pf->ra);
    l4_block_free(&pf->k);
    free(pf);
    st->perf = NULL;
    return f;
}
