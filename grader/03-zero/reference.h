/* reference.h: the grader's own implementation of the three ZeRO stages (reference.c), the
 * same algorithm as the reference solution under names of its own, so that it links beside
 * the student's zero.c: the trusted shard layout the student's is checked against, and the
 * baseline of the throughput tests. */
#ifndef LAB03_REFERENCE_H
#define LAB03_REFERENCE_H

#include "zero.h"

void ref_zero_layout_init(struct zero_layout *zl, const struct pl_model_layout *lay, int n,
                          int rank);
struct zero *ref_zero_new(const struct pl_model_config *cfg, const struct pl_adamw_config *opt,
                          int stage, int prefetch, struct pl_comm *comm);
double ref_zero_step(struct zero *z, const int *tokens, const int *targets, int B);
void ref_zero_free(struct zero *z);

#endif
