/* questions.c: Lab 1's graded questions (labs/01-collectives/questions.txt). Expected
 * values come from the alpha-beta model of a ring (docs/labs/01-collectives.md section 8):
 * an all-reduce of S bytes on n ranks takes 2(n-1) steps, each paying the latency alpha and
 * moving S/n bytes at bandwidth B. The question's numbers are the constants below; the
 * questions file states them in words. */
#include <math.h>
#include <stdio.h>

#include "questions.h"

#define Q1_RANKS 8
#define Q1_BYTES (256.0 * 1024 * 1024) /* 256 MiB of gradients */
#define Q1_ALPHA 5e-6                  /* seconds per message */
#define Q1_BW 25e9                     /* bytes per second per link */

static double ring_bytes_per_rank(char *why, size_t len)
{
    double v = 2.0 * (Q1_RANKS - 1) / Q1_RANKS * Q1_BYTES;
    snprintf(why, len, "2(n-1)/n * S = 2*%d/%d * %.0f bytes", Q1_RANKS - 1, Q1_RANKS,
             Q1_BYTES);
    return v;
}

static double ring_time_ms(char *why, size_t len)
{
    double steps = 2.0 * (Q1_RANKS - 1);
    double v = steps * Q1_ALPHA + steps / Q1_RANKS * Q1_BYTES / Q1_BW;
    snprintf(why, len, "2(n-1)*alpha + 2(n-1)/n * S/B = %.0f*%g s + %.6g s", steps, Q1_ALPHA,
             steps / Q1_RANKS * Q1_BYTES / Q1_BW);
    return 1e3 * v;
}

/* The message size at which the ring's latency term equals its bandwidth term: below it a
 * latency-optimal algorithm (recursive doubling, a tree) wins. */
static double crossover_bytes(char *why, size_t len)
{
    double v = Q1_RANKS * Q1_ALPHA * Q1_BW;
    snprintf(why, len, "2(n-1)*alpha = 2(n-1)/n * S/B  =>  S = n*alpha*B = %d*%g*%g", Q1_RANKS,
             Q1_ALPHA, Q1_BW);
    return v;
}

/* Recursive doubling's latency term for the same n: log2(n) steps instead of 2(n-1). */
static double doubling_steps(char *why, size_t len)
{
    snprintf(why, len, "log2(n) = log2(%d)", Q1_RANKS);
    return log2(Q1_RANKS);
}

/* The two-level all-reduce of section 12 on 2 nodes of 4 ranks: each rank sends 2(N-1)/N of
 * its 1/L share of the buffer across the network. */
#define Q6_NODES 2
#define Q6_PER_NODE 4

static double hierarchical_inter_bytes(char *why, size_t len)
{
    double v = 2.0 * (Q6_NODES - 1) / Q6_NODES * Q1_BYTES / Q6_PER_NODE;
    snprintf(why, len, "2(N-1)/N * S/L = 2*%d/%d * %.0f/%d bytes", Q6_NODES - 1, Q6_NODES,
             Q1_BYTES, Q6_PER_NODE);
    return v;
}

/* Recursive doubling on Q7_RANKS, not a power of two: k = log2(m) exchanges plus 2 rounds for
 * the ranks folded in, each paying alpha + S/B; the ring pays 2(n-1) alpha + 2(n-1)/n S/B,
 * so doubling wins below S* = alpha B (2(n-1) - k) / (k - 2(n-1)/n). */
#define Q7_RANKS 5
static double doubling_crossover_bytes(char *why, size_t len)
{
    int m = 1, l = 0;
    while (2 * m <= Q7_RANKS) {
        m *= 2;
        l++;
    }
    int k = l + (m < Q7_RANKS ? 2 : 0);
    double ring = 2.0 * (Q7_RANKS - 1);
    snprintf(why, len, "k alpha + k S/B = 2(n-1) alpha + 2(n-1)/n S/B, k = log2(%d) + 2 = %d, "
             "n = %d  =>  S = alpha B (2(n-1) - k) / (k - 2(n-1)/n) = %g*%g*%g/%g", m, k,
             Q7_RANKS, Q1_ALPHA, Q1_BW, ring - k, k - ring / Q7_RANKS);
    return Q1_ALPHA * Q1_BW * (ring - k) / (k - ring / Q7_RANKS);
}

static const struct gr_question L1_QUESTIONS[] = {
    {"ring_bytes_per_rank", ring_bytes_per_rank, 0.01, 1},
    {"ring_time_ms", ring_time_ms, 0.02, 2},
    {"crossover_bytes", crossover_bytes, 0.02, 2},
    {"doubling_steps", doubling_steps, 0.0, 1},
    {"hierarchical_inter_bytes", hierarchical_inter_bytes, 0.01, 1},
    {"doubling_crossover_bytes", doubling_crossover_bytes, 0.02, 2},
    {"why_busbw", NULL, 0, 0},
};

static const struct gr_questions l1_questions = {
    "01-collectives", L1_QUESTIONS,
    (int)(sizeof L1_QUESTIONS / sizeof L1_QUESTIONS[0])};
GR_REGISTER_QUESTIONS(l1_questions);
