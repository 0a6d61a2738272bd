/* bench.c: Lab 8's bench mode, which judges nothing but --sweep: the student's search beside
 * the kit's on the visible cases, the figures the handout quotes (--figures), the whole
 * sweep of bench --sweep, section 1's picture drawn from the code under test (--svg), and
 * the code's worst deviation per field over every gradable configuration (--tolerance).
 * The bench mode has no setup: it makes its own state on the heap. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab08.h"
#include "todo.h"

/* ---------------------------------------------------------------- bench */

#define BENCH_ROUNDS 3

/* Seconds of the best of BENCH_ROUNDS searches, the student's (mine) or the kit's. */
static double time_search(struct l8_case *t, int mine)
{
    double best = 1e30;
    for (int r = 0; r < BENCH_ROUNDS; r++) {
        double t0 = pl_now();
        if (mine) placement_search(&t->model, &t->cluster, &t->chosen);
        else __real_pl_plan_search(&t->model, &t->cluster, NULL, &t->best);
        best = fmin(best, pl_now() - t0);
    }
    return best;
}

/* The figures docs/labs/08-placement.md quotes in its prose, one "# handout: TEXT" line
 * each (its plan output blocks are checked by tests/test_plan handout). */
static void handout_figures(void)
{
    const struct pl_profile *h100 = pl_profile_find("dgx-h100");
    const struct pl_profile *a100 = pl_profile_find("dgx-a100");
    printf("# handout: %.2f on H100 and %.2f on A100\n", h100->efficiency, a100->efficiency);
    printf("# handout: `PL_RULE_MEM_SHARE` (%.0f%%)\n", 100 * PL_RULE_MEM_SHARE);
    printf("# handout: `PL_RULE_MAX_BUBBLE` (%.0f%%\n", 100 * PL_RULE_MAX_BUBBLE);
    printf("# handout: a step no more than %.0f%% slower than the kit's best\n",
           100 * L8_TOL_QUALITY);
    /* Section 4.5's rungs; tests/lab08_tolerance.sh checks the tolerances taken from them. */
    printf("# handout: the smallest round figure (");
    for (int k = 0; k < L8_NRUNGS; k++)
        printf("%s%.0f", k == 0 ? "" : k == L8_NRUNGS - 1 ? " or " : ", ", 100 * L8_TOL_RUNGS[k]);
    printf("%%)\n");
    /* Section 4.4's published runs (lib/plan_published.c): the A100 fit, the Llama 3 rows,
     * the held-out rows held to 5 points and those (MT-NLG's) with a wider tolerance. */
    double rms, fit = pl_plan_published_fit("dgx-a100", &rms);
    double llama = 0, held = 0, lo = 1e9, hi = -1e9;
    int nfit = 0, nheld = 0;
    for (int i = 0; i < pl_plan_published_count(); i++) {
        const struct pl_plan_published *pub = pl_plan_published_at(i);
        double diff = pl_plan_published_figure(pub, 0, NULL) - pub->mfu;
        nfit += !pub->held_out;
        nheld += pub->held_out;
        if (!pub->held_out) continue;
        if (!strcmp(pub->profile, "dgx-h100")) llama = fmax(llama, fabs(diff));
        else if (pub->tol <= 5) held = fmax(held, fabs(diff));
        else {
            lo = fmin(lo, diff);
            hi = fmax(hi, diff);
        }
    }
    printf("# handout: fitted on its %d fit rows alone, %.3f, with a root mean square miss of "
           "%.1f points\n", nfit, fit, rms);
    printf("# handout: %d runs held out\n", nheld);
    if (llama <= 0.5) printf("# handout: The two Llama 3 runs land within half a point\n");
    else printf("# handout: The two Llama 3 runs land within %.1f points\n", llama);
    printf("# handout: the other held-out A100 runs within %.1f points\n", held);
    printf("# handout: MT-NLG's three runs land %.1f to %.1f points high\n", lo, hi);
    /* The same shape, degrees and nodes in the fit and out of it: the software's share. */
    for (int i = 0; i < pl_plan_published_count(); i++) {
        const struct pl_plan_published *out = pl_plan_published_at(i);
        if (!out->held_out || out->tol <= 5) continue;
        for (int j = 0; j < pl_plan_published_count(); j++) {
            const struct pl_plan_published *in = pl_plan_published_at(j);
            if (in->held_out || strcmp(in->model, out->model) || in->nodes != out->nodes) continue;
            struct pl_plan_model mo, mi;
            struct pl_plan_cluster c;
            pl_plan_published_setup(out, &mo, &c);
            pl_plan_published_setup(in, &mi, &c);
            printf("# handout: of the fit (with %.0f sequences a step for %.0f) %.1f%% slower\n",
                   mo.batch_tokens / mo.seq, mi.batch_tokens / mi.seq,
                   100 * (1 - out->mfu / in->mfu));
            printf("# handout: holds those three rows to %.0f points\n", out->tol);
        }
    }
}

/* Section 2.1's: the torus's link against NVLink, and the largest tp that "tp on a torus
 * ring" allows on 64 and 512 chips (tp leftmost: 2, or a whole side) against a DGX node's. */
static void torus_figures(void)
{
    const struct pl_profile *tpu = pl_profile_find("tpu-v4"), *h100 = pl_profile_find("dgx-h100");
    printf("# handout: one link's %.0f GB/s where NVLink gives %.0f\n",
           tpu->bw[PL_LINK_INTRA] / 1e9, h100->bw[PL_LINK_INTRA] / 1e9);
    const int chips[2] = {64, 512};
    int largest[2] = {1, 1};
    for (int k = 0; k < 2; k++) {
        int dims[3];
        pl_torus_shape(chips[k], dims);
        for (int tp = 2; tp <= chips[k]; tp++) {
            char degrees[32];
            struct pl_grid g;
            snprintf(degrees, sizeof degrees, "tp=%d", tp);
            if (chips[k] % tp || pl_grid_init(&g, PL_PLAN_ORDER, degrees, chips[k], NULL, 0) != 0)
                continue;
            if (pl_rule_torus_ring(&g, "tp", dims, NULL, 0) == 0) largest[k] = tp;
        }
    }
    printf("# handout: %d on %d chips, %d on %d, where a DGX node allows %d\n", largest[0],
           chips[0], largest[1], chips[1], h100->devices_per_node);
}

/* ---------------------------------------------------------------- sweep */

/* --sweep: every preset on both clusters, 1 to 128 nodes, with the preset's batch, a
 * 1M-token batch and 64K-token sequences (the preset's batch in tokens, at least one
 * sequence). Where the kit fits something, the student's choice must obey every rule and be
 * within L8_TOL_QUALITY of the kit's best; where it fits nothing, the student's search must say
 * so. The search cases of the grade are a handful of these; this is the whole space. */
#define SWEEP_MAX_NODES 128

/* The slowest choice of the sweep that is still within the margin, by the kit's model: the
 * handout quotes it for section 4.3's alternative (tests/labs/08-placement.tests checks). */
struct worst {
    double ratio; /* the choice's step over the kit's best */
    char where[192];
};

/* One case of the sweep; returns 1 when the student's search disagrees with the kit's. */
static int sweep_case(struct l8_state *st, const struct pl_plan_model *m,
                      const struct pl_plan_cluster *c, struct worst *w)
{
    struct pl_plan_result *res = &st->scratch;
    struct pl_plan_config mine;
    char err[512] = "", desc[256], best[256];
    int kit = __real_pl_plan_search(m, c, NULL, res) > 0;
    l8_gate_open(&st->gate);
    int found = placement_search(m, c, &mine) == 0;
    l8_gate_close(&st->gate);
    const char *why = NULL;
    char slow[128];
    double memory;
    struct pl_plan_time tm;
    if (st->gate.called) why = "your search called the kit's planner, the grader's oracle";
    else if (!kit && found) why = "the kit fits nothing, yours found";
    else if (kit && !found) why = "yours found nothing";
    else if (kit && l8_check_choice(m, c, &mine, &memory, err, sizeof err) != 0) why = err;
    else if (kit && __real_pl_plan_time(m, c, &mine, &tm) > (1 + L8_TOL_QUALITY) *
                                                             res->best[0].time.step) {
        snprintf(slow, sizeof slow, "%.1f%% slower than the kit's best, more than %.0f%%",
                 100 * (tm.step / res->best[0].time.step - 1), 100 * L8_TOL_QUALITY);
        why = slow;
    } else if (kit && tm.step > w->ratio * res->best[0].time.step) {
        w->ratio = tm.step / res->best[0].time.step;
        snprintf(w->where, sizeof w->where, "%s (seq %d, %.0f tokens) on %d x %s",
                 m->name, m->seq, m->batch_tokens, c->nodes, c->name);
    }
    if (!why) return 0;
    printf("WRONG %s (seq %d, %.0f tokens) on %d x %s: yours %s, the kit's %s: %s\n", m->name,
           m->seq, m->batch_tokens, c->nodes, c->name,
           found ? pl_plan_config_describe(&mine, desc, sizeof desc) : "none",
           kit ? pl_plan_config_describe(&res->best[0].cfg, best, sizeof best) : "none", why);
    return 1;
}

static void sweep(struct l8_state *st)
{
    static const char *const profiles[] = {"dgx-h100", "dgx-a100"};
    const char *sweep_which = st->sweep;
    struct worst w = {1, ""};
    int cases = 0, fits = 0, wrong = 0, known = !strcmp(sweep_which, "all");
    for (int i = 0; i < pl_plan_model_count(); i++)
        known |= !strcmp(sweep_which, pl_plan_model_at(i)->name);
    if (!known) {
        char names[256];
        pl_usage_error_all("--sweep %s: expected all or a preset (%s)", sweep_which,
                           pl_plan_model_names(names, sizeof names));
    }
    double t0 = pl_now();
    for (int i = 0; i < pl_plan_model_count(); i++) {
        const struct pl_plan_model *preset = pl_plan_model_at(i);
        if (strcmp(sweep_which, "all") && strcmp(sweep_which, preset->name)) continue;
        for (int p = 0; p < 2; p++)
            for (int nodes = 1; nodes <= SWEEP_MAX_NODES; nodes *= 2)
                for (int shape = 0; shape < 3; shape++) {
                    struct pl_plan_model m = *preset;
                    if (shape == 1) m.batch_tokens = 1048576;
                    if (shape == 2) m.seq = 65536;
                    if (m.batch_tokens < m.seq) m.batch_tokens = m.seq;
                    struct pl_plan_cluster c;
                    pl_plan_cluster_from_profile(&c, pl_profile_find(profiles[p]), nodes);
                    wrong += sweep_case(st, &m, &c, &w);
                    fits += st->scratch.found > 0;
                    cases++;
                }
    }
    printf("sweep: %d of %d cases wrong (%d where the kit fits something), %.1f s\n", wrong,
           cases, fits, pl_now() - t0);
    if (w.ratio > 1)
        printf("sweep: your slowest choice within the margin: at worst %.1f%% slower by the "
               "kit's model, %s\n", 100 * (w.ratio - 1), w.where);
    else
        printf("sweep: every choice as fast as the kit's best\n");
    if (wrong) {
        l8_state_free(st);
        pl_finalize();
        exit(1);
    }
}

/* --svg: section 1's picture (Llama 3 70B on 8 DGX H100 nodes) drawn from the code under
 * test. The sets of degrees are the kit's points (each with the kit's best settings, or the
 * least memory where none fits), every figure is the student's own estimate of that
 * configuration, and the student's search's choice takes the place of its degrees' point,
 * in orange. */
static void draw_svg(struct l8_state *st, const char *path)
{
    static const struct l8_spec space = {"llama3-70b", "dgx-h100", 8, 0, 0, NULL, 0, NULL};
    struct pl_plan_result *res = &st->scratch;
    struct l8_case *t = &st->cases[0];
    l8_build_case(t, &space, 1);
    __real_pl_plan_search(&t->model, &t->cluster, NULL, res);
    pl_todo_reset();
    int found = placement_search(&t->model, &t->cluster, &t->chosen) == 0;
    if (pl_todo_what()) {
        printf("no picture: still a stub: %s\n", pl_todo_what());
        return;
    }
    int k = 0;
    while (found && k < res->npoints && memcmp(res->points[k].cfg.deg, t->chosen.deg,
                                              sizeof t->chosen.deg))
        k++;
    if (found && k == res->npoints && res->npoints < PL_PLAN_POINTS) res->npoints++;
    if (found && k < res->npoints) res->points[k].cfg = t->chosen;
    for (int i = 0; i < res->npoints; i++) {
        struct pl_plan_point *pt = &res->points[i];
        struct pl_plan_time tm;
        pt->memory = placement_memory(&t->model, &t->cluster, &pt->cfg, &pt->mem);
        pt->step = placement_step_time(&t->model, &t->cluster, &pt->cfg, &tm);
        pt->mfu = tm.mfu;
        pt->fits = pl_rule_memory(pt->memory, t->cluster.hbm, NULL, 0) == 0 && pt->step > 0;
    }
    if (pl_plan_write_svg_marked(path, &t->model, &t->cluster, res, found ? &t->chosen : NULL,
                                 found ? "your estimates of the kit's best settings of each "
                                         "set of degrees, your search's choice in orange"
                                       : "your estimates; your search found nothing") != 0)
        exit(1);
    char desc[256];
    printf("wrote %s: your choice %s\n", path,
           found ? pl_plan_config_describe(&t->chosen, desc, sizeof desc) : "none");
}

/* The visible search cases: the student's search beside the kit's exhaustive one, and
 * what each chose. Nothing is judged. */
static void bench_searches(struct l8_state *st, const char *label)
{
    printf("# Lab 8 search time, %s beside the kit's planner (best of %d)\n",
           label ? label : "your code", BENCH_ROUNDS);
    printf("%-44s %10s %10s %7s  %s\n", "case", "yours(ms)", "kit(ms)", "ratio", "step yours/kit");
    for (int i = 0; i < 3; i++) {
        struct l8_case *t = &st->cases[0];
        l8_build_case(t, &L8_SEARCHES[i], 1);
        char name[128];
        snprintf(name, sizeof name, "%s on %d x %s", t->model.name, t->cluster.nodes,
                 t->cluster.name);
        double kit = time_search(t, 0);
        pl_todo_reset();
        double mine = time_search(t, 1);
        if (pl_todo_what()) {
            printf("%-44s still a stub: %s\n", name, pl_todo_what());
            continue;
        }
        struct pl_plan_time tm;
        __real_pl_plan_time(&t->model, &t->cluster, &t->chosen, &tm);
        printf("%-44s %10.2f %10.2f %6.2fx  %.4f\n", name, 1e3 * mine, 1e3 * kit, kit / mine,
               tm.step / t->best.best[0].time.step);
    }
}

/* ---------------------------------------------------------------- tolerance */

struct dev_worst {
    double dev[L8_NFIELDS];
    char where[L8_NFIELDS][224];
    int links, oracle, cases;
};

/* Case t under the memory and the time tests: each field's deviation, kept where worst. */
static void tolerance_case(struct l8_state *st, struct dev_worst *w, struct l8_obs *o)
{
    static const enum l8_op ops[2] = {L8_OP_MEMORY, L8_OP_TIME};
    for (int k = 0; k < 2; k++) {
        double dev[L8_NFIELDS];
        st->op = ops[k];
        memset(o, 0, sizeof *o);
        l8_observe(st, 0, o);
        w->oracle |= o->oracle != L8_OR_NONE;
        l8_deviation(ops[k], o, dev);
        for (int f = 0; f < L8_NFIELDS; f++)
            if (dev[f] > w->dev[f]) {
                w->dev[f] = dev[f];
                l8_describe_where(&o->where, 1, w->where[f], sizeof w->where[f]);
            }
        if (ops[k] == L8_OP_TIME)
            for (int a = 0; a < PL_NAXES; a++) w->links += o->time.link[a] != o->time_ref.link[a];
    }
    w->cases++;
}

/* --tolerance: the code's worst deviation from the kit's figures, field by field, over every
 * configuration the memory and time tests can grade: the rows of their table and every
 * configuration the seed can draw (each fitting point of L8_DRAW_POOL). One line per field,
 * tab-separated "tolerance FIELD WORST TOL fact|state|choice ok|over CASE", and the rungs a
 * choice's tolerance is taken from, which tests/lab08_tolerance.sh reads for each alternative
 * of tests/alt/08-placement to derive L8_TOL. Exits 1 when a field is over. */
static void tolerance(struct l8_state *st)
{
    struct dev_worst *w = calloc(1, sizeof *w);
    struct l8_obs *o = calloc(1, sizeof *o);
    if (!w || !o) pl_fatal("out of memory");
    struct l8_case *t = &st->cases[0];
    pl_todo_reset();
    for (int i = 0; i < L8_N_ESTIMATES; i++) {
        l8_build_case(t, &L8_ESTIMATES[i], 1);
        tolerance_case(st, w, o);
    }
    for (int i = 0; i < L8_N_DRAW_POOL; i++) {
        l8_build_case(t, &L8_DRAW_POOL[i], 1);
        __real_pl_plan_search(&t->model, &t->cluster, NULL, &st->scratch);
        int n = st->scratch.npoints;
        static struct pl_plan_config cfgs[PL_PLAN_POINTS];
        int fits = 0;
        for (int k = 0; k < n; k++)
            if (st->scratch.points[k].fits) cfgs[fits++] = st->scratch.points[k].cfg;
        for (int k = 0; k < fits; k++) {
            t->cfg = cfgs[k];
            tolerance_case(st, w, o);
        }
    }
    int over = 0;
    if (pl_todo_what()) printf("still a stub: %s\n", pl_todo_what());
    for (int f = 0; f < L8_NFIELDS; f++) {
        int bad = w->dev[f] > L8_TOL[f];
        over += bad;
        const char *kind = L8_TOL[f] <= L8_TOL_EXACT ? "fact"
                           : f <= L8_F_OPTIM            ? "state"
                                                        : "choice";
        printf("tolerance\t%s\t%.6f\t%g\t%s\t%s\t%s\n", L8_FIELD_NAMES[f], w->dev[f],
               L8_TOL[f], kind, bad ? "over" : "ok", w->dev[f] > 0 ? w->where[f] : "-");
    }
    printf("tolerance-rungs");
    for (int k = 0; k < L8_NRUNGS; k++) printf("\t%g", L8_TOL_RUNGS[k]);
    printf("\n");
    printf("tolerance: %d configurations, %d fields over their tolerance, %d link classes "
           "wrong%s\n", w->cases, over, w->links,
           w->oracle ? ", and the code called the kit's planner" : "");
    int fail = over || w->links || w->oracle || pl_todo_what();
    free(o);
    free(w);
    if (fail) {
        l8_state_free(st);
        pl_finalize();
        exit(1);
    }
}

/* The bench mode: the search table; with --figures, the handout's figures instead; with
 * --sweep, the sweep, judged; with --svg, the picture. */
void l8_bench(const struct gr_args *a)
{
    if (a->figures) {
        handout_figures();
        torus_figures();
        return;
    }
    struct l8_state *st = l8_state_new(L8_OP_SEARCH, a->seed);
    st->sweep = a->opt[0].s;
    st->svg = a->opt[1].s;
    st->tolerance = a->opt[2].i;
    if (st->tolerance) tolerance(st);
    else if (st->sweep) sweep(st);
    else if (st->svg) draw_svg(st, st->svg);
    else bench_searches(st, a->label);
    l8_state_free(st);
}
