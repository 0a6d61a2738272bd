/* ddp.c: Lab 2, data parallelism -- the reference solution. Replicas start from rank 0's
 * parameters; after (or during) the last microbatch's backward the gradients are averaged
 * over the ranks: per tensor (naive), per bucket (bucketed), or per bucket as soon as
 * backward has produced it (overlapped). The handout's sections 3 to 7 in C. */
#include "ddp.h"

#include <stdlib.h>

#include "check.h"
#include "mem.h"

struct ddp {
    struct pl_comm *comm;
    struct pl_model *m;
    struct ddp_options opt;
    int nbuckets;
    size_t *bucket_off, *bucket_len; /* [nbuckets]; bucket 0 at the end of the flat buffer */
    struct pl_handle **inflight;     /* [nbuckets]: the overlapped variant's all-reduces */
    int launched;                    /* buckets started in this step's backward */
    int syncing;                     /* the last microbatch's backward is running */
    float *count;                    /* [1], comm memory: this step's sequences, then all ranks' */
    struct pl_handle *counting;      /* its all-reduce, from microbatch 0 until its forward ends */
    float weight;                    /* this step's loss_scale: n x B / (all ranks' sequences) */
};

/* Section 7, uneven batches: the ranks may hold different numbers of sequences, and the
 * step's loss is the mean over all of them. Each step starts by summing the ranks' counts
 * (one all-reduce of one float, started before microbatch 0's forward and waited for after
 * it), and each rank weighs its backward by its share of the step's sequences times n, so
 * that the average over the ranks is the mean over every sequence. */
static void start_count(struct ddp *d, int B, int microbatches)
{
    float mine = (float)B * (float)microbatches;
    pl_copy_from_host(d->count, &mine, 1);
    d->counting = pl_all_reduce_async(d->comm, d->count, d->count, 1, PL_SUM);
}

/* Each rank's gradient of its own mean loss, times n B / N: the average over the n ranks of
 * those is the mean over every one of the N sequences (equal slices: 1/microbatches). */
static void finish_count(struct ddp *d, int B)
{
    float all;
    pl_wait(d->counting);
    d->counting = NULL;
    pl_copy_to_host(&all, d->count, 1);
    d->weight = (float)pl_comm_size(d->comm) * (float)B / all;
}

/* Section 3: every replica takes rank 0's parameters. */
static void broadcast_params(struct ddp *d)
{
    pl_broadcast(d->comm, d->m->params, d->m->layout.numel, 0);
}

/* Section 4: one all-reduce (mean) per parameter tensor, in place. */
static void allreduce_per_tensor(struct ddp *d)
{
    const struct pl_model_layout *lay = &d->m->layout;
    for (int t = 0; t < lay->n_tensors; t++) {
        float *g = d->m->grads + lay->tensors[t].offset;
        pl_all_reduce(d->comm, g, g, lay->tensors[t].numel, PL_AVG);
    }
}

/* Section 5: whole tensors, last to first, while they fit in bucket_bytes. */
static void plan_buckets(struct ddp *d)
{
    const struct pl_model_layout *lay = &d->m->layout;
    size_t cap = d->opt.bucket_bytes / sizeof(float);
    d->bucket_off = pl_mem_alloc((size_t)lay->n_tensors * sizeof(size_t), PL_MEM_WORK, PL_HOST,
                                 "ddp bucket offsets");
    d->bucket_len = pl_mem_alloc((size_t)lay->n_tensors * sizeof(size_t), PL_MEM_WORK, PL_HOST,
                                 "ddp bucket lengths");
    d->inflight = pl_mem_alloc((size_t)lay->n_tensors * sizeof *d->inflight, PL_MEM_WORK,
                               PL_HOST, "ddp handles");
    int b = -1;
    for (int t = lay->n_tensors - 1; t >= 0; t--) {
        const struct pl_param_desc *p = &lay->tensors[t];
        if (b < 0 || d->bucket_len[b] + p->numel > cap) {
            b++;
            d->bucket_len[b] = 0;
        }
        d->bucket_off[b] = p->offset;
        d->bucket_len[b] += p->numel;
    }
    d->nbuckets = b + 1;
}

static void allreduce_bucket(struct ddp *d, int b)
{
    float *g = d->m->grads + d->bucket_off[b];
    pl_all_reduce(d->comm, g, g, d->bucket_len[b], PL_AVG);
}

/* Section 6: after part `part`'s backward every gradient from the part's first element
 * to the end of the buffer is final, so each bucket starting there can go. */
static void on_backward_part(struct pl_model *m, int part, void *arg)
{
    struct ddp *d = arg;
    if (!d->syncing) return;
    size_t start, n;
    pl_model_part_range(&m->layout, part, &start, &n);
    while (d->launched < d->nbuckets && d->bucket_off[d->launched] >= start) {
        float *g = m->grads + d->bucket_off[d->launched];
        d->inflight[d->launched] = pl_all_reduce_async(d->comm, g, g,
                                                       d->bucket_len[d->launched], PL_AVG);
        d->launched++;
    }
}

static void wait_buckets(struct ddp *d)
{
    PL_ASSERT(d->launched == d->nbuckets);
    pl_wait_all(d->inflight, d->launched);
    d->launched = 0;
}

struct ddp *ddp_new(struct pl_comm *comm, struct pl_model *m, const struct ddp_options *opt)
{
    struct ddp *d = pl_mem_alloc(sizeof *d, PL_MEM_WORK, PL_HOST, "ddp state");
    d->comm = comm;
    d->m = m;
    d->opt = *opt;
    d->count = pl_comm_buf_alloc(1, "ddp sequence count");
    broadcast_params(d);
    if (opt->variant != DDP_NAIVE) plan_buckets(d);
    if (opt->variant == DDP_OVERLAPPED) pl_model_set_hook(m, on_backward_part, d);
    return d;
}

void ddp_free(struct ddp *d)
{
    if (!d) return;
    if (d->opt.variant == DDP_OVERLAPPED) pl_model_set_hook(d->m, NULL, NULL);
    pl_mem_free(d->bucket_off);
    pl_mem_free(d->bucket_len);
    pl_mem_free(d->inflight);
    pl_comm_buf_free(d->count);
    pl_mem_free(d);
}

/* Section 7: accumulate locally, communicate once, on the last microbatch (and the count,
 * once, from the first). */
double ddp_forward_backward(struct ddp *d, const int *tokens, const int *targets, int B,
                            int microbatch, int microbatches)
{
    struct pl_model *m = d->m;
    int last = microbatch == microbatches - 1;
    if (microbatch == 0) pl_model_zero_grad(m);
    if (microbatch == 0) start_count(d, B, microbatches);
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1;
    ctx.step = (uint64_t)m->adam_t + 1;
    double loss = pl_model_forward(m, tokens, targets, B, &ctx);
    if (microbatch == 0) finish_count(d, B);
    ctx.loss_scale = d->weight;
    d->syncing = last && d->opt.variant == DDP_OVERLAPPED;
    pl_model_backward(m, &ctx);
    d->syncing = 0;
    if (last && d->opt.variant == DDP_NAIVE) allreduce_per_tensor(d);
    if (last && d->opt.variant == DDP_BUCKETED)
        for (int b = 0; b < d->nbuckets; b++) allreduce_bucket(d, b);
    return loss;
}

void ddp_finish_gradients(struct ddp *d)
{
    if (d->opt.variant == DDP_OVERLAPPED) wait_buckets(d);
}

int ddp_num_buckets(const struct ddp *d)
{
    return d->nbuckets;
}

void ddp_bucket_range(const struct ddp *d, int i, size_t *offset, size_t *numel)
{
    *offset = d->bucket_off[i];
    *numel = d->bucket_len[i];
}
