/* test_recompute: activation recomputation in the reference model (recompute.h, model.h).
 *   - gradients, losses and parameters after two training steps with dropout on are bit for
 *     bit those without recomputation, for selective and full, on several dense shapes and
 *     an MoE one (stops: a rerun forward that draws other dropout masks, reads a buffer a
 *     later block overwrote, or routes differently);
 *   - the same for one block driven through the block-level surface with no shared buffer
 *     (the passes allocate it), with its activation peak; and, as the check's own broken
 *     case, that a rerun drawing the next step's masks is seen as different;
 *   - the activation bytes a model holds (the peak of the memory ledger's activation
 *     category over a step) equal pl_model_activ_bytes, and the per-block term equals the
 *     planner's per-layer formula (pl_plan_activation_layer) under the mapping stated at
 *     planner_mapped_bytes (stops: selective still saving the T x T probabilities, full
 *     saving more than the block input, a per-pass buffer left allocated);
 *   - the FLOPs of a step in the ledger: full = none + one forward of every block, selective
 *     = none + one attention core per block, both formulas from ops.h's counting rules; the
 *     extra in flops_recompute, so FLOPs less flops_recompute are the same for every choice;
 *     selective's extra products equal what the planner adds for it (hfu/mfu - 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger.h"
#include "model.h"
#include "ops.h"
#include "paralab.h"
#include "plan.h"
#include "rng.h"
#include "testing.h"

static const enum pl_recompute choices[] = {PL_RECOMPUTE_NONE, PL_RECOMPUTE_SELECTIVE,
                                            PL_RECOMPUTE_FULL};
#define NCHOICES 3

struct shape {
    int vocab, d_model, n_layers, n_heads, d_ff, seq_len, B, n_experts;
    float dropout;
};

/* Odd sizes, one and several layers and sequences, dropout from light to heavy. */
static const struct shape shapes[] = {
    {11, 8, 2, 2, 12, 5, 2, 0, 0.25f},
    {13, 12, 3, 3, 20, 7, 3, 0, 0.1f},
    {17, 16, 1, 4, 64, 16, 1, 0, 0.5f},
    {19, 24, 2, 6, 40, 9, 2, 0, 0.0f},
};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

static struct pl_model_config config_of(const struct shape *s)
{
    struct pl_model_config c = pl_model_config_default();
    c.vocab = s->vocab;
    c.d_model = s->d_model;
    c.n_layers = s->n_layers;
    c.n_heads = s->n_heads;
    c.d_ff = s->d_ff;
    c.seq_len = s->seq_len;
    c.dropout = s->dropout;
    c.n_experts = s->n_experts;
    c.capacity_factor = 0.75f; /* MoE: drops are certain, so routing matters */
    c.aux_loss_coef = 0.1f;
    c.seed = 7;
    return c;
}

static float *host_copy(const float *dev, size_t n)
{
    float *h = malloc(n * sizeof *h);
    PL_ASSERT(h);
    pl_to_host(h, dev, n * sizeof *h);
    return h;
}

/* ---- formulas from ops.h's FLOP counting rules --------------------------------------------- */

/* pl_attention_forward: Q K^T and att V as dense T x T products, and the softmax. */
static double attention_core_flops(const struct pl_model_config *c, int B, int T)
{
    return 4.0 * B * T * T * c->d_model + (double)PL_FLOPS_SOFTMAX_FWD * B * c->n_heads * T * T;
}

/* One dense block's forward: two layernorms, the qkv, projection, fc and fc2 products with
 * their biases, GELU, the attention core, two residual adds, two dropouts when on. */
static double block_forward_flops(const struct pl_model_config *c, int B, int T, int dropout)
{
    double N = (double)B * T, C = c->d_model, F = c->d_ff;
    double ln = (double)PL_FLOPS_LAYERNORM_FWD * N * C;
    double attn = ln + (2.0 * N * C * 3 * C + N * 3 * C) + attention_core_flops(c, B, T) +
                  (2.0 * N * C * C + N * C) + PL_FLOPS_RESIDUAL_FWD * N * C;
    double mlp = ln + (2.0 * N * C * F + N * F) + PL_FLOPS_GELU_FWD * N * F +
                 (2.0 * N * F * C + N * C) + PL_FLOPS_RESIDUAL_FWD * N * C;
    return attn + mlp + (dropout ? 2.0 * PL_FLOPS_DROPOUT * N * C : 0.0);
}

/* The kit's model as the planner sees it: one microbatch of B sequences on one GPU. */
static void as_planned(const struct pl_model_config *c, int B, enum pl_recompute r,
                       struct pl_plan_model *pm, struct pl_plan_config *cfg)
{
    struct pl_plan_model m = {.name = "kit", .layers = c->n_layers, .d_model = c->d_model,
                              .heads = c->n_heads, .kv_heads = c->n_heads, .d_ff = c->d_ff,
                              .vocab = c->vocab, .seq = c->seq_len,
                              .batch_tokens = (double)B * c->seq_len};
    *pm = m;
    pl_plan_config_default(cfg);
    for (int a = 0; a < PL_NAXES; a++) cfg->deg[a] = 1;
    cfg->micro = B;
    cfg->m = 1;
    cfg->v = 1;
    cfg->recompute = r;
}

/* ---- the planner's per-layer term, mapped onto the kit's model -------------------------------
 * pl_plan_activation_layer counts Korthikanti et al.'s bytes: 16-bit activations, a 1-byte
 * mask per dropout, for a block with attention dropout. The kit's block differs in three
 * ways, each a term below:
 *   - fp32: every saved tensor takes twice the paper's bytes;
 *   - no dropout mask is saved: the two residual-branch masks (1 byte per element of the
 *     block's output, sbh each) are redrawn from the counter-based RNG in the backward;
 *   - no attention dropout: of the paper's 5 bytes per score (softmax output 2, its mask 1,
 *     the dropped-out probabilities 2) the kit saves the softmax output alone;
 *   - the layernorms' mean and rstd (fp32, 2 layernorms: 16 bytes per token), which the
 *     paper leaves out.
 * So: none 2 (P - 2sbh - 3as^2b) + 16sb, selective 2 (P - 2sbh) + 16sb (the scores term is
 * already gone from P), full 2P (the block input alone, in fp32). */
static double planner_mapped_bytes(const struct pl_model_config *c, int B, enum pl_recompute r)
{
    struct pl_plan_model pm;
    struct pl_plan_config cfg;
    as_planned(c, B, r, &pm, &cfg);
    double P = pl_plan_activation_layer(&pm, &cfg);
    double s = c->seq_len, b = B, h = c->d_model, a = c->n_heads;
    if (r == PL_RECOMPUTE_FULL) return 2.0 * P;
    double scores = r == PL_RECOMPUTE_NONE ? 3.0 * a * s * s * b : 0.0;
    return 2.0 * (P - 2.0 * s * b * h - scores) + 16.0 * s * b;
}

/* hfu/mfu - 1 of the planner for the kit's shape as one microbatch on one GPU: the FLOPs it
 * adds for recomputation over the model FLOPs. */
static double planner_extra_ratio(const struct pl_model_config *c, int B, enum pl_recompute r)
{
    struct pl_plan_cluster cl;
    pl_plan_cluster_from_profile(&cl, pl_profile_get("dgx-h100"), 1);
    struct pl_plan_model pm;
    struct pl_plan_config cfg;
    as_planned(c, B, r, &pm, &cfg);
    struct pl_plan_time t;
    pl_plan_time(&pm, &cl, &cfg, &t);
    return t.hfu / t.mfu - 1.0;
}

/* ---- one model, one choice ------------------------------------------------------------------- */

struct run {
    double loss[2];
    float *grads, *params; /* host copies after the second step */
    double flops, flops_recompute; /* ledger of the first step */
    size_t peak[2];                /* activation peak of each step over the count before */
};

static void run_model(const struct pl_model_config *c, int B, enum pl_recompute r,
                      struct run *out)
{
    const int T = c->seq_len;
    int *tok = malloc((size_t)B * T * sizeof *tok), *tgt = malloc((size_t)B * T * sizeof *tgt);
    random_batch(c->vocab, (size_t)B * T, 11, tok, tgt);
    /* workspace, so the activation count is the model's alone */
    int *dtok = op_from_host(tok, (size_t)B * T * sizeof *tok);
    int *dtgt = op_from_host(tgt, (size_t)B * T * sizeof *tgt);
    struct pl_model *m = pl_model_new(c, PL_MODEL_ALL);
    pl_model_set_recompute(m, r);
    struct pl_adamw_config opt = pl_adamw_config_default();
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1;
    ctx.seed = 99;
    ctx.seq0 = 5;
    struct pl_mem_stats s;
    pl_mem_get_stats(&s);
    /* what the program held before the model's activations: step 1's peak is over it too,
     * the activations of step 0 being held until step 1's forward overwrites them */
    const size_t before = s.current[PL_MEM_ACTIV];
    for (int step = 0; step < 2; step++) {
        pl_mem_reset_peak();
        struct pl_ledger l0 = *pl_ledger(), d;
        out->loss[step] = pl_model_step(m, dtok, dtgt, B, &opt, &ctx);
        pl_ledger_diff(pl_ledger(), &l0, &d);
        pl_mem_get_stats(&s);
        out->peak[step] = s.peak[PL_MEM_ACTIV] - before;
        if (step == 0) {
            out->flops = d.flops;
            out->flops_recompute = d.flops_recompute;
        }
    }
    out->grads = host_copy(m->grads, m->layout.numel);
    out->params = host_copy(m->params, m->layout.numel);
    pl_model_free(m);
    pl_mem_free(dtok);
    pl_mem_free(dtgt);
    free(tok);
    free(tgt);
}

static void test_model_shape(const struct shape *sh)
{
    struct pl_model_config c = config_of(sh);
    const int B = sh->B, T = c.seq_len, L = c.n_layers;
    char what[160];
    snprintf(what, sizeof what, "%s C=%d NH=%d F=%d T=%d L=%d B=%d dropout=%g",
             c.n_experts ? "MoE" : "dense", c.d_model, c.n_heads, c.d_ff, T, L, B, c.dropout);
    struct run runs[NCHOICES];
    for (int i = 0; i < NCHOICES; i++) run_model(&c, B, choices[i], &runs[i]);
    size_t numel;
    {
        struct pl_model_layout lay;
        pl_model_layout_init(&lay, &c);
        numel = lay.numel;
        pl_model_layout_free(&lay);
    }
    const struct run *ref = &runs[0];
    CHECK(ref->flops_recompute == 0.0, "%s: recompute none counted %.0f recomputed FLOPs", what,
          ref->flops_recompute);
    for (int i = 1; i < NCHOICES; i++) {
        const struct run *u = &runs[i];
        const char *name = pl_recompute_name(choices[i]);
        for (int k = 0; k < 2; k++)
            CHECK(memcmp(&u->loss[k], &ref->loss[k], sizeof(double)) == 0,
                  "%s: recompute %s: loss of step %d %.17g, without recomputation %.17g", what,
                  name, k + 1, u->loss[k], ref->loss[k]);
        size_t bad = 0, first = 0;
        for (size_t j = 0; j < numel; j++)
            if (memcmp(&u->grads[j], &ref->grads[j], sizeof(float)) && !bad++) first = j;
        CHECK(bad == 0, "%s: recompute %s: %zu of %zu gradients differ from those without "
              "recomputation (first at flat index %zu: %.9g vs %.9g)", what, name, bad, numel,
              first, bad ? u->grads[first] : 0.0, bad ? ref->grads[first] : 0.0);
        CHECK(memcmp(u->params, ref->params, numel * sizeof(float)) == 0,
              "%s: recompute %s: parameters after two steps differ", what, name);
    }
    if (c.n_experts) goto done;

    /* FLOPs. */
    const int drop = c.dropout > 0.0f;
    double want_sel = L * attention_core_flops(&c, B, T);
    double want_full = L * block_forward_flops(&c, B, T, drop);
    double got_sel = runs[1].flops - ref->flops, got_full = runs[2].flops - ref->flops;
    CHECK(got_sel == want_sel, "%s: selective adds %.0f FLOPs to a step, want one attention "
          "core per block, %d x %.0f = %.0f", what, got_sel, L, want_sel / L, want_sel);
    CHECK(got_full == want_full, "%s: full adds %.0f FLOPs to a step, want one forward of "
          "every block, %d x %.0f = %.0f", what, got_full, L, want_full / L, want_full);
    for (int i = 1; i < NCHOICES; i++) {
        double extra = runs[i].flops - ref->flops;
        CHECK(runs[i].flops_recompute == extra, "%s: recompute %s: the ledger's "
              "flops_recompute is %.0f, the step's extra FLOPs %.0f", what,
              pl_recompute_name(choices[i]), runs[i].flops_recompute, extra);
        CHECK(runs[i].flops - runs[i].flops_recompute == ref->flops, "%s: recompute %s: the "
              "step's model FLOPs (flops - flops_recompute) %.0f, without recomputation %.0f",
              what, pl_recompute_name(choices[i]), runs[i].flops - runs[i].flops_recompute,
              ref->flops);
    }
    /* The planner's selective extra is the attention products alone (4bs^2h per layer), over
     * its model FLOPs of the same tokens. */
    struct pl_plan_model pm;
    struct pl_plan_config unused;
    as_planned(&c, B, PL_RECOMPUTE_SELECTIVE, &pm, &unused);
    double products = L * 4.0 * B * T * T * c.d_model;
    double plan_sel = planner_extra_ratio(&c, B, PL_RECOMPUTE_SELECTIVE) *
                      pl_plan_flops_per_token(&pm) * B * T;
    CHECK(close_to(products, plan_sel), "%s: selective reruns %.0f FLOPs of attention products, "
          "the planner adds %.0f", what, products, plan_sel);

    /* Activation bytes. */
    for (int i = 0; i < NCHOICES; i++) {
        enum pl_recompute r = choices[i];
        size_t want = pl_model_activ_bytes(&c, B, r);
        for (int k = 0; k < 2; k++)
            CHECK(runs[i].peak[k] == want, "%s: recompute %s: activation peak of step %d is "
                  "%zu bytes, want %zu (L x %zu per block + %zu shared + stream and head)",
                  what, pl_recompute_name(r), k + 1, runs[i].peak[k], want,
                  pl_block_acts_bytes(&c, B, T, r), pl_block_rebuild_bytes(&c, B, T, r));
        double mapped = planner_mapped_bytes(&c, B, r);
        CHECK(close_to((double)pl_block_acts_bytes(&c, B, T, r), mapped),
              "%s: recompute %s: a block saves %zu bytes, the planner's per-layer term mapped "
              "onto the kit's block %.0f", what, pl_recompute_name(r),
              pl_block_acts_bytes(&c, B, T, r), mapped);
    }
    /* Full rebuilds one block saved as with none, selective one block's probabilities. */
    CHECK(pl_block_rebuild_bytes(&c, B, T, PL_RECOMPUTE_FULL) ==
              pl_block_acts_bytes(&c, B, T, PL_RECOMPUTE_NONE),
          "%s: full's shared block is not one block saved with none", what);
    CHECK(pl_block_rebuild_bytes(&c, B, T, PL_RECOMPUTE_SELECTIVE) ==
              pl_block_acts_bytes(&c, B, T, PL_RECOMPUTE_NONE) -
                  pl_block_acts_bytes(&c, B, T, PL_RECOMPUTE_SELECTIVE),
          "%s: selective's shared buffer is not what selective leaves unsaved", what);
done:
    for (int i = 0; i < NCHOICES; i++) {
        free(runs[i].grads);
        free(runs[i].params);
    }
}

/* ---- one block through the block-level surface, no shared buffer ------------------------------ */

static void test_block_unshared(const struct shape *sh)
{
    struct pl_model_config c = config_of(sh);
    const int B = sh->B, T = c.seq_len, layer = c.n_layers - 1;
    const size_t NC = (size_t)B * T * c.d_model;
    struct pl_model *m = pl_model_new(&c, PL_MODEL_PARAMS | PL_MODEL_GRADS);
    size_t off, n;
    pl_model_part_range(&m->layout, layer, &off, &n);
    float *hx = malloc(NC * sizeof *hx), *hdy = malloc(NC * sizeof *hdy);
    pl_rng_fill_normal(hx, NC, 3, 1, 0, 0.0f, 1.0f);
    pl_rng_fill_normal(hdy, NC, 3, 2, 0, 0.0f, 1.0f);
    float *x = op_from_host(hx, NC * sizeof *hx), *y = op_alloc(NC * sizeof(float));
    float *dx = op_alloc(NC * sizeof(float));
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1;
    ctx.seed = 5;
    ctx.step = 4;
    float *ref_y = NULL, *ref_dx = NULL, *ref_g = NULL;
    /* The pass after the three is the check's own broken case: full recomputation whose
     * rerun draws other masks than the forward did (the backward's ctx a step ahead, as a
     * rerun seeded per call would), which the comparison must see. */
    PL_ASSERT(c.dropout > 0.0f);
    for (int i = 0; i <= NCHOICES; i++) {
        const int stale = i == NCHOICES;
        enum pl_recompute r = stale ? PL_RECOMPUTE_FULL : choices[i];
        struct pl_model_ctx bctx = ctx;
        bctx.step += (uint64_t)stale;
        pl_model_zero_grad(m);
        pl_copy_from_host(dx, hdy, NC);
        struct pl_mem_stats s;
        pl_mem_get_stats(&s);
        size_t before = s.current[PL_MEM_ACTIV];
        pl_mem_reset_peak();
        struct pl_block_acts a;
        pl_block_acts_new_recompute(&a, &c, B, T, r);
        pl_block_forward(&c, layer, &m->blocks[layer], &a, &ctx, x, y);
        pl_block_backward(&c, layer, &m->blocks[layer], &m->blocks_g[layer], &a, &bctx, dx, dx);
        pl_mem_get_stats(&s);
        size_t peak = s.peak[PL_MEM_ACTIV] - before;
        pl_block_acts_free(&a);
        pl_mem_get_stats(&s);
        CHECK(s.current[PL_MEM_ACTIV] == before, "block, recompute %s: %zu activation bytes "
              "left after the acts were freed", pl_recompute_name(r),
              s.current[PL_MEM_ACTIV] - before);
        size_t want = pl_block_acts_bytes(&c, B, T, r) + pl_block_rebuild_bytes(&c, B, T, r);
        CHECK(peak == want, "block, recompute %s: activation peak %zu bytes, want %zu saved + "
              "%zu rebuilt for the pass", pl_recompute_name(r), peak,
              pl_block_acts_bytes(&c, B, T, r), pl_block_rebuild_bytes(&c, B, T, r));
        float *hy = host_copy(y, NC), *hdx = host_copy(dx, NC);
        float *hg = host_copy(m->grads + off, n);
        if (i == 0) {
            ref_y = hy;
            ref_dx = hdx;
            ref_g = hg;
            continue;
        }
        int same = !memcmp(hy, ref_y, NC * sizeof *hy) &&
                   !memcmp(hdx, ref_dx, NC * sizeof *hdx) && !memcmp(hg, ref_g, n * sizeof *hg);
        if (stale)
            CHECK(!same, "block, full recomputation whose rerun draws the next step's dropout "
                  "masks: its gradients equal those without recomputation, so the comparison "
                  "cannot see a stale mask");
        else
            CHECK(same, "block, recompute %s: output, input gradient or parameter gradients "
                  "differ from those without recomputation", pl_recompute_name(r));
        free(hy);
        free(hdx);
        free(hg);
    }
    free(ref_y);
    free(ref_dx);
    free(ref_g);
    pl_mem_free(x);
    pl_mem_free(y);
    pl_mem_free(dx);
    free(hx);
    free(hdy);
    pl_model_free(m);
}

/* The names are the planner's and the trainer's. */
static void test_names(void)
{
    for (int i = 0; i < NCHOICES; i++) {
        enum pl_recompute r = PL_RECOMPUTE_NONE;
        CHECK(pl_recompute_parse(pl_recompute_name(choices[i]), &r) == 0 && r == choices[i],
              "recompute %s does not parse back", pl_recompute_name(choices[i]));
    }
    enum pl_recompute r = PL_RECOMPUTE_FULL;
    CHECK(pl_recompute_parse("Full", &r) == -1 && r == PL_RECOMPUTE_FULL,
          "'Full' parsed as a recompute choice");
}

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    if (argc > 1) pl_usage_error("test_recompute takes no arguments, got '%s'", argv[1]);
    test_names();
    for (int i = 0; i < NSHAPES; i++) test_model_shape(&shapes[i]);
    struct shape moe = {11, 8, 2, 2, 12, 5, 2, 4, 0.25f};
    test_model_shape(&moe);
    test_block_unshared(&shapes[0]);
    test_block_unshared(&shapes[1]);
    printf("test_recompute: %d checks, %d failed\n", checks, failures);
    pl_finalize();
    return failures ? 1 : 0;
}
