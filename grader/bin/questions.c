/* questions: grades a lab's questions file (grader/common/questions.h). Each numeric
 * answer is checked against the value the lab's grader computes from the formulas, within
 * the question's tolerance; free-text answers are collected for a person to read.
 *
 *   questions --lab NN [--solutions] [--file PATH] [--instructor] [--results PATH]
 *
 * The file is labs/NN-name/questions.txt (solutions/NN-name/ with --solutions): lines
 * KEY = VALUE, '#' starting a comment line. A student sees right or wrong; --instructor
 * (after the deadline) also shows each expected value and how it follows from the formulas.
 * --results writes the verdicts and the free-text answers as JSON. Exit 0 when every
 * numeric answer is right, 1 otherwise, 2 on bad input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/questions.h"
#include "check.h"
#include "fileio.h"
#include "json.h"

static void write_results(const char *path, const struct gr_questions *qs,
                          const struct gr_answers *a, const struct gr_verdict *v, double got,
                          double total)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    PL_REQUIRE(f, "out of memory writing %s", path);
    fprintf(f, "{\"lab\": ");
    pl_json_string(f, qs->lab);
    fprintf(f, ", \"score\": ");
    pl_json_number(f, got);
    fprintf(f, ", \"max_score\": ");
    pl_json_number(f, total);
    fprintf(f, ", \"questions\": [");
    for (int i = 0; i < qs->n; i++) {
        const char *ans = gr_answer_of(a, qs->q[i].key);
        fprintf(f, "%s\n  {\"key\": ", i ? "," : "");
        pl_json_string(f, qs->q[i].key);
        fprintf(f, ", \"state\": ");
        pl_json_string(f, v[i].state);
        fprintf(f, ", \"answer\": ");
        pl_json_string(f, ans ? ans : "");
        fprintf(f, "}");
    }
    fprintf(f, "\n]}\n");
    fclose(f);
    pl_write_file_atomic(path, "the questions' results", buf, len);
    free(buf);
}

int main(int argc, char **argv)
{
    const char *lab = NULL, *file = NULL, *results = NULL;
    int solutions = 0, instructor = 0;
    for (int i = 1; i < argc; i++) {
        int more = i + 1 < argc;
        if (!strcmp(argv[i], "--lab") && more) lab = argv[++i];
        else if (!strcmp(argv[i], "--file") && more) file = argv[++i];
        else if (!strcmp(argv[i], "--results") && more) results = argv[++i];
        else if (!strcmp(argv[i], "--solutions")) solutions = 1;
        else if (!strcmp(argv[i], "--instructor")) instructor = 1;
        else
            pl_usage_error("unknown argument %s\nusage: questions --lab NN [--solutions] "
                           "[--file PATH] [--instructor] [--results PATH]", argv[i]);
    }
    PL_REQUIRE(lab, "which lab? questions --lab NN (e.g. --lab 01)");
    const struct gr_questions *qs = gr_questions_find(lab);
    PL_REQUIRE(qs, "lab %s has no graded questions (a lab adds them in "
               "grader/NN-name/questions.c; see docs/grader.md)", lab);
    char path[512];
    if (!file) {
        snprintf(path, sizeof path, "%s/%s/questions.txt", solutions ? "solutions" : "labs",
                 qs->lab);
        file = path;
    }
    struct gr_answers *a = calloc(1, sizeof *a);
    struct gr_verdict *v = calloc((size_t)qs->n, sizeof *v);
    PL_REQUIRE(a && v, "out of memory");
    char err[600];
    PL_REQUIRE(gr_answers_read(file, qs, a, err, sizeof err) == 0, "%s", err);

    double got = 0, total = 0;
    printf("%s: questions (%s)\n", qs->lab, file);
    for (int i = 0; i < qs->n; i++) {
        const struct gr_question *q = &qs->q[i];
        const char *ans = gr_answer_of(a, q->key);
        gr_question_judge(q, ans, &v[i]);
        if (!q->expect) {
            printf("  %-11s %s (free text: read by a person)\n", v[i].state, q->key);
            continue;
        }
        total += q->points;
        int right = !strcmp(v[i].state, "right");
        if (right) got += q->points;
        printf("  %-11s %s = %s  (%g point%s, within %g%%)\n", v[i].state, q->key,
               ans ? ans : "", q->points, q->points == 1 ? "" : "s", 100 * q->rel_tol);
        if (instructor && !right)
            printf("              expected %.6g: %s\n", v[i].expected, v[i].why);
    }
    for (int i = 0; i < a->n; i++) {
        const struct gr_retired_question *r = gr_question_retired(qs->lab, a->a[i].key);
        if (r)
            printf("  %-11s %s (this lab no longer asks it, and it is not graded: answer %s "
                   "instead)\n", "retired", r->key, r->successor);
    }
    printf("questions: %g/%g points%s\n", got, total,
           instructor ? "" : " (expected values and derivations are shown in instructor "
                             "mode, after the deadline)");
    if (results) write_results(results, qs, a, v, got, total);
    free(a);
    free(v);
    return got == total ? 0 : 1;
}
