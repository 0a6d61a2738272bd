/* placement.c: Lab 8, placement: the reference solution. Memory per GPU (section 3), step
 * time (section 4) and the search (section 5) of docs/labs/08-placement.md, step by step. */
#include "placement.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- shape */

static int deg(const struct pl_plan_config *cfg, enum pl_plan_axis a) { return cfg->deg[a]; }

static int world(const struct pl_plan_config *cfg)
{
    int w = 1;
    for (int a = 0; a < PL_NAXES; a++) w *= cfg->deg[a];
    return w;
}

/* The first stage holds the most layers: ceil(L / p). */
static int stage_layers(const struct pl_plan_model *m, const struct pl_plan_config *cfg)
{
    return (m->layers + deg(cfg, PL_AX_PP) - 1) / deg(cfg, PL_AX_PP);
}

/* The link class of each axis, from the rank order: inside a node or across. */
static void axis_links(const struct pl_plan_cluster *c, const struct pl_plan_config *cfg,
                       enum pl_link *link)
{
    char degrees[128];
    snprintf(degrees, sizeof degrees, "tp=%d,cp=%d,ep=%d,pp=%d,dp=%d", deg(cfg, PL_AX_TP),
             deg(cfg, PL_AX_CP), deg(cfg, PL_AX_EP), deg(cfg, PL_AX_PP), deg(cfg, PL_AX_DP));
    struct pl_grid g;
    int ok = pl_grid_init(&g, cfg->order, degrees, world(cfg), NULL, 0) == 0;
    for (int a = 0; a < PL_NAXES; a++)
        link[a] = ok && pl_rule_inside_node(&g, pl_plan_axis_name(a), c->per_node, NULL, 0) == 0
                      ? PL_LINK_INTRA
                      : PL_LINK_INTER;
}

/* ---------------------------------------------------------------- section 3: memory */

/* Bytes of an activation, a gradient or a parameter: 2, or 4 under fp32 (section 3.3). */
static double elem(const struct pl_plan_config *cfg) { return cfg->fp32 ? 4.0 : 2.0; }

/* Parameters per GPU before ZeRO: the stage's share of the layers split by tp (experts also
 * by ep), plus the input embedding (and the head, on a single stage), split by tp too unless
 * vocab_whole holds them whole on every TP rank. */
static void gpu_params(const struct pl_plan_model *m, const struct pl_plan_config *cfg,
                       double *dense, double *expert)
{
    struct pl_plan_params p;
    pl_plan_params(m, &p);
    double layers = stage_layers(m, cfg), t = deg(cfg, PL_AX_TP);
    double emb = deg(cfg, PL_AX_PP) == 1 ? p.embedding : (double)m->vocab * m->d_model;
    *dense = layers * (p.dense - p.embedding) / m->layers / t + (cfg->vocab_whole ? emb : emb / t);
    *expert = layers * (p.expert / m->layers) / (t * deg(cfg, PL_AX_EP));
}

/* 2 + 2 + 12 bytes per parameter (fp32: 4 + 4 + 8); ZeRO stage z shards optimizer state,
 * then gradients, then parameters over the n replicas. */
static void add_state(struct pl_plan_memory *r, double psi, double n,
                      const struct pl_plan_config *cfg)
{
    int zero = cfg->zero;
    double e = elem(cfg), o = cfg->fp32 ? 8.0 : 12.0;
    r->optim += (zero >= 1 ? o / n : o) * psi;
    r->grads += (zero >= 2 ? e / n : e) * psi;
    r->params += (zero >= 3 ? e / n : e) * psi;
}

/* Korthikanti et al.: s b h (10/t' + (8 + 4r)/t + 5 a s / (h t)) bytes per layer; with e
 * bytes an activation and k dropout masks, s b h ((4e + 2k)/t' + (4e + 2er)/t + (e + k(e + 1))
 * a s / (h t)). */
static double layer_activations(const struct pl_plan_model *m, const struct pl_plan_config *cfg,
                                enum pl_recompute rc)
{
    double t = deg(cfg, PL_AX_TP), s = (double)m->seq / deg(cfg, PL_AX_CP), b = cfg->micro;
    double h = m->d_model, a = m->heads;
    double width = m->experts ? (double)(m->top_k + m->shared_experts) * m->d_ff_expert : m->d_ff;
    double sbh = s * b * h;
    double e = elem(cfg), k = cfg->no_dropout ? 0.0 : 1.0;
    if (rc == PL_RECOMPUTE_FULL) return e * sbh / t;
    double norms = (4.0 * e + 2.0 * k) / (t > 1 ? t : 1.0);
    double scores = rc == PL_RECOMPUTE_SELECTIVE ? 0.0 : (e + k * (e + 1.0)) * a * s / (h * t);
    return sbh * (norms + (4.0 * e + 2.0 * e * width / h) / t + scores);
}

double placement_memory(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                        const struct pl_plan_config *cfg, struct pl_plan_memory *out)
{
    struct pl_plan_memory r;
    memset(&r, 0, sizeof r);
    double dense, expert;
    gpu_params(m, cfg, &dense, &expert);
    double replicas = (double)deg(cfg, PL_AX_CP) * deg(cfg, PL_AX_DP);
    add_state(&r, dense, replicas * deg(cfg, PL_AX_EP), cfg);
    add_state(&r, expert, replicas, cfg);

    int p = deg(cfg, PL_AX_PP);
    r.layers_stage = stage_layers(m, cfg);
    r.activ_layer = layer_activations(m, cfg, cfg->recompute);
    r.in_flight = p == 1 ? 1 : cfg->m < p ? cfg->m : p;
    if (p > 1 && cfg->v > 1) r.in_flight *= 1.0 + (p - 1.0) / ((double)p * cfg->v);
    r.activ = r.in_flight * r.layers_stage * r.activ_layer;
    if (cfg->recompute == PL_RECOMPUTE_FULL)
        r.activ += layer_activations(m, cfg, PL_RECOMPUTE_SELECTIVE);
    r.activ += 4.0 * cfg->micro * ((double)m->seq / deg(cfg, PL_AX_CP)) * m->vocab /
               deg(cfg, PL_AX_TP);
    r.total = r.params + r.grads + r.optim + r.activ;
    (void)c;
    *out = r;
    return r.total;
}

/* ---------------------------------------------------------------- section 4: time */

struct micro {
    double compute, model_flops, hw_flops, comm[PL_NAXES], bytes[PL_NAXES];
    double all; /* every stage's compute of one microbatch, added up */
};

static double link_time(const struct pl_plan_cluster *c, enum pl_coll_kind k, int n, double S,
                        enum pl_link l)
{
    return pl_coll_time(k, n, S, c->latency[l], c->bw[l]);
}

/* One microbatch's FLOPs over `layers` layers, with the output head's 6 V d a token when
 * head is set, split over tp x cp: as model FLOPs, and as run with recomputation. */
static void flops_of(const struct pl_plan_model *m, const struct pl_plan_config *cfg,
                     double layers, int head, double *model, double *hw)
{
    const double head_tok = 6.0 * m->vocab * (double)m->d_model;
    const double per_layer = (pl_plan_flops_per_token(m) - head_tok) / m->layers;
    const double tok_split = (double)cfg->micro * m->seq /
                             ((double)deg(cfg, PL_AX_TP) * deg(cfg, PL_AX_CP));
    *model = tok_split * (layers * per_layer + (head ? head_tok : 0.0));
    *hw = *model;
    if (cfg->recompute == PL_RECOMPUTE_FULL) *hw += tok_split * layers * per_layer / 3.0;
    if (cfg->recompute == PL_RECOMPUTE_SELECTIVE)
        *hw += 4.0 * layers * m->d_model * (double)m->seq * tok_split;
}

/* The slowest stage's microbatch: the first (the most layers) or the last (floor(L / p)
 * layers and the head), whichever runs longer. */
static void micro_compute(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                          const struct pl_plan_config *cfg, struct micro *u)
{
    const int p = deg(cfg, PL_AX_PP);
    const double rate = c->flops * c->efficiency;
    double whole_model, whole_hw;
    flops_of(m, cfg, m->layers, 1, &whole_model, &whole_hw);
    u->all = whole_hw / rate;
    u->model_flops = whole_model, u->hw_flops = whole_hw;
    if (p > 1) {
        double first_model, first_hw, last_model, last_hw;
        flops_of(m, cfg, stage_layers(m, cfg), 0, &first_model, &first_hw);
        flops_of(m, cfg, m->layers / p, 1, &last_model, &last_hw);
        const int last = last_hw > first_hw;
        u->model_flops = last ? last_model : first_model;
        u->hw_flops = last ? last_hw : first_hw;
    }
    u->compute = u->hw_flops / rate;
}

/* One collective kind repeated `times` on axis a, each of S bytes. */
static void charge(struct micro *u, const struct pl_plan_cluster *c, enum pl_plan_axis a,
                   enum pl_coll_kind k, int n, double S, double times, enum pl_link l)
{
    u->comm[a] = times * link_time(c, k, n, S, l);
    u->bytes[a] = times * pl_ring_bytes_sent(k, n, S);
}

static void micro_comm(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                       const struct pl_plan_config *cfg, const enum pl_link *link,
                       struct micro *u)
{
    int t = deg(cfg, PL_AX_TP), cp = deg(cfg, PL_AX_CP), p = deg(cfg, PL_AX_PP);
    double layers = stage_layers(m, cfg), full = cfg->recompute == PL_RECOMPUTE_FULL;
    double sbh2 = elem(cfg) * ((double)m->seq / cp) * cfg->micro * m->d_model;
    charge(u, c, PL_AX_TP, PL_ALL_REDUCE, t, sbh2, layers * (4 + 2 * full), link[PL_AX_TP]);
    double kv = 2.0 * sbh2 * m->kv_heads / m->heads / t * cp;
    charge(u, c, PL_AX_CP, PL_ALL_GATHER, cp, kv, layers * (3 + full), link[PL_AX_CP]);
    double moe = m->experts ? layers * (m->layers - m->dense_layers) / m->layers : 0.0;
    charge(u, c, PL_AX_EP, PL_ALL_TO_ALL, deg(cfg, PL_AX_EP), sbh2 * m->top_k / t,
           moe * (4 + 2 * full), link[PL_AX_EP]);
    double sends = p > 1 ? 2.0 * cfg->v : 0.0, msg = sbh2 / t;
    u->comm[PL_AX_PP] = sends * link_time(c, PL_P2P, 2, msg, link[PL_AX_PP]);
    u->bytes[PL_AX_PP] = sends * msg;
}

/* The data-parallel gradient (and parameter) traffic of one group of psi parameters on n
 * replicas, and the part of it no compute hides. */
static double dp_group(const struct pl_plan_cluster *c, const struct pl_plan_config *cfg,
                       double psi, int n, enum pl_link l, const struct micro *u, double *bytes)
{
    double S = elem(cfg) * psi;
    if (n <= 1 || S == 0.0) return 0.0;
    double fwd = u->compute / 3.0, bwd = 2.0 * u->compute / 3.0;
    double rs = link_time(c, PL_REDUCE_SCATTER, n, S, l), ag = link_time(c, PL_ALL_GATHER, n, S, l);
    double sent = pl_ring_bytes_sent(PL_REDUCE_SCATTER, n, S);
    if (cfg->zero == 3) {
        *bytes += cfg->m * 3.0 * sent;
        return cfg->m * (fmax(0.0, ag - fwd) + fmax(0.0, ag + rs - bwd));
    }
    *bytes += 2.0 * sent;
    if (cfg->zero == 0) return fmax(0.0, link_time(c, PL_ALL_REDUCE, n, S, l) - bwd);
    return fmax(0.0, rs - bwd) + fmax(0.0, ag - fwd);
}

double placement_step_time(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                           const struct pl_plan_config *cfg, struct pl_plan_time *out)
{
    struct pl_plan_time r;
    memset(&r, 0, sizeof r);
    axis_links(c, cfg, r.link);
    struct micro u;
    memset(&u, 0, sizeof u);
    micro_compute(m, c, cfg, &u);
    micro_comm(m, c, cfg, r.link, &u);
    double slot = u.compute;
    for (int a = 0; a < PL_NAXES; a++) {
        slot += u.comm[a];
        r.exposed[a] = cfg->m * u.comm[a];
        r.bytes[a] = cfg->m * u.bytes[a];
    }
    r.compute = cfg->m * u.compute;
    int p = deg(cfg, PL_AX_PP);
    /* the other stages' slots fill and drain around the slowest one's, v chunks a slot */
    r.bubble = p > 1 ? (u.all + p * (slot - u.compute) - slot) / cfg->v : 0.0;

    double dense, expert;
    gpu_params(m, cfg, &dense, &expert);
    enum pl_link dl = r.link[PL_AX_DP];
    if (r.link[PL_AX_EP] == PL_LINK_INTER || r.link[PL_AX_CP] == PL_LINK_INTER)
        dl = PL_LINK_INTER;
    int reps = deg(cfg, PL_AX_CP) * deg(cfg, PL_AX_DP);
    r.exposed[PL_AX_DP] = dp_group(c, cfg, dense, reps * deg(cfg, PL_AX_EP), dl, &u,
                                   &r.bytes[PL_AX_DP]) +
                          dp_group(c, cfg, expert, reps, dl, &u, &r.bytes[PL_AX_DP]);
    r.step = cfg->m * slot + r.bubble + r.exposed[PL_AX_DP];

    double model = pl_plan_flops_per_token(m) * m->batch_tokens;
    r.mfu = model / (world(cfg) * c->flops * r.step);
    r.hfu = r.mfu * u.hw_flops / u.model_flops;
    r.tflops = model / world(cfg) / r.step / 1e12;
    *out = r;
    return r.step;
}

/* ---------------------------------------------------------------- section 5: search */

/* The shape rules: tp divides heads, d_model, d_ff (and divides or is a multiple of
 * kv_heads); ep divides the experts; pp x v chunks fit the layers. */
static int shape_ok(const struct pl_plan_model *m, const struct pl_plan_config *cfg)
{
    int t = deg(cfg, PL_AX_TP), e = deg(cfg, PL_AX_EP), p = deg(cfg, PL_AX_PP);
    if (m->heads % t || m->d_model % t || m->d_ff % t || (m->kv_heads % t && t % m->kv_heads))
        return 0;
    if (e > 1 && (!m->experts || m->experts % e)) return 0;
    return p <= m->layers && p * cfg->v <= m->layers;
}

/* Every placement rule, with our own memory estimate. */
static int obeys_rules(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                       const struct pl_plan_config *cfg)
{
    char degrees[128];
    snprintf(degrees, sizeof degrees, "tp=%d,cp=%d,ep=%d,pp=%d,dp=%d", deg(cfg, PL_AX_TP),
             deg(cfg, PL_AX_CP), deg(cfg, PL_AX_EP), deg(cfg, PL_AX_PP), deg(cfg, PL_AX_DP));
    struct pl_grid g;
    if (!shape_ok(m, cfg) || pl_grid_init(&g, cfg->order, degrees, world(cfg), NULL, 0) != 0)
        return 0;
    if (pl_rule_inside_node(&g, "tp", c->per_node, NULL, 0) ||
        pl_rule_inside_node(&g, "ep", c->per_node, NULL, 0) || pl_rule_order(&g, NULL, 0))
        return 0;
    if (pl_rule_batch(deg(cfg, PL_AX_EP) * deg(cfg, PL_AX_DP), cfg->micro, cfg->m,
                      m->batch_tokens / m->seq, NULL, 0) ||
        pl_rule_microbatches(deg(cfg, PL_AX_PP), cfg->m, cfg->v, NULL, 0))
        return 0;
    struct pl_plan_memory mem;
    return pl_rule_memory(placement_memory(m, c, cfg, &mem), c->hbm, NULL, 0) == 0;
}

/* Every microbatch size, interleaving, ZeRO stage and recomputation for the degrees in cfg. */
static void try_settings(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                         struct pl_plan_config cfg, struct pl_plan_config *best, double *best_t)
{
    long seqs = (long)(m->batch_tokens / m->seq);
    long replicas = (long)deg(&cfg, PL_AX_EP) * deg(&cfg, PL_AX_DP);
    if (seqs % replicas) return;
    long per = seqs / replicas;
    int p = deg(&cfg, PL_AX_PP), vmax = p > 1 ? m->layers / p : 1;
    for (long micro = 1; micro <= per; micro++) {
        if (per % micro) continue; /* the batch must be reached exactly */
        cfg.micro = (int)micro;
        cfg.m = (int)(per / micro);
        for (cfg.v = 1; cfg.v <= vmax && cfg.v <= 8; cfg.v++)
            for (cfg.zero = 0; cfg.zero <= 3; cfg.zero++)
                for (int rc = PL_RECOMPUTE_NONE; rc <= PL_RECOMPUTE_FULL; rc++) {
                    cfg.recompute = rc;
                    if (!obeys_rules(m, c, &cfg)) continue;
                    struct pl_plan_time t;
                    double step = placement_step_time(m, c, &cfg, &t);
                    if (*best_t < 0 || step < *best_t) *best = cfg, *best_t = step;
                }
    }
}

int placement_search(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                     struct pl_plan_config *best)
{
    int gpus = c->nodes * c->per_node;
    int max_ep = m->experts ? m->experts : 1, max_cp = m->seq >= 32768 ? gpus : 1;
    double best_t = -1;
    struct pl_plan_config cfg;
    pl_plan_config_default(&cfg); /* order "tp-cp-ep-pp-dp": tp innermost, dp outermost */
    for (int tp = 1; tp <= c->per_node; tp++)
        for (int cp = 1; cp <= max_cp; cp *= 2)
            for (int ep = 1; ep <= max_ep; ep++)
                for (int pp = 1; pp <= m->layers; pp++) {
                    long inner = (long)tp * cp * ep * pp;
                    if (gpus % inner) continue;
                    cfg.deg[PL_AX_TP] = tp;
                    cfg.deg[PL_AX_CP] = cp;
                    cfg.deg[PL_AX_EP] = ep;
                    cfg.deg[PL_AX_PP] = pp;
                    cfg.deg[PL_AX_DP] = (int)(gpus / inner);
                    try_settings(m, c, cfg, best, &best_t);
                }
    return best_t < 0 ? -1 : 0;
}

/* ---------------------------------------------------------------- section 6: answers */

/* Q1 from `plan --model llama3-70b --seq 4096 --batch-tokens 4194304 --cluster dgx-h100`;
 * Q2: 15/(7m+15) <= 5% from m = 41, a multiple of 16 from 48; Q3: section 4.1's counts. */
const struct placement_answers placement_answers = {
    .q1_nodes = 2, .q1_tp = 8, .q1_pp = 1, .q1_dp = 2, .q1_zero = 3,
    .q2_bubble_percent = 4.27,
    .q3_vocab = 210946,
};
