/* outside.h: the point-to-point buffers of the code under test that lie outside the memory
 * ledger (outside.c). */
#ifndef LAB06_OUTSIDE_H
#define LAB06_OUTSIDE_H

/* Where a buffer was: 0 none, GR_UNSEEN_STACK or GR_UNSEEN_STATIC (unseen.h), or the heap
 * outside the ledger. */
enum { OUTSIDE_HEAP = 3 };

struct outside {
    int where;
    char call[24]; /* the first call given such a buffer: "pl_irecv" */
};

/* Forgets what was seen and stops watching. */
void outside_reset(void);
/* Watches this rank's sends and receives (on 1) or stops (0): on only while the code under
 * test runs, so the grader's own messages are not placed. */
void outside_watch(int on);
/* The first buffer seen outside the ledger since the reset (where 0: none). */
struct outside outside_seen(void);
/* "in static storage (...)", "on the stack (...)" or "in memory the ledger never saw". */
const char *outside_where(int where);

#endif
