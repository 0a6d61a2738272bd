/* cases.c: Lab 8's cases. The oracle is the kit's planner (lib/plan.h), reached as
 * __real_pl_plan_* because lab.mk wraps its entry points: a wrapper called while the code
 * under test runs (the gate of the state, reached through gr_wrap_ctx) means the student
 * called the oracle, and that test fails. The case tables, a case built from a row or drawn
 * by the seed, and one case observed: the student's function, then the oracle's figures,
 * recorded into the observation that judge.c words. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab08.h"
#include "wrap_ctx.h"

/* ---------------------------------------------------------------- the oracle's gate */

/* The code of a wrapped entry point (enum l8_oracle). */
static int oracle_code(const char *name)
{
    int k = L8_NOR - 1;
    while (k > L8_OR_NONE && strcmp(name, L8_ORACLE_NAMES[k])) k--;
    return k;
}

#define WRAP(ret, name, params, args)                                                      \
    ret __real_##name params;                                                              \
    ret __wrap_##name params                                                               \
    {                                                                                      \
        struct l8_gate *g = gr_wrap_ctx();                                                 \
        if (g && g->under_test && !g->called) g->called = oracle_code(#name);              \
        return __real_##name args;                                                         \
    }

WRAP(double, pl_plan_memory, (const struct pl_plan_model *m, const struct pl_plan_cluster *c,
     const struct pl_plan_config *cfg, struct pl_plan_memory *out), (m, c, cfg, out))
WRAP(double, pl_plan_time, (const struct pl_plan_model *m, const struct pl_plan_cluster *c,
     const struct pl_plan_config *cfg, struct pl_plan_time *out), (m, c, cfg, out))
WRAP(double, pl_plan_activation_layer, (const struct pl_plan_model *m,
     const struct pl_plan_config *cfg), (m, cfg))
WRAP(int, pl_plan_check, (const struct pl_plan_model *m, const struct pl_plan_cluster *c,
     const struct pl_plan_config *cfg, char *err, size_t errlen), (m, c, cfg, err, errlen))
WRAP(int, pl_plan_search, (const struct pl_plan_model *m, const struct pl_plan_cluster *c,
     const struct pl_plan_fixed *fixed, struct pl_plan_result *res), (m, c, fixed, res))
WRAP(int, pl_plan_min_nodes, (const struct pl_plan_model *m, const struct pl_plan_cluster *c,
     int max_nodes), (m, c, max_nodes))
WRAP(double, pl_plan_time_links, (const struct pl_plan_model *m, const struct pl_plan_cluster *c,
     const struct pl_plan_config *cfg, const enum pl_link *link, struct pl_plan_time *out),
     (m, c, cfg, link, out))
WRAP(void, pl_plan_links, (const struct pl_plan_cluster *c, const struct pl_plan_config *cfg,
     enum pl_link *link), (c, cfg, link))
WRAP(int, pl_plan_check_step, (const struct pl_plan_model *m, const struct pl_plan_cluster *c,
     const struct pl_plan_config *cfg, int memory, char *err, size_t errlen),
     (m, c, cfg, memory, err, errlen))
WRAP(int, pl_plan_check_placement, (const struct pl_plan_model *m,
     const struct pl_plan_cluster *c, const struct pl_plan_config *cfg, char *err,
     size_t errlen), (m, c, cfg, err, errlen))
WRAP(int, pl_plan_pacing_stage, (const struct pl_plan_model *m,
     const struct pl_plan_config *cfg, int *with_head), (m, cfg, with_head))

void l8_gate_open(struct l8_gate *g)
{
    g->called = L8_OR_NONE;
    g->under_test = 1;
}

void l8_gate_close(struct l8_gate *g)
{
    g->under_test = 0;
}


/* ---------------------------------------------------------------- cases */

/* Each row exercises a different part of the formulas: data parallel only, tp with pp and
 * interleaving, ZeRO-3, full recomputation, experts, many stages, context parallel. The
 * DeepSeek-V3 row with ep = 8 and ZeRO-3 has dp = 1 on 32 nodes: its dense gradients are
 * reduced inside the ep group, one node, and ZeRO-3's gathers per microbatch hide behind
 * compute at NVLink's speed but not on the network, so a size-1 dp axis taken as spread
 * across nodes shows in the step. */
const struct l8_spec L8_ESTIMATES[] = {
    {"llama3-8b", "dgx-h100", 1, 0, 0, "dp=8,zero=0,micro=1,m=64,recompute=selective", 0, NULL},
    {"llama3-70b", "dgx-h100", 8, 0, 0, "tp=8,pp=4,dp=2,zero=1,micro=1,m=256,v=2,recompute=none",
     0, NULL},
    {"llama3-70b", "dgx-h100", 8, 0, 0,
     "tp=4,pp=2,dp=8,zero=3,micro=1,m=64,v=8,recompute=selective", 0, NULL},
    {"gpt3-175b", "dgx-a100", 16, 0, 0, "tp=8,pp=16,dp=1,zero=2,micro=2,m=768,recompute=full",
     0, NULL},
    {"mixtral-8x7b", "dgx-a100", 4, 0, 0, "ep=8,dp=4,zero=1,micro=1,m=32,recompute=selective",
     0, NULL},
    {"deepseek-v3", "dgx-h100", 32, 0, 0,
     "tp=2,ep=4,pp=16,dp=2,zero=1,micro=1,m=480,recompute=full", 0, NULL},
    {"llama3-405b", "dgx-h100", 2048, 0, 0,
     "tp=8,pp=16,dp=128,zero=1,micro=1,m=16,v=7,recompute=selective", 0, NULL},
    {"llama3-8b", "dgx-h100", 2, 32768, 4194304,
     "tp=4,cp=2,dp=2,zero=2,micro=1,m=64,recompute=none", 0, NULL},
    {"llama3-70b", "dgx-a100", 4, 0, 0, "tp=8,pp=2,dp=2,zero=3,micro=2,m=64,v=1,recompute=full",
     0, NULL},
    /* ZeRO-3 on a MoE with ep and dp both above 1: the dense parameters gathered over
     * ep x dp, the experts' over dp, each once per microbatch (a review gathered the experts'
     * once per step; with dp = 1 there is nothing to gather and it passed) */
    {"deepseek-v3", "dgx-h100", 32, 0, 0, "ep=8,pp=16,dp=2,zero=3,micro=1,m=240,recompute=full",
     0, NULL},
    /* MoE without full recomputation, where every layer's activations count the widths a
     * token passes through: the shared expert's share shows (full recomputation keeps only
     * each layer's input and hides it). */
    {"deepseek-v3", "dgx-h100", 32, 0, 0,
     "tp=2,ep=4,pp=16,dp=2,zero=1,micro=1,m=480,recompute=selective", 0, NULL},
    {"deepseek-v3", "dgx-h100", 32, 0, 0, "ep=8,pp=16,dp=2,zero=2,micro=1,m=480,v=2,recompute=none",
     0, NULL},
    /* dp = 1 with a cp group of 16 spanning two nodes: the dense gradients are reduced over
     * cp, across the network, although the size-1 dp axis is inside a node; ZeRO-3's gathers
     * per microbatch of 2K tokens per GPU hide behind compute at NVLink's speed, not on the
     * network. */
    {"llama3-8b", "dgx-h100", 2, 32768, 4194304,
     "cp=16,dp=1,zero=3,micro=1,m=128,recompute=selective", 0, NULL},
    /* Fewer microbatches than stages (the search never makes one, the estimates must still
     * hold): the first stage holds min(m, p) = 2 in flight, not p = 4. */
    {"llama3-70b", "dgx-h100", 4, 0, 16384, "tp=8,pp=4,dp=1,zero=1,micro=1,m=2,recompute=selective",
     0, NULL},
    /* ZeRO-0 across nodes with 2K-token microbatches: the all-reduce outlasts the backward it
     * hides behind, and one all-reduce exposed beyond the backward is not a reduce-scatter
     * behind the backward plus an all-gather behind the forward (ZeRO-1's). */
    {"llama3-8b", "dgx-a100", 4, 2048, 1048576,
     "tp=4,dp=8,zero=0,micro=1,m=64,recompute=selective", 0, NULL},
    /* Nodes of 4 GPUs: the pp groups of tp = 4 span two nodes (on 8 per node they would not). */
    {"llama3-8b", "h100-4gpu", 4, 0, 0,
     "tp=4,pp=2,dp=2,zero=1,micro=1,m=256,v=2,recompute=selective", 0, NULL},
    /* A rank order other than the default that obeys every rule: ep before cp puts each ep
     * group of 4 inside a node (tp x ep = 8) and spreads cp's across two; the default order
     * would do the opposite. */
    {"mixtral-8x7b", "dgx-h100", 4, 0, 0,
     "tp=2,cp=2,ep=4,dp=2,zero=1,micro=1,m=128,recompute=selective,order=tp-ep-cp-pp-dp", 0, NULL},
    /* 64K-token sequences with full recomputation on 8-way tensor parallelism and 2 stages:
     * the fp32 logits are most of the activations, so logits not split by tp, left out, or
     * counted on the last stage only (none on the first) stand out of the activations'
     * tolerance (section 4.5), which the alternatives widen. */
    {"llama3-8b", "dgx-h100", 4, 65536, 8388608,
     "tp=8,pp=2,dp=2,zero=1,micro=1,m=64,recompute=full", 0, NULL},
};
const int L8_N_ESTIMATES = (int)(sizeof L8_ESTIMATES / sizeof L8_ESTIMATES[0]);

/* The switches of section 3.3: all three at once, as Lab 9 trains (fp32, no dropout, the
 * embedding and head whole on every TP rank, its first stage holding the embedding); fp32
 * with dropout, selective recomputation and ZeRO-1; 16-bit without dropout, full
 * recomputation, ZeRO-2 and one stage, whose TP ranks hold the embedding and the head whole. */
const struct l8_spec L8_SWITCHES[] = {
    {"llama3-8b", "dgx-h100", 1, 0, 0,
     "tp=4,pp=2,dp=1,zero=0,micro=1,m=512,recompute=none,fp32=1,no_dropout=1,vocab_whole=1", 0,
     NULL},
    {"gpt3-175b", "dgx-a100", 32, 0, 0,
     "tp=8,pp=16,dp=2,zero=1,micro=2,m=384,recompute=selective,fp32=1", 0, NULL},
    {"llama3-70b", "dgx-h100", 4, 0, 0,
     "tp=8,pp=1,dp=4,zero=2,micro=1,m=128,recompute=full,no_dropout=1,vocab_whole=1", 0, NULL},
};
const int L8_N_SWITCHES = (int)(sizeof L8_SWITCHES / sizeof L8_SWITCHES[0]);

/* The fourth and fifth are where a partial search falls more than TOL_QUALITY behind: with a small
 * batch on many GPUs the best interleaves (175B: v = 1 at best is 11% slower) or recomputes
 * nothing (8B: selective recomputation at best is 6% slower). */
const struct l8_spec L8_SEARCHES[] = {
    {"llama3-8b", "dgx-h100", 1, 0, 0, NULL, 0, NULL},
    {"llama3-70b", "dgx-h100", 8, 0, 0, NULL, 0, NULL},
    {"mixtral-8x7b", "dgx-a100", 4, 0, 0, NULL, 0, NULL},
    {"gpt3-175b", "dgx-h100", 64, 0, 1048576, NULL, 0, NULL},
    {"llama3-8b", "dgx-a100", 128, 0, 1048576, NULL, 0, NULL},
    /* Where a rule binds: 64K-token sequences on one node, where the best splits them with
     * context parallelism (cp = 1 at best is 9% slower); a MoE with a 1M-token batch on 512
     * GPUs, where an ep group spanning nodes (tp x ep > 8) and fewer microbatches than stages
     * would be fastest if allowed; and DeepSeek-V3 on 1024 GPUs, where 32 stages with too
     * few microbatches break only the bubble's bound. */
    {"llama3-8b", "dgx-h100", 1, 65536, 0, NULL, 0, NULL},
    {"mixtral-8x7b", "dgx-h100", 64, 0, 1048576, NULL, 0, NULL},
    {"deepseek-v3", "dgx-h100", 128, 0, 1048576, NULL, 0, NULL},
    /* 2K-token sequences and a 256K-token batch on 128 GPUs: the best takes 4 sequences per
     * microbatch (one sequence per microbatch at best is 16% slower: four times the tp
     * collectives' latencies and the per-microbatch overheads); and Mixtral with a 1M-token
     * batch on nodes of 4 GPUs, where ep = 8 spans two nodes (the best on 8 per node uses
     * it). */
    {"llama3-8b", "dgx-h100", 16, 2048, 262144, NULL, 0, NULL},
    {"mixtral-8x7b", "h100-4gpu", 8, 0, 1048576, NULL, 0, NULL},
};
const int L8_N_SEARCHES = (int)(sizeof L8_SEARCHES / sizeof L8_SEARCHES[0]);

const struct l8_spec L8_SEARCHES_HIDDEN[] = {
    {"gpt3-175b", "dgx-a100", 64, 0, 0, NULL, 0, NULL},
    {"llama3-70b", "dgx-h100", 4, 4096, 4194304, NULL, 0, NULL},
    {"mixtral-8x7b", "dgx-h100", 8, 0, 0, NULL, 0, NULL},
    {"llama3-8b", "dgx-a100", 2, 0, 0, NULL, 0, NULL},
    {"deepseek-v3", "dgx-h100", 32, 0, 0, NULL, 0, NULL},
    {"llama3-405b", "dgx-h100", 64, 0, 0, NULL, 0, NULL},
    {"llama3-70b", "h100-4gpu", 8, 0, 0, NULL, 0, NULL},
    {"llama3-8b", "dgx-a100", 8, 1024, 262144, NULL, 0, NULL},
};
const int L8_N_SEARCHES_HIDDEN =
    (int)(sizeof L8_SEARCHES_HIDDEN / sizeof L8_SEARCHES_HIDDEN[0]);

/* Where the memory and time tests draw L8_N_DRAWN more configurations by the seed, so that a
 * table of the answers above is not enough: one of the configurations the kit's
 * planner weighs for a model on a cluster (the best settings of one set of degrees that
 * fits), over this pool. The last row's long context brings context parallelism in. */
const struct l8_spec L8_DRAW_POOL[] = {
    {"llama3-8b", "dgx-a100", 2, 0, 0, NULL, 0, NULL},
    {"llama3-70b", "dgx-h100", 16, 0, 0, NULL, 0, NULL},
    {"mixtral-8x7b", "dgx-h100", 8, 0, 0, NULL, 0, NULL},
    {"gpt3-175b", "dgx-a100", 32, 0, 0, NULL, 0, NULL},
    {"deepseek-v3", "dgx-h100", 64, 0, 0, NULL, 0, NULL},
    {"llama3-8b", "dgx-h100", 4, 65536, 8388608, NULL, 0, NULL},
};
const int L8_N_DRAW_POOL = (int)(sizeof L8_DRAW_POOL / sizeof L8_DRAW_POOL[0]);

/* Published runs: the degrees and microbatch as published; the kit plans the rest
 * (interleaving, ZeRO stage) and times it even where its memory model disagrees. */
const struct l8_spec L8_SANITY[] = {
    {"llama3-405b", "dgx-h100", 2048, 0, 0, "tp=8,pp=16,dp=128,micro=1,recompute=selective",
     41, "Llama 3 (2024), 16K H100, 8K context"},
    {"llama3-405b", "dgx-h100", 1024, 0, 0, "tp=8,pp=16,dp=64,micro=1,recompute=selective",
     43, "Llama 3 (2024), 8K H100, 8K context"},
};
const int L8_N_SANITY = (int)(sizeof L8_SANITY / sizeof L8_SANITY[0]);
/* Question 1's model and cluster; questions 2 and 3 are about SANITY[0]'s plan. */
const struct l8_spec L8_QUESTIONS[] = {
    {"llama3-70b", "dgx-h100", 1, 4096, 4194304, NULL, 0, NULL},
};
const struct l8_spec L8_SANITY_HIDDEN[] = {
    {"llama3-405b", "dgx-h100", 2048, 131072, 16777216,
     "tp=8,cp=16,pp=16,dp=8,micro=1,recompute=selective", 38,
     "Llama 3 (2024), 16K H100, 131K context"},
};
/* Clusters whose nodes hold other than a profile's GPUs: every profile of topo.h has 8 per
 * node, so code that writes 8 where it means c->per_node agrees with the kit on all of them.
 * A node of four H100s with the DGX H100's links and rates is as real a cluster, and the
 * planner takes it as it is (struct pl_plan_cluster's per_node). */
static const struct {
    const char *name, *profile;
    int per_node;
} NODE_SHAPES[] = {
    {"h100-4gpu", "dgx-h100", 4},
};

/* The cluster of nodes nodes named name: a node shape above or a profile of topo.h. */
static void cluster_of(struct pl_plan_cluster *c, const char *name, int nodes)
{
    for (size_t k = 0; k < sizeof NODE_SHAPES / sizeof NODE_SHAPES[0]; k++)
        if (!strcmp(name, NODE_SHAPES[k].name)) {
            pl_plan_cluster_from_profile(c, pl_profile_find(NODE_SHAPES[k].profile), nodes);
            c->name = NODE_SHAPES[k].name;
            c->per_node = NODE_SHAPES[k].per_node;
            return;
        }
    const struct pl_profile *p = pl_profile_find(name);
    if (!p) pl_fatal("case cluster %s: not a node shape of the driver nor a profile", name);
    pl_plan_cluster_from_profile(c, p, nodes);
}

/* The case of row s; parse_config: read s->config as the configuration (memory, time; a
 * published run's is what is fixed, planned by l8_plan_published). */
void l8_build_case(struct l8_case *t, const struct l8_spec *s, int parse_config)
{
    memset(t, 0, sizeof *t);
    t->spec = s;
    t->model = *pl_plan_model_find(s->model);
    if (s->seq) t->model.seq = s->seq;
    if (s->batch_tokens > 0) t->model.batch_tokens = s->batch_tokens;
    cluster_of(&t->cluster, s->profile, s->nodes);
    pl_plan_config_default(&t->cfg);
    char err[256];
    if (s->config && parse_config && pl_plan_config_parse(&t->cfg, s->config, err, sizeof err) != 0)
        pl_fatal("case %s: %s", s->config, err);
}

/* The published configuration, completed by the kit's planner (interleaving, ZeRO). */
void l8_plan_published(struct l8_case *t)
{
    struct pl_plan_config f;
    char err[256];
    memset(&f, 0, sizeof f);
    if (pl_plan_config_parse(&f, t->spec->config, err, sizeof err) != 0) pl_fatal("%s", err);
    struct pl_plan_fixed fixed = pl_plan_fixed_none();
    memcpy(fixed.deg, f.deg, sizeof f.deg);
    fixed.micro = f.micro;
    fixed.recompute = (int)f.recompute;
    fixed.ignore_memory = 1;
    if (!__real_pl_plan_search(&t->model, &t->cluster, &fixed, &t->best))
        pl_fatal("the kit plans nothing for the published %s", t->spec->config);
    t->cfg = t->best.best[0].cfg;
}

/* Case t: a configuration of a model and cluster of L8_DRAW_POOL, both drawn by the seed. */
static void draw_case(struct l8_state *st, struct l8_case *t, int i)
{
    struct pl_plan_result *res = &st->scratch;
        uint64_t pool = (uint64_t)L8_N_DRAW_POOL;
    int pick = (int)((pl_mix64(st->seed ^ 0x8a1ace) + (uint64_t)i) % pool);
    l8_build_case(t, &L8_DRAW_POOL[pick], 1);
    __real_pl_plan_search(&t->model, &t->cluster, NULL, res);
    int fits = 0;
    for (int k = 0; k < res->npoints; k++) fits += res->points[k].fits;
    if (!fits) pl_fatal("the kit fits nothing for %s on %d nodes", L8_DRAW_POOL[pick].model,
                        L8_DRAW_POOL[pick].nodes);
    int want = (int)(pl_mix64(st->seed ^ (0xd7a3u + (uint64_t)i)) % (uint64_t)fits);
    for (int k = 0; k < res->npoints; k++)
        if (res->points[k].fits && want-- == 0) t->cfg = res->points[k].cfg;
}

/* A search case of the sweep's space (bench --sweep) drawn by the seed: any preset, either
 * cluster, 1 to 128 nodes, the preset's batch, a 1M-token batch or 64K-token sequences,
 * where the kit fits something and which is not one of the fixed visible cases. Draw i of
 * the seed (each keeps its own spec in the state: the case's spec outlives setup). */
static void draw_search(struct l8_state *st, struct l8_case *t, int i)
{
    static const char *const profiles[] = {"dgx-h100", "dgx-a100"};
    struct l8_spec *drawn = &st->drawn[i];
    uint64_t seed = pl_mix64(st->seed + 0x9e3779b97f4a7c15u * (uint64_t)i);
    for (uint64_t k = 0;; k++) {
        uint64_t r = pl_mix64(seed ^ (0x5eec0000u + k));
        int preset = (int)(r % (uint64_t)pl_plan_model_count());
        const struct pl_plan_model *m = pl_plan_model_at(preset);
        int shape = (int)((r >> 8) % 3);
        *drawn = (struct l8_spec){.model = m->name, .profile = profiles[(r >> 16) & 1],
                                  .nodes = 1 << ((r >> 20) % 8),
                                  .seq = shape == 2 ? 65536 : 0,
                                  .batch_tokens = shape == 1 ? 1048576 : 0};
        if (shape == 2 && m->batch_tokens < 65536) drawn->batch_tokens = 65536;
        int visible = 0;
        for (int j = 0; j < L8_N_SEARCHES; j++)
            visible |= !strcmp(L8_SEARCHES[j].model, drawn->model) &&
                       !strcmp(L8_SEARCHES[j].profile, drawn->profile) &&
                       L8_SEARCHES[j].nodes == drawn->nodes &&
                       L8_SEARCHES[j].seq == drawn->seq &&
                       L8_SEARCHES[j].batch_tokens == drawn->batch_tokens;
        if (visible) continue;
        l8_build_case(t, drawn, 1);
        if (__real_pl_plan_search(&t->model, &t->cluster, NULL, &st->scratch) > 0) return;
    }
}

struct l8_state *l8_state_new(enum l8_op op, uint64_t seed)
{
    struct l8_state *st = calloc(1, sizeof *st);
    if (!st) pl_fatal("out of memory");
    st->op = op;
    st->seed = seed;
    gr_wrap_ctx_set(&st->gate);
    return st;
}

void l8_state_free(struct l8_state *st)
{
    gr_wrap_ctx_set(NULL);
    free(st);
}

/* The cases of the state's op: its table's rows, then those drawn by the seed. */
void l8_setup_cases(struct l8_state *st)
{
    struct l8_case *cases = st->cases;
    enum l8_op op = st->op;
    int parse = op != L8_OP_SANITY && op != L8_OP_SANITY_HIDDEN;
    const struct l8_spec *table = L8_ESTIMATES;
    int n = L8_N_ESTIMATES;
    if (op == L8_OP_SEARCH) table = L8_SEARCHES, n = L8_N_SEARCHES;
    if (op == L8_OP_SANITY) table = L8_SANITY, n = L8_N_SANITY;
    if (op == L8_OP_SANITY_HIDDEN) table = L8_SANITY_HIDDEN, n = 1;
    if (op == L8_OP_QUESTIONS) table = L8_QUESTIONS, n = 1;
    if (op == L8_OP_SWITCHES) table = L8_SWITCHES, n = L8_N_SWITCHES;
    if (op == L8_OP_SEARCH_HIDDEN) {
        /* Two of the hidden searches, drawn by the seed. */
        int k = L8_N_SEARCHES_HIDDEN;
        int i = (int)(st->seed % (uint64_t)k), j = (int)((st->seed / k) % (uint64_t)(k - 1));
        if (j >= i) j++;
        l8_build_case(&cases[0], &L8_SEARCHES_HIDDEN[i], 1);
        l8_build_case(&cases[1], &L8_SEARCHES_HIDDEN[j], 1);
        draw_search(st, &cases[2], L8_N_SEARCH_DRAWN);
        st->ncases = 3;
        return;
    }
    for (st->ncases = 0; st->ncases < n; st->ncases++)
        l8_build_case(&cases[st->ncases], &table[st->ncases], parse);
    if (op == L8_OP_MEMORY || op == L8_OP_TIME)
        for (int i = 0; i < L8_N_DRAWN; i++, st->ncases++) {
            draw_case(st, &cases[st->ncases], i);
            cases[st->ncases].drawn = 1;
        }
    if (op == L8_OP_SEARCH)
        for (int i = 0; i < L8_N_SEARCH_DRAWN; i++, st->ncases++) {
            draw_search(st, &cases[st->ncases], i);
            cases[st->ncases].drawn = 1;
        }
    if (op == L8_OP_SANITY || op == L8_OP_SANITY_HIDDEN)
        for (int i = 0; i < st->ncases; i++) l8_plan_published(&cases[i]);
}

/* The case as the messages name it. */
void l8_where_of(const struct l8_case *t, struct l8_where *w)
{
    memset(w, 0, sizeof *w);
    snprintf(w->model, sizeof w->model, "%s", t->model.name);
    snprintf(w->cluster, sizeof w->cluster, "%s", t->cluster.name);
    w->seq = t->model.seq;
    w->nodes = t->cluster.nodes;
    w->per_node = t->cluster.per_node;
    w->batch_tokens = t->model.batch_tokens;
    w->cfg = t->cfg;
}

/* Section 4.3's named alternative: the exposed data-parallel time with the dense and the
 * expert reductions hidden together behind one backward (and their gathers behind one
 * forward), max(0, dense + expert - window), where the kit hides each on its own. It is
 * never less than the kit's, and equal to it unless both groups have something to reduce.
 * Computed here from the handout's formulas and the kit's figures for the case (compute
 * per microbatch, the dp link). */
static double dp_together(const struct l8_case *t, const struct pl_plan_time *kit)
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
    const enum pl_link *ln = kit->link;
    enum pl_link l = ln[PL_AX_EP] == PL_LINK_INTER || ln[PL_AX_CP] == PL_LINK_INTER
                         ? PL_LINK_INTER : ln[PL_AX_DP];
    double u = kit->compute / cfg->m, fwd = u / 3, bwd = 2 * u / 3, rs = 0, ag = 0, ar = 0;
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

int l8_check_choice(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                    const struct pl_plan_config *cfg, double *memory, char *err, size_t len)
{
    *memory = __real_pl_plan_memory(m, c, cfg, NULL);
    if (cfg->recompute == PL_RECOMPUTE_FULL) {
        struct pl_plan_config rebuilt = *cfg;
        rebuilt.recompute = PL_RECOMPUTE_SELECTIVE;
        *memory -= __real_pl_plan_activation_layer(m, &rebuilt);
    }
    if (__real_pl_plan_check_placement(m, c, cfg, err, len) != 0 ||
        __real_pl_plan_check_step(m, c, cfg, 0, err, len) != 0)
        return -1;
    return pl_rule_memory(*memory, c->hbm, err, len);
}

/* The search's choice: the oracle's verdict on its rules and the figures they read. */
static void observe_choice(const struct l8_case *t, const struct pl_plan_config *cfg,
                           struct l8_obs *o)
{
    const struct pl_plan_model *m = &t->model;
    struct l8_rules *r = &o->rules;
    char err[512];
    r->broken = l8_check_choice(m, &t->cluster, cfg, &r->memory, err, sizeof err) != 0;
    r->layers = m->layers;
    r->d_model = m->d_model;
    r->heads = m->heads;
    r->kv_heads = m->kv_heads;
    r->d_ff = m->d_ff;
    r->experts = m->experts;
    r->batch_seqs = m->batch_tokens / m->seq;
    r->hbm = t->cluster.hbm;
    struct pl_plan_time tm;
    o->step = __real_pl_plan_time(m, &t->cluster, cfg, &tm);
}

/* Question 1's answers by the kit (its fewest nodes and their best configuration), 2's by
 * the microbatch rule and the bubble's formula (the fewest m the rule admits for p 16, v 7
 * whose bubble is at most 5%, and that bubble), 3's by the compute formulas of section
 * 4.1: Llama 3 405B on 16 stages, the first holding ceil(L/16) layers and the last
 * floor(L/16) and the head, whose 6 V d FLOPs a token may grow until the last stage's work
 * passes the first's. */
static void kit_answers(struct l8_state *st, struct l8_case *t, struct placement_answers *a)
{
    struct pl_plan_cluster c = t->cluster;
    c.nodes = a->q1_nodes = __real_pl_plan_min_nodes(&t->model, &c, 4096);
    __real_pl_plan_search(&t->model, &c, NULL, &st->scratch);
    const struct pl_plan_config *b = &st->scratch.best[0].cfg;
    a->q1_tp = b->deg[PL_AX_TP];
    a->q1_pp = b->deg[PL_AX_PP];
    a->q1_dp = b->deg[PL_AX_DP];
    a->q1_zero = b->zero;
    int m = 16;
    while (pl_rule_microbatches(16, m, 7, NULL, 0) != 0 || pl_rule_bubble(16, m, 7) > 0.05) m++;
    a->q2_bubble_percent = 100 * pl_rule_bubble(16, m, 7);
    const struct pl_plan_model *big = pl_plan_model_find("llama3-405b");
    const double head = 6.0 * big->d_model; /* a token's head FLOPs per vocabulary entry */
    const double layer = (pl_plan_flops_per_token(big) - head * big->vocab) / big->layers;
    const int p = 16, first = (big->layers + p - 1) / p, last = big->layers / p;
    a->q3_vocab = floor((first - last) * layer / head);
}

/* Case i: the student's function behind the gate, then the oracle's figures, into o. */
void l8_observe(struct l8_state *st, int i, struct l8_obs *o)
{
    struct l8_case *t = &st->cases[i];
    enum l8_op op = st->op;
    o->op = (int)op;
    o->drawn = t->drawn;
    l8_where_of(t, &o->where);
    l8_gate_open(&st->gate);
    if (op == L8_OP_QUESTIONS) o->ans[0] = placement_answers; /* the answers are data */
    else if (op == L8_OP_MEMORY || op == L8_OP_SWITCHES)
        placement_memory(&t->model, &t->cluster, &t->cfg, &o->mem);
    else if (op == L8_OP_SEARCH || op == L8_OP_SEARCH_HIDDEN)
        o->found = placement_search(&t->model, &t->cluster, &o->chosen) == 0;
    else placement_step_time(&t->model, &t->cluster, &t->cfg, &o->time);
    l8_gate_close(&st->gate);
    o->oracle = st->gate.called;
    if (op == L8_OP_MEMORY || op == L8_OP_SWITCHES) __real_pl_plan_memory(&t->model, &t->cluster, &t->cfg, &o->mem_ref);
    if (op == L8_OP_TIME) {
        __real_pl_plan_time(&t->model, &t->cluster, &t->cfg, &o->time_ref);
        o->dp_alt = dp_together(t, &o->time_ref);
    }
    if (op == L8_OP_SEARCH || op == L8_OP_SEARCH_HIDDEN) {
        __real_pl_plan_search(&t->model, &t->cluster, NULL, &t->best);
        o->best = t->best.best[0].cfg;
        o->best_step = t->best.best[0].time.step;
        if (o->found) observe_choice(t, &o->chosen, o);
    }
    if (op == L8_OP_SANITY || op == L8_OP_SANITY_HIDDEN) {
        o->published_mfu = t->spec->published_mfu;
        snprintf(o->source, sizeof o->source, "%s", t->spec->source);
    }
    if (op == L8_OP_QUESTIONS) kit_answers(st, t, &o->ans[1]);
}
