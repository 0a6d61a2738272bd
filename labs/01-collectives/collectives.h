/* collectives.h: Lab 1, collectives from point-to-point. The fixed surface between your
 * collectives.c and the grader: do not change this file. Gradescope takes only your .c file
 * and compiles it against the original; `make grade` here uses this copy as it is, so an
 * edit could pass here and fail there. The handout is docs/labs/01-collectives.md.
 *
 * Every function is called by all members of comm at once, with the same count (and root),
 * on buffers that live where the backend wants them (pl_comm_buf_alloc). Counts are in
 * elements (fp32). Any member count from 1 up and any count, including 0 and counts that
 * the number of ranks does not divide, must work. You may use only the point-to-point calls
 * of comm.h (pl_send, pl_recv, pl_sendrecv, pl_isend, pl_irecv, pl_wait, pl_wait_all),
 * pl_comm_rank / pl_comm_size, pl_comm_buf_alloc / pl_comm_buf_free, and the helpers below;
 * the grader checks in the traffic ledger that no library collective was called. */
#ifndef LAB_COLLECTIVES_H
#define LAB_COLLECTIVES_H

#include <stddef.h>
#include "comm.h"
#include "hd.h"
#include "ops.h"
#include "proc.h"
#include "todo.h"
#include "topo.h"

/* ---- what you implement (collectives.c) ---- */

/* buf holds count elements on every rank. Afterwards chunk r of rank r's buf (see
 * coll_chunk) holds the sum over all ranks of their chunk r. The other chunks of buf are
 * scratch: any value may be left there. Handout section 3. */
void ring_reduce_scatter(struct pl_comm *comm, float *buf, size_t count);

/* On entry only chunk r of rank r's buf is meaningful. Afterwards every rank's buf holds
 * every chunk: chunk i as rank i had it. Handout section 4. */
void ring_all_gather(struct pl_comm *comm, float *buf, size_t count);

/* buf[i] becomes the sum over ranks of buf[i], in place: a reduce-scatter followed by an
 * all-gather. Handout section 5. */
void ring_all_reduce(struct pl_comm *comm, float *buf, size_t count);

/* root's buf is copied into every rank's buf, by a pipelined chain (or a binary tree), so
 * that no rank sends more than two copies of the buffer. Handout section 6. */
void pipelined_broadcast(struct pl_comm *comm, float *buf, size_t count, int root);

/* send and recv hold size * count elements. Block j (count elements) of rank r's send
 * arrives as block r of rank j's recv; block r of send goes to block r of recv on the same
 * rank. By pairwise exchange. Handout section 7. */
void pairwise_all_to_all(struct pl_comm *comm, const float *send, float *recv, size_t count);

/* ---- latency and topology: the second part (handout sections 11 and 12) ---- */

/* buf[i] becomes the sum over ranks of buf[i], in place, in about log2(n) steps that each
 * move the whole buffer, where the ring takes 2(n-1) steps of one chunk: the all-reduce
 * for small messages, whose time is the steps' latency rather than their bytes. Any n,
 * also one that is not a power of two: no rank sends more than floor(log2 n) + 1
 * messages. Handout section 11. */
void recursive_doubling_all_reduce(struct pl_comm *comm, float *buf, size_t count);

/* buf[i] becomes the sum over ranks of buf[i], in place, on ranks spread over N nodes of
 * the same size (coll_node_of, coll_node_size) with consecutive comm ranks on a node: the
 * network is slow, so no rank sends more across nodes than 2(N-1)/N of its 1/(ranks per
 * node) share of the buffer, where a flat ring sends 2(n-1)/n of the whole buffer across
 * on each link between two nodes. Handout section 12. */
void hierarchical_all_reduce(struct pl_comm *comm, float *buf, size_t count);

/* ---- what the kit gives you ---- */

/* The node that member r of comm runs on (0 .. nodes-1), from the job's topology (a
 * virtual cluster when the grader asks for one). */
static inline int coll_node_of(struct pl_comm *comm, int r)
{
    return pl_topo_node(pl_topo(), pl_comm_world_rank(comm, r));
}

/* How many members of comm run on member r's node. */
static inline int coll_node_size(struct pl_comm *comm, int r)
{
    int node = coll_node_of(comm, r), k = 0;
    for (int m = 0; m < pl_comm_size(comm); m++) k += coll_node_of(comm, m) == node;
    return k;
}

/* Chunk i (0 <= i < n) of a buffer of count elements cut into n nearly equal chunks: the
 * first count % n chunks get one element more. Returns the chunk's length and stores its
 * first element's index in *offset. Use it everywhere, so that your chunks are the
 * grader's chunks. */
static inline size_t coll_chunk(size_t count, int n, int i, size_t *offset)
{
    size_t q = count / (size_t)n, rem = count % (size_t)n, ui = (size_t)i;
    *offset = ui * q + (ui < rem ? ui : rem);
    return q + (ui < rem ? 1 : 0);
}

/* The reduction of one element, written once for both builds: the CPU build calls it in
 * a host loop, the GPU build in a CUDA kernel. */
PL_HD float coll_reduce_elem(float acc, float in)
{
    return acc + in;
}

/* dst[i] = coll_reduce_elem(dst[i], src[i]) for i < n, on comm buffers (host memory on the
 * CPU build, device memory on the GPU build): lib's pl_accumulate, a host loop or a kernel
 * on the compute stream. */
static inline void coll_reduce(float *dst, const float *src, size_t n)
{
    if (n) pl_accumulate(dst, src, n);
}

/* Copies n elements between comm buffers that do not overlap (memcpy on the CPU build, a
 * device copy on the GPU build): lib's pl_copy. */
static inline void coll_copy(float *dst, const float *src, size_t n)
{
    if (n && dst != src) pl_copy(dst, src, n);
}

/* The stubs call lab_todo(what, section) (lib/todo.h): it tells the grader (and you) that
 * `what` is not written yet and where the handout explains it, then returns so the grader
 * can go on. */

#endif
