/* test_part_pass.c: lib/part_pass on one rank. The model run part by part, each part on its
 * own copy of its parameters and gradient, gives the whole model's loss and gradients; the
 * FLOPs it counts are the model's (so a trace of it replays the model's compute); the
 * activations are the pass's (as PL_MEM_ACTIV) and given back when it is freed; what the
 * caller computes after the last backward is not filed under the embedding in the trace.
 *
 *   test_part_pass              the checks
 *   test_part_pass order        a backward before the forward: usage error (exit 2) */
#include <stdlib.h>
#include <string.h>

#include "ledger.h"
#include "mem.h"
#include "model.h"
#include "ops.h"
#include "paralab.h"
#include "part_pass.h"
#include "testing.h"
#include "trace.h"

static struct pl_model_config config(void)
{
    struct pl_model_config c = pl_model_config_default();
    c.d_model = 16;
    c.n_layers = 3;
    c.n_heads = 2;
    c.d_ff = 37;
    c.seq_len = 8;
    c.seed = 5;
    return c;
}

static void fill_tokens(int *tok, int n, int vocab, uint64_t seed)
{
    int *h = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) h[i] = (int)(pl_mix64(seed + (uint64_t)i) % (uint64_t)vocab);
    pl_to_device(tok, h, sizeof(int) * (size_t)n);
    free(h);
}

static double rel_l2(const float *a_dev, const float *b_dev, size_t n)
{
    float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
    pl_copy_to_host(a, a_dev, n);
    pl_copy_to_host(b, b_dev, n);
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        d += (a[i] - b[i]) * (double)(a[i] - b[i]);
        r += (double)b[i] * b[i];
    }
    free(a);
    free(b);
    return r > 0 ? sqrt(d / r) : sqrt(d);
}

/* Every part's parameters in a buffer of its own, as ZeRO-3 gathers them. */
static void parts_equal_model(void)
{
    struct pl_model_config c = config();
    const int B = 3, T = c.seq_len;
    int *tok = pl_mem_alloc(sizeof(int) * (size_t)(B * T), PL_MEM_WORK, PL_DEVICE, "tokens");
    int *tgt = pl_mem_alloc(sizeof(int) * (size_t)(B * T), PL_MEM_WORK, PL_DEVICE, "targets");
    fill_tokens(tok, B * T, c.vocab, 1);
    fill_tokens(tgt, B * T, c.vocab, 2);

    struct pl_model *ref = pl_model_new(&c, PL_MODEL_PARAMS | PL_MODEL_GRADS);
    pl_model_zero_grad(ref);
    double f_model = pl_ledger_flops_total();
    double want = pl_model_forward(ref, tok, tgt, B, NULL);
    pl_model_backward(ref, NULL);
    f_model = pl_ledger_flops_total() - f_model;
    pl_model_free_acts(ref);

    size_t N = ref->layout.numel;
    float *grads = pl_mem_alloc(N * sizeof(float), PL_MEM_GRADS, PL_DEVICE, "pass grads");
    struct pl_mem_stats before, during, after;
    pl_mem_get_stats(&before);
    struct pl_pass *s = pl_pass_new(&c);
    pl_trace_enable(1);
    pl_trace_clear();
    for (int round = 0; round < 2; round++) { /* the second reuses the activations */
        pl_zero(grads, N);
        double f_pass = pl_ledger_flops_total();
        pl_pass_begin(s, tok, tgt, B);
        for (int part = PL_PART_EMBED; part <= PL_PART_HEAD(&c); part++) {
            size_t off, n;
            pl_model_part_range(&ref->layout, part, &off, &n);
            float *p = pl_mem_alloc(n * sizeof(float), PL_MEM_PARAMS, PL_DEVICE, "part");
            pl_copy(p, ref->params + off, n);
            pl_pass_forward(s, part, p);
            pl_mem_free(p);
        }
        double loss = pl_pass_loss(s);
        CHECK(fabs(loss - want) <= 1e-6 * fabs(want), "round %d: loss %.8f, the model's %.8f",
              round, loss, want);
        for (int part = PL_PART_HEAD(&c); part >= PL_PART_EMBED; part--) {
            size_t off, n;
            pl_model_part_range(&ref->layout, part, &off, &n);
            float *p = pl_mem_alloc(n * sizeof(float), PL_MEM_PARAMS, PL_DEVICE, "part");
            pl_copy(p, ref->params + off, n);
            pl_pass_backward(s, part, p, grads + off);
            pl_mem_free(p);
        }
        f_pass = pl_ledger_flops_total() - f_pass;
        CHECK(close_to(f_pass, f_model), "round %d: the pass counts %.0f FLOPs, the model %.0f "
              "(a trace of it would replay with the wrong compute)", round, f_pass, f_model);
        double e = rel_l2(grads, ref->grads, N);
        CHECK(e <= 1e-6, "round %d: gradients differ from the model's: relative L2 %.2e",
              round, e);
    }
    /* Compute after the last backward (a norm here) is not the embedding's. */
    double f0 = pl_ledger_flops_total();
    (void)pl_grad_norm_sq(grads, N);
    CHECK(pl_ledger_flops_total() > f0, "the norm counts its FLOPs");
    pl_trace_flush();
    pl_trace_enable(0);
    int n = pl_trace_count();
    const struct pl_event *ev = pl_trace_events();
    CHECK(n > 0 && ev[n - 1].type == PL_EV_COMPUTE && !strcmp(ev[n - 1].label, "after backward"),
          "the last compute is filed as '%s', not 'after backward'", n ? ev[n - 1].label : "");
    pl_mem_get_stats(&during);
    CHECK(during.current[PL_MEM_ACTIV] > before.current[PL_MEM_ACTIV],
          "the pass keeps its activations as PL_MEM_ACTIV between passes");
    pl_pass_free(s);
    pl_mem_get_stats(&after);
    CHECK(after.current[PL_MEM_ACTIV] == before.current[PL_MEM_ACTIV],
          "the pass gives back its activations: %zu bytes left",
          after.current[PL_MEM_ACTIV] - before.current[PL_MEM_ACTIV]);
    pl_mem_free(grads);
    pl_model_free(ref);
    pl_mem_free(tgt);
    pl_mem_free(tok);
}

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    if (argc > 1 && !strcmp(argv[1], "order")) {
        struct pl_model_config c = config();
        struct pl_pass *s = pl_pass_new(&c);
        int *tok = pl_mem_alloc(sizeof(int) * (size_t)c.seq_len, PL_MEM_WORK, PL_DEVICE, "t");
        pl_pass_begin(s, tok, tok, 1);
        pl_pass_backward(s, PL_PART_HEAD(&c), NULL, NULL);
    } else if (argc > 1) {
        pl_usage_error("unknown mode '%s' (none, or 'order')", argv[1]);
    }
    parts_equal_model();
    printf("test_part_pass: %d checks, %d failed\n", checks, failures);
    pl_finalize();
    return failures ? 1 : 0;
}
