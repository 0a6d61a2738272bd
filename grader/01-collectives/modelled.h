/* modelled.h: Lab 1's collectives on the modelled timeline. The student's own messages, traced
 * in one call, are replayed on a cluster profile (lib/replay.h) with every message scaled to
 * the buffer size asked for: the time the alpha-beta model gives their algorithm at any size,
 * without running it at that size on the machine at hand. */
#ifndef L1_MODELLED_H
#define L1_MODELLED_H

#include <stddef.h>

#include "paralab.h"

typedef void (*l1_call)(struct pl_comm *comm, float *buf, size_t count);

/* Collective over the world: calls f once on count zeros and gathers the trace of that call
 * alone to rank 0 (left empty elsewhere; free it with pl_trace_merged_free). */
void l1_trace(l1_call f, size_t count, struct pl_merged_trace *out);

/* Rank 0: the modelled time of trace t with every message's bytes times x, on profile p over
 * topo. Returns it, or -1 with a message in err when the trace cannot be replayed. */
double l1_replay(const struct pl_merged_trace *t, double x, const struct pl_profile *p,
                    const struct pl_topo *topo, char *err, size_t len);

#endif
