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

/* A key a lab asked once and no longer asks, and the key of the question that took its
 * place. An answers file written before the change still reads: its answer to the old key
 * is kept but graded nowhere, and the newer question, left unanswered, says that the file
 * answers the old one (a key no lab ever asked is still an error). A lab lists its own
 * (GR_REGISTER_RETIRED_QUESTIONS) beside its table. */
struct gr_retired_question {
    const char *lab, *key, *successor;
};
void gr_register_retired_questions(const struct gr_retired_question *r, int n);
#define GR_REGISTER_RETIRED_QUESTIONS(arr)                                                 \
    static void __attribute__((constructor)) gr_register_retired_##arr(void)              \
    {                                                                                      \
        gr_register_retired_questions(arr, (int)(sizeof arr / sizeof arr[0]));             \
    }
/* The retired question of lab named key, or NULL. */
const struct gr_retired_question *gr_question_retired(const char *lab, const char *key);

/* The registered table of a lab, by its directory name or its number ("01"); NULL if none. */
const struct gr_questions *gr_questions_find(const char *lab);

/* 1 when |answer - expected| is within the question's tolerance. */
int gr_question_right(const struct gr_question *q, double answer, double expected);

/* A filled-in questions file: KEY = VALUE lines, '#' starting a comment line. */
#define GR_MAX_ANSWERS 64
struct gr_answers {
    int n;
    struct {
        char key[128];
        char value[2048];
    } a[GR_MAX_ANSWERS];
};

/* Reads path into out. A key the lab does not ask, or a line without '=', is an error
 * naming the line (so a typo never silently loses an answer): returns -1 with the message
 * in err. */
int gr_answers_read(const char *path, const struct gr_questions *qs, struct gr_answers *out,
                    char *err, size_t errlen);
/* The answer to key (the last one given), or NULL. */
const char *gr_answer_of(const struct gr_answers *s, const char *key);
/* The retired key of lab whose place successor took and that s answers, or NULL. */
const char *gr_answer_retired_for(const struct gr_answers *s, const char *lab,
                                  const char *successor);

/* One question judged: state is "right", "wrong", "unanswered", "not a number" or, for a
 * free-text question, "collected"; expected and why are set for a numeric question. */
struct gr_verdict {
    const char *state;
    double expected;
    char why[512];
};
void gr_question_judge(const struct gr_question *q, const char *answer, struct gr_verdict *v);

#endif
