/* grade.h: what a lab's test plan (grader/NN-name/tests.h) tells the orchestrator
 * (grader/bin/grade.c): its tests, each one part of one run of the lab's driver. Tests with
 * the same driver arguments and rank count that follow each other share one run. */
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
    const char *gate;    /* not graded unless every "correct" test of this op passed */
};

/* Adds one test to the plan (defined by the orchestrator). */
void gr_add(const struct gr_spec *spec);

/* The rank counts of in (0-terminated) that runs(np) accepts, into out (GR_MAX_NP); those
 * it does not are skipped, and said once: "02-ddp runs on RUNS_ON ranks; NP=5 skipped".
 * A rank count the driver cannot run is the grading's limit, never the student's failure.
 * Defined by the orchestrator. */
void gr_filter_np(const int *in, int (*runs)(int np), const char *runs_on, int *out);

#endif
