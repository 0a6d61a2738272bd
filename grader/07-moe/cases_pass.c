/* cases_pass.c: the driver's pass of Lab 7's training cases (lab07.h): the forward and
 * backward of lib/model.c with every part but the MoE branch the driver's own (embedding,
 * attention, layernorms, head), the branch the student's moe_forward and moe_backward. */
#include <string.h>

#include "lab07.h"
#include "ops.h"

static float *activ(size_t n, const char *label)
{
    return pl_mem_alloc(n * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, label);
}

void l7_pass_new(struct l7_pass *ps, const struct pl_model_config *c, int B)
{
    memset(ps, 0, sizeof *ps);
    const int L = c->n_layers, C = c->d_model;
    ps->c = c;
    ps->B = B;
    ps->T = c->seq_len;
    ps->N = B * c->seq_len;
    const size_t NC = (size_t)ps->N * C;
    ps->attn = pl_mem_alloc((size_t)L * sizeof *ps->attn, PL_MEM_WORK, PL_HOST, "pass attn");
    float ***lists[] = {&ps->xm, &ps->ln, &ps->mean, &ps->rstd};
    for (int i = 0; i < 4; i++)
        *lists[i] = pl_mem_alloc((size_t)L * sizeof(float *), PL_MEM_WORK, PL_HOST, "pass");
    for (int l = 0; l < L; l++) {
        pl_attn_acts_new(&ps->attn[l], c, B, ps->T);
        ps->xm[l] = activ(NC, "pass mlp input");
        ps->ln[l] = activ(NC, "pass ln2");
        ps->mean[l] = activ((size_t)ps->N, "pass ln2 mean");
        ps->rstd[l] = activ((size_t)ps->N, "pass ln2 rstd");
    }
    pl_head_acts_new(&ps->head, c, B, ps->T);
    ps->x = activ(NC, "pass residual");
    ps->branch = activ(NC, "pass branch");
    ps->dln = activ(NC, "pass d ln2");
    ps->dbranch = activ(NC, "pass d branch");
    ps->stale_h = pl_mem_alloc((size_t)L * NC * sizeof(float), PL_MEM_WORK, PL_HOST,
                               "pass stale branch");
}

void l7_pass_free(struct l7_pass *ps)
{
    for (int l = 0; l < ps->c->n_layers; l++) {
        pl_attn_acts_free(&ps->attn[l]);
        pl_mem_free(ps->xm[l]);
        pl_mem_free(ps->ln[l]);
        pl_mem_free(ps->mean[l]);
        pl_mem_free(ps->rstd[l]);
    }
    pl_mem_free(ps->attn);
    pl_mem_free(ps->xm);
    pl_mem_free(ps->ln);
    pl_mem_free(ps->mean);
    pl_mem_free(ps->rstd);
    pl_head_acts_free(&ps->head);
    pl_mem_free(ps->x);
    pl_mem_free(ps->branch);
    pl_mem_free(ps->dln);
    pl_mem_free(ps->dbranch);
    pl_mem_free(ps->stale_h);
}

/* The forward of lib/model.c with the MoE branch the student's; branches_h (host [L*N*C],
 * or NULL) receives each layer's branch, and ps->stale_h then what branch held before: ln,
 * not zeros, since moe.h says moe_forward writes branch. Returns this rank's objective. */
double l7_pass_forward(struct l7_state *st, struct l7_pass *ps, struct pl_model *m,
                       struct moe *s, const struct gr_batch *b, float *branches_h)
{
    const struct pl_model_config *c = ps->c;
    const int N = ps->N, C = c->d_model;
    const size_t NC = (size_t)N * C;
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ps->tokens = b->tokens;
    pl_embed_forward(c, &m->embed, b->tokens, ps->B, ps->T, ps->x);
    double aux = 0.0;
    for (int l = 0; l < c->n_layers; l++) {
        const struct pl_block_params *p = &m->blocks[l];
        pl_attn_forward(c, l, p, &ps->attn[l], &ctx, ps->x, ps->xm[l]);
        pl_layernorm_forward(ps->ln[l], ps->mean[l], ps->rstd[l], ps->xm[l], p->ln2_w, p->ln2_b,
                             N, C);
        pl_copy(ps->branch, ps->ln[l], NC);
        if (branches_h) pl_to_host(ps->stale_h + (size_t)l * NC, ps->branch, NC * sizeof(float));
        if (st->tracing) l7_tl_begin(&st->tl, "F moe_forward");
        aux += moe_forward(s, l, ps->ln[l], ps->branch);
        if (st->tracing) l7_tl_end(&st->tl);
        if (branches_h) pl_to_host(branches_h + (size_t)l * NC, ps->branch, NC * sizeof(float));
        pl_residual_forward(ps->x, ps->xm[l], ps->branch, NC);
    }
    return pl_head_forward(c, &m->head, &ps->head, ps->x, b->targets) + aux;
}

void l7_pass_backward(struct l7_state *st, struct l7_pass *ps, struct pl_model *m,
                      struct moe *s, float scale)
{
    const struct pl_model_config *c = ps->c;
    const int N = ps->N, C = c->d_model;
    const size_t NC = (size_t)N * C;
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.loss_scale = scale;
    float *dx = ps->x;
    pl_head_backward(c, &m->head, &m->head_g, &ps->head, &ctx, dx);
    for (int l = c->n_layers - 1; l >= 0; l--) {
        const struct pl_block_params *p = &m->blocks[l], *g = &m->blocks_g[l];
        pl_copy(ps->dbranch, dx, NC);
        pl_zero(ps->dln, NC);
        if (st->tracing) l7_tl_begin(&st->tl, "B moe_backward");
        moe_backward(s, l, ps->dbranch, ps->dln, scale);
        if (st->tracing) l7_tl_end(&st->tl);
        pl_layernorm_backward(dx, g->ln2_w, g->ln2_b, ps->dln, ps->xm[l], p->ln2_w, ps->mean[l],
                              ps->rstd[l], N, C);
        pl_attn_backward(c, l, p, g, &ps->attn[l], &ctx, dx, dx);
    }
    pl_embed_backward(c, &m->embed_g, ps->tokens, ps->B, ps->T, dx);
}
