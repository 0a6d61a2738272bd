/* testing.h: the one CHECK of the project's test programs. It counts checks and failures
 * and prints each failure with file, line and (under MPI) rank; a program exits non-zero
 * when `failures` is not zero. One translation unit per test program includes it. Also the
 * shared comparison of computed doubles, the job-wide sum a verdict is taken from, and op
 * memory for the arrays a test hands to the kit's ops. */
#ifndef PL_TESTING_H
#define PL_TESTING_H

#include <math.h>
#include <stdio.h>

#include "comm.h"
#include "mem.h"
#include "ops.h"
#include "rng.h"
#include "runtime.h"

static int checks, failures;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        checks++;                                                                          \
        if (!(cond)) {                                                                     \
            failures++;                                                                    \
            printf("[rank %d] FAIL %s:%d: ", pl_initialized() ? pl_rank() : 0, __FILE__,   \
                   __LINE__);                                                              \
            printf(__VA_ARGS__);                                                           \
            printf("\n");                                                                  \
            fflush(stdout);                                                                \
        }                                                                                  \
    } while (0)

/* Equal up to rounding: the same formula computed in a different order. */
static inline int close_to(double got, double want)
{
    return fabs(got - want) <= 1e-12 * fmax(1.0, fabs(want));
}

/* Sum of v over all ranks through the library's own all-reduce, with the value in a comm
 * buffer as the GPU build requires (device memory there). */
static inline double world_sum(double v)
{
    float *buf = pl_comm_buf_alloc(1, "test verdict");
    float x = (float)v;
    pl_copy_from_host(buf, &x, 1);
    pl_all_reduce(pl_comm_world(), buf, buf, 1, PL_SUM);
    pl_copy_to_host(&x, buf, 1);
    pl_comm_buf_free(buf);
    return x;
}

/* Op memory for a test's arrays: what the kit's ops take, device memory on the GPU build
 * (where a host array given to an op is refused). Zero-filled; freed with pl_mem_free.
 * op_from_host fills it with bytes of host memory; read it back with pl_to_host. */
static inline void *op_alloc(size_t bytes)
{
    return pl_mem_alloc(bytes, PL_MEM_WORK, PL_DEVICE, "test array");
}

static inline void *op_from_host(const void *host, size_t bytes)
{
    void *p = op_alloc(bytes);
    pl_to_device(p, host, bytes);
    return p;
}

/* n random tokens and targets in [0, vocab) (host arrays), from the counter-based RNG. */
static inline void random_batch(int vocab, size_t n, uint64_t seed, int *tok, int *tgt)
{
    for (size_t i = 0; i < n; i++) {
        tok[i] = (int)(pl_rng_u64(seed, 1, i) % (uint64_t)vocab);
        tgt[i] = (int)(pl_rng_u64(seed, 2, i) % (uint64_t)vocab);
    }
}

#endif
