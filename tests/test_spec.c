/* test_spec.c: the rules docs/library.md gives an outside implementation for reproducing
 * the model bit for bit, checked against the library: MoE capacity, the init stream of a
 * tensor, the dropout stream and multiplier. Each expected value is the documented rule
 * computed here, not a pasted number. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include "model.h"
#include "moe_kernels.h"
#include "rng.h"
#include "testing.h"

/* The documented capacity rule: ceil of the product in double precision, from the float
 * capacity factor widened as it is (not from its decimal spelling), at most N, at least 1. */
static int capacity_rule(int N, int E, int k, float cf)
{
    double want = (double)cf * (double)N * (double)k / (double)E;
    if (want >= (double)N) return N;
    int cap = (int)ceil(want);
    return cap < 1 ? 1 : cap;
}

static void check_capacity(void)
{
    static const float cfs[] = {0.5f, 1.0f, 1.1f, 1.2f, 1.25f, 1.5f, 2.0f, 8.0f};
    for (int N = 1; N <= 64; N++)
        for (int E = 1; E <= 8; E++)
            for (int k = 1; k <= 2 && k <= E; k++)
                for (size_t c = 0; c < sizeof cfs / sizeof cfs[0]; c++)
                    CHECK(pl_moe_capacity(N, E, k, cfs[c]) == capacity_rule(N, E, k, cfs[c]),
                          "capacity N=%d E=%d k=%d cf=%g: library %d, documented rule %d", N,
                          E, k, (double)cfs[c], pl_moe_capacity(N, E, k, cfs[c]),
                          capacity_rule(N, E, k, cfs[c]));
    /* The documented consequence (docs/library.md): 1.2f is 1.20000004768..., so 20 tokens,
     * 4 experts, top-1 (5 slots' worth) give 7 slots, where 1.2 x 5 with the decimal 1.2
     * would give 6. */
    double decimal = ceil(1.2 * 20 * 1 / 4);
    CHECK(pl_moe_capacity(20, 4, 1, 1.2f) == (int)decimal + 1,
          "cf=1.2f on 20 tokens, 4 experts, top-1: %d slots, the documented rule says %d",
          pl_moe_capacity(20, 4, 1, 1.2f), (int)decimal + 1);
}

/* FNV-1a 64 of the tensor's name, as documented. */
static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

static void check_streams(void)
{
    const char *names[] = {"wte", "h.0.attn.w_qkv", "h.3.mlp.w_fc", "lnf.w"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        CHECK(pl_rng_stream(names[i]) == fnv1a(names[i]), "stream of %s is not FNV-1a 64",
              names[i]);
    /* The dropout stream of layer 2's MLP branch at step 7. */
    uint64_t want = pl_mix64(fnv1a("h.2.mlp.dropout") ^ pl_mix64(7));
    CHECK(pl_model_dropout_stream(2, 1, 7) == want, "dropout stream differs from the rule");
    want = pl_mix64(fnv1a("h.0.attn.dropout") ^ pl_mix64(0));
    CHECK(pl_model_dropout_stream(0, 0, 0) == want, "dropout stream differs from the rule");
    /* The multiplier: keep when the 24-bit uniform is >= p. */
    for (uint64_t idx = 0; idx < 1000; idx++) {
        float u = (float)(pl_rng_u64(5, want, idx) >> 40) / 16777216.0f;
        float m = u >= 0.25f ? 1.0f / 0.75f : 0.0f;
        CHECK(pl_k_dropout_mult(5, want, idx, 0.25f) == m, "dropout multiplier at %llu",
              (unsigned long long)idx);
    }
    /* A normal init draw: Box-Muller on sub-counters 2i and 2i+1. */
    uint64_t s = fnv1a("h.1.attn.w_o");
    for (uint64_t idx = 0; idx < 100; idx++) {
        float u1 = 1.0f - pl_rng_uniform(42, s, 2 * idx), u2 = pl_rng_uniform(42, s, 2 * idx + 1);
        float z = sqrtf(-2.0f * logf(u1)) * cosf(6.28318530717958647692f * u2);
        CHECK(pl_rng_normal(42, s, idx) == z, "normal draw at %llu", (unsigned long long)idx);
    }
}

int main(void)
{
    check_capacity();
    check_streams();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
