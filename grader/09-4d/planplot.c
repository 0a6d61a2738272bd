/* planplot.c: the picture of section 3.4 (make plots LAB=09, 09-4d-plan.svg): for each
 * 8-rank run of the table (planrun.c), two stacked bars, the planner's figure for its
 * configuration and stage 0's largest peak of each category, params, grads, optim and
 * activ, and a mark at the device's peak, which adds what the planner does not model (the
 * scratch and the communication buffers). Drawn by rank 0 from the rows it printed. */
#include <math.h>
#include <stdio.h>

#include "lab09.h"
#include "svg.h"

static const char *const CAT_NAME[4] = {"params", "grads", "optim (AdamW m, v)", "activations"};
static const char *const CAT_FILL[4] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759"};

static double sum4(const double v[4])
{
    return v[0] + v[1] + v[2] + v[3];
}

/* One stacked bar at x, w wide, from the axis at y0 + h, top kB to h pixels; pale for the
 * plan. */
static void stack(FILE *f, double x, double w, double y0, double h, double top,
                  const double v[4], int pale)
{
    double y = y0 + h;
    for (int c = 0; c < 4; c++) {
        const double bh = h * v[c] / 1e3 / top;
        y -= bh;
        pl_svg_rect(f, x, y, w, bh, CAT_FILL[c], pale ? "fill-opacity=\"0.45\"" : "");
    }
}

static void draw(FILE *f, const struct l9_plan_row *rows, int n, const char *who)
{
    const double x0 = 90, y0 = 86, w = 860, h = 320;
    char t[256];
    double top = 0;
    for (int j = 0; j < n; j++)
        top = fmax(top, fmax(fmax(sum4(rows[j].plan), sum4(rows[j].run)), rows[j].device));
    const double step = pl_svg_nice_step(top > 0 ? top / 1e3 : 1, 5);
    top = ceil(top / 1e3 / step) * step;
    pl_svg_begin(f, 980, 540, 13);
    snprintf(t, sizeof t, "Lab 9, %s: a rank of stage 0, planned against measured, every "
             "8-rank run (m = %d microbatches of %d sequences)", who, L9_MICRO, L9_MB_SEQS);
    pl_svg_text(f, x0, 30, "font-weight=\"bold\"", t);
    pl_svg_text(f, x0, 50, "", "left, pale: Lab 8's planner (pl_plan_memory, fp32 no_dropout "
                "vocab_whole) for the run's configuration;");
    pl_svg_text(f, x0, 66, "", "right: the memory ledger's peak of each category over the "
                "steps; black mark: the device's peak, which adds the scratch and buffers");
    pl_svg_y_grid(f, x0, y0, w, h, top, step, 55, "memory of a rank (kB, 1 kB = 1000 bytes)");
    const double slot = w / n, bw = slot * 0.3;
    for (int j = 0; j < n; j++) {
        const double x = x0 + j * slot + slot * 0.15;
        stack(f, x, bw, y0, h, top, rows[j].plan, 1);
        stack(f, x + bw + 2, bw, y0, h, top, rows[j].run, 0);
        const double dy = y0 + h - h * rows[j].device / 1e3 / top;
        pl_svg_line(f, x + bw, dy, x + 2 * bw + 6, dy, "black", "stroke-width=\"2\"");
        pl_svg_text(f, x + bw + 1, y0 + h + 16, "text-anchor=\"middle\"", rows[j].name);
        snprintf(t, sizeof t, "%+.1f%%",
                 100 * (sum4(rows[j].run) - sum4(rows[j].plan)) / sum4(rows[j].plan));
        pl_svg_text(f, x + bw + 1, y0 + h + 32, "text-anchor=\"middle\" fill=\"#555\"", t);
    }
    pl_svg_line(f, x0, y0 + h, x0 + w, y0 + h, "black", "");
    pl_svg_line(f, x0, y0, x0, y0 + h, "black", "");
    for (int c = 0; c < 4; c++) pl_svg_swatch(f, x0 + 190 * c, y0 + h + 60, CAT_FILL[c], CAT_NAME[c]);
    pl_svg_text(f, x0, y0 + h + 90, "fill=\"#555\"", "under each run: what stage 0 holds "
                "(the four categories summed) against the plan's total; the plan test "
                "bounds it at 10% either way");
}

void l9_plan_draw(const char *svg, const struct l9_plan_row *rows, int n, const char *who)
{
    FILE *f = fopen(svg, "w");
    if (!f) pl_usage_error("--plan-svg %s: cannot write it", svg);
    draw(f, rows, n, who);
    if (pl_svg_end(f) != 0 || fclose(f) != 0) {
        remove(svg);
        pl_fatal("writing %s failed", svg);
    }
    printf("%s: wrote every run's memory beside the plan's to %s\n", who, svg);
}
