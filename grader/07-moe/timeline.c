/* timeline.c: Lab 7's MoE layers on the modelled timeline (timeline.h). */
#include "timeline.h"

#include <mpi.h>
#include <stdio.h>
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

double l7_tl_judge(struct l7_timeline *tl, const struct l7_or_reference *o, double flops_x,
                   double bytes_x, char *why, size_t len)
{
    why[0] = '\0';
    double mine[2] = {tl->flops, work_flops(o)};
    tl->flops = 0;
    double ratio = mine[1] > 0 ? mine[0] / mine[1] : 1;
    /* the rank that did the most beyond its share, and its figures */
    struct {
        double v;
        int r;
    } in = {ratio, pl_rank()}, out;
    PL_CHECK_MPI(MPI_Allreduce(&in, &out, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
    double worst[2] = {mine[0], mine[1]};
    PL_CHECK_MPI(MPI_Bcast(worst, 2, MPI_DOUBLE, out.r, MPI_COMM_WORLD));
    struct pl_merged_trace t;
    memset(&t, 0, sizeof t);
    pl_trace_gather(&t);
    double fraction = 1;
    if (pl_rank() == 0) {
        const struct pl_profile *p = pl_profile_find(L7_TL_PROFILE);
        struct gr_overlap ov;
        char err[256];
        int replayed = gr_overlap_replay(&t, p, flops_x, bytes_x, NULL, NULL, &ov, err,
                                         sizeof err) == 0;
        double need = worst[1] * flops_x / p->flops, did = worst[0] * flops_x / p->flops;
        char step[200] = "";
        if (replayed)
            snprintf(step, sizeof step, "your MoE layers' forward and backward take %.2f ms "
                     "on the slowest rank, modelled on %s at a Mixtral-sized layer; ",
                     ov.step_time * 1e3, L7_TL_PROFILE);
        fraction = out.v <= L7_TL_FULL ? 1 : out.v >= L7_TL_NONE ? 0
                 : (L7_TL_NONE - out.v) / (L7_TL_NONE - L7_TL_FULL);
        snprintf(why, len, "%srank %d, the one furthest beyond its share, computes for "
                 "%.2f ms where its own experts' routed rows and its router need %.2f ms "
                 "(%.2fx; full marks up to %.2fx, none from %.2fx)%s", step, out.r, did * 1e3,
                 need * 1e3, out.v, L7_TL_FULL, L7_TL_NONE,
                 out.v > L7_TL_FULL ? ": an expert should run only the rows routed to it, not "
                                    "every row its rank received (section 5)" : "");
    }
    pl_trace_merged_free(&t);
    pl_trace_clear();
    return fraction;
}
