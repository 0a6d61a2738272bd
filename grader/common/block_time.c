/* block_time.c: a split block on the modelled timeline (block_time.h). */
#include "block_time.h"

#include <string.h>

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

int gr_bt_replay(double oracle_flops, double activation_floats, const char *svg,
                 const char *title, struct gr_bt_result *out, char *err, size_t len)
{
    memset(out, 0, sizeof *out);
    double flop_x = gr_bt_flops() / oracle_flops;
    double byte_x = gr_bt_bytes() / (activation_floats * sizeof(float));
    struct gr_overlap ov;
    if (gr_overlap_replay(&bt.trace, pl_profile_find(GR_BT_PROFILE), flop_x, byte_x, svg, title,
                          &ov, err, len) != 0)
        return -1;
    out->step = ov.step_time;
    out->compute = ov.compute;
    out->comm = ov.comm;
    return 0;
}
