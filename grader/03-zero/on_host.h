/* on_host.h: which buffers a ZeRO step computes on were allocated with PL_HOST. zero.h asks
 * for PL_DEVICE for every buffer a stage keeps; the CPU build cannot tell the two apart, a
 * GPU can (the kit's kernels read device memory). The wrappers of the pass (unseen.c) and
 * of AdamW (gradients.c) place every buffer they are given against the memory ledger's live
 * blocks (pl_mem_block_of). */
#ifndef GR03_ON_HOST_H
#define GR03_ON_HOST_H

struct gr03_on_host {
    int seen;         /* 0: every buffer placed was device memory */
    char what[96];    /* "zero_backward_part's gradient buffer (part 4)" */
    char label[48];   /* the label it was allocated under */
};

/* Starts watching this rank's calls and forgets what was seen. */
void gr03_host_begin(void);
/* Stops watching and returns the first buffer seen in a PL_HOST block. */
struct gr03_on_host gr03_host_end(void);
/* Notes buf when it lies in a live PL_HOST block: argument arg of call (part >= -1 names the
 * pass's part, otherwise none). */
void gr03_host_place(const void *buf, const char *call, const char *arg, int part);

#endif
