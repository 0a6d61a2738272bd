/* zero.h: Lab 3, ZeRO stages 1, 2 and 3 (sharded data parallelism). The fixed surface
 * between your zero.c and the grader: do not change this file. Gradescope takes only your .c
 * file and compiles it against the original; `make grade` here uses this copy as it is, so
 * an edit could pass here and fail there. The handout is docs/labs/03-zero.md.
 *
 * n ranks train one model on a global batch split across them, as in DDP (Lab 2), but each
 * rank keeps only 1/n of what DDP replicates:
 *   stage 1: the AdamW moments m and v;
 *   stage 2: also the gradients (reduce-scattered unit by unit as the backward makes them);
 *   stage 3: also the parameters (each unit gathered just before use and freed right after).
 *
 * The grain of everything is the unit: one part of the model (the embedding, one block, the
 * head; model.h). Each unit is cut into n equal chunks of ceil(numel/n) elements, the last
 * one padded with zeros, so that every reduce-scatter and all-gather moves equal blocks.
 * Rank r owns chunk r of every unit; its shard is those chunks one after the other.
 *
 *     unit u of the flat model:  [ chunk 0 | chunk 1 | ... | chunk n-1 ][pad]   padded = n*chunk
 *     rank r's shard:            [ unit 0 chunk r | unit 1 chunk r | ... ]       shard_numel
 *     a "full" buffer:           [ unit 0 padded | unit 1 padded | ... ]         full_numel
 *
 * Every buffer you keep goes through pl_mem_alloc with the category of what it holds
 * (PL_MEM_PARAMS, PL_MEM_GRADS, PL_MEM_OPTIM) and PL_DEVICE, so that the memory ledger
 * measures your savings; the grader compares each category's peak with the ZeRO formulas,
 * and activations (the kit's, PL_MEM_ACTIV) with what your slice of the batch needs. Never
 * malloc what you keep: the ledger cannot see it. */
#ifndef LAB_ZERO_H
#define LAB_ZERO_H

#include <stddef.h>

#include "comm.h"
#include "model.h"
#include "part_pass.h"
#include "todo.h"

#define ZERO_MAX_UNITS 64 /* n_layers + 2 */

/* ---- the layout of the shards ---- */

struct zero_unit {
    int part;            /* PL_PART_EMBED (-1), a block 0..L-1, or the head L */
    size_t offset;       /* the part's first element in the model's flat layout */
    size_t numel;        /* its elements */
    size_t chunk;        /* ceil(numel / n): what each rank owns of it */
    size_t padded;       /* n * chunk >= numel */
    size_t full_offset;  /* where the unit starts in a full buffer (sum of the padded before) */
    size_t shard_offset; /* where this rank's chunk starts in its shard (sum of the chunks
                            before) */
};

struct zero_layout {
    int n, rank;
    int nunits;                            /* n_layers + 2, in flat order */
    struct zero_unit unit[ZERO_MAX_UNITS]; /* unit u holds part u - 1 */
    size_t numel;                          /* Psi: the model's parameters */
    size_t full_numel;                     /* sum of padded */
    size_t shard_numel;                    /* sum of chunk = full_numel / n */
};

/* ---- what the kit gives you: the model, one unit at a time ---- */

/* The activations of one forward and backward over this rank's sequences, kept by the kit
 * (as PL_MEM_ACTIV). You say where each unit's parameters and gradients are. This is lib's
 * part-by-part pass (part_pass.h) under the names this lab uses; struct zero_pass is its
 * struct pl_pass. */
struct zero_pass;

static inline struct zero_pass *zero_pass_new(const struct pl_model_config *cfg)
{
    return (struct zero_pass *)pl_pass_new(cfg);
}
static inline void zero_pass_free(struct zero_pass *s)
{
    pl_pass_free((struct pl_pass *)s);
}
/* Starts a pass over B sequences of cfg.seq_len tokens (op memory, [B, seq_len]). */
static inline void zero_pass_begin(struct zero_pass *s, const int *tokens, const int *targets,
                                   int B)
{
    pl_pass_begin((struct pl_pass *)s, tokens, targets, B);
}
/* The forward of one part, whose parameters are the part's numel floats at p (the model's
 * flat order within the part). Call for part -1, 0, ..., L in that order. */
static inline void zero_forward_part(struct zero_pass *s, int part, const float *p)
{
    pl_pass_forward((struct pl_pass *)s, part, p);
}
/* The mean cross-entropy of this rank's sequences, once the head's forward has run. */
static inline double zero_pass_loss(const struct zero_pass *s)
{
    return pl_pass_loss((const struct pl_pass *)s);
}
/* The backward of one part: ADDS d(loss)/d(params) of this rank's sequences to g (numel
 * floats). p must hold the same values as in the forward. Call for L, L-1, ..., -1. */
static inline void zero_backward_part(struct zero_pass *s, int part, const float *p, float *g)
{
    pl_pass_backward((struct pl_pass *)s, part, p, g);
}

/* The sum over comm's ranks of one number (lib's pl_sum_over_ranks, comm.h): what a global
 * gradient norm needs when every rank holds a part of the gradient. */
static inline double zero_sum_over_ranks(struct pl_comm *comm, double x)
{
    return pl_sum_over_ranks(comm, x);
}

/* The stubs call lab_todo(what, section) (lib/todo.h): it tells the grader (and you) that
 * `what` is not written yet and where the handout explains it, then returns so the grader
 * can go on. */

/* ---- the state of one rank ---- */

struct zero {
    int stage;                  /* 1, 2 or 3 */
    int prefetch;               /* stage 3: gather unit u+1 while unit u computes */
    struct pl_comm *comm;       /* the data-parallel group */
    struct pl_model_config cfg;
    struct pl_model_layout lay; /* the model's flat layout */
    struct zero_layout zl;      /* this rank's cut */
    struct pl_adamw_config opt;
    int t;                      /* AdamW steps taken */
    /* stages 1 and 2: the full parameters, full_numel floats (unit u at full_offset);
     * stage 3: this rank's shard, shard_numel floats. */
    float *params;
    /* stage 1: full_numel floats; stages 2 and 3: the shard, shard_numel floats. */
    float *grads;
    float *m, *v;               /* AdamW moments of the shard: shard_numel floats each */
    struct zero_pass *pass;
    void *mine;                 /* anything else your code wants to keep */
};

/* ---- what you implement (zero.c) ---- */

/* Fills zl for a model of layout lay on n ranks, as rank `rank` sees it (see struct
 * zero_unit). Handout section 2. */
void zero_layout_init(struct zero_layout *zl, const struct pl_model_layout *lay, int n,
                      int rank);

/* Collective over comm. Allocates what `stage` keeps on this rank and initialises the
 * parameters it holds exactly as the single-device model would (pl_model_init_flat), the
 * padding to zero. Handout sections 3 to 5. */
struct zero *zero_new(const struct pl_model_config *cfg, const struct pl_adamw_config *opt,
                      int stage, int prefetch, struct pl_comm *comm);

/* Collective over comm. One training step on this rank's B sequences (op memory, [B,
 * cfg.seq_len]); the global batch is every rank's sequences together. Afterwards the model
 * (params as described in struct zero) equals what one AdamW step of the single-device model
 * on the global batch gives, gradient clipping included. Update your chunks with
 * pl_model_adamw_flat, each parameter once: the grader compares the gradient each call is
 * given with the single-device gradient, clipped by the whole gradient's norm. Returns this
 * rank's loss. */
double zero_step(struct zero *z, const int *tokens, const int *targets, int B);

/* Frees everything zero_new and zero_step allocated. */
void zero_free(struct zero *z);

#endif
