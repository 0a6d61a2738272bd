/* uneven_words.c: the reasons of Lab 2's uneven-batch cases (lab02.h), worded from the
 * figures each rank recorded (uneven.c): no MPI, so tests/judge/02-ddp.c links it beside
 * judge.c. They say what the wrong gradient equals and why that is not the step's, never
 * the code that would make it right. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lab02.h"

static const struct l2_obs *obs_of(const struct gr_obs *all, int r)
{
    return gr_obs_rank(all, r);
}

/* "rank 0 3, rank 1 5, rank 2 7, rank 3 1" into buf. */
static void counts_text(const struct gr_obs *all, char *buf, size_t len)
{
    buf[0] = 0;
    for (int r = 0; r < all->nranks; r++) {
        const struct l2_obs *o = obs_of(all, r);
        size_t at = strlen(buf);
        snprintf(buf + at, len - at, "%srank %d %d", r ? ", " : "", r, o->seqs);
    }
}

/* The ranks holding the fewest and the most sequences (the lowest of equals). */
static void fewest_most(const struct gr_obs *all, int *lo, int *hi)
{
    *lo = *hi = 0;
    for (int r = 1; r < all->nranks; r++) {
        const struct l2_obs *o = obs_of(all, r);
        if (o->seqs < obs_of(all, *lo)->seqs) *lo = r;
        if (o->seqs > obs_of(all, *hi)->seqs) *hi = r;
    }
}

/* Every rank's gradient is the average of the ranks' own mean gradients. */
static void means_words(const struct gr_obs *all, struct gr_why *why)
{
    const struct l2_obs *o = obs_of(all, 0);
    int n = all->nranks, N = o->all_seqs, lo, hi;
    char counts[512];
    counts_text(all, counts, sizeof counts);
    fewest_most(all, &lo, &hi);
    int a = obs_of(all, lo)->seqs, b = obs_of(all, hi)->seqs;
    gr_why_say(why, "step %d: your gradient is the average over the %d ranks of each rank's "
               "gradient of its own mean loss, (g_0 + ... + g_%d) / %d; but in this step the "
               "ranks hold different numbers of sequences (%s: %d in all). That average weighs "
               "a sequence of rank %d 1/(%d x %d) = %.4f and one of rank %d 1/(%d x %d) = %.4f, "
               "where the step's loss, the mean over all %d sequences, weighs each 1/%d = %.4f: "
               "the mean of the ranks' means is the mean of the sequences only when every rank "
               "holds as many. The weight of a sequence depends on the step's count of "
               "sequences over every rank, which no rank knows alone (ddp.h; handout section 7, "
               "uneven batches)", o->step + 1, n, n - 1, n, counts, N, lo, n, a,
               1.0 / (n * a), hi, n, b, 1.0 / (n * b), N, N, 1.0 / N);
}

/* Every rank's gradient is the reference's times a factor of its own. */
static void factor_words(const struct gr_obs *all, struct gr_why *why)
{
    const struct l2_obs *o = obs_of(all, 0);
    int n = all->nranks, N = o->all_seqs, own = 1;
    char each[768] = "";
    for (int r = 0; r < n; r++) {
        const struct l2_obs *q = obs_of(all, r);
        size_t at = strlen(each);
        snprintf(each + at, sizeof each - at, "%srank %d %.4g with %d", r ? ", " : "", r,
                 q->fit, q->seqs);
        double want = (double)N / ((double)n * q->seqs);
        if (fabs(q->fit / want - 1) > 0.02) own = 0;
    }
    gr_why_say(why, "step %d: every rank's gradient is the reference's times a factor of its "
               "own, so the ranks hold different gradients and their replicas part: %s "
               "sequences (%d in all)", o->step + 1, each, N);
    if (own)
        gr_why_say(why, "each factor is %d / (%d x the rank's own count): the step's count "
                   "was taken as the rank's own count times the %d ranks, which it is only "
                   "when every rank holds as many. The step's count is the sum of every "
                   "rank's, the same number on every rank (ddp.h; handout section 7, uneven "
                   "batches)", N, n, n);
    else
        gr_why_say(why, "every rank must weigh its sequences by the same rule from the same "
                   "step-wide figures, so that every rank ends with the same gradient bit for "
                   "bit (ddp.h; handout section 7, uneven batches)");
}

int l2_uneven_words(const struct gr_obs *all, struct gr_why *why)
{
    const struct l2_obs *o = obs_of(all, 0);
    if (!o->c.uneven || all->nranks < 2) return 0;
    int means = 1, fits = 1;
    double lo = 0, hi = 0;
    for (int r = 0; r < all->nranks; r++) {
        const struct l2_obs *q = obs_of(all, r);
        if (!(q->means_err < 1e-3)) means = 0;
        if (!(q->fit_err < 1e-3)) fits = 0;
        lo = r == 0 || q->fit < lo ? q->fit : lo;
        hi = r == 0 || q->fit > hi ? q->fit : hi;
    }
    if (means) {
        means_words(all, why);
        return 1;
    }
    if (fits && hi - lo > 0.01 * fabs(hi)) {
        factor_words(all, why);
        return 1;
    }
    return 0;
}

void l2_count_words(const struct l2_obs *o, const struct l2_tfig *f, struct gr_why *why)
{
    const struct l2_case *c = &o->c;
    char b[32];
    const char *what = c->opt.variant == DDP_NAIVE ? "tensor" : "bucket";
    if (f->code == L2_T_COUNT_AGAIN) {
        gr_why_say(why, "step %d, microbatch %d of %d: rank %d made a second small all-reduce "
                   "in the step (%s): beside the gradient's all-reduces a step may make ONE "
                   "all-reduce of at most %d floats to exchange the ranks' counts, once, in "
                   "whichever microbatch (ddp.h). The count of a step does not change between "
                   "its microbatches (handout section 7, uneven batches)", f->step + 1,
                   f->mb + 1, c->microbatches, f->rank, pl_format_bytes(f->got, b, sizeof b),
                   L2_COUNT_FLOATS);
        return;
    }
    long extra = f->calls - f->want_calls;
    char each[96] = "";
    if (extra == c->microbatches)
        snprintf(each, sizeof each, ", where yours are as many as the step's %d microbatches, "
                 "one in each", c->microbatches);
    gr_why_say(why, "step %d: rank %d made %ld all-reduce calls where one per %s takes %ld: "
               "%ld more, %s beyond the gradient's. Beside them a step may make ONE all-reduce "
               "of at most %d floats to exchange the ranks' counts (ddp.h)%s; the count of a "
               "step does not change between its microbatches (handout section 7, uneven "
               "batches)", f->step + 1, f->rank, f->calls, what, f->want_calls, extra,
               pl_format_bytes(f->ar - f->want, b, sizeof b), L2_COUNT_FLOATS, each);
}

int l2_group_size(const struct l2_case *c, int nranks)
{
    return nranks / c->groups;
}
