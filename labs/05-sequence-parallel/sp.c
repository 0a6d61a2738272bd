/* sp.c: Lab 5, your sequence parallelism on top of tensor parallelism.
 *
 * Read docs/labs/05-sequence-parallel.md first: section 1 shows what Lab 4 left replicated
 * and what it cost, section 2 the layout, and sections 3 to 6 each function below, in this
 * order; section 8, the second part (context parallelism: ring attention), the three cp_*
 * functions at the end. Replace each lab_todo() call with your code. Which collective each
 * conjugate and each conjugate's backward is, which rows each op of the block runs on and in
 * which order, which rows of the single device's dropout mask are yours, what each rank
 * keeps, and which chunks a rank of the ring holds are yours to work out from the handout
 * and sp.h's rules (one plan, call by call, is in docs/labs/05-sequence-parallel-hints.md,
 * for when you are stuck). Grade your work with
 *     make grade LAB=05                       every test of this lab
 *     make grade LAB=05 TEST=conjugates       the tests whose name contains "conjugates"
 *     make grade LAB=05 NP=2                  only 2 ranks
 * and see the activation memory per rank against t with `make bench LAB=05`.
 *
 * Every rule the grader enforces is in sp.h: results, groups, traffic, memory (all of it
 * through pl_mem_alloc: a call to malloc or its family scores 0 before anything runs),
 * compute, the calls you may make. The kit gives you (sp_shard.h, tp_shard.h, ops.h,
 * comm.h, mem.h): lib's collectives, the layout of a rank's tokens, the activations of an
 * SP block, the TP region's compute, the layernorm, bias, dropout and residual ops. */
#include "sp.h"

#include "mem.h"
#include "ops.h"

/* Section 3: the gather, entering the TP region, and its backward (sp.h defines the
 * backward as a gradient: derive which collective it is). */
void sp_gather_forward(struct pl_comm *tp, float *full, const float *local, int B, int T,
                       int C)
{
    lab_todo("sp_gather_forward", "3");
}

void sp_gather_backward(struct pl_comm *tp, float *dlocal, const float *dfull, int B, int T,
                        int C)
{
    lab_todo("sp_gather_backward", "3");
}

/* Section 3: the scatter, leaving it, and its backward. */
void sp_scatter_forward(struct pl_comm *tp, float *local, const float *full, int B, int T,
                        int C)
{
    lab_todo("sp_scatter_forward", "3");
}

void sp_scatter_backward(struct pl_comm *tp, float *dfull, const float *dlocal, int B, int T,
                         int C)
{
    lab_todo("sp_scatter_backward", "3");
}

/* Section 4: the single device's mask for the same global token positions, with the rows
 * this rank's tokens have in the single device's branch output. */
void sp_dropout_forward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                        int site, const struct pl_model_ctx *ctx, float *branch, int B, int T)
{
    lab_todo("sp_dropout_forward", "4");
}

void sp_dropout_backward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                         int site, const struct pl_model_ctx *ctx, float *dbranch,
                         const float *dy, int B, int T)
{
    lab_todo("sp_dropout_backward", "4");
}

/* Section 5: the block, forward and backward: the memory, work and traffic rules of sp.h
 * decide where each op and each conjugate sits. */
void sp_block_forward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                      const struct pl_block_params *p, struct pl_sp_block_acts *a,
                      const struct pl_model_ctx *ctx, const float *x, float *y)
{
    lab_todo("sp_block_forward", "5");
}

void sp_block_backward(struct pl_comm *tp, const struct pl_model_config *c, int layer,
                       const struct pl_block_params *p, const struct pl_block_params *g,
                       const struct pl_sp_block_acts *a, const struct pl_model_ctx *ctx,
                       const float *dy, float *dx)
{
    lab_todo("sp_block_backward", "5");
}

/* Section 6: the gradients of the replicated tensors, whole and equal on every rank. */
void sp_sync_replicated_grads(struct pl_comm *tp, const struct pl_model_config *c,
                              const struct pl_block_params *g)
{
    lab_todo("sp_sync_replicated_grads", "6");
}

/* ==== The second part: context parallelism (section 8) ====
 * Causal ring attention on the group cpg. The contract and the rules are at the end of
 * sp.h; section 8 of the handout derives the layout, the merge and what travels where. */

/* Section 8.2: which two of the 2cp chunks rank r holds, so that the causal mask leaves every
 * rank the same attention FLOPs (sp.h, balance). */
void cp_chunks(int cp, int r, int chunk[2])
{
    chunk[0] = chunk[1] = -1;
    lab_todo("cp_chunks", "8.2");
}

/* Section 8.3: this rank's queries against every key, as the keys go round the ring. */
void cp_attention_forward(struct pl_comm *cpg, float *out, float *lse, const float *q,
                          const float *k, const float *v, int B, int T, int C, int NH)
{
    lab_todo("cp_attention_forward", "8.3");
}

/* Section 8.4: the gradients, and the keys' gradients home to their owner. */
void cp_attention_backward(struct pl_comm *cpg, float *dq, float *dk, float *dv,
                           const float *dout, const float *q, const float *k, const float *v,
                           const float *out, const float *lse, int B, int T, int C, int NH)
{
    lab_todo("cp_attention_backward", "8.4");
}
