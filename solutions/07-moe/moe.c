/* moe.c: Lab 7, the reference solution -- the router with capacity, the counting-sort
 * permutation, and expert parallelism over ep ranks: counts exchanged, tokens dispatched
 * and expert outputs returned by all-to-all-v, the gated combine on the token's own rank,
 * the backward through both exchanges, and the non-expert gradients summed across ranks.
 * Each function follows a section of docs/labs/07-moe.md. */
#include "moe.h"

#include <string.h>

#include <stdio.h>

#include "check.h"
#include "grid.h"
#include "mem.h"
#include "ops.h"

/* ---- section 2: the router ---- */

int moe_capacity(int N, int E, int k, float cf)
{
    /* cf N k / E in double from the float factor. Whatever asks for N slots or more (E/k,
     * 1e10, infinity) is N before any conversion to int; below N, the ceiling, at least 1. */
    const double slots = (double)cf * N * k / E;
    if (!(slots < N)) return N;
    int cap = (int)slots;
    cap += cap < slots; /* the ceiling */
    return cap > 1 ? cap : 1;
}

/* Where expert e stands in one token's order of preference, 0 for its best: the experts
 * more probable than e, and the equally probable ones below it (ties go to the lower
 * index). Every expert gets its own place, so the first k places are the top-k. */
static int preference(const float *p, int E, int e)
{
    int ahead = 0;
    for (int o = 0; o < E; o++) ahead += p[o] > p[e] || (p[o] == p[e] && o < e);
    return ahead;
}

/* Each token's k choices, best first, with their gates; r->f counts them (before any
 * choice is dropped) and r->count starts empty. */
static void choose(struct pl_moe_routing *r, const float *probs)
{
    for (int e = 0; e < r->E; e++) {
        r->count[e] = 0;
        r->f[e] = 0.0;
    }
    for (int t = 0; t < r->N; t++) {
        const float *p = probs + (size_t)t * r->E;
        for (int e = 0; e < r->E; e++) {
            const int j = preference(p, r->E, e);
            if (j >= r->k) continue;
            r->expert[(size_t)t * r->k + j] = e;
            r->gate[(size_t)t * r->k + j] = p[e];
            r->f[e] += 1.0;
        }
    }
}

/* Slots, choice by choice: pass j takes choice j of every token in token order, so a
 * token's first choice is never dropped for another token's second. Then the kept choices
 * are written into their experts' slot tables, and the dropped ones counted. */
static void fill_slots(struct pl_moe_routing *r)
{
    const size_t nk = (size_t)r->N * r->k;
    for (size_t q = 0; q < nk; q++) {
        const size_t c = q % r->N * r->k + q / r->N; /* choice q / N of token q % N */
        int *fill = &r->count[r->expert[c]];
        r->slot[c] = *fill < r->cap ? (*fill)++ : -1;
    }
    r->dropped = 0;
    for (size_t c = 0; c < nk; c++) {
        if (r->slot[c] < 0) {
            r->dropped++;
            continue;
        }
        const size_t at = (size_t)r->expert[c] * r->cap + r->slot[c];
        r->rows[at] = (int)(c / r->k);
        r->gates[at] = r->gate[c];
    }
}

/* Per expert: the unused slots cleared (the routing may hold another call's), f as a share
 * of the N k choices, P the column mean of the probabilities in token order; then the
 * load-balancing loss from them. */
static void balance(struct pl_moe_routing *r, const float *probs, float aux_coef)
{
    double fp = 0.0;
    for (int e = 0; e < r->E; e++) {
        for (int s = r->count[e]; s < r->cap; s++) {
            r->rows[(size_t)e * r->cap + s] = 0;
            r->gates[(size_t)e * r->cap + s] = 0.0f;
        }
        double column = 0.0;
        for (int t = 0; t < r->N; t++) column += probs[(size_t)t * r->E + e];
        r->P[e] = column / r->N;
        r->f[e] /= (double)r->N * r->k;
        fp += r->f[e] * r->P[e];
    }
    r->aux = (double)aux_coef * r->E * fp;
}

void moe_route(struct pl_moe_routing *r, const float *probs, float aux_coef)
{
    choose(r, probs);
    fill_slots(r);
    balance(r, probs, aux_coef);
}

/* ---- section 3: the permutation ---- */

void moe_permute(const struct pl_moe_routing *r, int *start, int *perm, int *inv)
{
    const int E = r->E, nk = r->N * r->k;
    start[0] = 0;
    for (int e = 0; e < E; e++) start[e + 1] = start[e] + r->count[e];
    for (int i = 0; i < nk; i++) {
        if (r->slot[i] < 0) {
            inv[i] = -1;
            continue;
        }
        int p = start[r->expert[i]] + r->slot[i];
        inv[i] = p;
        perm[p] = i / r->k;
    }
}

/* ---- section 4: the state ---- */

/* What one block's forward keeps for its backward. */
struct moe_layer {
    struct pl_moe_routing *route;
    const float *ln;                /* [N, C] the grader's, unchanged until the backward */
    float *probs;                   /* [N, E] op memory: the softmax, for its backward */
    int *start, *perm_h, *inv;      /* host: the permutation */
    int *perm;                      /* [N*k] op memory: token row of each position */
    float *gates;                   /* [N*k] op memory: gate of each position */
    size_t *scount, *sdispl;        /* [ep] elements sent to each rank (dispatch) */
    size_t *rcount, *rdispl;        /* [ep] elements received from each rank */
    int *from;                      /* [ep * El] rows rank src sends to local expert i */
    int *ecount;                    /* [El] rows of local expert i, from every rank */
    int *order;                     /* [E*cap] op memory: received row of each expert row */
    int received;                   /* rows received */
    float *xs, *ys;                 /* [N*k, C] comm: rows sent, expert outputs back */
    float *xr, *yr;                 /* [E*cap, C] comm: rows received, outputs to return */
    float *xe, *he, *ge, *ye;       /* [E*cap, C|F] expert inputs, fc, gelu, outputs */
};

struct moe {
    struct pl_comm *world, *ep, *edp; /* all ranks; this EP group; this expert's copies */
    struct pl_model *m;
    int N, E, k, C, F, cap, nranks, rank, El; /* El experts per rank */
    int *iota;                      /* [N*k] op memory: 0, 1, 2, ... */
    struct moe_layer *layers;
    int forwarded;                  /* a forward has run (moe_last_routing) */
};

static void *op_alloc(size_t bytes, const char *label)
{
    return pl_mem_alloc(bytes, PL_MEM_ACTIV, PL_DEVICE, label);
}

static void *host_alloc(size_t bytes, const char *label)
{
    return pl_mem_alloc(bytes, PL_MEM_WORK, PL_HOST, label);
}

static void layer_new(struct moe *s, struct moe_layer *L)
{
    const size_t nk = (size_t)s->N * s->k, ec = (size_t)s->E * s->cap;
    const size_t C = (size_t)s->C, F = (size_t)s->F;
    L->route = pl_moe_routing_new(s->N, s->E, s->k, s->cap);
    L->probs = op_alloc((size_t)s->N * s->E * sizeof(float), "moe probs");
    L->start = host_alloc((size_t)(s->E + 1) * sizeof(int), "moe start");
    L->perm_h = host_alloc(nk * sizeof(int), "moe perm host");
    L->inv = host_alloc(nk * sizeof(int), "moe inv");
    L->perm = op_alloc(nk * sizeof(int), "moe perm");
    L->gates = op_alloc(nk * sizeof(float), "moe gates by position");
    L->scount = host_alloc((size_t)s->nranks * sizeof(size_t), "moe send counts");
    L->sdispl = host_alloc((size_t)s->nranks * sizeof(size_t), "moe send displs");
    L->rcount = host_alloc((size_t)s->nranks * sizeof(size_t), "moe recv counts");
    L->rdispl = host_alloc((size_t)s->nranks * sizeof(size_t), "moe recv displs");
    L->from = host_alloc((size_t)s->nranks * s->El * sizeof(int), "moe rows from");
    L->ecount = host_alloc((size_t)s->El * sizeof(int), "moe expert rows");
    L->order = op_alloc(ec * sizeof(int), "moe expert order");
    L->xs = pl_comm_buf_alloc(nk * C, "moe dispatch send");
    L->ys = pl_comm_buf_alloc(nk * C, "moe combine recv");
    L->xr = pl_comm_buf_alloc(ec * C, "moe dispatch recv");
    L->yr = pl_comm_buf_alloc(ec * C, "moe combine send");
    L->xe = op_alloc(ec * C * sizeof(float), "moe expert in");
    L->he = op_alloc(ec * F * sizeof(float), "moe expert fc");
    L->ge = op_alloc(ec * F * sizeof(float), "moe expert gelu");
    L->ye = op_alloc(ec * C * sizeof(float), "moe expert out");
}

static void layer_free(struct moe_layer *L)
{
    pl_moe_routing_free(L->route);
    pl_mem_free(L->probs);
    pl_mem_free(L->start);
    pl_mem_free(L->perm_h);
    pl_mem_free(L->inv);
    pl_mem_free(L->perm);
    pl_mem_free(L->gates);
    pl_mem_free(L->scount);
    pl_mem_free(L->sdispl);
    pl_mem_free(L->rcount);
    pl_mem_free(L->rdispl);
    pl_mem_free(L->from);
    pl_mem_free(L->ecount);
    pl_mem_free(L->order);
    pl_comm_buf_free(L->xs);
    pl_comm_buf_free(L->ys);
    pl_comm_buf_free(L->xr);
    pl_comm_buf_free(L->yr);
    pl_mem_free(L->xe);
    pl_mem_free(L->he);
    pl_mem_free(L->ge);
    pl_mem_free(L->ye);
}

/* EP groups of ep consecutive ranks, the expert-data-parallel groups across them: the
 * default order of the rank grid, ep before dp. */
static void make_groups(struct moe *s, struct pl_comm *world, int ep)
{
    struct pl_grid g;
    char degrees[32];
    snprintf(degrees, sizeof degrees, "ep=%d", ep);
    pl_grid_init_or_die(&g, "ep-dp", degrees, pl_comm_size(world));
    s->world = world;
    s->ep = pl_grid_comm(&g, world, pl_grid_axis(&g, "ep"));
    s->edp = pl_grid_comm(&g, world, pl_grid_axis(&g, "dp"));
}

struct moe *moe_new(struct pl_comm *world, struct pl_model *m, int N, int ep)
{
    const struct pl_model_config *c = &m->cfg;
    struct moe *s = host_alloc(sizeof *s, "moe state");
    make_groups(s, world, ep);
    s->m = m;
    s->N = N;
    s->E = c->n_experts;
    s->k = c->top_k;
    s->C = c->d_model;
    s->F = c->d_ff;
    s->cap = moe_capacity(N, s->E, s->k, c->capacity_factor);
    s->nranks = pl_comm_size(s->ep);
    s->rank = pl_comm_rank(s->ep);
    s->El = s->E / s->nranks;
    const size_t nk = (size_t)N * s->k;
    int *iota = host_alloc(nk * sizeof(int), "moe iota host");
    for (size_t i = 0; i < nk; i++) iota[i] = (int)i;
    s->iota = op_alloc(nk * sizeof(int), "moe iota");
    pl_to_device(s->iota, iota, nk * sizeof(int));
    pl_mem_free(iota);
    s->layers = host_alloc((size_t)c->n_layers * sizeof *s->layers, "moe layers");
    for (int l = 0; l < c->n_layers; l++) layer_new(s, &s->layers[l]);
    return s;
}

void moe_free(struct moe *s)
{
    if (!s) return;
    for (int l = 0; l < s->m->cfg.n_layers; l++) layer_free(&s->layers[l]);
    pl_mem_free(s->layers);
    pl_mem_free(s->iota);
    pl_comm_free(s->ep);
    pl_comm_free(s->edp);
    pl_mem_free(s);
}

struct pl_comm *moe_ep_comm(const struct moe *s)
{
    return s->ep;
}

const struct pl_moe_routing *moe_last_routing(const struct moe *s, int layer)
{
    return s->forwarded ? s->layers[layer].route : NULL;
}

/* ---- section 4: route, permute, exchange the counts ---- */

/* Router probabilities on the device, decisions on the host, the permutation, and the
 * gates in position order (they never leave this rank). */
static void route(struct moe *s, struct moe_layer *L, const struct pl_block_params *p,
                  const float *ln)
{
    const int N = s->N, E = s->E;
    float *logits = op_alloc((size_t)N * E * sizeof(float), "moe router logits");
    pl_matmul_forward(logits, ln, p->w_router, NULL, N, s->C, E);
    pl_softmax_forward(L->probs, logits, N, E);
    pl_mem_free(logits);
    float *probs = host_alloc((size_t)N * E * sizeof(float), "moe probs host");
    pl_to_host(probs, L->probs, (size_t)N * E * sizeof(float));
    moe_route(L->route, probs, s->m->cfg.aux_loss_coef);
    pl_mem_free(probs);

    const struct pl_moe_routing *r = L->route;
    moe_permute(r, L->start, L->perm_h, L->inv);
    const int kept = L->start[E];
    float *gates = host_alloc((size_t)N * s->k * sizeof(float), "moe gates host");
    for (int e = 0; e < E; e++)
        for (int j = 0; j < r->count[e]; j++)
            gates[L->start[e] + j] = r->gates[(size_t)e * r->cap + j];
    pl_to_device(L->perm, L->perm_h, (size_t)kept * sizeof(int));
    pl_to_device(L->gates, gates, (size_t)kept * sizeof(float));
    pl_mem_free(gates);
}

/* Each rank tells each other rank how many rows it sends to each of its experts; from that
 * both sides know every all-to-all-v size of this layer, both ways. */
static void exchange_counts(struct moe *s, struct moe_layer *L)
{
    const int n = s->nranks, El = s->El, C = s->C;
    float *mine = pl_comm_buf_alloc((size_t)s->E, "moe counts send");
    float *theirs = pl_comm_buf_alloc((size_t)s->E, "moe counts recv");
    float *h = host_alloc((size_t)s->E * sizeof(float), "moe counts host");
    for (int e = 0; e < s->E; e++) h[e] = (float)L->route->count[e];
    pl_copy_from_host(mine, h, (size_t)s->E);
    pl_all_to_all(s->ep, mine, theirs, (size_t)El);
    pl_copy_to_host(h, theirs, (size_t)s->E);
    size_t sd = 0, rd = 0;
    for (int d = 0; d < n; d++) {
        L->scount[d] = (size_t)(L->start[(d + 1) * El] - L->start[d * El]) * C;
        L->sdispl[d] = sd;
        sd += L->scount[d];
        size_t rows = 0;
        for (int i = 0; i < El; i++) {
            L->from[d * El + i] = (int)h[d * El + i];
            rows += (size_t)L->from[d * El + i];
        }
        L->rcount[d] = rows * C;
        L->rdispl[d] = rd;
        rd += L->rcount[d];
    }
    L->received = (int)(rd / (size_t)C);
    /* received rows arrive grouped by source, then expert; the experts want them grouped
     * by expert, then source: order[j] is the received row of expert-ordered row j */
    int *order = host_alloc((size_t)L->received * sizeof(int) + 1, "moe order host");
    int j = 0;
    for (int i = 0; i < El; i++) {
        L->ecount[i] = 0;
        for (int d = 0; d < n; d++) {
            int base = (int)(L->rdispl[d] / (size_t)C);
            for (int q = 0; q < i; q++) base += L->from[d * El + q];
            for (int x = 0; x < L->from[d * El + i]; x++) order[j++] = base + x;
            L->ecount[i] += L->from[d * El + i];
        }
    }
    pl_to_device(L->order, order, (size_t)L->received * sizeof(int));
    pl_mem_free(order);
    pl_mem_free(h);
    pl_comm_buf_free(mine);
    pl_comm_buf_free(theirs);
}

/* ---- section 5: dispatch, experts, combine ---- */

static void run_experts(struct moe *s, struct moe_layer *L, const struct pl_block_params *p)
{
    const int C = s->C, F = s->F;
    pl_gather_rows(L->xe, L->xr, L->order, L->received, C);
    size_t row = 0;
    for (int i = 0; i < s->El; i++) {
        const int n = L->ecount[i], e = s->rank * s->El + i;
        if (n == 0) continue;
        float *xe = L->xe + row * C, *he = L->he + row * F, *ge = L->ge + row * F;
        float *ye = L->ye + row * C;
        pl_matmul_forward(he, xe, p->w_fc + (size_t)e * F * C, p->b_fc + (size_t)e * F, n, C, F);
        pl_gelu_forward(ge, he, (size_t)n * F);
        pl_matmul_forward(ye, ge, p->w_fc2 + (size_t)e * C * F, p->b_fc2 + (size_t)e * C, n, F,
                          C);
        row += (size_t)n;
    }
    /* back into received order, ready to return */
    pl_zero(L->yr, (size_t)L->received * C);
    pl_scatter_add_rows(L->yr, L->ye, L->order, NULL, L->received, C);
}

double moe_forward(struct moe *s, int layer, const float *ln, float *branch)
{
    struct moe_layer *L = &s->layers[layer];
    const struct pl_block_params *p = &s->m->blocks[layer];
    const int C = s->C;
    L->ln = ln;
    route(s, L, p, ln);
    exchange_counts(s, L);
    const int kept = L->start[s->E];
    pl_gather_rows(L->xs, ln, L->perm, kept, C);
    pl_all_to_all_v(s->ep, L->xs, L->scount, L->sdispl, L->xr, L->rcount, L->rdispl);
    run_experts(s, L, p);
    pl_all_to_all_v(s->ep, L->yr, L->rcount, L->rdispl, L->ys, L->scount, L->sdispl);
    pl_zero(branch, (size_t)s->N * C);
    pl_scatter_add_rows(branch, L->ys, L->perm, L->gates, kept, C);
    s->forwarded = 1;
    return L->route->aux;
}

/* ---- section 6: the backward ---- */

/* The experts' backward on expert-ordered d outputs dye; dxe gets d inputs. */
static void experts_backward(struct moe *s, struct moe_layer *L, const struct pl_block_params *p,
                             const struct pl_block_params *g, const float *dye, float *dxe)
{
    const int C = s->C, F = s->F;
    float *dge = op_alloc((size_t)L->received * F * sizeof(float) + 1, "moe d gelu");
    float *dhe = op_alloc((size_t)L->received * F * sizeof(float) + 1, "moe d fc");
    size_t row = 0;
    for (int i = 0; i < s->El; i++) {
        const int n = L->ecount[i], e = s->rank * s->El + i;
        if (n == 0) continue;
        const size_t rc = row * C, rf = row * F;
        pl_matmul_backward(dge + rf, g->w_fc2 + (size_t)e * C * F, g->b_fc2 + (size_t)e * C,
                           dye + rc, L->ge + rf, p->w_fc2 + (size_t)e * C * F, n, F, C);
        pl_gelu_backward(dhe + rf, dge + rf, L->he + rf, (size_t)n * F);
        pl_matmul_backward(dxe + rc, g->w_fc + (size_t)e * F * C, g->b_fc + (size_t)e * F,
                           dhe + rf, L->xe + rc, p->w_fc + (size_t)e * F * C, n, C, F);
        row += (size_t)n;
    }
    pl_mem_free(dge);
    pl_mem_free(dhe);
}

/* d probs from the gates of the kept choices and the load-balancing loss, then through the
 * softmax and the router's matmul. */
static void router_backward(struct moe *s, struct moe_layer *L, const struct pl_block_params *p,
                            const struct pl_block_params *g, const float *dgate, float *dln,
                            float loss_scale)
{
    const int N = s->N, E = s->E, kept = L->start[E];
    const struct pl_moe_routing *r = L->route;
    float *dg = host_alloc((size_t)kept * sizeof(float) + 1, "moe d gates host");
    float *dp = host_alloc((size_t)N * E * sizeof(float), "moe d probs host");
    pl_to_host(dg, dgate, (size_t)kept * sizeof(float));
    for (int q = 0; q < kept; q++) {
        int e = 0;
        while (L->start[e + 1] <= q) e++;
        dp[(size_t)L->perm_h[q] * E + e] += dg[q];
    }
    const double a = s->m->cfg.aux_loss_coef;
    if (a > 0)
        for (int e = 0; e < E; e++) {
            /* aux = a E sum_i f_i P_i, P_i the mean of p[t, i]: d aux / d p[t, e] = a E f_e / N */
            float d = (float)(loss_scale * (a * E * r->f[e] / N));
            for (int t = 0; t < N; t++) dp[(size_t)t * E + e] += d;
        }
    float *dprobs = op_alloc((size_t)N * E * sizeof(float), "moe d probs");
    float *dlogits = op_alloc((size_t)N * E * sizeof(float), "moe d logits");
    pl_to_device(dprobs, dp, (size_t)N * E * sizeof(float));
    pl_softmax_backward(dlogits, dprobs, L->probs, N, E);
    pl_matmul_backward(dln, g->w_router, NULL, dlogits, L->ln, p->w_router, N, s->C, E);
    pl_mem_free(dg);
    pl_mem_free(dp);
    pl_mem_free(dprobs);
    pl_mem_free(dlogits);
}

void moe_backward(struct moe *s, int layer, const float *dbranch, float *dln, float loss_scale)
{
    struct moe_layer *L = &s->layers[layer];
    const struct pl_block_params *p = &s->m->blocks[layer], *g = &s->m->blocks_g[layer];
    const int C = s->C, kept = L->start[s->E];
    const size_t nk = (size_t)s->N * s->k, ec = (size_t)s->E * s->cap;
    /* combine: branch[t] += gate * y, so d gate = dbranch[t] . y and d y = gate * dbranch[t] */
    float *dgate = op_alloc(nk * sizeof(float), "moe d gates");
    pl_row_dot(dgate, dbranch, L->perm, L->ys, kept, C);
    float *rows = op_alloc(nk * C * sizeof(float), "moe d rows");
    float *dys = pl_comm_buf_alloc(nk * C, "moe d combine send");
    float *dyr = pl_comm_buf_alloc(ec * C, "moe d combine recv");
    pl_gather_rows(rows, dbranch, L->perm, kept, C);
    pl_zero(dys, (size_t)kept * C);
    pl_scatter_add_rows(dys, rows, s->iota, L->gates, kept, C);
    /* the combine's reverse: d outputs travel to the experts' ranks */
    pl_all_to_all_v(s->ep, dys, L->scount, L->sdispl, dyr, L->rcount, L->rdispl);
    float *dye = op_alloc(ec * C * sizeof(float), "moe d expert out");
    float *dxe = op_alloc(ec * C * sizeof(float), "moe d expert in");
    pl_gather_rows(dye, dyr, L->order, L->received, C);
    experts_backward(s, L, p, g, dye, dxe);
    /* the dispatch's reverse: d inputs travel back to the tokens' ranks */
    pl_zero(dyr, (size_t)L->received * C);
    pl_scatter_add_rows(dyr, dxe, L->order, NULL, L->received, C);
    pl_all_to_all_v(s->ep, dyr, L->rcount, L->rdispl, dys, L->scount, L->sdispl);
    pl_scatter_add_rows(dln, dys, L->perm, NULL, kept, C);
    router_backward(s, L, p, g, dgate, dln, loss_scale);
    pl_mem_free(dgate);
    pl_mem_free(rows);
    pl_comm_buf_free(dys);
    pl_comm_buf_free(dyr);
    pl_mem_free(dye);
    pl_mem_free(dxe);
}

/* ---- section 7: the non-expert gradients ---- */

static int is_expert_tensor(const char *name)
{
    static const char *const suffix[] = {".moe.w_fc", ".moe.b_fc", ".moe.w_proj", ".moe.b_proj"};
    size_t n = strlen(name);
    for (int i = 0; i < 4; i++) {
        size_t m = strlen(suffix[i]);
        if (n >= m && !strcmp(name + n - m, suffix[i])) return 1;
    }
    return 0;
}

/* Sums, over comm, this rank's part of every tensor whose expert-ness is `experts`: whole
 * runs of consecutive non-expert tensors in one call, and of each expert tensor the rows of
 * this rank's experts. */
static void sum_tensors(struct moe *s, struct pl_comm *comm, int experts)
{
    const struct pl_model_layout *lay = &s->m->layout;
    float *g = s->m->grads;
    size_t off = 0, len = 0;
    for (int t = 0; t <= lay->n_tensors; t++) {
        const struct pl_param_desc *d = t < lay->n_tensors ? &lay->tensors[t] : NULL;
        int run = d && !experts && !is_expert_tensor(d->name);
        if (run) {
            if (!len) off = d->offset;
            len += d->numel;
            continue;
        }
        if (len) pl_all_reduce(comm, g + off, g + off, len, PL_SUM);
        len = 0;
        if (d && experts && is_expert_tensor(d->name)) {
            size_t mine = d->numel / (size_t)s->nranks, at = d->offset + mine * s->rank;
            pl_all_reduce(comm, g + at, g + at, mine, PL_SUM);
        }
    }
}

void moe_finish_gradients(struct moe *s)
{
    /* each rank's backward scaled its loss by 1/n: the sum over the ranks is the gradient */
    sum_tensors(s, s->world, 0);
    if (pl_comm_size(s->edp) > 1) sum_tensors(s, s->edp, 1);
}
