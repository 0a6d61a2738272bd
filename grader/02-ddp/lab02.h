/* lab02.h: what the files of Lab 2's grader (data parallelism) share. Its state (struct
 * l2_state) is made by setup on the heap and freed by finish. The lab is on the harness's new
 * shape (harness.h): a case is run into this rank's observation (struct l2_obs, figures
 * only), the harness gathers every rank's once, and judge.c words the verdict on rank 0 with
 * no MPI. The files depend one way: driver.c -> cases.c, checks.c, bench.c, judge.c;
 * bench.c -> cases.c; cases.c <-> checks.c (a step runs, then is checked); checks.c ->
 * calls.c, accum.c.
 *
 *   cases.c    the model, the case table, the single-device references, one case run
 *   checks.c   the checks of a case in flight: setup, each step's gradient, loss,
 *              replicas, memory and traffic, each recorded as figures
 *   bench.c    the overlap on the modelled timeline, the perf mode, the bench mode
 *   judge.c    every reason of parts correct, traffic and overlap, worded from the gathered
 *              observations (no MPI; tests/judge/02-ddp.c runs it alone)
 *   calls.c    the gradient all-reduces seen where they are made (lab.mk's --wrap)
 *   accum.c    what a step's accumulation microbatches left behind
 *   uneven.c   the uneven-batch cases: each rank's count, their reference, and what a wrong
 *              gradient equals instead (the mean of the ranks' means, per-rank factors)
 *   uneven_words.c  their reasons, worded from the gathered observations (no MPI) */
#ifndef LAB02_H
#define LAB02_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "accum.h"
#include "calls.h"
#include "ddp.h"
#include "harness.h"
#include "paralab.h"
#include "todo.h"
#include "train.h"

#define K_STEPS 4
#define GLOBAL_B 24      /* sequences per step: 1, 2, 3 and 4 ranks all divide it */
#define MICROBATCHES 2   /* accumulation: and every rank's slice splits in two */
#define CORPUS_TOKENS 65536
/* Buckets of 24 KiB cut the blocks' tensors at uneven places, and wte and head.w (32 KiB
 * each) are larger than a bucket; 1 MiB holds the whole gradient in one bucket. */
#define BUCKET_SMALL (24u * 1024u)
#define BUCKET_ALL (1024u * 1024u)
/* The overlap test replays the step as the step of a model with GPT-2 small's parameter
 * count and this many tokens per rank (handout section 8): every transfer's bytes times
 * MODEL_PSI / Psi, every compute's FLOPs times that and MODEL_TOKENS / tokens per rank. */
#define MODEL_PSI 124e6
#define MODEL_TOKENS 8192.0
#define OVERLAP_PROFILE "dgx-h100"
/* The overlap is placed between the serial sum (compute + communication: nothing hidden)
 * and the perfect-overlap bound (all of the communication hidden): full marks from hiding
 * OVERLAP_FULL of the all-reduce time (the last bucket, reduced after backward ends, can
 * never hide), none up to OVERLAP_NONE (blocking all-reduces after backward). */
#define OVERLAP_FULL 0.50
#define OVERLAP_NONE 0.05
#define PERF_ROUNDS 5
#define PERF_STEPS 10
#define PERF_BATCHES 3
#define L2_MAX_CASES 8
/* Beside the gradient's all-reduces a step may make one all-reduce of at most this many
 * floats, outside m->grads: the ranks' counts of sequences (ddp.h, the count exchange). */
#define L2_COUNT_FLOATS 16
#define L2_MAX_PARTS 256

extern const char *const L2_VARIANT_NAME[3];

/* One case: the DDP's options, its microbatches, and the world split into this many
 * data-parallel groups, each its own DDP. */
struct l2_case {
    struct ddp_options opt;
    int microbatches;
    int groups;
    int uneven;   /* the ranks hold different numbers of sequences (uneven.c) */
    char why[128];
};

/* The run's corpus, model and batches, and the single-device references. */
struct l2_setup {
    struct pl_tokens data;
    struct gr_train_setup train;
    struct gr_reference ref;
    /* On an even rank count: the reference of the other data-parallel group, trained on
     * other batches (another shuffle of the corpus), so that the two groups hold different
     * data and a collective over the world mixes them. */
    struct gr_reference other;
    int has_other;
};

struct l2_outcome {
    int correct, traffic;         /* the case goes on; its traffic is still right (agreed) */
    struct pl_merged_trace trace; /* rank 0: the traced step, when asked */
};

/* The first invariant of ddp.h's bucket plan a reported plan breaks (buckets.c), walking
 * from bucket 0: */
enum l2_pcode {
    L2_P_OK,
    L2_P_COUNT,     /* ddp_num_buckets outside 1 .. n_tensors */
    L2_P_END,       /* bucket `bucket` is empty or does not end at `end` (the buffer's end for
                       bucket 0, bucket-1's start after it) */
    L2_P_SPLIT,     /* bucket `bucket` begins inside a tensor */
    L2_P_CAP,       /* bucket `bucket` holds `tensors` tensors in more than bucket_bytes */
    L2_P_UNCOVERED, /* the last bucket begins at `end` > 0: elements [0, end) are in none */
    L2_P_MORE       /* more buckets than the fewest (want_n); `bucket` and the next fit in
                       one ([off, off+len)), or -1 */
};
struct l2_plan_fig {
    int code;               /* enum l2_pcode */
    int got_n, want_n;      /* buckets reported; the fewest any plan of the contract has */
    int bucket, tensors;
    size_t bucket_bytes, off, len, end;
};

/* Why a case fails part traffic, in figures: the first failure a check found (rank 0 records
 * it; judge.c words it when the part is judged). */
enum l2_tcode {
    L2_T_NONE, L2_T_STEP_BYTES, L2_T_STEP_CALLS, L2_T_BROADCAST, L2_T_PLAN,
    L2_T_MICROBATCH, L2_T_RANGES,
    L2_T_COUNT_AGAIN  /* an accumulation microbatch made a second count exchange */
};
struct l2_tfig {
    int code;               /* enum l2_tcode */
    int step, mb, rank;     /* where: step and microbatch from 0, the rank that sent */
    int n, world;           /* the group's ranks, the world's */
    long calls, other, want_calls;
    double got, ar, want;   /* bytes: sent, of it in all-reduces (broadcasts), the formula's */
    struct l2_plan_fig plan;   /* L2_T_PLAN: rank 0's plan */
    struct l2_range_fig range; /* L2_T_RANGES */
};

/* The check that stopped a case's training, the same on every rank (each check is agreed);
 * the figures it needs are rank 0's, or each rank's own where a field says so. */
enum l2_ccode {
    L2_C_NONE,
    L2_C_INIT_CHANGED, /* after ddp_new rank 0's parameters are not its own: bad_elem */
    L2_C_NOT_BROADCAST, /* after ddp_new a replica differs from rank 0's: bad_rank, bad_elem */
    L2_C_EARLY_START,  /* an all-reduce started before its gradients were final: early */
    L2_C_STEP_KEPT,    /* a step kept memory: step_kept */
    L2_C_GRAD_BITS,    /* the gradients agree with the reference, not bit for bit: bad_* */
    L2_C_GRADS,        /* the gradient differs from the reference: grads */
    L2_C_REPLICAS,     /* after the update a replica differs from rank 0's: bad_* */
    L2_C_LOSS,         /* a step's loss: loss */
    L2_C_PARAMS        /* the parameters after K steps: params */
};

/* Rank 0: why a step's gradient is wrong, from figures every rank computed. */
struct l2_gfig {
    struct gr_param_verdict v; /* the worst tensor against the reference */
    int replicas_equal, bad_rank;
    size_t bad_elem;           /* the first element a rank's gradient differs from rank 0's */
    double ratio;              /* ||yours|| / ||reference's|| over the world */
    int world_mean;            /* it is the mean of both groups' references */
    int kept_last;             /* it is this step's plus the last step's, clipped */
    int zeroed_each;           /* it is the last microbatch's alone */
    int summed, async_avg;     /* rank 0's all-reduces: PL_SUM; asynchronous PL_AVG */
    /* struct l2_accum's figures: the first accumulation microbatch that communicated (-1:
     * none), the rank that sent most then, its bytes and calls; the rank that sent least in
     * the last microbatch and the finish, and its bytes */
    int acc_mb, acc_rank, late_rank;
    double acc_bytes, late_bytes;
    long acc_calls;
};

/* One rank's group's loss of a step against its reference. */
struct l2_loss_fig {
    double got, want, err;
    double mine;  /* this rank's own: the mean of what its ddp_forward_backward calls returned */
};

/* Rank 0, case 0: the overlapped step replayed on the modelled timeline. */
struct l2_ofig {
    int replayed;      /* 0: err says why not */
    char err[512];
    double hidden;     /* the share of the all-reduce time hidden */
    double exposed, comm, step_time, compute; /* seconds, modelled */
    double wall_step, wall_wait; /* seconds, rank 0's traced step on this machine */
};

/* One rank's observation of one case (the harness gathers every rank's): figures and names
 * only, no pointers. */
struct l2_obs {
    int rank, nranks;
    struct l2_case c;
    struct pl_model_config cfg; /* the model: judge.c names tensors from its layout */
    size_t numel;
    int code, step;             /* enum l2_ccode, its step from 0 */
    int bad_rank;               /* rank 0: L2_C_NOT_BROADCAST, _GRAD_BITS, _REPLICAS */
    size_t bad_elem;            /* rank 0: and L2_C_INIT_CHANGED */
    struct l2_gfig grads;       /* rank 0: L2_C_GRADS */
    struct gr_param_verdict params; /* rank 0: L2_C_PARAMS */
    struct l2_early_fig early;  /* this rank's first all-reduce started early */
    struct l2_late_fig late;    /* this rank's first overlapped all-reduce started late */
    double step_kept;           /* this rank: bytes held after step `step` more than before */
    struct l2_loss_fig loss;    /* this rank's group's, at step `step` */
    int in_flight;              /* this rank: operations left on the case's comm after ddp_free */
    double free_kept;           /* this rank: bytes held after ddp_free more than before */
    int hook_left;              /* this rank: its backward hook still set after ddp_free */
    struct l2_tfig traffic;     /* rank 0: the first traffic failure */
    struct l2_ofig overlap;     /* rank 0, case 0 with part overlap */
    /* uneven cases, L2_C_GRADS: this rank's figures (uneven.c) */
    int seqs;                   /* the sequences this rank held in step `step` */
    int all_seqs;               /* and every rank of its group together */
    double fit, fit_err;        /* its gradient against the reference's: the best factor, and
                                   the relative distance from the reference times it */
    double means_err;           /* its gradient's relative distance from the average of the
                                   ranks' gradients of their own mean losses */
};

/* The lab's state: the harness's, made by setup on the heap (driver.c). */
struct l2_state {
    uint64_t seed;       /* --seed */
    const char *svg;     /* --svg FILE, or NULL */
    size_t bench_bucket; /* bench: --bucket-bytes */
    const char *op;
    struct l2_case cases[L2_MAX_CASES];
    int ncases, want_traffic, want_overlap;
    struct l2_setup s;      /* check mode: with the reference trained */
    struct l2_outcome last; /* of the last case run */
    char subject[64];
    /* perf mode: the student's DDP and the kit's own model, and the ranges the variant
     * all-reduces (one per tensor, or the header's bucket plan) */
    struct pl_model *m, *base;
    struct ddp *d;
    struct gr_batch b;
    size_t part_off[L2_MAX_PARTS], part_len[L2_MAX_PARTS];
    int nparts;
};

/* One case in flight: what its phases share. Every check is collective, so all ranks follow
 * the same path. */
struct l2_run {
    const struct l2_setup *s;
    const struct l2_case *c;
    struct l2_outcome *out;
    struct l2_obs *ob;     /* this rank's observation of the case */
    struct l2_tfig *tfig;  /* rank 0: its first traffic failure (&ob->traffic) */
    struct pl_model *m;
    struct ddp *d;
    struct pl_ledger *all; /* rank 0: every rank's ledger delta */
    struct pl_comm *comm;  /* the group ddp_new was given, split from the world */
    MPI_Comm group;        /* the same ranks, for the grader's own checks */
    const struct gr_reference *ref; /* this rank's group's single-device reference */
    int want_traffic, nplan;
    size_t *plan_off, *plan_len; /* the plan ddp_bucket_range reports, once judged (traffic) */
    struct l2_accum acc;   /* the step's accumulation microbatches, for the reasons */
    struct l2_calls *calls; /* the step's gradient all-reduces */
    int *counted;          /* rank 0: each rank's count exchanges in this step's accumulation
                              microbatches */
    const int *tokens, *targets; /* this rank's slice of the step, B sequences */
    int B, all_B;          /* and every rank's of its group together */
};

/* ---- judge.c (no MPI: tests/judge/02-ddp.c links it alone) ---- */

/* Rank 0: the verdict of part on case i from every rank's observation (struct l2_obs), its
 * reasons said into why. */
int l2_judge(int i, const char *part, const struct gr_obs *all, struct gr_why *why);
/* Ranks of one case's data-parallel group on nranks: the whole world, or one of its equal
 * groups. */
int l2_group_size(const struct l2_case *c, int nranks);
/* The "case" line of c on nranks. */
void l2_describe_case(const struct l2_case *c, int nranks, char *buf, size_t len);
/* The tensor holding flat element i, or NULL. */
const struct pl_param_desc *l2_tensor_at(const struct pl_model_layout *lay, size_t i);
/* "[off, off+count), NAME" or "[off, off+count), FIRST .. LAST". */
void l2_range_text(const struct pl_model_layout *lay, size_t off, size_t count, char *buf,
                   size_t len);
/* "tensors h.3.mlp.w_fc2 .. head.w" for the range [off, off+len). */
void l2_range_tensors(const struct pl_model_layout *lay, size_t off, size_t len, char *buf,
                      size_t blen);

/* The graded model (judge.c, so that the judge test builds the same layout). */
struct pl_model_config l2_config(uint64_t seed);

/* ---- uneven_words.c (no MPI: the judge test links it beside judge.c) ---- */

/* Rank 0, an uneven case whose gradient is wrong: the reason when every rank's gradient is
 * the average of the ranks' own means, or the reference's times a factor of each rank's
 * own; 0 when neither. */
int l2_uneven_words(const struct gr_obs *all, struct gr_why *why);
/* A step's traffic with more than one count exchange (L2_T_STEP_CALLS beyond the one
 * allowed, L2_T_COUNT_AGAIN). */
void l2_count_words(const struct l2_obs *o, const struct l2_tfig *f, struct gr_why *why);

/* ---- buckets.c (no MPI: the judge test links it beside judge.c) ---- */

/* A plan with the fewest buckets of bucket_bytes any plan of ddp.h's contract can have
 * (off, len: room for n_tensors each); returns their count. */
int l2_fewest_plan(const struct pl_model_layout *lay, size_t bucket_bytes, size_t *off,
                   size_t *len);
/* The n buckets [off[i], off[i]+len[i]) against ddp.h's contract: 1, or 0 with the first
 * invariant broken in f. */
int l2_judge_plan(const struct pl_model_layout *lay, size_t bucket_bytes, int n,
                  const size_t *off, const size_t *len, struct l2_plan_fig *f);
/* Words f (for judge.c). */
void l2_plan_words(const struct pl_model_layout *lay, const struct l2_plan_fig *f,
                   struct gr_why *why);

/* ---- cases.c ---- */

/* Ranks of one case's data-parallel group in this run. */
int l2_dp_size(const struct l2_case *c);
int l2_make_cases(const char *op, uint64_t seed, struct l2_case *cs);
/* The run's corpus, model and batches; with_reference also trains the single-device
 * reference for `steps` steps (the check mode's), otherwise only its layout is filled in. */
void l2_setup_init(struct l2_setup *s, uint64_t seed, int steps, uint64_t data_seed,
                   int with_reference);
void l2_setup_free(struct l2_setup *s);
/* A replica initialised from another seed on every rank of its group but 0: only a
 * broadcast makes the replicas equal. */
struct pl_model *l2_new_replica(const struct l2_setup *s, int rank);
/* Collective calls that move data: a barrier carries none. */
long l2_data_calls(const struct pl_ledger *l);
/* Bytes this rank holds in the kit's memory ledger now. */
double l2_mem_held(void);
/* Runs one case of the student's DDP into this rank's observation ob; fills st->last.
 * trace_step >= 0 records that step's trace. */
void l2_run_case(struct l2_state *st, int i, int trace_step, struct l2_obs *ob);

/* ---- checks.c (collective unless said): each records why in r->ob ---- */

/* Rank 0's traffic verdict on every rank, when traffic is judged. */
void l2_traffic_verdict(struct l2_run *r, int ok);
/* Section 3: replicas equal to rank 0's after ddp_new, and what it broadcast; section 5: the
 * bucket plan against the rule of ddp.h. Returns 0 when the case cannot go on. */
int l2_check_setup(struct l2_run *r, const struct pl_ledger *delta);
/* Rank 0: accumulation microbatches send nothing. */
int l2_judge_silent_microbatch(const struct l2_run *r, int step, int mb);
/* Rank 0: the traffic of one step against the formulas. */
int l2_judge_step_traffic(const struct l2_run *r, int step);
int l2_judge_call_ranges(const struct l2_run *r, int step);
int l2_check_issue_times(const struct l2_run *r, int step);
int l2_check_grads(const struct l2_run *r, int step);
int l2_check_loss(const struct l2_run *r, int step, double loss);
int l2_check_params(const struct l2_run *r);
int l2_check_replicas(const struct l2_run *r, int step);
/* 1 when no rank holds more of the ledger than at `before`; *mine: what this rank does. */
int l2_check_nothing_kept(double before, double *mine);

/* ---- uneven.c ---- */

/* The sequences rank r of n holds in each microbatch of step `step` in the uneven cases:
 * 1 + ((r + step) mod n) x (1 + step mod 2), so the counts differ between ranks, one rank
 * holds a single sequence, and the step's total changes from step to step. */
int l2_uneven_seqs(int r, int n, int step);
/* The sequences of step `step` on n ranks with mb microbatches, all ranks together; and the
 * most of any of the K steps. */
int l2_uneven_total(int n, int mb, int step);
int l2_uneven_most(int n, int mb);
/* The single-device reference of the uneven cases on n ranks with mb microbatches: K steps,
 * step s on the first l2_uneven_total(n, mb, s) sequences of a global batch of
 * l2_uneven_most(n, mb) (setup->global_B is set so). Local. */
void l2_uneven_reference(struct gr_reference *ref, const struct gr_train_setup *setup, int n,
                         int mb);
/* Collective, after a wrong gradient (host) of an uneven case: this rank's figures into
 * r->ob (fit, fit_err, means_err, seqs). */
void l2_uneven_figures(const struct l2_run *r, int step, const float *host, const float *want);
/* Rank 0, bench: the figures of the handout's uneven-batch example (section 7). */
void l2_uneven_handout(const struct l2_setup *s);

/* ---- bench.c ---- */

/* Rank 0: the traced step of case 0 replayed on the modelled timeline, into f. */
void l2_observe_overlap(const struct l2_state *st, struct l2_ofig *f);
int l2_probe(void *st);
double l2_perf(void *st);
void l2_bench(const struct gr_args *a);

#endif
