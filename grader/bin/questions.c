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
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/questions.h"
#include "check.h"
#include "fileio.h"
#include "json.h"

#define QS_MAX_LINE 2048
#define QS_MAX_KEYS 64

struct answer {
    char key[128];
    char value[QS_MAX_LINE];
};

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    return s;
}

/* Reads KEY = VALUE lines; a key the lab does not ask, or a line without '=', is an error
 * naming the line, so a typo never silently loses an answer. */
static int read_answers(const char *path, const struct gr_questions *qs, struct answer *out)
{
    FILE *f = fopen(path, "r");
    PL_REQUIRE(f, "cannot open the questions file %s (each lab's questions are in "
               "labs/%s/questions.txt; fill in that file)", path, qs->lab);
    char line[QS_MAX_LINE];
    int n = 0, lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *s = trim(line);
        if (!*s || *s == '#') continue;
        char *eq = strchr(s, '=');
        PL_REQUIRE(eq, "%s:%d: \"%s\" is not KEY = VALUE (a comment line starts with #)", path,
                   lineno, s);
        *eq = '\0';
        char *key = trim(s), *value = trim(eq + 1);
        int known = 0;
        for (int i = 0; i < qs->n; i++) known |= !strcmp(qs->q[i].key, key);
        PL_REQUIRE(known, "%s:%d: %s asks no question named \"%s\" (keep the keys as given)",
                   path, lineno, qs->lab, key);
        PL_REQUIRE(n < QS_MAX_KEYS && strlen(key) < sizeof out[n].key,
                   "%s:%d: too many answers or too long a key", path, lineno);
        snprintf(out[n].key, sizeof out[n].key, "%s", key);
        snprintf(out[n].value, sizeof out[n].value, "%s", value);
        n++;
    }
    fclose(f);
    return n;
}

static const char *find_answer(const struct answer *a, int n, const char *key)
{
    const char *v = NULL;
    for (int i = 0; i < n; i++)
        if (!strcmp(a[i].key, key)) v = a[i].value; /* the last one counts */
    return v;
}

/* "1.75e9", "12", "0.5": a number with nothing after it, else 0. */
static int parse_number(const char *s, double *v)
{
    char *end;
    *v = strtod(s, &end);
    return end != s && !*trim(end);
}

struct verdict {
    const char *state; /* right, wrong, unanswered, not a number, collected */
    double expected;
    char why[512];
};

static void write_results(const char *path, const struct gr_questions *qs,
                          const struct answer *a, int na, const struct verdict *v, double got,
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
        const char *ans = find_answer(a, na, qs->q[i].key);
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
    struct answer *a = calloc(QS_MAX_KEYS, sizeof *a);
    struct verdict *v = calloc((size_t)qs->n, sizeof *v);
    PL_REQUIRE(a && v, "out of memory");
    int na = read_answers(file, qs, a);

    double got = 0, total = 0;
    printf("%s: questions (%s)\n", qs->lab, file);
    for (int i = 0; i < qs->n; i++) {
        const struct gr_question *q = &qs->q[i];
        const char *ans = find_answer(a, na, q->key);
        if (!q->expect) {
            v[i].state = ans && *ans ? "collected" : "unanswered";
            printf("  %-11s %s (free text: read by a person)\n", v[i].state, q->key);
            continue;
        }
        total += q->points;
        double x;
        v[i].expected = q->expect(v[i].why, sizeof v[i].why);
        if (!ans || !*ans) v[i].state = "unanswered";
        else if (!parse_number(ans, &x)) v[i].state = "not a number";
        else v[i].state = gr_question_right(q, x, v[i].expected) ? "right" : "wrong";
        int right = !strcmp(v[i].state, "right");
        if (right) got += q->points;
        printf("  %-11s %s = %s  (%g point%s, within %g%%)\n", v[i].state, q->key,
               ans ? ans : "", q->points, q->points == 1 ? "" : "s", 100 * q->rel_tol);
        if (instructor && !right)
            printf("              expected %.6g: %s\n", v[i].expected, v[i].why);
    }
    printf("questions: %g/%g points%s\n", got, total,
           instructor ? "" : " (expected values and derivations are shown in instructor "
                             "mode, after the deadline)");
    if (results) write_results(results, qs, a, na, v, got, total);
    free(a);
    free(v);
    return got == total ? 0 : 1;
}
