/* grade: the autograder's orchestrator. For each lab it runs the lab's trusted driver
 * (linked with the student's file, the solution, or a broken variant) under the launcher,
 * one run per group of tests, each with its own timeout and process group. Verdicts come
 * only from the report file the driver's rank 0 writes (named in PL_GRADE_REPORT, lines
 * carrying a per-run token), never from the program's output. A hang, crash, MPI_Abort or
 * missing verdict fails the tests of that run with a reason: where each rank was (the status
 * files of trace.h), which case was running, the last lines of output. The run goes on.
 *
 * Output in the shape of xv6's `make grade`: a line per test, reasons indented, a subtotal
 * per lab, "Score: T/P" and last "N passed, N failed". --results FILE writes Gradescope's
 * results.json. See docs/grader.md. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "deadlock.h"
#include "json.h"
#include "launch.h"
#include "proc.h"
#include "trace.h"
#include "../common/questions.h"
#include "../grade/state.h"
#include "../sandbox/sandbox.h"
#include "../rules/copy.h"
#include "../rules/symbols.h"
/* ---- the labs: every grader/NN-name/plan.c linked in registers its descriptor ---- */

const struct gr_lab *lab_of[MAX_LABS];
int nlabs;
double board_value[MAX_LABS];

void gr_register_lab(const struct gr_lab *lab)
{
    if (nlabs == MAX_LABS) {
        fprintf(stderr, "grade: more than %d labs\n", MAX_LABS);
        exit(1);
    }
    /* In order of their folder names, whatever order the linker ran the constructors in. */
    int k = nlabs++;
    while (k > 0 && strcmp(lab_of[k - 1]->dir, lab->dir) > 0) {
        lab_of[k] = lab_of[k - 1];
        k--;
    }
    lab_of[k] = lab;
}

/* ---- the plan ---- */


struct test *tests;
int ntests;
static int cap_tests, current_lab;

void gr_add(const struct gr_spec *s)
{
    if (ntests == cap_tests) {
        cap_tests = cap_tests ? cap_tests * 2 : 64;
        tests = realloc(tests, (size_t)cap_tests * sizeof *tests);
        if (!tests) exit(1);
    }
    struct test *t = &tests[ntests++];
    memset(t, 0, sizeof *t);
    t->lab = current_lab;
    snprintf(t->name, sizeof t->name, "%s", s->name);
    snprintf(t->op, sizeof t->op, "%s", s->op);
    snprintf(t->mode, sizeof t->mode, "%s", s->mode);
    snprintf(t->part, sizeof t->part, "%s", s->part);
    snprintf(t->tag, sizeof t->tag, "%s", s->tag);
    snprintf(t->gate, sizeof t->gate, "%s", s->gate ? s->gate : "");
    t->np = s->np;
    t->hidden = s->hidden;
    t->points = s->points;
    t->timeout_s = s->timeout_s;
}

/* The rank counts of --np that lab k runs on, into its plan's options; those it does not
 * are skipped, and said once: "02-ddp runs on 1, 2, 3, 4, 6 or 12 ranks; NP=5 skipped". A
 * rank count the driver cannot run is the grading's limit, never the student's failure. */
static void filter_np(int k, struct gr_plan_opts *o)
{
    const struct gr_lab *lab = lab_of[k];
    int n = 0;
    char skipped[128] = "", why[256];
    for (int i = 0; opt.plan.np[i]; i++) {
        if (gr_lab_runs_on(lab, opt.plan.np[i], why, sizeof why)) {
            if (n < GR_MAX_NP - 1) o->np[n++] = opt.plan.np[i];
        } else {
            size_t l = strlen(skipped);
            snprintf(skipped + l, sizeof skipped - l, "%s%d", l ? "," : "", opt.plan.np[i]);
        }
    }
    o->np[n] = 0;
    o->np_given = opt.plan.np[0] != 0;
    if (skipped[0])
        printf("%s runs on %s; NP=%s skipped\n", lab->dir, lab->runs_on_words, skipped);
}

/* ---- options ---- */

struct grade_opts opt;

static void usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "grade: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fprintf(stderr,
            "usage: grade [--solutions | --drivers DIR] [--lab NN|NAME] [--test TEXT] "
            "[--np N,N,...]\n"
            "             [--launcher CMD] [--results FILE] [--seed S] [--hidden] "
            "[--timeout S] [--budget S] [--build DIR] [--no-speed] [--list] [--labs]\n"
            "             [--instructor]\n"
            "(see docs/grader.md)\n");
    exit(2);
}

static double parse_positive(const char *flag, const char *v)
{
    char *end;
    double x = strtod(v, &end);
    if (*v == '\0' || *end != '\0' || !(x > 0))
        usage("%s expects a positive number, got '%s'", flag, v);
    return x;
}

static void parse_np(const char *v)
{
    int k = 0;
    char buf[256], *save = NULL;
    snprintf(buf, sizeof buf, "%s", v);
    for (char *w = strtok_r(buf, ", ", &save); w; w = strtok_r(NULL, ", ", &save)) {
        char *end;
        long n = strtol(w, &end, 10);
        if (*end || n < 1 || n > 64)
            usage("--np expects rank counts from 1 to 64 separated by commas (e.g. 2,4), "
                  "got '%s'", v);
        if (k == GR_MAX_NP - 1) usage("--np takes at most %d rank counts", GR_MAX_NP - 1);
        opt.plan.np[k++] = (int)n;
    }
    if (!k) usage("--np expects at least one rank count");
    opt.plan.np[k] = 0;
}

static void parse_args(int argc, char **argv)
{
    opt.seed = 1;
    char *env_seed = getenv("PL_SEED");
    if (env_seed && *env_seed) opt.seed = strtoull(env_seed, NULL, 10);
    /* The programs run for the student inherit the environment: the seed leaves it (its
     * string overwritten, since /proc/PID/environ shows the original). */
    if (env_seed) memset(env_seed, 'x', strlen(env_seed));
    unsetenv("PL_SEED");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
#define VALUE() (has ? argv[++i] : (usage("%s needs a value", a), ""))
        if (!strcmp(a, "--solutions")) opt.solutions = 1;
        else if (!strcmp(a, "--hidden")) opt.hidden = 1;
        else if (!strcmp(a, "--list")) opt.list = 1;
        else if (!strcmp(a, "--labs")) opt.list_labs = 1;
        else if (!strcmp(a, "--instructor")) opt.instructor = 1;
        else if (!strcmp(a, "--no-speed")) opt.no_speed = 1;
        else if (!strcmp(a, "--build")) opt.build = VALUE();
        else if (!strcmp(a, "--drivers")) opt.drivers = VALUE();
        else if (!strcmp(a, "--lab")) opt.lab = VALUE();
        else if (!strcmp(a, "--test")) opt.test = VALUE();
        else if (!strcmp(a, "--np")) parse_np(VALUE());
        else if (!strcmp(a, "--launcher")) opt.launcher = VALUE();
        else if (!strcmp(a, "--results")) opt.results = VALUE();
        else if (!strcmp(a, "--timeout")) {
            const char *v = VALUE();
            opt.timeout_s = parse_positive("--timeout", v);
        } else if (!strcmp(a, "--budget")) {
            const char *v = VALUE();
            opt.budget_s = parse_positive("--budget", v);
        } else if (!strcmp(a, "--seed")) {
            const char *v = VALUE();
            char *end;
            opt.seed = strtoull(v, &end, 10);
            if (!*v || *end) usage("--seed expects a whole number, got '%s'", v);
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage("grades the labs");
        } else {
            usage("unknown argument '%s'", a);
        }
#undef VALUE
    }
    if (opt.solutions && opt.drivers) usage("--solutions and --drivers exclude each other");
}

/* The build dir is the grandparent of this program (build/<b>/bin/grade). */
static void find_build(const char *argv0)
{
    if (opt.build) return;
    static char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) {
        snprintf(buf, sizeof buf, "%s", argv0);
        n = (ssize_t)strlen(buf);
    }
    buf[n] = '\0';
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(buf, '/');
        if (slash) *slash = '\0';
        else snprintf(buf, sizeof buf, ".");
    }
    opt.build = buf;
}

/* One name of --lab: "01", "1", "01-collectives" or "collectives". */
static int lab_named(const char *d, const char *name, size_t l)
{
    if (l == 0) return 0;
    if (!strncmp(d, name, l)) return 1;
    if (l == 1 && d[0] == '0' && d[1] == name[0]) return 1;
    char one[64];
    snprintf(one, sizeof one, "%.*s", (int)(l < sizeof one - 1 ? l : sizeof one - 1), name);
    return strstr(d, one) != NULL;
}

/* Every name of a --lab list must name a lab: exits 2 naming the one that does not. */
static void check_lab_names(void)
{
    for (const char *p = opt.lab; p && *p; p += *p == ',') {
        size_t l = strcspn(p, ",");
        int found = 0;
        for (int k = 0; k < nlabs && !found; k++) found = lab_named(lab_of[k]->dir, p, l);
        if (!found) {
            fprintf(stderr, "grade: no lab matches '%.*s' in --lab %s; the labs are:", (int)l,
                    p, opt.lab);
            for (int k = 0; k < nlabs; k++) fprintf(stderr, " %s", lab_of[k]->dir);
            fprintf(stderr, " (a list: --lab 01,03)\n");
            exit(2);
        }
        p += l;
    }
}

/* --lab is one name or a comma-separated list of them ("01,03"). */
static int lab_selected(int k)
{
    if (!opt.lab) return 1;
    for (const char *p = opt.lab; *p; p += *p == ',') {
        size_t l = strcspn(p, ",");
        if (lab_named(lab_of[k]->dir, p, l)) return 1;
        p += l;
    }
    return 0;
}

static int contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (const char *p = hay; *p; p++)
        if (!strncasecmp(p, needle, n)) return 1;
    return n == 0;
}

int test_selected(const struct test *t)
{
    if (opt.no_speed && !strcmp(t->mode, "perf")) return 0;
    if (!opt.test) return 1;
    char full[300];
    snprintf(full, sizeof full, "%s: %s", lab_of[t->lab]->dir, t->name);
    return contains_nocase(full, opt.test);
}

/* ---- interrupt: stop after the run in flight ---- */

/* pl_launch forwards ^C, SIGTERM and SIGHUP to the job it runs, stops it whole, then lets
 * this handler see the signal; the handler only notes it (all it may safely do), and the
 * grading stops once the run's temporary folder is removed. */
char run_dir[64];
const struct pl_contain_user *sandbox_user;

/* The hidden suite draws from its own seed, derived from the one given. */
unsigned long long hidden_seed(void)
{
    return opt.seed * 2654435761ULL + 97;
}
static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    interrupted = sig;
}

static void stop_if_interrupted(void)
{
    if (!interrupted) return;
    int sig = interrupted;
    signal(sig, SIG_DFL);
    raise(sig);
}


static double now_s(void) { return pl_clock(); }

/* --budget: seconds left of the whole grading's time (counted from the first run). */
static double t_start;
double budget_left(void)
{
    return opt.budget_s - (now_s() - t_start);
}

/* A performance test counts only once its collective is correct: returns the first failed
 * correctness test of the same collective, or NULL. */
static const struct test *gate_failed(const struct test *t)
{
    if (!t->gate[0]) return NULL;
    for (int i = 0; i < ntests; i++) {
        const struct test *c = &tests[i];
        /* Memory is part of correctness here: a ZeRO-3 that keeps a full copy of the
         * parameters is fast for the very reason it is wrong. */
        if (c->lab == t->lab && c->ran && !strcmp(c->op, t->gate) &&
            (!strcmp(c->part, "correct") || !strcmp(c->part, "memory")) && !c->passed)
            return c;
    }
    return NULL;
}

/* --labs: one line per lab, "DIR<tab>BENCH_NP<tab>BENCH_ARGS<tab>TITLE", for the scripts
 * (make bench, the kit's checks) that find the labs through the orchestrator. */
static int print_labs(void)
{
    check_lab_names();
    for (int k = 0; k < nlabs; k++)
        if (lab_selected(k))
            printf("%s\t%s\t%s\t%s\n", lab_of[k]->dir,
                   lab_of[k]->bench_np ? lab_of[k]->bench_np : "",
                   lab_of[k]->bench_args ? lab_of[k]->bench_args : "", lab_of[k]->title);
    return 0;
}

/* The ranks of performance tests: 4 with 4 cores or more, else 2; never more than --np's
 * largest. More ranks than cores measure the scheduler, not the algorithm (a pipelined
 * broadcast at np=4 on 2 busy cores ranged 0.2x to 1x): the algorithm's shape (a chain
 * against a pipeline, root-sends-all) is judged by the per-rank traffic tests instead, which
 * run at every rank count and do not depend on the machine. */
static int perf_ranks(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int perf_np = cores >= 4 ? 4 : 2;
    if (opt.plan.np[0]) {
        int largest = 0;
        for (int i = 0; opt.plan.np[i]; i++)
            if (opt.plan.np[i] > largest) largest = opt.plan.np[i];
        if (largest < perf_np) perf_np = largest < 2 ? 2 : largest;
    }
    return perf_np;
}

/* The selected labs' tests; exits 2 when --lab or --test selects nothing. */
static void make_plan(void)
{
    opt.plan.perf_np = perf_ranks();
    opt.plan.hidden = opt.hidden;
    check_lab_names();
    int any_lab = 0;
    for (int k = 0; k < nlabs; k++) {
        if (!lab_selected(k)) continue;
        any_lab = 1;
        current_lab = k;
        struct gr_plan_opts o = opt.plan;
        filter_np(k, &o);
        lab_of[k]->plan(&o);
        plan_questions(k);
    }
    if (!any_lab) {
        fprintf(stderr, "grade: no lab matches --lab %s; the labs are:", opt.lab);
        for (int k = 0; k < nlabs; k++) fprintf(stderr, " %s", lab_of[k]->dir);
        fprintf(stderr, "\n");
        exit(2);
    }
    int selected = 0;
    for (int i = 0; i < ntests; i++) selected += test_selected(&tests[i]);
    if (!selected) {
        if (opt.test)
            fprintf(stderr, "grade: no test name contains '%s'%s; `grade --list` shows them\n",
                    opt.test, opt.no_speed ? " but a speed test's (--no-speed)" : "");
        else
            fprintf(stderr, "grade: the labs chosen have speed tests only, which --no-speed "
                    "leaves out\n");
        exit(2);
    }
}

static void print_list(void)
{
    for (int i = 0; i < ntests; i++)
        if (test_selected(&tests[i]))
            printf("%s: %s (%g points, %s%s)\n", lab_of[tests[i].lab]->dir, tests[i].name,
                   tests[i].points, tests[i].tag, tests[i].hidden ? ", hidden" : "");
}

/* The folder of the drivers graded, and the first line of the report. */
static void grading_header(char *variant, size_t len)
{
    if (opt.drivers) snprintf(variant, len, "%s", opt.drivers);
    else snprintf(variant, len, "%s/grader/%s", opt.build, opt.solutions ? "solutions" : "labs");
    const char *launcher = opt.launcher ? opt.launcher : getenv("LAUNCHER");
    /* With the hidden suite the seed is the instructor's secret: not printed. */
    char seed_text[64] = "a secret seed";
    if (!opt.hidden) snprintf(seed_text, sizeof seed_text, "seed %llu", opt.seed);
    printf("grading %s with %s%s on %s%s\n",
           opt.drivers ? opt.drivers : opt.solutions ? "solutions/" : "labs/ (your copy)",
           seed_text, opt.hidden ? " and the hidden suite" : "",
           launcher && *launcher ? launcher : "mpirun",
           opt.no_speed ? ", the wall-clock speed tests left out (--no-speed)" : "");
}

/* 1 with why when the code under test of lab's driver in variant is mostly a copy of the
 * lab's oracle's source (grader/rules/copy.h); rule, the sentence that says why not. */
static int oracle_copied(const struct gr_lab *lab, const char *variant, const char *rule,
                         char *why, size_t len)
{
    if (!lab->oracle_sources) return 0;
    char sources[PATH_MAX + 64];
    snprintf(sources, sizeof sources, "%s/%s/sources.txt", variant, lab->dir);
    return gr_copy_break_rule(sources, lab->oracle_sources, rule, why, len);
}

/* A lab whose code calls what every lab's rule (GR_SYMBOLS_TAMPER) or its own forbids:
 * every test of [i, j) fails with the symbols named (grader/rules/symbols.h). Unbuilt
 * drivers are left to run_group's message. */
static int symbol_rule_broken(int i, int j, const char *variant)
{
    const struct gr_lab *lab = lab_of[tests[i].lab];
    char path[PATH_MAX + 64], why[1600];
    snprintf(path, sizeof path, "%s/%s/driver", variant, lab->dir);
    if (access(path, X_OK) != 0) return 0;
    snprintf(path, sizeof path, "%s/%s/symbols.txt", variant, lab->dir);
    char oracle_rule[800] = "", names[400] = "";
    if (lab->oracle_symbols) {
        size_t n = 0; /* the space-separated list, as "a, b, c" */
        for (const char *w = lab->oracle_symbols; *w && n < sizeof names - 1;) {
            size_t len = strcspn(w, " ");
            if (len)
                n += (size_t)snprintf(names + n, sizeof names - n, "%s%.*s", n ? ", " : "",
                                      (int)len, w);
            w += len + (w[len] == ' ');
        }
        snprintf(oracle_rule, sizeof oracle_rule, "the kit's %s compute on one device what "
                 "Lab %d asks of its code: they are the single-device oracle it is graded "
                 "against, so its code may not hand its work to them%s", names, atoi(lab->dir),
                 lab->oracle_sources ? ", nor paste in their source" : "");
    }
    if (!gr_symbols_break_rule(path, GR_SYMBOLS_TAMPER, NULL, GR_SYMBOLS_TAMPER_RULE, why,
                               sizeof why) &&
        (!lab->forbidden_symbols ||
         !gr_symbols_break_rule(path, lab->forbidden_symbols, lab->allowed_symbols,
                                lab->symbol_rule, why, sizeof why)) &&
        (!lab->oracle_symbols ||
         !gr_symbols_break_rule(path, lab->oracle_symbols, NULL, oracle_rule, why, sizeof why)) &&
        !oracle_copied(lab, variant, oracle_rule, why, sizeof why))
        return 0;
    for (int g = i; g < j; g++) {
        tests[g].ran = 1;
        text_printf(&tests[g].reason, "%s", why);
    }
    return 1;
}

/* Runs (or, behind a failed gate or past the time budget, skips) the tests [i, j) of one
 * run. */
static void grade_group(int i, int j, const char *variant)
{
    /* mode "questions" is the orchestrator's own (a lab's ops run drivers) */
    if (!strcmp(tests[i].mode, "questions")) {
        grade_questions(i, j);
        return;
    }
    if (opt.budget_s > 0 && budget_left() < 1) {
        for (int g = i; g < j; g++) {
            tests[g].ran = 1;
            text_printf(&tests[g].reason, "not run: the grading's time budget (%g s, --budget) "
                        "was spent on the tests above; their reasons say where the time went\n",
                        opt.budget_s);
        }
        return;
    }
    static double op_cap[64];
    static char op_names[64][32];
    static int nop;
    const struct test *t = &tests[i];
    int k;
    for (k = 0; k < nop && strcmp(op_names[k], t->op); k++) {}
    if (k == nop && nop < 64) snprintf(op_names[nop++], 32, "%s", t->op);
    if (symbol_rule_broken(i, j, variant)) return;
    const struct test *gate = gate_failed(t);
    if (gate) {
        for (int g = i; g < j; g++) {
            tests[g].ran = 1;
            text_printf(&tests[g].reason, "not graded: \"%s\" failed, and performance "
                        "counts only for correct results within their memory bound\n",
                        gate->name);
        }
        return;
    }
    char driver[PATH_MAX + 64], log[PATH_MAX + 64];
    snprintf(driver, sizeof driver, "%s/%s/driver", variant, lab_of[t->lab]->dir);
    snprintf(log, sizeof log, "%s/%s/build.log", variant, lab_of[t->lab]->dir);
    run_group(i, j, driver, access(log, R_OK) == 0 ? log : NULL, &op_cap[k < 64 ? k : 0]);
}

/* The end of the tests that follow test i and share its run. */
static int group_end(int i)
{
    const struct test *t = &tests[i];
    int j = i + 1;
    while (j < ntests && tests[j].lab == t->lab && !strcmp(tests[j].op, t->op) &&
           !strcmp(tests[j].mode, t->mode) && tests[j].np == t->np &&
           tests[j].hidden == t->hidden && test_selected(&tests[j]))
        j++;
    return j;
}

struct tally {
    double total, max, lab_score, lab_max;
    int passed, failed, lab;
};

static void lab_subtotal(struct tally *y, int lab)
{
    if (y->lab >= 0 && lab != y->lab)
        printf("-- %s: %g/%g points\n", lab_of[y->lab]->dir, y->lab_score, y->lab_max);
    if (lab != y->lab) y->lab_score = y->lab_max = 0;
    y->lab = lab;
}

static void count_test(struct tally *y, const struct test *t)
{
    y->total += t->score;
    y->max += t->points;
    y->lab_score += t->score;
    y->lab_max += t->points;
    if (t->passed) y->passed++;
    else y->failed++;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    parse_args(argc, argv);
    for (int k = 0; k < nlabs; k++) board_value[k] = -1;
    if (opt.list_labs) return print_labs();
    find_build(argv[0]);
    make_plan();
    if (opt.list) {
        print_list();
        return 0;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);
    sandbox_user = gr_sandbox_init();
    keep_seed_secret();
    char variant[PATH_MAX];
    grading_header(variant, sizeof variant);
    t_start = now_s();
    struct tally y = {.lab = -1};
    for (int i = 0; i < ntests;) {
        if (!test_selected(&tests[i])) {
            i++;
            continue;
        }
        lab_subtotal(&y, tests[i].lab);
        int j = group_end(i);
        grade_group(i, j, variant);
        stop_if_interrupted();
        for (int g = i; g < j; g++) {
            print_test(&tests[g], g > i ? &tests[g - 1] : NULL);
            count_test(&y, &tests[g]);
        }
        i = j;
    }
    lab_subtotal(&y, -1);
    int rc = opt.results && write_results(opt.results, now_s() - t_start) ? 1 : 0;
    printf("Score: %g/%g\n", y.total, y.max);
    printf("%d passed, %d failed\n", y.passed, y.failed);
    return y.failed || rc ? 1 : 0;
}
