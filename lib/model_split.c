/* model_split.c: a dense block's backward in two calls, for zero-bubble pipeline schedules.
 * B (pl_block_backward_b) is the part the previous stage waits for: the gradient of the
 * block's input. W (pl_block_backward_w) is the part nothing downstream waits for: the
 * gradients of the block's weights, biases and layernorm parameters. B keeps in a struct
 * pl_block_wgrad the gradient at the output of each linear and each layernorm, which W
 * reads with the forward's saved activations; every product and sum is the same call on the
 * same operands as pl_block_backward's, so B then W gives bit-identical gradients and the
 * same FLOPs in the ledger, split between the two. */
#include "model.h"
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "mem.h"
#include "model_internal.h"
#include "ops.h"
#include "trace.h"

static void span(char phase, const char *part, int layer)
{
    char label[PL_LABEL_LEN];
    snprintf(label, sizeof label, "%c %s %d", phase, part, layer);
    pl_span(label);
}

static float *kept(size_t n, const char *label)
{
    return pl_mem_alloc(n * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, label);
}

void pl_block_wgrad_new(struct pl_block_wgrad *w, const struct pl_model_config *c, int B, int T)
{
    PL_REQUIRE(c->n_experts == 0,
               "the split backward is for dense blocks (n_experts=%d): an MoE block's "
               "backward is pl_block_backward", c->n_experts);
    PL_REQUIRE(B > 0 && T > 0 && T <= c->seq_len, "B=%d, T=%d: need B >= 1 and 1 <= T <= "
               "seq_len=%d", B, T, c->seq_len);
    const size_t N = (size_t)B * T, C = (size_t)c->d_model, F = (size_t)c->d_ff;
    memset(w, 0, sizeof *w);
    w->B = B;
    w->T = T;
    w->d_proj = kept(N * C, "W attn d proj");
    w->d_qkv = kept(N * 3 * C, "W attn d qkv");
    w->d_ln1 = kept(N * C, "W attn d ln1");
    w->d_fc2 = kept(N * C, "W mlp d fc2");
    w->d_fc = kept(N * F, "W mlp d fc");
    w->d_ln2 = kept(N * C, "W mlp d ln2");
}

void pl_block_wgrad_free(struct pl_block_wgrad *w)
{
    pl_mem_free(w->d_proj);
    pl_mem_free(w->d_qkv);
    pl_mem_free(w->d_ln1);
    pl_mem_free(w->d_fc2);
    pl_mem_free(w->d_fc);
    pl_mem_free(w->d_ln2);
    memset(w, 0, sizeof *w);
}

size_t pl_block_wgrad_bytes(const struct pl_model_config *c, int B, int T)
{
    return (size_t)B * T * (7 * (size_t)c->d_model + (size_t)c->d_ff) * sizeof(float);
}

static void check_shapes(const struct pl_model_config *c, const struct pl_block_acts *a,
                         const struct pl_block_wgrad *w, const char *op)
{
    PL_REQUIRE(c->n_experts == 0, "%s: dense blocks only (n_experts=%d)", op, c->n_experts);
    PL_REQUIRE(a->recompute == PL_RECOMPUTE_NONE,
               "%s: the acts were saved with recompute %s, but the split backward reads every "
               "saved activation (make them with pl_block_acts_new)", op,
               pl_recompute_name(a->recompute));
    PL_REQUIRE(w->d_proj && w->B == a->attn.B && w->T == a->attn.T,
               "%s: the wgrad holds B=%d, T=%d but the acts B=%d, T=%d (make it with "
               "pl_block_wgrad_new for the same microbatch)", op, w->B, w->T, a->attn.B,
               a->attn.T);
}

/* The attention half's B: dx = dy + d(ln1 path), the linears' output gradients kept. */
static void attn_b(const struct pl_model_config *c, int layer, const struct pl_block_params *p,
                   const struct pl_attn_acts *a, const struct pl_model_ctx *ctx,
                   struct pl_block_wgrad *w, const float *dy, float *dx)
{
    span('B', "attn", layer);
    const int B = a->B, T = a->T, C = c->d_model, N = B * T;
    struct pl_scratch *s = a->scratch;
    pl_model_branch_dropout_backward(c, layer, 0, ctx, w->d_proj, dy, B, T);
    float *dheads = pl_model_scratch_take(s, (size_t)N * C, "attn d heads");
    float *work = pl_model_scratch_take(s, a->lse ? pl_attention_flash_backward_work(B, T,
                                                                                  c->n_heads)
                                                  : pl_attention_backward_work(T, c->n_heads),
                                        "attn d scores");
    pl_matmul_backward(dheads, NULL, NULL, w->d_proj, a->y, p->w_proj, N, C, C);
    pl_zero(w->d_qkv, (size_t)N * 3 * C);
    if (a->lse) /* flash attention (cfg.attention) */
        pl_attention_flash_backward(w->d_qkv, dheads, a->qkv, a->y, a->lse, B, T, C,
                                    c->n_heads, work);
    else
        pl_attention_backward_in(w->d_qkv, dheads, a->qkv, a->att, B, T, C, c->n_heads, work);
    pl_model_scratch_give(s, work);
    pl_zero(w->d_ln1, (size_t)N * C);
    pl_matmul_backward(w->d_ln1, NULL, NULL, w->d_qkv, a->ln, p->w_qkv, N, C, 3 * C);
    if (dx != dy) pl_copy(dx, dy, (size_t)N * C);
    pl_layernorm_backward(dx, NULL, NULL, w->d_ln1, a->x, p->ln1_w, a->mean, a->rstd, N, C);
    pl_model_scratch_give(s, dheads);
}

/* The MLP half's B, dense. */
static void mlp_b(const struct pl_model_config *c, int layer, const struct pl_block_params *p,
                  const struct pl_mlp_acts *a, const struct pl_model_ctx *ctx,
                  struct pl_block_wgrad *w, const float *dy, float *dx)
{
    span('B', "mlp", layer);
    const int B = a->B, T = a->T, C = c->d_model, F = c->d_ff, N = B * T;
    pl_model_branch_dropout_backward(c, layer, 1, ctx, w->d_fc2, dy, B, T);
    pl_matmul_gelu_backward(w->d_fc, NULL, NULL, w->d_fc2, a->g, a->h, p->w_fc2, N, F, C);
    pl_zero(w->d_ln2, (size_t)N * C);
    pl_matmul_backward(w->d_ln2, NULL, NULL, w->d_fc, a->ln, p->w_fc, N, C, F);
    if (dx != dy) pl_copy(dx, dy, (size_t)N * C);
    pl_layernorm_backward(dx, NULL, NULL, w->d_ln2, a->x, p->ln2_w, a->mean, a->rstd, N, C);
}

void pl_block_backward_b(const struct pl_model_config *c, int layer,
                         const struct pl_block_params *p, const struct pl_block_acts *a,
                         const struct pl_model_ctx *ctx, struct pl_block_wgrad *w,
                         const float *dy, float *dx)
{
    check_shapes(c, a, w, "pl_block_backward_b");
    mlp_b(c, layer, p, &a->mlp, ctx, w, dy, dx);
    attn_b(c, layer, p, &a->attn, ctx, w, dx, dx);
}

void pl_block_backward_w(const struct pl_model_config *c, int layer,
                         const struct pl_block_params *p, const struct pl_block_params *g,
                         const struct pl_block_acts *a, const struct pl_block_wgrad *w)
{
    check_shapes(c, a, w, "pl_block_backward_w");
    const struct pl_attn_acts *at = &a->attn;
    const struct pl_mlp_acts *m = &a->mlp;
    const int C = c->d_model, F = c->d_ff, N = at->B * at->T;
    span('W', "mlp", layer);
    pl_matmul_backward(NULL, g->w_fc2, g->b_fc2, w->d_fc2, m->g, NULL, N, F, C);
    pl_matmul_backward(NULL, g->w_fc, g->b_fc, w->d_fc, m->ln, NULL, N, C, F);
    pl_layernorm_backward(NULL, g->ln2_w, g->ln2_b, w->d_ln2, m->x, p->ln2_w, m->mean, m->rstd,
                          N, C);
    span('W', "attn", layer);
    pl_matmul_backward(NULL, g->w_proj, g->b_proj, w->d_proj, at->y, NULL, N, C, C);
    pl_matmul_backward(NULL, g->w_qkv, g->b_qkv, w->d_qkv, at->ln, NULL, N, C, 3 * C);
    pl_layernorm_backward(NULL, g->ln1_w, g->ln1_b, w->d_ln1, at->x, p->ln1_w, at->mean,
                          at->rstd, N, C);
}
