/* test_tp_shard: the trusted pieces of tensor parallelism (lib/tp_shard.h) against
 * independent index arithmetic: every rank's shard of a block is the row or column block of
 * the full tensors the header draws, the counter-RNG initialisation of a shard equals that
 * slice of the full model's bit for bit, the ranks' blocks cover each full tensor, the
 * degree check names what t fails to divide, the activation bytes are what the ledger
 * sees, the row-broadcast bias adds b to every row, and the vocabulary-parallel
 * cross-entropy pieces combine into the whole rows' loss and gradient. */
#include <stdlib.h>
#include <string.h>

#include "paralab.h"
#include "testing.h"
#include "tp_shard.h"

static struct pl_model_config config(void)
{
    struct pl_model_config c = pl_model_config_default();
    c.vocab = 256;
    c.d_model = 64;
    c.n_heads = 8;
    c.d_ff = 128;
    c.n_layers = 2;
    c.seq_len = 16;
    return c;
}

/* The full block's element that element (i, j) of rank r's block of tensor `name` holds,
 * written out per tensor from the layout in tp_shard.h (not from its table). */
static float expected(const struct pl_model_config *c, const struct pl_block_params *full,
                      const char *name, int t, int r, size_t i, size_t j)
{
    size_t C = (size_t)c->d_model, F = (size_t)c->d_ff, Ct = C / t, Ft = F / t;
    if (!strcmp(name, "w_qkv")) { /* row i: group i / Ct (q, k, v), head rows of rank r */
        size_t g = i / Ct, row = g * C + (size_t)r * Ct + i % Ct;
        return full->w_qkv[row * C + j];
    }
    if (!strcmp(name, "b_qkv")) return full->b_qkv[(i / Ct) * C + (size_t)r * Ct + i % Ct];
    if (!strcmp(name, "w_proj")) return full->w_proj[i * C + (size_t)r * Ct + j];
    if (!strcmp(name, "w_fc")) return full->w_fc[((size_t)r * Ft + i) * C + j];
    if (!strcmp(name, "b_fc")) return full->b_fc[(size_t)r * Ft + i];
    if (!strcmp(name, "w_fc2")) return full->w_fc2[i * F + (size_t)r * Ft + j];
    return 0;
}

/* The shard functions take op memory: each result is read back to the host to be checked. */
static void check_layout(const struct pl_model_config *c, int t)
{
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, c);
    size_t off, n;
    pl_model_part_range(&lay, 1, &off, &n);
    float *full = malloc(n * sizeof *full), *back = malloc(n * sizeof *back);
    /* random values everywhere, so that a copy from the wrong place shows */
    pl_rng_fill_normal(full, n, 7, 11, 0, 0, 1);
    struct pl_block_params fp;
    pl_block_bind(c, full, &fp);
    size_t sn = pl_tp_block_numel(c, t), C = (size_t)c->d_model, F = (size_t)c->d_ff;
    CHECK(sn == 4 * C + (3 * C * C + 3 * C + C * C + 2 * F * C + F) / t + 2 * C,
          "t=%d: shard of %zu floats", t, sn);
    float *shard = malloc(sn * sizeof *shard), *init = malloc(sn * sizeof *init);
    float *want = malloc(sn * sizeof *want);
    float *d_full = op_from_host(full, n * sizeof *full), *d_back = op_alloc(n * sizeof *back);
    float *d_full_init = op_alloc(n * sizeof *full), *d_shard = op_alloc(sn * sizeof *shard);
    float *d_init = op_alloc(sn * sizeof *init), *d_want = op_alloc(sn * sizeof *want);
    pl_model_init_flat(&lay, off, n, d_full_init);
    for (int r = 0; r < t; r++) {
        pl_tp_block_slice(c, t, r, d_full, d_shard);
        pl_to_host(shard, d_shard, sn * sizeof *shard);
        struct pl_block_params sp;
        pl_tp_block_bind(c, t, shard, &sp);
        const struct {
            const char *name;
            const float *got;
            size_t rows, cols;
        } M[] = {
            {"w_qkv", sp.w_qkv, 3 * C / t, C}, {"b_qkv", sp.b_qkv, 3 * C / t, 1},
            {"w_proj", sp.w_proj, C, C / t},   {"w_fc", sp.w_fc, F / t, C},
            {"b_fc", sp.b_fc, F / t, 1},       {"w_fc2", sp.w_fc2, C, F / t},
        };
        int bad = 0;
        for (size_t m = 0; m < sizeof M / sizeof *M; m++)
            for (size_t i = 0; i < M[m].rows; i++)
                for (size_t j = 0; j < M[m].cols; j++)
                    if (M[m].got[i * M[m].cols + j] != expected(c, &fp, M[m].name, t, r, i, j)) {
                        if (!bad++)
                            CHECK(0, "t=%d rank %d: %s[%zu, %zu] is not its block's element", t,
                                  r, M[m].name, i, j);
                    }
        CHECK(!memcmp(sp.ln1_w, fp.ln1_w, C * sizeof(float)) &&
              !memcmp(sp.b_proj, fp.b_proj, C * sizeof(float)) &&
              !memcmp(sp.b_fc2, fp.b_fc2, C * sizeof(float)) &&
              !memcmp(sp.ln2_b, fp.ln2_b, C * sizeof(float)),
              "t=%d rank %d: replicated tensors differ", t, r);
        pl_tp_block_unslice(c, t, r, d_shard, d_back);
        /* the initialisation of the shard alone is the slice of the full initial values */
        pl_tp_block_init(&lay, 1, t, r, d_init);
        pl_tp_block_slice(c, t, r, d_full_init, d_want);
        pl_to_host(init, d_init, sn * sizeof *init);
        pl_to_host(want, d_want, sn * sizeof *want);
        CHECK(!memcmp(init, want, sn * sizeof *init), "t=%d rank %d: shard init is not the "
              "slice of the full init", t, r);
    }
    pl_to_host(back, d_back, n * sizeof *back);
    CHECK(!memcmp(back, full, n * sizeof *full), "t=%d: the ranks' blocks do not cover the "
          "block", t);
    float *op[] = {d_full, d_back, d_full_init, d_shard, d_init, d_want};
    for (size_t i = 0; i < sizeof op / sizeof *op; i++) pl_mem_free(op[i]);
    free(full);
    free(back);
    free(shard);
    free(init);
    free(want);
    pl_model_layout_free(&lay);
}

static void check_degrees(void)
{
    struct pl_model_config c = config();
    char err[256], ok[64];
    CHECK(pl_tp_degree_error(&c, 4, err, sizeof err) == 0, "tp=4 refused");
    CHECK(pl_tp_degree_error(&c, 3, err, sizeof err) == -1 &&
          strstr(err, "tp=3 does not divide n_heads=8") && strstr(err, "{1,2,4,8}"),
          "tp=3: %s", err);
    c.vocab = 100;
    CHECK(pl_tp_degree_error(&c, 8, err, sizeof err) == -1 && strstr(err, "vocab=100") &&
          strstr(err, "{1,2,4}"), "vocab 100, tp=8: %s", err);
    CHECK(!strcmp(pl_tp_degrees(&c, ok, sizeof ok), "1,2,4"), "degrees %s", ok);
    CHECK(pl_tp_degree_error(&c, 0, err, sizeof err) == -1, "tp=0 accepted");
}

static void check_acts_and_bias(void)
{
    struct pl_model_config c = config();
    for (int t = 1; t <= 8; t *= 2) {
        struct pl_mem_stats a, b;
        pl_mem_get_stats(&a);
        struct pl_tp_block_acts acts;
        pl_tp_block_acts_new(&acts, &c, t, 3, 10);
        pl_mem_get_stats(&b);
        double got = (double)(b.current[PL_MEM_ACTIV] - a.current[PL_MEM_ACTIV]);
        CHECK(got == pl_tp_block_act_bytes(&c, t, 3, 10), "t=%d: %g activation bytes, formula "
              "%g", t, got, pl_tp_block_act_bytes(&c, t, 3, 10));
        pl_tp_block_acts_free(&acts);
    }
    const int N = 5, OC = 7;
    float y[35], b[7];
    for (int i = 0; i < N * OC; i++) y[i] = (float)i;
    for (int j = 0; j < OC; j++) b[j] = 0.5f * (float)j - 1.0f;
    float *d_y = op_from_host(y, sizeof y), *d_b = op_from_host(b, sizeof b);
    pl_tp_add_bias(d_y, d_b, N, OC);
    pl_to_host(y, d_y, sizeof y);
    pl_mem_free(d_y);
    pl_mem_free(d_b);
    int bad = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < OC; j++) bad += y[i * OC + j] != (float)(i * OC + j) + b[j];
    CHECK(!bad, "pl_tp_add_bias: %d elements off", bad);
}

/* The cross-entropy pieces over t column blocks of random logits, combined as a TP group
 * would (max of maxima, sums summed), against pl_crossentropy_forward and the fused
 * softmax + cross-entropy backward on the whole rows. */
static void check_xent(int t)
{
    const int N = 6, V = 40, Vt = V / t;
    const size_t NV = (size_t)N * V * sizeof(float), Nf = (size_t)N * sizeof(float);
    float logits[240], losses[6], mine[240];
    int targets[6];
    pl_rng_fill_normal(logits, (size_t)N * V, 3, 5, 0, 0, 4);
    for (int n = 0; n < N; n++) targets[n] = (n * 7 + 3) % V;
    float *d_logits = op_from_host(logits, NV), *d_losses = op_alloc(Nf);
    float *d_probs = op_alloc(NV), *d_dl = op_alloc(NV), *d_mine = op_alloc(NV);
    int *d_targets = op_from_host(targets, sizeof targets);
    pl_crossentropy_forward(d_losses, d_logits, d_targets, N, V);
    pl_to_host(losses, d_losses, Nf);
    double want = 0;
    for (int n = 0; n < N; n++) want += losses[n];
    want /= N;
    pl_softmax_forward(d_probs, d_logits, N, V);
    pl_crossentropy_softmax_backward(d_dl, d_probs, d_targets, 1.0f / N, N, V);
    /* The pieces as a TP group combines them: max of the ranks' maxima, sums summed. */
    float *cols = op_alloc(NV), *maxes = op_alloc((size_t)t * Nf), *shift = op_alloc(Nf);
    float *sum = op_alloc(Nf), *tl = op_alloc(Nf), *part = op_alloc(Nf), *d = op_alloc(NV);
    for (int r = 0; r < t; r++) {
        struct pl_tp_rect q = {0, (size_t)r * Vt, (size_t)N, (size_t)Vt};
        pl_tp_copy_rect_out(cols, d_logits, (size_t)V, &q);
        pl_tp_row_max(maxes + r * N, cols, N, Vt);
    }
    pl_tp_max_of_blocks(shift, maxes, t, N);
    for (int r = 0; r < t; r++) {
        struct pl_tp_rect q = {0, (size_t)r * Vt, (size_t)N, (size_t)Vt};
        pl_tp_copy_rect_out(cols, d_logits, (size_t)V, &q);
        pl_tp_row_sumexp(part, cols, shift, N, Vt);
        pl_accumulate(sum, part, (size_t)N);
        pl_tp_pick_target(part, cols, d_targets, r * Vt, N, Vt);
        pl_accumulate(tl, part, (size_t)N);
    }
    for (int r = 0; r < t; r++) {
        struct pl_tp_rect q = {0, (size_t)r * Vt, (size_t)N, (size_t)Vt};
        pl_zero(d, (size_t)N * Vt);
        pl_tp_copy_rect_out(cols, d_logits, (size_t)V, &q);
        pl_tp_xent_backward(d, cols, shift, sum, d_targets, r * Vt, 1.0f / N, N, Vt);
        pl_tp_copy_rect_in(d_mine, (size_t)V, d, &q);
    }
    double got = pl_tp_xent_mean(shift, sum, tl, N);
    CHECK(fabs(got - want) <= 1e-6 * fabs(want), "t=%d: loss %.9f, whole rows %.9f", t, got,
          want);
    float dl[240];
    pl_to_host(dl, d_dl, NV);
    pl_to_host(mine, d_mine, NV);
    CHECK(pl_rel_l2(mine, dl, (size_t)N * V) < 1e-6, "t=%d: dlogits off by %.2e", t,
          pl_rel_l2(mine, dl, (size_t)N * V));
    void *op[] = {d_logits, d_losses, d_probs, d_dl, d_mine, d_targets, cols, maxes, shift,
                  sum, tl, part, d};
    for (size_t i = 0; i < sizeof op / sizeof *op; i++) pl_mem_free(op[i]);
}

/* The whole model: a rank's shard initialised alone is the slice of the full model's
 * initial values, its first rows are its rows of wte, and it holds the right count. */
static void check_model(int t)
{
    struct pl_model_config c = config();
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, &c);
    size_t C = (size_t)c.d_model, V = (size_t)c.vocab, n = pl_tp_model_numel(&lay, t);
    size_t want = lay.numel - (V * C) * 2 + 2 * V * C / t - c.n_layers *
                  (4 * C * C + 3 * C + 2 * C * (size_t)c.d_ff + (size_t)c.d_ff) * (t - 1) / t;
    CHECK(n == want, "t=%d: model shard of %zu floats, expected %zu", t, n, want);
    float *full = malloc(lay.numel * sizeof *full);
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    float *d_full = op_alloc(lay.numel * sizeof *full), *d_a = op_alloc(n * sizeof *a);
    float *d_b = op_alloc(n * sizeof *b);
    pl_model_init_flat(&lay, 0, lay.numel, d_full);
    pl_to_host(full, d_full, lay.numel * sizeof *full);
    for (int r = 0; r < t; r++) {
        pl_tp_model_init(&lay, t, r, d_a);
        pl_tp_model_slice(&lay, t, r, d_full, d_b);
        pl_to_host(a, d_a, n * sizeof *a);
        pl_to_host(b, d_b, n * sizeof *b);
        CHECK(!memcmp(a, b, n * sizeof *a), "t=%d rank %d: model shard init is not the slice", t,
              r);
        CHECK(!memcmp(b, full + (size_t)r * (V / t) * C, (V / t) * C * sizeof *b),
              "t=%d rank %d: the shard does not start with its rows of wte", t, r);
    }
    pl_mem_free(d_full);
    pl_mem_free(d_a);
    pl_mem_free(d_b);
    free(full);
    free(a);
    free(b);
    pl_model_layout_free(&lay);
}

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    struct pl_model_config c = config();
    for (int t = 1; t <= 8; t *= 2) check_layout(&c, t);
    check_degrees();
    check_acts_and_bias();
    for (int t = 1; t <= 8; t *= 2) check_xent(t);
    for (int t = 1; t <= 8; t *= 2) check_model(t);
    printf("test_tp_shard: %d checks, %d failed\n", checks, failures);
    pl_finalize();
    return failures != 0;
}
