/* unseen.c: whether the block kept a buffer of the TP region in static storage. Every call of
 * the kit's core (pl_sp_attn_core_* and pl_sp_mlp_core_*) is wrapped
 * (grader/05-sequence-parallel/lab.mk) and its buffers placed (grader/common/unseen.h): a
 * static array outlives the forward and the memory ledger never sees it, so a block could
 * keep the whole sequence's layernorm output from its forward to its backward, skip the
 * re-gathers, and still hold "nothing" of the full sequence. A buffer on the stack cannot
 * outlive the forward, so only static storage is judged here (gr_unseen_begin(0)). The
 * collectives and layout moves of the conjugates are wrapped too: a static gather buffer
 * outlives the pass as well. A copy made with memcpy passes no wrapper: the driver searches
 * static storage for other ranks' rows after the forward. */
#include "comm.h"
#include "core_count.h"
#include "ledger.h"
#include "sp_shard.h"
#include "unseen.h"

/* The FLOPs the kit's core charged, for the block's work bound (cases_block.c collects them
 * in a struct gr_core_count): the core splits the single device's products evenly over the
 * TP group, so what is left of a rank's FLOPs is the work outside the TP region. Kinds:
 * attention forward and backward, MLP forward and backward. */
static void count(int kind, double f0)
{
    gr_core_note(kind, pl_ledger_flops_total() - f0);
}

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
    const double f0 = pl_ledger_flops_total();
    __real_pl_sp_attn_core_forward(c, p, a, ln, partial);
    count(0, f0);
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
    const double f0 = pl_ledger_flops_total();
    __real_pl_sp_attn_core_backward(c, p, g, a, ln, dbranch, dln);
    count(1, f0);
}

void __wrap_pl_sp_mlp_core_forward(const struct pl_model_config *c,
                                   const struct pl_block_params *p, struct pl_sp_block_acts *a,
                                   const float *ln, float *partial)
{
    gr_unseen_place(ln, "pl_sp_mlp_core_forward", "ln", -2, "");
    gr_unseen_place(partial, "pl_sp_mlp_core_forward", "partial", -2, "");
    const double f0 = pl_ledger_flops_total();
    __real_pl_sp_mlp_core_forward(c, p, a, ln, partial);
    count(2, f0);
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
    const double f0 = pl_ledger_flops_total();
    __real_pl_sp_mlp_core_backward(c, p, g, a, ln, dbranch, dln);
    count(3, f0);
}

/* The conjugates' collectives and layout moves. */
void __real_pl_all_gather(struct pl_comm *c, const float *send, float *recv, size_t count);
void __real_pl_reduce_scatter(struct pl_comm *c, const float *send, float *recv, size_t count,
                              enum pl_red op);
void __real_pl_sp_from_rank_major(float *out, const float *in, int B, int T, int C, int t);
void __real_pl_sp_to_rank_major(float *out, const float *in, int B, int T, int C, int t);
void __wrap_pl_all_gather(struct pl_comm *c, const float *send, float *recv, size_t count);
void __wrap_pl_reduce_scatter(struct pl_comm *c, const float *send, float *recv, size_t count,
                              enum pl_red op);
void __wrap_pl_sp_from_rank_major(float *out, const float *in, int B, int T, int C, int t);
void __wrap_pl_sp_to_rank_major(float *out, const float *in, int B, int T, int C, int t);

void __wrap_pl_all_gather(struct pl_comm *c, const float *send, float *recv, size_t count)
{
    gr_unseen_place(send, "pl_all_gather", "send buffer", -2, "");
    gr_unseen_place(recv, "pl_all_gather", "receive buffer", -2, "");
    __real_pl_all_gather(c, send, recv, count);
}

void __wrap_pl_reduce_scatter(struct pl_comm *c, const float *send, float *recv, size_t count,
                              enum pl_red op)
{
    gr_unseen_place(send, "pl_reduce_scatter", "send buffer", -2, "");
    gr_unseen_place(recv, "pl_reduce_scatter", "receive buffer", -2, "");
    __real_pl_reduce_scatter(c, send, recv, count, op);
}

void __wrap_pl_sp_from_rank_major(float *out, const float *in, int B, int T, int C, int t)
{
    gr_unseen_place(out, "pl_sp_from_rank_major", "out", -2, "");
    gr_unseen_place(in, "pl_sp_from_rank_major", "in", -2, "");
    __real_pl_sp_from_rank_major(out, in, B, T, C, t);
}

void __wrap_pl_sp_to_rank_major(float *out, const float *in, int B, int T, int C, int t)
{
    gr_unseen_place(out, "pl_sp_to_rank_major", "out", -2, "");
    gr_unseen_place(in, "pl_sp_to_rank_major", "in", -2, "");
    __real_pl_sp_to_rank_major(out, in, B, T, C, t);
}
