/* zero.c: Lab 3, your ZeRO stages 1, 2 and 3.
 *
 * Read docs/labs/03-zero.md first (section 2 explains the layout of the shards, sections 3 to
 * 6 what each stage must achieve and why), then replace each lab_todo() call with your code,
 * in this order: zero_layout_init, then stage 1 (zero_new's stage 1 part and zero1_step),
 * stage 2, stage 3. Each comment states the contract; which collectives, on which buffers,
 * when each buffer is allocated and freed, and when each gather is started and waited for
 * are yours to work out (one plan, call by call, is in docs/labs/03-zero-hints.md, for when
 * you are stuck). Every rule the grader enforces is in zero.h: results, groups, traffic,
 * memory (all of it through pl_mem_alloc: a call to malloc or its family fails every test
 * before anything runs), prefetch, time and the calls you may make.
 * Grade your work with
 *     make grade LAB=03                    every test of this lab
 *     make grade LAB=03 TEST=ZeRO-2        the tests whose name contains "ZeRO-2"
 *     make grade LAB=03 NP=2               only 2 ranks
 * see your memory per stage with `make bench LAB=03`, and draw one ZeRO-3 step of yours
 * (memory over time, the modelled timeline with and without prefetch) with
 * `make plots LAB=03`.
 *
 * What helps (zero.h, model.h, comm.h, ops.h, mem.h):
 *   pl_model_part_range       where a part lies in the model's flat layout
 *   pl_model_init_flat        initial values of any flat range, equal to the full model's
 *   zero_pass_begin, zero_forward_part, zero_backward_part, zero_pass_loss
 *                             the model one part at a time, on parameters and gradients
 *                             wherever you keep them
 *   lib/comm.h's collectives, and their _async forms + pl_wait
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
 * Contract (zero.h, struct zero_layout and the invariants at its top): one entry per unit,
 * unit u being model part u - 1 (pl_model_part_range gives each part's offset and numel in
 * the model's flat layout). Every rank owns one chunk of each unit, all chunks of a unit
 * equally long, the end padded. The chunk's length and where each unit lies in a full buffer
 * and in a shard are your design; the grader reads your buffers by what you report here and
 * judges it by the invariants, never against one layout of its own. */
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
    /* Allocate what the stage keeps (struct zero in zero.h says each buffer's size per stage),
     * each with pl_mem_alloc in the category of what it holds: the grader measures each
     * category's peak against 16Psi's shares. Your parameters start equal to the full
     * model's: pl_model_init_flat gives the initial values of any flat range. */
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
 * Contract: one training step (forward, backward, clip, AdamW) that trains exactly as one
 * device would, with the optimizer state sharded: each rank updates only its chunks, and
 * every rank holds the whole updated model at the end. Traffic: 2Psi(n-1)/n per rank, the
 * same as DDP's all-reduce. Clipping needs the norm of the WHOLE gradient, and a rank holds
 * only its chunks of it (zero_sum_over_ranks). Return zero_pass_loss. */
static double zero1_step(struct zero *z, const int *tokens, const int *targets, int B)
{
    lab_todo("zero1_step", "3");
    return 0;
}

/* ---- stage 2 (handout section 4) ----
 * Contract: as stage 1, but no full gradient ever exists: the grader reads the peak of
 * PL_MEM_GRADS, which must stay within the shard plus two units' padded sizes. */
static double zero2_step(struct zero *z, const int *tokens, const int *targets, int B)
{
    lab_todo("zero2_step", "4");
    return 0;
}

/* ---- stage 3 (handout section 5) ----
 * Contract: as stage 2, and parameters live only as the shard between steps; a unit's full
 * parameters exist only while that unit computes (forward, and again in backward). The peak
 * of PL_MEM_PARAMS is graded. With z->prefetch, the next unit's gather should already be
 * under way while this unit computes: the grader replays your step's trace and grades the
 * share of all-gather time hidden behind compute (handout section 6). */
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
