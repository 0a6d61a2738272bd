/* unseen.h: whether the block kept a buffer of the TP region in static storage. Every call of
 * the kit's core (pl_sp_attn_core_* and pl_sp_mlp_core_*) is wrapped
 * (grader/05-sequence-parallel/lab.mk): a static array outlives the forward and the memory
 * ledger never sees it, so a block could keep the whole sequence's layernorm output from
 * its forward to its backward, skip the re-gathers, and still hold "nothing" of the full
 * sequence. A buffer on the stack cannot outlive the forward, so only static storage is
 * judged here. */
#ifndef GR05_UNSEEN_H
#define GR05_UNSEEN_H

/* Starts watching the core's buffers (before the student's forward); forgets what was seen. */
void gr05_unseen_begin(void);
/* Stops watching; NULL when no buffer lay in static storage, otherwise which call and
 * argument first did ("pl_sp_attn_core_backward's ln"). */
const char *gr05_unseen_end(void);

#endif
