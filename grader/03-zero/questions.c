/* questions.c: Lab 3's graded questions (labs/03-zero/questions.txt). Expected values come
 * from the ZeRO paper's formulas (formulas.h): the fewest H100-80GB devices on which the
 * model state of mixed-precision Adam (2 + 2 + 12 bytes per parameter) fits, per stage,
 * activations and buffers left out; and the traffic of stage 3 against DDP. */
#include <stdio.h>

#include "formulas.h"
#include "questions.h"

#define Q3_DEVICE_BYTES 80e9
#define Q3_MAX_DEVICES 100000

/* The fewest devices nd on which stage's bytes per device fit, or 0 when none does (the
 * unsharded part alone is too large). */
static double fewest_devices(int stage, double psi, char *why, size_t len)
{
    for (int nd = 1; nd <= Q3_MAX_DEVICES; nd++)
        if (zero_bytes_total(zero_mixed(stage, psi, nd, ZERO_PAPER_K)) <= Q3_DEVICE_BYTES) {
            snprintf(why, len, "%s: %s <= 80e9 bytes with Psi = %.3g: nd = %d gives %.4g bytes",
                     zero_stage_name(stage), zero_mixed_text(stage), psi, nd,
                     zero_bytes_total(zero_mixed(stage, psi, nd, ZERO_PAPER_K)));
            return nd;
        }
    snprintf(why, len, "%s: %s never fits 80e9 bytes with Psi = %.3g: the unsharded part "
             "alone is %.4g bytes, so the answer is 0", zero_stage_name(stage),
             zero_mixed_text(stage), psi,
             zero_bytes_total(zero_mixed(stage, psi, Q3_MAX_DEVICES, ZERO_PAPER_K)));
    return 0;
}

static double ddp_13b(char *why, size_t len) { return fewest_devices(0, 13e9, why, len); }
static double zero1_13b(char *why, size_t len) { return fewest_devices(1, 13e9, why, len); }
static double zero2_13b(char *why, size_t len) { return fewest_devices(2, 13e9, why, len); }
static double zero3_13b(char *why, size_t len) { return fewest_devices(3, 13e9, why, len); }
static double zero2_70b(char *why, size_t len) { return fewest_devices(2, 70e9, why, len); }
static double zero3_70b(char *why, size_t len) { return fewest_devices(3, 70e9, why, len); }

static double zero3_traffic_ratio(char *why, size_t len)
{
    snprintf(why, len, "stage 3 moves %g x 4Psi(n-1)/n per step, DDP %g: parameters gathered "
             "for the forward and again for the backward", zero_comm_psi(3), zero_comm_psi(0));
    return zero_comm_psi(3) / zero_comm_psi(0);
}

static const struct gr_question LAB03_QUESTIONS[] = {
    {"devices_ddp_13b", ddp_13b, 0.0, 1},
    {"devices_zero1_13b", zero1_13b, 0.0, 1},
    {"devices_zero2_13b", zero2_13b, 0.0, 1},
    {"devices_zero3_13b", zero3_13b, 0.0, 1},
    {"devices_zero2_70b", zero2_70b, 0.0, 1},
    {"devices_zero3_70b", zero3_70b, 0.0, 1},
    {"zero3_traffic_over_ddp", zero3_traffic_ratio, 0.01, 1},
    {"when_zero3_costs_more", NULL, 0, 0},
};

static const struct gr_questions lab03_questions = {
    "03-zero", LAB03_QUESTIONS, (int)(sizeof LAB03_QUESTIONS / sizeof LAB03_QUESTIONS[0])};
GR_REGISTER_QUESTIONS(lab03_questions);
