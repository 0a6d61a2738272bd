/* test_pipe_parts.c: lib/pipe_parts on one rank. A model cut into stages and run stage by
 * stage, microbatch by microbatch, gives the whole model's loss and gradients; each
 * microbatch's activations are what pl_parts_acts_bytes says and are all given back; the
 * marks in the trace name every F and B in order; FLOPs per part add up to the model's.
 *
 *   test_pipe_parts             the checks
 *   test_pipe_parts empty       a stage of parts 3..2: usage error (exit 2)
 *   test_pipe_parts w-before-b  W of a microbatch whose B has not run: usage error (exit 2)
 *   test_pipe_parts ends-whole  the whole model's forward on a model of the ends: usage error
 *   test_pipe_parts ends-block  a block run on a model of the ends: usage error (exit 2)
 * and a model of the ends alone (pl_model_new_ends) holds the whole model's embedding and
 * head bit for bit, packed, and runs them to the same loss and gradients. */
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "ledger.h"
#include "model.h"
#include "ops.h"
#include "paralab.h"
#include "pipe_parts.h"
#include "testing.h"
#include "trace.h"

static struct pl_model_config config(void)
{
    struct pl_model_config c = pl_model_config_default();
    c.d_model = 16;
    c.n_layers = 3;
    c.n_heads = 2;
    c.d_ff = 32;
    c.seq_len = 8;
    c.seed = 11;
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
    for (size_t i = 0; i < n; i++) d += (a[i] - b[i]) * (double)(a[i] - b[i]), r += (double)b[i] * b[i];
    free(a);
    free(b);
    return r > 0 ? sqrt(d / r) : sqrt(d);
}

/* Stages [-1..0], [1..1], [2..3] (3 = the head), m = 2 microbatches, AFAB order. */
static void stages_equal_model(void)
{
    struct pl_model_config c = config();
    const int B = 4, T = c.seq_len, m = 2, Bmb = B / m;
    int *tok = pl_mem_alloc(sizeof(int) * (size_t)(B * T), PL_MEM_WORK, PL_DEVICE, "tokens");
    int *tgt = pl_mem_alloc(sizeof(int) * (size_t)(B * T), PL_MEM_WORK, PL_DEVICE, "targets");
    fill_tokens(tok, B * T, c.vocab, 1);
    fill_tokens(tgt, B * T, c.vocab, 2);

    struct pl_model *ref = pl_model_new(&c, PL_MODEL_PARAMS | PL_MODEL_GRADS);
    pl_model_zero_grad(ref);
    double want = pl_model_forward(ref, tok, tgt, B, NULL);
    pl_model_backward(ref, NULL);
    pl_model_free_acts(ref);

    struct pl_model *mod = pl_model_new(&c, PL_MODEL_PARAMS | PL_MODEL_GRADS);
    pl_model_zero_grad(mod);
    const int first[3] = {-1, 1, 2}, last[3] = {0, 1, 3};
    struct pl_parts_acts acts[3][2];
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.loss_scale = 1.0f / (float)m;
    struct pl_mem_stats before, mid, after;
    pl_mem_get_stats(&before);
    size_t expect_bytes = 0;
    pl_trace_enable(1);
    pl_trace_clear();
    double loss = 0;
    for (int i = 0; i < m; i++) {
        size_t at = (size_t)(i * Bmb * T);
        const float *x = NULL;
        for (int s = 0; s < 3; s++) {
            loss += pl_parts_forward(mod, first[s], last[s], i, &acts[s][i], &ctx, tok + at,
                                     tgt + at, Bmb, T, x);
            x = acts[s][i].x;
            expect_bytes += pl_parts_acts_bytes(&c, first[s], last[s], Bmb, T);
        }
    }
    pl_mem_get_stats(&mid);
    CHECK(mid.current[PL_MEM_ACTIV] - before.current[PL_MEM_ACTIV] == expect_bytes,
          "activations held after the forwards: %zu bytes, pl_parts_acts_bytes says %zu",
          mid.current[PL_MEM_ACTIV] - before.current[PL_MEM_ACTIV], expect_bytes);
    for (int i = 0; i < m; i++) {
        const float *dy = NULL;
        for (int s = 2; s >= 0; s--) {
            pl_parts_backward(mod, &acts[s][i], &ctx, dy);
            dy = acts[s][i].x;
        }
        for (int s = 0; s < 3; s++) pl_parts_acts_free(&acts[s][i]);
    }
    pl_trace_flush();
    pl_trace_enable(0);
    pl_mem_get_stats(&after);
    CHECK(after.current[PL_MEM_ACTIV] == before.current[PL_MEM_ACTIV],
          "activations left after the frees: %zu bytes",
          after.current[PL_MEM_ACTIV] - before.current[PL_MEM_ACTIV]);
    CHECK(fabs(loss / m - want) <= 1e-5 * fabs(want), "loss %.8f, the whole model's %.8f",
          loss / m, want);
    double e = rel_l2(mod->grads, ref->grads, mod->layout.numel);
    CHECK(e <= 1e-5, "gradients of the stages differ from the model's: relative L2 %.2e", e);

    /* marks: the forwards of microbatch 0 through the three stages, of 1, then the backwards */
    const struct pl_event *ev = pl_trace_events();
    char got[256] = "";
    for (int i = 0; i < pl_trace_count(); i++)
        if (ev[i].type == PL_EV_COMPUTE && !strncmp(ev[i].label, PL_PIPE_MARK, strlen(PL_PIPE_MARK)))
            strncat(got, ev[i].label + strlen(PL_PIPE_MARK), sizeof got - strlen(got) - 2),
                strcat(got, ",");
    CHECK(!strcmp(got, "F 0 @-1,F 0 @1,F 0 @2,F 1 @-1,F 1 @1,F 1 @2,"
                       "B 0 @2,B 0 @1,B 0 @-1,B 1 @2,B 1 @1,B 1 @-1,"),
          "marks: %s", got);

    pl_model_free(mod);
    pl_model_free(ref);
    pl_mem_free(tok);
    pl_mem_free(tgt);
}

/* Runs the three stages of stages_equal_model over m microbatches, forwards first; split: the
 * backward as B of every microbatch, then W of every one (the order that keeps the most
 * for W). Returns the host copy of the gradients (*numel floats); *kept: activations held after the B's
 * beyond the forward's; *marks the pipe marks. */
static float *stage_grads(int split, size_t *kept, char *marks, size_t len, size_t *numel)
{
    struct pl_model_config c = config();
    c.dropout = 0.1f;
    enum { M = 2, S = 3 };
    const int Bmb = 2, T = c.seq_len;
    int *tok = pl_mem_alloc(sizeof(int) * (size_t)(M * Bmb * T), PL_MEM_WORK, PL_DEVICE, "tok");
    fill_tokens(tok, M * Bmb * T, c.vocab, 3);
    struct pl_model *mod = pl_model_new(&c, PL_MODEL_PARAMS | PL_MODEL_GRADS);
    pl_model_zero_grad(mod);
    const int first[S] = {-1, 1, 2}, last[S] = {0, 1, 3};
    struct pl_parts_acts acts[S][M];
    struct pl_model_ctx ctx = {.train = 1, .seed = 9, .step = 1, .loss_scale = 1.0f / M};
    for (int i = 0; i < M; i++) {
        const float *x = NULL;
        ctx.seq0 = i * Bmb;
        for (int s = 0; s < S; s++) {
            size_t at = (size_t)(i * Bmb * T);
            pl_parts_forward(mod, first[s], last[s], i, &acts[s][i], &ctx, tok + at, tok + at,
                             Bmb, T, x);
            x = acts[s][i].x;
        }
    }
    struct pl_mem_stats before, after;
    pl_mem_get_stats(&before);
    pl_trace_enable(1);
    pl_trace_clear();
    for (int i = 0; i < M; i++) {
        const float *dy = NULL;
        ctx.seq0 = i * Bmb;
        for (int s = S - 1; s >= 0; s--) {
            if (split) pl_parts_backward_b(mod, &acts[s][i], &ctx, dy);
            else pl_parts_backward(mod, &acts[s][i], &ctx, dy);
            dy = acts[s][i].x;
        }
    }
    pl_mem_get_stats(&after);
    *kept = after.current[PL_MEM_ACTIV] - before.current[PL_MEM_ACTIV];
    for (int i = 0; split && i < M; i++)
        for (int s = S - 1; s >= 0; s--) pl_parts_backward_w(mod, &acts[s][i]);
    pl_trace_flush();
    pl_trace_enable(0);
    marks[0] = '\0';
    const struct pl_event *ev = pl_trace_events();
    for (int i = 0; i < pl_trace_count(); i++)
        if (ev[i].type == PL_EV_COMPUTE && !strncmp(ev[i].label, PL_PIPE_MARK, strlen(PL_PIPE_MARK)))
            snprintf(marks + strlen(marks), len - strlen(marks), "%s,",
                     ev[i].label + strlen(PL_PIPE_MARK));
    for (int i = 0; i < M; i++)
        for (int s = 0; s < S; s++) pl_parts_acts_free(&acts[s][i]);
    *numel = mod->layout.numel;
    float *g = malloc(sizeof(float) * mod->layout.numel);
    pl_copy_to_host(g, mod->grads, mod->layout.numel);
    pl_model_free(mod);
    pl_mem_free(tok);
    return g;
}

/* The backward split into B and W (zero-bubble schedules) gives the one call's gradients bit
 * for bit with dropout on, keeps exactly pl_parts_wgrad_bytes per stage and microbatch from
 * B to W, and marks every W. Stops: a W that never adds the embedding's gradient or adds a
 * block's twice, kept memory the ledger does not see, W marks missing. */
static void split_backward(void)
{
    struct pl_model_config c = config();
    size_t kept_one, kept_split;
    char marks_one[512], marks_split[512];
    size_t numel;
    float *one = stage_grads(0, &kept_one, marks_one, sizeof marks_one, &numel);
    float *split = stage_grads(1, &kept_split, marks_split, sizeof marks_split, &numel);
    CHECK(!memcmp(one, split, numel * sizeof(float)),
          "B then W: the gradients differ from pl_parts_backward's");
    size_t want = 2 * (pl_parts_wgrad_bytes(&c, -1, 0, 2, c.seq_len) +
                       pl_parts_wgrad_bytes(&c, 1, 1, 2, c.seq_len) +
                       pl_parts_wgrad_bytes(&c, 2, 3, 2, c.seq_len));
    CHECK(kept_one == 0 && kept_split == want && want == 2 * 3 * pl_block_wgrad_bytes(&c, 2, c.seq_len),
          "held from B to W: %zu bytes (one call: %zu), pl_parts_wgrad_bytes says %zu",
          kept_split, kept_one, want);
    CHECK(!strcmp(marks_split, "B 0 @2,B 0 @1,B 0 @-1,B 1 @2,B 1 @1,B 1 @-1,"
                               "W 0 @2,W 0 @1,W 0 @-1,W 1 @2,W 1 @1,W 1 @-1,"),
          "marks of the split backward: %s", marks_split);
    free(one);
    free(split);
}

/* The parts' FLOPs add up to one forward and backward of the whole model. */
static void flops_add_up(void)
{
    struct pl_model_config c = config();
    const int B = 2, T = c.seq_len;
    double sum = 0;
    for (int p = PL_PART_EMBED; p <= PL_PART_HEAD(&c); p++) sum += pl_part_flops(&c, p, B, T);
    struct pl_model *mod = pl_model_new(&c, PL_MODEL_PARAMS | PL_MODEL_GRADS);
    int *tok = pl_mem_alloc(sizeof(int) * (size_t)(B * T), PL_MEM_WORK, PL_DEVICE, "tokens");
    double before = pl_ledger_flops_total();
    pl_model_forward(mod, tok, tok, B, NULL);
    pl_model_backward(mod, NULL);
    double whole = pl_ledger_flops_total() - before;
    CHECK(fabs(sum - whole) <= 1e-9 * whole, "parts %.0f FLOPs, whole model %.0f", sum, whole);
    CHECK(pl_part_flops(&c, PL_PART_EMBED, B, T) < pl_part_flops(&c, 0, B, T),
          "the embedding costs less than a block");
    pl_model_free(mod);
    pl_mem_free(tok);
}

/* The ends alone: the same values in the packed layout, the same embedding output, loss and
 * head gradient as the whole model's parts; the blocks not held. */
static void ends_equal_model(void)
{
    struct pl_model_config c = config();
    const int B = 2, T = c.seq_len;
    struct pl_model *whole = pl_model_new(&c, PL_MODEL_PARAMS | PL_MODEL_GRADS);
    struct pl_model *e = pl_model_new_ends(&c, PL_MODEL_PARAMS | PL_MODEL_GRADS,
                                           PL_ENDS_EMBED | PL_ENDS_HEAD);
    struct pl_model *h = pl_model_new_ends(&c, PL_MODEL_PARAMS, PL_ENDS_HEAD);
    const struct pl_model_layout *wl = &whole->layout;
    CHECK(e->layout.numel == wl->embed_numel + wl->head_numel,
          "the ends hold %zu floats, the embedding and head %zu", e->layout.numel,
          wl->embed_numel + wl->head_numel);
    CHECK(h->layout.numel == wl->head_numel, "the head alone holds %zu floats, not %zu",
          h->layout.numel, wl->head_numel);
    CHECK(!pl_model_layout_holds(&e->layout, 0) && pl_model_layout_holds(&e->layout, -1) &&
              pl_model_layout_holds(&e->layout, c.n_layers) &&
              !pl_model_layout_holds(&h->layout, -1),
          "the ends hold parts -1 and L, no block; the head alone not the embedding");
    const struct pl_model *ms[2] = {e, h};
    for (int k = 0; k < 2; k++)
        for (int part = -1; part <= c.n_layers; part += c.n_layers + 1) {
            if (!pl_model_layout_holds(&ms[k]->layout, part)) continue;
            size_t wo, wn, eo, en;
            pl_model_part_range(wl, part, &wo, &wn);
            pl_model_part_range(&ms[k]->layout, part, &eo, &en);
            float *a = malloc(sizeof(float) * wn), *b = malloc(sizeof(float) * en);
            pl_copy_to_host(a, whole->params + wo, wn);
            pl_copy_to_host(b, ms[k]->params + eo, en);
            CHECK(wn == en && memcmp(a, b, sizeof(float) * wn) == 0,
                  "part %d of the %s: the whole model's values bit for bit", part,
                  k ? "head alone" : "ends");
            free(a);
            free(b);
        }
    int *tok = pl_mem_alloc(sizeof(int) * (size_t)(B * T), PL_MEM_WORK, PL_DEVICE, "tokens");
    fill_tokens(tok, B * T, c.vocab, 5);
    struct pl_parts_acts a[2][2];
    struct pl_model *m2[2] = {whole, e};
    double loss[2];
    for (int k = 0; k < 2; k++) {
        pl_model_zero_grad(m2[k]);
        pl_parts_forward(m2[k], -1, -1, 0, &a[k][0], NULL, tok, NULL, B, T, NULL);
        loss[k] = pl_parts_forward(m2[k], c.n_layers, c.n_layers, 0, &a[k][1], NULL, NULL, tok,
                                   B, T, a[k][0].x);
        pl_parts_backward(m2[k], &a[k][1], NULL, NULL);
    }
    CHECK(loss[0] == loss[1], "the head's loss on the ends %.9g, on the whole model %.9g",
          loss[1], loss[0]);
    size_t wo, wn, eo, en;
    pl_model_part_range(wl, c.n_layers, &wo, &wn);
    pl_model_part_range(&e->layout, c.n_layers, &eo, &en);
    CHECK(rel_l2(e->grads + eo, whole->grads + wo, wn) == 0,
          "the head's gradient on the ends is the whole model's");
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 2; j++) pl_parts_acts_free(&a[k][j]);
    pl_mem_free(tok);
    pl_model_free(h);
    pl_model_free(e);
    pl_model_free(whole);
}

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    if (argc > 1 && !strcmp(argv[1], "empty")) {
        struct pl_model_config c = config();
        pl_parts_check(&c, 3, 2);
    } else if (argc > 1 && !strcmp(argv[1], "w-before-b")) {
        struct pl_model_config c = config();
        struct pl_model *mod = pl_model_new(&c, PL_MODEL_PARAMS | PL_MODEL_GRADS);
        struct pl_parts_acts a;
        int *tok = pl_mem_alloc(sizeof(int) * (size_t)c.seq_len, PL_MEM_WORK, PL_DEVICE, "tok");
        pl_parts_forward(mod, 1, 1, 0, &a, NULL, NULL, NULL, 1, c.seq_len, mod->params);
        pl_parts_backward_w(mod, &a);
        pl_mem_free(tok);
    } else if (argc > 1 && !strncmp(argv[1], "ends-", 5)) {
        struct pl_model_config c = config();
        struct pl_model *e = pl_model_new_ends(&c, PL_MODEL_PARAMS | PL_MODEL_GRADS,
                                               PL_ENDS_EMBED | PL_ENDS_HEAD);
        struct pl_parts_acts a;
        int *tok = pl_mem_alloc(sizeof(int) * (size_t)c.seq_len, PL_MEM_WORK, PL_DEVICE, "tok");
        pl_to_device(tok, (int[8]){0}, sizeof(int) * 8);
        if (!strcmp(argv[1], "ends-whole")) pl_model_forward(e, tok, tok, 1, NULL);
        pl_parts_forward(e, -1, 0, 0, &a, NULL, tok, NULL, 1, c.seq_len, NULL);
    } else if (argc > 1) {
        pl_usage_error("unknown mode '%s' (none, 'empty', 'w-before-b', 'ends-whole' or "
                       "'ends-block')", argv[1]);
    }
    stages_equal_model();
    split_backward();
    flops_add_up();
    ends_equal_model();
    printf("test_pipe_parts: %d checks, %d failed\n", checks, failures);
    pl_finalize();
    return failures ? 1 : 0;
}
