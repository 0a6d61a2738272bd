/* reference.h: the reference solution inside the driver (reference.c), under names of its
 * own, so that every grading run can time the student's step against the reference's on
 * the same machine at the same moment, and set the overlap threshold from what the
 * reference achieves on the same trace model. */
#ifndef LAB02_REFERENCE_H
#define LAB02_REFERENCE_H

#include "ddp.h"

struct ref_ddp;
struct ref_ddp *ref_ddp_new(struct pl_comm *comm, struct pl_model *m,
                            const struct ddp_options *opt);
void ref_ddp_free(struct ref_ddp *d);
double ref_ddp_forward_backward(struct ref_ddp *d, const int *tokens, const int *targets, int B,
                                int microbatch, int microbatches);
void ref_ddp_finish_gradients(struct ref_ddp *d);
int ref_ddp_num_buckets(const struct ref_ddp *d);
void ref_ddp_bucket_range(const struct ref_ddp *d, int i, size_t *offset, size_t *numel);

#endif
