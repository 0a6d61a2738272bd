/* shard_state.h: sharded training state and the kit's sharded training step (Lab 10).
 *
 * n ranks of a communicator each own one contiguous shard of the flat parameter vector and
 * of both AdamW moments: rank r owns [floor(r P / n), floor((r+1) P / n)) of the P
 * parameters, so the shards differ by one element when n does not divide P. Beside the
 * shards every rank holds the same small training state: the optimizer steps taken, the
 * RNG state each step draws its dropout seed from, and the data position (the token the
 * next batch starts at). Shards, moments and that state are all a resumed run needs.
 *
 * The step (pl_shard_step), ZeRO style, for a global batch of K sequences, one per
 * microbatch, K a multiple of n:
 *   1. all-gather the parameters from their owners into a full copy;
 *   2. each rank runs the forward and backward of its K/n microbatches (sequences
 *      [r K/n, (r+1) K/n) of the batch), each into gradients of its own, with dropout masks
 *      drawn by the sequence's index in the global batch;
 *   3. every microbatch's gradient slice goes to the slice's owner (an all-to-all-v), which
 *      sums the K of them in microbatch order 0, 1, ..., K-1 and scales by 1/K;
 *   4. AdamW on the owned shard (no clipping: a global norm would be a sum whose order
 *      depends on where the shards end);
 *   5. the loss is the mean of the K microbatch losses, summed in microbatch order.
 * Nothing in it depends on n: every microbatch's passes are the same arithmetic on any
 * rank, and every sum runs in an order fixed by the batch, so the state after step s is
 * bit for bit the same on any rank count that divides K, one rank included. That is what
 * makes a restart on another rank count checkable bit for bit (docs/labs/10-fault-tolerance.md).
 *
 * Buffers marked "op memory" are device memory on the GPU build; pl_shard_get and
 * pl_shard_set copy a shard to and from host memory. */
#ifndef PL_SHARD_STATE_H
#define PL_SHARD_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "model.h"

/* What identifies a run: the same on every rank. */
struct pl_shard_run {
    struct pl_model_config cfg;
    struct pl_adamw_config opt; /* grad_clip is ignored (see above) */
    int batch;                  /* K: sequences per step, one per microbatch */
    uint64_t seed;              /* data, RNG and the run's id */
    uint64_t run_id;            /* derived from seed: a checkpoint of another run differs */
};

struct pl_shard_state {
    struct pl_shard_run run;
    struct pl_comm *comm;
    int n, rank;
    size_t numel;         /* P, the model's parameter count */
    size_t offset, count; /* this rank's shard: [offset, offset + count) */
    /* The training state, the same on every rank. */
    int64_t step;         /* optimizer steps taken */
    uint64_t rng;         /* each step draws its dropout seed from this, then advances it */
    int64_t data_pos;     /* the first token of the next batch in the data stream (it starts
                             past 2^32: 64 bits of it are state) */
    /* The shard (op memory, count floats each): parameters and both AdamW moments. */
    float *params, *adam_m, *adam_v;
    /* The step's own buffers (derived: nothing of the state lives here). */
    struct pl_model *model;  /* full parameters (gathered) and one microbatch's gradients */
    float *send, *recv;      /* microbatch gradient slices on their way to their owners */
    int *tokens, *targets;   /* one sequence */
    float *loss_mine, *loss_all; /* the microbatches' losses: this rank's, every rank's */
    int on_host; /* 1: pl_shard_host_copy's: the shard in host memory, no step buffers */
};

/* Bounds of the step's own tables. */
#define PL_SHARD_MAX_RANKS 64
#define PL_SHARD_MAX_BATCH 256
#define PL_SHARD_MAX_SEQ 256

/* Rank r's shard of numel elements on n ranks: [floor(r numel / n), floor((r+1) numel / n)). */
void pl_shard_range(size_t numel, int n, int r, size_t *offset, size_t *count);

/* The lab's small model (vocab 62, d_model 15, 2 layers, 3 heads, d_ff 37, 8 tokens, dropout
 * 0.1: P = 6374, which 3, 4, 6 and 8 do not divide), K = 24, AdamW's defaults, from seed. */
struct pl_shard_run pl_shard_run_default(uint64_t seed);
/* run_id of a seed. */
uint64_t pl_shard_run_id(uint64_t seed);

/* Collective over comm: this rank's shard of the run's initial state (step 0). A rank count
 * that does not divide K is a usage error naming the counts that do. */
struct pl_shard_state *pl_shard_state_new(const struct pl_shard_run *run, struct pl_comm *comm);
void pl_shard_state_free(struct pl_shard_state *s);

/* Collective: one training step as above; returns the step's loss (the same on every rank). */
double pl_shard_step(struct pl_shard_state *s);

/* Host copies of this rank's shard (count floats each; any pointer may be NULL), and back. */
void pl_shard_get(const struct pl_shard_state *s, float *params, float *adam_m, float *adam_v);
void pl_shard_set(struct pl_shard_state *s, const float *params, const float *adam_m,
                  const float *adam_v);

/* A copy of s that needs no device and no communicator: its shard (params and both moments)
 * in host memory, its training state, no step buffers (model, send, recv, tokens, targets
 * and the losses NULL). pl_shard_get reads it with plain copies, so it serves a process
 * forked from this one, where a GPU's context and MPI do not carry over (Lab 10's grader
 * runs each save so, to kill it mid-write). Free it with pl_shard_state_free; it cannot
 * step or be set. */
struct pl_shard_state *pl_shard_host_copy(const struct pl_shard_state *s);

/* The token at position pos of the run's data stream (targets are the next token). */
int pl_shard_token(const struct pl_shard_run *run, int64_t pos);

#endif
