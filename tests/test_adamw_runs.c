/* test_adamw_runs: AdamW over runs of a flat buffer (ops.h pl_adamw_step_runs), the
 * multi-tensor step pl_model_adamw_flat takes (one GPU launch for a whole model instead of
 * one per tensor), against pl_adamw_step called run by run (tensor by tensor), which
 * test_ops checks against the formula:
 *   - runs of odd lengths (1 element, a few, more than a GPU block) decayed and not, two
 *     steps: the same bits;
 *   - more runs than one launch takes (PL_ADAMW_RUNS_PER_LAUNCH): the same bits;
 *   - pl_model_adamw_flat on a model's whole buffer and on a ZeRO-like shard that starts and
 *     ends inside tensors, against pl_adamw_step per tensor with its decay flag.
 * Runs on either build (through the CUDA stand-in too, where the launches are counted by
 * tests/gpu_emu/test_gpu_step.c).
 *     test_adamw_runs             all checks
 *     test_adamw_runs bad-runs    runs that do not end at n: usage error on purpose */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "ops.h"
#include "paralab.h"
#include "testing.h"

struct state {
    float *p, *g, *m, *v; /* op memory */
};

static void state_new(struct state *s, size_t n, uint64_t seed)
{
    float *h = malloc((n ? n : 1) * sizeof *h);
    PL_ASSERT(h);
    float **dst[4] = {&s->p, &s->g, &s->m, &s->v};
    for (int k = 0; k < 4; k++) {
        for (size_t i = 0; i < n; i++) {
            float x = (float)pl_rng_normal(seed, (uint64_t)k, i);
            h[i] = k == 3 ? x * x : x; /* v, a second moment, is not negative */
        }
        *dst[k] = op_from_host(h, n * sizeof *h);
    }
    free(h);
}

static void state_free(struct state *s)
{
    pl_mem_free(s->p), pl_mem_free(s->g), pl_mem_free(s->m), pl_mem_free(s->v);
}

/* The parameters and both moments of a and b, the same bits. */
static void expect_same(const char *label, const struct state *a, const struct state *b,
                        size_t n)
{
    const float *x[3] = {a->p, a->m, a->v}, *y[3] = {b->p, b->m, b->v};
    static const char *const name[3] = {"param", "m", "v"};
    float *hx = malloc((n ? n : 1) * sizeof *hx), *hy = malloc((n ? n : 1) * sizeof *hy);
    PL_ASSERT(hx && hy);
    for (int k = 0; k < 3; k++) {
        pl_to_host(hx, x[k], n * sizeof *hx);
        pl_to_host(hy, y[k], n * sizeof *hy);
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < n; i++)
            if (memcmp(&hx[i], &hy[i], sizeof *hx) && !bad++) first = i;
        CHECK(bad == 0, "%s: %s differs at %zu elements, the first %zu: %.9g, want %.9g",
              label, name[k], bad, first, (double)hx[first], (double)hy[first]);
    }
    free(hx);
    free(hy);
}

static const float LR = 1e-2f, B1 = 0.9f, B2 = 0.95f, EPS = 1e-8f, WD = 0.1f;

static void test_runs(const char *label, const size_t *len, int nruns)
{
    size_t *ends = malloc((size_t)nruns * sizeof *ends);
    unsigned char *decay = malloc((size_t)nruns);
    PL_ASSERT(ends && decay);
    size_t n = 0;
    for (int r = 0; r < nruns; r++) {
        n += len[r];
        ends[r] = n;
        decay[r] = (unsigned char)(r % 3 != 1);
    }
    struct state runs, each;
    state_new(&runs, n, 11);
    state_new(&each, n, 11);
    for (int t = 1; t <= 2; t++) {
        pl_adamw_step_runs(runs.p, runs.g, runs.m, runs.v, n, ends, decay, nruns, t, LR, B1,
                           B2, EPS, WD);
        for (int r = 0; r < nruns; r++) {
            size_t k = r ? ends[r - 1] : 0;
            pl_adamw_step(each.p + k, each.g + k, each.m + k, each.v + k, len[r], t, LR, B1,
                          B2, EPS, decay[r] ? WD : 0.0f);
        }
    }
    expect_same(label, &runs, &each, n);
    state_free(&runs);
    state_free(&each);
    free(ends);
    free(decay);
}

/* pl_model_adamw_flat on [offset, offset + n) against pl_adamw_step per overlapped tensor. */
static void test_flat(const struct pl_model_layout *lay, size_t offset, size_t n)
{
    char label[96];
    snprintf(label, sizeof label, "pl_model_adamw_flat [%zu, %zu) of %zu", offset, offset + n,
             lay->numel);
    struct pl_adamw_config opt = pl_adamw_config_default();
    struct state flat, each;
    state_new(&flat, n, 12);
    state_new(&each, n, 12);
    for (int t = 1; t <= 2; t++) {
        pl_model_adamw_flat(lay, offset, n, flat.p, flat.g, flat.m, flat.v, t, &opt);
        for (int i = 0; i < lay->n_tensors; i++) {
            const struct pl_param_desc *d = &lay->tensors[i];
            size_t lo = d->offset > offset ? d->offset : offset;
            size_t hi = d->offset + d->numel < offset + n ? d->offset + d->numel : offset + n;
            if (lo >= hi) continue;
            size_t k = lo - offset;
            pl_adamw_step(each.p + k, each.g + k, each.m + k, each.v + k, hi - lo, t, opt.lr,
                          opt.beta1, opt.beta2, opt.eps, d->decay ? opt.weight_decay : 0.0f);
        }
    }
    expect_same(label, &flat, &each, n);
    state_free(&flat);
    state_free(&each);
}

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    if (argc > 1) {
        if (strcmp(argv[1], "bad-runs"))
            pl_usage_error("test_adamw_runs: unknown mode '%s' (modes: bad-runs, or none for "
                           "all checks)", argv[1]);
        struct state s;
        state_new(&s, 8, 1);
        size_t ends[2] = {3, 7};
        unsigned char decay[2] = {0, 1};
        pl_adamw_step_runs(s.p, s.g, s.m, s.v, 8, ends, decay, 2, 1, LR, B1, B2, EPS, WD);
        printf("test_adamw_runs bad-runs: the op accepted runs ending at 7 for n = 8\n");
        state_free(&s);
        pl_finalize();
        return 1;
    }
    static const size_t odd[] = {1, 7, 300, 2, 1025, 33, 1, 256};
    test_runs("odd runs", odd, (int)(sizeof odd / sizeof *odd));
    static const size_t one[] = {77};
    test_runs("one run", one, 1);
    int many = 2 * PL_ADAMW_RUNS_PER_LAUNCH + 5;
    size_t *len = malloc((size_t)many * sizeof *len);
    PL_ASSERT(len);
    for (int r = 0; r < many; r++) len[r] = 1 + (size_t)(r % 4);
    test_runs("more runs than one launch takes", len, many);
    free(len);

    struct pl_model_config c = pl_model_config_default();
    c.n_layers = 3;
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, &c);
    test_flat(&lay, 0, lay.numel);
    test_flat(&lay, lay.embed_numel - 5, lay.block_numel + 17); /* starts and ends in tensors */
    pl_model_layout_free(&lay);
    c.n_experts = 4; /* MoE: the stacked expert biases are not decayed */
    pl_model_layout_init(&lay, &c);
    test_flat(&lay, 0, lay.numel);
    pl_model_layout_free(&lay);
    printf("test_adamw_runs: %d checks, %d failed\n", checks, failures);
    pl_finalize();
    return failures ? 1 : 0;
}
