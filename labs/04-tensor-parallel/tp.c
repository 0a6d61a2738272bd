/* tp.c: Lab 4, your tensor parallelism (Megatron-LM style).
 *
 * Read docs/labs/04-tensor-parallel.md first: section 1 shows why a block splits the way
 * tp.h describes, section 2 the group, and sections 3 to 11 each function below, in this
 * order. Replace each lab_todo() call with your code; which buffers, which collective on
 * which group and in which order are yours to work out (one plan, call by call, is in
 * docs/labs/04-tensor-parallel-hints.md, for when you are stuck). Grade your work with
 *     make grade LAB=04                       every test of this lab
 *     make grade LAB=04 TEST=conjugates       the tests whose name contains "conjugates"
 *     make grade LAB=04 NP=2                  only 2 ranks
 * and see the modelled cost of TP inside and across nodes with `make bench LAB=04`.
 *
 * Every rule the grader enforces is in tp.h: results, groups, traffic, compute, memory
 * (all of it through pl_mem_alloc: a call to malloc or its family scores 0 before anything
 * runs), the calls you may make, placement. The kit gives you (tp_shard.h, ops.h, comm.h,
 * grid.h, mem.h): your shard already sliced (rows of column-parallel weights, columns of
 * row-parallel ones), the activations structs of a TP block and of the head, lib's
 * collectives, the grid, the ops of the single-device model, and the loss's per-row
 * arithmetic. */
#include "tp.h"

#include "mem.h"
#include "ops.h"

/* Section 2: the group of ranks that share one block. */
struct pl_comm *tp_group(const struct pl_grid *grid, struct pl_comm *world)
{
    lab_todo("tp_group", "2");
    return NULL;
}

/* Section 3: f and g, each a forward and a backward, in place on n floats. */
void tp_copy_to_region_forward(struct pl_comm *tp, float *x, size_t n)
{
    lab_todo("tp_copy_to_region_forward", "3");
}

void tp_copy_to_region_backward(struct pl_comm *tp, float *dx, size_t n)
{
    lab_todo("tp_copy_to_region_backward", "3");
}

void tp_reduce_from_region_forward(struct pl_comm *tp, float *x, size_t n)
{
    lab_todo("tp_reduce_from_region_forward", "3");
}

void tp_reduce_from_region_backward(struct pl_comm *tp, float *dx, size_t n)
{
    lab_todo("tp_reduce_from_region_backward", "3");
}

/* Section 4: the column-parallel linear (output left split) and the row-parallel one
 * (input split, output whole on every rank). */
void tp_column_linear_forward(struct pl_comm *tp, float *y, float *x, const float *w,
                              const float *b, int N, int C, int OCt)
{
    lab_todo("tp_column_linear_forward", "4");
}

void tp_column_linear_backward(struct pl_comm *tp, float *dx, float *dw, float *db,
                               const float *dy, const float *x, const float *w, int N, int C,
                               int OCt)
{
    lab_todo("tp_column_linear_backward", "4");
}

void tp_row_linear_forward(struct pl_comm *tp, float *y, const float *x, const float *w,
                           const float *b, int N, int Ct, int OC)
{
    lab_todo("tp_row_linear_forward", "4");
}

void tp_row_linear_backward(struct pl_comm *tp, float *dx, float *dw, float *db, float *dy,
                            const float *x, const float *w, int N, int Ct, int OC)
{
    lab_todo("tp_row_linear_backward", "4");
}

/* Section 5: the MLP, column then row. */
void tp_mlp_forward(struct pl_comm *tp, const struct pl_model_config *c,
                    const struct pl_block_params *p, struct pl_tp_mlp_acts *a, float *x,
                    float *y)
{
    lab_todo("tp_mlp_forward", "5");
}

void tp_mlp_backward(struct pl_comm *tp, const struct pl_model_config *c,
                     const struct pl_block_params *p, const struct pl_block_params *g,
                     const struct pl_tp_mlp_acts *a, const float *x, float *dy, float *dx)
{
    lab_todo("tp_mlp_backward", "5");
}

/* Section 6: the attention, split by whole heads. */
void tp_attention_forward(struct pl_comm *tp, const struct pl_model_config *c,
                          const struct pl_block_params *p, struct pl_tp_attn_acts *a, float *x,
                          float *y)
{
    lab_todo("tp_attention_forward", "6");
}

void tp_attention_backward(struct pl_comm *tp, const struct pl_model_config *c,
                           const struct pl_block_params *p, const struct pl_block_params *g,
                           const struct pl_tp_attn_acts *a, const float *x, float *dy,
                           float *dx)
{
    lab_todo("tp_attention_backward", "6");
}

/* Section 7: the block, with its replicated layernorms and residuals. */
void tp_block_forward(struct pl_comm *tp, const struct pl_model_config *c,
                      const struct pl_block_params *p, struct pl_tp_block_acts *a,
                      const float *x, float *y)
{
    lab_todo("tp_block_forward", "7");
}

void tp_block_backward(struct pl_comm *tp, const struct pl_model_config *c,
                       const struct pl_block_params *p, const struct pl_block_params *g,
                       const struct pl_tp_block_acts *a, float *dy, float *dx)
{
    lab_todo("tp_block_backward", "7");
}

/* Section 9: the vocabulary-parallel embedding. */
void tp_embed_forward(struct pl_comm *tp, const struct pl_model_config *c, const float *wte_r,
                      const float *wpe, const int *tokens, int B, int T, float *x)
{
    lab_todo("tp_embed_forward", "9");
}

void tp_embed_backward(struct pl_comm *tp, const struct pl_model_config *c, float *dwte_r,
                       float *dwpe, const int *tokens, int B, int T, const float *dx)
{
    lab_todo("tp_embed_backward", "9");
}

/* Section 10: the vocabulary-parallel head and cross-entropy. */
double tp_head_loss_forward(struct pl_comm *tp, const struct pl_model_config *c,
                            const float *w_r, struct pl_tp_head_acts *a, float *x,
                            const int *targets)
{
    lab_todo("tp_head_loss_forward", "10");
    return 0;
}

void tp_head_loss_backward(struct pl_comm *tp, const struct pl_model_config *c,
                           const float *w_r, float *dw_r, const struct pl_tp_head_acts *a,
                           const float *x, const int *targets, float *dx)
{
    lab_todo("tp_head_loss_backward", "10");
}

/* Section 11: training the whole model. */
struct tp_gpt *tp_gpt_new(const struct pl_model_config *cfg, const struct pl_adamw_config *opt,
                          struct pl_comm *tp)
{
    lab_todo("tp_gpt_new", "11");
    return NULL;
}

void tp_gpt_free(struct tp_gpt *m)
{
    lab_todo("tp_gpt_free", "11");
}

double tp_gpt_step(struct tp_gpt *m, const int *tokens, const int *targets, int B)
{
    lab_todo("tp_gpt_step", "11");
    return 0;
}
