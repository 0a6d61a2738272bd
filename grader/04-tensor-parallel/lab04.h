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
#define L4_TEXT 1024 /* a reason or a note, as judge.c words it */

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

/* Why a comparison is likeliest wrong: a class, with its figures (judge.c words it). */
enum l4_hint_kind {
    L4_H_NONE, L4_H_COL_Y, L4_H_COL_DX, L4_H_ROW_Y, L4_H_ROW_BIAS, L4_H_OUT_BIAS, L4_H_HEADS,
    L4_H_FEWER_AR, /* h: all-reduces made, needed */
    L4_H_MORE_AR,  /* h: all-reduces made, needed */
    L4_H_SUB_DX,   /* (world) */
    L4_H_SUMMED,   /* h: t */
    L4_H_EMBED,    /* h: the slice's first and last id, T, T < seq_len; (world) */
    L4_H_HEAD_DX, L4_H_OVERWROTE, L4_H_WRITTEN_ADDED
};

struct l4_hint {
    int kind;       /* enum l4_hint_kind */
    int handed;     /* a gradient handed over non-zero: compared is what the backward added */
    double h[4];
    int world;      /* the TP group is smaller than the world */
};

/* One tensor against the oracle's, as it failed. */
struct l4_cmp {
    struct gr_cmp fig;
    struct l4_hint hint;
};

/* Why a rank failed a part (judge.c's reason text reads the figures v and names). */
enum l4_why {
    L4_W_NONE,
    L4_W_COMPARE,      /* name: the tensor; cmp */
    L4_W_CONJ,         /* v: which pass, element, got, want, the sum's element */
    L4_W_NO_GROUP,
    L4_W_NOT_TP_GROUP, /* name: the grid; v: rank, the group's size, the TP group's */
    L4_W_GROUP_ORDER,  /* names: the grid, the group given, the TP group; v: rank */
    L4_W_GROUP_WRONG,  /* as L4_W_GROUP_ORDER */
    L4_W_PLACE_SIZE,   /* name: the order; v: the group's size */
    L4_W_SPANS,        /* name: the group; v: bytes inter-node, all, time as run, inside */
    L4_W_NO_CROSS,     /* name: the group */
    L4_W_LOSS_INF,     /* v: loss, the single device's */
    L4_W_LOSS,         /* v: loss, the single device's, the slice's first and last id */
    L4_W_LIVE_GROWS,   /* v: step, bytes more, bytes live */
    L4_W_KEPT_AFTER_FREE, /* v: bytes more than before tp_gpt_new, the most of one category, it */
    L4_W_SHARD_MEM,    /* v: category (0 parameters, 1 gradients, 2 moments), held, bound, t */
    L4_W_ACT_MEM,      /* v: held, bound */
    L4_W_TOTAL_MEM,    /* name: where buffers outside the ledger were; v: held, bound, the
                        * states', the activations', the work's, bytes outside the ledger */
    L4_W_FLOPS,        /* v: this rank's, the single device's, t */
    L4_W_FLOPS_LOW,    /* v: this rank's, the single device's, t */
    L4_W_SENT_FLOOR,   /* v: sent, the least */
    L4_W_SENT_MOST,    /* v: sent, calls, all-reduces, the most, its calls, L */
    L4_W_WEIGHTS,      /* name: the tensor; v: relative error, replicated */
    L4_W_NO_MODEL,
    L4_W_STEP_LOSS,    /* v: step, loss, the single device's, relative error */
    L4_W_ATT_OVERRUN   /* v: a->att floats written, held, one head's, NH, t, q k v right and
                        * heads wrong, the heads' relative error, found before training */
};

#define L4_NAME 160

struct l4_said {
    int code; /* enum l4_why; L4_W_NONE: passed */
    double v[8];
    char name[3][L4_NAME];
    struct l4_cmp cmp;
};

/* What the note of a passing part says: rank 0's figures of the case. */
struct l4_figs {
    int t, B, T;
    double loss, share;                    /* train: the last loss, the FLOPs' fraction */
    double states, act, act_bound, total, total_bound; /* train: bytes per rank */
    double run, inside, inter;             /* placement: modelled s, the most inter-node bytes */
    char members[64];                      /* placement: the TP group */
};

struct l4_obs {
    struct l4_said part[L4_NPARTS]; /* this rank's first failure of each */
    struct l4_figs figs;
    int npass;                      /* passes judged for part traffic */
    struct l4_pass pass[4];
    int has_vocab;                  /* parts traffic and memory of op vocab */
    struct l4_vocab vocab;
    int has_time;                   /* part time (rank 0) */
    struct gr_bt_figures time;
    int has_world;                  /* case 0's figures, its TP group the world, which the */
    struct l4_figs world;           /* notes of the last case quote whatever its own grid */
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
    struct gr_bt_figures time_last;   /* the traced case's replay, said again on the others */
    int has_world;                    /* case 0 ran with the world as its TP group: */
    struct l4_figs world_figs;        /* its figures, carried into the later cases' records */
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

/* This rank's first failure of part st->cur, with figures v[n] (NULL when the part has
 * failed already); L4_FAIL(st, code, figures...). */
struct l4_said *l4_fail(struct l4_state *st, enum l4_why code, const double *v, int n);
#define L4_FAIL(st, code, ...)                                                                  \
    l4_fail(st, code, (const double[]){__VA_ARGS__},                                            \
            (int)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double)))
/* Names k of a failure (s may be NULL). */
void l4_name(struct l4_said *s, int k, const char *name);
int l4_ok(const struct l4_state *st);
/* Records a pass for part traffic. */
void l4_pass(struct l4_state *st, const char *name, const struct l4_traffic *tr, long calls,
             double count, int t, const char *where);
void l4_traffic_since(const struct pl_ledger *mark, struct l4_traffic *out);
/* got against ref (op memory): relative L2 error within tol and every element finite, or the
 * figures of the failure recorded on part st->cur. */
int l4_compare(struct l4_state *st, const char *what, const float *got, const float *ref,
               size_t n, double tol, struct l4_hint hint);
int l4_extra_bias(const float *got, const float *ref, const float *b, int N, int OC, int t);
int l4_compare_accumulated(struct l4_state *st, const char *what, const float *got,
                           const float *init, const float *ref, size_t n, double tol,
                           struct l4_hint hint);
int l4_compare_written(struct l4_state *st, const char *what, const float *got,
                       const float *junk, const float *ref, size_t n, double tol,
                       struct l4_hint hint);
float *l4_junk(struct l4_state *st, const char *name, size_t n);
/* got - init (op memory). */
float *l4_minus(const float *got, const float *init, size_t n);
int l4_near(const float *got, const float *ref, size_t n, double tol);
/* Each shard gradient of the tensors in `which` (indices into the block's tensor table)
 * against its block of the full gradient. */
void l4_compare_shard_grads(struct l4_state *st, const struct l4_block *k, const int *which,
                            int n);

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

/* a->att handed over with room for all NH heads' scores (cases_block.c): kit is the acts'
 * own buffer, held its floats (this rank's NH/t heads), room all NH heads', per_head one
 * head's [B, T, T]. */
struct l4_att_guard {
    float *kit, *roomy;
    size_t held, room, per_head;
};
void l4_att_guard_set(struct l4_att_guard *g, struct pl_tp_attn_acts *a,
                      const struct pl_model_config *c, int t);
/* The floats of a->att the code wrote: held, or more when it ran past the kit's size. */
double l4_att_guard_used(const struct l4_att_guard *g);
/* Gives the acts their own buffer back. */
void l4_att_guard_end(struct l4_att_guard *g, struct pl_tp_attn_acts *a);
/* Collective: one call of the student's tp_attention_forward on a guarded a->att, before
 * the training; 1 on every rank when any rank's wrote past the kit's scores (recorded as
 * this rank's failure of the current part), 0 otherwise. */
int l4_att_probe(struct l4_state *st, struct pl_comm *tp);

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
/* Rank r's failure s of a part in words: what a student reads after "rank R: ". */
void l4_reason(const struct l4_said *s, char *buf, size_t len);

/* ---- bench.c ---- */

void l4_bench(const struct gr_args *args);
int l4_probe(struct l4_state *st, struct pl_comm *tp);
double l4_perf(struct l4_state *st);
void l4_perf_free(struct l4_state *st);

#endif
