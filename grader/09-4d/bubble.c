/* bubble.c: Lab 9's bubble test, pure (no MPI): each pipeline's order of work, read from the
 * calls of every stage's first block in the first step (cases.c), replayed with uniform
 * stage times, against 1F1B's bubble (p-1)/(m+p-1). A forward takes 1 and a backward 2 on
 * every stage, so the bubble depends on the order alone, as Lab 6 grades it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lab09.h"
#include "plan_rules.h"

#define NOPS (2 * L9_MICRO)

double l9_bubble(int p, int m, const int kind[][2 * L9_MICRO], const int mb[][2 * L9_MICRO],
                 int *stuck)
{
    double end_f[L9_MAX_RANKS][L9_MICRO], end_b[L9_MAX_RANKS][L9_MICRO], free_at[L9_MAX_RANKS];
    int next[L9_MAX_RANKS];
    for (int s = 0; s < p; s++) {
        next[s] = 0, free_at[s] = 0;
        for (int k = 0; k < m; k++) end_f[s][k] = end_b[s][k] = -1;
    }
    int left = p * 2 * m;
    while (left > 0) {
        int moved = 0;
        for (int s = 0; s < p; s++) {
            while (next[s] < 2 * m) {
                const int k = mb[s][next[s]], f = kind[s][next[s]] == 'F';
                double ready = f ? (s > 0 ? end_f[s - 1][k] : 0)
                                 : (s < p - 1 ? end_b[s + 1][k] : end_f[s][k]);
                if (ready < 0 || (!f && end_f[s][k] < 0)) break;
                double start = fmax(ready, free_at[s]);
                free_at[s] = start + (f ? 1 : 2);
                (f ? end_f : end_b)[s][k] = free_at[s];
                next[s]++, left--, moved = 1;
            }
        }
        if (!moved) {
            for (int s = 0; s < p; s++)
                if (next[s] < 2 * m) *stuck = s;
            return -1;
        }
    }
    double span = 0;
    for (int s = 0; s < p; s++) span = fmax(span, free_at[s]);
    return 1.0 - 3.0 * m / span;
}

/* "F0 F1 B0 F2 B1 ..." of one stage. */
static const char *order_text(const int *kind, const int *mb, int n, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (int j = 0; j < n && at < len; j++) {
        int w = snprintf(buf + at, len - at, "%s%c%d", j ? " " : "", kind[j], mb[j]);
        if (w < 0) break;
        at += (size_t)w;
    }
    return buf;
}

/* The rank at coordinates (dp d, tp t, stage s), or -1. */
static int rank_at(const struct gr_obs *all, int d, int t, int s)
{
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = gr_obs_rank(all, r);
        if (o->coord[0] == d && o->coord[1] == t && o->coord[2] == s) return r;
    }
    return -1;
}

/* Stage s's order on rank r into kind/mb: each call's microbatch from its ctx's seq0 (the
 * replica's first sequence + j B/(dp m)), or, without a ctx, by count (the j-th forward is
 * microbatch j, and so the backwards). Returns 0, or -1 with the reason said. */
static int stage_order(const struct l9_obs *o, int r, int *kind, int *mb, struct gr_why *why)
{
    const int m = L9_MICRO, Bm = L9_MB_SEQS;
    int nf = 0, nb = 0;
    for (int j = 0; j < o->nops && j < L9_MAX_OPS; j++) {
        if (o->ops[j].kind == 'F') nf++;
        else nb++;
    }
    if (o->nops != 2 * m || nf != m || nb != m) {
        gr_why_say(why, "rank %d (dp %d, tp %d, stage %d) ran its first block forward %d and "
                   "backward %d times in the first step; each of the m = %d microbatches "
                   "goes forward and backward once", r, o->coord[0], o->coord[1], o->coord[2],
                   nf, o->nops - nf, m);
        return -1;
    }
    const long long first = (long long)o->coord[0] * m * Bm;
    int count[2] = {0, 0};
    for (int j = 0; j < NOPS; j++) {
        const struct l9_op *op = &o->ops[j];
        const int f = op->kind == 'F';
        long long k = op->seq0 >= first ? (op->seq0 - first) / Bm : -1;
        if (op->seq0 < 0 || (op->seq0 - first) % Bm != 0 || k < 0 || k >= m) k = count[!f];
        count[!f]++;
        kind[j] = f ? 'F' : 'B', mb[j] = (int)k;
    }
    return 0;
}

/* The rank of the latest stage whose first step's DP sum waited on a collective past its
 * TP group (dp_wait_size, or zero_dp_wait_size for the run with m->zero = 1, above 1):
 * where the wait costs the most; -1 when none did. */
int l9_latest_waiting(const struct gr_obs *all, int zero)
{
    int late = -1;
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = gr_obs_rank(all, r);
        if ((zero ? o->zero_dp_wait_size : o->dp_wait_size) > 1 &&
            (late < 0 || o->coord[2] > ((const struct l9_obs *)gr_obs_rank(all, late))->coord[2]))
            late = r;
    }
    return late;
}

int l9_judge_bubble(const struct l9_state *st, int i, const struct gr_obs *all,
                    struct gr_why *why)
{
    const struct l9_case *k = &st->cases[i];
    const int p = k->pp, m = L9_MICRO;
    const double want = pl_rule_bubble(p, m, 1);
    int kind[L9_MAX_RANKS][NOPS], mb[L9_MAX_RANKS][NOPS];
    char text[160];
    for (int d = 0; d < k->dp; d++)
        for (int t = 0; t < k->tp; t++) {
            int observed = 1;
            for (int s = 0; s < p; s++) {
                int r = rank_at(all, d, t, s);
                const struct l9_obs *o = r >= 0 ? gr_obs_rank(all, r) : NULL;
                if (!o || o->nops == 0) {
                    observed = 0; /* its blocks do not run through sp_block.h's calls */
                    break;
                }
                if (stage_order(o, r, kind[s], mb[s], why) != 0) return 0;
            }
            if (!observed) continue;
            int stuck = -1;
            double got = l9_bubble(p, m, (const int(*)[NOPS])kind, (const int(*)[NOPS])mb,
                                   &stuck);
            if (got >= 0 && fabs(got - want) < 1e-9) continue;
            if (got < 0)
                gr_why_say(why, "the pipeline of DP replica %d, TP rank %d: stage %d's order "
                           "of work (its first block's calls in the first step) is %s, which "
                           "waits for a microbatch its neighbour never sends first", d, t, stuck,
                           order_text(kind[stuck], mb[stuck], NOPS, text, sizeof text));
            else
                gr_why_say(why, "the pipeline of DP replica %d, TP rank %d idles %.1f%% of the "
                           "step when every stage's forward takes 1 and backward 2; 1F1B's "
                           "bubble is (p-1)/(m+p-1) = %d/%d = %.1f%%", d, t, 100 * got, p - 1,
                           m + p - 1, 100 * want);
            for (int s = 0; s < p && got >= 0; s++)
                gr_why_say(why, "stage %d's order of work (its first block's calls in the "
                           "first step): %s", s,
                           order_text(kind[s], mb[s], NOPS, text, sizeof text));
            if (got >= 0 && p > 1 && kind[0][0] == 'F' && kind[0][1] == 'B')
                gr_why_say(why, "stage 0 runs microbatch 0's backward before microbatch 1's "
                           "forward: each stage then waits for the whole pipeline's round trip "
                           "of one microbatch. 1F1B's warm-up sends min(p - s - 1, m) forwards "
                           "down before the first backward comes back (section 2)");
            return 0;
        }
    /* each stage's DP sum starts once its own backwards are done: under 1F1B the last stage
     * drains first, so its sum runs while the stages before it still drain */
    const int late = p > 1 && k->dp > 1 ? l9_latest_waiting(all, 0) : -1;
    if (late >= 0) {
        const int r = late;
        const struct l9_obs *o = gr_obs_rank(all, r);
        gr_why_say(why, "rank %d (dp %d, tp %d, stage %d) ran a collective over %d ranks (its "
                   "pipeline's, or more) after its stage's last backward and before its DP "
                   "sum: that collective ends only when stage 0 has drained, so every "
                   "stage's DP sum waits for the whole pipeline, where 1F1B lets stage s "
                   "start its own p - 1 - s backwards before stage 0 is done (the "
                   "cool-down). Start the DP sum first; the loss's sums over the pipeline "
                   "can come after", r, o->coord[0], o->coord[1], o->coord[2],
                   o->dp_wait_size);
        return 0;
    }
    return 1;
}
