/* questions.c: Lab 6's graded questions (labs/06-pipeline/questions.txt). Expected values
 * come from the bubble and in-flight formulas of docs/design.md and the handout, computed here
 * with uniform stage times: bubble (p-1)/(v m + p - 1) (v = 1 for AFAB and 1F1B), AFAB
 * keeps all m microbatches, 1F1B at most min(p - s, m) on stage s after a warm-up of
 * min(p - s - 1, m) forwards. */
#include <stdio.h>

#include "questions.h"

static double bubble(int p, int m, int v, char *why, size_t len)
{
    double b = (double)(p - 1) / (v * m + p - 1);
    snprintf(why, len, "(p-1)/(v m + p - 1) with p = %d, m = %d, v = %d: %d/%d = %.4f", p, m,
             v, p - 1, v * m + p - 1, b);
    return b;
}

static double afab(char *why, size_t len) { return bubble(4, 8, 1, why, len); }
static double m4p(char *why, size_t len) { return bubble(8, 32, 1, why, len); }
static double interleaved(char *why, size_t len) { return bubble(4, 8, 2, why, len); }

static double peak_afab(char *why, size_t len)
{
    snprintf(why, len, "AFAB runs every forward before any backward: all m = 8 are in flight");
    return 8;
}

static int min_int(int a, int b) { return a < b ? a : b; }

static double peak_1f1b(char *why, size_t len)
{
    const int p = 4, s = 0, m = 8;
    snprintf(why, len, "1F1B: min(p - s, m) = min(%d, %d) in flight on stage %d", p - s, m, s);
    return min_int(p - s, m);
}

static double warmup(char *why, size_t len)
{
    const int p = 4, s = 1, m = 8;
    snprintf(why, len, "min(p - s - 1, m) = min(%d, %d): the forwards still to reach the last "
             "stage before stage %d's first backward can come back; the steady state's first "
             "forward, run just before that backward, is not one of them", p - s - 1, m, s);
    return min_int(p - s - 1, m);
}

static const struct gr_question LAB06_QUESTIONS[] = {
    {"bubble_afab_p4_m8", afab, 0.01, 1},
    {"bubble_m_4p_p8", m4p, 0.01, 1},
    {"bubble_interleaved_p4_m8_v2", interleaved, 0.01, 1},
    {"peak_stage0_afab_p4_m8", peak_afab, 0.0, 1},
    {"peak_stage0_1f1b_p4_m8", peak_1f1b, 0.0, 1},
    {"warmup_forwards_stage1_p4_m8", warmup, 0.0, 1},
    {"why_1f1b_same_bubble", NULL, 0, 0},
    {"partition", NULL, 0, 0},
    {"deadlock", NULL, 0, 0},
    {"interleaving_trade", NULL, 0, 0},
    {"zero_bubble", NULL, 0, 0},
};

static const struct gr_questions lab06_questions = {
    "06-pipeline", LAB06_QUESTIONS, (int)(sizeof LAB06_QUESTIONS / sizeof LAB06_QUESTIONS[0])};
GR_REGISTER_QUESTIONS(lab06_questions);
