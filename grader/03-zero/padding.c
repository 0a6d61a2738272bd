/* padding.c: what zero.h promises of the buffers a rank keeps, read by its own layout: each
 * buffer holds at least the floats the layout asks for, and the parameters' padding is zero
 * from zero_new on (a padded chunk is reduced and gathered as data, so garbage there is
 * garbage in a neighbour's sum once a layout changes, and a checkpoint or a reshard reads
 * it). And the loss each rank's zero_step returns: the single-device model's on that rank's
 * slice of the batch, replayed here from the reference's own gradients. */
#include <stdlib.h>
#include <string.h>

#include "lab03.h"

void l3_slice_losses(const struct gr_reference *ref, int rank, int n, double *out)
{
    struct pl_model *m = pl_model_new(&ref->setup.cfg, PL_MODEL_ALL);
    size_t bytes = ref->numel * sizeof(float);
    pl_to_device(m->params, ref->init, bytes);
    struct gr_batch b;
    gr_batch_new(&b, &ref->setup, rank, n);
    for (int s = 0; s < ref->setup.steps && s < L3_STEPS; s++) {
        gr_batch_load(&b, s);
        struct pl_model_ctx ctx = pl_model_ctx_eval();
        ctx.train = 1; /* as the reference trains (no dropout in the graded model) */
        ctx.step = (uint64_t)m->adam_t + 1;
        out[s] = pl_model_forward(m, b.tokens, b.targets, b.B, &ctx);
        /* the reference's next parameters: its own update of its own whole-batch gradient */
        pl_to_device(m->grads, ref->grads + (size_t)s * ref->numel, bytes);
        pl_model_update(m, &ref->setup.opt);
    }
    gr_batch_free(&b);
    pl_model_free(m);
}

int l3_check_buffers(const struct zero *z, const struct zero_layout *e, struct l3_obs *v)
{
    double full = (double)e->full_numel * sizeof(float);
    double shard = (double)e->shard_numel * sizeof(float);
    const float *buf[4] = {z->params, z->grads, z->m, z->v};
    double want[4] = {z->stage == 3 ? shard : full, z->stage == 1 ? full : shard, shard, shard};
    for (int k = 0; k < 4; k++) {
        /* A buffer carved from a larger block (m and v in one, say) is not a block's start:
         * the ledger cannot say how much of the block is its own, so it is not judged. */
        double got = (double)pl_mem_size(buf[k]);
        if (got == 0 || got >= want[k]) continue;
        v->short_buf.field = k + 1;
        v->short_buf.got = got;
        v->short_buf.want = want[k];
        return 0;
    }
    return 1;
}

void l3_check_padding(const struct zero *z, const struct zero_layout *e, int at,
                      struct l3_obs *v)
{
    if (v->pad.at) return;
    int shard = z->stage == 3;
    size_t len = shard ? e->shard_numel : e->full_numel;
    float *h = malloc((len ? len : 1) * sizeof *h);
    pl_to_host(h, z->params, len * sizeof *h);
    for (int u = 0; u < e->nunits && !v->pad.at; u++) {
        const struct zero_unit *x = &e->unit[u];
        /* the unit's padding, [numel, padded) of its range: in a full buffer all of it,
         * in a shard what of it falls in this rank's chunk */
        size_t lo = shard ? (size_t)e->rank * x->chunk : 0;
        size_t hi = shard ? lo + x->chunk : x->padded;
        size_t base = shard ? x->shard_offset : x->full_offset;
        for (size_t k = lo > x->numel ? lo : x->numel; k < hi; k++) {
            float f = h[base + (k - lo)];
            if (f == 0.0f) continue;
            v->pad.at = at;
            v->pad.unit = u;
            v->pad.part = x->part;
            v->pad.shard = shard;
            v->pad.elem = (double)k;
            v->pad.value = f;
            break;
        }
    }
    free(h);
}
