/* test_flash: flash attention (ops.h pl_attention_flash_*, kernels.h pl_k_flash_*) and the
 * reference model's attention option (cfg.attention = flash, recompute.h).
 *   - the op: its output, its saved log-sum-exp and its gradients against the materialised
 *     ops (fp32, another summation order) and against a double implementation written here
 *     (the log-sum-exp directly, the gradients by central finite differences), on shapes
 *     around the tile size pl_k_flash_tile(HS): T = 1, one row short of a tile, a tile, one
 *     more, several tiles with a short last one, head sizes that are not powers of two and
 *     one whose tile is shorter than PL_FLASH_TILE; the backward accumulates (+=), a work
 *     buffer full of garbage changes nothing, two runs agree bit for bit (no atomics on the
 *     GPU), and the FLOPs charged are ops.h's;
 *   - the model: with flash, the activation bytes a block saves are selective
 *     recomputation's (no T x T probabilities) plus B x NH x T floats of log-sum-exp, the
 *     memory ledger's activation peak over a step is pl_model_activ_bytes for every
 *     recompute choice, the recompute choices train bit for bit alike, and losses and
 *     gradients match the materialised model's to fp32 rounding.
 * Runs on either build (through the CUDA stand-in too).
 *     test_flash                  all checks
 *     test_flash bad-head-size    a head wider than a tile row: usage error on purpose */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "ledger.h"
#include "model.h"
#include "ops.h"
#include "paralab.h"
#include "testing.h"

/* flash against materialised, both fp32: the same math summed in another order */
#define F32_ATOL 2e-5
#define F32_RTOL 2e-4
/* against double (finite differences of the double forward) as test_ops holds the ops */
#define FD_ATOL 1e-4
#define FD_RTOL 1e-3
#define FD_STEP 1e-6

static float *dev_from(const float *h, size_t n)
{
    return op_from_host(h, n * sizeof *h);
}

static float *host_of(const float *d, size_t n)
{
    float *h = malloc((n ? n : 1) * sizeof *h);
    PL_ASSERT(h);
    pl_to_host(h, d, n * sizeof *h);
    return h;
}

static float *rand_host(size_t n, uint64_t stream)
{
    float *h = malloc((n ? n : 1) * sizeof *h);
    PL_ASSERT(h);
    for (size_t i = 0; i < n; i++) h[i] = (float)pl_rng_normal(77, stream, i);
    return h;
}

/* Elements off by more than atol + rtol |want|; the worst printed. */
static void expect_near(const char *label, const char *what, const float *got,
                        const double *want, size_t n, double atol, double rtol)
{
    size_t bad = 0, worst_at = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs(got[i] - want[i]);
        if (!(err <= atol + rtol * fabs(want[i]))) bad++;
        if (!(err <= worst)) worst = err, worst_at = i;
    }
    CHECK(bad == 0, "%s: %s: %zu of %zu elements off; worst at %zu: %.9g, want %.9g", label,
          what, bad, n, worst_at, (double)got[worst_at], want[worst_at]);
}

static double *widen(const float *x, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    PL_ASSERT(d);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

/* ---- the double reference ------------------------------------------------------------- */

/* out [B,T,C] and lse [B,NH,T] (either may be NULL) of causal attention on qkv, in double. */
static void ref_forward(const double *qkv, int B, int T, int C, int NH, double *out,
                        double *lse)
{
    const int HS = C / NH;
    const double scale = 1.0 / sqrt((double)HS);
    double *s = malloc((size_t)T * sizeof *s);
    PL_ASSERT(s);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                const double *q = qkv + ((size_t)b * T + i) * 3 * C + (size_t)h * HS;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j <= i; j++) {
                    const double *k = qkv + ((size_t)b * T + j) * 3 * C + C + (size_t)h * HS;
                    double d = 0;
                    for (int e = 0; e < HS; e++) d += q[e] * k[e];
                    s[j] = d * scale;
                    mx = fmax(mx, s[j]);
                }
                for (int j = 0; j <= i; j++) sum += (s[j] = exp(s[j] - mx));
                if (lse) lse[((size_t)b * NH + h) * T + i] = mx + log(sum);
                if (!out) continue;
                for (int e = 0; e < HS; e++) {
                    double o = 0;
                    for (int j = 0; j <= i; j++)
                        o += s[j] / sum *
                             qkv[((size_t)b * T + j) * 3 * C + 2 * C + (size_t)h * HS + e];
                    out[((size_t)b * T + i) * C + (size_t)h * HS + e] = o;
                }
            }
    free(s);
}

/* d(sum w * out)/d(qkv) by central differences of the double forward. */
static double *ref_grad_fd(const double *qkv0, const double *w, int B, int T, int C, int NH)
{
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C;
    double *qkv = malloc(nq * sizeof *qkv), *out = malloc(no * sizeof *out),
           *g = malloc(nq * sizeof *g);
    PL_ASSERT(qkv && out && g);
    memcpy(qkv, qkv0, nq * sizeof *qkv);
    for (size_t e = 0; e < nq; e++) {
        double keep = qkv[e], lp = 0, lm = 0;
        qkv[e] = keep + FD_STEP;
        ref_forward(qkv, B, T, C, NH, out, NULL);
        for (size_t i = 0; i < no; i++) lp += w[i] * out[i];
        qkv[e] = keep - FD_STEP;
        ref_forward(qkv, B, T, C, NH, out, NULL);
        for (size_t i = 0; i < no; i++) lm += w[i] * out[i];
        qkv[e] = keep;
        g[e] = (lp - lm) / (2 * FD_STEP);
    }
    free(qkv);
    free(out);
    return g;
}

/* ---- the op ------------------------------------------------------------------------------ */

static double flops_charged(double *recompute)
{
    static double f0, r0;
    double f = pl_ledger()->flops - f0, r = pl_ledger()->flops_recompute - r0;
    f0 = pl_ledger()->flops;
    r0 = pl_ledger()->flops_recompute;
    if (recompute) *recompute = r;
    return f;
}

static void test_op(int B, int T, int C, int NH, int with_fd)
{
    const int HS = C / NH, R = pl_k_flash_tile(HS);
    char label[128];
    snprintf(label, sizeof label, "flash B=%d T=%d C=%d NH=%d (HS %d, tiles of %d rows)", B, T,
             C, NH, HS, R);
    const size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C;
    const size_t nl = (size_t)B * NH * T, natt = nl * T;
    static uint64_t stream = 1;
    float *hq = rand_host(nq, stream++), *hw = rand_host(no, stream++);
    float *hp = rand_host(nq, stream++); /* what the gradient buffers start from */
    float *qkv = dev_from(hq, nq), *dout = dev_from(hw, no);
    float *out_m = op_alloc(no * sizeof(float)), *att = op_alloc(natt * sizeof(float));
    float *out_f = op_alloc(no * sizeof(float)), *lse = op_alloc(nl * sizeof(float));

    pl_attention_forward(out_m, att, qkv, B, T, C, NH);
    flops_charged(NULL);
    pl_attention_flash_forward(out_f, lse, qkv, B, T, C, NH);
    double rec, f = flops_charged(&rec), scores = (double)natt;
    CHECK(close_to(f, 4.0 * B * T * T * C + PL_FLOPS_SOFTMAX_FWD * scores) && rec == 0,
          "%s: forward charged %.0f FLOPs (%.0f recomputed)", label, f, rec);

    double *dq = widen(hq, nq), *ref_out = malloc(no * sizeof(double)),
           *ref_lse = malloc(nl * sizeof(double));
    PL_ASSERT(ref_out && ref_lse);
    ref_forward(dq, B, T, C, NH, ref_out, ref_lse);
    float *got_f = host_of(out_f, no), *got_m = host_of(out_m, no), *got_l = host_of(lse, nl);
    double *want_m = widen(got_m, no);
    expect_near(label, "output against the materialised op", got_f, want_m, no, F32_ATOL,
                F32_RTOL);
    expect_near(label, "output against double", got_f, ref_out, no, F32_ATOL, F32_RTOL);
    expect_near(label, "lse against double", got_l, ref_lse, nl, F32_ATOL, F32_RTOL);

    /* backward: both from the same random start, so += is checked too */
    float *dqkv_m = dev_from(hp, nq), *dqkv_f = dev_from(hp, nq), *dqkv_w = dev_from(hp, nq);
    pl_attention_backward(dqkv_m, dout, qkv, att, B, T, C, NH);
    flops_charged(NULL);
    pl_attention_flash_backward(dqkv_f, dout, qkv, out_f, lse, B, T, C, NH, NULL);
    f = flops_charged(&rec);
    double want_rec = 6.0 * B * T * T * C + 2.0 * PL_FLOPS_SOFTMAX_FWD * scores;
    CHECK(close_to(f, 8.0 * B * T * T * C + PL_FLOPS_SOFTMAX_BWD * scores + want_rec) &&
              close_to(rec, want_rec),
          "%s: backward charged %.0f FLOPs, %.0f of them recomputed (want %.0f recomputed)",
          label, f, rec, want_rec);
    float *gm = host_of(dqkv_m, nq), *gf = host_of(dqkv_f, nq);
    double *want_g = malloc(nq * sizeof(double));
    PL_ASSERT(want_g);
    for (size_t i = 0; i < nq; i++) {
        want_g[i] = (double)gm[i] - hp[i];
        gf[i] -= hp[i];
    }
    expect_near(label, "gradient against the materialised op", gf, want_g, nq, F32_ATOL,
                F32_RTOL);
    if (with_fd) {
        double *w = widen(hw, no), *fd = ref_grad_fd(dq, w, B, T, C, NH);
        expect_near(label, "gradient against finite differences", gf, fd, nq, FD_ATOL, FD_RTOL);
        free(w);
        free(fd);
    }

    /* a caller's work buffer full of garbage, and a second run: the same bits */
    size_t nw = pl_attention_flash_backward_work(B, T, NH);
    float *hg = rand_host(nw, stream++), *work = dev_from(hg, nw);
    pl_attention_flash_backward(dqkv_w, dout, qkv, out_f, lse, B, T, C, NH, work);
    float *gw = host_of(dqkv_w, nq), *gf2 = host_of(dqkv_f, nq);
    for (size_t i = 0; i < nq; i++) gf2[i] -= hp[i];
    for (size_t i = 0; i < nq; i++) gw[i] -= hp[i];
    CHECK(!memcmp(gw, gf2, nq * sizeof *gw), "%s: a work buffer changed the gradient", label);
    float *out_2 = op_alloc(no * sizeof(float)), *lse_2 = op_alloc(nl * sizeof(float));
    pl_attention_flash_forward(out_2, lse_2, qkv, B, T, C, NH);
    float *got_2 = host_of(out_2, no), *got_l2 = host_of(lse_2, nl);
    CHECK(!memcmp(got_2, got_f, no * sizeof *got_2) && !memcmp(got_l2, got_l, nl * sizeof *got_l),
          "%s: a second forward differs from the first", label);

    free(hq), free(hw), free(hp), free(hg), free(dq), free(ref_out), free(ref_lse);
    free(got_f), free(got_m), free(got_l), free(want_m), free(gm), free(gf), free(want_g);
    free(gw), free(gf2), free(got_2), free(got_l2);
    float *dev[] = {qkv, dout, out_m, att, out_f, lse, dqkv_m, dqkv_f, dqkv_w, work, out_2, lse_2};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) pl_mem_free(dev[i]);
}

/* ---- the model ---------------------------------------------------------------------------- */

struct run {
    double loss[2];
    size_t peak[2];
    float *grads, *params;
};

static void train_two_steps(const struct pl_model_config *c, int B, enum pl_recompute r,
                            struct run *out)
{
    const int T = c->seq_len;
    int *tok = malloc((size_t)B * T * sizeof *tok), *tgt = malloc((size_t)B * T * sizeof *tgt);
    PL_ASSERT(tok && tgt);
    random_batch(c->vocab, (size_t)B * T, 5, tok, tgt);
    int *dtok = op_from_host(tok, (size_t)B * T * sizeof *tok);
    int *dtgt = op_from_host(tgt, (size_t)B * T * sizeof *tgt);
    struct pl_model *m = pl_model_new(c, PL_MODEL_ALL);
    pl_model_set_recompute(m, r);
    struct pl_adamw_config opt = pl_adamw_config_default();
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1;
    ctx.seed = 3;
    struct pl_mem_stats s;
    pl_mem_get_stats(&s);
    const size_t before = s.current[PL_MEM_ACTIV];
    for (int step = 0; step < 2; step++) {
        pl_mem_reset_peak();
        out->loss[step] = pl_model_step(m, dtok, dtgt, B, &opt, &ctx);
        pl_mem_get_stats(&s);
        out->peak[step] = s.peak[PL_MEM_ACTIV] - before;
    }
    out->grads = host_of(m->grads, m->layout.numel);
    out->params = host_of(m->params, m->layout.numel);
    pl_model_free(m);
    pl_mem_free(dtok);
    pl_mem_free(dtgt);
    free(tok);
    free(tgt);
}

static void test_model(int C, int NH, int T, int B, float dropout)
{
    struct pl_model_config c = pl_model_config_default();
    c.vocab = 23;
    c.d_model = C;
    c.n_heads = NH;
    c.d_ff = 2 * C;
    c.n_layers = 2;
    c.seq_len = T;
    c.dropout = dropout;
    struct pl_model_config fc = c;
    fc.attention = PL_ATTENTION_FLASH;
    char label[96];
    snprintf(label, sizeof label, "model C=%d NH=%d T=%d B=%d dropout %g", C, NH, T, B,
             (double)dropout);
    const size_t lse_bytes = (size_t)B * NH * T * sizeof(float);

    /* what a block saves: selective's attention term dropped, the lse added */
    CHECK(pl_block_acts_bytes(&fc, B, T, PL_RECOMPUTE_NONE) ==
              pl_block_acts_bytes(&c, B, T, PL_RECOMPUTE_SELECTIVE) + lse_bytes,
          "%s: a flash block saves %zu bytes, want selective's %zu + %zu of lse", label,
          pl_block_acts_bytes(&fc, B, T, PL_RECOMPUTE_NONE),
          pl_block_acts_bytes(&c, B, T, PL_RECOMPUTE_SELECTIVE), lse_bytes);
    CHECK(pl_block_acts_bytes(&fc, B, T, PL_RECOMPUTE_SELECTIVE) ==
                  pl_block_acts_bytes(&fc, B, T, PL_RECOMPUTE_NONE) &&
              pl_block_rebuild_bytes(&fc, B, T, PL_RECOMPUTE_SELECTIVE) == 0,
          "%s: flash leaves selective recomputation nothing to drop or rebuild", label);

    struct run mat, fl[3];
    train_two_steps(&c, B, PL_RECOMPUTE_NONE, &mat);
    static const enum pl_recompute rs[3] = {PL_RECOMPUTE_NONE, PL_RECOMPUTE_SELECTIVE,
                                           PL_RECOMPUTE_FULL};
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, &c);
    for (int i = 0; i < 3; i++) {
        train_two_steps(&fc, B, rs[i], &fl[i]);
        size_t want = pl_model_activ_bytes(&fc, B, rs[i]);
        for (int k = 0; k < 2; k++)
            CHECK(fl[i].peak[k] == want, "%s: flash, recompute %s: activation peak of step %d "
                  "is %zu bytes, want %zu", label, pl_recompute_name(rs[i]), k + 1,
                  fl[i].peak[k], want);
        if (i == 0) continue;
        CHECK(!memcmp(fl[i].grads, fl[0].grads, lay.numel * sizeof(float)) &&
                  !memcmp(fl[i].params, fl[0].params, lay.numel * sizeof(float)) &&
                  fl[i].loss[1] == fl[0].loss[1],
              "%s: flash with recompute %s does not train bit for bit as with none", label,
              pl_recompute_name(rs[i]));
    }
    CHECK(pl_model_activ_bytes(&fc, B, PL_RECOMPUTE_NONE) ==
              pl_model_activ_bytes(&c, B, PL_RECOMPUTE_SELECTIVE) -
                  pl_block_rebuild_bytes(&c, B, T, PL_RECOMPUTE_SELECTIVE) +
                  (size_t)c.n_layers * lse_bytes,
          "%s: the flash model's activations are not selective's without the shared "
          "probabilities, plus L blocks of lse", label);
    for (int k = 0; k < 2; k++)
        CHECK(fabs(fl[0].loss[k] - mat.loss[k]) <= 1e-5 * fabs(mat.loss[k]),
              "%s: step %d loss %.9g with flash, %.9g materialised", label, k + 1,
              fl[0].loss[k], mat.loss[k]);
    double *want = widen(mat.grads, lay.numel);
    expect_near(label, "gradients of step 2 against the materialised model", fl[0].grads, want,
                lay.numel, 1e-5, 1e-3);
    free(want);
    pl_model_layout_free(&lay);
    free(mat.grads), free(mat.params);
    for (int i = 0; i < 3; i++) free(fl[i].grads), free(fl[i].params);
}

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    if (argc > 1) {
        if (strcmp(argv[1], "bad-head-size"))
            pl_usage_error("test_flash: unknown mode '%s' (modes: bad-head-size, or none for "
                           "all checks)", argv[1]);
        int C = PL_FLASH_SMEM + 1;
        float *buf = op_alloc((size_t)3 * C * sizeof(float));
        pl_attention_flash_forward(buf, buf, buf, 1, 1, C, 1);
        printf("test_flash bad-head-size: the op accepted a head of %d floats\n", C);
        pl_mem_free(buf);
        pl_finalize();
        return 1;
    }
    /* HS 4 (tiles of 32): T = 1, one short of a tile, a tile, one more; several tiles */
    test_op(2, 1, 8, 2, 1);
    test_op(1, 31, 8, 2, 1);
    test_op(1, 32, 4, 1, 1);
    test_op(2, 33, 8, 2, 1);
    test_op(1, 100, 10, 2, 0); /* HS 5: four tiles, the last of 4 rows */
    test_op(1, 70, 9, 3, 1);   /* HS 3 */
    test_op(2, 45, 600, 3, 0); /* HS 200: tiles of 20 rows, the last of 5 */
    test_op(1, 41, 410, 2, 0); /* HS 205: tiles of 19 rows; 41 = 2 tiles + 3 */
    test_model(12, 3, 40, 2, 0.0f);
    test_model(16, 2, 33, 3, 0.2f);
    printf("test_flash: %d checks, %d failed\n", checks, failures);
    pl_finalize();
    return failures ? 1 : 0;
}
