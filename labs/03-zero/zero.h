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
 * head; model.h). A reduce-scatter or an all-gather moves equally many elements from every
 * rank, so each unit is cut into n equal chunks, rank r owning chunk r, the last ones ending
 * in zeros of padding; a rank's shard holds its chunk of every unit. How long a chunk is,
 * and where each unit lies in a full buffer and in a shard, are your design: zero_layout_init
 * reports it (struct zero_unit names the numbers), and the grader reads your buffers by it
 * and judges it by these invariants, on zero_layout_init's layouts and on every rank's z->zl:
 *   - nunits is n_layers + 2 and unit u is model part u - 1, with that part's offset and
 *     numel (pl_model_part_range); numel is Psi;
 *   - every element of the unit is owned by exactly one rank: rank r owns the unit's
 *     elements [r x chunk, (r+1) x chunk), so n x chunk >= numel, and padded = n x chunk;
 *   - padding is bounded: a chunk is at most ZERO_MAX_ALIGN - 1 elements longer than the
 *     shortest that keeps the rule above, room to round it up to an alignment and no more
 *     (padding is memory every rank holds in every sharded category, and bytes every
 *     collective of the unit moves);
 *   - in a full buffer the units' [full_offset, + padded), in a shard their [shard_offset, +
 *     chunk), never overlap and fill [0, full_numel) and [0, shard_numel): full_numel is the
 *     sum of padded and shard_numel the sum of chunk, the units in any order;
 *   - every rank's layout is rank 0's but for rank: equal shards, cut alike.
 *
 *     unit u in a full buffer:  [ chunk 0 | chunk 1 | ... | chunk n-1 ]   padded, at full_offset
 *     rank r's shard:           chunk r of every unit, unit u's at shard_offset
 *
 * The memory and traffic rules below are the formulas for your layout: full_numel and
 * shard_numel, padding counted.
 *
 * Every buffer you keep goes through pl_mem_alloc with the category of what it holds
 * (PL_MEM_PARAMS, PL_MEM_GRADS, PL_MEM_OPTIM) and PL_DEVICE, so that the memory ledger
 * measures your savings; the grader compares each category's peak with the ZeRO formulas,
 * and activations (the kit's, PL_MEM_ACTIV) with what your slice of the batch needs.
 *
 * The rules the grader enforces, every one of them (handout section 8 has the figures):
 *   results   4 AdamW steps against the single-device model on the global batch: every
 *             step's loss to a relative error of 1e-5, the parameters after the last step to
 *             a relative L2 error of 1e-4 per tensor, and the gradient each
 *             pl_model_adamw_flat call is given to 1e-4 of the single-device gradient
 *             clipped by the WHOLE gradient's norm, at every step. Every parameter is given
 *             to pl_model_adamw_flat exactly once per step, at its own flat offset, never the
 *             padding; its t is the steps this model has taken since zero_new, this one
 *             included (z->t). Every rank ends a step with the same model, bit for bit. Each
 *             stage runs three times, each on a new zero_new: clipping at the default
 *             threshold, off, and between the norms of the ranks' shards; stage 3 runs the
 *             one without clipping with prefetch = 0, and both paths are graded alike.
 *             zero_layout_init is judged by the invariants above, on many model sizes and
 *             1 to 9 ranks, every rank's.
 *   groups    comm is the data-parallel group: from 4 ranks a run splits the world into two
 *             groups, each on its own batches, another model shape and AdamW setting. Rank,
 *             rank count and every collective are comm's, and cfg and opt are used as given.
 *             Every run's comm is freed after zero_free: every handle (a prefetch included)
 *             is waited for before the step that started it returns.
 *   traffic   from the traffic ledger, per rank per step, on 2 ranks and more: stages 1 and
 *             2, one reduce-scatter and one all-gather of the padded model, 4 x full_numel x
 *             (n-1)/n bytes each; stage 3, the reduce-scatter and the all-gathers the
 *             handout's section 5 counts (a unit less, keeping the last unit from forward
 *             to backward, is accepted too); besides them only the one-number all-reduce of
 *             the gradient norm: no all-reduce of the gradient, no broadcast, no barrier.
 *   memory    each rank's peak per category, from zero_new to the last step, on 2 ranks and
 *             more: params 4 x full_numel (stages 1, 2) or 4 x shard_numel plus the two
 *             largest units (stage 3; with prefetch = 0 the largest unit, as nothing is
 *             gathered ahead); grads 4 x full_numel (stage 1) or 4 x shard_numel
 *             plus two units' buckets at most and half the last unit's at least (stages 2,
 *             3: a bucket holds gradients); optim 8 x shard_numel; activations the
 *             single-device activation peak / n and 4 kB beside. The total at the peak,
 *             every category together, is bounded by the same sum plus the workspace the
 *             kit's pass needs, so a copy filed under any category is counted. A step frees
 *             what it allocates; zero_free frees everything; pl_comm_buf_alloc memory is not
 *             a place to keep parameters or gradients. A buffer given to the pass or to
 *             AdamW is pl_mem_alloc'd with PL_DEVICE, never PL_HOST, a stack or a static
 *             array. The code may not call malloc, calloc, realloc or the rest of the C
 *             allocator family, mmap, sbrk or brk (the build lists the symbols the code
 *             calls, and a forbidden one fails every test before anything runs).
 *   prefetch  stage 3 with prefetch = 1, on 2 ranks (4 on a machine with 4 cores): the
 *             share of all-gather time your step's own trace hides behind compute on the
 *             modelled dgx-h100 timeline, against the most any step can hide on the same
 *             model: full marks from 80% of that bound, none up to 20%. A pl_test that finds
 *             a gather done counts as a wait where it is called.
 *   time      each stage's step time against the kit's forward, backward and AdamW on the
 *             same shares and the library's collectives of the same units, run one after the
 *             other in the same run: full marks from 0.7x of that speed.
 *   calls     communication only through lib's calls, by their own names: no MPI_*, nccl*,
 *             dlopen, dlsym or syscall, and none of the calls that reach into the process or
 *             the kit's measurements (threads, signals, timers, atexit, the ledger's and
 *             trace's own functions).
 * Traffic, memory, prefetch and time count only once the stage trains correctly; prefetch
 * and time only once it also keeps within its memory. */
#ifndef LAB_ZERO_H
#define LAB_ZERO_H

#include <stddef.h>

#include "comm.h"
#include "model.h"
#include "part_pass.h"
#include "todo.h"

#define ZERO_MAX_UNITS 64 /* n_layers + 2 */
/* A chunk may exceed the shortest that covers its unit by at most ZERO_MAX_ALIGN - 1
 * elements: enough to round it up to a multiple of any alignment up to 64 floats (256
 * bytes). */
#define ZERO_MAX_ALIGN 64

/* ---- the layout of the shards ---- */

struct zero_unit {
    int part;            /* PL_PART_EMBED (-1), a block 0..L-1, or the head L */
    size_t offset;       /* the part's first element in the model's flat layout */
    size_t numel;        /* its elements */
    size_t chunk;        /* what each rank owns of it, padding included */
    size_t padded;       /* n * chunk >= numel */
    size_t full_offset;  /* where the unit starts in a full buffer */
    size_t shard_offset; /* where this rank's chunk starts in its shard */
};

struct zero_layout {
    int n, rank;
    int nunits;                            /* n_layers + 2, in flat order */
    struct zero_unit unit[ZERO_MAX_UNITS]; /* unit u holds part u - 1 */
    size_t numel;                          /* Psi: the model's parameters */
    size_t full_numel;                     /* a full buffer: the sum of padded */
    size_t shard_numel;                    /* a shard: the sum of chunk = full_numel / n */
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
    struct zero_layout zl;      /* this rank's layout: the grader reads your buffers by it */
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

/* Fills zl with your layout of a model of layout lay on n ranks, as rank `rank` sees it,
 * keeping the invariants at the top of this file. zero_new stores it in z->zl. Handout
 * section 2. */
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
