/* bench.c: Lab 10's bench mode (make bench LAB=10): the code under test saves and loads the
 * kit's sharded state on this machine, and the interval its measured save cost gives against
 * Llama 3's published failure rate. Figures from the code benchmarked, labelled as its own.
 *
 * --svg FILE (make plots LAB=10) draws, from a real run of the code under test on the
 * world's ranks: the training loss of an uninterrupted run, and of a run whose save at step
 * 9 is killed before its manifest, restarted on one rank fewer from the checkpoint of step 6
 * (the steps 7 to 9 redone are the lost work); and the fraction of time lost against the
 * interval, C / tau + tau / (2 M), for the measured C and Llama 3's job MTBF, with the
 * interval ft_interval chose. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab10.h"
#include "todo.h"

/* Llama 3 405B's pre-training (Dubey et al. 2024, section 3.3.4): 419 unexpected
 * interruptions in 54 days on 16,384 H100s. */
#define L10_LLAMA3_DAYS 54.0
#define L10_LLAMA3_FAILURES 419.0
#define L10_PLOT_STEPS 12
#define L10_PLOT_EVERY 3  /* a save every 3 steps; the one at step 9 is killed */

struct plot {
    double plain[L10_PLOT_STEPS + 1], restarted[L10_PLOT_STEPS + 1];
    int64_t loaded;
    int n, m, same;
    double save_s, mtbf_s, tau;
};

/* The uninterrupted run, and the crashed one restarted on m ranks (collective). */
static int crash_and_restart(struct l10_state *st, struct plot *p)
{
    struct pl_shard_run run = pl_shard_run_default(st->seed);
    struct pl_shard_state *s = pl_shard_state_new(&run, pl_comm_world());
    for (int k = 1; k <= L10_PLOT_STEPS; k++) p->plain[k] = pl_shard_step(s);
    pl_shard_state_free(s);
    struct l10_obs o;
    memset(&o, 0, sizeof o);
    char err[96] = "";
    l10_make_root(st, err, sizeof err);
    if (!st->root[0]) return -1;
    s = pl_shard_state_new(&run, pl_comm_world());
    struct l10_kill kill = {L10_MANIFEST_OF, 0, L10_RENAME, 1, 0, 0};
    int rc = 1;
    for (int k = 1; k <= 3 * L10_PLOT_EVERY && rc >= 0; k++) {
        p->restarted[k] = pl_shard_step(s);
        if (k % L10_PLOT_EVERY == 0)
            rc = l10_save_all(st, s, st->world, k == 3 * L10_PLOT_EVERY ? &kill : NULL, &o);
    }
    pl_shard_state_free(s);
    p->n = st->world;
    p->m = st->world > 1 ? st->world - 1 : 1;
    while (run.batch % p->m) p->m--;
    struct pl_comm *g = pl_comm_split(pl_comm_world(), st->rank < p->m ? 0 : -1, st->rank, "m");
    p->loaded = -1;
    if (g && rc >= 0) {
        struct ft_load_report rep;
        s = pl_shard_state_new(&run, g);
        p->loaded = ft_load(st->root, s, &rep);
        if (p->loaded > 0)
            for (int k = (int)p->loaded + 1; k <= L10_PLOT_STEPS; k++)
                p->restarted[k] = pl_shard_step(s);
        pl_shard_state_free(s);
    }
    pl_comm_free(g);
    if (st->rank == 0) l10_rm_tree(st->root);
    p->same = p->loaded > 0;
    for (int k = (int)p->loaded + 1; p->same && k <= L10_PLOT_STEPS; k++)
        p->same = p->restarted[k] == p->plain[k];
    return rc < 0 ? -1 : 0;
}

static double px(double v, double lo, double hi, double x0, double w, int logx)
{
    return logx ? x0 + w * log(v / lo) / log(hi / lo) : x0 + w * (v - lo) / (hi - lo);
}

static void draw(FILE *f, const struct plot *p, const char *who)
{
    char t[256];
    pl_svg_begin(f, 960, 420, 13);
    /* left: the losses by step */
    double x0 = 60, y0 = 60, w = 380, h = 280, lo = 1e9, hi = -1e9;
    for (int k = 1; k <= L10_PLOT_STEPS; k++) {
        lo = fmin(lo, p->plain[k]);
        hi = fmax(hi, p->plain[k]);
    }
    hi += 0.05 * (hi - lo) + 1e-6;
    lo -= 0.05 * (hi - lo) + 1e-6;
    snprintf(t, sizeof t, "%s: killed at the save of step 9, restarted on %d of %d ranks", who,
             p->m, p->n);
    pl_svg_text(f, x0, 30, "font-weight=\"bold\"", t);
    pl_svg_rect(f, x0, y0, w, h, "none", "stroke=\"#999\"");
    double sx = w / (L10_PLOT_STEPS + 1);
    if (p->loaded > 0)
        pl_svg_rect(f, x0 + sx * (double)(p->loaded + 0.5), y0, sx * (9 - (double)p->loaded), h,
                    "#fde0dd", "");
    pl_svg_line(f, x0 + sx * 9.5, y0, x0 + sx * 9.5, y0 + h, "#d7301f", "");
    for (int k = 1; k <= L10_PLOT_STEPS; k++) {
        double x = x0 + sx * k;
        double ya = y0 + h * (hi - p->plain[k]) / (hi - lo);
        pl_svg_rect(f, x - 5, ya - 5, 10, 10, "#999", "");
        if (k <= 9 || (p->loaded > 0 && k > p->loaded)) {
            double yb = y0 + h * (hi - p->restarted[k]) / (hi - lo);
            pl_svg_rect(f, x - 3, yb - 3, 6, 6, k <= 9 ? "#2c7fb8" : "#f16913", "");
        }
        snprintf(t, sizeof t, "%d", k);
        pl_svg_text(f, x, y0 + h + 16, "text-anchor=\"middle\"", t);
    }
    pl_svg_text(f, x0 + w / 2, y0 + h + 34, "text-anchor=\"middle\"", "step");
    snprintf(t, sizeof t, "%.3f", hi);
    pl_svg_text(f, x0 - 4, y0 + 10, "text-anchor=\"end\"", t);
    snprintf(t, sizeof t, "%.3f", lo);
    pl_svg_text(f, x0 - 4, y0 + h, "text-anchor=\"end\"", t);
    pl_svg_swatch(f, x0, y0 + h + 50, "#999", "uninterrupted");
    snprintf(t, sizeof t, "before the kill (%d ranks)", p->n);
    pl_svg_swatch(f, x0 + 120, y0 + h + 50, "#2c7fb8", t);
    snprintf(t, sizeof t, "after the restart (%d ranks): %s", p->m,
             p->same ? "the same losses, bit for bit" : "losses differ");
    pl_svg_swatch(f, x0 + 120, y0 + h + 68, "#f16913", t);
    pl_svg_swatch(f, x0, y0 + h + 68, "#fde0dd", "work redone");
    /* right: the time lost against the interval */
    x0 = 540;
    double tlo = p->save_s, thi = 30 * p->tau, wmax = 0.5;
    snprintf(t, sizeof t, "time lost, C = %.3g s (measured), M = %.0f s (Llama 3)", p->save_s,
             p->mtbf_s);
    pl_svg_text(f, x0, 30, "font-weight=\"bold\"", t);
    pl_svg_rect(f, x0, y0, w, h, "none", "stroke=\"#999\"");
    double xp = 0, yp = 0;
    for (int i = 0; i <= 200; i++) {
        double tau = tlo * pow(thi / tlo, i / 200.0), lost = p->save_s / tau + tau / (2 * p->mtbf_s);
        double x = px(tau, tlo, thi, x0, w, 1), y = y0 + h * (1 - fmin(lost, wmax) / wmax);
        if (i) pl_svg_line(f, xp, yp, x, y, "#2c7fb8", "stroke-width=\"2\"");
        xp = x, yp = y;
    }
    double lost = p->save_s / p->tau + p->tau / (2 * p->mtbf_s);
    if (p->tau > tlo && p->tau < thi) {
        double x = px(p->tau, tlo, thi, x0, w, 1), y = y0 + h * (1 - fmin(lost, wmax) / wmax);
        pl_svg_rect(f, x - 4, y - 4, 8, 8, "#f16913", "");
    }
    snprintf(t, sizeof t, "ft_interval: tau = %.4g s, %.3g%% of the time lost", p->tau,
             100 * lost);
    pl_svg_text(f, x0, y0 + h + 50, "", t);
    pl_svg_text(f, x0 + w / 2, y0 + h + 34, "text-anchor=\"middle\"",
                "interval tau (log scale): C / tau + tau / (2 M)");
    pl_svg_text(f, x0 - 4, y0 + 10, "text-anchor=\"end\"", "50%");
    pl_svg_text(f, x0 - 4, y0 + h, "text-anchor=\"end\"", "0");
}

void l10_bench(const struct gr_args *a)
{
    const char *who = a->label ? a->label : "your code";
    const char *svg = a->opt[0].s;
    struct l10_state *st = l10_state_new(L10_OP_CRASH, a->seed);
    struct pl_shard_run run = pl_shard_run_default(a->seed);
    struct pl_comm *self = pl_comm_split(pl_comm_world(), pl_rank(), 0, "self");
    struct pl_shard_state *s = pl_shard_state_new(&run, self);
    for (int k = 0; k < 3; k++) pl_shard_step(s);
    char root[] = "/tmp/pl-lab10-bench-XXXXXX";
    if (!mkdtemp(root)) pl_fatal("mkdtemp %s", root);
    struct ft_shard_info info;
    const int reps = 20;
    double t0 = pl_now();
    int rc = 0;
    for (int i = 0; i < reps && rc == 0; i++) {
        rc = ft_save_shard(root, s, &info);
        if (rc == 0) rc = ft_save_manifest(root, s, &info, 1);
    }
    double save = (pl_now() - t0) / reps;
    struct ft_load_report rep;
    t0 = pl_now();
    for (int i = 0; i < reps && rc == 0; i++) ft_load(root, s, &rep);
    double load = (pl_now() - t0) / reps;
    l10_rm_tree(root);
    int bad = pl_todo_what() || rc != 0;
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    struct plot p;
    memset(&p, 0, sizeof p);
    p.save_s = save;
    p.mtbf_s = L10_LLAMA3_DAYS * 86400.0 / L10_LLAMA3_FAILURES;
    p.tau = bad ? 0 : ft_interval(save, p.mtbf_s);
    if (!bad && svg && crash_and_restart(st, &p) != 0) bad = 1;
    if (pl_rank() == 0) {
        if (bad) {
            printf("%s: %s\n", who, pl_todo_what() ? "still a stub" : "a save failed");
        } else {
            printf("# %s: the kit's state (%zu parameters, 3 x 4 bytes each) on this disk\n",
                   who, s->numel);
            printf("save %.3g ms, load %.3g ms (mean of %d)\n", save * 1e3, load * 1e3, reps);
            printf("with Llama 3's job MTBF of %.0f s (54 days / 419 interruptions): interval "
                   "%.4g s\n", p.mtbf_s, p.tau);
        }
        if (svg && !bad) {
            FILE *f = fopen(svg, "w");
            if (!f) pl_usage_error("--svg %s: cannot write it", svg);
            draw(f, &p, who);
            if (pl_svg_end(f) != 0 || fclose(f) != 0) pl_fatal("writing %s failed", svg);
            printf("%s: restarted from step %lld on %d ranks, %s; wrote %s\n", who,
                   (long long)p.loaded, p.m, p.same ? "the same losses" : "other losses", svg);
        }
    }
    pl_shard_state_free(s);
    pl_comm_free(self);
    l10_state_free(st);
}
