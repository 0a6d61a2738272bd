/* on_host.c: which buffers a ZeRO step computes on lie in PL_HOST blocks, from the memory
 * ledger's own record of each live block (pl_mem_block_of). */
#include "on_host.h"

#include <stdio.h>

#include "mem.h"

static struct {
    int on;
    struct gr03_on_host first;
} h;

void gr03_host_begin(void)
{
    h.first.seen = 0;
    h.on = 1;
}

struct gr03_on_host gr03_host_end(void)
{
    h.on = 0;
    return h.first;
}

void gr03_host_place(const void *buf, const char *call, const char *arg, int part)
{
    enum pl_where where;
    const char *label;
    if (!h.on || h.first.seen || !pl_mem_block_of(buf, &where, &label) || where != PL_HOST)
        return;
    h.first.seen = 1;
    snprintf(h.first.label, sizeof h.first.label, "%s", label);
    if (part >= -1)
        snprintf(h.first.what, sizeof h.first.what, "%s's %s (part %d)", call, arg, part);
    else
        snprintf(h.first.what, sizeof h.first.what, "%s's %s", call, arg);
}
