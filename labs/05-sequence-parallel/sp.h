/* sp.h: Lab 5, sequence parallelism on top of tensor parallelism (Korthikanti et al.). The
 * fixed surface between your sp.c and the grader: do not change this file. Gradescope takes
 * only your .c file and compiles it against the original. The handout is
 * docs/labs/05-sequence-parallel.md.
 *
 * In Lab 4 the layernorms, the dropouts and the residual adds ran on the whole [B*T, C]
 * activation on every rank of the TP group: the same work and the same stored tensors t
 * times. Here each of the t ranks keeps only its T/t tokens of every sequence outside the
 * TP region (sp_shard.h draws the layout), and two conjugate operators, a gather entering
 * the TP region and a scatter leaving it, replace f and g (handout section 3). The TP
 * region's compute is the kit's (sp_shard.h); which collective each conjugate and each
 * conjugate's backward is, which of the block's ops run on which rows and in what order,
 * which rows of the mask a rank's dropout draws, what a rank keeps and the backward are
 * yours.
 *
 * The rules the grader enforces, every one of them:
 *   results   outputs and input gradients equal the single-device block's rows of this rank
 *             (lib/model.h), dropout on too (the masks of the same global token positions,
 *             for the block, site, seed and step given), to a relative L2 error of 1e-5
 *             (outputs, losses) and 1e-4 (gradients; weights after 3 AdamW steps); every
 *             split tensor's gradient equals its block of the full gradient. After
 *             sp_sync_replicated_grads every replicated tensor's gradient (ln1, ln2, and the
 *             biases b_proj and b_fc2) is bitwise equal on every rank of the group and
 *             equals the single device's. Backward functions WRITE (=) activation gradients
 *             (dx, dbranch) and ACCUMULATE (+=) parameter gradients, as model.h does: the
 *             grader hands dx and dbranch over holding junk, and g holding an earlier
 *             micro-batch's gradients as this rank's backward left them (its replicated
 *             tensors' partial sums, not yet synchronised: sp_sync_replicated_grads runs
 *             once, after the last micro-batch's backward).
 *   groups    every collective runs on the TP group tp, never on the world: the cases
 *             include tp x dp grids (each DP replica on its own sequences) and TP groups of
 *             strided ranks numbered against the world's order. A rank's tokens are those
 *             of its rank in tp, pl_comm_rank(tp).
 *   traffic   from the traffic ledger, on t >= 2. Each of the four conjugate functions
 *             makes exactly one collective call on tp: an all-gather or a reduce-scatter
 *             (which, for each, is yours to derive) of the whole [B*T, C], (t-1)/t of it
 *             sent per rank. In a block pass every collective is an all-gather or a
 *             reduce-scatter of [B*T, C] on tp, (t-1)/t of it per rank, and nothing else (no
 *             all-reduce): the forward as many all-gathers as reduce-scatters, its bytes
 *             Lab 4's block forward's; the backward exactly as many reduce-scatters as the
 *             forward, and as many all-gathers as the forward plus at most 2 (what the
 *             backward needs of the whole sequence and no rank keeps).
 *             sp_sync_replicated_grads sends at most one all-reduce's worth of the six
 *             replicated vectors of C floats.
 *   memory    every byte through pl_mem_alloc (lib/mem.h), host bookkeeping included: the
 *             code may not call malloc, calloc, realloc or the rest of the C allocator
 *             family, mmap or sbrk (the build lists the symbols the code calls, and a
 *             forbidden one scores 0 on every test before anything runs). What is allocated
 *             when sp_block_forward returns is what the block holds until its backward, and
 *             is at most pl_sp_block_act_bytes, the acts themselves (scratch freed before
 *             return);
 *             none of another rank's tokens is kept in static storage, and no buffer handed
 *             to the kit's core or to a collective is a static array; nothing is left
 *             allocated once the backward has returned and the acts are freed.
 *   compute   the work outside the kit's core (layernorms, dropouts, residuals, biases),
 *             from the FLOPs ledger and summed over the group, is 0.75x to 1.15x the single
 *             device's, plus at most 6 FLOPs per element of [B*T, C] for each rank beyond
 *             the first. The block's modelled time (dgx-h100, GPT-3 block scale) is
 *             graded against the single device's compute/t plus the conjugates'
 *             collectives of B*T*C (full marks up to 1.10x, none from 1.40x), its
 *             wall-clock time against the kit's block on B/t sequences plus the same
 *             collectives (full marks from 0.70x of that speed).
 *   calls     communication only through lib's collectives on tp (pl_all_gather,
 *             pl_reduce_scatter, pl_all_reduce, ...) and, in the second part, the kit's
 *             ring step on cpg (pl_ring_shift_start, pl_ring_shift_wait): no other
 *             point-to-point (pl_send, pl_recv, pl_sendrecv and their async forms), no MPI_*, nccl*, dlopen, dlsym or syscall;
 *             the kit called by its own names (no __real_* or __wrap_*), and none of the
 *             calls that reach into the process or the kit's measurements (threads,
 *             signals, timers, atexit, the ledger's and trace's own functions).
 * All float arrays are op memory. T is always the FULL sequence length, which t divides;
 * local arrays are [B*T/t, C] (B*T/t rows, this rank's tokens). */
#ifndef LAB_SP_H
#define LAB_SP_H

#include <stddef.h>

#include "comm.h"
#include "model.h"
#include "sp_shard.h"
#include "todo.h" /* lab_todo(), which the stubs call */
#include "tp_shard.h"

/* ---- the conjugates (handout section 3) ----
 * full [B*T, C] in sequence order on every rank; local [B*T/t, C] this rank's tokens. */

/* full = every rank's local rows, each in its place. */
void sp_gather_forward(struct pl_comm *tp, float *full, const float *local, int B, int T,
                       int C);
/* The gather's backward. Every rank m of the group used its own copy of the gathered
 * activation, and dfull on rank m is the loss's gradient with respect to that copy; dlocal
 * = the loss's gradient with respect to this rank's local rows. */
void sp_gather_backward(struct pl_comm *tp, float *dlocal, const float *dfull, int B, int T,
                        int C);
/* local = this rank's rows of the sum over the group of full. */
void sp_scatter_forward(struct pl_comm *tp, float *local, const float *full, int B, int T,
                        int C);
/* The scatter's backward. dlocal on rank m is the loss's gradient with respect to rank m's
 * local output; dfull = the loss's gradient with respect to this rank's full input. */
void sp_scatter_backward(struct pl_comm *tp, float *dfull, const float *dlocal, int B, int T,
                         int C);

/* ---- dropout on the local rows (section 4) ----
 * Dropout site `site` (0 attention, 1 MLP) of block `layer` on this rank's branch output
 * [B*T/t, C], in place, with exactly the mask the single device draws for the same global
 * token positions (model.h: pl_model_dropout_stream, ctx->seq0). Off (a copy) when
 * ctx->train is 0 or c->dropout is 0. The backward WRITES (=) dbranch from dy. */
void sp_dropout_forward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                        int site, const struct pl_model_ctx *ctx, float *branch, int B, int T);
void sp_dropout_backward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                         int site, const struct pl_model_ctx *ctx, float *dbranch,
                         const float *dy, int B, int T);

/* ---- the block (section 5) ----
 * x_mid = x + drop(attn(ln1(x))); y = x_mid + drop(mlp(ln2(x_mid))), as pl_block_forward,
 * on this rank's rows x, y [B*T/t, C] (distinct). p and g: Lab 4's TP shard and its
 * gradient (pl_tp_block_bind). a from pl_sp_block_acts_new(c, t, B, T), the caller's: what
 * the block keeps for its backward, and nothing more. The TP region's compute is the kit's
 * (pl_sp_attn_core_*, pl_sp_mlp_core_*). dy and dx distinct. */
void sp_block_forward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                      const struct pl_block_params *p, struct pl_sp_block_acts *a,
                      const struct pl_model_ctx *ctx, const float *x, float *y);
void sp_block_backward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                       const struct pl_block_params *p, const struct pl_block_params *g,
                       const struct pl_sp_block_acts *a, const struct pl_model_ctx *ctx,
                       const float *dy, float *dx);

/* ---- the replicated gradients (section 6) ----
 * On return, this rank's gradients of ln1.w, ln1.b, ln2.w, ln2.b, b_proj and b_fc2 are the
 * single device's for the group's whole batch, bitwise the same on every rank of tp. */
void sp_sync_replicated_grads(struct pl_comm *tp, const struct pl_model_config *c,
                              const struct pl_block_params *g);

/* ==== The second part: context parallelism, causal ring attention (handout section 8) ====
 * For sequences too long for one rank even with TP and SP, cp ranks split the sequence
 * itself: each holds the queries, keys and values of T/cp of its tokens and computes
 * attention for its own queries while the keys and values travel around the ring of the
 * group cpg. The sequence is cut into 2cp chunks of Tc = T/(2cp) tokens; which two a rank
 * holds is cp_chunks'. The kit gives the attention of one block of queries against one
 * block of keys at their global positions and its backward (ring_attn.h:
 * pl_attn_block_forward, pl_attn_block_delta, pl_attn_block_backward) and one nonblocking
 * step of a ring (pl_ring_shift_start, pl_ring_shift_wait); the layout, which blocks to
 * compute, the merge of the partial outputs, the ring's order and where the gradients of
 * K and V travel are yours.
 *
 * The rules the grader enforces, every one of them:
 *   layout    cp_chunks gives rank r two chunk indices chunk[0] < chunk[1] in [0, 2cp), and
 *             every chunk belongs to exactly one rank. The grader hands each rank its rows
 *             by it: for each of the B sequences, the Tc rows of chunk[0], then those of
 *             chunk[1] ([B, T/cp, C], op memory).
 *   results   out equals the single device's causal attention (pl_attention_forward on
 *             the whole sequence) on this rank's rows, to a relative L2 error of 1e-5; dq,
 *             dk and dv (WRITTEN, =: the grader hands them over holding junk) equal this
 *             rank's rows of pl_attention_backward's, to 1e-4: dk and dv of this rank's
 *             keys summed over every rank's queries that see them. The cases include
 *             scores of a hundred and more (exp of them overflows fp32).
 *   traffic   from the traffic ledger, on cp >= 2: the forward sends, per rank, K and V of
 *             T/cp tokens to cp-1 other places, 2(cp-1)/cp of the bytes of the sequence's K
 *             (B T C floats) and nothing else; the backward at least 4(cp-1)/cp of them (K
 *             and V again, and their gradients back), at most (4cp-2)/cp; point-to-point
 *             through pl_ring_shift_* on cpg only, no collective, and no message carrying a
 *             rank's own K or V to it (it holds them already).
 *   memory    everything through pl_mem_alloc; nothing left allocated when a pass returns
 *             (what the backward needs of the forward is in out and lse, the caller's); the
 *             peak above the arguments at most 6L + 2 lse bytes + one block's partial
 *             output (4 Tc C bytes) in the forward and 9L + 2 lse bytes in the backward,
 *             L = 4 B (T/cp) C bytes (a rank's K), plus the kit's block call's own scratch
 *             (pl_attn_block_work_bytes): a few chunks in flight, never the whole sequence's
 *             K and V (in pl_mem_alloc's memory, static storage or on the stack alike).
 *   balance   each rank's attention FLOPs (forward and backward, from the ledger: the
 *             kit's block calls charge a block whole) within 2% of the group's mean, and
 *             in all no more than the blocks the causal mask leaves something to see.
 *   overlap   on cp >= 2 the forward is traced and replayed on the modelled timeline
 *             (dgx-h100, one sequence of 131072 tokens): at most 10% of its K/V transfers'
 *             time may stand exposed, not hidden behind the blocks' compute. The backward's
 *             overlap is not graded (its last step's gradients cannot hide), but the same
 *             reasoning applies to it: a backward that waits for each step's K and V before
 *             computing is slower for nothing.
 * lse: B * NH * T/cp floats of op memory, the caller's, laid out as you like: what your
 * backward needs of your forward beside out. */
#include "ring_attn.h"

/* The two chunks rank r of cp holds, chunk[0] < chunk[1]. Pure: the same on every rank. */
void cp_chunks(int cp, int r, int chunk[2]);

/* out [B, T/cp, C]: the causal attention of this rank's queries q over every key of the
 * sequence; k, v this rank's keys and values; lse what the backward needs. */
void cp_attention_forward(struct pl_comm *cpg, float *out, float *lse, const float *q,
                          const float *k, const float *v, int B, int T, int C, int NH);

/* dq, dk, dv [B, T/cp, C], written (=): the gradients of this rank's rows of q, k and v,
 * given dout [B, T/cp, C] and the forward's inputs, out and lse. */
void cp_attention_backward(struct pl_comm *cpg, float *dq, float *dk, float *dv,
                           const float *dout, const float *q, const float *k, const float *v,
                           const float *out, const float *lse, int B, int T, int C, int NH);

#endif
