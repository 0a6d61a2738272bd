/* wrapped.h: the one pointer a lab's link-time wrappers (its lab.mk's -Wl,--wrap) reach. A
 * wrapper of a library call has no argument of the grader's own, so what it records into is
 * the caller's struct, made on the heap for the case and named here while the case runs:
 * a lab's folder then holds no mutable state of its own (Lab 2's calls.c). */
#ifndef GR_WRAPPED_H
#define GR_WRAPPED_H

/* Names what the wrappers record into from now on (NULL: nothing). */
void gr_wrapped_set(void *ctx);
/* What gr_wrapped_set named last, or NULL. */
void *gr_wrapped_get(void);

#endif
