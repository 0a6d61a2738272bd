/* judge_train.c: the wording of a Lab 6 case that trains wrong (lab06.h), from rank 0's
 * figures (struct l6_train): a partition that is not a cover of the model or that differs
 * between stages and pipelines, and what a loss, gradient or parameter error suggests. No
 * MPI; linked with judge.c into tests/judge/06-pipeline. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lab06.h"

/* The grid's note: what a pipeline communicator's order means. */
static void say_grid(const struct l6_obs *o, int nranks, struct gr_why *why)
{
    struct l6_grid g;
    char a[160], b[160];
    l6_grid_make(&g, nranks, o->pipes);
    gr_why_say(why, "in this case the world is split into %d pipelines of %d stages, each "
               "training on data of its own, whose communicators number their ranks in "
               "another order than the world: pipeline 0 runs %s, pipeline 1 %s. The stage is "
               "this rank's rank in the communicator pipe_new is given (pl_comm_rank(comm)) "
               "and p its size (pl_comm_size(comm)); a stage taken from the world rank "
               "(pl_comm_world_rank) is right only while the pipeline is the whole world in "
               "world order (handout section 3)", g.pipes, g.p, l6_grid_text(&g, 0, a, sizeof a),
               l6_grid_text(&g, 1, b, sizeof b));
}

/* A step that went wrong first on the pipe made anew for a model that had trained. */
static void say_renewed(struct gr_why *why)
{
    gr_why_say(why, "every step before this one was right, and this is the first step of a new "
               "pipe: the grader freed the pipe after step %d and gave the model, trained %d "
               "step%s, to pipe_new, as a run resumed from a checkpoint does. The optimizer "
               "step a microbatch's dropout masks are drawn at is the model's, numbered as "
               "pl_model_step numbers it, not a count the pipe keeps (handout section 3.1)",
               L6_RENEW_STEP - 1, L6_RENEW_STEP, L6_RENEW_STEP == 1 ? "" : "s");
}

/* With m > 1, what dropout asks of each microbatch's context. */
static void say_dropout(int m, struct gr_why *why)
{
    gr_why_say(why, "dropout is on (p = %.1f): each of the %d microbatches must draw the masks "
               "its sequences draw in the whole batch on one device at this optimizer step, "
               "or its activations differ from the reference's (handout section 3.1)",
               L6_LAB_DROPOUT, m);
}

/* gr_describe_param_error's words for the recorded figures. */
static const char *param_text(const struct l6_param_err *e, char *buf, size_t len)
{
    char who[32] = "";
    if (e->tensor < 0) {
        snprintf(buf, len, "no parameters compared");
        return buf;
    }
    if (e->rank >= 0) snprintf(who, sizeof who, "rank %d, ", e->rank);
    if (e->nonfinite)
        snprintf(buf, len, "%stensor %s: %d elements in all are NaN or Inf (first bad element "
                 "%.0f of this tensor)", who, e->name, e->nonfinite, e->worst_elem);
    else
        snprintf(buf, len, "%stensor %s: relative L2 error %.2e (largest element error %.2e, "
                 "at element %.0f), all parameters %.2e", who, e->name, e->rel, e->max_abs,
                 e->worst_elem, e->overall);
    return buf;
}

/* What the gradient error suggests. */
static void explain_grads(const struct l6_obs *o, int nranks, struct gr_why *why)
{
    const struct l6_train *t = &o->train;
    int m = o->m, step = (int)t->v[0];
    double ratio = t->v[1];
    char what[512];
    gr_why_say(why, "step %d: after pipe_step the gradient differs from the single-device "
               "gradient of the whole batch: %s (tolerance %.0e)", step,
               param_text(&t->err, what, sizeof what), GR_TOL_GRADS);
    if (o->k == PIPE_ZBH1 && fabs(t->err.rel - 1) < 1e-6) {
        gr_why_say(why, "that tensor's gradient is missing: it is as far from the reference as "
                   "zero is. Under ZB-H1 a microbatch's W adds the weight gradients of the "
                   "blocks and the embedding, and the optimizer steps as soon as pipe_step "
                   "returns, so every W of the step runs before it returns (handout section 9)");
    } else if (m > 1 && fabs(ratio - m) < 0.05 * m) {
        gr_why_say(why, "your gradient is %.3g times the reference's with %d microbatches: "
                   "the microbatches' gradients add up to the sum of their losses' gradients, "
                   "where the step's loss is the batch's mean (handout section 3.1)", ratio, m);
    } else if (m > 1 && fabs(ratio * m * m - 1) < 0.05) {
        gr_why_say(why, "your gradient is 1/%d of the reference's with %d microbatches: "
                   "weighted down once too often (handout section 3.1)", m * m, m);
    } else if (m > 1) {
        if (t->v[2])
            gr_why_say(why, "the gradient is one microbatch's of the %d: the microbatches' "
                       "gradients must add up to the step's, and the others' were lost "
                       "(handout section 3.1)", m);
        say_dropout(m, why);
    }
    if (step == L6_RENEW_STEP) say_renewed(why);
    if (o->pipes > 1 && t->err.rank >= 0) {
        struct l6_grid g;
        l6_grid_make(&g, nranks, o->pipes);
        gr_why_say(why, "in pipeline %d of %d (world rank %d is its stage %d)",
                   l6_grid_pipe_of(&g, t->err.rank), o->pipes, t->err.rank,
                   l6_grid_stage_of(&g, t->err.rank));
    }
}

/* The cut of the model into stages (chunks): what is wrong with it. */
static void say_cut(const struct l6_obs *o, int nranks, struct gr_why *why)
{
    const struct l6_train *t = &o->train;
    const double *x = t->v;
    int head = PL_PART_HEAD(&o->cfg);
    if (t->wrong == L6_W_MIXED)
        gr_why_say(why, "pipeline %.0f: world rank %.0f, stage %.0f of its pipeline's "
                   "communicator, holds parts %.0f..%.0f, which your pipe_partition gives stage "
                   "%.0f", x[0], x[1], x[2], x[3], x[4], x[5]);
    else if (t->wrong == L6_W_COVER)
        gr_why_say(why, "pipe_stage_parts: stage %.0f holds parts %.0f..%.0f, but after stage "
                   "%.0f it must start at part %.0f and hold at least one part (the parts run "
                   "from -1, the embedding, through the %d blocks to %d, the head: handout "
                   "section 2)", x[0], x[1], x[2], x[0] - 1, x[3], o->cfg.n_layers, head);
    else if (t->wrong == L6_W_COVER_END)
        gr_why_say(why, "pipe_stage_parts: the last stage ends at part %.0f, but the head is "
                   "part %d: every part must belong to a stage (handout section 2)", x[0],
                   head);
    else if (t->wrong == L6_W_PIPES)
        gr_why_say(why, "stage %.0f holds parts %.0f..%.0f in pipeline 0 but %.0f..%.0f in "
                   "pipeline %.0f: one pipe_partition of the model for p = %d, the same in "
                   "every pipeline (handout section 2)", x[0], x[1], x[2], x[3], x[4], x[5],
                   o->p);
    else
        gr_why_say(why, "interleaved, %d stages, %d chunks each: pipe_stage_parts on stage "
                   "%.0f gives parts %.0f..%.0f, but chunk %.0f of your pipe_partition into p "
                   "v = %d chunks is parts %.0f..%.0f: cut the model into p * "
                   "o->virtual_stages chunks and give rank s chunks s, s + p, ... (handout "
                   "section 8)", o->p, o->v, x[0], x[1], x[2], x[0], o->p * o->v, x[3], x[4]);
    /* a cover of the interleaved chunks is the student's cut alone, no pipeline's */
    if (o->pipes > 1 && (o->v == 1 || t->wrong == L6_W_MIXED || t->wrong == L6_W_CHUNK))
        say_grid(o, nranks, why);
}

int l6_judge_correct(const struct gr_obs *all, struct gr_why *why)
{
    const struct l6_obs *o = gr_obs_rank(all, 0);
    const struct l6_train *t = &o->train;
    const double *x = t->v;
    int m = o->m;
    char what[512];
    switch (t->wrong) {
    case L6_W_NONE:
        return 1;
    case L6_W_LOSS: {
        char in[64] = "";
        if (o->pipes > 1) snprintf(in, sizeof in, " of pipeline %.0f", x[1]);
        gr_why_say(why, "step %.0f: the last stage%s's loss is %.6f, the single-device loss "
                   "%.6f (relative error %.1e)%s", x[0], in, x[2], x[3], x[4],
                   m > 1 ? ": the step's loss is the batch's mean, each microbatch's the mean "
                           "over its own tokens (handout section 3.1)"
                         : ": with one microbatch the forward is the whole batch's, so what "
                           "differs is how it ran: its context, dropout masks included, is "
                           "pl_model_step's (handout section 3.1)");
        if (m > 1) say_dropout(m, why);
        if ((int)x[0] == L6_RENEW_STEP) say_renewed(why);
        break;
    }
    case L6_W_MASKS:
        gr_why_say(why, "step 0: the %s is what one device computes on this batch when every "
                   "microbatch draws its dropout masks %s: the masks are wrong. Each microbatch "
                   "must draw the masks its sequences draw in the whole batch at this optimizer "
                   "step (handout section 3.1)", x[1] ? "pipeline's gradient" : "last stage's loss",
                   x[0] == 0 ? "as the batch's first sequences draw theirs"
                             : "as at no optimizer step");
        break;
    case L6_W_GRADS:
        explain_grads(o, all->nranks, why);
        break;
    case L6_W_PARAMS:
        gr_why_say(why, "after %d steps the parameters differ from the single-device model's: "
                   "%s", L6_K_STEPS, param_text(&t->err, what, sizeof what));
        break;
    default:
        say_cut(o, all->nranks, why);
    }
    gr_why_say(why, "in: %s, %s%d stages, %d microbatch%s", l6_sched_name((enum pipe_schedule)o->k),
               o->pipes > 1 ? "2 pipelines of " : "", o->p, m, m > 1 ? "es" : "");
    return 0;
}
