/* lab08.h: what Lab 8's grader files share (one prefix, l8_ / L8_), on the lab harness's new
 * shape (grader/common/harness.h). The state lives on the heap (driver.c's setup, or bench.c
 * for the bench mode); only const tables are at file scope. A case fills the rank's
 * observation (struct l8_obs: figures, no pointers) and judge.c gives the verdict from it
 * alone, without MPI and without the planner (tests/judge/08-placement.c runs it alone).
 *
 *   cases.c   the oracle's gate (the wrappers of lab.mk), the case tables, building,
 *             drawing and observing a case (the student's figures and the oracle's)
 *   judge.c   the verdicts of every op and their reasons; the ops' names
 *   bench.c   the bench table, the handout's figures, --sweep and --svg
 *   driver.c  setup, the harness callbacks, the lab's options */
#ifndef LAB08_H
#define LAB08_H

#include <stddef.h>
#include <stdint.h>

#include "harness.h"
#include "paralab.h"
#include "placement.h"
#include "plan_internal.h"
#include "plan_report.h"

/* Each graded field of struct pl_plan_memory and struct pl_plan_time, and how close it must
 * be (L8_TOL, judge.c): a fact exactly (the layers and microbatches the first stage holds),
 * the model state within L8_TOL_STATE (its bytes per parameter are stated), and every
 * estimate that rests on a modelling choice within the smallest round figure (a rung of
 * L8_TOL_RUNGS) that every documented alternative of the handout (tests/alt/08-placement)
 * meets on every graded configuration: bench --tolerance prints a code's worst deviation per
 * field, and tests/lab08_tolerance.sh checks the table against the alternatives'. The link
 * classes are compared exactly, outside this table. */
enum l8_field {
    L8_F_PARAMS, L8_F_GRADS, L8_F_OPTIM, L8_F_ACTIV, L8_F_TOTAL, L8_F_LAYERS, L8_F_INFLIGHT,
    L8_F_ACTIV_LAYER, L8_F_COMPUTE, L8_F_EXPOSED, L8_F_BYTES = L8_F_EXPOSED + PL_NAXES,
    L8_F_BUBBLE = L8_F_BYTES + PL_NAXES, L8_F_STEP, L8_F_MFU, L8_F_HFU, L8_F_TFLOPS, L8_NFIELDS
};
#define L8_F_MEMORY_END L8_F_COMPUTE /* the memory test's fields come first */
#define L8_TOL_EXACT 1e-9  /* a fact: equal but for rounding */
#define L8_TOL_STATE 0.01  /* the model state: stated bytes per parameter */
#define L8_NRUNGS 10
extern const double L8_TOL_RUNGS[L8_NRUNGS]; /* 1%, 2%, 5%, 10%, 15% and so on to 50% */
extern const double L8_TOL[L8_NFIELDS];
extern const char *const L8_FIELD_NAMES[L8_NFIELDS];
/* The chosen step may be this much slower than the kit's best. A search whose estimates take
 * the handout's named alternative (section 4.3: both parameter groups' reductions hidden
 * together) picks, over the whole sweep, at worst 2.4% slower by the kit's model (Mixtral
 * with a 1M-token batch on 32 DGX H100 nodes; bench --sweep prints it, and the handout's
 * figure is checked against it); the wrong searches of tests/ lose 6% and more where they
 * lose. */
#define L8_TOL_QUALITY 0.03
#define L8_SANITY_POINTS 5.0 /* percentage points of MFU */
#define L8_MAX_CASES 24
/* Configurations the memory and time tests draw by the seed beyond their table. */
#define L8_N_DRAWN 3
/* Search cases drawn by the seed from the sweep's space (the hidden suite draws one more). */
#define L8_N_SEARCH_DRAWN 6
#define L8_HANDOUT "docs/labs/08-placement.md"

enum l8_op {
    L8_OP_MEMORY, L8_OP_TIME, L8_OP_SEARCH, L8_OP_SEARCH_HIDDEN, L8_OP_SANITY,
    L8_OP_SANITY_HIDDEN, L8_OP_QUESTIONS, L8_OP_SWITCHES, L8_NOPS
};
extern const char *const L8_OP_NAMES[L8_NOPS];
extern const char *const L8_OP_FUNCS[L8_NOPS];

struct l8_spec {
    const char *model, *profile;
    int nodes, seq;          /* seq 0: the preset's */
    double batch_tokens;     /* 0: the preset's */
    const char *config;      /* memory, time: the configuration; sanity: what is fixed */
    double published_mfu;    /* sanity: percent */
    const char *source;
};

/* The case tables (cases.c). */
extern const struct l8_spec L8_ESTIMATES[];
extern const int L8_N_ESTIMATES;
extern const struct l8_spec L8_SEARCHES[];
extern const int L8_N_SEARCHES;
extern const struct l8_spec L8_SEARCHES_HIDDEN[];
extern const int L8_N_SEARCHES_HIDDEN;
extern const struct l8_spec L8_SANITY[];
extern const int L8_N_SANITY;
extern const struct l8_spec L8_SANITY_HIDDEN[];
extern const struct l8_spec L8_QUESTIONS[];
/* The memory test of the configuration's switches (fp32, no_dropout, vocab_whole: handout
 * section 3.3), op "switches": placement_memory against the planner's as in "memory". */
extern const struct l8_spec L8_SWITCHES[];
extern const int L8_N_SWITCHES;
/* The models and clusters whose fitting configurations the memory and time tests draw from. */
extern const struct l8_spec L8_DRAW_POOL[];
extern const int L8_N_DRAW_POOL;

struct l8_case {
    struct pl_plan_model model;
    struct pl_plan_cluster cluster;
    struct pl_plan_config cfg;       /* memory, time, sanity: the configuration */
    const struct l8_spec *spec;
    int drawn;                       /* drawn by the seed (beyond the table) */
    struct pl_plan_config chosen;    /* search: the student's choice (bench) */
    struct pl_plan_result best;      /* search, sanity: the oracle's */
};

/* The planner's entry points lab.mk wraps: a code each, 0 for none (judge.c names them). */
enum l8_oracle {
    L8_OR_NONE, L8_OR_MEMORY, L8_OR_TIME, L8_OR_ACTIV, L8_OR_CHECK, L8_OR_SEARCH,
    L8_OR_MIN_NODES, L8_OR_TIME_LINKS, L8_OR_LINKS, L8_OR_CHECK_STEP, L8_OR_CHECK_PLACE,
    L8_OR_PACING, L8_NOR
};
extern const char *const L8_ORACLE_NAMES[L8_NOR];

/* What the wrappers of lab.mk record (reached through gr_wrap_ctx). */
struct l8_gate {
    int under_test;          /* the student's function is running */
    int called;              /* the first oracle function it called (enum l8_oracle) */
};

/* ---- what the rank observed in one case (judge.c words it; no pointers) ---- */

/* The case: model, cluster and configuration, as the messages name them. */
struct l8_where {
    char model[24], cluster[24];
    int seq, nodes, per_node;
    double batch_tokens;
    struct pl_plan_config cfg;       /* memory, time, sanity: the configuration */
};

/* What pl_plan_check's rules read of a choice, the model and the cluster, so that the judge
 * names the first rule broken in the kit's words (lib/plan_rules.h). */
struct l8_rules {
    int broken;                      /* the oracle's pl_plan_check rejects the choice */
    int layers, d_model, heads, kv_heads, d_ff, experts;
    double batch_seqs;               /* the global batch in sequences */
    double memory, hbm;              /* the choice's memory (l8_check_choice); the GPU's HBM */
};

struct l8_obs {
    int op;                          /* enum l8_op */
    int drawn;                       /* drawn by the seed */
    int oracle;                      /* enum l8_oracle: what the student's code called */
    struct l8_where where;
    struct pl_plan_memory mem, mem_ref;       /* memory: yours, the kit's */
    struct pl_plan_time time, time_ref;       /* time: yours, the kit's; sanity: yours */
    double dp_alt;                   /* time: section 4.3's alternative data-parallel time */
    int found;                       /* search: yours found a configuration */
    struct pl_plan_config chosen, best;       /* search: yours, the kit's best */
    double step, best_step;          /* search: both by the kit's model */
    struct l8_rules rules;           /* search: the rules of your choice */
    double published_mfu;            /* sanity: percent */
    char source[64];                 /* sanity: the run */
    struct placement_answers ans[2]; /* questions: yours, the kit's */
};

struct l8_state {
    enum l8_op op;
    uint64_t seed;
    struct l8_gate gate;
    struct l8_case cases[L8_MAX_CASES];
    int ncases;
    /* Drawn search cases keep their own spec (a case's spec outlives its draw). */
    struct l8_spec drawn[L8_N_SEARCH_DRAWN + 1];
    struct pl_plan_result scratch;   /* large: its points */
    const char *sweep;               /* bench --sweep: "all" or a preset's name */
    const char *svg;                 /* bench --svg FILE */
    int tolerance;                   /* bench --tolerance */
};

/* The kit's planner itself, past lab.mk's wrappers (cases.c defines the wrappers). */
double __real_pl_plan_time(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                           const struct pl_plan_config *cfg, struct pl_plan_time *out);
int __real_pl_plan_check(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                         const struct pl_plan_config *cfg, char *err, size_t errlen);
int __real_pl_plan_check_placement(const struct pl_plan_model *m,
                                   const struct pl_plan_cluster *c,
                                   const struct pl_plan_config *cfg, char *err, size_t errlen);
int __real_pl_plan_check_step(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                              const struct pl_plan_config *cfg, int memory, char *err,
                              size_t errlen);
double __real_pl_plan_memory(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                             const struct pl_plan_config *cfg, struct pl_plan_memory *out);
double __real_pl_plan_activation_layer(const struct pl_plan_model *m,
                                       const struct pl_plan_config *cfg);
int __real_pl_plan_search(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                          const struct pl_plan_fixed *fixed, struct pl_plan_result *res);
int __real_pl_plan_min_nodes(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                             int max_nodes);

/* cases.c */
struct l8_state *l8_state_new(enum l8_op op, uint64_t seed);
void l8_state_free(struct l8_state *st);
void l8_gate_open(struct l8_gate *g);
void l8_gate_close(struct l8_gate *g);
void l8_build_case(struct l8_case *t, const struct l8_spec *s, int parse_config);
void l8_plan_published(struct l8_case *t);
void l8_setup_cases(struct l8_state *st);
void l8_where_of(const struct l8_case *t, struct l8_where *w);
void l8_observe(struct l8_state *st, int i, struct l8_obs *o);
/* The kit's verdict on a search's choice: every rule of pl_plan_check, "memory fits" taken
 * with the lesser of the kit's memory and section 4.5's memory alternative's (no rebuilt
 * layer under full recomputation), into *memory, so that a search built on that documented
 * choice is judged by it. 0, or -1 with the first rule broken in err. */
int l8_check_choice(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                    const struct pl_plan_config *cfg, double *memory, char *err, size_t len);

/* judge.c: no MPI, no planner; reads its arguments alone */
int l8_find_op(const char *name); /* enum l8_op, or -1 */
/* "MODEL (seq S, T tokens per step) on N x CLUSTER[: CONFIG]" */
void l8_describe_where(const struct l8_where *w, int with_cfg, char *buf, size_t len);
/* The first rule of pl_plan_check that cfg breaks, in the kit's words: -1 with it in err,
 * or 0 when the figures break none. */
int l8_rule_words(const struct l8_rules *r, const struct l8_where *w,
                  const struct pl_plan_config *cfg, char *err, size_t len);
/* The verdict of part on a case of op, from rank 0's observation in all. */
int l8_judge(int op, const char *part, const struct gr_obs *all, struct gr_why *why);
/* How far each field of an observation of op (memory or time) is from what the judge
 * accepts, as a share of the kit's figure: 0 inside section 4.3's band, INFINITY where the
 * kit's is 0 and yours is not; -1 for the fields op does not grade. A field passes when its
 * deviation is at most L8_TOL[f]. */
void l8_deviation(int op, const struct l8_obs *o, double *dev);

/* bench.c */
void l8_bench(const struct gr_args *a);

#endif
