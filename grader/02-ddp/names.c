/* names.c: Lab 2's words for a case and for ranges of the flat gradient, shared by the
 * judge, the bench, the driver and the bucket plan's checks. */
#include <stdio.h>

#include "lab02.h"

const char *const L2_VARIANT_NAME[3] = {"naive", "bucketed", "overlapped"};

void l2_describe_case(const struct l2_case *c, int nranks, char *buf, size_t len)
{
    char b[64] = "";
    if (c->opt.variant != DDP_NAIVE)
        snprintf(b, sizeof b, ", bucket_bytes %zu", c->opt.bucket_bytes);
    char g[128] = "";
    if (c->groups > 1)
        snprintf(g, sizeof g, " in %d groups of %d (every %s rank, each group its own batches: "
                 "ddp_new gets the group's comm)", c->groups, l2_group_size(c, nranks),
                 c->groups == 2 ? "other" : "n-th");
    char seqs[64];
    snprintf(seqs, sizeof seqs, c->uneven ? "sequences differing between ranks" : "%d sequences",
             GLOBAL_B);
    snprintf(buf, len, "%s%s, %d microbatch%s, %d ranks%s, %d steps of %s (%s)",
             L2_VARIANT_NAME[c->opt.variant], b, c->microbatches, c->microbatches > 1 ? "es" : "",
             nranks, g, K_STEPS, seqs, c->why);
}

const struct pl_param_desc *l2_tensor_at(const struct pl_model_layout *lay, size_t i)
{
    for (int t = 0; t < lay->n_tensors; t++)
        if (i >= lay->tensors[t].offset && i - lay->tensors[t].offset < lay->tensors[t].numel)
            return &lay->tensors[t];
    return NULL;
}

void l2_range_tensors(const struct pl_model_layout *lay, size_t off, size_t len, char *buf,
                      size_t blen)
{
    const struct pl_param_desc *a = l2_tensor_at(lay, off);
    const struct pl_param_desc *b = len ? l2_tensor_at(lay, off + len - 1) : a;
    if (!a || !b) snprintf(buf, blen, "outside the parameters");
    else if (a == b) snprintf(buf, blen, "tensor %s", a->name);
    else snprintf(buf, blen, "tensors %s .. %s", a->name, b->name);
}

void l2_range_text(const struct pl_model_layout *lay, size_t off, size_t count, char *buf,
                   size_t len)
{
    const struct pl_param_desc *a = l2_tensor_at(lay, off);
    const struct pl_param_desc *b = count ? l2_tensor_at(lay, off + count - 1) : a;
    if (!a || !b) snprintf(buf, len, "[%zu, %zu)", off, off + count);
    else if (a == b) snprintf(buf, len, "[%zu, %zu), %s", off, off + count, a->name);
    else snprintf(buf, len, "[%zu, %zu), %s .. %s", off, off + count, a->name, b->name);
}
