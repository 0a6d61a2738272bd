/* ring_attn.h: the trusted pieces of context parallelism (ring attention, Liu et al. 2023,
 * as Llama 3's and Megatron-LM's context parallelism use it), which the
 * sequence-parallel lab's second part and its grader share: which sequence lengths cp ranks
 * can cut into 2cp chunks, causal attention of one block of queries against one block of
 * keys at their GLOBAL positions (a partial output and its log-sum-exp), the backward of one
 * block given the merged statistics, and a nonblocking shift of a buffer around a ring.
 *
 * How these compose (the merge of partial outputs, which blocks to compute, the ring's
 * order, where K, V and their gradients travel) is the lab's, not the kit's.
 *
 * Arrays are one sequence's rows, row-major, op memory: q, out [Tq, C], k, v [Tk, C];
 * head h uses channels [h HS, (h+1) HS), HS = C/NH, scale 1/sqrt(HS). Query i sits at
 * global position q0 + i, key j at k0 + j; query i sees key j when k0 + j <= q0 + i. */
#ifndef PL_RING_ATTN_H
#define PL_RING_ATTN_H

#include <math.h> /* INFINITY: a query that sees no key of a block has lse -INFINITY */
#include <stddef.h>

#include "comm.h"

/* 0 when cp ranks can cut sequences of T tokens into 2cp equal chunks (2cp divides T);
 * otherwise -1 and a message naming the valid values. */
int pl_cp_seq_error(int cp, int T, char *err, size_t len);

/* out = softmax(q k^T scale, causal by global position) v over THESE keys only, and
 * lse [NH, Tq] = log sum_j exp(scale q_i.k_j) over the keys query i sees here. A query that
 * sees none of them gets lse = -INFINITY and a zero output row (a block wholly in its
 * future). The FLOPs of the whole block, masked entries included (a fused kernel computes
 * a tile whole): pl_attn_block_flops(Tq, Tk, C, NH, 0). */
void pl_attn_block_forward(float *out, float *lse, const float *q, const float *k,
                           const float *v, int Tq, int Tk, int C, int NH, int q0, int k0);

/* delta [NH, Tq] = sum over head h's channels of dout * out: the softmax backward's row
 * term, from the MERGED output (the whole row's, not one block's). */
void pl_attn_block_delta(float *delta, const float *dout, const float *out, int Tq, int C,
                         int NH);

/* The gradient of one block: with P = exp(scale q k^T - lse) (lse the MERGED log-sum-exp
 * of each query over every key of its row), dv += P^T dout, dk += scale dS^T q,
 * dq += scale dS k, dS = P (dout v^T - delta). Accumulates (+=), as lib's backwards do; a
 * NULL gradient is not computed. FLOPs: pl_attn_block_flops(Tq, Tk, C, NH, 1). */
void pl_attn_block_backward(float *dq, float *dk, float *dv, const float *dout,
                            const float *q, const float *k, const float *v, const float *lse,
                            const float *delta, int Tq, int Tk, int C, int NH, int q0, int k0);

/* What one block call adds to the ledger: as pl_attention_forward and _backward count a
 * T x T block, here Tq x Tk (backward nonzero: the backward's count). */
double pl_attn_block_flops(int Tq, int Tk, int C, int NH, int backward);

/* The scratch one block call holds while it runs (the memory ledger's work category): a row
 * of scores; on the GPU build also the host copies of its arrays. backward: 0 forward, 1
 * backward, 2 pl_attn_block_delta (Tk unused). */
double pl_attn_block_work_bytes(int Tq, int Tk, int C, int NH, int backward);

/* ---- the ring ----
 * One step of a ring: this rank's send (count floats) goes to the rank `shift` places on
 * (mod the size of comm), and recv receives from the rank `shift` places back. Both are in
 * flight until pl_ring_shift_wait; send and recv must not overlap and must stay untouched
 * until then. Every rank of comm makes the same calls in the same order with the same
 * count, shift and tag (tag tells apart shifts in flight at once). Point-to-point messages
 * of the traffic ledger and the trace (what the modelled timeline replays). On one rank it
 * copies send to recv. */
struct pl_ring_shift {
    struct pl_handle *send, *recv;
};
void pl_ring_shift_start(struct pl_comm *comm, const float *send, float *recv, size_t count,
                         int shift, int tag, struct pl_ring_shift *s);
void pl_ring_shift_wait(struct pl_ring_shift *s);

#endif
