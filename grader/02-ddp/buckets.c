/* buckets.c: Lab 2's bucket plan judged by the contract of ddp.h (struct ddp_options), with
 * no MPI and nothing read but the arguments, so that tests/judge/02-ddp.c runs it alone.
 * The contract admits many plans (fill from either end, balance the buckets, put the
 * smallest one first or last), so a plan is judged by the invariants every one of them
 * keeps, never against one plan: the first invariant broken, in the order a plan is walked
 * (bucket 0 first, from the end of the flat buffer), is recorded in figures, worded here
 * for judge.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab02.h"

int l2_fewest_plan(const struct pl_model_layout *lay, size_t bucket_bytes, size_t *off,
                   size_t *len)
{
    /* Filling each bucket while the next tensor fits gives the fewest buckets of any plan of
     * whole tensors in a fixed order: no plan can end its k-th bucket nearer the start. */
    size_t cap = bucket_bytes / sizeof(float);
    int b = -1;
    for (int t = lay->n_tensors - 1; t >= 0; t--) {
        const struct pl_param_desc *p = &lay->tensors[t];
        if (b < 0 || len[b] + p->numel > cap) len[++b] = 0;
        off[b] = p->offset;
        len[b] += p->numel;
    }
    return b + 1;
}

/* The index of the tensor that begins at flat element i, or -1 (none begins there). */
static int tensor_starting_at(const struct pl_model_layout *lay, size_t i)
{
    for (int t = 0; t < lay->n_tensors; t++)
        if (lay->tensors[t].offset == i) return t;
    return -1;
}

static int tensors_in(const struct pl_model_layout *lay, size_t off, size_t len)
{
    int k = 0;
    for (int t = 0; t < lay->n_tensors; t++)
        if (lay->tensors[t].offset >= off && lay->tensors[t].offset - off < len) k++;
    return k;
}

/* Two neighbouring buckets that fit in one: the first such i (buckets i and i+1), or -1. */
static int mergeable_pair(int n, const size_t *len, size_t cap)
{
    for (int i = 0; i + 1 < n; i++)
        if (len[i] + len[i + 1] <= cap) return i;
    return -1;
}

int l2_judge_plan(const struct pl_model_layout *lay, size_t bucket_bytes, int n,
                  const size_t *off, const size_t *len, struct l2_plan_fig *f)
{
    const size_t cap = bucket_bytes / sizeof(float);
    memset(f, 0, sizeof *f);
    f->got_n = n;
    f->bucket_bytes = bucket_bytes;
    size_t *fo = malloc((size_t)lay->n_tensors * sizeof *fo);
    size_t *fl = malloc((size_t)lay->n_tensors * sizeof *fl);
    f->want_n = l2_fewest_plan(lay, bucket_bytes, fo, fl);
    free(fo);
    free(fl);
    if (n < 1 || n > lay->n_tensors) {
        f->code = L2_P_COUNT;
        return 0;
    }
    size_t end = lay->numel; /* where bucket i must end: bucket i-1's start */
    for (int i = 0; i < n; i++) {
        f->bucket = i;
        f->off = off[i];
        f->len = len[i];
        f->end = end;
        if (len[i] == 0 || off[i] >= end || len[i] != end - off[i]) {
            f->code = L2_P_END;
            return 0;
        }
        if (tensor_starting_at(lay, off[i]) < 0) {
            f->code = L2_P_SPLIT;
            return 0;
        }
        f->tensors = tensors_in(lay, off[i], len[i]);
        if (len[i] > cap && f->tensors > 1) {
            f->code = L2_P_CAP;
            return 0;
        }
        end = off[i];
    }
    if (end != 0) {
        f->code = L2_P_UNCOVERED;
        f->end = end;
        return 0;
    }
    if (n > f->want_n) {
        f->code = L2_P_MORE;
        f->bucket = mergeable_pair(n, len, cap);
        if (f->bucket >= 0) {
            f->off = off[f->bucket + 1];
            f->len = len[f->bucket] + len[f->bucket + 1];
        }
        return 0;
    }
    return 1;
}

/* ---- the plan's failure in words ---- */

void l2_plan_words(const struct pl_model_layout *lay, const struct l2_plan_fig *f,
                   struct gr_why *why)
{
    char r[256], u[400];
    const size_t bb = f->bucket_bytes;
    l2_range_text(lay, f->off, f->len, r, sizeof r);
    switch (f->code) {
    case L2_P_COUNT:
        gr_why_say(why, "bucket_bytes %zu: ddp_num_buckets says %d, where a plan of whole "
                   "tensors has from 1 bucket (all of them) to %d (one per tensor) (ddp.h, "
                   "handout section 5)", bb, f->got_n, lay->n_tensors);
        break;
    case L2_P_END:
        if (f->bucket == 0)
            snprintf(u, sizeof u, "the end of the flat buffer, element %zu: backward makes the "
                     "gradients final from there toward the start, so the bucket it completes "
                     "first ends there", f->end);
        else
            snprintf(u, sizeof u, "element %zu, where bucket %d begins: buckets are numbered "
                     "in the order backward completes them, each right before the last",
                     f->end, f->bucket - 1);
        gr_why_say(why, "bucket_bytes %zu: bucket %d is elements %s%s; it must end at %s "
                   "(ddp.h, handout section 5)", bb, f->bucket, r,
                   f->len == 0 ? " (empty)" : f->off + f->len > f->end && f->bucket > 0
                                                  ? ", overlapping the bucket before it"
                                                  : "", u);
        break;
    case L2_P_SPLIT:
        gr_why_say(why, "bucket_bytes %zu: bucket %d is elements %s, which begins inside tensor "
                   "%s: a bucket holds whole tensors (ddp.h, handout section 5)", bb, f->bucket,
                   r, l2_tensor_at(lay, f->off) ? l2_tensor_at(lay, f->off)->name : "?");
        break;
    case L2_P_CAP:
        gr_why_say(why, "bucket_bytes %zu: bucket %d is elements %s, %d tensors in %zu bytes, "
                   "more than bucket_bytes; only a tensor larger than bucket_bytes may exceed "
                   "it, alone in its bucket (ddp.h, handout section 5)%s", bb, f->bucket, r,
                   f->tensors, f->len * sizeof(float),
                   f->len <= bb ? ". bucket_bytes counts bytes, and m->grads holds 4-byte "
                                  "floats" : "");
        break;
    case L2_P_UNCOVERED:
        l2_range_tensors(lay, 0, f->end, u, sizeof u);
        gr_why_say(why, "bucket_bytes %zu: your %d buckets end at element %zu: elements [0, "
                   "%zu) (%s) are in no bucket; together the buckets cover every tensor once "
                   "(ddp.h, handout section 5)", bb, f->got_n, f->end, f->end, u);
        break;
    case L2_P_MORE:
        if (f->bucket >= 0)
            snprintf(u, sizeof u, ": buckets %d and %d, elements %s, %zu bytes together, fit "
                     "in one", f->bucket, f->bucket + 1, r, f->len * sizeof(float));
        else
            snprintf(u, sizeof u, ", though no two neighbours fit in one: where the "
                     "boundaries sit decides how many there are");
        gr_why_say(why, "bucket_bytes %zu: your plan has %d buckets where %d can hold the "
                   "model within bucket_bytes%s. Every bucket pays the all-reduce's latency "
                   "once: a plan has as few as the limit allows (ddp.h, handout section 5)",
                   bb, f->got_n, f->want_n, u);
        break;
    default: break;
    }
}
