/* judge.c: the reasons of Lab 2's part traffic, worded from the figures the checks of a case
 * recorded (struct l2_tfig): no MPI, nothing read but the arguments. The first failure of a
 * case is recorded while it runs and told only when the variant trains correctly. */
#include <math.h>
#include <stdio.h>

#include "lab02.h"

/* A step's bytes: what the rank sent against the all-reduce of the gradient, and the likeliest
 * reason. */
static void step_bytes(const struct l2_tfig *f, double psi, struct gr_why *why)
{
    char a[32];
    gr_why_say(why, "step %d: rank %d sent %.0f B (%.0f B of it in all-reduces); the all-reduce "
               "of the gradient of Psi = %.0f parameters sends 2(n-1)/n x 4 Psi = %.0f B (%s) "
               "per rank on %d ranks", f->step + 1, f->rank, f->got, f->ar, psi, f->want,
               pl_format_bytes(f->want, a, sizeof a), f->n);
    if (f->n < f->world &&
        fabs(f->got - pl_ring_bytes_sent(PL_ALL_REDUCE, f->world, 4.0 * psi)) < 1e-9 * f->got)
        gr_why_say(why, "that is an all-reduce over all %d ranks, not over the group of %d "
                   "ddp_new was given: every collective goes on d->comm, never "
                   "pl_comm_world()", f->world, f->n);
    else if (f->got < f->want)
        gr_why_say(why, "less than the whole gradient: some gradients were not all-reduced, "
                   "or not with pl_all_reduce");
    else if (fabs(f->got / f->want - round(f->got / f->want)) < 1e-9)
        gr_why_say(why, "that is %.0f times the gradient: is it all-reduced more than once per "
                   "step?", f->got / f->want);
}

void l2_range_text(const struct pl_model_layout *lay, size_t off, size_t count, char *buf,
                   size_t len)
{
    const struct pl_param_desc *a = gr_tensor_at(lay, off);
    const struct pl_param_desc *b = count ? gr_tensor_at(lay, off + count - 1) : a;
    if (!a || !b) snprintf(buf, len, "[%zu, %zu)", off, off + count);
    else if (a == b) snprintf(buf, len, "[%zu, %zu), %s", off, off + count, a->name);
    else snprintf(buf, len, "[%zu, %zu), %s .. %s", off, off + count, a->name, b->name);
}

/* An all-reduce outside the step's ranges (calls.c's figures). */
static void call_range(const struct pl_model_layout *lay, const struct l2_case *c,
                       const struct l2_range_fig *f, struct gr_why *why)
{
    int naive = c->opt.variant == DDP_NAIVE;
    const char *what = naive ? "tensor" : "bucket";
    char r[256], o[320] = "", b[256], on[32] = "";
    l2_range_text(lay, f->off, f->count, r, sizeof r);
    if (f->overlap >= 0) {
        l2_range_text(lay, f->ooff, f->olen, b, sizeof b);
        snprintf(o, sizeof o, " (it overlaps %s %d, %s)", what, f->overlap, b);
    }
    if (f->rank != 0) snprintf(on, sizeof on, "on rank %d: ", f->rank);
    gr_why_say(why, "%sstep %d: an all-reduce covered gradient elements %s, %s%s; each "
               "all-reduce covers exactly one %s, in place: %s", on, f->step + 1, r,
               f->repeated ? "a range already all-reduced in this step" : "which is not one of "
               "the step's ranges", o, what, naive ? "m->grads + tensors[t].offset, "
               "tensors[t].numel floats (handout section 4)" : "m->grads + bucket_off[b], "
               "bucket_len[b] floats, the same ranges ddp_bucket_range reports (handout "
               "section 5)");
}

void l2_traffic_words(const struct l2_setup *s, const struct l2_case *c,
                      const struct l2_tfig *f, struct gr_why *why)
{
    const struct pl_model_layout *lay = &s->ref.layout;
    char a[32], b[32], g[64] = "", t1[160], t2[160];
    switch (f->code) {
    case L2_T_STEP_BYTES: step_bytes(f, (double)s->ref.numel, why); break;
    case L2_T_STEP_CALLS:
        if (c->opt.variant == DDP_NAIVE)
            gr_why_say(why, "step %d: rank %d made %ld all-reduce calls and %ld other collective "
                       "calls; naive DDP makes one all-reduce per parameter tensor: %ld calls "
                       "(handout section 4)", f->step + 1, f->rank, f->calls, f->other,
                       f->want_calls);
        else
            gr_why_say(why, "step %d: rank %d made %ld all-reduce calls and %ld other collective "
                       "calls; bucketed DDP makes one all-reduce per bucket: %ld calls for "
                       "bucket_bytes %zu (handout section 5)", f->step + 1, f->rank, f->calls,
                       f->other, f->want_calls, c->opt.bucket_bytes);
        break;
    case L2_T_BROADCAST:
        if (c->groups > 1)
            snprintf(g, sizeof g, ", in each of the %d groups of %d", c->groups, f->n);
        gr_why_say(why, "ddp_new: the ranks sent %s in broadcasts in all; broadcasting the Psi "
                   "= %zu parameters of rank 0 once sends (n-1) x 4 Psi%s = %s in all (handout "
                   "section 3)", pl_format_bytes(f->got, a, sizeof a), s->ref.numel, g,
                   pl_format_bytes(f->want, b, sizeof b));
        if (c->groups > 1)
            gr_why_say(why, "rank 0 of each group broadcasts to its group: pl_broadcast on "
                       "d->comm, never pl_comm_world()");
        break;
    case L2_T_PLAN_RANGE:
        l2_range_tensors(lay, f->off, f->len, t1, sizeof t1);
        l2_range_tensors(lay, f->got_off, f->got_len, t2, sizeof t2);
        gr_why_say(why, "bucket_bytes %zu: bucket %d should be elements [%zu, %zu) (%s), yours "
                   "is [%zu, %zu) (%s). Buckets hold whole tensors, filled from the last tensor "
                   "of the flat buffer to the first while they fit (ddp.h, handout section 5)",
                   c->opt.bucket_bytes, f->bucket, f->off, f->off + f->len, t1, f->got_off,
                   f->got_off + f->got_len, t2);
        break;
    case L2_T_PLAN_COUNT:
        gr_why_say(why, "bucket_bytes %zu: the plan has %d buckets, yours %d (ddp.h, handout "
                   "section 5)", c->opt.bucket_bytes, f->want_n, f->got_n);
        break;
    case L2_T_MICROBATCH:
        gr_why_say(why, "step %d, microbatch %d of %d: rank %d sent %s in %ld collective calls. "
                   "Only the last microbatch may communicate: accumulate the gradients locally "
                   "and all-reduce once per step (handout section 7)", f->step + 1, f->mb + 1,
                   c->microbatches, f->rank, pl_format_bytes(f->got, a, sizeof a), f->calls);
        break;
    case L2_T_RANGES: call_range(lay, c, &f->range, why); break;
    default: break;
    }
}
