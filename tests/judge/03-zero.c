/* tests/judge/03-zero.c: Lab 3's judges (grader/03-zero/judge.c, judge_correct.c) run alone,
 * without mpirun, on hand-built observations and on those a check run of the solution
 * recorded (driver --record FILE):
 *
 *   03-zero                  the hand-built cases: each reason the judges give
 *   03-zero FILE PARTS       every case of FILE passes PARTS (comma-separated), and the same
 *                            observations with the last rank's made wrong fail naming it
 *
 * Expected texts are built here from the same figures, never pasted. Exit 0 when every check
 * holds; each failed one is printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab03.h"
#include "prefetch.h"
#include "../testing.h"
#include "judge_test.h"

enum { NP = 2 };

static int judge(int stage, int i, int n, const char *part, const struct l3_obs *obs, int np,
                 struct gr_why *why)
{
    struct gr_obs all = {np, sizeof *obs, (const unsigned char *)obs};
    gr_why_init(why);
    return l3_judge(stage, i, n, part, &all, why);
}

/* NP ranks of a stage-2 case that kept within every bound. */
static void good(struct l3_obs *obs)
{
    memset(obs, 0, NP * sizeof *obs);
    for (int r = 0; r < NP; r++) {
        struct l3_obs *o = &obs[r];
        o->rank = o->grp_rank = r;
        o->grp_n = NP;
        o->ngroups = 1;
        o->n_layers = 2;
        o->d_ff = 65;
        o->seq_len = 3;
        o->vocab = 129;
        o->shape = (struct l3_shape){1000, 1002, 501, 600, 200, NP, 300};
        const double ddp[5] = {4000, 4000, 8000, 1000, 2000};
        memcpy(o->ddp, ddp, sizeof ddp);
        o->pass_work = 500;
        o->peak[PL_MEM_PARAMS] = 4 * 1002;
        o->peak[PL_MEM_GRADS] = 4 * (501 + 200); /* the shard and the last unit's bucket */
        o->peak[PL_MEM_OPTIM] = 8 * 501;
        o->peak_total = 4 * 1002 + 12 * 501 + 4 * 200;
        o->leak_step = -1;
        o->steps_done = o->trained = L3_STEPS;
        for (int s = 0; s < L3_STEPS; s++) {
            o->bytes[s][PL_REDUCE_SCATTER] = 4.0 * (NP - 1) / NP * 1002;
            o->bytes[s][PL_ALL_GATHER] = 4.0 * (NP - 1) / NP * 1002;
            o->replica.digest[s] = 0x1234u + (uint64_t)s;
        }
        o->replica.steps = L3_STEPS;
        o->replica.step = -1;
        o->loss.step = -1;
    }
}

static void layouts(void)
{
    struct l3_obs obs[NP];
    struct gr_why why;
    char want[512];
    good(obs);
    obs[0].layout_tried = 2000;
    snprintf(want, sizeof want, "%d layouts (model sizes x rank counts 1..9 x ranks) keep every "
             "invariant of zero.h", 2000);
    CHECK(judge(0, 0, 1, "correct", obs, NP, &why) && said(&why, want), "layouts: %s",
          first(&why));
    struct l3_layout_diff *d = &obs[0].layout;
    const struct l3_layout_diff test = {.test = 1, .psi = 5000, .n_layers = 4, .d_model = 12,
                                        .d_ff = 33, .vocab = 70, .n = 2, .rank = 1};
    char whose[160];
    snprintf(whose, sizeof whose, "Psi=%d parameters (n_layers=%d, d_model=%d, d_ff=%d, "
             "vocab=%d) on n=%d, rank %d", 5000, 4, 12, 33, 70, 2, 1);
    /* Each invariant's words carry its figures: the gap's uncovered elements are 97 - 2 x 48. */
    *d = test;
    d->code = L3_LD_GAP, d->unit = 3, d->unit_numel = 97, d->got[0] = 48, d->want[0] = 49;
    snprintf(want, sizeof want, "%s, unit %d (%d elements): chunk %d: n chunks hold %d of its "
             "elements, and the last %d belong to no rank", whose, 3, 97, 48, 96, 1);
    CHECK(!judge(0, 0, 1, "correct", obs, NP, &why) && said(&why, want) &&
              said(&why, "at least ceil(numel / n) = 49"), "gap: %s", first(&why));
    *d = test;
    d->code = L3_LD_EXCESS, d->unit = 0, d->unit_numel = 97, d->got[0] = 1024, d->want[0] = 49;
    snprintf(want, sizeof want, "chunk %d is %d more than ceil(numel / n) = %d; zero.h allows "
             "at most ZERO_MAX_ALIGN - 1 = %d more", 1024, 1024 - 49, 49, ZERO_MAX_ALIGN - 1);
    CHECK(!judge(0, 0, 1, "correct", obs, NP, &why) && said(&why, want), "excess: %s",
          first(&why));
    *d = test;
    d->code = L3_LD_FULL_OVERLAP, d->unit = 1, d->unit2 = 2;
    d->got[0] = 100, d->got[1] = 98, d->want[0] = 197, d->want[1] = 40;
    snprintf(want, sizeof want, "in a full buffer, unit 1's [full_offset 100, + padded 98) "
             "overlaps unit 2's [197, + 40): a unit's padding has no room of its own");
    CHECK(!judge(0, 0, 1, "correct", obs, NP, &why) && said(&why, want), "overlap: %s",
          first(&why));
    d->code = L3_LD_SHARD_OVERLAP, d->unit2 = -1, d->got[2] = 120;
    CHECK(!judge(0, 0, 1, "correct", obs, NP, &why) &&
              said(&why, "in its shard, unit 1's [shard_offset 100, + chunk 98) runs past "
                   "shard_numel = 120"), "past the end: %s", first(&why));
    *d = test;
    d->code = L3_LD_UNEQUAL, d->unit = 2, d->field = 0, d->got[0] = 48, d->want[0] = 49;
    snprintf(want, sizeof want, "%s: unit 2's chunk is 48, rank 0's is 49. Every rank must cut "
             "the model alike", whose);
    CHECK(!judge(0, 0, 1, "correct", obs, NP, &why) && said(&why, want), "unequal: %s",
          first(&why));
    const int codes[6] = {L3_LD_NRANK, L3_LD_NUNITS, L3_LD_PART, L3_LD_TOTALS, L3_LD_RANGE,
                          L3_LD_PADDED};
    const char *words[6] = {"n=2 rank=1 stored, expected n=3 rank=1", "nunits is 2, expected 3",
                            "part is 2, expected 3 (unit u holds part u - 1",
                            ("numel 2, full_numel 1, shard_numel 1; expected Psi = 3, 1 (the "
                             "sum of padded) and 1 (the sum of chunks)"),
                            "unit 1: offset 2, numel 1, but part 0 is the 1 elements from 3",
                            "padded is 2, expected n x chunk = 3"};
    for (int k = 0; k < 6; k++) {
        *d = (struct l3_layout_diff){.code = codes[k], .unit = 1, .got = {2, 1, 1},
                                     .want = {3, 1, 1}, .psi = 100, .n = 2, .rank = 1};
        snprintf(want, sizeof want, "rank 1's z->zl (Psi=100 on 2 ranks)");
        CHECK(!judge(0, 0, 1, "correct", obs, NP, &why) && said(&why, want) &&
                  said(&why, words[k]), "layout code %d: %s", codes[k], first(&why));
    }
}

static void state(void)
{
    struct l3_obs obs[NP];
    struct gr_why why;
    char want[512];
    good(obs);
    obs[1].null_field = 3;
    snprintf(want, sizeof want, "rank 1: zero_new(stage 2) left z->m or z->v NULL: allocate what "
             "the stage keeps (handout section %s)", l3_section_of_stage(2));
    CHECK(!judge(2, 0, 3, "correct", obs, NP, &why) && said(&why, want), "null: %s", first(&why));
    good(obs);
    obs[1].layout = (struct l3_layout_diff){.code = L3_LD_STAGE, .got = {1}, .want = {2}};
    CHECK(!judge(2, 0, 3, "correct", obs, NP, &why) &&
              said(&why, "zero_new(stage 2) stored stage 1 in z->stage") &&
              said(&why, "fix zero_layout_init first"), "stage: %s", first(&why));
    /* Rank 0's layout breaks padded = n x chunk and rank 1 is cut unlike rank 0: the cut,
     * the cause, is said first. */
    good(obs);
    obs[0].layout = (struct l3_layout_diff){.code = L3_LD_PADDED, .unit = 1, .got = {97},
                                            .want = {98}, .psi = 100, .n = 2, .rank = 0};
    obs[1].layout = (struct l3_layout_diff){.code = L3_LD_UNEQUAL, .unit = 1, .field = 0,
                                            .got = {48}, .want = {49}, .psi = 100, .n = 2,
                                            .rank = 1};
    CHECK(!judge(2, 0, 3, "correct", obs, NP, &why) &&
              said(&why, "rank 1's z->zl (Psi=100 on 2 ranks): unit 1's chunk is 48, rank 0's "
                   "is 49") && !said(&why, "padded is 97"), "unequal first: %s", first(&why));
    good(obs);
    obs[1].in_flight = 2;
    snprintf(want, sizeof want, "rank 1: after zero_free, %d operation(s) your code started", 2);
    CHECK(!judge(2, 0, 3, "correct", obs, NP, &why) && said(&why, want) && why.n == 1,
          "in flight: %s", first(&why));
    good(obs);
    obs[0].trained = obs[1].trained = 0;
    CHECK(!judge(2, 0, 3, "correct", obs, NP, &why) && said(&why, "did not train"),
          "untrained: %s", first(&why));
}

static void gradients(void)
{
    struct l3_obs obs[NP];
    struct gr_why why;
    char want[512];
    struct {
        struct l3_grads_fig f;
        const char *fmt;
    } g[8] = {
        {{.code = L3_G_NONE_GIVEN, .step = 0}, "step 1: zero_step never called pl_model_adamw_flat"},
        {{.code = L3_G_COUNT, .step = 1, .elem = 77, .who = 1, .count = 2, .tensor = "wte"},
         "step 2: flat element 77 (wte, in rank 1's chunk) was given to pl_model_adamw_flat 2 "
         "times"},
        {{.code = L3_G_T, .step = 0, .who = 5}, "step 1: pl_model_adamw_flat was given t = 5, "
                                                "where this model has taken 1 AdamW step(s)"},
        {{.code = L3_G_TWICE, .step = 0, .n = 2, .x = {0.5, 1}},
         "gradients averaged twice: off by a factor of 1/n = 1/2 before clipping (AdamW was "
         "given 0.5 times the gradient it needs, after your clip)"},
        {{.code = L3_G_SUM, .step = 0, .n = 3, .x = {3, 0}},
         "gradients summed, not averaged: off by a factor of n = 3 before clipping (AdamW was "
         "given 3 times the gradient it needs)"},
        {{.code = L3_G_LOCAL_CLIP, .step = 0, .who = 1, .x = {0.25, 4, 5, 1, 0.2}},
         "rank 1 scaled its chunks by 0.25, from the norm of its own shard (4), where the whole "
         "gradient's norm is 5 and clipping at 1 scales every chunk by 0.2"},
        {{.code = L3_G_NOT_CLIPPED, .step = 2, .x = {5, 1, 0.2}},
         "step 3: the gradient was not clipped: its norm 5 is above grad_clip 1"},
        {{.code = L3_G_DIFF, .step = 1, .who = 0, .elem = 9, .x = {0.01, 1.5, 2, 1},
          .tensor = "lnf.b"},
         "step 2: the gradient AdamW was given differs from the single-device gradient of the "
         "whole batch, clipped by its global norm: relative L2 error 0.01"},
    };
    /* What each diagnosis leaves out: the fix (the call, the formula, the place to divide). */
    static const char *const fix[8][2] = {
        {"", ""},
        {"offset + rank x chunk", ""},
        {"", ""},
        {"PL_AVG already divides", "divide once"},
        {"", ""},
        {"zero_sum_over_ranks", "sum the squares"},
        {"pl_clip_scale", "sum of squares"},
        {"is zeroed before each backward", ""},
    };
    for (int k = 0; k < 8; k++) {
        good(obs);
        obs[1].grads = g[k].f;
        CHECK(!judge(2, 0, 3, "correct", obs, NP, &why) && said(&why, g[k].fmt) &&
                  (!*fix[k][0] || !said(&why, fix[k][0])) &&
                  (!*fix[k][1] || !said(&why, fix[k][1])),
              "gradient code %d, the symptom without the fix: %s", g[k].f.code, first(&why));
    }
    snprintf(want, sizeof want, "(lnf.b, rank 0's chunk): %.6g where %.6g was expected", 1.5, 2.0);
    CHECK(said(&why, want) && said(&why, "zero_backward_part adds into the buffer"),
          "the worst element: %s", first(&why));
    /* replicas: rank 1's digest after step 2 is not rank 0's */
    good(obs);
    obs[1].replica.digest[1] ^= 1;
    obs[1].replica.step = 1;
    obs[1].replica.elem = 321;
    obs[1].replica.owner = 1;
    snprintf(obs[1].replica.tensor, sizeof obs[1].replica.tensor, "lm_head");
    snprintf(want, sizeof want, "after zero_step %d, rank %d's parameters differ from rank 0's, "
             "bit for bit, first in %s (flat element %d, in rank %d's chunk)", 2, 1, "lm_head",
             321, 1);
    CHECK(!judge(2, 0, 3, "correct", obs, NP, &why) && said(&why, want) &&
              !said(&why, "all-gathered"), "replicas, the call not named: %s", first(&why));
}

static void losses_params(void)
{
    struct l3_obs obs[NP];
    struct gr_why why;
    char want[512];
    good(obs);
    obs[1].loss.step = 0;
    obs[1].loss.got = 5.5;
    obs[1].loss.want = 5.25;
    obs[1].loss.err = 0.047;
    snprintf(want, sizeof want, "ZeRO-2 on %d ranks, step 1 of %d: the loss (mean over the group's "
             "ranks) is %.8g, the single-device model's on the same global batch %.8g", NP,
             L3_STEPS, 5.5, 5.25);
    CHECK(!judge(2, 0, 3, "correct", obs, NP, &why) && said(&why, want) &&
              said(&why, "the first forward already differs"), "loss 1: %s", first(&why));
    obs[1].loss.step = 2;
    obs[0].ngroups = obs[1].ngroups = 2;
    CHECK(!judge(2, L3_CASE_GROUPS, 4, "correct", obs, NP, &why) &&
              said(&why, "(rank 1's group, on its own batches), step 3") &&
              said(&why, "the first 2 step(s) agreed") &&
              !said(&why, "summed over all ranks' chunks") &&
              !said(&why, "all-gather of the updated") &&
              said(&why, "world rank r is not rank r of its group") &&
              !said(&why, "pl_comm_rank(z->comm)") &&
              said(&why, "(n_layers=2, d_ff=65, seq_len=3, vocab=129)"),
          "loss 3, groups: %s", first(&why));
    good(obs);
    struct l3_params_fig p = {1, 4, "h.0.mlp.w_fc", "[64, 255]", 0.02, 0.003, 17, 0.001, 0};
    obs[1].params = p;
    snprintf(want, sizeof want, "ZeRO-3 on %d ranks: after %d steps the parameters (gathered from "
             "every rank's shard) differ from the single-device model's: rank 1, tensor %s %s: "
             "relative L2 error %.2e (largest element error %.2e, at element %d), all parameters "
             "%.2e", NP, L3_STEPS, p.name, p.shape, p.rel, p.max_abs, 17, p.overall);
    CHECK(!judge(3, L3_CASE_CLIP_OFF, 3, "correct", obs, NP, &why) && said(&why, want) &&
              said(&why, "losses agreed") && !said(&why, "rank x chunk + chunk") &&
              said(&why, "this run called zero_new with prefetch = 0"),
          "params: %s", first(&why));
    obs[1].params.rel = INFINITY;
    obs[1].params.nonfinite = 3;
    CHECK(!judge(2, 0, 3, "correct", obs, NP, &why) &&
              said(&why, "3 elements in all are NaN or Inf") &&
              said(&why, "3 parameters are NaN or Inf"), "nonfinite: %s", first(&why));
    good(obs);
    obs[0].params.rel = obs[1].params.rel = GR_TOL_PARAMS / 2;
    CHECK(judge(2, 0, 3, "correct", obs, NP, &why) && why.n == 0, "an early case passes quietly");
    CHECK(judge(2, 2, 3, "correct", obs, NP, &why) &&
              said(&why, "4 steps on 2 ranks, clipping at the default threshold, off"),
          "the last case's note: %s", first(&why));
}

static void memory(void)
{
    struct l3_obs obs[NP];
    struct gr_why why;
    char want[512], b1[32], b2[32];
    good(obs);
    CHECK(judge(2, 0, 3, "memory", obs, NP, &why) && said(&why, "DDP holds params"),
          "memory passes with its report: %s", first(&why));
    struct l3_allowance a = l3_stage_allowance(2, &obs[0].shape, 1);
    /* buckets filed outside grads: the category holds the shard alone */
    obs[1].peak[PL_MEM_GRADS] = 4 * 501;
    CHECK(!judge(2, 0, 3, "memory", obs, NP, &why) &&
              said(&why, "rank 1 held 2.0 kB of grads at peak, less than the gradient shard and "
                         "half the last unit's bucket (2.4 kB)"),
          "grads under the floor: %s", why.n ? why.line[why.n - 1] : "");
    good(obs);
    obs[1].peak[PL_MEM_OPTIM] = 8 * 1000;
    snprintf(want, sizeof want, "rank 1 held %s of optim (AdamW moments m and v) at peak; ZeRO-2 "
             "on %d ranks accepts %s", pl_format_bytes(8000, b1, sizeof b1), NP,
             pl_format_bytes(a.allowed.optim, b2, sizeof b2));
    CHECK(!judge(2, 0, 3, "memory", obs, NP, &why) && said(&why, want) &&
              said(&why, "that is the whole model's optimizer state") &&
              !said(&why, "zl.shard_numel elements"), "optim, the fix not given: %s",
          why.n ? why.line[why.n - 1] : "");
    good(obs);
    obs[1].peak[PL_MEM_ACTIV] = 1e6;
    CHECK(!judge(2, 0, 3, "memory", obs, NP, &why) &&
              said(&why, "of activ at peak, more than the"), "activ");
    good(obs);
    obs[1].peak_total = 1e6;
    CHECK(!judge(2, 0, 3, "memory", obs, NP, &why) && said(&why, "in all at its peak") &&
              said(&why, "whatever category a buffer is filed under"), "total");
    /* stage 3: two gathered units are the prefetch's; without it, one is all a unit needs
     * (an outside review's miss: a stage 3 that prefetched with z->prefetch = 0) */
    good(obs);
    for (int r = 0; r < NP; r++) obs[r].peak[PL_MEM_PARAMS] = 4 * (501 + 400);
    CHECK(judge(3, 0, 3, "memory", obs, NP, &why), "two units with prefetch pass: %s",
          first(&why));
    CHECK(!judge(3, L3_CASE_CLIP_OFF, 3, "memory", obs, NP, &why) &&
              said(&why, "more than one gathered unit was alive at once with z->prefetch = 0") &&
              said(&why, "that was the run with zero_new's prefetch = 0"),
          "two units without prefetch: %s", first(&why));
    for (int r = 0; r < NP; r++) obs[r].peak[PL_MEM_PARAMS] = 4 * (501 + 300);
    CHECK(judge(3, L3_CASE_CLIP_OFF, 3, "memory", obs, NP, &why),
          "the largest unit without prefetch passes: %s", first(&why));
    obs[1].leak_step = 1;
    obs[1].leak[PL_MEM_PARAMS] = 4096;
    snprintf(want, sizeof want, "rank 1: zero_step 2 left %s of params allocated",
             pl_format_bytes(4096, b1, sizeof b1));
    CHECK(!judge(3, L3_CASE_CLIP_OFF, 3, "memory", obs, NP, &why) && said(&why, want) &&
              said(&why, "a gathered unit never freed") &&
              !said(&why, "pl_mem_free each one") &&
              said(&why, "that was the run with zero_new's prefetch = 0"), "leak: %s",
          first(&why));
    good(obs);
    obs[1].left[PL_MEM_OPTIM] = 4008;
    CHECK(!judge(2, L3_CASE_GROUPS, 4, "memory", obs, NP, &why) &&
              said(&why, "rank 1: after zero_free") &&
              said(&why, "that was the case of 2 ZeRO groups of 2 ranks"), "freed: %s",
          first(&why));
    good(obs);
    obs[1].unseen = (struct gr_unseen){GR_UNSEEN_STACK, "zero_backward_part's gradient buffer "
                                       "(part 4)", "PL_MEM_GRADS"};
    snprintf(want, sizeof want, "rank 1: %s lay %s", obs[1].unseen.what,
             gr_unseen_where(GR_UNSEEN_STACK));
    CHECK(!judge(2, 0, 3, "memory", obs, NP, &why) && said(&why, want) &&
              said(&why, "(here PL_MEM_GRADS)"), "unseen: %s", first(&why));
    good(obs);
    obs[1].on_host = (struct l3_on_host){1, "pl_model_adamw_flat's m", "my m"};
    CHECK(!judge(2, 0, 3, "memory", obs, NP, &why) &&
              said(&why, "rank 1: pl_model_adamw_flat's m lay in memory allocated with PL_HOST "
                         "(\"my m\")"), "on host: %s", first(&why));
}

static void traffic(void)
{
    struct l3_obs obs[NP];
    struct gr_why why;
    char want[512], b1[32], b2[32];
    good(obs);
    CHECK(judge(2, 0, 3, "traffic", obs, NP, &why) && said(&why, "rank 0 sent per step"),
          "traffic passes with its report: %s", first(&why));
    obs[1].bytes[2][PL_ALL_REDUCE] = 8000;
    CHECK(!judge(2, 0, 3, "traffic", obs, NP, &why) &&
              said(&why, "rank 1, step 3: all-reduce of") &&
              said(&why, "The gradient was all-reduced whole") &&
              !said(&why, "reduce-scatters it") && !said(&why, "wasted traffic"),
          "all-reduce, the collective to use not named: %s", first(&why));
    CHECK(!judge(1, 0, 3, "traffic", obs, NP, &why) &&
              said(&why, "stage 1 must send no more than DDP") &&
              !said(&why, "reduce-scatter it") && !said(&why, "half an all-reduce"),
          "stage 1's all-reduce, the collective to use not named: %s", first(&why));
    good(obs);
    obs[1].bytes[0][PL_REDUCE_SCATTER] *= 2;
    snprintf(want, sizeof want, "rank 1, step 1: reduce-scatter sent %s; the gradient of every "
             "unit, padded, reduce-scattered once: 4 x full_numel x (n-1)/n = %s (a unit reduced "
             "twice?)", pl_format_bytes(obs[1].bytes[0][PL_REDUCE_SCATTER], b1, sizeof b1),
             pl_format_bytes(obs[0].bytes[0][PL_REDUCE_SCATTER], b2, sizeof b2));
    CHECK(!judge(2, 0, 3, "traffic", obs, NP, &why) && said(&why, want), "reduce-scatter: %s",
          first(&why));
    good(obs);
    CHECK(!judge(3, 0, 3, "traffic", obs, NP, &why) &&
              said(&why, "stage 3's all-gathers, as section 5 counts them") &&
              !said(&why, "again before its backward") && !said(&why, "2 x 4 x full_numel") &&
              !said(&why, "3Psi"),
          "stage 3 gathers once, the count (question zero3_traffic_over_ddp) not given: %s",
          first(&why));
    good(obs);
    for (int r = 0; r < NP; r++)
        for (int s = 0; s < L3_STEPS; s++) obs[r].bytes[s][PL_ALL_GATHER] *= 2;
    CHECK(judge(3, 0, 3, "traffic", obs, NP, &why) && said(&why, "rank 0 sent per step") &&
              !said(&why, "formula 3Psi"),
          "stage 3's report gives the measured multiple, not the formula: %s", first(&why));
    good(obs);
    CHECK(judge(2, 0, 3, "traffic", obs, NP, &why) && said(&why, "(formula 2Psi(n-1)/n;"),
          "stage 2's report gives its formula: %s", first(&why));
    obs[1].bytes[0][PL_BROADCAST] = 64;
    CHECK(!judge(2, 0, 3, "traffic", obs, NP, &why) &&
              said(&why, "ZeRO needs only reduce-scatter (gradients) and all-gather"),
          "another kind: %s", first(&why));
    CHECK(judge(2, 1, 3, "traffic", obs, NP, &why) && why.n == 0,
          "traffic is judged on the first case only");
    CHECK(!judge(2, 0, 3, "speed", obs, NP, &why) && said(&why, "no part 'speed'"),
          "an unknown part is refused");
}

static void prefetch(void)
{
    struct l3_obs obs[NP];
    struct gr_why why;
    char want[512];
    good(obs);
    CHECK(!judge(3, 0, 3, "prefetch", obs, NP, &why) && said(&why, "no step was traced"),
          "untraced");
    CHECK(judge(3, L3_CASE_CLIP_OFF, 3, "prefetch", obs, NP, &why), "judged once");
    struct l3_prefetch_fig *f = &obs[0].prefetch;
    f->traced = 1;
    snprintf(f->err, sizeof f->err, "rank 1 waits for a handle never issued");
    CHECK(!judge(3, 0, 3, "prefetch", obs, NP, &why) &&
              said(&why, "could not be replayed: rank 1 waits"), "no replay");
    *f = (struct l3_prefetch_fig){1, 1, "", NP, 1e-3, 5e-4, 3e-3, 1e-3, 4e-3, 0.5, 0.5};
    snprintf(want, sizeof want, "your step hid %.0f%% of its all-gather time", 50.0);
    CHECK(judge(3, 0, 3, "prefetch", obs, NP, &why) && said(&why, want) && why.fraction == 1 &&
              said(&why, "the model's bound: no step hides more than 50%") &&
              said(&why, "you reached 100% of it"),
          "full marks: %s", first(&why));
    f->hidden = 0.25; /* half the bound: between none and full */
    double frac = (0.5 - L3_PREFETCH_NONE) / (L3_PREFETCH_FULL - L3_PREFETCH_NONE);
    CHECK(judge(3, 0, 3, "prefetch", obs, NP, &why) && fabs(why.fraction - frac) < 1e-12 &&
              said(&why, "part of the gathers were waited for") &&
              !said(&why, "pl_all_gather_async") && !said(&why, "pl_wait"),
          "partial, the calls not named: %g %s", why.fraction, first(&why));
    f->hidden = 0;
    CHECK(!judge(3, 0, 3, "prefetch", obs, NP, &why) &&
              said(&why, "nothing was hidden: every all-gather was waited for"), "none hidden");
}

/* Every case of a recorded run passes parts; then the last rank made wrong fails, named. */
static void recorded(const char *path, const char *parts)
{
    FILE *f = judge_record_open(path);
    struct gr_record rec;
    char err[256];
    int n = 0, got;
    while ((got = gr_record_read(f, &rec, err, sizeof err)) == 1) {
        int stage = strcmp(rec.op, "layout") ? rec.op[4] - '0' : 0;
        CHECK(rec.obs.size == sizeof(struct l3_obs), "%s: observations of %zu bytes, not %zu",
              rec.op, rec.obs.size, sizeof(struct l3_obs));
        if (rec.obs.size != sizeof(struct l3_obs)) break;
        struct gr_why why;
        char list[128];
        snprintf(list, sizeof list, "%s", parts);
        for (char *p = strtok(list, ","); p; p = strtok(NULL, ",")) {
            gr_why_init(&why);
            int v = l3_judge(stage, rec.icase, rec.ncases, p, &rec.obs, &why);
            CHECK(v && why.fraction == 1, "%s case %d part %s of the solution: %s", rec.op,
                  rec.icase, p, first(&why));
        }
        int last = rec.obs.nranks - 1;
        struct l3_obs *mine = malloc(rec.obs.size * (size_t)rec.obs.nranks);
        memcpy(mine, rec.obs.data, rec.obs.size * (size_t)rec.obs.nranks);
        struct gr_obs bad = {rec.obs.nranks, rec.obs.size, (const unsigned char *)mine};
        char want[160];
        if (stage) {
            mine[last].in_flight = 1;
            snprintf(want, sizeof want, "rank %d: after zero_free, 1 operation(s)", last);
        } else {
            mine[0].layout = (struct l3_layout_diff){.code = L3_LD_NUNITS, .got = {3},
                                                     .want = {4}, .test = 1, .n = 2, .rank = 1};
            snprintf(want, sizeof want, "on n=2, rank 1: nunits is 3, expected 4");
        }
        gr_why_init(&why);
        CHECK(!l3_judge(stage, rec.icase, rec.ncases, "correct", &bad, &why) && said(&why, want),
              "%s case %d, a rank wrong: %s", rec.op, rec.icase, first(&why));
        if (stage && rec.icase == L3_CASE_CLIP_DEFAULT && strstr(parts, "memory")) {
            memcpy(mine, rec.obs.data, rec.obs.size * (size_t)rec.obs.nranks);
            mine[last].peak_total *= 100;
            snprintf(want, sizeof want, "rank %d held ", last);
            gr_why_init(&why);
            CHECK(!l3_judge(stage, rec.icase, rec.ncases, "memory", &bad, &why) &&
                      said(&why, want) && said(&why, "in all at its peak"),
                  "%s case %d, a rank's memory: %s", rec.op, rec.icase, first(&why));
        }
        free(mine);
        gr_record_free(&rec);
        n++;
    }
    judge_record_close(f, path, got, err, n);
}

/* Every hand-built check. */
static void hand_built(void)
{
    layouts();
    state();
    gradients();
    losses_params();
    memory();
    traffic();
    prefetch();
}

int main(int argc, char **argv)
{
    return judge_test_main(argc, argv, hand_built, recorded);
}
