/* wrap_ctx.h: the one pointer a lab's link-time wrappers (its lab.mk's -Wl,--wrap) can reach.
 * A wrapper has the library call's arguments and nothing of the lab's, so a lab whose state
 * lives on the heap (harness.h) hands the part its wrappers record into here, and takes it
 * back before freeing it; its folder then holds no mutable state of its own (Labs 2 and 3). */
#ifndef GR_WRAP_CTX_H
#define GR_WRAP_CTX_H

/* Sets what gr_wrap_ctx returns (NULL: nothing; wrappers then only pass through). */
void gr_wrap_ctx_set(void *ctx);
/* The pointer last set, or NULL. */
void *gr_wrap_ctx(void);

#endif
