/* segfault.c: a broken Lab 1 solution for the grader's own tests. Its broadcast is a
 * recursive binary tree whose base case is wrong: a range of one rank recurses on itself
 * forever, the stack overflows and the rank dies with a segmentation fault. */
#include "collectives.h"

#include "comm.h"

/* Tags per collective, so a PL_VERBOSE=1 log tells the phases apart. */
enum { TAG_REDUCE_SCATTER = 1, TAG_ALL_GATHER = 2, TAG_BROADCAST = 3, TAG_ALL_TO_ALL = 4 };

static int mod(int a, int n)
{
    return ((a % n) + n) % n;
}

/* Step s of the reduce-scatter: send chunk r-s-1 (which holds s+1 contributions) to the
 * right, receive chunk r-s-2 from the left and add ours. After n-1 steps the chunk received
 * last is chunk r, complete. */
void ring_reduce_scatter(struct pl_comm *comm, float *buf, size_t count)
{
    int r = pl_comm_rank(comm), n = pl_comm_size(comm);
    if (n == 1) return;
    int right = mod(r + 1, n), left = mod(r - 1, n);
    size_t ignored;
    float *incoming = pl_comm_buf_alloc(coll_chunk(count, n, 0, &ignored), "ring scratch");
    for (int s = 0; s < n - 1; s++) {
        size_t send_off, recv_off;
        size_t send_len = coll_chunk(count, n, mod(r - s - 1, n), &send_off);
        size_t recv_len = coll_chunk(count, n, mod(r - s - 2, n), &recv_off);
        pl_sendrecv(comm, buf + send_off, send_len, right, incoming, recv_len, left,
                    TAG_REDUCE_SCATTER);
        coll_reduce(buf + recv_off, incoming, recv_len);
    }
    pl_comm_buf_free(incoming);
}

/* Step s of the all-gather: pass on the chunk that arrived last step (our own, r, at step
 * 0) and receive chunk r-s-1 straight into place. */
void ring_all_gather(struct pl_comm *comm, float *buf, size_t count)
{
    int r = pl_comm_rank(comm), n = pl_comm_size(comm);
    int right = mod(r + 1, n), left = mod(r - 1, n);
    for (int s = 0; s < n - 1; s++) {
        size_t send_off, recv_off;
        size_t send_len = coll_chunk(count, n, mod(r - s, n), &send_off);
        size_t recv_len = coll_chunk(count, n, mod(r - s - 1, n), &recv_off);
        pl_sendrecv(comm, buf + send_off, send_len, right, buf + recv_off, recv_len, left,
                    TAG_ALL_GATHER);
    }
}

/* Each rank sends 2(n-1)/n of the buffer, whatever n: the bandwidth-optimal volume. */
void ring_all_reduce(struct pl_comm *comm, float *buf, size_t count)
{
    ring_reduce_scatter(comm, buf, count);
    ring_all_gather(comm, buf, count);
}

/* A binary tree over the places [lo, hi) of the chain (root at place 0): the first place
 * sends to the middle one, then each half broadcasts on its own. */
static void tree(struct pl_comm *comm, float *buf, size_t count, int root, int lo, int hi)
{
    int r = pl_comm_rank(comm), n = pl_comm_size(comm), pos = mod(r - root, n);
    if (hi - lo == 0) return; /* the bug: a single place has nothing left to do */
    int mid = (lo + hi + 1) / 2;
    struct pl_handle *sending = NULL;
    if (mid < hi && pos == lo) sending = pl_isend(comm, buf, count, mod(mid + root, n),
                                             TAG_BROADCAST);
    if (mid < hi && pos == mid) pl_recv(comm, buf, count, mod(lo + root, n), TAG_BROADCAST);
    if (pos < mid) tree(comm, buf, count, root, lo, mid);
    else tree(comm, buf, count, root, mid, hi);
    pl_wait(sending);
}

void pipelined_broadcast(struct pl_comm *comm, float *buf, size_t count, int root)
{
    tree(comm, buf, count, root, 0, pl_comm_size(comm));
}

/* Step s: send the block for rank r+s while receiving the block from rank r-s. Every
 * rank talks to exactly one peer in each direction per step, so no link is oversubscribed. */
void pairwise_all_to_all(struct pl_comm *comm, const float *send, float *recv, size_t count)
{
    int r = pl_comm_rank(comm), n = pl_comm_size(comm);
    coll_copy(recv + (size_t)r * count, send + (size_t)r * count, count);
    for (int s = 1; s < n; s++) {
        int dest = mod(r + s, n), src = mod(r - s, n);
        pl_sendrecv(comm, send + (size_t)dest * count, count, dest, recv + (size_t)src * count,
                    count, src, TAG_ALL_TO_ALL);
    }
}
