/* uneven.c: Lab 2's uneven-batch cases (lab02.h). The ranks hold different numbers of
 * sequences in a step, and the step's loss is still the mean over every one of them, so
 * the average of the ranks' own mean gradients is no longer the gradient of the step. Each
 * rank reads the whole global batch and takes its own run of it; the reference trains one
 * device on every sequence the ranks hold together. When a gradient comes out wrong, each
 * rank records what it equals instead: the reference's times a factor of its own, or the
 * average of the ranks' gradients of their own mean losses (computed here on a scratch
 * model at the same parameters). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab02.h"

int l2_uneven_seqs(int r, int n, int step)
{
    return 1 + ((r + step) % n) * (1 + step % 2);
}

int l2_uneven_total(int n, int mb, int step)
{
    int sum = 0;
    for (int r = 0; r < n; r++) sum += l2_uneven_seqs(r, n, step);
    return sum * mb;
}

int l2_uneven_most(int n, int mb)
{
    int most = 0;
    for (int s = 0; s < K_STEPS; s++)
        if (l2_uneven_total(n, mb, s) > most) most = l2_uneven_total(n, mb, s);
    return most;
}

void l2_uneven_reference(struct gr_reference *ref, const struct gr_train_setup *setup, int n,
                         int mb)
{
    struct gr_train_setup t = *setup;
    t.global_B = l2_uneven_most(n, mb);
    memset(ref, 0, sizeof *ref);
    ref->setup = t;
    pl_model_layout_init(&ref->layout, &t.cfg);
    ref->numel = ref->layout.numel;
    size_t bytes = ref->numel * sizeof(float);
    ref->loss = pl_mem_alloc((size_t)t.steps * sizeof *ref->loss, PL_MEM_WORK, PL_HOST,
                             "uneven reference losses");
    ref->init = pl_mem_alloc(bytes, PL_MEM_WORK, PL_HOST, "uneven reference initial params");
    ref->params = pl_mem_alloc(bytes, PL_MEM_WORK, PL_HOST, "uneven reference final params");
    ref->grads = pl_mem_alloc(bytes * (size_t)t.steps, PL_MEM_WORK, PL_HOST,
                              "uneven reference gradients");
    struct pl_model *m = pl_model_new(&t.cfg, PL_MODEL_ALL);
    pl_to_host(ref->init, m->params, bytes);
    struct gr_batch b;
    gr_batch_new(&b, &t, 0, 1);
    for (int s = 0; s < t.steps; s++) {
        gr_batch_load(&b, s);
        /* one device on every sequence the ranks hold in step s: the batch's first ones */
        struct pl_model_ctx ctx = pl_model_ctx_eval();
        ctx.train = 1;
        ctx.step = (uint64_t)m->adam_t + 1;
        pl_model_zero_grad(m);
        ref->loss[s] = pl_model_forward(m, b.tokens, b.targets, l2_uneven_total(n, mb, s),
                                        &ctx);
        pl_model_backward(m, &ctx);
        pl_to_host(ref->grads + (size_t)s * ref->numel, m->grads, bytes);
        pl_model_update(m, &t.opt);
    }
    pl_to_host(ref->params, m->params, bytes);
    gr_batch_free(&b);
    pl_model_free(m);
}

/* The gradient of this rank's own mean loss over its slice, at the parameters of its
 * replica now (host, numel). */
static void own_mean_gradient(const struct l2_run *r, float *out)
{
    size_t numel = r->ref->numel, bytes = numel * sizeof(float);
    struct pl_model *m = pl_model_new(&r->ref->setup.cfg, PL_MODEL_ALL);
    pl_to_host(out, r->m->params, bytes);
    pl_to_device(m->params, out, bytes);
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1;
    pl_model_zero_grad(m);
    pl_model_forward(m, r->tokens, r->targets, r->B, &ctx);
    pl_model_backward(m, &ctx);
    pl_to_host(out, m->grads, bytes);
    pl_model_free(m);
}

void l2_uneven_figures(const struct l2_run *r, int step, const float *host, const float *want)
{
    size_t numel = r->ref->numel;
    int n = 1;
    PL_CHECK_MPI(MPI_Comm_size(r->group, &n));
    double gw = 0, ww = 0;
    for (size_t i = 0; i < numel; i++) {
        gw += (double)host[i] * want[i];
        ww += (double)want[i] * want[i];
    }
    double c = ww > 0 ? gw / ww : 0, e2 = 0, c2 = 0;
    for (size_t i = 0; i < numel; i++) {
        double d = host[i] - c * want[i];
        e2 += d * d;
        c2 += c * c * (double)want[i] * want[i];
    }
    float *own = malloc(numel * sizeof *own);
    double *mine = malloc(numel * sizeof *mine), *mean = malloc(numel * sizeof *mean);
    PL_ASSERT(own && mine && mean);
    own_mean_gradient(r, own);
    for (size_t i = 0; i < numel; i++) mine[i] = own[i];
    PL_CHECK_MPI(MPI_Allreduce(mine, mean, (int)numel, MPI_DOUBLE, MPI_SUM, r->group));
    double m2 = 0, d2 = 0;
    for (size_t i = 0; i < numel; i++) {
        double a = mean[i] / n;
        d2 += (host[i] - a) * (host[i] - a);
        m2 += a * a;
    }
    free(own);
    free(mine);
    free(mean);
    r->ob->seqs = r->B;
    r->ob->all_seqs = r->all_B;
    r->ob->fit = c;
    r->ob->fit_err = c2 > 0 ? sqrt(e2 / c2) : 1;
    r->ob->means_err = m2 > 0 ? sqrt(d2 / m2) : 1;
    (void)step;
}

/* The handout's example (section 7): step 0's slices on 4 ranks, one microbatch each, all
 * held by one process: how far the average of the ranks' mean losses and gradients lies
 * from the mean over every sequence, at the model's initial parameters. */
void l2_uneven_handout(const struct l2_setup *s)
{
    enum { N_RANKS = 4 };
    struct gr_train_setup t = s->train;
    t.global_B = l2_uneven_most(N_RANKS, 1);
    struct gr_batch b;
    gr_batch_new(&b, &t, 0, 1);
    gr_batch_load(&b, 0);
    struct pl_model *m = pl_model_new(&t.cfg, PL_MODEL_ALL);
    size_t numel = m->layout.numel, bytes = numel * sizeof(float);
    float *g = malloc(bytes);
    double *whole = calloc(numel, sizeof *whole), *means = calloc(numel, sizeof *means);
    PL_ASSERT(g && whole && means);
    double loss_all = 0, loss_means = 0;
    int at = 0, total = l2_uneven_total(N_RANKS, 1, 0), count[N_RANKS];
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1;
    for (int r = 0; r <= N_RANKS; r++) {
        /* r < N_RANKS: rank r's slice; then every sequence at once */
        int B = r < N_RANKS ? l2_uneven_seqs(r, N_RANKS, 0) : total;
        size_t from = r < N_RANKS ? (size_t)at * (size_t)b.T : 0;
        pl_model_zero_grad(m);
        double loss = pl_model_forward(m, b.tokens + from, b.targets + from, B, &ctx);
        pl_model_backward(m, &ctx);
        pl_to_host(g, m->grads, bytes);
        for (size_t i = 0; i < numel; i++)
            if (r < N_RANKS) means[i] += g[i] / (double)N_RANKS;
            else whole[i] = g[i];
        if (r < N_RANKS) {
            count[r] = B;
            loss_means += loss / N_RANKS;
            at += B;
        } else {
            loss_all = loss;
        }
    }
    double e2 = 0, w2 = 0;
    for (size_t i = 0; i < numel; i++) {
        e2 += (means[i] - whole[i]) * (means[i] - whole[i]);
        w2 += whole[i] * whole[i];
    }
    printf("# handout: on %d ranks holding %d, %d, %d and %d sequences\n", N_RANKS, count[0],
           count[1], count[2], count[3]);
    printf("# handout: a sequence of the rank holding %d weighs 1/(%d x %d) = %.4f, one of the "
           "rank holding %d weighs 1/(%d x %d) = %.4f, where the mean over all %d weighs each "
           "1/%d = %.4f\n", count[0], N_RANKS, count[0], 1.0 / (N_RANKS * count[0]), count[3],
           N_RANKS, count[3], 1.0 / (N_RANKS * count[3]), total, total, 1.0 / total);
    printf("# handout: the mean of the ranks' mean losses is %.4f where the mean over the %d "
           "sequences is %.4f, and the average of their gradients is %.1f%% away from the "
           "batch's gradient (relative L2)\n", loss_means, total, loss_all,
           100 * sqrt(e2 / w2));
    free(g);
    free(whole);
    free(means);
    pl_model_free(m);
    gr_batch_free(&b);
}
