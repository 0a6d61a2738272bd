/* model.c: the reference GPT of model.h -- configuration, parameter layout and
 * initialisation, the dense block halves, the head, the whole-model passes and the AdamW
 * step. The mixture-of-experts half lives in model_moe.c. Only ops.h touches op memory,
 * so the same code runs on the GPU build with device pointers. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "ledger.h"
#include "mem.h"
#include "model_internal.h"
#include "ops.h"
#include "rng.h"
#include "trace.h"

/* ---- configuration ------------------------------------------------------------------------ */

struct pl_model_config pl_model_config_default(void)
{
    struct pl_model_config c = {
        .vocab = 256, .d_model = 64, .n_layers = 2, .n_heads = 4, .d_ff = 256, .seq_len = 64,
        .dropout = 0.0f, .n_experts = 0, .top_k = 2, .capacity_factor = 1.25f,
        .aux_loss_coef = 0.01f, .seed = 1234,
    };
    return c;
}

const char *pl_model_config_error(const struct pl_model_config *c, char *buf, size_t len)
{
    static const char *const why[] = {
        "the number of token ids, e.g. 256 for bytes", "the width of the residual stream",
        "the number of transformer blocks", "attention heads", "the MLP hidden width",
        "the longest sequence the position embedding covers",
    };
    const int sizes[] = {c->vocab, c->d_model, c->n_layers, c->n_heads, c->d_ff, c->seq_len};
    static const char *const names[] = {"vocab", "d_model", "n_layers",
                                        "n_heads", "d_ff", "seq_len"};
    for (int i = 0; i < 6; i++)
        if (sizes[i] <= 0) {
            snprintf(buf, len, "%s=%d must be positive (%s)", names[i], sizes[i], why[i]);
            return buf;
        }
    if (c->d_model % c->n_heads) {
        char ds[256];
        snprintf(buf, len, "d_model=%d is not divisible by n_heads=%d (choose n_heads in {%s})",
                 c->d_model, c->n_heads, pl_divisors(c->d_model, ds, sizeof ds));
        return buf;
    }
    if (!(c->dropout >= 0.0f && c->dropout < 1.0f)) {
        snprintf(buf, len, "dropout=%g must be in [0, 1) (0 turns it off)", c->dropout);
        return buf;
    }
    if (c->n_experts < 0) {
        snprintf(buf, len, "n_experts=%d must be >= 0 (0 for a dense MLP)", c->n_experts);
        return buf;
    }
    if (c->n_experts > 0) {
        if (c->top_k < 1 || c->top_k > c->n_experts) {
            snprintf(buf, len,
                     "top_k=%d must be between 1 and n_experts=%d (each token picks top_k "
                     "distinct experts)",
                     c->top_k, c->n_experts);
            return buf;
        }
        if (!(c->capacity_factor > 0.0f)) {
            snprintf(buf, len,
                     "capacity_factor=%g must be positive (1.0 gives each expert its even "
                     "share of tokens, 1.25 some slack)",
                     c->capacity_factor);
            return buf;
        }
        if (!(c->aux_loss_coef >= 0.0f)) {
            snprintf(buf, len,
                     "aux_loss_coef=%g must be >= 0 (0 turns load balancing off; 0.01 is usual)",
                     c->aux_loss_coef);
            return buf;
        }
    }
    if ((int)c->attention < PL_ATTENTION_MATERIALISED || c->attention > PL_ATTENTION_FLASH) {
        snprintf(buf, len, "attention=%d is not a choice (" PL_ATTENTION_NAMES ")",
                 (int)c->attention);
        return buf;
    }
    if ((int)c->precision < PL_PRECISION_FP32 || c->precision > PL_PRECISION_BF16) {
        snprintf(buf, len, "precision=%d is not a choice (" PL_PRECISION_NAMES ")",
                 (int)c->precision);
        return buf;
    }
    if (c->grads_fp32 != 0 && c->grads_fp32 != 1) {
        snprintf(buf, len, "grads_fp32=%d must be 0 or 1", c->grads_fp32);
        return buf;
    }
    if (c->grads_fp32 && c->precision != PL_PRECISION_BF16) {
        snprintf(buf, len, "grads_fp32=1 is for precision=bf16 (with fp32 the gradients are "
                 "fp32 already): set precision bf16 or leave grads_fp32 0");
        return buf;
    }
    return NULL;
}

const char *pl_precision_name(enum pl_precision p)
{
    return p == PL_PRECISION_BF16 ? "bf16" : p == PL_PRECISION_FP32 ? "fp32" : "?";
}

int pl_precision_parse(const char *text, enum pl_precision *out)
{
    if (!strcmp(text, "fp32")) *out = PL_PRECISION_FP32;
    else if (!strcmp(text, "bf16")) *out = PL_PRECISION_BF16;
    else return -1;
    return 0;
}

void pl_model_config_check_or_die(const struct pl_model_config *c)
{
    char buf[512];
    const char *err = pl_model_config_error(c, buf, sizeof buf);
    if (err) pl_usage_error("model config: %s", err);
}

const char *pl_model_config_describe(const struct pl_model_config *c, char *buf, size_t len)
{
    int w = snprintf(buf, len,
                     "vocab=%d d_model=%d n_layers=%d n_heads=%d d_ff=%d seq_len=%d dropout=%g",
                     c->vocab, c->d_model, c->n_layers, c->n_heads, c->d_ff, c->seq_len,
                     c->dropout);
    if (c->n_experts > 0 && w > 0 && (size_t)w < len)
        w += snprintf(buf + w, len - (size_t)w,
                      " n_experts=%d top_k=%d capacity_factor=%g aux_loss_coef=%g",
                      c->n_experts, c->top_k, c->capacity_factor, c->aux_loss_coef);
    if (c->precision == PL_PRECISION_BF16 && w > 0 && (size_t)w < len)
        snprintf(buf + w, len - (size_t)w, " precision=bf16%s",
                 c->grads_fp32 ? " grads_fp32=1" : "");
    return buf;
}

/* ---- layout ------------------------------------------------------------------------------
 * part_tensors() is the one list of tensors: the layout table and the bind functions both
 * walk it, so offsets and pointers cannot disagree. */

#define MAX_PART_TENSORS 16

static void add_tensor(struct pl_param_desc *out, int *n, size_t *off, const char *name,
                       int part, int ndim, const int64_t *shape, enum pl_param_init init,
                       float std)
{
    struct pl_param_desc *d = &out[(*n)++];
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    d->part = part;
    d->ndim = ndim;
    d->numel = 1;
    for (int i = 0; i < ndim; i++) {
        d->shape[i] = shape[i];
        d->numel *= (size_t)shape[i];
    }
    d->offset = *off;
    *off += d->numel;
    d->init = init;
    d->std = std;
    d->decay = ndim >= 2;
}

/* Fills out[] with the tensors of one part, offsets relative to the part's start. */
static int part_tensors(const struct pl_model_config *c, int part, struct pl_param_desc *out)
{
    int n = 0;
    size_t off = 0;
    const int64_t V = c->vocab, C = c->d_model, F = c->d_ff, E = c->n_experts;
    const float std = 0.02f;
    /* GPT-2: projections into the residual stream shrink with depth so its variance does
     * not grow with the number of blocks. */
    const float std_res = 0.02f / sqrtf(2.0f * (float)c->n_layers);
    char nm[PL_NAME_LEN];
#define T1(name, a, init, s) add_tensor(out, &n, &off, name, part, 1, (int64_t[]){a}, init, s)
#define T2(name, a, b, init, s) \
    add_tensor(out, &n, &off, name, part, 2, (int64_t[]){a, b}, init, s)
#define T3(name, a, b, d, init, s) \
    add_tensor(out, &n, &off, name, part, 3, (int64_t[]){a, b, d}, init, s)
#define NM(suffix) (snprintf(nm, sizeof nm, "h.%d.%s", part, suffix), nm)
    if (part == PL_PART_EMBED) {
        T2("wte", V, C, PL_INIT_NORMAL, std);
        T2("wpe", (int64_t)c->seq_len, C, PL_INIT_NORMAL, std);
    } else if (part == c->n_layers) {
        T1("lnf.w", C, PL_INIT_ONES, 0);
        T1("lnf.b", C, PL_INIT_ZEROS, 0);
        T2("head.w", V, C, PL_INIT_NORMAL, std);
    } else {
        T1(NM("ln1.w"), C, PL_INIT_ONES, 0);
        T1(NM("ln1.b"), C, PL_INIT_ZEROS, 0);
        T2(NM("attn.w_qkv"), 3 * C, C, PL_INIT_NORMAL, std);
        T1(NM("attn.b_qkv"), 3 * C, PL_INIT_ZEROS, 0);
        T2(NM("attn.w_proj"), C, C, PL_INIT_NORMAL, std_res);
        T1(NM("attn.b_proj"), C, PL_INIT_ZEROS, 0);
        T1(NM("ln2.w"), C, PL_INIT_ONES, 0);
        T1(NM("ln2.b"), C, PL_INIT_ZEROS, 0);
        if (E == 0) {
            T2(NM("mlp.w_fc"), F, C, PL_INIT_NORMAL, std);
            T1(NM("mlp.b_fc"), F, PL_INIT_ZEROS, 0);
            T2(NM("mlp.w_proj"), C, F, PL_INIT_NORMAL, std_res);
            T1(NM("mlp.b_proj"), C, PL_INIT_ZEROS, 0);
        } else {
            T2(NM("moe.w_router"), E, C, PL_INIT_NORMAL, std);
            T3(NM("moe.w_fc"), E, F, C, PL_INIT_NORMAL, std);
            T2(NM("moe.b_fc"), E, F, PL_INIT_ZEROS, 0);
            T3(NM("moe.w_proj"), E, C, F, PL_INIT_NORMAL, std_res);
            T2(NM("moe.b_proj"), E, C, PL_INIT_ZEROS, 0);
            /* stacked expert biases are vectors per expert: not decayed */
            out[n - 1].decay = out[n - 3].decay = 0;
        }
    }
#undef T1
#undef T2
#undef T3
#undef NM
    PL_ASSERT(n <= MAX_PART_TENSORS);
    return n;
}

static size_t part_numel(const struct pl_model_config *c, int part)
{
    struct pl_param_desc t[MAX_PART_TENSORS];
    int n = part_tensors(c, part, t);
    return t[n - 1].offset + t[n - 1].numel;
}

static void layout_fill(struct pl_model_layout *lay, const struct pl_model_config *cfg,
                        unsigned ends)
{
    pl_model_config_check_or_die(cfg);
    memset(lay, 0, sizeof *lay);
    lay->cfg = *cfg;
    lay->ends = ends;
    struct pl_param_desc tmp[MAX_PART_TENSORS];
    int total = 0;
    for (int part = PL_PART_EMBED; part <= cfg->n_layers; part++)
        if (pl_model_layout_holds(lay, part)) total += part_tensors(cfg, part, tmp);
    lay->tensors = pl_mem_alloc((size_t)total * sizeof *lay->tensors, PL_MEM_WORK, PL_HOST,
                                "model layout table");
    size_t base = 0;
    for (int part = PL_PART_EMBED; part <= cfg->n_layers; part++) {
        if (!pl_model_layout_holds(lay, part)) continue;
        int n = part_tensors(cfg, part, tmp);
        for (int i = 0; i < n; i++) {
            tmp[i].offset += base;
            lay->tensors[lay->n_tensors++] = tmp[i];
        }
        base = tmp[n - 1].offset + tmp[n - 1].numel;
    }
    PL_ASSERT(lay->n_tensors == total);
    lay->numel = base;
    lay->embed_numel = part_numel(cfg, PL_PART_EMBED);
    lay->block_numel = part_numel(cfg, 0);
    lay->head_numel = part_numel(cfg, cfg->n_layers);
}

void pl_model_layout_init(struct pl_model_layout *lay, const struct pl_model_config *cfg)
{
    layout_fill(lay, cfg, 0);
}

/* ends names the embedding, the head or both, and nothing else. */
static void check_ends(const char *fn, unsigned ends)
{
    PL_REQUIRE(ends != 0 && (ends & ~(PL_ENDS_EMBED | PL_ENDS_HEAD)) == 0,
               "%s: ends = %u names no end; give PL_ENDS_EMBED (%u), "
               "PL_ENDS_HEAD (%u) or both (%u)", fn, ends, PL_ENDS_EMBED, PL_ENDS_HEAD,
               PL_ENDS_EMBED | PL_ENDS_HEAD);
}

void pl_model_layout_init_ends(struct pl_model_layout *lay, const struct pl_model_config *cfg,
                               unsigned ends)
{
    check_ends("pl_model_layout_init_ends", ends);
    layout_fill(lay, cfg, ends);
}

int pl_model_layout_holds(const struct pl_model_layout *lay, int part)
{
    if (!lay->ends) return part >= PL_PART_EMBED && part <= lay->cfg.n_layers;
    if (part == PL_PART_EMBED) return (lay->ends & PL_ENDS_EMBED) != 0;
    if (part == lay->cfg.n_layers) return (lay->ends & PL_ENDS_HEAD) != 0;
    return 0;
}

void pl_model_layout_free(struct pl_model_layout *lay)
{
    pl_mem_free(lay->tensors);
    memset(lay, 0, sizeof *lay);
}

void pl_model_part_range(const struct pl_model_layout *lay, int part, size_t *offset,
                         size_t *numel)
{
    PL_REQUIRE(part >= PL_PART_EMBED && part <= lay->cfg.n_layers,
               "pl_model_part_range: part %d does not exist; the parts are PL_PART_EMBED (%d), "
               "the blocks 0..%d and PL_PART_HEAD(cfg) (%d), in that order along the model", part,
               PL_PART_EMBED, lay->cfg.n_layers - 1, lay->cfg.n_layers);
    PL_REQUIRE(pl_model_layout_holds(lay, part),
               "pl_model_part_range: part %d is not in this layout, which holds only the "
               "model's %s (pl_model_new_ends): ask for a part it holds", part,
               lay->ends == (PL_ENDS_EMBED | PL_ENDS_HEAD) ? "embedding and head"
               : lay->ends == PL_ENDS_EMBED                ? "embedding"
                                                           : "head");
    const int embed = pl_model_layout_holds(lay, PL_PART_EMBED);
    if (part == PL_PART_EMBED) {
        *offset = 0;
        *numel = lay->embed_numel;
    } else if (part < lay->cfg.n_layers) {
        *offset = lay->embed_numel + (size_t)part * lay->block_numel;
        *numel = lay->block_numel;
    } else {
        *offset = (embed ? lay->embed_numel : 0) +
                  (lay->ends ? 0 : (size_t)lay->cfg.n_layers * lay->block_numel);
        *numel = lay->head_numel;
    }
}

const struct pl_param_desc *pl_model_find_param(const struct pl_model_layout *lay,
                                                const char *name)
{
    for (int i = 0; i < lay->n_tensors; i++)
        if (!strcmp(lay->tensors[i].name, name)) return &lay->tensors[i];
    return NULL;
}

/* ---- initialisation ------------------------------------------------------------------------- */

#define INIT_CHUNK ((size_t)1 << 16) /* host staging, so a huge tensor needs no huge buffer */

void pl_model_init_param_slice(const struct pl_model_layout *lay, const struct pl_param_desc *d,
                               size_t offset, size_t n, float *out)
{
    PL_REQUIRE(offset + n <= d->numel,
               "pl_model_init_param_slice: elements [%zu, %zu) of %s, which has %zu: a slice "
               "must lie inside its tensor (cut it with the tensor's own numel)", offset,
               offset + n, d->name, d->numel);
    if (n == 0) return;
    uint64_t stream = pl_rng_stream(d->name);
    size_t chunk = n < INIT_CHUNK ? n : INIT_CHUNK;
    float *tmp = pl_mem_alloc(chunk * sizeof(float), PL_MEM_WORK, PL_HOST, "init staging");
    for (size_t done = 0; done < n; done += chunk) {
        size_t k = n - done < chunk ? n - done : chunk;
        if (d->init == PL_INIT_NORMAL)
            pl_rng_fill_normal(tmp, k, lay->cfg.seed, stream, offset + done, 0.0f, d->std);
        else
            for (size_t i = 0; i < k; i++) tmp[i] = d->init == PL_INIT_ONES ? 1.0f : 0.0f;
        pl_to_device(out + done, tmp, k * sizeof(float));
    }
    pl_mem_free(tmp);
}

/* The tensors overlapping a flat range [offset, offset+n) -- a ZeRO shard may start and end
 * inside tensors -- in flat order: each overlap is `len` elements from element `in_tensor`
 * of tensor d, at element `at` of the range. Loop:
 *     for (struct overlap o = {0}; next_overlap(lay, offset, n, &o);) ... */
struct overlap {
    const struct pl_param_desc *d;
    size_t in_tensor, at, len;
    int next; /* index of the tensor to look at next */
};

static int next_overlap(const struct pl_model_layout *lay, size_t offset, size_t n,
                        struct overlap *o)
{
    PL_REQUIRE(offset + n <= lay->numel,
               "the flat range [%zu, %zu) runs past the model's %zu parameters: a shard of "
               "the flat parameters must end at or before numel (the last rank's shard is "
               "the shorter one when n does not divide numel)", offset, offset + n,
               lay->numel);
    while (o->next < lay->n_tensors) {
        const struct pl_param_desc *d = &lay->tensors[o->next++];
        size_t lo = offset > d->offset ? offset : d->offset;
        size_t hi = offset + n < d->offset + d->numel ? offset + n : d->offset + d->numel;
        if (lo >= hi) continue;
        o->d = d;
        o->in_tensor = lo - d->offset;
        o->at = lo - offset;
        o->len = hi - lo;
        return 1;
    }
    return 0;
}

void pl_model_init_flat(const struct pl_model_layout *lay, size_t offset, size_t n, float *out)
{
    for (struct overlap o = {0}; next_overlap(lay, offset, n, &o);)
        pl_model_init_param_slice(lay, o.d, o.in_tensor, o.len, out + o.at);
}

/* ---- views ------------------------------------------------------------------------------------ */

void pl_embed_bind(const struct pl_model_config *c, float *base, struct pl_embed_params *out)
{
    struct pl_param_desc t[MAX_PART_TENSORS];
    part_tensors(c, PL_PART_EMBED, t);
    out->wte = base + t[0].offset;
    out->wpe = base + t[1].offset;
}

void pl_block_bind(const struct pl_model_config *c, float *base, struct pl_block_params *out)
{
    struct pl_param_desc t[MAX_PART_TENSORS];
    part_tensors(c, 0, t);
    memset(out, 0, sizeof *out);
    float **dense[] = {&out->ln1_w, &out->ln1_b, &out->w_qkv, &out->b_qkv, &out->w_proj,
                       &out->b_proj, &out->ln2_w, &out->ln2_b, &out->w_fc, &out->b_fc,
                       &out->w_fc2, &out->b_fc2};
    float **moe[] = {&out->ln1_w, &out->ln1_b, &out->w_qkv, &out->b_qkv, &out->w_proj,
                     &out->b_proj, &out->ln2_w, &out->ln2_b, &out->w_router, &out->w_fc,
                     &out->b_fc, &out->w_fc2, &out->b_fc2};
    if (c->n_experts == 0)
        for (size_t i = 0; i < sizeof dense / sizeof *dense; i++) *dense[i] = base + t[i].offset;
    else
        for (size_t i = 0; i < sizeof moe / sizeof *moe; i++) *moe[i] = base + t[i].offset;
}

void pl_head_bind(const struct pl_model_config *c, float *base, struct pl_head_params *out)
{
    struct pl_param_desc t[MAX_PART_TENSORS];
    part_tensors(c, c->n_layers, t);
    out->lnf_w = base + t[0].offset;
    out->lnf_b = base + t[1].offset;
    out->w_head = base + t[2].offset;
}

/* ---- passes: shared pieces ------------------------------------------------------------------ */

struct pl_model_ctx pl_model_ctx_eval(void)
{
    struct pl_model_ctx ctx = {.train = 0, .seed = 0, .step = 0, .seq0 = 0, .loss_scale = 1.0f};
    return ctx;
}

uint64_t pl_model_dropout_stream(int layer, int site, uint64_t step)
{
    char name[PL_NAME_LEN];
    snprintf(name, sizeof name, "h.%d.%s.dropout", layer, site == 0 ? "attn" : "mlp");
    return pl_mix64(pl_rng_stream(name) ^ pl_mix64(step));
}

float *pl_model_scratch(size_t n, const char *label)
{
    /* ops accumulate into gradients, so scratch must start at zero: pl_mem_alloc zeroes */
    return pl_mem_alloc(n * sizeof(float), PL_MEM_WORK, PL_DEVICE, label);
}

/* Every piece starts on a 64-byte boundary (the base is at least that aligned). */
#define SCRATCH_ALIGN 16
size_t pl_model_scratch_round(size_t n)
{
    return (n + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
}

/* n floats from the arena [base, base + cap) of which used are taken; the passes' sizing
 * (pl_model_scratch_need, pl_moe_host_scratch_need) makes running past cap a bug. */
static float *arena_take(float *base, size_t cap, size_t *used, size_t n)
{
    size_t k = pl_model_scratch_round(n);
    PL_ASSERT(base && *used + k <= cap);
    float *p = base + *used;
    *used += k;
    return p;
}

/* Hands p, and everything taken after it, back to the arena. */
static void arena_give(const float *base, size_t cap, size_t *used, const float *p)
{
    size_t at = (size_t)(p - base);
    PL_ASSERT(at <= cap);
    if (at < *used) *used = at;
}

/* n floats from arena s as they are (s NULL: a zeroed allocation), for a buffer its op
 * writes whole before reading it. */
static float *scratch_take_unzeroed(struct pl_scratch *s, size_t n, const char *label)
{
    if (!s) return pl_model_scratch(n, label);
    return arena_take(s->base, s->cap, &s->used, n);
}

float *pl_model_scratch_take(struct pl_scratch *s, size_t n, const char *label)
{
    float *p = scratch_take_unzeroed(s, n, label);
    if (s) pl_zero(p, n);
    return p;
}

void pl_model_scratch_give(struct pl_scratch *s, float *p)
{
    if (!s || !p) pl_mem_free(p);
    else arena_give(s->base, s->cap, &s->used, p);
}

float *pl_model_host_scratch_take(struct pl_scratch *s, size_t n, const char *label)
{
    if (!s) return pl_mem_alloc(n * sizeof(float), PL_MEM_WORK, PL_HOST, label);
    float *p = arena_take(s->host, s->host_cap, &s->host_used, n);
    memset(p, 0, n * sizeof *p);
    return p;
}

void pl_model_host_scratch_give(struct pl_scratch *s, float *p)
{
    if (!s || !p) pl_mem_free(p);
    else arena_give(s->host, s->host_cap, &s->host_used, p);
}

/* The most any pass holds at once (as taken below, each piece rounded up): the attention
 * backward's four [N, C]-sized gradients (dqkv is 3 of them) and the score gradients of
 * pl_attention_backward_in, the dense MLP backward's two [N, C] and one [N, F] or the MoE
 * half's most (pl_moe_scratch_need), the head backward's [N, V] and [N, C]. */
size_t pl_model_scratch_need(const struct pl_model_config *c, int B, int T)
{
    size_t N = (size_t)B * T, C = (size_t)c->d_model, F = (size_t)c->d_ff,
           V = (size_t)c->vocab;
    size_t work = c->attention == PL_ATTENTION_FLASH
                      ? pl_attention_flash_backward_work(B, T, c->n_heads)
                      : pl_attention_backward_work(T, c->n_heads);
    size_t attn = 3 * pl_model_scratch_round(N * C) + pl_model_scratch_round(3 * N * C) +
                  pl_model_scratch_round(work);
    size_t mlp = 2 * pl_model_scratch_round(N * C) +
                 (c->n_experts ? pl_moe_scratch_need(c, B, T) : pl_model_scratch_round(N * F));
    size_t head = pl_model_scratch_round(N * V) + pl_model_scratch_round(N * C);
    size_t need = attn > mlp ? attn : mlp;
    return need > head ? need : head;
}

static int dropout_on(const struct pl_model_config *c, const struct pl_model_ctx *ctx)
{
    return ctx && ctx->train && c->dropout > 0.0f;
}

void pl_model_branch_dropout(const struct pl_model_config *c, int layer, int site,
                             const struct pl_model_ctx *ctx, float *branch, int B, int T)
{
    if (!dropout_on(c, ctx)) return;
    size_t n = (size_t)B * T * c->d_model;
    pl_dropout_forward(branch, branch, n, c->dropout, ctx->seed,
                       pl_model_dropout_stream(layer, site, ctx->step),
                       (uint64_t)ctx->seq0 * (uint64_t)T * (uint64_t)c->d_model);
}

void pl_model_branch_dropout_backward(const struct pl_model_config *c, int layer, int site,
                                      const struct pl_model_ctx *ctx, float *dbranch,
                                      const float *dy, int B, int T)
{
    size_t n = (size_t)B * T * c->d_model;
    if (!dropout_on(c, ctx)) {
        pl_copy(dbranch, dy, n);
        return;
    }
    pl_dropout_backward(dbranch, dy, n, c->dropout, ctx->seed,
                        pl_model_dropout_stream(layer, site, ctx->step),
                        (uint64_t)ctx->seq0 * (uint64_t)T * (uint64_t)c->d_model);
}

/* The gradient of a half's branch output. Without dropout it is dy itself, read by the
 * half's first product before the half writes dx (which may alias dy), so no copy is made;
 * with dropout, dy through the mask into a scratch buffer (*buf, given back by the half). */
static const float *branch_grad(const struct pl_model_config *c, int layer, int site,
                                const struct pl_model_ctx *ctx, struct pl_scratch *s,
                                const float *dy, int B, int T, float **buf)
{
    *buf = NULL;
    if (!dropout_on(c, ctx)) return dy;
    *buf = pl_model_scratch_take(s, (size_t)B * T * c->d_model,
                                 site == 0 ? "attn d branch" : "mlp d branch");
    pl_model_branch_dropout_backward(c, layer, site, ctx, *buf, dy, B, T);
    return *buf;
}

static float *activ(size_t n, const char *label)
{
    return pl_mem_alloc(n * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, label);
}

static void check_bt(const struct pl_model_config *c, int B, int T)
{
    PL_REQUIRE(B > 0, "batch B=%d must be positive", B);
    PL_REQUIRE(T > 0 && T <= c->seq_len,
               "sequence length T=%d must be in [1, seq_len=%d] (the position embedding has "
               "seq_len rows)",
               T, c->seq_len);
}

/* ---- embedding ------------------------------------------------------------------------------- */

/* Names the compute that follows in the trace ("F attn 3", "B head"), so a timeline shows
 * which part of the model each stretch of compute is; timelines colour F and B apart. */
static void trace_span(char phase, const char *part, int layer)
{
    char label[PL_LABEL_LEN];
    if (layer >= 0) snprintf(label, sizeof label, "%c %s %d", phase, part, layer);
    else snprintf(label, sizeof label, "%c %s", phase, part);
    pl_span(label);
}

void pl_embed_forward(const struct pl_model_config *c, const struct pl_embed_params *p,
                      const int *tokens, int B, int T, float *x)
{
    trace_span('F', "embed", -1);
    check_bt(c, B, T);
    pl_encoder_forward(x, tokens, p->wte, p->wpe, B, T, c->d_model, c->vocab);
}

void pl_embed_backward(const struct pl_model_config *c, const struct pl_embed_params *g,
                       const int *tokens, int B, int T, const float *dx)
{
    trace_span('B', "embed", -1);
    pl_encoder_backward(g->wte, g->wpe, dx, tokens, B, T, c->d_model, c->vocab);
}

/* ---- attention half -------------------------------------------------------------------------- */

static size_t att_numel(const struct pl_model_config *c, int B, int T)
{
    return (size_t)B * c->n_heads * T * T;
}

static size_t lse_numel(const struct pl_model_config *c, int B, int T)
{
    return (size_t)B * c->n_heads * T;
}

static int flash(const struct pl_model_config *c) { return c->attention == PL_ATTENTION_FLASH; }

/* The attention half's saved activations; recompute: all but the probabilities. Flash
 * attention saves no probabilities but their rows' log-sum-exp, and has nothing for
 * selective recomputation to drop. */
static void attn_acts_alloc(struct pl_attn_acts *a, const struct pl_model_config *c, int B,
                            int T, int recompute)
{
    check_bt(c, B, T);
    size_t N = (size_t)B * T, C = (size_t)c->d_model;
    memset(a, 0, sizeof *a);
    a->B = B;
    a->T = T;
    a->x = activ(N * C, "attn x");
    a->ln = activ(N * C, "attn ln1");
    a->mean = activ(N, "attn ln1 mean");
    a->rstd = activ(N, "attn ln1 rstd");
    a->qkv = activ(N * 3 * C, "attn qkv");
    a->recompute = recompute && !flash(c);
    if (flash(c)) a->lse = activ(lse_numel(c, B, T), "attn lse (flash)");
    else if (!recompute) a->att = activ(att_numel(c, B, T), "attn probs");
    a->y = activ(N * C, "attn heads");
}

void pl_attn_acts_new(struct pl_attn_acts *a, const struct pl_model_config *c, int B, int T)
{
    attn_acts_alloc(a, c, B, T, 0);
}

void pl_attn_acts_free(struct pl_attn_acts *a)
{
    pl_mem_free(a->x);
    pl_mem_free(a->ln);
    pl_mem_free(a->mean);
    pl_mem_free(a->rstd);
    pl_mem_free(a->qkv);
    if (!a->recompute) pl_mem_free(a->att); /* else borrowed */
    pl_mem_free(a->lse);
    pl_mem_free(a->y);
    memset(a, 0, sizeof *a);
}

/* Where the probabilities go when they are not saved: the shared buffer, or one for this
 * pass (given back with probs_give). */
static float *probs_take(const struct pl_model_config *c, const struct pl_attn_acts *a)
{
    return a->att ? a->att : activ(att_numel(c, a->B, a->T), "attn probs (recomputed)");
}

static void probs_give(const struct pl_attn_acts *a, float *att)
{
    if (att != a->att) pl_mem_free(att);
}

/* Selective recomputation: the attention core rerun from the saved qkv. It rewrites y too,
 * bit for bit the saved one, into scratch that is dropped: the core is one op, rerun whole as
 * Megatron-LM reruns its checkpointed core attention and as the planner counts it. */
static float *rerun_attention_core(const struct pl_model_config *c, const struct pl_attn_acts *a)
{
    const int B = a->B, T = a->T, C = c->d_model;
    float *att = probs_take(c, a);
    float *y = scratch_take_unzeroed(a->scratch, (size_t)B * T * C, "attn heads (recomputed)");
    pl_ledger_recompute_begin();
    pl_attention_forward(y, att, a->qkv, B, T, C, c->n_heads);
    pl_ledger_recompute_end();
    pl_model_scratch_give(a->scratch, y);
    return att;
}

void pl_attn_forward(const struct pl_model_config *c, int layer, const struct pl_block_params *p,
                     struct pl_attn_acts *a, const struct pl_model_ctx *ctx, const float *x,
                     float *y)
{
    trace_span('F', "attn", layer);
    const int B = a->B, T = a->T, C = c->d_model, N = B * T;
    if (x != a->x) pl_copy(a->x, x, (size_t)N * C);
    pl_layernorm_forward(a->ln, a->mean, a->rstd, a->x, p->ln1_w, p->ln1_b, N, C);
    pl_matmul_forward(a->qkv, a->ln, p->w_qkv, p->b_qkv, N, C, 3 * C);
    if (a->lse) {
        pl_attention_flash_forward(a->y, a->lse, a->qkv, B, T, C, c->n_heads);
    } else {
        float *att = a->recompute ? probs_take(c, a) : a->att;
        pl_attention_forward(a->y, att, a->qkv, B, T, C, c->n_heads);
        if (a->recompute) probs_give(a, att);
    }
    float *branch = pl_model_scratch_take(a->scratch, (size_t)N * C, "attn branch");
    pl_matmul_forward(branch, a->y, p->w_proj, p->b_proj, N, C, C);
    pl_model_branch_dropout(c, layer, 0, ctx, branch, B, T);
    pl_residual_forward(y, a->x, branch, (size_t)N * C);
    pl_model_scratch_give(a->scratch, branch);
}

void pl_attn_backward(const struct pl_model_config *c, int layer,
                      const struct pl_block_params *p, const struct pl_block_params *g,
                      const struct pl_attn_acts *a, const struct pl_model_ctx *ctx,
                      const float *dy, float *dx)
{
    trace_span('B', "attn", layer);
    const int B = a->B, T = a->T, C = c->d_model, N = B * T;
    struct pl_scratch *s = a->scratch;
    /* first, so that its scratch is given back before the backward takes any */
    float *att = a->recompute ? rerun_attention_core(c, a) : a->att;
    float *masked;
    const float *dbranch = branch_grad(c, layer, 0, ctx, s, dy, B, T, &masked);
    float *dheads = pl_model_scratch_take(s, (size_t)N * C, "attn d heads");
    float *dqkv = pl_model_scratch_take(s, (size_t)N * 3 * C, "attn d qkv");
    float *dln = pl_model_scratch_take(s, (size_t)N * C, "attn d ln1");
    float *work = pl_model_scratch_take(s, a->lse ? pl_attention_flash_backward_work(B, T,
                                                                                  c->n_heads)
                                                  : pl_attention_backward_work(T, c->n_heads),
                                        "attn d scores");
    pl_matmul_backward(dheads, g->w_proj, g->b_proj, dbranch, a->y, p->w_proj, N, C, C);
    if (a->lse)
        pl_attention_flash_backward(dqkv, dheads, a->qkv, a->y, a->lse, B, T, C, c->n_heads,
                                    work);
    else
        pl_attention_backward_in(dqkv, dheads, a->qkv, att, B, T, C, c->n_heads, work);
    pl_model_scratch_give(s, work);
    if (a->recompute) probs_give(a, att);
    pl_matmul_backward(dln, g->w_qkv, g->b_qkv, dqkv, a->ln, p->w_qkv, N, C, 3 * C);
    /* the residual path carries dy through unchanged; dy is no longer read after this */
    if (dx != dy) pl_copy(dx, dy, (size_t)N * C);
    pl_layernorm_backward(dx, g->ln1_w, g->ln1_b, dln, a->x, p->ln1_w, a->mean, a->rstd, N, C);
    pl_model_scratch_give(s, dln);
    pl_model_scratch_give(s, dqkv);
    pl_model_scratch_give(s, dheads);
    pl_model_scratch_give(s, masked);
}

/* ---- MLP half (dense here, MoE in model_moe.c) --------------------------------------------- */

void pl_mlp_acts_new(struct pl_mlp_acts *a, const struct pl_model_config *c, int B, int T)
{
    check_bt(c, B, T);
    memset(a, 0, sizeof *a);
    size_t N = (size_t)B * T, C = (size_t)c->d_model, F = (size_t)c->d_ff;
    a->B = B;
    a->T = T;
    a->x = activ(N * C, "mlp x");
    a->ln = activ(N * C, "mlp ln2");
    a->mean = activ(N, "mlp ln2 mean");
    a->rstd = activ(N, "mlp ln2 rstd");
    if (c->n_experts == 0) {
        a->h = activ(N * F, "mlp fc");
        a->g = activ(N * F, "mlp gelu");
    } else {
        pl_moe_acts_new(a, c, B, T);
    }
}

void pl_mlp_acts_free(struct pl_mlp_acts *a)
{
    pl_mem_free(a->x);
    pl_mem_free(a->ln);
    pl_mem_free(a->mean);
    pl_mem_free(a->rstd);
    pl_mem_free(a->h);
    pl_mem_free(a->g);
    pl_moe_acts_free(a);
    memset(a, 0, sizeof *a);
}

static void dense_forward(const struct pl_model_config *c, const struct pl_block_params *p,
                          struct pl_mlp_acts *a, float *branch)
{
    const int N = a->B * a->T, C = c->d_model, F = c->d_ff;
    pl_matmul_gelu_forward(a->h, a->g, a->ln, p->w_fc, p->b_fc, N, C, F);
    pl_matmul_forward(branch, a->g, p->w_fc2, p->b_fc2, N, F, C);
}

static void dense_backward(const struct pl_model_config *c, const struct pl_block_params *p,
                           const struct pl_block_params *g, const struct pl_mlp_acts *a,
                           const float *dbranch, float *dln)
{
    const int N = a->B * a->T, C = c->d_model, F = c->d_ff;
    /* written whole by the fused backward before it is read: no zeroing */
    float *dh = scratch_take_unzeroed(a->scratch, (size_t)N * F, "mlp d fc");
    pl_matmul_gelu_backward(dh, g->w_fc2, g->b_fc2, dbranch, a->g, a->h, p->w_fc2, N, F, C);
    pl_matmul_backward(dln, g->w_fc, g->b_fc, dh, a->ln, p->w_fc, N, C, F);
    pl_model_scratch_give(a->scratch, dh);
}

void pl_mlp_forward(const struct pl_model_config *c, int layer, const struct pl_block_params *p,
                    struct pl_mlp_acts *a, const struct pl_model_ctx *ctx, const float *x,
                    float *y)
{
    trace_span('F', "mlp", layer);
    const int B = a->B, T = a->T, C = c->d_model, N = B * T;
    if (x != a->x) pl_copy(a->x, x, (size_t)N * C);
    pl_layernorm_forward(a->ln, a->mean, a->rstd, a->x, p->ln2_w, p->ln2_b, N, C);
    float *branch = pl_model_scratch_take(a->scratch, (size_t)N * C, "mlp branch");
    if (c->n_experts == 0)
        dense_forward(c, p, a, branch);
    else
        pl_moe_forward(c, p, a, branch);
    pl_model_branch_dropout(c, layer, 1, ctx, branch, B, T);
    pl_residual_forward(y, a->x, branch, (size_t)N * C);
    pl_model_scratch_give(a->scratch, branch);
}

void pl_mlp_backward(const struct pl_model_config *c, int layer,
                     const struct pl_block_params *p, const struct pl_block_params *g,
                     const struct pl_mlp_acts *a, const struct pl_model_ctx *ctx,
                     const float *dy, float *dx)
{
    trace_span('B', "mlp", layer);
    const int B = a->B, T = a->T, C = c->d_model, N = B * T;
    float *masked;
    const float *dbranch = branch_grad(c, layer, 1, ctx, a->scratch, dy, B, T, &masked);
    float *dln = pl_model_scratch_take(a->scratch, (size_t)N * C, "mlp d ln2");
    if (c->n_experts == 0)
        dense_backward(c, p, g, a, dbranch, dln);
    else
        pl_moe_backward(c, p, g, a, ctx ? ctx->loss_scale : 1.0f, dbranch, dln);
    if (dx != dy) pl_copy(dx, dy, (size_t)N * C);
    pl_layernorm_backward(dx, g->ln2_w, g->ln2_b, dln, a->x, p->ln2_w, a->mean, a->rstd, N, C);
    pl_model_scratch_give(a->scratch, dln);
    pl_model_scratch_give(a->scratch, masked);
}

/* ---- a block = the two halves ------------------------------------------------------------- */

void pl_block_acts_new(struct pl_block_acts *a, const struct pl_model_config *c, int B, int T)
{
    pl_block_acts_new_recompute(a, c, B, T, PL_RECOMPUTE_NONE);
}

static void check_recompute(enum pl_recompute r)
{
    PL_REQUIRE((int)r >= PL_RECOMPUTE_NONE && r <= PL_RECOMPUTE_FULL,
               "recompute choice %d does not exist (choose " PL_RECOMPUTE_NAMES ")", (int)r);
}

void pl_block_acts_new_recompute(struct pl_block_acts *a, const struct pl_model_config *c,
                                 int B, int T, enum pl_recompute r)
{
    check_recompute(r);
    memset(a, 0, sizeof *a);
    a->recompute = r;
    if (r == PL_RECOMPUTE_FULL) {
        check_bt(c, B, T);
        a->attn.B = a->mlp.B = B;
        a->attn.T = a->mlp.T = T;
        a->attn.x = activ((size_t)B * T * c->d_model, "block input (full recompute)");
        return;
    }
    attn_acts_alloc(&a->attn, c, B, T, r == PL_RECOMPUTE_SELECTIVE);
    pl_mlp_acts_new(&a->mlp, c, B, T);
}

void pl_block_rebuild_new(struct pl_block_acts *w, const struct pl_model_config *c, int B,
                          int T, enum pl_recompute r)
{
    check_recompute(r);
    memset(w, 0, sizeof *w);
    if (r == PL_RECOMPUTE_FULL) {
        pl_block_acts_new(w, c, B, T);
    } else if (r == PL_RECOMPUTE_SELECTIVE) {
        check_bt(c, B, T);
        w->attn.B = w->mlp.B = B;
        w->attn.T = w->mlp.T = T;
        if (!flash(c)) /* flash saves no probabilities: nothing to rebuild */
            w->attn.att = activ(att_numel(c, B, T), "attn probs (shared, recomputed)");
    }
}

void pl_block_acts_share(struct pl_block_acts *a, struct pl_block_acts *w)
{
    if (a->recompute == PL_RECOMPUTE_NONE) return;
    if (a->recompute == PL_RECOMPUTE_SELECTIVE && a->attn.lse) return; /* flash: none shared */
    int made = a->recompute == PL_RECOMPUTE_FULL ? w->mlp.x != NULL : w->attn.att != NULL;
    PL_REQUIRE(w != a && made && w->attn.B == a->attn.B && w->attn.T == a->attn.T,
               "pl_block_acts_share: the shared buffer must be made by pl_block_rebuild_new "
               "with the acts' choice (%s), B=%d and T=%d", pl_recompute_name(a->recompute),
               a->attn.B, a->attn.T);
    if (a->recompute == PL_RECOMPUTE_SELECTIVE) a->attn.att = w->attn.att;
    if (a->recompute == PL_RECOMPUTE_FULL) {
        a->rebuild = w;
        w->attn.scratch = w->mlp.scratch = a->attn.scratch;
    }
}

void pl_block_acts_free(struct pl_block_acts *a)
{
    pl_attn_acts_free(&a->attn);
    pl_mlp_acts_free(&a->mlp);
    a->recompute = PL_RECOMPUTE_NONE;
    a->rebuild = NULL;
}

/* Full recomputation: the block whose acts the passes of a use, and giving it back. */
static struct pl_block_acts *rebuild_take(const struct pl_model_config *c,
                                          const struct pl_block_acts *a,
                                          struct pl_block_acts *own)
{
    if (a->rebuild) return a->rebuild;
    pl_block_acts_new(own, c, a->attn.B, a->attn.T);
    own->attn.scratch = own->mlp.scratch = a->attn.scratch;
    return own;
}

static void rebuild_give(const struct pl_block_acts *a, struct pl_block_acts *w)
{
    if (w != a->rebuild) pl_block_acts_free(w);
}

static void block_forward_saved(const struct pl_model_config *c, int layer,
                                const struct pl_block_params *p, struct pl_block_acts *a,
                                const struct pl_model_ctx *ctx, const float *x, float *y)
{
    /* the attention half's output goes straight into the MLP half's saved input */
    pl_attn_forward(c, layer, p, &a->attn, ctx, x, a->mlp.x);
    pl_mlp_forward(c, layer, p, &a->mlp, ctx, a->mlp.x, y);
}

void pl_block_forward(const struct pl_model_config *c, int layer,
                      const struct pl_block_params *p, struct pl_block_acts *a,
                      const struct pl_model_ctx *ctx, const float *x, float *y)
{
    if (a->recompute != PL_RECOMPUTE_FULL) {
        block_forward_saved(c, layer, p, a, ctx, x, y);
        return;
    }
    const size_t NC = (size_t)a->attn.B * a->attn.T * c->d_model;
    if (x != a->attn.x) pl_copy(a->attn.x, x, NC);
    struct pl_block_acts own;
    struct pl_block_acts *w = rebuild_take(c, a, &own);
    block_forward_saved(c, layer, p, w, ctx, a->attn.x, y);
    a->mlp.aux_loss = w->mlp.aux_loss;
    rebuild_give(a, w);
}

void pl_block_backward(const struct pl_model_config *c, int layer,
                       const struct pl_block_params *p, const struct pl_block_params *g,
                       const struct pl_block_acts *a, const struct pl_model_ctx *ctx,
                       const float *dy, float *dx)
{
    struct pl_block_acts own;
    const struct pl_block_acts *run = a;
    struct pl_block_acts *w = NULL;
    if (a->recompute == PL_RECOMPUTE_FULL) {
        /* The forward again from the saved input; its output (the next block's input, or
         * the head's) is not needed, and dy may live where it went, so it goes to scratch. */
        w = rebuild_take(c, a, &own);
        const size_t NC = (size_t)a->attn.B * a->attn.T * c->d_model;
        float *out = scratch_take_unzeroed(a->attn.scratch, NC, "block output (recomputed)");
        pl_ledger_recompute_begin();
        block_forward_saved(c, layer, p, w, ctx, a->attn.x, out);
        pl_ledger_recompute_end();
        pl_model_scratch_give(a->attn.scratch, out);
        run = w;
    }
    pl_mlp_backward(c, layer, p, g, &run->mlp, ctx, dy, dx);
    pl_attn_backward(c, layer, p, g, &run->attn, ctx, dx, dx);
    if (w) rebuild_give(a, w);
}

static size_t attn_floats(const struct pl_model_config *c, size_t N)
{
    /* x, ln1, qkv (3), heads: 6 rows of C; the layernorm's mean and rstd */
    return N * (6 * (size_t)c->d_model + 2);
}

static size_t mlp_floats(const struct pl_model_config *c, size_t N)
{
    /* x, ln2: 2 rows of C; fc and its GELU: 2 rows of F; mean and rstd */
    return N * (2 * (size_t)c->d_model + 2 * (size_t)c->d_ff + 2);
}

static void check_dense_bytes(const struct pl_model_config *c)
{
    PL_REQUIRE(c->n_experts == 0, "the activation byte counts are of the dense model "
               "(n_experts=%d): an MoE block's depend on its capacity and routing",
               c->n_experts);
}

size_t pl_block_acts_bytes(const struct pl_model_config *c, int B, int T, enum pl_recompute r)
{
    check_recompute(r);
    check_dense_bytes(c);
    const size_t N = (size_t)B * T;
    if (r == PL_RECOMPUTE_FULL) return N * c->d_model * sizeof(float);
    size_t n = attn_floats(c, N) + mlp_floats(c, N);
    if (flash(c)) n += lse_numel(c, B, T); /* with none or selective alike */
    else if (r == PL_RECOMPUTE_NONE) n += att_numel(c, B, T);
    return n * sizeof(float);
}

size_t pl_block_rebuild_bytes(const struct pl_model_config *c, int B, int T,
                              enum pl_recompute r)
{
    check_recompute(r);
    check_dense_bytes(c);
    if (r == PL_RECOMPUTE_FULL) return pl_block_acts_bytes(c, B, T, PL_RECOMPUTE_NONE);
    if (r == PL_RECOMPUTE_SELECTIVE) return flash(c) ? 0 : att_numel(c, B, T) * sizeof(float);
    return 0;
}

size_t pl_model_activ_bytes(const struct pl_model_config *c, int B, enum pl_recompute r)
{
    const int T = c->seq_len;
    const size_t N = (size_t)B * T, C = (size_t)c->d_model, V = (size_t)c->vocab;
    /* the head: x, lnf (2 rows of C), mean, rstd, losses, logits and probs (2 rows of V) */
    size_t head = (N * (2 * C + 3 + 2 * V)) * sizeof(float);
    size_t stream = N * C * sizeof(float);
    return (size_t)c->n_layers * pl_block_acts_bytes(c, B, T, r) +
           pl_block_rebuild_bytes(c, B, T, r) + stream + head;
}

/* ---- final layernorm, head, loss ------------------------------------------------------------ */

void pl_head_acts_new(struct pl_head_acts *a, const struct pl_model_config *c, int B, int T)
{
    check_bt(c, B, T);
    size_t N = (size_t)B * T, C = (size_t)c->d_model, V = (size_t)c->vocab;
    memset(a, 0, sizeof *a);
    a->B = B;
    a->T = T;
    a->x = activ(N * C, "head x");
    a->ln = activ(N * C, "head lnf");
    a->mean = activ(N, "head lnf mean");
    a->rstd = activ(N, "head lnf rstd");
    a->logits = activ(N * V, "head logits");
    a->probs = activ(N * V, "head probs");
    a->losses = activ(N, "head losses");
}

void pl_head_acts_free(struct pl_head_acts *a)
{
    pl_mem_free(a->x);
    pl_mem_free(a->ln);
    pl_mem_free(a->mean);
    pl_mem_free(a->rstd);
    pl_mem_free(a->logits);
    pl_mem_free(a->probs);
    pl_mem_free(a->losses);
    memset(a, 0, sizeof *a);
}

double pl_head_forward(const struct pl_model_config *c, const struct pl_head_params *p,
                       struct pl_head_acts *a, const float *x, const int *targets)
{
    trace_span('F', "head", -1);
    const int N = a->B * a->T, C = c->d_model, V = c->vocab;
    if (x != a->x) pl_copy(a->x, x, (size_t)N * C);
    pl_layernorm_forward(a->ln, a->mean, a->rstd, a->x, p->lnf_w, p->lnf_b, N, C);
    pl_matmul_forward(a->logits, a->ln, p->w_head, NULL, N, C, V);
    a->targets = targets;
    if (!targets) {
        pl_softmax_forward(a->probs, a->logits, N, V);
        return 0.0;
    }
    pl_softmax_crossentropy_forward(a->probs, a->losses, a->logits, targets, N, V);
    return pl_sum(a->losses, (size_t)N) / N;
}

void pl_head_backward(const struct pl_model_config *c, const struct pl_head_params *p,
                      const struct pl_head_params *g, const struct pl_head_acts *a,
                      const struct pl_model_ctx *ctx, float *dx)
{
    trace_span('B', "head", -1);
    const int N = a->B * a->T, C = c->d_model, V = c->vocab;
    PL_REQUIRE(a->targets != NULL, "the head's backward needs the targets its forward was "
               "given: run the forward with targets (not NULL) before a backward");
    float scale = ctx ? ctx->loss_scale : 1.0f;
    float *dlogits = pl_model_scratch_take(a->scratch, (size_t)N * V, "head d logits");
    float *dln = pl_model_scratch_take(a->scratch, (size_t)N * C, "head d lnf");
    pl_crossentropy_softmax_backward(dlogits, a->probs, a->targets, scale / (float)N, N, V);
    pl_matmul_backward(dln, g->w_head, NULL, dlogits, a->ln, p->w_head, N, C, V);
    pl_zero(dx, (size_t)N * C);
    pl_layernorm_backward(dx, g->lnf_w, g->lnf_b, dln, a->x, p->lnf_w, a->mean, a->rstd, N, C);
    pl_model_scratch_give(a->scratch, dln);
    pl_model_scratch_give(a->scratch, dlogits);
}

/* ---- the whole model ------------------------------------------------------------------------ */

static int bf16(const struct pl_model *m) { return m->cfg.precision == PL_PRECISION_BF16; }

static size_t largest_part(const struct pl_model_layout *lay)
{
    size_t n = lay->embed_numel > lay->head_numel ? lay->embed_numel : lay->head_numel;
    return lay->block_numel > n ? lay->block_numel : n;
}

/* bf16 (model.h, "precision"): the fp32 master in the optimizer's category, the bf16
 * working copy as the parameters, the bf16 gradients (or fp32 with grads_fp32), and the
 * part-sized stages. */
static void bf16_alloc(struct pl_model *m, unsigned what, int init_params)
{
    size_t numel = m->layout.numel, part = largest_part(&m->layout);
    if (what & PL_MODEL_PARAMS) {
        m->params = pl_mem_alloc(numel * sizeof(float), PL_MEM_OPTIM, PL_DEVICE,
                                 "model fp32 master weights");
        if (init_params) pl_model_init_flat(&m->layout, 0, numel, m->params);
        m->params16 = pl_mem_alloc(numel * sizeof(uint16_t), PL_MEM_PARAMS, PL_DEVICE,
                                   "model bf16 params");
        pl_bf16_from_float(m->params16, m->params, numel);
        m->stage_p = pl_mem_alloc(part * sizeof(float), PL_MEM_WORK, PL_DEVICE,
                                  "model part weights (fp32 from bf16)");
    }
    if (what & PL_MODEL_GRADS) {
        if (m->cfg.grads_fp32) {
            m->grads = pl_mem_alloc(numel * sizeof(float), PL_MEM_GRADS, PL_DEVICE,
                                    "model grads");
        } else {
            m->grads16 = pl_mem_alloc(numel * sizeof(uint16_t), PL_MEM_GRADS, PL_DEVICE,
                                      "model bf16 grads");
            m->stage_g = pl_mem_alloc(part * sizeof(float), PL_MEM_WORK, PL_DEVICE,
                                      "model part grads (fp32 before bf16)");
        }
    }
}

void pl_model_params_changed(struct pl_model *m)
{
    if (bf16(m) && m->params16) pl_bf16_from_float(m->params16, m->params, m->layout.numel);
}

/* The weights a pass of `part` computes with: in bf16 the working copy's, unpacked into
 * stage_p (each part in turn: a part's pass restages it); in fp32 the model's own. */
static float *part_weights(struct pl_model *m, int part)
{
    size_t off, n;
    pl_model_part_range(&m->layout, part, &off, &n);
    if (!bf16(m)) return m->params + off;
    pl_bf16_to_float(m->stage_p, m->params16 + off, n);
    return m->stage_p;
}

/* Where a part's backward accumulates: the model's fp32 gradients, or (bf16 gradients)
 * stage_g zeroed, which part_grads_done then adds into grads16. */
static float *part_grads(struct pl_model *m, int part)
{
    size_t off, n;
    pl_model_part_range(&m->layout, part, &off, &n);
    if (!m->grads16) return m->grads + off;
    pl_zero(m->stage_g, n);
    return m->stage_g;
}

static void part_grads_done(struct pl_model *m, int part)
{
    if (!m->grads16) return;
    size_t off, n;
    pl_model_part_range(&m->layout, part, &off, &n);
    pl_bf16_accumulate(m->grads16 + off, m->stage_g, n);
}

/* The fp32 gradients of a part: the model's, or grads16's unpacked into stage_g. */
static float *part_grads_fp32(const struct pl_model *m, int part)
{
    size_t off, n;
    pl_model_part_range(&m->layout, part, &off, &n);
    if (!m->grads16) return m->grads + off;
    pl_bf16_to_float(m->stage_g, m->grads16 + off, n);
    return m->stage_g;
}

/* The views a pass uses: the model's own in fp32 (and for fp32 gradients), else bound onto
 * the part's stage. */
static struct pl_embed_params embed_weights(struct pl_model *m)
{
    struct pl_embed_params p = m->embed;
    if (bf16(m)) pl_embed_bind(&m->cfg, part_weights(m, PL_PART_EMBED), &p);
    return p;
}

static struct pl_block_params block_weights(struct pl_model *m, int l)
{
    struct pl_block_params p = m->blocks[l];
    if (bf16(m)) pl_block_bind(&m->cfg, part_weights(m, l), &p);
    return p;
}

static struct pl_head_params head_weights(struct pl_model *m)
{
    struct pl_head_params p = m->head;
    if (bf16(m)) pl_head_bind(&m->cfg, part_weights(m, m->cfg.n_layers), &p);
    return p;
}

static struct pl_embed_params embed_grads(struct pl_model *m)
{
    struct pl_embed_params g = m->embed_g;
    if (m->grads16) pl_embed_bind(&m->cfg, part_grads(m, PL_PART_EMBED), &g);
    return g;
}

static struct pl_block_params block_grads(struct pl_model *m, int l)
{
    struct pl_block_params g = m->blocks_g[l];
    if (m->grads16) pl_block_bind(&m->cfg, part_grads(m, l), &g);
    return g;
}

static struct pl_head_params head_grads(struct pl_model *m)
{
    struct pl_head_params g = m->head_g;
    if (m->grads16) pl_head_bind(&m->cfg, part_grads(m, m->cfg.n_layers), &g);
    return g;
}

/* The products' precision for the model's passes; the caller's is put back after. */
static enum pl_matmul_precision passes_begin(const struct pl_model *m)
{
    return pl_set_matmul_precision(bf16(m) ? PL_MATMUL_BF16 : PL_MATMUL_FP32);
}

static void bind_views(struct pl_model *m)
{
    const struct pl_model_config *c = &m->cfg;
    size_t off, n;
    float *bufs[2] = {m->params, m->grads};
    for (int w = 0; w < 2; w++) {
        if (!bufs[w]) continue;
        if (pl_model_layout_holds(&m->layout, PL_PART_EMBED)) {
            pl_model_part_range(&m->layout, PL_PART_EMBED, &off, &n);
            pl_embed_bind(c, bufs[w] + off, w ? &m->embed_g : &m->embed);
        }
        for (int l = 0; l < c->n_layers && !m->layout.ends; l++) {
            pl_model_part_range(&m->layout, l, &off, &n);
            pl_block_bind(c, bufs[w] + off, w ? &m->blocks_g[l] : &m->blocks[l]);
        }
        if (pl_model_layout_holds(&m->layout, c->n_layers)) {
            pl_model_part_range(&m->layout, c->n_layers, &off, &n);
            pl_head_bind(c, bufs[w] + off, w ? &m->head_g : &m->head);
        }
    }
}

static void alloc_optim(struct pl_model *m)
{
    size_t bytes = m->layout.numel * sizeof(float);
    m->adam_m = pl_mem_alloc(bytes, PL_MEM_OPTIM, PL_DEVICE, "adamw m");
    m->adam_v = pl_mem_alloc(bytes, PL_MEM_OPTIM, PL_DEVICE, "adamw v");
}

struct pl_model *pl_model_new(const struct pl_model_config *cfg, unsigned what)
{
    return pl_model_new_shaped(cfg, what, 1);
}

static struct pl_model *model_new(const struct pl_model_config *cfg, unsigned what,
                                   int init_params, unsigned ends)
{
    struct pl_model *m = pl_mem_alloc(sizeof *m, PL_MEM_WORK, PL_HOST, "model");
    layout_fill(&m->layout, cfg, ends);
    m->cfg = *cfg;
    size_t bytes = m->layout.numel * sizeof(float);
    size_t nb = (size_t)(ends ? 0 : cfg->n_layers) * sizeof(struct pl_block_params);
    m->blocks = nb ? pl_mem_alloc(nb, PL_MEM_WORK, PL_HOST, "model block views") : NULL;
    m->blocks_g = nb ? pl_mem_alloc(nb, PL_MEM_WORK, PL_HOST, "model block grad views") : NULL;
    if (bf16(m)) {
        bf16_alloc(m, what, init_params);
    } else {
        if (what & PL_MODEL_PARAMS) {
            m->params = pl_mem_alloc(bytes, PL_MEM_PARAMS, PL_DEVICE, "model params");
            if (init_params) pl_model_init_flat(&m->layout, 0, m->layout.numel, m->params);
        }
        if (what & PL_MODEL_GRADS)
            m->grads = pl_mem_alloc(bytes, PL_MEM_GRADS, PL_DEVICE, "model grads");
    }
    if (what & PL_MODEL_OPTIM) alloc_optim(m);
    bind_views(m);
    return m;
}

struct pl_model *pl_model_new_shaped(const struct pl_model_config *cfg, unsigned what,
                                     int init_params)
{
    return model_new(cfg, what, init_params, 0);
}

struct pl_model *pl_model_new_ends(const struct pl_model_config *cfg, unsigned what,
                                   unsigned ends)
{
    check_ends("pl_model_new_ends", ends);
    PL_REQUIRE(cfg->precision == PL_PRECISION_FP32,
               "pl_model_new_ends with precision=bf16: the bf16 mode is the whole model's "
               "(pl_model_new); the parts of a pipeline stage train in fp32");
    return model_new(cfg, what, 1, ends);
}

void pl_model_free(struct pl_model *m)
{
    if (!m) return;
    pl_model_free_acts(m);
    pl_mem_free(m->params);
    pl_mem_free(m->grads);
    pl_mem_free(m->adam_m);
    pl_mem_free(m->adam_v);
    pl_mem_free(m->params16);
    pl_mem_free(m->grads16);
    pl_mem_free(m->stage_p);
    pl_mem_free(m->stage_g);
    pl_mem_free(m->blocks);
    pl_mem_free(m->blocks_g);
    pl_model_layout_free(&m->layout);
    pl_mem_free(m);
}

void pl_model_set_hook(struct pl_model *m, pl_model_hook hook, void *arg)
{
    m->hook = hook;
    m->hook_arg = arg;
}

void pl_model_set_recompute(struct pl_model *m, enum pl_recompute r)
{
    check_recompute(r);
    if (r != m->recompute) pl_model_free_acts(m);
    m->recompute = r;
}

void pl_model_free_acts(struct pl_model *m)
{
    if (m->B == 0) return;
    for (int l = 0; l < m->cfg.n_layers; l++) pl_block_acts_free(&m->acts[l]);
    pl_block_acts_free(&m->rebuild);
    pl_mem_free(m->acts);
    pl_head_acts_free(&m->head_acts);
    pl_mem_free(m->x);
    pl_mem_free(m->scratch.base);
    pl_mem_free(m->scratch.host);
    memset(&m->scratch, 0, sizeof m->scratch);
    m->acts = NULL;
    m->x = NULL;
    m->tokens = NULL;
    m->B = 0;
}

static void ensure_acts(struct pl_model *m, int B)
{
    if (m->B == B) return;
    pl_model_free_acts(m);
    const struct pl_model_config *c = &m->cfg;
    const int T = c->seq_len;
    check_bt(c, B, T);
    m->acts = pl_mem_alloc((size_t)c->n_layers * sizeof *m->acts, PL_MEM_WORK, PL_HOST,
                           "model acts table");
    for (int l = 0; l < c->n_layers; l++)
        pl_block_acts_new_recompute(&m->acts[l], c, B, T, m->recompute);
    pl_block_rebuild_new(&m->rebuild, c, B, T, m->recompute);
    pl_head_acts_new(&m->head_acts, c, B, T);
    m->x = activ((size_t)B * T * c->d_model, "model residual stream");
    m->scratch.cap = pl_model_scratch_need(c, B, T);
    m->scratch.used = 0;
    m->scratch.base = pl_mem_alloc(m->scratch.cap * sizeof(float), PL_MEM_WORK, PL_DEVICE,
                                   "model scratch arena");
    m->scratch.host_cap = c->n_experts ? pl_moe_host_scratch_need(c, B, T) : 0;
    m->scratch.host_used = 0;
    m->scratch.host = m->scratch.host_cap ? pl_mem_alloc(m->scratch.host_cap * sizeof(float),
                                                         PL_MEM_WORK, PL_HOST,
                                                         "model host scratch arena")
                                          : NULL;
    m->rebuild.attn.scratch = m->rebuild.mlp.scratch = &m->scratch;
    for (int l = 0; l < c->n_layers; l++) {
        m->acts[l].attn.scratch = m->acts[l].mlp.scratch = &m->scratch;
        pl_block_acts_share(&m->acts[l], &m->rebuild);
    }
    m->head_acts.scratch = &m->scratch;
    m->B = B;
}

double pl_model_forward(struct pl_model *m, const int *tokens, const int *targets, int B,
                        const struct pl_model_ctx *ctx)
{
    PL_REQUIRE(!m->layout.ends, "pl_model_forward on a model of the ends alone "
               "(pl_model_new_ends holds no block): run its parts with pl_parts_forward");
    PL_REQUIRE(m->params != NULL, "pl_model_forward on a model made without PL_MODEL_PARAMS: "
               "ask pl_model_new for the parameters (or bind your own) before a forward");
    const struct pl_model_config *c = &m->cfg;
    const int T = c->seq_len;
    struct pl_model_ctx eval = pl_model_ctx_eval();
    if (!ctx) ctx = &eval;
    ensure_acts(m, B);
    m->tokens = tokens;
    enum pl_matmul_precision caller = passes_begin(m);
    struct pl_embed_params ep = embed_weights(m);
    pl_embed_forward(c, &ep, tokens, B, T, m->x);
    double aux = 0.0;
    for (int l = 0; l < c->n_layers; l++) {
        struct pl_block_params bp = block_weights(m, l);
        pl_block_forward(c, l, &bp, &m->acts[l], ctx, m->x, m->x);
        aux += m->acts[l].mlp.aux_loss;
    }
    struct pl_head_params hp = head_weights(m);
    m->loss_ce = pl_head_forward(c, &hp, &m->head_acts, m->x, targets);
    m->loss_aux = aux;
    pl_set_matmul_precision(caller);
    return targets ? m->loss_ce + m->loss_aux : 0.0;
}

void pl_model_backward(struct pl_model *m, const struct pl_model_ctx *ctx)
{
    PL_REQUIRE(m->grads != NULL || m->grads16 != NULL, "pl_model_backward on a model made "
               "without PL_MODEL_GRADS: ask pl_model_new for the gradients before a backward");
    PL_REQUIRE(m->B > 0 && m->head_acts.targets != NULL,
               "pl_model_backward before a forward with targets: run pl_model_forward(m, "
               "tokens, targets, B, ctx) with targets first (its activations are what the "
               "backward reads)");
    const struct pl_model_config *c = &m->cfg;
    struct pl_model_ctx eval = pl_model_ctx_eval();
    if (!ctx) ctx = &eval;
    float *dx = m->x; /* the forward is done with the residual stream */
    enum pl_matmul_precision caller = passes_begin(m);
    struct pl_head_params hp = head_weights(m), hg = head_grads(m);
    pl_head_backward(c, &hp, &hg, &m->head_acts, ctx, dx);
    part_grads_done(m, c->n_layers);
    if (m->hook) m->hook(m, c->n_layers, m->hook_arg);
    for (int l = c->n_layers - 1; l >= 0; l--) {
        struct pl_block_params bp = block_weights(m, l), bg = block_grads(m, l);
        pl_block_backward(c, l, &bp, &bg, &m->acts[l], ctx, dx, dx);
        part_grads_done(m, l);
        if (m->hook) m->hook(m, l, m->hook_arg);
    }
    struct pl_embed_params eg = embed_grads(m);
    pl_embed_backward(c, &eg, m->tokens, m->B, c->seq_len, dx);
    part_grads_done(m, PL_PART_EMBED);
    pl_set_matmul_precision(caller);
    if (m->hook) m->hook(m, PL_PART_EMBED, m->hook_arg);
}

void pl_model_zero_grad(struct pl_model *m)
{
    PL_REQUIRE(m->grads != NULL || m->grads16 != NULL,
               "pl_model_zero_grad on a model made without PL_MODEL_GRADS");
    if (m->grads16) pl_bf16_zero(m->grads16, m->layout.numel);
    else pl_zero(m->grads, m->layout.numel);
}

double pl_model_loss(struct pl_model *m, const int *tokens, const int *targets, int B)
{
    PL_REQUIRE(targets != NULL, "pl_model_loss needs targets (a loss compares the logits "
               "with them)");
    double loss = pl_model_forward(m, tokens, targets, B, NULL);
    pl_model_free_acts(m);
    return loss;
}

/* ---- optimizer --------------------------------------------------------------------------------- */

struct pl_adamw_config pl_adamw_config_default(void)
{
    struct pl_adamw_config o = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                .weight_decay = 0.1f, .grad_clip = 1.0f};
    return o;
}

void pl_model_adamw_flat(const struct pl_model_layout *lay, size_t offset, size_t n, float *p,
                         const float *g, float *m, float *v, int t,
                         const struct pl_adamw_config *opt)
{
    PL_REQUIRE(t >= 1, "AdamW step t = %d: t counts the optimizer steps from 1 (the bias "
               "corrections divide by 1 - beta^t, which is 0 at t = 0)", t);
    /* Runs of neighbouring tensors that share a decay flag, handed to pl_adamw_step_runs a
     * chunk of PL_ADAMW_RUNS_PER_LAUNCH at a time: on the GPU one launch per chunk (the whole
     * model in one up to 55 dense blocks: 8L + 3 runs), instead of one per tensor. */
    size_t ends[PL_ADAMW_RUNS_PER_LAUNCH];
    unsigned char decay[PL_ADAMW_RUNS_PER_LAUNCH];
    int nruns = 0;
    size_t start = 0; /* the chunk's first element, in the range */
    for (struct overlap o = {0};;) {
        int more = next_overlap(lay, offset, n, &o);
        unsigned char d = more && o.d->decay;
        if (more && nruns && decay[nruns - 1] == d) {
            ends[nruns - 1] = o.at + o.len - start;
            continue;
        }
        if (nruns && (!more || nruns == PL_ADAMW_RUNS_PER_LAUNCH)) {
            size_t len = ends[nruns - 1];
            pl_adamw_step_runs(p + start, g + start, m + start, v + start, len, ends, decay,
                               nruns, t, opt->lr, opt->beta1, opt->beta2, opt->eps,
                               opt->weight_decay);
            start += len;
            nruns = 0;
        }
        if (!more) break;
        ends[nruns] = o.at + o.len - start;
        decay[nruns++] = d;
    }
}

/* bf16 gradients are read part by part through stage_g. */
static double grad_norm_sq(const struct pl_model *m)
{
    if (!m->grads16) return pl_grad_norm_sq(m->grads, m->layout.numel);
    double s = 0.0;
    for (int part = PL_PART_EMBED; part <= m->cfg.n_layers; part++) {
        size_t off, n;
        pl_model_part_range(&m->layout, part, &off, &n);
        s += pl_grad_norm_sq(part_grads_fp32(m, part), n);
    }
    return s;
}

double pl_model_grad_norm(const struct pl_model *m)
{
    return sqrt(grad_norm_sq(m));
}

double pl_model_update(struct pl_model *m, const struct pl_adamw_config *opt)
{
    PL_REQUIRE(m->params != NULL && (m->grads != NULL || m->grads16 != NULL),
               "pl_model_update needs a model with parameters and gradients "
               "(PL_MODEL_PARAMS | PL_MODEL_GRADS)");
    if (!m->adam_m) alloc_optim(m);
    double norm_sq = grad_norm_sq(m);
    float scale = pl_clip_scale(norm_sq, opt->grad_clip);
    m->adam_t++;
    if (!bf16(m)) {
        if (scale < 1.0f) pl_scale(m->grads, m->layout.numel, scale);
        pl_model_adamw_flat(&m->layout, 0, m->layout.numel, m->params, m->grads, m->adam_m,
                            m->adam_v, m->adam_t, opt);
        return sqrt(norm_sq);
    }
    /* bf16: part by part, the fp32 gradients (clipped) update the master, which is then
     * rounded into the working copy */
    for (int part = PL_PART_EMBED; part <= m->cfg.n_layers; part++) {
        size_t off, n;
        pl_model_part_range(&m->layout, part, &off, &n);
        float *g = part_grads_fp32(m, part);
        if (scale < 1.0f) pl_scale(g, n, scale);
        pl_model_adamw_flat(&m->layout, off, n, m->params + off, g, m->adam_m + off,
                            m->adam_v + off, m->adam_t, opt);
        pl_bf16_from_float(m->params16 + off, m->params + off, n);
    }
    return sqrt(norm_sq);
}

double pl_model_step(struct pl_model *m, const int *tokens, const int *targets, int B,
                     const struct pl_adamw_config *opt, const struct pl_model_ctx *ctx)
{
    struct pl_model_ctx run = ctx ? *ctx : pl_model_ctx_eval();
    run.step = (uint64_t)m->adam_t + 1;
    pl_model_zero_grad(m);
    double loss = pl_model_forward(m, tokens, targets, B, &run);
    pl_model_backward(m, &run);
    pl_model_update(m, opt);
    /* the update is queued on the GPU: a time taken around one step must include it */
    pl_ops_wait();
    return loss;
}
