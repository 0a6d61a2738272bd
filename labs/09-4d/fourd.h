/* fourd.h: Lab 9, the capstone: one model trained with data, tensor (with sequence) and
 * pipeline parallelism together. The fixed surface between your fourd.c and the grader: do
 * not change this file. Gradescope takes only your .c file and compiles it against the
 * original. The handout is docs/labs/09-4d.md.
 *
 * The lab is the composition: every scheme's piece is a kit call you may use --
 *     the grid              lib/grid.h    (pl_grid_init, pl_grid_comm)
 *     the TP+SP block       lib/sp_block.h (pl_sp_block_forward/backward/sync_grads,
 *                                          pl_sp_gather, pl_sp_reduce_scatter)
 *     the shard layout      lib/tp_shard.h, lib/sp_shard.h
 *     a stage's other parts lib/pipe_parts.h (the embedding, part -1, run whole on every
 *                                          rank of a TP group; the head, part L, is yours,
 *                                          vocabulary-parallel: section 2.1), held in a
 *                                          model of the ends (lib/model.h, pl_model_new_ends)
 *     the loss's pieces     lib/tp_shard.h (pl_tp_row_max, pl_tp_max_of_blocks,
 *                                          pl_tp_row_sumexp, pl_tp_pick_target,
 *                                          pl_tp_xent_mean, pl_tp_xent_backward) and lib/ops.h
 *                                          (pl_layernorm_*, pl_matmul_* on a slice)
 *     AdamW, clipping       lib/ops.h (pl_adamw_step, pl_clip_scale, pl_grad_norm_sq) and
 *                           pl_model_adamw_flat
 * -- and what you write is how they fit: which rank holds what, who talks to whom, and
 * what is summed over which group.
 *
 * The grader drives it like this, on every rank at once, on a virtual cluster of 2 nodes of
 * 4 ranks (6 ranks: 3 nodes of 2):
 *
 *     fourd_grid_new(&g, world, "tp-pp-dp", dp, tp, pp);     once
 *     m = fourd_model_new(&cfg, &opt, &g);
 *     m->recompute = r;                                      none unless said
 *     m->zero = z;                                           0 unless said
 *     for each step: loss = fourd_step(m, tokens, targets, B, micro);
 *     fourd_model_free(m); fourd_grid_free(&g);
 *
 * and checks, against the single-device reference (pl_model_step on the whole batch):
 *   grid      each rank's coordinates and the world ranks of its TP, PP and DP groups are
 *             those of the order string (leftmost innermost, lib/grid.h), for every order
 *             of the three axes; with "tp-pp-dp" on 2 nodes of 4 every TP group lies inside
 *             a node (section 1); -1 for an order or degrees that cannot describe world.
 *   results   K AdamW steps without clipping on grids (dp, tp, pp) = (2,2,2), (1,2,4), (2,4,1), (4,1,2) on 8
 *             ranks and (1,2,3) on 6 (4 blocks on 3 stages: uneven) with (3,2,1) (below,
 *             zero): the loss every step
 *             returns (relative error 1e-5), and after the K steps every rank's parameters
 *             (relative L2 error 1e-4 per tensor) against the slice of the reference's it
 *             holds (section 2); and the sequences each microbatch's embedding and head
 *             are given (pl_parts_forward's tokens and targets), against the invariant
 *             below that says which replica and microbatch trains which sequences.
 *   clipping  with a clip that binds: the norm of each step (m->grad_norm, relative error
 *             1e-5) and the gradient AdamW was given in the last step (m->grads and the
 *             replicated parts' rep->grads, relative L2 error 1e-4 per tensor) against the
 *             single device's norm and clipped gradient: every parameter counted once, not
 *             once per DP replica, not once per TP rank holding a replicated tensor
 *             (section 3).
 *   recompute the (2,2,2) grid's unclipped steps again with m->recompute selective and full: every
 *             loss and parameter bit for bit those of none, and each rank's activation peak
 *             (memory ledger) below none's by what the choice leaves unsaved of every block
 *             of every microbatch in flight under 1F1B (under full, less one block's whole
 *             activations, which its rerun needs while it runs): sp_block.h's formulas,
 *             bounded on both sides (section 3.1).
 *   cool-down on every rank of a stage of two blocks or more (dp > 1): the first step's
 *             first collective on dp_comm of more than 16 floats starts before the stage's
 *             last pl_sp_block_backward call, and the gradients cross dp_comm in two such
 *             collectives at least: the DP sum in buckets, inside the cool-down (3.3).
 *   zero      the 8-rank grids with dp > 1, (2,2,2), (2,4,1) and (4,1,2), and on 6 ranks
 *             (3,2,1), whose vocabulary is grown until dp = 3 divides neither the
 *             embedding's run nor the head's and whose weight decay shows a share's flags,
 *             again with m->zero = 1, without and with the clip (section 3.2): after the
 *             first step each rank's share of each run holds one device's summed gradient and
 *             AdamW's first step on it (relative L2 error 1e-4 each; failed on a share when
 *             its DP replicas' shares of the run are right, the share and its bounds
 *             named); the losses, the norms, the
 *             parameters and the gradient AdamW was given (in this rank's shares only,
 *             below) as in results and clipping; the DP replicas' parameters bit for bit
 *             the same; each rank's AdamW moments (memory ledger, PL_MEM_OPTIM, peak from
 *             fourd_model_new to the last step) at least 8 bytes for every float of its
 *             shares and at most 8 x the sum of ceil(n/dp) over its runs, plus 1 kB; and
 *             the floats each step's collectives on dp_comm cover (pl_all_reduce: count;
 *             pl_reduce_scatter: dp x recv_count; pl_all_gather: dp x send_count; the
 *             _async ones alike) at least 2 n for the rank's n floats and at most 2 x the
 *             sum of dp x ceil(n/dp) over its runs plus 16: the gradients summed once (a
 *             reduce-scatter, or an all-reduce) and the updated shares gathered once; and
 *             the DP sum (the first collective on dp_comm) starts as the bubble test wants.
 *   vocab     on the last stage of the 8-rank grids with t > 1, each head run (from the
 *             return of the model's last block's forward to the start of its backward, a
 *             microbatch of n tokens): its FLOPs a t-th of one device's head (10% either
 *             way); at most 4 x (2 n V/t + 4 n C + 8 n) + 2048 bytes held above where it
 *             began (memory ledger, every category): its vocabulary slice's logits, never
 *             the whole [n, V]; the floats its collectives on tp_comm cover (counted as in
 *             zero) in [2 n C + (t+1) n, 2 n C + 3 t n + 16]: the SP conjugates at its edges
 *             and per-token statistics; after the steps rep's head equal on every TP rank;
 *             and the loss with the LM head scaled so that one device's largest logit is
 *             200 as one device's (section 2.1).
 *   traffic   from the traffic ledger: the SP conjugates' all-gathers and reduce-scatters
 *             never cross a node under "tp-pp-dp"; each rank's point-to-point bytes per
 *             step equal (its neighbouring stages) x micro x (B/(dp micro)) T/t C x 4:
 *             one activation per microbatch to the next stage, one gradient to the previous;
 *             the floats all-reduced on dp_comm (pl_all_reduce, pl_all_reduce_async) per
 *             step: every gradient the rank holds once, plus at most 16 (the loss); with
 *             dp = 1 at most that (section 4).
 *   bubble    each stage's order of work in the first step (its first block's
 *             pl_sp_block_forward and _backward calls, plain or _saved, the microbatch from
 *             ctx->seq0), replayed with a forward taking 1 and a backward 2 on every stage:
 *             each pipeline idles 1F1B's (p-1)/(m+p-1) of the step (section 2); and
 *             each stage's DP sum starts before any collective over its pipeline (a loss
 *             sum over pp_comm, a barrier) once its last backward is done (section 3).
 *   plan      every 8-rank run above (unclipped, ZeRO-1, recomputation): what each rank
 *             holds, its memory ledger's peaks of params, grads, optim and activ summed
 *             (from fourd_model_new to the last step), within 10% of what Lab 8's planner
 *             (lib/plan.h, pl_plan_memory) gives a rank of that configuration: over it on no
 *             rank, under it on no rank of stage 0, the one the planner describes
 *             (section 3.4).
 *   memory    every byte through pl_mem_alloc or pl_comm_buf_alloc: the code may not call
 *             malloc and the rest of the C allocator family, mmap, sbrk or brk.
 *   symbols   lib's collectives and point-to-point only (MPI_* and nccl* are refused); the
 *             place in the grid comes from world (pl_rank and pl_size are refused).
 *
 * Invariants the grader's checks rely on (keep them; how to get there is yours):
 *   - stage s of pp holds blocks [s L/pp, (s+1) L/pp) (integer division: fourd_stage_blocks),
 *     and also the embedding when s = 0 and the head (final layernorm and LM head) when
 *     s = pp - 1;
 *   - rank r of a TP group of t holds, of each of its blocks, tp_shard.h's shard r, in
 *     m->params as the blocks one after the other (pl_tp_block_numel floats each); its
 *     sequence-parallel activations are sp_shard.h's tokens [r T/t, (r+1) T/t);
 *   - the embedding and the head are held whole (rep, made by pl_model_new_ends: a
 *     pl_model of the stage's ends alone, no block) by every TP rank of the stage that has
 *     them, and stay equal there; TP
 *     rank r computes the head's logits of vocabulary rows [r V/t, (r+1) V/t) alone (every
 *     graded model's V is a multiple of t: (3,2,1)'s grown vocabulary too);
 *   - DP replica d trains on sequences [d B/dp, (d+1) B/dp) of the step's batch, cut into
 *     micro microbatches of B/(dp micro) sequences, in order;
 *   - fourd_step returns the whole batch's mean loss on every rank;
 *   - under ZeRO-1 (m->zero = 1) what a rank holds is three runs of floats: its blocks'
 *     shards (m->params and m->grads, (b1 - b0) block_numel floats), and rep's ranges of the
 *     embedding (stage 0) and of the head (the last stage), pl_model_part_range. Of a run of
 *     n floats, DP rank d's share is [d c, min((d+1) c, n)) with c = ceil(n/dp). The rank
 *     keeps AdamW's moments for its shares alone, and no others (rep made without
 *     PL_MODEL_OPTIM), allocated once the first step knows m->zero: the peak counts from
 *     fourd_model_new. After a step its shares of m->grads and rep->grads hold the gradient
 *     AdamW was given, summed over the DP group and clipped (the rest of them is yours),
 *     and every parameter it holds is updated, the same on every DP replica; m->grad_norm
 *     still counts every parameter once: each share's squares by its owner, summed over
 *     the DP group (not its own share's alone, nor a whole gradient once per replica). */
#ifndef LAB09_FOURD_H
#define LAB09_FOURD_H

#include <stddef.h>

#include "comm.h"
#include "grid.h"
#include "mem.h"
#include "model.h"
#include "ops.h"
#include "pipe_parts.h"
#include "sp_block.h"
#include "sp_shard.h"
#include "todo.h"
#include "tp_shard.h"

/* ---- section 1: the grid ---- */

struct fourd_grid {
    int dp, tp, pp;                /* the degrees */
    int dp_rank, tp_rank, pp_rank; /* this rank's coordinates */
    struct pl_comm *tp_comm;       /* this rank's TP group: group rank = tp_rank */
    struct pl_comm *pp_comm;       /* its pipeline: group rank = pp_rank = the stage */
    struct pl_comm *dp_comm;       /* its DP group: group rank = dp_rank */
};

/* Collective over world: the grid of dp x tp x pp = world's size ranks laid out by order, a
 * permutation of "tp", "pp" and "dp" joined by '-', leftmost varying fastest. Returns 0, or
 * -1 (nothing allocated) when the order or the degrees cannot describe world. */
int fourd_grid_new(struct fourd_grid *g, struct pl_comm *world, const char *order, int dp,
                   int tp, int pp);
void fourd_grid_free(struct fourd_grid *g);

/* The blocks stage s of pp holds: [*b0, *b1). Given, not yours to write. */
static inline void fourd_stage_blocks(int n_layers, int pp, int s, int *b0, int *b1)
{
    *b0 = s * n_layers / pp;
    *b1 = (s + 1) * n_layers / pp;
}

/* ---- sections 2 and 3: the model on one rank, and its training step ---- */

struct fourd_model {
    struct pl_model_config cfg;
    struct pl_adamw_config opt;
    const struct fourd_grid *g;
    int b0, b1;               /* this stage's blocks (fourd_stage_blocks) */
    int has_embed, has_head;  /* stage 0; stage pp - 1 */
    size_t block_numel;       /* pl_tp_block_numel(cfg, tp): floats of one block's shard */
    /* (b1 - b0) x block_numel floats each, op memory: this rank's shards of its blocks */
    float *params, *grads;
    /* AdamW's moments of what this rank updates, laid out as you choose (the solution
     * allocates them at the first step: under zero, for its shares alone) */
    float *adam_m, *adam_v;
    /* The embedding and the head, whole, when this stage has either (else NULL): a
     * pl_model of those ends alone (pl_model_new_ends: its layout packs the parts it holds,
     * pl_model_part_range gives their ranges), whose params and grads are the ones trained
     * (and its moments too, if you made it with PL_MODEL_OPTIM: not under zero). */
    struct pl_model *rep;
    /* What each block keeps between its forward and backward (recompute.h, sp_block.h's
     * pl_sp_block_saved): set by the caller between fourd_model_new and the first step;
     * fourd_model_new leaves PL_RECOMPUTE_NONE. */
    enum pl_recompute recompute;
    /* ZeRO-1 across the DP group (handout section 3.2): 1 asks for it, set by the caller
     * between fourd_model_new and the first step, as recompute; fourd_model_new leaves 0. */
    int zero;
    int step;                 /* AdamW steps taken */
    double grad_norm;         /* the last step's global gradient norm, before clipping */
    void *priv;               /* yours */
};

/* Collective over the grid's ranks: this rank's part of a fresh model initialised from
 * cfg->seed (every shard bit for bit the slice of pl_model_new's parameters), recompute
 * none, zero 0; AdamW's moments start at zero, whenever they are allocated. */
struct fourd_model *fourd_model_new(const struct pl_model_config *cfg,
                                    const struct pl_adamw_config *opt,
                                    const struct fourd_grid *g);
void fourd_model_free(struct fourd_model *m);

/* Collective: one training step on the global batch tokens/targets ([B, T], op memory, the
 * same on every rank): each DP replica's sequences through the pipeline in micro
 * microbatches on a 1F1B schedule, TP+SP blocks in every stage, the gradients summed over
 * the DP group, clipped by the global norm (opt.grad_clip > 0) and one AdamW step (under
 * zero on this rank's shares, then gathered). After it m->grads (and rep->grads for the
 * embedding and head) hold the gradient AdamW was given (under zero: in the shares) and
 * m->grad_norm the norm before clipping. Returns the mean loss of the whole batch. */
double fourd_step(struct fourd_model *m, const int *tokens, const int *targets, int B,
                  int micro);

#endif
