/* memory_time.c: the memory ledger over time, drawn (memory_time.h). */
#include "memory_time.h"

#include <stdio.h>
#include <stdlib.h>

#include "check.h"

void l3_mem_series_add(const struct pl_mem_stats *now, void *ctx)
{
    struct l3_mem_series *s = ctx;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 256;
        void *p = realloc(s->v, (size_t)cap * sizeof *s->v);
        if (!p) pl_fatal("out of memory recording the memory ledger over time");
        s->v = p;
        s->cap = cap;
    }
    double *x = s->v[s->n++];
    x[0] = (double)now->current[PL_MEM_PARAMS];
    x[1] = (double)now->current[PL_MEM_GRADS];
    x[2] = (double)now->current[PL_MEM_OPTIM];
    x[3] = (double)now->current[PL_MEM_ACTIV];
}

/* The plot's frame, in pixels. */
struct frame {
    double left, top, w, h; /* the plotting area */
    double maxv;            /* bytes at its top */
    double col;             /* width of one sample */
};

static const char *const COLORS[L3_MEM_SHOWN] = {"#4c72b0", "#dd8452", "#55a868",
                                                  "#c4c4c4"};
static const char *const NAMES[L3_MEM_SHOWN] = {"params", "grads", "optim m, v",
                                                 "activations"};

/* One stepped band per category, stacked: its top edge left to right, then the top of the
 * bands below it right to left. */
static void bands(FILE *f, const struct l3_mem_series *s, const struct frame *fr)
{
    for (int c = 0; c < L3_MEM_SHOWN; c++) {
        fprintf(f, "<path fill=\"%s\" d=\"", COLORS[c]);
        for (int pass = 0; pass < 2; pass++)
            for (int k = 0; k < s->n; k++) {
                int i = pass ? s->n - 1 - k : k;
                double cum = 0;
                for (int b = 0; b < c + (pass == 0); b++) cum += s->v[i][b];
                double y = fr->top + fr->h - fr->h * cum / fr->maxv;
                double x0 = fr->left + fr->col * i, x1 = x0 + fr->col;
                if (pass == 0)
                    fprintf(f, "%s%.2f %.2f L%.2f %.2f ", k ? "L" : "M", x0, y, x1, y);
                else
                    fprintf(f, "L%.2f %.2f L%.2f %.2f ", x1, y, x0, y);
            }
        fprintf(f, "Z\"/>\n");
    }
}

/* Grid lines with their bytes, and the legend at the right. */
static void axes(FILE *f, const struct frame *fr)
{
    for (int k = 0; k <= 4; k++) {
        double y = fr->top + fr->h - fr->h * k / 4;
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                fr->left, y, fr->left + fr->w, y);
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.2f MB</text>\n",
                fr->left - 6, y + 4, fr->maxv * k / 4 / 1e6);
    }
    for (int c = L3_MEM_SHOWN - 1; c >= 0; c--) {
        double ly = fr->top + 20 + (L3_MEM_SHOWN - 1 - c) * 20, lx = fr->left + fr->w + 16;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>\n",
                lx, ly - 10, COLORS[c]);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", lx + 18, ly, NAMES[c]);
    }
}

void l3_mem_series_svg(const char *path, const struct l3_mem_series *s, int n, double psi)
{
    FILE *f = fopen(path, "w");
    if (!f) pl_usage_error("--plots: cannot write %s", path);
    const int W = 720, H = 380;
    struct frame fr = {80, 50, W - 80 - 140, H - 50 - 50, 0, 0};
    int backward = -1;
    for (int i = 0; i < s->n; i++) {
        double t = 0;
        for (int c = 0; c < L3_MEM_SHOWN; c++) t += s->v[i][c];
        if (t > fr.maxv) fr.maxv = t;
        if (backward < 0 && s->v[i][1] > s->v[0][1]) backward = i; /* the first bucket */
    }
    fr.maxv = fr.maxv > 0 ? fr.maxv * 1.08 : 1;
    fr.col = fr.w / (s->n > 0 ? s->n : 1);
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%.0f\" y=\"20\" font-size=\"14\">Rank 0's memory over one ZeRO-3 "
               "step with prefetch, from the memory ledger</text>\n", fr.left);
    fprintf(f, "<text x=\"%.0f\" y=\"36\">Psi = %.0f, %d ranks; each gathered unit and "
               "gradient bucket lives from one allocation to its free</text>\n", fr.left, psi, n);
    axes(f, &fr);
    bands(f, s, &fr);
    if (backward > 0) {
        double x = fr.left + fr.col * backward;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\" "
                   "stroke-dasharray=\"4 3\"/>\n", x, fr.top, x, fr.top + fr.h);
        fprintf(f, "<text x=\"%.1f\" y=\"%.0f\">backward</text>\n", x + 4, fr.top + 12);
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">forward</text>\n", fr.left + 4, fr.top + 12);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">allocations and frees, in "
               "program order</text>\n", fr.left + fr.w / 2, H - 18);
    fprintf(f, "</svg>\n");
    fclose(f);
}

void l3_mem_series_free(struct l3_mem_series *s)
{
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}
