/* run.c: one run of a lab's driver, for a group of tests that share it: the run's files
 * and token, the launch in the sandbox with the deadlock watch, the verdicts read from the
 * report channel (only lines with the run's token), and each test's score and reason. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "deadlock.h"
#include "launch.h"
#include "trace.h"
#include "state.h"
#include "../sandbox/sandbox.h"

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
void run_group(int first, int last, const char *driver, const char *build_log,
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
void keep_seed_secret(void)
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
