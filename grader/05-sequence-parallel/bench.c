/* bench.c: Lab 5's bench mode (activation bytes per rank against t), the handout's figures
 * and the perf mode's wall-clock timing of the SP block. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab05.h"
#include "gpt3.h"

/* ---- figures: `make plots LAB=05` (bench mode with --plots-dir) ---- */


static FILE *svg_open(const char *plots_dir, const char *name, int w, int h)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", plots_dir, name);
    FILE *f = fopen(path, "w");
    if (!f) pl_usage_error("--plots-dir %s: cannot write %s (does the folder exist?)", plots_dir,
                           path);
    pl_svg_begin(f, w, h, 12);
    return f;
}

static void svg_close(const char *plots_dir, FILE *f, const char *name)
{
    int bad = pl_svg_end(f) != 0;
    if (fclose(f) != 0 || bad) pl_fatal("could not write %s/%s", plots_dir, name);
    printf("wrote %s/%s\n", plots_dir, name);
}

/* One stored [s, h] activation of rank r as a cell: the whole outlined, the part the rank
 * holds filled (rows: tokens [r0, r1) of s; columns: channels [c0, c1) of h). */
static void svg_cell(FILE *f, double x, double y, double w, double h, double r0, double r1,
                     double c0, double c1, const char *fill)
{
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"#888\"/>\n", x, y, w, h);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
            x + c0 * w, y + r0 * h, (c1 - c0) * w, (r1 - r0) * h, fill);
}

/* TP (Lab 4) above TP+SP (this lab), t = 2: what each rank holds at each step of a half,
 * from the layouts of tp_shard.h and sp_shard.h (rows: tokens, columns: channels). */
static void plot_layout(const char *plots_dir)
{
    static const char *steps[] = {"x", "layernorm", "TP region in", "heads / fc1",
                                  "TP region out", "dropout + residual"};
    const int t = 2, ns = 6;
    const double cw = 70, ch = 46, gap = 40, left = 150, top = 40, panel = 2 * (ch + 18) + 50;
    FILE *f = svg_open(plots_dir, "05-sequence-parallel-layout.svg", (int)(left + ns * (cw + gap) + 60),
                       (int)(top + 2 * panel + 22));
    for (int sp = 0; sp < 2; sp++) {
        double y0 = top + sp * panel;
        fprintf(f, "<text x=\"10\" y=\"%.1f\" font-weight=\"bold\">%s</text>\n", y0 - 12,
                sp ? "TP + SP (Lab 5): the TP region is entered by a gather, left by a scatter"
                   : "TP (Lab 4): f enters the TP region, g leaves it (what each does: Lab 4, section 3)");
        for (int k = 0; k < ns; k++)
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                    left + k * (cw + gap) + cw / 2, y0 + 4, steps[k]);
        for (int r = 0; r < t; r++) {
            double y = y0 + 12 + r * (ch + 18);
            fprintf(f, "<text x=\"10\" y=\"%.1f\">rank %d</text>\n", y + ch / 2 + 4, r);
            for (int k = 0; k < ns; k++) {
                double x = left + k * (cw + gap);
                /* outside the TP region: every token (TP) or this rank's s/t (SP), all h */
                double r0 = 0, r1 = 1, c0 = 0, c1 = 1;
                const char *fill = "#e07b39"; /* replicated */
                if (k == 3) { /* inside: every token, this rank's channels */
                    c0 = (double)r / t;
                    c1 = (double)(r + 1) / t;
                    fill = "#3a7dc9";
                } else if (sp && k != 2) { /* the gathered input is whole on every rank */
                    r0 = (double)r / t;
                    r1 = (double)(r + 1) / t;
                    fill = "#4caf50";
                }
                svg_cell(f, x, y, cw, ch, r0, r1, c0, c1, fill);
                if (k + 1 < ns)
                    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                            "stroke=\"#444\"/>\n", x + cw, y + ch / 2, x + cw + gap, y + ch / 2);
            }
        }
        const char *in = sp ? "gather" : "f", *out = sp ? "scatter" : "g";
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#a00\">%s</text>\n",
                left + 2 * (cw + gap) - gap / 2, y0 + panel - 30, in);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#a00\">%s</text>\n",
                left + 4 * (cw + gap) - gap / 2, y0 + panel - 30, out);
    }
    fprintf(f, "<text x=\"10\" y=\"%.1f\" fill=\"#555\" font-size=\"11\">a cell is an "
            "[s, h] activation (rows: tokens, columns: channels), filled where the rank holds "
            "it:</text>\n<text x=\"10\" y=\"%.1f\" fill=\"#555\" font-size=\"11\">orange "
            "whole on every rank, green split along s, blue split along h</text>\n",
            top + 2 * panel - 2, top + 2 * panel + 12);
    svg_close(plots_dir, f, "05-sequence-parallel-layout.svg");
}

/* Bytes per rank against t: the three measured series as points, the kit's formulas as
 * lines. */
static void plot_bytes(const char *plots_dir, const struct pl_model_config *c, int B, int T, const double *meas,
                       int nt)
{
    const double W = 700, H = 360, L = 80, R = 170, TOP = 30, BOT = 50;
    double ymax = 0;
    for (int i = 0; i < 3 * nt; i++) ymax = meas[i] > ymax ? meas[i] : ymax;
    ymax *= 1.1;
    FILE *f = svg_open(plots_dir, "05-sequence-parallel-activations.svg", (int)W, (int)H);
#define PX(t) (L + ((t) - 1) / 3.0 * (W - L - R))
#define PY(v) (H - BOT - (v) / ymax * (H - TOP - BOT))
    fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", L, H - BOT,
            W - R, H - BOT);
    fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", L, TOP, L,
            H - BOT);
    for (int t = 1; t <= 4; t++)
        fprintf(f, "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%d</text>\n", PX(t),
                H - BOT + 16, t);
    fprintf(f, "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">t (TP degree)</text>\n",
            PX(2.5), H - 12);
    for (int k = 0; k <= 4; k++)
        fprintf(f, "<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\">%.0f kB</text>\n", L - 6,
                PY(ymax * k / 4) + 4, ymax * k / 4 / 1000);
    fprintf(f, "<text x=\"10\" y=\"18\">activation bytes per rank of one block (b=%d, s=%d, "
            "h=%d), measured (points) and the kit's formulas (lines)</text>\n", B, T,
            c->d_model);
    static const char *names[] = {"no TP", "TP (Lab 4)", "TP + SP"};
    static const char *colors[] = {"#777", "#e07b39", "#4caf50"};
    for (int sr = 0; sr < 3; sr++) {
        if (sr > 0) { /* the formula's line */
            fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" points=\"", colors[sr]);
            for (int k = 0; k <= 30; k++) {
                double t = 1 + 3.0 * k / 30;
                double N = (double)B * T, C = c->d_model, F = c->d_ff, NH = c->n_heads;
                double v = sr == 2 ? pl_sp_block_act_bytes(c, 1, B, T) / t
                                   : 4.0 * (4 * N * C + 4 * N) +
                                         4.0 / t * (4 * N * C + 2 * N * F + B * NH * (double)T * T);
                fprintf(f, "%.1f,%.1f ", PX(t), PY(v));
            }
            fprintf(f, "\"/>\n");
        }
        for (int i = 0; i < nt; i++) {
            int t = 1 << i;
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n", PX(t),
                    PY(meas[sr * nt + i]), colors[sr]);
        }
        fprintf(f, "<circle cx=\"%g\" cy=\"%g\" r=\"4\" fill=\"%s\"/><text x=\"%g\" "
                "y=\"%g\">%s</text>\n", W - R + 20, TOP + 20 + 20.0 * sr, colors[sr],
                W - R + 30, TOP + 24 + 20.0 * sr, names[sr]);
    }
#undef PX
#undef PY
    svg_close(plots_dir, f, "05-sequence-parallel-activations.svg");
}

/* ---- bench: activation bytes per rank against t ---- */

static double acts_bytes_of(int kind, const struct pl_model_config *c, int t, int B, int T)
{
    struct pl_mem_stats s0, s1;
    pl_mem_get_stats(&s0);
    struct pl_block_acts ba;
    struct pl_tp_block_acts ta;
    if (kind == 0) pl_block_acts_new(&ba, c, B, T);
    else pl_tp_block_acts_new(&ta, c, t, B, T);
    pl_mem_get_stats(&s1);
    if (kind == 0) pl_block_acts_free(&ba);
    else pl_tp_block_acts_free(&ta);
    return (double)(s1.current[PL_MEM_ACTIV] - s0.current[PL_MEM_ACTIV]);
}

/* Sections 1 and 7 of the handout from the kit's fp32 formulas, for the lab's block and for
 * the GPT-3 block of the questions: Lab 4's TP block keeps R + S/t bytes (R what does not
 * shrink with t: both halves' inputs, layernorm outputs and statistics), so R and S come from
 * pl_tp_block_act_bytes at t = 1 and 2; the first t dividing the heads where R exceeds S/t,
 * and what TP + SP keeps there as a fraction of TP's. */
static void handout_split_figures(const char *what, const char *name,
                                  const struct pl_model_config *c, int B, int T)
{
    const double tp1 = pl_tp_block_act_bytes(c, 1, B, T), tp2 = pl_tp_block_act_bytes(c, 2, B, T);
    const double R = 2 * tp2 - tp1, S = tp1 - R;
    int t = 1;
    while (t < c->n_heads && (R <= S / t || c->n_heads % t)) t++;
    const double f = pl_sp_block_act_bytes(c, t, B, T) / pl_tp_block_act_bytes(c, t, B, T);
    char a[32], b[32];
    pl_print0("# handout: for %s (b = %d, s = %d, h = %d, %d heads) the terms that do not shrink "
              "with t, %s, exceed the split ones from t = %d on (%s there)\n", what, B, T,
              c->d_model, c->n_heads, pl_format_bytes(R, a, sizeof a), t,
              pl_format_bytes(S / t, b, sizeof b));
    pl_print0("# handout: with sequence parallelism a rank keeps %.2f of Lab 4's TP bytes at "
              "t = %d for %s\n", f, t, name);
}

/* The second part on the world as the ring (cp = the ranks): the graded first case through
 * the copy being graded, each rank's attention FLOPs against the mean beside a contiguous
 * split's (computed: rank r's chunks 2r and 2r+1 see 4r+3 blocks, the mean 2cp+1), the bytes
 * it sent, and its forward on the modelled timeline (drawn with --plots-dir). */
static void bench_ring(struct l5_state *st)
{
    const int cp = pl_size();
    char svg[1024] = "";
    if (st->plots_dir && pl_rank() == 0)
        snprintf(svg, sizeof svg, "%s/05-sequence-parallel-ring.svg", st->plots_dir);
    struct l5_obs *ob = calloc(1, sizeof *ob);
    if (!ob) pl_fatal("out of memory");
    st->ob = ob;
    st->ring_svg = svg[0] ? svg : NULL;
    pl_todo_reset();
    struct pl_comm *cpg = pl_comm_split(pl_comm_world(), 0, pl_rank(), "cp");
    l5_run_ring(st, cpg, 0);
    pl_comm_free(cpg);
    st->ob = NULL, st->ring_svg = NULL;
    const struct l5_ring_obs *o = &ob->ring;
    double mine[2] = {o->fwd_flops + o->bwd_flops, !o->part[0].code && o->ran}, *all = NULL;
    if (pl_rank() == 0) all = calloc(2 * (size_t)cp, sizeof *all);
    PL_CHECK_MPI(MPI_Gather(mine, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    if (pl_rank() == 0) {
        const struct l5_ring_case kc = l5_ring_case_of(st, 0, cp);
        double mean = 0;
        int ok = 1;
        for (int r = 0; r < cp; r++) mean += all[2 * r] / cp, ok &= all[2 * r + 1] > 0;
        printf("#\n# ring attention (the second part), cp=%d, B=%d T=%d C=%d, %d heads: "
               "attention FLOPs per rank, forward and backward, from the ledger\n# %5s %14s "
               "%12s %22s\n", cp, kc.B, kc.T, kc.C, kc.NH, "rank", "FLOPs", "x mean",
               "contiguous x mean");
        for (int r = 0; r < cp; r++)
            printf("  %5d %14.0f %12.3f %22.3f\n", r, all[2 * r], mean > 0 ? all[2 * r] / mean : 0,
                   (4.0 * r + 3) / (2.0 * cp + 1));
        printf("# correct: %s; rank 0 sent %.0f bytes forward, %.0f backward\n", ok ? "yes" : "NO",
               o->fwd_bytes, o->bwd_bytes);
        if (cp > 1)
            printf("# handout: at cp = %d a contiguous split gives the last rank %d blocks of "
                   "Tc x Tc per sequence where the first has 3 and the mean is %d: %.2fx the "
                   "mean\n",
                   cp, 4 * cp - 1, 2 * cp + 1, (4.0 * cp - 1) / (2.0 * cp + 1));
        if (o->traced && ok)
            printf("# handout: at cp = %d the forward's %.1f ms of K/V transfers run behind %.1f ms "
                   "of attention compute\n", cp, 1e3 * o->comm, 1e3 * o->compute);
        if (svg[0] && o->traced) printf("wrote %s\n", svg);
        free(all);
    }
    free(ob);
}

void l5_bench(const struct gr_args *args)
{
    /* the options' order: driver.c's L5_OPTIONS */
    struct l5_state st = {.seed = args->seed, .seq = args->opt[0].i, .in_bench = 1,
                          .plots_dir = args->opt[1].s};
    struct pl_model_config c = l5_config(&st, 0);
    const int B = 2, T = st.seq ? st.seq : 16;
    pl_print0("# Lab 5 sequence parallelism: %s, activation bytes per rank kept between one "
              "block's forward\n# and backward (b=%d, s=%d, h=%d, %d heads, d_ff %d), from the "
              "memory ledger; the kit's fp32\n# formulas beside Korthikanti et al.'s 16-bit "
              "ones for the same shape\n#\n", args->label, B, T, c.d_model, c.n_heads, c.d_ff);
    double meas[9] = {0};
    int nt = 0;
    pl_print0("# %3s %12s %12s %12s %12s %14s %14s %8s\n", "t", "no TP", "TP", "TP+SP",
              "TP+SP kit", "K. TP 16-bit", "K. TP+SP 16b", "correct");
    for (int t = 1; t <= 4 && t <= pl_size(); t *= 2) {
        char err[320];
        if (pl_sp_seq_error(&c, t, T, err, sizeof err)) {
            pl_print0("  %3d   refused: %s\n", t, err);
            continue;
        }
        struct pl_comm *tp = pl_comm_split(pl_comm_world(), pl_rank() < t ? 0 : -1,
                                           pl_rank(), "tp");
        double v[2] = {0, 0};
        int ok = 1;
        if (tp) {
            struct l5_block_run run;
            memset(&run, 0, sizeof run);
            struct l5_case kc = {B, T, 1, 0, 1, 1, 0, 1, 0, L5_DROPOUT, "tp"};
            struct l5_obs ob;
            memset(&ob, 0, sizeof ob);
            st.ob = &ob;
            pl_todo_reset();
            l5_run_block_case(&st, tp, &kc, 0, 0, &run);
            st.ob = NULL;
            v[0] = run.held;
            ok = !ob.part[L5_CORRECT].code && !pl_todo_what();
            pl_comm_free(tp);
        }
        v[1] = ok;
        PL_CHECK_MPI(MPI_Bcast(v, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD));
        double s = T, b = B, h = c.d_model, as = c.n_heads;
        double ktp = s * b * h * (10 + 24.0 / t + 5 * as * s / (h * t));
        double ksp = s * b * h * (34.0 / t + 5 * as * s / (h * t));
        int i = t == 1 ? 0 : t == 2 ? 1 : 2;
        meas[i] = acts_bytes_of(0, &c, t, B, T);
        meas[3 + i] = acts_bytes_of(1, &c, t, B, T);
        meas[6 + i] = v[0];
        nt = i + 1;
        pl_print0("  %3d %12.0f %12.0f %12.0f %12.0f %14.0f %14.0f %8s\n", t, meas[i],
                  meas[3 + i], v[0], pl_sp_block_act_bytes(&c, t, B, T), ktp, ksp,
                  v[1] > 0 ? "yes" : "NO");
        if (t > 1 && v[1] > 0) {
            char a[32], b[32];
            pl_print0("# handout: at t = %d a rank keeps %s per block with sequence parallelism "
                      "where Lab 4's TP keeps %s\n", t, pl_format_bytes(v[0], a, sizeof a),
                      pl_format_bytes(meas[3 + i], b, sizeof b));
        }
    }
    /* the graded shape, whatever --seq says: the handout's sentences are about it */
    handout_split_figures("this lab's block", "this lab's block", &c, 2, c.seq_len);
    struct pl_model_config g = l5_gpt3_block();
    handout_split_figures("the GPT-3 block of the questions", "the GPT-3 block", &g, L5_Q_B,
                          L5_Q_S);
    if (st.plots_dir && pl_rank() == 0) {
        double m[9];
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < nt; i++) m[k * nt + i] = meas[k * 3 + i];
        plot_layout(st.plots_dir);
        plot_bytes(st.plots_dir, &c, B, T, m, nt);
    }
    if (pl_size() > 1) bench_ring(&st);
}

/* ---- perf mode: the SP block on the wall clock against the kit's parts ---- */

/* The student's block forward and backward on PERF_B sequences against the kit's parts of the
 * same work measured in the same run: the single-device block (lib/model.h) on PERF_B/t
 * sequences, the same products and the same local layernorms and residuals as one rank
 * does, then the library's all-gathers and reduce-scatters of the activation a block makes on
 * the TP group. The harness pairs the rounds (report.h). The modelled timeline grades what
 * the ledger counts; this grades what the code costs. */
#define PERF_B 8     /* sequences: t = 1, 2 and 4 divide it */
#define PERF_REPS 10 /* blocks per timed round */
#define PERF_ROUNDS 5
#define PERF_BATCHES 3

struct l5_perf {
    struct pl_comm *tp;
    struct l5_block k;
    struct pl_sp_block_acts a;
    struct pl_block_acts ra;
    float *by, *bdx, *full, *part; /* the kit's: its block's outputs, the gathered [N, C] */
};

static void perf_student(void *ctx)
{
    struct l5_perf *pf = ctx;
    sp_block_forward(pf->tp, &pf->k.c, 0, &pf->k.sp, &pf->a, &pf->k.ctx, pf->k.lx, pf->k.ly);
    sp_block_backward(pf->tp, &pf->k.c, 0, &pf->k.sp, &pf->k.sg, &pf->a, &pf->k.ctx, pf->k.ldy,
                      pf->k.ldx);
}

static void perf_kit(void *ctx)
{
    struct l5_perf *pf = ctx;
    pl_block_forward(&pf->k.c, 0, &pf->k.p, &pf->ra, &pf->k.ctx, pf->k.x, pf->by);
    pl_block_backward(&pf->k.c, 0, &pf->k.p, &pf->k.g, &pf->ra, &pf->k.ctx, pf->k.dy, pf->bdx);
    for (int i = 0; i < 4; i++) {
        pl_all_gather(pf->tp, pf->k.lx, pf->full, pf->k.nl);
        pl_reduce_scatter(pf->tp, pf->full, pf->part, pf->k.nl, PL_SUM);
    }
}

/* Seconds per block of one side, the slowest rank's. */
static double perf_round(void *ctx, int mine)
{
    return gr_perf_round(perf_kit, perf_student, ctx, PERF_REPS, mine);
}

int l5_probe(struct l5_state *st)
{
    if (st->kind != L5_BLOCK) pl_usage_error_all("--mode perf: Lab 5 times --op block only");
    struct l5_perf *pf = st->perf = calloc(1, sizeof *pf);
    if (!pf) pl_fatal("out of memory");
    struct pl_grid grid;
    char deg[32];
    snprintf(deg, sizeof deg, "tp=%d", pl_size());
    pl_grid_init_or_die(&grid, "tp", deg, pl_size());
    pf->tp = pl_grid_comm(&grid, pl_comm_world(), pl_grid_axis(&grid, "tp"));
    struct l5_case kc = {PERF_B, 16, 0, 0, 0, 0, 0, 1, 0, 0.0f, "tp"};
    struct l5_block *k = &pf->k;
    l5_block_case_new(st, pf->tp, &kc, 0, k);
    gr_case("SP block of %d sequences, t=%d, beside the kit's block on %d and the "
            "collectives", PERF_B, k->t, PERF_B / k->t);
    k->lx = l5_local_rows(k->x, k->B, k->T, k->C, k->t, k->r);
    k->ldy = l5_local_rows(k->dy, k->B, k->T, k->C, k->t, k->r);
    k->ly = gr_op_alloc(k->nl, "perf y"), k->ldx = gr_op_alloc(k->nl, "perf dx");
    pl_sp_block_acts_new(&pf->a, &k->c, k->t, k->B, k->T);
    pl_block_acts_new(&pf->ra, &k->c, k->B / k->t, k->T);
    pf->by = gr_op_alloc(k->nl, "perf kit y"), pf->bdx = gr_op_alloc(k->nl, "perf kit dx");
    pf->full = gr_op_alloc(k->nc, "perf gathered"), pf->part = gr_op_alloc(k->nl, "perf part");
    perf_student(pf);
    return 1;
}

double l5_perf(struct l5_state *st)
{
    struct l5_perf *pf = st->perf;
    pl_comm_set_checks(0);
    perf_kit(pf);
    struct gr_perf p;
    gr_perf_compare(perf_round, pf, PERF_ROUNDS, PERF_BATCHES, &p);
    pl_comm_set_checks(1);
    char base[200];
    snprintf(base, sizeof base, "the kit's block on %d sequences and the library's "
             "all-gathers and reduce-scatters of [N, C] that a block's conjugates make, one "
             "after the other,",
             PERF_B / pf->k.t);
    double f = gr_perf_report_step(&p, (double)pf->k.B * pf->k.T, base,
                                   "the same products and the same bytes in both: look for "
                                   "hand-written loops where lib has an op, buffers allocated "
                                   "or zeroed that the block does not need, or whole-sequence "
                                   "copies outside the TP region (section 5)",
                                   "tokens_per_s_sp_block");
    float *bufs[] = {pf->by, pf->bdx, pf->full, pf->part};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) pl_mem_free(bufs[i]);
    pl_sp_block_acts_free(&pf->a);
    pl_block_acts_free(&pf->ra);
    l5_block_case_free(&pf->k);
    pl_comm_free(pf->tp);
    free(pf);
    st->perf = NULL;
    return f;
}
