/* moments.c: why Lab 3 checks the AdamW moments after one step. Clipping by the global norm
 * rescales the whole gradient, and Adam's update m / sqrt(v) does not change when the
 * gradient is scaled: so a ZeRO that sums the ranks' gradients instead of averaging them, or
 * that clips each rank's chunks by their own norm, still trains to the same losses and
 * weights within the tolerances. The first moment after one step from zero is
 * (1 - beta1) x the clipped gradient itself, and struct zero's m is part of the lab's
 * contract (zero.h): comparing it, with clipping off (a sum shows as a factor of n) and
 * with clipping surely on (a local norm shows as a scale of its own on each rank), tells
 * the average and the global norm apart from what only looks like them. */
#include "moments.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paralab.h"
#include "todo.h"

#define MOMENTS_TOL 1e-4 /* relative L2 error of m over this rank's elements */

/* The single device's gradient of the first step, before clipping, on the host. */
static float *reference_grad(const struct gr_train_setup *setup, double *norm)
{
    struct gr_train_setup one = *setup;
    one.steps = 1;
    struct gr_reference ref;
    gr_reference_run(&ref, &one);
    float *g = malloc(ref.numel * sizeof *g);
    memcpy(g, ref.grads, ref.numel * sizeof *g);
    double sq = 0;
    for (size_t i = 0; i < ref.numel; i++) sq += (double)g[i] * g[i];
    *norm = sqrt(sq);
    gr_reference_free(&ref);
    return g;
}

/* One step of the student's stage from fresh state with this clipping threshold; the
 * rank's m on the host (shard_numel floats), or NULL at a stub. */
static float *student_m(int stage, const struct gr_train_setup *setup, float clip,
                        const struct zero_layout *e)
{
    struct pl_adamw_config opt = setup->opt;
    opt.grad_clip = clip;
    struct gr_train_setup one = *setup;
    one.opt = opt;
    struct gr_batch b;
    gr_batch_new(&b, &one, pl_rank(), pl_size());
    gr_batch_load(&b, 0);
    gr_case("%s: one step from fresh state with clipping %s, to read z->m", stage == 1 ? "ZeRO-1"
            : stage == 2 ? "ZeRO-2" : "ZeRO-3", clip > 0 ? "on" : "off");
    struct zero *z = zero_new(&setup->cfg, &opt, stage, stage == 3, pl_comm_world());
    float *m = NULL;
    if (!gr_todo_any() && z && z->m) {
        zero_step(z, b.tokens, b.targets, b.B);
        if (!gr_todo_any()) {
            m = malloc(e->shard_numel * sizeof *m);
            pl_to_host(m, z->m, e->shard_numel * sizeof *m);
        }
    }
    if (z) zero_free(z);
    gr_batch_free(&b);
    return m;
}

/* m against (1 - beta1) x scale x g over this rank's elements; 0 when within tolerance,
 * else the error and the ratio m / expected (least squares) in *err and *ratio. */
static int compare_m(const float *m, const float *g, float scale, float beta1,
                     const struct zero_layout *e, double *err, double *ratio)
{
    double num = 0, den = 0, dot = 0;
    for (int u = 0; u < e->nunits; u++) {
        const struct zero_unit *x = &e->unit[u];
        size_t lo = (size_t)e->rank * x->chunk;
        size_t len = lo >= x->numel ? 0 : x->numel - lo < x->chunk ? x->numel - lo : x->chunk;
        for (size_t i = 0; i < len; i++) {
            double want = (1.0 - beta1) * scale * g[x->offset + lo + i];
            double got = m[x->shard_offset + i];
            num += (got - want) * (got - want);
            den += want * want;
            dot += got * want;
        }
    }
    *err = den > 0 ? sqrt(num / den) : sqrt(num);
    *ratio = den > 0 ? dot / den : 0;
    return !(*err <= MOMENTS_TOL);
}

static void explain(struct moments_verdict *v, int clip_on, double err, double ratio, int n)
{
    const char *why;
    if (!clip_on && n > 1 && fabs(ratio - n) < 0.01 * n)
        why = "it is n times the single device's: the gradients were summed over the ranks, "
              "not averaged (PL_AVG). Clipping and Adam's m/sqrt(v) hide a global scale in the "
              "weights, so only the gradient itself shows it (handout section 3)";
    else if (clip_on)
        why = "with clipping on, each rank's m has a scale of its own: the clipping norm must "
              "be the norm of the WHOLE gradient, the squares of every rank's chunks summed "
              "over the ranks (zero_sum_over_ranks), not this rank's chunks alone";
    else
        why = "the averaged gradient of the step is not what the single device computes on "
              "the global batch: check the reduce-scatter of every unit and its chunk offsets";
    snprintf(v->msg, sizeof v->msg, "rank %d: after one step with clipping %s, z->m is not "
             "(1 - beta1) x the single device's %sgradient: relative L2 error %.2e, m = %.4g x "
             "the expected; %s", pl_rank(), clip_on ? "on" : "off", clip_on ? "clipped " : "",
             err, ratio, why);
}

void moments_run(int stage, const struct gr_train_setup *setup, const struct zero_layout *e,
                 struct moments_verdict *v)
{
    memset(v, 0, sizeof *v);
    double norm;
    float *g = reference_grad(setup, &norm);
    /* clipping off, then on at half the norm, so it surely acts */
    const float clips[2] = {0.0f, (float)(0.5 * norm)};
    for (int k = 0; k < 2 && !v->bad && !v->stopped; k++) {
        float *m = student_m(stage, setup, clips[k], e);
        if (!m) {
            v->stopped = 1;
            break;
        }
        float scale = k ? pl_clip_scale(norm * norm, clips[k]) : 1.0f;
        double err, ratio;
        if (compare_m(m, g, scale, setup->opt.beta1, e, &err, &ratio)) {
            v->bad = 1;
            explain(v, k, err, ratio, pl_size());
        }
        free(m);
        /* every rank runs the same steps: a mismatch anywhere stops them all */
        int any = v->bad;
        PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        if (any) break;
    }
    free(g);
}
