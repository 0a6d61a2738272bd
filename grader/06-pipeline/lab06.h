/* lab06.h: what the files of Lab 6's grader share (driver.c, cases.c, cases_check.c,
 * judge.c, bench.c): the constants of the cases, the state setup puts on the heap, each
 * case's outcome, and the functions one file calls in another. */
#ifndef LAB06_LAB06_H
#define LAB06_LAB06_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "grid.h"
#include "harness.h"
#include "outside.h"
#include "paralab.h"
#include "pipeline.h"
#include "schedule.h"
#include "train.h"

#define L6_K_STEPS 3
#define L6_GLOBAL_B 24 /* sequences per step: every m of L6_CASES divides it */
#define L6_CORPUS_TOKENS 65536
#define L6_MAX_STAGES 64
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

/* ---- one case: K steps of one schedule with m microbatches ---- */

struct l6_stage_stats {
    int first, last;
    double activ_peak;  /* bytes above the level before the step */
    double activ_left;  /* bytes still held after it */
    double total_peak;  /* bytes above the level before the step, every category together */
    double cat_peak[PL_MEM_NCAT]; /* each category's peak above its level before the step */
};
#define L6_STATS_WORDS (5 + PL_MEM_NCAT)

/* What a stage's code held over the case, from the memory ledger and its communicator:
 * live allocations after each step, what pipe_free left that pipe_new found free, and the
 * operations still in flight on the communicator pipe_new was given, after pipe_free. */
struct l6_lifetime {
    double live[L6_K_STEPS]; /* live allocations after step s (-1: the step did not run) */
    double left;          /* bytes more than before pipe_new, in the category of most */
    int left_cat;
    int in_flight;
    struct l6_outside outside; /* the first buffer sent or received outside the ledger */
};

/* The model's chunks (virtual stages) and which this rank holds: chunk c is on rank c % p. */
struct l6_chunks {
    int n;                      /* p v */
    int first[L6_MAX_STAGES], last[L6_MAX_STAGES];
};

/* One pipeline's outcome of a case (a grid of two has two). */
struct l6_outcome {
    int correct, todo;
    struct l6_stage_stats st[L6_MAX_STAGES]; /* rank 0: every stage's */
    struct l6_lifetime life[L6_MAX_STAGES];  /* rank 0: every stage's */
    struct pl_merged_trace trace;      /* rank 0: the last step, its ranks in stage order */
    struct l6_chunks chunks;              /* every rank */
};

/* This rank's place in the case: its pipeline, its stage there, the driver's own (raw MPI)
 * communicator of the pipeline's ranks in stage order, and the pipeline's reference. */
struct l6_member {
    struct l6_grid grid;
    int pipe, stage, p;
    MPI_Comm comm;
    const struct gr_reference *ref;
    int one_mb_ok; /* the case m = 1 trained correctly */
};

struct l6_state {
    enum pipe_schedule k;
    int ncases, cases[L6_NCASES + 1]; /* the m of L6_CASES the schedule runs with on p stages */
    int pipes[L6_NCASES + 1];         /* 1, or 2 for the grid case (l6_grid_fits) */
    struct l6_setup s;
    struct l6_outcome o[L6_GRID_MAX_PIPES]; /* the case that ran last, per pipeline */
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
void l6_run_case(struct l6_setup *s, enum pipe_schedule k, int m, int pipes,
                 struct l6_outcome *o);
/* The schedule of --op; NAME-hidden also sets *hidden (hidden NULL: refused). */
enum pipe_schedule l6_schedule_of(const char *op, int *hidden);
/* Refuses a world the schedule cannot run on (usage error). */
void l6_check_stages(const struct pl_model_config *c, enum pipe_schedule k);

/* cases_check.c (rank 0) */
int l6_judge_cover(const struct l6_stage_stats *st, int p, const struct pl_model_config *c);
void l6_say_dropout(int m);
int l6_dropout_explains(const struct gr_reference *ref, const struct gr_batch *b, int m,
                        double loss, const float *grads);
void l6_explain_grads(const struct gr_reference *ref, int m, int step,
                      const struct gr_param_verdict *v, double ratio, int one_mb_ok);

/* judge.c (rank 0): one judge of the trace and the ledger on one pipeline's outcome. */
int l6_judge_pipe(enum pipe_schedule k, int m, const char *part, const struct l6_outcome *o,
                  const struct pl_model_config *c);

/* bench.c */
void l6_bench(const struct gr_args *a);

#endif
