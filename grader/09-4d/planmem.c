/* planmem.c: memory held to the plan (handout section 3.4). Every 8-rank run the cases
 * measure -- each grid unclipped, again with ZeRO-1 where dp > 1, and (2,2,2) with selective
 * and full recomputation -- against what the kit's planner (lib/plan.h's pl_plan_memory)
 * says a rank of that configuration holds: the lab's model as a struct pl_plan_model, the
 * grid's degrees, m microbatches of micro sequences, ZeRO and recomputation as run, and
 * Lab 8's switches for how this lab trains (fp32, no dropout, the vocabulary's matrices
 * whole on every TP rank).
 *
 * What a rank holds is the sum of four peaks of its memory ledger, params, grads, optim and
 * activ, each above what it held before fourd_model_new: the state and activations the
 * planner counts. The scratch and communication buffers, which the planner does not model,
 * are left out (the handout's table shows them). The sum is within L9_PLAN_SHARE of the
 * planner's total: at most over it on every rank (no rank holds what the plan does not
 * give it), at least under it on stage 0's ranks (the rank the planner describes holds what
 * the configuration asks; a run that frees its activations before their backward, or
 * recomputes what it was told to keep, holds less).
 *
 * Threat model: a rep that holds the blocks it never uses (a whole pl_model: its
 * parameters and gradients of every block, some 2.5 x the stage's state here), moments
 * for the whole model under ZeRO-1, more microbatches' activations than 1F1B keeps in
 * flight (all m of them, as GPipe's order), a second copy of the shards or of the
 * gradients, anything held from fourd_model_new to the last step that the plan has no
 * line for. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lab09.h"
#include "plan.h"
#include "plan_rules.h"

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
    /* L9_ORDER, tp-pp-dp, with the planner's cp and ep between tp and pp: of size 1, they
     * leave every rank where tp-pp-dp puts it (a grid needs every axis named) */
    snprintf(cfg->order, sizeof cfg->order, "%s", PL_PLAN_ORDER);
}

static const char *RUN_NAME[L9_MEM_RUNS] = {"", " with ZeRO-1", " with recompute selective",
                                            " with recompute full"};

/* The category the rank holds most over the plan of, and what that usually means. */
static void say_excess(const double got[5], const struct pl_plan_memory *p,
                       struct gr_why *why)
{
    const double plan[4] = {p->params, p->grads, p->optim, p->activ};
    static const char *name[4] = {"params", "grads", "optim", "activ"};
    static const char *hint[4] = {
        "a copy of parameters the plan does not count is held: rep of more than the ends "
        "its stage has (pl_model_new_ends, not a whole model whose blocks this rank never "
        "uses), a second copy of the shards, a gathered buffer or a staging copy kept past "
        "its use?",
        "one gradient buffer for what the rank holds: are rep's gradients those of its "
        "ends alone, and no second buffer of the whole gradient kept across the step?",
        "AdamW's moments of what this rank updates alone: under ZeRO-1 of its shares, and "
        "never a whole pl_model's (rep made without PL_MODEL_OPTIM)",
        "1F1B keeps min(p - s, m) microbatches' activations on stage s, each as "
        "m->recompute says: is each microbatch's freed right after its backward, does the "
        "warm-up run p - s - 1 forwards, not all m, and is the recomputation choice given to "
        "every block?"};
    int worst = 0;
    for (int c = 1; c < 4; c++)
        if (got[c] - plan[c] > got[worst] - plan[worst]) worst = c;
    gr_why_say(why, "the most over is %s: %.1f kB against the plan's %.1f kB; %s", name[worst],
               got[worst] / 1e3, plan[worst] / 1e3, hint[worst]);
}

int l9_judge_plan(const struct l9_state *st, int i, const struct gr_obs *all,
                  struct gr_why *why)
{
    if (st->np != 8) return 1;
    const struct l9_case *k = &st->cases[i];
    for (int j = 0; j < L9_MEM_RUNS; j++) {
        if (!((const struct l9_obs *)gr_obs_rank(all, 0))->has_mem[j]) continue;
        const enum pl_recompute rc = j == L9_MEM_SELECTIVE ? PL_RECOMPUTE_SELECTIVE
                                     : j == L9_MEM_FULL    ? PL_RECOMPUTE_FULL
                                                           : PL_RECOMPUTE_NONE;
        struct pl_plan_model pm;
        struct pl_plan_config cfg;
        struct pl_plan_memory p;
        l9_plan_model(&st->train[i].cfg, k, &pm);
        l9_plan_config(k, j == L9_MEM_ZERO, rc, &cfg);
        pl_plan_memory(&pm, NULL, &cfg, &p);
        const double hi = (1 + L9_PLAN_SHARE) * p.total, lo = (1 - L9_PLAN_SHARE) * p.total;
        for (int r = 0; r < all->nranks; r++) {
            const struct l9_obs *o = gr_obs_rank(all, r);
            const double *got = o->mem[j];
            const double held = got[L9_MEM_PARAMS] + got[L9_MEM_GRADS] + got[L9_MEM_OPTIM] +
                                got[L9_MEM_ACTIV];
            const int stage = o->coord[2];
            if (held <= hi && (stage != 0 || held >= lo)) continue;
            gr_why_say(why, "grid (%d,%d,%d)%s, rank %d (stage %d): it holds %.1f kB at its "
                       "peaks (params %.1f, grads %.1f, optim %.1f, activ %.1f kB, above "
                       "what it held before fourd_model_new), where the planner gives a "
                       "rank of stage 0 %.1f kB (params %.1f, grads %.1f, optim %.1f, activ "
                       "%.1f): %s %.0f%% %s", k->dp, k->tp, k->pp, RUN_NAME[j], r, stage,
                       held / 1e3, got[0] / 1e3, got[1] / 1e3, got[2] / 1e3, got[3] / 1e3,
                       p.total / 1e3, p.params / 1e3, p.grads / 1e3, p.optim / 1e3,
                       p.activ / 1e3, held > hi ? "more than" : "less than",
                       100 * L9_PLAN_SHARE, held > hi ? "over" : "under, on the stage the plan describes");
            if (held > hi)
                say_excess(got, &p, why);
            else
                gr_why_say(why, "a rank that holds less than the plan keeps less than the "
                           "configuration asks: are the activations of every microbatch in "
                           "flight kept until its backward (recomputing only what "
                           "m->recompute says), and the state allocated as the plan counts "
                           "it?");
            return 0;
        }
    }
    return 1;
}

/* ---- the capped run ---- */

void l9_cap_device(const struct l9_state *st, int i, struct l9_cap *c)
{
    const struct l9_case *k = &st->cases[i];
    struct pl_plan_model pm;
    l9_plan_model(&st->train[i].cfg, k, &pm);
    for (int r = PL_RECOMPUTE_NONE; r <= PL_RECOMPUTE_FULL; r++) {
        struct pl_plan_config cfg;
        l9_plan_config(k, 0, (enum pl_recompute)r, &cfg);
        c->plan[r] = pl_plan_memory(&pm, NULL, &cfg, NULL);
    }
    c->device = 0.5 * (c->plan[PL_RECOMPUTE_NONE] + c->plan[PL_RECOMPUTE_FULL]) /
                PL_RULE_MEM_SHARE;
    c->pick = PL_RECOMPUTE_FULL;
    for (int r = PL_RECOMPUTE_FULL; r >= PL_RECOMPUTE_NONE; r--)
        if (pl_rule_memory(c->plan[r], c->device, NULL, 0) == 0) c->pick = r;
}

int l9_judge_cap(const struct l9_state *st, int i, const struct gr_obs *all,
                 struct gr_why *why)
{
    const struct l9_case *k = &st->cases[i];
    const struct gr_reference *ref = &st->free[i];
    struct l9_cap c;
    l9_cap_device(st, i, &c);
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = gr_obs_rank(all, r);
        if (!o->has_cap) {
            gr_why_say(why, "internal: rank %d made no capped run", r);
            return 0;
        }
        if (o->grid_ret != 0 || o->model_null) {
            gr_why_say(why, "fourd_grid_new returned %d or fourd_model_new NULL on rank %d "
                       "for grid (%d,%d,%d): see section 1", o->grid_ret, r, k->dp, k->tp,
                       k->pp);
            return 0;
        }
        if (!o->cap_done) {
            gr_why_say(why, "rank %d did not run its steps under the cap", r);
            return 0;
        }
    }
    const char *rc = pl_recompute_name((enum pl_recompute)((const struct l9_obs *)
                                                              gr_obs_rank(all, 0))->cap_rc);
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = gr_obs_rank(all, r);
        for (int s = 0; s < L9_K_STEPS; s++) {
            const double err = gr_rel_err(o->cap_loss[s], ref->loss[s]);
            if (!(err <= GR_TOL_LOSS)) {
                gr_why_say(why, "under the cap with recompute %s, step %d: rank %d's "
                           "fourd_step returned loss %.7g, one device %.7g (relative error "
                           "%.2g, at most %g): recomputation must give the same training",
                           rc, s, r, o->cap_loss[s], ref->loss[s], err, GR_TOL_LOSS);
                return 0;
            }
        }
        if (!(o->cap_params.rel <= GR_TOL_PARAMS)) {
            gr_why_say(why, "under the cap with recompute %s, after %d steps rank %d holds %s "
                       "with relative L2 error %.3g against one device's (at most %g): "
                       "recomputation must give the same training", rc, L9_K_STEPS, r,
                       o->cap_params.name, o->cap_params.rel, GR_TOL_PARAMS);
            return 0;
        }
        /* A GPU computes on its own memory: a run that held its tensors on the host would
         * meet any cap. The grader's batch and the kit's scalars are not the code's. */
        if (o->cap_host > L9_CAP_HOST_SLACK) {
            gr_why_say(why, "under the cap, rank %d held %.1f kB of host memory (PL_HOST) at "
                       "once during the steps, where %.1f kB is allowed: the cap (%.1f kB) is "
                       "the device's, and a GPU computes on its own memory; allocate the "
                       "model's tensors, activations and buffers with PL_DEVICE (moving them "
                       "to the host, as ZeRO-Offload does, is not this lab's way to fit)", r,
                       o->cap_host / 1e3, L9_CAP_HOST_SLACK / 1e3, c.device / 1e3);
            return 0;
        }
    }
    return 1;
}

/* ---- the step time held to the plan ---- */

/* Over the plan: the rank that computes most, then the bytes across nodes, then the waits. */
static void say_slow(const struct l9_time *t, int np, struct gr_why *why)
{
    int busy = 0, most = 0;
    for (int r = 1; r < np; r++) {
        if (t->compute[r] > t->compute[busy]) busy = r;
        if (t->sent[r][1] > t->sent[most][1]) most = r;
    }
    if (t->compute[busy] > (1 + L9_TIME_SHARE) * t->plan_compute) {
        gr_why_say(why, "rank %d computes %.1f ms against the plan's %.1f ms for the %s "
                   "stage, the slowest: a part run more than once, or more of it than the "
                   "stage's share (the head whole on every TP rank, a block of another stage, "
                   "recomputation that m->recompute did not ask for)?", busy,
                   1e3 * t->compute[busy], 1e3 * t->plan_compute,
                   t->with_head ? "last" : "first");
    } else if (t->sent[most][1] > (1 + 2 * L9_TIME_SHARE) * t->plan_sent[1] + 1.0) {
        gr_why_say(why, "rank %d sends %.2f GB across nodes a step at scale, against the "
                   "plan's %.2f GB: across nodes the plan has only what tp-pp-dp puts there "
                   "(the DP sum, one all-reduce of each gradient a step, and the sends "
                   "between stages on different nodes); is a gradient summed twice, or a TP "
                   "group spread over nodes?", most, t->sent[most][1] / 1e9,
                   t->plan_sent[1] / 1e9);
    } else {
        gr_why_say(why, "the compute and the traffic across nodes are the plan's, so the "
                   "ranks wait: does each stage run 1F1B (p - s - 1 forwards, then one "
                   "forward and one backward in turn, no send waited for before the next "
                   "compute), and does the DP sum start while the last backwards still run "
                   "(section 3.3)?");
    }
}

int l9_judge_time(const struct l9_state *st, int i, const struct gr_obs *all,
                  struct gr_why *why)
{
    const struct l9_obs *o = gr_obs_rank(all, 0);
    if (st->np != 8 || !o->has_time) return 1;
    const struct l9_case *k = &st->cases[i];
    const struct l9_time *t = &o->time;
    if (!t->replayed) {
        gr_why_say(why, "grid (%d,%d,%d): one step's trace does not replay: %s", k->dp, k->tp,
                   k->pp, t->err);
        return 0;
    }
    const double off = t->step / t->plan_step - 1;
    if (fabs(off) <= L9_TIME_SHARE) return 1;
    gr_why_say(why, "grid (%d,%d,%d): one step replayed at scale takes %.1f ms, %+.1f%% off "
               "the plan's %.1f ms (compute %.1f, the %s stage's; tp %.1f, pp %.1f, bubble "
               "%.1f, dp exposed %.1f), where the bound is %.0f%% either way", k->dp, k->tp,
               k->pp, 1e3 * t->step, 100 * off, 1e3 * t->plan_step, 1e3 * t->plan_compute,
               t->with_head ? "last" : "first", 1e3 * t->plan_exposed[L9_T_TP],
               1e3 * t->plan_exposed[L9_T_PP], 1e3 * t->plan_bubble,
               1e3 * t->plan_exposed[L9_T_DP], 100 * L9_TIME_SHARE);
    if (off > 0)
        say_slow(t, st->np, why);
    else
        gr_why_say(why, "faster than the plan for this configuration: the run is not the "
                   "configuration planned. Are the TP groups inside a node and the DP "
                   "groups across, as tp-pp-dp lays them out, and is every axis's work "
                   "done (section 2)?");
    return 0;
}
