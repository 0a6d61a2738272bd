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
 * the grader checks in the traffic ledger that no library collective was called.
 *
 * The rules the grader enforces, every one of them (n: the ranks of comm; S: the bytes of
 * the buffer, for the all-to-all the whole send buffer, n x count floats):
 *   results   on integer-valued floats drawn from a seed (|x| <= 64), so that sums are
 *             exact: every element a function must write is compared bit for bit with a
 *             serial computation, on every rank. The elements that hold no input before the
 *             call (the all-gather's other chunks, the broadcast's buffer off the root, the
 *             all-to-all's recv) hold a value no result can take, so an element never
 *             written is told apart. What must be where afterwards is stated above each
 *             function below. Rank counts 1, 2, 3, 5 and 8 (the hidden suite: 4, 6 and 7;
 *             1 rank is a sanity test worth no points). Counts: a multiple of n, n + 1, 1009
 *             (a prime), 1, n - 1 (fewer elements than ranks), 0, an odd count drawn from
 *             the seed, 262144 (1 MiB), and 262147 (300007 for the broadcast); several
 *             roots. The all-to-all's blocks: 64, 1, 0, 257, one drawn from the seed, 32768
 *             (128 KiB). Recursive doubling: up to 65537 (256 KiB and one element). Two
 *             levels: on 2 virtual nodes of 2, 3 and 4 ranks (hidden: of 4 again, with the
 *             secret seed) and on 3 nodes of 2, up to 262147.
 *   groups    comm is not always the world: from 3 ranks some cases run on two groups of
 *             every other rank at once, numbered in reverse world order. Rank and size
 *             are comm's (pl_comm_rank, pl_comm_size), never the world's. Every call gets a
 *             communicator of its own, freed after it returns: every pl_isend and pl_irecv
 *             handle must be waited for (pl_wait, pl_wait_all) before the function returns.
 *   traffic   from the traffic ledger, on 2 ranks and more, per rank: the reduce-scatter
 *             and the all-gather send (n-1)/n x S, exactly when n divides count and
 *             otherwise between 4(n-1) floor(count/n) and 4(n-1) ceil(count/n) bytes,
 *             receiving no more than the upper bound; the all-reduce twice those bounds;
 *             the all-to-all exactly (n-1)/n x S, receiving no more. The broadcast: all
 *             ranks together exactly (n-1) x S, no rank more than 2 S, and from 3 ranks, on
 *             a buffer of 1 MiB or more, a rank that sends does so in messages of at most
 *             S/2 on average (a segmented pipeline, not the whole buffer in one message).
 *             Recursive doubling: at most m sends per rank, m = floor(log2 n) and one more
 *             when n is not a power of two, and at most m x S bytes (a pl_sendrecv counts as
 *             one send); from 3 ranks, one call of it and one of ring_all_reduce are traced and
 *             replayed on dgx-h100 (lib/replay.h) with the messages scaled: doubling must be
 *             faster at an eighth of S*, slower at 8 times S*, and the two must cross within
 *             a factor of 2 of S* = alpha B (2(n-1) - k) / (k - 2(n-1)/n), alpha and B of
 *             dgx-h100's NVLink, k the rounds one after another (floor(log2 n), two more
 *             when n is not a power of two). Two levels, on N nodes of L ranks: no rank
 *             sends more across nodes than 2(N-1) ceil(ceil(count/L)/N) floats, nor receives
 *             in all more than that plus 2(L-1) ceil(count/L) floats; on the 1 MiB case the
 *             slowest rank's time, modelled on dgx-h100 from its own ledger, is below a flat
 *             ring all-reduce's on the network links.
 *   memory    on the largest rank count graded (8): no pl_comm_buf_alloc memory left when
 *             the function returns, and at most S bytes of it held at once beside the
 *             caller's buffers. Every buffer handed to pl_send, pl_isend, pl_recv,
 *             pl_sendrecv, pl_irecv, coll_reduce or coll_copy is the caller's or from
 *             pl_comm_buf_alloc: one on the stack or in static storage fails. A short list
 *             of ranks may live on the stack. The code may not call malloc, calloc, realloc
 *             or the rest of the C allocator family, mmap, sbrk or brk.
 *   speed     the five ring functions' bus bandwidth (busbw: handout section 8) against
 *             the library's collective in the same run, on 16 MiB, 4 ranks on a machine
 *             with 4 cores or more, else 2: full marks from 0.7x of the library's (0.5x on
 *             the NCCL backend), proportionally less below; a ratio within the noise of
 *             that bar counts as reached. Only once the collective's correctness and memory
 *             tests that ran have passed and its result on that buffer is right, and only
 *             when the timed calls, all ranks together, sent what as many calls must send.
 *             The broadcast on 2 ranks is compared with the library's broadcast called once
 *             per segment of yours, never on segments under 256 KiB. The second part has no
 *             speed test: its replay and model above stand for one.
 *   calls     communication only through the calls above, by their own names: no library
 *             collective (pl_all_reduce*, pl_reduce_scatter*, pl_all_gather*, pl_broadcast*,
 *             pl_all_to_all*), no pl_barrier or pl_comm_split, no MPI_* (MPI_Abort aside),
 *             PMPI_*, nccl*, dlopen, dlsym or syscall, and none of the calls that reach into
 *             the process or the kit's measurements (threads, signals, timers, atexit, the
 *             ledger's and trace's own functions). The build lists the symbols the code
 *             calls, and a forbidden one fails every test before anything runs. A receive
 *             gets exactly the count it posted.
 *   time      a case whose every rank has been inside a communication call for 4 s with
 *             none returning is stopped as a deadlock; any test is stopped after 60 s (the
 *             speed tests after 180 s).
 * Traffic, memory and the crossover count only once the function's results are right. */
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

/* buf[i] becomes the sum over ranks of buf[i], in place, with no rank sending more than
 * 2(n-1)/n of the buffer (the floor section 5 derives; graded from the traffic ledger).
 * Handout section 5. */
void ring_all_reduce(struct pl_comm *comm, float *buf, size_t count);

/* root's buf is copied into every rank's buf (root's own left as it was), by a pipelined
 * chain (or a binary tree), so that no rank sends more than two copies of the buffer and a
 * rank that forwards a large buffer does so in segments. Handout section 6. */
void pipelined_broadcast(struct pl_comm *comm, float *buf, size_t count, int root);

/* send and recv hold size * count elements. Block j (count elements) of rank r's send
 * arrives as block r of rank j's recv; block r of send goes to block r of recv on the same
 * rank; send is left as it was. By pairwise exchange, whose schedule is handout section 7's
 * design (the grader checks the bytes, not their order). */
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
