/* rng.c: fills of the counter-based generator of rng.h. Every value depends only on its
 * index in the full tensor, never on the order of calls. */
#include "rng.h"

#include <math.h>

/* pl_rng_normal of a stream's key: the fills hash (seed, stream) once, not per element. */
static inline float normal_key(uint64_t key, uint64_t index)
{
    /* Two uniforms from sub-counters 2i and 2i+1; u1 in (0, 1] keeps log finite. */
    float u1 = 1.0f - pl_rng_uniform_key(key, 2 * index);
    float u2 = pl_rng_uniform_key(key, 2 * index + 1);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530717958647692f * u2);
}

float pl_rng_normal(uint64_t seed, uint64_t stream, uint64_t index)
{
    return normal_key(pl_rng_key(seed, stream), index);
}

uint64_t pl_rng_stream(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ULL;
    }
    return h;
}

void pl_rng_fill_normal(float *out, size_t n, uint64_t seed, uint64_t stream, uint64_t offset,
                        float mean, float std)
{
    const uint64_t key = pl_rng_key(seed, stream);
    for (size_t i = 0; i < n; i++) out[i] = mean + std * normal_key(key, offset + i);
}

void pl_rng_fill_uniform(float *out, size_t n, uint64_t seed, uint64_t stream, uint64_t offset,
                         float lo, float hi)
{
    const uint64_t key = pl_rng_key(seed, stream);
    for (size_t i = 0; i < n; i++)
        out[i] = lo + (hi - lo) * pl_rng_uniform_key(key, offset + i);
}

void pl_rng_fill_normal_block(float *out, size_t full_cols, size_t row0, size_t col0,
                              size_t block_rows, size_t block_cols, uint64_t seed,
                              uint64_t stream, float std)
{
    const uint64_t key = pl_rng_key(seed, stream);
    for (size_t r = 0; r < block_rows; r++)
        for (size_t c = 0; c < block_cols; c++)
            out[r * block_cols + c] = std * normal_key(key, (row0 + r) * full_cols + col0 + c);
}

void pl_rng_fill_int(float *out, size_t n, uint64_t seed, uint64_t stream, uint64_t offset,
                     int lo, int hi)
{
    const uint64_t span = (uint64_t)(hi - lo) + 1, key = pl_rng_key(seed, stream);
    for (size_t i = 0; i < n; i++)
        out[i] = (float)(lo + (int64_t)(pl_rng_u64_key(key, offset + i) % span));
}
