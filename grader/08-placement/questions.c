/* questions.c: Lab 8's free-text questions (labs/08-placement/questions.txt), read by a
 * person. The numeric answers of section 6 are code (placement_answers in placement.c),
 * judged by the driver against the kit's planner; the reasons behind them go here. */
#include <stddef.h>

#include "questions.h"

static const struct gr_question LAB08_QUESTIONS[] = {
    {"q1_why_zero", NULL, 0, 0},
    {"q2_why_interleave", NULL, 0, 0},
    {"dp_overlap", NULL, 0, 0},
};

static const struct gr_questions lab08_questions = {
    "08-placement", LAB08_QUESTIONS, (int)(sizeof LAB08_QUESTIONS / sizeof LAB08_QUESTIONS[0])};
GR_REGISTER_QUESTIONS(lab08_questions);
