/* replay_render.c: what a person reads of a replay (replay.h): the per-rank summary table,
 * the text timeline and the SVG picture. Apart from the engine in replay.c, which only
 * computes the modelled times. */
#include "replay.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "svg.h"

/* ---- reports ---- */

/* The unit that shows t with a few digits before the point. */
static void pick_unit(double t, const char **unit, double *scale)
{
    if (t >= 1.0) *unit = "s", *scale = 1.0;
    else if (t >= 1e-3) *unit = "ms", *scale = 1e3;
    else *unit = "us", *scale = 1e6;
}

void pl_replay_print_summary(FILE *f, const struct pl_replay *r)
{
    const char *u;
    double k;
    pick_unit(r->step_time, &u, &k);
    fprintf(f, "modelled step time %.3f %s, idle fraction %.4f\n", r->step_time * k, u,
            pl_replay_idle_fraction(r));
    fprintf(f, "%5s %12s %12s %12s %12s %12s   (%s)\n", "rank", "end", "compute", "comm",
            "exposed", "idle", u);
    for (int i = 0; i < r->nranks; i++) {
        const struct pl_rank_time *t = &r->rank[i];
        fprintf(f, "%5d %12.3f %12.3f %12.3f %12.3f %12.3f\n", i, t->end * k, t->compute * k,
                t->comm * k, t->exposed_comm * k, t->idle * k);
    }
}

static char compute_letter(const struct pl_event *e)
{
    unsigned char c = (unsigned char)e->label[0];
    return isalnum(c) ? (char)c : 'C';
}

/* Paints c over the cells whose midpoints lie in [t0, t1); a span too short to hold a
 * midpoint still shows in its first cell when that cell is free, so no activity vanishes. */
static void paint(char *row, int width, double dt, double t0, double t1, char c)
{
    if (!(t1 > t0)) return;
    int a = (int)ceil(t0 / dt - 0.5), b = (int)ceil(t1 / dt - 0.5);
    if (a < 0) a = 0;
    if (b > width) b = width;
    if (a >= b) {
        int cell = (int)(t0 / dt);
        if (cell >= 0 && cell < width && row[cell] == '.') row[cell] = c;
        return;
    }
    for (int i = a; i < b; i++) row[i] = c;
}

void pl_replay_print_timeline(FILE *f, const struct pl_merged_trace *m,
                              const struct pl_replay *r, int width)
{
    if (width < 1) width = 1;
    const char *u;
    double k;
    pick_unit(r->step_time, &u, &k);
    double dt = r->step_time > 0.0 ? r->step_time / width : 1.0;
    fprintf(f, "modelled timeline: 0 .. %.3f %s, one column = %.3g %s; letters: compute (first "
               "letter of the span), '=': comm stream busy, '.': idle\n",
            r->step_time * k, u, dt * k, u);
    char *row = calloc((size_t)width + 1, 1);
    if (!row) pl_fatal("out of memory for a %d-column timeline", width);
    for (int rank = 0; rank < r->nranks; rank++) {
        memset(row, '.', (size_t)width);
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < m->nevents[rank]; i++) {
                const struct pl_event *e = &m->events[rank][i];
                const struct pl_span_time *sp = &r->span[rank][i];
                if (pass == 0 && sp->stream == 1) paint(row, width, dt, sp->start, sp->end, '=');
                if (pass == 1 && e->type == PL_EV_COMPUTE)
                    paint(row, width, dt, sp->start, sp->end, compute_letter(e));
            }
        fprintf(f, "rank %3d |%s|\n", rank, row);
    }
    free(row);
}

/* ---- SVG ---- */

static const char *const palette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948",
                                      "#9c755f", "#ff9da7", "#bab0ac", "#86bcb6", "#d37295"};
#define COMM_COLOR "#e15759"
#define SEND_COLOR "#76b7b2"
#define WAIT_COLOR "#d9d9d9"

/* Forward, backward and weight-gradient get fixed colours, so pipeline pictures read alike. */
static const char *letter_color(char c)
{
    switch (c) {
    case 'F': return palette[0];
    case 'B': return palette[1];
    case 'W': return palette[2];
    default: return palette[3 + (unsigned char)c % 7];
    }
}

/* The class of e's collective under st, or -1 (the default colour). */
static int comm_class(const struct pl_merged_trace *m, const struct pl_event *e,
                      const struct pl_replay_svg_style *st)
{
    if (!st || !st->group_class || e->type != PL_EV_ISSUE) return -1;
    for (int g = 0; g < m->ngroups; g++)
        if (m->groups[g].id == e->group)
            return st->group_class[g] >= 0 && st->group_class[g] < st->nclasses
                       ? st->group_class[g] : -1;
    return -1;
}

/* The legend's next swatch, six to a row from (x0, y0). */
static void legend_item(FILE *f, double x0, double y0, int *item, const char *color,
                        const char *name)
{
    pl_svg_swatch(f, x0 + 170 * (*item % 6), y0 + 20 * (*item / 6), color, name);
    (*item)++;
}

int pl_replay_write_svg(const struct pl_merged_trace *m, const struct pl_replay *r,
                        const char *title, const char *path)
{
    return pl_replay_write_svg_styled(m, r, title, NULL, path);
}

int pl_replay_write_svg_styled(const struct pl_merged_trace *m, const struct pl_replay *r,
                               const char *title, const struct pl_replay_svg_style *style,
                               const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    const double left = 80, plot = 1000, top = 40, lane = 16, gap = 2, block = 2 * lane + gap + 10;
    double step = r->step_time > 0.0 ? r->step_time : 1.0;
    double axis_y = top + r->nranks * block + 4;
    int used[256] = {0};
    const char *first_label[256] = {0}; /* names the legend entry of each letter */
    int ncl = style && style->classes ? style->nclasses : 0;
    int *class_used = calloc((size_t)(ncl > 0 ? ncl : 1), sizeof *class_used);
    if (!class_used) pl_fatal("out of memory for the timeline's legend");
    int default_used = style == NULL; /* the plain legend always lists "collective" */
    const int one_compute = style && style->compute_name;
    for (int rank = 0; rank < r->nranks; rank++)
        for (int i = 0; i < m->nevents[rank]; i++) {
            const struct pl_event *e = &m->events[rank][i];
            if (e->type == PL_EV_COMPUTE) {
                unsigned char c = (unsigned char)compute_letter(e);
                used[c] = !one_compute;
                if (!first_label[c]) first_label[c] = e->label;
            } else if (e->type == PL_EV_ISSUE) {
                int c = comm_class(m, e, style);
                if (c >= 0) class_used[c] = 1;
                else default_used = 1;
            }
        }
    int nlegend = 2 + default_used + one_compute;
    for (int c = 0; c < 256; c++) nlegend += used[c];
    for (int c = 0; c < ncl; c++) nlegend += class_used[c];
    const char *note = style ? style->note : NULL;
    double height = axis_y + 40 + 20 * ((nlegend + 5) / 6) + 10 + (note ? 24 : 0);
    double width = left + plot + 30;
    pl_svg_begin(f, width, height, 11);
    fprintf(f, "<text x=\"%.0f\" y=\"22\" font-size=\"15\" font-weight=\"bold\">", left);
    pl_svg_escape(f, title ? title : "modelled timeline");
    const char *u;
    double k;
    pick_unit(r->step_time, &u, &k);
    fprintf(f, " (step %.3f %s, idle %.1f%%)</text>\n", r->step_time * k, u,
            100.0 * pl_replay_idle_fraction(r));

    for (int rank = 0; rank < r->nranks; rank++) {
        double y = top + rank * block;
        char name[32];
        snprintf(name, sizeof name, "rank %d", rank);
        pl_svg_text(f, left - 8, y + lane + 4, "text-anchor=\"end\"", name);
        pl_svg_rect(f, left, y, plot, 2 * lane + gap, "#f7f7f7", NULL);
        /* under a style the sends are drawn last, over the collectives */
        for (int pass = 0; pass < (style ? 2 : 1); pass++)
        for (int i = 0; i < m->nevents[rank]; i++) {
            const struct pl_event *e = &m->events[rank][i];
            const struct pl_span_time *sp = &r->span[rank][i];
            if (!(sp->end > sp->start)) continue;
            if (style && (sp->stream == 1 && e->type != PL_EV_ISSUE) != pass) continue;
            const char *color;
            double ly = y;
            double least = 0.5;
            if (e->type == PL_EV_COMPUTE)
                color = one_compute ? palette[0] : letter_color(compute_letter(e));
            else if (sp->stream == 1) {
                int c = comm_class(m, e, style);
                ly = y + lane + gap;
                if (style && style->min_comm_px > least) least = style->min_comm_px;
                color = e->type != PL_EV_ISSUE ? SEND_COLOR
                        : c >= 0 ? style->classes[c].color : COMM_COLOR;
            } else color = WAIT_COLOR;
            double x = left + plot * sp->start / step;
            double w = fmax(least, plot * (sp->end - sp->start) / step);
            fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\" "
                       "stroke=\"white\" stroke-width=\"0.3\"><title>rank %d: ",
                    x, ly, w, lane, color, rank);
            if (e->type == PL_EV_COMPUTE) pl_svg_escape(f, e->label[0] ? e->label : "compute");
            else if (e->type == PL_EV_ISSUE) fputs(pl_coll_kind_name(e->kind), f);
            else fputs(pl_ev_type_name(e->type), f);
            if (e->type != PL_EV_COMPUTE && e->label[0]) {
                fputs(" ", f);
                pl_svg_escape(f, e->label);
            }
            fprintf(f, ", %.3f .. %.3f %s</title></rect>\n", sp->start * k, sp->end * k, u);
        }
    }

    pl_svg_line(f, left, axis_y, left + plot, axis_y, "black", NULL);
    double tick = pl_svg_nice_step(step, 8);
    for (int t = 0; t * tick <= step * (1 + 1e-9); t++) {
        double x = left + plot * (t * tick) / step;
        char at[32];
        snprintf(at, sizeof at, "%g", t * tick * k);
        pl_svg_line(f, x, axis_y, x, axis_y + 4, "black", NULL);
        pl_svg_text(f, x, axis_y + 16, "text-anchor=\"middle\"", at);
    }
    pl_svg_text(f, left - 8, axis_y + 16, "text-anchor=\"end\"", u);

    /* Legend: compute by letter, then the collectives (by class under a style), the sends
     * and the stalls. */
    int item = 0;
    double ly = axis_y + 36;
    char name[32];
    for (int c = 0; c < 256; c++) {
        if (!used[c]) continue;
        if (c == 'F') snprintf(name, sizeof name, "forward (F)");
        else if (c == 'B') snprintf(name, sizeof name, "backward (B)");
        else if (c == 'W') snprintf(name, sizeof name, "weight grad, update (W)");
        else if (first_label[c] && first_label[c][0])
            snprintf(name, sizeof name, "%.24s", first_label[c]);
        else snprintf(name, sizeof name, "compute %c", (char)c);
        legend_item(f, left, ly, &item, letter_color((char)c), name);
    }
    if (one_compute) legend_item(f, left, ly, &item, palette[0], style->compute_name);
    for (int c = 0; c < ncl; c++)
        if (class_used[c])
            legend_item(f, left, ly, &item, style->classes[c].color, style->classes[c].name);
    if (default_used) legend_item(f, left, ly, &item, COMM_COLOR, "collective");
    legend_item(f, left, ly, &item, SEND_COLOR,
                style && style->send_name ? style->send_name : "send");
    legend_item(f, left, ly, &item, WAIT_COLOR, "waiting (exposed comm)");
    if (note) pl_svg_text(f, left, ly + 20 * ((nlegend + 5) / 6) + 10, "fill=\"#555\"", note);
    free(class_used);
    int bad = pl_svg_end(f) != 0;
    if (fclose(f) != 0) bad = 1;
    return bad ? -1 : 0;
}
