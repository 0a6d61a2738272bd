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
#include "../grade.h"
#include "../sandbox/sandbox.h"
#include "../rules/symbols.h"
#define TAIL_LINES 15
/* After a run of an op has timed out, its later runs wait this long at most: a deadlock
 * on 3 ranks is almost always one on 5. */
#define TIMEOUT_AFTER_HANG 15.0
/* A run whose every rank has sat in the same communication calls this long, none of them
 * returning and none able to (deadlock.h), is a deadlock and is stopped without waiting for
 * its timeout. Long against any one message of the labs, even on a loaded machine (16 MiB
 * moves in milliseconds), short enough that a deadlocking test fails within 10 s of its
 * start. */
#define DEADLOCK_QUIET_S 4.0
/* What a run's report may hold; a driver gone wild is not kept beyond it. */
#define REPORT_CAP (16u << 20)

/* ---- growable text ---- */

struct text {
    char *s;
    size_t n, cap;
};

static void text_add(struct text *t, const char *data, size_t len)
{
    if (t->n + len + 1 > t->cap) {
        size_t want = t->cap ? t->cap * 2 : 256;
        while (want < t->n + len + 1) want *= 2;
        char *p = realloc(t->s, want);
        if (!p) {
            fprintf(stderr, "grade: out of memory\n");
            exit(1);
        }
        t->s = p;
        t->cap = want;
    }
    memcpy(t->s + t->n, data, len);
    t->n += len;
    t->s[t->n] = '\0';
}

static void __attribute__((format(printf, 2, 3))) text_printf(struct text *t, const char *fmt,
                                                                ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    text_add(t, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static const char *text_str(const struct text *t)
{
    return t->s ? t->s : "";
}

/* ---- the labs: every grader/NN-name/plan.c linked in registers its descriptor ---- */

#define MAX_LABS 64
static const struct gr_lab *lab_of[MAX_LABS];
static int nlabs;
static double board_value[MAX_LABS]; /* the leaderboard metric of each lab; < 0: none */

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

struct test {
    int lab;
    char name[200];
    char op[32], mode[16], part[16], tag[16], gate[32];
    int np, hidden;
    double points, timeout_s;
    /* outcome */
    int ran, passed;
    double score, seconds;
    struct text reason;
};

static struct test *tests;
static int ntests, cap_tests, current_lab;

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

void gr_filter_np(const int *in, int (*runs)(int np), const char *runs_on, int *out)
{
    int k = 0;
    char skipped[128] = "";
    for (int i = 0; in[i]; i++) {
        if (runs(in[i])) {
            if (k < GR_MAX_NP - 1) out[k++] = in[i];
        } else {
            size_t l = strlen(skipped);
            snprintf(skipped + l, sizeof skipped - l, "%s%d", l ? "," : "", in[i]);
        }
    }
    out[k] = 0;
    if (skipped[0])
        printf("%s runs on %s ranks; NP=%s skipped\n", lab_of[current_lab]->dir, runs_on,
               skipped);
}

/* ---- options ---- */

static struct {
    const char *build, *drivers, *lab, *test, *launcher, *results;
    unsigned long long seed;
    int solutions, hidden, list, list_labs, instructor;
    double timeout_s, budget_s;
    struct gr_plan_opts plan;
} opt;

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
            "[--timeout S] [--budget S] [--build DIR] [--list] [--labs] [--instructor]\n"
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

static int test_selected(const struct test *t)
{
    if (!opt.test) return 1;
    char full[300];
    snprintf(full, sizeof full, "%s: %s", lab_of[t->lab]->dir, t->name);
    return contains_nocase(full, opt.test);
}

/* ---- interrupt: stop after the run in flight ---- */

/* pl_launch forwards ^C, SIGTERM and SIGHUP to the job it runs, stops it whole, then lets
 * this handler see the signal; the handler only notes it (all it may safely do), and the
 * grading stops once the run's temporary folder is removed. */
static char run_dir[64]; /* the temporary folder of the run in flight */
static const struct pl_contain_user *sandbox_user; /* who runs the code under test */
static double budget_left(void);

/* The hidden suite draws from its own seed, derived from the one given. */
static unsigned long long hidden_seed(void)
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

static void remove_tree(const char *dir);

/* ---- one run of a driver ---- */

static void random_token(char *out, size_t len)
{
    unsigned char raw[16];
    int fd = open("/dev/urandom", O_RDONLY);
    ssize_t got = fd >= 0 ? read(fd, raw, sizeof raw) : -1;
    if (fd >= 0) close(fd);
    if (got != (ssize_t)sizeof raw) {
        unsigned long x = (unsigned long)time(NULL) ^ ((unsigned long)getpid() << 16);
        for (size_t i = 0; i < sizeof raw; i++)
            raw[i] = (unsigned char)(x >> (i % 8 * 8)) ^ (unsigned char)i;
    }
    size_t k = 0;
    for (size_t i = 0; i < sizeof raw && k + 2 < len; i++)
        k += (size_t)snprintf(out + k, len - k, "%02x", raw[i]);
}

static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char p[PATH_MAX];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            struct stat st;
            if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) remove_tree(p);
            else unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    struct text t = {0};
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) text_add(&t, buf, n);
    fclose(f);
    if (len) *len = t.n;
    return t.s ? t.s : strdup("");
}

/* The last `lines` lines of out, each indented, without Open MPI's banner rules. */
static void add_tail(struct text *r, const char *out, int lines)
{
    if (!out || !*out) return;
    const char *end = out + strlen(out), *p = end;
    int seen = 0;
    while (p > out && seen <= lines) {
        p--;
        if (*p == '\n' && p + 1 < end) seen++;
    }
    if (seen > lines) p++;
    text_printf(r, "output (last lines):\n");
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (l && strspn(p, "-") < l && !gr_secret_line(p, l)) {
            text_add(r, "  ", 2);
            text_add(r, p, l > 300 ? 300 : l);
            text_add(r, "\n", 1);
        }
        p += l + (nl ? 1 : 0);
    }
}

/* The line of out starting at p, without its end, into buf. */
static void line_at(const char *p, char *buf, size_t len)
{
    size_t l = strcspn(p, "\n");
    snprintf(buf, len, "%.*s", (int)(l < len ? l : len - 1), p);
}

/* "    #1 0x55e1 in ring_reduce_scatter src/collectives.c:36": "ring_reduce_scatter
 * (src/collectives.c:36)"; 0 when the line is not a frame. */
static int asan_frame(const char *line, char *out, size_t len)
{
    const char *in = strstr(line, " in ");
    if (!strstr(line, "#") || !in) return 0;
    char fn[160] = "", where[300] = "";
    if (sscanf(in, " in %159s %299s", fn, where) < 1) return 0;
    snprintf(out, len, "%s%s%s%s", fn, where[0] ? " (" : "", where, where[0] ? ")" : "");
    return 1;
}

/* AddressSanitizer's report (make grade ASAN=1), in a few lines: what went wrong, where
 * (the first frames), and where the memory came from. Returns 1 when there was one. */
static int explain_asan(struct text *r, const char *out)
{
    const char *e = strstr(out, "ERROR: AddressSanitizer: ");
    if (!e) return 0;
    char line[400], frame[480];
    line_at(e + strlen("ERROR: AddressSanitizer: "), line, sizeof line);
    char *on = strstr(line, " on address");
    if (on) *on = '\0';
    text_printf(r, "AddressSanitizer: %s", line);
    const char *rw = strstr(e, "READ of size");
    const char *wr = strstr(e, "WRITE of size");
    const char *acc = rw && (!wr || rw < wr) ? rw : wr;
    if (acc) {
        line_at(acc, line, sizeof line);
        char *at = strstr(line, " at ");
        if (at) *at = '\0';
        text_printf(r, ", a %s", line);
    }
    text_printf(r, "\n");
    const char *p = acc ? acc : e;
    int frames = 0;
    while ((p = strstr(p, "\n")) && frames < 3) {
        p++;
        line_at(p, line, sizeof line);
        if (strncmp(line, "    #", 5)) {
            if (frames) break;
            continue;
        }
        if (asan_frame(line, frame, sizeof frame))
            text_printf(r, "  %s %s\n", frames ? "called from" : "in", frame);
        frames++;
    }
    const char *loc = strstr(e, " is located ");
    if (loc) {
        line_at(loc + 1, line, sizeof line);
        char *of = strstr(line, "region");
        if (of) of[6] = '\0';
        text_printf(r, "  the address %s", line);
        const char *alloc = strstr(loc, "allocated by thread");
        const char *q = alloc;
        while (q && (q = strstr(q, "\n"))) {
            q++;
            line_at(q, line, sizeof line);
            if (strncmp(line, "    #", 5)) break;
            if (asan_frame(line, frame, sizeof frame) && !strstr(frame, "sanitizer") &&
                !strstr(frame, "lib/mem.c")) {
                text_printf(r, ", allocated in %s", frame);
                break;
            }
        }
        text_printf(r, "\n");
    }
    return 1;
}

/* What Open MPI said about the end of the job, in words. */
static void explain_exit(struct text *r, const struct pl_launch_result *res,
                         const char *status_dir, int np)
{
    const char *out = res->output ? res->output : "";
    if (explain_asan(r, out)) return;
    const char *a = strstr(out, "MPI_ABORT was invoked on rank");
    int rank, code;
    if (a && sscanf(a, "MPI_ABORT was invoked on rank %d in communicator %*s with errorcode %d",
                    &rank, &code) == 2) {
        text_printf(r, "rank %d called MPI_Abort (error code %d), which ended every rank\n",
                    rank, code);
        return;
    }
    /* Open MPI's message can come out garbled; the library records the call itself. */
    for (rank = 0; rank < np; rank++) {
        char buf[512];
        const char *c;
        if (pl_trace_read_status(status_dir, rank, buf, sizeof buf) == 0 &&
            (c = strstr(buf, "called MPI_Abort (error code ")) &&
            sscanf(c, "called MPI_Abort (error code %d)", &code) == 1) {
            text_printf(r, "rank %d called MPI_Abort (error code %d), which ended every rank\n",
                        rank, code);
            return;
        }
    }
    const char *s = strstr(out, "exited on signal");
    if (s) {
        const char *pr = s;
        while (pr > out && strncmp(pr, "process rank", 12)) pr--;
        int sig = 0;
        char name[64] = "";
        sscanf(s, "exited on signal %d (%63[^)])", &sig, name);
        if (!strncmp(pr, "process rank", 12) && sscanf(pr, "process rank %d", &rank) == 1)
            text_printf(r, "rank %d crashed: signal %d (%s)%s\n", rank, sig, name,
                        sig == 11 ? ": a read or write outside its memory, often an index "
                                    "past the end of a buffer, a chunk offset computed "
                                    "from a negative rank, or a recursion without end. "
                                    "`make grade ASAN=1` with the same LAB and TEST names "
                                    "the bad access and its line" : "");
        else
            text_printf(r, "a rank crashed: signal %d (%s)\n", sig, name);
        return;
    }
    if (strstr(out, "was unable to launch the specified application")) {
        text_printf(r, "the launcher could not start the program (was it being rebuilt? run "
                       "make, then grade again)\n");
        return;
    }
    if (res->exit_code == 2)
        text_printf(r, "the program stopped with a usage error (exit code 2): see the output\n");
    else if (res->exit_code > 128)
        text_printf(r, "the job was killed by signal %d\n", res->exit_code - 128);
    else
        text_printf(r, "the job ended with exit code %d before reporting\n", res->exit_code);
}

/* Returns 1 when some rank had reached a communication call. */
static int where_ranks_were(struct text *r, const char *status_dir, int np)
{
    int any = 0, reached = 0;
    for (int k = 0; k < np; k++) {
        char buf[512];
        if (pl_trace_read_status(status_dir, k, buf, sizeof buf) != 0) continue;
        if (!any) text_printf(r, "where each rank was (its last communication call):\n");
        any = 1;
        if (buf[0] && !strstr(buf, "before its first message")) reached = 1;
        text_printf(r, "  rank %d: %s\n", k, buf[0] ? buf : "(no call yet)");
    }
    if (!any) text_printf(r, "no rank reached a communication call\n");
    return reached;
}

struct run_outcome {
    int has_result, second_verdict;
    double fraction, seconds;
    struct text say;
};

static const char *lab_first_test_name(int lab)
{
    for (int i = 0; i < ntests; i++)
        if (tests[i].lab == lab && test_selected(&tests[i])) return tests[i].name;
    return "";
}

/* Not compiled: the lab's first test fails with the compiler's words. */
static void fail_unbuilt(int first, int last, const char *driver, const char *build_log)
{
    size_t len = 0;
    char *log = build_log ? read_file(build_log, &len) : NULL;
    /* The compiler's words once per lab, on its first test (the lab "builds" test); the
     * lab's other tests are not run. */
    static int quoted_lab = -1;
    for (int i = first; i < last; i++) {
        struct test *t = &tests[i];
        t->ran = 1;
        if (log && quoted_lab == t->lab) {
            text_printf(&t->reason, "not run: the lab did not build (the compiler's words are "
                        "under \"%s\")\n", lab_first_test_name(t->lab));
        } else if (log) {
            quoted_lab = t->lab;
            text_printf(&t->reason, "the lab did not compile; the compiler said:\n");
            add_tail(&t->reason, log, TAIL_LINES);
        } else {
            text_printf(&t->reason, "no driver at %s: run `make` first\n", driver);
        }
    }
    free(log);
}

/* A run's temporary folder (status files, the token file) and its report channel. */
struct run_files {
    char dir[32], status[64], token_path[64], token[40], ready[64];
    char report_dir[32], report[64]; /* the channel's folder and FIFO (sandbox.h) */
    int report_fd;                   /* its read end */
    char env_report[128], env_token[128];
    char token_file[80]; /* what the token file holds: "TOKEN SEED" */
};

/* The token goes in a file, not the environment (which every process of the job, and the
 * launcher's, would show): the driver's rank 0 reads it and removes the file before any code
 * under test runs. */
static void make_run_files(struct run_files *f)
{
    snprintf(f->dir, sizeof f->dir, "/tmp/pl-grade-XXXXXX");
    if (!mkdtemp(f->dir)) {
        fprintf(stderr, "grade: cannot create a temporary directory: %s\n", strerror(errno));
        exit(1);
    }
    snprintf(f->status, sizeof f->status, "%s/status", f->dir);
    f->report_fd = gr_sandbox_report_fifo(f->report_dir, sizeof f->report_dir, f->report,
                                          sizeof f->report);
    if (f->report_fd < 0) exit(1);
    snprintf(f->token_path, sizeof f->token_path, "%s/token", f->dir);
    snprintf(f->ready, sizeof f->ready, "%s/token.ready", f->dir);
    mkdir(f->status, 0755);
    gr_sandbox_own(f->dir);
    gr_sandbox_own(f->status);
    snprintf(run_dir, sizeof run_dir, "%s", f->dir);
    /* The token file is written only once the driver's main has started (the handshake of
     * sandbox.h), so code that runs before main finds none. */
    random_token(f->token, sizeof f->token);
    snprintf(f->env_report, sizeof f->env_report, "PL_GRADE_REPORT=%s", f->report);
    snprintf(f->env_token, sizeof f->env_token, "PL_GRADE_TOKEN_FILE=%s", f->token_path);
}

/* One "say" or "result" line for the tests [first, last) of part `part`. */
static void take_verdict(int first, int last, struct run_outcome *outc, const char *word,
                         const char *part, const char *text)
{
    for (int i = first; i < last; i++) {
        if (strcmp(tests[i].part, part)) continue;
        struct run_outcome *o = &outc[i - first];
        if (!strcmp(word, "say") && text) {
            text_printf(&o->say, "%s\n", text);
        } else if (!strcmp(word, "result") && text && o->has_result) {
            o->second_verdict = 1; /* the driver gives one: someone else wrote the other */
        } else if (!strcmp(word, "result") && text) {
            /* The first verdict of a part stands: the driver gives each one once, and a
             * line added later cannot overturn it. */
            double f = 0, sec = 0;
            if (sscanf(text, "%lf %lf", &f, &sec) >= 1) {
                o->has_result = 1;
                o->fraction = f < 0 ? 0 : f > 1 ? 1 : f;
                o->seconds = sec;
            }
        }
    }
}

/* Two verdicts for one part mean code other than the harness wrote the report with the
 * run's token: nothing of the run counts, its leaderboard value included. */
static void forfeit_if_forged(int first, int last, struct run_outcome *outc)
{
    int forged = 0;
    for (int i = first; i < last; i++) forged |= outc[i - first].second_verdict;
    if (!forged) return;
    board_value[tests[first].lab] = -1;
    for (int i = first; i < last; i++) {
        struct run_outcome *o = &outc[i - first];
        o->has_result = 1;
        o->fraction = 0;
        text_printf(&o->say, "the report of this run holds two verdicts for one test: code "
                    "other than the grader wrote to it, so nothing of the run counts\n");
    }
}

/* Verdicts: only lines of the report (rep, as the channel gave it) that carry this run's
 * token. The last "case" line goes to last_case. */
static void read_report(int first, int last, const struct run_files *f, char *rep,
                        struct run_outcome *outc, char *last_case, size_t case_len)
{
    const struct test *t0 = &tests[first];
    size_t tl = strlen(f->token);
    for (char *line = rep, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (strncmp(line, f->token, tl) || line[tl] != ' ') continue;
        char *word = line + tl + 1, *rest = strchr(word, ' ');
        if (!rest) continue;
        *rest++ = '\0';
        if (!strcmp(word, "case")) {
            snprintf(last_case, case_len, "%s", rest);
        } else if (!strcmp(word, "metric")) {
            double v;
            char name[64];
            const char *m = lab_of[t0->lab]->metric;
            if (sscanf(rest, "%63s %lf", name, &v) == 2 && !t0->hidden && m && !strcmp(name, m))
                board_value[t0->lab] = v;
        } else {
            char *text = strchr(rest, ' ');
            if (text) *text++ = '\0';
            take_verdict(first, last, outc, word, rest, text);
        }
    }
    forfeit_if_forged(first, last, outc);
}

/* 1 when some rank's status record names a collective (the advice on a timeout). */
static int waits_in_collective(const char *status_dir, int np)
{
    for (int k = 0; k < np; k++) {
        char buf[PL_STATUS_BYTES];
        if (pl_trace_read_status(status_dir, k, buf, sizeof buf) == 0 &&
            pl_deadlock_in_collective(buf))
            return 1;
    }
    return 0;
}

/* Why the run ended as it did, in words, into why. */
static void explain_run(struct text *why, const struct test *t0, int started,
                        const struct pl_launch_result *res, double timeout,
                        const struct pl_deadlock_watch *dw, const char *last_case,
                        double *op_timeout_cap)
{
    const char *status_dir = dw->status_dir;
    if (!started) {
        text_printf(why, "could not start the run: %s", res->output ? res->output : "");
    } else if (res->stopped) {
        text_printf(why, "deadlock: stopped after %.1f s, when every rank had been inside a "
                         "communication call for %.0f s with none returning\n", res->seconds,
                    DEADLOCK_QUIET_S);
        if (last_case[0]) text_printf(why, "while running %s\n", last_case);
        where_ranks_were(why, status_dir, t0->np);
        text_printf(why, "%s%s ", dw->why, pl_deadlock_advice(dw->verdict));
        if (lab_of[t0->lab]->deadlock_rule)
            text_printf(why, "%s ", lab_of[t0->lab]->deadlock_rule);
        text_printf(why, "Rerun with PL_VERBOSE=1 to see every message: PL_VERBOSE=1 make "
                         "grade LAB=%.2s TEST='%s' NP=%d\n",
                    lab_of[t0->lab]->dir, t0->name, t0->np);
        *op_timeout_cap = TIMEOUT_AFTER_HANG;
    } else if (res->timed_out) {
        text_printf(why, "timed out after %.0f s and was stopped (every rank killed)\n",
                    timeout);
        if (last_case[0]) text_printf(why, "while running %s\n", last_case);
        if (where_ranks_were(why, status_dir, t0->np))
            text_printf(why, "if the ranks waited for each other: %s ",
                        pl_deadlock_advice(waits_in_collective(status_dir, t0->np)
                                               ? PL_STUCK_COLLECTIVE
                                               : PL_STUCK_P2P));
        else
            text_printf(why, "no rank reached a communication call: an endless loop before "
                             "the first message? ");
        text_printf(why, "Rerun with PL_VERBOSE=1 to see every message: "
                         "PL_VERBOSE=1 make grade LAB=%.2s TEST='%s' NP=%d\n",
                    lab_of[t0->lab]->dir, t0->name, t0->np);
        *op_timeout_cap = TIMEOUT_AFTER_HANG;
    } else {
        explain_exit(why, res, status_dir, t0->np);
        if (last_case[0]) text_printf(why, "while running %s\n", last_case);
        if (res->exit_code != 0) where_ranks_were(why, status_dir, t0->np);
    }
    if (started && res->exit_code == 0 && !res->timed_out)
        text_printf(why, "the run ended without a verdict for this test (did the code call "
                         "exit()?)\n");
}

/* Each test's score and reason from its verdict, or from why when it has none. */
static void settle_tests(int first, int last, struct run_outcome *outc, int started,
                         const struct pl_launch_result *res, const struct text *why)
{
    int went_down = res->timed_out || res->stopped || res->exit_code != 0;
    for (int i = first; i < last; i++) {
        struct test *t = &tests[i];
        struct run_outcome *o = &outc[i - first];
        t->ran = 1;
        t->seconds = res->seconds;
        text_add(&t->reason, text_str(&o->say), o->say.n);
        if (o->has_result) {
            t->score = o->fraction * t->points;
            t->passed = o->fraction >= 0.9999;
        }
        /* A verdict given before the job went down stands; say what happened after. */
        if (!o->has_result || (!t->passed && went_down)) {
            text_add(&t->reason, text_str(why), why->n);
            if (went_down || !started) add_tail(&t->reason, res->output, TAIL_LINES);
        }
        free(o->say.s);
    }
}

/* ---- deadlocks: every rank inside a communication call that does not return ---- */

struct run_watch {
    struct gr_handshake hs;
    int report_fd;       /* the report channel, drained into report on every tick */
    struct text report;
    struct pl_deadlock_watch dw;
    volatile int stop;   /* set when the run deadlocked: pl_launch stops it */
};

/* Whatever the driver has written to the report channel since the last look. */
static void drain_report(struct run_watch *w)
{
    char buf[65536];
    ssize_t n;
    while ((n = read(w->report_fd, buf, sizeof buf)) > 0)
        if (w->report.n < REPORT_CAP) text_add(&w->report, buf, (size_t)n);
}

static void watch_tick(void *arg)
{
    struct run_watch *w = arg;
    gr_handshake_tick(&w->hs);
    drain_report(w);
    if (pl_deadlock_watch_tick(&w->dw)) w->stop = 1;
}

/* Runs the tests [first, last) that share one launch. */
static void run_group(int first, int last, const char *driver, const char *build_log,
                      double *op_timeout_cap)
{
    if (access(driver, X_OK) != 0) {
        fail_unbuilt(first, last, driver, build_log);
        return;
    }
    struct test *t0 = &tests[first];
    /* The job runs in its own folder: the driver is named by its full path. */
    char full_driver[PATH_MAX + 64];
    if (!realpath(driver, full_driver)) snprintf(full_driver, sizeof full_driver, "%s", driver);
    driver = full_driver;
    char parts[128] = "";
    for (int i = first; i < last; i++) {
        if (parts[0]) strncat(parts, ",", sizeof parts - strlen(parts) - 1);
        strncat(parts, tests[i].part, sizeof parts - strlen(parts) - 1);
    }
    static struct run_files f;
    make_run_files(&f);
    const char *env[] = {f.env_report, f.env_token, NULL};
    /* The seed travels with the token, never on the command line (which every process can
     * read); the hidden suite draws from its own seed, derived from the one given. */
    snprintf(f.token_file, sizeof f.token_file, "%s %llu", f.token,
             t0->hidden ? hidden_seed() : opt.seed);
    char copy[128];
    driver = gr_sandbox_driver(driver, f.dir, copy, sizeof copy);
    char *argv[] = {(char *)driver, "--op", t0->op, "--mode", t0->mode, "--parts", parts, NULL};
    double timeout = opt.timeout_s > 0 ? opt.timeout_s : t0->timeout_s;
    if (opt.budget_s > 0 && timeout > budget_left()) timeout = budget_left();
    if (opt.timeout_s <= 0 && *op_timeout_cap > 0 && timeout > *op_timeout_cap)
        timeout = *op_timeout_cap;
    struct run_watch watch = {.hs = {.ready = f.ready, .token_path = f.token_path,
                                     .token = f.token_file},
                              .report_fd = f.report_fd};
    pl_deadlock_watch_start(&watch.dw, f.status, t0->np, DEADLOCK_QUIET_S);
    /* As root, the job gets a cgroup of its own where the machine allows (contain.h). */
    struct pl_contain_cgroup cgroup;
    pl_contain_cgroup_make(&cgroup);
    struct pl_launch_opts lo = {.np = t0->np, .timeout_s = timeout, .launcher = opt.launcher,
                                .status_dir = f.status, .env = env, .user = sandbox_user,
                                .cgroup = &cgroup,
                                .cwd = f.dir, .tick = watch_tick, .tick_arg = &watch,
                                .kill_orphans = 1, .stop = &watch.stop};
    struct pl_launch_result res;
    memset(&res, 0, sizeof res);
    int started = pl_launch(&lo, argv, &res) == 0;
    pl_contain_cgroup_end(&cgroup);
    gr_sandbox_sweep(); /* nothing of this run outlives it, double-forked or not */
    gr_sandbox_drop_links(f.dir);

    struct run_outcome *outc = calloc((size_t)(last - first), sizeof *outc);
    char last_case[1024] = "";
    drain_report(&watch); /* the last lines, written as the job ended */
    close(f.report_fd);
    read_report(first, last, &f, watch.report.s, outc, last_case, sizeof last_case);
    free(watch.report.s);
    struct text why = {0};
    explain_run(&why, t0, started, &res, timeout, &watch.dw, last_case, op_timeout_cap);
    pl_deadlock_watch_end(&watch.dw);
    settle_tests(first, last, outc, started, &res, &why);
    free(why.s);
    free(outc);
    if (started) pl_launch_result_free(&res);
    remove_tree(f.dir);
    remove_tree(f.report_dir);
    run_dir[0] = '\0';
}

/* The hidden suite's seed, and the seed its runs get, never appear in shown output; nor do
 * the lines of the scripts that run the grader on Gradescope, which a student's code could
 * read and print. */
static void keep_seed_secret(void)
{
    static const char *scripts[] = {"grader/gradescope/run_autograder",
                                     "grader/gradescope/setup.sh", "run_autograder", "setup.sh"};
    for (size_t k = 0; k < sizeof scripts / sizeof scripts[0]; k++)
        gr_secret_add_lines(scripts[k]); /* the kit's tree, or the autograder's image */
    if (!opt.hidden) return;
    char text[32];
    snprintf(text, sizeof text, "%llu", opt.seed);
    gr_secret_add(text);
    snprintf(text, sizeof text, "%llu", hidden_seed());
    gr_secret_add(text);
}

/* ---- output ---- */

static void print_test(const struct test *t, const struct test *prev)
{
    printf("== %s: %s == %s (%.1fs)\n", lab_of[t->lab]->dir, t->name, t->passed ? "OK" : "FAIL",
           t->seconds);
    /* Tests of one run that ended badly share their story: tell it once. */
    if (prev && !t->passed && !prev->passed && t->reason.n > 200 &&
        !strcmp(text_str(&t->reason), text_str(&prev->reason))) {
        printf("    (the same run as the test above, with the same reason)\n");
        return;
    }
    /* Reasons of failures, and the measured figures of performance, memory and placement
     * tests. */
    if (t->reason.n &&
        (!t->passed || !strcmp(t->tag, "performance") || !strcmp(t->tag, "memory") ||
         !strcmp(t->tag, "placement"))) {
        if (!t->passed && t->points > 0 && t->score > 0)
            printf("    %.2g of %.2g points\n", t->score, t->points);
        const char *p = t->reason.s;
        while (*p) {
            const char *nl = strchr(p, '\n');
            size_t l = nl ? (size_t)(nl - p) : strlen(p);
            printf("    %.*s\n", (int)l, p);
            p += l + (nl ? 1 : 0);
        }
    }
    fflush(stdout);
}

/* results.json's "tests": every test that ran, with its reason, tags and visibility. */
static void write_tests(FILE *f)
{
    fprintf(f, "  \"tests\": [");
    int first = 1;
    for (int i = 0; i < ntests; i++) {
        const struct test *t = &tests[i];
        if (!t->ran) continue;
        char name[300];
        snprintf(name, sizeof name, "%s: %s", lab_of[t->lab]->dir, t->name);
        fprintf(f, "%s\n    {\"name\": ", first ? "" : ",");
        pl_json_string(f, name);
        fprintf(f, ", \"score\": %.4f, \"max_score\": %.4f, \"status\": \"%s\",\n     \"output\": ",
                t->score, t->points, t->passed ? "passed" : "failed");
        pl_json_string(f, text_str(&t->reason));
        fprintf(f, ",\n     \"tags\": [");
        pl_json_string(f, t->tag);
        if (t->hidden) fprintf(f, ", \"hidden\"");
        fprintf(f, "], \"visibility\": \"%s\"}", t->hidden ? "after_published" : "visible");
        first = 0;
    }
    fprintf(f, "\n  ]");
}

/* results.json's "leaderboard": each graded lab's metric (grade.h), when its perf run gave
 * it. */
static void write_leaderboard(FILE *f)
{
    int board = 0;
    for (int k = 0; k < nlabs; k++) {
        if (board_value[k] < 0) continue;
        fprintf(f, "%s\n    {\"name\": ", board ? "," : ",\n  \"leaderboard\": [");
        pl_json_string(f, lab_of[k]->metric_title);
        fprintf(f, ", \"value\": %.4f, \"order\": \"desc\"}", board_value[k]);
        board = 1;
    }
    if (board) fprintf(f, "\n  ]");
}

/* Gradescope's results.json. The top-level "score" is the total of every test. With the
 * hidden suite, whose tests are marked after_published, nothing may tell their outcome
 * before then: the top-level score (which overrides the tests' sum and shows at once) is
 * left out, so Gradescope totals tests[] itself, and the summary counts visible tests only. */
static int write_results_to(void *file, void *arg)
{
    FILE *f = file;
    double seconds = *(double *)arg;
    double score = 0, max = 0;
    int passed = 0, failed = 0, hidden = 0;
    for (int i = 0; i < ntests; i++) {
        const struct test *t = &tests[i];
        if (!t->ran) continue;
        if (t->hidden) {
            hidden++;
            continue;
        }
        score += t->score;
        max += t->points;
        if (t->passed) passed++;
        else failed++;
    }
    char summary[512];
    snprintf(summary, sizeof summary, "Visible tests: %g/%g points, %d passed, %d failed\n%s",
             score, max, passed, failed,
             hidden ? "The hidden suite's results appear when grades are published.\n" : "");
    fprintf(f, "{\n");
    if (!hidden) fprintf(f, "  \"score\": %.4f,\n", score);
    fprintf(f, "  \"execution_time\": %.1f,\n  \"output\": ", seconds);
    pl_json_string(f, summary);
    fprintf(f, ",\n  \"visibility\": \"visible\",\n  \"stdout_visibility\": \"hidden\",\n");
    write_tests(f);
    write_leaderboard(f);
    fprintf(f, "\n}\n");
    return 0;
}

/* Written last, after the sweep, and renamed into place whole. */
static int write_results(const char *path, double seconds)
{
    gr_sandbox_sweep();
    return gr_write_atomic(path, write_results_to, &seconds);
}

static double now_s(void) { return pl_clock(); }

/* --budget: seconds left of the whole grading's time (counted from the first run). */
static double t_start;
static double budget_left(void)
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

/* ---- graded questions: each of a lab's questions (grader/common/questions.h) is a test of
 * its own, tagged "questions", judged here from the lab's questions.txt (no driver runs) ---- */

static void plan_questions(int k)
{
    /* A folder of drivers (--drivers: a broken variant) is code without answers. */
    if (opt.drivers) return;
    const struct gr_questions *qs = gr_questions_find(lab_of[k]->dir);
    for (int i = 0; qs && i < qs->n; i++) {
        char name[200];
        snprintf(name, sizeof name, "question %s%s", qs->q[i].key,
                 qs->q[i].expect ? "" : " (free text, read by a person)");
        struct gr_spec s = {.name = name, .op = "questions.txt", .mode = "questions",
                            .part = "questions", .tag = "questions",
                            .points = qs->q[i].expect ? qs->q[i].points : 0};
        gr_add(&s);
    }
}

/* The answers graded: the student's labs/NN-name/questions.txt, or the solutions' with
 * --solutions, in the kit the build folder belongs to (BUILD is KIT/build/<b>), wherever
 * the grader runs from. */
static void answers_path(const struct gr_lab *lab, char *path, size_t len)
{
    char kit[PATH_MAX];
    if (!realpath(opt.build, kit) && snprintf(kit, sizeof kit, "%s", opt.build) >= (int)sizeof kit)
        kit[0] = '\0';
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(kit, '/');
        if (slash && slash != kit) *slash = '\0';
        else strcpy(kit, "/");
    }
    char here[PATH_MAX];
    int local = realpath(".", here) && !strcmp(here, kit); /* then said as labs/... */
    int n = snprintf(path, len, "%s%s%s/%s/questions.txt", local ? "" : kit, local ? "" : "/",
                     opt.solutions ? "solutions" : "labs", lab->dir);
    if (n < 0 || (size_t)n >= len) path[0] = '\0';
}

static void judge_question(struct test *t, const struct gr_question *q, const char *ans,
                           const char *path, const char *retired)
{
    struct gr_verdict v;
    gr_question_judge(q, ans, &v);
    t->passed = !strcmp(v.state, "right") || !strcmp(v.state, "collected");
    t->score = t->passed ? t->points : 0;
    if (!strcmp(v.state, "collected")) {
        text_printf(&t->reason, "collected for a person to read: %.1500s\n", ans);
    } else if (!strcmp(v.state, "unanswered")) {
        text_printf(&t->reason, "unanswered: fill in \"%s = ...\" in %s\n", q->key, path);
        if (retired)
            text_printf(&t->reason, "your file answers %s, a question this lab no longer asks "
                        "(it is not graded): this one took its place\n", retired);
    } else if (!t->passed) {
        text_printf(&t->reason, "%s: you answered %.200s%s\n", v.state, ans,
                    !strcmp(v.state, "not a number")
                        ? " (give a number alone, e.g. 1.75e9, without units)" : "");
        if (opt.instructor) text_printf(&t->reason, "expected %.6g: %s\n", v.expected, v.why);
        else text_printf(&t->reason, "the expected value and its derivation are shown after "
                         "the deadline (make grade INSTRUCTOR=1)\n");
    }
}

/* Judges the question tests [i, j) of one lab against its answers file. */
static void grade_questions(int i, int j)
{
    const struct gr_lab *lab = lab_of[tests[i].lab];
    const struct gr_questions *qs = gr_questions_find(lab->dir);
    static struct gr_answers sheet;
    if (!qs) return;
    char path[PATH_MAX], err[700];
    answers_path(lab, path, sizeof path);
    int bad = gr_answers_read(path, qs, &sheet, err, sizeof err);
    for (int g = i; g < j; g++) {
        struct test *t = &tests[g];
        t->ran = 1;
        char key[200];
        snprintf(key, sizeof key, "%s", t->name + strlen("question "));
        key[strcspn(key, " ")] = '\0';
        const struct gr_question *q = NULL;
        for (int k = 0; k < qs->n && !q; k++)
            if (!strcmp(key, qs->q[k].key)) q = &qs->q[k];
        if (bad || !q) text_printf(&t->reason, "%s\n", bad ? err : "no such question");
        else judge_question(t, q, gr_answer_of(&sheet, q->key), path,
                            gr_answer_retired_for(&sheet, qs->lab, q->key));
    }
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
        lab_of[k]->plan(&opt.plan);
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
        fprintf(stderr, "grade: no test name contains '%s'; `grade --list` shows them\n",
                opt.test);
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
    printf("grading %s with %s%s on %s\n",
           opt.drivers ? opt.drivers : opt.solutions ? "solutions/" : "labs/ (your copy)",
           seed_text, opt.hidden ? " and the hidden suite" : "",
           launcher && *launcher ? launcher : "mpirun");
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
    if (!gr_symbols_break_rule(path, GR_SYMBOLS_TAMPER, NULL, GR_SYMBOLS_TAMPER_RULE, why,
                               sizeof why) &&
        (!lab->forbidden_symbols ||
         !gr_symbols_break_rule(path, lab->forbidden_symbols, lab->allowed_symbols,
                                lab->symbol_rule, why, sizeof why)))
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
