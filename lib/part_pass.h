/* part_pass.h: the model run one part at a time over activations the kit keeps. A pass
 * owns the activations of one forward and backward over a rank's B sequences (filed as
 * PL_MEM_ACTIV); the caller says, part by part, where that part's parameters are and where
 * its gradient goes. So a scheme that moves parameters and gradients around (ZeRO gathers a
 * unit before it computes and reduce-scatters its gradient after; a stage of a pipeline
 * holds a few parts) decides only where each part's numbers live, never how the model
 * computes.
 *
 * Parts are model.h's: -1 (PL_PART_EMBED), the blocks 0..L-1, the head L
 * (PL_PART_HEAD(cfg)); a part's parameters are its numel floats in the model's flat order
 * (pl_model_part_range). The dense model without dropout only. */
#ifndef PL_PART_PASS_H
#define PL_PART_PASS_H

#include "model.h"

struct pl_pass; /* opaque */

struct pl_pass *pl_pass_new(const struct pl_model_config *cfg);
void pl_pass_free(struct pl_pass *s);
/* Starts a pass over B sequences of cfg.seq_len tokens (op memory, [B, seq_len]; kept, not
 * copied, until the pass ends). Activations are sized on the first call and kept while B
 * stays the same. */
void pl_pass_begin(struct pl_pass *s, const int *tokens, const int *targets, int B);
/* The forward of one part whose parameters are at p. Parts run in order -1, 0, ..., L; a
 * part out of order is a usage error that names the one expected. */
void pl_pass_forward(struct pl_pass *s, int part, const float *p);
/* The mean cross-entropy of the pass's sequences, once the head's forward has run. */
double pl_pass_loss(const struct pl_pass *s);
/* The backward of one part: ADDS d(loss)/d(params) to g (the part's numel floats). p must
 * hold the values the forward used. Parts run in order L, L-1, ..., -1, after the forward. */
void pl_pass_backward(struct pl_pass *s, int part, const float *p, float *g);

#endif
