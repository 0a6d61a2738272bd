/* unseen.c: whether the block kept a buffer of the TP region in static storage. Every call of
 * the kit's core (pl_sp_attn_core_* and pl_sp_mlp_core_*) is wrapped
 * (grader/05-sequence-parallel/lab.mk) and its buffers placed (grader/common/unseen.h): a
 * static array outlives the forward and the memory ledger never sees it, so a block could
 * keep the whole sequence's layernorm output from its forward to its backward, skip the
 * re-gathers, and still hold "nothing" of the full sequence. A buffer on the stack cannot
 * outlive the forward, so only static storage is judged here (gr_unseen_begin(0)). */
#include "sp_shard.h"
#include "unseen.h"

void __real_pl_sp_attn_core_forward(const struct pl_model_config *c,
                                    const struct pl_block_params *p,
                                    struct pl_sp_block_acts *a, const float *ln, float *partial);
void __real_pl_sp_attn_core_backward(const struct pl_model_config *c,
                                     const struct pl_block_params *p,
                                     const struct pl_block_params *g,
                                     const struct pl_sp_block_acts *a, const float *ln,
                                     const float *dbranch, float *dln);
void __real_pl_sp_mlp_core_forward(const struct pl_model_config *c,
                                   const struct pl_block_params *p, struct pl_sp_block_acts *a,
                                   const float *ln, float *partial);
void __real_pl_sp_mlp_core_backward(const struct pl_model_config *c,
                                    const struct pl_block_params *p,
                                    const struct pl_block_params *g,
                                    const struct pl_sp_block_acts *a, const float *ln,
                                    const float *dbranch, float *dln);

void __wrap_pl_sp_attn_core_forward(const struct pl_model_config *c,
                                    const struct pl_block_params *p,
                                    struct pl_sp_block_acts *a, const float *ln, float *partial)
{
    gr_unseen_place(ln, "pl_sp_attn_core_forward", "ln", -2, "");
    gr_unseen_place(partial, "pl_sp_attn_core_forward", "partial", -2, "");
    __real_pl_sp_attn_core_forward(c, p, a, ln, partial);
}

void __wrap_pl_sp_attn_core_backward(const struct pl_model_config *c,
                                     const struct pl_block_params *p,
                                     const struct pl_block_params *g,
                                     const struct pl_sp_block_acts *a, const float *ln,
                                     const float *dbranch, float *dln)
{
    gr_unseen_place(ln, "pl_sp_attn_core_backward", "ln", -2, "");
    gr_unseen_place(dbranch, "pl_sp_attn_core_backward", "dbranch", -2, "");
    gr_unseen_place(dln, "pl_sp_attn_core_backward", "dln", -2, "");
    __real_pl_sp_attn_core_backward(c, p, g, a, ln, dbranch, dln);
}

void __wrap_pl_sp_mlp_core_forward(const struct pl_model_config *c,
                                   const struct pl_block_params *p, struct pl_sp_block_acts *a,
                                   const float *ln, float *partial)
{
    gr_unseen_place(ln, "pl_sp_mlp_core_forward", "ln", -2, "");
    gr_unseen_place(partial, "pl_sp_mlp_core_forward", "partial", -2, "");
    __real_pl_sp_mlp_core_forward(c, p, a, ln, partial);
}

void __wrap_pl_sp_mlp_core_backward(const struct pl_model_config *c,
                                    const struct pl_block_params *p,
                                    const struct pl_block_params *g,
                                    const struct pl_sp_block_acts *a, const float *ln,
                                    const float *dbranch, float *dln)
{
    gr_unseen_place(ln, "pl_sp_mlp_core_backward", "ln", -2, "");
    gr_unseen_place(dbranch, "pl_sp_mlp_core_backward", "dbranch", -2, "");
    gr_unseen_place(dln, "pl_sp_mlp_core_backward", "dln", -2, "");
    __real_pl_sp_mlp_core_backward(c, p, g, a, ln, dbranch, dln);
}
