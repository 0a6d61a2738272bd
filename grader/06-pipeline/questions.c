/* questions.c: Lab 6's graded questions (labs/06-pipeline/questions.txt). Expected values
 * come from the bubble and in-flight formulas of docs/design.md and the handout, computed here
 * with uniform stage times: bubble (p-1)/(v m + p - 1) (v = 1 for AFAB and 1F1B), AFAB
 * keeps all m microbatches, 1F1B at most min(p - s, m) on stage s after a warm-up of
 * min(p - s - 1, m) forwards. The partition question's model is costed as the handout's
 * section 2 counts at scale (6 x the weights of each matrix per token, attention scores 12 d T
 * per block, the embedding 0) and cut by the same search the grader judges cuts with. */
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

/* The partition question's model: a GPT of Q6_L blocks, width Q6_D (d_ff 4 d), a vocabulary of
 * Q6_V and T = Q6_T tokens, cut into Q6_P stages. */
#define Q6_L 16
#define Q6_D 4096.0
#define Q6_V 131072.0
#define Q6_T 2048.0
#define Q6_P 8

/* The smallest largest stage of a contiguous cut of the n costs into p stages (n <= 32). */
static double best_largest(const double *cost, int n, int p)
{
    double best[Q6_P + 1][Q6_L + 3];
    for (int k = 0; k <= n; k++) best[1][k] = k ? best[1][k - 1] + cost[k - 1] : 0;
    for (int j = 2; j <= p; j++)
        for (int k = j; k <= n; k++) {
            double b = 1e300, tail = 0;
            for (int i = k - 1; i >= j - 1; i--) {
                tail += cost[i];
                double w = best[j - 1][i] > tail ? best[j - 1][i] : tail;
                if (w < b) b = w;
            }
            best[j][k] = b;
        }
    return best[p][n];
}

static double even_split_over_best(char *why, size_t len)
{
    const int n = Q6_L + 2, per = Q6_L / Q6_P;
    double cost[Q6_L + 2], block = 6 * 12 * Q6_D * Q6_D + 12 * Q6_D * Q6_T, head = 6 * Q6_D * Q6_V;
    for (int k = 0; k < n; k++) cost[k] = k == 0 ? 0 : k == n - 1 ? head : block;
    double even = per * block + head, best = best_largest(cost, n, Q6_P);
    snprintf(why, len, "per token a block costs 6 x 12 d^2 + 12 d T = %.4g FLOPs, the head 6 d V "
             "= %.4g (%.2f blocks); the even split's last stage holds %d blocks and the head, "
             "%.4g; the best cut's largest stage computes %.4g (%.2f blocks): ratio %.4f", block,
             head, head / block, per, even, best, best / block, even / best);
    return even / best;
}

static const struct gr_question LAB06_QUESTIONS[] = {
    {"bubble_afab_p4_m8", afab, 0.01, 1},
    {"bubble_m_4p_p8", m4p, 0.01, 1},
    {"bubble_interleaved_p4_m8_v2", interleaved, 0.01, 1},
    {"peak_stage0_afab_p4_m8", peak_afab, 0.0, 1},
    {"peak_stage0_1f1b_p4_m8", peak_1f1b, 0.0, 1},
    {"warmup_forwards_stage1_p4_m8", warmup, 0.0, 1},
    {"why_1f1b_same_bubble", NULL, 0, 0},
    {"even_split_over_best_16_blocks_p8", even_split_over_best, 0.01, 1},
    {"deadlock", NULL, 0, 0},
    {"interleaving_trade", NULL, 0, 0},
    {"zero_bubble", NULL, 0, 0},
};

static const struct gr_questions lab06_questions = {
    "06-pipeline", LAB06_QUESTIONS, (int)(sizeof LAB06_QUESTIONS / sizeof LAB06_QUESTIONS[0])};
GR_REGISTER_QUESTIONS(lab06_questions);

/* Asked before: its premise (the head costs about a block, so the even split is poor on the
 * lab's model) was false for the lab's model, whose head is 0.89 of a block. */
static const struct gr_retired_question LAB06_RETIRED[] = {
    {"06-pipeline", "partition", "even_split_over_best_16_blocks_p8"},
};
GR_REGISTER_RETIRED_QUESTIONS(LAB06_RETIRED)
