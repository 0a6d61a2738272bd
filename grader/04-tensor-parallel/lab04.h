/* lab04.h: what the files of Lab 4's grader share, on the lab harness's new shape
 * (grader/common/harness.h). Its state (struct l4_state) is the harness's, made by setup on
 * the heap; a case fills this rank's observation (struct l4_obs) and judge.c gives the
 * verdicts from every rank's, on rank 0, without MPI. The files depend one way:
 * driver.c -> cases*.c, judge.c, bench.c; bench.c -> cases*.c; nothing else.
 *
 *   cases.c        the model, shapes and grids; inputs and comparisons; f and g; linears
 *   cases_block.c  the MLP, the attention and the block; the placement op
 *   cases_train.c  the vocabulary-parallel loss; K steps of training
 *   judge.c        the verdicts (no MPI; tests/judge/04-tensor-parallel.c runs them alone)
 *   bench.c        bench mode, the perf mode's timing, the figures, the modelled timeline
 *   unseen.c       the collectives' wrappers (lab.mk) */
#ifndef LAB04_H
#define LAB04_H

#include <stddef.h>
#include <stdint.h>

#include "block_time.h"
#include "harness.h"
#include "paralab.h"
#include "tensors.h"
#include "tp.h"
#include "train.h"

#define L4_TOL_FWD 1e-5 /* docs/design.md: relative L2 per tensor, fp32 forward */
#define L4_TOL_BWD GR_TOL_GRADS
#define L4_PLACE_NODES 2
#define L4_PLACE_PER_NODE 4
#define L4_PLACE_TP 4
#define L4_NCASES 3
#define L4_TRAIN_STEPS 3
#define L4_TRAIN_B 4
#define L4_TRAIN_LAYERS 2
#define L4_CORPUS_TOKENS 8192
#define L4_TEXT 768 /* a reason or a note, as the ranks state it */

/* The parts a case is judged on. */
enum l4_part { L4_CORRECT, L4_TRAFFIC, L4_MEMORY, L4_PLACEMENT, L4_ORDER, L4_TIME, L4_NPARTS };
extern const char *const L4_PART_NAMES[L4_NPARTS];

enum l4_kind { L4_CONJ, L4_LINEAR, L4_MLP, L4_ATTN, L4_BLOCK, L4_VOCAB, L4_TRAIN, L4_PLACE };
extern const char *const L4_KIND_OPS[L4_PLACE + 1];
extern const char *const L4_KIND_SUBJECTS[L4_PLACE + 1];

/* ---- what one rank observed in one case (gathered to rank 0; judge.c) ---- */

/* The traffic of one pass, from the ledger. */
struct l4_traffic {
    long ar_calls, other_calls;
    double ar_bytes, other_bytes;
};

/* A pass judged by its all-reduces: it needs `calls` of `count` floats each, nothing else. */
struct l4_pass {
    char name[40];  /* "forward", "f's backward" */
    char where[96]; /* what the needed all-reduces are, in words */
    struct l4_traffic tr;
    long calls;
    double count;
    int t;
};

/* The vocabulary-parallel embedding and loss: their collectives and the head's memory. */
struct l4_vocab {
    int t, B, T, C, V;
    long calls, ar_calls, ag_calls;
    double bytes, ag_bytes;      /* all collectives; all-gathers alone */
    double held;                 /* peak beyond the activations, from the ledger */
    double hidden;               /* collectives' buffers outside it (unseen_span.h) */
    int hidden_where;
    char hidden_call[32];
    char hidden_region[96];      /* gr_unseen_where(hidden_where) */
};

/* The block on the modelled timeline, replayed on rank 0 (block_time.h). */
struct l4_time {
    int traced;      /* 1: a complete trace was replayed */
    char err[256];   /* why not, when a trace was held */
    int t;
    double step, compute, bound, ratio;
    double split;    /* the single device's compute split t ways (s) */
};

/* A rank's own statement of a part: the first failure it found, and what the part says
 * when every rank passed it (rank 0's, on the last case). */
struct l4_said {
    int failed;
    char why[L4_TEXT];
    char note[L4_TEXT];
};

struct l4_obs {
    struct l4_said part[L4_NPARTS];
    int npass;                  /* passes judged for part traffic */
    struct l4_pass pass[4];
    int has_vocab;              /* parts traffic and memory of op vocab */
    struct l4_vocab vocab;
    int has_time;               /* part time (rank 0) */
    struct l4_time time;
};

/* ---- the lab's state (the harness's; driver.c makes it) ---- */

struct l4_perf; /* bench.c's timed block */
struct l4_block;

struct l4_state {
    uint64_t grading_seed; /* --seed */
    /* the seed the running case draws its inputs from: the grading seed, or on a TP x DP
     * grid one of its own per DP replica, so that groups hold different data */
    uint64_t base_seed;
    enum l4_kind kind;
    int want_time;              /* check mode judges part time */
    int ncases;
    const char *plots_dir;      /* bench: --plots-dir, or NULL */
    struct l4_obs *ob;          /* the observation being filled (observe) */
    int cur;                    /* the part l4_fail records against */
    struct l4_time time_last;   /* the traced case's replay, said again on the others */
    struct pl_comm *perf_tp;
    struct l4_perf *perf;
};

/* The batch shapes of the layer ops' cases. */
struct l4_shape {
    int B, T;
};
extern const struct l4_shape L4_SHAPES[2];

/* ---- cases.c ---- */

/* The graded model: 8 heads so that t = 8 splits them too; every degree that divides 8
 * divides d_ff and the vocabulary. */
struct pl_model_config l4_config(const struct l4_state *st);
/* Case i: L4_SHAPES[0], [1], then one drawn from the grading seed with B > 1, T < seq_len. */
struct l4_shape l4_shape_of(const struct l4_state *st, int i);
int l4_ncases(const struct l4_state *st);
void l4_describe(const struct l4_state *st, int i, char *buf, size_t len);
/* Collective: runs case i of the layer ops, vocab and train into st->ob. */
void l4_run_case(struct l4_state *st, int i);

/* This rank's statements (into st->ob, part st->cur). */
void l4_fail(struct l4_state *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void l4_note(struct l4_state *st, int part, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int l4_ok(const struct l4_state *st);
/* Records a pass for part traffic. */
void l4_pass(struct l4_state *st, const char *name, const struct l4_traffic *tr, long calls,
             double count, int t, const char *where);
void l4_traffic_since(const struct pl_ledger *mark, struct l4_traffic *out);
/* got against ref (op memory), as gr_compare, the reason recorded on part st->cur. */
int l4_compare(struct l4_state *st, const char *what, const float *got, const float *ref,
               size_t n, double tol, const char *hint);
int l4_extra_bias(const float *got, const float *ref, const float *b, int N, int OC, int t);
const char *l4_world_hint(struct pl_comm *tp);
int l4_compare_accumulated(struct l4_state *st, const char *what, const float *got,
                           const float *init, const float *ref, size_t n, double tol,
                           const char *hint);
int l4_compare_written(struct l4_state *st, const char *what, const float *got,
                       const float *junk, const float *ref, size_t n, double tol,
                       const char *hint);
float *l4_junk(struct l4_state *st, const char *name, size_t n);
/* got - init (op memory). */
float *l4_minus(const float *got, const float *init, size_t n);
int l4_near(const float *got, const float *ref, size_t n, double tol);
/* Each shard gradient of the tensors in `which` (indices into the block's tensor table)
 * against its block of the full gradient. */
void l4_compare_shard_grads(struct l4_state *st, const struct l4_block *k, const int *which,
                            int n, const char *hint);

struct l4_block;
/* A full block with every tensor random, and the shard of TP rank r of t sliced from it. */
struct l4_block {
    struct pl_model_config cfg;
    int t, r, B, T, N;
    size_t full_numel, shard_numel;
    float *full, *full_g;
    float *shard, *shard_g;
    float *shard_g0; /* what shard_g held when handed over */
    struct pl_block_params p, g, sp, sg;
    float *x, *dy;
};
void l4_block_new(struct l4_state *st, struct l4_block *k, int t, int r, int B, int T);
void l4_block_free(struct l4_block *k);

/* ---- cases_linear.c ---- */

void l4_run_conjugates(struct l4_state *st, struct pl_comm *tp);
void l4_run_linear(struct l4_state *st, struct pl_comm *tp, int i);

/* ---- cases_block.c ---- */

enum l4_sub { L4_SUB_MLP, L4_SUB_ATTN, L4_SUB_BLOCK };

struct l4_sub_run {
    struct l4_traffic fwd, bwd;
    struct pl_ledger code;    /* the student's forward and backward alone */
    double oracle_flops;      /* the single device's forward and backward */
    double activation_floats; /* N x C: the size of each all-reduce */
};

void l4_run_sub_case(struct l4_state *st, struct pl_comm *tp, enum l4_sub s, int B, int T,
                     int traced, struct l4_sub_run *run);
void l4_run_sub(struct l4_state *st, struct pl_comm *tp, enum l4_sub s, int i);
void l4_run_placement(struct l4_state *st, int i);
/* Modelled time on dgx-h100 of the traced block, and of the same bytes inside a node. */
void l4_modelled_cost(const struct pl_ledger *d, double *as_run, double *inside);

/* ---- cases_train.c ---- */

void l4_run_vocab(struct l4_state *st, struct pl_comm *tp, int i);
void l4_run_train(struct l4_state *st, struct pl_comm *tp);

/* ---- judge.c: no MPI ---- */

int l4_judge(int kind, int i, int ncases, const char *part, const struct gr_obs *all,
             struct gr_why *why);
/* The verdict of one pass (judge.c): 1, or 0 with the reason in buf. */
int l4_judge_pass(const struct l4_pass *p, char *buf, size_t len);

/* ---- bench.c ---- */

void l4_bench(const struct gr_args *args);
int l4_probe(struct l4_state *st, struct pl_comm *tp);
double l4_perf(struct l4_state *st);
void l4_perf_free(struct l4_state *st);

#endif
