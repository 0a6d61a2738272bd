/* lab07.h: what the files of Lab 7's grader share (MoE expert parallelism, on the lab
 * harness, grader/common/harness.h). Its state (struct l7_state) is made by setup on the heap
 * and freed by finish; nothing at file scope but const tables. The files depend one way:
 * driver.c -> cases*.c, checks_train.c, bench.c; bench.c -> cases*.c; everything -> oracle.c,
 * timeline.c, plots.c.
 *
 *   cases_route.c   the router and the permutation on drawn probabilities
 *   cases_pass.c    the driver's forward and backward around the student's MoE branch
 *   cases_train.c   the training cases: the setup, K steps, the judges of each step
 *   checks_train.c  a step's MoE outputs, routing, traffic, gradients, EP group, placement
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

#define L7_REASON 1024

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
    /* this rank's reasons per part, and the part l7_why writes */
    char reasons[L7_NPARTS][L7_REASON];
    int why_part;
    int tracing;            /* the step traced for part time is running */
    struct l7_timeline tl;  /* part time's figures */
};
#define L7_WHY_TEXT(st) ((st)->reasons[(st)->why_part])

/* Adds a line to this rank's reason of part st->why_part. */
void l7_why(struct l7_state *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- cases_route.c ---- */

void l7_describe_route_case(const struct l7_route_case *c, char *buf, size_t len);
/* The first difference between two routings, said with its meaning; 1 when equal. */
int l7_compare_routing(struct l7_state *st, const struct pl_moe_routing *got,
                       const struct pl_moe_routing *want);
int l7_run_capacity(struct l7_state *st);
int l7_run_route_case(struct l7_state *st, const struct l7_route_case *c, int index);
int l7_run_permute_case(struct l7_state *st, const struct l7_route_case *c, int index);

/* ---- cases_train.c ---- */

/* Sequences per step: every rank count the lab runs on divides it (6 only in the hidden
 * suite). */
int l7_global_b(int n);
int l7_seq_len(const struct l7_state *st);
float l7_case_cf(const struct l7_train_case *c);
struct pl_model_config l7_config(const struct l7_state *st, uint64_t seed,
                                 const struct l7_train_case *tc);
int l7_make_cases(int k, int n, int hidden, struct l7_train_case *cs);
void l7_describe_case(const struct l7_train_case *c, int N, char *buf, size_t len);
/* Trains case c for K steps, every rank recording its reasons per part. */
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
int l7_judge_tensors(struct l7_state *st, const struct l7_or_reference *o, const float *got,
                     const float *want, double tol, const char *what);
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
