/* zero.c: Lab 3 reference solution, ZeRO stages 1, 2 and 3 over units (embedding, blocks,
 * head) cut into n equal padded chunks. Each step follows the handout's pseudocode:
 *
 *   stage 1: forward, backward into full gradients; reduce-scatter each unit's gradient;
 *            clip and AdamW on the own chunks; all-gather each unit's parameters.
 *   stage 2: forward; backward unit by unit into a bucket that is reduce-scattered into the
 *            gradient shard and freed at once; clip, AdamW, all-gather as in stage 1.
 *   stage 3: forward and backward gather each unit just before use and free it right after
 *            (optionally gathering the next one while this one computes); gradients as in
 *            stage 2; clip and AdamW on the shard, nothing to gather afterwards. */
#include "zero.h"

#include "check.h"
#include "mem.h"
#include "ops.h"

/* ---- the layout (handout section 2) ---- */

void zero_layout_init(struct zero_layout *zl, const struct pl_model_layout *lay, int n, int rank)
{
    int L = lay->cfg.n_layers;
    zl->n = n;
    zl->rank = rank;
    zl->nunits = L + 2;
    zl->numel = lay->numel;
    zl->full_numel = zl->shard_numel = 0;
    for (int u = 0; u < zl->nunits; u++) {
        struct zero_unit *x = &zl->unit[u];
        x->part = u - 1;
        pl_model_part_range(lay, x->part, &x->offset, &x->numel);
        x->chunk = (x->numel + (size_t)n - 1) / (size_t)n;
        x->padded = x->chunk * (size_t)n;
        x->full_offset = zl->full_numel;
        x->shard_offset = zl->shard_numel;
        zl->full_numel += x->padded;
        zl->shard_numel += x->chunk;
    }
}

/* Elements of this rank's chunk of unit u that are parameters, not padding. */
static size_t real_in_chunk(const struct zero_layout *zl, int u)
{
    const struct zero_unit *x = &zl->unit[u];
    size_t start = (size_t)zl->rank * x->chunk;
    if (start >= x->numel) return 0;
    return x->numel - start < x->chunk ? x->numel - start : x->chunk;
}

static float *alloc_floats(size_t n, enum pl_mem_cat cat, const char *label)
{
    return pl_mem_alloc(n * sizeof(float), cat, PL_DEVICE, label);
}

/* ---- setup (handout sections 3 to 5) ---- */

/* The parameters of the own chunks, initialised as the same slices of the full model. */
static void init_shard(const struct zero *z, float *shard)
{
    for (int u = 0; u < z->zl.nunits; u++) {
        const struct zero_unit *x = &z->zl.unit[u];
        size_t real = real_in_chunk(&z->zl, u);
        if (real)
            pl_model_init_flat(&z->lay, x->offset + (size_t)z->zl.rank * x->chunk, real,
                               shard + x->shard_offset);
    }
}

static void init_full(const struct zero *z, float *full)
{
    for (int u = 0; u < z->zl.nunits; u++) {
        const struct zero_unit *x = &z->zl.unit[u];
        pl_model_init_flat(&z->lay, x->offset, x->numel, full + x->full_offset);
    }
}

struct zero *zero_new(const struct pl_model_config *cfg, const struct pl_adamw_config *opt,
                      int stage, int prefetch, struct pl_comm *comm)
{
    PL_REQUIRE(stage >= 1 && stage <= 3, "ZeRO stage %d does not exist (choose 1, 2 or 3)",
               stage);
    PL_REQUIRE(cfg->n_layers + 2 <= ZERO_MAX_UNITS, "n_layers=%d: this lab handles at most %d "
               "layers", cfg->n_layers, ZERO_MAX_UNITS - 2);
    struct zero *z = pl_mem_alloc(sizeof *z, PL_MEM_WORK, PL_HOST, "zero state");
    z->stage = stage;
    z->prefetch = prefetch;
    z->comm = comm;
    z->cfg = *cfg;
    z->opt = *opt;
    pl_model_layout_init(&z->lay, cfg);
    zero_layout_init(&z->zl, &z->lay, pl_comm_size(comm), pl_comm_rank(comm));
    size_t full = z->zl.full_numel, shard = z->zl.shard_numel;
    if (stage == 3) {
        z->params = alloc_floats(shard, PL_MEM_PARAMS, "zero-3 parameter shard");
        init_shard(z, z->params);
    } else {
        z->params = alloc_floats(full, PL_MEM_PARAMS, "zero parameters");
        init_full(z, z->params);
    }
    z->grads = stage == 1 ? alloc_floats(full, PL_MEM_GRADS, "zero-1 gradients")
                          : alloc_floats(shard, PL_MEM_GRADS, "zero gradient shard");
    z->m = alloc_floats(shard, PL_MEM_OPTIM, "zero adamw m shard");
    z->v = alloc_floats(shard, PL_MEM_OPTIM, "zero adamw v shard");
    z->pass = zero_pass_new(cfg);
    return z;
}

void zero_free(struct zero *z)
{
    if (!z) return;
    zero_pass_free(z->pass);
    pl_mem_free(z->params);
    pl_mem_free(z->grads);
    pl_mem_free(z->m);
    pl_mem_free(z->v);
    pl_model_layout_free(&z->lay);
    pl_mem_free(z);
}

/* ---- the optimizer on the shard ---- */

/* g(u) is where the own chunk of unit u's gradient lives. Clipping needs the norm of the
 * whole gradient: each rank sums the squares of its chunks, the ranks add their sums. */
static void clip_shard(struct zero *z, float *(*g)(struct zero *, int))
{
    double sq = 0;
    for (int u = 0; u < z->zl.nunits; u++) sq += pl_grad_norm_sq(g(z, u), z->zl.unit[u].chunk);
    float scale = pl_clip_scale(zero_sum_over_ranks(z->comm, sq), z->opt.grad_clip);
    if (scale < 1.0f)
        for (int u = 0; u < z->zl.nunits; u++) pl_scale(g(z, u), z->zl.unit[u].chunk, scale);
}

/* AdamW on the own chunks only: p(u) and g(u) locate them, m and v are the shard's. */
static void adamw_shard(struct zero *z, float *(*p)(struct zero *, int),
                        float *(*g)(struct zero *, int))
{
    z->t++;
    for (int u = 0; u < z->zl.nunits; u++) {
        const struct zero_unit *x = &z->zl.unit[u];
        size_t real = real_in_chunk(&z->zl, u);
        if (real)
            pl_model_adamw_flat(&z->lay, x->offset + (size_t)z->zl.rank * x->chunk, real,
                                p(z, u), g(z, u), z->m + x->shard_offset,
                                z->v + x->shard_offset, z->t, &z->opt);
    }
}

/* Own chunk of unit u inside a full buffer, and inside a shard. */
static float *full_params_chunk(struct zero *z, int u)
{
    return z->params + z->zl.unit[u].full_offset + (size_t)z->zl.rank * z->zl.unit[u].chunk;
}

static float *full_grads_chunk(struct zero *z, int u)
{
    return z->grads + z->zl.unit[u].full_offset + (size_t)z->zl.rank * z->zl.unit[u].chunk;
}

static float *shard_params_chunk(struct zero *z, int u)
{
    return z->params + z->zl.unit[u].shard_offset;
}

static float *shard_grads_chunk(struct zero *z, int u)
{
    return z->grads + z->zl.unit[u].shard_offset;
}

/* Every rank updated its own chunks: put the whole model back on every rank, in place. */
static void all_gather_params(struct zero *z)
{
    for (int u = 0; u < z->zl.nunits; u++)
        pl_all_gather(z->comm, full_params_chunk(z, u), z->params + z->zl.unit[u].full_offset,
                      z->zl.unit[u].chunk);
}

static void forward_full(struct zero *z, const int *tokens, const int *targets, int B)
{
    zero_pass_begin(z->pass, tokens, targets, B);
    for (int u = 0; u < z->zl.nunits; u++)
        zero_forward_part(z->pass, z->zl.unit[u].part, z->params + z->zl.unit[u].full_offset);
}

/* ---- stage 1 (handout section 3) ---- */

static double zero1_step(struct zero *z, const int *tokens, const int *targets, int B)
{
    pl_zero(z->grads, z->zl.full_numel);
    forward_full(z, tokens, targets, B);
    for (int u = z->zl.nunits - 1; u >= 0; u--) {
        const struct zero_unit *x = &z->zl.unit[u];
        zero_backward_part(z->pass, x->part, z->params + x->full_offset,
                           z->grads + x->full_offset);
    }
    /* The average over ranks of the own chunk, left in place: half an all-reduce. */
    for (int u = 0; u < z->zl.nunits; u++)
        pl_reduce_scatter(z->comm, z->grads + z->zl.unit[u].full_offset, full_grads_chunk(z, u),
                          z->zl.unit[u].chunk, PL_AVG);
    clip_shard(z, full_grads_chunk);
    adamw_shard(z, full_params_chunk, full_grads_chunk);
    all_gather_params(z);
    return zero_pass_loss(z->pass);
}

/* ---- stage 2 (handout section 4) ---- */

/* Backward of unit u into a bucket of its own, reduce-scattered into the gradient shard and
 * freed: at most one unit's full gradient is ever alive. */
static void backward_unit_to_shard(struct zero *z, int u, const float *params)
{
    const struct zero_unit *x = &z->zl.unit[u];
    float *bucket = alloc_floats(x->padded, PL_MEM_GRADS, "zero gradient bucket");
    zero_backward_part(z->pass, x->part, params, bucket);
    pl_reduce_scatter(z->comm, bucket, shard_grads_chunk(z, u), x->chunk, PL_AVG);
    pl_mem_free(bucket);
}

static double zero2_step(struct zero *z, const int *tokens, const int *targets, int B)
{
    forward_full(z, tokens, targets, B);
    for (int u = z->zl.nunits - 1; u >= 0; u--)
        backward_unit_to_shard(z, u, z->params + z->zl.unit[u].full_offset);
    clip_shard(z, shard_grads_chunk);
    adamw_shard(z, full_params_chunk, shard_grads_chunk);
    all_gather_params(z);
    return zero_pass_loss(z->pass);
}

/* ---- stage 3 (handout section 5) ---- */

/* A unit's full parameters on the way: the buffer and the all-gather filling it. */
struct gathered {
    float *buf;
    struct pl_handle *h;
};

static struct gathered gather_start(struct zero *z, int u)
{
    const struct zero_unit *x = &z->zl.unit[u];
    struct gathered g;
    g.buf = alloc_floats(x->padded, PL_MEM_PARAMS, "zero-3 gathered unit");
    g.h = pl_all_gather_async(z->comm, z->params + x->shard_offset, g.buf, x->chunk);
    return g;
}

/* Units in the order a pass visits them: forward 0..U-1, backward U-1..0. Returns unit u's
 * full parameters, gathered now or, with prefetch, while the previous unit computed; with
 * prefetch it also starts gathering the unit after u. */
static float *gather_for_use(struct zero *z, struct gathered *next, int u, int after)
{
    struct gathered cur = next->buf ? *next : gather_start(z, u);
    next->buf = NULL;
    if (z->prefetch && after >= 0 && after < z->zl.nunits) *next = gather_start(z, after);
    pl_wait(cur.h);
    return cur.buf;
}

static double zero3_step(struct zero *z, const int *tokens, const int *targets, int B)
{
    int U = z->zl.nunits;
    struct gathered next = {NULL, NULL};
    zero_pass_begin(z->pass, tokens, targets, B);
    for (int u = 0; u < U; u++) {
        float *p = gather_for_use(z, &next, u, u + 1 < U ? u + 1 : U - 1);
        zero_forward_part(z->pass, z->zl.unit[u].part, p);
        pl_mem_free(p);
    }
    /* With prefetch the head (the last unit) is already on its way for the backward. */
    for (int u = U - 1; u >= 0; u--) {
        float *p = gather_for_use(z, &next, u, u - 1);
        backward_unit_to_shard(z, u, p);
        pl_mem_free(p);
    }
    clip_shard(z, shard_grads_chunk);
    adamw_shard(z, shard_params_chunk, shard_grads_chunk);
    return zero_pass_loss(z->pass);
}

double zero_step(struct zero *z, const int *tokens, const int *targets, int B)
{
    switch (z->stage) {
    case 1: return zero1_step(z, tokens, targets, B);
    case 2: return zero2_step(z, tokens, targets, B);
    default: return zero3_step(z, tokens, targets, B);
    }
}
