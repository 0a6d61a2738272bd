/* questions.c: the registry of graded questions (questions.h). The labs' tables register
 * themselves when the program starts, as the labs' plans do, so no list of labs is kept by
 * hand. */
#include "questions.h"

#include <math.h>
#include <string.h>

#include "check.h"

#define GR_MAX_QUESTION_LABS 32

static const struct gr_questions *registered[GR_MAX_QUESTION_LABS];
static int nregistered;

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
