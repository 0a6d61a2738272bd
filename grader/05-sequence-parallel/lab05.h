/* lab05.h: what the files of Lab 5's grader (sequence parallelism on top of tensor
 * parallelism) share. The files depend one way: driver.c -> cases*.c, checks_block.c,
 * bench.c; bench.c -> cases*.c; cases*.c -> checks_block.c.
 *
 *   cases.c          the model and the cases, traffic, rows; op conjugates
 *   cases_block.c    op block: the case's tensors, the oracle, the student's passes
 *   checks_block.c   this rank's checks of a block case
 *   cases_train.c    op train: K AdamW steps of a 2-block model
 *   bench.c          bench mode, the handout's figures, the perf mode's timing
 *   unseen.c         the kit's core, collectives and layout moves wrapped (lab.mk) */
#ifndef LAB05_H
#define LAB05_H

#include <stddef.h>
#include <stdint.h>

#include "block_time.h"
#include "harness.h"
#include "parts.h"
#include "paralab.h"
#include "sp.h"
#include "sp_shard.h"
#include "svg.h"
#include "tensors.h"
#include "todo.h"
#include "tp_shard.h"
#include "train.h"
#include "unseen.h"

#define TOL_FWD 1e-5 /* docs/design.md: relative L2 per tensor, fp32 forward */
#define TOL_BWD GR_TOL_GRADS
#define DROPOUT 0.1f

enum l5_kind { L5_CONJ, L5_BLOCK, L5_TRAIN };

struct l5_perf; /* bench.c's timed block */

/* The lab's state: the harness's, made by setup on the heap (driver.c). */
struct l5_state {
    uint64_t seed;          /* --seed: the data and the drawn shapes */
    int seq;                /* --seq: every case's T (0: the cases' own) */
    int hidden;             /* --op block-hidden, train-hidden: other grids and shapes */
    enum l5_kind kind;
    int want_time;          /* check mode judges part time */
    int in_bench;           /* the bench runs a TP group smaller than the world: no replica test */
    const char *plots_dir;  /* bench: --plots-dir, or NULL */
    struct gr_bt_verdict time_verdict;
    struct l5_perf *perf;
};

/* One block case. p: the configured dropout; train: ctx->train (evaluation keeps dropout
 * configured but off); dp > 1: the world is a tp x dp grid (order "tp-dp": TP groups of
 * consecutive ranks; "dp-tp": strided), each DP replica on its own sequences and data;
 * accum: the split gradients are handed over holding other values and a second
 * micro-batch's backward adds to them before the synchronisation. */
struct sp_case {
    int B, T, dropout, seq0, step, train, layer, dp, accum;
    float p;
    const char *order;
};
#define NCASES 5
#define CASE_EVAL 3
#define CASE_GRID 4

/* The parts this rank judges (grader/common/parts.h), gathered to rank 0 by judge(). */
enum part { P_CORRECT, P_REPLICAS, P_TRAFFIC, P_MEMORY, P_TIME, NPARTS };
extern const char *const PART_NAMES[NPARTS];

/* The traffic of one pass, from the ledger. */
struct pass_traffic {
    long ag, rs, ar, other;
    double ag_bytes, rs_bytes, ar_bytes, other_bytes;
};

/* ---- cases.c ---- */

/* 8 heads so that t = 1, 2, 4 split them; seq_len 16 so that T/t is 4 tokens at t = 4. */
struct pl_model_config l5_config(const struct l5_state *st, float dropout);
struct sp_case l5_case_of(const struct l5_state *st, int i, int n);
void l5_traffic_since(const struct pl_ledger *mark, struct pass_traffic *out);
/* A ring all-gather or reduce-scatter of a full [N, C] sends (t-1)/t of it per rank. */
double l5_coll_bytes(double NC, int t);
float *l5_local_rows(const float *full, int B, int T, int C, int t, int r);
/* Relative L2 error of n floats of op memory against ref (op memory). */
double l5_rel_l2(const float *got, const float *ref, size_t n);
/* What a case on a tp x dp grid adds to a failure: the group is not the world. */
void l5_grid_hint(const struct sp_case *kc, int t, char *buf, size_t len);
void l5_run_conjugates(const struct l5_state *st, struct pl_comm *tp);

/* ---- cases_block.c ---- */

/* One block case's tensors: the full block and this rank's shard (with their gradients),
 * the input and output gradient of every token, and this rank's rows of each; with accum,
 * the gradients the split tensors held before (g0) and a second micro-batch (x2, dy2). */
struct block_case {
    struct pl_model_config c;
    int t, r, B, T, C, layer, d;
    size_t nc, nl, full_numel, shard_numel;
    float *full, *full_g, *shard, *shard_g, *x, *dy, *y, *dx, *lx, *ldy, *ly, *ldx;
    float *g0, *g_last, *x2, *dy2; /* accum only: full [numel], full [numel], [nc], [nc] */
    struct pl_block_params p, g, sp, sg;
    struct pl_model_ctx ctx, ctx2;
};

struct block_run {
    struct pass_traffic fwd, bwd, sync;
    double held, peak; /* bytes kept from the forward to the backward; peak of the step */
    double left;       /* bytes still held once the backward returned and the acts were freed */
    double oracle_flops; /* the single device's forward and backward, from the ledger */
    double activation_floats; /* the whole [B, T, C] activation */
    double flops, core_flops; /* this rank's block, and the part of it in the kit's core */
    double core_once;         /* one forward and one backward of each half's core */
    struct gr_unseen unseen;  /* a buffer of the conjugates or the core in static storage */
    char kept[160];           /* another rank's rows found in static storage after the forward */
};

void l5_block_case_new(const struct l5_state *st, struct pl_comm *tp, const struct sp_case *kc, int d,
                       struct block_case *k);
void l5_block_case_free(struct block_case *k);
void l5_run_block_case(const struct l5_state *st, struct pl_comm *tp, const struct sp_case *kc, int d, int traced,
                       struct block_run *run);
void l5_run_block(struct l5_state *st, struct pl_comm *tp, const struct sp_case *kcp, int d, int i);

/* ---- checks_block.c ---- */

void l5_judge_replicas(struct pl_comm *tp, const struct sp_case *kc,
                       const struct pl_model_config *c, int t, const float *shard_g,
                       const float *want, const float *last);
int l5_judge_block_rows(const struct block_case *k, const struct sp_case *kc);
void l5_judge_dropout_alone(struct pl_comm *tp, const struct block_case *k);
void l5_judge_split_grads(const struct block_case *k, int fwd_ok, float *wg, float *wl);
void l5_judge_block_traffic(const struct block_run *run, int t, double NC, int C);
void l5_judge_block_memory(const struct block_run *run, const struct pl_model_config *c,
                           int t, int B, int T);
void l5_judge_block_work(struct pl_comm *tp, const struct block_run *run, int t);

/* ---- cases_train.c ---- */

#define TRAIN_STEPS 3
#define TRAIN_B 2

/* A training case. dp = 1: the TP group is the world. dp > 1: a tp x dp grid whose TP
 * groups are smaller than the world and numbered against its order (strided: the ranks w
 * with the same w % dp; else consecutive: the same w / t; highest world rank first), each
 * DP replica d on its own B sequences, d B to d B + B - 1 of the global batch, and the
 * trainer (the grader) averages the block gradients over the replicas after the student's
 * synchronisation, as data parallelism does. */
struct train_case {
    int dp, strided, B;
};
struct train_case l5_train_case_of(const struct l5_state *st, int i, int n);
int l5_train_cases(const struct l5_state *st, int n);
void l5_run_train(const struct l5_state *st, struct pl_comm *tp, const struct train_case *kt, int d, int i);

/* ---- bench.c ---- */

void l5_bench(const struct gr_args *args);
int l5_probe(struct l5_state *st);
double l5_perf(struct l5_state *st);

/* ---- unseen.c: the core FLOPs counted in the wrappers of the kit's core ---- */

double lab05_core_flops(void);
double lab05_core_flops_once(void);

#endif
