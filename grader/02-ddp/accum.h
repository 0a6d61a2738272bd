/* accum.h: what the accumulation microbatches of one step left behind, for the reasons Lab
 * 2's correctness test gives. A step whose averaged gradient is wrong is explained from it:
 * an accumulation microbatch that communicated (the all-reduce averaged a partial gradient,
 * and the microbatches after it were never synchronised), a last microbatch that sent less
 * than the whole gradient, or a gradient that is the last microbatch's alone (zeroed at
 * every microbatch). Traffic is observed on every case, whether or not the traffic part is
 * graded, so the reason is the same on both. */
#ifndef L2_ACCUM_H
#define L2_ACCUM_H

#include <mpi.h>
#include <stddef.h>

#include "ledger.h"

struct l2_accum {
    int mb;            /* the first accumulation microbatch that communicated (-1: none) */
    int rank;          /* the rank that sent most in it */
    double bytes;      /* what that rank sent then */
    long calls;        /* in that many collective calls that move data */
    int late_rank;     /* the rank that sent least in the last microbatch and the finish */
    double late_bytes; /* what it sent */
    size_t numel;
    double *partial;   /* this rank: m->grads as each accumulation microbatch left it, summed */
};

void l2_accum_init(struct l2_accum *a, size_t numel);
void l2_accum_free(struct l2_accum *a);
/* At the start of a step. */
void l2_accum_step_begin(struct l2_accum *a);
/* Collective (raw MPI, the world): after accumulation microbatch mb's ddp_forward_backward,
 * with the traffic it made (delta) and the gradient buffer it left (op memory). One
 * all-reduce of at most count_bytes sent (the count exchange ddp.h allows) is not
 * communication of the gradient. */
void l2_accum_microbatch(struct l2_accum *a, int mb, const struct pl_ledger *delta,
                           const float *grads, double count_bytes);
/* Collective (raw MPI, the world): after ddp_finish_gradients, with the traffic of the last
 * microbatch and the finish together. */
void l2_accum_last(struct l2_accum *a, const struct pl_ledger *delta);
/* Collective (raw MPI): the relative L2 distance of got (host, this rank's averaged
 * gradient) from the group's gradient of its last microbatch alone, want (the reference of
 * the whole batch) minus the group's mean of the partial sums; the largest over the world
 * on rank 0. Near zero: the gradients were zeroed at every microbatch (a step of several
 * microbatches; with one, there is nothing to tell). */
double l2_accum_zeroed_each(const struct l2_accum *a, MPI_Comm group, const float *got,
                              const float *want);

#endif
