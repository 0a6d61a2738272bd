/* grid.h: the rank grid. An order string such as "tp-cp-ep-dp-pp" names the parallel axes;
 * the leftmost varies fastest (as in Megatron-LM), so
 *     rank = c[0] + s[0] * (c[1] + s[1] * (c[2] + ...)).
 * With tp leftmost, the ranks of one TP group are consecutive and so share a node.
 * Pure arithmetic, plus one function that turns an axis into a communicator. */
#ifndef PL_GRID_H
#define PL_GRID_H

#include <stddef.h>

#define PL_GRID_MAX_AXES 6
#define PL_GRID_AXIS_LEN 8

struct pl_comm;

struct pl_grid {
    int naxes;
    char axis[PL_GRID_MAX_AXES][PL_GRID_AXIS_LEN];
    int size[PL_GRID_MAX_AXES];
    int world;
};

/* Known axis names: tp, cp, ep, dp, pp. degrees is "tp=2,pp=2" (may be NULL or ""); an axis
 * absent from degrees has size 1, except dp, which takes world / (product of the others)
 * when not given. Returns 0, or -1 with a message that teaches in err: unknown or repeated
 * axis, a degree < 1, a product that does not equal world (listing the sizes that would). */
int pl_grid_init(struct pl_grid *g, const char *order, const char *degrees, int world,
                 char *err, size_t errlen);
/* pl_grid_init, exiting with a usage error (code 2) on failure. Every rank calls it with
 * the same arguments (rank 0 prints the message once). */
void pl_grid_init_or_die(struct pl_grid *g, const char *order, const char *degrees, int world);

/* The functions below that take an axis accept -1 (what pl_grid_axis answers for an axis
 * the order lacks) as an axis of size 1: coordinate 0, a group of one, no neighbours. */
int pl_grid_axis(const struct pl_grid *g, const char *name); /* index, or -1 */
int pl_grid_axis_size(const struct pl_grid *g, const char *name); /* 1 if absent */
int pl_grid_coord(const struct pl_grid *g, int rank, int axis);
void pl_grid_coords(const struct pl_grid *g, int rank, int *coords);
int pl_grid_rank(const struct pl_grid *g, const int *coords);
/* World ranks of rank's group along axis, ordered by that axis' coordinate; returns size. */
int pl_grid_group(const struct pl_grid *g, int rank, int axis, int *members);
/* Rank whose coordinate along axis is one step (delta = +1 or -1) away, or -1 past the
 * ends: the pipeline's next and previous stage. */
int pl_grid_neighbor(const struct pl_grid *g, int rank, int axis, int delta);
/* "tp2-dp2-pp2" into buf. */
const char *pl_grid_describe(const struct pl_grid *g, char *buf, size_t len);

/* Collective over world: the communicator of this rank's group along axis, group rank =
 * coordinate along the axis. */
struct pl_comm *pl_grid_comm(const struct pl_grid *g, struct pl_comm *world, int axis);

#endif
