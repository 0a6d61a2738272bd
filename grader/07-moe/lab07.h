/* lab07.h: what the files of Lab 7's grader share (MoE expert parallelism, on the lab
 * harness, grader/common/harness.h). Its state (struct l7_state) is made by setup on the heap
 * and freed by finish; nothing at file scope but const tables. Each rank records what it
 * finds in figures (struct l7_obs); judge.c words them on rank 0. The files depend one way:
 * driver.c -> cases*.c, checks_train.c, bench.c, judge.c; bench.c -> cases*.c; everything ->
 * oracle.c, timeline.c, plots.c; judge.c on nothing but headers (no MPI).
 *
 *   cases_route.c   the router and the permutation on drawn probabilities
 *   cases_pass.c    the driver's forward and backward around the student's MoE branch
 *   cases_train.c   the training cases: the setup, K steps, the judges of each step
 *   checks_train.c  a step's MoE outputs, routing, traffic, gradients, EP group, placement
 *   judge.c         the verdicts and every reason's words, from the ranks' figures
 *   bench.c         bench mode: all-to-all volume and balance, the figures
 *   oracle.c        the single-device reference (oracle.h)
 *   timeline.c      part time: the student's MoE calls on the modelled timeline
 *   plots.c         the two figures of bench mode */
#ifndef LAB07_H
#define LAB07_H

#include <stddef.h>
#include <stdint.h>

#include "harness.h"
#include "model.h"
#include "moe.h"
#include "oracle.h"
#include "paralab.h"
#include "timeline.h"
#include "train.h"

#define L7_K_STEPS 3
#define L7_CORPUS_TOKENS 32768
#define L7_CF_NONE 0.0f /* "no dropping": the case uses a factor of E / k, 1e10 or infinity */
#define L7_MAX_CASES 16

/* The parts a case is judged on. */
enum l7_part { L7_CORRECT, L7_COUNTS, L7_TRAFFIC, L7_PLACEMENT, L7_TIME, L7_NPARTS };
extern const char *const L7_PART_NAMES[L7_NPARTS];

enum l7_op { L7_OP_ROUTER, L7_OP_PERMUTE, L7_OP_TRAIN };

/* The lab's options (harness.h's gr_args.opt, in this order). */
enum l7_opt { L7_OPT_EXPERTS, L7_OPT_TOP_K, L7_OPT_CF, L7_OPT_SKEW, L7_OPT_PLOTS_DIR };

struct l7_train_case {
    int E, k, ep;
    float cf;    /* L7_CF_NONE: no dropping */
    float coef;  /* the load-balancing loss's coefficient */
    float scale; /* the backward's loss_scale times n: 1 in most cases */
    float hot;   /* > 0: the router pushed to experts 0, 3, 6 and away from the others */
};

struct l7_route_case {
    int N, E, k;
    float cf, sharp, hot;
    float coef; /* aux_coef: 0.01 as usual, and others, 0 included */
};
extern const struct l7_route_case L7_ROUTE_CASES[];
extern const int L7_N_ROUTE_CASES;

/* ---- what a rank observes, in figures; judge.c words it ---- */

/* What a rank found wrong, in the order it found it; each code's figures in v, x, list and
 * name, as its comment says (i: a choice's index, k: top-k, e: an expert). */
enum l7_code {
    L7_R_CAPACITY,   /* v: N, E, k, got, want; x: cf */
    L7_R_EXPERT,     /* v: i, k, got, want */
    L7_R_KEPT,       /* v: i, k, expert, dropped here, dropped by the reference */
    L7_R_SLOT,       /* v: i, k, expert, got, want */
    L7_R_COUNT,      /* v: e, got, want */
    L7_R_DROPPED,    /* v: got, want */
    L7_R_GATE,       /* v: i, k; x: got, want */
    L7_R_ROW,        /* v: slot, e, got row, want row; x: got gate, want gate */
    L7_R_FP,         /* v: e; x: got f, got P, want f, want P */
    L7_R_AUX,        /* v: sum f P > 0; x: got, want, got / (E sum f P), aux_coef */
    L7_R_FRESH,      /* a second call wrong where a fresh routing is right */
    L7_R_IN_ROUTE,   /* v: N, E, k; x: cf, sharp, hot, coef (the route case) */
    L7_R_START,      /* v: e, got, want */
    L7_R_PERM,       /* v: q, got, want */
    L7_R_INV,        /* v: i, k, got, want */
    L7_R_IN_FLIGHT,  /* v: operations in flight after moe_free */
    L7_R_EP_SIZE,    /* v: a group given, world ranks, ep */
    L7_R_EP_ORDER,   /* v: ep; list: its ranks in moe_new's communicator */
    L7_R_BRANCH,     /* v: step, block, an expert of it empty; x: rel, tol, ungated, onto */
    L7_R_ROUTING_DIFFERS, /* quotes the rank's first finding of part counts */
    L7_R_LOSS,       /* v: step; x: loss, reference, relative error, tol */
    L7_R_TENSOR,     /* v: step (-1: the parameters after the last), expert tensor, elements
                      * not finite, reference all zeros, the router alone wrong, ep, ranks;
                      * x: own error, tol, least-squares scale, loss_scale; name: the
                      * tensor, the first one off */
    L7_R_HELD_EVERY, /* v: allocs after step 0, after the last, last step, category; x: bytes */
    L7_R_HELD_FREED, /* v: category; x: bytes */
    L7_R_DLN,        /* v: block, threw them away */
    L7_R_LAST_EARLY, /* moe_last_routing before a forward */
    L7_R_LAST_NULL,  /* v: block */
    L7_R_SHAPE,      /* v: block, N, E, k, cap, then the reference's N, E, k, cap */
    L7_R_IN_BLOCK,   /* v: block */
    L7_R_CALLS,      /* v: all-to-alls, all-to-all-vs, layers */
    L7_R_P2P,        /* x: bytes */
    L7_R_BARRIER,    /* v: barriers in the step, layers */
    L7_R_COUNTS_BYTES, /* v: layers, peers, experts each; x: got, want */
    L7_R_A2AV,       /* v: every expert's whole capacity; x: got, want */
    L7_R_BALANCED,   /* x: what a balanced routing sends */
    L7_R_SUMS,       /* v: ranks, copies; x: got, want, dense floats */
    L7_R_SUMS_HOW,   /* v: whole tensors summed; x: expert floats, this rank's of them */
    L7_R_PLACE,      /* v: ranks a node, ep; list: world ranks, sorted; x: us across, inside */
};

#define L7_NV 10
#define L7_NX 5
#define L7_LIST 16
#define L7_MAX_REASONS 16

struct l7_reason {
    int part, code; /* enum l7_part, enum l7_code */
    long v[L7_NV];
    double x[L7_NX];
    int list[L7_LIST];
    char name[2][PL_NAME_LEN];
};

/* One rank's observation of a case (the harness zeroes and gathers it). */
struct l7_obs {
    int op;                  /* enum l7_op */
    struct l7_train_case tc; /* a training case, and its tokens a rank */
    int N;
    /* part time, on the traced case: this rank's compute and what its work needs (ms at
     * the modelled size), their ratio; rank 0's replay of the step */
    int timed, replayed;
    double did_ms, need_ms, ratio, step_ms;
    int n; /* findings */
    struct l7_reason r[L7_MAX_REASONS];
};

/* The lab's state (the harness's; driver.c makes it). */
struct l7_state {
    uint64_t seed; /* --seed */
    /* the hidden suite's shapes (ops top1-hidden, top2-hidden): shorter sequences, other
     * expert counts on 6 ranks */
    int hidden;
    enum l7_op op;
    struct l7_train_case cases[L7_MAX_CASES];
    int ncases;
    struct pl_tokens data;
    struct l7_obs *ob;      /* the case's observation, while observe runs */
    struct l7_reason spare; /* where findings beyond L7_MAX_REASONS go */
    int why_part;           /* the part l7_note records for */
    int tracing;            /* the step traced for part time is running */
    struct l7_timeline tl;  /* part time's figures */
};

/* Records a finding for part st->why_part: v and x (may be NULL) are L7_NV and L7_NX
 * figures; returns it for the rest. */
struct l7_reason *l7_note(struct l7_state *st, enum l7_code code, const long *v,
                          const double *x);
/* 1 when this rank recorded a finding for part in this case. */
int l7_noted(const struct l7_state *st, int part);
#define L7_V(...) ((const long[L7_NV]){__VA_ARGS__})
#define L7_X(...) ((const double[L7_NX]){__VA_ARGS__})

/* ---- judge.c ---- */

/* The verdict of part on one case from every rank's observation: 1 or 0, the reasons in
 * why. No MPI. */
int l7_judge(const char *part, const struct gr_obs *all, struct gr_why *why);
void l7_describe_route_case(const struct l7_route_case *c, char *buf, size_t len);
/* Sequences per step: every rank count the lab runs on divides it (6 only in the hidden
 * suite). */
int l7_global_b(int n);
float l7_case_cf(const struct l7_train_case *c);
/* Case c of N tokens a rank on n ranks. */
void l7_describe_case(const struct l7_train_case *c, int N, int n, char *buf, size_t len);

/* ---- cases_route.c ---- */

/* The first difference between two routings, recorded; 1 when equal. */
int l7_compare_routing(struct l7_state *st, const struct pl_moe_routing *got,
                       const struct pl_moe_routing *want);
int l7_run_capacity(struct l7_state *st);
int l7_run_route_case(struct l7_state *st, const struct l7_route_case *c, int index);
int l7_run_permute_case(struct l7_state *st, const struct l7_route_case *c, int index);

/* ---- cases_train.c ---- */

int l7_seq_len(const struct l7_state *st);
struct pl_model_config l7_config(const struct l7_state *st, uint64_t seed,
                                 const struct l7_train_case *tc);
int l7_make_cases(int k, int n, int hidden, struct l7_train_case *cs);
/* Trains case c for K steps, every rank recording its findings per part. */
void l7_run_training(struct l7_state *st, const struct l7_train_case *c);

/* ---- cases_pass.c ---- */

struct l7_pass {
    const struct pl_model_config *c;
    int B, T, N;
    struct pl_attn_acts *attn;        /* [L] */
    float **xm, **ln, **mean, **rstd; /* [L]: the MLP half's input, ln2 and its statistics */
    struct pl_head_acts head;
    const int *tokens; /* of the last forward */
    float *x, *branch, *dln, *dbranch;
    float *stale_h; /* host [L*N*C]: what branch held before each moe_forward */
};

void l7_pass_new(struct l7_pass *ps, const struct pl_model_config *c, int B);
void l7_pass_free(struct l7_pass *ps);
double l7_pass_forward(struct l7_state *st, struct l7_pass *ps, struct pl_model *m,
                       struct moe *s, const struct gr_batch *b, float *branches_h);
void l7_pass_backward(struct l7_state *st, struct l7_pass *ps, struct pl_model *m,
                      struct moe *s, float scale);

/* One case's run: the reference, the model, the driver's pass and the student's layer. */
struct l7_run {
    struct pl_comm *lab; /* what moe_new is given: split from the world, freed after moe_free */
    float loss_scale;
    struct gr_train_setup setup;
    struct l7_or_reference ref;
    struct pl_model *m;
    struct gr_batch batch;
    struct l7_pass pass;
    struct moe *moe;
    float *host;     /* [numel] */
    float *branches; /* [L * N * C] the last step's MoE outputs */
};

void l7_run_open(struct l7_state *st, struct l7_run *r, const struct pl_tokens *data,
                 const struct l7_train_case *c, int steps, int with_reference,
                 struct pl_comm *lab);
void l7_run_close(struct l7_state *st, struct l7_run *r);
/* One training step of the student's MoE; 0 when a stub was reached. */
int l7_train_step(struct l7_state *st, struct l7_run *r, int step, double *loss);

/* ---- checks_train.c ---- */

double l7_rel_l2(const float *got, const float *want, size_t n, double floor, double *scale,
                 int *nonfinite);
/* step: the gradient of that step, or -1 for the parameters after the last. */
int l7_judge_tensors(struct l7_state *st, const struct l7_or_reference *o, const float *got,
                     const float *want, double tol, int step);
int l7_judge_branches(struct l7_state *st, const struct l7_or_reference *o, const float *got,
                      const float *stale, int C, int step);
int l7_judge_counts(struct l7_state *st, const struct l7_or_reference *o,
                    const struct moe *moe);
int l7_judge_traffic(struct l7_state *st, const struct l7_or_reference *o,
                     const struct pl_ledger *d);
int l7_learn_ep_group(struct l7_state *st, struct l7_or_reference *o, const struct moe *moe,
                      struct pl_comm *lab, int want);
int l7_judge_placement(struct l7_state *st, const struct l7_or_reference *o,
                       const struct pl_ledger *d);

/* ---- bench.c ---- */

/* The factors from the graded layer of N tokens a rank to the modelled one. */
void l7_model_scale(int N, const struct pl_model_config *c, double *flops_x, double *bytes_x);
void l7_bench(const struct gr_args *a);

#endif
