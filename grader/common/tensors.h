/* tensors.h: op-memory tensors in a driver whose ranks judge their own shards (parts.h):
 * scratch in op memory, host copies, and a result against its oracle with the error and
 * the likeliest mistake named (Labs 4 and 5). */
#ifndef GR_TENSORS_H
#define GR_TENSORS_H

#include <stddef.h>
#include <stdint.h>

/* n floats of op memory (work category), label for the ledger; at least one float. */
float *gr_op_alloc(size_t n, const char *label);
/* n normal floats (mean, std) of the counter RNG's stream `name` under seed, the same on
 * every rank, in op memory. */
float *gr_op_normal(uint64_t seed, const char *name, size_t n, float mean, float std);
/* A malloc'd host copy of n floats of op memory (free it). */
float *gr_host_copy(const float *op, size_t n);
/* got against ref (op memory, n floats), relative L2 error within tol and every element
 * finite: 1, or 0 after gr_fail names what, the error, the element and hint (may be NULL). */
int gr_compare(const char *what, const float *got, const float *ref, size_t n, double tol,
               const char *hint);
/* got / ref by least squares: how many times the reference a wrong result is (t when a
 * gradient every rank already holds was summed over the group once more). */
double gr_scale_of(const float *got, const float *ref, size_t n);

#endif
