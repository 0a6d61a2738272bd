/* outside.h: the point-to-point buffers of the code under test that lie outside the memory
 * ledger (outside.c). */
#ifndef LAB06_OUTSIDE_H
#define LAB06_OUTSIDE_H

/* Where a buffer was: 0 none, GR_UNSEEN_STACK or GR_UNSEEN_STATIC (unseen.h), or the heap
 * outside the ledger. */
enum { L6_OUTSIDE_HEAP = 3 };

struct l6_outside {
    int where;
    char call[24]; /* the first call given such a buffer: "pl_irecv" */
};

/* What the wrappers record: the state's, handed to them through gr_wrap_ctx (wrap_ctx.h);
 * with none set, they only pass the calls through. */
struct l6_outside_watch {
    struct l6_outside seen;
    int watching;
};

/* Forgets what was seen and stops watching. */
void l6_outside_reset(void);
/* Watches this rank's sends and receives (on 1) or stops (0): on only while the code under
 * test runs, so the grader's own messages are not placed. */
void l6_outside_watch(int on);
/* The first buffer seen outside the ledger since the reset (where 0: none). */
struct l6_outside l6_outside_seen(void);

#endif
