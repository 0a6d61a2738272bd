/* tests/judge/06-pipeline.c: Lab 6's judges (grader/06-pipeline/judge.c, judge_train.c and
 * partition.c) run alone, without mpirun, on hand-built observations and on those a check
 * run of the solution recorded (driver --record FILE):
 *
 *   06-pipeline                 the hand-built cases
 *   06-pipeline FILE PARTS      every case of FILE passes PARTS (comma-separated), and the
 *                               same observations with one rank's made wrong fail naming
 *                               that rank's stage
 *
 * Expected figures come from the schedules' definitions and the formulas in code, never
 * pasted. Exit 0 when every check holds; each failed one is printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab06.h"
#include "unseen.h"
#include "../testing.h"
#include "judge_test.h"

#define NP_MAX 8
static struct l6_obs obs[NP_MAX];
static int np;

static int judge(int i, const char *part, struct gr_why *why)
{
    struct gr_obs all = {np, sizeof obs[0], (const unsigned char *)obs};
    gr_why_init(why);
    return l6_judge(i, part, &all, why);
}

#define FIRST(w) ((w).n ? (w).line[0] : "(no reason)")

static struct pl_model_config lab_model(void)
{
    struct pl_model_config c = pl_model_config_default();
    c.vocab = PL_BYTE_VOCAB, c.d_model = 32, c.n_layers = 6, c.n_heads = 2, c.d_ff = 64;
    c.seq_len = 16, c.dropout = L6_LAB_DROPOUT, c.n_experts = 0;
    return c;
}

/* The best cut of c into p stages for B x T: stage s holds first[s]..last[s]. */
static void best_cut(const struct pl_model_config *c, int p, int B, int T, int *first, int *last)
{
    double cost[64];
    int n = c->n_layers + 2, start[64];
    for (int k = 0; k < n; k++) cost[k] = pl_part_flops(c, k - 1, B, T);
    l6_sched_best_max(cost, n, p, start);
    for (int s = 0; s < p; s++)
        first[s] = start[s] - 1, last[s] = (s + 1 < p ? start[s + 1] : n) - 2;
}

/* A right case of schedule k, m microbatches, on n ranks as `pipes` pipelines: every part
 * passes on it. */
static void right_case(int n, enum pipe_schedule k, int m, int pipes)
{
    struct l6_grid g;
    struct pl_model_config c = lab_model();
    np = n;
    memset(obs, 0, sizeof obs);
    l6_grid_make(&g, n, pipes);
    int p = g.p, v = k == PIPE_INTERLEAVED ? 2 : 1, first[64], last[64];
    best_cut(&c, p * v, 1, c.seq_len, first, last);
    for (int r = 0; r < n; r++) {
        struct l6_obs *o = &obs[r];
        *o = (struct l6_obs){.k = k, .m = m, .p = p, .v = v, .pipes = pipes, .cfg = c,
                             .bnd = 4096, .pipe = l6_grid_pipe_of(&g, r),
                             .stage = l6_grid_stage_of(&g, r)};
        int s = o->stage;
        o->first = first[s], o->last = last[s];
        o->nops = l6_sched_nops(k, v, m);
        l6_sched_order(k, p, v, s, m, o->ops);
        for (int j = 0; j < v; j++) o->chunk_acts[j] = o->chunk_held[j] = 1e5 * (j + 1);
        o->activ_peak = o->total_peak = l6_sched_peak_acts(k, p, v, s, m, o->chunk_acts, NULL);
        for (int i = 0; i < L6_K_STEPS; i++) o->live[i] = 40;
        o->sent.want = o->sent.nsend = m;
    }
    for (int gg = 0; gg < pipes; gg++)
        obs[0].bub[gg].got = obs[0].bub[gg].best = l6_sched_bubble_formula(k, p, m);
    /* pl_part_flops runs each part: the other models' best cuts once */
    static int other_first[L6_PART_OTHERS][L6_PART_OTHER_STAGES], done;
    static int other_last[L6_PART_OTHERS][L6_PART_OTHER_STAGES];
    for (int i = 0; i < L6_PART_OTHERS && !done; i++) {
        int q, B, T;
        struct pl_model_config o = l6_part_other(&c, i, &q, &B, &T);
        best_cut(&o, q, B, T, other_first[i], other_last[i]);
    }
    done = 1;
    memcpy(obs[0].other_first, other_first, sizeof other_first);
    memcpy(obs[0].other_last, other_last, sizeof other_last);
}

static const char *const PARTS[] = {"correct", "balance", "schedule", "bubble", "memory",
                                    "traffic"};

static void all_pass(const char *what)
{
    struct gr_why why;
    /* the plan grades the balance on the afab op alone (each cut costs models run) */
    for (int i = 0; i < 6; i++)
        if (obs[0].k == PIPE_AFAB || strcmp(PARTS[i], "balance"))
            CHECK(judge(0, PARTS[i], &why), "%s: %s passes: %s", what, PARTS[i], FIRST(why));
}

/* "correct": each class of a wrong training, and the case line after it. */
static void training(void)
{
    struct gr_why why;
    char want[1024], in[160];
    right_case(3, PIPE_1F1B, 2, 1);
    all_pass("1F1B, 3 stages, m = 2");
    struct l6_train *t = &obs[0].train;
    snprintf(in, sizeof in, "in: %s, %d stages, %d microbatches", l6_sched_name(PIPE_1F1B), 3, 2);
    *t = (struct l6_train){.wrong = L6_W_LOSS, .v = {1, 0, 5.25, 5.5, 0.05}};
    snprintf(want, sizeof want, "step 1: the last stage's loss is %.6f, the single-device loss "
             "%.6f (relative error %.1e)", 5.25, 5.5, 0.05);
    CHECK(!judge(0, "correct", &why) && said(&why, want) &&
              said(&why, "each of the 2 microbatches must draw the masks its sequences draw in "
                         "the whole batch") &&
              !said(&why, "seq0") && !said(&why, "adam_t") && !strcmp(why.line[why.n - 1], in) &&
              said(&why, "this is the first step of a new pipe"),
          "a wrong loss at the step after the pipe is made anew: %s", FIRST(why));
    /* a later step's fault is not the new pipe's */
    t->v[0] = 2;
    CHECK(!judge(0, "correct", &why) && !said(&why, "new pipe"),
          "a wrong loss at step 2 blames the new pipe: %s", FIRST(why));
    t->v[0] = 1;
    *t = (struct l6_train){.wrong = L6_W_MASKS, .v = {0, 1}};
    CHECK(!judge(0, "correct", &why) &&
              said(&why, "step 0: the pipeline's gradient is what one device computes on this "
                         "batch when every microbatch draws its dropout masks as the batch's "
                         "first sequences draw theirs") &&
              !said(&why, "seq0") && !said(&why, "adam_t"),
          "masks of microbatch 0: %s", FIRST(why));
    *t = (struct l6_train){.wrong = L6_W_GRADS, .v = {0, 2.0, 0}};
    t->err = (struct l6_param_err){.rank = 2, .tensor = 3, .rel = 0.5, .max_abs = 0.25,
                                   .overall = 0.125, .worst_elem = 17, .name = "h.0.ln1.w [32]"};
    snprintf(want, sizeof want, "gradient of the whole batch: rank 2, tensor h.0.ln1.w [32]: "
             "relative L2 error %.2e (largest element error %.2e, at element 17), all "
             "parameters %.2e (tolerance %.0e)", 0.5, 0.25, 0.125, GR_TOL_GRADS);
    CHECK(!judge(0, "correct", &why) && said(&why, want) &&
              said(&why, "your gradient is 2 times the reference's with 2 microbatches") &&
              !said(&why, "1/m") && !said(&why, "loss_scale"),
          "a gradient m times: %s", FIRST(why));
    t->v[1] = 0.25;
    CHECK(!judge(0, "correct", &why) && said(&why, "your gradient is 1/4 of the reference's"),
          "a gradient scaled twice: %s", FIRST(why));
    t->v[1] = 0.7, t->v[2] = 1;
    CHECK(!judge(0, "correct", &why) && said(&why, "the gradient is one microbatch's of the 2") &&
              !said(&why, "Zero the gradients"),
          "not accumulated: %s", FIRST(why));
    *t = (struct l6_train){.wrong = L6_W_PARAMS};
    t->err = (struct l6_param_err){.rank = -1, .tensor = 0, .nonfinite = 4, .worst_elem = 9,
                                   .name = "wte [256, 32]"};
    snprintf(want, sizeof want, "after %d steps the parameters differ from the single-device "
             "model's: tensor wte [256, 32]: 4 elements in all are NaN or Inf (first bad element "
             "9 of this tensor)", L6_K_STEPS);
    CHECK(!judge(0, "correct", &why) && said(&why, want), "parameters: %s", FIRST(why));
    *t = (struct l6_train){.wrong = L6_W_COVER, .v = {1, 2, 1, 2}};
    CHECK(!judge(0, "correct", &why) && said(&why, "pipe_stage_parts: stage 1 holds parts 2..1, "
                                                   "but after stage 0 it must start at part 2"),
          "an empty stage: %s", FIRST(why));
    *t = (struct l6_train){.wrong = L6_W_COVER_END, .v = {5}};
    snprintf(want, sizeof want, "the last stage ends at part 5, but the head is part %d",
             PL_PART_HEAD(&obs[0].cfg));
    CHECK(!judge(0, "correct", &why) && said(&why, want), "the head left out: %s", FIRST(why));
    /* a grid: the stage from a world rank, pipelines cut apart, a gradient's pipeline */
    right_case(4, PIPE_1F1B, 4, 2);
    all_pass("1F1B, 2 pipelines of 2 stages");
    t = &obs[0].train;
    *t = (struct l6_train){.wrong = L6_W_MIXED, .v = {0, 0, 1, -1, 2, 0}};
    CHECK(!judge(0, "correct", &why) &&
              said(&why, "pipeline 0: world rank 0, stage 1 of its pipeline's communicator, "
                         "holds parts -1..2, which your pipe_partition gives stage 0") &&
              said(&why, "pipeline 0 runs world ranks 2, 0 as stages 0..1"),
          "a stage from the world rank: %s", FIRST(why));
    *t = (struct l6_train){.wrong = L6_W_COVER, .v = {1, 3, 6, 3}};
    CHECK(!judge(0, "correct", &why) && said(&why, "stage 1 holds parts 3..6") &&
              said(&why, "The stage is this rank's rank in the communicator pipe_new is given"),
          "a grid's cut not a cover: %s", FIRST(why));
    *t = (struct l6_train){.wrong = L6_W_PIPES, .v = {0, -1, 2, -1, 1, 1}};
    CHECK(!judge(0, "correct", &why) && said(&why, "stage 0 holds parts -1..2 in pipeline 0 but "
                                                   "-1..1 in pipeline 1"),
          "pipelines cut apart: %s", FIRST(why));
    *t = (struct l6_train){.wrong = L6_W_GRADS, .v = {2, 0.7, 0}};
    t->err = (struct l6_param_err){.rank = 3, .tensor = 1, .rel = 0.5, .name = "wpe [16, 32]"};
    CHECK(!judge(0, "correct", &why) && said(&why, "in pipeline 1 of 2 (world rank 3 is its "
                                                   "stage 0)"),
          "a gradient's pipeline: %s", FIRST(why));
    *t = (struct l6_train){.wrong = L6_W_LOSS, .v = {0, 1, 5.25, 5.5, 0.05}};
    CHECK(!judge(0, "correct", &why) && said(&why, "the last stage of pipeline 1's loss"),
          "a grid's loss: %s", FIRST(why));
    right_case(2, PIPE_INTERLEAVED, 2, 1);
    all_pass("interleaved, 2 stages");
    obs[0].train = (struct l6_train){.wrong = L6_W_CHUNK, .v = {1, 0, 2, 1, 1}};
    CHECK(!judge(0, "correct", &why) &&
              said(&why, "chunk 1 of your pipe_partition into p v = 4 chunks is parts 1..1"),
          "v taken wrong: %s", FIRST(why));
}

/* "balance": the lab's cut one block off, another model's cut wrong. */
static void balance(void)
{
    struct gr_why why;
    char want[256];
    right_case(4, PIPE_AFAB, 1, 1);
    obs[3].first--, obs[2].last--;
    snprintf(want, sizeof want, "4 stages: your largest stage, 3 (parts %d..%d), computes",
             obs[3].first, obs[3].last);
    CHECK(!judge(0, "balance", &why) && said(&why, want) &&
              said(&why, "count every part at its own cost"),
          "an unbalanced cut: %s", FIRST(why));
    CHECK(judge(1, "balance", &why), "balance is judged on the first case alone");
    obs[3].first++, obs[2].last++;
    int q, B, T;
    struct pl_model_config lab = lab_model(), c = l6_part_other(&lab, 6, &q, &B, &T);
    obs[0].other_last[6][0]++, obs[0].other_first[6][1]++;
    snprintf(want, sizeof want, "pipe_partition of a model of %d blocks (d_model %d, d_ff %d, "
             "vocab %d, seq_len %d) into %d stages for microbatches of B x T = %d x %d",
             c.n_layers, c.d_model, c.d_ff, c.vocab, c.seq_len, q, B, T);
    CHECK(!judge(0, "balance", &why) && said(&why, want) &&
              said(&why, "your cut is the best one for the lab's model but not for this one"),
          "another model's cut: %s", FIRST(why));
    obs[0].other_first[6][1] = obs[0].other_last[6][0] + 5;
    CHECK(!judge(0, "balance", &why) && said(&why, "but it must start at part"),
          "another model's cut not a cover: %s", FIRST(why));
}

/* "schedule" and "bubble". */
static void order(void)
{
    struct gr_why why;
    char want[512];
    right_case(3, PIPE_1F1B, 4, 1);
    struct l6_obs *o = &obs[0];
    l6_sched_order(PIPE_AFAB, 3, 1, 0, 4, o->ops);
    CHECK(!judge(0, "schedule", &why) &&
              said(&why, "1F1B, 3 stages, 4 microbatches: stage 0 ran F0 F1 F2 F3 B0 B1 B2 B3; "
                         "the schedule is F0 F1 F2 B0 F3 B1 B2 B3") &&
              said(&why, "the first difference is operation 4: F3 where the schedule has B0") &&
              said(&why, "fewer than min(p - s, m) microbatches are in flight"),
          "AFAB's order under 1F1B: %s", FIRST(why));
    o->nops = 5;
    CHECK(!judge(0, "schedule", &why) && said(&why, "the first difference is operation") == 0,
          "an operation missing: %s", FIRST(why));
    right_case(3, PIPE_1F1B, 3, 1);
    struct l6_bubble *b = &obs[0].bub[0];
    b->got = b->best + 0.1;
    snprintf(want, sizeof want, "your stages idle %.4f of the step; the schedule idles "
             "(p-1)/(m+p-1) = 2/5 = %.4f", b->got, 0.4);
    CHECK(!judge(0, "bubble", &why) && said(&why, want) && said(&why, "a stage waits where") &&
              said(&why, "a pl_test that found its group done (traced as a wait there)"),
          "a bubble too large: %s", FIRST(why));
    b->got = b->best - 0.1;
    CHECK(!judge(0, "bubble", &why) && said(&why, "is some work missing from the trace?"),
          "a bubble too small: %s", FIRST(why));
    b->got = b->best, b->late = 1, b->late_stage = 0, b->t_got = 8, b->t_want = 7;
    b->late_op = (struct l6_sched_op){'B', 0, 0};
    CHECK(!judge(0, "bubble", &why) && said(&why, "stage 0 starts B0 at 8, where the schedule "
                                                  "starts it at 7") &&
              said(&why, "a forward runs only while fewer than min(p - s, m) microbatches"),
          "an operation late: %s", FIRST(why));
    *b = (struct l6_bubble){.failed = 1, .err = "rank 1 waits for a message never sent"};
    CHECK(!judge(0, "bubble", &why) && said(&why, "your step's trace could not be replayed: "
                                                  "rank 1 waits for a message never sent"),
          "a trace not replayed: %s", FIRST(why));
    b->failed = 2;
    snprintf(want, sizeof want, "the ideal %s could not be replayed: rank 1 waits",
             l6_sched_name(PIPE_1F1B));
    CHECK(!judge(0, "bubble", &why) && said(&why, want), "the ideal not replayed: %s",
          FIRST(why));
    right_case(4, PIPE_INTERLEAVED, 4, 1);
    b = &obs[0].bub[0];
    b->best = 0.2, b->got = 0.3;
    snprintf(want, sizeof want, "interleaved 1F1B, 4 stages, 2 chunks each, 4 microbatches, "
             "uniform chunk times (F %g/2, B %g/2, free links): your stages idle 0.3000 of the "
             "step; the schedule as defined idles 0.2000", L6_SCHED_UNIT_F, L6_SCHED_UNIT_B);
    CHECK(!judge(0, "bubble", &why) && said(&why, want), "interleaved's bubble: %s", FIRST(why));
    right_case(4, PIPE_AFAB, 4, 2);
    obs[1].ops[0].mb = 1; /* world rank 1: pipeline 1's stage 1 */
    CHECK(!judge(0, "schedule", &why) && said(&why, "stage 1 ran F1") &&
              said(&why, "in: pipeline 1 of 2, world ranks 3, 1 as stages 0..1"),
          "a grid's pipeline named: %s", FIRST(why));
}

/* The second part, ZB-H1: a right case passes every part; a W right after its B, its idle
 * time, its memory without what B keeps for W, and a gradient W never added, each worded. */
static void zero_bubble(void)
{
    struct gr_why why;
    char want[512];
    right_case(3, PIPE_ZBH1, 4, 1);
    for (int r = 0; r < 3; r++) {
        struct l6_obs *o = &obs[r];
        o->chunk_wgrad[0] = 6e4;
        o->activ_peak = o->total_peak =
            l6_sched_peak_acts(PIPE_ZBH1, 3, 1, o->stage, 4, o->chunk_acts, o->chunk_wgrad);
    }
    all_pass("ZB-H1, 3 stages, m = 4");
    /* the formula: (p-1)/(3m+p-1) = 2/14 with m >= p */
    CHECK(fabs(l6_sched_bubble_formula(PIPE_ZBH1, 3, 4) - 2.0 / 14) < 1e-12 &&
              l6_sched_bubble_formula(PIPE_ZBH1, 3, 2) < 0,
          "ZB-H1's bubble formula holds for m >= p alone");
    /* stage 1 runs W0 right after B0 */
    struct l6_obs *o = &obs[1];
    struct l6_sched_op sw = o->ops[3];
    o->ops[3] = o->ops[4], o->ops[4] = sw;
    CHECK(!judge(0, "schedule", &why) && said(&why, "ZB-H1, 3 stages, 4 microbatches: stage 1 ran") &&
              said(&why, "the W of x - (p - 1), those that exist") &&
              said(&why, "(handout section 9)"),
          "W out of place: %s", FIRST(why));
    o->ops[4] = o->ops[3], o->ops[3] = sw;
    obs[0].bub[0].got = 0.2;
    snprintf(want, sizeof want, "ZB-H1, 3 stages, 4 microbatches, uniform stage times (F %g, B %g, "
             "W %g, free links): your stages idle 0.2000 of the step; the schedule idles "
             "(p-1)/(3m+p-1) = 2/14 = %.4f, a third of 1F1B's idle time", L6_SCHED_UNIT_F,
             L6_SCHED_UNIT_B - L6_SCHED_UNIT_W, L6_SCHED_UNIT_W, 2.0 / 14);
    CHECK(!judge(0, "bubble", &why) && said(&why, want) &&
              said(&why, "a W where the schedule runs a forward or a B"),
          "ZB-H1's bubble: %s", FIRST(why));
    obs[0].bub[0].got = obs[0].bub[0].best;
    /* what B keeps for W counted: a peak of the activations alone is below the order's */
    o->activ_peak = o->total_peak = l6_sched_peak_acts(PIPE_ZBH1, 3, 1, 1, 4, o->chunk_acts, NULL);
    CHECK(!judge(0, "memory", &why) && said(&why, "before the W that frees it") &&
              said(&why, "(handout sections 9)"),
          "ZB-H1's memory without what B kept: %s", FIRST(why));
    o->activ_peak = o->total_peak =
        l6_sched_peak_acts(PIPE_ZBH1, 3, 1, 1, 4, o->chunk_acts, o->chunk_wgrad);
    o->activ_left = 1e5;
    CHECK(!judge(0, "memory", &why) && said(&why, "after its W, and run every W before pipe_step "
                                                  "returns"),
          "ZB-H1's activations left: %s", FIRST(why));
    o->activ_left = 0;
    struct l6_train *t = &obs[0].train;
    *t = (struct l6_train){.wrong = L6_W_GRADS, .v = {0, 0.9, 0}};
    t->err = (struct l6_param_err){.rank = 0, .tensor = 1, .rel = 1.0, .name = "wpe [16, 32]"};
    CHECK(!judge(0, "correct", &why) && said(&why, "that tensor's gradient is missing") &&
              said(&why, "every W of the step runs before it returns"),
          "a W never run: %s", FIRST(why));
    t->err.rel = 0.5;
    CHECK(!judge(0, "correct", &why) && !said(&why, "that tensor's gradient is missing"),
          "a gradient merely wrong is not called missing: %s", FIRST(why));
}

/* "memory" */
static void memory(void)
{
    struct gr_why why;
    char want[512], a[32], b[32];
    right_case(3, PIPE_1F1B, 4, 1);
    struct l6_obs *o = &obs[1];
    o->activ_left = 2000;
    snprintf(want, sizeof want, "stage 1 still holds %s of activations after pipe_step",
             pl_format_bytes(2000, a, sizeof a));
    CHECK(!judge(0, "memory", &why) && said(&why, want), "activations left: %s", FIRST(why));
    o->activ_left = 0;
    double acts = l6_sched_peak_acts(PIPE_1F1B, 3, 1, 1, 4, o->chunk_acts, NULL);
    o->activ_peak = 4e5;
    snprintf(want, sizeof want, "stage 1's activations peaked at %s, %.2f microbatches of %s; "
             "the schedule holds at most %.2f there", pl_format_bytes(4e5, a, sizeof a), 4.0,
             pl_format_bytes(1e5, b, sizeof b), acts / 1e5);
    CHECK(!judge(0, "memory", &why) && said(&why, want) && said(&why, "1F1B runs a forward only while"),
          "too many in flight: %s", FIRST(why));
    o->activ_peak = o->total_peak = acts - 4096 - 1;
    CHECK(!judge(0, "memory", &why) && said(&why, "but the schedule's order holds 2.00 there"),
          "too few in flight: %s", FIRST(why));
    o->activ_peak = acts;
    o->total_peak = acts + 7 * 4096.0 + 100;
    o->cat_peak[PL_MEM_WORK] = 90000;
    snprintf(want, sizeof want, "besides the activations, %s rose most (by %s)",
             pl_mem_cat_name(PL_MEM_WORK), pl_format_bytes(90000, a, sizeof a));
    CHECK(!judge(0, "memory", &why) && said(&why, "every category of the ledger together") &&
              said(&why, "max(v m, 4) + 2 = 6 boundary-sized buffers") && said(&why, want),
          "scratch past the bound: %s", FIRST(why));
    o->total_peak = acts;
    for (int i = 0; i < L6_K_STEPS; i++) o->live[i] = 40 + i;
    CHECK(!judge(0, "memory", &why) && said(&why, "stage 1 held more live allocations after every "
                                                  "step than after the one before (40 after "
                                                  "step 0, 42 after step 2)"),
          "a buffer per step: %s", FIRST(why));
    o->live[1] = 40;
    o->outside = (struct l6_outside){GR_UNSEEN_STATIC, "pl_irecv"};
    CHECK(!judge(0, "memory", &why) && said(&why, "stage 1 gave pl_irecv a buffer that lies in "
                                                  "static storage"),
          "a static buffer: %s", FIRST(why));
    o->outside = (struct l6_outside){L6_OUTSIDE_HEAP, "pl_send"};
    CHECK(!judge(0, "memory", &why) && said(&why, "in memory the ledger never saw"),
          "a heap buffer: %s", FIRST(why));
    o->outside.where = 0;
    o->left = 512, o->left_cat = PL_MEM_COMM;
    snprintf(want, sizeof want, "after pipe_free stage 1 still holds %s of %s",
             pl_format_bytes(512, a, sizeof a), pl_mem_cat_name(PL_MEM_COMM));
    CHECK(!judge(0, "memory", &why) && said(&why, want), "left after pipe_free: %s", FIRST(why));
}

/* "traffic": in flight after pipe_free, then each fault of a send. */
static void traffic(void)
{
    struct gr_why why;
    char want[512], a[32];
    right_case(3, PIPE_AFAB, 2, 1);
    struct l6_obs *o = &obs[0];
    o->in_flight = 1, o->unwaited_type = PL_EV_ISEND, o->unwaited_tag = 0, o->unwaited_peer = 1;
    CHECK(!judge(0, "traffic", &why) && said(&why, "so it cannot be freed (pl_comm_free refuses "
                                                   "it)") &&
              said(&why, "stage 0's pl_isend with tag 0 (to rank 1) was never waited for"),
          "an isend never waited for: %s", FIRST(why));
    o->in_flight = 0;
    struct l6_sent *e = &obs[1].sent;
    const struct {
        int code, tag, peer, grad;
        const char *text;
    } T[] = {
        {L6_T_FAR, 4, -1, 0, "stage 1 sent a message (tag 4) to rank -1, which is not a "
                             "neighbouring stage"},
        {L6_T_PARITY, 1, 2, 0, "stage 1 sent tag 1 to stage 2, the next stage, so it carries an "
                               "activation; pipeline.h tags an activation PIPE_TAG_ACT(mb) = 2 mb"},
        {L6_T_TAG, 2, 2, 0, "a tag it had already used in this step"},
        {L6_T_TAG, 40, 2, 0, "with tag 40, not a tag pipeline.h gives it"},
        {L6_T_EARLY, 2, 2, 0, "stage 1 sent an activation with tag 2, that of microbatch 1, when "
                              "it had not yet run that microbatch's forward (its last operation "
                              "was F0)"},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        *e = (struct l6_sent){.code = T[i].code, .tag = T[i].tag, .peer = T[i].peer,
                              .grad = T[i].grad, .last = {'F', 0, 0}};
        CHECK(!judge(0, "traffic", &why) && said(&why, T[i].text), "send fault %d: %s",
              T[i].code, FIRST(why));
    }
    *e = (struct l6_sent){.code = L6_T_BYTES, .tag = 0, .peer = 2, .bytes = 100};
    snprintf(want, sizeof want, "stage 1's message to stage 2 with tag 0 has 100 bytes; one "
             "microbatch's activation is B/m x T x d_model floats = %.0f bytes (%s)", o->bnd,
             pl_format_bytes(o->bnd, a, sizeof a));
    CHECK(!judge(0, "traffic", &why) && said(&why, want), "bytes: %s", FIRST(why));
    *e = (struct l6_sent){.code = L6_T_COUNT, .nsend = 3, .want = 4};
    CHECK(!judge(0, "traffic", &why) && said(&why, "stage 1 sent 3 messages; it sends one per "
                                                   "microbatch across each boundary of its "
                                                   "chunks, 4"),
          "a message missing: %s", FIRST(why));
    *e = (struct l6_sent){.code = L6_T_COLL, .kind = PL_ALL_REDUCE};
    snprintf(want, sizeof want, "stage 1 called a collective (%s)",
             pl_coll_kind_name(PL_ALL_REDUCE));
    CHECK(!judge(0, "traffic", &why) && said(&why, want), "a collective: %s", FIRST(why));
    right_case(3, PIPE_INTERLEAVED, 3, 1);
    obs[1].sent = (struct l6_sent){.code = L6_T_TAG, .tag = 2, .peer = 2};
    CHECK(!judge(0, "traffic", &why) && said(&why, "without the chunk, the 2 chunks' messages "
                                                   "between the same two ranks share one tag"),
          "interleaved tags without the chunk: %s", FIRST(why));
    CHECK(!judge(0, "speed", &why) && said(&why, "Lab 6 has no part 'speed'"),
          "an unknown part is refused");
}

static void hand_built(void)
{
    training();
    balance();
    order();
    memory();
    traffic();
    zero_bubble();
}

/* Every case of a recorded run passes parts; then the last rank's observation made wrong
 * fails naming its stage (and, in a grid, its pipeline). */
static void recorded(const char *path, const char *parts)
{
    FILE *f = judge_record_open(path);
    struct gr_record rec;
    char err[256];
    int n = 0, got;
    while ((got = gr_record_read(f, &rec, err, sizeof err)) == 1) {
        CHECK(rec.obs.size == sizeof(struct l6_obs), "%s: observations of %zu bytes", rec.op,
              rec.obs.size);
        if (rec.obs.size != sizeof(struct l6_obs)) break;
        struct gr_why why;
        char list[128];
        snprintf(list, sizeof list, "%s", parts);
        for (char *p = strtok(list, ","); p; p = strtok(NULL, ",")) {
            gr_why_init(&why);
            int v = l6_judge(rec.icase, p, &rec.obs, &why);
            CHECK(v && why.fraction == 1, "%s case %d part %s of the solution: %s", rec.op,
                  rec.icase, p, FIRST(why));
        }
        size_t bytes = rec.obs.size * (size_t)rec.obs.nranks;
        struct l6_obs *mine = malloc(bytes);
        memcpy(mine, rec.obs.data, bytes);
        struct gr_obs bad = {rec.obs.nranks, rec.obs.size, (const unsigned char *)mine};
        struct l6_obs *last = &mine[rec.obs.nranks - 1];
        char want[160], grid[64] = "";
        if (last->pipes > 1) snprintf(grid, sizeof grid, "in: pipeline %d of 2", last->pipe);
        /* its first two operations swapped */
        struct l6_sched_op op = last->ops[0];
        last->ops[0] = last->ops[1], last->ops[1] = op;
        snprintf(want, sizeof want, "stage %d ran ", last->stage);
        gr_why_init(&why);
        CHECK(!l6_judge(rec.icase, "schedule", &bad, &why) && said(&why, want) &&
                  (!grid[0] || said(&why, grid)),
              "%s case %d, a rank's order wrong: %s", rec.op, rec.icase, FIRST(why));
        /* one message more */
        last->sent.code = L6_T_COUNT, last->sent.nsend = last->sent.want + 1;
        snprintf(want, sizeof want, "stage %d sent %d messages", last->stage, last->sent.nsend);
        gr_why_init(&why);
        CHECK(!l6_judge(rec.icase, "traffic", &bad, &why) && said(&why, want),
              "%s case %d, a rank's message too many: %s", rec.op, rec.icase, FIRST(why));
        /* activations left after the step */
        last->activ_left = 1000;
        snprintf(want, sizeof want, "stage %d still holds", last->stage);
        gr_why_init(&why);
        CHECK(!l6_judge(rec.icase, "memory", &bad, &why) && said(&why, want),
              "%s case %d, a rank's activations kept: %s", rec.op, rec.icase, FIRST(why));
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
