/* tests/judge/lab02_uneven.h: the uneven batches' part of Lab 2's judge test, included by
 * tests/judge/02-ddp.c after its helpers, as lab02_buckets.h is. */
#ifndef LAB02_UNEVEN_JUDGE_TEST_H
#define LAB02_UNEVEN_JUDGE_TEST_H

/* Uneven batches: the mean of the ranks' means, a factor per rank, 1/n under PL_AVG, and
 * the count exchanged more than once a step. */
static void uneven_reasons(void)
{
    struct l2_obs obs[NP];
    struct gr_why why;
    char want[1024];
    const struct l2_gfig base = {.replicas_equal = 1, .acc_mb = -1, .ratio = 1};
    grads(obs, DDP_NAIVE, 1, 1, base);
    for (int r = 0; r < NP; r++) {
        obs[r].c.uneven = 1;
        obs[r].seqs = 1 + 2 * r;
        obs[r].all_seqs = 4;
        obs[r].fit_err = obs[r].fit = 1;
        obs[r].means_err = 1e-5;
    }
    snprintf(want, sizeof want, "step 2: your gradient is the average over the 2 ranks of each "
             "rank's gradient of its own mean loss, (g_0 + ... + g_1) / 2; but in this step the "
             "ranks hold different numbers of sequences (rank 0 1, rank 1 3: 4 in all). That "
             "average weighs a sequence of rank 0 1/(2 x 1) = %.4f and one of rank 1 1/(2 x 3) "
             "= %.4f, where the step's loss, the mean over all 4 sequences, weighs each 1/4 = "
             "%.4f", 0.5, 1.0 / 6, 0.25);
    CHECK(!judge(0, "correct", obs, NP, &why) && why.n == 3 && !strncmp(why.line[1], want,
          strlen(want)) && in_case(obs, &why), "mean of means: %s", why.n > 1 ? why.line[1] : "");
    obs[1].means_err = 0.2;
    obs[0].fit_err = obs[1].fit_err = 1e-6;
    obs[0].fit = 4.0 / (2 * 1);
    obs[1].fit = 4.0 / (2 * 3);
    CHECK(!judge(0, "correct", obs, NP, &why) &&
              said(&why, "every rank's gradient is the reference's times a factor of its own") &&
              said(&why, "rank 0 2 with 1, rank 1 0.6667 with 3 sequences (4 in all)") &&
              said(&why, "each factor is 4 / (2 x the rank's own count)"),
          "own counts: %s", why.n > 1 ? why.line[1] : "");
    obs[1].fit = 1;
    CHECK(!judge(0, "correct", obs, NP, &why) && said(&why, "by the same rule from the same") &&
              !said(&why, "each factor is"), "other factors: %s", why.n > 2 ? why.line[2] : "");
    struct l2_gfig g = base;
    g.ratio = 0.5;
    grads(obs, DDP_NAIVE, 1, 1, g);
    CHECK(!judge(0, "correct", obs, NP, &why) &&
              said(&why, "your gradient is 1/2 of the reference's on 2 ranks, and your "
                         "all-reduces average (PL_AVG): the ranks' gradients were divided by "
                         "the 2 ranks twice"), "1/n: %s", why.n > 1 ? why.line[1] : "");

    good(obs, DDP_NAIVE, 2, 1);
    obs[0].traffic = (struct l2_tfig){.code = L2_T_STEP_CALLS, .rank = 1, .calls = 55,
                                      .want_calls = 53, .ar = 1008, .want = 1000};
    snprintf(want, sizeof want, "step 1: rank 1 made 55 all-reduce calls where one per tensor "
             "takes 53: 2 more, 8 B beyond the gradient's. Beside them a step may make ONE "
             "all-reduce of at most %d floats to exchange the ranks' counts (ddp.h), where "
             "yours are as many as the step's 2 microbatches, one in each", L2_COUNT_FLOATS);
    CHECK(!judge(0, "traffic", obs, NP, &why) && !strncmp(first(&why), want, strlen(want)),
          "counts per microbatch: %s", first(&why));
    obs[0].traffic = (struct l2_tfig){.code = L2_T_COUNT_AGAIN, .step = 2, .mb = 3, .rank = 1,
                                      .got = 4, .calls = 1};
    obs[0].c.microbatches = 12;
    CHECK(!judge(0, "traffic", obs, NP, &why) &&
              said(&why, "step 3, microbatch 4 of 12: rank 1 made a second small all-reduce "
                         "in the step (4 B)"), "count again: %s", first(&why));
}

#endif
