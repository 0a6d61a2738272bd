/* plantime.c: plan, run, compare, the step time (handout section 3.4). Each 8-rank grid's
 * step (unclipped, ZeRO off) is traced on every rank and replayed on the dgx-h100 profile at
 * a scale where the lab's blocks are real ones, beside what the kit's planner
 * (lib/plan.h's pl_plan_time) predicts for the same model at that scale and the same
 * configuration: the step time test's observation (cases.c, judged in planmem.c), the
 * bench's table, and the replay the timeline picture and the cool-down figures draw on
 * (timeline.c).
 *
 * The scale is one model the planner and the replay both describe: the lab's 4 blocks at
 * width H = 12288 (its MLP as wide, relative to the width, as the lab's), one sequence of
 * S = 2048 tokens a microbatch, and a vocabulary V' chosen so that the head is the same
 * share of the work as the lab's head is of its model. The trace is scaled axis by axis:
 * every compute event by the ratio of the two blocks' FLOPs; the tensor-parallel and
 * pipeline transfers by the ratio of the two microbatches' activations (b s h); the
 * data-parallel ones by the ratio of the two blocks' parameters. The replay runs the
 * kernels at the planner's rate (the profile's peak x its efficiency) on the virtual
 * cluster of 2 nodes of 4, and the planner is given the same cluster. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "block_time.h"
#include "lab09.h"
#include "plan.h"
#include "plan_internal.h"
#include "pipe_parts.h"
#include "replay.h"
#include "timeline.h"

#define T_H 12288
#define T_S 2048
#define T_HEAD_DIM 128

/* The scale of grid k's run: the planner's model and configuration, and the factors the
 * trace's events are multiplied by. */
struct scale {
    struct pl_plan_model pm;
    struct pl_plan_config cfg;
    double flop_x, act_x, param_x;
};

static void scale_of(const struct l9_state *st, int i, struct scale *s)
{
    const struct pl_model_config *c = &st->train[i].cfg;
    const struct l9_case *k = &st->cases[i];
    struct pl_plan_model *pm = &s->pm;
    memset(pm, 0, sizeof *pm);
    pm->name = "lab09 at scale";
    pm->layers = c->n_layers, pm->d_model = T_H, pm->heads = T_H / T_HEAD_DIM;
    pm->kv_heads = pm->heads, pm->d_ff = (int)((double)c->d_ff / c->d_model * T_H);
    pm->seq = T_S, pm->vocab = 1;
    /* one block's FLOPs a token at scale: the model's without its head, over its blocks */
    const double block_tok = (pl_plan_flops_per_token(pm) - 6.0 * T_H) / pm->layers;
    const double lab_block = pl_part_flops(c, 0, L9_MB_SEQS, c->seq_len);
    const double lab_head = pl_part_flops(c, PL_PART_HEAD(c), L9_MB_SEQS, c->seq_len);
    s->flop_x = block_tok * T_S / lab_block;
    pm->vocab = (int)lround(lab_head * s->flop_x / (6.0 * T_H * T_S));
    pm->batch_tokens = (double)k->dp * L9_MICRO * T_S;
    s->act_x = (double)T_S * T_H / ((double)L9_MB_SEQS * c->seq_len * c->d_model);
    struct pl_plan_params pp;
    struct pl_plan_model no_head = *pm;
    no_head.vocab = 1;
    pl_plan_params(&no_head, &pp);
    size_t off, n;
    pl_model_part_range(&st->ref[i].layout, 0, &off, &n);
    s->param_x = (pp.dense - pp.embedding) / pm->layers / (double)n;
    l9_plan_config(k, 0, PL_RECOMPUTE_NONE, &s->cfg);
    s->cfg.micro = 1;
}

/* AdamW's compute under its own span, so that the replay can tell it apart: its work is per
 * parameter, and at scale it grows with the parameters, not with the tokens (on the lab's
 * model the optimizer step is a few percent of a step's FLOPs; on a real model's, a fraction
 * of a percent). */
#define OPT_SPAN "adamw"
void __real_pl_adamw_step(float *param, const float *grad, float *m, float *v, size_t n, int t,
                          float lr, float beta1, float beta2, float eps, float weight_decay);
void __wrap_pl_adamw_step(float *param, const float *grad, float *m, float *v, size_t n, int t,
                          float lr, float beta1, float beta2, float eps, float weight_decay);
void __wrap_pl_adamw_step(float *param, const float *grad, float *m, float *v, size_t n, int t,
                          float lr, float beta1, float beta2, float eps, float weight_decay)
{
    char was[PL_LABEL_LEN];
    snprintf(was, sizeof was, "%s", pl_span_label());
    pl_span(OPT_SPAN);
    __real_pl_adamw_step(param, grad, m, v, n, t, lr, beta1, beta2, eps, weight_decay);
    pl_span(was);
}

/* Rank 0: the trace scaled axis by axis into out (gr_trace_scaled_free frees it). */
static void scale_trace(const struct pl_merged_trace *t, const struct l9_case *k,
                        const struct scale *s, struct pl_merged_trace *out)
{
    struct pl_grid grid;
    char deg[64], err[256];
    snprintf(deg, sizeof deg, "tp=%d,pp=%d,dp=%d", k->tp, k->pp, k->dp);
    PL_ASSERT(pl_grid_init(&grid, L9_ORDER, deg, t->nranks, err, sizeof err) == 0);
    gr_trace_scaled(t, s->flop_x, s->act_x, out);
    for (int r = 0; r < out->nranks; r++)
        for (int e = 0; e < out->nevents[r]; e++) {
            struct pl_event *ev = &out->events[r][e];
            if (ev->type == PL_EV_COMPUTE && !strcmp(ev->label, OPT_SPAN))
                ev->flops = t->events[r][e].flops * s->param_x;
            if (ev->type != PL_EV_ISSUE) continue;
            for (int g = 0; g < t->ngroups; g++) {
                const struct pl_group_def *d = &t->groups[g];
                if (d->id == ev->group && l9_axis_of(&grid, d->ranks, d->n) == L9_AX_DP)
                    ev->bytes = t->events[r][e].bytes * s->param_x;
            }
        }
}

/* Rank 0: each rank's compute and bytes sent on each link class on the replay rp of the
 * scaled trace sc, into out. */
static void per_rank(const struct pl_merged_trace *sc, const struct pl_replay *rp,
                     struct l9_time *out)
{
    const struct pl_topo *topo = pl_topo();
    for (int r = 0; r < sc->nranks && r < L9_MAX_RANKS; r++) {
        out->compute[r] = rp->rank[r].compute;
        for (int e = 0; e < sc->nevents[r]; e++) {
            const struct pl_event *ev = &sc->events[r][e];
            if ((ev->type == PL_EV_SEND || ev->type == PL_EV_ISEND) && ev->peer >= 0 &&
                ev->peer < sc->nranks) {
                out->sent[r][pl_topo_link(topo, r, ev->peer) == PL_LINK_INTER] += ev->bytes;
                continue;
            }
            if (ev->type != PL_EV_ISSUE) continue;
            for (int g = 0; g < sc->ngroups; g++) {
                const struct pl_group_def *d = &sc->groups[g];
                if (d->id != ev->group || d->n < 2) continue;
                const int inter = pl_topo_group_link(topo, d->ranks, d->n) == PL_LINK_INTER;
                out->sent[r][inter] += pl_ring_bytes_sent(ev->kind, d->n, ev->bytes);
            }
        }
    }
}

/* The replay's profile: dgx-h100 with its kernels at the planner's rate (peak x
 * efficiency), and the planner's cluster of it with the virtual cluster's nodes. */
static void profile_and_cluster(struct pl_profile *prof, struct pl_plan_cluster *cl)
{
    *prof = *pl_profile_find(GR_BT_PROFILE);
    pl_plan_cluster_from_profile(cl, prof, pl_topo()->nodes);
    cl->per_node = pl_topo()->per_node;
    prof->flops *= prof->efficiency;
}

/* l9_replay_at_scale with grid k's scale s and the replay's profile prof already made. */
static int replay_scaled(const struct l9_case *k, const struct scale *s,
                         const struct pl_profile *prof, const struct pl_merged_trace *t,
                         struct pl_merged_trace *sc, struct pl_replay *rp, char *err, size_t len)
{
    scale_trace(t, k, s, sc);
    int rc = pl_replay_run_streams(sc, prof, pl_topo(), PL_REPLAY_STREAM_PER_LINK, rp, err,
                                   len);
    if (rc != 0) gr_trace_scaled_free(sc);
    return rc;
}

int l9_replay_at_scale(const struct l9_state *st, int i, const struct pl_merged_trace *t,
                       struct pl_merged_trace *sc, struct pl_replay *rp, char *err, size_t len)
{
    struct scale s;
    scale_of(st, i, &s);
    struct pl_profile prof;
    struct pl_plan_cluster cl;
    profile_and_cluster(&prof, &cl);
    return replay_scaled(&st->cases[i], &s, &prof, t, sc, rp, err, len);
}

int l9_time_replay(struct l9_state *st, int i, struct l9_time *out)
{
    memset(out, 0, sizeof *out);
    struct pl_merged_trace t;
    if (!l9_trace_step(st, i, &t)) {
        pl_trace_merged_free(&t);
        return 0;
    }
    if (pl_rank() == 0) {
        struct scale s;
        scale_of(st, i, &s);
        struct pl_profile prof;
        struct pl_plan_cluster cl;
        profile_and_cluster(&prof, &cl);
        struct pl_plan_time pt;
        out->plan_step = pl_plan_time(&s.pm, &cl, &s.cfg, &pt);
        out->plan_compute = pt.compute, out->plan_bubble = pt.bubble;
        static const int ax[L9_T_NAX] = {PL_AX_TP, PL_AX_PP, PL_AX_DP};
        for (int a = 0; a < L9_T_NAX; a++) {
            out->plan_exposed[a] = pt.exposed[ax[a]];
            out->plan_sent[pt.link[ax[a]] == PL_LINK_INTER] += pt.bytes[ax[a]];
        }
        (void)pl_plan_pacing_stage(&s.pm, &s.cfg, &out->with_head);
        struct pl_merged_trace sc;
        struct pl_replay rp;
        if (replay_scaled(&st->cases[i], &s, &prof, &t, &sc, &rp, out->err,
                          sizeof out->err) == 0) {
            out->replayed = 1;
            out->step = rp.step_time;
            per_rank(&sc, &rp, out);
            pl_replay_free(&rp);
            gr_trace_scaled_free(&sc);
        }
    }
    pl_trace_merged_free(&t);
    return 1;
}

void l9_time_figures(struct l9_state *st, const char *tag)
{
    if (st->np != 8) return;
    const double ms = 1e3;
    double lo = 1e9, hi = -1e9;
    char lo_at[32] = "", hi_at[32] = "", pace[200] = "";
    for (int i = 0; i < st->ncases; i++) {
        struct l9_time tm;
        if (!l9_time_replay(st, i, &tm)) return;
        if (pl_rank() != 0) continue;
        const struct l9_case *k = &st->cases[i];
        if (i == 0) {
            struct scale s;
            scale_of(st, i, &s);
            printf("# time plan vs run (%s): one step of each grid replayed on %s at scale "
                   "(%d blocks of width %d, MLP %d, vocabulary %d, 1 sequence of %d tokens a "
                   "microbatch, m = %d; kernels at the planner's rate, a stream per link "
                   "class) beside pl_plan_time for that model; ms\n", tag, GR_BT_PROFILE,
                   s.pm.layers, s.pm.d_model, s.pm.d_ff, s.pm.vocab, T_S, L9_MICRO);
            printf("%-8s | %-7s %-6s %-6s %-7s %-7s %-7s | %-7s %-8s %s\n", "dp,tp,pp",
                   "compute", "tp", "pp", "bubble", "dp", "step", "step", "compute", "off");
        }
        if (!tm.replayed) {
            printf("%d,%d,%d: the trace does not replay: %s\n", k->dp, k->tp, k->pp, tm.err);
            continue;
        }
        double most = 0;
        for (int r = 0; r < st->np; r++) most = fmax(most, tm.compute[r]);
        printf("%d,%d,%-4d | %-7.1f %-6.1f %-6.1f %-7.1f %-7.1f %-7.1f | %-7.1f %-8.1f %+.1f%%\n",
               k->dp, k->tp, k->pp, ms * tm.plan_compute, ms * tm.plan_exposed[L9_T_TP],
               ms * tm.plan_exposed[L9_T_PP], ms * tm.plan_bubble,
               ms * tm.plan_exposed[L9_T_DP], ms * tm.plan_step, ms * tm.step, ms * most,
               100 * (tm.step / tm.plan_step - 1));
        const double off = 100 * (tm.step / tm.plan_step - 1);
        if (off < lo) lo = off, snprintf(lo_at, sizeof lo_at, "(%d,%d,%d)", k->dp, k->tp, k->pp);
        if (off > hi) hi = off, snprintf(hi_at, sizeof hi_at, "(%d,%d,%d)", k->dp, k->tp, k->pp);
        if (k->pp == 4 && tm.with_head)
            snprintf(pace, sizeof pace, "# handout: on (%d,%d,%d) the last stage, one block and "
                     "the head, computes %.1f ms a step against the first stage's %.1f\n",
                     k->dp, k->tp, k->pp, ms * tm.compute[st->np - 1], ms * tm.compute[0]);
    }
    if (pl_rank() == 0) printf("%s", pace);
    if (pl_rank() == 0 && hi > -1e9)
        printf("# handout: every grid's replayed step is within %.1f%% of the plan: from "
               "%+.1f%% on %s to %+.1f%% on %s; the step time test's bound %.0f%% either way\n",
               fmax(fabs(lo), fabs(hi)), lo, lo_at, hi, hi_at, 100 * L9_TIME_SHARE);
}
