/* state.h: what the orchestrator's files share (grader/bin/grade.c, its main and plan, and
 * grader/grade/: text.c, run.c, output.c, answers.c): the labs linked in, the tests of
 * the plan with their outcomes, the options, and each file's entry points. One grading per
 * process: this state is the program's, set up by main. */
#ifndef GR_GRADE_STATE_H
#define GR_GRADE_STATE_H

#include <stddef.h>

#include "contain.h"
#include "launch.h"
#include "../grade.h"

/* ---- growable text (text.c) ---- */

struct text {
    char *s;
    size_t n, cap;
};

void text_add(struct text *t, const char *data, size_t len);
void __attribute__((format(printf, 2, 3))) text_printf(struct text *t, const char *fmt, ...);
const char *text_str(const struct text *t);

/* A run's files, and its end in words (text.c). */
void random_token(char *out, size_t len);
void remove_tree(const char *dir);
char *read_file(const char *path, size_t *len);
/* The last `lines` lines of out, each indented, without Open MPI's banner rules. */
void add_tail(struct text *r, const char *out, int lines);
/* What Open MPI (or AddressSanitizer) said about the end of the job, in words. */
void explain_exit(struct text *r, const struct pl_launch_result *res, const char *status_dir,
                  int np);
/* Where each rank was; returns 1 when some rank had reached a communication call. */
int where_ranks_were(struct text *r, const char *status_dir, int np);

/* ---- the labs linked in, in order of their folder names (grade.c) ---- */

#define MAX_LABS 64
extern const struct gr_lab *lab_of[MAX_LABS];
extern int nlabs;
extern double board_value[MAX_LABS]; /* the leaderboard metric of each lab; < 0: none */

/* ---- the plan's tests and their outcomes (grade.c) ---- */

struct test {
    int lab;
    char name[200];
    char op[32], mode[16], part[16], tag[16], gate[32];
    int np, hidden;
    double points, timeout_s;
    /* outcome */
    int ran, passed;
    int collected; /* a free-text answer kept for a person: passed, 0 points, not judged */
    double score, seconds;
    struct text reason;
};

extern struct test *tests;
extern int ntests;

/* ---- the options (grade.c) ---- */

struct grade_opts {
    const char *build, *drivers, *lab, *test, *launcher, *results;
    unsigned long long seed;
    int solutions, hidden, list, list_labs, instructor;
    int no_speed; /* --no-speed: the wall-clock speed tests (mode perf) left out */
    double timeout_s, budget_s;
    struct gr_plan_opts plan;
};

extern struct grade_opts opt;
extern char run_dir[64]; /* the temporary folder of the run in flight */
extern const struct pl_contain_user *sandbox_user; /* who runs the code under test */

int test_selected(const struct test *t);          /* --test, --no-speed */
unsigned long long hidden_seed(void);             /* the hidden suite's seed */
double budget_left(void);                         /* --budget: seconds left */

/* ---- run.c: the runs of the tests [first, last) that share one launch ---- */

void run_group(int first, int last, const char *driver, const char *build_log,
               double *op_timeout_cap);
/* The seeds and the Gradescope scripts' lines never appear in shown output. */
void keep_seed_secret(void);

/* ---- output.c ---- */

void print_test(const struct test *t, const struct test *prev);
int write_results(const char *path, double seconds);

/* ---- answers.c: each of a lab's questions is a test of its own ---- */

void plan_questions(int k);
void grade_questions(int i, int j);

#endif
