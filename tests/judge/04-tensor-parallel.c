/* tests/judge/04-tensor-parallel.c: Lab 4's judges (grader/04-tensor-parallel/judge.c) run
 * alone, without mpirun, on hand-built observations and on those a check run of the
 * solution recorded (driver --record FILE):
 *
 *   04-tensor-parallel                 the hand-built cases
 *   04-tensor-parallel FILE PARTS      every case of FILE passes PARTS (comma-separated), and
 *                                      the same observations with one rank's made wrong fail
 *                                      with the reason a student would read
 *
 * Expected figures come from the formulas in code, never pasted. Exit 0 when every check
 * holds; each failed one is printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab04.h"
#include "../testing.h"
#include "judge_test.h"

/* Judges part of case i of n on np hand-built observations; the verdict, lines in why. */
static int judge(int kind, int i, int n, const char *part, const struct l4_obs *obs, int np,
                 struct gr_why *why)
{
    struct gr_obs all = {np, sizeof *obs, (const unsigned char *)obs};
    gr_why_init(why);
    return l4_judge(kind, i, n, part, &all, why);
}

/* One pass of t ranks that made `made` all-reduces of count floats where it needs `need`. */
static void pass_of(struct l4_pass *p, const char *name, long need, long made, double count,
                    int t)
{
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->where, sizeof p->where, "tp.h's traffic rule");
    p->calls = need;
    p->count = count;
    p->t = t;
    p->tr.ar_calls = made;
    /* a ring all-reduce sends 2(t-1)/t of its buffer per rank */
    p->tr.ar_bytes = (double)made * 2.0 * (t - 1) / t * count * 4.0;
}

/* From 4 ranks up training's last case is a TP x DP grid (t = np/2): the notes of a
 * passing part quote the first case, whose TP group is the world (t = np), and name the grid
 * after it, never a "t=2" figure on a 4-rank test. */
static void training_grid_notes(void)
{
    enum { NP = 4, T_GRID = 2 };
    static struct l4_obs obs[NP];
    struct gr_why why;
    char want[1024], a[32], b[32], c[32], d[32], e[32];
    const double states = 1.5e6, act = 0.75e6, held = 6e6;
    memset(obs, 0, sizeof obs);
    /* the grid case's own figures: a TP group of 2, each rank a larger shard */
    obs[0].figs = (struct l4_figs){.t = T_GRID, .loss = 5.5, .share = 0.55, .states = 2 * states,
                                   .act = 2 * act, .act_bound = 4 * act, .total = 2 * held,
                                   .total_bound = 4 * held};
    obs[0].has_world = 1;
    obs[0].world = (struct l4_figs){.t = NP, .loss = 5.123456, .share = 0.2789,
                                    .states = states, .act = act, .act_bound = 2 * act,
                                    .total = held, .total_bound = 2 * held};
    snprintf(want, sizeof want, "per rank on a TP group of %d, the world: %s of parameters (as "
             "many of gradients, twice of AdamW moments), from the shapes; activations %s at "
             "peak within %s; %s in all within %s; live memory the same after every step; the "
             "last case on %d TP groups of %d, each with its own data", NP,
             pl_format_bytes(states, a, sizeof a), pl_format_bytes(act, b, sizeof b),
             pl_format_bytes(2 * act, c, sizeof c), pl_format_bytes(held, d, sizeof d),
             pl_format_bytes(2 * held, e, sizeof e), NP / T_GRID, T_GRID);
    CHECK(judge(L4_TRAIN, 1, 2, "memory", obs, NP, &why) && why.n == 1 &&
              !strcmp(why.line[0], want) && !said(&why, "t=2") && !said(&why, "for t="),
          "training memory's note on 4 ranks quotes the world's group: %s",
          why.n ? why.line[0] : "");
    snprintf(want, sizeof want, "%d AdamW steps of a %d-block GPT on a TP group of %d ranks, "
             "the world: losses and every shard's weights match the single device (last loss "
             "%.5f), with %.3f of its FLOPs per rank; the last case on %d TP groups of %d, each "
             "with its own data", L4_TRAIN_STEPS, L4_TRAIN_LAYERS, NP, 5.123456, 0.2789,
             NP / T_GRID, T_GRID);
    CHECK(judge(L4_TRAIN, 1, 2, "correct", obs, NP, &why) && why.n == 1 &&
              !strcmp(why.line[0], want),
          "training's note on 4 ranks quotes the world's group: %s", why.n ? why.line[0] : "");
    snprintf(want, sizeof want, "f and g forward and backward exact on every rank (t=%d, the TP "
             "group the world; the last case on %d TP groups of %d, each with its own data)", NP,
             NP / T_GRID, T_GRID);
    CHECK(judge(L4_CONJ, 1, 2, "correct", obs, NP, &why) && why.n == 1 &&
              !strcmp(why.line[0], want),
          "f and g's note on 4 ranks quotes the world's group: %s", why.n ? why.line[0] : "");
}

/* Training: the loss of a later step, the traffic past its most, memory outside the ledger,
 * the FLOPs of a whole model; then the notes of passing parts from rank 0's figures. */
static void training(void)
{
    enum { NP = 2 };
    static struct l4_obs obs[NP];
    struct gr_why why;
    char want[1024], a[32], b[32], c[32], d[32], e[32];
    memset(obs, 0, sizeof obs);
    struct l4_said *f = &obs[1].part[L4_CORRECT];
    *f = (struct l4_said){.code = L4_W_STEP_LOSS, .v = {2, 5.25, 5.5, 0.05}};
    snprintf(want, sizeof want, "rank 1: the loss of step 2 is %.7f where the single device's "
             "is %.7f (relative error %.1e, tolerance %.0e): the first steps agree", 5.25, 5.5,
             0.05, GR_TOL_LOSS);
    CHECK(!judge(L4_TRAIN, 0, 1, "correct", obs, NP, &why) && said(&why, want),
          "step 2's loss: %s", why.n ? why.line[0] : "");
    f->v[0] = 1;
    CHECK(!judge(L4_TRAIN, 0, 1, "correct", obs, NP, &why) && !said(&why, "first steps agree"),
          "step 1's loss blames no later step: %s", why.n ? why.line[0] : "");
    const double sent = 3 << 20, most = 1 << 20;
    *f = (struct l4_said){.code = L4_W_SENT_MOST, .v = {sent, 40, 38, most, 33, 2}};
    snprintf(want, sizeof want, "rank 1: your %d steps sent %s per rank in 40 collectives (38 "
             "all-reduces) where a TP step needs at most %s in 33: per step the blocks' 4L "
             "all-reduces of [N, C] (L=2)", L4_TRAIN_STEPS, pl_format_bytes(sent, a, sizeof a),
             pl_format_bytes(most, b, sizeof b));
    CHECK(!judge(L4_TRAIN, 0, 1, "correct", obs, NP, &why) && said(&why, want),
          "traffic past the most: %s", why.n ? why.line[0] : "");
    *f = (struct l4_said){.code = L4_W_FLOPS, .v = {8e9, 8e9, NP}};
    snprintf(want, sizeof want, "rank 1: your steps computed %.3g FLOPs on this rank where the "
             "single device's take %.3g and a TP rank about 1/%d of them (%.3g)", 8e9, 8e9, NP,
             8e9 / NP);
    CHECK(!judge(L4_TRAIN, 0, 1, "correct", obs, NP, &why) && said(&why, want),
          "the whole model's FLOPs: %s", why.n ? why.line[0] : "");
    f = &obs[0].part[L4_MEMORY];
    const double held = 9e6, bound = 5e6, states = 2e6, act = 1e6, work = 2e6, hidden = 4e6;
    *f = (struct l4_said){.code = L4_W_TOTAL_MEM, .v = {held, bound, states, act, work, hidden}};
    snprintf(f->name[0], L4_NAME, "on the stack");
    snprintf(want, sizeof want, "rank 0: your %d steps held %s at peak over all memory "
             "categories (buffers given to collectives outside the ledger included), where a TP "
             "rank needs at most %s: its shard's parameters, gradients and AdamW moments (%s), "
             "the activations above (%s) and one step's work buffers (%s:", L4_TRAIN_STEPS,
             pl_format_bytes(held, a, sizeof a), pl_format_bytes(bound, b, sizeof b),
             pl_format_bytes(states, c, sizeof c), pl_format_bytes(act, d, sizeof d),
             pl_format_bytes(work, e, sizeof e));
    CHECK(!judge(L4_TRAIN, 0, 1, "memory", obs, NP, &why) && said(&why, want) &&
              said(&why, "buffers kept across steps (section 11); on the stack"),
          "memory over every category, some outside the ledger: %s", why.n ? why.line[0] : "");
    *f = (struct l4_said){.code = L4_W_SHARD_MEM, .v = {2, 3e6, 1e6, NP}};
    snprintf(want, sizeof want, "rank 0: AdamW moments held %s at peak where a rank's shard "
             "needs %s: the split tensors' 1/t (t=%d)", pl_format_bytes(3e6, a, sizeof a),
             pl_format_bytes(1e6, b, sizeof b), NP);
    CHECK(!judge(L4_TRAIN, 0, 1, "memory", obs, NP, &why) && said(&why, want),
          "moments past a shard's: %s", why.n ? why.line[0] : "");
    /* passing: the notes say rank 0's figures */
    memset(obs, 0, sizeof obs);
    obs[0].figs = (struct l4_figs){.t = NP, .loss = 5.123456, .share = 0.5123, .states = states,
                                   .act = act, .act_bound = 2 * act, .total = held,
                                   .total_bound = 2 * held};
    snprintf(want, sizeof want, "%d AdamW steps of a %d-block GPT on a TP group of %d ranks, "
             "the world: losses and every shard's weights match the single device (last loss "
             "%.5f), with %.3f of its FLOPs per rank", L4_TRAIN_STEPS, L4_TRAIN_LAYERS, NP,
             5.123456, 0.5123);
    CHECK(judge(L4_TRAIN, 0, 1, "correct", obs, NP, &why) && why.n == 1 &&
              !strcmp(why.line[0], want),
          "training's note: %s", why.n ? why.line[0] : "");
    snprintf(want, sizeof want, "per rank on a TP group of %d, the world: %s of parameters (as "
             "many of gradients, twice of AdamW moments), from the shapes; activations %s at "
             "peak within %s; %s in all within %s", NP, pl_format_bytes(states, a, sizeof a),
             pl_format_bytes(act, b, sizeof b), pl_format_bytes(2 * act, c, sizeof c),
             pl_format_bytes(held, d, sizeof d), pl_format_bytes(2 * held, e, sizeof e));
    CHECK(judge(L4_TRAIN, 0, 1, "memory", obs, NP, &why) && said(&why, want),
          "training memory's note: %s", why.n ? why.line[0] : "");
    training_grid_notes();
}

/* Placement on 8 ranks: a group across nodes, one numbered backwards; order dp-tp's note. */
static void placement(void)
{
    enum { NP = 8 };
    static struct l4_obs obs[NP];
    struct gr_why why;
    char want[1024], a[32], b[32];
    memset(obs, 0, sizeof obs);
    struct l4_said *f = &obs[2].part[L4_PLACEMENT];
    *f = (struct l4_said){.code = L4_W_SPANS, .v = {3000, 6000, 40e-6, 10e-6}};
    snprintf(f->name[0], L4_NAME, "{0,2,4,6}");
    snprintf(want, sizeof want, "rank 2: your TP group {0,2,4,6} spans nodes: %s of its %s "
             "crossed the network. Modelled on dgx-h100 this block takes %.2f us where inside a "
             "node it takes %.2f us (%.1fx)", pl_format_bytes(3000, a, sizeof a),
             pl_format_bytes(6000, b, sizeof b), 40.0, 10.0, 4.0);
    CHECK(!judge(L4_PLACE, 0, 2, "placement", obs, NP, &why) && said(&why, want),
          "a group across nodes: %s", why.n ? why.line[0] : "");
    *f = (struct l4_said){.code = L4_W_GROUP_ORDER, .v = {2}};
    snprintf(f->name[0], L4_NAME, "tp4-dp2");
    snprintf(f->name[1], L4_NAME, "{3,2,1,0}");
    snprintf(f->name[2], L4_NAME, "{0,1,2,3}");
    CHECK(!judge(L4_PLACE, 0, 2, "placement", obs, NP, &why) &&
              said(&why, "rank 2: on grid tp4-dp2 tp_group gave rank 2 the right ranks in the "
                         "wrong order, {3,2,1,0} by group rank where the tp coordinates give "
                         "{0,1,2,3}"),
          "a group numbered backwards: %s", why.n ? why.line[0] : "");
    memset(obs, 0, sizeof obs);
    obs[0].figs = (struct l4_figs){.t = 4, .run = 30e-6, .inside = 10e-6, .inter = 4096};
    snprintf(obs[0].figs.members, sizeof obs[0].figs.members, "{0,2,4,6}");
    snprintf(want, sizeof want, "order dp-tp is a placement violation, found and costed: TP "
             "group {0,2,4,6} crosses nodes, up to %s per rank inter-node; modelled on dgx-h100 "
             "%.2f us per block forward+backward vs %.2f us inside a node (%.1fx slower)",
             pl_format_bytes(4096, a, sizeof a), 30.0, 10.0, 3.0);
    CHECK(judge(L4_PLACE, 1, 2, "order", obs, NP, &why) && said(&why, want),
          "order dp-tp's note: %s", why.n ? why.line[0] : "");
}

static void hand_built(void)
{
    enum { NP = 2 };
    static struct l4_obs obs[NP];
    struct gr_why why;
    const double count = 2.0 * 16 * 64; /* B T C */

    /* traffic: every rank right, then rank 1 one all-reduce over, then one short */
    memset(obs, 0, sizeof obs);
    for (int r = 0; r < NP; r++) {
        obs[r].npass = 1;
        pass_of(&obs[r].pass[0], "forward", 1, 1, count, NP);
    }
    CHECK(judge(L4_MLP, 0, 3, "traffic", obs, NP, &why) && why.n == 0,
          "right traffic on a middle case passes silently (%d lines)", why.n);
    /* the note: case 1 (b=1, s=7) on t = np sends half of a block's 8bsh(t-1)/t x 4 bytes */
    char note[256], sent[32];
    pl_format_bytes(8.0 * 1 * 7 * 64 * (NP - 1) / NP * 4 / 2, sent, sizeof sent);
    snprintf(note, sizeof note, "1 all-reduce forward and 1 backward per pass on the TP group; "
             "the case b=1, s=7, h=64 on t=%d sent %s per rank = 1/2 of 8bsh(t-1)/t", NP, sent);
    CHECK(judge(L4_MLP, 2, 3, "traffic", obs, NP, &why) && said(&why, note),
          "right traffic on the last case says the MLP's figures: %s", why.n ? why.line[0] : "");
    pass_of(&obs[1].pass[0], "forward", 1, 2, count, NP);
    CHECK(!judge(L4_MLP, 0, 3, "traffic", obs, NP, &why) &&
              said(&why, "rank 1: the forward made 2 all-reduces on the TP group where it "
                         "needs 1") && said(&why, "sums what every rank already holds whole") &&
              !said(&why, "identity"),
          "one all-reduce too many is named with rank 1: %s", why.n ? why.line[0] : "");
    pass_of(&obs[1].pass[0], "forward", 1, 0, count, NP);
    CHECK(!judge(L4_MLP, 0, 3, "traffic", obs, NP, &why) &&
              said(&why, "rank 1: the forward made 0 all-reduces") &&
              said(&why, "holding only its own term of a sum") && !said(&why, "g (forward)"),
          "a missing all-reduce: %s", why.n ? why.line[0] : "");
    /* the right count of the wrong size */
    pass_of(&obs[1].pass[0], "forward", 1, 1, count, NP);
    obs[1].pass[0].tr.ar_bytes *= 2;
    CHECK(!judge(L4_MLP, 0, 3, "traffic", obs, NP, &why) &&
              said(&why, "reduce exactly the [N, C] activation"),
          "an all-reduce of twice the activation: %s", why.n ? why.line[0] : "");

    /* f and g's passing note: their bytes in all, never which pass made the all-reduce
     * (section 3's table is the student's to fill, and whoever reads the note may have
     * passed without filling it) */
    memset(obs, 0, sizeof obs);
    static const char *const conj[] = {"f forward", "f backward", "g forward", "g backward"};
    for (int r = 0; r < NP; r++) {
        obs[r].npass = 4;
        obs[r].figs.t = NP;
        for (int k = 0; k < 4; k++)
            pass_of(&obs[r].pass[k], conj[k], k == 1 || k == 2, k == 1 || k == 2, 1000, NP);
    }
    pl_format_bytes(2 * 2.0 * (NP - 1) / NP * 1000 * 4, sent, sizeof sent);
    snprintf(note, sizeof note, "f's and g's four passes sent %s per rank in all on t=%d", sent,
             NP);
    CHECK(judge(L4_CONJ, 2, 3, "traffic", obs, NP, &why) && said(&why, note) &&
              !said(&why, "backward") && !said(&why, "forward"),
          "f and g's traffic note gives bytes, not the table: %s", why.n ? why.line[0] : "");
    /* the linears' note likewise: not which pass reduces */
    for (int r = 0; r < NP; r++)
        for (int k = 0; k < 4; k++)
            pass_of(&obs[r].pass[k], conj[k], k == 1 || k == 2, k == 1 || k == 2, count, NP);
    pl_format_bytes(2 * 2.0 * (NP - 1) / NP * count * 4, sent, sizeof sent);
    snprintf(note, sizeof note, "the two linears' four passes sent %s per rank in all on t=%d",
             sent, NP);
    CHECK(judge(L4_LINEAR, 2, 3, "traffic", obs, NP, &why) && said(&why, note) &&
              !said(&why, "backward") && !said(&why, "forward") && !said(&why, "column"),
          "the linears' traffic note gives bytes, not where: %s", why.n ? why.line[0] : "");
    /* from 4 ranks the last case is a TP x DP grid: the note names its groups, so that t=2
     * on 4 ranks does not read as a wrong t */
    {
        enum { NP4 = 4, T_LAST = 2 };
        static struct l4_obs obs4[NP4];
        memset(obs4, 0, sizeof obs4);
        for (int r = 0; r < NP4; r++) {
            obs4[r].npass = 4;
            obs4[r].figs.t = T_LAST;
            for (int k = 0; k < 4; k++)
                pass_of(&obs4[r].pass[k], conj[k], k == 1 || k == 2, k == 1 || k == 2, count,
                        T_LAST);
        }
        snprintf(note, sizeof note, "per rank in all in the last case (%d TP groups of t=%d on "
                 "the %d ranks)", NP4 / T_LAST, T_LAST, NP4);
        CHECK(judge(L4_LINEAR, 2, 3, "traffic", obs4, NP4, &why) && said(&why, note),
              "the traffic note names the last case's groups: %s", why.n ? why.line[0] : "");
    }

    /* correct: the first rank that recorded a failure, in rank order, worded from figures */
    memset(obs, 0, sizeof obs);
    struct l4_said *f = &obs[1].part[L4_CORRECT];
    f->code = L4_W_COMPARE;
    snprintf(f->name[0], L4_NAME, "TP MLP output y (B=2, T=16, t=2)");
    f->cmp = (struct l4_cmp){.fig = {.finite = 1, .at = 17, .got = 1.5, .ref = 0.5, .rel = 1.0,
                                     .tol = L4_TOL_FWD, .max_abs = 1.0},
                             .hint = {.kind = L4_H_OUT_BIAS}};
    char want[1024];
    snprintf(want, sizeof want, "rank 1: TP MLP output y (B=2, T=16, t=2): relative L2 error "
             "%.2e (tolerance %.0e; max abs %.2e at element 17: expected %.6g, got %.6g): it is "
             "the right sum plus t-1 extra copies of the output bias", 1.0, L4_TOL_FWD, 1.0, 0.5,
             1.5);
    CHECK(!judge(L4_MLP, 0, 3, "correct", obs, NP, &why) && why.n == 1 &&
              !strncmp(why.line[0], want, strlen(want)),
          "rank 1's output, a bias per rank: %s", why.n ? why.line[0] : "");
    /* rank 0 failing too is named first */
    obs[0].part[L4_CORRECT] = *f;
    CHECK(!judge(L4_MLP, 0, 3, "correct", obs, NP, &why) && !strncmp(why.line[0], "rank 0: ", 8),
          "the first failing rank is named: %s", why.n ? why.line[0] : "");
    /* a shard gradient summed t times and handed over non-zero: both hints, joined */
    memset(obs, 0, sizeof obs);
    f = &obs[0].part[L4_CORRECT];
    f->code = L4_W_COMPARE;
    snprintf(f->name[0], L4_NAME, "gradient of your shard of h.0.ln1.w (replicated)");
    f->cmp = (struct l4_cmp){.fig = {.finite = 1, .rel = 1.0, .tol = L4_TOL_BWD},
                             .hint = {.kind = L4_H_SUMMED, .handed = 1, .h = {NP}}};
    snprintf(want, sizeof want, "it is %d (= t) times the single device's: a gradient every "
             "rank already holds whole was summed over the group again (section 7, "
             "question why_ln_grads_equal); "
             "the gradient was handed over non-zero, so what is compared is what your backward "
             "added to it (the contract is +=)", NP);
    CHECK(!judge(L4_BLOCK, 0, 3, "correct", obs, NP, &why) && said(&why, want),
          "summed t times, handed over: %s", why.n ? why.line[0] : "");
    /* an element not finite; the embedding's hint on a group smaller than the world */
    f->cmp = (struct l4_cmp){.fig = {.finite = 0, .at = 3, .got = INFINITY, .ref = 2},
                             .hint = {.kind = L4_H_EMBED, .h = {64, 127, 5, 1}, .world = 1}};
    snprintf(f->name[0], L4_NAME, "embedding output x");
    snprintf(want, sizeof want, "rank 0: embedding output x: element 3 is %g (expected 2): ids "
             "64 and 127 (the first and last of your slice) are yours and no others are; x is "
             "the single device's on every rank, the position embedding (position of token i: "
             "i mod T, T=5 here, not seq_len) held once in it (section 9). Here each TP group "
             "is only some of the ranks", (double)INFINITY);
    CHECK(!judge(L4_VOCAB, 0, 3, "correct", obs, NP, &why) && said(&why, want),
          "a non-finite element, the group's slice: %s", why.n ? why.line[0] : "");

    /* f and g: an element of f's forward that is the group's sum */
    memset(obs, 0, sizeof obs);
    f = &obs[1].part[L4_CORRECT];
    f->code = L4_W_CONJ;
    f->v[0] = 0, f->v[1] = 9, f->v[2] = 12, f->v[3] = 5, f->v[4] = 12;
    CHECK(!judge(L4_CONJ, 0, 1, "correct", obs, NP, &why) &&
              said(&why, "rank 1: f's forward: element 9 is 12, expected 5 (f (copy to the TP "
                         "region) forward: every rank's branch gets x as the single device "
                         "holds it; you summed over the ranks)") &&
              !said(&why, "identity") && !said(&why, "all-reduce"),
          "f summing forward: %s", why.n ? why.line[0] : "");

    /* memory of the loss: as much as the full logits, held or hidden from the ledger */
    memset(obs, 0, sizeof obs);
    for (int r = 0; r < NP; r++) {
        obs[r].has_vocab = 1;
        obs[r].vocab = (struct l4_vocab){.t = NP, .B = 2, .T = 16, .C = 64, .V = 256};
        obs[r].vocab.held = 1024;
    }
    const double full = 4.0 * 2 * 16 * 256; /* [N, V] floats */
    char fb[32], hb[32];
    pl_format_bytes(full, fb, sizeof fb);
    pl_format_bytes(full / 2, hb, sizeof hb);
    snprintf(want, sizeof want, "below the full logits' %s", fb);
    CHECK(judge(L4_VOCAB, 2, 3, "memory", obs, NP, &why) && said(&why, want),
          "a head below the full logits passes: %s", why.n ? why.line[0] : "");
    obs[1].vocab.held = full;
    snprintf(want, sizeof want, "rank 1: your head and loss held %s at peak beyond their "
             "activations: as much as the full [N, V] logits (%s)", fb, fb);
    CHECK(!judge(L4_VOCAB, 0, 3, "memory", obs, NP, &why) && said(&why, want),
          "the full logits held: %s", why.n ? why.line[0] : "");
    obs[1].vocab.held = full / 2;
    obs[1].vocab.hidden = full / 2;
    snprintf(obs[1].vocab.hidden_region, sizeof obs[1].vocab.hidden_region,
             "in static storage (an array declared static or at file scope)");
    snprintf(obs[1].vocab.hidden_call, sizeof obs[1].vocab.hidden_call, "pl_all_gather");
    snprintf(want, sizeof want, "%s of it in static storage (an array declared static or at "
             "file scope) given to pl_all_gather", hb);
    CHECK(!judge(L4_VOCAB, 0, 3, "memory", obs, NP, &why) && said(&why, want),
          "half the logits outside the ledger: %s", why.n ? why.line[0] : "");

    /* time: between full and no marks a fraction, past no marks a failure */
    memset(obs, 0, sizeof obs);
    obs[0].has_time = 1;
    obs[0].time = (struct gr_bt_figures){.traced = 1, .t = 2, .step = 1.0, .compute = 0.5,
                                         .bound = 1.0, .split = 0.4};
    obs[0].time.ratio = (GR_BT_FULL + GR_BT_NONE) / 2;
    CHECK(judge(L4_BLOCK, 0, 3, "time", obs, NP, &why) && fabs(why.fraction - 0.5) < 1e-9,
          "halfway between the bars earns half: %g", why.fraction);
    obs[0].time.ratio = GR_BT_NONE;
    CHECK(!judge(L4_BLOCK, 0, 3, "time", obs, NP, &why) &&
              said(&why, "rank 0: your block's modelled step") &&
              said(&why, "1.25x the single device's split 2 ways"),
          "at the no-marks bar: %s", why.n ? why.line[0] : "");
    obs[0].time.traced = 0;
    snprintf(obs[0].time.err, sizeof obs[0].time.err,
             "the forward was wrong, so the backward never ran");
    CHECK(!judge(L4_BLOCK, 0, 3, "time", obs, NP, &why) &&
              said(&why, "could not be replayed: the forward was wrong"),
          "no trace: %s", why.n ? why.line[0] : "");
    CHECK(!judge(L4_BLOCK, 0, 3, "speed", obs, NP, &why) && said(&why, "no part 'speed'"),
          "an unknown part is refused");
    training();
    placement();
}

/* Every case of a recorded run passes parts; then each rank's observation made wrong in
 * turn fails with that rank named. */
static void recorded(const char *path, const char *parts)
{
    FILE *f = judge_record_open(path);
    struct gr_record rec;
    char err[256];
    int n = 0, got, kind = -1;
    while ((got = gr_record_read(f, &rec, err, sizeof err)) == 1) {
        for (int k = 0; k <= L4_PLACE; k++)
            if (!strcmp(rec.op, L4_KIND_OPS[k])) kind = k;
        CHECK(kind >= 0, "op %s is not Lab 4's", rec.op);
        struct gr_why why;
        char list[128];
        snprintf(list, sizeof list, "%s", parts);
        for (char *p = strtok(list, ","); p; p = strtok(NULL, ",")) {
            gr_why_init(&why);
            int v = l4_judge(kind, rec.icase, rec.ncases, p, &rec.obs, &why);
            CHECK(v && why.fraction == 1, "%s case %d part %s of the solution: %s", rec.op,
                  rec.icase, p, why.n ? why.line[0] : "(no reason)");
        }
        /* the last rank's first traffic pass one all-reduce over */
        struct l4_obs *mine = malloc(rec.obs.size * (size_t)rec.obs.nranks);
        memcpy(mine, rec.obs.data, rec.obs.size * (size_t)rec.obs.nranks);
        struct l4_obs *last = &mine[rec.obs.nranks - 1];
        struct gr_obs bad = {rec.obs.nranks, rec.obs.size, (const unsigned char *)mine};
        if (last->npass > 0 && last->pass[0].t > 1) {
            last->pass[0].tr.ar_calls++;
            char want[160];
            snprintf(want, sizeof want, "rank %d: the %s made %ld all-reduce", rec.obs.nranks - 1,
                     last->pass[0].name, last->pass[0].tr.ar_calls);
            gr_why_init(&why);
            CHECK(!l4_judge(kind, rec.icase, rec.ncases, "traffic", &bad, &why) &&
                      said(&why, want),
                  "%s case %d, one all-reduce too many: %s", rec.op, rec.icase,
                  why.n ? why.line[0] : "(passed)");
            last->pass[0].tr.ar_calls--;
        }
        /* the same rank's output recorded wrong */
        struct l4_said *f = &last->part[L4_CORRECT];
        f->code = L4_W_COMPARE;
        snprintf(f->name[0], L4_NAME, "output");
        f->cmp = (struct l4_cmp){.fig = {.finite = 1, .rel = 0.5, .tol = L4_TOL_FWD}};
        gr_why_init(&why);
        char want[256];
        snprintf(want, sizeof want, "rank %d: output: relative L2 error %.2e (tolerance %.0e",
                 rec.obs.nranks - 1, 0.5, L4_TOL_FWD);
        CHECK(!l4_judge(kind, rec.icase, rec.ncases, "correct", &bad, &why) && said(&why, want),
              "%s case %d, a rank wrong: %s", rec.op, rec.icase, why.n ? why.line[0] : "");
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
