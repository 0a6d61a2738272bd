/* plan: map a model and a cluster to a parallel configuration. Prints the chosen
 * configuration and its rank order, memory per GPU by category, communication per step by
 * axis and link class, the modelled step time and MFU, the rules it obeys, and the next best
 * configurations with what makes them lose. --explain prints the derivation, --svg draws MFU
 * and memory over the configuration space, --config evaluates one configuration instead of
 * searching. The model and its assumptions: lib/plan.h, docs/labs/08-placement.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "flags.h"
#include "fileio.h"
#include "plan.h"
#include "plan_report.h"
#include "plan_rules.h"
#include "torus.h"

struct opts {
    const char *model, *cluster, *profile, *config, *fix, *svg;
    struct pl_plan_model shape;
    double batch_tokens;
    int nodes, per_node, explain, published, list, published_runs;
    double hbm_gb, peak_tflops, efficiency, bw_gbs[PL_NLINKS], lat_us[PL_NLINKS];
};

static struct opts o;

#define F(name, kind, field, arg, help) {name, kind, &o.field, arg, help, 0}
static struct pl_flag flags[] = {
    F("--model", PL_FLAG_STR, model, "NAME", "a preset (see --list); shape flags below override it"),
    F("--layers", PL_FLAG_INT, shape.layers, "N", "transformer blocks"),
    F("--d-model", PL_FLAG_INT, shape.d_model, "N", "width of the residual stream"),
    F("--heads", PL_FLAG_INT, shape.heads, "N", "attention heads"),
    F("--kv-heads", PL_FLAG_INT, shape.kv_heads, "N", "key/value heads (grouped-query attention)"),
    F("--d-ff", PL_FLAG_INT, shape.d_ff, "N", "MLP hidden width (dense layers)"),
    F("--vocab", PL_FLAG_INT, shape.vocab, "N", "vocabulary size"),
    F("--seq", PL_FLAG_INT, shape.seq, "N", "tokens per sequence"),
    F("--gated", PL_FLAG_INT, shape.gated, "0|1", "SwiGLU MLP (three matrices)"),
    F("--tied", PL_FLAG_INT, shape.tied, "0|1", "embedding and head share one matrix"),
    F("--experts", PL_FLAG_INT, shape.experts, "N", "experts per MoE layer (0: dense)"),
    F("--top-k", PL_FLAG_INT, shape.top_k, "K", "experts per token"),
    F("--d-ff-expert", PL_FLAG_INT, shape.d_ff_expert, "N", "hidden width of one expert"),
    F("--shared-experts", PL_FLAG_INT, shape.shared_experts, "N", "always-on experts per MoE layer"),
    F("--dense-layers", PL_FLAG_INT, shape.dense_layers, "N", "first layers with a dense MLP"),
    F("--batch-tokens", PL_FLAG_DOUBLE, batch_tokens, "T", "global batch per step in tokens (4M: 4194304)"),
    F("--cluster", PL_FLAG_STR, cluster, "NAME", "dgx-h100 or dgx-a100 (or cpu, or tpu-v4: a torus); numbers below override it"),
    F("--profile", PL_FLAG_STR, profile, "NAME", "the same as --cluster (the name other tools give it)"),
    F("--nodes", PL_FLAG_INT, nodes, "N", "nodes (default: the fewest that fit); on a torus, chips"),
    F("--gpus-per-node", PL_FLAG_INT, per_node, "N", "GPUs per node (a torus has no node)"),
    F("--hbm", PL_FLAG_DOUBLE, hbm_gb, "GB", "memory per GPU"),
    F("--peak", PL_FLAG_DOUBLE, peak_tflops, "TFLOPS", "peak dense BF16 per GPU"),
    F("--efficiency", PL_FLAG_DOUBLE, efficiency, "F", "share of peak a layer sustains, in (0, 1]"),
    F("--intra-bw", PL_FLAG_DOUBLE, bw_gbs[PL_LINK_INTRA], "GB/s", "intra-node bandwidth per GPU per direction (a torus: per link)"),
    F("--inter-bw", PL_FLAG_DOUBLE, bw_gbs[PL_LINK_INTER], "GB/s", "inter-node bandwidth per GPU per direction"),
    F("--intra-lat", PL_FLAG_DOUBLE, lat_us[PL_LINK_INTRA], "US", "intra-node latency per message (a torus: per hop)"),
    F("--inter-lat", PL_FLAG_DOUBLE, lat_us[PL_LINK_INTER], "US", "inter-node latency per message"),
    F("--config", PL_FLAG_STR, config, "K=V,..", "evaluate this configuration (tp=8,pp=2,zero=1,micro=1,m=64,...)"),
    F("--fix", PL_FLAG_STR, fix, "K=V,..", "search with these kept (tp=8,pp=16,dp=128,micro=1,v=1,zero=1,recompute=full)"),
    F("--published", PL_FLAG_SWITCH, published, "", "with --fix: time it even if the memory model says it does not fit"),
    F("--explain", PL_FLAG_SWITCH, explain, "", "print the derivation of every figure"),
    F("--svg", PL_FLAG_STR, svg, "FILE", "draw MFU and memory per configuration"),
    F("--list", PL_FLAG_SWITCH, list, "", "the model and cluster presets"),
    F("--published-runs", PL_FLAG_SWITCH, published_runs, "", "published runs against the model (the sanity table)"),
};
#undef F
#define NFLAGS ((int)(sizeof flags / sizeof flags[0]))

static void usage(FILE *f)
{
    fprintf(f, "usage: plan --model NAME --cluster NAME [--nodes N] [flags]\n\n"
               "Chooses tp, cp, ep, pp, dp, the ZeRO stage, microbatches, interleaving,\n"
               "recomputation and the rank order for a model on a cluster, by the memory,\n"
               "communication and time model of lib/plan.h (docs/labs/08-placement.md).\n"
               "A shape flag given with --model overrides the preset's; 0 is the default of\n"
               "every number below (the preset's or the profile's value).\n\n");
}

static void published_runs(void);

static void list_presets(void)
{
    printf("models:\n");
    for (int i = 0; i < pl_plan_model_count(); i++) {
        const struct pl_plan_model *m = pl_plan_model_at(i);
        struct pl_plan_params p;
        pl_plan_params(m, &p);
        printf("  %-14s %6.1fB params%s, %d layers, d_model %d, seq %d, batch %.2fM tokens\n",
               m->name, p.total / 1e9, m->experts ? " (MoE)" : "", m->layers, m->d_model, m->seq,
               m->batch_tokens / (1 << 20));
    }
    printf("clusters:\n");
    for (int i = 0; i < pl_profile_count(); i++)
        printf("  %-14s %s%s\n", pl_profile_at(i)->name, pl_profile_at(i)->description,
               pl_profile_at(i)->torus ? " (a torus: --nodes counts its chips)" : "");
}

static void parse_args(int argc, char **argv)
{
    static const struct pl_flags_program prog = {"plan", usage, 0};
    struct pl_flag *const tables[] = {flags};
    const int n[] = {NFLAGS};
    pl_flags_parse(&prog, tables, n, 1, argc, argv);
    if (o.list) {
        list_presets();
        exit(0);
    }
    if (o.published_runs) {
        published_runs();
        exit(0);
    }
}

static int given(void *ptr)
{
    for (int k = 0; k < NFLAGS; k++)
        if (flags[k].ptr == ptr) return flags[k].set;
    return 0;
}

/* ---------------------------------------------------------------- inputs */

static void build_model(struct pl_plan_model *m)
{
    char names[256], err[512];
    memset(m, 0, sizeof *m);
    if (o.model) {
        const struct pl_plan_model *p = pl_plan_model_find(o.model);
        if (!p)
            pl_usage_error("unknown model preset \"%s\" (known presets: %s; or give the shape "
                           "with --layers, --d-model, --heads, --d-ff, --vocab, --seq)",
                           o.model, pl_plan_model_names(names, sizeof names));
        *m = *p;
    } else {
        m->name = "custom";
        m->gated = m->tied = 0;
    }
    int *fields[] = {&m->layers, &m->d_model, &m->heads, &m->kv_heads, &m->d_ff, &m->vocab,
                     &m->seq, &m->gated, &m->tied, &m->experts, &m->top_k, &m->d_ff_expert,
                     &m->shared_experts, &m->dense_layers};
    int *from[] = {&o.shape.layers, &o.shape.d_model, &o.shape.heads, &o.shape.kv_heads,
                   &o.shape.d_ff, &o.shape.vocab, &o.shape.seq, &o.shape.gated, &o.shape.tied,
                   &o.shape.experts, &o.shape.top_k, &o.shape.d_ff_expert,
                   &o.shape.shared_experts, &o.shape.dense_layers};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (given(from[i])) *fields[i] = *from[i];
    if (!o.model && !given(&o.shape.kv_heads)) m->kv_heads = m->heads;
    if (given(&o.batch_tokens)) m->batch_tokens = o.batch_tokens;
    else if (!o.model) m->batch_tokens = 512.0 * (m->seq > 0 ? m->seq : 1);
    if (!o.model && !m->layers)
        pl_usage_error("no model: give --model NAME (known presets: %s) or its shape",
                       pl_plan_model_names(names, sizeof names));
    if (pl_plan_model_check(m, err, sizeof err) != 0) pl_usage_error("model: %s", err);
}

/* On a torus every link is a neighbour link: the flags of a node and of the network between
 * nodes mean nothing there, and --intra-bw and --intra-lat set the link. */
static void torus_flags(const struct pl_profile *p)
{
    void *node_flags[] = {&o.per_node, &o.bw_gbs[PL_LINK_INTER], &o.lat_us[PL_LINK_INTER]};
    for (size_t i = 0; i < sizeof node_flags / sizeof node_flags[0]; i++)
        for (int k = 0; k < NFLAGS; k++)
            if (flags[k].ptr == node_flags[i] && flags[k].set)
                pl_usage_error("%s: %s is a torus, with no node and no network between nodes; "
                               "give its chips with --nodes and its neighbour link with "
                               "--intra-bw and --intra-lat", flags[k].name, p->name);
}

static void build_cluster(struct pl_plan_cluster *c)
{
    char names[256];
    if (o.cluster && o.profile && strcmp(o.cluster, o.profile))
        pl_usage_error("--cluster %s and --profile %s name two clusters: give one of them",
                       o.cluster, o.profile);
    const char *name = o.cluster ? o.cluster : o.profile ? o.profile : "dgx-h100";
    const struct pl_profile *p = pl_profile_find(name);
    if (!p)
        pl_usage_error("unknown cluster profile \"%s\" (known profiles: %s; or give its numbers "
                       "with --gpus-per-node, --hbm, --peak, --intra-bw, --inter-bw)",
                       name, pl_profile_names(names, sizeof names));
    if (p->torus) torus_flags(p);
    if (p->torus && o.nodes > p->devices_per_node)
        pl_usage_error("--nodes %d: a %s pod has %d chips; give 1 to %d", o.nodes, p->name,
                       p->devices_per_node, p->devices_per_node);
    pl_plan_cluster_from_profile(c, p, o.nodes ? o.nodes : 1);
    if (given(&o.per_node)) c->per_node = o.per_node;
    if (given(&o.hbm_gb)) c->hbm = o.hbm_gb * 1e9;
    if (given(&o.peak_tflops)) c->flops = o.peak_tflops * 1e12;
    if (given(&o.efficiency)) c->efficiency = o.efficiency;
    for (int l = 0; l < PL_NLINKS; l++) {
        if (given(&o.bw_gbs[l])) c->bw[l] = o.bw_gbs[l] * 1e9;
        if (given(&o.lat_us[l])) c->latency[l] = o.lat_us[l] * 1e-6;
    }
    if (c->torus) { /* one link class: the torus's */
        c->bw[PL_LINK_INTER] = c->bw[PL_LINK_INTRA];
        c->latency[PL_LINK_INTER] = c->latency[PL_LINK_INTRA];
    }
    if (given(&o.nodes) && o.nodes < 1) pl_usage_error("--nodes must be at least 1");
    double *positive[] = {&o.hbm_gb, &o.peak_tflops, &o.efficiency, &o.bw_gbs[0], &o.bw_gbs[1],
                          &o.lat_us[0], &o.lat_us[1]};
    for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++)
        for (int k = 0; k < NFLAGS; k++)
            if (flags[k].ptr == positive[i] && flags[k].set && !(*positive[i] > 0))
                pl_usage_error("%s %g must be positive", flags[k].name, *positive[i]);
    if (o.shape.experts < 0 || o.shape.top_k < 0 || o.shape.dense_layers < 0 ||
        o.shape.shared_experts < 0 || o.shape.d_ff_expert < 0)
        pl_usage_error("--experts, --top-k, --d-ff-expert, --shared-experts and --dense-layers "
                       "must be 0 or more");
    if (c->per_node < 1) pl_usage_error("--gpus-per-node must be at least 1");
    if (c->efficiency > 1) pl_usage_error("--efficiency %g is more than 1 (a share of peak)", c->efficiency);
}

/* ---------------------------------------------------------------- report */

static void print_memory(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                         const struct pl_plan_choice *ch)
{
    const struct pl_plan_memory *r = &ch->mem;
    printf("memory per %s (first stage, %.0f layers, GB = 1e9 bytes):\n",
           c->torus ? "chip" : "GPU", r->layers_stage);
    printf("  parameters %7.2f GB   gradients %7.2f GB   optimizer %7.2f GB   activations "
           "%7.2f GB\n", r->params / 1e9, r->grads / 1e9, r->optim / 1e9, r->activ / 1e9);
    for (int rc = PL_RECOMPUTE_NONE; rc <= PL_RECOMPUTE_FULL; rc++) {
        struct pl_plan_config alt = ch->cfg;
        alt.recompute = rc;
        struct pl_plan_memory am;
        pl_plan_memory(m, c, &alt, &am);
        printf("    activations with recompute %-9s %7.2f GB%s\n", pl_recompute_name(rc),
               am.activ / 1e9, rc == (int)ch->cfg.recompute ? "  (chosen)" : "");
    }
    printf("  total %.2f GB of %.0f GB (%.0f%% usable: %.1f GB)\n", r->total / 1e9, c->hbm / 1e9,
           100 * PL_RULE_MEM_SHARE, PL_RULE_MEM_SHARE * c->hbm / 1e9);
}

/* Where an axis' collectives run on a torus: rank 0's group (dp: the dense gradients'), the
 * box of chips it spans, and the longest route a ring step or a pipeline send takes. */
static void torus_where(const struct pl_plan_config *cfg, int a, char *buf, size_t len)
{
    int dims[3], ext[3], *ranks = malloc((size_t)pl_plan_world(cfg) * sizeof *ranks);
    PL_ASSERT(ranks);
    unsigned mask = a == PL_AX_DP ? (1u << PL_AX_CP) | (1u << PL_AX_EP) | (1u << PL_AX_DP)
                                  : 1u << a;
    int n = pl_plan_group(cfg, mask, ranks);
    pl_torus_shape(pl_plan_world(cfg), dims);
    pl_torus_extent(dims, ranks, n, ext);
    int hops = a == PL_AX_PP ? pl_torus_hops(dims, ranks[0], ranks[1])
                             : pl_torus_ring_hops(dims, ranks, n);
    if (a == PL_AX_EP)
        snprintf(buf, len, "an all-to-all over %d chips spanning %d x %d x %d, bound by their "
                 "links or by that box's bisection", n, ext[0], ext[1],
                 ext[2]);
    else
        snprintf(buf, len, "%s%d chips spanning %d x %d x %d, %s %d link%s",
                 a == PL_AX_DP ? "the gradients' " : "", n, ext[0], ext[1], ext[2],
                 a == PL_AX_PP ? "sends of" : "ring steps of up to", hops, hops == 1 ? "" : "s");
    free(ranks);
}

static void print_time(const struct pl_plan_cluster *c, const struct pl_plan_choice *ch)
{
    const struct pl_plan_time *t = &ch->time;
    printf("communication per %s per step:\n", c->torus ? "chip" : "GPU");
    for (int a = 0; a < PL_NAXES; a++) {
        if (ch->cfg.deg[a] <= 1) continue;
        if (!c->torus) {
            printf("  %s  %9.3f GB sent over %s-node links, %8.3f s exposed\n",
                   pl_plan_axis_name(a), t->bytes[a] / 1e9, pl_link_name(t->link[a]),
                   t->exposed[a]);
            continue;
        }
        char where[160];
        torus_where(&ch->cfg, a, where, sizeof where);
        printf("  %s  %9.3f GB sent over torus links, %8.3f s exposed (%s)\n",
               pl_plan_axis_name(a), t->bytes[a] / 1e9, t->exposed[a], where);
    }
    printf("step time %.3f s: compute %.3f s, bubble %.3f s, exposed communication %.3f s\n",
           t->step, t->compute, t->bubble,
           t->step - t->compute - t->bubble);
    printf("MFU %.1f%% (%.0f model TFLOP/s per %s); with recomputation counted %.1f%%\n",
           100 * t->mfu, t->tflops, c->torus ? "chip" : "GPU", 100 * t->hfu);
}

static void print_rules(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                        const struct pl_plan_choice *ch)
{
    const struct pl_plan_config *g = &ch->cfg;
    int p = g->deg[PL_AX_PP];
    char err[512];
    printf("rules:\n");
    if (c->torus) {
        int dims[3];
        pl_plan_torus_dims(c, dims);
        printf("  tp on a torus ring (no node on a torus, so no \"tp inside a node\"): tp %d, "
               "each ring step one link of the %d x %d x %d torus\n", g->deg[PL_AX_TP], dims[0],
               dims[1], dims[2]);
        printf("  ep: no placement rule on a torus; its all-to-all is timed by the bisection of "
               "the chips its group spans\n");
    } else
        printf("  tp and ep inside a node: tp %d x cp %d x ep %d within %d GPUs per node\n",
               g->deg[PL_AX_TP], g->deg[PL_AX_CP], g->deg[PL_AX_EP], c->per_node);
    printf("  rank order %s: tp innermost, then cp/ep, pp, dp outermost\n", g->order);
    printf("  memory %.1f GB <= %.0f%% of %.0f GB\n", ch->mem.total / 1e9,
           100 * PL_RULE_MEM_SHARE, c->hbm / 1e9);
    printf("  batch: dp %d x micro %d x m %d = %.0f sequences = %.0f tokens\n",
           g->deg[PL_AX_EP] * g->deg[PL_AX_DP], g->micro, g->m, m->batch_tokens / m->seq,
           m->batch_tokens);
    printf("  microbatches: m %d >= p %d, bubble (p-1)/(v m + p - 1) = %.1f%% <= %.0f%%\n", g->m,
           p, 100 * pl_rule_bubble(p, g->m, g->v), 100 * PL_RULE_MAX_BUBBLE);
    if (pl_plan_check(m, c, g, err, sizeof err) != 0) printf("  BROKEN: %s\n", err);
}

/* What makes a runner-up slower than the best: the component that grew most. */
static void why_slower(const struct pl_plan_choice *best, const struct pl_plan_choice *ch,
                       char *buf, size_t len)
{
    const struct pl_plan_time *a = &best->time, *b = &ch->time;
    const char *what = "compute";
    double most = b->compute - a->compute;
    if (b->bubble - a->bubble > most) most = b->bubble - a->bubble, what = "pipeline bubble";
    for (int k = 0; k < PL_NAXES; k++)
        if (b->exposed[k] - a->exposed[k] > most) {
            most = b->exposed[k] - a->exposed[k];
            what = pl_plan_axis_name(k);
        }
    snprintf(buf, len, "%s%s +%.3f s", what, strlen(what) == 2 ? " communication" : "", most);
}

static void print_choice(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                         const struct pl_plan_choice *ch)
{
    char desc[256];
    printf("configuration: %s\n", pl_plan_config_describe(&ch->cfg, desc, sizeof desc));
    printf("  rank order %s with tp=%d cp=%d ep=%d pp=%d dp=%d\n", ch->cfg.order,
           ch->cfg.deg[PL_AX_TP], ch->cfg.deg[PL_AX_CP], ch->cfg.deg[PL_AX_EP],
           ch->cfg.deg[PL_AX_PP], ch->cfg.deg[PL_AX_DP]);
    print_memory(m, c, ch);
    print_time(c, ch);
    print_rules(m, c, ch);
}

static void print_header(const struct pl_plan_model *m, const struct pl_plan_cluster *c)
{
    struct pl_plan_params p;
    pl_plan_params(m, &p);
    printf("model %s: %.1fB parameters (%.1fB active per token), %d layers, d_model %d, seq %d, "
           "batch %.0f tokens (%.0f sequences)\n", m->name, p.total / 1e9, p.active / 1e9,
           m->layers, m->d_model, m->seq, m->batch_tokens, m->batch_tokens / m->seq);
    if (c->torus) {
        int d[3];
        pl_plan_torus_dims(c, d);
        printf("cluster %s: %d chips as a %d x %d x %d torus (no nodes), %.0f GB each, %.0f "
               "TFLOP/s peak at %.0f%% efficiency, neighbour links %.0f GB/s per direction, "
               "%.0f us a hop\n", c->name, pl_plan_gpus(c), d[0], d[1], d[2], c->hbm / 1e9,
               c->flops / 1e12, 100 * c->efficiency, c->bw[PL_LINK_INTRA] / 1e9,
               c->latency[PL_LINK_INTRA] * 1e6);
        return;
    }
    printf("cluster %s: %d nodes x %d GPUs = %d GPUs, %.0f GB each, %.0f TFLOP/s peak at %.0f%% "
           "efficiency, links %.0f / %.0f GB/s intra / inter\n", c->name, c->nodes, c->per_node,
           pl_plan_gpus(c), c->hbm / 1e9, c->flops / 1e12, 100 * c->efficiency,
           c->bw[PL_LINK_INTRA] / 1e9, c->bw[PL_LINK_INTER] / 1e9);
}

static void report_search(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                          const struct pl_plan_result *res)
{
    printf("searched %d configurations, %d obey every rule\n", res->tried, res->found);
    printf("chosen ");
    print_choice(m, c, &res->best[0]);
    if (o.explain) pl_plan_explain(stdout, m, c, &res->best[0]);
    if (res->nbest > 1) printf("next best (other degrees):\n");
    for (int i = 1; i < res->nbest; i++) {
        char desc[256], why[128];
        why_slower(&res->best[0], &res->best[i], why, sizeof why);
        printf("  %d. %s: step %.3f s (+%.1f%%), MFU %.1f%%, loses on %s\n", i + 1,
               pl_plan_config_describe(&res->best[i].cfg, desc, sizeof desc),
               res->best[i].time.step, 100 * (res->best[i].time.step / res->best[0].time.step - 1),
               100 * res->best[i].time.mfu, why);
    }
}

#define MAX_NODES 4096

/* --fix TEXT: what the search keeps. A published configuration is timed as published even
 * where the memory model disagrees (ignore_memory); the report shows the memory beside. */
static void parse_fixed(const char *text, int ignore_memory, struct pl_plan_fixed *fixed)
{
    char err[512];
    if (pl_plan_fixed_parse(text, ignore_memory, fixed, err, sizeof err) != 0)
        pl_usage_error("--fix: %s", err);
}

/* The sanity table: each published run's degrees and schedule, the rest planned, against its
 * figure; then the fit of each profile's efficiency on its fit rows, and the held-out misses. */
static void published_runs(void)
{
    printf("%-36s %-4s %-37s %8s %9s %8s %6s %4s\n", "run", "set", "planned configuration",
           "memory", "published", "modelled", "diff", "tol");
    double worst = 0;
    for (int i = 0; i < pl_plan_published_count(); i++) {
        const struct pl_plan_published *p = pl_plan_published_at(i);
        struct pl_plan_choice b;
        double got = pl_plan_published_figure(p, 0, &b);
        char cfg[64];
        snprintf(cfg, sizeof cfg, "tp%d pp%d dp%d zero%d mb%d v%d %s", b.cfg.deg[PL_AX_TP],
                 b.cfg.deg[PL_AX_PP], b.cfg.deg[PL_AX_DP], b.cfg.zero, b.cfg.micro, b.cfg.v,
                 pl_recompute_name(b.cfg.recompute));
        printf("%-36s %-4s %-37s %5.1f GB %8.1f%% %7.1f%% %+6.1f %4.0f %s\n", p->source,
               p->held_out ? "held" : "fit", cfg, b.mem.total / 1e9, p->mfu, got, got - p->mfu,
               p->tol, p->counts_recompute ? "HFU" : "MFU");
        if (p->held_out) worst = fmax(worst, fabs(got - p->mfu));
    }
    const char *profiles[] = {"dgx-a100", "dgx-h100"};
    for (int k = 0; k < 2; k++) {
        double rms, e = pl_plan_published_fit(profiles[k], &rms);
        double now = pl_profile_find(profiles[k])->efficiency;
        if (e > 0)
            printf("%s: efficiency %.2f; its fit rows alone give %.3f (root mean square miss "
                   "%.1f points)\n", profiles[k], now, e, rms);
        else
            printf("%s: efficiency %.2f, set before this table; no fit row\n", profiles[k], now);
    }
    printf("held-out rows: largest miss %.1f points\n", worst);
}

static void nothing_fits(const struct pl_plan_model *m, const struct pl_plan_cluster *c)
{
    struct pl_plan_params p;
    pl_plan_params(m, &p);
    int n = pl_plan_min_nodes(m, c, MAX_NODES);
    if (n && c->torus) {
        int d[3];
        pl_torus_shape(n, d);
        pl_usage_error("%s fits no configuration on %d chips of %.0f GB: its %.1fB parameters "
                       "need %.0f GB of model state at 16 bytes each (%.0f chips' usable memory "
                       "even fully sharded), and the activations and the batch add their own "
                       "constraints; the fewest that fit are %d chips (a %d x %d x %d torus): "
                       "plan --nodes %d", m->name, pl_plan_gpus(c), c->hbm / 1e9, p.total / 1e9,
                       16 * p.total / 1e9, ceil(16 * p.total / (PL_RULE_MEM_SHARE * c->hbm)),
                       n, d[0], d[1], d[2], n);
    }
    if (n)
        pl_usage_error("%s fits no configuration on %d GPUs of %.0f GB: its %.1fB parameters "
                       "need %.0f GB of model state at 16 bytes each (%.0f GPUs' usable memory "
                       "even fully sharded), and the activations and the batch add their own "
                       "constraints; the fewest that fit are %d nodes (%d GPUs): plan --nodes %d",
                       m->name, pl_plan_gpus(c), c->hbm / 1e9, p.total / 1e9,
                       16 * p.total / 1e9, ceil(16 * p.total / (PL_RULE_MEM_SHARE * c->hbm)),
                       n, n * c->per_node, n);
    pl_usage_error("%s fits no configuration on up to %d nodes of %d GPUs (%.0f GB each), nor "
                   "reaches its batch of %.0f sequences exactly on any of them",
                   m->name, MAX_NODES, c->per_node, c->hbm / 1e9, m->batch_tokens / m->seq);
}

static void evaluate(const struct pl_plan_model *m, const struct pl_plan_cluster *c)
{
    struct pl_plan_choice ch;
    char err[512];
    pl_plan_config_default(&ch.cfg);
    if (pl_plan_config_parse(&ch.cfg, o.config, err, sizeof err) != 0)
        pl_usage_error("--config: %s", err);
    if (!strstr(o.config, "dp=")) {
        long inner = 1;
        for (int a = 0; a < PL_AX_DP; a++) inner *= ch.cfg.deg[a];
        ch.cfg.deg[PL_AX_DP] = (int)(pl_plan_gpus(c) / inner);
    }
    if (c->torus) { /* a torus's groups are its chips: a layout is needed to time them */
        struct pl_grid g;
        char degrees[128];
        snprintf(degrees, sizeof degrees, "tp=%d,cp=%d,ep=%d,pp=%d,dp=%d", ch.cfg.deg[PL_AX_TP],
                 ch.cfg.deg[PL_AX_CP], ch.cfg.deg[PL_AX_EP], ch.cfg.deg[PL_AX_PP],
                 ch.cfg.deg[PL_AX_DP]);
        if (pl_grid_init(&g, ch.cfg.order, degrees, pl_plan_world(&ch.cfg), err, sizeof err))
            pl_usage_error("--config on %s, a torus: %s", c->name, err);
    }
    print_header(m, c); /* after the checks: a refused --config prints nothing */
    pl_plan_memory(m, c, &ch.cfg, &ch.mem);
    pl_plan_time(m, c, &ch.cfg, &ch.time);
    print_choice(m, c, &ch);
    if (o.explain) pl_plan_explain(stdout, m, c, &ch);
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    struct pl_plan_model m;
    struct pl_plan_cluster c;
    build_model(&m);
    build_cluster(&c);
    char err[512];
    if (o.svg && pl_atomic_check(o.svg, "plot", err, sizeof err) != 0) pl_usage_error("%s", err);
    if (!o.nodes && !o.config) {
        c.nodes = pl_plan_min_nodes(&m, &c, MAX_NODES);
        if (!c.nodes) nothing_fits(&m, &c);
    }
    if (o.config) {
        evaluate(&m, &c);
        return 0;
    }
    struct pl_plan_fixed fixed = pl_plan_fixed_none();
    if (o.fix) parse_fixed(o.fix, o.published, &fixed);
    static struct pl_plan_result res;
    if (!pl_plan_search(&m, &c, o.fix ? &fixed : NULL, &res)) {
        if (o.fix) pl_usage_error("no configuration with %s obeys every rule on %d GPUs", o.fix,
                                  pl_plan_gpus(&c));
        nothing_fits(&m, &c);
    }
    print_header(&m, &c);
    report_search(&m, &c, &res);
    if (o.svg && pl_plan_write_svg(o.svg, &m, &c, &res) != 0) return 1;
    return 0;
}
