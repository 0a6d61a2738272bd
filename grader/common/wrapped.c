/* wrapped.c: the one pointer a lab's wrappers reach (wrapped.h). */
#include "wrapped.h"

#include <stddef.h>

static void *active;

void gr_wrapped_set(void *ctx)
{
    active = ctx;
}

void *gr_wrapped_get(void)
{
    return active;
}
