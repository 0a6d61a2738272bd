/* block_time.c: a split block on the modelled timeline (block_time.h). */
#include "block_time.h"

#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "paralab.h"
#include "parts.h"
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

double gr_bt_bound(int t)
{
    const struct pl_profile *p = pl_profile_find(GR_BT_PROFILE);
    const enum pl_link l = PL_LINK_INTRA;
    double ar = t > 1 ? pl_coll_time(PL_ALL_REDUCE, t, gr_bt_bytes(), p->latency[l], p->bw[l])
                      : 0;
    return gr_bt_flops() / t / p->flops + 4 * ar;
}

/* Why a block is slower than the bound, when it is: its compute against the single
 * device's split t ways. */
static void slower_because(const struct gr_bt_verdict *v, int t, const char *section,
                           char *buf, size_t len)
{
    double split = gr_bt_flops() / t / pl_profile_find(GR_BT_PROFILE)->flops;
    snprintf(buf, len,
             "your compute alone is %.2f ms, %.2fx the single device's split %d "
             "ways (%.2f ms). Each rank should do the products of its own shard once: a product "
             "repeated (the forward's, again in the backward, with its activations kept) or run "
             "on zero-padded or gathered full-size tensors is paid on every rank (section %s)",
             v->r.compute * 1e3, v->r.compute / split, t, split * 1e3, section);
}

void gr_bt_judge(struct gr_bt_verdict *v, int i, int p, const char *name, int t,
                 double oracle_flops, double activation_floats, const char *comm,
                 const char *section)
{
    char why[400] = "";
    if (i == 0 && pl_rank() == 0) {
        char err[256];
        memset(v, 0, sizeof *v);
        if (!bt.traced || gr_bt_replay(oracle_flops, activation_floats, t, NULL, NULL, v, err,
                                       sizeof err) != 0) {
            memset(v, 0, sizeof *v);
            gr_fail("your block's trace could not be replayed: %s",
                    bt.traced ? err : "the forward was wrong, so the backward never ran");
        } else {
            if (v->ratio >= GR_BT_NONE) {
                slower_because(v, t, section, why, sizeof why);
                gr_fail("your block's modelled step is %.2f ms on %s at GPT-3 block scale, "
                        "%.2fx the %.2f ms a split block needs (compute/t + %s; no points "
                        "from %.2fx): %s", v->r.step * 1e3, GR_BT_PROFILE, v->ratio,
                        v->bound * 1e3, comm, GR_BT_NONE, why);
            } else if (v->ratio > GR_BT_FULL) {
                gr_partial(name, (GR_BT_NONE - v->ratio) / (GR_BT_NONE - GR_BT_FULL));
            }
        }
    }
    gr_bt_free();
    if (pl_rank() == 0 && v->bound > 0) {
        if (v->ratio > GR_BT_FULL && !why[0]) slower_because(v, t, section, why, sizeof why);
        gr_parts_say_ok(p, "your block forward and backward, modelled on %s at GPT-3 175B block "
                        "scale, takes %.2f ms: %.2fx the %.2f ms of compute/t + %s (full "
                        "marks up to %.2fx, none from %.2fx)%s%s", GR_BT_PROFILE,
                        v->r.step * 1e3, v->ratio, v->bound * 1e3, comm, GR_BT_FULL,
                        GR_BT_NONE, why[0] ? "; " : "", why);
    }
}
