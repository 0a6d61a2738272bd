/* questions.c: the registry of graded questions (questions.h). The labs' tables register
 * themselves when the program starts, as the labs' plans do, so no list of labs is kept by
 * hand. */
#include "questions.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define GR_MAX_QUESTION_LABS 32

static const struct gr_questions *registered[GR_MAX_QUESTION_LABS];
static int nregistered;
static struct {
    const struct gr_retired_question *r;
    int n;
} retired[GR_MAX_QUESTION_LABS];
static int nretired;

void gr_register_retired_questions(const struct gr_retired_question *r, int n)
{
    if (nretired >= GR_MAX_QUESTION_LABS)
        pl_fatal("more than %d tables of retired questions: raise GR_MAX_QUESTION_LABS",
                 GR_MAX_QUESTION_LABS);
    retired[nretired].r = r;
    retired[nretired++].n = n;
}

const struct gr_retired_question *gr_question_retired(const char *lab, const char *key)
{
    for (int i = 0; i < nretired; i++)
        for (int k = 0; k < retired[i].n; k++)
            if (!strcmp(retired[i].r[k].lab, lab) && !strcmp(retired[i].r[k].key, key))
                return &retired[i].r[k];
    return NULL;
}

void gr_register_questions(const struct gr_questions *qs)
{
    if (nregistered >= GR_MAX_QUESTION_LABS)
        pl_fatal("more than %d labs register questions: raise GR_MAX_QUESTION_LABS",
                 GR_MAX_QUESTION_LABS);
    registered[nregistered++] = qs;
}

const struct gr_questions *gr_questions_find(const char *lab)
{
    size_t len = strlen(lab);
    for (int i = 0; i < nregistered; i++) {
        const char *dir = registered[i]->lab;
        if (!strcmp(dir, lab)) return registered[i];
        /* "01" names "01-collectives" */
        if (len > 0 && !strncmp(dir, lab, len) && dir[len] == '-') return registered[i];
    }
    return NULL;
}

int gr_question_right(const struct gr_question *q, double answer, double expected)
{
    return isfinite(answer) && fabs(answer - expected) <= q->rel_tol * fabs(expected);
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    return s;
}

static int asks(const struct gr_questions *qs, const char *key)
{
    for (int i = 0; i < qs->n; i++)
        if (!strcmp(qs->q[i].key, key)) return 1;
    return 0;
}

int gr_answers_read(const char *path, const struct gr_questions *qs, struct gr_answers *out,
                    char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot open the questions file %s (each lab's questions are in "
                 "labs/%s/questions.txt; fill in that file)", path, qs->lab);
        return -1;
    }
    char line[sizeof out->a[0].value];
    int lineno = 0, rc = 0;
    out->n = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        lineno++;
        char *s = trim(line);
        if (!*s || *s == '#') continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, errlen, "%s:%d: \"%.80s\" is not KEY = VALUE (a comment line starts "
                     "with #)", path, lineno, s);
            rc = -1;
            break;
        }
        *eq = '\0';
        char *key = trim(s), *value = trim(eq + 1);
        if (!asks(qs, key) && !gr_question_retired(qs->lab, key)) {
            snprintf(err, errlen, "%s:%d: %s asks no question named \"%.80s\" (keep the keys "
                     "as given)", path, lineno, qs->lab, key);
            rc = -1;
        } else if (out->n == GR_MAX_ANSWERS || strlen(key) >= sizeof out->a[0].key) {
            snprintf(err, errlen, "%s:%d: too many answers or too long a key", path, lineno);
            rc = -1;
        } else {
            snprintf(out->a[out->n].key, sizeof out->a[0].key, "%s", key);
            snprintf(out->a[out->n].value, sizeof out->a[0].value, "%s", value);
            out->n++;
        }
    }
    fclose(f);
    return rc;
}

const char *gr_answer_of(const struct gr_answers *s, const char *key)
{
    const char *v = NULL;
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->a[i].key, key)) v = s->a[i].value; /* the last one counts */
    return v;
}

const char *gr_answer_retired_for(const struct gr_answers *s, const char *lab,
                                  const char *successor)
{
    for (int i = 0; i < s->n; i++) {
        const struct gr_retired_question *r = gr_question_retired(lab, s->a[i].key);
        if (r && !strcmp(r->successor, successor) && s->a[i].value[0]) return r->key;
    }
    return NULL;
}

/* "1.75e9", "12", "0.5": a number with nothing after it. */
static int parse_number(const char *s, double *v)
{
    char *end;
    *v = strtod(s, &end);
    while (isspace((unsigned char)*end)) end++;
    return end != s && !*end;
}

void gr_question_judge(const struct gr_question *q, const char *answer, struct gr_verdict *v)
{
    memset(v, 0, sizeof *v);
    int given = answer && *answer;
    if (!q->expect) {
        v->state = given ? "collected" : "unanswered";
        return;
    }
    double x;
    v->expected = q->expect(v->why, sizeof v->why);
    if (!given) v->state = "unanswered";
    else if (!parse_number(answer, &x)) v->state = "not a number";
    else v->state = gr_question_right(q, x, v->expected) ? "right" : "wrong";
}
