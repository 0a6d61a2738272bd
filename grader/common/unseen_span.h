/* unseen_span.h: the span of the buffers a rank's collectives were given that lie on the
 * stack or in static storage, where the memory ledger never sees them (Lab 4's loss and
 * training). The lab wraps the library's collectives (its lab.mk's --wrap) and each wrapper
 * calls gr_span_note; the span being collected is the caller's struct, so that a lab's
 * folder holds no mutable state of its own. */
#ifndef GR_UNSEEN_SPAN_H
#define GR_UNSEEN_SPAN_H

#include <stddef.h>
#include <stdint.h>

struct gr_span {
    uintptr_t lo[3], hi[3]; /* by GR_UNSEEN_STACK and GR_UNSEEN_STATIC (unseen.h) */
    char call[3][32];       /* the first collective that used each region */
};

/* Starts collecting into s (zeroed); only one span is collected at a time. */
void gr_span_begin(struct gr_span *s);
/* Stops; returns the bytes both regions span, with the region of the larger span (0 when
 * none, else GR_UNSEEN_STACK or GR_UNSEEN_STATIC) and the call that first used it. */
double gr_span_end(struct gr_span *s, int *where, const char **call);
/* From a wrapper, straight from the wrapped call: notes floats floats at buf when a span is
 * being collected and buf lies on the stack or in static storage. */
void gr_span_note(const void *buf, size_t floats, const char *call);

#endif
