/* oracle.c: Lab 7's expectations, computed by the grader from lib/model.h alone: the
 * single-device MoE reference trained on the ranks' slices as microbatches (with each
 * rank's routing of the first step and MoE outputs of every step kept), the permutation a
 * counting sort gives, and the bytes each rank's all-to-all-v must send, derived from the
 * routing. */
#include "oracle.h"

#include <string.h>

#include "check.h"
#include "mem.h"
#include "ops.h"

static void *host(size_t bytes, const char *label)
{
    return pl_mem_alloc(bytes ? bytes : 1, PL_MEM_WORK, PL_HOST, label);
}

int l7_or_is_expert_tensor(const struct pl_param_desc *d)
{
    static const char *const suffix[] = {".moe.w_fc", ".moe.b_fc", ".moe.w_proj", ".moe.b_proj"};
    size_t n = strlen(d->name);
    for (int i = 0; i < 4; i++) {
        size_t m = strlen(suffix[i]);
        if (n >= m && !strcmp(d->name + n - m, suffix[i])) return 1;
    }
    return 0;
}

void l7_or_owned_range(const struct pl_model_layout *lay, int t, int ep_rank, int ep, size_t *off,
                    size_t *n)
{
    const struct pl_param_desc *d = &lay->tensors[t];
    *off = d->offset;
    *n = d->numel;
    if (!l7_or_is_expert_tensor(d)) return;
    size_t per_rank = d->numel / (size_t)ep; /* experts are the first dimension */
    *off += per_rank * (size_t)ep_rank;
    *n = per_rank;
}

/* The expected branch [N, C] of one layer from the reference's saved activations: every
 * kept slot's expert output times its gate (or times 1: what a combine without gates gives),
 * added in the reference's order. */
static void branch_of(const struct pl_mlp_acts *a, int E, int C, int N, int gated, float *out_h)
{
    const struct pl_moe_routing *r = a->route;
    float *out = pl_mem_alloc((size_t)N * C * sizeof(float), PL_MEM_WORK, PL_DEVICE,
                              "oracle branch");
    for (int e = 0; e < E; e++) {
        if (!r->count[e]) continue;
        size_t s0 = (size_t)e * a->cap;
        pl_scatter_add_rows(out, a->ye + s0 * C, a->rows + s0, gated ? a->gates + s0 : NULL,
                            r->count[e], C);
    }
    pl_to_host(out_h, out, (size_t)N * C * sizeof(float));
    pl_mem_free(out);
}

static void keep_routing(struct l7_or_reference *o, int slice, const struct pl_model *m)
{
    const struct pl_model_config *c = &m->cfg;
    const int L = c->n_layers, E = c->n_experts, N = o->N, k = c->top_k;
    for (int l = 0; l < L; l++) {
        const struct pl_moe_routing *r = m->acts[l].mlp.route;
        struct l7_or_routing *d = &o->route[(size_t)slice * L + l];
        d->cap = r->cap;
        memcpy(d->count, r->count, (size_t)E * sizeof(int));
        memcpy(d->expert, r->expert, (size_t)N * k * sizeof(int));
        memcpy(d->slot, r->slot, (size_t)N * k * sizeof(int));
        d->dropped = r->dropped;
        d->aux = r->aux;
    }
}

/* Slice me's MoE outputs of every layer in step `step`, gated and not. */
static void keep_branches(struct l7_or_reference *o, int step, const struct pl_model *m)
{
    const struct pl_model_config *c = &m->cfg;
    const int L = c->n_layers, E = c->n_experts, C = c->d_model, N = o->N;
    for (int l = 0; l < L; l++) {
        size_t at = ((size_t)step * L + l) * N * C;
        branch_of(&m->acts[l].mlp, E, C, N, 1, o->branch + at);
        branch_of(&m->acts[l].mlp, E, C, N, 0, o->ungated + at);
    }
}

void l7_or_push_router(struct pl_model *m, float hot)
{
    const int C = m->cfg.d_model, E = m->cfg.n_experts;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const float zero = 0.0f, one = 1.0f;
        pl_to_device(m->blocks[l].ln2_w, &zero, sizeof zero);
        pl_to_device(m->blocks[l].ln2_b, &one, sizeof one);
        for (int e = 0; e < E; e++) {
            float w;
            float *at = m->blocks[l].w_router + (size_t)e * C;
            pl_to_host(&w, at, sizeof w);
            w += e % 3 == 0 ? hot : -hot;
            pl_to_device(at, &w, sizeof w);
        }
    }
}

void l7_or_reference_run(struct l7_or_reference *o, const struct gr_train_setup *s, int slices,
                      int me, float loss_scale, float hot)
{
    memset(o, 0, sizeof *o);
    const struct pl_model_config *c = &s->cfg;
    const int L = c->n_layers, E = c->n_experts, k = c->top_k;
    struct pl_model *m = pl_model_new(c, PL_MODEL_ALL);
    if (hot > 0) l7_or_push_router(m, hot);
    o->slices = slices;
    o->loss_scale = loss_scale;
    o->me = me;
    o->steps = s->steps;
    o->numel = m->layout.numel;
    o->N = s->global_B / slices * c->seq_len;
    pl_model_layout_init(&o->layout, c);
    o->loss = host((size_t)s->steps * sizeof(double), "oracle losses");
    o->grads = host((size_t)s->steps * o->numel * sizeof(float), "oracle grads");
    o->params = host(o->numel * sizeof(float), "oracle params");
    o->route = host((size_t)slices * L * sizeof *o->route, "oracle routing");
    for (int i = 0; i < slices * L; i++) {
        o->route[i].count = host((size_t)E * sizeof(int), "oracle count");
        o->route[i].expert = host((size_t)o->N * k * sizeof(int), "oracle expert");
        o->route[i].slot = host((size_t)o->N * k * sizeof(int), "oracle slot");
    }
    const size_t branches = (size_t)s->steps * L * o->N * c->d_model;
    o->branch = host(branches * sizeof(float), "oracle branch");
    o->ungated = host(branches * sizeof(float), "oracle ungated");

    struct gr_batch *b = host((size_t)slices * sizeof *b, "oracle batches");
    for (int r = 0; r < slices; r++) gr_batch_new(&b[r], s, r, slices);
    struct pl_adamw_config opt = s->opt;
    opt.grad_clip = 0; /* the lab trains without clipping (moe.h) */
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.loss_scale = loss_scale;
    for (int step = 0; step < s->steps; step++) {
        pl_model_zero_grad(m);
        double loss = 0.0;
        for (int r = 0; r < slices; r++) {
            gr_batch_load(&b[r], step);
            loss += pl_model_forward(m, b[r].tokens, b[r].targets, b[r].B, &ctx);
            if (step == 0) keep_routing(o, r, m);
            if (r == me) keep_branches(o, step, m);
            pl_model_backward(m, &ctx);
        }
        o->loss[step] = loss / slices;
        pl_to_host(o->grads + (size_t)step * o->numel, m->grads, o->numel * sizeof(float));
        pl_model_update(m, &opt);
    }
    pl_to_host(o->params, m->params, o->numel * sizeof(float));
    for (int r = 0; r < slices; r++) gr_batch_free(&b[r]);
    pl_mem_free(b);
    pl_model_free(m);
}

void l7_or_reference_free(struct l7_or_reference *o)
{
    if (!o->loss) return;
    for (int i = 0; i < o->slices * o->layout.cfg.n_layers; i++) {
        pl_mem_free(o->route[i].count);
        pl_mem_free(o->route[i].expert);
        pl_mem_free(o->route[i].slot);
    }
    pl_mem_free(o->route);
    pl_mem_free(o->loss);
    pl_mem_free(o->grads);
    pl_mem_free(o->params);
    pl_mem_free(o->branch);
    pl_mem_free(o->ungated);
    pl_model_layout_free(&o->layout);
    memset(o, 0, sizeof *o);
}

void l7_or_permutation(const struct pl_moe_routing *r, int *start, int *perm, int *inv)
{
    /* a counting sort by expert: histogram (count), exclusive prefix sum, then every kept
     * choice at its expert's start plus its slot */
    start[0] = 0;
    for (int e = 0; e < r->E; e++) start[e + 1] = start[e] + r->count[e];
    for (int t = 0; t < r->N; t++)
        for (int j = 0; j < r->k; j++) {
            size_t i = (size_t)t * r->k + j;
            if (r->slot[i] < 0) {
                inv[i] = -1;
                continue;
            }
            inv[i] = start[r->expert[i]] + r->slot[i];
            perm[inv[i]] = t;
        }
}

void l7_or_a2a_rows(const struct l7_or_reference *o, int layer, long *dispatch, long *combine)
{
    const int E = o->layout.cfg.n_experts, k = o->layout.cfg.top_k, El = E / o->ep;
    *dispatch = *combine = 0;
    for (int m = 0; m < o->ep; m++) {
        int src = o->members[m];
        const struct l7_or_routing *r = &o->route[(size_t)src * o->layout.cfg.n_layers + layer];
        for (size_t i = 0; i < (size_t)o->N * k; i++) {
            if (r->slot[i] < 0) continue;
            int owner = r->expert[i] / El; /* the EP group's rank of the expert's owner */
            if (m == o->ep_rank && owner != o->ep_rank) (*dispatch)++;
            if (m != o->ep_rank && owner == o->ep_rank) (*combine)++;
        }
    }
}
