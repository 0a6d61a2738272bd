/* questions.c: Lab 2's graded questions (labs/02-ddp/questions.txt). Expected values come
 * from the ring all-reduce's traffic, 2(n-1)/n of the buffer per rank (docs/design.md), the
 * bucket rule of ddp.h, and the alpha-beta model's latency term. The questions file states
 * the constants below in words. */
#include <stdio.h>

#include "questions.h"

#define Q2_PARAMS 124e6  /* a GPT-2 small sized model, fp32 gradients */
#define Q2_RANKS 8
#define Q2_TENSORS 148   /* its parameter tensors */
#define Q2_BUCKET_MB 25  /* the bucket size: 25 MiB */
#define Q2_ALPHA 5e-6    /* seconds of latency per all-reduce step */
#define Q2_MICROBATCHES 4

static double allreduce_bytes_per_rank(char *why, size_t len)
{
    double grad = 4.0 * Q2_PARAMS;
    snprintf(why, len, "2(n-1)/n * 4 bytes * Psi = 2*%d/%d * %.4g bytes", Q2_RANKS - 1,
             Q2_RANKS, grad);
    return 2.0 * (Q2_RANKS - 1) / Q2_RANKS * grad;
}

/* The latency a per-tensor all-reduce pays beyond the bucketed one: each all-reduce is
 * 2(n-1) ring steps of alpha. Buckets are at least ceil(bytes / bucket) of them; with
 * tensors much smaller than a bucket that bound is nearly met, and the question assumes it. */
static double latency_saved_ms(char *why, size_t len)
{
    double bytes = 4.0 * Q2_PARAMS, bucket = Q2_BUCKET_MB * 1024.0 * 1024.0;
    int buckets = (int)((bytes + bucket - 1) / bucket);
    double per_call = 2.0 * (Q2_RANKS - 1) * Q2_ALPHA;
    snprintf(why, len, "(%d tensors - %d buckets) * 2(n-1) * alpha = %d * %g s",
             Q2_TENSORS, buckets, Q2_TENSORS - buckets, per_call);
    return 1e3 * (Q2_TENSORS - buckets) * per_call;
}

static double allreduces_per_step(char *why, size_t len)
{
    double bytes = 4.0 * Q2_PARAMS, bucket = Q2_BUCKET_MB * 1024.0 * 1024.0;
    int buckets = (int)((bytes + bucket - 1) / bucket);
    snprintf(why, len, "only the last of %d microbatches communicates: one all-reduce per "
             "bucket, ceil(%.4g / %.4g) = %d", Q2_MICROBATCHES, bytes, bucket, buckets);
    return buckets;
}

static const struct gr_question LAB02_QUESTIONS[] = {
    {"allreduce_bytes_per_rank", allreduce_bytes_per_rank, 0.01, 2},
    {"latency_saved_ms", latency_saved_ms, 0.02, 2},
    {"allreduces_per_step", allreduces_per_step, 0.0, 1},
    {"why_average_unseen", NULL, 0, 0},
};

static const struct gr_questions lab02_questions = {
    "02-ddp", LAB02_QUESTIONS, (int)(sizeof LAB02_QUESTIONS / sizeof LAB02_QUESTIONS[0])};
GR_REGISTER_QUESTIONS(lab02_questions);
