/* judge.c: Lab 8's verdicts, from the observation alone (struct l8_obs: what the student's
 * code gave and the oracle's figures, recorded by cases.c): no MPI, no planner, nothing read
 * but the arguments, every reason worded with gr_why_say. Every field of memory and time
 * within its tolerance (L8_TOL: facts exactly, estimates as far as the handout's
 * alternatives need; the data-parallel figures from the band of section 4.3's two choices), the search's choice against every rule (the kit's verdict, the first rule broken
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
    "pl_plan_check_step", "pl_plan_check_placement", "pl_plan_pacing_stage"};

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

/* ---------------------------------------------------------------- tolerances */

const double L8_TOL_RUNGS[L8_NRUNGS] = {0.01, 0.02, 0.05, 0.10, 0.15, 0.20, 0.25, 0.30, 0.40, 0.50};
const char *const L8_FIELD_NAMES[L8_NFIELDS] = {
    "parameters", "gradients", "optimizer state", "activations", "total", "layers_stage",
    "in_flight", "activ_layer", "compute",
    "exposed tp", "exposed cp", "exposed ep", "exposed pp", "exposed dp",
    "bytes tp", "bytes cp", "bytes ep", "bytes pp", "bytes dp",
    "bubble", "step", "MFU", "HFU", "tflops"};

/* Each field's tolerance. Facts are exact; the model state within L8_TOL_STATE; the rest is
 * the smallest rung of L8_TOL_RUNGS that every alternative of tests/alt/08-placement meets
 * on every graded configuration (tests/lab08_tolerance.sh derives it from their bench
 * --tolerance and fails when this table says another rung): 1% where no alternative moves
 * the field (its rounding floor), more where one does. The data-parallel choice of section
 * 4.3 is a band, not a tolerance: the exposed dp time, the step, MFU, HFU and TFLOP/s are
 * measured from the nearer end of the kit's and the alternative's figures. */
const double L8_TOL[L8_NFIELDS] = {
    [L8_F_PARAMS] = L8_TOL_STATE, [L8_F_GRADS] = L8_TOL_STATE, [L8_F_OPTIM] = L8_TOL_STATE,
    [L8_F_ACTIV] = 0.40, [L8_F_TOTAL] = 0.25,
    [L8_F_LAYERS] = L8_TOL_EXACT, [L8_F_INFLIGHT] = L8_TOL_EXACT,
    [L8_F_ACTIV_LAYER] = 0.01, [L8_F_COMPUTE] = 0.01,
    [L8_F_EXPOSED + PL_AX_TP] = 0.01, [L8_F_EXPOSED + PL_AX_CP] = 0.01,
    [L8_F_EXPOSED + PL_AX_EP] = 0.01, [L8_F_EXPOSED + PL_AX_PP] = 0.01,
    [L8_F_EXPOSED + PL_AX_DP] = 0.01,
    [L8_F_BYTES + PL_AX_TP] = 0.01, [L8_F_BYTES + PL_AX_CP] = 0.01,
    [L8_F_BYTES + PL_AX_EP] = 0.01, [L8_F_BYTES + PL_AX_PP] = 0.01,
    [L8_F_BYTES + PL_AX_DP] = 0.01,
    [L8_F_BUBBLE] = 0.30, [L8_F_STEP] = 0.10, [L8_F_MFU] = 0.01, [L8_F_HFU] = 0.01,
    [L8_F_TFLOPS] = 0.01};

/* got's deviation from want, as a share of want (1e-9 absolute is rounding). */
static double deviation(double got, double want)
{
    double d = fabs(got - want) - 1e-9;
    if (d <= 0) return 0;
    return want != 0 ? d / fabs(want) : INFINITY;
}

/* From the band between the kit's figure (want) and section 4.3's alternative's (alt). */
static double deviation_band(double got, double want, double alt)
{
    if ((got - want) * (got - alt) <= 0) return 0;
    return fmin(deviation(got, want), deviation(got, alt));
}

/* The step under section 4.3's alternative. */
static double step_alt(const struct l8_obs *o)
{
    return o->time_ref.step - o->time_ref.exposed[PL_AX_DP] + o->dp_alt;
}

void l8_deviation(int op, const struct l8_obs *o, double *dev)
{
    for (int f = 0; f < L8_NFIELDS; f++) dev[f] = -1;
    if (op == L8_OP_MEMORY) {
        const struct pl_plan_memory *g = &o->mem, *w = &o->mem_ref;
        dev[L8_F_PARAMS] = deviation(g->params, w->params);
        dev[L8_F_GRADS] = deviation(g->grads, w->grads);
        dev[L8_F_OPTIM] = deviation(g->optim, w->optim);
        dev[L8_F_ACTIV] = deviation(g->activ, w->activ);
        dev[L8_F_TOTAL] = deviation(g->total, w->total);
        dev[L8_F_LAYERS] = deviation(g->layers_stage, w->layers_stage);
        dev[L8_F_INFLIGHT] = deviation(g->in_flight, w->in_flight);
        dev[L8_F_ACTIV_LAYER] = deviation(g->activ_layer, w->activ_layer);
        return;
    }
    if (op != L8_OP_TIME) return;
    const struct pl_plan_time *g = &o->time, *w = &o->time_ref;
    dev[L8_F_COMPUTE] = deviation(g->compute, w->compute);
    for (int a = 0; a < PL_NAXES; a++) {
        dev[L8_F_EXPOSED + a] = a == PL_AX_DP
                                    ? deviation_band(g->exposed[a], w->exposed[a], o->dp_alt)
                                    : deviation(g->exposed[a], w->exposed[a]);
        dev[L8_F_BYTES + a] = deviation(g->bytes[a], w->bytes[a]);
    }
    dev[L8_F_BUBBLE] = deviation(g->bubble, w->bubble);
    dev[L8_F_STEP] = deviation_band(g->step, w->step, step_alt(o));
    /* MFU, HFU and TFLOP/s are definitions once the step is known (section 4.4): each is
     * compared with the kit's figure at your step, so a step within its tolerance carries
     * them and only their own formula is graded. */
    double at = g->step > 0 ? w->step / g->step : 0;
    dev[L8_F_MFU] = deviation(g->mfu, w->mfu * at);
    dev[L8_F_HFU] = deviation(g->hfu, w->hfu * at);
    dev[L8_F_TFLOPS] = deviation(g->tflops, w->tflops * at);
}

/* ---------------------------------------------------------------- judges */

/* The tolerance of field f in words, for a message. */
static const char *tol_words(int f, char *buf, size_t len)
{
    if (L8_TOL[f] <= L8_TOL_EXACT) snprintf(buf, len, "exactly");
    else snprintf(buf, len, "within %.0f%%", 100 * L8_TOL[f]);
    return buf;
}

/* One line for field f when its deviation dev is beyond its tolerance; returns 1 then: the
 * term, yours and the kit's figures (with a band, the alternative's too), the tolerance, and
 * what the figure is with the section that derives it. Never the formula. */
static int say_field(struct gr_why *why, int f, double dev, double got, double want,
                     double alt, double unit, const char *unit_name, const char *what)
{
    if (dev <= L8_TOL[f]) return 0;
    char tol[32], band[160] = "";
    tol_words(f, tol, sizeof tol);
    if (alt >= 0 && deviation(alt, want) > L8_TOL[f])
        snprintf(band, sizeof band, ", or %.4g %s with the two parameter groups' reductions "
                 "hidden together (section 4.3's alternative)", alt / unit, unit_name);
    gr_why_say(why, "%s: yours %.4g %s, the kit's %.4g %s%s (%s): %s", L8_FIELD_NAMES[f],
               got / unit, unit_name, want / unit, unit_name, band, tol, what);
    return 1;
}

static int judge_memory(const struct l8_obs *o, struct gr_why *why)
{
    const struct pl_plan_memory *g = &o->mem, *w = &o->mem_ref;
    const struct pl_plan_config *cfg = &o->where.cfg;
    double dev[L8_NFIELDS];
    char what[3][320];
    l8_deviation(L8_OP_MEMORY, o, dev);
    /* Under the configuration's switches (section 3.3) the bytes and what tp divides change:
     * the message says which switch is on, not the count. */
    static const char *const state[2][3] = {
        {"bf16 parameters", "bf16 gradients", "fp32 optimizer state"},
        {"fp32 parameters", "fp32 gradients", "fp32 moments (no master copy under fp32)"}};
    for (int k = 0; k < 3; k++)
        snprintf(what[k], sizeof what[k], "what the first stage keeps of its %s%s, and whether "
                 "ZeRO-%d divides it over the data-parallel replicas (section 3.1%s)",
                 state[cfg->fp32 != 0][k],
                 cfg->vocab_whole && k < 2 ? ", the embedding whole on every tp rank under "
                                             "vocab_whole" : "",
                 cfg->zero, cfg->fp32 || cfg->vocab_whole ? ", and 3.3 for the switches" : "");
    int bad = 0;
    bad += say_field(why, L8_F_PARAMS, dev[L8_F_PARAMS], g->params, w->params, -1, 1e9, "GB",
                     what[0]);
    bad += say_field(why, L8_F_GRADS, dev[L8_F_GRADS], g->grads, w->grads, -1, 1e9, "GB",
                     what[1]);
    bad += say_field(why, L8_F_OPTIM, dev[L8_F_OPTIM], g->optim, w->optim, -1, 1e9, "GB",
                     what[2]);
    const char *activ = g->activ == 0.0
        ? "none counted: every microbatch in flight keeps its layers' activations until its "
          "backward (section 3.2)"
        : "the layers' activations of the microbatches in flight, what recomputation "
          "rebuilds and the loss's logits (section 3.2; the tolerance is section 4.5's)";
    bad += say_field(why, L8_F_ACTIV, dev[L8_F_ACTIV], g->activ, w->activ, -1, 1e9, "GB", activ);
    /* The three factors of the activations, which placement.h asks for too. */
    bad += say_field(why, L8_F_LAYERS, dev[L8_F_LAYERS], g->layers_stage, w->layers_stage, -1,
                     1, "layers", "how many layers the first pipeline stage holds (section 3.1)");
    bad += say_field(why, L8_F_INFLIGHT, dev[L8_F_INFLIGHT], g->in_flight, w->in_flight, -1, 1,
                     "microbatches", cfg->v > 1
                         ? "how many microbatches the first stage holds at once under the "
                           "interleaved 1F1B schedule (section 3.2)"
                         : "how many microbatches the first stage holds at once under 1F1B "
                           "(section 3.2)");
    bad += say_field(why, L8_F_ACTIV_LAYER, dev[L8_F_ACTIV_LAYER], g->activ_layer,
                     w->activ_layer, -1, 1e6, "MB",
                     "what one layer keeps of one microbatch for its backward under this "
                     "recomputation, with tensor and sequence parallelism (section 3.2: a MoE "
                     "layer's MLP counts every expert a token passes through, shared experts "
                     "included)");
    if (!bad) bad += say_field(why, L8_F_TOTAL, dev[L8_F_TOTAL], g->total, w->total, -1, 1e9,
                               "GB", "the sum of the four categories (section 3)");
    return !bad;
}

/* What the data-parallel time is, for a message. With dp = 1 and a cp or ep group, the
 * dense gradients are still reduced (over cp x ep): the message says so, with the group's
 * size, and leaves which link that reduction is timed on to section 4.3. */
static const char *dp_hint(const struct l8_obs *o, char *buf, size_t len)
{
    const int *d = o->where.cfg.deg;
    if (d[PL_AX_DP] == 1 && d[PL_AX_CP] * d[PL_AX_EP] > 1)
        snprintf(buf, len, "with dp = 1 the dense gradients are still reduced, over cp x ep = "
                 "%d GPUs; section 4.3 says which link they are timed on",
                 d[PL_AX_CP] * d[PL_AX_EP]);
    else
        snprintf(buf, len, "what no compute hides of the data-parallel collectives under "
                 "ZeRO-%d: which collectives this stage makes, and behind what (section 4.3)",
                 o->where.cfg.zero);
    return buf;
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
    const struct pl_plan_config *cfg = &o->where.cfg;
    double dev[L8_NFIELDS];
    l8_deviation(L8_OP_TIME, o, dev);
    int bad = 0;
    char what[512];
    bad += say_field(why, L8_F_COMPUTE, dev[L8_F_COMPUTE], g->compute, w->compute, -1, 1, "s",
                     "the FLOPs of m microbatches on the slowest stage (the first, or the last "
                     "with the head), recomputation included, at the cluster's sustained rate "
                     "(section 4.1)");
    for (int a = 0; a < PL_NAXES; a++) {
        int f = L8_F_EXPOSED + a;
        if (a == PL_AX_DP) {
            bad += say_field(why, f, dev[f], g->exposed[a], w->exposed[a], o->dp_alt, 1, "s",
                             dp_hint(o, what, sizeof what));
            continue;
        }
        snprintf(what, sizeof what, "the time of the %s %s of m microbatches on the first "
                 "stage, on %s's own link (section 4.2)", pl_plan_axis_name(a),
                 a == PL_AX_PP ? "messages" : "collectives", pl_plan_axis_name(a));
        bad += say_field(why, f, dev[f], g->exposed[a], w->exposed[a], -1, 1, "s", what);
    }
    snprintf(what, sizeof what, "the slowest stage's idle time while the other stages fill and "
             "drain the pipeline of %d stages (v = %d; section 4.3, the tolerance section 4.5's)",
             cfg->deg[PL_AX_PP], cfg->v);
    bad += say_field(why, L8_F_BUBBLE, dev[L8_F_BUBBLE], g->bubble, w->bubble, -1, 1, "s", what);
    bad += say_field(why, L8_F_STEP, dev[L8_F_STEP], g->step, w->step, step_alt(o), 1, "s",
                     "m microbatches' slots, the bubble and the exposed data-parallel time "
                     "(section 4.3)");
    /* MFU, HFU and TFLOP/s at your own step: what is left to be wrong is their definition
     * (section 4.4), whatever the step. */
    double at = g->step > 0 ? w->step / g->step : 0;
    bad += say_field(why, L8_F_MFU, dev[L8_F_MFU], g->mfu, w->mfu * at, -1, 0.01, "%",
                     "at your own step, so its definition is what differs: section 4.4 says "
                     "which FLOPs and which tokens a step counts");
    bad += say_field(why, L8_F_HFU, dev[L8_F_HFU], g->hfu, w->hfu * at, -1, 0.01, "%",
                     "at your own step: the hardware FLOPs' utilisation, recomputation counted "
                     "as work done (section 4.4)");
    bad += say_field(why, L8_F_TFLOPS, dev[L8_F_TFLOPS], g->tflops, w->tflops * at, -1, 1,
                     "TFLOP/s", "at your own step: model TFLOP/s per GPU (section 4.4)");
    for (int a = 0; a < PL_NAXES; a++) {
        int f = L8_F_BYTES + a;
        if (a == PL_AX_DP)
            snprintf(what, sizeof what, "what each GPU sends in a step's data-parallel "
                     "collectives under ZeRO-%d, both parameter groups (section 4.3)", cfg->zero);
        else
            snprintf(what, sizeof what, "what each GPU sends in the %s %s of m microbatches "
                     "(section 4.2)", pl_plan_axis_name(a),
                     a == PL_AX_PP ? "messages" : "collectives");
        bad += say_field(why, f, dev[f], g->bytes[a], w->bytes[a], -1, 1e9, "GB", what);
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
    if (!o->rules.broken) {
        /* the search space's two limits (section 5), which keep its best and the kit's
         * chosen from the same configurations */
        const struct pl_plan_config *c = &o->chosen;
        int cp = c->deg[PL_AX_CP];
        if (c->v > PL_PLAN_MAX_V)
            gr_why_say(why, "your choice %s interleaves v = %d chunks a stage: the search keeps "
                       "v at most %d, as the kit's does, so that its best and yours are chosen "
                       "from the same configurations (section 5)",
                       pl_plan_config_describe(c, desc, sizeof desc), c->v, PL_PLAN_MAX_V);
        else if (cp > 1 && o->where.seq < PL_PLAN_CP_FROM_SEQ)
            gr_why_say(why, "your choice %s has cp = %d on sequences of %d tokens: the search "
                       "tries cp above 1 only for sequences of %d tokens or more, as the kit's "
                       "does (section 5)", pl_plan_config_describe(c, desc, sizeof desc), cp,
                       o->where.seq, PL_PLAN_CP_FROM_SEQ);
        else if (cp > 1 && (cp & (cp - 1)))
            gr_why_say(why, "your choice %s has cp = %d: the search tries cp only as a power "
                       "of two, as the kit's does (section 5)",
                       pl_plan_config_describe(c, desc, sizeof desc), cp);
        else
            return 1;
        return 0;
    }
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
               "points apart (section 4.4: compute at the sustained rate, the bubble, exposed "
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
    if (!y->q1_nodes && !y->q2_bubble_percent && !y->q3_vocab) {
        gr_why_say(why, "still a stub: placement_answers (see " L8_HANDOUT " section 6)");
        return 0;
    }
    int ok = answer_int(why, "Q1 nodes", y->q1_nodes, k->q1_nodes);
    ok &= answer_int(why, "Q1 tp", y->q1_tp, k->q1_tp);
    ok &= answer_int(why, "Q1 pp", y->q1_pp, k->q1_pp);
    ok &= answer_int(why, "Q1 dp", y->q1_dp, k->q1_dp);
    ok &= answer_int(why, "Q1 ZeRO stage", y->q1_zero, k->q1_zero);
    ok &= answer_real(why, "Q2 bubble (%)", y->q2_bubble_percent, k->q2_bubble_percent, 0.1);
    ok &= answer_real(why, "Q3 vocabulary (tokens)", y->q3_vocab, k->q3_vocab,
                      0.01 * k->q3_vocab);
    return ok;
}

int l8_judge(int op, const char *part, const struct gr_obs *all, struct gr_why *why)
{
    const struct l8_obs *o = gr_obs_rank(all, 0);
    int correct = !strcmp(part, "correct");
    if (correct && o->oracle > L8_OR_NONE && o->oracle < L8_NOR) {
        gr_why_say(why, "%s called %s, the kit's planner: that is the grader's oracle. Compute "
                   "the estimate yourself from the model of sections 3 and 4 (placement.h "
                   "lists what you may call)", L8_OP_FUNCS[op], L8_ORACLE_NAMES[o->oracle]);
        return 0;
    }
    char in[512];
    l8_describe_where(&o->where, op == L8_OP_MEMORY || op == L8_OP_TIME || op == L8_OP_SWITCHES,
                      in, sizeof in);
    switch (op) {
    case L8_OP_SWITCHES:
        if (judge_memory(o, why)) return 1;
        gr_why_say(why, "in: %s", in);
        gr_why_say(why, "this configuration's switches (section 3.3) change what is kept: "
                   "fp32 the bytes of the state and of the activations, no_dropout the masks, "
                   "vocab_whole what tp divides of the embedding (and on one stage the head)");
        return 0;
    case L8_OP_MEMORY:
    case L8_OP_TIME:
        if (op == L8_OP_MEMORY ? judge_memory(o, why) : judge_time(o, why)) return 1;
        gr_why_say(why, "in: %s%s", in, o->drawn ? " (drawn by the seed)" : "");
        if (o->drawn)
            gr_why_say(why, "yours matches the kit's on the listed configurations (they are "
                       "judged first) but not on this one: the model of sections 3 and 4 "
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
