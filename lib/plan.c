/* plan.c: the memory and the step time of one parallel configuration on a cluster, and the
 * placement rules it must obey. The search over configurations is in plan_search.c.
 *
 * Assumptions, each stated once:
 *   - compute runs at the profile's peak x efficiency (topo.c says where the figure comes
 *     from); every GPU of a stage does 1/(tp cp) of the stage's FLOPs;
 *   - the first pipeline stage holds the most: ceil(L/p) layers and the input embedding, and
 *     1F1B keeps min(m, p) microbatches in flight there (interleaving adds (p-1)/(p v));
 *   - tensor, context and expert parallel collectives sit on the critical path (no overlap);
 *     pipeline sends cost a latency plus bytes over the link each microbatch boundary;
 *   - the data-parallel reduce-scatter hides behind the last microbatch's backward and the
 *     parameter all-gather behind the next step's first forward; ZeRO-3 gathers parameters
 *     for every microbatch, hidden behind that microbatch's compute where it fits;
 *   - activations and gradients travel in 16-bit, as the memory model stores them (4-byte
 *     floats under the configuration's fp32);
 *   - on a torus (c->torus) there is no node: each axis' collectives are timed over rank 0's
 *     group of chips by torus.h, as the replay times them (a ring at one link's bandwidth,
 *     each step waiting for its longest route; an all-to-all bound by what its chips inject
 *     or by the bisection of the sub-torus the group spans). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "comm.h"
#include "ledger.h"
#include "plan.h"
#include "plan_internal.h"
#include "plan_rules.h"
#include "torus.h"
#include "util.h"

void pl_plan_cluster_from_profile(struct pl_plan_cluster *c, const struct pl_profile *p,
                                  int nodes)
{
    memset(c, 0, sizeof *c);
    c->name = p->name;
    c->nodes = nodes;
    /* A torus has no node: its "nodes" are its chips, each one link from its neighbours. */
    c->torus = p->torus;
    c->per_node = p->torus ? 1 : p->devices_per_node;
    c->hbm = p->device_mem;
    c->flops = p->flops;
    c->efficiency = p->efficiency;
    for (int l = 0; l < PL_NLINKS; l++) {
        c->bw[l] = p->bw[l];
        c->latency[l] = p->latency[l];
    }
}

void pl_plan_torus_dims(const struct pl_plan_cluster *c, int dims[3])
{
    pl_torus_shape(pl_plan_gpus(c), dims);
}

const char *pl_plan_axis_name(enum pl_plan_axis a)
{
    static const char *const names[PL_NAXES] = {"tp", "cp", "ep", "pp", "dp"};
    return a >= 0 && a < PL_NAXES ? names[a] : "?";
}

void pl_plan_config_default(struct pl_plan_config *c)
{
    memset(c, 0, sizeof *c);
    for (int a = 0; a < PL_NAXES; a++) c->deg[a] = 1;
    c->micro = c->m = c->v = 1;
    snprintf(c->order, sizeof c->order, "%s", PL_PLAN_ORDER);
}

const char *pl_plan_config_describe(const struct pl_plan_config *c, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int a = 0; a < PL_NAXES && n < len; a++)
        if (c->deg[a] > 1 || a == PL_AX_DP)
            n += (size_t)snprintf(buf + n, len - n, "%s%s%d", n ? " " : "", pl_plan_axis_name(a),
                                  c->deg[a]);
    if (n < len)
        n += (size_t)snprintf(buf + n, len - n, " | zero%d mb%d x%d v%d | recompute %s | %s",
                              c->zero, c->micro, c->m, c->v, pl_recompute_name(c->recompute),
                              c->order);
    if (n < len && (c->fp32 || c->no_dropout || c->vocab_whole))
        snprintf(buf + n, len - n, " |%s%s%s", c->fp32 ? " fp32" : "",
                 c->no_dropout ? " no-dropout" : "", c->vocab_whole ? " vocab-whole" : "");
    return buf;
}

static int parse_key(struct pl_plan_config *c, const char *key, const char *val, char *err,
                     size_t errlen)
{
    if (!strcmp(key, "order")) {
        if (strlen(val) >= sizeof c->order)
            return pl_err(err, errlen, "order \"%s\" is too long", val);
        snprintf(c->order, sizeof c->order, "%s", val);
        return 0;
    }
    if (!strcmp(key, "recompute")) {
        if (pl_recompute_parse(val, &c->recompute) == 0) return 0;
        return pl_err(err, errlen, "recompute=%s: expected " PL_RECOMPUTE_NAMES, val);
    }
    char *end;
    long x = strtol(val, &end, 10);
    if (!*val || *end || x < 0 || x > (1 << 24))
        return pl_err(err, errlen, "%s=%s: expected a whole number", key, val);
    int *field = NULL;
    for (int a = 0; a < PL_NAXES; a++)
        if (!strcmp(key, pl_plan_axis_name(a))) field = &c->deg[a];
    if (!strcmp(key, "micro")) field = &c->micro;
    if (!strcmp(key, "m")) field = &c->m;
    if (!strcmp(key, "v")) field = &c->v;
    if (!strcmp(key, "zero")) field = &c->zero;
    int *on = !strcmp(key, "fp32")          ? &c->fp32
              : !strcmp(key, "no_dropout")  ? &c->no_dropout
              : !strcmp(key, "vocab_whole") ? &c->vocab_whole
                                            : NULL;
    if (on) {
        if (x > 1) return pl_err(err, errlen, "%s=%ld: expected 0 (off) or 1 (on)", key, x);
        *on = (int)x;
        return 0;
    }
    if (!field)
        return pl_err(err, errlen, "unknown key \"%s\" (known: tp, cp, ep, pp, dp, micro, m, v, "
                                   "zero, recompute, order, fp32, no_dropout, vocab_whole)", key);
    if (field == &c->zero ? x > 3 : x < 1)
        return pl_err(err, errlen, "%s=%ld is out of range (%s)", key, x,
                      field == &c->zero ? "zero is a stage 0..3" : "at least 1");
    *field = (int)x;
    return 0;
}

int pl_plan_config_parse(struct pl_plan_config *c, const char *text, char *err, size_t errlen)
{
    char buf[512];
    if (strlen(text) >= sizeof buf) return pl_err(err, errlen, "configuration text too long");
    snprintf(buf, sizeof buf, "%s", text);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return pl_err(err, errlen, "\"%s\" is not key=value (e.g. \"tp=8,pp=2,zero=1\")", tok);
        *eq = '\0';
        if (parse_key(c, tok, eq + 1, err, errlen) != 0) return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- shape */

static int world_of(const struct pl_plan_config *cfg)
{
    long w = 1;
    for (int a = 0; a < PL_NAXES; a++) w *= cfg->deg[a];
    return w > (1 << 24) ? (1 << 24) : (int)w;
}

int pl_plan_world(const struct pl_plan_config *cfg) { return world_of(cfg); }

static int build_grid(const struct pl_plan_config *cfg, struct pl_grid *g, char *err,
                      size_t errlen)
{
    char degrees[128];
    snprintf(degrees, sizeof degrees, "tp=%d,cp=%d,ep=%d,pp=%d,dp=%d", cfg->deg[PL_AX_TP],
             cfg->deg[PL_AX_CP], cfg->deg[PL_AX_EP], cfg->deg[PL_AX_PP], cfg->deg[PL_AX_DP]);
    return pl_grid_init(g, cfg->order, degrees, world_of(cfg), err, errlen);
}

int pl_plan_group(const struct pl_plan_config *cfg, unsigned mask, int *ranks)
{
    struct pl_grid g;
    if (build_grid(cfg, &g, NULL, 0) != 0) return -1;
    int in[PL_GRID_MAX_AXES], n = 1;
    for (int i = 0; i < g.naxes; i++) {
        in[i] = 0;
        for (int a = 0; a < PL_NAXES; a++)
            if ((mask & (1u << a)) && !strcmp(g.axis[i], pl_plan_axis_name(a))) in[i] = 1;
        if (in[i]) n *= g.size[i];
    }
    /* The k-th member: k's digits over the group's axes, leftmost fastest, the others 0. */
    for (int k = 0; k < n; k++) {
        int coords[PL_GRID_MAX_AXES], rest = k;
        for (int i = 0; i < g.naxes; i++) {
            coords[i] = in[i] ? rest % g.size[i] : 0;
            if (in[i]) rest /= g.size[i];
        }
        ranks[k] = pl_grid_rank(&g, coords);
    }
    return n;
}

static int layers_on_first_stage(const struct pl_plan_model *m, const struct pl_plan_config *cfg)
{
    return (m->layers + cfg->deg[PL_AX_PP] - 1) / cfg->deg[PL_AX_PP];
}

/* The MLP width a token passes through, for the activation count. */
static double mlp_width(const struct pl_plan_model *m)
{
    if (!m->experts) return m->d_ff;
    return (double)(m->top_k + m->shared_experts) * m->d_ff_expert;
}

/* ---------------------------------------------------------------- memory */

/* Bytes of one activation, gradient or parameter as they are held and sent: 16-bit, or
 * 4-byte floats under fp32. */
static double act_bytes(const struct pl_plan_config *cfg)
{
    return cfg->fp32 ? 4.0 : 2.0;
}

double pl_plan_activation_layer(const struct pl_plan_model *m, const struct pl_plan_config *cfg)
{
    double t = cfg->deg[PL_AX_TP], s = (double)m->seq / cfg->deg[PL_AX_CP], b = cfg->micro;
    double h = m->d_model, a = m->heads, r = mlp_width(m) / h;
    double sbh = s * b * h;
    /* e bytes an activation (2, or 4 under fp32); k dropout masks (1, or 0 without dropout):
     * with e = 2 and k = 1 the figures are Korthikanti's 10, 8 + 4r and 5. */
    double e = act_bytes(cfg), k = cfg->no_dropout ? 0.0 : 1.0;
    if (cfg->recompute == PL_RECOMPUTE_FULL) return e * sbh / t;
    /* Sequence parallelism (with any t > 1) splits the layernorm and dropout share too. */
    double unsplit = (4.0 * e + 2.0 * k) / (t > 1 ? t : 1.0);
    double scores = cfg->recompute == PL_RECOMPUTE_SELECTIVE
                        ? 0.0
                        : (e + k * (e + 1.0)) * a * s / (h * t);
    return sbh * (unsplit + (4.0 * e + 2.0 * e * r) / t + scores);
}

/* Parameters (not bytes) one GPU of the first stage holds before ZeRO: dense and expert. */
static void params_per_gpu(const struct pl_plan_model *m, const struct pl_plan_config *cfg,
                           double *dense, double *expert)
{
    struct pl_plan_params p;
    pl_plan_params(m, &p);
    double stage = layers_on_first_stage(m, cfg), t = cfg->deg[PL_AX_TP];
    double per_layer_dense = (p.dense - p.embedding) / m->layers;
    /* The first stage holds the input embedding; on one stage it holds the head as well;
     * split over tp, or whole on every TP rank under vocab_whole. */
    double emb = cfg->deg[PL_AX_PP] == 1 ? p.embedding : (double)m->vocab * m->d_model;
    *dense = stage * per_layer_dense / t + (cfg->vocab_whole ? emb : emb / t);
    *expert = stage * (p.expert / m->layers) / (t * cfg->deg[PL_AX_EP]);
}

/* The data-parallel groups: dense parameters are replicated over cp x ep x dp ranks, expert
 * parameters over cp x dp. */
static double dense_replicas(const struct pl_plan_config *cfg)
{
    return (double)cfg->deg[PL_AX_CP] * cfg->deg[PL_AX_EP] * cfg->deg[PL_AX_DP];
}
static double expert_replicas(const struct pl_plan_config *cfg)
{
    return (double)cfg->deg[PL_AX_CP] * cfg->deg[PL_AX_DP];
}

/* Mixed-precision Adam: 2 bytes of parameters, 2 of gradients, 12 of optimizer state (fp32
 * master copy, m, v) per parameter; under fp32 4, 4 and 8 (m and v, no master copy); ZeRO
 * stage z shards the first z of (optimizer state, gradients, parameters) over the n
 * data-parallel replicas. */
static void model_state(double psi, double n, const struct pl_plan_config *cfg,
                        double *params, double *grads, double *optim)
{
    int zero = cfg->zero;
    double e = act_bytes(cfg), o = cfg->fp32 ? 8.0 : 12.0;
    *optim += (zero >= 1 ? o / n : o) * psi;
    *grads += (zero >= 2 ? e / n : e) * psi;
    *params += (zero >= 3 ? e / n : e) * psi;
}

double pl_plan_memory(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                      const struct pl_plan_config *cfg, struct pl_plan_memory *out)
{
    struct pl_plan_memory r = {0};
    double dense, expert;
    params_per_gpu(m, cfg, &dense, &expert);
    model_state(dense, dense_replicas(cfg), cfg, &r.params, &r.grads, &r.optim);
    model_state(expert, expert_replicas(cfg), cfg, &r.params, &r.grads, &r.optim);

    int p = cfg->deg[PL_AX_PP];
    r.layers_stage = layers_on_first_stage(m, cfg);
    r.activ_layer = pl_plan_activation_layer(m, cfg);
    r.in_flight = p == 1 ? 1.0 : (cfg->m < p ? cfg->m : p);
    if (p > 1 && cfg->v > 1) r.in_flight *= 1.0 + (double)(p - 1) / ((double)p * cfg->v);
    r.activ = r.in_flight * r.layers_stage * r.activ_layer;
    if (cfg->recompute == PL_RECOMPUTE_FULL) {
        /* Recomputing one layer's forward rebuilds its activations in full, once at a time. */
        struct pl_plan_config kept = *cfg;
        kept.recompute = PL_RECOMPUTE_SELECTIVE;
        r.activ += pl_plan_activation_layer(m, &kept);
    }
    /* The fp32 logits of one microbatch for the loss, split over the vocabulary by tp; counted
     * on the first stage too, an upper bound that keeps one formula for every stage. */
    r.activ += 4.0 * cfg->micro * ((double)m->seq / cfg->deg[PL_AX_CP]) * m->vocab /
               cfg->deg[PL_AX_TP];
    r.total = r.params + r.grads + r.optim + r.activ;
    (void)c;
    if (out) *out = r;
    return r.total;
}

/* ---------------------------------------------------------------- time */

/* Where the collectives of one group run: on a switched cluster its link class; on a torus
 * rank 0's group of chips (pl_plan_group), which torus.h times over its routes. */
struct where {
    enum pl_link link;
    int n;
    const int *ranks;
};

/* The groups of one configuration: each axis', and the two data-parallel groups (dense
 * parameters over cp x ep x dp, experts over cp x dp). */
enum { W_DENSE = PL_NAXES, W_EXPERT, NWHERE };
struct net {
    const struct pl_plan_cluster *c;
    int dims[3];
    struct where at[NWHERE];
    int *buf; /* the torus groups' ranks */
};

static void net_init(struct net *w, const struct pl_plan_cluster *c,
                     const struct pl_plan_config *cfg, const enum pl_link *link)
{
    memset(w, 0, sizeof *w);
    w->c = c;
    enum pl_link dp = link[PL_AX_DP];
    if (link[PL_AX_EP] == PL_LINK_INTER || link[PL_AX_CP] == PL_LINK_INTER) dp = PL_LINK_INTER;
    for (int a = 0; a < NWHERE; a++) w->at[a].link = a < PL_NAXES ? link[a] : dp;
    if (!c->torus) return;
    const unsigned cp = 1u << PL_AX_CP, ep = 1u << PL_AX_EP, dpm = 1u << PL_AX_DP;
    unsigned masks[NWHERE];
    for (int a = 0; a < PL_NAXES; a++) masks[a] = 1u << a;
    masks[W_DENSE] = cp | ep | dpm;
    masks[W_EXPERT] = cp | dpm;
    /* The job's ranks form the torus of their count, as in the replay: the cluster's own
     * when cfg fills it, and never a torus that some rank falls outside of when it does
     * not (pl_plan_check reports that). */
    int world = world_of(cfg);
    pl_torus_shape(world, w->dims);
    w->buf = malloc((size_t)NWHERE * world * sizeof *w->buf);
    PL_ASSERT(w->buf);
    for (int a = 0; a < NWHERE; a++) {
        int *r = w->buf + (size_t)a * world;
        w->at[a].n = pl_plan_group(cfg, masks[a], r);
        w->at[a].ranks = r;
        if (w->at[a].n >= 0) continue;
        /* An order that makes no grid (pl_plan_check says why) places nothing: time each
         * group as consecutive ranks rather than read a layout that is not there. */
        int n = 1;
        for (int k = 0; k < PL_NAXES; k++)
            if (masks[a] & (1u << k)) n *= cfg->deg[k];
        for (int k = 0; k < n; k++) r[k] = k;
        w->at[a].n = n;
    }
}

static void net_free(struct net *w) { free(w->buf); }

/* One collective of S bytes over the n ranks of a group at w (n = 2 for a pipeline send). */
static double coll(const struct net *w, int at, enum pl_coll_kind kind, int n, double S)
{
    const struct pl_plan_cluster *c = w->c;
    const struct where *g = &w->at[at];
    if (!c->torus) return pl_coll_time(kind, n, S, c->latency[g->link], c->bw[g->link]);
    PL_ASSERT(n <= g->n);
    return pl_torus_coll_time(w->dims, kind, g->ranks, n, S, c->latency[PL_LINK_INTRA],
                              c->bw[PL_LINK_INTRA]);
}

/* Per microbatch on one stage: compute, and the tensor, context, expert and pipeline
 * communication on the critical path; bytes sent go into t->bytes (per microbatch). The
 * compute is the slowest stage's; all_compute every stage's together. */
struct per_micro {
    double compute, model_flops, hw_flops, comm[PL_NAXES], bytes[PL_NAXES];
    double all_compute;
};

/* Model and hardware FLOPs of one microbatch over `layers` layers, with the output head or
 * not, split over tp x cp: a layer's share of the model's count, the head's 6 V d a token. */
static void stage_flops(const struct pl_plan_model *m, const struct pl_plan_config *cfg,
                        double layers, int head, double *model, double *hw)
{
    double tokens = (double)cfg->micro * m->seq;
    double split = (double)cfg->deg[PL_AX_TP] * cfg->deg[PL_AX_CP];
    double head_tok = 6.0 * m->vocab * (double)m->d_model;
    double layer_tok = (pl_plan_flops_per_token(m) - head_tok) / m->layers;
    *model = (layers * layer_tok + (head ? head_tok : 0.0)) * tokens / split;
    *hw = *model;
    if (cfg->recompute == PL_RECOMPUTE_FULL) /* the layers' forward once more, not the head's */
        *hw += layers * layer_tok * tokens / split / 3.0;
    if (cfg->recompute == PL_RECOMPUTE_SELECTIVE) /* the attention scores' forward again */
        *hw += 4.0 * layers * m->d_model * (double)m->seq * tokens / split;
}

/* The first stage holds ceil(L / p) layers and the last floor(L / p) and the output head
 * (the stages between hold no more than the first); the slower of the two sets the pace. */
int pl_plan_pacing_stage(const struct pl_plan_model *m, const struct pl_plan_config *cfg,
                         int *with_head)
{
    const int p = cfg->deg[PL_AX_PP];
    *with_head = 1;
    if (p == 1) return m->layers;
    double model, first, last;
    stage_flops(m, cfg, layers_on_first_stage(m, cfg), 0, &model, &first);
    stage_flops(m, cfg, m->layers / p, 1, &model, &last);
    *with_head = last > first;
    return *with_head ? m->layers / p : layers_on_first_stage(m, cfg);
}

static void micro_compute(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                          const struct pl_plan_config *cfg, struct per_micro *u)
{
    const double rate = c->flops * c->efficiency;
    int head, layers = pl_plan_pacing_stage(m, cfg, &head);
    double all_model, all_hw;
    stage_flops(m, cfg, m->layers, 1, &all_model, &all_hw);
    stage_flops(m, cfg, layers, head, &u->model_flops, &u->hw_flops);
    u->compute = u->hw_flops / rate;
    u->all_compute = all_hw / rate;
}

static void micro_comm(const struct pl_plan_model *m, const struct net *w,
                       const struct pl_plan_config *cfg, struct per_micro *u)
{
    int t = cfg->deg[PL_AX_TP], cp = cfg->deg[PL_AX_CP], e = cfg->deg[PL_AX_EP];
    int p = cfg->deg[PL_AX_PP];
    double stage = layers_on_first_stage(m, cfg), full = cfg->recompute == PL_RECOMPUTE_FULL;
    double s = (double)m->seq / cp, b = cfg->micro, h = m->d_model;
    /* TP with SP: per layer 2 all-gather + reduce-scatter pairs forward and 2 backward, the
     * time and volume of 4 all-reduces of the layer's 16-bit activations (2 more when the
     * forward is recomputed); 4-byte ones under fp32, as everything below. */
    double eb = act_bytes(cfg), act = eb * s * b * h, n_ar = 4 + 2 * full;
    u->comm[PL_AX_TP] = stage * n_ar * coll(w, PL_AX_TP, PL_ALL_REDUCE, t, act);
    u->bytes[PL_AX_TP] = stage * n_ar * pl_ring_bytes_sent(PL_ALL_REDUCE, t, act);
    /* CP (ring attention): K and V gathered forward, gathered again and their gradients
     * reduce-scattered backward. */
    double kv = 2.0 * eb * s * b * h * m->kv_heads / m->heads / t * cp, n_cp = 3 + full;
    u->comm[PL_AX_CP] = stage * n_cp * coll(w, PL_AX_CP, PL_ALL_GATHER, cp, kv);
    u->bytes[PL_AX_CP] = stage * n_cp * pl_ring_bytes_sent(PL_ALL_GATHER, cp, kv);
    /* EP: dispatch and combine all-to-alls forward and backward per MoE layer, of each token's
     * top_k copies (tokens split over tp by SP). */
    double moe = m->experts ? stage * (m->layers - m->dense_layers) / m->layers : 0.0;
    double a2a = eb * s * b * h * m->top_k / t, n_a2a = 4 + 2 * full;
    u->comm[PL_AX_EP] = moe * n_a2a * coll(w, PL_AX_EP, PL_ALL_TO_ALL, e, a2a);
    u->bytes[PL_AX_EP] = moe * n_a2a * pl_ring_bytes_sent(PL_ALL_TO_ALL, e, a2a);
    /* PP: one activation forward and one gradient backward per chunk boundary, scattered
     * over tp (Megatron's scatter/gather), v chunks per GPU; on a torus, the route from the
     * first stage's rank 0 to the next stage's. */
    double boundary = 2.0 * cfg->v, msg = eb * s * b * h / t;
    u->comm[PL_AX_PP] = p > 1 ? boundary * coll(w, PL_AX_PP, PL_P2P, 2, msg) : 0.0;
    u->bytes[PL_AX_PP] = p > 1 ? boundary * msg : 0.0;
}

/* Data-parallel communication per step: time exposed beyond the compute it hides behind,
 * and bytes sent. */
static double dp_exposed(const struct pl_plan_model *m, const struct net *w,
                         const struct pl_plan_config *cfg, const struct per_micro *u,
                         double *bytes)
{
    double dense, expert;
    params_per_gpu(m, cfg, &dense, &expert);
    double fwd = u->compute / 3.0, bwd = 2.0 * u->compute / 3.0, exposed = 0.0;
    *bytes = 0.0;
    double psi[2] = {dense, expert};
    double n[2] = {dense_replicas(cfg), expert_replicas(cfg)};
    for (int k = 0; k < 2; k++) {
        int nk = (int)n[k];
        double S = act_bytes(cfg) * psi[k]; /* 16-bit (fp32: 4-byte) gradients, parameters */
        if (nk <= 1 || S == 0.0) continue;
        int at = k == 0 ? W_DENSE : W_EXPERT;
        double rs = coll(w, at, PL_REDUCE_SCATTER, nk, S);
        double ag = coll(w, at, PL_ALL_GATHER, nk, S);
        double sent = pl_ring_bytes_sent(PL_REDUCE_SCATTER, nk, S);
        if (cfg->zero == 3) {
            /* Per microbatch: gather for forward, gather again and reduce-scatter backward. */
            exposed += cfg->m * (fmax(0.0, ag - fwd) + fmax(0.0, ag + rs - bwd));
            *bytes += cfg->m * 3.0 * sent;
        } else if (cfg->zero == 0) {
            exposed += fmax(0.0, coll(w, at, PL_ALL_REDUCE, nk, S) - bwd);
            *bytes += 2.0 * sent;
        } else {
            exposed += fmax(0.0, rs - bwd) + fmax(0.0, ag - fwd);
            *bytes += 2.0 * sent;
        }
    }
    return exposed;
}

void pl_plan_links(const struct pl_plan_cluster *c, const struct pl_plan_config *cfg,
                   enum pl_link *link)
{
    struct pl_grid g;
    int ok = build_grid(cfg, &g, NULL, 0) == 0;
    for (int a = 0; a < PL_NAXES; a++)
        link[a] = c->torus || (ok && pl_rule_inside_node(&g, pl_plan_axis_name(a), c->per_node,
                                                         NULL, 0) == 0)
                      ? PL_LINK_INTRA
                      : PL_LINK_INTER;
}

double pl_plan_time(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                    const struct pl_plan_config *cfg, struct pl_plan_time *out)
{
    enum pl_link link[PL_NAXES];
    pl_plan_links(c, cfg, link);
    return pl_plan_time_links(m, c, cfg, link, out);
}

double pl_plan_time_links(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                          const struct pl_plan_config *cfg, const enum pl_link *link,
                          struct pl_plan_time *out)
{
    struct pl_plan_time r = {0};
    for (int a = 0; a < PL_NAXES; a++) r.link[a] = link[a];
    struct per_micro u = {0};
    struct net w;
    net_init(&w, c, cfg, r.link);
    micro_compute(m, c, cfg, &u);
    micro_comm(m, &w, cfg, &u);
    double per_micro = u.compute;
    for (int a = 0; a < PL_NAXES; a++) per_micro += u.comm[a];

    int p = cfg->deg[PL_AX_PP];
    double mb = cfg->m;
    r.compute = mb * u.compute;
    for (int a = 0; a < PL_NAXES; a++) {
        r.exposed[a] = mb * u.comm[a];
        r.bytes[a] = mb * u.bytes[a];
    }
    /* Fill and drain: the slowest stage's slot paces the m microbatches; the others' slots,
     * each a chunk at a time under interleaving, fill and drain the pipeline around it. A
     * slot is a stage's compute and the communication above (every stage's taken as the
     * first's): (p-1)/v slots when the stages are equal. */
    double comm = per_micro - u.compute;
    r.bubble = p > 1 ? (u.all_compute + p * comm - per_micro) / cfg->v : 0.0;
    r.exposed[PL_AX_DP] = dp_exposed(m, &w, cfg, &u, &r.bytes[PL_AX_DP]);
    net_free(&w);
    r.step = mb * per_micro + r.bubble + r.exposed[PL_AX_DP];

    double gpus = world_of(cfg), peak = gpus * c->flops * r.step;
    double model = pl_plan_flops_per_token(m) * m->batch_tokens;
    r.mfu = model / peak;
    r.hfu = r.mfu * u.hw_flops / u.model_flops;
    r.tflops = model / gpus / r.step / 1e12;
    if (out) *out = r;
    return r.step;
}

/* ---------------------------------------------------------------- rules */

static int check_shape(const struct pl_plan_model *m, const struct pl_plan_config *cfg,
                       char *err, size_t errlen)
{
    int t = cfg->deg[PL_AX_TP], e = cfg->deg[PL_AX_EP], p = cfg->deg[PL_AX_PP];
    int cp = cfg->deg[PL_AX_CP];
    if (m->heads % t || m->d_model % t || m->d_ff % t || (m->kv_heads % t && t % m->kv_heads))
        return pl_err(err, errlen, "tp=%d must divide heads=%d, d_model=%d and d_ff=%d (and "
                                   "divide or be a multiple of kv_heads=%d)",
                      t, m->heads, m->d_model, m->d_ff, m->kv_heads);
    if (e > 1 && (!m->experts || m->experts % e))
        return pl_err(err, errlen, "ep=%d must divide the %d experts (a dense model has ep=1)", e,
                      m->experts);
    if (m->seq % cp) return pl_err(err, errlen, "cp=%d does not divide seq=%d", cp, m->seq);
    if (p > m->layers || (long)p * cfg->v > m->layers)
        return pl_err(err, errlen, "pp=%d x v=%d chunks exceed the %d layers", p, cfg->v,
                      m->layers);
    if (p == 1 && cfg->v != 1)
        return pl_err(err, errlen, "v=%d without a pipeline: interleaving needs pp > 1", cfg->v);
    return 0;
}

int pl_plan_check_placement(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                            const struct pl_plan_config *cfg, char *err, size_t errlen)
{
    if (world_of(cfg) != pl_plan_gpus(c)) {
        if (c->torus)
            return pl_err(err, errlen, "tp x cp x ep x pp x dp = %d, but the torus has %d chips",
                          world_of(cfg), pl_plan_gpus(c));
        return pl_err(err, errlen, "tp x cp x ep x pp x dp = %d, but the cluster has %d GPUs "
                                   "(%d nodes x %d)", world_of(cfg), pl_plan_gpus(c), c->nodes,
                      c->per_node);
    }
    if (check_shape(m, cfg, err, errlen) != 0) return -1;
    struct pl_grid g;
    if (build_grid(cfg, &g, err, errlen) != 0) return -1;
    if (c->torus) {
        /* No node: tp's rings run on neighbours; ep's all-to-all has no rule but pays the
         * bisection of the sub-torus its group spans (pl_torus_coll_time). */
        int dims[3];
        pl_plan_torus_dims(c, dims);
        if (pl_rule_torus_ring(&g, "tp", dims, err, errlen) != 0) return -1;
    } else {
        if (pl_rule_inside_node(&g, "tp", c->per_node, err, errlen) != 0) return -1;
        if (pl_rule_inside_node(&g, "ep", c->per_node, err, errlen) != 0) return -1;
    }
    return pl_rule_order(&g, err, errlen);
}

int pl_plan_check_step(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                       const struct pl_plan_config *cfg, int memory, char *err, size_t errlen)
{
    if (pl_rule_batch((int)dense_replicas(cfg) / cfg->deg[PL_AX_CP], cfg->micro, cfg->m,
                      m->batch_tokens / m->seq, err, errlen) != 0)
        return -1;
    if (pl_rule_microbatches(cfg->deg[PL_AX_PP], cfg->m, cfg->v, err, errlen) != 0) return -1;
    if (!memory) return 0;
    return pl_rule_memory(pl_plan_memory(m, c, cfg, NULL), c->hbm, err, errlen);
}

int pl_plan_check(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                  const struct pl_plan_config *cfg, char *err, size_t errlen)
{
    if (pl_plan_check_placement(m, c, cfg, err, errlen) != 0) return -1;
    return pl_plan_check_step(m, c, cfg, 1, err, errlen);
}
