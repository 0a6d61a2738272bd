/* capped.c: the capped run (handout section 3.4; --op capped). Grid (2,2,2) trains K
 * unclipped steps on a device too small for it without recomputation: each rank's device
 * memory (the memory ledger's PL_DEVICE bytes, every category: state, activations,
 * buffers and scratch) may grow by struct l9_cap's device above what the grader holds
 * when fourd_grid_new is called, and an allocation past that stops the job as a GPU's
 * allocator fails (lib/mem.h's device cap). The recomputation is the least the planner
 * admits on that device by Lab 8's rule, full here (l9_cap_device, planmem.c), unless
 * --recompute names another: with none the solution's run stops, which is the planner's
 * refusal made real.
 *
 * What it stops: a composition that holds more at once than its plan and the scratch of a
 * layer, counting what the plan test leaves out: a staging copy of every gradient for the
 * DP sum, a buffer per microbatch kept for the whole step, the pipeline's buffers never
 * freed; a run that ignores m->recompute (it holds every activation and passes the cap);
 * a recomputation that changes the training; and tensors moved to the host to hide them
 * from the cap (the host bytes are held to L9_CAP_HOST_SLACK). */
#include <stdio.h>
#include <string.h>

#include "lab09.h"
#include "plan_rules.h"

/* The most host bytes held at once, above a start, while the watch runs. */
struct host_watch {
    double start, most;
};

static void watch_host(const struct pl_mem_stats *now, void *ctx)
{
    struct host_watch *w = ctx;
    const double host = (double)now->current_total - (double)now->device_current - w->start;
    if (host > w->most) w->most = host;
}

void l9_observe_capped(struct l9_state *st, int i, struct l9_obs *ob)
{
    const struct l9_case *k = &st->cases[i];
    const struct gr_train_setup *ts = &st->train[i];
    struct l9_cap cap;
    l9_cap_device(st, i, &cap);
    const int rc = st->cap_rc;
    ob->has_cap = 1, ob->cap_rc = rc;
    if (pl_rank() == 0) {
        printf("capped run, grid (%d,%d,%d): each rank may hold %.1f kB of device memory above "
               "the grader's; the planner's totals (Lab 8's rule: a plan fits in %.0f%% of "
               "the device, %.1f kB) are %.1f kB with recompute none, %.1f selective, %.1f "
               "full, so it picks %s; this run uses %s\n", k->dp, k->tp, k->pp,
               cap.device / 1e3, 100 * PL_RULE_MEM_SHARE,
               PL_RULE_MEM_SHARE * cap.device / 1e3, cap.plan[0] / 1e3,
               cap.plan[1] / 1e3, cap.plan[2] / 1e3,
               pl_recompute_name((enum pl_recompute)cap.pick),
               pl_recompute_name((enum pl_recompute)rc));
        fflush(stdout);
    }
    struct gr_batch b;
    gr_batch_new(&b, ts, 0, 1); /* the grader's: before the cap counts */
    struct pl_mem_stats held, ms;
    pl_mem_get_stats(&held);
    const size_t was = pl_mem_device_cap();
    struct host_watch hw = {0, 0};
    pl_mem_set_device_cap(held.device_current + (size_t)cap.device);
    struct fourd_grid g;
    memset(&g, 0, sizeof g);
    struct fourd_model *m = NULL;
    ob->grid_ret = fourd_grid_new(&g, pl_comm_world(), L9_ORDER, k->dp, k->tp, k->pp);
    int ok = 0; /* every rank agrees on each step, so that none waits alone in a collective */
    if (!gr_agree(ob->grid_ret != 0 || pl_todo_what() != NULL)) {
        m = fourd_model_new(&ts->cfg, &st->free_opt[i], &g);
        ob->model_null = m == NULL;
        ok = !gr_agree(m == NULL || pl_todo_what() != NULL);
    }
    if (ok) {
        m->recompute = (enum pl_recompute)rc;
        m->zero = 0;
        /* the host bytes of the steps: fourd_model_new's staging of the initial values is
         * the kit's, freed before it returns */
        pl_mem_get_stats(&ms);
        hw.start = (double)ms.current_total - (double)ms.device_current;
        pl_mem_watch(watch_host, &hw);
        for (int s = 0; s < ts->steps && ok; s++) {
            gr_batch_load(&b, s);
            ob->cap_loss[s] = fourd_step(m, b.tokens, b.targets, b.B, L9_MICRO);
            ok = !gr_agree(pl_todo_what() != NULL);
        }
    }
    pl_mem_watch(NULL, NULL);
    ob->cap_done = ok;
    ob->cap_host = hw.most;
    pl_mem_set_device_cap(was); /* the comparison's copies are the grader's */
    if (ok)
        l9_compare_rank(&ob->cap_params, &ts->cfg, &st->free[i].layout, m, m->params,
                        m->rep ? m->rep->params : NULL, st->free[i].params, k->tp, g.tp_rank);
    if (m) fourd_model_free(m);
    if (ob->grid_ret == 0) fourd_grid_free(&g);
    gr_batch_free(&b);
}
