/* tests/judge/05-sequence-parallel.c: Lab 5's judges (grader/05-sequence-parallel/judge.c)
 * run alone, without mpirun, on hand-built observations and on those a check run of the
 * solution recorded (driver --record FILE):
 *
 *   05-sequence-parallel               the hand-built cases
 *   05-sequence-parallel FILE PARTS    every case of FILE passes PARTS (comma-separated), and
 *                                      the same observations with one rank's made wrong fail
 *                                      with that rank named
 *
 * Expected figures come from the formulas in code, never pasted. Exit 0 when every check
 * holds; each failed one is printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab05.h"
#include "../testing.h"
#include "judge_test.h"

#define FIRST(w) ((w)->n ? (w)->line[0] : "(nothing said)")

/* Judges part of case i of n on np hand-built observations; the verdict, lines in why. */
static int judge(enum l5_kind kind, int i, int n, const char *part, const struct l5_obs *obs,
                 int np, struct gr_why *why)
{
    struct gr_obs all = {np, sizeof *obs, (const unsigned char *)obs};
    gr_why_init(why);
    return l5_judge(kind, i, n, part, &all, why);
}

/* Whether a block's traffic text says how many collectives a block needs (the question
 * conjugate_collectives_per_block): its own measured counts may be said, never the rule's. */
static int gives_counts(const struct gr_why *w)
{
    static const char *const counts[] = {"2 and 2", "2 + 2", "needs 2", "2 all-gathers",
                                         "2 reduce-scatters (", "4 all-gathers", "8bsh",
                                         "at most 2 all-gathers", "conjugate_collectives"};
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++)
        if (said(w, counts[i])) return 1;
    return 0;
}

/* A ring all-gather or reduce-scatter of nf floats sends (t-1)/t of them per rank. */
static double ring(double nf, int t)
{
    return (double)(t - 1) / t * nf * 4.0;
}

/* np ranks in TP groups of t consecutive ranks, each with the figures of case (B, T). */
static void grid_of(struct l5_obs *obs, int np, int t, int B, int T)
{
    memset(obs, 0, (size_t)np * sizeof *obs);
    for (int w = 0; w < np; w++)
        obs[w].figs = (struct l5_figs){.t = t, .group = w / t, .member = w % t, .B = B, .T = T,
                                       .C = L5_C, .dp = np / t, .world = np};
}

/* The block's passes as the solution makes them on t ranks: 2 + 2 forward, 2 + 2 backward
 * and no re-gather, one all-reduce of the six replicated vectors. */
static void right_passes(struct l5_block_figs *bf, int t, double NC)
{
    bf->measured = 1;
    bf->NC = NC;
    bf->fwd = (struct l5_traffic){.ag = 2, .rs = 2, .ag_bytes = 2 * ring(NC, t),
                                    .rs_bytes = 2 * ring(NC, t)};
    bf->bwd = bf->fwd;
    bf->sync = (struct l5_traffic){.ar = 1, .ar_bytes = 2 * ring(6.0 * L5_C, t)};
    bf->kept_tensor = -1;
}

/* op conjugates: a wrong element in rank-major order, an all-reduce for a reduce-scatter, the
 * passing notes. */
static void conjugates(void)
{
    enum { NP = 2 };
    static struct l5_obs obs[NP];
    struct gr_why why;
    char want[L5_TEXT], a[32], b[32];
    grid_of(obs, NP, NP, 3, 4 * NP);
    for (int w = 0; w < NP; w++) {
        obs[w].has_conj = 1;
        obs[w].figs.C = 5;
        for (int k = 0; k < 4; k++) {
            const int gathers = k == 0 || k == 3;
            const double bytes = ring(3.0 * 4 * NP * 5, NP);
            obs[w].conj[k] = (struct l5_traffic){.ag = gathers, .rs = !gathers,
                                                   .ag_bytes = gathers ? bytes : 0,
                                                   .rs_bytes = gathers ? 0 : bytes};
        }
    }
    obs[1].part[L5_CORRECT] = (struct l5_said){.code = L5_W_CONJ, .v = {3, 7, 3, 5, 1}};
    snprintf(want, sizeof want, "rank 1: sp_scatter_backward: element 7 is %g, expected %g "
             "(the gradient with respect to this rank's partial sum, every token of it): the "
             "rows are in the collective's rank-major order", 3.0, 5.0);
    CHECK(!judge(L5_CONJ, 0, 1, "correct", obs, NP, &why) && said(&why, want),
          "a gather in rank-major order: %s", FIRST(&why));
    obs[1].part[L5_CORRECT].v[4] = 0;
    CHECK(!judge(L5_CONJ, 0, 1, "correct", obs, NP, &why) && !said(&why, "rank-major"),
          "rows not in rank-major order say nothing of it: %s", FIRST(&why));
    obs[1].part[L5_CORRECT].code = L5_W_NONE;
    /* sp_gather_backward all-reduced: 2(t-1)/t of the full buffer */
    const double ar = 2 * ring(3.0 * 4 * NP * 5, NP);
    obs[0].conj[1] = (struct l5_traffic){.ar = 1, .ar_bytes = ar};
    snprintf(want, sizeof want, "rank 0: sp_gather_backward made 1 all-reduce (%s): an "
             "all-reduce leaves the whole sum on every rank", pl_format_bytes(ar, a, sizeof a));
    CHECK(!judge(L5_CONJ, 0, 1, "traffic", obs, NP, &why) && said(&why, want) &&
              !said(&why, "reduce-scatter"),
          "an all-reduce for a reduce-scatter, the collective to use unnamed: %s", FIRST(&why));
    obs[0].conj[1] = obs[1].conj[1];
    /* sp_gather_forward by two all-gathers: the bytes, measured and the rule's, never which
     * collective the conjugate is */
    const double one = ring(3.0 * 4 * NP * 5, NP);
    obs[0].conj[0] = (struct l5_traffic){.ag = 2, .ag_bytes = 2 * one};
    snprintf(want, sizeof want, "rank 0: sp_gather_forward sent %s per rank in 2 all-gathers, 0 "
             "reduce-scatters and 0 other operations where each conjugate is one collective of "
             "the full [B*T, C] on tp, %s per rank", pl_format_bytes(2 * one, a, sizeof a),
             pl_format_bytes(one, b, sizeof b));
    CHECK(!judge(L5_CONJ, 0, 1, "traffic", obs, NP, &why) && said(&why, want) &&
              !said(&why, "needs exactly one"),
          "a gather by two collectives: %s", FIRST(&why));
    obs[0].conj[0] = obs[1].conj[0];
    obs[0].conj[1].rs_bytes *= 2;
    CHECK(!judge(L5_CONJ, 0, 1, "traffic", obs, NP, &why) &&
              said(&why, "rank 0: sp_gather_backward sent"),
          "twice the bytes of one reduce-scatter: %s", FIRST(&why));
    obs[0].conj[1] = obs[1].conj[1];
    snprintf(want, sizeof want, "both conjugates exact forward and backward on every rank (t=%d, "
             "B=3, T=%d, C=5)", NP, 4 * NP);
    CHECK(judge(L5_CONJ, 0, 1, "correct", obs, NP, &why) && why.n == 1 &&
              !strcmp(why.line[0], want),
          "the conjugates' note: %s", FIRST(&why));
    /* the passing note gives the figures, never which collective each function runs (the
     * question of section 3, and whoever reads it may have passed without deriving it) */
    snprintf(want, sizeof want, "per rank and no all-reduce: %s per rank in all (t=%d, B=3, "
             "T=%d, C=5)", pl_format_bytes(4 * one, a, sizeof a), NP, 4 * NP);
    CHECK(judge(L5_CONJ, 0, 1, "traffic", obs, NP, &why) && said(&why, want) &&
              !said(&why, "all-gather") && !said(&why, "reduce-scatter"),
          "their traffic's note: %s", FIRST(&why));
}

/* A block's comparisons: each class of hint worded from its figures. */
static void comparisons(void)
{
    enum { NP = 2 };
    static struct l5_obs obs[NP];
    struct gr_why why;
    char want[L5_TEXT];
    grid_of(obs, NP, NP, 2, 16);
    struct l5_said *f = &obs[1].part[L5_CORRECT];
    *f = (struct l5_said){.code = L5_W_COMPARE};
    snprintf(f->name[0], L5_NAME, "output y, your T/t tokens (B=2, T=16, t=%d)", NP);
    f->cmp = (struct l5_cmp){.fig = {.finite = 1, .at = 9, .got = 1.5, .ref = 0.5, .rel = 0.25,
                                     .tol = L5_TOL_FWD, .max_abs = 1.0},
                             .hint = {.kind = L5_H_BIAS_T, .h = {NP}}};
    snprintf(want, sizeof want, "rank 1: %s: relative L2 error %.2e (tolerance %.0e; max abs "
             "%.2e at element 9: expected %.6g, got %.6g): your rows are the single device's "
             "with b_proj and b_fc2 added t = %d times", f->name[0], 0.25, L5_TOL_FWD, 1.0, 0.5,
             1.5, NP);
    CHECK(!judge(L5_BLOCK, 0, L5_NCASES, "correct", obs, NP, &why) && said(&why, want) &&
              !said(&why, "after the reduce-scatter"),
          "the bias added t times, the cause without the fix: %s", FIRST(&why));
    f->cmp.hint = (struct l5_hint){.kind = L5_H_DROPOUT_ROWS, .h = {0.25, 1, 3, 11, 8, 16}};
    snprintf(want, sizeof want, "dropout is on in this case (p=%.2g, block 1, sequences from 3, "
             "step 11, T=8 where the model's seq_len is 16)", 0.25);
    CHECK(!judge(L5_BLOCK, 0, L5_NCASES, "correct", obs, NP, &why) && said(&why, want) &&
              said(&why, "your masks are not the single device's") && !said(&why, "seq0 + b"),
          "the mask's rows, named without the formula: %s", FIRST(&why));
    f->cmp.hint = (struct l5_hint){.kind = L5_H_GRID, .h = {2, 2}, .order = "dp-tp"};
    CHECK(!judge(L5_BLOCK, 0, L5_NCASES, "correct", obs, NP, &why) &&
              said(&why, "runs on a tp=2 x dp=2 grid (order dp-tp)") &&
              said(&why, "the TP group is not the world"),
          "the grid's hint: %s", FIRST(&why));
    f->cmp.fig.finite = 0;
    f->cmp.fig.got = NAN;
    f->cmp.hint = (struct l5_hint){.kind = L5_H_NONE};
    snprintf(want, sizeof want, "rank 1: %s: element 9 is %g (expected %g)", f->name[0], NAN,
             0.5);
    CHECK(!judge(L5_BLOCK, 0, L5_NCASES, "correct", obs, NP, &why) && why.n == 1 &&
              !strcmp(why.line[0], want),
          "a non-finite element, no hint: %s", FIRST(&why));
    /* replicas: the synchronisation averaged */
    memset(f, 0, sizeof *f);
    f = &obs[0].part[L5_REPLICAS];
    *f = (struct l5_said){.code = L5_W_COMPARE};
    snprintf(f->name[0], L5_NAME, "gradient of h.0.ln1.w (replicated) after the synchronisation");
    f->cmp = (struct l5_cmp){.fig = {.finite = 1, .rel = 0.5, .tol = L5_TOL_BWD},
                             .hint = {.kind = L5_H_AVERAGED}};
    CHECK(!judge(L5_BLOCK, 0, L5_NCASES, "replicas", obs, NP, &why) &&
              said(&why, "rank 0: gradient of h.0.ln1.w") &&
              said(&why, "the partial sums were averaged (PL_AVG)"),
          "averaged replicas: %s", FIRST(&why));
    f->cmp.hint = (struct l5_hint){.kind = L5_H_SUMMED, .h = {NP}};
    snprintf(want, sizeof want, "it is %d (= t) times the single device's", NP);
    CHECK(!judge(L5_BLOCK, 0, L5_NCASES, "replicas", obs, NP, &why) && said(&why, want),
          "summed twice: %s", FIRST(&why));
}

/* The replicated gradients bit for bit over each TP group of a tp=2 x dp=2 grid: the first
 * rank of a group whose member differs is named, the member and element in the reason; a
 * lower rank's own failure comes first. */
static void replicas(void)
{
    enum { NP = 4, T = 2 };
    static struct l5_obs obs[NP];
    struct gr_why why;
    char want[L5_TEXT];
    grid_of(obs, NP, T, 2, 12);
    for (int w = 0; w < NP; w++) {
        struct l5_block_figs *bf = &obs[w].block;
        bf->has_rep = 1;
        bf->nrep = L5_REP;
        for (int i = 0; i < L5_REP; i++) {
            snprintf(bf->rep_name[i], sizeof bf->rep_name[i], "vector%d", i);
            /* each group its own values, the same on its members */
            for (int e = 0; e < L5_C; e++) bf->rep[i][e] = (float)(obs[w].figs.group * 100 + e);
        }
    }
    CHECK(judge(L5_BLOCK, 0, L5_NCASES, "replicas", obs, NP, &why),
          "equal within each group, different across: %s", FIRST(&why));
    obs[3].block.rep[2][5] += 1.0f;
    snprintf(want, sizeof want, "rank 2: the gradient of vector2 (replicated on every rank) "
             "differs between the ranks after sp_sync_replicated_grads: rank 1's element 5 is "
             "not rank 0's");
    CHECK(!judge(L5_BLOCK, 0, L5_NCASES, "replicas", obs, NP, &why) && said(&why, want),
          "group 1's member 1 differs: %s", FIRST(&why));
    obs[1].part[L5_REPLICAS] = (struct l5_said){.code = L5_W_COMPARE,
                                                .cmp.fig = {.finite = 1, .rel = 0.5,
                                                            .tol = L5_TOL_BWD}};
    snprintf(obs[1].part[L5_REPLICAS].name[0], L5_NAME, "gradient of vector0");
    CHECK(!judge(L5_BLOCK, 0, L5_NCASES, "replicas", obs, NP, &why) &&
              said(&why, "rank 1: gradient of vector0: relative L2 error"),
          "rank 1's own failure first: %s", FIRST(&why));
}

/* A block's traffic, memory and work against their rules, and the notes of the last case. */
static void block_rules(void)
{
    enum { NP = 2, B = 2, T = 16 };
    static struct l5_obs obs[NP];
    struct gr_why why;
    char want[L5_TEXT], a[32], b[32], c[32];
    const double NC = (double)B * T * L5_C;
    grid_of(obs, NP, NP, B, T);
    for (int w = 0; w < NP; w++) {
        right_passes(&obs[w].block, NP, NC);
        obs[w].block.held = obs[w].block.want_held = 40e3;
        obs[w].block.lab4_held = 55e3;
        obs[w].block.peak = 80e3;
    }
    CHECK(judge(L5_BLOCK, 0, L5_NCASES, "traffic", obs, NP, &why),
          "the solution's passes: %s", FIRST(&why));
    obs[1].block.fwd.ar = 2;
    obs[1].block.fwd.ar_bytes = 2 * 2 * ring(NC, NP);
    snprintf(want, sizeof want, "rank 1: the forward made 2 all-reduces (%s): sequence "
             "parallelism replaces each of Lab 4's all-reduces",
             pl_format_bytes(obs[1].block.fwd.ar_bytes, a, sizeof a));
    CHECK(!judge(L5_BLOCK, 0, L5_NCASES, "traffic", obs, NP, &why) && said(&why, want),
          "Lab 4's all-reduces: %s", FIRST(&why));
    right_passes(&obs[1].block, NP, NC);
    /* a third all-gather in the forward (the residual stream gathered too): the bytes,
     * measured and Lab 4's, never how many collectives a block makes */
    obs[1].block.fwd.ag = 3;
    obs[1].block.fwd.ag_bytes = 3 * ring(NC, NP);
    snprintf(want, sizeof want, "rank 1: the forward sent %s per rank in 3 all-gathers, 2 "
             "reduce-scatters and 0 other operations where Lab 4's block forward sends %s",
             pl_format_bytes(5 * ring(NC, NP), a, sizeof a),
             pl_format_bytes(4 * ring(NC, NP), b, sizeof b));
    CHECK(!judge(L5_BLOCK, 0, L5_NCASES, "traffic", obs, NP, &why) && said(&why, want) &&
              !gives_counts(&why),
          "a forward gathering once more: %s", FIRST(&why));
    right_passes(&obs[1].block, NP, NC);
    /* the backward without its re-gathers' room: a fifth all-gather and more */
    obs[1].block.bwd.ag = 5;
    obs[1].block.bwd.ag_bytes = 5 * ring(NC, NP);
    snprintf(want, sizeof want, "rank 1: the backward sent %s per rank in 5 all-gathers, 2 "
             "reduce-scatters and 0 other operations where its conjugates send %s, Lab 4's "
             "block backward's bytes, and all-gathers of what the backward needs of the whole "
             "sequence at most %s more", pl_format_bytes(7 * ring(NC, NP), a, sizeof a),
             pl_format_bytes(4 * ring(NC, NP), b, sizeof b),
             pl_format_bytes(2 * ring(NC, NP), c, sizeof c));
    CHECK(!judge(L5_BLOCK, 0, L5_NCASES, "traffic", obs, NP, &why) && said(&why, want) &&
              !gives_counts(&why),
          "a backward gathering too often: %s", FIRST(&why));
    right_passes(&obs[1].block, NP, NC);
    obs[1].block.sync = (struct l5_traffic){.ag = 1, .ag_bytes = (NP - 1) * 6.0 * L5_C * 4};
    snprintf(want, sizeof want, "rank 1: sp_sync_replicated_grads made 1 all-gather, 0 "
             "reduce-scatters and 0 other operations (%s per rank)",
             pl_format_bytes(obs[1].block.sync.ag_bytes, a, sizeof a));
    CHECK(!judge(L5_BLOCK, 0, L5_NCASES, "traffic", obs, NP, &why) && said(&why, want),
          "the sync by all-gather: %s", FIRST(&why));
    right_passes(&obs[1].block, NP, NC);
    /* memory: one whole activation more than the formula, then a row in static storage */
    obs[1].block.held = obs[1].block.want_held + NC * 4;
    snprintf(want, sizeof want, "rank 1: your block held %s between its forward and its "
             "backward where TP+SP keeps %s", pl_format_bytes(obs[1].block.held, a, sizeof a),
             pl_format_bytes(obs[1].block.want_held, b, sizeof b));
    CHECK(!judge(L5_BLOCK, 0, L5_NCASES, "memory", obs, NP, &why) && said(&why, want) &&
              said(&why, "is 1.00 full [B*T, C] activations"),
          "a whole activation kept: %s", FIRST(&why));
    obs[1].block.held = obs[1].block.want_held;
    obs[1].block.kept_tensor = 1, obs[1].block.kept_member = 0, obs[1].block.kept_row = 3;
    CHECK(!judge(L5_BLOCK, 0, L5_NCASES, "memory", obs, NP, &why) &&
              said(&why, "rank 1: after your forward returned, static storage held the "
                         "attention half's layernorm output, token row 3 of rank 0's"),
          "another rank's row kept: %s", FIRST(&why));
    obs[1].block.kept_tensor = -1;
    obs[1].block.left = 4096;
    CHECK(!judge(L5_BLOCK, 0, L5_NCASES, "memory", obs, NP, &why) &&
              said(&why, "rank 1: your block still held") &&
              said(&why, "scratch never freed"),
          "scratch left: %s", FIRST(&why));
    obs[1].block.left = 0;
    /* work outside the core: the group's sum against the single device's less one core */
    const double oracle = 1e6, core = 2e5, single = oracle - 2 * core;
    for (int w = 0; w < NP; w++) {
        obs[w].block.oracle_flops = oracle;
        obs[w].block.core_once = core;
        obs[w].block.activation_floats = NC;
        obs[w].block.work = single / NP;
    }
    CHECK(judge(L5_BLOCK, 1, L5_NCASES, "time", obs, NP, &why),
          "the single device's work split: %s", FIRST(&why));
    obs[0].block.work = single; /* the group's sum 1.5x */
    snprintf(want, sizeof want, "rank 0: outside the TP region (the kit's core) your block's %d "
             "ranks did %.4g FLOPs in all, %.2fx the single device's %.4g", NP, 1.5 * single,
             1.5, single);
    CHECK(!judge(L5_BLOCK, 1, L5_NCASES, "time", obs, NP, &why) && said(&why, want) &&
              said(&why, "work done more than once"),
          "work done twice: %s", FIRST(&why));
    obs[0].block.work = single / NP;
    /* time on case 0: rank 0's replayed figures */
    obs[0].has_time = 1;
    obs[0].time = (struct gr_bt_figures){.traced = 1, .t = NP, .step = 1.0, .compute = 0.5,
                                         .bound = 1.0, .split = 0.4};
    obs[0].time.ratio = (GR_BT_FULL + GR_BT_NONE) / 2;
    CHECK(judge(L5_BLOCK, 0, L5_NCASES, "time", obs, NP, &why) &&
              fabs(why.fraction - 0.5) < 1e-9,
          "halfway between the bars earns half: %g", why.fraction);
    obs[0].time.ratio = GR_BT_NONE;
    CHECK(!judge(L5_BLOCK, 0, L5_NCASES, "time", obs, NP, &why) &&
              said(&why, "rank 0: your block's modelled step") &&
              said(&why, "the conjugates' all-gathers and reduce-scatters of bsh"),
          "at the no-marks bar: %s", FIRST(&why));
    CHECK(judge(L5_BLOCK, 1, L5_NCASES, "time", obs, NP, &why),
          "decided on case 0 alone: %s", FIRST(&why));
    /* the last case's notes */
    const int last = L5_NCASES - 1;
    snprintf(want, sizeof want, "held %s between forward and backward (B=%d, T=%d, t=%d) = the "
             "TP+SP formula", pl_format_bytes(40e3, a, sizeof a), B, T, NP);
    CHECK(judge(L5_BLOCK, last, L5_NCASES, "memory", obs, NP, &why) &&
              said(&why, want) && said(&why, "Lab 4's TP block keeps"),
          "memory's note: %s", FIRST(&why));
    /* Lab 4's block: 2 all-reduces of [B*T, C] a pass, 2(t-1)/t of each */
    const double lab4 = 2 * 2 * 2.0 * (NP - 1) / NP * NC * 4;
    snprintf(want, sizeof want, "its conjugates sent %s per rank, forward and backward, = Lab "
             "4's block's %s (b=%d, s=%d, h=%d, t=%d)", pl_format_bytes(lab4, a, sizeof a),
             pl_format_bytes(lab4, b, sizeof b), B, T, L5_C, NP);
    CHECK(judge(L5_BLOCK, last, L5_NCASES, "traffic", obs, NP, &why) &&
              said(&why, want) && !said(&why, "re-gather") && !said(&why, "further") &&
              !gives_counts(&why),
          "traffic's note: %s", FIRST(&why));
    /* a backward that re-gathers its stored shards (two all-gathers more): the note gives
     * their bytes as the block's own, without a count */
    for (int w = 0; w < NP; w++) {
        obs[w].block.bwd.ag += 2;
        obs[w].block.bwd.ag_bytes += 2 * ring(NC, NP);
    }
    snprintf(want, sizeof want, "and your backward's further all-gathers %s more",
             pl_format_bytes(2 * ring(NC, NP), a, sizeof a));
    CHECK(judge(L5_BLOCK, last, L5_NCASES, "traffic", obs, NP, &why) && said(&why, want) &&
              !gives_counts(&why),
          "traffic's note with the re-gathers: %s", FIRST(&why));
    for (int w = 0; w < NP; w++) {
        obs[w].block.bwd.ag -= 2;
        obs[w].block.bwd.ag_bytes -= 2 * ring(NC, NP);
    }
    /* the last case a grid whose TP group is smaller (tp=1 x dp=2 on 2 ranks: it moves and
     * saves nothing sequence parallelism changes): the notes say case 0's figures, t=2 */
    struct l5_obs world = obs[0];
    for (int w = 0; w < NP; w++) {
        obs[w].has_noted = 1;
        obs[w].noted_figs = obs[w].figs;
        obs[w].noted = obs[w].block;
        obs[w].figs = (struct l5_figs){.t = 1, .group = w, .member = 0, .B = B, .T = 12,
                                       .C = L5_C, .dp = NP, .world = NP};
        memset(&obs[w].block, 0, sizeof obs[w].block);
        obs[w].block.held = obs[w].block.lab4_held = 83.3e3;
        obs[w].block.kept_tensor = -1;
    }
    snprintf(want, sizeof want, "held %s between forward and backward (B=%d, T=%d, t=%d, the "
             "first case, whose TP group is the world) = the TP+SP formula",
             pl_format_bytes(40e3, a, sizeof a), B, T, NP);
    CHECK(judge(L5_BLOCK, last, L5_NCASES, "memory", obs, NP, &why) && said(&why, want) &&
              said(&why, "Lab 4's TP block keeps ") &&
              said(&why, pl_format_bytes(55e3, c, sizeof c)) && !said(&why, "t=1"),
          "memory's note after a tp=1 grid case: %s", FIRST(&why));
    snprintf(want, sizeof want, "its conjugates sent %s per rank, forward and backward, = Lab "
             "4's block's %s (b=%d, s=%d, h=%d, t=%d, the first case", pl_format_bytes(lab4, a,
             sizeof a), pl_format_bytes(lab4, b, sizeof b), B, T, L5_C, NP);
    CHECK(judge(L5_BLOCK, last, L5_NCASES, "traffic", obs, NP, &why) && said(&why, want) &&
              !said(&why, " 0 B per rank") && !gives_counts(&why),
          "traffic's note after a tp=1 grid case: %s", FIRST(&why));
    CHECK(judge(L5_BLOCK, last, L5_NCASES, "replicas", obs, NP, &why) &&
              said(&why, "(t=2, the first case, whose TP group is the world)"),
          "replicas' note after a tp=1 grid case: %s", FIRST(&why));
    for (int w = 0; w < NP; w++) obs[w] = world, obs[w].figs.member = w;
    CHECK(judge(L5_BLOCK, last, L5_NCASES, "correct", obs, NP, &why) &&
              said(&why, "(the last, B=2 T=16) t=2 on a 2-rank world split into 1 TP group"),
          "correct's note: %s", FIRST(&why));
}

/* op train: a later step's loss, a weight, a replica's gradient on a grid. */
static void training(void)
{
    enum { NP = 4 };
    static struct l5_obs obs[NP];
    struct gr_why why;
    char want[L5_TEXT];
    grid_of(obs, NP, 2, 2, 16);
    struct l5_said *f = &obs[2].part[L5_CORRECT];
    *f = (struct l5_said){.code = L5_W_STEP_LOSS, .v = {2, 5.25, 5.5, 0.05}};
    snprintf(want, sizeof want, "rank 2: the loss of step 2 is %.7g where the single device's is "
             "%.7g (relative error %.2e)", 5.25, 5.5, 0.05);
    CHECK(!judge(L5_TRAIN, 0, 2, "correct", obs, NP, &why) && said(&why, want),
          "a step's loss: %s", FIRST(&why));
    *f = (struct l5_said){.code = L5_W_WEIGHTS, .v = {0.1, 1}};
    snprintf(f->name[0], L5_NAME, "h.1.ln2.b");
    snprintf(want, sizeof want, "rank 2: h.1.ln2.b (your shard) after %d steps: relative L2 "
             "error %.2e (tolerance %.0e): a replicated tensor", L5_TRAIN_STEPS, 0.1,
             GR_TOL_PARAMS);
    CHECK(!judge(L5_TRAIN, 0, 2, "correct", obs, NP, &why) && said(&why, want),
          "a replicated weight: %s", FIRST(&why));
    *f = (struct l5_said){.code = L5_W_REPLICA_SUM, .v = {1, 2, 0.7, 1, 2, 2, 2}};
    snprintf(f->name[0], L5_NAME, "h.0.ln1.w");
    CHECK(!judge(L5_TRAIN, 1, 2, "correct", obs, NP, &why) &&
              said(&why, "rank 2: gradient of h.0.ln1.w (your shard, replicated) at step 2") &&
              said(&why, "it is the sum of all 2 replicas' gradients") &&
              said(&why, "(a tp=2 x dp=2 grid here)") && !said(&why, "must reduce over"),
          "synced over the world, the group not named: %s", FIRST(&why));
    *f = (struct l5_said){.code = L5_W_REPLICA_GRID, .v = {0, 1, 0.7, 0, 1, 2, 2, 1, 1}};
    snprintf(f->name[0], L5_NAME, "h.0.attn.qkv.w");
    snprintf(f->name[1], L5_NAME, "2, 0");
    CHECK(!judge(L5_TRAIN, 1, 2, "correct", obs, NP, &why) &&
              said(&why, "on a tp=2 x dp=2 grid of strided TP groups: your TP group is world "
                         "ranks 2, 0, TP ranks 0 to 1 in that order (not the world's), and "
                         "replica 0 holds its own 1 sequence, and the case whose TP group was "
                         "the whole world matched"),
          "the grid's hint: %s", FIRST(&why));
    memset(f, 0, sizeof *f);
    for (int w = 0; w < NP; w++)
        obs[w].figs.layers = 2, obs[w].figs.strided = 1, obs[w].figs.p = 0.1,
        obs[w].figs.grid_after_world = 1;
    snprintf(want, sizeof want, "%d AdamW steps of a 2-block model with dropout p=%.1f: every "
             "loss and every parameter shard match pl_model_step with the TP group the whole "
             "world and on a tp=2 x dp=2 grid of strided TP groups", L5_TRAIN_STEPS, 0.1);
    CHECK(judge(L5_TRAIN, 1, 2, "correct", obs, NP, &why) && said(&why, want),
          "training's note: %s", FIRST(&why));
}


/* ---- the second part: ring attention (judge_ring.c) ---- */

static int judge_ring(int i, int n, const char *part, const struct l5_obs *obs, int np,
                      struct gr_why *why)
{
    struct gr_obs all = {np, sizeof *obs, (const unsigned char *)obs};
    gr_why_init(why);
    return l5_judge_ring(i, n, part, &all, why);
}

/* cp ranks of a ring case that ran, each rank's chunks `contiguous` or balanced (chunk r and
 * the later chunk that brings the rank's blocks to the mean, 2cp+1), its FLOPs those of its
 * blocks (the blocks of chunk c: c+1 of Tc x Tc), its bytes the solution's. */
static void ring_of(struct l5_obs *obs, int cp, int contiguous)
{
    const int B = 2, T = 8 * cp, C = 32, NH = 4, Tc = T / (2 * cp);
    const double blk = pl_attn_block_flops(Tc, Tc, C, NH, 0) + pl_attn_block_flops(Tc, Tc, C,
                                                                                   NH, 1);
    const double L = 4.0 * B * (T / cp) * C;
    memset(obs, 0, (size_t)cp * sizeof *obs);
    for (int r = 0; r < cp; r++) {
        struct l5_ring_obs *o = &obs[r].ring;
        *o = (struct l5_ring_obs){.cp = cp, .r = r, .B = B, .T = T, .C = C, .NH = NH, .ran = 1};
        o->chunk[0] = contiguous ? 2 * r : r;
        o->chunk[1] = 2 * r + 1;
        for (int c = r + 1; !contiguous && c < 2 * cp; c++)
            if ((r + 1) + (c + 1) == 2 * cp + 1) o->chunk[1] = c;
        o->fwd_flops = B * blk * (o->chunk[0] + 1 + o->chunk[1] + 1) / 2;
        o->bwd_flops = B * blk * (o->chunk[0] + 1 + o->chunk[1] + 1) / 2;
        o->fwd_bytes = l5_ring_fwd_units(cp) * L, o->bwd_bytes = 2 * (2 * cp - 1) * L;
    }
}

static void ring_rules(void)
{
    static struct l5_obs obs[4];
    struct gr_why why;
    ring_of(obs, 4, 0);
    CHECK(judge_ring(1, 2, "balance", obs, 4, &why) && said(&why, "within 0.0% of the mean") &&
              said(&why, "1.67x the mean at cp = 4"),
          "balanced chunks: every rank the same FLOPs, the contiguous split's figure said: %s",
          FIRST(&why));
    ring_of(obs, 4, 1);
    CHECK(!judge_ring(0, 2, "balance", obs, 4, &why) && said(&why, "rank 3 (chunks 6 and 7)") &&
              said(&why, "1.67x the mean of the 4 ranks"),
          "contiguous chunks: the last rank named with (4cp-1)/(2cp+1) of the mean: %s",
          FIRST(&why));
    ring_of(obs, 4, 0);
    for (int r = 0; r < 4; r++) obs[r].ring.fwd_flops *= 2;
    CHECK(!judge_ring(0, 2, "balance", obs, 4, &why) && said(&why, "wholly in its queries' future"),
          "every block computed, masked ones too: more than the mask needs: %s", FIRST(&why));
    ring_of(obs, 4, 0);
    obs[2].ring.part[0] = (struct l5_ring_said){.code = L5_R_GRAD, .v = {5, 20, 3}, .name = "dk"};
    CHECK(!judge_ring(0, 2, "correct", obs, 4, &why) && said(&why, "rank 2: dk") &&
              said(&why, "rank 3's rows of the single device's dk"),
          "dk of another rank's keys is named as such: %s", FIRST(&why));
    obs[2].ring.part[0] = (struct l5_ring_said){.code = L5_R_LAYOUT, .v = {1, 2, 5, 2, 0}};
    CHECK(!judge_ring(0, 2, "correct", obs, 4, &why) &&
              said(&why, "cp_chunks(4, 1) gives chunks 2 and 5: a chunk another rank holds too "
                         "(rank 0's)"),
          "a layout holding a chunk twice names both ranks: %s", FIRST(&why));
    ring_of(obs, 4, 0);
    const double L = 4.0 * 2 * 8 * 32;
    obs[1].ring.part[1] = (struct l5_ring_said){
        .code = L5_R_TRAFFIC, .v = {0, 4 * L, 2, 2, 6 * L, 6 * L, L}};
    CHECK(!judge_ring(0, 2, "traffic", obs, 4, &why) && said(&why, "made 2 collective calls") &&
              said(&why, "cp-1 = 3 times"),
          "a forward that gathers K and V is told what a ring sends: %s", FIRST(&why));
    ring_of(obs, 4, 0);
    obs[3].ring.part[1] = (struct l5_ring_said){.code = L5_R_HOME, .v = {1, 2, L}};
    CHECK(!judge_ring(0, 2, "traffic", obs, 4, &why) &&
              said(&why, "rank 3: the backward sent 2 messages of K or V") &&
              said(&why, "it is the gradients of K and V that go home"),
          "K and V sent back to their owner are named, though the bytes fit: %s", FIRST(&why));
    ring_of(obs, 4, 0);
    obs[2].ring.part[2] = (struct l5_ring_said){.code = L5_R_UNSEEN, .v = {0, GR_UNSEEN_STACK}};
    snprintf(obs[2].ring.unseen, sizeof obs[2].ring.unseen, "pl_ring_shift_start's receive "
             "buffer");
    CHECK(!judge_ring(0, 2, "memory", obs, 4, &why) &&
              said(&why, "rank 2: in cp_attention_forward, pl_ring_shift_start's receive "
                         "buffer lies on the stack") &&
              said(&why, "comes from pl_mem_alloc"),
          "K and V kept on the stack are named, though the peak fits: %s", FIRST(&why));
    double lo, hi;
    l5_ring_bwd_units(4, &lo, &hi);
    CHECK(l5_ring_fwd_units(4) == 6 && lo == 12 && hi == 14,
          "cp = 4: forward 2(cp-1) L, backward 4(cp-1) L to (4cp-2) L");
    ring_of(obs, 4, 0);
    obs[0].ring.traced = 1, obs[0].ring.step = 0.2, obs[0].ring.compute = 0.18;
    obs[0].ring.comm = 0.02, obs[0].ring.exposed = 0.02;
    CHECK(!judge_ring(0, 2, "overlap", obs, 4, &why) && said(&why, "(100%; at most 10%)"),
          "an exchange waited for before the compute is all exposed: %s", FIRST(&why));
    obs[0].ring.exposed = 0.001;
    CHECK(judge_ring(1, 2, "overlap", obs, 4, &why) && said(&why, "0.00 ms exposed") == 0 &&
              said(&why, "run behind 180.0 ms of attention compute: 1.00 ms exposed"),
          "a hidden exchange passes with its figures: %s", FIRST(&why));
    CHECK(!judge_ring(0, 2, "speed", obs, 4, &why) && said(&why, "no part 'speed'"),
          "the ring's unknown part is refused");
}

static void hand_built(void)
{
    static struct l5_obs obs[1];
    struct gr_why why;
    conjugates();
    comparisons();
    replicas();
    block_rules();
    training();
    ring_rules();
    CHECK(!judge(L5_BLOCK, 0, 1, "speed", obs, 1, &why) && said(&why, "no part 'speed'"),
          "an unknown part is refused");
    struct gr_obs small = {1, sizeof obs[0] - 8, (const unsigned char *)obs};
    gr_why_init(&why);
    CHECK(!l5_judge(L5_BLOCK, 0, 1, "correct", &small, &why) && said(&why, "another build"),
          "a record of another build is refused: %s", FIRST(&why));
}

/* The op of a record as the judge's kind. */
static enum l5_kind kind_of(const char *op)
{
    return !strncmp(op, "block", 5) ? L5_BLOCK : !strncmp(op, "train", 5) ? L5_TRAIN : L5_CONJ;
}

/* Every case of a recorded run passes parts; then the last rank's observation made wrong
 * fails with that rank named. */
static void recorded(const char *path, const char *parts)
{
    FILE *f = judge_record_open(path);
    struct gr_record rec;
    char err[256], want[256];
    int n = 0, got;
    while ((got = gr_record_read(f, &rec, err, sizeof err)) == 1) {
        const enum l5_kind kind = kind_of(rec.op);
        struct gr_why why;
        char list[128];
        snprintf(list, sizeof list, "%s", parts);
        for (char *p = strtok(list, ","); p; p = strtok(NULL, ",")) {
            gr_why_init(&why);
            int v = l5_judge(kind, rec.icase, rec.ncases, p, &rec.obs, &why);
            CHECK(v && why.fraction == 1, "%s case %d part %s of the solution: %s", rec.op,
                  rec.icase, p, FIRST(&why));
        }
        const int r = rec.obs.nranks - 1;
        struct l5_obs *mine = malloc(rec.obs.size * (size_t)rec.obs.nranks);
        memcpy(mine, rec.obs.data, rec.obs.size * (size_t)rec.obs.nranks);
        struct l5_obs *last = &mine[r];
        struct gr_obs bad = {rec.obs.nranks, rec.obs.size, (const unsigned char *)mine};
        /* its traffic: one all-reduce in the forward, or in a conjugate */
        if ((last->block.measured || last->has_conj) && last->figs.t > 1) {
            if (last->has_conj) last->conj[0].ar = 1;
            else last->block.fwd.ar = 1;
            snprintf(want, sizeof want, "rank %d: %s made 1 all-reduce", r,
                     last->has_conj ? "sp_gather_forward" : "the forward");
            gr_why_init(&why);
            CHECK(!l5_judge(kind, rec.icase, rec.ncases, "traffic", &bad, &why) &&
                      said(&why, want),
                  "%s case %d, an all-reduce: %s", rec.op, rec.icase, FIRST(&why));
            last->conj[0].ar = 0, last->block.fwd.ar = 0;
        }
        /* its replicated gradients one bit off its group's rank 0 */
        if (last->block.has_rep && last->figs.member > 0) {
            unsigned char *bits = (unsigned char *)&last->block.rep[0][0];
            bits[0] ^= 1;
            gr_why_init(&why);
            CHECK(!l5_judge(kind, rec.icase, rec.ncases, "replicas", &bad, &why) &&
                      said(&why, "differs between the ranks after sp_sync_replicated_grads"),
                  "%s case %d, replicas apart: %s", rec.op, rec.icase, FIRST(&why));
            bits[0] ^= 1;
        }
        /* its output recorded wrong */
        struct l5_said *s = &last->part[L5_CORRECT];
        s->code = L5_W_COMPARE;
        snprintf(s->name[0], L5_NAME, "output");
        s->cmp = (struct l5_cmp){.fig = {.finite = 1, .rel = 0.5, .tol = L5_TOL_FWD}};
        gr_why_init(&why);
        snprintf(want, sizeof want, "rank %d: output: relative L2 error %.2e (tolerance %.0e", r,
                 0.5, L5_TOL_FWD);
        CHECK(!l5_judge(kind, rec.icase, rec.ncases, "correct", &bad, &why) && said(&why, want),
              "%s case %d, a rank wrong: %s", rec.op, rec.icase, FIRST(&why));
        free(mine);
        gr_record_free(&rec);
        n++;
    }
    judge_record_close(f, path, got, err, n);
}

int main(int argc, char **argv)
{
    return judge_test_main(argc, argv, hand_built, recorded);
}
