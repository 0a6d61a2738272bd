/* zero.c: Lab 3, your ZeRO stages 1, 2 and 3.
 *
 * Read docs/labs/03-zero.md first (section 2 explains the layout of the shards, sections 3 to
 * 5 each stage), then replace each lab_todo() call with your code, in this order:
 * zero_layout_init, then stage 1 (zero_new's stage 1 part and zero1_step), stage 2, stage 3.
 * Grade your work with
 *     make grade LAB=03                    every test of this lab
 *     make grade LAB=03 TEST=ZeRO-2        the tests whose name contains "ZeRO-2"
 *     make grade LAB=03 NP=2               only 2 ranks
 * and see your memory per stage with `make bench LAB=03`.
 *
 * What helps (zero.h, model.h, comm.h, ops.h, mem.h):
 *   pl_model_part_range       where a part lies in the model's flat layout
 *   pl_model_init_flat        initial values of any flat range, equal to the full model's
 *   zero_pass_begin, zero_forward_part, zero_backward_part, zero_pass_loss
 *                             the model one part at a time, on parameters and gradients
 *                             wherever you keep them
 *   pl_reduce_scatter, pl_all_gather, pl_all_gather_async + pl_wait   (PL_AVG averages)
 *   pl_model_adamw_flat       AdamW on a flat range, given its own p, g, m, v arrays
 *   pl_grad_norm_sq, zero_sum_over_ranks, pl_clip_scale, pl_scale   gradient clipping
 *   pl_mem_alloc(bytes, PL_MEM_PARAMS | PL_MEM_GRADS | PL_MEM_OPTIM, PL_DEVICE, label)
 *                             every buffer, in the category of what it holds: the grader
 *                             measures each category's peak (zero-filled; pl_mem_free) */
#include "zero.h"

#include "check.h"
#include "mem.h"
#include "ops.h"

/* ---- the layout (handout section 2) ----
 * Unit u is part u - 1 (the embedding is part -1, block l is part l, the head part L), so
 * nunits = n_layers + 2. For each unit, in order:
 *   part, offset, numel   from pl_model_part_range(lay, part, &offset, &numel);
 *   chunk                 ceil(numel / n): (numel + n - 1) / n;
 *   padded                n * chunk;
 *   full_offset           the running sum of padded, shard_offset the running sum of chunk.
 * Also n, rank, numel (lay->numel), full_numel and shard_numel (the two sums). */
void zero_layout_init(struct zero_layout *zl, const struct pl_model_layout *lay, int n, int rank)
{
    lab_todo("zero_layout_init", "2");
}

/* ---- setup ---- */

struct zero *zero_new(const struct pl_model_config *cfg, const struct pl_adamw_config *opt,
                      int stage, int prefetch, struct pl_comm *comm)
{
    PL_REQUIRE(stage >= 1 && stage <= 3, "ZeRO stage %d does not exist (choose 1, 2 or 3)",
               stage);
    struct zero *z = pl_mem_alloc(sizeof *z, PL_MEM_WORK, PL_HOST, "zero state");
    z->stage = stage;
    z->prefetch = prefetch;
    z->comm = comm;
    z->cfg = *cfg;
    z->opt = *opt;
    pl_model_layout_init(&z->lay, cfg);
    zero_layout_init(&z->zl, &z->lay, pl_comm_size(comm), pl_comm_rank(comm));
    z->pass = zero_pass_new(cfg);
    /* Allocate what the stage keeps, each in its category (struct zero says the sizes):
     *   params  stages 1, 2: full_numel floats, every unit initialised at its full_offset
     *           with pl_model_init_flat(&z->lay, unit offset, numel, ...);
     *           stage 3: shard_numel floats, only your chunk of each unit: the elements
     *           [offset + rank*chunk, ...) that are not padding (the last rank's chunk may be
     *           shorter than chunk, or empty);
     *   grads   stage 1: full_numel floats; stages 2, 3: shard_numel;
     *   m, v    shard_numel floats each, in every stage (ZeRO-1's whole point). */
    switch (stage) {
    case 1: lab_todo("zero_new: what ZeRO-1 keeps", "3"); break;
    case 2: lab_todo("zero_new: what ZeRO-2 keeps", "4"); break;
    default: lab_todo("zero_new: what ZeRO-3 keeps", "5"); break;
    }
    return z;
}

void zero_free(struct zero *z)
{
    if (!z) return;
    zero_pass_free(z->pass);
    pl_mem_free(z->params);
    pl_mem_free(z->grads);
    pl_mem_free(z->m);
    pl_mem_free(z->v);
    pl_model_layout_free(&z->lay);
    pl_mem_free(z);
}

/* ---- stage 1 (handout section 3) ----
 *   1. pl_zero the gradients; zero_pass_begin; zero_forward_part for every unit in order,
 *      on params + full_offset; zero_backward_part in reverse order into grads + full_offset.
 *   2. Each unit's gradient, averaged over the ranks: you only update your chunk, so you only
 *      need your chunk of the average. pl_reduce_scatter(comm, grads + full_offset,
 *      grads + full_offset + rank*chunk, chunk, PL_AVG) leaves it in place.
 *   3. Clip: sum pl_grad_norm_sq over your chunks, add the ranks' sums with
 *      zero_sum_over_ranks, scale your chunks by pl_clip_scale(total, opt.grad_clip).
 *   4. z->t++, then pl_model_adamw_flat on each chunk: flat offset offset + rank*chunk, only
 *      its non-padding elements, with m + shard_offset and v + shard_offset.
 *   5. pl_all_gather each unit in place (send = your chunk inside the full buffer), so every
 *      rank holds the updated model again.
 * Return zero_pass_loss. */
static double zero1_step(struct zero *z, const int *tokens, const int *targets, int B)
{
    lab_todo("zero1_step", "3");
    return 0;
}

/* ---- stage 2 (handout section 4) ----
 * As stage 1, but no full gradient ever exists: in the backward, for each unit from the
 * last, allocate a bucket of `padded` floats (PL_MEM_GRADS), run zero_backward_part into it,
 * pl_reduce_scatter it into grads + shard_offset, and pl_mem_free it at once. Then clip,
 * AdamW (gradients now in the shard) and all-gather as in stage 1. */
static double zero2_step(struct zero *z, const int *tokens, const int *targets, int B)
{
    lab_todo("zero2_step", "4");
    return 0;
}

/* ---- stage 3 (handout section 5) ----
 * Parameters live only as the shard. Before each unit's forward, and again before its
 * backward: allocate `padded` floats (PL_MEM_PARAMS), pl_all_gather your chunk
 * (params + shard_offset) into it, run the part, pl_mem_free it right after. Gradients as
 * in stage 2; then clip and AdamW on the shard; nothing to gather at the end.
 * Optional (z->prefetch): start the next unit's gather with pl_all_gather_async before this
 * unit computes, and pl_wait for it when its turn comes (handout section 6). */
static double zero3_step(struct zero *z, const int *tokens, const int *targets, int B)
{
    lab_todo("zero3_step", "5");
    return 0;
}

double zero_step(struct zero *z, const int *tokens, const int *targets, int B)
{
    switch (z->stage) {
    case 1: return zero1_step(z, tokens, targets, B);
    case 2: return zero2_step(z, tokens, targets, B);
    default: return zero3_step(z, tokens, targets, B);
    }
}
