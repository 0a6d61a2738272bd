/* tp.c: Lab 4, tensor parallelism: the reference solution. Each function is a step of the
 * handout (docs/labs/04-tensor-parallel.md): the group, f and g, the column- and
 * row-parallel linears, the MLP and the attention built from them, and the block. */
#include "tp.h"

#include "mem.h"
#include "ops.h"

/* ---- the group ---- */

struct pl_comm *tp_group(const struct pl_grid *grid, struct pl_comm *world)
{
    return pl_grid_comm(grid, world, pl_grid_axis(grid, "tp"));
}

/* ---- f and g ---- */

void tp_copy_to_region_forward(struct pl_comm *tp, float *x, size_t n)
{
    /* every rank already holds all of x */
}

void tp_copy_to_region_backward(struct pl_comm *tp, float *dx, size_t n)
{
    /* each rank's branch saw all of x, so each holds a part of its gradient */
    pl_all_reduce(tp, dx, dx, n, PL_SUM);
}

void tp_reduce_from_region_forward(struct pl_comm *tp, float *x, size_t n)
{
    pl_all_reduce(tp, x, x, n, PL_SUM);
}

void tp_reduce_from_region_backward(struct pl_comm *tp, float *dx, size_t n)
{
    /* the sum's gradient reaches every term unchanged */
}

/* ---- parallel linears ---- */

static float *scratch(size_t n, const char *label)
{
    float *p = pl_mem_alloc(n * sizeof *p, PL_MEM_WORK, PL_DEVICE, label);
    return p;
}

void tp_column_linear_forward(struct pl_comm *tp, float *y, float *x, const float *w,
                              const float *b, int N, int C, int OCt)
{
    tp_copy_to_region_forward(tp, x, (size_t)N * C);
    pl_matmul_forward(y, x, w, b, N, C, OCt);
}

void tp_column_linear_backward(struct pl_comm *tp, float *dx, float *dw, float *db,
                               const float *dy, const float *x, const float *w, int N, int C,
                               int OCt)
{
    pl_zero(dx, (size_t)N * C);
    pl_matmul_backward(dx, dw, db, dy, x, w, N, C, OCt);
    tp_copy_to_region_backward(tp, dx, (size_t)N * C);
}

void tp_row_linear_forward(struct pl_comm *tp, float *y, const float *x, const float *w,
                           const float *b, int N, int Ct, int OC)
{
    pl_matmul_forward(y, x, w, NULL, N, Ct, OC);
    tp_reduce_from_region_forward(tp, y, (size_t)N * OC);
    /* after the sum: added on every rank before it, the bias would count t times */
    pl_tp_add_bias(y, b, N, OC);
}

void tp_row_linear_backward(struct pl_comm *tp, float *dx, float *dw, float *db, float *dy,
                            const float *x, const float *w, int N, int Ct, int OC)
{
    tp_reduce_from_region_backward(tp, dy, (size_t)N * OC);
    pl_zero(dx, (size_t)N * Ct);
    pl_matmul_backward(dx, dw, db, dy, x, w, N, Ct, OC);
}

/* ---- MLP: column-parallel fc1, GELU on the slice, row-parallel fc2 ---- */

void tp_mlp_forward(struct pl_comm *tp, const struct pl_model_config *c,
                    const struct pl_block_params *p, struct pl_tp_mlp_acts *a, float *x,
                    float *y)
{
    const int N = a->B * a->T, C = c->d_model, Ft = c->d_ff / pl_comm_size(tp);
    tp_column_linear_forward(tp, a->h, x, p->w_fc, p->b_fc, N, C, Ft);
    pl_gelu_forward(a->g, a->h, (size_t)N * Ft);
    tp_row_linear_forward(tp, y, a->g, p->w_fc2, p->b_fc2, N, Ft, C);
}

void tp_mlp_backward(struct pl_comm *tp, const struct pl_model_config *c,
                     const struct pl_block_params *p, const struct pl_block_params *g,
                     const struct pl_tp_mlp_acts *a, const float *x, float *dy, float *dx)
{
    const int N = a->B * a->T, C = c->d_model, Ft = c->d_ff / pl_comm_size(tp);
    float *dg = scratch((size_t)N * Ft, "tp mlp d gelu");
    float *dh = scratch((size_t)N * Ft, "tp mlp d fc");
    tp_row_linear_backward(tp, dg, g->w_fc2, g->b_fc2, dy, a->g, p->w_fc2, N, Ft, C);
    pl_gelu_backward(dh, dg, a->h, (size_t)N * Ft);
    tp_column_linear_backward(tp, dx, g->w_fc, g->b_fc, dh, x, p->w_fc, N, C, Ft);
    pl_mem_free(dg);
    pl_mem_free(dh);
}

/* ---- attention: q, k, v column-parallel by heads, output projection row-parallel ---- */

void tp_attention_forward(struct pl_comm *tp, const struct pl_model_config *c,
                          const struct pl_block_params *p, struct pl_tp_attn_acts *a, float *x,
                          float *y)
{
    const int t = pl_comm_size(tp), B = a->B, T = a->T, N = B * T, C = c->d_model;
    const int Ct = C / t, NHt = c->n_heads / t;
    tp_column_linear_forward(tp, a->qkv, x, p->w_qkv, p->b_qkv, N, C, 3 * Ct);
    /* whole heads: this rank's Ct channels of q, k and v are NHt heads of the full size */
    pl_attention_forward(a->y, a->att, a->qkv, B, T, Ct, NHt);
    tp_row_linear_forward(tp, y, a->y, p->w_proj, p->b_proj, N, Ct, C);
}

void tp_attention_backward(struct pl_comm *tp, const struct pl_model_config *c,
                           const struct pl_block_params *p, const struct pl_block_params *g,
                           const struct pl_tp_attn_acts *a, const float *x, float *dy,
                           float *dx)
{
    const int t = pl_comm_size(tp), B = a->B, T = a->T, N = B * T, C = c->d_model;
    const int Ct = C / t, NHt = c->n_heads / t;
    float *dheads = scratch((size_t)N * Ct, "tp attn d heads");
    float *dqkv = scratch((size_t)N * 3 * Ct, "tp attn d qkv");
    tp_row_linear_backward(tp, dheads, g->w_proj, g->b_proj, dy, a->y, p->w_proj, N, Ct, C);
    pl_zero(dqkv, (size_t)N * 3 * Ct);
    pl_attention_backward(dqkv, dheads, a->qkv, a->att, B, T, Ct, NHt);
    tp_column_linear_backward(tp, dx, g->w_qkv, g->b_qkv, dqkv, x, p->w_qkv, N, C, 3 * Ct);
    pl_mem_free(dheads);
    pl_mem_free(dqkv);
}

/* ---- the block: replicated layernorms and residuals around the two sub-layers ---- */

void tp_block_forward(struct pl_comm *tp, const struct pl_model_config *c,
                      const struct pl_block_params *p, struct pl_tp_block_acts *a,
                      const float *x, float *y)
{
    struct pl_tp_attn_acts *at = &a->attn;
    struct pl_tp_mlp_acts *m = &a->mlp;
    const int N = at->B * at->T, C = c->d_model;
    const size_t n = (size_t)N * C;
    float *branch = scratch(n, "tp block branch");
    pl_copy(at->x, x, n);
    pl_layernorm_forward(at->ln, at->mean, at->rstd, at->x, p->ln1_w, p->ln1_b, N, C);
    tp_attention_forward(tp, c, p, at, at->ln, branch);
    pl_residual_forward(m->x, at->x, branch, n);
    pl_layernorm_forward(m->ln, m->mean, m->rstd, m->x, p->ln2_w, p->ln2_b, N, C);
    tp_mlp_forward(tp, c, p, m, m->ln, branch);
    pl_residual_forward(y, m->x, branch, n);
    pl_mem_free(branch);
}

void tp_block_backward(struct pl_comm *tp, const struct pl_model_config *c,
                       const struct pl_block_params *p, const struct pl_block_params *g,
                       const struct pl_tp_block_acts *a, float *dy, float *dx)
{
    const struct pl_tp_attn_acts *at = &a->attn;
    const struct pl_tp_mlp_acts *m = &a->mlp;
    const int N = at->B * at->T, C = c->d_model;
    const size_t n = (size_t)N * C;
    float *dln = scratch(n, "tp block d ln");
    float *dmid = scratch(n, "tp block d mid");
    float *dbranch = scratch(n, "tp block d branch");
    /* MLP half: the residual passes dy on; the branch's gradient, already summed over the
     * group by f, reaches the replicated layernorm whole, so its gradient needs no
     * all-reduce */
    pl_copy(dbranch, dy, n);
    tp_mlp_backward(tp, c, p, g, m, m->ln, dbranch, dln);
    pl_copy(dmid, dy, n);
    pl_layernorm_backward(dmid, g->ln2_w, g->ln2_b, dln, m->x, p->ln2_w, m->mean, m->rstd, N,
                          C);
    /* attention half, the same way */
    pl_copy(dbranch, dmid, n);
    tp_attention_backward(tp, c, p, g, at, at->ln, dbranch, dln);
    pl_copy(dx, dmid, n);
    pl_layernorm_backward(dx, g->ln1_w, g->ln1_b, dln, at->x, p->ln1_w, at->mean, at->rstd, N,
                          C);
    pl_mem_free(dln);
    pl_mem_free(dmid);
    pl_mem_free(dbranch);
}
