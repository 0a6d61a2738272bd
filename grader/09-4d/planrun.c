/* planrun.c: plan, run, compare (handout section 3.4), the table beside the plan test
 * (planmem.c). Each 8-rank grid of the lab trained K steps again (unclipped, as cases.c's
 * first run), with every rank's memory ledger peak by category above what it held before
 * fourd_model_new, beside what the kit's planner (lib/plan.h's pl_plan_memory) predicts for
 * the same configuration: the lab's model written as a struct pl_plan_model, the grid's
 * degrees, m microbatches of micro sequences, ZeRO and recomputation as run. Bench mode
 * only: the verdict is planmem.c's. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "lab09.h"
#include "plan.h"
#include "plan_rules.h"

/* What one run measured on a rank: the peak of each category and of its device memory
 * above what it held before fourd_model_new, its stage, and the device bytes of the
 * communication buffers and the scratch at the device's peak. */
enum { M_STAGE = PL_MEM_NCAT, M_DEVICE, M_DEV_COMM, M_DEV_WORK, M_N };

/* Collective: grid i trained K unclipped steps with zero and rc, measured into out[M_N].
 * 0 when a stub was reached. */
static int measure(struct l9_state *st, int i, int zero, enum pl_recompute rc, double out[M_N])
{
    const struct l9_case *k = &st->cases[i];
    const struct gr_train_setup *ts = &st->train[i];
    struct fourd_grid g;
    memset(&g, 0, sizeof g);
    struct pl_mem_stats held, ms;
    pl_mem_get_stats(&held);
    pl_mem_reset_peak();
    if (gr_agree(fourd_grid_new(&g, pl_comm_world(), L9_ORDER, k->dp, k->tp, k->pp) != 0 ||
                 pl_todo_what() != NULL))
        return 0;
    struct fourd_model *m = fourd_model_new(&ts->cfg, &st->free_opt[i], &g);
    if (gr_agree(m == NULL || pl_todo_what() != NULL)) {
        if (m) fourd_model_free(m);
        fourd_grid_free(&g);
        return 0;
    }
    m->recompute = rc, m->zero = zero;
    out[M_STAGE] = g.pp_rank;
    struct gr_batch b;
    gr_batch_new(&b, ts, 0, 1);
    int ok = 1;
    for (int s = 0; s < ts->steps && ok; s++) {
        gr_batch_load(&b, s);
        fourd_step(m, b.tokens, b.targets, b.B, L9_MICRO);
        ok = !gr_agree(pl_todo_what() != NULL);
    }
    pl_mem_get_stats(&ms);
    for (int c = 0; c < PL_MEM_NCAT; c++)
        out[c] = (double)ms.peak[c] - (double)held.current[c];
    out[M_DEVICE] = (double)ms.device_peak - (double)held.device_current;
    out[M_DEV_COMM] = (double)ms.device_peak_cat[PL_MEM_COMM] - (double)held.device_cat[PL_MEM_COMM];
    out[M_DEV_WORK] = (double)ms.device_peak_cat[PL_MEM_WORK] - (double)held.device_cat[PL_MEM_WORK];
    gr_batch_free(&b);
    fourd_model_free(m);
    fourd_grid_free(&g);
    return ok;
}

/* The runs of the table: every grid with zero 0, again with zero 1 where dp > 1, and the
 * first grid with selective and full recomputation. */
struct run {
    int i, zero;
    enum pl_recompute rc;
};

static int runs_of(const struct l9_state *st, struct run *r)
{
    int n = 0;
    for (int i = 0; i < st->ncases; i++)
        for (int z = 0; z <= (st->cases[i].dp > 1); z++) r[n++] = (struct run){i, z, 0};
    r[n++] = (struct run){0, 0, PL_RECOMPUTE_SELECTIVE};
    r[n++] = (struct run){0, 0, PL_RECOMPUTE_FULL};
    return n;
}

static double off(double run, double plan)
{
    return 100.0 * (run - plan) / plan;
}

/* Collective (8 ranks, bench mode): section 3.4's table, printed by rank 0: for each run,
 * stage 0's largest peak per category (the rank the planner describes) beside the planner's
 * figure, what the plan test holds to the plan (the four categories' peaks summed, on the
 * rank of any stage holding most over the plan and on stage 0's holding least), and the
 * scratch, buffers and device peak that the planner does not model. */
void l9_plan_figures(struct l9_state *st, const char *tag, const char *svg, const char *who)
{
    if (st->np != 8) return;
    struct run runs[2 * L9_MAX_CASES + 2];
    const int n = runs_of(st, runs);
    const double kb = 1e3;
    double worst_state = 0, worst_activ = 0, most = -1e9, least = 1e9, worst_dev = 0;
    double first_dev = 0, first_plan = 0, first_work = 0, capped_dev[3] = {0, 0, 0};
    char at[L9_MAX_CASES * 2 + 2][40];
    struct l9_plan_row rows[2 * L9_MAX_CASES + 2];
    const char *activ_at = "", *most_at = "", *least_at = "", *dev_at = "";
    for (int j = 0; j < n; j++) {
        const struct run *r = &runs[j];
        double mine[M_N], all[L9_MAX_RANKS][M_N];
        if (!measure(st, r->i, r->zero, r->rc, mine)) return;
        PL_CHECK_MPI(MPI_Gather(mine, M_N, MPI_DOUBLE, all, M_N, MPI_DOUBLE, 0,
                                MPI_COMM_WORLD));
        if (pl_rank() != 0) continue;
        const struct l9_case *k = &st->cases[r->i];
        struct pl_plan_model pm;
        struct pl_plan_config cfg;
        struct pl_plan_memory p;
        l9_plan_model(&st->train[r->i].cfg, k, &pm);
        l9_plan_config(k, r->zero, r->rc, &cfg);
        pl_plan_memory(&pm, NULL, &cfg, &p);
        double got[M_N] = {0}, hi = -1e300, lo = 1e300;
        for (int q = 0; q < st->np; q++) {
            const double *a = all[q];
            if (r->i == 0 && !r->zero) capped_dev[r->rc] = fmax(capped_dev[r->rc], a[M_DEVICE]);
            const double h = a[PL_MEM_PARAMS] + a[PL_MEM_GRADS] + a[PL_MEM_OPTIM] +
                             a[PL_MEM_ACTIV];
            hi = fmax(hi, h);
            if (a[M_STAGE] != 0) continue;
            lo = fmin(lo, h);
            for (int c = 0; c < M_N; c++) got[c] = fmax(got[c], a[c]);
        }
        if (j == 0) {
            printf("# plan vs run (%s): stage 0's rank, kB = 1000 bytes: the planner's figure "
                   "(lib/plan.h, fp32 no_dropout vocab_whole, micro %d, m %d) beside the "
                   "memory ledger's peak over %d steps; held: params + grads + optim + activ, "
                   "most of any rank and least of stage 0's, against the plan's total, as the "
                   "plan test holds them; comm and work: the buffers and the scratch on the "
                   "device at its peak\n", tag, L9_MB_SEQS, L9_MICRO, L9_K_STEPS);
            printf("%-8s %-4s %-9s %-12s %-12s %-12s %-12s %-6s %-15s %-5s %-5s %-13s %s\n",
                   "dp,tp,pp", "zero", "recompute", "params", "grads", "optim", "activ",
                   "plan", "held", "comm", "work", "device", "device");
            printf("%-24s %-12s %-12s %-12s %-12s %-6s %-15s %-5s %-5s %-13s %s\n", "",
                   "plan run", "plan run", "plan run", "plan run", "total", "most least", "",
                   "", "run", "off");
        }
        const double dev_off = off(got[M_DEVICE], p.total);
        printf("%d,%d,%-4d %-4d %-9s %5.1f %-6.1f %5.1f %-6.1f %5.1f %-6.1f %5.1f %-6.1f "
               "%-6.1f %+5.1f%% %+5.1f%%  %-5.1f %-5.1f %-13.1f %+.1f%%\n", k->dp, k->tp,
               k->pp, r->zero, pl_recompute_name(r->rc), p.params / kb,
               got[PL_MEM_PARAMS] / kb, p.grads / kb, got[PL_MEM_GRADS] / kb, p.optim / kb,
               got[PL_MEM_OPTIM] / kb, p.activ / kb, got[PL_MEM_ACTIV] / kb, p.total / kb,
               off(hi, p.total), off(lo, p.total), got[M_DEV_COMM] / kb,
               got[M_DEV_WORK] / kb, got[M_DEVICE] / kb, dev_off);
        snprintf(at[j], sizeof at[j], "(%d,%d,%d)%s%s%s", k->dp, k->tp, k->pp,
                 r->zero ? " zero 1" : "", r->rc ? " with " : "",
                 r->rc ? pl_recompute_name(r->rc) : "");
        if (off(hi, p.total) > most) most = off(hi, p.total), most_at = at[j];
        if (off(lo, p.total) < least) least = off(lo, p.total), least_at = at[j];
        if (fabs(dev_off) > fabs(worst_dev)) worst_dev = dev_off, dev_at = at[j];
        const double state[3] = {off(got[PL_MEM_PARAMS], p.params),
                                 off(got[PL_MEM_GRADS], p.grads),
                                 off(got[PL_MEM_OPTIM], p.optim)};
        for (int c = 0; c < 3; c++) worst_state = fmax(worst_state, fabs(state[c]));
        const double a = off(got[PL_MEM_ACTIV], p.activ);
        if (fabs(a) > fabs(worst_activ)) worst_activ = a, activ_at = at[j];
        struct l9_plan_row *row = &rows[j];
        snprintf(row->name, sizeof row->name, "(%d,%d,%d)%s%s", k->dp, k->tp, k->pp,
                 r->zero ? " zero" : "", r->rc ? (r->rc == PL_RECOMPUTE_FULL ? " full" : " sel.") : "");
        const double plan[4] = {p.params, p.grads, p.optim, p.activ};
        static const int cat[4] = {PL_MEM_PARAMS, PL_MEM_GRADS, PL_MEM_OPTIM, PL_MEM_ACTIV};
        for (int c = 0; c < 4; c++) row->plan[c] = plan[c], row->run[c] = got[cat[c]];
        row->device = got[M_DEVICE];
        if (j == 0)
            first_dev = got[M_DEVICE], first_plan = p.total, first_work = got[M_DEV_WORK];
    }
    if (pl_rank() != 0) return;
    printf("# handout: the state (params, grads and optim) is within %.1f%% of the plan on "
           "every run, and the activations at most %+.1f%% off, on %s\n", worst_state,
           worst_activ, activ_at);
    printf("# handout: held against the plan's total: at most %+.1f%% on any rank, on %s; "
           "stage 0's at least %+.1f%%, on %s; the plan test's bound %.0f%% either way\n",
           most, most_at, least, least_at, 100 * L9_PLAN_SHARE);
    printf("# handout: on (2,2,2) a rank of stage 0 peaks at %.1f kB of device memory against "
           "the plan's %.1f kB, the scratch %.1f kB of it at that moment\n", first_dev / kb,
           first_plan / kb, first_work / kb);
    printf("# handout: the device peak is at most %+.1f%% off the plan's total, on %s\n",
           worst_dev, dev_at);
    printf("# handout: Lab 8's rule \"memory fits\" keeps %.0f%% of a device's memory back (a "
           "plan fits when its total is at most %.0f%% of the device), which covers %+.1f%%\n",
           100 * (1 - PL_RULE_MEM_SHARE), 100 * PL_RULE_MEM_SHARE,
           100 * (1 / PL_RULE_MEM_SHARE - 1));
    struct l9_cap cap;
    l9_cap_device(st, 0, &cap);
    printf("# handout: the capped run's device is %.1f kB a rank, %.0f%% of it (%.1f kB) halfway "
           "between the plans without recomputation (%.1f kB) and with full (%.1f); the fullest "
           "rank peaks at %.1f kB with full recomputation (%.0f%% of the device), %.1f with "
           "selective and %.1f without\n", cap.device / kb, 100 * PL_RULE_MEM_SHARE,
           PL_RULE_MEM_SHARE * cap.device / kb, cap.plan[PL_RECOMPUTE_NONE] / kb,
           cap.plan[PL_RECOMPUTE_FULL] / kb, capped_dev[PL_RECOMPUTE_FULL] / kb,
           100 * capped_dev[PL_RECOMPUTE_FULL] / cap.device,
           capped_dev[PL_RECOMPUTE_SELECTIVE] / kb, capped_dev[PL_RECOMPUTE_NONE] / kb);
    if (svg) l9_plan_draw(svg, rows, n, who);
}
