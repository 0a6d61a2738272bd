/* bench.c: Lab 6's bench mode (lab06.h): bubble, memory and modelled step per schedule and
 * m, and each schedule's timeline, yours and the ideal, as SVGs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab06.h"
#include "partition.h"
#include "replay.h"

static const char *op_sched_name(enum pipe_schedule k)
{
    return k == PIPE_AFAB ? "afab" : k == PIPE_1F1B ? "1f1b" : k == PIPE_ZBH1 ? "zbh1"
                                                                           : "interleaved";
}



/* The modelled step of a trace on a real profile, with the topology of the run. */
static double modelled_step(const struct pl_merged_trace *t, const char *profile)
{
    struct pl_replay r;
    char err[256];
    if (pl_replay_run(t, pl_profile_get(profile), pl_topo(), &r, err, sizeof err) != 0) return -1;
    double step = r.step_time;
    pl_replay_free(&r);
    return step;
}

/* One row of the bench table (rank 0); SVGs into svg_dir when given. */
static void bench_row(enum pipe_schedule k, int m, const struct l6_obs *o,
                      const struct pl_merged_trace *t, const char *svg_dir, char *row,
                      size_t len)
{
    int p = t->nranks, v = o->v;
    struct pl_merged_trace uni, ideal;
    l6_sched_uniform_copy(k, t, v, &uni);
    l6_sched_ideal_trace(k, p, v, m, 1.0, &ideal);
    double bubble = -1, best = -1;
    char err[256], svg[512], title[160];
    snprintf(svg, sizeof svg, "%s/06-%s-p%d-m%d.svg", svg_dir ? svg_dir : ".", op_sched_name(k),
             p, m);
    snprintf(title, sizeof title, "Lab 6: your %s, %d stages, %d microbatches, uniform stage "
             "times", l6_sched_name(k), p, m);
    l6_sched_replay_bubble(&uni, svg_dir ? svg : NULL, title, &bubble, err, sizeof err);
    snprintf(svg, sizeof svg, "%s/06-%s-p%d-m%d-ideal.svg", svg_dir ? svg_dir : ".",
             op_sched_name(k), p, m);
    snprintf(title, sizeof title, "Lab 6: %s as defined, %d stages, %d microbatches",
             l6_sched_name(k), p, m);
    l6_sched_replay_bubble(&ideal, svg_dir ? svg : NULL, title, &best, err, sizeof err);
    /* in microbatches of the whole stage: interleaved, one of each of its chunks */
    double per = 0;
    char held[16];
    for (int j = 0; j < v; j++) per += o->chunk_acts[j];
    snprintf(held, sizeof held, "%.2f", o->activ_peak / per);
    snprintf(row, len, "%-16s %3d %9.4f %9.4f %11s %11.1f %12.1f", l6_sched_name(k), m, bubble,
             best, held, o->activ_peak / 1e3,
             1e6 * modelled_step(t, L6_BENCH_PROFILE));
    pl_trace_merged_free(&uni);
    pl_trace_merged_free(&ideal);
}

static void bench_mode(uint64_t seed, const char *only, int only_m, const char *svg_dir,
                       const char *label)
{
    struct l6_setup s;
    l6_setup_init(&s, seed, 0, 1);
    const struct pl_model_config *c = &s.train.cfg;
    l6_check_stages(c, PIPE_AFAB);
    int p = pl_size(), nquoted = 0;
    char quoted[3 * L6_NCASES][160];
    pl_print0("# Lab 6 pipeline: %s, %d stages, backend %s; model %d blocks, d_model %d, global "
              "batch %d x %d tokens\n", label ? label : "yours", p, pl_comm_backend(),
              c->n_layers, c->d_model, L6_GLOBAL_B, c->seq_len);
    pl_print0("# bubble: your trace replayed with uniform stage times (F %g, B %g, free links; "
              "a chunk of the interleaved schedule 1/%d of that); ideal: the schedule as "
              "defined, replayed the same way. peak: stage 0's activations at their peak, in "
              "microbatches (interleaved: one of each of its chunks) and kB. %s(us): the trace "
              "on that profile\n",
              L6_SCHED_UNIT_F, L6_SCHED_UNIT_B, L6_V_INTERLEAVED, L6_BENCH_PROFILE);
    pl_print0("# %-16s %3s %9s %9s %11s %11s %12s\n", "schedule", "m", "bubble", "ideal",
              "peak(mb)", "peak(kB)", "dgx-h100(us)");
    for (int kk = 0; kk < 4; kk++) {
        enum pipe_schedule k = (enum pipe_schedule)kk;
        if (only && strcmp(only, op_sched_name(k))) continue;
        if (k == PIPE_INTERLEAVED && p * L6_V_INTERLEAVED > c->n_layers + 2) continue;
        for (int i = 0; i < L6_NCASES; i++) {
            int m = L6_CASES[i];
            if ((only_m && m != only_m) || !l6_sched_runs(k, p, m)) continue;
            struct l6_obs *o = calloc(1, sizeof *o);
            struct pl_merged_trace t = {0};
            PL_ASSERT(o);
            l6_run_case(&s, k, m, 1, o, &t);
            if (pl_rank() == 0 && o->todo) {
                printf("  %-16s still a stub: %s (see %s section %s)\n", l6_sched_name(k),
                       pl_todo_what(), gr_handout(), pl_todo_section());
            } else if (pl_rank() == 0 && t.nranks) {
                char row[160];
                bench_row(k, m, o, &t, svg_dir, row, sizeof row);
                printf("  %s\n", row);
                /* the rows the handout quotes, on the 4 stages it describes */
                if (p == 4 && (m == 1 || m == 2 || m == 4 || m == 8))
                    snprintf(quoted[nquoted++], sizeof quoted[0], "%s", row);
            }
            pl_trace_merged_free(&t);
            int todo = o->todo;
            free(o);
            if (todo) break;
        }
    }
    for (int i = 0; i < nquoted; i++) pl_print0("# handout: %s\n", quoted[i]);
    if (pl_rank() == 0 && !only) l6_part_print_figures(c);
    if (svg_dir)
        pl_print0("# wrote each schedule's timeline (yours and the ideal) to %s\n", svg_dir);
    l6_setup_free(&s);
}


/* The options' order: driver.c's L6_OPTIONS (--microbatches M, --svg-dir DIR). */
void l6_bench(const struct gr_args *a)
{
    int bench_m = a->given[0] ? a->opt[0].i : -1; /* -1: every m of L6_CASES */
    const char *svg_dir = a->opt[1].s;
    if (bench_m != -1) {
        int ok = 0;
        for (int i = 0; i < L6_NCASES; i++) ok |= bench_m == L6_CASES[i];
        if (!ok)
            pl_usage_error_all("--microbatches %d: a step needs m >= 1 microbatches that divide "
                               "its %d sequences (choose 1, 2, 3, 4, 6 or 8)",
                               bench_m, L6_GLOBAL_B);
    }
    if (a->op) l6_schedule_of(a->op, NULL);
    bench_mode(a->seed, a->op, bench_m > 0 ? bench_m : 0, svg_dir, a->label);
}
