/* pass | written from scratch: link classes found by walking every group of the grid (pl_grid_group) and comparing node ids instead of pl_rule_inside_node; model state as a bytes-per-parameter table; search loops pp outermost and m over the divisors, with the rank grid and placement rules checked once per set of degrees */
/* placement.c: Lab 8, placement. Memory per GPU, step time and the search of
 * docs/labs/08-placement.md (sections 3, 4 and 5). */
#include "placement.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define TP PL_AX_TP
#define CP PL_AX_CP
#define EP PL_AX_EP
#define PP PL_AX_PP
#define DP PL_AX_DP

static long gpus_of(const struct pl_plan_config *cfg)
{
    long w = 1;
    for (int a = 0; a < PL_NAXES; a++) w *= cfg->deg[a];
    return w;
}

static int make_grid(const struct pl_plan_config *cfg, struct pl_grid *g)
{
    char spec[128];
    snprintf(spec, sizeof spec, "tp=%d,cp=%d,ep=%d,pp=%d,dp=%d", cfg->deg[TP], cfg->deg[CP],
             cfg->deg[EP], cfg->deg[PP], cfg->deg[DP]);
    return pl_grid_init(g, cfg->order, spec, (int)gpus_of(cfg), NULL, 0);
}

/* Does every group of this axis stay inside one node? Walk the groups of the ranks that
 * start one (coordinate 0 along the axis) and compare node numbers. */
static int groups_inside_node(const struct pl_grid *g, int axis, int per_node)
{
    if (axis < 0 || g->size[axis] == 1) return 1;
    int members[4096];
    if (g->size[axis] > 4096) return 0;
    for (int r = 0; r < g->world; r++) {
        if (pl_grid_coord(g, r, axis) != 0) continue;
        int n = pl_grid_group(g, r, axis, members);
        for (int i = 1; i < n; i++)
            if (members[i] / per_node != members[0] / per_node) return 0;
    }
    return 1;
}

static void link_classes(const struct pl_plan_cluster *c, const struct pl_plan_config *cfg,
                         enum pl_link *link)
{
    struct pl_grid g;
    int ok = make_grid(cfg, &g) == 0;
    for (int a = 0; a < PL_NAXES; a++) {
        int inside = ok && groups_inside_node(&g, pl_grid_axis(&g, pl_plan_axis_name(a)),
                                              c->per_node);
        link[a] = inside ? PL_LINK_INTRA : PL_LINK_INTER;
    }
}

/* ---------------------------------------------------------------- memory */

static double first_stage_layers(const struct pl_plan_model *m, const struct pl_plan_config *cfg)
{
    return ceil((double)m->layers / cfg->deg[PP]);
}

/* Parameters one GPU of the first stage holds, before ZeRO. */
static void stage_params(const struct pl_plan_model *m, const struct pl_plan_config *cfg,
                         double *dense, double *expert)
{
    struct pl_plan_params pp;
    pl_plan_params(m, &pp);
    double share = first_stage_layers(m, cfg) / m->layers;
    double input_embedding = (double)m->vocab * m->d_model;
    double embeddings = cfg->deg[PP] > 1 ? input_embedding : pp.embedding;
    *dense = ((pp.dense - pp.embedding) * share + embeddings) / cfg->deg[TP];
    *expert = pp.expert * share / ((double)cfg->deg[TP] * cfg->deg[EP]);
}

/* Bytes per parameter (params, grads, optimizer) for each ZeRO stage, before the division
 * by the replicas: which of them are sharded. */
static const int sharded[4][3] = {{0, 0, 0}, {0, 0, 1}, {0, 1, 1}, {1, 1, 1}};
static const double bytes_per[3] = {2.0, 2.0, 12.0};

static void state_bytes(double psi, double replicas, int zero, double out[3])
{
    for (int k = 0; k < 3; k++)
        out[k] += bytes_per[k] * psi / (sharded[zero][k] ? replicas : 1.0);
}

/* One layer, one microbatch, as stored. */
static double activation_bytes(const struct pl_plan_model *m, const struct pl_plan_config *cfg,
                               int rc)
{
    double t = cfg->deg[TP];
    double s = (double)m->seq / cfg->deg[CP], b = cfg->micro, h = m->d_model, a = m->heads;
    double ffn = m->experts ? (double)m->d_ff_expert * (m->top_k + m->shared_experts) : m->d_ff;
    double r = ffn / h;
    if (rc == PL_RECOMPUTE_FULL) return 2.0 * s * b * h / t;
    double tsp = t > 1 ? t : 1.0; /* sequence parallelism splits the layernorms and dropouts */
    double per_token = 10.0 / tsp + (8.0 + 4.0 * r) / t;
    if (rc == PL_RECOMPUTE_NONE) per_token += 5.0 * a * s / (h * t);
    return s * b * h * per_token;
}

double placement_memory(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                        const struct pl_plan_config *cfg, struct pl_plan_memory *out)
{
    (void)c;
    double dense, expert, st[3] = {0, 0, 0};
    stage_params(m, cfg, &dense, &expert);
    double cpdp = (double)cfg->deg[CP] * cfg->deg[DP];
    state_bytes(dense, cpdp * cfg->deg[EP], cfg->zero, st);
    state_bytes(expert, cpdp, cfg->zero, st);

    int p = cfg->deg[PP];
    double inflight = 1.0;
    if (p > 1) {
        inflight = cfg->m < p ? cfg->m : p;
        if (cfg->v > 1) inflight += inflight * (p - 1) / ((double)p * cfg->v);
    }
    double layer = activation_bytes(m, cfg, cfg->recompute);
    double L1 = first_stage_layers(m, cfg);
    double act = inflight * L1 * layer;
    if (cfg->recompute == PL_RECOMPUTE_FULL) act += activation_bytes(m, cfg, PL_RECOMPUTE_SELECTIVE);
    double s = (double)m->seq / cfg->deg[CP];
    act += 4.0 * s * cfg->micro * (double)m->vocab / cfg->deg[TP]; /* fp32 logits */

    memset(out, 0, sizeof *out);
    out->params = st[0];
    out->grads = st[1];
    out->optim = st[2];
    out->activ = act;
    out->activ_layer = layer;
    out->in_flight = inflight;
    out->layers_stage = L1;
    out->total = st[0] + st[1] + st[2] + act;
    return out->total;
}

/* ---------------------------------------------------------------- time */

struct mb_cost {
    double seconds, flops_model, flops_done;
    double comm[PL_NAXES], sent[PL_NAXES];
};

static double coll(const struct pl_plan_cluster *c, enum pl_link l, enum pl_coll_kind k, int n,
                   double bytes)
{
    return pl_coll_time(k, n, bytes, c->latency[l], c->bw[l]);
}

static void microbatch_cost(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                            const struct pl_plan_config *cfg, const enum pl_link *link,
                            struct mb_cost *u)
{
    memset(u, 0, sizeof *u);
    int t = cfg->deg[TP], cp = cfg->deg[CP], ep = cfg->deg[EP], p = cfg->deg[PP];
    double L1 = first_stage_layers(m, cfg), h = m->d_model;
    double tokens = (double)cfg->micro * m->seq, split = (double)t * cp;
    u->flops_model = pl_plan_flops_per_token(m) * tokens * L1 / m->layers / split;
    switch (cfg->recompute) {
    case PL_RECOMPUTE_FULL: u->flops_done = u->flops_model * 4.0 / 3.0; break;
    case PL_RECOMPUTE_SELECTIVE:
        u->flops_done = u->flops_model + 4.0 * L1 * h * m->seq * tokens / split;
        break;
    default: u->flops_done = u->flops_model;
    }
    u->seconds = u->flops_done / (c->flops * c->efficiency);

    int full = cfg->recompute == PL_RECOMPUTE_FULL;
    double x = 2.0 * (m->seq / (double)cp) * cfg->micro * h; /* one 16-bit activation */
    struct {
        int axis;
        enum pl_coll_kind kind;
        int n;
        double bytes, count;
    } ops[3] = {
        {TP, PL_ALL_REDUCE, t, x, L1 * (full ? 6 : 4)},
        {CP, PL_ALL_GATHER, cp, 2.0 * x * m->kv_heads / m->heads * cp / t, L1 * (full ? 4 : 3)},
        {EP, PL_ALL_TO_ALL, ep, x * m->top_k / t,
         m->experts ? L1 * (m->layers - m->dense_layers) / m->layers * (full ? 6 : 4) : 0.0},
    };
    for (int i = 0; i < 3; i++) {
        u->comm[ops[i].axis] = ops[i].count * coll(c, link[ops[i].axis], ops[i].kind, ops[i].n,
                                                   ops[i].bytes);
        u->sent[ops[i].axis] = ops[i].count * pl_ring_bytes_sent(ops[i].kind, ops[i].n, ops[i].bytes);
    }
    if (p > 1) {
        double msgs = 2.0 * cfg->v;
        u->comm[PP] = msgs * coll(c, link[PP], PL_P2P, 2, x / t);
        u->sent[PP] = msgs * x / t;
    }
}

/* The part of one parameter group's data-parallel traffic that compute does not hide. */
static double dp_exposed(const struct pl_plan_cluster *c, const struct pl_plan_config *cfg,
                         enum pl_link l, double psi, int n, double mb_compute, double *sent)
{
    if (n < 2 || psi <= 0.0) return 0.0;
    double S = 2.0 * psi, fwd = mb_compute / 3.0, bwd = mb_compute - fwd;
    double rs = coll(c, l, PL_REDUCE_SCATTER, n, S), ag = coll(c, l, PL_ALL_GATHER, n, S);
    double one = pl_ring_bytes_sent(PL_REDUCE_SCATTER, n, S);
    switch (cfg->zero) {
    case 0:
        *sent += 2.0 * one;
        return fmax(0.0, coll(c, l, PL_ALL_REDUCE, n, S) - bwd);
    case 1:
    case 2:
        *sent += 2.0 * one;
        return fmax(0.0, rs - bwd) + fmax(0.0, ag - fwd);
    default:
        *sent += 3.0 * one * cfg->m;
        return cfg->m * (fmax(0.0, ag - fwd) + fmax(0.0, ag + rs - bwd));
    }
}

static double step_with_links(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                              const struct pl_plan_config *cfg, const enum pl_link *link,
                              struct pl_plan_time *out)
{
    struct mb_cost u;
    microbatch_cost(m, c, cfg, link, &u);
    memset(out, 0, sizeof *out);
    double slot = u.seconds, M = cfg->m;
    for (int a = 0; a < PL_NAXES; a++) {
        out->link[a] = link[a];
        slot += u.comm[a];
        out->exposed[a] = M * u.comm[a];
        out->bytes[a] = M * u.sent[a];
    }
    out->compute = M * u.seconds;
    out->bubble = cfg->deg[PP] > 1 ? slot * (cfg->deg[PP] - 1) / cfg->v : 0.0;

    double dense, expert;
    stage_params(m, cfg, &dense, &expert);
    int inter = link[DP] == PL_LINK_INTER || link[EP] == PL_LINK_INTER || link[CP] == PL_LINK_INTER;
    enum pl_link l = inter ? PL_LINK_INTER : PL_LINK_INTRA;
    int cpdp = cfg->deg[CP] * cfg->deg[DP];
    out->exposed[DP] = dp_exposed(c, cfg, l, dense, cpdp * cfg->deg[EP], u.seconds, &out->bytes[DP]) +
                       dp_exposed(c, cfg, l, expert, cpdp, u.seconds, &out->bytes[DP]);
    out->step = M * slot + out->bubble + out->exposed[DP];

    double step_flops = pl_plan_flops_per_token(m) * m->batch_tokens;
    double gpus = (double)gpus_of(cfg);
    out->mfu = step_flops / (out->step * gpus * c->flops);
    out->hfu = out->mfu * (u.flops_done / u.flops_model);
    out->tflops = step_flops / (out->step * gpus) / 1e12;
    return out->step;
}

double placement_step_time(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                           const struct pl_plan_config *cfg, struct pl_plan_time *out)
{
    enum pl_link link[PL_NAXES];
    link_classes(c, cfg, link);
    return step_with_links(m, c, cfg, link, out);
}

/* ---------------------------------------------------------------- search */

/* Rules of the degrees alone: shapes, tp and ep inside a node, the rank order. */
static int degrees_ok(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                      const struct pl_plan_config *cfg)
{
    int t = cfg->deg[TP], e = cfg->deg[EP], cp = cfg->deg[CP];
    if (m->heads % t || m->d_model % t || m->d_ff % t) return 0;
    if (m->kv_heads % t != 0 && t % m->kv_heads != 0) return 0;
    if (e > 1 && (m->experts == 0 || m->experts % e != 0)) return 0;
    if (m->seq % cp) return 0;
    if (cfg->deg[PP] > m->layers) return 0;
    struct pl_grid g;
    if (make_grid(cfg, &g) != 0) return 0;
    return pl_rule_inside_node(&g, "tp", c->per_node, NULL, 0) == 0 &&
           pl_rule_inside_node(&g, "ep", c->per_node, NULL, 0) == 0 &&
           pl_rule_order(&g, NULL, 0) == 0;
}

int placement_search(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                     struct pl_plan_config *best)
{
    long gpus = (long)c->nodes * c->per_node;
    double seqs = m->batch_tokens / m->seq;
    int cp_top = m->seq >= 32768 ? (int)gpus : 1, ep_top = m->experts > 0 ? m->experts : 1;
    double best_step = INFINITY;
    struct pl_plan_config cfg;
    pl_plan_config_default(&cfg);
    pl_plan_config_default(best);
    for (int pp = 1; pp <= m->layers; pp++)
        for (int cp = 1; cp <= cp_top; cp *= 2)
            for (int ep = 1; ep <= ep_top; ep++)
                for (int tp = 1; tp <= c->per_node; tp++) {
                    long inner = (long)pp * cp * ep * tp;
                    if (inner > gpus || gpus % inner) continue;
                    int deg[PL_NAXES] = {[TP] = tp, [CP] = cp, [EP] = ep, [PP] = pp,
                                         [DP] = (int)(gpus / inner)};
                    memcpy(cfg.deg, deg, sizeof deg);
                    cfg.v = 1;
                    if (!degrees_ok(m, c, &cfg)) continue;
                    long reps = (long)ep * deg[DP], total = (long)llround(seqs);
                    if (fabs(seqs - (double)total) > 1e-9 || total % reps) continue;
                    long per = total / reps;
                    enum pl_link link[PL_NAXES];
                    link_classes(c, &cfg, link);
                    int vtop = pp > 1 ? m->layers / pp : 1;
                    if (vtop > 8) vtop = 8;
                    for (long nm = per; nm >= 1; nm--) { /* m microbatches of per/m sequences */
                        if (per % nm) continue;
                        cfg.m = (int)nm;
                        cfg.micro = (int)(per / nm);
                        for (int v = 1; v <= vtop; v++) {
                            cfg.v = v;
                            if (pl_rule_microbatches(pp, cfg.m, v, NULL, 0) != 0) continue;
                            if (pl_rule_batch((int)reps, cfg.micro, cfg.m, seqs, NULL, 0) != 0) continue;
                            for (int rc = PL_RECOMPUTE_NONE; rc <= PL_RECOMPUTE_FULL; rc++)
                                for (int z = 0; z <= 3; z++) {
                                    cfg.recompute = rc;
                                    cfg.zero = z;
                                    struct pl_plan_memory mem;
                                    if (pl_rule_memory(placement_memory(m, c, &cfg, &mem), c->hbm,
                                                       NULL, 0) != 0)
                                        continue;
                                    struct pl_plan_time tm;
                                    double step = step_with_links(m, c, &cfg, link, &tm);
                                    if (step < best_step) {
                                        best_step = step;
                                        *best = cfg;
                                    }
                                }
                        }
                    }
                }
    return isinf(best_step) ? -1 : 0;
}

/* ---------------------------------------------------------------- answers */

/* Q1: `make plan ARGS="--model llama3-70b --seq 4096 --batch-tokens 4194304 --cluster
 * dgx-h100"`: 2 nodes, tp8 dp2 with ZeRO-3, the only stage that shards the parameters
 * enough to fit. Q2: 15 / (7 x 16 + 15) = 11.8%; without interleaving 15/31 = 48%.
 * Q3: `make plan ARGS=--published-runs`. */
const struct placement_answers placement_answers = {
    .q1_nodes = 2, .q1_tp = 8, .q1_pp = 1, .q1_dp = 2, .q1_zero = 3,
    .q2_bubble_percent = 100.0 * 15.0 / 127.0,
    .q3_mfu_percent = 40.7,
};
