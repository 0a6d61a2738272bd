/* test_sp_block: the kit's TP+SP block on a TP group (lib/sp_block.h) against the single
 * device's block (pl_block_forward/backward) on the same input, with dropout on: each rank's
 * output and input gradient are its tokens' rows of the single device's, and its shard's
 * gradients, once the replicated ones are summed over the group, are the slice of the
 * single device's; the conjugates are each other's reverse. With recomputation (selective,
 * full) the activation bytes kept are sp_block.h's formula, the rerun is counted as
 * recomputed FLOPs, and dx and the gradients are bit for bit those without. Runs with the
 * world as the TP group (1, 2 and 4 ranks). */
#include <stdlib.h>
#include <string.h>

#include "ledger.h"
#include "paralab.h"
#include "sp_block.h"
#include "testing.h"
#include "tp_shard.h"

static struct pl_model_config config(void)
{
    struct pl_model_config c = pl_model_config_default();
    c.vocab = 256;
    c.d_model = 32;
    c.n_heads = 4;
    c.d_ff = 64;
    c.n_layers = 2;
    c.seq_len = 8;
    c.dropout = 0.1f;
    return c;
}

static double rel_host(const float *got_op, const float *want_host, size_t n)
{
    float *g = malloc(n * sizeof *g);
    pl_to_host(g, got_op, n * sizeof *g);
    double d = pl_rel_l2(g, want_host, n);
    free(g);
    return d;
}

/* Both sides in op memory (the slicing helpers copy on the device in the GPU build). */
static double rel_op(const float *got_op, const float *want_op, size_t n)
{
    float *w = malloc(n * sizeof *w);
    pl_to_host(w, want_op, n * sizeof *w);
    double d = rel_host(got_op, w, n);
    free(w);
    return d;
}

static void check_block(struct pl_comm *tp)
{
    const struct pl_model_config c = config();
    const int t = pl_comm_size(tp), r = pl_comm_rank(tp), B = 2, T = c.seq_len, C = c.d_model;
    const int layer = 1, N = B * T, Nl = N / t;
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, &c);
    const size_t bn = lay.block_numel, n = (size_t)N * C, nl = (size_t)Nl * C;
    float *host = malloc(bn * sizeof *host);
    pl_rng_fill_normal(host, bn, 11, pl_rng_stream("test.spb.params"), 0, 0, 0.1f);
    float *full = op_from_host(host, bn * sizeof *host), *full_g = op_alloc(bn * sizeof *host);
    float *xh = malloc(n * sizeof *xh), *dyh = malloc(n * sizeof *dyh);
    pl_rng_fill_normal(xh, n, 11, pl_rng_stream("test.spb.x"), 0, 0, 1);
    pl_rng_fill_normal(dyh, n, 11, pl_rng_stream("test.spb.dy"), 0, 0, 1);
    float *x = op_from_host(xh, n * 4), *dy = op_from_host(dyh, n * 4);
    float *y = op_alloc(n * 4), *dx = op_alloc(n * 4);
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1, ctx.seed = 5, ctx.step = 3, ctx.seq0 = 4;
    /* the single device */
    struct pl_block_params p, g;
    pl_block_bind(&c, full, &p);
    pl_block_bind(&c, full_g, &g);
    struct pl_block_acts a;
    pl_block_acts_new(&a, &c, B, T);
    pl_block_forward(&c, layer, &p, &a, &ctx, x, y);
    pl_block_backward(&c, layer, &p, &g, &a, &ctx, dy, dx);
    pl_block_acts_free(&a);
    /* this rank of the TP group */
    const size_t sn = pl_tp_block_numel(&c, t);
    float *shard = op_alloc(sn * 4), *shard_g = op_alloc(sn * 4);
    pl_tp_block_slice(&c, t, r, full, shard);
    struct pl_block_params sp, sg;
    pl_tp_block_bind(&c, t, shard, &sp);
    pl_tp_block_bind(&c, t, shard_g, &sg);
    float *xl = op_alloc(nl * 4), *yl = op_alloc(nl * 4), *dyl = op_alloc(nl * 4);
    float *dxl = op_alloc(nl * 4), *want = op_alloc(nl * 4);
    pl_sp_slice(xl, x, B, T, C, t, r);
    pl_sp_slice(dyl, dy, B, T, C, t, r);
    struct pl_sp_block_acts sa;
    pl_sp_block_acts_new(&sa, &c, t, B, T);
    pl_sp_block_forward(tp, &c, layer, &sp, &sa, &ctx, xl, yl);
    pl_sp_block_backward(tp, &c, layer, &sp, &sg, &sa, &ctx, dyl, dxl);
    pl_sp_block_sync_grads(tp, &c, &sg);
    pl_sp_block_acts_free(&sa);
    pl_sp_slice(want, y, B, T, C, t, r);
    CHECK(rel_op(yl, want, nl) < 1e-5, "t=%d rank %d: output = the single device's rows (%.2e)",
          t, r, rel_op(yl, want, nl));
    pl_sp_slice(want, dx, B, T, C, t, r);
    CHECK(rel_op(dxl, want, nl) < 1e-5, "t=%d rank %d: dx = the single device's rows (%.2e)",
          t, r, rel_op(dxl, want, nl));
    float *gw = op_alloc(sn * 4);
    pl_tp_block_slice(&c, t, r, full_g, gw);
    CHECK(rel_op(shard_g, gw, sn) < 1e-5,
          "t=%d rank %d: shard gradients = the slice of the single device's (%.2e)", t, r,
          rel_op(shard_g, gw, sn));
    /* the conjugates: gather then reduce-scatter gives t times the rows back */
    float *whole = op_alloc(n * 4), *back = op_alloc(nl * 4);
    pl_sp_gather(tp, whole, xl, B, T, C);
    CHECK(rel_host(whole, xh, n) == 0, "t=%d rank %d: gather gives every token", t, r);
    pl_sp_reduce_scatter(tp, back, whole, B, T, C);
    pl_scale(back, nl, 1.0f / (float)t);
    pl_sp_slice(want, x, B, T, C, t, r);
    CHECK(rel_op(back, want, nl) < 1e-6, "t=%d rank %d: reduce-scatter sums the rows", t, r);
    void *ops[] = {full, full_g, x,  dy,   y,     dx,   shard, shard_g,
                   xl,   yl,     dyl, dxl, whole, back, want,  gw};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) pl_mem_free(ops[i]);
    void *hs[] = {host, xh, dyh};
    for (size_t i = 0; i < sizeof hs / sizeof *hs; i++) free(hs[i]);
    pl_model_layout_free(&lay);
}

static double activ_now(void)
{
    struct pl_mem_stats s;
    pl_mem_get_stats(&s);
    return (double)s.current[PL_MEM_ACTIV];
}

/* One forward and backward with recomputation r on this rank's shard; dx and the shard's
 * gradients (host copies) into dxh, gh; the activation bytes kept and the FLOPs rerun. */
static void run_saved(struct pl_comm *tp, enum pl_recompute r, float *dxh, float *gh,
                      double *kept, double *rerun)
{
    const struct pl_model_config c = config();
    const int t = pl_comm_size(tp), rk = pl_comm_rank(tp), B = 2, T = c.seq_len, C = c.d_model;
    const size_t nl = (size_t)B * T / (size_t)t * (size_t)C, sn = pl_tp_block_numel(&c, t);
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, &c);
    float *host = malloc(lay.block_numel * sizeof *host);
    pl_rng_fill_normal(host, lay.block_numel, 11, pl_rng_stream("test.spb.params"), 0, 0, 0.1f);
    float *xh = malloc(nl * 4), *full = op_from_host(host, lay.block_numel * sizeof *host);
    pl_rng_fill_normal(xh, nl, 13 + (uint64_t)rk, pl_rng_stream("test.spb.xl"), 0, 0, 1);
    float *shard = op_alloc(sn * 4), *shard_g = op_alloc(sn * 4);
    pl_tp_block_slice(&c, t, rk, full, shard);
    pl_mem_free(full);
    float *x = op_from_host(xh, nl * 4), *y = op_alloc(nl * 4), *dx = op_alloc(nl * 4);
    struct pl_block_params p, g;
    pl_tp_block_bind(&c, t, shard, &p);
    pl_tp_block_bind(&c, t, shard_g, &g);
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1, ctx.seed = 5, ctx.step = 2, ctx.seq0 = 6;
    double before = activ_now(), fl0 = pl_ledger()->flops_recompute;
    struct pl_sp_block_saved s;
    pl_sp_block_saved_new(&s, &c, t, B, T, r);
    pl_sp_block_forward_saved(tp, &c, 1, &p, &s, &ctx, x, y);
    *kept = activ_now() - before;
    pl_sp_block_backward_saved(tp, &c, 1, &p, &g, &s, &ctx, y, dx);
    *rerun = pl_ledger()->flops_recompute - fl0;
    pl_sp_block_saved_free(&s);
    pl_sp_block_sync_grads(tp, &c, &g);
    pl_to_host(dxh, dx, nl * 4);
    pl_to_host(gh, shard_g, sn * 4);
    void *ops[] = {shard, shard_g, x, y, dx};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) pl_mem_free(ops[i]);
    free(host);
    free(xh);
    pl_model_layout_free(&lay);
}

static void check_recompute(struct pl_comm *tp)
{
    const struct pl_model_config c = config();
    const int t = pl_comm_size(tp), B = 2, T = c.seq_len;
    const size_t nl = (size_t)B * T / (size_t)t * (size_t)c.d_model, sn = pl_tp_block_numel(&c, t);
    float *dx0 = malloc(nl * 4), *g0 = malloc(sn * 4), *dx = malloc(nl * 4), *g = malloc(sn * 4);
    double kept, rerun;
    run_saved(tp, PL_RECOMPUTE_NONE, dx0, g0, &kept, &rerun);
    for (int r = PL_RECOMPUTE_NONE; r <= PL_RECOMPUTE_FULL; r++) {
        const char *name = pl_recompute_name((enum pl_recompute)r);
        run_saved(tp, (enum pl_recompute)r, dx, g, &kept, &rerun);
        double want = pl_sp_block_saved_bytes(&c, t, B, T, (enum pl_recompute)r);
        CHECK(kept == want, "t=%d recompute %s: %.0f bytes kept, the formula %.0f", t, name,
              kept, want);
        CHECK(r == PL_RECOMPUTE_NONE ? rerun == 0 : rerun > 0,
              "t=%d recompute %s: %.0f FLOPs counted as recomputed", t, name, rerun);
        CHECK(!memcmp(dx, dx0, nl * 4) && !memcmp(g, g0, sn * 4),
              "t=%d recompute %s: dx and the gradients bit for bit those of none", t, name);
    }
    CHECK(pl_sp_block_saved_bytes(&c, t, B, T, PL_RECOMPUTE_NONE) ==
              pl_sp_block_act_bytes(&c, t, B, T),
          "t=%d: none keeps what pl_sp_block_act_bytes counts", t);
    free(dx0);
    free(g0);
    free(dx);
    free(g);
}

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    check_block(pl_comm_world());
    check_recompute(pl_comm_world());
    if (pl_rank() == 0) printf("test_sp_block: %d checks, %d failed\n", checks, failures);
    pl_finalize();
    return failures != 0;
}
