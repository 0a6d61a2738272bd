/* cases_check.c: what rank 0 says when a case of Lab 6 trains wrong (lab06.h): a partition
 * that is not a cover of the model, and what a loss or gradient error suggests. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "lab06.h"

/* Rank 0: a partition that is not a contiguous cover of the parts. */
int l6_judge_cover(const struct l6_stage_stats *st, int p, const struct pl_model_config *c)
{
    int want = PL_PART_EMBED;
    for (int s = 0; s < p; s++) {
        if (st[s].first != want || st[s].last < st[s].first) {
            gr_say("correct", "pipe_stage_parts: stage %d holds parts %d..%d, but after stage "
                   "%d it must start at part %d and hold at least one part (the parts run from "
                   "-1, the embedding, through the %d blocks to %d, the head: handout section "
                   "2)", s, st[s].first, st[s].last, s - 1, want, c->n_layers,
                   PL_PART_HEAD(c));
            return 0;
        }
        want = st[s].last + 1;
    }
    if (want != PL_PART_HEAD(c) + 1) {
        gr_say("correct", "pipe_stage_parts: the last stage ends at part %d, but the head is "
               "part %d: every part must belong to a stage (handout section 2)", want - 1,
               PL_PART_HEAD(c));
        return 0;
    }
    return 1;
}

/* Rank 0: with m > 1, what dropout asks of each microbatch's context. */
void l6_say_dropout(int m)
{
    gr_say("correct", "dropout is on (p = %.1f): microbatch i must draw the masks its "
           "sequences draw in the whole batch on one device, ctx.seq0 = i * B/m (here i * %d) "
           "and ctx.step = m->adam_t + 1, or its activations differ from the reference's "
           "(handout section 3.1)", L6_LAB_DROPOUT, L6_GLOBAL_B / m);
}

/* Rank 0, step 0 with m > 1: whether the pipeline's loss (grads NULL) or its assembled
 * gradient (grads, op memory) is what one device computes on the same batch with every
 * microbatch's dropout masks drawn where the first microbatch's are (ctx.seq0 left at 0),
 * or at step 0 (ctx.step left at m->adam_t): the single-device model at its initial
 * parameters, run microbatch by microbatch with that context. 1 (said, before anything
 * else) when one of them matches. */
int l6_dropout_explains(const struct gr_reference *ref, const struct gr_batch *b, int m,
                            double loss, const float *grads)
{
    const struct pl_model_config *c = &ref->setup.cfg;
    struct pl_model *model = pl_model_new(c, PL_MODEL_PARAMS | PL_MODEL_GRADS);
    pl_copy_from_host(model->params, ref->init, ref->numel);
    size_t N = ref->numel;
    float *mine = malloc(N * sizeof *mine), *what = malloc(N * sizeof *what);
    PL_ASSERT(mine && what);
    if (grads) pl_copy_to_host(mine, grads, N);
    int was = pl_trace_enabled(), Bmb = b->B / m, T = c->seq_len, found = 0;
    pl_trace_enable(0);
    for (int how = 0; how < 2 && !found; how++) {
        double sum = 0, d2 = 0, r2 = 0;
        pl_model_zero_grad(model);
        for (int i = 0; i < m; i++) {
            struct pl_model_ctx ctx = pl_model_ctx_eval();
            ctx.train = 1;
            ctx.step = how == 0 ? 1 : 0;
            ctx.seq0 = how == 0 ? 0 : (int64_t)i * Bmb;
            ctx.loss_scale = 1.0f / (float)m;
            size_t at = (size_t)i * (size_t)Bmb * (size_t)T;
            sum += pl_model_forward(model, b->tokens + at, b->targets + at, Bmb, &ctx);
            if (grads) pl_model_backward(model, &ctx);
        }
        if (grads) {
            pl_copy_to_host(what, model->grads, N);
            for (size_t i = 0; i < N; i++)
                d2 += ((double)mine[i] - what[i]) * ((double)mine[i] - what[i]),
                r2 += (double)what[i] * what[i];
        }
        if (grads ? d2 <= GR_TOL_GRADS * GR_TOL_GRADS * r2
                  : fabs(loss - sum / m) <= GR_TOL_LOSS * fabs(sum / m)) {
            gr_say("correct", "step 0: the %s is what one device computes on this batch when "
                   "every microbatch draws its dropout masks %s: the masks are wrong. "
                   "Microbatch i's context must say where its sequences sit in the whole "
                   "batch, ctx.seq0 = i * B/m (here i * %d), and which step it is, ctx.step = "
                   "m->adam_t + 1 (handout section 3.1)",
                   grads ? "pipeline's gradient" : "last stage's loss",
                   how == 0 ? "at ctx.seq0 = 0, where the first microbatch's are"
                            : "at ctx.step = 0, those of no optimizer step",
                   Bmb);
            found = 1;
        }
    }
    pl_trace_enable(was);
    free(mine);
    free(what);
    pl_model_free(model);
    return found;
}

/* Rank 0, from figures every rank computed: what the gradient error suggests. */
void l6_explain_grads(const struct gr_reference *ref, int m, int step,
                          const struct gr_param_verdict *v, double ratio, int one_mb_ok)
{
    char what[512];
    gr_describe_param_error(ref, v, what, sizeof what);
    gr_say("correct", "step %d: after pipe_step the gradient differs from the single-device "
           "gradient of the whole batch: %s (tolerance %.0e)", step, what, GR_TOL_GRADS);
    if (m > 1 && fabs(ratio - m) < 0.05 * m) {
        gr_say("correct", "your gradient is %.3g times the reference's with %d microbatches: "
               "scale each microbatch's loss by 1/m (ctx.loss_scale) so their sum is the "
               "mean (handout section 3)", ratio, m);
        return;
    }
    if (m > 1 && fabs(ratio * m * m - 1) < 0.05) {
        gr_say("correct", "your gradient is 1/%d of the reference's: it was scaled by 1/m "
               "twice (handout section 3)", m * m);
        return;
    }
    if (m > 1 && one_mb_ok)
        gr_say("correct", "one microbatch trained correctly, %d do not: the microbatches' "
               "gradients must add up to the step's. Zero the gradients once per step, before "
               "the first microbatch, and let every backward accumulate (+=) into them "
               "(handout section 3.1)", m);
    if (m > 1) l6_say_dropout(m);
}

/* The flat range of parts [first, last]. */
