/* memory_time.h: the memory ledger over time, for Lab 3's picture of one ZeRO-3 step: a
 * watcher (pl_mem_watch) records each category after every allocation and free, and the
 * series is drawn as stacked bands, one per category, in program order. */
#ifndef L3_MEMORY_TIME_H
#define L3_MEMORY_TIME_H

#include "mem.h"

#define L3_MEM_SHOWN 4 /* params, grads, optim, activ: what the stages and the pass hold */

struct l3_mem_series {
    int n, cap;
    double (*v)[L3_MEM_SHOWN]; /* bytes of each category after each change */
};

/* A pl_mem_watch callback: appends now to the series ctx (its memory is malloc's, never
 * the ledger's). */
void l3_mem_series_add(const struct pl_mem_stats *now, void *ctx);
/* Writes the series as an SVG to path: rank 0 of n ranks, a model of psi parameters. */
void l3_mem_series_svg(const char *path, const struct l3_mem_series *s, int n, double psi);
void l3_mem_series_free(struct l3_mem_series *s);

#endif
