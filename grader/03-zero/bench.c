/* bench.c: Lab 3's perf mode (the student's stage timed beside the kit's own parts, each
 * alone: the model's compute, then the library's collectives of the stage) and its bench
 * mode (measured memory per stage, a table and a bar chart, the figures the handout
 * quotes). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_comm.h"
#include "lab03.h"
#include "prefetch.h"
#include "svg.h"
#include "todo.h"

/* ---- perf mode: the student's stage beside the kit's own parts, each alone ---- */

/* Seconds of the fastest of iters steps, each the slowest rank's: a step lasts a few
 * milliseconds here, so single steps are timed and noise, which only ever slows a step
 * down, is left out by taking the best. step(ctx) is one step of either side. */
static double best_step(void (*step)(struct l3_state *l), struct l3_state *l, int iters)
{
    double best = 1e30;
    for (int i = 0; i < iters; i++) {
        pl_ops_wait(); /* the GPU build queues ops: time only this step's */
        PL_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        double t0 = MPI_Wtime();
        step(l);
        pl_ops_wait();
        double t = MPI_Wtime() - t0, tmax;
        PL_CHECK_MPI(MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
        if (tmax < best) best = tmax;
    }
    return best;
}

static void student_step(struct l3_state *l)
{
    zero_step(l->z, l->b.tokens, l->b.targets, l->b.B);
}

/* The serial bound of a step of the stage from the kit's parts: the model's forward and
 * backward on this rank's slice and AdamW on 1/n of the parameters (lib/model.h), then the
 * library's collectives of the stage on every unit, one after the other: a reduce-scatter
 * of the gradient and an all-gather of the parameters (stage 3: one more all-gather, the
 * parameters are gathered for the forward and again for the backward). */
static void parts_step(struct l3_state *l)
{
    struct pl_model *m = l->base;
    pl_model_zero_grad(m);
    pl_model_forward(m, l->b.tokens, l->b.targets, l->b.B, NULL);
    pl_model_backward(m, NULL);
    pl_model_adamw_flat(&m->layout, l->own_off, l->own_n, m->params + l->own_off,
                        m->grads + l->own_off, l->mom_m, l->mom_v, 1, &l->setup.opt);
    struct pl_comm *w = pl_comm_world();
    for (int u = 0; u < l->e0.nunits; u++) {
        const struct zero_unit *x = &l->e0.unit[u];
        float *full = l->full + x->full_offset, *own = l->shard + x->shard_offset;
        pl_reduce_scatter(w, full, own, x->chunk, PL_AVG);
        for (int k = 0; k < (l->stage == 3 ? 2 : 1); k++) pl_all_gather(w, own, full, x->chunk);
    }
}

static double perf_round(void *ctx, int mine)
{
    return best_step(mine ? student_step : parts_step, ctx, L3_PERF_ITERS);
}

int l3_probe(struct l3_state *l)
{
    int n = pl_size(), me = pl_rank();
    gr_case("ZeRO-%d step time on %d ranks beside the kit's compute and collectives, each alone",
            l->stage, n);
    l3_group_open(&l->grp, L3_CASE_CLIP_DEFAULT);
    l->z = zero_new(&l->setup.cfg, &l->setup.opt, l->stage, l->stage == 3, l->grp.comm);
    gr_batch_new(&l->b, &l->setup, me, n);
    gr_batch_load(&l->b, 0);
    if (!gr_todo_any()) student_step(l);
    return 1;
}

double l3_perf(struct l3_state *l)
{
    int n = pl_size(), me = pl_rank();
    l->base = pl_model_new(&l->setup.cfg, PL_MODEL_ALL);
    l->own_n = l->lay.numel / (size_t)n;
    l->own_off = (size_t)me * l->own_n;
    l->mom_m = pl_mem_alloc(l->own_n * sizeof(float), PL_MEM_OPTIM, PL_DEVICE, "lab03 base m");
    l->mom_v = pl_mem_alloc(l->own_n * sizeof(float), PL_MEM_OPTIM, PL_DEVICE, "lab03 base v");
    pl_zero(l->mom_m, l->own_n);
    pl_zero(l->mom_v, l->own_n);
    l->full = pl_comm_buf_alloc(l->e0.full_numel, "lab03 base full");
    l->shard = pl_comm_buf_alloc(l->e0.shard_numel, "lab03 base shard");
    pl_comm_set_checks(0);
    parts_step(l);
    struct gr_perf pf;
    gr_perf_compare(perf_round, l, L3_PERF_ROUNDS, L3_PERF_BATCHES, &pf);
    pl_comm_set_checks(1);
    char baseline[96], metric[32];
    snprintf(baseline, sizeof baseline, "the kit's compute and the ZeRO-%d collectives, one "
             "after the other,", l->stage);
    snprintf(metric, sizeof metric, "zero%d_tokens_per_s", l->stage);
    double f = gr_perf_report_step(&pf, (double)L3_GLOBAL_B * L3_SEQ_LEN, baseline,
                                   "the same collectives on the same bytes: look for a buffer "
                                   "allocated per element or per step that need not be, copies "
                                   "the algorithm does not need, or waits that serialise the "
                                   "prefetch", metric);
    pl_comm_buf_free(l->shard);
    pl_comm_buf_free(l->full);
    pl_mem_free(l->mom_v);
    pl_mem_free(l->mom_m);
    pl_model_free(l->base);
    gr_batch_free(&l->b);
    return f;
}

/* ---- report mode: measured memory per stage, a table and a bar chart ---- */

#define NBARS 5

struct bar {
    char label[32];
    int stage;
    double measured[4]; /* params, grads, optim, activ: the largest rank's peak */
    double formula[3];
};

static void write_svg(const char *path, const struct bar *bars, int nb, int n, double psi)
{
    FILE *f = fopen(path, "w");
    if (!f) pl_usage_error("--svg %s: cannot write the file", path);
    const int W = 640, H = 360, left = 70, right = 150, top = 40, bottom = 50;
    double maxv = 0;
    for (int i = 0; i < nb; i++) {
        double t = bars[i].measured[0] + bars[i].measured[1] + bars[i].measured[2] +
                   bars[i].measured[3];
        double tf = bars[i].formula[0] + bars[i].formula[1] + bars[i].formula[2];
        if (t > maxv) maxv = t;
        if (tf > maxv) maxv = tf;
    }
    maxv *= 1.08;
    const char *colors[4] = {"#4c72b0", "#dd8452", "#55a868", "#c4c4c4"};
    const char *names[4] = {"params (4Psi)", "grads (4Psi)", "optim m, v (8Psi)",
                            "activations"};
    double plot_w = W - left - right, plot_h = H - top - bottom;
    double slot = plot_w / nb, bw = slot * 0.55;
    char txt[160];
    pl_svg_begin(f, W, H, 12);
    snprintf(txt, sizeof txt, "Memory per rank, measured by the memory ledger (Psi = %.0f, %d "
             "ranks, fp32)", psi, n);
    pl_svg_text(f, left, 20, "font-size=\"14\"", txt);
    for (int k = 0; k <= 4; k++) {
        double v = maxv * k / 4, y = top + plot_h - plot_h * k / 4;
        pl_svg_line(f, left, y, left + plot_w, y, "#ddd", NULL);
        snprintf(txt, sizeof txt, "%.0f kB", v / 1e3);
        pl_svg_text(f, left - 6, y + 4, "text-anchor=\"end\"", txt);
    }
    const char *dashed = "stroke-width=\"2\" stroke-dasharray=\"4 3\"";
    for (int i = 0; i < nb; i++) {
        double x = left + slot * i + (slot - bw) / 2, y = top + plot_h;
        for (int c = 0; c < 4; c++) {
            double h = plot_h * bars[i].measured[c] / maxv;
            y -= h;
            pl_svg_rect(f, x, y, bw, h, colors[c], NULL);
        }
        double tf = bars[i].formula[0] + bars[i].formula[1] + bars[i].formula[2];
        double yf = top + plot_h - plot_h * tf / maxv;
        pl_svg_line(f, x - 4, yf, x + bw + 4, yf, "black", dashed);
        double t = bars[i].measured[0] + bars[i].measured[1] + bars[i].measured[2] +
                   bars[i].measured[3];
        snprintf(txt, sizeof txt, "%.0f kB", t / 1e3);
        pl_svg_text(f, x + bw / 2, top + plot_h - plot_h * t / maxv - 6,
                    "text-anchor=\"middle\"", txt);
        pl_svg_text(f, x + bw / 2, top + plot_h + 18, "text-anchor=\"middle\"", bars[i].label);
    }
    double lx = left + plot_w + 16;
    for (int c = 3; c >= 0; c--) {
        double ly = top + 20 + (3 - c) * 20;
        pl_svg_rect(f, lx, ly - 10, 12, 12, colors[c], NULL);
        pl_svg_text(f, lx + 18, ly, NULL, names[c]);
    }
    pl_svg_line(f, lx, top + 110, lx + 12, top + 110, "black", dashed);
    pl_svg_text(f, lx + 18, top + 114, NULL, "ZeRO formula");
    pl_svg_text(f, lx + 18, top + 130, NULL, "(model state)");
    if (pl_svg_end(f)) pl_usage_error("--svg %s: cannot write the file", path);
    fclose(f);
}

/* One bar of the chart: the peak per category of the student's stage over two steps (the
 * largest rank's) and its formula; 0 when a stub was reached. */
static int bench_stage(const struct gr_train_setup *setup, int stage, int prefetch, double psi,
                       struct bar *bar)
{
    int n = pl_size();
    bar->stage = stage;
    snprintf(bar->label, sizeof bar->label, "ZeRO-%d%s", stage, prefetch ? "+prefetch" : "");
    double base[PL_MEM_NCAT];
    l3_mem_current(base);
    pl_mem_reset_peak();
    pl_todo_reset();
    struct pl_comm *comm = l3_comm_open();
    struct zero *z = zero_new(&setup->cfg, &setup->opt, stage, prefetch, comm);
    struct gr_batch b;
    gr_batch_new(&b, setup, pl_rank(), n);
    if (!gr_todo_any())
        for (int s = 0; s < 2; s++) {
            gr_batch_load(&b, s);
            zero_step(z, b.tokens, b.targets, b.B);
            if (gr_todo_any()) break;
        }
    int todo = gr_todo_any();
    gr_batch_free(&b);
    struct pl_mem_stats st;
    pl_mem_get_stats(&st);
    const int cats[4] = {PL_MEM_PARAMS, PL_MEM_GRADS, PL_MEM_OPTIM, PL_MEM_ACTIV};
    for (int c = 0; c < 4; c++) {
        double mine = (double)st.peak[cats[c]] - base[cats[c]];
        PL_CHECK_MPI(MPI_Allreduce(&mine, &bar->measured[c], 1, MPI_DOUBLE, MPI_MAX,
                                   MPI_COMM_WORLD));
    }
    zero_free(z);
    gr_case_comm_free(comm);
    struct zero_bytes fz = zero_fp32(stage, psi, n);
    bar->formula[0] = fz.params;
    bar->formula[1] = fz.grads;
    bar->formula[2] = fz.optim;
    if (todo) pl_print0("# ZeRO-%d is still a stub (see %s): no row\n", stage, gr_handout());
    return !todo;
}

static void bench_table(const struct bar *bars, int nb, const struct zero_layout *e)
{
    char b[7][32];
    pl_print0("# Lab 3 memory per rank by category: measured peak (the largest rank's) and the "
              "fp32 formula\n# Psi = %zu parameters, %d ranks, full_numel %zu, shard_numel %zu "
              "(padding %zu)\n", e->numel, pl_size(), e->full_numel, e->shard_numel,
              e->full_numel - e->numel);
    pl_print0("# %-16s %-16s %12s %12s %12s %12s %12s %12s %12s\n", "stage", "formula",
              "params", "(formula)", "grads", "(formula)", "optim", "(formula)", "activ");
    for (int i = 0; i < nb; i++) {
        for (int c = 0; c < 3; c++) {
            pl_format_bytes(bars[i].measured[c], b[2 * c], sizeof b[0]);
            pl_format_bytes(bars[i].formula[c], b[2 * c + 1], sizeof b[0]);
        }
        pl_format_bytes(bars[i].measured[3], b[6], sizeof b[0]);
        pl_print0("  %-16s %-16s %12s %12s %12s %12s %12s %12s %12s\n", bars[i].label,
                  zero_fp32_text(bars[i].stage), b[0], b[1], b[2], b[3], b[4], b[5], b[6]);
    }
}

/* Appends n to a list of rank counts in words ("2", "2 and 3", "2, 3 and 4"). */
static void list_add(char *list, size_t len, int n, int *count)
{
    char *and = strstr(list, " and ");
    if (and) { /* the last "and" becomes a comma */
        memmove(and + 1, and + 4, strlen(and + 4) + 1);
        and[0] = ',';
    }
    size_t l = strlen(list);
    snprintf(list + l, len - l, "%s%d", l ? " and " : "", n);
    ++*count;
}

/* On 4 ranks, what ZeRO-3 with prefetching holds against 16Psi/Nd: the shard and two
 * gathered units, each a block of 21% of this model. The measured peaks are those of the code
 * benchmarked, so they are the handout's only under --figures (the solution, for that check)
 * and otherwise carry whose they are (label). */
static void bench_working_set(const struct pl_model_layout *lay, const struct bar *bars,
                              int nb, int figures, const char *label)
{
    int n = pl_size(), k = -1;
    for (int i = 0; i < nb; i++)
        if (bars[i].stage == 3 && strstr(bars[i].label, "prefetch")) k = i;
    if (n != 4 || k < 0) return;
    size_t off, block;
    pl_model_part_range(lay, 0, &off, &block);
    struct zero_layout e;
    l3_tight_layout(&e, lay, n, 0);
    struct l3_shape shape = l3_shape_of(&e);
    struct l3_allowance a = l3_stage_allowance(3, &shape, 1);
    double psi = (double)lay->numel;
    char f[32], sh[32], un[32], got[32];
    printf("# handout: one block is %.0f%% of this model\n", 100.0 * (double)block / psi);
    printf("# handout: its shard (%s) and two gathered blocks (%s)\n",
           pl_format_bytes(4.0 * a.shard, sh, sizeof sh),
           pl_format_bytes(4.0 * a.two_units, un, sizeof un));
    const char *tag = figures ? "handout" : label;
    const double *m = bars[k].measured;
    printf("# %s: on 4 ranks ZeRO-3 with prefetching holds %s of parameters against 4Ψ/Nd = "
           "%s (%.1fx)\n", tag, pl_format_bytes(m[0], got, sizeof got),
           pl_format_bytes(a.formula.params, f, sizeof f), m[0] / a.formula.params);
    printf("# %s: its model state peaks at %.2f MB against 16Ψ/Nd = %s\n", tag,
           (m[0] + m[1] + m[2]) / 1e6,
           pl_format_bytes(zero_bytes_total(a.formula), f, sizeof f));
}

/* The figures docs/labs/03-zero.md quotes, one "# handout: TEXT" line each, TEXT verbatim as
 * the handout has it (tests/handout_figures.sh checks that it does): the graded model's
 * sizes and padding, its model state against its activations, and the paper's 7.5B example
 * in mixed precision. */
static void bench_figures(const struct pl_model_layout *lay, const double *ddp)
{
    char g[32], h[32], divides[32] = "", not[32] = "";
    int ndiv = 0, nnot = 0;
    size_t off, block;
    pl_model_part_range(lay, 0, &off, &block);
    for (int n = 2; n <= 4; n++) {
        if (block % (size_t)n) list_add(not, sizeof not, n, &nnot);
        else list_add(divides, sizeof divides, n, &ndiv);
    }
    printf("# handout: Ψ = %s\n", pl_format_count(lay->numel, g, sizeof g));
    printf("# handout: four blocks of %s parameters each, which %s %s not divide%s%s%s\n",
           pl_format_count(block, h, sizeof h), not, nnot > 1 ? "do" : "does",
           ndiv ? " and " : "", divides, ndiv ? (ndiv > 1 ? " do" : " does") : "");
    for (int n = 2; n <= 4; n++) {
        struct zero_layout e;
        l3_tight_layout(&e, lay, n, 0);
        printf("# handout: on %d ranks full_numel is %zu (%zu of padding)\n", n, e.full_numel,
               e.full_numel - e.numel);
    }
    /* The lesson on the lab's own model: at 2 ranks, model state against activations. */
    char st[32], ac[32];
    double state = zero_bytes_total(zero_fp32(0, (double)lay->numel, 2));
    printf("# handout: on 2 ranks a DDP rank holds %s of model state (16Ψ) beside %s of "
           "activations for its %d sequences, %.1f times less\n",
           pl_format_bytes(state, st, sizeof st), pl_format_bytes(ddp[4] / 2, ac, sizeof ac),
           L3_GLOBAL_B / 2, state / (ddp[4] / 2));
    for (int stage = 0; stage <= 3; stage++) {
        double t = zero_bytes_total(zero_mixed(stage, 7.5e9, 64, ZERO_PAPER_K)) / 1e9;
        char text[64];
        snprintf(text, sizeof text, "%s", zero_fp32_text(stage));
        for (char *p; (p = strstr(text, "Psi"));) {
            memmove(p + 2, p + 3, strlen(p + 3) + 1);
            memcpy(p, "Ψ", 2);
        }
        printf("# handout: | %s | %.*f GB |\n", text, t >= 100 ? 0 : 1, t);
    }
}

/* --svg FILE and --plots DIR: gr_args.opt[0] and [1] (driver.c's options). */
void l3_bench(const struct gr_args *a)
{
    const char *svg_path = a->opt[0].s, *plots_dir = a->opt[1].s;
    uint64_t seed = a->seed;
    int n = pl_size();
    struct pl_tokens data = pl_corpus_tokens(pl_mix64(seed + 5), L3_CORPUS_TOKENS);
    struct gr_train_setup setup = l3_graded_setup(&data, seed);
    struct gr_reference ref;
    double ddp[5];
    l3_measure_reference(&ref, &setup, ddp);
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, &setup.cfg);
    struct zero_layout e; /* the code's, when it keeps the invariants */
    l3_layout_of_code(&e, &lay, n, 0);
    double psi = (double)lay.numel;
    struct bar bars[NBARS];
    memset(bars, 0, sizeof bars);
    snprintf(bars[0].label, sizeof bars[0].label, "DDP");
    struct zero_bytes f0 = zero_fp32(0, psi, n);
    for (int c = 0; c < 3; c++) bars[0].measured[c] = ddp[c];
    bars[0].measured[3] = ddp[4] / n; /* the reference's, for a slice of 1/n of the batch */
    bars[0].formula[0] = f0.params;
    bars[0].formula[1] = f0.grads;
    bars[0].formula[2] = f0.optim;
    int nb = 1;
    for (int k = 1; k <= 4; k++)
        nb += bench_stage(&setup, k < 4 ? k : 3, k == 4, psi, &bars[nb]);
    bench_table(bars, nb, &e);
    l3_prefetch_bench(&setup, &e, plots_dir, a->figures ? "handout" : a->label);
    if (svg_path && pl_rank() == 0) {
        write_svg(svg_path, bars, nb, n, psi);
        pl_print0("# bar chart written to %s\n", svg_path);
    }
    if (pl_rank() == 0) {
        bench_figures(&lay, ddp);
        bench_working_set(&lay, bars, nb, a->figures, a->label);
    }
    pl_model_layout_free(&lay);
    gr_reference_free(&ref);
    pl_tokens_free(&data);
}
