/* memory_time.h: the memory ledger over time, for Lab 3's picture of one ZeRO-3 step: a
 * watcher (pl_mem_watch) records each category after every allocation and free, and the
 * series is drawn as stacked bands, one per category, in program order. */
#ifndef LAB03_MEMORY_TIME_H
#define LAB03_MEMORY_TIME_H

#include "mem.h"

#define MEM_SHOWN 4 /* params, grads, optim, activ: what the stages and the pass hold */

struct mem_series {
    int n, cap;
    double (*v)[MEM_SHOWN]; /* bytes of each category after each change */
};

/* A pl_mem_watch callback: appends now to the series ctx (its memory is malloc's, never
 * the ledger's). */
void mem_series_add(const struct pl_mem_stats *now, void *ctx);
/* Writes the series as an SVG to path: rank 0 of n ranks, a model of psi parameters. */
void mem_series_svg(const char *path, const struct mem_series *s, int n, double psi);
void mem_series_free(struct mem_series *s);

#endif
