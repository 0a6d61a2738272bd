/* vocab.c: Lab 9's "vocab" test (fourd.h's "vocab"), the verdict on rank 0 from every
 * rank's observation (vocab_obs.c), no MPI. On the last stage of the 8-rank grids with
 * t > 1, each head run of a microbatch of n tokens (the final layernorm, the LM head, the
 * cross-entropy and their backward) on TP rank r of t:
 *   work        a t-th of one device's head on the n tokens (pl_part_flops, the kit's
 *               count), within L9_VOCAB_WORK_TOL either way: the logits of V/t columns,
 *               not of the whole vocabulary t times over;
 *   memory      at most the logits of its slice and their gradient, 2 n V/t floats, with
 *               the n x C buffers the head's input and its gradient need (4 n C) and a few
 *               floats per token (8 n), x 4 bytes, plus 2 kB: not the whole [n, V] logits.
 *               No lower bound: a rank that computes its slice in pieces of tokens holds
 *               less, and is right;
 *   collectives on tp_comm, the floats covered (all-reduce: count; all-gather and
 *               reduce-scatter: t x the chunk): the SP conjugates at the head's edges (its
 *               input gathered, its input's gradient reduce-scattered: n C each), plus the
 *               cross-entropy's per-token statistics: at least (t + 1) n (the rows' maxima
 *               of every rank gathered, lib has no max reduction, and the sums of
 *               exponentials summed), at most 3 t n + 16 (three numbers per token from each
 *               rank): O(n) floats, never the logits (n V);
 * and after the run rep's head the same on every TP rank of the stage (fourd.h's
 * invariant: the slices' gradients made whole before AdamW), and the first step's loss of
 * the model with the LM head scaled so that the logits reach the hundreds as one device's
 * (a sum of exponentials without its maximum subtracted overflows). The judge test links
 * this file too. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lab09.h"
#include "pipe_parts.h"

void l9_vocab_bounds(const struct pl_model_config *c, int t, int n, double *mem_hi,
                     double *lo, double *hi)
{
    const double V = c->vocab, C = c->d_model, N = n;
    *mem_hi = 4.0 * (2.0 * N * V / t + 4.0 * N * C + 8.0 * N) + 2048.0;
    *lo = 2.0 * N * C + (t + 1.0) * N;
    *hi = 2.0 * N * C + 3.0 * t * N + 16.0;
}

static const struct l9_obs *rank_obs(const struct gr_obs *all, int r)
{
    return gr_obs_rank(all, r);
}

/* One rank's head runs against the three bounds; 0 (with the reasons) when one breaks. */
static int judge_rank(const struct l9_state *st, int i, int r, const struct l9_obs *o,
                      double whole, struct gr_why *why)
{
    const struct l9_case *k = &st->cases[i];
    const struct pl_model_config *c = &st->train[i].cfg;
    const int t = k->tp, n = L9_MB_SEQS * c->seq_len, runs = L9_K_STEPS * L9_MICRO;
    const double V = c->vocab, C = c->d_model;
    char who[96];
    snprintf(who, sizeof who, "rank %d (dp %d, tp %d, the last stage %d)", r, o->coord[0],
             o->coord[1], o->coord[2]);
    if (o->vocab_runs != runs) {
        gr_why_say(why, "%s: %d head runs seen in %d steps of %d microbatches, %d expected: a "
                   "head run is what the stage does between the return of the model's last "
                   "block's forward (pl_sp_block_forward, plain or _saved) and the start of "
                   "its backward, once a microbatch", who, o->vocab_runs, L9_K_STEPS,
                   L9_MICRO, runs);
        return 0;
    }
    double mem_hi, lo, hi;
    l9_vocab_bounds(c, t, n, &mem_hi, &lo, &hi);
    const double work = o->vocab_flops / runs, want = whole / t, floats = o->vocab_tp_floats / runs;
    const int work_bad = fabs(work / want - 1) > L9_VOCAB_WORK_TOL;
    const int mem_bad = o->vocab_peak > mem_hi, coll_bad = floats < lo || floats > hi;
    if (!work_bad && !mem_bad && !coll_bad) return 1;
    if (work_bad)
        gr_why_say(why, "%s: a head run (final layernorm, LM head, cross-entropy, forward and "
                   "backward, n = %d tokens) did %.4g FLOPs, %.2f times one device's whole "
                   "head on them (%.4g); with the vocabulary split over t = %d TP ranks each "
                   "does a t-th, %.4g (within %.0f%%): %s", who, n, work, work / whole, whole,
                   t, want, 100 * L9_VOCAB_WORK_TOL,
                   work < want ? "part of the head's work is missing on this rank"
                   : work > 0.9 * whole
                       ? "every TP rank computed the logits of the whole vocabulary (rows "
                         "[r V/t, (r+1) V/t) of the LM head are this rank's)"
                       : "more than its slice's: part of it computed twice (the slice's "
                         "product rerun in the backward, which the head does not do: it keeps "
                         "its slice's logits from the forward), or rows past the slice");
    if (mem_bad)
        gr_why_say(why, "%s: a head run held up to %.0f bytes above what the stage held "
                   "when it began (memory ledger, every category); its vocabulary slice's "
                   "logits and their gradient, 2 n V/t = %.0f floats, with the n x C buffers "
                   "of the head's input and its gradient (4 n C = %.0f) and 8 n, take at most "
                   "%.0f bytes (2 kB of slack): the whole vocabulary's logits (n V = %.0f "
                   "floats, %.0f bytes) were held on a rank that needs a t-th of them", who,
                   o->vocab_peak, 2.0 * n * V / t, 4.0 * n * C, mem_hi, n * V, 4.0 * n * V);
    if (coll_bad)
        gr_why_say(why, "%s: a head run's collectives on tp_comm covered %.0f floats; the "
                   "head's input gathered and its gradient reduce-scattered (n C = %.0f each) "
                   "and the cross-entropy's statistics per token, at least (t + 1) n = %.0f "
                   "(each rank's row maxima gathered, the sums of exponentials summed) and at "
                   "most 3 t n = %.0f (three numbers per token from each rank), make "
                   "[%.0f, %.0f]: %s", who, floats, n * C, (t + 1.0) * n, 3.0 * t * n, lo, hi,
                   floats > hi ? "more crossed than per-token numbers: the logits themselves "
                                 "(n V/t a rank) travel where their maxima and sums would do"
                               : "fewer: the slices' statistics did not cross the TP group "
                                 "as the cross-entropy needs (each row's maximum over every "
                                 "rank's slice, then its sum of exponentials over the whole "
                                 "vocabulary)");
    return 0;
}

/* The rank of r's TP group at tp 0 whose head differs from r's, or -1. */
static int head_apart(const struct gr_obs *all, int r)
{
    const struct l9_obs *o = rank_obs(all, r);
    if (!o->has_vocab || o->coord[1] == 0) return -1;
    for (int q = 0; q < all->nranks; q++) {
        const struct l9_obs *z = rank_obs(all, q);
        if (z->has_vocab && z->coord[1] == 0 && z->coord[0] == o->coord[0] &&
            z->vocab_digest != o->vocab_digest)
            return q;
    }
    return -1;
}

void l9_vocab_hint(const struct gr_obs *all, struct gr_why *why)
{
    for (int r = 0; r < all->nranks; r++) {
        const int q = head_apart(all, r);
        if (q < 0) continue;
        const struct l9_obs *o = rank_obs(all, r);
        gr_why_say(why, "after %d steps rank %d (dp %d, tp %d, the last stage) and rank %d "
                   "(tp 0 of the same TP group) hold different heads (rep's final layernorm "
                   "and LM head): each TP rank computes the gradient of its own vocabulary "
                   "rows alone, and fourd.h's invariant wants rep whole and equal on every TP "
                   "rank: the slices' gradients are made whole on every TP rank (and lnf's "
                   "shares summed) before AdamW steps rep", L9_K_STEPS, r, o->coord[0],
                   o->coord[1], q);
        return;
    }
}

int l9_judge_vocab(const struct l9_state *st, int i, const struct gr_obs *all,
                   struct gr_why *why)
{
    const struct l9_case *k = &st->cases[i];
    const struct pl_model_config *c = &st->train[i].cfg;
    if (st->np != 8 || st->hidden || k->tp == 1) return 1; /* t = 1: the head is whole */
    const double whole = pl_part_flops(c, c->n_layers, L9_MB_SEQS, c->seq_len);
    int ok = 1, seen = 0;
    for (int r = 0; r < all->nranks && ok; r++) {
        const struct l9_obs *o = rank_obs(all, r);
        if (!o->has_vocab) continue;
        seen++;
        ok = judge_rank(st, i, r, o, whole, why);
    }
    if (ok && seen != k->dp * k->tp) {
        gr_why_say(why, "%d ranks reported the head, where the last stage of (%d,%d,%d) has "
                   "dp x t = %d", seen, k->dp, k->tp, k->pp, k->dp * k->tp);
        ok = 0;
    }
    /* rep's head equal on every TP rank of the last stage */
    for (int r = 0; r < all->nranks && ok; r++)
        if (head_apart(all, r) >= 0) l9_vocab_hint(all, why), ok = 0;
    /* logits in the hundreds: the loss as one device's */
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = rank_obs(all, r);
        const double err = gr_rel_err(o->vocab_big_loss, o->vocab_big_ref);
        if (isfinite(o->vocab_big_loss) && err <= GR_TOL_LOSS) continue;
        gr_why_say(why, "with the LM head scaled so that the largest logit of one device's "
                   "first forward is %.0f, rank %d's fourd_step returned loss %.7g, one "
                   "device %.7g (relative error %.2g, at most %g)%s", L9_BIG_LOGIT, r,
                   o->vocab_big_loss, o->vocab_big_ref, err, GR_TOL_LOSS,
                   isfinite(o->vocab_big_loss)
                       ? ""
                       : ": exp of a logit above 88 overflows a float, so each row's "
                         "logits are shifted by their maximum over the whole vocabulary "
                         "(every slice's) before the exponentials are summed");
        ok = 0;
        break;
    }
    return ok;
}
