/* timeline.c: Lab 7's MoE layers on the modelled timeline (timeline.h). */
#include "timeline.h"

#include <string.h>

#include "paralab.h"
#include "train.h"

void l7_tl_start(struct l7_timeline *tl)
{
    pl_trace_clear();
    tl->flops = 0;
}

void l7_tl_begin(struct l7_timeline *tl, const char *label)
{
    tl->was_on = pl_trace_enabled();
    pl_trace_enable(1);
    pl_span(label);
    tl->flops -= pl_ledger_flops_total();
}

void l7_tl_end(struct l7_timeline *tl)
{
    tl->flops += pl_ledger_flops_total();
    pl_trace_flush();
    pl_span("");
    pl_trace_enable(tl->was_on);
}

static float *scratch(size_t n, const char *label)
{
    float *p = pl_mem_alloc((n ? n : 1) * sizeof(float), PL_MEM_WORK, PL_DEVICE, label);
    pl_zero(p, n ? n : 1);
    return p;
}

/* What lib's ops charge for n rows through one expert, forward and backward. */
static double expert_flops(int n, int C, int F)
{
    if (n == 0) return 0;
    float *x = scratch((size_t)n * C, "tl7 x"), *h = scratch((size_t)n * F, "tl7 h");
    float *g = scratch((size_t)n * F, "tl7 g"), *y = scratch((size_t)n * C, "tl7 y");
    float *w1 = scratch((size_t)F * C, "tl7 w1"), *b1 = scratch((size_t)F, "tl7 b1");
    float *w2 = scratch((size_t)C * F, "tl7 w2"), *b2 = scratch((size_t)C, "tl7 b2");
    double f0 = pl_ledger_flops_total();
    pl_matmul_forward(h, x, w1, b1, n, C, F);
    pl_gelu_forward(g, h, (size_t)n * F);
    pl_matmul_forward(y, g, w2, b2, n, F, C);
    /* the backward, into the same buffers: only the count matters */
    pl_matmul_backward(g, w2, b2, y, g, w2, n, F, C);
    pl_gelu_backward(h, g, h, (size_t)n * F);
    pl_matmul_backward(x, w1, b1, h, x, w1, n, C, F);
    double f = pl_ledger_flops_total() - f0;
    float *all[] = {x, h, g, y, w1, b1, w2, b2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) pl_mem_free(all[i]);
    return f;
}

/* ... and for the router's product on N tokens, forward and backward. */
static double router_flops(int N, int C, int E)
{
    float *x = scratch((size_t)N * C, "tl7 ln"), *w = scratch((size_t)E * C, "tl7 wr");
    float *l = scratch((size_t)N * E, "tl7 logits");
    double f0 = pl_ledger_flops_total();
    pl_matmul_forward(l, x, w, NULL, N, C, E);
    pl_matmul_backward(x, w, NULL, l, x, w, N, C, E);
    double f = pl_ledger_flops_total() - f0;
    pl_mem_free(x);
    pl_mem_free(w);
    pl_mem_free(l);
    return f;
}

/* This rank's work in the reference's first step: its experts' rows from every member's
 * routing, and its router on its own tokens. */
static double work_flops(const struct l7_or_reference *o)
{
    const struct pl_model_config *c = &o->layout.cfg;
    const int L = c->n_layers, E = c->n_experts, El = E / o->ep;
    double f = 0;
    for (int l = 0; l < L; l++) {
        for (int i = 0; i < El; i++) {
            int e = o->ep_rank * El + i, rows = 0;
            for (int s = 0; s < o->ep; s++)
                rows += o->route[(size_t)o->members[s] * L + l].count[e];
            f += expert_flops(rows, c->d_model, c->d_ff);
        }
        f += router_flops(o->N, c->d_model, E);
    }
    return f;
}

void l7_tl_record(struct l7_timeline *tl, const struct l7_or_reference *o, double flops_x,
                  double bytes_x, double fig[4], int *replayed)
{
    const struct pl_profile *p = pl_profile_find(L7_TL_PROFILE);
    double need = work_flops(o);
    fig[0] = tl->flops * flops_x / p->flops * 1e3;
    fig[1] = need * flops_x / p->flops * 1e3;
    fig[2] = need > 0 ? tl->flops / need : 1;
    fig[3] = 0;
    tl->flops = 0;
    struct pl_merged_trace t;
    memset(&t, 0, sizeof t);
    pl_trace_gather(&t);
    if (pl_rank() == 0) {
        struct gr_overlap ov;
        char err[256];
        *replayed = gr_overlap_replay(&t, p, flops_x, bytes_x, NULL, NULL, &ov, err,
                                      sizeof err) == 0;
        if (*replayed) fig[3] = ov.step_time * 1e3;
    }
    pl_trace_merged_free(&t);
    pl_trace_clear();
}
