/* plan_model.c: the models the planner knows (published shapes), their parameter counts and
 * their training FLOPs per token. */
#include <stdio.h>
#include <string.h>

#include "plan.h"
#include "util.h"

/* Shapes from the papers and model cards. The DeepSeek-V3-like model keeps V3's widths,
 * expert counts and first dense layers but uses plain multi-head attention in place of
 * multi-head latent attention, so its attention parameters are an approximation. Megatron's
 * 1T is the largest model of Narayanan et al. (2021). */
static const struct pl_plan_model presets[] = {
    {.name = "gpt3-175b", .layers = 96, .d_model = 12288, .heads = 96, .kv_heads = 96,
     .d_ff = 49152, .vocab = 50257, .seq = 2048, .tied = 1, .batch_tokens = 1536.0 * 2048},
    {.name = "llama3-8b", .layers = 32, .d_model = 4096, .heads = 32, .kv_heads = 8,
     .d_ff = 14336, .vocab = 128256, .seq = 8192, .gated = 1, .batch_tokens = 512.0 * 8192},
    {.name = "llama3-70b", .layers = 80, .d_model = 8192, .heads = 64, .kv_heads = 8,
     .d_ff = 28672, .vocab = 128256, .seq = 8192, .gated = 1, .batch_tokens = 512.0 * 8192},
    {.name = "llama3-405b", .layers = 126, .d_model = 16384, .heads = 128, .kv_heads = 8,
     .d_ff = 53248, .vocab = 128256, .seq = 8192, .gated = 1, .batch_tokens = 2048.0 * 8192},
    {.name = "mixtral-8x7b", .layers = 32, .d_model = 4096, .heads = 32, .kv_heads = 8,
     .d_ff = 14336, .vocab = 32000, .seq = 4096, .gated = 1, .experts = 8, .top_k = 2,
     .d_ff_expert = 14336, .batch_tokens = 1024.0 * 4096},
    {.name = "deepseek-v3", .layers = 61, .d_model = 7168, .heads = 128, .kv_heads = 128,
     .d_ff = 18432, .vocab = 129280, .seq = 4096, .gated = 1, .experts = 256, .top_k = 8,
     .d_ff_expert = 2048, .shared_experts = 1, .dense_layers = 3,
     .batch_tokens = 3840.0 * 4096},
    {.name = "megatron-1t", .layers = 128, .d_model = 25600, .heads = 160, .kv_heads = 160,
     .d_ff = 102400, .vocab = 51200, .seq = 2048, .tied = 1, .batch_tokens = 3072.0 * 2048},
};
#define NPRESETS ((int)(sizeof presets / sizeof presets[0]))

const struct pl_plan_model *pl_plan_model_find(const char *name)
{
    for (int i = 0; name && i < NPRESETS; i++)
        if (!strcmp(presets[i].name, name)) return &presets[i];
    return NULL;
}

int pl_plan_model_count(void) { return NPRESETS; }

const struct pl_plan_model *pl_plan_model_at(int i)
{
    if (i < 0 || i >= NPRESETS) pl_fatal("model preset %d is outside 0..%d", i, NPRESETS - 1);
    return &presets[i];
}

const char *pl_plan_model_names(char *buf, size_t len)
{
    size_t n = 0;
    if (len) buf[0] = '\0';
    for (int i = 0; i < NPRESETS && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", presets[i].name);
    return buf;
}

/* One MLP of width f: two matrices, or three when gated (SwiGLU). */
static double mlp_params(const struct pl_plan_model *m, double f)
{
    return (m->gated ? 3.0 : 2.0) * m->d_model * f;
}

void pl_plan_params(const struct pl_plan_model *m, struct pl_plan_params *out)
{
    double d = m->d_model, kv = d * m->kv_heads / m->heads;
    /* Q and O are d x d; K and V are d x kv (grouped-query attention shares them). */
    double attn = d * (d + 2 * kv) + d * d, norms = 2 * d;
    int moe_layers = m->experts ? m->layers - m->dense_layers : 0;
    int dense_layers = m->layers - moe_layers;
    double dense = dense_layers * (attn + norms + mlp_params(m, m->d_ff));
    double expert = 0, active_experts = 0;
    if (moe_layers) {
        double one = mlp_params(m, m->d_ff_expert);
        dense += moe_layers * (attn + norms + m->shared_experts * one + d * m->experts);
        expert = (double)moe_layers * m->experts * one;
        active_experts = (double)moe_layers * m->top_k * one;
    }
    out->embedding = (m->tied ? 1.0 : 2.0) * m->vocab * d;
    out->dense = dense + out->embedding;
    out->expert = expert;
    out->total = out->dense + expert;
    out->active = out->dense + active_experts;
}

double pl_plan_flops_per_token(const struct pl_plan_model *m)
{
    struct pl_plan_params p;
    pl_plan_params(m, &p);
    /* The input embedding is a lookup (no FLOPs); the output head is a matmul. */
    double matmul = p.active - p.embedding + (double)m->vocab * m->d_model;
    return 6.0 * matmul + 12.0 * m->layers * (double)m->d_model * m->seq;
}

int pl_plan_model_check(const struct pl_plan_model *m, char *err, size_t errlen)
{
    if (m->layers < 1 || m->d_model < 1 || m->heads < 1 || m->d_ff < 1 || m->vocab < 1 ||
        m->seq < 1)
        return pl_err(err, errlen, "layers, d_model, heads, d_ff, vocab and seq must all be at "
                                   "least 1 (got %d, %d, %d, %d, %d, %d)", m->layers, m->d_model,
                      m->heads, m->d_ff, m->vocab, m->seq);
    if (m->d_model % m->heads)
        return pl_err(err, errlen, "heads=%d does not divide d_model=%d; each head needs a whole "
                                   "d_model/heads width", m->heads, m->d_model);
    if (m->kv_heads < 1 || m->heads % m->kv_heads)
        return pl_err(err, errlen, "kv_heads=%d must divide heads=%d (grouped-query attention "
                                   "shares each K/V head among heads/kv_heads query heads)",
                      m->kv_heads, m->heads);
    if (m->experts && (m->top_k < 1 || m->top_k > m->experts || m->d_ff_expert < 1 ||
                       m->dense_layers < 0 || m->dense_layers >= m->layers))
        return pl_err(err, errlen, "an MoE model needs 1 <= top_k <= experts (got top_k=%d, "
                                   "experts=%d), d_ff_expert >= 1 and 0 <= dense_layers < layers",
                      m->top_k, m->experts);
    if (!(m->batch_tokens >= m->seq))
        return pl_err(err, errlen, "the global batch of %.0f tokens is less than one sequence of "
                                   "%d", m->batch_tokens, m->seq);
    double seqs = m->batch_tokens / m->seq;
    if (seqs != (double)(long long)seqs)
        return pl_err(err, errlen, "the global batch of %.0f tokens is not a whole number of %d-"
                                   "token sequences; use a multiple of %d (e.g. %.0f)",
                      m->batch_tokens, m->seq, m->seq, (double)(long long)seqs * m->seq);
    return 0;
}
