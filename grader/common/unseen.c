/* unseen.c: buffers placed against this process's stack and static storage (unseen.h). The
 * stack is the main thread's, from the placing function's own frame up to the stack limit
 * (the wrapper's and the caller's frames, and their arrays, lie above it); static storage is
 * the executable's data and bss, between the linker's __data_start and _end. */
#include "unseen.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>

extern char __data_start[], _end[];

static struct {
    int on;
    struct gr_unseen first;
    int stack_too;
    uintptr_t stack_span;
} u;

void gr_unseen_begin(int stack_too)
{
    struct rlimit rl;
    u.stack_span = 256u << 20; /* no limit: the heap and mappings lie far below the stack */
    if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < u.stack_span)
        u.stack_span = (uintptr_t)rl.rlim_cur;
    u.first.where = 0;
    u.stack_too = stack_too;
    u.on = 1;
}

struct gr_unseen gr_unseen_end(void)
{
    u.on = 0;
    return u.first;
}

const char *gr_unseen_where(int where)
{
    return where == GR_UNSEEN_STACK
               ? "on the stack (a local or variable-length array)"
               : "in static storage (an array declared static or at file scope)";
}

/* noinline: its frame must lie below its caller's, the wrapper's, itself below the code
 * under test's. */
__attribute__((noinline)) void gr_unseen_place(const void *buf, const char *call,
                                               const char *arg, int part,
                                               const char *category)
{
    volatile char here = 0;
    uintptr_t b = (uintptr_t)buf, h = (uintptr_t)&here;
    int where = 0;
    if (!u.on || u.first.where) return;
    if (u.stack_too && b > h && b - h < u.stack_span) where = GR_UNSEEN_STACK;
    else if (b >= (uintptr_t)__data_start && b < (uintptr_t)_end) where = GR_UNSEEN_STATIC;
    (void)here;
    if (!where) return;
    u.first.where = where;
    snprintf(u.first.category, sizeof u.first.category, "%s", category);
    if (part >= -1)
        snprintf(u.first.what, sizeof u.first.what, "%s's %s (part %d)", call, arg, part);
    else
        snprintf(u.first.what, sizeof u.first.what, "%s's %s", call, arg);
}
