/* planrun.c: plan, run, compare (handout section 3.4). Each 8-rank grid of the lab trained
 * K steps again (unclipped, as cases.c's first run), with every rank's memory ledger peak
 * by category above what it held before fourd_model_new, beside what the kit's planner
 * (lib/plan.h's pl_plan_memory) predicts for the same configuration: the lab's model
 * written as a struct pl_plan_model, the grid's degrees, m microbatches of micro sequences,
 * ZeRO and recomputation as run. Bench mode only: nothing here is judged. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "lab09.h"
#include "plan.h"


/* The lab's model as the planner describes a model: its shape, its batch in tokens. */
void l9_plan_model(const struct pl_model_config *c, const struct l9_case *k,
                   struct pl_plan_model *pm)
{
    memset(pm, 0, sizeof *pm);
    pm->name = "lab09";
    pm->layers = c->n_layers, pm->d_model = c->d_model, pm->heads = c->n_heads;
    pm->kv_heads = c->n_heads, pm->d_ff = c->d_ff, pm->vocab = c->vocab, pm->seq = c->seq_len;
    pm->batch_tokens = (double)k->dp * L9_MICRO * L9_MB_SEQS * c->seq_len;
}

/* The configuration the lab runs for grid k, as the planner takes one. */
void l9_plan_config(const struct l9_case *k, int zero, enum pl_recompute rc,
                    struct pl_plan_config *cfg)
{
    pl_plan_config_default(cfg);
    cfg->deg[PL_AX_TP] = k->tp, cfg->deg[PL_AX_PP] = k->pp, cfg->deg[PL_AX_DP] = k->dp;
    cfg->micro = L9_MB_SEQS, cfg->m = L9_MICRO, cfg->zero = zero, cfg->recompute = rc;
    /* Lab 9 trains in fp32 without dropout, its embedding and head whole on every TP rank */
    cfg->fp32 = 1, cfg->no_dropout = 1, cfg->vocab_whole = 1;
    snprintf(cfg->order, sizeof cfg->order, "tp-pp-dp");
}

/* What one run measured on a rank: the peak of each category and of its device memory
 * above what it held before fourd_model_new, its stage, and the floats of rep's parts other
 * than the embedding and the head (which the stage holds but never uses). */
enum { M_STAGE = PL_MEM_NCAT, M_UNUSED, M_DEVICE, M_N };

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
    out[M_UNUSED] = 0;
    if (m->rep) {
        size_t off, e = 0, h = 0;
        if (m->has_embed) pl_model_part_range(&m->rep->layout, PL_PART_EMBED, &off, &e);
        if (m->has_head) pl_model_part_range(&m->rep->layout, ts->cfg.n_layers, &off, &h);
        out[M_UNUSED] = (double)m->rep->layout.numel - (double)e - (double)h;
    }
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
 * figure, params and grads less rep's unused parts (shown apart), the scratch and buffers
 * the planner does not model, and the device peak against the planner's total. */
void l9_plan_figures(struct l9_state *st, const char *tag)
{
    if (st->np != 8) return;
    struct run runs[2 * L9_MAX_CASES + 2];
    const int n = runs_of(st, runs);
    const double kb = 1e3;
    double worst_state = 0, worst_activ = 0, first_dev = 0, first_plan = 0, first_unused = 0;
    double first_work = 0;
    double worst_dev = 0;
    const char *activ_at = "", *dev_at = "";
    char at[L9_MAX_CASES * 2 + 2][32], at_dev[L9_MAX_CASES * 2 + 2][32];
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
        double got[M_N] = {0};
        for (int q = 0; q < st->np; q++)
            for (int c = 0; all[q][M_STAGE] == 0 && c < M_N; c++) got[c] = fmax(got[c], all[q][c]);
        const double unused = 4 * got[M_UNUSED]; /* bytes of params, and as many of grads */
        if (j == 0) {
            printf("# plan vs run (%s): stage 0's rank, kB = 1000 bytes: the planner's figure "
                   "(lib/plan.h, fp32 no_dropout vocab_whole, micro %d, m %d) beside the "
                   "memory ledger's peak over %d steps; params and grads less rep's unused "
                   "parts, shown apart\n", tag, L9_MB_SEQS, L9_MICRO, L9_K_STEPS);
            printf("%-8s %-4s %-9s %-12s %-12s %-12s %-12s %-6s %-5s %-5s %-13s %s\n",
                   "dp,tp,pp", "zero", "recompute", "params", "grads", "optim", "activ",
                   "unused", "comm", "work", "device total", "less unused");
            printf("%-24s %-12s %-12s %-12s %-12s %-6s %-5s %-5s %-13s %s\n", "",
                   "plan run", "plan run", "plan run", "plan run", "", "", "", "run plan",
                   "off");
        }
        const double dev = got[M_DEVICE] - 2 * unused, dev_off = off(dev, p.total);
        printf("%d,%d,%-4d %-4d %-9s %5.1f %-6.1f %5.1f %-6.1f %5.1f %-6.1f %5.1f %-6.1f "
               "%-6.1f %-5.1f %-5.1f %5.1f %-7.1f %+.1f%%\n", k->dp, k->tp, k->pp, r->zero,
               pl_recompute_name(r->rc), p.params / kb, (got[PL_MEM_PARAMS] - unused) / kb,
               p.grads / kb, (got[PL_MEM_GRADS] - unused) / kb, p.optim / kb,
               got[PL_MEM_OPTIM] / kb, p.activ / kb, got[PL_MEM_ACTIV] / kb, 2 * unused / kb,
               got[PL_MEM_COMM] / kb, got[PL_MEM_WORK] / kb, got[M_DEVICE] / kb, p.total / kb,
               dev_off);
        snprintf(at_dev[j], sizeof at_dev[j], "(%d,%d,%d) zero %d", k->dp, k->tp, k->pp,
                 r->zero);
        if (fabs(dev_off) > fabs(worst_dev)) worst_dev = dev_off, dev_at = at_dev[j];
        const double state[3] = {off(got[PL_MEM_PARAMS] - unused, p.params),
                                 off(got[PL_MEM_GRADS] - unused, p.grads),
                                 off(got[PL_MEM_OPTIM], p.optim)};
        for (int c = 0; c < 3; c++) worst_state = fmax(worst_state, fabs(state[c]));
        const double a = off(got[PL_MEM_ACTIV], p.activ);
        snprintf(at[j], sizeof at[j], "(%d,%d,%d)%s%s", k->dp, k->tp, k->pp,
                 r->rc ? " with " : "", r->rc ? pl_recompute_name(r->rc) : "");
        if (fabs(a) > fabs(worst_activ)) worst_activ = a, activ_at = at[j];
        if (j == 0)
            first_dev = got[M_DEVICE], first_plan = p.total, first_unused = 2 * unused,
            first_work = got[PL_MEM_WORK];
    }
    if (pl_rank() != 0) return;
    printf("# handout: the state (params, grads and optim, less rep's unused parts) is within "
           "%.1f%% of the plan on every run, and the activations at most %+.1f%% off, on %s\n",
           worst_state, worst_activ, activ_at);
    printf("# handout: on (2,2,2) a rank of stage 0 peaks at %.1f kB of device memory against "
           "the plan's %.1f kB: rep's unused blocks hold %.1f kB of it and the scratch %.1f "
           "kB\n", first_dev / kb, first_plan / kb, first_unused / kb, first_work / kb);
    printf("# handout: less rep's unused parts, the device peak is at most %+.1f%% off the "
           "plan's total, on %s\n", worst_dev, dev_at);
}
