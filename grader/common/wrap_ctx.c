/* wrap_ctx.c: the pointer a lab's wrappers reach (wrap_ctx.h). */
#include "wrap_ctx.h"

#include <stddef.h>

/* The lab's record, NULL when none. */
static void *ctx;

void gr_wrap_ctx_set(void *p)
{
    ctx = p;
}

void *gr_wrap_ctx(void)
{
    return ctx;
}
