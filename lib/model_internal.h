/* model_internal.h: what model.c and model_moe.c share and nothing else needs: scratch
 * buffers, the residual-branch dropout, and the mixture-of-experts half's pieces. */
#ifndef PL_MODEL_INTERNAL_H
#define PL_MODEL_INTERNAL_H

#include "model.h"

/* n floats of op memory, zeroed, counted as workspace; free with pl_mem_free. */
float *pl_model_scratch(size_t n, const char *label);
/* pl_model_new, with the parameters left zero (the ledger zeroes every allocation) unless
 * init_params: for what depends on the shapes alone, such as a dense part's FLOP count,
 * where drawing every parameter from the generator would cost more than the pass itself. */
struct pl_model *pl_model_new_shaped(const struct pl_model_config *cfg, unsigned what,
                                     int init_params);
/* n zeroed floats from arena s (s NULL: pl_model_scratch); give back with
 * pl_model_scratch_give, which also gives back everything taken after it. */
float *pl_model_scratch_take(struct pl_scratch *s, size_t n, const char *label);
void pl_model_scratch_give(struct pl_scratch *s, float *p);
/* n rounded up to the arena's piece size: how pl_model_scratch_take counts a piece. */
size_t pl_model_scratch_round(size_t n);
/* The same for host memory: n zeroed floats from the host part of arena s (s NULL: an
 * allocation of host workspace), given back in stack order with pl_model_host_scratch_give. */
float *pl_model_host_scratch_take(struct pl_scratch *s, size_t n, const char *label);
void pl_model_host_scratch_give(struct pl_scratch *s, float *p);

/* Dropout on a [B*T, C] branch output in place (nothing when ctx is not training). */
void pl_model_branch_dropout(const struct pl_model_config *c, int layer, int site,
                             const struct pl_model_ctx *ctx, float *branch, int B, int T);
/* dbranch = mask * dy / (1-p), or a copy of dy when the forward had no dropout. */
void pl_model_branch_dropout_backward(const struct pl_model_config *c, int layer, int site,
                                      const struct pl_model_ctx *ctx, float *dbranch,
                                      const float *dy, int B, int T);

/* The MoE fields of an MLP half's acts (x, ln, mean, rstd are model.c's). */
void pl_moe_acts_new(struct pl_mlp_acts *a, const struct pl_model_config *c, int B, int T);
void pl_moe_acts_free(struct pl_mlp_acts *a);
/* branch [N, C] (zeroed) += the routed experts' combined output of a->ln. */
void pl_moe_forward(const struct pl_model_config *c, const struct pl_block_params *p,
                    struct pl_mlp_acts *a, float *branch);
/* dln [N, C] += the gradient through the experts and the router, given dbranch; the aux
 * loss's gradient enters scaled by loss_scale. */
void pl_moe_backward(const struct pl_model_config *c, const struct pl_block_params *p,
                     const struct pl_block_params *g, const struct pl_mlp_acts *a,
                     float loss_scale, const float *dbranch, float *dln);
/* Floats of the model's scratch arena the MoE passes take at most at once, and of its host
 * part (0 for a dense model). */
size_t pl_moe_scratch_need(const struct pl_model_config *c, int B, int T);
size_t pl_moe_host_scratch_need(const struct pl_model_config *c, int B, int T);

#endif
