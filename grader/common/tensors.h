/* tensors.h: op-memory tensors in a driver whose ranks check their own shards (Labs 4 and
 * 5): scratch in op memory, host copies, and how many times the reference a wrong result is.
 * Each lab records a comparison's figures in its observation (gr_cmp_of). */
#ifndef GR_TENSORS_H
#define GR_TENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "verdict.h"

/* n floats of op memory (work category), label for the ledger; at least one float. */
float *gr_op_alloc(size_t n, const char *label);
/* n normal floats (mean, std) of the counter RNG's stream `name` under seed, the same on
 * every rank, in op memory. */
float *gr_op_normal(uint64_t seed, const char *name, size_t n, float mean, float std);
/* A malloc'd host copy of n floats of op memory (free it). */
float *gr_host_copy(const float *op, size_t n);
/* got / ref by least squares: how many times the reference a wrong result is (t when a
 * gradient every rank already holds was summed over the group once more). */
double gr_scale_of(const float *got, const float *ref, size_t n);
/* got against ref, n floats of op memory (either build), into m's figures with tolerance
 * tol: 1 when every element is finite and the relative L2 error is at most tol. */
int gr_cmp_of(const float *got, const float *ref, size_t n, double tol, struct gr_cmp *m);

#endif
