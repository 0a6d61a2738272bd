/* collectives.c: Lab 1 reference solution. Ring reduce-scatter and all-gather, all-reduce as
 * their composition, a pipelined chain broadcast and a pairwise all-to-all, built on lib's
 * point-to-point calls only. Follows docs/labs/01-collectives.md step by step. */
#include "collectives.h"

#include "comm.h"

/* Tags per collective, so a PL_VERBOSE=1 log tells the phases apart. */
enum { TAG_REDUCE_SCATTER = 1, TAG_ALL_GATHER = 2, TAG_BROADCAST = 3, TAG_ALL_TO_ALL = 4 };

/* A broadcast segment: big enough to amortize a message's latency, small enough that the
 * chain's last rank starts receiving long before the root has sent everything. */
#define BCAST_SEGMENT 131072

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

/* A chain root -> root+1 -> ... -> root-1, cut into segments: while a rank forwards
 * segment k (isend), it already receives segment k+1, so every link is busy at once. */
void pipelined_broadcast(struct pl_comm *comm, float *buf, size_t count, int root)
{
    int r = pl_comm_rank(comm), n = pl_comm_size(comm);
    int pos = mod(r - root, n); /* place in the chain, root at 0 */
    int prev = mod(r - 1, n), next = mod(r + 1, n);
    struct pl_handle *forwarding = NULL;
    for (size_t off = 0; off < count; off += BCAST_SEGMENT) {
        size_t len = count - off < BCAST_SEGMENT ? count - off : BCAST_SEGMENT;
        if (pos > 0) pl_recv(comm, buf + off, len, prev, TAG_BROADCAST);
        pl_wait(forwarding);
        forwarding = NULL;
        if (pos < n - 1) forwarding = pl_isend(comm, buf + off, len, next, TAG_BROADCAST);
    }
    pl_wait(forwarding);
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

/* ---- the second part: the all-reduce for small messages (section 11), and the two-level
 * all-reduce for a cluster of nodes (section 12) ---- */

enum { TAG_DOUBLING = 5, TAG_NODE = 6, TAG_ACROSS = 7 };

static int pow2_floor(int n)
{
    int p = 1;
    while (2 * p <= n) p *= 2;
    return p;
}

/* p = the largest power of two <= n exchange whole buffers with the partner at distance
 * 1, 2, 4, ... (their index xor d), summing: log2 p steps. The n - p ranks beyond first
 * fold in: of the first 2(n-p) ranks each even one hands its buffer to the odd one after
 * it, which stands for both, and hands the result back at the end. */
void recursive_doubling_all_reduce(struct pl_comm *comm, float *buf, size_t count)
{
    int r = pl_comm_rank(comm), n = pl_comm_size(comm);
    if (n == 1) return;
    int p = pow2_floor(n), extra = n - p;
    int folded = r < 2 * extra, core = folded ? (r % 2 ? r / 2 : -1) : r - extra;
    float *incoming = pl_comm_buf_alloc(count, "doubling scratch");
    if (folded && core < 0) {
        pl_send(comm, buf, count, r + 1, TAG_DOUBLING);
    } else if (folded) {
        pl_recv(comm, incoming, count, r - 1, TAG_DOUBLING);
        coll_reduce(buf, incoming, count);
    }
    for (int d = 1; core >= 0 && d < p; d *= 2) {
        int pc = core ^ d, peer = pc < extra ? 2 * pc + 1 : pc + extra;
        pl_sendrecv(comm, buf, count, peer, incoming, count, peer, TAG_DOUBLING);
        coll_reduce(buf, incoming, count);
    }
    if (folded && core >= 0) pl_send(comm, buf, count, r - 1, TAG_DOUBLING);
    else if (folded) pl_recv(comm, buf, count, r + 1, TAG_DOUBLING);
    pl_comm_buf_free(incoming);
}

/* ---- section 12: the two-level all-reduce ---- */

/* The rings of the two-level all-reduce run on a list of comm ranks: the members of one
 * node, or the ranks with the same place on every node. me is this rank's index in it. */
struct ring {
    const int *member;
    int m, me;
};

static void ring_rs_on(struct pl_comm *comm, const struct ring *g, float *buf, size_t count,
                       int tag)
{
    int i = g->me, m = g->m, right = g->member[mod(i + 1, m)], left = g->member[mod(i - 1, m)];
    size_t ignored;
    float *incoming = pl_comm_buf_alloc(coll_chunk(count, m, 0, &ignored), "level scratch");
    for (int s = 0; s < m - 1; s++) {
        size_t so, ro;
        size_t sl = coll_chunk(count, m, mod(i - s - 1, m), &so);
        size_t rl = coll_chunk(count, m, mod(i - s - 2, m), &ro);
        pl_sendrecv(comm, buf + so, sl, right, incoming, rl, left, tag);
        coll_reduce(buf + ro, incoming, rl);
    }
    pl_comm_buf_free(incoming);
}

static void ring_ag_on(struct pl_comm *comm, const struct ring *g, float *buf, size_t count,
                       int tag)
{
    int i = g->me, m = g->m, right = g->member[mod(i + 1, m)], left = g->member[mod(i - 1, m)];
    for (int s = 0; s < m - 1; s++) {
        size_t so, ro;
        size_t sl = coll_chunk(count, m, mod(i - s, m), &so);
        size_t rl = coll_chunk(count, m, mod(i - s - 1, m), &ro);
        pl_sendrecv(comm, buf + so, sl, right, buf + ro, rl, left, tag);
    }
}

/* Inside the node a ring reduce-scatter leaves local rank l with the node's sum of chunk
 * l; across the nodes the ranks with the same l all-reduce that chunk by a ring (only
 * chunk l crosses the network, 2(N-1)/N of it); inside the node a ring all-gather puts the
 * chunks together again. */
void hierarchical_all_reduce(struct pl_comm *comm, float *buf, size_t count)
{
    int r = pl_comm_rank(comm), n = pl_comm_size(comm);
    int local[PL_TOPO_MAX_RANKS] = {0}, across[PL_TOPO_MAX_RANKS] = {0};
    int L = 0, l = 0, N = 0, me = coll_node_of(comm, r);
    for (int m = 0; m < n; m++)
        if (coll_node_of(comm, m) == me) {
            if (m == r) l = L;
            local[L++] = m;
        }
    /* the member with place l on each node, nodes in the order they first appear */
    for (int m = 0; m < n; m++) {
        int node = coll_node_of(comm, m), place = 0;
        for (int k = 0; k < m; k++) place += coll_node_of(comm, k) == node;
        if (place == l) across[N++] = m;
    }
    int at = 0;
    for (int k = 0; k < N; k++)
        if (across[k] == r) at = k;
    struct ring node = {local, L, l}, nodes = {across, N, at};
    size_t off, len = coll_chunk(count, L, l, &off);
    ring_rs_on(comm, &node, buf, count, TAG_NODE);
    ring_rs_on(comm, &nodes, buf + off, len, TAG_ACROSS);
    ring_ag_on(comm, &nodes, buf + off, len, TAG_ACROSS);
    ring_ag_on(comm, &node, buf, count, TAG_NODE);
}
