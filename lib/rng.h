/* rng.h: counter-based random numbers. A value is a pure function of (seed, stream,
 * index): the element index in the FULL tensor. A shard of a parameter filled on its own
 * is therefore bit-for-bit the same slice of the full tensor, on any rank count. pl_mix64,
 * pl_rng_u64 and pl_rng_uniform are PL_HD, so kernels draw the same numbers as host code;
 * pl_rng_normal, pl_rng_stream and the fills run on the host (fill host memory, then copy
 * to the device). Streams are derived from tensor names. */
#ifndef PL_RNG_H
#define PL_RNG_H

#include <stddef.h>
#include <stdint.h>
#include "hd.h"

/* splitmix64 finaliser: a bijective, well-mixed 64-bit hash. */
PL_HD uint64_t pl_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* The key of (seed, stream): every draw of the stream hashes it with its index, so a fill
 * computes it once (pl_rng_u64 is pl_rng_u64_key of it). */
PL_HD uint64_t pl_rng_key(uint64_t seed, uint64_t stream)
{
    return pl_mix64(seed ^ pl_mix64(stream));
}

PL_HD uint64_t pl_rng_u64_key(uint64_t key, uint64_t index)
{
    return pl_mix64(key + index);
}

PL_HD uint64_t pl_rng_u64(uint64_t seed, uint64_t stream, uint64_t index)
{
    return pl_rng_u64_key(pl_rng_key(seed, stream), index);
}

/* Uniform in [0, 1) with 24 random bits, exactly representable in fp32; _key: of a stream's
 * key (pl_rng_key). */
PL_HD float pl_rng_uniform_key(uint64_t key, uint64_t index)
{
    return (float)(pl_rng_u64_key(key, index) >> 40) * (1.0f / 16777216.0f);
}

PL_HD float pl_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index)
{
    return pl_rng_uniform_key(pl_rng_key(seed, stream), index);
}

/* Standard normal by Box-Muller on two uniforms drawn from sub-counters of index. */
float pl_rng_normal(uint64_t seed, uint64_t stream, uint64_t index);

/* Stream id of a name (FNV-1a), so "h.3.attn.w_qkv" always draws the same numbers. */
uint64_t pl_rng_stream(const char *name);

/* out[i] = mean + std * normal(seed, stream, offset + i) for i < n: fills elements
 * [offset, offset+n) of the full flattened tensor. */
void pl_rng_fill_normal(float *out, size_t n, uint64_t seed, uint64_t stream, uint64_t offset,
                        float mean, float std);
void pl_rng_fill_uniform(float *out, size_t n, uint64_t seed, uint64_t stream,
                         uint64_t offset, float lo, float hi);

/* A rectangular block of a full rows x cols matrix: out is block_rows x block_cols,
 * starting at (row0, col0); element (r, c) draws the index of (row0+r, col0+c) in the full
 * matrix. Used for column- and row-parallel shards. */
void pl_rng_fill_normal_block(float *out, size_t full_cols, size_t row0, size_t col0,
                              size_t block_rows, size_t block_cols, uint64_t seed,
                              uint64_t stream, float std);

/* Integer-valued floats in [lo, hi]: sums of them are exact in fp32 up to 2^24, so tests
 * of collectives can compare with a serial computation bit for bit. */
void pl_rng_fill_int(float *out, size_t n, uint64_t seed, uint64_t stream, uint64_t offset,
                     int lo, int hi);

#endif
