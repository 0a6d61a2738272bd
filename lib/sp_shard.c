/* sp_shard.c: the sequence-parallel layout on top of the TP shard, the TP region's local
 * compute and the activations of one SP rank (see sp_shard.h). */
#include "sp_shard.h"

#include <stdio.h>
#include <string.h>

#include "check.h"
#include "mem.h"
#include "ops.h"
#include "tp_shard.h"

int pl_sp_seq_error(const struct pl_model_config *c, int t, int T, char *err, size_t len)
{
    if (pl_tp_degree_error(c, t, err, len)) return -1;
    if (T >= 1 && T % t == 0) return 0;
    char ts[128] = "", ds[64] = "";
    size_t at = 0;
    for (int k = t; k <= c->seq_len && at < sizeof ts; k += t)
        at += (size_t)snprintf(ts + at, sizeof ts - at, "%s%d", at ? "," : "", k);
    at = 0;
    for (int d = 1; d <= (T > 0 ? T : 1) && at < sizeof ds; d++) {
        char tmp[8];
        if (T > 0 && T % d == 0 && !pl_tp_degree_error(c, d, tmp, sizeof tmp))
            at += (size_t)snprintf(ds + at, sizeof ds - at, "%s%d", at ? "," : "", d);
    }
    snprintf(err, len, "T=%d tokens per sequence is not divisible by t=%d: each rank holds "
             "T/t tokens of every sequence (choose T in {%s} or t in {%s})", T, t,
             ts[0] ? ts : "none up to seq_len", ds[0] ? ds : "1");
    return -1;
}

/* ---- rows ---- */

void pl_sp_slice(float *local, const float *full, int B, int T, int C, int t, int r)
{
    const size_t Ts = (size_t)(T / t);
    for (int b = 0; b < B; b++)
        pl_copy(local + (size_t)b * Ts * C, full + ((size_t)b * T + (size_t)r * Ts) * C,
                Ts * (size_t)C);
}

void pl_sp_unslice(float *full, const float *local, int B, int T, int C, int t, int r)
{
    const size_t Ts = (size_t)(T / t);
    for (int b = 0; b < B; b++)
        pl_copy(full + ((size_t)b * T + (size_t)r * Ts) * C, local + (size_t)b * Ts * C,
                Ts * (size_t)C);
}

void pl_sp_to_rank_major(float *dst, const float *seq, int B, int T, int C, int t)
{
    const size_t per_rank = (size_t)B * (T / t) * C;
    for (int r = 0; r < t; r++) pl_sp_slice(dst + r * per_rank, seq, B, T, C, t, r);
}

void pl_sp_from_rank_major(float *seq, const float *dst, int B, int T, int C, int t)
{
    const size_t per_rank = (size_t)B * (T / t) * C;
    for (int r = 0; r < t; r++) pl_sp_unslice(seq, dst + r * per_rank, B, T, C, t, r);
}

/* ---- activations ---- */

static float *activ(size_t n, const char *label)
{
    return pl_mem_alloc(n * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, label);
}

void pl_sp_block_acts_new(struct pl_sp_block_acts *a, const struct pl_model_config *c, int t,
                          int B, int T)
{
    pl_sp_block_acts_new_scores(a, c, t, B, T, 1);
}

void pl_sp_block_acts_new_scores(struct pl_sp_block_acts *a, const struct pl_model_config *c,
                                 int t, int B, int T, int scores)
{
    char err[320];
    if (pl_sp_seq_error(c, t, T, err, sizeof err)) pl_usage_error("%s", err);
    PL_REQUIRE(B > 0 && T <= c->seq_len, "B=%d sequences of T=%d tokens (need B >= 1 and "
               "T <= seq_len=%d)", B, T, c->seq_len);
    memset(a, 0, sizeof *a);
    const size_t N = (size_t)B * T, Nl = N / (size_t)t, C = (size_t)c->d_model;
    const size_t F = (size_t)c->d_ff, nh = (size_t)(c->n_heads / t);
    a->B = B;
    a->T = T;
    a->t = t;
    a->x1 = activ(Nl * C, "sp attn x");
    a->ln1 = activ(Nl * C, "sp attn ln1");
    a->mean1 = activ(Nl, "sp attn ln1 mean");
    a->rstd1 = activ(Nl, "sp attn ln1 rstd");
    a->qkv = activ(N * 3 * C / (size_t)t, "sp attn qkv");
    if (scores) a->att = activ((size_t)B * nh * (size_t)T * (size_t)T, "sp attn scores");
    a->heads = activ(N * C / (size_t)t, "sp attn heads");
    a->x2 = activ(Nl * C, "sp mlp x");
    a->ln2 = activ(Nl * C, "sp mlp ln2");
    a->mean2 = activ(Nl, "sp mlp ln2 mean");
    a->rstd2 = activ(Nl, "sp mlp ln2 rstd");
    a->h = activ(N * F / (size_t)t, "sp mlp fc");
    a->g = activ(N * F / (size_t)t, "sp mlp gelu");
}

void pl_sp_block_acts_free(struct pl_sp_block_acts *a)
{
    float *p[] = {a->x1, a->ln1, a->mean1, a->rstd1, a->qkv, a->att, a->heads,
                  a->x2, a->ln2, a->mean2, a->rstd2, a->h,   a->g};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) pl_mem_free(p[i]);
    memset(a, 0, sizeof *a);
}

double pl_sp_block_act_bytes(const struct pl_model_config *c, int t, int B, int T)
{
    double N = (double)B * T, C = c->d_model, F = c->d_ff, NH = c->n_heads;
    return 4.0 / t * (8 * N * C + 2 * N * F + 4 * N + B * NH * (double)T * T);
}

/* ---- the TP region, local compute ---- */

static float *work(size_t n, const char *label)
{
    return pl_mem_alloc(n * sizeof(float), PL_MEM_WORK, PL_DEVICE, label);
}

void pl_sp_attn_core_forward(const struct pl_model_config *c, const struct pl_block_params *p,
                             struct pl_sp_block_acts *a, const float *ln, float *partial)
{
    const int t = a->t, N = a->B * a->T, C = c->d_model, Ct = C / t, NHt = c->n_heads / t;
    pl_matmul_forward(a->qkv, ln, p->w_qkv, p->b_qkv, N, C, 3 * Ct);
    /* this rank's Ct channels of q, k and v are NH/t whole heads */
    pl_attention_forward(a->heads, a->att, a->qkv, a->B, a->T, Ct, NHt);
    pl_matmul_forward(partial, a->heads, p->w_proj, NULL, N, Ct, C);
}

void pl_sp_attn_core_backward(const struct pl_model_config *c, const struct pl_block_params *p,
                              const struct pl_block_params *g, const struct pl_sp_block_acts *a,
                              const float *ln, const float *dbranch, float *dln)
{
    const int t = a->t, N = a->B * a->T, C = c->d_model, Ct = C / t, NHt = c->n_heads / t;
    float *dheads = work((size_t)N * Ct, "sp attn d heads");
    float *dqkv = work((size_t)N * 3 * Ct, "sp attn d qkv");
    pl_matmul_backward(dheads, g->w_proj, NULL, dbranch, a->heads, p->w_proj, N, Ct, C);
    pl_attention_backward(dqkv, dheads, a->qkv, a->att, a->B, a->T, Ct, NHt);
    pl_zero(dln, (size_t)N * C);
    pl_matmul_backward(dln, g->w_qkv, g->b_qkv, dqkv, ln, p->w_qkv, N, C, 3 * Ct);
    pl_mem_free(dheads);
    pl_mem_free(dqkv);
}

void pl_sp_mlp_core_forward(const struct pl_model_config *c, const struct pl_block_params *p,
                            struct pl_sp_block_acts *a, const float *ln, float *partial)
{
    const int N = a->B * a->T, C = c->d_model, Ft = c->d_ff / a->t;
    pl_matmul_forward(a->h, ln, p->w_fc, p->b_fc, N, C, Ft);
    pl_gelu_forward(a->g, a->h, (size_t)N * Ft);
    pl_matmul_forward(partial, a->g, p->w_fc2, NULL, N, Ft, C);
}

void pl_sp_mlp_core_backward(const struct pl_model_config *c, const struct pl_block_params *p,
                             const struct pl_block_params *g, const struct pl_sp_block_acts *a,
                             const float *ln, const float *dbranch, float *dln)
{
    const int N = a->B * a->T, C = c->d_model, Ft = c->d_ff / a->t;
    float *dg = work((size_t)N * Ft, "sp mlp d gelu");
    float *dh = work((size_t)N * Ft, "sp mlp d fc");
    pl_matmul_backward(dg, g->w_fc2, NULL, dbranch, a->g, p->w_fc2, N, Ft, C);
    pl_gelu_backward(dh, dg, a->h, (size_t)N * Ft);
    pl_zero(dln, (size_t)N * C);
    pl_matmul_backward(dln, g->w_fc, g->b_fc, dh, ln, p->w_fc, N, C, Ft);
    pl_mem_free(dg);
    pl_mem_free(dh);
}

void pl_sp_bias_backward(float *db, const float *dy, int N, int OC)
{
    PL_REQUIRE(N > 0 && OC > 0, "pl_sp_bias_backward: N=%d rows of OC=%d (both must be "
               "positive)", N, OC);
    /* db[1, OC] += ones[1, N] @ dy[N, OC], through the kit's sgemm on either backend */
    float *ones = work((size_t)N, "sp ones");
    float *h = pl_mem_alloc((size_t)N * sizeof *h, PL_MEM_WORK, PL_HOST, "sp ones host");
    for (int i = 0; i < N; i++) h[i] = 1.0f;
    pl_to_device(ones, h, (size_t)N * sizeof *h);
    pl_sgemm(0, 0, 1, OC, N, 1.0f, ones, N, dy, OC, 1.0f, db, OC);
    pl_mem_free(h);
    pl_mem_free(ones);
}
