/* timeline.c: Lab 4's block on the modelled timeline (lab04.h; the trace and its replay at
 * GPT-3 block scale are grader/common/block_time.h's). The modelled step is graded against
 * the least a TP block can take: the single device's compute split t ways plus the four
 * ring all-reduces of bsh values that f and g need, serially (nothing in a TP block can
 * overlap them: each all-reduce's result is the next op's input). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "block_time.h"
#include "lab04.h"
#include "parts.h"

static struct {
    int wanted;
    struct time_result last; /* of the traced case, said again on the others */
} tl;

void time_want(int on)
{
    tl.wanted = on;
}

int time_traced(enum sub s, int i)
{
    return tl.wanted && s == SUB_BLOCK && i == 0;
}

double time_bound(int t, int nodes_crossed)
{
    const struct pl_profile *p = pl_profile_find(GR_BT_PROFILE);
    enum pl_link l = nodes_crossed ? PL_LINK_INTER : PL_LINK_INTRA;
    double ar = t > 1 ? pl_coll_time(PL_ALL_REDUCE, t, gr_bt_bytes(), p->latency[l], p->bw[l])
                      : 0;
    return gr_bt_flops() / t / p->flops + 4 * ar;
}

int time_measure(const struct sub_run *run, int t, int across, const char *svg,
                 struct time_result *out, char *err, size_t len)
{
    memset(out, 0, sizeof *out);
    char title[200];
    snprintf(title, sizeof title, "TP block forward and backward, t = %d %s, %s, GPT-3 175B "
             "block scale", t, across ? "across nodes" : "inside a node", GR_BT_PROFILE);
    struct gr_bt_result r;
    if (gr_bt_replay(run->oracle_flops, run->activation_floats, svg, title, &r, err, len) != 0)
        return -1;
    out->step = r.step;
    out->compute = r.compute;
    out->comm = r.comm;
    out->bound = time_bound(t, 0);
    out->ratio = out->step / out->bound;
    return 0;
}

/* Why a block is slower than the bound, when it is: its compute against the single
 * device's split t ways. */
static void slower_because(const struct time_result *r, int t, char *buf, size_t len)
{
    double split = gr_bt_flops() / t / pl_profile_find(GR_BT_PROFILE)->flops;
    snprintf(buf, len, "your compute alone is %.2f ms, %.2fx the single device's split %d "
             "ways (%.2f ms). Each rank should multiply only by its own shard of the weights: "
             "work on zero-padded or gathered full-size tensors is paid on every rank "
             "(section 8)", r->compute * 1e3, r->compute / split, t, split * 1e3);
}

void time_judge(const struct sub_run *run, int t, int i)
{
    struct time_result *r = &tl.last;
    char why[400] = "";
    if (i == 0 && pl_rank() == 0) {
        char err[256];
        if (!gr_bt_traced() || time_measure(run, t, 0, NULL, r, err, sizeof err) != 0) {
            gr_fail("your block's trace could not be replayed: %s",
                    gr_bt_traced() ? err : "the forward was wrong, so the backward never ran");
            memset(r, 0, sizeof *r);
        } else if (r->ratio >= TIME_NONE) {
            slower_because(r, t, why, sizeof why);
            gr_fail("your block's modelled step is %.2f ms on %s at GPT-3 block scale, %.2fx "
                    "the %.2f ms a TP block needs (compute/t + 4 ring all-reduces of bsh; no "
                    "points from %.2fx): %s", r->step * 1e3, GR_BT_PROFILE, r->ratio,
                    r->bound * 1e3, TIME_NONE, why);
        } else if (r->ratio > TIME_FULL) {
            gr_partial("time", (TIME_NONE - r->ratio) / (TIME_NONE - TIME_FULL));
        }
    }
    gr_bt_free();
    if (pl_rank() == 0 && r->bound > 0) {
        if (r->ratio > TIME_FULL && !why[0]) slower_because(r, t, why, sizeof why);
        gr_parts_say_ok(P_TIME, "your block forward and backward, modelled on %s at GPT-3 175B "
                        "block scale, takes %.2f ms: %.2fx the %.2f ms of compute/t + 4 ring "
                        "all-reduces of bsh (full marks up to %.2fx, none from %.2fx)%s%s",
                        GR_BT_PROFILE, r->step * 1e3, r->ratio, r->bound * 1e3, TIME_FULL,
                        TIME_NONE, why[0] ? "; " : "", why);
    }
}
