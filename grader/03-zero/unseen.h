/* unseen.h: where the buffers a ZeRO step computes on live. Every call of pl_pass_forward and
 * pl_pass_backward (zero_forward_part, zero_backward_part) and of pl_model_adamw_flat the code
 * under test makes is wrapped (grader/03-zero/lab.mk): a parameter, gradient or optimizer
 * buffer on the stack (a local or variable-length array) or in static storage is memory the
 * ledger never sees, so a stage could hold a whole unit, its optimizer state or the whole
 * model and still pass the memory test. The first such buffer of a run is kept for the memory
 * verdict. */
#ifndef GR03_UNSEEN_H
#define GR03_UNSEEN_H

struct gr03_unseen {
    int where;     /* 0: none seen; 1: on the stack; 2: in static storage */
    char what[96]; /* "zero_backward_part's gradient buffer (part 4)" */
    char category[16]; /* the ledger category it belongs in: "PL_MEM_GRADS" */
};

/* Starts watching the calls of this rank (before zero_new); forgets what was seen. */
void gr03_unseen_begin(void);
/* Stops watching and returns the first buffer seen outside the ledger's memory. */
struct gr03_unseen gr03_unseen_end(void);
/* "on the stack (a local or variable-length array)" or "in static storage (...)". */
const char *gr03_unseen_where(int where);
/* Notes buf when it lies on the caller's stack or in static storage: argument arg of call
 * (part >= -1 names the pass's part, otherwise none), which belongs in category. Called
 * by the wrappers, straight from the wrapped call. */
void gr03_unseen_place(const void *buf, const char *call, const char *arg, int part,
                       const char *category);

#endif
