/* gradients.c: the gradient each ZeRO step updates with, seen where the update happens.
 * Every call of pl_model_adamw_flat the code under test makes is wrapped
 * (grader/03-zero/lab.mk): the gradient it is given, after the reduce-scatter and the clip,
 * is kept at its flat offset in the state's watch (gr_wrap_ctx), and the step count t it is
 * given is checked against the steps taken. After each step the ranks' records are put
 * together and compared with the single-device gradient of the whole batch, clipped by the
 * reference's global norm; a difference is explained by the mistakes that make it (a sum
 * where an average belongs, an average taken twice, a clip by one rank's own norm, no clip),
 * each recognised from the numbers, not guessed. The trained parameters cannot tell a sum
 * from an average: clipping and AdamW both undo a global scale of the gradient. The
 * gradient itself can. */
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lab03.h"
#include "mem.h"
#include "ops.h"
#include "runtime.h"
#include "unseen.h"
#include "wrap_ctx.h"

void l3_grads_begin(struct l3_watch *w, size_t numel)
{
    if (w->grads.numel != numel) {
        l3_grads_free(w);
        w->grads.g = malloc((numel ? numel : 1) * sizeof *w->grads.g);
        w->grads.count = malloc((numel ? numel : 1) * sizeof *w->grads.count);
        w->grads.numel = numel;
    }
    memset(w->grads.g, 0, numel * sizeof *w->grads.g);
    memset(w->grads.count, 0, numel * sizeof *w->grads.count);
    w->grads.t_min = INT_MAX;
    w->grads.t_max = INT_MIN;
    w->grads.on = 1;
}

void l3_grads_end(struct l3_watch *w)
{
    w->grads.on = 0;
}

void l3_grads_free(struct l3_watch *w)
{
    free(w->grads.g);
    free(w->grads.count);
    memset(&w->grads, 0, sizeof w->grads);
}

void __real_pl_model_adamw_flat(const struct pl_model_layout *lay, size_t offset, size_t n,
                                float *p, const float *g, float *m, float *v, int t,
                                const struct pl_adamw_config *opt);

void __wrap_pl_model_adamw_flat(const struct pl_model_layout *lay, size_t offset, size_t n,
                                float *p, const float *g, float *m, float *v, int t,
                                const struct pl_adamw_config *opt)
{
    gr_unseen_place(p, "pl_model_adamw_flat", "parameters", -2, "PL_MEM_PARAMS");
    gr_unseen_place(g, "pl_model_adamw_flat", "gradient", -2, "PL_MEM_GRADS");
    gr_unseen_place(m, "pl_model_adamw_flat", "m", -2, "PL_MEM_OPTIM");
    gr_unseen_place(v, "pl_model_adamw_flat", "v", -2, "PL_MEM_OPTIM");
    l3_host_place(p, "pl_model_adamw_flat", "parameters", -2);
    l3_host_place(g, "pl_model_adamw_flat", "gradient", -2);
    l3_host_place(m, "pl_model_adamw_flat", "m", -2);
    l3_host_place(v, "pl_model_adamw_flat", "v", -2);
    struct l3_watch *w = gr_wrap_ctx();
    if (w && w->grads.on && offset <= w->grads.numel && n <= w->grads.numel - offset) {
        pl_to_host(w->grads.g + offset, g, n * sizeof(float));
        for (size_t i = 0; i < n; i++) w->grads.count[offset + i]++;
        if (t < w->grads.t_min) w->grads.t_min = t;
        if (t > w->grads.t_max) w->grads.t_max = t;
    }
    __real_pl_model_adamw_flat(lay, offset, n, p, g, m, v, t, opt);
}

/* ---- who owns what ---- */

/* The rank whose chunk holds flat element i (-1: outside every unit). */
static int owner_of(const struct zero_layout *e, size_t i)
{
    for (int u = 0; u < e->nunits; u++) {
        const struct zero_unit *x = &e->unit[u];
        if (i >= x->offset && i < x->offset + x->numel)
            return (int)((i - x->offset) / x->chunk);
    }
    return -1;
}

/* Squared norm of rank r's elements of x (r < 0: all of them). */
static double norm_sq_of(const float *x, const int *owner, size_t numel, int r)
{
    double s = 0;
    for (size_t i = 0; i < numel; i++)
        if (r < 0 || owner[i] == r) s += (double)x[i] * x[i];
    return s;
}

float l3_clip_between_shards(const struct gr_reference *ref, const struct zero_layout *e)
{
    size_t numel = ref->numel;
    int *owner = malloc((numel ? numel : 1) * sizeof *owner);
    for (size_t i = 0; i < numel; i++) owner[i] = owner_of(e, i);
    double lo = 1e300, hi = 0;
    for (int r = 0; r < e->n; r++) {
        double s = sqrt(norm_sq_of(ref->grads, owner, numel, r));
        if (s < lo) lo = s;
        if (s > hi) hi = s;
    }
    double all = sqrt(norm_sq_of(ref->grads, owner, numel, -1));
    free(owner);
    /* A shard's norm is below the whole gradient's, so the midpoint is too. */
    return (float)(e->n > 1 ? (lo + hi) / 2 : all / 2);
}

/* ||got - want|| / ||want|| over every element. */
static double rel_l2(const float *got, const float *want, size_t numel)
{
    double d = 0, w = 0;
    for (size_t i = 0; i < numel; i++) {
        double x = (double)got[i] - want[i];
        d += x * x;
        w += (double)want[i] * want[i];
    }
    return w > 0 ? sqrt(d / w) : sqrt(d);
}

/* How close a recorded gradient must be to a mistake's prediction to be named for it. */
#define GR03_EXPLAINED 1e-3

/* The group's first rank: the mistake that explains got (every rank's record), against the
 * clipped reference, into f (its code and figures); 0 when none does. */
static int explain(const float *got, const float *ref_g, const int *owner, size_t numel,
                   int n, float clip, struct l3_grads_fig *f)
{
    double nsq = norm_sq_of(ref_g, owner, numel, -1);
    float scale = pl_clip_scale(nsq, clip);
    float *cand = calloc(numel ? numel : 1, sizeof *cand);
    int found = 0;
    f->x[1] = clip;
    /* A sum over n ranks is n times the average, and is clipped by its own, n times larger,
     * norm; an average divided by n once more is n times smaller, clipped by its own norm. */
    for (int k = 0; k < 2 && n > 1 && !found; k++) {
        float s = k == 0 ? pl_clip_scale(nsq / ((double)n * n), clip) / (float)n
                         : (float)n * pl_clip_scale((double)n * n * nsq, clip);
        for (size_t i = 0; i < numel; i++) cand[i] = s * ref_g[i];
        if (rel_l2(got, cand, numel) < GR03_EXPLAINED) {
            f->code = k == 0 ? L3_G_TWICE : L3_G_SUM;
            f->x[0] = (double)(s / scale);
            found = 1;
        }
    }
    /* A clip by each rank's own shard norm: a different scale on each rank. */
    if (!found && clip > 0 && n > 1) {
        int worst = 0;
        double worst_gap = -1, worst_norm = 0;
        float worst_scale = 1;
        for (int r = 0; r < n; r++) {
            double rsq = norm_sq_of(ref_g, owner, numel, r);
            float s = pl_clip_scale(rsq, clip);
            for (size_t i = 0; i < numel; i++)
                if (owner[i] == r) cand[i] = s * ref_g[i];
            double gap = fabs(log((double)s / scale));
            if (gap > worst_gap) {
                worst_gap = gap;
                worst = r;
                worst_norm = sqrt(rsq);
                worst_scale = s;
            }
        }
        if (rel_l2(got, cand, numel) < GR03_EXPLAINED) {
            *f = (struct l3_grads_fig){.code = L3_G_LOCAL_CLIP, .who = worst,
                                       .x = {(double)worst_scale, worst_norm, sqrt(nsq),
                                             (double)clip, (double)scale}};
            found = 1;
        }
    }
    if (!found && scale < 1 && rel_l2(got, ref_g, numel) < GR03_EXPLAINED) {
        *f = (struct l3_grads_fig){.code = L3_G_NOT_CLIPPED,
                                   .x = {sqrt(nsq), (double)clip, (double)scale}};
        found = 1;
    }
    free(cand);
    return found;
}

/* The group's first rank: an element given to AdamW other than once in the step. */
static int check_coverage(const struct gr_reference *ref, const int *count, const int *owner,
                          struct l3_grads_fig *f)
{
    size_t numel = ref->numel, given = 0;
    for (size_t i = 0; i < numel; i++) given += count[i] != 0;
    if (!given) {
        f->code = L3_G_NONE_GIVEN;
        return 0;
    }
    for (size_t i = 0; i < numel; i++) {
        if (count[i] == 1) continue;
        const struct pl_param_desc *t = gr_tensor_at(&ref->layout, i);
        f->code = L3_G_COUNT;
        f->elem = (double)i;
        f->who = owner[i];
        f->count = count[i];
        snprintf(f->tensor, sizeof f->tensor, "%s", t ? t->name : "?");
        return 0;
    }
    return 1;
}

/* The group's first rank: a step count t other than the steps the model has taken, this
 * one included. The gradient can be right and the update still wrong: AdamW divides m by
 * 1 - beta1^t and v by 1 - beta2^t, so a t carried over from another model, or never
 * counted, scales each update. */
static int check_step_count(int t_min, int t_max, int step, struct l3_grads_fig *f)
{
    int want = step + 1;
    if (t_min == want && t_max == want) return 1;
    f->code = L3_G_T;
    f->who = t_min != want ? t_min : t_max;
    return 0;
}

/* The largest difference of got from the clipped reference, when no mistake explains it. */
static void worst_difference(const float *got, const float *ref_g, const int *owner,
                             size_t numel, float scale, double err,
                             const struct pl_model_layout *lay, struct l3_grads_fig *f)
{
    size_t worst = 0;
    double wd = -1;
    for (size_t i = 0; i < numel; i++) {
        double d = fabs((double)got[i] - (double)scale * ref_g[i]);
        if (d > wd) {
            wd = d;
            worst = i;
        }
    }
    const struct pl_param_desc *t = gr_tensor_at(lay, worst);
    *f = (struct l3_grads_fig){.code = L3_G_DIFF, .who = owner[worst], .elem = (double)worst,
                               .x = {err, (double)got[worst], (double)scale * ref_g[worst],
                                     scale < 1}};
    snprintf(f->tensor, sizeof f->tensor, "%s", t ? t->name : "?");
}

int l3_grads_observe(const struct l3_watch *w, const struct gr_reference *ref, int step,
                     float clip, const struct zero_layout *e, MPI_Comm group,
                     struct l3_grads_fig *f)
{
    size_t numel = ref->numel;
    int me, n;
    PL_CHECK_MPI(MPI_Comm_rank(group, &me));
    PL_CHECK_MPI(MPI_Comm_size(group, &n));
    float *got = me == 0 ? malloc((numel ? numel : 1) * sizeof *got) : NULL;
    int *count = me == 0 ? malloc((numel ? numel : 1) * sizeof *count) : NULL;
    /* Every element comes from one rank and zeros from the others: the sum is exact. */
    PL_CHECK_MPI(MPI_Reduce(w->grads.g, got, (int)numel, MPI_FLOAT, MPI_SUM, 0, group));
    PL_CHECK_MPI(MPI_Reduce(w->grads.count, count, (int)numel, MPI_INT, MPI_SUM, 0, group));
    int t_min, t_max; /* a rank with no call of its own keeps INT_MAX and INT_MIN */
    PL_CHECK_MPI(MPI_Reduce(&w->grads.t_min, &t_min, 1, MPI_INT, MPI_MIN, 0, group));
    PL_CHECK_MPI(MPI_Reduce(&w->grads.t_max, &t_max, 1, MPI_INT, MPI_MAX, 0, group));
    int ok = 1;
    const float *ref_g = ref->grads + (size_t)step * numel;
    if (me == 0) {
        struct l3_grads_fig mine = {0};
        int *owner = malloc((numel ? numel : 1) * sizeof *owner);
        for (size_t i = 0; i < numel; i++) owner[i] = owner_of(e, i);
        ok = check_coverage(ref, count, owner, &mine) &&
             check_step_count(t_min, t_max, step, &mine);
        float scale = pl_clip_scale(norm_sq_of(ref_g, owner, numel, -1), clip);
        /* Unclipped, the record compares with the reference's gradient and its tolerance. */
        for (size_t i = 0; ok && i < numel; i++) got[i] /= scale;
        double err = ok ? rel_l2(got, ref_g, numel) : 0;
        if (ok && err > GR_TOL_GRADS) {
            ok = 0;
            for (size_t i = 0; i < numel; i++) got[i] *= scale;
            if (!explain(got, ref_g, owner, numel, n, clip, &mine))
                worst_difference(got, ref_g, owner, numel, scale, err, &ref->layout, &mine);
        }
        mine.step = step;
        mine.n = n;
        if (!ok) *f = mine;
        free(owner);
    }
    free(got);
    free(count);
    int all_ok;
    PL_CHECK_MPI(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    return all_ok;
}
