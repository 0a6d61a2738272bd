/* rep.c: where the code under test keeps the embedding and the head (fourd.h's rep, a model
 * of the stage's ends, pl_model_new_ends; or a whole model, which the plan test refuses but
 * whose values are still judged): the offset of a part in rep's layout against the whole
 * model's, for the comparisons of cases.c and zero.c. */
#include <math.h>
#include <stdio.h>

#include "lab09.h"

long l9_rep_shift(const struct fourd_model *m, int part)
{
    const struct pl_model_layout *rl = &m->rep->layout;
    if (!pl_model_layout_holds(rl, part)) return L9_NO_PART;
    size_t off, n;
    pl_model_part_range(rl, part, &off, &n);
    size_t whole = part == PL_PART_EMBED
                       ? 0
                       : rl->embed_numel + (size_t)rl->cfg.n_layers * rl->block_numel;
    return (long)off - (long)whole;
}

void l9_missing_part(struct l9_err *e, int part)
{
    e->rel = INFINITY;
    snprintf(e->name, sizeof e->name, "rep holds no %s", part == PL_PART_EMBED ? "embedding"
                                                                             : "head");
}

void l9_slice_host(const struct pl_model_config *c, int t, int r, const float *full,
                   float *shard)
{
    const size_t n = pl_tp_block_numel(c, 1), sn = pl_tp_block_numel(c, t);
    float *f = pl_mem_alloc(n * sizeof(float), PL_MEM_WORK, PL_DEVICE, "l9 reference block");
    float *s = pl_mem_alloc(sn * sizeof(float), PL_MEM_WORK, PL_DEVICE, "l9 reference slice");
    pl_to_device(f, full, n * sizeof(float));
    pl_tp_block_slice(c, t, r, f, s);
    pl_to_host(shard, s, sn * sizeof(float));
    pl_mem_free(f);
    pl_mem_free(s);
}
