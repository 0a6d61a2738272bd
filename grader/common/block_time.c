/* block_time.c: a split block on the modelled timeline (block_time.h). */
#include "block_time.h"

#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "paralab.h"
#include "train.h"

static struct {
    int was_on, traced;
    struct pl_merged_trace trace; /* rank 0 */
} bt;

void gr_bt_begin(void)
{
    bt.was_on = pl_trace_enabled();
    pl_trace_enable(1);
    pl_trace_clear();
    pl_span("F forward");
}

void gr_bt_pause(void)
{
    pl_trace_flush();
    pl_trace_enable(0);
}

void gr_bt_resume(void)
{
    pl_trace_enable(1);
    pl_span("B backward");
}

void gr_bt_end(int complete)
{
    pl_trace_flush();
    pl_trace_enable(0);
    pl_trace_merged_free(&bt.trace);
    pl_trace_gather(&bt.trace);
    bt.traced = complete;
    pl_span("");
    pl_trace_enable(bt.was_on);
}

void gr_bt_free(void)
{
    pl_trace_merged_free(&bt.trace);
    bt.traced = 0;
}

int gr_bt_traced(void)
{
    return bt.traced;
}

/* 72 bsh^2 (1 + s/(6h)) (Narayanan et al.) */
double gr_bt_flops(void)
{
    return 72.0 * GR_BT_B * GR_BT_S * GR_BT_H * GR_BT_H * (1 + GR_BT_S / (6.0 * GR_BT_H));
}

double gr_bt_bytes(void)
{
    return GR_BT_B * GR_BT_S * GR_BT_H * 2.0;
}

int gr_bt_replay(double oracle_flops, double activation_floats, int t, const char *svg,
                 const char *title, struct gr_bt_verdict *out, char *err, size_t len)
{
    memset(out, 0, sizeof *out);
    double flop_x = gr_bt_flops() / oracle_flops;
    double byte_x = gr_bt_bytes() / (activation_floats * sizeof(float));
    struct gr_overlap ov;
    if (gr_overlap_replay(&bt.trace, pl_profile_find(GR_BT_PROFILE), flop_x, byte_x, svg, title,
                          &ov, err, len) != 0)
        return -1;
    out->r.step = ov.step_time;
    out->r.compute = ov.compute;
    out->r.comm = ov.comm;
    out->bound = gr_bt_bound(t);
    out->ratio = out->r.step / out->bound;
    return 0;
}

int gr_bt_replay_scaled(double flop_x, double byte_x, const char *svg, const char *title,
                        struct gr_overlap *ov, char *err, size_t len)
{
    return gr_overlap_replay(&bt.trace, pl_profile_find(GR_BT_PROFILE), flop_x, byte_x, svg,
                             title, ov, err, len);
}

double gr_bt_bound(int t)
{
    const struct pl_profile *p = pl_profile_find(GR_BT_PROFILE);
    const enum pl_link l = PL_LINK_INTRA;
    double ar = t > 1 ? pl_coll_time(PL_ALL_REDUCE, t, gr_bt_bytes(), p->latency[l], p->bw[l])
                      : 0;
    return gr_bt_flops() / t / p->flops + 4 * ar;
}

void gr_bt_figures_of(const struct gr_bt_verdict *v, int t, const char *err,
                      struct gr_bt_figures *m)
{
    memset(m, 0, sizeof *m);
    m->traced = v->bound > 0;
    snprintf(m->err, sizeof m->err, "%s", err ? err : "");
    m->t = t;
    m->step = v->r.step;
    m->compute = v->r.compute;
    m->bound = v->bound;
    m->ratio = v->ratio;
    m->split = gr_bt_flops() / t / pl_profile_find(GR_BT_PROFILE)->flops;
}

void gr_bt_record(int first, double oracle_flops, double activation_floats, int t,
                  struct gr_bt_figures *last)
{
    if (first && pl_rank() == 0) {
        char err[256] = "the forward was wrong, so the backward never ran";
        struct gr_bt_verdict v;
        memset(&v, 0, sizeof v);
        if (gr_bt_traced() && gr_bt_replay(oracle_flops, activation_floats, t, NULL, NULL, &v,
                                           err, sizeof err) != 0)
            memset(&v, 0, sizeof v);
        gr_bt_figures_of(&v, t, err, last);
    }
    gr_bt_free();
}
