/* test_sp_shard: the trusted pieces of sequence parallelism (lib/sp_shard.h) against
 * independent index arithmetic and the single-device ops: rank r's rows of a [B*T, C]
 * activation are tokens [r T/t, (r+1) T/t) of every sequence, the rank-major reordering
 * inverts, the sequence-length check names the valid values, the activations of an SP rank
 * are what the ledger sees (at t = 1 exactly the single device's), and the TP region's
 * partial sums over the t ranks' shards give the full attention and MLP, forward and
 * backward. */
#include <stdlib.h>
#include <string.h>

#include "paralab.h"
#include "sp_shard.h"
#include "testing.h"
#include "tp_shard.h"

static struct pl_model_config config(void)
{
    struct pl_model_config c = pl_model_config_default();
    c.vocab = 256;
    c.d_model = 64;
    c.n_heads = 8;
    c.d_ff = 128;
    c.n_layers = 1;
    c.seq_len = 16;
    return c;
}

static void check_rows(int t)
{
    const int B = 3, T = 4 * t, C = 5, Ts = T / t;
    const size_t nf = (size_t)B * T * C, nl = nf / t;
    float *full = malloc(nf * sizeof *full), *loc = malloc(nl * sizeof *loc);
    float *rm = malloc(nf * sizeof *rm), *back = malloc(nf * sizeof *back);
    for (size_t i = 0; i < nf; i++) full[i] = (float)i;
    /* the functions take op memory: each result is read back to be checked */
    float *d_full = op_from_host(full, nf * sizeof *full), *d_loc = op_alloc(nl * sizeof *loc);
    float *d_rm = op_alloc(nf * sizeof *rm), *d_back = op_alloc(nf * sizeof *back);
    for (int r = 0; r < t; r++) {
        pl_sp_slice(d_loc, d_full, B, T, C, t, r);
        pl_to_host(loc, d_loc, nl * sizeof *loc);
        int ok = 1;
        for (int b = 0; b < B; b++)
            for (int i = 0; i < Ts; i++)
                for (int j = 0; j < C; j++)
                    ok &= loc[((size_t)b * Ts + i) * C + j] ==
                          full[((size_t)b * T + (size_t)r * Ts + i) * C + j];
        CHECK(ok, "t=%d rank %d: local row b T/t + i is token r T/t + i of sequence b", t, r);
    }
    pl_sp_to_rank_major(d_rm, d_full, B, T, C, t);
    pl_sp_slice(d_loc, d_full, B, T, C, t, t - 1);
    pl_to_host(rm, d_rm, nf * sizeof *rm);
    pl_to_host(loc, d_loc, nl * sizeof *loc);
    CHECK(!memcmp(rm + (size_t)(t - 1) * nl, loc, nl * sizeof *loc),
          "t=%d: rank-major block r is rank r's rows", t);
    pl_sp_from_rank_major(d_back, d_rm, B, T, C, t);
    pl_to_host(back, d_back, nf * sizeof *back);
    CHECK(!memcmp(back, full, nf * sizeof *full), "t=%d: from_rank_major inverts to_rank_major",
          t);
    float *op[] = {d_full, d_loc, d_rm, d_back};
    for (size_t i = 0; i < sizeof op / sizeof *op; i++) pl_mem_free(op[i]);
    free(full);
    free(loc);
    free(rm);
    free(back);
}

static void check_seq_error(void)
{
    struct pl_model_config c = config();
    char err[320];
    CHECK(pl_sp_seq_error(&c, 4, 8, err, sizeof err) == 0, "t=4 splits T=8");
    CHECK(pl_sp_seq_error(&c, 4, 6, err, sizeof err) == -1 &&
              strstr(err, "T=6 tokens per sequence is not divisible by t=4") &&
              strstr(err, "choose T in {4,8,12,16} or t in {1,2}"),
          "T=6 on t=4 names the valid values: %s", err);
    CHECK(pl_sp_seq_error(&c, 3, 6, err, sizeof err) == -1 && strstr(err, "n_heads=8"),
          "t=3 is refused for the heads: %s", err);
}

static double activ_now(void)
{
    struct pl_mem_stats s;
    pl_mem_get_stats(&s);
    return (double)s.current[PL_MEM_ACTIV];
}

static void check_acts(void)
{
    struct pl_model_config c = config();
    for (int t = 1; t <= 4; t *= 2) {
        double before = activ_now();
        struct pl_sp_block_acts a;
        pl_sp_block_acts_new(&a, &c, t, 2, 16);
        double got = activ_now() - before;
        pl_sp_block_acts_free(&a);
        CHECK(got == pl_sp_block_act_bytes(&c, t, 2, 16), "t=%d: acts %.0f B, formula %.0f B", t,
              got, pl_sp_block_act_bytes(&c, t, 2, 16));
    }
    double before = activ_now();
    struct pl_block_acts ref;
    pl_block_acts_new(&ref, &c, 2, 16);
    double single = activ_now() - before;
    pl_block_acts_free(&ref);
    CHECK(single == pl_sp_block_act_bytes(&c, 1, 2, 16),
          "t=1: the SP formula is the single device's acts (%.0f B)", single);
}

/* The relative L2 distance of two arrays of op memory, compared on the host. */
static double rel(const float *got, const float *want, size_t n)
{
    float *g = malloc(n * sizeof *g), *w = malloc(n * sizeof *w);
    pl_to_host(g, got, n * sizeof *g);
    pl_to_host(w, want, n * sizeof *w);
    double d = pl_rel_l2(g, w, n);
    free(g);
    free(w);
    return d;
}

/* Sum over the t ranks' shards of the core's partials (+ bias once) = the full sub-layer. */
static void check_core(int t)
{
    struct pl_model_config c = config();
    const int B = 2, T = 8, N = B * T, C = c.d_model, F = c.d_ff;
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, &c);
    /* every array is op memory, the random values drawn on the host and copied in */
    float *host = malloc(lay.block_numel * sizeof *host), *dy_h = malloc((size_t)N * C * 4);
    pl_rng_fill_normal(host, lay.block_numel, 7, pl_rng_stream("test.sp.block"), 0, 0, 0.1f);
    float *full = op_from_host(host, lay.block_numel * sizeof *host);
    struct pl_block_params p;
    pl_block_bind(&c, full, &p);
    pl_rng_fill_normal(host, (size_t)N * C, 7, pl_rng_stream("test.sp.ln"), 0, 0, 1);
    float *ln = op_from_host(host, (size_t)N * C * sizeof *host);
    pl_rng_fill_normal(dy_h, (size_t)N * C, 7, pl_rng_stream("test.sp.dy"), 0, 0, 1);
    float *dy = op_from_host(dy_h, (size_t)N * C * sizeof *dy_h);
    /* the single device's MLP and its dln */
    float *h = op_alloc((size_t)N * F * sizeof *h), *g = op_alloc((size_t)N * F * sizeof *g);
    float *dg = op_alloc((size_t)N * F * sizeof *dg), *dh = op_alloc((size_t)N * F * 4);
    float *y = op_alloc((size_t)N * C * sizeof *y), *dln = op_alloc((size_t)N * C * 4);
    pl_matmul_forward(h, ln, p.w_fc, p.b_fc, N, C, F);
    pl_gelu_forward(g, h, (size_t)N * F);
    pl_matmul_forward(y, g, p.w_fc2, p.b_fc2, N, F, C);
    pl_matmul_backward(dg, NULL, NULL, dy, g, p.w_fc2, N, F, C);
    pl_gelu_backward(dh, dg, h, (size_t)N * F);
    pl_matmul_backward(dln, NULL, NULL, dh, ln, p.w_fc, N, C, F);
    /* the attention's output */
    float *qkv = op_alloc((size_t)N * 3 * C * sizeof *qkv), *hd = op_alloc((size_t)N * C * 4);
    float *att = op_alloc((size_t)B * c.n_heads * T * T * sizeof *att);
    float *ya = op_alloc((size_t)N * C * sizeof *ya);
    pl_matmul_forward(qkv, ln, p.w_qkv, p.b_qkv, N, C, 3 * C);
    pl_attention_forward(hd, att, qkv, B, T, C, c.n_heads);
    pl_matmul_forward(ya, hd, p.w_proj, p.b_proj, N, C, C);

    float *sum_y = op_alloc((size_t)N * C * 4), *sum_ya = op_alloc((size_t)N * C * 4);
    float *sum_dln = op_alloc((size_t)N * C * sizeof *sum_dln);
    float *part = op_alloc((size_t)N * C * sizeof *part), *dpart = op_alloc((size_t)N * C * 4);
    size_t sn = pl_tp_block_numel(&c, t);
    float *shard = op_alloc(sn * sizeof *shard), *shard_g = op_alloc(sn * sizeof *shard_g);
    for (int r = 0; r < t; r++) {
        struct pl_block_params sp, sg;
        pl_tp_block_slice(&c, t, r, full, shard);
        pl_tp_block_bind(&c, t, shard, &sp);
        pl_tp_block_bind(&c, t, shard_g, &sg);
        struct pl_sp_block_acts a;
        pl_sp_block_acts_new(&a, &c, t, B, T);
        pl_sp_mlp_core_forward(&c, &sp, &a, ln, part);
        pl_accumulate(sum_y, part, (size_t)N * C);
        pl_sp_mlp_core_backward(&c, &sp, &sg, &a, ln, dy, dpart);
        pl_accumulate(sum_dln, dpart, (size_t)N * C);
        pl_sp_attn_core_forward(&c, &sp, &a, ln, part);
        pl_accumulate(sum_ya, part, (size_t)N * C);
        pl_sp_block_acts_free(&a);
    }
    pl_tp_add_bias(sum_y, p.b_fc2, N, C);
    pl_tp_add_bias(sum_ya, p.b_proj, N, C);
    CHECK(rel(sum_y, y, (size_t)N * C) < 1e-5, "t=%d: MLP partials + bias = the MLP (%.2e)", t,
          rel(sum_y, y, (size_t)N * C));
    CHECK(rel(sum_dln, dln, (size_t)N * C) < 1e-5, "t=%d: MLP dln partials sum to dln (%.2e)",
          t, rel(sum_dln, dln, (size_t)N * C));
    CHECK(rel(sum_ya, ya, (size_t)N * C) < 1e-5, "t=%d: attention partials + bias (%.2e)", t,
          rel(sum_ya, ya, (size_t)N * C));
    float *db = op_alloc((size_t)C * sizeof *db), *want = op_alloc((size_t)C * sizeof *want);
    pl_sp_bias_backward(db, dy, N, C);
    memset(host, 0, (size_t)C * sizeof *host);
    for (int n = 0; n < N; n++)
        for (int j = 0; j < C; j++) host[j] += dy_h[(size_t)n * C + j];
    pl_to_device(want, host, (size_t)C * sizeof *host);
    CHECK(rel(db, want, (size_t)C) < 1e-6, "t=%d: the bias gradient sums the rows", t);
    void *fr[] = {full, ln, dy, h, g, dg, dh, y, dln, qkv, hd, att, ya, sum_y, sum_ya,
                  sum_dln, part, dpart, shard, shard_g, db, want};
    for (size_t i = 0; i < sizeof fr / sizeof *fr; i++) pl_mem_free(fr[i]);
    free(host);
    free(dy_h);
    pl_model_layout_free(&lay);
}

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    for (int t = 1; t <= 4; t *= 2) check_rows(t);
    check_seq_error();
    check_acts();
    for (int t = 1; t <= 4; t *= 2) check_core(t);
    printf("test_sp_shard: %d checks, %d failed\n", checks, failures);
    pl_finalize();
    return failures != 0;
}
