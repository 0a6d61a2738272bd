/* collectives.c: Lab 1, your collectives, built from point-to-point messages.
 *
 * Read docs/labs/01-collectives.md first (sections 3 to 7, 11 and 12 derive what each
 * function below must achieve and what it may cost), then replace each lab_todo() call with
 * your code. Each comment below states the function's contract; which chunk or block moves
 * at which step, between which ranks, is yours to derive (docs/labs/01-collectives-hints.md
 * has a step-by-step plan for when you are stuck). Grade your work with
 *     make grade LAB=01                    every test of this lab
 *     make grade LAB=01 TEST=all-gather    the tests whose name contains "all-gather"
 *     make grade LAB=01 NP=3               only 3 ranks
 * and when a test hangs, rerun it with PL_VERBOSE=1 to see every message (handout, section 9).
 *
 * What you may call: pl_comm_rank, pl_comm_size, pl_send, pl_recv, pl_sendrecv, pl_isend,
 * pl_irecv, pl_wait, pl_wait_all, pl_comm_buf_alloc, pl_comm_buf_free, and the helpers in
 * collectives.h (coll_chunk, coll_reduce, coll_copy, coll_node_of, coll_node_size). Library
 * collectives (pl_all_reduce and friends) are off limits: the grader sees them in the
 * traffic ledger. Every rule the grader enforces is in collectives.h: results, groups,
 * traffic, memory (scratch only from pl_comm_buf_alloc: a call to malloc or its family
 * fails every test before anything runs), speed and calls. */
#include "collectives.h"

#include "comm.h"

/* Contract (collectives.h): afterwards chunk r of rank r's buf, as coll_chunk cuts it, is
 * the sum over ranks of their chunk r; the other chunks are scratch. Each rank sends
 * (n-1)/n of the buffer, no more: the grader reads that in the traffic ledger. Scratch comes
 * from pl_comm_buf_alloc, at most the buffer's size at once, all of it freed before the
 * function returns. Handout section 3 derives the floor and why two blocking sends facing
 * each other deadlock; which chunk moves at which step is yours to work out. */
void ring_reduce_scatter(struct pl_comm *comm, float *buf, size_t count)
{
    lab_todo("ring_reduce_scatter", "3");
}

/* Contract: chunk r of rank r's buf is valid on entry; afterwards every chunk is, as its
 * owner had it. (n-1)/n of the buffer sent per rank. Handout section 4. */
void ring_all_gather(struct pl_comm *comm, float *buf, size_t count)
{
    lab_todo("ring_all_gather", "4");
}

/* Contract: buf[i] becomes the sum over ranks, in place, with 2(n-1)/n of the buffer sent
 * per rank, which no all-reduce can beat. Handout section 5. */
void ring_all_reduce(struct pl_comm *comm, float *buf, size_t count)
{
    lab_todo("ring_all_reduce", "5");
}

/* Contract: root's buf ends up on every rank, and no rank sends more than two copies of
 * it. The time the last rank waits is what section 6 of the handout is about: a chain that
 * forwards whole buffers makes it wait n - 1 transfers; find how to make it about one. */
void pipelined_broadcast(struct pl_comm *comm, float *buf, size_t count, int root)
{
    lab_todo("pipelined_broadcast", "6");
}

/* Contract (collectives.h): block j of rank r's send becomes block r of rank j's recv,
 * with every rank sending only its own n - 1 blocks, straight to their owners.
 * Handout section 7. */
void pairwise_all_to_all(struct pl_comm *comm, const float *send, float *recv, size_t count)
{
    lab_todo("pairwise_all_to_all", "7");
}

/* Contract (collectives.h): the sum over ranks in place, in about log2(n) exchanges of the
 * whole buffer, with no rank sending more than floor(log2 n) + 1 messages, for any n. What
 * to do with the ranks beyond the largest power of two is the part to think about.
 * Handout section 11. */
void recursive_doubling_all_reduce(struct pl_comm *comm, float *buf, size_t count)
{
    lab_todo("recursive_doubling_all_reduce", "11");
}

/* Contract (collectives.h): the sum over ranks in place, with no rank sending more across
 * nodes than 2(N-1)/N of its 1/(ranks per node) share of the buffer. coll_node_of and
 * coll_node_size tell you where members run. Handout section 12. */
void hierarchical_all_reduce(struct pl_comm *comm, float *buf, size_t count)
{
    lab_todo("hierarchical_all_reduce", "12");
}
