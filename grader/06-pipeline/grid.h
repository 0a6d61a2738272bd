/* grid.h: the pipelines of one case of Lab 6, as a grid of data-parallel pipelines would lay
 * them out. One pipeline is the whole world in world order; two split the world into
 * pipelines of n/2 stages whose communicators number their ranks in another order than the
 * world: pipeline g holds the world ranks of g's parity, stage 0 the highest of them, so a
 * stage taken from a world rank is never the stage. Each pipeline trains on its own data;
 * the driver judges each from its own ranks, read in stage order. */
#ifndef LAB06_GRID_H
#define LAB06_GRID_H

#include "trace.h"

#define L6_GRID_MAX_PIPES 2
#define L6_GRID_MAX_STAGES 64

struct l6_grid {
    int pipes;                                  /* 1 or 2 */
    int p;                                      /* stages of each pipeline */
    int ranks[L6_GRID_MAX_PIPES][L6_GRID_MAX_STAGES]; /* world rank of stage s of pipeline g */
};

/* The layout of `pipes` pipelines (1, or 2 when world is even and at least 4) on world ranks. */
void l6_grid_make(struct l6_grid *g, int world, int pipes);
/* World rank w's pipeline and its stage there. */
int l6_grid_pipe_of(const struct l6_grid *g, int w);
int l6_grid_stage_of(const struct l6_grid *g, int w);
/* "world ranks 2, 0 as stages 0, 1" of pipeline `pipe`, into buf. */
const char *l6_grid_text(const struct l6_grid *g, int pipe, char *buf, size_t len);
/* The world's merged trace cut to pipeline `pipe`: its ranks in stage order, every peer
 * renumbered to its stage there (-1 outside the pipeline), the groups that lie inside it
 * kept, renumbered the same way. Free with pl_trace_merged_free. */
void l6_grid_trace(const struct l6_grid *g, int pipe, const struct pl_merged_trace *world,
                struct pl_merged_trace *out);

#endif
