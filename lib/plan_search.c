/* plan_search.c: the exhaustive search of plan.h. For every set of degrees that obeys the
 * placement rules, every microbatch size, interleaving depth, ZeRO stage and recomputation
 * is tried; the configurations that also reach the batch and fit in memory are ranked by
 * modelled step time. The space is small (thousands to tens of thousands of points), so
 * nothing is pruned by heuristics: what the search returns is the model's optimum. */
#include <string.h>

#include "plan.h"
#include "util.h"
#include "plan_internal.h"

struct walk {
    const struct pl_plan_model *m;
    const struct pl_plan_cluster *c;
    const struct pl_plan_fixed *fixed;
    struct pl_plan_result *res;
    int fit_only;   /* stop at the first configuration that fits (pl_plan_min_nodes) */
    int stop;
};

struct pl_plan_fixed pl_plan_fixed_none(void)
{
    return (struct pl_plan_fixed){.zero = -1, .recompute = -1};
}

/* key= given in a "k=v,k=v" text: at the start or after a comma. */
static int has_key(const char *text, const char *key)
{
    size_t n = strlen(key);
    for (const char *at = text; (at = strstr(at, key)) != NULL; at += n)
        if ((at == text || at[-1] == ',') && at[n] == '=') return 1;
    return 0;
}

int pl_plan_fixed_parse(const char *text, int ignore_memory, struct pl_plan_fixed *fixed,
                        char *err, size_t errlen)
{
    struct pl_plan_config f;
    memset(&f, 0, sizeof f);
    if (pl_plan_config_parse(&f, text, err, errlen) != 0) return -1;
    *fixed = pl_plan_fixed_none();
    memcpy(fixed->deg, f.deg, sizeof f.deg);
    fixed->micro = f.micro;
    if (has_key(text, "v")) fixed->v = f.v;
    if (has_key(text, "zero")) fixed->zero = f.zero;
    if (has_key(text, "recompute")) fixed->recompute = (int)f.recompute;
    fixed->ignore_memory = ignore_memory;
    return 0;
}

static int allowed(const struct walk *w, enum pl_plan_axis a, int d)
{
    return !w->fixed->deg[a] || w->fixed->deg[a] == d;
}

/* Keeps res->best sorted by step time, one entry per set of degrees. */
static void keep_best(struct pl_plan_result *res, const struct pl_plan_choice *ch)
{
    int at = res->nbest;
    while (at > 0 && res->best[at - 1].time.step > ch->time.step) at--;
    if (at >= PL_PLAN_KEEP) return;
    int n = res->nbest < PL_PLAN_KEEP ? res->nbest : PL_PLAN_KEEP - 1;
    memmove(&res->best[at + 1], &res->best[at], (size_t)(n - at) * sizeof res->best[0]);
    res->best[at] = *ch;
    if (res->nbest < PL_PLAN_KEEP) res->nbest++;
}

static void add_point(struct pl_plan_result *res, const struct pl_plan_choice *ch, int fits)
{
    if (res->npoints >= PL_PLAN_POINTS) return;
    struct pl_plan_point *p = &res->points[res->npoints++];
    p->cfg = ch->cfg;
    p->step = ch->time.step;
    p->mfu = ch->time.mfu;
    p->memory = ch->mem.total;
    p->mem = ch->mem;
    p->fits = fits;
}

/* Every setting of one set of degrees; the best that obeys every rule goes to the result. */
static void walk_settings(struct walk *w, struct pl_plan_config cfg)
{
    const struct pl_plan_model *m = w->m;
    enum pl_link link[PL_NAXES];
    pl_plan_links(w->c, &cfg, link);
    long seqs = (long)(m->batch_tokens / m->seq);
    long replicas = (long)cfg.deg[PL_AX_EP] * cfg.deg[PL_AX_DP];
    if (seqs % replicas) return;
    long per = seqs / replicas;
    int p = cfg.deg[PL_AX_PP];
    struct pl_plan_choice best = {0}, least = {0};
    int have = 0;
    for (long micro = 1; micro <= per && !w->stop; micro++) {
        if (per % micro || (w->fixed->micro && w->fixed->micro != micro)) continue;
        cfg.micro = (int)micro;
        cfg.m = (int)(per / micro);
        int vmax = p > 1 ? m->layers / p : 1;
        for (int v = 1; v <= vmax && v <= PL_PLAN_MAX_V && !w->stop; v++) {
            if (w->fixed->v && w->fixed->v != v) continue;
            cfg.v = v;
            for (int z = 0; z <= 3; z++) {
                if (w->fixed->zero >= 0 && w->fixed->zero != z) continue;
                cfg.zero = z;
                for (int rc = PL_RECOMPUTE_NONE; rc <= PL_RECOMPUTE_FULL; rc++) {
                    if (w->fixed->recompute >= 0 && w->fixed->recompute != rc) continue;
                    cfg.recompute = rc;
                    struct pl_plan_choice ch = {.cfg = cfg};
                    w->res->tried++;
                    pl_plan_memory(m, w->c, &cfg, &ch.mem);
                    if (!least.cfg.micro || ch.mem.total < least.mem.total) least = ch;
                    if (pl_plan_check_step(m, w->c, &cfg, !w->fixed->ignore_memory, NULL, 0) != 0) continue;
                    w->res->found++;
                    if (w->fit_only) {
                        w->stop = 1;
                        return;
                    }
                    pl_plan_time_links(m, w->c, &cfg, link, &ch.time);
                    if (!have || ch.time.step < best.time.step) best = ch;
                    have = 1;
                }
            }
        }
    }
    if (w->fit_only) return;
    if (have) keep_best(w->res, &best);
    if (!have && least.cfg.micro) pl_plan_time_links(m, w->c, &least.cfg, link, &least.time);
    add_point(w->res, have ? &best : &least, have);
}

static void walk_degrees(struct walk *w)
{
    const struct pl_plan_model *m = w->m;
    int gpus = pl_plan_gpus(w->c);
    /* tp divides the heads; a node bounds it on a switched cluster, the torus rule on one. */
    int max_tp = w->c->torus ? gpus : w->c->per_node;
    if (max_tp > m->heads) max_tp = m->heads;
    int max_cp = m->seq >= PL_PLAN_CP_FROM_SEQ ? gpus : 1;
    int max_ep = m->experts ? m->experts : 1;
    struct pl_plan_config cfg;
    pl_plan_config_default(&cfg);
    for (int tp = 1; tp <= max_tp; tp++)
        for (int cp = 1; cp <= max_cp; cp *= 2)
            for (int ep = 1; ep <= max_ep; ep++)
                for (int pp = 1; pp <= m->layers && !w->stop; pp++) {
                    long inner = (long)tp * cp * ep * pp;
                    if (gpus % inner) continue;
                    int deg[PL_NAXES] = {tp, cp, ep, pp, (int)(gpus / inner)};
                    int ok = 1;
                    for (int a = 0; a < PL_NAXES; a++) ok &= allowed(w, a, deg[a]);
                    if (!ok) continue;
                    memcpy(cfg.deg, deg, sizeof deg);
                    if (pl_plan_check_placement(m, w->c, &cfg, NULL, 0) != 0) continue;
                    walk_settings(w, cfg);
                }
}

int pl_plan_search(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                   const struct pl_plan_fixed *fixed, struct pl_plan_result *res)
{
    memset(res, 0, sizeof *res);
    struct pl_plan_fixed none = pl_plan_fixed_none();
    struct walk w = {.m = m, .c = c, .fixed = fixed ? fixed : &none, .res = res};
    walk_degrees(&w);
    return res->found;
}

int pl_plan_min_nodes(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                      int max_nodes)
{
    static struct pl_plan_result res;
    for (int n = 1; n <= max_nodes; n = c->torus ? 2 * n : n + 1) {
        struct pl_plan_cluster at = *c;
        at.nodes = n;
        memset(&res, 0, sizeof res);
        struct pl_plan_fixed none = pl_plan_fixed_none();
        struct walk w = {.m = m, .c = &at, .fixed = &none, .res = &res, .fit_only = 1};
        walk_degrees(&w);
        if (res.found) return n;
    }
    return 0;
}
