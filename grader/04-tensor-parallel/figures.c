/* figures.c: Lab 4's pictures (`make plots LAB=04`, bench mode with --plots-dir; lab04.h).
 * The f/g figure of Megatron's MLP and attention, drawn from the graded model's shapes and
 * lib/tp_shard.h's split, and the student's own block on the modelled timeline inside a node
 * and across nodes (placement.c runs the blocks; timeline.c replays them). */
#include <stdio.h>

#include "lab04.h"
#include "svg.h"

const char *lab04_plots_dir;

FILE *lab04_svg_open(const char *name, char *path, size_t len, int w, int h)
{
    snprintf(path, len, "%s/%s", lab04_plots_dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        pl_usage_error("--plots-dir %s: cannot write %s (does the folder exist?)",
                       lab04_plots_dir, path);
    pl_svg_begin(f, w, h, 12);
    return f;
}

void lab04_svg_close(FILE *f, const char *path)
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

void lab04_plot_fg(void)
{
    struct pl_model_config c = graded_config();
    const int t = 2;
    char path[1024];
    FILE *f = lab04_svg_open("04-tensor-parallel-fg.svg", path, sizeof path, 1000, 420);
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
    pl_svg_text(f, 10, 372, "", "f: identity forward, all-reduce of dx backward.   "
                "g: all-reduce forward, identity backward.");
    pl_svg_text(f, 10, 392, "fill=\"#555\"", "Blue: split by columns or rows of the weights "
                "(each rank its own); the biases of the row-parallel linears are added once, "
                "after g.");
    lab04_svg_close(f, path);
}
