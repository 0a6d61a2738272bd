/* output.c: the grading's output: a line per test with its reason, and Gradescope's
 * results.json (every test that ran, with its reason, tags and visibility, and the
 * leaderboard), written last and renamed into place whole. */
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

#include "json.h"
#include "state.h"
#include "../sandbox/sandbox.h"

void print_test(const struct test *t, const struct test *prev)
{
    /* A free-text answer is not judged: COLLECTED, never OK, so nobody reads it as right. */
    printf("== %s: %s == %s (%.1fs)\n", lab_of[t->lab]->dir, t->name,
           t->collected ? "COLLECTED" : t->passed ? "OK" : "FAIL", t->seconds);
    if (t->collected) {
        printf("    kept for a person to read; the grader does not judge it (0 points here)\n");
        fflush(stdout);
        return;
    }
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
int write_results(const char *path, double seconds)
{
    gr_sandbox_sweep();
    return gr_write_atomic(path, write_results_to, &seconds);
}
