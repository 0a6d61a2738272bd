/* grid.c: the pipelines of a Lab 6 case and the world's trace cut into one per pipeline
 * (grid.h). */
#include "grid.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

void l6_grid_make(struct l6_grid *g, int world, int pipes)
{
    PL_ASSERT(pipes == 1 || (pipes == 2 && world % 2 == 0 && world >= 4));
    PL_ASSERT(world / pipes <= L6_GRID_MAX_STAGES);
    memset(g, 0, sizeof *g);
    g->pipes = pipes;
    g->p = world / pipes;
    for (int w = 0; w < world; w++) {
        /* two pipelines: the parity picks the pipeline, stage 0 is its highest world rank */
        int pipe = pipes == 1 ? 0 : w % 2, stage = pipes == 1 ? w : g->p - 1 - w / 2;
        g->ranks[pipe][stage] = w;
    }
}

int l6_grid_pipe_of(const struct l6_grid *g, int w)
{
    return g->pipes == 1 ? 0 : w % 2;
}

int l6_grid_stage_of(const struct l6_grid *g, int w)
{
    return g->pipes == 1 ? w : g->p - 1 - w / 2;
}

const char *l6_grid_text(const struct l6_grid *g, int pipe, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "world ranks");
    for (int s = 0; s < g->p && used < len; s++)
        used += (size_t)snprintf(buf + used, len - used, "%s %d", s ? "," : "", g->ranks[pipe][s]);
    if (used < len)
        snprintf(buf + used, len - used, " as stages 0..%d", g->p - 1);
    return buf;
}

/* The stage of world rank w in pipeline `pipe`, -1 when w is not in it. */
static int stage_in(const struct l6_grid *g, int pipe, int w)
{
    for (int s = 0; s < g->p; s++)
        if (g->ranks[pipe][s] == w) return s;
    return -1;
}

void l6_grid_trace(const struct l6_grid *g, int pipe, const struct pl_merged_trace *world,
                struct pl_merged_trace *out)
{
    memset(out, 0, sizeof *out);
    int p = g->p;
    out->nranks = p;
    out->nevents = calloc((size_t)p, sizeof *out->nevents);
    out->events = calloc((size_t)p, sizeof *out->events);
    PL_ASSERT(out->nevents && out->events);
    for (int s = 0; s < p; s++) {
        int w = g->ranks[pipe][s], n = w < world->nranks ? world->nevents[w] : 0;
        out->nevents[s] = n;
        out->events[s] = malloc(sizeof(struct pl_event) * (size_t)(n ? n : 1));
        PL_ASSERT(out->events[s]);
        if (n) memcpy(out->events[s], world->events[w], sizeof(struct pl_event) * (size_t)n);
        for (int i = 0; i < n; i++) {
            struct pl_event *e = &out->events[s][i];
            if (e->type == PL_EV_SEND || e->type == PL_EV_RECV || e->type == PL_EV_ISEND
                || e->type == PL_EV_IRECV)
                e->peer = stage_in(g, pipe, e->peer);
        }
    }
    out->groups = calloc((size_t)(world->ngroups ? world->ngroups : 1), sizeof *out->groups);
    PL_ASSERT(out->groups);
    for (int i = 0; i < world->ngroups; i++) {
        const struct pl_group_def *d = &world->groups[i];
        int inside = d->n > 0;
        for (int r = 0; r < d->n && inside; r++) inside = stage_in(g, pipe, d->ranks[r]) >= 0;
        if (!inside) continue;
        struct pl_group_def *o = &out->groups[out->ngroups++];
        o->id = d->id;
        o->n = d->n;
        o->ranks = malloc(sizeof(int) * (size_t)d->n);
        PL_ASSERT(o->ranks);
        for (int r = 0; r < d->n; r++) o->ranks[r] = stage_in(g, pipe, d->ranks[r]);
    }
}
