/* moe.h: Lab 7, mixture-of-experts expert parallelism. The fixed surface between your moe.c
 * and the grader: do not change this file. Gradescope takes only your .c file and compiles it
 * against the original. The handout is docs/labs/07-moe.md.
 *
 * The world's ranks train the reference MoE-GPT of lib/model.h together. They form EP groups
 * of ep ranks (expert parallelism) and, across the groups, expert-data-parallel groups: with
 * 8 ranks and ep = 4, ranks 0-3 and 4-7 each hold all the experts, spread four ways. Every
 * rank holds the non-expert parameters (embedding, attention, layernorms, router, head) and
 * E/ep of the experts of every block: the rank with coordinate r in its EP group owns
 * experts [r*E/ep, (r+1)*E/ep). Every rank has its own slice of each global batch (N tokens).
 * The grader drives a training step like this, on every rank at once (n ranks in all):
 *
 *     s = moe_new(world, model, N, ep);                            once
 *     for each step:
 *         pl_model_zero_grad(model);
 *         x = embedding; for each block l:
 *             x = attention half of block l (the reference's);
 *             ln = layernorm ln2(x);
 *             aux += moe_forward(s, l, ln, branch);               your MoE branch
 *             x = x + branch;
 *         objective = cross-entropy + aux;   then the backward in reverse, calling
 *             moe_backward(s, l, dbranch, dln, 1.0f / n);         your MoE backward
 *         moe_finish_gradients(s);
 *         AdamW on the non-expert parameters and this rank's experts (the grader's)
 *     moe_free(s);
 *
 * The step's objective is the mean over the ranks of each rank's objective, which is what
 * the single-device reference computes when it takes the ranks' slices as n microbatches:
 * routing, capacity and the load-balancing loss are per call (lib/model.h), so each rank
 * routes its own N tokens with its own capacity. The grader compares every step's loss and
 * gradients, the routing (tokens per expert, the dropped choices) and the parameters after K
 * steps with that reference, reads what you sent from the traffic ledger, and checks where
 * your EP groups sit on a cluster of 2 nodes.
 *
 * The rules the grader enforces, every one of them:
 *   results   moe_capacity and moe_route exactly the kit's (integers and gates bit for bit;
 *             f, P and aux to 1e-9), into a routing that may hold another call's values;
 *             moe_permute's start, perm and inv exact. Training: every step's MoE outputs
 *             (1e-5 on the first step, 1e-4 after), loss (1e-5) and gradients (1e-4, each
 *             rank's non-expert tensors and its own experts), and the parameters after the
 *             last step (1e-4), relative L2 errors against the reference; each rank's
 *             routing of the first step exactly the reference's for its slice. moe_forward
 *             WRITES (=) branch, handed over holding stale values; moe_backward ADDS (+=)
 *             into dln, handed over holding other gradients, and into the gradients. The
 *             loss_scale and aux_loss_coef given are used, whatever they are.
 *   groups    everything on the communicator moe_new is given (split from the job's world
 *             in another rank order), never on pl_comm_world(), pl_rank() or pl_size();
 *             the grid in the order "ep-dp" (ep varying fastest, lib/grid.h), so that on
 *             2 nodes an EP group lies inside one node.
 *   traffic   from the traffic ledger, per step: per MoE layer one pl_all_to_all of the
 *             counts (E/ep floats to each peer) and four pl_all_to_all_v, no point-to-point
 *             and no barrier; the all-to-all-v bytes sent off-rank exactly the rows of kept
 *             choices that cross ranks, both ways, forward and backward (C floats each);
 *             the gradient sums at most the ring's bytes of the reductions that finishing
 *             the gradients needs (section 7).
 *   compute   each rank's compute on the modelled timeline (dgx-h100, a Mixtral-sized
 *             layer) against what its experts' routed rows and its router need in lib's
 *             ops: full marks up to 1.25x, none from 1.60x.
 *   memory    every byte through pl_mem_alloc (lib/mem.h), host bookkeeping included: the
 *             code may not call malloc, calloc, realloc or the rest of the C allocator
 *             family, mmap or sbrk (a forbidden symbol scores 0 on every test before
 *             anything runs); no more allocations live after a step than after the one
 *             before; nothing left after moe_free; no operation left in flight on the
 *             communicator moe_new was given.
 *   calls     tokens travel through pl_all_to_all and pl_all_to_all_v only (no MPI_*,
 *             nccl*, dlopen, dlsym or syscall); the code never calls pl_moe_route or
 *             pl_moe_capacity; none of the calls that reach into the process or the kit's
 *             measurements (threads, signals, timers, atexit, the ledger's and trace's own
 *             functions). */
#ifndef LAB_MOE_H
#define LAB_MOE_H

#include <stddef.h>

#include "comm.h"
#include "model.h"
#include "todo.h" /* lab_todo(), which the stubs call */

/* ---- the router (sections 2 and 3): host arithmetic, graded exactly ---- */

/* Slots per expert for N tokens, E experts, k choices per token and the capacity factor
 * cf > 0, by the kit's rule (handout section 2, lib/model.h pl_moe_capacity). The kit's
 * pl_moe_capacity and pl_moe_route are the oracle this lab is graded against: read them,
 * never call them (the grader refuses a file that does, handout section 8). */
int moe_capacity(int N, int E, int k, float cf);

/* Fills every field of r (r->N, E, k and cap are set, its arrays allocated by
 * pl_moe_routing_new) from the router probabilities probs [N, E] (host memory): top-k
 * choices and their gates, slots filled choice by choice in token order, the dropped
 * choices, count, rows, gates, f, P, aux and dropped, exactly as lib/model.h describes
 * (rows and gates past an expert's count are never read: what they hold is yours).
 * Section 2. */
void moe_route(struct pl_moe_routing *r, const float *probs, float aux_coef);

/* The permutation of the kept choices into expert order, by a counting sort (section 3):
 *   start[e]   = kept choices of experts 0..e-1 (start[0] = 0, start[E] = all kept);
 *   perm[p]    = the token row of position p: expert e's kept choices sit at
 *                start[e] + slot, in slot order;
 *   inv[t*k+j] = the position of choice j of token t, or -1 when it was dropped.
 * start has E+1 entries, perm start[E] (at most N*k), inv N*k. Host memory. */
void moe_permute(const struct pl_moe_routing *r, int *start, int *perm, int *inv);

/* ---- expert parallelism (sections 4 to 7) ---- */

/* Your state, defined in moe.c. */
struct moe;

/* Called by every rank of world with its model m (all parameters allocated and equal on every
 * rank; only this rank's experts are ever read or updated), the N tokens each forward will
 * carry, and the EP degree: ep divides pl_comm_size(world) and m->cfg.n_experts. Build the
 * EP and expert-data-parallel groups from the rank grid (lib/grid.h) in the kit's default
 * order, where ep varies faster than dp, so that an EP group is ep consecutive ranks and its
 * all-to-alls stay inside a node. Section 4. */
struct moe *moe_new(struct pl_comm *world, struct pl_model *m, int N, int ep);
void moe_free(struct moe *s);
/* This rank's EP group: its rank there decides which experts it owns. */
struct pl_comm *moe_ep_comm(const struct moe *s);

/* The MoE branch of block `layer` for this rank's N tokens: ln [N, C] (op memory) in,
 * branch [N, C] written: for each token, the sum over its kept choices of
 * gate * expert_e(ln_t), where expert e lives on the EP group's rank e / (E/ep), and runs
 * there on the rows routed to it only. ln stays valid and unchanged until this layer's
 * moe_backward. Returns this rank's load-balancing loss of the layer. Sections 4 and 5.
 * Traffic per forward, on the EP group: one pl_all_to_all of the counts and two
 * pl_all_to_all_v; only the rows of kept choices travel (C floats each); the gates stay
 * home. */
double moe_forward(struct moe *s, int layer, const float *ln, float *branch);

/* Backward of the last moe_forward of `layer`: dbranch [N, C] (op memory) is d(objective)/
 * d(branch) for this rank's tokens; dln [N, C] += d(objective)/d(ln). Expert gradients
 * accumulate (+=) into this rank's experts in m->blocks_g[layer], the router's into
 * m->blocks_g[layer].w_router; the load-balancing loss enters scaled by loss_scale (f held
 * constant, as the reference). Traffic: two pl_all_to_all_v, the forward's in reverse.
 * Section 6. */
void moe_backward(struct moe *s, int layer, const float *dbranch, float *dln, float loss_scale);

/* Returns when every rank's gradients are the step's gradient for what it holds: the
 * non-expert tensors, and its own experts' rows of the expert tensors h.L.moe.w_fc,
 * h.L.moe.b_fc, h.L.moe.w_proj and h.L.moe.b_proj of m->layout (the router,
 * h.L.moe.w_router, is replicated like the other non-expert tensors). Section 7. */
void moe_finish_gradients(struct moe *s);

/* The routing of the last moe_forward of `layer` (what the grader compares exactly with the
 * reference's), or NULL before the first forward. */
const struct pl_moe_routing *moe_last_routing(const struct moe *s, int layer);

#endif
