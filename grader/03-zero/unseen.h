/* unseen.h: where the buffers a ZeRO step computes on live. Every call of pl_pass_forward and
 * pl_pass_backward the code under test makes (zero_forward_part, zero_backward_part) is
 * wrapped (grader/03-zero/lab.mk): a parameter or gradient buffer on the stack (a local or
 * variable-length array) or in static storage is memory the ledger never sees, so a stage
 * could hold a whole unit, or the whole model, and still pass the memory test. The first such
 * buffer of a run is kept for the memory verdict. */
#ifndef GR03_UNSEEN_H
#define GR03_UNSEEN_H

struct gr03_unseen {
    int where; /* 0: none seen; 1: on the stack; 2: in static storage */
    int part;  /* the part whose pass was given it */
    int grad;  /* 1: the gradient buffer of a backward; 0: the parameters */
};

/* Starts watching the pass calls of this rank (before zero_new); forgets what was seen. */
void gr03_unseen_begin(void);
/* Stops watching and returns the first buffer seen outside the ledger's memory. */
struct gr03_unseen gr03_unseen_end(void);
/* "a variable-length array on the stack" etc., for a message. */
const char *gr03_unseen_where(int where);

#endif
