/* lab09.h: what the files of Lab 9's grader share (driver.c, cases.c, judge.c, bench.c):
 * the cases, the state setup puts on the heap, one rank's observation of a case. */
#ifndef LAB09_LAB09_H
#define LAB09_LAB09_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "fourd.h"
#include "harness.h"
#include "paralab.h"
#include "train.h"

#define L9_K_STEPS 2
#define L9_MICRO 4          /* microbatches per replica: m >= p for every graded pipeline */
#define L9_MB_SEQS 2        /* sequences per microbatch */
#define L9_MICRO_ALT 8      /* the clipping test's run with another m: one sequence a microbatch */
#define L9_CORPUS_TOKENS 32768
#define L9_MAX_RANKS 8
#define L9_MAX_CASES 4
#define L9_ORDER "tp-pp-dp"
/* The clip is set to this fraction of the smallest unclipped norm of the reference's
 * steps, so that it binds on every step and a norm off by any factor shows. */
#define L9_CLIP_FRACTION 0.5
#define L9_TOL_NORM 1e-5
/* Floats a step may all-reduce over the DP group beyond the gradients: the loss's mean and
 * such scalars. */
#define L9_DP_SLACK 16
/* Bytes of optimizer state a rank may hold under ZeRO-1 beyond 8 x its runs' ceil(n/dp):
 * room for alignment and a scalar or two. */
#define L9_ZERO_MEM_SLACK 1024

/* A grid; uneven: the ZeRO-1 case of a DP degree that divides no run of the lab's model
 * (every run is a multiple of 3 and of 8): its vocabulary grows by tp tokens at a time,
 * which the byte corpus never uses, until dp divides neither the embedding's run nor the head's,
 * and its weight decay is L9_DECAY_SEEN's (zero.c's l9_make_uneven, from setup.c). */
struct l9_case {
    int dp, tp, pp;
    int uneven;
};
/* An uneven case's weight decay makes a share of the head that steps the final layernorm's
 * worth of head.w (2C floats) with the wrong decay flag take a first step this many times
 * GR_TOL_GRADS off one device's (zero.c's l9_make_uneven). */
#define L9_DECAY_SEEN 10.0

/* The grid test's other questions to fourd_grid_new, on the first 8-rank case: every order
 * of the three axes (L9_ORDERS[0] is L9_ORDER), and orders or degrees that cannot describe
 * the world, which must give -1 (L9_BAD, with the factor its dp is multiplied by). */
#define L9_NORDERS 6
#define L9_NBAD 5
extern const char *const L9_ORDERS[L9_NORDERS];
extern const struct l9_bad {
    const char *order;
    int dp_times;
} L9_BAD[L9_NBAD];

/* What fourd_grid_new gave one rank for one order. */
struct l9_grid_obs {
    int ret;
    int coord[3];                 /* dp, tp, pp */
    int size[3];                  /* of its dp, tp, pp communicators */
    int members[3][L9_MAX_RANKS]; /* their world ranks by group rank */
};

/* The state of a run: the seed, the model, the data, each case's reference. */
struct l9_state {
    uint64_t seed;
    int np, ncases;
    int hidden;     /* --op train-hidden: the hidden suite's grids */
    int capped;     /* --op capped: (2,2,2) alone, under a device cap (capped.c) */
    int cap_rc;     /* the capped run's recomputation: --recompute's, or the plan's pick */
    struct l9_case cases[L9_MAX_CASES];
    struct pl_tokens data;
    struct gr_train_setup train[L9_MAX_CASES];
    struct gr_reference free[L9_MAX_CASES]; /* no clipping: the "correct" part's */
    struct gr_reference ref[L9_MAX_CASES];  /* a clip that binds: the "clip" part's */
    struct pl_adamw_config free_opt[L9_MAX_CASES];
    double ref_norm[L9_MAX_CASES][L9_K_STEPS];
    int nodes, per_node;
};

/* The worst tensor of one comparison on one rank. */
struct l9_err {
    double rel;     /* relative L2 error (against the floor for a tensor near zero) */
    int nonfinite;
    char name[64];  /* "h.1.attn.w_qkv (shard 1 of 2)" */
};

/* One pl_parts_forward call of a stage's end: the batch row its first sequence is (-1: rows
 * that are no run of the step's batch) and how many sequences it was given. */
struct l9_feed {
    int seq, rows;
};

/* One call of a stage's first block (pl_sp_block_forward or _backward, plain or _saved) in
 * the first unclipped step, in call order: 'F' or 'B', and its ctx's seq0 (-1: no ctx). */
struct l9_op {
    int kind;
    long long seq0;
};
#define L9_MAX_OPS (4 * L9_MICRO)

/* A rank's own DP share of one of its runs after the first unclipped step with
 * m->zero = 1: the relative L2 error of its gradient against one device's (floor: the whole
 * gradient's RMS) and of its parameters' step against AdamW's first step on the gradient it
 * holds; and where the worse lies (what: 0 the gradient, 1 the step): the floats off by more
 * than a tenth of the worst, how many, the first and last (in the run), and over them
 * sum (got - want) p0 and sum p0^2 (p0: the initial parameters). */
struct l9_share_err {
    double grad_rel, step_rel, off, first, last, dot, p0_sq;
    int what;
};

/* One step of a grid replayed at the scale of a real model beside the kit's planner
 * (plantime.c, section 3.4), as rank 0 sees it: the replay's step and each rank's compute
 * and bytes sent inside its node and across nodes ([0] intra, [1] inter: the ring bytes of
 * its collectives by their group's link, its sends by theirs); the plan's step and terms for
 * the same model and configuration (pl_plan_time): the compute (m microbatches of the
 * pacing stage's, with_head: the last stage's), the exposed time of tp, pp and dp, the
 * bubble, and the bytes a rank sends on each link class (each axis' on its class). Times in
 * seconds. */
enum { L9_T_TP, L9_T_PP, L9_T_DP, L9_T_NAX };
struct l9_time {
    int replayed;               /* 1: the trace replayed; 0: err says why not */
    char err[200];
    double step, compute[L9_MAX_RANKS], sent[L9_MAX_RANKS][2];
    double plan_step, plan_compute, plan_bubble, plan_exposed[L9_T_NAX], plan_sent[2];
    int with_head;
};

/* One rank's observation of a case (a plain struct, gathered by the harness). */
struct l9_obs {
    int grid_ret;                 /* fourd_grid_new's answer */
    int model_null;               /* fourd_model_new gave NULL */
    int coord[3];                 /* dp, tp, pp coordinates the code reported */
    int size[3];                  /* of its dp, tp, pp communicators */
    int members[3][L9_MAX_RANKS]; /* their world ranks by group rank */
    int stage_b0, stage_b1;
    /* the run without clipping */
    double loss[L9_K_STEPS];
    struct l9_err params;         /* after the K steps */
    double sp_inter;              /* all-gather and reduce-scatter bytes sent inter-node */
    double p2p_bytes;             /* point-to-point bytes sent over the K steps */
    double dp_floats;             /* floats all-reduced on its DP group over the K steps */
    int dp_calls;                 /* those all-reduces (pl_all_reduce and _async) */
    /* what the embedding's (part -1) and the head's (part L) pl_parts_forward calls were
     * given in each unclipped step, in call order, and how many calls there were (0: the
     * stage does not run that part through pl_parts_forward, so nothing is observed) */
    struct l9_feed emb[L9_K_STEPS][L9_MICRO], head[L9_K_STEPS][L9_MICRO];
    int emb_calls[L9_K_STEPS], head_calls[L9_K_STEPS];
    struct l9_op ops[L9_MAX_OPS]; /* the stage's order of work (nops calls; 0: not observed) */
    int nops;
    /* the size of a collective (all-reduce or barrier) past the TP group that the first
     * step ran after the stage's last backward and before its DP sum (0: none) */
    int dp_wait_size;
    /* the first step's DP sum against the stage's block backwards (the run without ZeRO-1,
     * overlap.c): the calls of pl_sp_block_backward (plain or _saved, any block) the step
     * made, how many of them had begun when the first collective on dp_comm of more than
     * L9_DP_SLACK floats (a gradient's, not the loss's) started, and how many such
     * collectives the step started (0: none, and cd_first_dp means nothing) */
    int cd_backs, cd_first_dp, cd_dp_calls;
    /* the run with a clip that binds */
    double norm[L9_K_STEPS];
    struct l9_err grads;          /* the last step's clipped gradient */
    struct l9_err clipped_params; /* after the K clipped steps */
    /* the same clipped run with m = L9_MICRO_ALT microbatches (the first case only): each
     * step's norm and the last step's gradient, which a loss scale fitted to m = 4 doubles */
    int has_micro;
    double micro_norm[L9_K_STEPS];
    struct l9_err micro_grads;
    /* the run without clipping again with each recomputation (case 0 on 8 ranks only),
     * [r] of enum pl_recompute: what the memory ledger's activations peaked at during the
     * steps, above where they started, and a digest of the losses and parameters */
    int has_recompute;
    double activ_peak[3];
    /* what the runs held (the plan test, planmem.c), run j of enum l9_mem_run when has_mem[j]:
     * each of enum l9_mem_col's peaks above what was held before fourd_model_new */
    int has_mem[4];
    double mem[4][5];
    uint64_t digest[3];
    int stage_blocks;             /* blocks on this rank's stage */
    /* what the first run left allocated once fourd_model_free and fourd_grid_free returned:
     * the category with the most, and its bytes (0: nothing) */
    int leak_cat;
    double leak_bytes;
    /* the runs again with m->zero = 1, without then with the clip (8 ranks, dp > 1): how
     * many finished, the losses and norms, the parameters after each run, the last clipped
     * step's gradient in the rank's DP shares, a digest of its parameters after each run
     * (the replicas must agree), the optimizer state's peak (PL_MEM_OPTIM, bytes above what
     * was held before fourd_model_new) and the floats the collectives on dp_comm covered
     * in the unclipped run: all-reduce, reduce-scatter, all-gather (dp x the chunk) */
    int has_zero, zero_runs;
    double zero_loss[L9_K_STEPS], zero_norm[L9_K_STEPS];
    struct l9_err zero_params, zero_grads, zero_clipped_params;
    uint64_t zero_digest[2];
    double zero_optim;
    double zero_floats[3];
    /* dp_wait_size's counterpart in the first step of the unclipped run with m->zero = 1,
     * whose DP sum is the first collective on dp_comm (a reduce-scatter or all-reduce) */
    int zero_dp_wait_size;
    /* the vocabulary-parallel head (vocab_obs.c), on the last stage of the 8-rank grids
     * with t > 1, in the unclipped run: the head runs seen (each from the return of the
     * model's last block's forward to the start of its backward), their FLOPs (ledger), the
     * most bytes one held above what was held when it began (memory ledger, every
     * category), the floats its collectives on tp_comm covered (all-reduce: count;
     * reduce-scatter and all-gather: t x the chunk), and a digest of rep's head after the
     * run; then one step with the LM head scaled so that the largest logit of one device's
     * first forward is L9_BIG_LOGIT: its loss, and one device's */
    int has_vocab, vocab_runs;
    double vocab_flops, vocab_peak, vocab_tp_floats;
    uint64_t vocab_digest;
    double vocab_big_loss, vocab_big_ref;
    /* its own DP share (fourd.h's [d c, min((d+1) c, n)), c = ceil(n/dp)) of each run,
     * blocks, embedding, head, after the first unclipped step with m->zero = 1 */
    struct l9_share_err zero_shares[3];
    /* the first 8-rank case: every order of the axes, and what cannot describe the world */
    int has_orders;
    struct l9_grid_obs orders[L9_NORDERS];
    int bad_ret[L9_NBAD];
    /* the step time held to the plan (8 ranks, visible grids): meaningful on rank 0 */
    int has_time;
    struct l9_time time;
    /* the capped run (--op capped, capped.c): K unclipped steps under the device cap of
     * struct l9_cap with recomputation cap_rc (enum pl_recompute): the losses, the
     * parameters after them, and the most host (PL_HOST) bytes the code held at once
     * during the steps (cap_done: the steps ran; past the cap the job stops instead) */
    int has_cap, cap_done, cap_rc;
    double cap_loss[L9_K_STEPS], cap_host;
    struct l9_err cap_params;
};

/* setup.c */
/* op: "train" (or NULL), "train-hidden" or "capped"; cap_force: -1, or the recomputation
 * the capped run uses in place of the plan's (enum pl_recompute) */
struct l9_state *l9_setup(uint64_t seed, int np, const char *op, int cap_force);
void l9_finish(struct l9_state *st);
void l9_describe(const struct l9_state *st, int i, char *buf, size_t len);
/* cases.c */
void l9_observe(struct l9_state *st, int i, struct l9_obs *ob);
/* This rank's blocks' shards and its whole embedding and head (shards: op memory, rep: the
 * replicated parts' flat buffer) against the reference's full flat ref, into e. */
void l9_compare_rank(struct l9_err *e, const struct pl_model_config *c,
                     const struct pl_model_layout *lay, const struct fourd_model *m,
                     const float *shards, const float *rep, const float *ref, int t, int r);
/* capped.c: the capped run of grid i into ob (collective). */
void l9_observe_capped(struct l9_state *st, int i, struct l9_obs *ob);

/* judge.c: pure, no MPI */
/* The lab's model (the judges' formulas read it). */
struct pl_model_config l9_config(uint64_t seed);
/* The fraction of a step the stages of one pipeline idle when each runs its order of work
 * ops[s][0..m-1 forwards and backwards] ('F'/'B' and the microbatch), a forward taking 1
 * and a backward 2, each waiting for its microbatch's forward on the stage before and its
 * backward on the stage after: 1 - 3m / (the step's length). -1 when the orders cannot run
 * (a stage waits forever); *stuck then gets the stage. */
double l9_bubble(int p, int m, const int kind[][2 * L9_MICRO], const int mb[][2 * L9_MICRO],
                 int *stuck);
/* bubble.c: the "bubble" part of l9_judge. */
int l9_judge_bubble(const struct l9_state *st, int i, const struct gr_obs *all,
                    struct gr_why *why);
/* The microbatches whose activations stage s of p holds at once under 1F1B with m. */
int l9_in_flight(int p, int s, int m);
/* overlap.c: the "overlap" part of l9_judge: each stage's DP sum started in its cool-down,
 * bucket by bucket. */
int l9_judge_overlap(const struct l9_state *st, int i, const struct gr_obs *all,
                     struct gr_why *why);
/* bubble.c: the latest stage whose DP sum waited on the pipeline (zero: in the ZeRO-1 run);
 * its rank, or -1. */
int l9_latest_waiting(const struct gr_obs *all, int zero);
int l9_judge(const struct l9_state *st, int i, const char *part, const struct gr_obs *all,
             struct gr_why *why);
/* Bytes one rank of stage s sends point to point in a step: one message per microbatch to
 * each neighbouring stage, of (B/(dp m)) T/t C floats. */
double l9_p2p_bytes(const struct pl_model_config *c, const struct l9_case *k, int stage, int B);
/* The gradient floats a rank of stage s holds, which its DP group sums once a step: its
 * blocks' TP shards, and the embedding (s = 0) and the head (s = pp - 1) whole; *blocks,
 * *embed and *head get the three (lay: the model's layout, for the two ends). */
double l9_dp_floats(const struct pl_model_config *c, const struct pl_model_layout *lay,
                    const struct l9_case *k, int stage, double *blocks, double *embed,
                    double *head);

/* zero.c: pure, no MPI */
/* DP rank d's share of a run of n floats under ZeRO-1 (fourd.h): [lo, lo + own) =
 * [d c, min((d+1) c, n)), c = ceil(n/dp). */
void l9_zero_share(size_t n, int dp, int d, size_t *lo, size_t *own);
/* RMS of a whole reference buffer: the floor a tensor near zero is measured against. */
double l9_rms(const float *x, size_t n);
/* got against ref (n floats, host): the worse of it and what e holds, kept in e. */
/* rep.c: where rep keeps a part (PL_PART_EMBED or the head): its offset in rep's layout less the
 * part's offset in the whole model's, so rep's float of a whole-model offset o is at
 * o + shift (0 for a rep made whole); L9_NO_PART when rep does not hold the part. */
#define L9_NO_PART LONG_MIN
long l9_rep_shift(const struct fourd_model *m, int part);
/* pl_tp_block_slice for host buffers: rank r of t's shard of one full block (host, the
 * model's layout) into shard (host, pl_tp_block_numel floats), cut in op memory. */
void l9_slice_host(const struct pl_model_config *c, int t, int r, const float *full,
                   float *shard);
/* e marked failed (relative error infinite) for a part rep should hold and does not. */
void l9_missing_part(struct l9_err *e, int part);
void l9_compare(struct l9_err *e, const char *name, const float *got, const float *ref,
                size_t n, double floor_rms);
/* The gradient in m's DP shares (rank d of dp; TP rank r of t) against the full flat ref. */
void l9_compare_shares(struct l9_err *e, const struct pl_model_config *c,
                       const struct pl_model_layout *lay, const struct fourd_model *m,
                       const float *ref, int t, int r, int dp, int d);
/* An uneven case's model and optimizer (lab09.h's struct l9_case). */
void l9_make_uneven(struct gr_train_setup *t, const struct l9_case *k);
/* DP rank d's share of each of m's runs (TP rank r of t) after its first step: out[run],
 * against ref's first step with opt (no clipping). */
void l9_observe_shares(struct l9_share_err out[3], const struct pl_model_config *c,
                       const struct gr_reference *ref, const struct pl_adamw_config *opt,
                       const struct fourd_model *m, int t, int r, int dp, int d);
/* The "zero" part of l9_judge. */
int l9_judge_zero(const struct l9_state *st, int i, const struct gr_obs *all,
                  struct gr_why *why);

/* vocab_obs.c: the vocabulary-parallel head's observation. The wraps of cases.c tell it
 * of block calls ('F' once a forward returned, 'B' before a backward) and collectives (the
 * floats one covers); l9_vocab_watch and l9_vocab_unwatch bracket the unclipped run;
 * l9_vocab_big runs the step with large logits (collective over the world). */
#define L9_BIG_LOGIT 200.0
void l9_vocab_block(int layer, int kind);
void l9_vocab_coll(const struct pl_comm *comm, double floats);
void l9_vocab_watch(const struct l9_state *st, int i, struct l9_obs *ob,
                    const struct fourd_grid *g, const struct fourd_model *m);
void l9_vocab_unwatch(struct l9_obs *ob, const struct fourd_model *m);
void l9_vocab_big(struct l9_state *st, int i, struct l9_obs *ob);
/* The handout's figures of section 2.1 (rank 0, bench mode, 8 ranks). */
void l9_vocab_figures(const struct l9_state *st);
/* vocab.c: pure, no MPI. The bounds the "vocab" part holds one head run to, on TP rank of
 * t with n tokens a microbatch (n = B/(dp micro) T): the FLOPs a t-th of one device's
 * head's (whole) within L9_VOCAB_WORK_TOL either way; at most the bytes *mem_hi; and the
 * floats on tp_comm in [*lo, *hi]. */
#define L9_VOCAB_WORK_TOL 0.1
void l9_vocab_bounds(const struct pl_model_config *c, int t, int n, double *mem_hi,
                     double *lo, double *hi);
int l9_judge_vocab(const struct l9_state *st, int i, const struct gr_obs *all,
                   struct gr_why *why);
/* The first last-stage rank whose rep head differs from its TP group's tp 0, said (the
 * results test's hint when a head's tensor is off); nothing when they agree. */
void l9_vocab_hint(const struct gr_obs *all, struct gr_why *why);

/* planmem.c: memory held to the plan (section 3.4). The lab's model and grid k's
 * configuration (zero, rc) as the kit's planner takes them (plan.h); the runs the plan
 * test measures (the unclipped one, ZeRO-1's, and the two recomputations of case 0) and
 * the peaks each measures; its verdict on every 8-rank grid. */
struct pl_plan_model;
struct pl_plan_config;
void l9_plan_model(const struct pl_model_config *c, const struct l9_case *k,
                   struct pl_plan_model *pm);
void l9_plan_config(const struct l9_case *k, int zero, enum pl_recompute rc,
                    struct pl_plan_config *cfg);
enum l9_mem_run { L9_MEM_FREE, L9_MEM_ZERO, L9_MEM_SELECTIVE, L9_MEM_FULL, L9_MEM_RUNS };
enum l9_mem_col { L9_MEM_PARAMS, L9_MEM_GRADS, L9_MEM_OPTIM, L9_MEM_ACTIV, L9_MEM_DEVICE };
/* The bound: what a rank holds (params, grads, optim and activ, each at its peak) within
 * this share of the planner's total, over it on every rank and under it on stage 0's. */
#define L9_PLAN_SHARE 0.10
int l9_judge_plan(const struct l9_state *st, int i, const struct gr_obs *all,
                  struct gr_why *why);

/* planmem.c: the device of the capped run (handout section 3.4): the planner's totals for
 * grid i (ZeRO off) with each recomputation, plan[r] of enum pl_recompute; the device,
 * bytes a rank may hold above the grader's state, set so that Lab 8's rule ("memory fits":
 * a plan's total at most PL_RULE_MEM_SHARE of the device) falls halfway between the plans
 * without recomputation and with full; and the least recomputation the rule admits on it.
 * The "cap" part: every rank ran its steps under it with one device's results. */
struct l9_cap {
    double plan[3], device;
    int pick; /* enum pl_recompute */
};
void l9_cap_device(const struct l9_state *st, int i, struct l9_cap *c);
/* Host bytes the code under test may hold at once during the capped run. */
#define L9_CAP_HOST_SLACK 4096.0
int l9_judge_cap(const struct l9_state *st, int i, const struct gr_obs *all,
                 struct gr_why *why);

/* planrun.c: the table of each 8-rank grid's measured peaks by category beside the
 * planner's (collective, bench mode, rank 0 prints); svg (or NULL): its picture
 * (planplot.c), drawn by rank 0. */
void l9_plan_figures(struct l9_state *st, const char *tag, const char *svg, const char *who);
/* plantime.c: collective, 8 ranks: one step of grid i traced and, on rank 0, replayed at
 * the scale of a real model beside pl_plan_time's prediction for it, into out; 0 when the
 * code stopped at a stub (out says nothing then). l9_time_figures: the same for every
 * 8-rank grid, printed by rank 0 as section 3.4's table (bench mode). */
int l9_time_replay(struct l9_state *st, int i, struct l9_time *out);
/* Rank 0: trace t of grid i scaled to section 3.4's model into sc and replayed into rp
 * (kernels at the planner's rate, a comm stream per link class); 0, or -1 with err (sc and
 * rp then hold nothing). Free rp, then sc with gr_trace_scaled_free. */
int l9_replay_at_scale(const struct l9_state *st, int i, const struct pl_merged_trace *t,
                       struct pl_merged_trace *sc, struct pl_replay *rp, char *err, size_t len);
void l9_time_figures(struct l9_state *st, const char *tag);
/* planmem.c: the step time's bound, either way, and its verdict on every 8-rank grid. */
#define L9_TIME_SHARE 0.10
int l9_judge_time(const struct l9_state *st, int i, const struct gr_obs *all,
                  struct gr_why *why);
/* One run of the table: its name, the plan's params, grads, optim and activ, stage 0's
 * largest peak of each, and its device peak (bytes). */
struct l9_plan_row {
    char name[40];
    double plan[4], run[4], device;
};
/* planplot.c: the rows as stacked bars, plan beside run, to svg (who: whose code). */
void l9_plan_draw(const char *svg, const struct l9_plan_row *rows, int n, const char *who);

/* bench.c */
void l9_bench(const struct gr_args *a);

#endif
