/* setup.c: Lab 9's cases (lab09.h): the grids each rank count runs, the lab's model and
 * data for each, one device's reference runs (unclipped, then with a clip that binds), and
 * the words that describe a case. What a rank observes of one case is cases.c's. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab09.h"

/* The grids each rank count runs: the 8-rank ones of the handout, and on 6 ranks a
 * pipeline of 3 stages over 4 blocks (stage sizes 1, 1, 2), and ZeRO-1 over 3 replicas,
 * uneven (lab09.h): runs of floats dp = 3 does not divide. */
static const struct l9_case L9_CASES_8[] = {{2, 2, 2, 0}, {1, 2, 4, 0}, {2, 4, 1, 0},
                                            {4, 1, 2, 0}};
static const struct l9_case L9_CASES_6[] = {{1, 2, 3, 0}, {3, 2, 1, 1}};
/* The hidden suite's, on 8 ranks: TP across a whole node with a pipeline, four stages of
 * one block with the TP degree 1, and data parallelism alone. */
static const struct l9_case L9_CASES_HIDDEN[] = {{1, 4, 2, 0}, {2, 1, 4, 0}, {8, 1, 1, 0}};

static int case_batch(const struct l9_case *k)
{
    return k->dp * L9_MICRO * L9_MB_SEQS;
}

/* The norm of the reference's gradient of step s, before clipping. */
static double grad_norm(const struct gr_reference *ref, int s)
{
    const float *g = ref->grads + (size_t)s * ref->numel;
    double sq = 0;
    for (size_t j = 0; j < ref->numel; j++) sq += (double)g[j] * g[j];
    return sqrt(sq);
}

struct l9_state *l9_setup(uint64_t seed, int np, const char *op, int cap_force)
{
    struct l9_state *st = calloc(1, sizeof *st);
    PL_ASSERT(st);
    const int hidden = op && !strcmp(op, "train-hidden");
    st->seed = seed;
    st->np = np;
    st->hidden = hidden;
    st->capped = op && !strcmp(op, "capped");
    /* Point-to-point as NCCL runs it (nothing buffered; isends and irecvs start together at
     * the first wait, which completes the whole group): a schedule that finishes on MPI only
     * because MPI buffers a send, such as a send waited for before the neighbour's receive
     * is posted, deadlocks here as it would on GPUs (Lab 6's rule, section 2's handout). */
    pl_comm_set_p2p_like_nccl(1);
    const struct l9_case *cs = hidden ? L9_CASES_HIDDEN : np == 6 ? L9_CASES_6 : L9_CASES_8;
    st->ncases = hidden ? 3 : np == 6 ? 2 : 4;
    if (st->capped) st->ncases = 1; /* (2,2,2): every axis at once */
    memcpy(st->cases, cs, (size_t)st->ncases * sizeof *cs);
    st->data = pl_corpus_tokens(pl_mix64(seed ^ 0xda7a), L9_CORPUS_TOKENS);
    for (int i = 0; i < st->ncases; i++) {
        struct gr_train_setup *t = &st->train[i];
        t->cfg = l9_config(pl_mix64(seed ^ 0x4d4d));
        t->opt = pl_adamw_config_default();
        if (st->cases[i].uneven) l9_make_uneven(t, &st->cases[i]);
        /* the head is vocabulary-parallel (fourd.h): V/t rows a TP rank, on every grid */
        PL_ASSERT(t->cfg.vocab % st->cases[i].tp == 0);
        t->data = &st->data;
        t->global_B = case_batch(&st->cases[i]);
        t->steps = L9_K_STEPS;
        t->data_seed = pl_mix64(seed ^ (0x5eed + (uint64_t)i));
        /* unclipped first (the training's own check), then a clip that binds on every
         * step of the same data */
        t->opt.grad_clip = 0.0f;
        st->free_opt[i] = t->opt;
        gr_reference_run(&st->free[i], t);
        if (st->capped) continue; /* the capped run does not clip */
        double least = INFINITY;
        for (int s = 0; s < L9_K_STEPS; s++) {
            double n = grad_norm(&st->free[i], s);
            if (n < least) least = n;
        }
        t->opt.grad_clip = (float)(L9_CLIP_FRACTION * least);
        gr_reference_run(&st->ref[i], t);
        for (int s = 0; s < L9_K_STEPS; s++) st->ref_norm[i][s] = grad_norm(&st->ref[i], s);
    }
    if (st->capped) {
        struct l9_cap c;
        l9_cap_device(st, 0, &c);
        st->cap_rc = cap_force >= 0 ? cap_force : c.pick;
    }
    return st;
}

void l9_finish(struct l9_state *st)
{
    for (int i = 0; i < st->ncases; i++) {
        gr_reference_free(&st->free[i]);
        if (!st->capped) gr_reference_free(&st->ref[i]);
    }
    pl_tokens_free(&st->data);
    free(st);
}

void l9_describe(const struct l9_state *st, int i, char *buf, size_t len)
{
    const struct l9_case *k = &st->cases[i];
    const struct gr_train_setup *t = &st->train[i];
    char model[96] = "";
    if (k->uneven)
        snprintf(model, sizeof model, ", vocabulary %d and weight decay %.3g (runs dp does not "
                 "divide)", t->cfg.vocab, (double)t->opt.weight_decay);
    if (st->capped) {
        struct l9_cap c;
        l9_cap_device(st, i, &c);
        snprintf(buf, len, "dp=%d tp=%d pp=%d (%s), %d microbatches of %d sequences per "
                 "replica, %d steps without clipping, recompute %s, under a device of %.1f kB "
                 "a rank", k->dp, k->tp, k->pp, L9_ORDER, L9_MICRO, L9_MB_SEQS, L9_K_STEPS,
                 pl_recompute_name((enum pl_recompute)st->cap_rc), c.device / 1e3);
        return;
    }
    snprintf(buf, len, "dp=%d tp=%d pp=%d (%s)%s, %d microbatches of %d sequences per replica, "
             "%d steps without clipping, then with a clip at %.3g", k->dp, k->tp, k->pp,
             L9_ORDER, model, L9_MICRO, L9_MB_SEQS, L9_K_STEPS, (double)t->opt.grad_clip);
}
