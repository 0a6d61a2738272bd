/* lab03.h: what the files of Lab 3's grader share. Its state (struct l3_state) is made by
 * setup on the heap, with everything a case, the perf mode and the link-time wrappers
 * (gradients.c, unseen.c) use; the wrappers reach it through gr_wrap_ctx (wrap_ctx.h), the
 * one pointer a wrapper can see. The files depend one way: driver.c -> cases.c, judge.c,
 * bench.c; cases.c -> cases_layout.c, gradients.c, prefetch.c; judge.c -> judge_correct.c;
 * bench.c -> cases.c, prefetch.c. Each rank records a case's figures in its struct l3_obs;
 * the harness gathers them once, and judge.c and judge_correct.c, with no MPI, judge them
 * on rank 0 and word every reason.
 *
 *   cases.c         a case: the group, the reference, the student's training observed
 *   cases_layout.c  the shard layout judged by zero.h's invariants, and the layout test
 *   judge.c         the verdicts of traffic, memory and prefetch, and their reasons' words
 *   judge_correct.c the verdicts of correct and of the layout test, and their words
 *   gradients.c     the gradient each AdamW update is given, against the reference
 *   prefetch.c      ZeRO-3's step on the modelled timeline; the bench's pictures of it
 *   bench.c         the perf mode's speed test and the bench mode's table and chart
 *   on_host.c       buffers computed on that lie in PL_HOST blocks
 *   memory_time.c   one step's memory over time, drawn */
#ifndef LAB03_H
#define LAB03_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "formulas.h"
#include "harness.h"
#include "paralab.h"
#include "train.h"
#include "unseen.h"
#include "zero.h"

/* The graded model: small, with a d_ff that makes every block's size odd and not a
 * multiple of 3, so that no rank count from 2 to 4 divides it and padding is exercised.
 * Wide and short-sequenced, so that the lab's lesson holds on its own model: a rank's
 * parameters, gradients and optimizer state (16 bytes a parameter) are several times the
 * activations of its slice of the batch, as in real training at these widths; activations
 * per token grow with d_model, model state with d_model squared. */
#define L3_VOCAB 256
#define L3_D_MODEL 64
#define L3_N_LAYERS 4
#define L3_N_HEADS 2
#define L3_D_FF 255
#define L3_SEQ_LEN 4
#define L3_GLOBAL_B 12 /* 1, 2, 3 and 4 ranks get equal slices */
#define L3_STEPS 4
#define L3_CORPUS_TOKENS 8192

/* Memory: beside the formulas, a rank may hold the two largest units of gathered parameters
 * (the one computing and the one being prefetched) and two gradient buckets (one being
 * reduced, one being filled); its own bookkeeping (state struct, layout table, a scalar
 * buffer) stays under these many bytes of communication buffers, and of workspace beyond
 * what the ops' scratch takes in the single-device reference. */
#define L3_MEM_SLACK_COMM 4096
#define L3_MEM_SLACK_WORK (24 * 1024)
/* Activations: the kit's zero_pass keeps them for this rank's slice of the batch, so a rank
 * holds the single-device reference's activation peak on the whole batch times its share,
 * and this much beside (a full copy of the parameters is many times more). */
#define L3_MEM_SLACK_ACTIV 4096
#define L3_PERF_ROUNDS 10
#define L3_PERF_BATCHES 3
#define L3_PERF_ITERS 4

/* A stage's cases differ in the clip only: the default threshold; none, where the averaged
 * gradient is what AdamW gets and a sum shows as a factor n; and one between the norms of
 * the ranks' shards, so that a clip by a rank's own norm scales some ranks and not others.
 * On 4 ranks and more (an even count), a last case splits the world into two ZeRO groups
 * (l3_has_groups). */
enum { L3_CASE_CLIP_DEFAULT, L3_CASE_CLIP_OFF, L3_CASE_CLIP_SOME_RANKS, L3_CASE_GROUPS,
       L3_NCASES };

/* What a stage may hold: the formulas for this model, with the padding of its shards. */
struct l3_allowance {
    double psi;                  /* parameters */
    double full, shard;          /* padded elements: a full buffer, one rank's shard */
    double two_units;            /* the two largest padded units */
    int prefetch;                /* stage 3: the run's z->prefetch (0: one gathered unit) */
    struct zero_bytes formula;   /* fp32 formula with Psi (no padding) */
    struct zero_bytes allowed;   /* what the grader accepts */
};

/* A buffer computed on that is host memory (on_host.c). */
struct l3_on_host {
    int seen;         /* 0: every buffer placed was device memory */
    char what[96];    /* "zero_backward_part's gradient buffer (part 4)" */
    char label[48];   /* the label it was allocated under */
};

/* A case's layout in figures (the student's, once judged): what the judge's formulas
 * read. */
struct l3_shape {
    double psi, full, shard; /* numel, full_numel, shard_numel */
    double two_units;        /* the two largest padded units */
    double head;             /* the last unit's padded size */
    int n;                   /* ranks of the group */
    double one_unit;         /* the largest padded unit */
};

/* The first invariant of zero.h a layout breaks (code 0: none), and whose layout it is. */
enum { L3_LD_NRANK = 1, L3_LD_NUNITS, L3_LD_PART, L3_LD_RANGE, L3_LD_GAP, L3_LD_EXCESS,
       L3_LD_PADDED, L3_LD_TOTALS, L3_LD_FULL_OVERLAP, L3_LD_SHARD_OVERLAP, L3_LD_UNEQUAL,
       L3_LD_STAGE };
struct l3_layout_diff {
    int code;
    int field;             /* L3_LD_UNEQUAL: 0 chunk, 1 padded, 2 full_offset, 3 shard_offset,
                              4 offset, 5 numel, 6 part, 7 nunits, 8 shard_numel, 9 full_numel,
                              10 numel (the model's) */
    int unit;              /* the unit concerned, -1: the layout's totals */
    int unit2;             /* L3_LD_*_OVERLAP: the unit it overlaps, -1: the buffer's end */
    double unit_numel;
    double got[3], want[3]; /* the code's figures: see l3_judge_layout */
    int test;              /* 1: the layout test's model; 0: a rank's z->zl */
    double psi;
    int n_layers, d_model, d_ff, vocab, n, rank;
    int altered;           /* a rank's z->zl is not what zero_layout_init gives that rank:
                              zero_new changed it */
};

/* The gradient AdamW was given in the first step it was wrong, on its group's first rank
 * (gradients.c): which mistake explains it, and its figures. */
enum { L3_G_NONE_GIVEN = 1, L3_G_COUNT, L3_G_T, L3_G_TWICE, L3_G_SUM, L3_G_LOCAL_CLIP,
       L3_G_NOT_CLIPPED, L3_G_DIFF };
struct l3_grads_fig {
    int code;                  /* 0: every step right */
    int step;                  /* from 0 */
    int n;                     /* the group's ranks */
    int who;                   /* the element's owner, the rank clipped by its own norm, t */
    int count;                 /* times the element was given */
    double elem;
    double x[5];               /* the code's figures (gradients.c, l3_grads_observe) */
    char tensor[PL_NAME_LEN];
};

/* The trained parameters against the reference, this rank's worst tensor. */
struct l3_params_fig {
    int checked, tensor;
    char name[PL_NAME_LEN], shape[64];
    double rel, max_abs, worst_elem, overall;
    int nonfinite;
};

/* The prefetch test's traced step, replayed on rank 0 (prefetch.c). */
struct l3_prefetch_fig {
    int traced, replayed;
    char err[256];
    int n;
    double ag, with_exposed, with_step, without_exposed, without_step, hidden, ideal;
};

/* What one rank saw of a case: figures and names only, gathered once by the harness. */
struct l3_obs {
    int rank, color, grp_rank, grp_n, ngroups;
    int n_layers, d_ff, seq_len, vocab; /* the case's model */
    struct l3_shape shape;     /* the group's layout (the student's, judged) */
    double ddp[5];             /* what DDP holds per rank, by category */
    double pass_work;          /* the ops' workspace of one pass on this rank's slice */
    int layout_tried;          /* the layout test: layouts compared */
    int null_field;            /* 1 params, 2 grads, 3 m/v, 4 pass: a field zero_new left NULL */
    struct l3_layout_diff layout;
    double peak[PL_MEM_NCAT];  /* bytes above what the rank held before zero_new */
    double leak[PL_MEM_NCAT];  /* bytes a step left allocated */
    double peak_total;         /* the peak of all categories together, above the same base */
    int leak_step;             /* -1: none */
    double left[PL_MEM_NCAT];  /* bytes still allocated after zero_free, above the base */
    double bytes[L3_STEPS][PL_NKINDS];
    long calls[L3_STEPS][PL_NKINDS];
    int steps_done, trained;   /* trained: every step ran and the stage was freed */
    struct gr_unseen unseen;   /* a pass buffer the ledger cannot see */
    struct l3_on_host on_host; /* a buffer computed on that is host memory */
    int in_flight;             /* operations on zero_new's communicator left after zero_free */
    struct {                   /* this rank's group's losses against its reference */
        int step;              /* the first step off, -1 when all agree */
        double got, want, err;
        double mine[L3_STEPS];  /* what zero_step returned on this rank */
        double slice[L3_STEPS]; /* the reference's loss on this rank's slice of the batch */
        int rank_off;           /* 1 + the first step mine is off slice; 0 when none */
        double rank_err;
    } loss;
    struct {                   /* a buffer zero_new allocated shorter than zero.h asks */
        int field;             /* 0 none; 1 params, 2 grads, 3 m, 4 v */
        double got, want;      /* bytes the ledger holds for it, bytes zero.h asks */
    } short_buf;
    struct {                   /* the first padding element of z->params that is not zero */
        int at;                /* 0 none; 1 after zero_new; 1 + s after step s */
        int unit, part, shard; /* shard: z->params is the shard (stage 3) */
        double elem, value;    /* the element of the unit's padded range, and its value */
    } pad;
    struct l3_grads_fig grads; /* group's first rank: the first wrong gradient */
    struct {                   /* stages 1 and 2: this rank's replica after each step */
        int steps;             /* steps checked */
        uint64_t digest[L3_STEPS]; /* FNV-1a of the parameters' bytes */
        int step;              /* the first step it differs from its group's first rank's */
        double elem;           /* there, the first element that differs */
        int owner;             /* whose chunk holds it */
        char tensor[PL_NAME_LEN];
    } replica;
    struct l3_params_fig params;
    struct l3_prefetch_fig prefetch; /* rank 0 */
};

/* What the link-time wrappers record (gr_wrap_ctx points here while the state lives): this
 * rank's gradients of one step, given for each flat element, how many times one was given,
 * and the smallest and largest step count t the calls were given; and the first buffer the
 * pass or AdamW computed on that lay in a PL_HOST block. */
struct l3_watch {
    struct {
        int on;
        size_t numel;
        float *g;
        int *count;
        int t_min, t_max;
    } grads;
    struct {
        int on;
        struct l3_on_host first;
    } host;
};

/* The traced step of the prefetch test (prefetch.c). */
struct l3_prefetch {
    int wanted, traced, was_on;
    struct pl_merged_trace trace; /* rank 0 */
};

/* The ZeRO group of a case: the communicator zero_new is given, split from the world and
 * freed after zero_free as a program that owns it would; its raw MPI twin, over which the
 * grader's own reads (gradients, replicas, the stage-3 shards, the loss) go; this rank's
 * place in it and how many groups the world holds. Each group trains its own batches. */
struct l3_group {
    struct pl_comm *comm;
    MPI_Comm mpi;
    int n, rank, color, ngroups;
};

/* The lab's state, made by setup. */
struct l3_state {
    uint64_t seed;
    int stage;                   /* 0: the layout test */
    int ncases;                  /* the layout test's one, or a stage's (L3_CASE_GROUPS on 4
                                    ranks and more, an even count) */
    int trace_prefetch;          /* stage 3 with the prefetch test: trace a step with prefetch */
    struct l3_group grp;
    struct pl_tokens data;
    struct gr_train_setup setup;
    struct gr_reference ref;
    struct l3_obs *ob;           /* this rank's observation of the case running */
    double losses[L3_STEPS];
    /* The gradient each step updates with, against ref (gradients.c), and the replicas
     * compared, until the first step where either is wrong. */
    int grads_on, grads_bad;
    struct zero *z;
    float *flat;                 /* the trained parameters (Psi floats), read before zero_free */
    struct pl_model_layout lay;
    struct zero_layout e0;       /* the group's rank 0's layout: its z->zl once zero_new has
                                    run, before that its zero_layout_init (l3_layout_of_code) */
    struct zero_layout mine;     /* this rank's z->zl, judged */
    struct l3_watch watch;
    struct l3_prefetch pf;
    /* perf mode */
    struct gr_batch b;
    struct pl_model *base;
    float *mom_m, *mom_v;
    float *full, *shard;         /* a padded full buffer and a shard, for the collectives */
    size_t own_off, own_n;       /* the flat range the baseline's AdamW updates */
};

/* ---- cases_layout.c ---- */

/* The tightest layout zero.h admits: chunks of ceil(numel/n), the units in flat order. The
 * bench's figures (the handout's) are this layout's, and it stands in for a layout the
 * student's code has not written yet or broke. */
void l3_tight_layout(struct zero_layout *zl, const struct pl_model_layout *lay, int n,
                     int rank);
/* The figures the judge's formulas read of a layout that keeps the invariants. */
struct l3_shape l3_shape_of(const struct zero_layout *e);
/* 1 when g, rank `rank`'s layout of lay on n ranks, keeps zero.h's invariants; otherwise 0
 * and the first one it breaks in d (its code, unit and figures; the caller says whose). */
int l3_judge_layout(const struct pl_model_layout *lay, int n, int rank,
                    const struct zero_layout *g, struct l3_layout_diff *d);
/* 1 when g cuts the model as g0 (another rank's) does, rank aside; otherwise 0 and the
 * first field that differs in d (L3_LD_UNEQUAL; got is g's, want g0's). */
int l3_same_cut(const struct zero_layout *g, const struct zero_layout *g0,
                struct l3_layout_diff *d);
/* The student's zero_layout_init for (lay, n, rank) when it is written and keeps the
 * invariants (returns 1); otherwise the tight layout (returns 0). Resets the stub record. */
int l3_layout_of_code(struct zero_layout *e, const struct pl_model_layout *lay, int n,
                      int rank);
/* The layout test: zero_layout_init on model sizes drawn from the seed, on 1 to 9 ranks,
 * every rank's, judged by the invariants. Stops at the first layout broken (kept in d) or
 * stub. */
int l3_run_layouts(uint64_t seed, struct l3_layout_diff *d, int *tried);
/* The model's flat parameters (Psi floats, host, malloc'd) as this rank's state holds them:
 * stage 3 gathered from every shard of the group (raw MPI over group). */
float *l3_flat_params(const struct zero *z, const struct zero_layout *zl, MPI_Comm group);

/* ---- padding.c ---- */

/* The single-device reference's loss on this rank's slice (rank of n) of each step's batch,
 * its parameters replayed from ref's gradients: what zero_step returns on that rank. */
void l3_slice_losses(const struct gr_reference *ref, int rank, int n, double *out);
/* Records in v the first buffer of z shorter than zero.h asks for layout e (by the memory
 * ledger's sizes); 1 when none is. */
int l3_check_buffers(const struct zero *z, const struct zero_layout *e, struct l3_obs *v);
/* Records in v (once) the first padding element of z->params, by layout e, that is not zero
 * (at: 1 after zero_new, 1 + s after step s). */
void l3_check_padding(const struct zero *z, const struct zero_layout *e, int at,
                      struct l3_obs *v);

/* ---- cases.c ---- */

struct pl_model_config l3_graded_config(uint64_t seed);
struct gr_train_setup l3_graded_setup(const struct pl_tokens *data, uint64_t seed);
int l3_has_groups(void);
void l3_mem_current(double *out);
/* Memory DDP holds per rank: the single-device reference, measured while it trains. */
void l3_measure_reference(struct gr_reference *ref, const struct gr_train_setup *setup,
                          double *ddp);
/* Collective: case i's ZeRO group, split from the world; its release after zero_free,
 * keeping in *in_flight (may be NULL) the operations left running on it. */
void l3_group_open(struct l3_group *g, int i);
void l3_group_close(struct l3_group *g, int *in_flight);
/* Collective: case i run, this rank's figures in st->ob. */
void l3_run(struct l3_state *st, int i);
/* What the last case left. */
void l3_forget_case(struct l3_state *st);

/* ---- judge.c ---- */

const char *l3_stage_name(int stage);
const char *l3_section_of_stage(int stage);
struct l3_allowance l3_stage_allowance(int stage, const struct l3_shape *zl, int prefetch);
/* zero_new's prefetch flag in case i. */
int l3_case_prefetch(int stage, int i);
/* The verdict of part on case i of ncases (stage 0: the layout test), from every rank's
 * struct l3_obs in all; no MPI: the reasons go to why. */
int l3_judge(int stage, int i, int ncases, const char *part, const struct gr_obs *all,
             struct gr_why *why);

/* ---- judge_correct.c ---- */

/* The layout test's verdict from rank 0's observation. */
int l3_judge_layouts(const struct l3_obs *o, struct gr_why *why);
/* The part "correct" of case i of ncases. */
int l3_judge_correct(int stage, int i, int ncases, const struct gr_obs *all, struct gr_why *why);

/* ---- gradients.c ---- */

/* Starts recording one step's pl_model_adamw_flat calls on this rank into w (numel: Psi). */
void l3_grads_begin(struct l3_watch *w, size_t numel);
/* Stops recording (the wrapped calls then only pass through). */
void l3_grads_end(struct l3_watch *w);
void l3_grads_free(struct l3_watch *w);
/* Collective over the world (raw MPI): the step's recorded gradient of every rank of the
 * ZeRO group `group` against ref's gradient of step `step`, clipped at clip as the reference
 * does; each group against its own ref. e is the group's judged layout on its n ranks. The
 * group's first rank records in f the mistake that explains a wrong gradient, with its
 * figures. 1 on every rank when every group was right. */
int l3_grads_observe(const struct l3_watch *w, const struct gr_reference *ref, int step,
                     float clip, const struct zero_layout *e, MPI_Comm group,
                     struct l3_grads_fig *f);
/* A clip threshold that the global norm of ref's first gradient exceeds and that lies
 * between the smallest and the largest norm of one rank's shard of it on e's n ranks. */
float l3_clip_between_shards(const struct gr_reference *ref, const struct zero_layout *e);

/* ---- on_host.c ---- */

/* Starts watching this rank's calls and forgets what was seen. */
void l3_host_begin(struct l3_watch *w);
/* Stops watching and returns the first buffer seen in a PL_HOST block. */
struct l3_on_host l3_host_end(struct l3_watch *w);
/* From a wrapper: notes buf when it lies in a live PL_HOST block: argument arg of call
 * (part >= -1 names the pass's part, otherwise none). */
void l3_host_place(const void *buf, const char *call, const char *arg, int part);

/* ---- bench.c ---- */

int l3_probe(struct l3_state *st);
double l3_perf(struct l3_state *st);
void l3_bench(const struct gr_args *a);

#endif
