/* judge.c: Lab 8's verdicts. Each op's judge compares what the student's code gave with
 * the oracle's figures of the case (cases.c ran both) and says why a part fails with
 * gr_say: every category of memory and time within L8_TOL_EST (the data-parallel figures
 * within the band of section 4.3's two choices), the search's choice against every rule and
 * within L8_TOL_QUALITY of the kit's best, a published run within L8_SANITY_POINTS of its
 * MFU, and the numeric answers of placement_answers. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lab08.h"

/* ---------------------------------------------------------------- judges */

static int close_to(double got, double want)
{
    return fabs(got - want) <= 1e-9 + L8_TOL_EST * fabs(want);
}

/* One line per category that differs; returns how many. */
static int compare_value(const char *part, const char *what, double got, double want,
                         double unit, const char *unit_name, const char *hint)
{
    if (close_to(got, want)) return 0;
    gr_say(part, "%s: yours %.4g %s, the kit's %.4g %s%s%s", what, got / unit, unit_name,
           want / unit, unit_name, hint ? ": " : "", hint ? hint : "");
    return 1;
}

static int judge_memory(const struct l8_case *t)
{
    const struct pl_plan_memory *g = &t->mem, *w = &t->mem_ref;
    int bad = 0;
    bad += compare_value("correct", "parameters", g->params, w->params, 1e9, "GB",
                         "2 bytes per parameter, sharded only by ZeRO-3 (section 3.1)");
    bad += compare_value("correct", "gradients", g->grads, w->grads, 1e9, "GB",
                         "2 bytes per parameter, sharded from ZeRO-2 on (section 3.1)");
    bad += compare_value("correct", "optimizer state", g->optim, w->optim, 1e9, "GB",
                         "12 bytes per parameter, sharded from ZeRO-1 on (section 3.1)");
    const char *activ_hint = g->activ == 0.0
        ? "none counted: every microbatch in flight keeps each layer's activations (section 3.2)"
        : "per layer x layers on the stage x microbatches in flight, + logits (section 3.2)";
    bad += compare_value("correct", "activations", g->activ, w->activ, 1e9, "GB", activ_hint);
    /* The three factors of the activations, which placement.h asks for too. */
    bad += compare_value("correct", "layers_stage", g->layers_stage, w->layers_stage, 1,
                         "layers", "the first stage holds ceil(L/p) layers (section 3.2)");
    bad += compare_value("correct", "in_flight", g->in_flight, w->in_flight, 1, "microbatches",
                         "min(m, p) on the first stage (1 without a pipeline), x (1 + (p-1)/(p "
                         "v)) interleaved (section 3.2)");
    bad += compare_value("correct", "activ_layer", g->activ_layer, w->activ_layer, 1e6, "MB",
                         "one layer, one microbatch, as stored after recomputation: sbh(10/t' + "
                         "(8 + 4r)/t + 5as/(ht)), r the widths a token passes through, shared "
                         "experts included (section 3.2)");
    if (!bad) bad += compare_value("correct", "total", g->total, w->total, 1e9, "GB",
                                   "the total is the sum of the four categories");
    return !bad;
}

/* The hint for a wrong data-parallel time. With dp = 1 and a cp or ep group, the dense
 * gradients are still reduced (over cp x ep) and the dp axis, of size 1, must not make that
 * reduction cross the network: a rule applied without section 2's "size 1" case does. */
static const char *dp_hint(const struct l8_case *t, char *buf, size_t len)
{
    const int *d = t->cfg.deg;
    enum pl_link mine = t->time.link[PL_AX_DP], kit = t->time_ref.link[PL_AX_DP];
    if (t->cfg.zero == 0 && d[PL_AX_DP] * d[PL_AX_EP] > 1)
        return "ZeRO-0 reduces the gradients with one all-reduce, exposed beyond the backward: "
               "max(0, AR - bwd), not ZeRO-1's reduce-scatter behind the backward and all-gather "
               "behind the forward (section 4.3)";
    if (d[PL_AX_DP] != 1 || d[PL_AX_CP] * d[PL_AX_EP] == 1) return "section 4.3";
    int n = snprintf(buf, len, "with dp = 1 the dense gradients are still reduced, over cp x ep "
                     "= %d GPUs, on the link of the cp and ep groups (section 4.3): the dp "
                     "axis, of size 1, has no group to spread and counts as inside a node "
                     "(section 2's table)", d[PL_AX_CP] * d[PL_AX_EP]);
    if (mine != kit && (mine == PL_LINK_INTRA || mine == PL_LINK_INTER) && n > 0 &&
        (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, "; yours reports dp's link as %s-node, the kit's "
                 "as %s-node", pl_link_name(mine), pl_link_name(kit));
    return buf;
}

/* Section 4.3's named alternative: the exposed data-parallel time with the dense and the
 * expert reductions hidden together behind one backward (and their gathers behind one
 * forward), max(0, dense + expert - window), where the kit hides each on its own. It is
 * never less than the kit's, and equal to it unless both groups have something to reduce.
 * Computed here from the handout's formulas and the kit's figures for the case (compute
 * per microbatch, the dp link). */
static double dp_together(const struct l8_case *t)
{
    const struct pl_plan_model *m = &t->model;
    const struct pl_plan_cluster *c = &t->cluster;
    const struct pl_plan_config *cfg = &t->cfg;
    const int *d = cfg->deg;
    struct pl_plan_params p;
    pl_plan_params(m, &p);
    double layers = (m->layers + d[PL_AX_PP] - 1) / d[PL_AX_PP];
    double emb = d[PL_AX_PP] == 1 ? p.embedding : (double)m->vocab * m->d_model;
    double psi[2] = {(layers * (p.dense - p.embedding) / m->layers + emb) / d[PL_AX_TP],
                     layers * (p.expert / m->layers) / ((double)d[PL_AX_TP] * d[PL_AX_EP])};
    int n[2] = {d[PL_AX_CP] * d[PL_AX_EP] * d[PL_AX_DP], d[PL_AX_CP] * d[PL_AX_DP]};
    const enum pl_link *ln = t->time_ref.link;
    enum pl_link l = ln[PL_AX_EP] == PL_LINK_INTER || ln[PL_AX_CP] == PL_LINK_INTER
                         ? PL_LINK_INTER : ln[PL_AX_DP];
    double u = t->time_ref.compute / cfg->m, fwd = u / 3, bwd = 2 * u / 3, rs = 0, ag = 0,
           ar = 0;
    for (int k = 0; k < 2; k++) {
        double S = 2 * psi[k];
        if (n[k] <= 1 || S == 0) continue;
        rs += pl_coll_time(PL_REDUCE_SCATTER, n[k], S, c->latency[l], c->bw[l]);
        ag += pl_coll_time(PL_ALL_GATHER, n[k], S, c->latency[l], c->bw[l]);
        ar += pl_coll_time(PL_ALL_REDUCE, n[k], S, c->latency[l], c->bw[l]);
    }
    if (cfg->zero == 3) return cfg->m * (fmax(0, ag - fwd) + fmax(0, ag + rs - bwd));
    if (cfg->zero == 0) return fmax(0, ar - bwd);
    return fmax(0, rs - bwd) + fmax(0, ag - fwd);
}

/* Like compare_value, for a figure the two data-parallel choices of section 4.3 both give:
 * right within L8_TOL_EST of the kit's (want), of the alternative's (alt), or between them. */
static int compare_band(const char *what, double got, double want, double alt, double unit,
                        const char *unit_name, const char *hint)
{
    if (close_to(got, want) || close_to(got, alt) || (got - want) * (got - alt) <= 0) return 0;
    if (fabs(alt - want) <= 1e-9 + L8_TOL_EST * fabs(want))
        return compare_value("correct", what, got, want, unit, unit_name, hint);
    gr_say("correct", "%s: yours %.4g %s, the kit's %.4g %s (%.4g with the two parameter "
           "groups' reductions hidden together, section 4.3's alternative)%s%s", what,
           got / unit, unit_name, want / unit, unit_name, alt / unit, hint ? ": " : "",
           hint ? hint : "");
    return 1;
}

static int judge_time(const struct l8_case *t)
{
    const struct pl_plan_time *g = &t->time, *w = &t->time_ref;
    int bad = 0;
    char hint[512];
    /* Where the alternative differs, the step and what follows from it move with it. */
    double dp_alt = dp_together(t), step_alt = w->step - w->exposed[PL_AX_DP] + dp_alt;
    double slower = w->step / step_alt;
    bad += compare_value("correct", "compute", g->compute, w->compute, 1, "s",
                         "m microbatches' FLOPs on the stage at peak x efficiency (section 4.1)");
    for (int a = 0; a < PL_NAXES; a++) {
        char what[64];
        snprintf(what, sizeof what, "exposed %s communication", pl_plan_axis_name(a));
        if (a == PL_AX_DP)
            bad += compare_band(what, g->exposed[a], w->exposed[a], dp_alt, 1, "s",
                                dp_hint(t, hint, sizeof hint));
        else bad += compare_value("correct", what, g->exposed[a], w->exposed[a], 1, "s",
                                  "section 4.2");
    }
    bad += compare_value("correct", "bubble", g->bubble, w->bubble, 1, "s",
                         "(p-1)/v slots of one microbatch, communication included (section 4.3)");
    bad += compare_band("step", g->step, w->step, step_alt, 1, "s", NULL);
    bad += compare_band("MFU", g->mfu, w->mfu, w->mfu * slower, 0.01, "%",
                        "model FLOPs per step / (step x GPUs x peak) (section 4.4)");
    bad += compare_band("HFU", g->hfu, w->hfu, w->hfu * slower, 0.01, "%",
                        "MFU x the microbatch's FLOPs with recomputation / without (section "
                        "4.4)");
    bad += compare_band("tflops", g->tflops, w->tflops, w->tflops * slower, 1, "TFLOP/s",
                        "model TFLOP/s per GPU: model FLOPs per step / GPUs / step / 1e12 "
                        "(section 4.4)");
    for (int a = 0; a < PL_NAXES; a++) {
        char what[64];
        snprintf(what, sizeof what, "bytes sent on %s", pl_plan_axis_name(a));
        bad += compare_value("correct", what, g->bytes[a], w->bytes[a], 1e9, "GB",
                             a == PL_AX_DP ? "2 reduce-scatters' worth of pl_ring_bytes_sent per "
                             "parameter group, 3m with ZeRO-3 (section 4.3)"
                                           : "m x pl_ring_bytes_sent of each collective (pp: "
                                             "the message bytes) (section 4.2)");
        if (g->link[a] != w->link[a]) {
            /* What code that assumes the preset clusters' shape or the default order would
             * miss: said where this configuration differs from them. */
            char shape[160] = "";
            if (t->cluster.per_node != 8)
                snprintf(shape, sizeof shape, "; this cluster's nodes hold %d GPUs "
                         "(c->per_node), not 8", t->cluster.per_node);
            else if (strcmp(t->cfg.order, PL_PLAN_ORDER))
                snprintf(shape, sizeof shape, "; this configuration's rank order is %s "
                         "(cfg->order), not the default " PL_PLAN_ORDER, t->cfg.order);
            gr_say("correct", "link of %s: yours %s-node, the kit's %s-node: intra-node when "
                   "pl_rule_inside_node holds for the axis under the order, else inter-node "
                   "(section 4.2)%s%s", pl_plan_axis_name(a),
                   g->link[a] == PL_LINK_INTRA || g->link[a] == PL_LINK_INTER
                       ? pl_link_name(g->link[a]) : "not a link class",
                   pl_link_name(w->link[a]),
                   t->cfg.deg[a] == 1 ? "; an axis of size 1 has no group to spread and counts "
                                        "as inside a node (section 2's table)" : "", shape);
            bad++;
        }
    }
    return !bad;
}

/* The fields in which two configurations differ, for a message. */
static void differences(const struct pl_plan_config *a, const struct pl_plan_config *b,
                        char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int k = 0; k < PL_NAXES && n < len; k++)
        if (a->deg[k] != b->deg[k])
            n += (size_t)snprintf(buf + n, len - n, "%s%s %d vs %d", n ? ", " : "",
                                  pl_plan_axis_name(k), a->deg[k], b->deg[k]);
    if (a->zero != b->zero && n < len)
        n += (size_t)snprintf(buf + n, len - n, "%sZeRO-%d vs ZeRO-%d", n ? ", " : "", a->zero,
                              b->zero);
    if (a->recompute != b->recompute && n < len)
        n += (size_t)snprintf(buf + n, len - n, "%srecompute %s vs %s", n ? ", " : "",
                              pl_recompute_name(a->recompute), pl_recompute_name(b->recompute));
    if ((a->micro != b->micro || a->v != b->v) && n < len)
        snprintf(buf + n, len - n, "%smicro %d v %d vs micro %d v %d", n ? ", " : "", a->micro,
                 a->v, b->micro, b->v);
}

static int judge_rules(const struct l8_case *t)
{
    char desc[256], err[512];
    if (!t->found) {
        gr_say("correct", "your search found no configuration; the kit's best is %s",
               pl_plan_config_describe(&t->best.best[0].cfg, desc, sizeof desc));
        return 0;
    }
    if (__real_pl_plan_check(&t->model, &t->cluster, &t->chosen, err, sizeof err) == 0) return 1;
    gr_say("correct", "your choice %s breaks a placement rule (section 2):",
           pl_plan_config_describe(&t->chosen, desc, sizeof desc));
    gr_say("correct", "%s", err);
    return 0;
}

static int judge_quality(const struct l8_case *t)
{
    const struct pl_plan_choice *b = &t->best.best[0];
    double slower = t->time.step / b->time.step - 1;
    if (slower <= L8_TOL_QUALITY) return 1;
    char mine[256], best[256], diff[256];
    pl_plan_config_describe(&t->chosen, mine, sizeof mine);
    pl_plan_config_describe(&b->cfg, best, sizeof best);
    differences(&t->chosen, &b->cfg, diff, sizeof diff);
    gr_say("quality", "your choice %s takes %.3f s per step by the kit's model, %.1f%% slower "
           "than the best it finds, %s (%.3f s); more than %.0f%%", mine, t->time.step,
           100 * slower, best, b->time.step, 100 * L8_TOL_QUALITY);
    gr_say("quality", "they differ in: %s. Does your search try every value of each (section "
           "5), and do your estimates match the kit's (the memory and time tests)?", diff);
    return 0;
}

static int judge_sanity(const struct l8_case *t)
{
    double mfu = 100 * t->time.mfu, want = t->spec->published_mfu;
    if (fabs(mfu - want) <= L8_SANITY_POINTS) return 1;
    char desc[256];
    gr_say("correct", "%s: your model gives %.1f%% MFU for %s, published %.0f%%; more than %.0f "
           "points apart (section 4.4: compute at peak x efficiency, the bubble, exposed "
           "communication)", t->spec->source, mfu,
           pl_plan_config_describe(&t->cfg, desc, sizeof desc), want, L8_SANITY_POINTS);
    return 0;
}

static int answer_int(const char *q, int got, int want)
{
    if (got == want) return 1;
    gr_say("correct", "%s: yours %d, expected %d", q, got, want);
    return 0;
}

static int answer_real(const char *q, double got, double want, double tol)
{
    if (fabs(got - want) <= tol) return 1;
    gr_say("correct", "%s: yours %.2f, expected %.2f (within %.2f)", q, got, want, tol);
    return 0;
}

static int judge_questions(struct l8_case *t)
{
    const struct placement_answers *a = &placement_answers;
    if (!a->q1_nodes && !a->q2_bubble_percent && !a->q3_mfu_percent) {
        gr_say("correct", "still a stub: placement_answers (see %s section 6)", gr_handout());
        return 0;
    }
    t->cluster.nodes = __real_pl_plan_min_nodes(&t->model, &t->cluster, 4096);
    __real_pl_plan_search(&t->model, &t->cluster, NULL, &t->best);
    const struct pl_plan_config *b = &t->best.best[0].cfg;
    int ok = answer_int("Q1 nodes", a->q1_nodes, t->cluster.nodes);
    ok &= answer_int("Q1 tp", a->q1_tp, b->deg[PL_AX_TP]);
    ok &= answer_int("Q1 pp", a->q1_pp, b->deg[PL_AX_PP]);
    ok &= answer_int("Q1 dp", a->q1_dp, b->deg[PL_AX_DP]);
    ok &= answer_int("Q1 ZeRO stage", a->q1_zero, b->zero);
    ok &= answer_real("Q2 bubble (%)", a->q2_bubble_percent, 100 * pl_rule_bubble(16, 16, 7),
                      0.1);
    struct l8_case pub;
    l8_build_case(&pub, &L8_SANITY[0], 0);
    l8_plan_published(&pub);
    ok &= answer_real("Q3 MFU (%)", a->q3_mfu_percent, 100 * pub.best.best[0].time.mfu, 0.5);
    return ok;
}

int l8_judge(struct l8_state *st, int i, const char *part)
{
    const struct l8_case *t = &st->cases[i];
    const enum l8_op op = st->op;
    const int ncases = st->ncases;
    if (!strcmp(part, "correct") && t->oracle) {
        gr_say(part, "%s called %s, the kit's planner: that is the grader's oracle. Compute "
               "the estimate yourself from the handout's formulas (placement.h lists what you "
               "may call)", L8_OP_FUNCS[op], t->oracle);
        return 0;
    }
    switch (op) {
    case L8_OP_MEMORY:
    case L8_OP_TIME: {
        if (op == L8_OP_MEMORY ? judge_memory(t) : judge_time(t)) return 1;
        char in[512];
        l8_describe(st, i, in, sizeof in);
        gr_say(part, "in: %s%s", in, i >= ncases - L8_N_DRAWN ? " (drawn by the seed)" : "");
        if (i >= ncases - L8_N_DRAWN)
            gr_say(part, "yours matches the kit's on the listed configurations (they are judged "
                   "first) but not on this one: the formulas of sections 3 and 4 must hold for "
                   "every configuration, not only the graded ones");
        return 0;
    }
    case L8_OP_SEARCH:
    case L8_OP_SEARCH_HIDDEN: {
        if (!strcmp(part, "quality") ? judge_quality(t) : judge_rules(t)) return 1;
        char in[512];
        l8_describe(st, i, in, sizeof in);
        gr_say(part, "in: %s%s", in, op == L8_OP_SEARCH && i >= L8_N_SEARCHES
                                         ? " (drawn by the seed from the sweep's space)" : "");
        return 0;
    }
    case L8_OP_QUESTIONS: return judge_questions(&st->cases[i]);
    default: return judge_sanity(t);
    }
}
