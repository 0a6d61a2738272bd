/* unseen_span.c: collectives' buffers outside the memory ledger (unseen_span.h). */
#include "unseen_span.h"

#include <stdio.h>
#include <string.h>

#include "unseen.h"

/* The span being collected, NULL when none: the one pointer a wrapper can reach. */
static struct gr_span *active;

void gr_span_begin(struct gr_span *s)
{
    memset(s, 0, sizeof *s);
    active = s;
}

double gr_span_end(struct gr_span *s, int *where, const char **call)
{
    if (active == s) active = NULL;
    double span[3] = {0, (double)(s->hi[1] - s->lo[1]), (double)(s->hi[2] - s->lo[2])};
    int k = span[GR_UNSEEN_STATIC] >= span[GR_UNSEEN_STACK] ? GR_UNSEEN_STATIC
                                                            : GR_UNSEEN_STACK;
    *where = span[k] > 0 ? k : 0;
    *call = s->call[k];
    return span[1] + span[2];
}

/* noinline: gr_unseen_place's frame must lie below the wrapper's, and the wrapper's below
 * the caller's arrays. */
__attribute__((noinline)) void gr_span_note(const void *buf, size_t floats, const char *call)
{
    struct gr_span *w = active;
    if (!w || !buf || !floats) return;
    gr_unseen_begin(1);
    gr_unseen_place(buf, call, "buffer", -2, "");
    struct gr_unseen s = gr_unseen_end();
    if (!s.where) return;
    uintptr_t lo = (uintptr_t)buf, hi = lo + floats * sizeof(float);
    if (w->hi[s.where] == 0) {
        w->lo[s.where] = lo;
        w->hi[s.where] = hi;
        snprintf(w->call[s.where], sizeof w->call[s.where], "%s", call);
    }
    if (lo < w->lo[s.where]) w->lo[s.where] = lo;
    if (hi > w->hi[s.where]) w->hi[s.where] = hi;
}
