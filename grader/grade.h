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

#include <stddef.h>
#include <stdio.h>

#define GR_MAX_NP 16

/* What the person grading asked for, as a plan needs it. */
struct gr_plan_opts {
    /* The rank counts from --np that the lab runs on (its runs_on), 0-terminated; the
     * orchestrator has filtered them and said which it skipped. */
    int np[GR_MAX_NP];
    int np_given;        /* --np was given: run np (even if empty), else the lab's own counts */
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
    /* The kit functions that compute what the lab asks on one device, the oracle it is
     * graded against: GR_LAB_ORACLE, which grader.mk defines for plan.c from the lab's
     * GRADER_ORACLE_ list in its lab.mk (the same list generates any run-time wraps).
     * Code under test that calls one is refused before anything runs. NULL: none. */
    const char *oracle_symbols;
    /* The oracle's source files, where the student can read them (Lab 7's router, Lab 8's
     * planner): GR_LAB_ORACLE_SRC, absolute paths from the lab's GRADER_ORACLE_SRC_ list.
     * Code under test that is mostly a copy of them is refused as a call is
     * (grader/rules/copy.h). NULL: none. */
    const char *oracle_sources;
    /* The rank counts the lab runs on, written once: the predicate, the counts in words
     * ("1, 2, 3, 4, 6 or 12 ranks") and why others cannot run, said after "N ranks" ("do not
     * divide the global batch of 24 sequences"). The orchestrator skips other --np values
     * with these words before the plan sees them; a driver started on another count stops
     * before its setup with them (exit 2). NULL runs_on: any count. */
    int (*runs_on)(int np);
    const char *runs_on_words, *runs_on_why;
};

/* Whether lab runs on np ranks; when it does not, why, into buf: "5 ranks do not divide ...
 * (02-ddp runs on 1, 2, 3, 4, 6 or 12 ranks)". The orchestrator's skip and the driver's
 * refusal say the same. */
static inline int gr_lab_runs_on(const struct gr_lab *lab, int np, char *buf, size_t len)
{
    if (!lab->runs_on || lab->runs_on(np)) return 1;
    snprintf(buf, len, "%d ranks %s (%s runs on %s)", np, lab->runs_on_why, lab->dir,
             lab->runs_on_words);
    return 0;
}

/* Registers a lab (plan.c's last line: GR_REGISTER_LAB(lab01);). */
void gr_register_lab(const struct gr_lab *lab);
#define GR_REGISTER_LAB(var)                                                               \
    static void __attribute__((constructor)) gr_register_##var(void)                       \
    {                                                                                      \
        gr_register_lab(&var);                                                             \
    }

/* Adds one test to the plan (defined by the orchestrator). */
void gr_add(const struct gr_spec *spec);


#endif
