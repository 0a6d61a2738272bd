/* plots.c: Lab 7's figures, written as plain SVG (no plotting library: the kit draws its own
 * pictures so that `make plots` works on any machine). */
#include "plots.h"

#include <stdio.h>

#include "check.h"
#include "svg.h"

#define W 640.0
#define H 360.0
#define LEFT 60.0
#define RIGHT 20.0
#define TOP 40.0
#define BOTTOM 50.0

static const char *const COLOURS[] = {"#4878d0", "#ee854a", "#6acc64", "#d65f5f"};

static FILE *open_svg(const char *path, const char *title)
{
    FILE *f = fopen(path, "w");
    if (!f) pl_usage_error("cannot write %s (does its folder exist?)", path);
    pl_svg_begin(f, W, H, 12);
    pl_svg_text(f, LEFT, 20, "font-size=\"14\"", title);
    return f;
}

/* The y axis from 0 to top with 4 ticks, and the x axis line. */
static void axes(FILE *f, double top)
{
    double y0 = H - BOTTOM;
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n",
            LEFT, y0, W - RIGHT, y0);
    for (int i = 0; i <= 4; i++) {
        double v = top * i / 4, y = y0 - (y0 - TOP) * i / 4;
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                LEFT, y, W - RIGHT, y);
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.3g</text>\n", LEFT - 6,
                y + 4, v);
    }
}

static void legend(FILE *f, int i, const char *label)
{
    double x = W - RIGHT - 190, y = TOP + 8 + 16 * i;
    fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"10\" fill=\"%s\"/>\n", x,
            y - 9, COLOURS[i % 4]);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">%s</text>\n", x + 18, y, label);
}

void l7_plot_tokens(const char *path, int E, const long *a, const long *b, const char *label_a,
                 const char *label_b, const char *title)
{
    FILE *f = open_svg(path, title);
    double top = 1;
    for (int e = 0; e < E; e++) {
        if (a[e] > top) top = (double)a[e];
        if (b[e] > top) top = (double)b[e];
    }
    top *= 1.1;
    axes(f, top);
    double slot = (W - LEFT - RIGHT) / E, bw = slot * 0.35, y0 = H - BOTTOM;
    for (int e = 0; e < E; e++) {
        double x = LEFT + slot * e + slot * 0.15;
        const long v[2] = {a[e], b[e]};
        for (int s = 0; s < 2; s++) {
            double h = (y0 - TOP) * (double)v[s] / top;
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                       "fill=\"%s\"/>\n", x + bw * s, y0 - h, bw, h, COLOURS[s]);
        }
        fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">expert %d</text>\n",
                x + bw, y0 + 18, e);
    }
    legend(f, 0, label_a);
    legend(f, 1, label_b);
    if (pl_svg_end(f) != 0 || fclose(f) != 0) pl_fatal("could not write %s", path);
}

void l7_plot_lines(const char *path, int nx, const float *x, int nseries, const double *y,
                const char *const *labels, const char *title, const char *xlabel)
{
    FILE *f = open_svg(path, title);
    double top = 0, y0 = H - BOTTOM, xmax = x[nx - 1] > 0 ? x[nx - 1] : 1;
    for (int i = 0; i < nx * nseries; i++)
        if (y[i] > top) top = y[i];
    top = top > 0 ? top * 1.15 : 1;
    axes(f, top);
    for (int i = 0; i < nx; i++) {
        double px = LEFT + (W - LEFT - RIGHT) * x[i] / xmax;
        fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%g</text>\n", px, y0 + 18,
                (double)x[i]);
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n",
            (W + LEFT) / 2, H - 12, xlabel);
    for (int s = 0; s < nseries; s++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
                COLOURS[s % 4]);
        for (int i = 0; i < nx; i++)
            fprintf(f, "%.1f,%.1f ", LEFT + (W - LEFT - RIGHT) * x[i] / xmax,
                    y0 - (y0 - TOP) * y[s * nx + i] / top);
        fprintf(f, "\"/>\n");
        legend(f, s, labels[s]);
    }
    if (pl_svg_end(f) != 0 || fclose(f) != 0) pl_fatal("could not write %s", path);
}
