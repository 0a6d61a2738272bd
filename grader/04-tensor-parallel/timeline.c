/* timeline.c: Lab 4's block on the modelled timeline (lab04.h; the trace, its replay at
 * GPT-3 block scale and the verdict are grader/common/block_time.h's). The modelled step is
 * graded against the least a TP block can take: the single device's compute split t ways
 * plus the four ring all-reduces of bsh values that f and g need, serially (nothing in a TP
 * block can overlap them: each all-reduce's result is the next op's input). */
#include <stdio.h>
#include <string.h>

#include "lab04.h"
#include "parts.h"

static struct {
    int wanted;
    struct gr_bt_verdict last; /* of the traced case, said again on the others */
} tl;

void time_want(int on)
{
    tl.wanted = on;
}

int time_traced(enum sub s, int i)
{
    return tl.wanted && s == SUB_BLOCK && i == 0;
}

int time_measure(const struct sub_run *run, int t, int across, const char *svg,
                 struct gr_bt_verdict *out, char *err, size_t len)
{
    char title[200];
    snprintf(title, sizeof title, "TP block forward and backward, t = %d %s, %s, GPT-3 175B "
             "block scale", t, across ? "across nodes" : "inside a node", GR_BT_PROFILE);
    return gr_bt_replay(run->oracle_flops, run->activation_floats, t, svg, title, out, err,
                        len);
}

void time_judge(const struct sub_run *run, int t, int i)
{
    gr_bt_judge(&tl.last, i, P_TIME, "time", t, run->oracle_flops, run->activation_floats,
                "4 ring all-reduces of bsh", "8");
}
