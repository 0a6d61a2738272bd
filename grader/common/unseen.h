/* unseen.h: where a buffer handed to one of the kit's calls lies, for the memory tests that
 * judge the total the student's code holds. An array on the stack (a local or variable-length
 * array) or in static storage never passes through the memory ledger, so code could keep a
 * whole unit, an optimizer state or a whole sequence there and still hold "nothing". A lab
 * wraps the kit's calls that take the student's buffers (its lab.mk's --wrap) and, from each
 * wrapper, places every buffer; the first one found outside the heap is kept for its memory
 * verdict (Lab 3: the pass and AdamW; Lab 5: the SP block's core). */
#ifndef GR_UNSEEN_H
#define GR_UNSEEN_H

enum { GR_UNSEEN_STACK = 1, GR_UNSEEN_STATIC = 2 };

struct gr_unseen {
    int where;          /* 0: none seen; GR_UNSEEN_STACK or GR_UNSEEN_STATIC */
    char what[96];      /* "zero_backward_part's gradient buffer (part 4)" */
    char category[16];  /* the ledger category it belongs in ("PL_MEM_GRADS"), or "" */
};

/* Starts watching this rank's calls and forgets what was seen; stack_too 0 judges static
 * storage only (a buffer on the stack cannot outlive the call that holds it). */
void gr_unseen_begin(int stack_too);
/* Stops watching and returns the first buffer seen outside the ledger's memory. */
struct gr_unseen gr_unseen_end(void);
/* "on the stack (a local or variable-length array)" or "in static storage (...)". */
const char *gr_unseen_where(int where);
/* Notes buf when it lies on the caller's stack or in static storage: argument arg of call
 * (part >= -1 names the pass's part, otherwise none), which belongs in category (may be
 * ""). Called by a wrapper, straight from the wrapped call. */
void gr_unseen_place(const void *buf, const char *call, const char *arg, int part,
                     const char *category);

#endif
