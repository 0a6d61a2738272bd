/* lab05.h: what the files of Lab 5's grader (sequence parallelism on top of tensor
 * parallelism), on the lab harness's new shape (grader/common/harness.h). Its state (struct
 * l5_state) is the harness's, made by setup on the heap; a case fills this rank's observation
 * (struct l5_obs: figures and names, never sentences) and judge.c gives the verdicts from
 * every rank's, on rank 0, without MPI. The files depend one way: driver.c -> cases*.c,
 * judge.c, bench.c; bench.c -> cases*.c; cases*.c -> checks_block.c.
 *
 *   cases.c          the model and the cases, traffic, rows; op conjugates
 *   cases_block.c    op block: the case's tensors, the oracle, the student's passes
 *   checks_block.c   this rank's checks of a block case, recorded in its observation
 *   judge.c          the verdicts (no MPI; tests/judge/05-sequence-parallel.c runs them alone)
 *   cases_train.c    op train: K AdamW steps of a 2-block model
 *   bench.c          bench mode, the handout's figures, the perf mode's timing
 *   unseen.c         the kit's core, collectives and layout moves wrapped (lab.mk)
 *   cases_ring.c     op ring, the second part: causal ring attention on cp ranks
 *   judge_ring.c     its verdicts (no MPI) */
#ifndef LAB05_H
#define LAB05_H

#include <stddef.h>
#include <stdint.h>

#include "block_time.h"
#include "harness.h"
#include "paralab.h"
#include "sp.h"
#include "sp_shard.h"
#include "svg.h"
#include "tensors.h"
#include "todo.h"
#include "tp_shard.h"
#include "train.h"
#include "unseen.h"

#define L5_TOL_FWD 1e-5 /* docs/design.md: relative L2 per tensor, fp32 forward */
#define L5_TOL_BWD GR_TOL_GRADS
#define L5_DROPOUT 0.1f

enum l5_kind { L5_CONJ, L5_BLOCK, L5_TRAIN, L5_RING };

struct l5_perf; /* bench.c's timed block */

/* One block case. p: the configured dropout; train: ctx->train (evaluation keeps dropout
 * configured but off); dp > 1: the world is a tp x dp grid (order "tp-dp": TP groups of
 * consecutive ranks; "dp-tp": strided), each DP replica on its own sequences and data;
 * accum: the split gradients are handed over holding other values and a second
 * micro-batch's backward adds to them before the synchronisation. */
struct l5_case {
    int B, T, dropout, seq0, step, train, layer, dp, accum;
    float p;
    const char *order;
};
#define L5_NCASES 5
#define L5_CASE_EVAL 3
#define L5_CASE_GRID 4

/* The parts a case is judged on. */
enum l5_part { L5_CORRECT, L5_REPLICAS, L5_TRAFFIC, L5_MEMORY, L5_TIME, L5_NPARTS };
extern const char *const L5_PART_NAMES[L5_NPARTS];

/* The traffic of one pass, from the ledger. */
struct l5_traffic {
    long ag, rs, ar, other;
    double ag_bytes, rs_bytes, ar_bytes, other_bytes;
};

/* ---- what one rank observed in one case (gathered to rank 0; judge.c words it) ---- */

#define L5_TEXT 2048 /* a reason or a note, as judge.c words it */
#define L5_NAME 200
#define L5_REP 6     /* the replicated vectors of a block: ln1, ln2 (weight, bias), b_proj, b_fc2 */
#define L5_C 64      /* the graded model's d_model (l5_config) */

/* Why a comparison is likeliest wrong: a class, with its figures h (judge.c words it). */
enum l5_hint_kind {
    L5_H_NONE,
    L5_H_GRID,          /* h: t, dp; order: the grid's */
    L5_H_EVAL_DROPOUT,  /* h: p */
    L5_H_DROPOUT_ROWS,  /* h: p, block, seq0, step, T, seq_len */
    L5_H_BIAS_T,        /* h: t */
    L5_H_BIAS_NONE,
    L5_H_DX_ADDED,
    L5_H_DX_PARTS,
    L5_H_ALONE_EVAL,    /* sp_dropout_forward alone in evaluation */
    L5_H_ALONE_MASK,
    L5_H_DBRANCH_ADDED,
    L5_H_DBRANCH_WRITE,
    L5_H_ACCUM_LOST,
    L5_H_SECOND_ONLY,
    L5_H_SUMMED,        /* h: t */
    L5_H_AVERAGED
};

struct l5_hint {
    int kind; /* enum l5_hint_kind */
    double h[6];
    char order[8];
};

/* One tensor against the oracle's, as it failed. */
struct l5_cmp {
    struct gr_cmp fig;
    struct l5_hint hint;
};

/* Why a rank failed a part (judge.c's reason text reads the figures v and names). */
enum l5_why {
    L5_W_NONE,
    L5_W_COMPARE,      /* name 0: what was compared; cmp */
    L5_W_CONJ,         /* v: the conjugate, element, got, want, in rank-major order */
    L5_W_STEP_LOSS,    /* v: step, loss, the single device's, relative error */
    L5_W_WEIGHTS,      /* name 0: the tensor; v: relative error, replicated */
    L5_W_REPLICA_SUM,  /* name 0: the tensor; v: replicated, step, error, replica, B, dp, t */
    L5_W_REPLICA_GRID  /* as L5_W_REPLICA_SUM, and v[7] strided, v[8] the world's case
                        * matched; name 1: the TP group's world ranks */
};

struct l5_said {
    int code; /* enum l5_why; L5_W_NONE: passed */
    double v[10];
    char name[2][L5_NAME];
    struct l5_cmp cmp;
};

/* A block case's figures: its grid, each pass's traffic, the bytes held, the work outside
 * the kit's core, and the replicated gradients after the synchronisation. */
struct l5_block_figs {
    int measured;       /* the passes ran on t > 1 ranks (parts traffic, memory, time) */
    struct l5_traffic fwd, bwd, sync;
    double NC;          /* the [B*T, C] activation's floats */
    double held, peak, left, want_held, lab4_held;
    struct gr_unseen unseen;   /* a buffer of the conjugates or the core in static storage */
    int kept_tensor;    /* another rank's rows found in static storage after the forward: which
                         * tensor (-1: none), its row and the group rank it belongs to */
    int kept_member;
    double kept_row;
    double work;        /* this rank's FLOPs outside the kit's core */
    double core_once;   /* one forward and backward of each half's core */
    double oracle_flops, activation_floats;
    int has_rep;        /* part replicas: this rank's replicated gradients */
    int nrep;
    char rep_name[L5_REP][48];
    float rep[L5_REP][L5_C];
};

/* What the notes of passing parts and the group-wide rules read. */
struct l5_figs {
    int t, group, member;   /* the TP group's size, which group (its DP coordinate), rank in it */
    int B, T, C, dp, world;
    int layers, strided, grid_after_world; /* op train */
    double p;                                /* op train: dropout */
};

/* ---- the second part: ring attention (op ring; cases_ring.c, judge_ring.c) ---- */

#define L5_RING_NCASES 2
#define L5_RING_PARTS 5 /* correct, traffic, memory, balance, overlap */
/* The overlap is judged at one long sequence's scale on dgx-h100: T tokens, C channels of q
 * and of k and v, 16-bit; at most this share of the forward's transfers exposed. */
#define L5_RING_REAL_T 131072.0
#define L5_RING_REAL_C 16384.0
#define L5_RING_EXPOSED 0.10

/* What went wrong first in a ring case, on this rank (judge_ring.c words it). */
enum l5_ring_why {
    L5_R_NONE,
    L5_R_LAYOUT,    /* v: rank, chunk[0], chunk[1], what (enum in judge_ring.c), other rank */
    L5_R_OUT,       /* cmp; v: the chunk of the worst row, its first global position */
    L5_R_GRAD,      /* cmp; name: dq, dk or dv; v: the chunk of the worst row, its first
                     * position, the rank whose rows it matches (-1: none), non-finite */
    L5_R_LEFT,      /* v: pass (0 forward), bytes left allocated */
    L5_R_PEAK,      /* v: pass, peak above the arguments, its bound, L, lse bytes, the kit's
                     * block scratch */
    L5_R_TRAFFIC,   /* v: pass, p2p bytes, p2p calls, collectives, bytes low, bytes high */
    L5_R_HOME,      /* v: pass, messages of a rank's own K or V sent to it, L */
    L5_R_UNSEEN     /* v: pass, where (GR_UNSEEN_*); the obs's unseen: which buffer */
};

struct l5_ring_said {
    int code; /* enum l5_ring_why; L5_R_NONE: passed */
    double v[8];
    char name[16];
    struct gr_cmp cmp;
};

/* One rank's observation of a ring case: its chunks, each part's first failure, and the
 * figures the group-wide rules read (FLOPs for the balance, the case for the notes). */
struct l5_ring_obs {
    int cp, r, B, T, C, NH, chunk[2], big;
    int ran;                                /* the passes ran (no stub reached) */
    struct l5_ring_said part[L5_RING_PARTS];
    double fwd_flops, bwd_flops;            /* this rank's attention FLOPs: the kit's block
                                             * calls', counted at each call */
    double fwd_bytes, bwd_bytes;            /* sent point-to-point */
    double fwd_peak, bwd_peak, held;        /* above the arguments; kept by the caller */
    char unseen[96];                        /* L5_R_UNSEEN: the call and argument that got a
                                             * buffer outside pl_mem_alloc's memory */
    int traced;                             /* rank 0, cp > 1, case 0: the forward replayed */
    char trace_err[160];                    /* why it was not */
    double step, compute, comm, exposed;    /* the replayed forward (s), the slowest rank's */
};

struct l5_ring_case {
    int B, T, C, NH;
    float big; /* > 0: a component of size big shared by each head's q and some chunks' k
                * (their scores near big^2/sqrt(HS), a hundred; cases_ring.c) */
};

struct l5_obs {
    struct l5_said part[L5_NPARTS]; /* this rank's first failure of each */
    struct l5_figs figs;
    int has_conj;                   /* op conjugates: each one's traffic */
    struct l5_traffic conj[4];
    struct l5_block_figs block;
    int has_time;                   /* part time (rank 0) */
    struct gr_bt_figures time;
    int has_noted;                  /* block: case 0's figures (t = the world > 1), which the */
    struct l5_figs noted_figs;      /* notes of traffic, memory and replicas say on the last */
    struct l5_block_figs noted;     /* case, whatever that case's own grid */
    struct l5_ring_obs ring;        /* op ring */
};

/* The lab's state: the harness's, made by setup on the heap (driver.c). */
struct l5_state {
    uint64_t seed;          /* --seed: the data and the drawn shapes */
    int seq;                /* --seq: every case's T (0: the cases' own) */
    int hidden;             /* --op block-hidden, train-hidden: other grids and shapes */
    enum l5_kind kind;
    int want_time;          /* check mode judges part time */
    int in_bench;           /* the bench runs a TP group smaller than the world: no replica test */
    const char *plots_dir;  /* bench: --plots-dir, or NULL */
    struct l5_obs *ob;      /* the observation being filled (observe) */
    int cur;                /* the part l5_fail records against */
    struct gr_bt_figures time_last; /* the traced case's replay, said again on the others */
    int has_noted;                  /* case 0's figures on t > 1 ranks (its TP group is the */
    struct l5_figs noted_figs;      /* world), carried to the later cases for the notes of */
    struct l5_block_figs noted;     /* the last: a grid case's group may be smaller */
    struct l5_perf *perf;
    struct l5_ring_obs ring_traced; /* op ring: rank 0's replay of case 0, said again on the
                                     * later cases */
    const char *ring_svg;           /* bench: draw that replay's timeline there */
};

/* ---- cases.c ---- */

/* 8 heads so that t = 1, 2, 4 split them; seq_len 16 so that T/t is 4 tokens at t = 4. */
struct pl_model_config l5_config(const struct l5_state *st, float dropout);
struct l5_case l5_case_of(const struct l5_state *st, int i, int n);
void l5_traffic_since(const struct pl_ledger *mark, struct l5_traffic *out);
/* A ring all-gather or reduce-scatter of a full [N, C] sends (t-1)/t of it per rank. */
double l5_coll_bytes(double NC, int t);
float *l5_local_rows(const float *full, int B, int T, int C, int t, int r);
/* Relative L2 error of n floats of op memory against ref (op memory). */
double l5_rel_l2(const float *got, const float *ref, size_t n);
/* What a case on a tp x dp grid adds to a failure: the group is not the world (kind
 * L5_H_NONE on the group that is the world). */
struct l5_hint l5_grid_hint(const struct l5_case *kc, int t);
void l5_run_conjugates(struct l5_state *st, struct pl_comm *tp);

/* This rank's first failure of part st->cur, with figures v[n] (NULL when the part has
 * failed already); L5_FAIL(st, code, figures...). */
struct l5_said *l5_fail(struct l5_state *st, enum l5_why code, const double *v, int n);
#define L5_FAIL(st, code, ...)                                                                  \
    l5_fail(st, code, (const double[]){__VA_ARGS__},                                            \
            (int)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double)))
/* Names k of a failure (s may be NULL). */
void l5_name(struct l5_said *s, int k, const char *name);
/* 1 while part st->cur (or part p) has no failure on this rank. */
int l5_ok(const struct l5_state *st);
int l5_ok_of(const struct l5_state *st, int p);
/* got against ref (op memory, n floats), relative L2 error within tol and every element
 * finite: 1, or 0 with the figures recorded on part st->cur. */
int l5_compare(struct l5_state *st, const char *what, const float *got, const float *ref,
               size_t n, double tol, struct l5_hint hint);
struct l5_hint l5_hint_of(int kind);

/* ---- cases_block.c ---- */

/* One block case's tensors: the full block and this rank's shard (with their gradients),
 * the input and output gradient of every token, and this rank's rows of each; with accum,
 * the gradients the split tensors held before (g0) and a second micro-batch (x2, dy2). */
struct l5_block {
    struct pl_model_config c;
    int t, r, B, T, C, layer, d;
    size_t nc, nl, full_numel, shard_numel;
    float *full, *full_g, *shard, *shard_g, *x, *dy, *y, *dx, *lx, *ldy, *ly, *ldx;
    float *g0, *g_last, *x2, *dy2; /* accum only: full [numel], full [numel], [nc], [nc] */
    struct pl_block_params p, g, sp, sg;
    struct pl_model_ctx ctx, ctx2;
};

struct l5_block_run {
    struct l5_traffic fwd, bwd, sync;
    double held, peak; /* bytes kept from the forward to the backward; peak of the step */
    double left;       /* bytes still held once the backward returned and the acts were freed */
    double oracle_flops; /* the single device's forward and backward, from the ledger */
    double activation_floats; /* the whole [B, T, C] activation */
    double flops, core_flops; /* this rank's block, and the part of it in the kit's core */
    double core_once;         /* one forward and one backward of each half's core */
    struct gr_unseen unseen;  /* a buffer of the conjugates or the core in static storage */
    int kept_tensor, kept_member; /* another rank's rows found in static storage after the */
    size_t kept_row;              /* forward (kept_tensor -1: none) */
};

void l5_block_case_new(const struct l5_state *st, struct pl_comm *tp, const struct l5_case *kc,
                       int d, struct l5_block *k);
void l5_block_case_free(struct l5_block *k);
/* Collective: runs one block case, its checks recorded in st->ob (which must be set). */
void l5_run_block_case(struct l5_state *st, struct pl_comm *tp, const struct l5_case *kc, int d,
                       int traced, struct l5_block_run *run);
void l5_run_block(struct l5_state *st, struct pl_comm *tp, const struct l5_case *kcp, int d, int i);

/* ---- checks_block.c: this rank's checks, recorded in st->ob ---- */

void l5_check_replicas(struct l5_state *st, const struct l5_case *kc,
                       const struct pl_model_config *c, int t, const float *shard_g,
                       const float *want, const float *last);
int l5_check_block_rows(struct l5_state *st, const struct l5_block *k, const struct l5_case *kc);
void l5_check_dropout_alone(struct l5_state *st, struct pl_comm *tp, const struct l5_block *k);
void l5_check_split_grads(struct l5_state *st, const struct l5_block *k, int fwd_ok, float *wg,
                          float *wl);

/* ---- cases_train.c ---- */

#define L5_TRAIN_STEPS 3
#define L5_TRAIN_B 2

/* A training case. dp = 1: the TP group is the world. dp > 1: a tp x dp grid whose TP
 * groups are smaller than the world and numbered against its order (strided: the ranks w
 * with the same w % dp; else consecutive: the same w / t; highest world rank first), each
 * DP replica d on its own B sequences, d B to d B + B - 1 of the global batch, and the
 * trainer (the grader) averages the block gradients over the replicas after the student's
 * synchronisation, as data parallelism does. */
struct l5_train_case {
    int dp, strided, B;
};
struct l5_train_case l5_train_case_of(const struct l5_state *st, int i, int n);
int l5_train_cases(const struct l5_state *st, int n);
void l5_run_train(struct l5_state *st, struct pl_comm *tp, const struct l5_train_case *kt, int d,
                  int i);

/* ---- cases_ring.c, judge_ring.c: the second part ---- */

struct l5_ring_case l5_ring_case_of(const struct l5_state *st, int i, int cp);
void l5_run_ring(struct l5_state *st, struct pl_comm *cpg, int i);
int l5_judge_ring(int i, int ncases, const char *part, const struct gr_obs *all,
                  struct gr_why *why);
/* The forward's and the backward's point-to-point bytes a rank of the ring sends, in L =
 * 4 B (T/cp) C bytes (one rank's K): forward 2(cp-1); backward from 4(cp-1) to 4cp-2. */
double l5_ring_fwd_units(int cp);
void l5_ring_bwd_units(int cp, double *lo, double *hi);
/* The attention FLOPs one rank of a balanced layout spends in the kit's block calls, forward and
 * backward: every pair of chunks the causal mask leaves something to see, 2cp+1 of them per
 * sequence. */
double l5_ring_min_flops(int cp, int B, int T, int C, int NH);

/* ---- judge.c: no MPI ---- */

/* The index of part among names[n], or -1 with the reason in why (an unknown part, "WHAT
 * judges no part ..."; a record of another build). */
int l5_part_of(const char *const *names, int n, const char *what, const char *part,
               const struct gr_obs *all, struct gr_why *why);

/* The verdict of part on case i of ncases of an op of kind, from every rank's observation. */
int l5_judge(enum l5_kind kind, int i, int ncases, const char *part, const struct gr_obs *all,
             struct gr_why *why);
/* Rank r's failure s of a part in words: what a student reads after "rank R: ". */
void l5_reason(const struct l5_said *s, char *buf, size_t len);

/* ---- bench.c ---- */

void l5_bench(const struct gr_args *args);
int l5_probe(struct l5_state *st);
double l5_perf(struct l5_state *st);

#endif
