/* judge.c: Lab 8's verdicts, from the observation alone (struct l8_obs: what the student's
 * code gave and the oracle's figures, recorded by cases.c): no MPI, no planner, nothing read
 * but the arguments, every reason worded with gr_why_say. Every category of memory and time
 * within L8_TOL_EST (the data-parallel figures within the band of section 4.3's two
 * choices), the search's choice against every rule (the kit's verdict, the first rule broken
 * worded from the figures it reads, in lib/plan_rules.h's words) and within L8_TOL_QUALITY of
 * the kit's best, a published run within L8_SANITY_POINTS of its MFU, and the numeric answers
 * of placement_answers. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lab08.h"
#include "util.h"

const char *const L8_OP_NAMES[L8_NOPS] = {"memory", "time", "search", "search_hidden",
                                           "sanity", "sanity_hidden", "questions",
                                           "switches"};
const char *const L8_OP_FUNCS[L8_NOPS] = {"placement_memory", "placement_step_time",
                                           "placement_search", "placement_search",
                                           "placement_step_time", "placement_step_time",
                                           "placement_answers", "placement_memory"};
const char *const L8_ORACLE_NAMES[L8_NOR] = {
    "", "pl_plan_memory", "pl_plan_time", "pl_plan_activation_layer", "pl_plan_check",
    "pl_plan_search", "pl_plan_min_nodes", "pl_plan_time_links", "pl_plan_links",
    "pl_plan_check_step", "pl_plan_check_placement"};

int l8_find_op(const char *name)
{
    for (int k = 0; k < L8_NOPS; k++)
        if (name && !strcmp(name, L8_OP_NAMES[k])) return k;
    return -1;
}

void l8_describe_where(const struct l8_where *w, int with_cfg, char *buf, size_t len)
{
    char cfg[256] = "";
    if (with_cfg) pl_plan_config_describe(&w->cfg, cfg, sizeof cfg);
    snprintf(buf, len, "%s (seq %d, %.0f tokens per step) on %d x %s%s%s", w->model, w->seq,
             w->batch_tokens, w->nodes, w->cluster, cfg[0] ? ": " : "", cfg);
}

/* ---------------------------------------------------------------- rules */

/* pl_plan_check's rules in its order, from the figures they read; the placement's own
 * sentences are lib/plan.c's (its world and shape checks), the rules' are plan_rules.h's. */
int l8_rule_words(const struct l8_rules *r, const struct l8_where *w,
                  const struct pl_plan_config *cfg, char *err, size_t len)
{
    const int *d = cfg->deg;
    int t = d[PL_AX_TP], e = d[PL_AX_EP], p = d[PL_AX_PP], cp = d[PL_AX_CP];
    long world = 1;
    for (int a = 0; a < PL_NAXES; a++) world *= d[a];
    if (world > (1 << 24)) world = 1 << 24;
    if (world != (long)w->nodes * w->per_node)
        return pl_err(err, len, "tp x cp x ep x pp x dp = %ld, but the cluster has %d GPUs "
                      "(%d nodes x %d)", world, w->nodes * w->per_node, w->nodes, w->per_node);
    if (r->heads % t || r->d_model % t || r->d_ff % t || (r->kv_heads % t && t % r->kv_heads))
        return pl_err(err, len, "tp=%d must divide heads=%d, d_model=%d and d_ff=%d (and "
                      "divide or be a multiple of kv_heads=%d)", t, r->heads, r->d_model,
                      r->d_ff, r->kv_heads);
    if (e > 1 && (!r->experts || r->experts % e))
        return pl_err(err, len, "ep=%d must divide the %d experts (a dense model has ep=1)", e,
                      r->experts);
    if (w->seq % cp) return pl_err(err, len, "cp=%d does not divide seq=%d", cp, w->seq);
    if (p > r->layers || (long)p * cfg->v > r->layers)
        return pl_err(err, len, "pp=%d x v=%d chunks exceed the %d layers", p, cfg->v,
                      r->layers);
    if (p == 1 && cfg->v != 1)
        return pl_err(err, len, "v=%d without a pipeline: interleaving needs pp > 1", cfg->v);
    char degrees[128];
    struct pl_grid g;
    snprintf(degrees, sizeof degrees, "tp=%d,cp=%d,ep=%d,pp=%d,dp=%d", t, cp, e, p,
             d[PL_AX_DP]);
    if (pl_grid_init(&g, cfg->order, degrees, (int)world, err, len) != 0 ||
        pl_rule_inside_node(&g, "tp", w->per_node, err, len) != 0 ||
        pl_rule_inside_node(&g, "ep", w->per_node, err, len) != 0 ||
        pl_rule_order(&g, err, len) != 0 ||
        pl_rule_batch(e * d[PL_AX_DP], cfg->micro, cfg->m, r->batch_seqs, err, len) != 0 ||
        pl_rule_microbatches(p, cfg->m, cfg->v, err, len) != 0 ||
        pl_rule_memory(r->memory, r->hbm, err, len) != 0)
        return -1;
    return 0;
}

/* ---------------------------------------------------------------- judges */

static int close_to(double got, double want)
{
    return fabs(got - want) <= 1e-9 + L8_TOL_EST * fabs(want);
}

/* One line per category that differs; returns how many. */
static int compare_value(struct gr_why *why, const char *what, double got, double want,
                         double unit, const char *unit_name, const char *hint)
{
    if (close_to(got, want)) return 0;
    gr_why_say(why, "%s: yours %.4g %s, the kit's %.4g %s%s%s", what, got / unit, unit_name,
               want / unit, unit_name, hint ? ": " : "", hint ? hint : "");
    return 1;
}

static int judge_memory(const struct l8_obs *o, struct gr_why *why)
{
    const struct pl_plan_memory *g = &o->mem, *w = &o->mem_ref;
    const int fp32 = o->where.cfg.fp32, whole = o->where.cfg.vocab_whole;
    int bad = 0;
    bad += compare_value(why, "parameters", g->params, w->params, 1e9, "GB",
                         fp32 ? "4 bytes per parameter under fp32, sharded only by ZeRO-3 "
                                "(sections 3.1 and 3.3)"
                         : whole ? "2 bytes per parameter, sharded only by ZeRO-3, the "
                                   "embedding not divided by tp under vocab_whole (section 3.3)"
                                 : "2 bytes per parameter, sharded only by ZeRO-3 (section 3.1)");
    bad += compare_value(why, "gradients", g->grads, w->grads, 1e9, "GB",
                         fp32 ? "4 bytes per parameter under fp32, sharded from ZeRO-2 on "
                                "(sections 3.1 and 3.3)"
                              : "2 bytes per parameter, sharded from ZeRO-2 on (section 3.1)");
    bad += compare_value(why, "optimizer state", g->optim, w->optim, 1e9, "GB",
                         fp32 ? "8 bytes per parameter under fp32 (no master copy), sharded "
                                "from ZeRO-1 on (sections 3.1 and 3.3)"
                              : "12 bytes per parameter, sharded from ZeRO-1 on (section 3.1)");
    const char *activ_hint = g->activ == 0.0
        ? "none counted: every microbatch in flight keeps each layer's activations (section 3.2)"
        : "per layer x layers on the stage x microbatches in flight, + logits (section 3.2)";
    bad += compare_value(why, "activations", g->activ, w->activ, 1e9, "GB", activ_hint);
    /* The three factors of the activations, which placement.h asks for too. */
    bad += compare_value(why, "layers_stage", g->layers_stage, w->layers_stage, 1, "layers",
                         "the first stage holds ceil(L/p) layers (section 3.2)");
    bad += compare_value(why, "in_flight", g->in_flight, w->in_flight, 1, "microbatches",
                         "min(m, p) on the first stage (1 without a pipeline), x (1 + (p-1)/(p "
                         "v)) interleaved (section 3.2)");
    bad += compare_value(why, "activ_layer", g->activ_layer, w->activ_layer, 1e6, "MB",
                         "one layer, one microbatch, as stored after recomputation: sbh(10/t' + "
                         "(8 + 4r)/t + 5as/(ht)), r the widths a token passes through, shared "
                         "experts included (section 3.2)");
    if (!bad) bad += compare_value(why, "total", g->total, w->total, 1e9, "GB",
                                   "the total is the sum of the four categories");
    return !bad;
}

/* The hint for a wrong data-parallel time. With dp = 1 and a cp or ep group, the dense
 * gradients are still reduced (over cp x ep): the message says so, with the group's size,
 * and leaves which link that reduction is timed on to section 4.3. */
static const char *dp_hint(const struct l8_obs *o, char *buf, size_t len)
{
    const int *d = o->where.cfg.deg;
    if (o->where.cfg.zero == 0 && d[PL_AX_DP] * d[PL_AX_EP] > 1)
        return "ZeRO-0 reduces the gradients with one all-reduce, exposed beyond the backward: "
               "max(0, AR - bwd), not ZeRO-1's reduce-scatter behind the backward and all-gather "
               "behind the forward (section 4.3)";
    if (d[PL_AX_DP] != 1 || d[PL_AX_CP] * d[PL_AX_EP] == 1) return "section 4.3";
    snprintf(buf, len, "with dp = 1 the dense gradients are still reduced, over cp x ep = %d "
             "GPUs; section 4.3 says which link they are timed on", d[PL_AX_CP] * d[PL_AX_EP]);
    return buf;
}

/* Like compare_value, for a figure the two data-parallel choices of section 4.3 both give:
 * right within L8_TOL_EST of the kit's (want), of the alternative's (alt), or between them. */
static int compare_band(struct gr_why *why, const char *what, double got, double want,
                        double alt, double unit, const char *unit_name, const char *hint)
{
    if (close_to(got, want) || close_to(got, alt) || (got - want) * (got - alt) <= 0) return 0;
    if (fabs(alt - want) <= 1e-9 + L8_TOL_EST * fabs(want))
        return compare_value(why, what, got, want, unit, unit_name, hint);
    gr_why_say(why, "%s: yours %.4g %s, the kit's %.4g %s (%.4g with the two parameter "
               "groups' reductions hidden together, section 4.3's alternative)%s%s", what,
               got / unit, unit_name, want / unit, unit_name, alt / unit, hint ? ": " : "",
               hint ? hint : "");
    return 1;
}

/* A link class that differs: the axis' size, and what code that assumes the preset
 * clusters' shape or the default order would miss, said where this configuration differs
 * from them. Which class an axis reports is section 4.2's to say, not the message's. */
static void say_link(const struct l8_obs *o, int a, struct gr_why *why)
{
    const struct l8_where *w = &o->where;
    enum pl_link mine = o->time.link[a];
    char shape[160] = "";
    if (w->per_node != 8)
        snprintf(shape, sizeof shape, "; this cluster's nodes hold %d GPUs (c->per_node), not "
                 "8", w->per_node);
    else if (strcmp(w->cfg.order, PL_PLAN_ORDER))
        snprintf(shape, sizeof shape, "; this configuration's rank order is %s (cfg->order), "
                 "not the default " PL_PLAN_ORDER, w->cfg.order);
    gr_why_say(why, "link of %s: yours %s-node, the kit's %s-node, for %s = %d: section 4.2 "
               "says which link an axis reports%s", pl_plan_axis_name(a),
               mine == PL_LINK_INTRA || mine == PL_LINK_INTER ? pl_link_name(mine)
                                                              : "not a link class",
               pl_link_name(o->time_ref.link[a]), pl_plan_axis_name(a), w->cfg.deg[a], shape);
}

static int judge_time(const struct l8_obs *o, struct gr_why *why)
{
    const struct pl_plan_time *g = &o->time, *w = &o->time_ref;
    int bad = 0;
    char hint[512], what[64];
    /* Where the alternative differs, the step and what follows from it move with it. */
    double step_alt = w->step - w->exposed[PL_AX_DP] + o->dp_alt;
    double slower = w->step / step_alt;
    bad += compare_value(why, "compute", g->compute, w->compute, 1, "s",
                         "m microbatches' FLOPs on the stage at peak x efficiency (section 4.1)");
    for (int a = 0; a < PL_NAXES; a++) {
        snprintf(what, sizeof what, "exposed %s communication", pl_plan_axis_name(a));
        if (a == PL_AX_DP)
            bad += compare_band(why, what, g->exposed[a], w->exposed[a], o->dp_alt, 1, "s",
                                dp_hint(o, hint, sizeof hint));
        else bad += compare_value(why, what, g->exposed[a], w->exposed[a], 1, "s",
                                  "section 4.2");
    }
    bad += compare_value(why, "bubble", g->bubble, w->bubble, 1, "s",
                         "(p-1)/v slots of one microbatch, communication included (section 4.3)");
    bad += compare_band(why, "step", g->step, w->step, step_alt, 1, "s", NULL);
    /* MFU and TFLOP/s: the formula's terms, and whether the step they divide by agrees,
     * which tells a student which side of the fraction to look at; section 4.4 says which
     * tokens a step counts. */
    int step_ok = close_to(g->step, w->step) || close_to(g->step, step_alt) ||
                  (g->step - w->step) * (g->step - step_alt) <= 0;
    bad += compare_band(why, "MFU", g->mfu, w->mfu, w->mfu * slower, 0.01, "%",
                        step_ok ? "FLOPs per token x tokens per step / (step x GPUs x peak), "
                                  "and your step agrees with the kit's: section 4.4 says which "
                                  "tokens a step counts"
                                : "FLOPs per token x tokens per step / (step x GPUs x peak) "
                                  "(section 4.4)");
    bad += compare_band(why, "HFU", g->hfu, w->hfu, w->hfu * slower, 0.01, "%",
                        "MFU x the microbatch's FLOPs with recomputation / without (section "
                        "4.4)");
    bad += compare_band(why, "tflops", g->tflops, w->tflops, w->tflops * slower, 1, "TFLOP/s",
                        "model TFLOP/s per GPU: model FLOPs per step / GPUs / step / 1e12 "
                        "(section 4.4)");
    for (int a = 0; a < PL_NAXES; a++) {
        snprintf(what, sizeof what, "bytes sent on %s", pl_plan_axis_name(a));
        bad += compare_value(why, what, g->bytes[a], w->bytes[a], 1e9, "GB",
                             a == PL_AX_DP ? "2 reduce-scatters' worth of pl_ring_bytes_sent per "
                             "parameter group, 3m with ZeRO-3 (section 4.3)"
                                           : "m x pl_ring_bytes_sent of each collective (pp: "
                                             "the message bytes) (section 4.2)");
        if (g->link[a] != w->link[a]) {
            say_link(o, a, why);
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

static int judge_rules(const struct l8_obs *o, struct gr_why *why)
{
    char desc[256], err[512];
    if (!o->found) {
        gr_why_say(why, "your search found no configuration; the kit's best is %s",
                   pl_plan_config_describe(&o->best, desc, sizeof desc));
        return 0;
    }
    if (!o->rules.broken) return 1;
    gr_why_say(why, "your choice %s breaks a placement rule (section 2):",
               pl_plan_config_describe(&o->chosen, desc, sizeof desc));
    if (l8_rule_words(&o->rules, &o->where, &o->chosen, err, sizeof err) == 0)
        snprintf(err, sizeof err, "pl_plan_check rejects it");
    gr_why_say(why, "%s", err);
    return 0;
}

static int judge_quality(const struct l8_obs *o, struct gr_why *why)
{
    double slower = o->step / o->best_step - 1;
    if (slower <= L8_TOL_QUALITY) return 1;
    char mine[256], best[256], diff[256];
    pl_plan_config_describe(&o->chosen, mine, sizeof mine);
    pl_plan_config_describe(&o->best, best, sizeof best);
    differences(&o->chosen, &o->best, diff, sizeof diff);
    gr_why_say(why, "your choice %s takes %.3f s per step by the kit's model, %.1f%% slower "
               "than the best it finds, %s (%.3f s); more than %.0f%%", mine, o->step,
               100 * slower, best, o->best_step, 100 * L8_TOL_QUALITY);
    gr_why_say(why, "they differ in: %s. Does your search try every value of each (section "
               "5), and do your estimates match the kit's (the memory and time tests)?", diff);
    return 0;
}

static int judge_sanity(const struct l8_obs *o, struct gr_why *why)
{
    double mfu = 100 * o->time.mfu, want = o->published_mfu;
    if (fabs(mfu - want) <= L8_SANITY_POINTS) return 1;
    char desc[256];
    gr_why_say(why, "%s: your model gives %.1f%% MFU for %s, published %.0f%%; more than %.0f "
               "points apart (section 4.4: compute at peak x efficiency, the bubble, exposed "
               "communication)", o->source, mfu,
               pl_plan_config_describe(&o->where.cfg, desc, sizeof desc), want,
               L8_SANITY_POINTS);
    return 0;
}

static int answer_int(struct gr_why *why, const char *q, int got, int want)
{
    if (got == want) return 1;
    gr_why_say(why, "%s: yours %d, expected %d", q, got, want);
    return 0;
}

static int answer_real(struct gr_why *why, const char *q, double got, double want, double tol)
{
    if (fabs(got - want) <= tol) return 1;
    gr_why_say(why, "%s: yours %.2f, expected %.2f (within %.2f)", q, got, want, tol);
    return 0;
}

/* placement_answers (y) against the kit's (k). */
static int judge_questions(const struct placement_answers *y, const struct placement_answers *k,
                           struct gr_why *why)
{
    if (!y->q1_nodes && !y->q2_bubble_percent && !y->q3_mfu_percent) {
        gr_why_say(why, "still a stub: placement_answers (see " L8_HANDOUT " section 6)");
        return 0;
    }
    int ok = answer_int(why, "Q1 nodes", y->q1_nodes, k->q1_nodes);
    ok &= answer_int(why, "Q1 tp", y->q1_tp, k->q1_tp);
    ok &= answer_int(why, "Q1 pp", y->q1_pp, k->q1_pp);
    ok &= answer_int(why, "Q1 dp", y->q1_dp, k->q1_dp);
    ok &= answer_int(why, "Q1 ZeRO stage", y->q1_zero, k->q1_zero);
    ok &= answer_real(why, "Q2 bubble (%)", y->q2_bubble_percent, k->q2_bubble_percent, 0.1);
    ok &= answer_real(why, "Q3 MFU (%)", y->q3_mfu_percent, k->q3_mfu_percent, 0.5);
    return ok;
}

int l8_judge(int op, const char *part, const struct gr_obs *all, struct gr_why *why)
{
    const struct l8_obs *o = gr_obs_rank(all, 0);
    int correct = !strcmp(part, "correct");
    if (correct && o->oracle > L8_OR_NONE && o->oracle < L8_NOR) {
        gr_why_say(why, "%s called %s, the kit's planner: that is the grader's oracle. Compute "
                   "the estimate yourself from the handout's formulas (placement.h lists what "
                   "you may call)", L8_OP_FUNCS[op], L8_ORACLE_NAMES[o->oracle]);
        return 0;
    }
    char in[512];
    l8_describe_where(&o->where, op == L8_OP_MEMORY || op == L8_OP_TIME || op == L8_OP_SWITCHES,
                      in, sizeof in);
    switch (op) {
    case L8_OP_SWITCHES:
        if (judge_memory(o, why)) return 1;
        gr_why_say(why, "in: %s", in);
        gr_why_say(why, "this configuration's switches (section 3.3) change the bytes: fp32 "
                   "holds 4 + 4 + 8 bytes a parameter and 4-byte activations; no_dropout keeps "
                   "no dropout masks; vocab_whole holds the embedding (and on one stage the "
                   "head) whole on every TP rank");
        return 0;
    case L8_OP_MEMORY:
    case L8_OP_TIME:
        if (op == L8_OP_MEMORY ? judge_memory(o, why) : judge_time(o, why)) return 1;
        gr_why_say(why, "in: %s%s", in, o->drawn ? " (drawn by the seed)" : "");
        if (o->drawn)
            gr_why_say(why, "yours matches the kit's on the listed configurations (they are "
                       "judged first) but not on this one: the formulas of sections 3 and 4 "
                       "must hold for every configuration, not only the graded ones");
        return 0;
    case L8_OP_SEARCH:
    case L8_OP_SEARCH_HIDDEN:
        if (correct ? judge_rules(o, why) : judge_quality(o, why)) return 1;
        gr_why_say(why, "in: %s%s", in, o->drawn ? " (drawn by the seed from the sweep's space)"
                                                 : "");
        return 0;
    case L8_OP_QUESTIONS: return judge_questions(&o->ans[0], &o->ans[1], why);
    default: return judge_sanity(o, why);
    }
}
