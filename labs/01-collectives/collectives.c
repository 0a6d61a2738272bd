/* collectives.c: Lab 1, your collectives, built from point-to-point messages.
 *
 * Read docs/labs/01-collectives.md first (sections 3 to 7 explain each function below),
 * then replace each lab_todo() call with your code. Grade your work with
 *     make grade LAB=01                    every test of this lab
 *     make grade LAB=01 TEST=all-gather    the tests whose name contains "all-gather"
 *     make grade LAB=01 NP=3               only 3 ranks
 * and when a test hangs, rerun it with PL_VERBOSE=1 to see every message (handout, section 9).
 *
 * What you may call: pl_comm_rank, pl_comm_size, pl_send, pl_recv, pl_sendrecv, pl_isend,
 * pl_irecv, pl_wait, pl_wait_all, pl_comm_buf_alloc, pl_comm_buf_free, and the helpers in
 * collectives.h (coll_chunk, coll_reduce, coll_copy). Library collectives (pl_all_reduce and
 * friends) are off limits: the grader sees them in the traffic ledger. */
#include "collectives.h"

#include "comm.h"

/* Ranks form a ring: rank r sends to (r + 1) % n and receives from (r - 1 + n) % n.
 * In C, (r - 1) % n is negative for r = 0: add n before taking the remainder.
 *
 * The plan, for n ranks (handout section 3):
 *   - cut buf into n chunks with coll_chunk(count, n, i, &offset): chunk i starts at
 *     buf + offset and is as long as the value returned;
 *   - do n - 1 steps; at step s send chunk (r - s - 1) mod n to the right neighbour and
 *     receive chunk (r - s - 2) mod n from the left one into a scratch buffer, then add the
 *     scratch into that chunk of buf with coll_reduce;
 *   - pl_sendrecv sends and receives at once, so no rank waits for a neighbour that is
 *     itself waiting (two blocking pl_send calls facing each other can deadlock);
 *   - scratch: pl_comm_buf_alloc(largest chunk length, "ring scratch"), freed at the end.
 * After the last step, chunk r of your buf holds the sum over all ranks. */
void ring_reduce_scatter(struct pl_comm *comm, float *buf, size_t count)
{
    lab_todo("ring_reduce_scatter", "3");
}

/* The same ring, without the addition (handout section 4): at step s send chunk
 * (r - s) mod n to the right and receive chunk (r - s - 1) mod n from the left straight into
 * its place in buf. Chunk r is yours on entry; after n - 1 steps you hold all of them. */
void ring_all_gather(struct pl_comm *comm, float *buf, size_t count)
{
    lab_todo("ring_all_gather", "4");
}

/* Two lines (handout section 5). Each rank then sends 2(n-1)/n of the buffer, which no
 * all-reduce can beat; the grader checks that figure in the traffic ledger. */
void ring_all_reduce(struct pl_comm *comm, float *buf, size_t count)
{
    lab_todo("ring_all_reduce", "5");
}

/* A chain starting at root (handout section 6): the rank at place p = (r - root) mod n in
 * the chain receives from the rank before it and forwards to the one after it. Cut buf into
 * segments (about 100 000 elements) and forward segment k while segment k+1 arrives:
 * pl_isend the segment, pl_recv the next, pl_wait the isend. Without segments the last rank
 * waits n - 1 whole-buffer transfers; with them, about one. */
void pipelined_broadcast(struct pl_comm *comm, float *buf, size_t count, int root)
{
    lab_todo("pipelined_broadcast", "6");
}

/* n - 1 steps of pairwise exchange (handout section 7): at step s (1 <= s < n) send block
 * (r + s) mod n of send to rank (r + s) mod n and receive from rank (r - s) mod n into
 * block (r - s) mod n of recv. Your own block r is a local copy (coll_copy). */
void pairwise_all_to_all(struct pl_comm *comm, const float *send, float *recv, size_t count)
{
    lab_todo("pairwise_all_to_all", "7");
}
