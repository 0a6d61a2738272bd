/* gradients.h: what Lab 3's grader sees of the gradient a ZeRO step updates with. Every call
 * of pl_model_adamw_flat the code under test makes is wrapped (grader/03-zero/lab.mk): the
 * gradient it is given, after the reduce-scatter and the clip, is kept at its flat offset,
 * and the step count t it is given is checked against the steps taken.
 * After each step the ranks' records are put together and compared with the single-device
 * gradient of the whole batch, clipped by the reference's global norm; a difference is
 * explained by the mistakes that make it (a sum where an average belongs, an average taken
 * twice, a clip by one rank's own norm, no clip), each recognised from the numbers, not
 * guessed. */
#ifndef GR03_GRADIENTS_H
#define GR03_GRADIENTS_H

#include <mpi.h>
#include <stddef.h>

#include "train.h"
#include "zero.h"

/* Starts recording one step's pl_model_adamw_flat calls on this rank (numel: Psi). */
void gr03_grads_begin(size_t numel);
/* Stops recording (the wrapped calls then only pass through). */
void gr03_grads_end(void);
void gr03_grads_free(void);

/* Collective over the world (raw MPI): the step's recorded gradient of every rank of the
 * ZeRO group `group` (the raw twin of the communicator zero_new was given) against ref's
 * gradient of step `step`, clipped at clip as the reference does; each group is judged
 * against its own ref. e is the trusted layout on the group's n ranks (any rank's: only the
 * units' fields are read). 1 on every rank when every group was right; otherwise 0 and, on
 * world rank 0, why in msg (the first failing group's). */
int gr03_grads_judge(const struct gr_reference *ref, int step, float clip,
                     const struct zero_layout *e, MPI_Comm group, char *msg, size_t len);

/* A clip threshold that the global norm of ref's first gradient exceeds and that lies
 * between the smallest and the largest norm of one rank's shard of it on e's n ranks: a
 * clip by a rank's own norm then scales some ranks and not others. On 1 rank, half the
 * norm. */
float gr03_clip_between_shards(const struct gr_reference *ref, const struct zero_layout *e);

#endif
