/* trace_build.h: hand-built merged traces for the replay's tests (test_replay.c,
 * test_replay_svg.c): a profile of round numbers, an empty trace of n ranks, a group, and
 * one event appended to a rank (zeroed, its type set, no peer). */
#ifndef PL_TESTS_TRACE_BUILD_H
#define PL_TESTS_TRACE_BUILD_H

#include <stdlib.h>
#include <string.h>

#include "topo.h"
#include "trace.h"

static const struct pl_profile test_profile = {
    .name = "test",
    .description = "round numbers",
    .flops = 1e12,
    .bw = {[PL_LINK_INTRA] = 100e9, [PL_LINK_INTER] = 10e9},
    .latency = {[PL_LINK_INTRA] = 2e-6, [PL_LINK_INTER] = 20e-6},
    .devices_per_node = 2,
    .device_mem = 1e9,
};

static inline void trace_init(struct pl_merged_trace *m, int nranks)
{
    memset(m, 0, sizeof *m);
    m->nranks = nranks;
    m->nevents = calloc((size_t)nranks, sizeof *m->nevents);
    m->events = calloc((size_t)nranks, sizeof *m->events);
}

static inline void add_group(struct pl_merged_trace *m, int id, int n, const int *ranks)
{
    m->groups = realloc(m->groups, (size_t)(m->ngroups + 1) * sizeof *m->groups);
    struct pl_group_def *g = &m->groups[m->ngroups++];
    g->id = id;
    g->n = n;
    g->ranks = malloc((size_t)n * sizeof *g->ranks);
    memcpy(g->ranks, ranks, (size_t)n * sizeof *ranks);
}

static inline struct pl_event *add(struct pl_merged_trace *m, int rank, enum pl_ev_type type)
{
    int n = m->nevents[rank]++;
    m->events[rank] = realloc(m->events[rank], (size_t)(n + 1) * sizeof(struct pl_event));
    struct pl_event *e = &m->events[rank][n];
    memset(e, 0, sizeof *e);
    e->type = type;
    e->peer = -1;
    return e;
}

#endif
