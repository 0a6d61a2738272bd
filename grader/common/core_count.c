/* core_count.c: the FLOPs of the kit's core counted by a lab's wrappers (core_count.h). */
#include "core_count.h"

#include <string.h>

/* The count being collected, NULL when none: the one pointer a wrapper can reach. */
static struct gr_core_count *active;

void gr_core_begin(struct gr_core_count *c)
{
    memset(c, 0, sizeof *c);
    active = c;
}

void gr_core_end(struct gr_core_count *c)
{
    if (active == c) active = NULL;
}

void gr_core_note(int kind, double flops)
{
    if (!active || kind < 0 || kind >= GR_CORE_KINDS) return;
    active->last[kind] = flops;
    active->total += flops;
}

void gr_core_send(const float *send, size_t count, int shift)
{
    if (active && active->on_send) active->on_send(active->ctx, send, count, shift);
}

double gr_core_once(const struct gr_core_count *c)
{
    double s = 0;
    for (int k = 0; k < GR_CORE_KINDS; k++) s += c->last[k];
    return s;
}
