/* questions.c: Lab 10's questions in labs/10-fault-tolerance/questions.txt, each expected
 * value computed from Llama 3's published failure count (Dubey et al. 2024, section 3.3.4:
 * 419 unexpected interruptions in 54 days of pre-training on 16,384 H100 GPUs) and the
 * first-order model of section 5, with the save cost the questions file states. */
#include <math.h>
#include <stdio.h>

#include "questions.h"

#define DAYS 54.0
#define FAILURES 419.0
#define GPUS 16384.0
#define SAVE_S 60.0 /* the questions' save cost: a minute of stalled training */

static double job_mtbf_s(void)
{
    return DAYS * 86400.0 / FAILURES;
}

static double mtbf_hours(char *why, size_t len)
{
    double m = job_mtbf_s() / 3600.0;
    snprintf(why, len, "54 days x 24 h / 419 interruptions = %.4g h between failures of the job",
             m);
    return m;
}

static double gpu_mtbf_years(char *why, size_t len)
{
    double y = DAYS * GPUS / FAILURES / 365.25;
    snprintf(why, len, "each of the 16384 GPUs ran 54 days: 54 x 16384 / 419 = %.4g GPU-days "
             "per interruption, / 365.25 = %.4g years", DAYS * GPUS / FAILURES, y);
    return y;
}

static double interval_minutes(char *why, size_t len)
{
    double m = job_mtbf_s(), t = sqrt(2.0 * SAVE_S * m);
    snprintf(why, len, "sqrt(2 C M) = sqrt(2 x 60 s x %.0f s) = %.4g s = %.4g min", m, t,
             t / 60.0);
    return t / 60.0;
}

static double wasted_fraction(char *why, size_t len)
{
    double m = job_mtbf_s(), t = sqrt(2.0 * SAVE_S * m), w = SAVE_S / t + t / (2.0 * m);
    snprintf(why, len, "C / tau + tau / (2 M) = 60 / %.4g + %.4g / (2 x %.0f) = %.4g "
             "(= sqrt(2 C / M))", t, t, m, w);
    return w;
}

static double wasted_at_hour(char *why, size_t len)
{
    double m = job_mtbf_s(), t = 3600.0, w = SAVE_S / t + t / (2.0 * m);
    snprintf(why, len, "C / tau + tau / (2 M) = 60 / 3600 + 3600 / (2 x %.0f) = %.4g", m, w);
    return w;
}

static const struct gr_question LAB10_QUESTIONS[] = {
    {"job_mtbf_hours", mtbf_hours, 0.01, 1},
    {"gpu_mtbf_years", gpu_mtbf_years, 0.01, 1},
    {"interval_minutes", interval_minutes, 0.01, 1},
    {"wasted_fraction", wasted_fraction, 0.02, 1},
    {"wasted_fraction_hourly", wasted_at_hour, 0.02, 1},
    {"why_not_shorter", NULL, 0, 0},
};

static const struct gr_questions lab10_questions = {
    "10-fault-tolerance", LAB10_QUESTIONS,
    (int)(sizeof LAB10_QUESTIONS / sizeof LAB10_QUESTIONS[0])};
GR_REGISTER_QUESTIONS(lab10_questions);
