/* on_host.c: which buffers a ZeRO step computes on lie in PL_HOST blocks, from the memory
 * ledger's own record of each live block (pl_mem_block_of). zero.h asks for PL_DEVICE for
 * every buffer a stage keeps; the CPU build cannot tell the two apart, a GPU can (the kit's
 * kernels read device memory). The wrappers of the pass (unseen.c) and of AdamW
 * (gradients.c) place every buffer they are given, into the state's watch (gr_wrap_ctx). */
#include <stdio.h>

#include "lab03.h"
#include "mem.h"
#include "wrap_ctx.h"

void l3_host_begin(struct l3_watch *w)
{
    w->host.first.seen = 0;
    w->host.on = 1;
}

struct l3_on_host l3_host_end(struct l3_watch *w)
{
    w->host.on = 0;
    return w->host.first;
}

void l3_host_place(const void *buf, const char *call, const char *arg, int part)
{
    struct l3_watch *w = gr_wrap_ctx();
    enum pl_where where;
    const char *label;
    if (!w || !w->host.on || w->host.first.seen || !pl_mem_block_of(buf, &where, &label) ||
        where != PL_HOST)
        return;
    struct l3_on_host *h = &w->host.first;
    h->seen = 1;
    snprintf(h->label, sizeof h->label, "%s", label);
    if (part >= -1)
        snprintf(h->what, sizeof h->what, "%s's %s (part %d)", call, arg, part);
    else
        snprintf(h->what, sizeof h->what, "%s's %s", call, arg);
}
