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

#include "state.h"
#include "../common/questions.h"

/* ---- graded questions: each of a lab's questions (grader/common/questions.h) is a test of
 * its own, tagged "questions", judged here from the lab's questions.txt (no driver runs) ---- */

void plan_questions(int k)
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
    t->collected = !strcmp(v.state, "collected");
    t->passed = !strcmp(v.state, "right") || t->collected;
    t->score = t->passed ? t->points : 0;
    if (t->collected) {
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
void grade_questions(int i, int j)
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
