/* modelled.c: Lab 1's collectives on the modelled timeline (modelled.h). */
#include "modelled.h"

#include <stdlib.h>
#include <string.h>

void l1_trace(l1_call f, size_t count, struct pl_merged_trace *out)
{
    memset(out, 0, sizeof *out);
    float *zeros = calloc(count ? count : 1, sizeof *zeros);
    float *buf = pl_comm_buf_alloc(count, "lab01 traced buffer");
    pl_copy_from_host(buf, zeros, count);
    int was_on = pl_trace_enabled();
    pl_trace_flush();
    pl_trace_enable(1);
    pl_trace_clear();
    f(pl_comm_world(), buf, count);
    pl_trace_flush();
    pl_trace_enable(0);
    pl_trace_gather(out);
    pl_trace_enable(was_on);
    pl_comm_buf_free(buf);
    free(zeros);
}

static int is_message(enum pl_ev_type t)
{
    return t == PL_EV_SEND || t == PL_EV_RECV || t == PL_EV_ISEND || t == PL_EV_IRECV;
}

double l1_replay(const struct pl_merged_trace *t, double x, const struct pl_profile *p,
                    const struct pl_topo *topo, char *err, size_t len)
{
    /* A copy whose messages (and reductions, which grow with them) are x times larger. */
    struct pl_merged_trace c = *t;
    c.events = calloc((size_t)t->nranks, sizeof *c.events);
    for (int r = 0; r < t->nranks; r++) {
        size_t n = (size_t)t->nevents[r];
        c.events[r] = malloc((n ? n : 1) * sizeof **c.events);
        if (n) memcpy(c.events[r], t->events[r], n * sizeof **c.events);
        for (size_t i = 0; i < n; i++) {
            if (is_message(c.events[r][i].type)) c.events[r][i].bytes *= x;
            c.events[r][i].flops *= x;
        }
    }
    struct pl_replay rp;
    double time = -1;
    if (pl_replay_run(&c, p, topo, &rp, err, len) == 0) {
        time = rp.step_time;
        pl_replay_free(&rp);
    }
    for (int r = 0; r < t->nranks; r++) free(c.events[r]);
    free(c.events);
    return time;
}
