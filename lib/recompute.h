/* recompute.h: activation recomputation, the one choice the planner (plan.h) costs and the
 * reference model (model.h) runs, so that a plan's "recompute selective" has a run to match:
 *   none       every activation the backward reads is saved by the forward;
 *   selective  Korthikanti et al. (2022): the attention core's T x T intermediates are not
 *              saved; the backward reruns the attention core from its saved input;
 *   full       each transformer block saves only its input; the backward reruns the
 *              block's forward from it before the block's backward. */
#ifndef PL_RECOMPUTE_H
#define PL_RECOMPUTE_H

enum pl_recompute { PL_RECOMPUTE_NONE, PL_RECOMPUTE_SELECTIVE, PL_RECOMPUTE_FULL };

/* The valid names, for messages. */
#define PL_RECOMPUTE_NAMES "none, selective or full"

const char *pl_recompute_name(enum pl_recompute r); /* "none", "selective", "full" */
/* 0 with *out set when text is one of the names, else -1 (out untouched). */
int pl_recompute_parse(const char *text, enum pl_recompute *out);

/* How the reference model's attention half computes attention (model.h, cfg.attention):
 *   materialised  the default: the T x T probabilities of every head are written by the
 *                 forward and saved for the backward (attn.att), or, with selective
 *                 recomputation, rebuilt before it;
 *   flash         tiles of keys with an online softmax (ops.h, pl_attention_flash_*): no
 *                 T x T matrix is written; the block saves B x NH x T floats of log-sum-exp
 *                 (attn.lse) and the backward recomputes the probabilities tile by tile.
 * The same losses up to fp32 rounding, not bit for bit. */
enum pl_attention { PL_ATTENTION_MATERIALISED, PL_ATTENTION_FLASH };

#define PL_ATTENTION_NAMES "materialised or flash"

const char *pl_attention_name(enum pl_attention a); /* "materialised", "flash" */
int pl_attention_parse(const char *text, enum pl_attention *out);

#endif
