/* questions.h: graded questions with numbers. A lab asks a few questions in a plain text
 * file, labs/NN-name/questions.txt, that the student fills in, one answer a line:
 *
 *     # the question, in comments above its key
 *     ring_bytes_per_rank = 1.75e9
 *     why_average_unseen = clipping rescales the gradient, so ...
 *
 * The lab's grader/NN-name/questions.c lists its questions (GR_REGISTER_QUESTIONS): for a
 * number, a function computing the expected value from the formulas, never a pasted
 * figure, with a relative tolerance and the derivation in words; for a free-text answer,
 * only the key: its text is collected for a person to read. grader/bin/questions.c checks a
 * file against the table; the solution's answers are solutions/NN-name/questions.txt. */
#ifndef GR_QUESTIONS_H
#define GR_QUESTIONS_H

#include <stddef.h>

struct gr_question {
    const char *key;
    /* NULL for a free-text answer. Otherwise returns the expected value and writes how it
     * follows from the formulas into why (shown in instructor mode only). */
    double (*expect)(char *why, size_t len);
    double rel_tol; /* |answer - expected| <= rel_tol * |expected| is right */
    double points;
};

struct gr_questions {
    const char *lab; /* "01-collectives" */
    const struct gr_question *q;
    int n;
};

void gr_register_questions(const struct gr_questions *qs);
#define GR_REGISTER_QUESTIONS(var)                                                         \
    static void __attribute__((constructor)) gr_register_questions_##var(void)             \
    {                                                                                      \
        gr_register_questions(&var);                                                       \
    }

/* The registered table of a lab, by its directory name or its number ("01"); NULL if none. */
const struct gr_questions *gr_questions_find(const char *lab);

/* 1 when |answer - expected| is within the question's tolerance. */
int gr_question_right(const struct gr_question *q, double answer, double expected);

#endif
