/* lab06.h: what the files of Lab 6's grader share (driver.c, cases.c, cases_check.c,
 * judge.c, judge_train.c, bench.c): the constants of the cases, the state setup puts on the
 * heap, one rank's observation of a case, and the functions one file calls in another. */
#ifndef LAB06_LAB06_H
#define LAB06_LAB06_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "grid.h"
#include "harness.h"
#include "outside.h"
#include "partition.h"
#include "paralab.h"
#include "pipeline.h"
#include "schedule.h"
#include "train.h"

#define L6_K_STEPS 3
/* Before this step the grader frees the pipe and gives the model, trained that many steps,
 * to a new one (a model resumed mid-training): a pipe that counts the optimizer step itself
 * draws step 1's dropout masks again there. Not the traced last step, whose memory is a
 * steady state's. */
#define L6_RENEW_STEP 1
#define L6_GLOBAL_B 24 /* sequences per step: every m of L6_CASES divides it */
#define L6_CORPUS_TOKENS 65536
#define L6_MAX_STAGES 64
/* The most F and B marks of a stage's traced step an observation keeps: the largest case
 * the lab and its hidden suite run needs 2 v m = 48 (interleaved, v = 3, m = 8);
 * l6_run_case stops a case that would need more with an internal error. */
#define L6_MAX_OPS 64
#define L6_NCASES 6
extern const int L6_CASES[L6_NCASES]; /* microbatches, m < p among them (cases.c) */
#define L6_BUBBLE_TOL 1e-9
#define L6_V_INTERLEAVED 2 /* chunks per rank of the interleaved schedule: the fewest graded */
#define L6_V_MOST 3        /* the most graded: on stages that leave room for them */
#define L6_BENCH_PROFILE "dgx-h100"
/* Dropout on: each microbatch must draw the masks its sequences draw in the whole batch on
 * one device (ctx.seq0 and ctx.step), which a run without dropout cannot tell. */
#define L6_LAB_DROPOUT 0.1f

/* What every case of a run shares: the seed, the model's shape, the data, the references,
 * and what the link-time wrappers record (outside.c reaches it through gr_wrap_ctx). */
struct l6_setup {
    uint64_t seed;
    int hidden;    /* --op NAME-hidden: the hidden suite's model */
    int one_mb_ok; /* the case m = 1 trained correctly */
    struct l6_outside_watch watch;
    struct pl_tokens data;
    struct gr_train_setup train;
    struct gr_reference ref;  /* the world's pipeline, or pipeline 0 of a grid */
    struct gr_reference ref1; /* pipeline 1 of a grid, on batches of its own (numel 0: none) */
};

struct l6_state {
    enum pipe_schedule k;
    int ncases, cases[L6_NCASES + 1]; /* the m of L6_CASES the schedule runs with on p stages */
    int pipes[L6_NCASES + 1];         /* 1, or 2 for the grid case (l6_grid_fits) */
    struct l6_setup s;
};

/* ---- one rank's observation of a case (a plain struct, gathered by the harness) ---- */

/* What a wrong training shows, rank 0's (the first thing found): the class and its figures. */
enum l6_wrong {
    L6_W_NONE,
    L6_W_MIXED,      /* v: pipe, world rank, stage, first, last, the stage the cut gives them */
    L6_W_COVER,      /* v: stage (chunk), first, last, the part it must start at */
    L6_W_COVER_END,  /* v: the part the last stage ends at */
    L6_W_PIPES,      /* v: stage, first, last in pipeline 0, first, last in pipeline g, g */
    L6_W_CHUNK,      /* v: stage, first, last, the cut's chunk first, last */
    L6_W_LOSS,       /* v: step, pipeline of the worst rank, its loss, the reference's, error */
    L6_W_MASKS,      /* v: 0 masks at ctx.seq0 = 0, 1 at ctx.step = 0; 1 the gradient, 0 loss */
    L6_W_GRADS,      /* v: step, <g, r> / <r, r>, one microbatch trained correctly; err */
    L6_W_PARAMS      /* err */
};

/* gr_param_verdict's figures and its worst tensor's name and shape. */
struct l6_param_err {
    int rank, tensor, nonfinite;
    double rel, max_abs, overall, worst_elem;
    char name[80]; /* "h.1.mlp.w_fc [64, 32]" */
};

struct l6_train {
    int wrong; /* enum l6_wrong */
    double v[8];
    struct l6_param_err err;
};

/* The first fault of this stage's sends in the traced step (judge_traffic). */
enum l6_sent_code {
    L6_T_NONE,
    L6_T_COLL,     /* a collective: kind */
    L6_T_FAR,      /* to a rank not a neighbour: tag, peer */
    L6_T_PARITY,   /* an activation's tag odd or a gradient's even: tag, peer, grad */
    L6_T_TAG,      /* a tag used twice or not given: tag, peer, grad */
    L6_T_EARLY,    /* before its microbatch's operation ran: tag, grad, last */
    L6_T_BYTES,    /* bytes other than an activation's: tag, peer, bytes */
    L6_T_COUNT     /* nsend messages where it sends want */
};

struct l6_sent {
    int code, tag, peer, grad, kind, nsend, want;
    double bytes;
    struct l6_sched_op last; /* phase 0: none */
};

/* The pipeline's trace replayed with uniform stage times, on rank 0. */
struct l6_bubble {
    int failed;     /* 1: the step's trace could not be replayed, 2: the ideal run */
    char err[256];
    double got, best;
    int late, late_stage; /* AFAB and 1F1B: an operation starting later than the ideal's */
    struct l6_sched_op late_op;
    double t_got, t_want;
};

struct l6_obs {
    /* the case, the same on every rank */
    int k, m, p, v, pipes, hidden, todo;
    struct pl_model_config cfg;
    double bnd; /* bytes of one boundary message: a microbatch's activation */
    /* this rank: its place and parts */
    int pipe, stage, first, last;
    /* the marks of its traced step, in order (nops of them, the first L6_MAX_OPS kept) */
    int nops;
    struct l6_sched_op ops[L6_MAX_OPS];
    /* its memory in the traced step, bytes above the level before it */
    double activ_peak, activ_left, total_peak, cat_peak[PL_MEM_NCAT];
    /* what the kit holds for one microbatch of each of its chunks: activations, everything
     * between forward and backward, and the most scratch above that */
    double chunk_acts[L6_V_MOST], chunk_held[L6_V_MOST], kit_extra;
    /* ZB-H1: what B keeps for W of one microbatch (pl_parts_wgrad_bytes) */
    double chunk_wgrad[L6_V_MOST];
    /* from step to step and after pipe_free */
    double live[L6_K_STEPS]; /* live allocations after step s (-1: the step did not run) */
    double left;             /* bytes more than before pipe_new, in the category of most */
    int left_cat, in_flight;
    struct l6_outside outside;
    int unwaited_type, unwaited_tag, unwaited_peer; /* PL_EV_ISEND or PL_EV_IRECV, or 0 */
    struct l6_sent sent;
    /* rank 0 */
    struct l6_train train;
    struct l6_bubble bub[L6_GRID_MAX_PIPES];
    int other_first[L6_PART_OTHERS][L6_PART_OTHER_STAGES];
    int other_last[L6_PART_OTHERS][L6_PART_OTHER_STAGES];
};

/* cases.c */
/* The lab's model (the hidden suite's when hidden), its parameters drawn from seed. */
struct pl_model_config l6_config(int hidden, uint64_t seed);
/* v of the interleaved runs on p stages. */
int l6_chunks_for(int hidden, int p);
/* Whether the world splits into a grid of two pipelines. */
int l6_grid_fits(void);
void l6_setup_init(struct l6_setup *s, uint64_t seed, int hidden, int with_reference);
void l6_setup_free(struct l6_setup *s);
/* Collective: K steps of schedule k with m microbatches on `pipes` pipelines, observed into
 * ob (zeroed); each pipeline's merged trace of the last step into trace[g] on rank 0 when
 * trace is not NULL (free them with pl_trace_merged_free). */
void l6_run_case(struct l6_setup *s, enum pipe_schedule k, int m, int pipes,
                 struct l6_obs *ob, struct pl_merged_trace *trace);
/* The schedule of --op; NAME-hidden also sets *hidden (hidden NULL: refused). */
enum pipe_schedule l6_schedule_of(const char *op, int *hidden);
/* Refuses a world the schedule cannot run on (usage error). */
void l6_check_stages(const struct pl_model_config *c, enum pipe_schedule k);

/* cases_check.c: figures of a case, no sentences */
/* Rank 0: 1 (the class and figures into t) when the stages' parts (st[s] = first, last of
 * stage s, n of them) are not a contiguous cover of the model. */
int l6_cover_wrong(const int (*st)[2], int n, const struct pl_model_config *c,
                   struct l6_train *t);
/* Rank 0, step 0 with m > 1: 1 (into t) when the pipeline's loss (grads NULL) or its
 * gradient is what one device computes with every microbatch's dropout masks misplaced. */
int l6_dropout_explains(const struct gr_reference *ref, const struct gr_batch *b, int m,
                        double loss, const float *grads, struct l6_train *t);
/* v's figures and its tensor's name. */
void l6_param_err(const struct gr_reference *ref, const struct gr_param_verdict *v,
                  struct l6_param_err *e);
/* This rank's traced step read into ob: its marks, its sends' first fault, an asynchronous
 * operation never waited for. Peers are world ranks, made stages of its pipeline by g. */
void l6_read_trace(const struct l6_grid *g, const int *chunk_first, struct l6_obs *ob);
/* Rank 0: pipeline t replayed with uniform stage times (chunk_first: p v chunks' first). */
void l6_replay(enum pipe_schedule k, int m, int v, const struct pl_merged_trace *t,
               const int *chunk_first, struct l6_bubble *b);
/* What the kit holds for one microbatch of parts [first, last] (judge_memory). */
void l6_kit_bytes(const struct pl_model_config *c, int first, int last, int B, int T,
                  double *held, double *transient);

/* judge.c and judge_train.c (no MPI): part's verdict on case i from every rank's
 * observation, its reasons into why; "correct" alone. */
int l6_judge(int i, const char *part, const struct gr_obs *all, struct gr_why *why);
int l6_judge_correct(const struct gr_obs *all, struct gr_why *why);

/* bench.c */
void l6_bench(const struct gr_args *a);

#endif
