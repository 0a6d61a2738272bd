/* received.c: the bytes a rank's code receives (received.h). */
#include "received.h"

#include <string.h>

/* The count being collected, NULL when none: the one pointer a wrapper can reach. */
static struct gr_received *active;

void gr_received_begin(struct gr_received *r)
{
    memset(r, 0, sizeof *r);
    active = r;
}

void gr_received_end(struct gr_received *r)
{
    if (active == r) active = NULL;
}

void gr_received_note(size_t floats, int recv_only)
{
    if (!active) return;
    active->bytes += 4.0 * (double)floats;
    if (recv_only) active->recv_only_calls++;
}
