/* grade.h: what a lab tells the orchestrator (grader/bin/grade.c): its descriptor, with its
 * test plan, leaderboard figure and benchmark. A lab's grader/NN-name/plan.c defines one
 * struct gr_lab and registers it with GR_REGISTER_LAB; the build links every plan.c it finds
 * into the orchestrator and the plan of each lab into that lab's driver, so no list of labs
 * is kept by hand anywhere.
 *
 * A test is one part of one run of the lab's driver. Tests with the same driver arguments
 * and rank count that follow each other share one run. */
#ifndef GRADE_H
#define GRADE_H

#define GR_MAX_NP 16

/* What the person grading asked for, as a plan needs it. */
struct gr_plan_opts {
    int np[GR_MAX_NP];   /* rank counts from --np, 0-terminated; np[0] == 0: the lab's own */
    int perf_np;         /* ranks for performance tests */
    int hidden;          /* add the hidden suite */
};

struct gr_spec {
    const char *name;    /* shown after "NN-name: " */
    const char *op;      /* driver --op */
    const char *mode;    /* driver --mode: check or perf */
    const char *part;    /* the verdict the driver reports: correct, traffic, memory, perf */
    const char *tag;     /* correctness, memory, performance or placement */
    int np;
    double points;
    double timeout_s;
    int hidden;          /* in the hidden suite: graded with visibility after_published */
    const char *gate;    /* not graded unless every "correct" and "memory" test of this op passed */
};

/* A lab, as its plan.c describes it. */
struct gr_lab {
    const char *dir;     /* "01-collectives": labs/, solutions/, grader/, docs/labs/<dir>.md */
    const char *title;   /* "collectives from point-to-point", in listings */
    /* Adds the lab's tests with gr_add(), given what the person grading asked for. */
    void (*plan)(const struct gr_plan_opts *o);
    /* The leaderboard: the metric (gr_metric in a perf run) and how the board names it. */
    const char *metric, *metric_title;
    /* `make bench`: the driver's arguments after --mode bench, and the rank counts (a
     * space-separated list, e.g. "1 2 4"). */
    const char *bench_args, *bench_np;
    /* What the code under test may call (grader/rules/symbols.h): space-separated shell
     * patterns of the undefined symbols refused, those of them allowed after all, and the
     * rule in words for the message. NULL forbidden_symbols: no rule. */
    const char *forbidden_symbols, *allowed_symbols, *symbol_rule;
    /* A sentence added to the diagnosis of a deadlock: the lab's own rule. NULL: none. */
    const char *deadlock_rule;
};

/* Registers a lab (plan.c's last line: GR_REGISTER_LAB(lab01);). */
void gr_register_lab(const struct gr_lab *lab);
#define GR_REGISTER_LAB(var)                                                               \
    static void __attribute__((constructor)) gr_register_##var(void)                       \
    {                                                                                      \
        gr_register_lab(&var);                                                             \
    }

/* Adds one test to the plan (defined by the orchestrator). */
void gr_add(const struct gr_spec *spec);

/* The rank counts of in (0-terminated) that runs(np) accepts, into out (GR_MAX_NP); those
 * it does not are skipped, and said once: "02-ddp runs on RUNS_ON ranks; NP=5 skipped".
 * A rank count the driver cannot run is the grading's limit, never the student's failure.
 * Defined by the orchestrator. */
void gr_filter_np(const int *in, int (*runs)(int np), const char *runs_on, int *out);

#endif
