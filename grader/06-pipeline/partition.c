/* partition.c: Lab 6's partition, judged and quoted (partition.h). */
#include "partition.h"

#include <stdio.h>
#include <string.h>

#include "data.h"
#include "pipe_parts.h"
#include "schedule.h"

#define PART_MAX 64 /* parts of a model, and stages of a cut */

/* The partition of other models than the lab's, on other stage counts and microbatch
 * shapes: a cut that is best only for the graded model (a table of its answers, or a rule
 * that happens to fit it) fails here. Each is compared, like the lab's, with the best
 * contiguous cut by the kit's FLOPs for the B x T it was given. Attention's cost grows as
 * T^2 and the rest as T, so T moves the best cut (B scales every part alike and cannot):
 * the last two cut differently from the model's own seq_len and from the lab's T = 16, so
 * a cost model that counts 1 x seq_len, or the lab's shape, instead of the B x T given
 * fails one of them. */
static const struct {
    int layers, d_model, d_ff, heads, vocab, seq_len, stages, B, T;
} OTHER_CUTS[] = {
    {10, 32, 64, 2, PL_BYTE_VOCAB, 16, 5, 1, 16}, /* more blocks, more stages */
    {6, 32, 64, 2, 4096, 16, 3, 2, 8},            /* a head heavier than two blocks */
    {13, 64, 256, 4, PL_BYTE_VOCAB, 16, 4, 1, 16},
    {3, 32, 64, 2, 2048, 16, 5, 1, 16},           /* one part a stage */
    {20, 32, 64, 2, 8192, 16, 7, 3, 4},
    {6, 32, 64, 2, 1024, 128, 3, 3, 16},          /* T below seq_len: not cut as 1 x 128 */
    {6, 32, 64, 2, 1024, 128, 2, 2, 128},         /* T long: not cut as at T = 16 */
};
#define N_OTHER_CUTS ((int)(sizeof OTHER_CUTS / sizeof OTHER_CUTS[0]))
_Static_assert(N_OTHER_CUTS == L6_PART_OTHERS, "partition.h counts the other models");
#define QUOTED_OTHER 5 /* the other model handout section 2 quotes */

struct pl_model_config l6_part_other(const struct pl_model_config *lab, int i, int *p, int *B,
                                     int *T)
{
    struct pl_model_config c = *lab;
    if (p) *p = OTHER_CUTS[i].stages, *B = OTHER_CUTS[i].B, *T = OTHER_CUTS[i].T;
    c.n_layers = OTHER_CUTS[i].layers;
    c.d_model = OTHER_CUTS[i].d_model;
    c.d_ff = OTHER_CUTS[i].d_ff;
    c.n_heads = OTHER_CUTS[i].heads;
    c.vocab = OTHER_CUTS[i].vocab;
    c.seq_len = OTHER_CUTS[i].seq_len;
    return c;
}

/* cost[k]: part k - 1's FLOPs (k = 0 the embedding, n - 1 the head). */
static int l6_part_costs(const struct pl_model_config *c, int B, int T, double *cost)
{
    int n = c->n_layers + 2;
    for (int k = 0; k < n; k++) cost[k] = pl_part_flops(c, k - 1, B, T);
    return n;
}

/* Each stage's FLOPs of the cut whose stage s starts at cost index start[s]; returns the
 * largest and its stage. */
static double stage_flops(const double *cost, int n, const int *start, int p, double *stage,
                          int *largest)
{
    double worst = -1;
    for (int s = 0; s < p; s++) {
        int end = s + 1 < p ? start[s + 1] : n;
        stage[s] = 0;
        for (int k = start[s]; k < end; k++) stage[s] += cost[k];
        if (stage[s] > worst) worst = stage[s], *largest = s;
    }
    return worst;
}

/* 1234567 as "1,234,567". */
static const char *flops_text(double x, char *buf, size_t len)
{
    char digits[32];
    snprintf(digits, sizeof digits, "%.0f", x);
    size_t nd = strlen(digits), o = 0;
    for (size_t i = 0; i < nd && o + 2 < len; i++) {
        if (i > 0 && (nd - i) % 3 == 0 && digits[i - 1] != '-') buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = 0;
    return buf;
}

/* "1,536 FLOPs more than the best cut's largest stage, 1,888,256 (+0.081%)", and what the
 * difference is when it is exactly one part's cost. */
static void say_excess(struct gr_why *why, const char *shape, int ws, int first, int last,
                       double worst, double best, const double *cost, int n, const char *unit)
{
    char w[40], b[40], d[40], pct[32];
    double diff = worst - best, share = 100 * diff / best;
    if (share >= 10)
        snprintf(pct, sizeof pct, "%.0f", share);
    else
        snprintf(pct, sizeof pct, "%.2g", share);
    gr_why_say(why, "%s: your largest stage, %d (parts %d..%d), computes %s FLOPs%s, %s more "
               "than the best contiguous cut's largest stage, %s (+%s%%). The step runs at the "
               "pace of the slowest stage, so the cut is graded exactly: its largest stage must be "
               "as small as any contiguous cut allows, however small the difference (handout "
               "section 2)", shape, ws, first, last, flops_text(worst, w, sizeof w), unit,
               flops_text(diff, d, sizeof d), flops_text(best, b, sizeof b), pct);
    if (diff == cost[0])
        gr_why_say(why, "the difference is exactly the embedding's cost (%s FLOPs): your "
                   "largest stage holds the embedding beside as much work as the best cut's "
                   "largest stage holds without it", flops_text(cost[0], d, sizeof d));
    else if (diff == cost[n - 1] || diff == cost[1])
        gr_why_say(why, "the difference is exactly %s's cost (%s FLOPs)",
                   diff == cost[1] ? "a block" : "the head", flops_text(diff, d, sizeof d));
}

int l6_part_judge_lab(const int *first, const int *last, int p, const struct pl_model_config *c,
                      struct gr_why *why)
{
    double cost[PART_MAX + 2], stage[PART_MAX];
    int start[PART_MAX], ws = 0;
    int n = l6_part_costs(c, 1, c->seq_len, cost);
    for (int s = 0; s < p; s++) start[s] = first[s] + 1;
    double worst = stage_flops(cost, n, start, p, stage, &ws);
    double best = l6_sched_best_max(cost, n, p, NULL);
    if (worst <= best * (1 + 1e-9)) return 1;
    char shape[40];
    snprintf(shape, sizeof shape, "%d stages", p);
    say_excess(why, shape, ws, first[ws], last[ws], worst, best, cost, n, " per sequence");
    char e[40], h[40], b[40];
    gr_why_say(why, "count every part at its own cost, pl_part_flops(cfg, part, B, T): here "
               "the embedding %s, a block %s, the head %s, and minimise the largest stage "
               "(handout section 2)", flops_text(cost[0], e, sizeof e),
               flops_text(cost[1], b, sizeof b), flops_text(cost[n - 1], h, sizeof h));
    return 0;
}

int l6_part_judge_others(const struct pl_model_config *lab,
                         const int (*cut_first)[L6_PART_OTHER_STAGES],
                         const int (*cut_last)[L6_PART_OTHER_STAGES], struct gr_why *why)
{
    for (int i = 0; i < N_OTHER_CUTS; i++) {
        int p, B, T, start[PART_MAX], ws = 0;
        struct pl_model_config c = l6_part_other(lab, i, &p, &B, &T);
        const int *first = cut_first[i], *last = cut_last[i];
        double cost[PART_MAX + 2], stage[PART_MAX];
        int n = l6_part_costs(&c, B, T, cost);
        char shape[200];
        snprintf(shape, sizeof shape, "pipe_partition of a model of %d blocks (d_model %d, "
                 "d_ff %d, vocab %d, seq_len %d) into %d stages for microbatches of B x T = "
                 "%d x %d", c.n_layers, c.d_model, c.d_ff, c.vocab, c.seq_len, p, B, T);
        int want = PL_PART_EMBED;
        for (int s = 0; s < p; s++) {
            if (first[s] != want || last[s] < first[s] || last[s] > PL_PART_HEAD(&c)) {
                gr_why_say(why, "%s: stage %d holds parts %d..%d, but it must start at part "
                           "%d, hold at least one part, and the last stage end at the head, part "
                           "%d (handout section 2)", shape, s, first[s], last[s], want,
                           PL_PART_HEAD(&c));
                return 0;
            }
            start[s] = first[s] + 1;
            want = last[s] + 1;
        }
        if (want != PL_PART_HEAD(&c) + 1) {
            gr_why_say(why, "%s: the last stage ends at part %d, not at the head, part %d "
                       "(handout section 2)", shape, want - 1, PL_PART_HEAD(&c));
            return 0;
        }
        double worst = stage_flops(cost, n, start, p, stage, &ws);
        double best = l6_sched_best_max(cost, n, p, NULL);
        if (worst <= best * (1 + 1e-9)) continue;
        say_excess(why, shape, ws, first[ws], last[ws], worst, best, cost, n, "");
        if (T != c.seq_len || T != lab->seq_len)
            gr_why_say(why, "the B x T given matters: a block's attention costs T^2, the "
                       "rest T, so the best cut for T = %d is not the best for another T. "
                       "Count each part as pl_part_flops(cfg, part, B, T) with the B and T "
                       "pipe_partition is given, not cfg->seq_len or a shape of your own", T);
        char e[40], b[40], h[40];
        gr_why_say(why, "your cut is the best one for the lab's model but not for this one: "
                   "pipe_partition must find the best cut for any model, stage count and B x T, "
                   "from pl_part_flops of each part (here the embedding %s, a block %s, the "
                   "head %s), for example by dynamic programming over where each stage starts "
                   "(handout section 2)", flops_text(cost[0], e, sizeof e),
                   flops_text(cost[1], b, sizeof b), flops_text(cost[n - 1], h, sizeof h));
        return 0;
    }
    return 1;
}

/* ---- the figures handout section 2 quotes ---- */

/* "E+2B 1,889,792 / 2B 1,888,256 / ...": each stage's parts and FLOPs. */
static void cut_text(const double *stage, const int *start, int p, int n, char *buf,
                     size_t len)
{
    size_t o = 0;
    buf[0] = 0;
    for (int s = 0; s < p && o < len; s++) {
        int end = s + 1 < p ? start[s + 1] : n, blocks = 0;
        for (int k = start[s]; k < end; k++) blocks += k > 0 && k < n - 1;
        char parts[32] = "", f[40];
        size_t q = 0;
        if (start[s] == 0) q += (size_t)snprintf(parts + q, sizeof parts - q, "E");
        if (blocks)
            q += (size_t)snprintf(parts + q, sizeof parts - q, "%s%dB", q ? "+" : "", blocks);
        if (end == n) snprintf(parts + q, sizeof parts - q, "%sH", q ? "+" : "");
        o += (size_t)snprintf(buf + o, len - o, "%s%s %s", s ? " / " : "", parts,
                              flops_text(stage[s], f, sizeof f));
    }
}

/* One table row: the even split and the best cut of a model into p stages. */
static void print_row(const char *name, const struct pl_model_config *c, int p, int B, int T)
{
    double cost[PART_MAX + 2], even[PART_MAX], best[PART_MAX];
    int n = l6_part_costs(c, B, T, cost), L = c->n_layers, s_even[PART_MAX], s_best[PART_MAX];
    int we = 0, wb = 0;
    s_even[0] = 0;
    for (int s = 1; s < p; s++) s_even[s] = 1 + s * L / p;
    l6_sched_best_max(cost, n, p, s_best);
    double worst = stage_flops(cost, n, s_even, p, even, &we);
    double top = stage_flops(cost, n, s_best, p, best, &wb);
    char a[400], b[400], d[40], verdict[80];
    cut_text(even, s_even, p, n, a, sizeof a);
    cut_text(best, s_best, p, n, b, sizeof b);
    if (worst <= top * (1 + 1e-9))
        snprintf(verdict, sizeof verdict, "a best cut");
    else if (worst < 1.01 * top)
        snprintf(verdict, sizeof verdict, "+%s FLOPs (+%.2f%%)", flops_text(worst - top, d,
                 sizeof d), 100 * (worst - top) / top);
    else
        snprintf(verdict, sizeof verdict, "+%s FLOPs (%.2fx)", flops_text(worst - top, d,
                 sizeof d), worst / top);
    printf("# handout: | %s | %d | %s | %s | %s |\n", name, p, a, b, verdict);
}

void l6_part_print_figures(const struct pl_model_config *lab)
{
    double cost[PART_MAX + 2];
    int n = l6_part_costs(lab, 1, lab->seq_len, cost);
    char e[40], b[40], h[40];
    printf("# partition: each stage's FLOPs (forward and backward, pl_part_flops) under the "
           "even split (blocks split evenly, E the embedding on the first stage, H the head on "
           "the last) and under the best contiguous cut\n");
    printf("# handout: a sequence of %d tokens costs %s FLOPs in the embedding, %s in a "
           "block and %s in the head (%.2f of a block)\n", lab->seq_len,
           flops_text(cost[0], e, sizeof e), flops_text(cost[1], b, sizeof b),
           flops_text(cost[n - 1], h, sizeof h), cost[n - 1] / cost[1]);
    char name[120];
    snprintf(name, sizeof name, "the lab's (vocab %d), 1 x %d", lab->vocab, lab->seq_len);
    for (int p = 2; p <= 4; p++) print_row(name, lab, p, 1, lab->seq_len);
    int i = QUOTED_OTHER;
    struct pl_model_config c = l6_part_other(lab, i, NULL, NULL, NULL);
    double oc[PART_MAX + 2];
    int on = l6_part_costs(&c, OTHER_CUTS[i].B, OTHER_CUTS[i].T, oc);
    snprintf(name, sizeof name, "vocab %d, %d x %d", c.vocab, OTHER_CUTS[i].B, OTHER_CUTS[i].T);
    printf("# handout: a head of %.2f blocks (vocab %d, B x T = %d x %d)\n", oc[on - 1] / oc[1],
           c.vocab, OTHER_CUTS[i].B, OTHER_CUTS[i].T);
    print_row(name, &c, OTHER_CUTS[i].stages, OTHER_CUTS[i].B, OTHER_CUTS[i].T);
}
