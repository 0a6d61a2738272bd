/* model_moe.c: the mixture-of-experts MLP half of the reference model -- router, top-k with
 * capacity, token permutation into per-expert slots, GELU experts, the gated combine, the
 * load-balancing loss, and the backward through all of it. The routing decisions are made
 * on the host (a few numbers per token, by the PL_HD rules of moe_kernels.h); everything
 * per channel runs through ops.h, so the GPU build works on device memory unchanged. */
#include <string.h>

#include "check.h"
#include "mem.h"
#include "model.h"
#include "model_internal.h"
#include "moe_kernels.h"
#include "ops.h"

/* p + off, or NULL when the gradient is not wanted */
#define AT(p, off) ((p) ? (p) + (off) : NULL)

int pl_moe_capacity(int N, int E, int top_k, float capacity_factor)
{
    return pl_moe_capacity_of(N, E, top_k, capacity_factor);
}

/* The routing decisions are host-side bookkeeping (indices, counts, a copy of the gates),
 * not the forward's op-memory tensors: the ledger counts them as workspace (model.h). */
static void *host_alloc(size_t bytes, const char *label)
{
    return pl_mem_alloc(bytes, PL_MEM_WORK, PL_HOST, label);
}

struct pl_moe_routing *pl_moe_routing_new(int N, int E, int k, int cap)
{
    PL_REQUIRE(N > 0 && E > 0 && k >= 1 && k <= E && cap >= 1,
               "pl_moe_routing_new(N=%d, E=%d, k=%d, cap=%d): a routing needs N > 0 tokens, "
               "E > 0 experts, 1 <= k <= E choices per token and cap >= 1 slots per expert "
               "(pl_moe_capacity gives it)", N, E, k, cap);
    struct pl_moe_routing *r = host_alloc(sizeof *r, "moe routing");
    r->N = N;
    r->E = E;
    r->k = k;
    r->cap = cap;
    size_t nk = (size_t)N * k, ec = (size_t)E * cap;
    r->expert = host_alloc(nk * sizeof(int), "moe routing expert");
    r->gate = host_alloc(nk * sizeof(float), "moe routing gate");
    r->slot = host_alloc(nk * sizeof(int), "moe routing slot");
    r->count = host_alloc((size_t)E * sizeof(int), "moe routing count");
    r->rows = host_alloc(ec * sizeof(int), "moe routing rows");
    r->gates = host_alloc(ec * sizeof(float), "moe routing gates");
    r->f = host_alloc((size_t)E * sizeof(double), "moe routing f");
    r->P = host_alloc((size_t)E * sizeof(double), "moe routing P");
    return r;
}

void pl_moe_routing_free(struct pl_moe_routing *r)
{
    if (!r) return;
    pl_mem_free(r->expert);
    pl_mem_free(r->gate);
    pl_mem_free(r->slot);
    pl_mem_free(r->count);
    pl_mem_free(r->rows);
    pl_mem_free(r->gates);
    pl_mem_free(r->f);
    pl_mem_free(r->P);
    pl_mem_free(r);
}

void pl_moe_route(struct pl_moe_routing *r, const float *probs, float aux_coef)
{
    const int N = r->N, E = r->E, k = r->k, cap = r->cap;
    memset(r->count, 0, (size_t)E * sizeof(int));
    memset(r->rows, 0, (size_t)E * cap * sizeof(int));
    memset(r->gates, 0, (size_t)E * cap * sizeof(float));
    for (int e = 0; e < E; e++) r->f[e] = r->P[e] = 0.0;
    r->dropped = 0;
    for (int t = 0; t < N; t++) {
        pl_moe_topk_row(probs + (size_t)t * E, E, k, r->expert + (size_t)t * k,
                        r->gate + (size_t)t * k);
        for (int j = 0; j < k; j++) r->f[r->expert[(size_t)t * k + j]] += 1.0;
        for (int e = 0; e < E; e++) r->P[e] += probs[(size_t)t * E + e];
    }
    /* All first choices claim slots before any second choice, so a token's best expert is
     * the last thing it loses when experts overflow. */
    for (int j = 0; j < k; j++)
        for (int t = 0; t < N; t++) {
            size_t i = (size_t)t * k + j;
            int e = r->expert[i];
            if (r->count[e] < cap) {
                int s = r->count[e]++;
                r->slot[i] = s;
                r->rows[(size_t)e * cap + s] = t;
                r->gates[(size_t)e * cap + s] = r->gate[i];
            } else {
                r->slot[i] = -1;
                r->dropped++;
            }
        }
    double sum = 0.0;
    for (int e = 0; e < E; e++) {
        r->f[e] /= (double)N * k;
        r->P[e] /= (double)N;
        sum += r->f[e] * r->P[e];
    }
    r->aux = (double)aux_coef * E * sum;
}

void pl_moe_acts_new(struct pl_mlp_acts *a, const struct pl_model_config *c, int B, int T)
{
    const int N = B * T, E = c->n_experts, C = c->d_model, F = c->d_ff;
    const int cap = pl_moe_capacity(N, E, c->top_k, c->capacity_factor);
    const size_t ec = (size_t)E * cap;
    a->cap = cap;
    a->probs = pl_mem_alloc((size_t)N * E * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, "moe probs");
    a->rows = pl_mem_alloc(ec * sizeof(int), PL_MEM_ACTIV, PL_DEVICE, "moe slot rows");
    a->gates = pl_mem_alloc(ec * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, "moe slot gates");
    a->iota = pl_mem_alloc((size_t)cap * sizeof(int), PL_MEM_ACTIV, PL_DEVICE, "moe iota");
    a->xe = pl_mem_alloc(ec * C * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, "moe expert in");
    a->he = pl_mem_alloc(ec * F * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, "moe expert fc");
    a->ge = pl_mem_alloc(ec * F * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, "moe expert gelu");
    a->ye = pl_mem_alloc(ec * C * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, "moe expert out");
    a->route = pl_moe_routing_new(N, E, c->top_k, cap);
    int *iota = pl_mem_alloc((size_t)cap * sizeof(int), PL_MEM_WORK, PL_HOST, "moe iota host");
    for (int i = 0; i < cap; i++) iota[i] = i;
    pl_to_device(a->iota, iota, (size_t)cap * sizeof(int));
    pl_mem_free(iota);
}

void pl_moe_acts_free(struct pl_mlp_acts *a)
{
    pl_mem_free(a->probs);
    pl_mem_free(a->rows);
    pl_mem_free(a->gates);
    pl_mem_free(a->iota);
    pl_mem_free(a->xe);
    pl_mem_free(a->he);
    pl_mem_free(a->ge);
    pl_mem_free(a->ye);
    pl_moe_routing_free(a->route);
    a->probs = a->gates = a->xe = a->he = a->ge = a->ye = NULL;
    a->rows = a->iota = NULL;
    a->route = NULL;
}

void pl_moe_forward(const struct pl_model_config *c, const struct pl_block_params *p,
                    struct pl_mlp_acts *a, float *branch)
{
    const int N = a->B * a->T, E = c->n_experts, C = c->d_model, F = c->d_ff, cap = a->cap;
    struct pl_moe_routing *r = a->route;

    /* router: probabilities per token and expert, then the decisions on the host */
    float *logits = pl_model_scratch_take(a->scratch, (size_t)N * E, "moe router logits");
    pl_matmul_forward(logits, a->ln, p->w_router, NULL, N, C, E);
    pl_softmax_forward(a->probs, logits, N, E);
    pl_model_scratch_give(a->scratch, logits);
    float *probs = pl_model_host_scratch_take(a->scratch, (size_t)N * E, "moe probs host");
    pl_to_host(probs, a->probs, (size_t)N * E * sizeof(float));
    pl_moe_route(r, probs, c->aux_loss_coef);
    pl_model_host_scratch_give(a->scratch, probs);
    pl_to_device(a->rows, r->rows, (size_t)E * cap * sizeof(int));
    pl_to_device(a->gates, r->gates, (size_t)E * cap * sizeof(float));

    /* permute each expert's tokens into its slots, run the expert, combine with the gate */
    for (int e = 0; e < E; e++) {
        const int n = r->count[e];
        if (n == 0) continue;
        const size_t s0 = (size_t)e * cap;
        float *xe = a->xe + s0 * C, *he = a->he + s0 * F, *ge = a->ge + s0 * F;
        float *ye = a->ye + s0 * C;
        pl_gather_rows(xe, a->ln, a->rows + s0, n, C);
        pl_matmul_forward(he, xe, p->w_fc + (size_t)e * F * C, p->b_fc + (size_t)e * F, n, C, F);
        pl_gelu_forward(ge, he, (size_t)n * F);
        pl_matmul_forward(ye, ge, p->w_fc2 + (size_t)e * C * F, p->b_fc2 + (size_t)e * C, n, F,
                          C);
        pl_scatter_add_rows(branch, ye, a->rows + s0, a->gates + s0, n, C);
    }
    a->aux_loss = r->aux;
}

void pl_moe_backward(const struct pl_model_config *c, const struct pl_block_params *p,
                     const struct pl_block_params *g, const struct pl_mlp_acts *a,
                     float loss_scale, const float *dbranch, float *dln)
{
    const int N = a->B * a->T, E = c->n_experts, C = c->d_model, F = c->d_ff, cap = a->cap;
    const struct pl_moe_routing *r = a->route;
    const size_t ec = (size_t)E * cap;
    struct pl_scratch *sc = a->scratch;
    float *dgates = pl_model_scratch_take(sc, ec, "moe d gates");
    float *drows = pl_model_scratch_take(sc, (size_t)cap * C, "moe d rows");
    float *dye = pl_model_scratch_take(sc, (size_t)cap * C, "moe d expert out");
    float *dge = pl_model_scratch_take(sc, (size_t)cap * F, "moe d expert gelu");
    float *dhe = pl_model_scratch_take(sc, (size_t)cap * F, "moe d expert fc");
    float *dxe = pl_model_scratch_take(sc, (size_t)cap * C, "moe d expert in");

    for (int e = 0; e < E; e++) {
        const int n = r->count[e];
        if (n == 0) continue;
        const size_t s0 = (size_t)e * cap;
        const float *xe = a->xe + s0 * C, *he = a->he + s0 * F, *ge = a->ge + s0 * F;
        const float *ye = a->ye + s0 * C;
        const int *rows = a->rows + s0;
        /* combine: out[row] += gate * ye, so d gate = dout[row] . ye, d ye = gate * dout[row] */
        pl_row_dot(dgates + s0, dbranch, rows, ye, n, C);
        pl_gather_rows(drows, dbranch, rows, n, C);
        pl_zero(dye, (size_t)n * C);
        pl_scatter_add_rows(dye, drows, a->iota, a->gates + s0, n, C);
        pl_zero(dge, (size_t)n * F);
        pl_matmul_backward(dge, AT(g->w_fc2, (size_t)e * C * F), AT(g->b_fc2, (size_t)e * C), dye,
                           ge, p->w_fc2 + (size_t)e * C * F, n, F, C);
        pl_zero(dhe, (size_t)n * F);
        pl_gelu_backward(dhe, dge, he, (size_t)n * F);
        pl_zero(dxe, (size_t)n * C);
        pl_matmul_backward(dxe, AT(g->w_fc, (size_t)e * F * C), AT(g->b_fc, (size_t)e * F), dhe,
                           xe, p->w_fc + (size_t)e * F * C, n, C, F);
        pl_scatter_add_rows(dln, dxe, rows, NULL, n, C);
    }

    /* d probs: the gate of each kept slot, plus the aux loss term (f constant) */
    float *dg_h = pl_model_host_scratch_take(sc, ec, "moe d gates host");
    float *dp_h = pl_model_host_scratch_take(sc, (size_t)N * E, "moe d probs host");
    pl_to_host(dg_h, dgates, ec * sizeof(float));
    for (int e = 0; e < E; e++)
        for (int s = 0; s < r->count[e]; s++)
            dp_h[(size_t)r->rows[(size_t)e * cap + s] * E + e] += dg_h[(size_t)e * cap + s];
    if (c->aux_loss_coef > 0.0f)
        for (int e = 0; e < E; e++) {
            float d = (float)(loss_scale * pl_moe_aux_grad(c->aux_loss_coef, E, r->f[e], N));
            for (int t = 0; t < N; t++) dp_h[(size_t)t * E + e] += d;
        }
    float *dprobs = pl_model_scratch_take(sc, (size_t)N * E, "moe d probs");
    float *dlogits = pl_model_scratch_take(sc, (size_t)N * E, "moe d router logits");
    pl_to_device(dprobs, dp_h, (size_t)N * E * sizeof(float));
    pl_softmax_backward(dlogits, dprobs, a->probs, N, E);
    pl_matmul_backward(dln, g->w_router, NULL, dlogits, a->ln, p->w_router, N, C, E);

    pl_model_host_scratch_give(sc, dp_h);
    pl_model_host_scratch_give(sc, dg_h);
    /* latest taken first: with an arena the give of dgates alone would return them all,
     * without one each is its own allocation */
    pl_model_scratch_give(sc, dlogits);
    pl_model_scratch_give(sc, dprobs);
    pl_model_scratch_give(sc, dxe);
    pl_model_scratch_give(sc, dhe);
    pl_model_scratch_give(sc, dge);
    pl_model_scratch_give(sc, dye);
    pl_model_scratch_give(sc, drows);
    pl_model_scratch_give(sc, dgates);
}

size_t pl_moe_scratch_need(const struct pl_model_config *c, int B, int T)
{
    const int N = B * T, E = c->n_experts;
    const size_t cap = (size_t)pl_moe_capacity(N, E, c->top_k, c->capacity_factor);
    const size_t C = (size_t)c->d_model, F = (size_t)c->d_ff;
    /* the backward holds the most: d gates, three [cap, C], two [cap, F], two [N, E] */
    return pl_model_scratch_round((size_t)E * cap) + 3 * pl_model_scratch_round(cap * C) +
           2 * pl_model_scratch_round(cap * F) + 2 * pl_model_scratch_round((size_t)N * E);
}

size_t pl_moe_host_scratch_need(const struct pl_model_config *c, int B, int T)
{
    const int N = B * T, E = c->n_experts;
    if (E == 0) return 0;
    const size_t cap = (size_t)pl_moe_capacity(N, E, c->top_k, c->capacity_factor);
    /* the backward's d gates and d probs; the forward holds only its [N, E] probabilities */
    return pl_model_scratch_round((size_t)E * cap) + pl_model_scratch_round((size_t)N * E);
}
