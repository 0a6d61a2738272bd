/* tests/judge/lab09_zero.h: the ZeRO-1 part of Lab 9's judge test, included by
 * tests/judge/09-4d.c after its helpers (the state, good, expect, all_pass): one
 * translation unit, as tests/testing.h's counters want, in two files under 600 lines. */
#ifndef LAB09_ZERO_JUDGE_TEST_H
#define LAB09_ZERO_JUDGE_TEST_H

/* ZeRO-1's reasons on (2,2,2) and (4,1,2): the replicas apart, the DP group's floats short
 * of a sum or of a gather or over both, the norm of a share or counted per replica, a share's
 * gradient off, the moments whole, the whole model's, or short, the runs cut short, the DP
 * sum started after a collective over the pipeline. */
static void zero(void)
{
    state_of((struct l9_case){2, 2, 2, 0});
    good();
    ob[5].zero_digest[0] ^= 1;
    expect("zero", "rank 5 (dp 1, tp 1, stage 0) and rank 1 (dp 0, the same TP rank and "
           "stage) hold different parameters", "the replicas apart");
    good();
    ob[2].zero_floats[1] = 0;
    expect("zero", "the gradients were not summed over the DP group", "no reduce-scatter");
    good();
    ob[2].zero_floats[2] = 0;
    expect("zero", "the updated shares were not gathered", "no all-gather");
    good();
    ob[6].zero_floats[0] += ob[6].zero_floats[1], ob[6].zero_floats[1] = ob[6].zero_floats[2] = 0;
    expect("zero", "an all-reduce of the whole gradient and nothing gathered: the step ran as "
           "without ZeRO-1", "m->zero ignored");
    good();
    ob[0].zero_floats[0] += ob[0].zero_floats[1];
    expect("zero", "more: the gradients or the parameters crossed the DP group more than once",
           "an all-reduce and a reduce-scatter both");
    good();
    for (int r = 0; r < NR; r++) ob[r].zero_norm[0] = st.ref_norm[0][0] / sqrt(2.0);
    expect("zero", "that is the norm of its DP share alone", "the shares' squares not summed");
    good();
    for (int r = 0; r < NR; r++) ob[r].zero_norm[1] = st.ref_norm[0][1] * sqrt(2.0);
    expect("zero", "that is sqrt(dp) = sqrt(2) too large", "the replicas counted");
    good();
    ob[1].zero_grads.rel = 1e-2;
    snprintf(ob[1].zero_grads.name, sizeof ob[1].zero_grads.name, "wte");
    expect("zero", "the gradient AdamW was given, in its DP share of wte has relative L2 error "
           "0.01", "a share's gradient off");
    good();
    /* a share's decay flags: rank 6's share of the head's run (dp 1 of 2: [4128, 8256) of
     * 8256 floats) off by lr x weight decay on 64 floats while rank 2's is right */
    st.free_opt[0] = pl_adamw_config_default();
    ob[6].zero_shares[2] = (struct l9_share_err){.step_rel = 1e-3, .off = 64, .first = 4128,
                                                 .last = 4191, .p0_sq = 1, .what = 1};
    ob[6].zero_shares[2].dot = (double)st.free_opt[0].lr * st.free_opt[0].weight_decay;
    expect("zero", "1 of the 2 DP replicas of rank 6 (dp 1, tp 0, stage 1) held one device's "
           "summed gradient and AdamW's step of it in their shares of its head's run (rep) "
           "(8256 floats), and it did not in its share, [4128, 8256)", "a share's step off");
    expect("zero", "each of those floats is off by 0.0001 of itself, about lr x weight decay",
           "a share's decay flags");
    good();
    ob[6].zero_shares[2] = (struct l9_share_err){.grad_rel = 1e-2, .off = 1, .first = 4128,
                                                 .last = 4128};
    expect("zero", "at an end of its share: the share's bounds are not fourd.h's",
           "a share's first float not summed");
    good();
    /* every replica's share off: a bug of the sum or the step, left to the other checks */
    for (int r = 0; r < NR; r++) ob[r].zero_shares[0].grad_rel = 1e-2;
    all_pass("every share of a run off alike");
    good();
    ob[3].zero_optim *= 2;
    expect("zero", "2.00 times the shares': the moments of everything the rank holds",
           "the moments whole");
    good();
    ob[3].zero_optim = 8.0 * (double)st.ref[0].layout.numel + 8;
    expect("zero", "is rep a pl_model made with PL_MODEL_OPTIM", "the whole model's moments");
    good();
    ob[3].zero_optim -= 8;
    expect("zero", "fewer: AdamW keeps m and v for every float", "moments short");
    good();
    ob[4].zero_runs = 1;
    expect("zero", "rank 4: the runs with m->zero = 1 stopped before their end", "a run cut");
    good();
    ob[0].zero_dp_wait_size = ob[2].zero_dp_wait_size = 2; /* stages 0 and 1 of replica 0 */
    expect("zero", "with m->zero = 1, rank 2 (dp 0, tp 0, stage 1) ran a collective over 2 "
           "ranks", "the DP sum after a pipeline collective, the latest stage named");
    good();
    ob[3].zero_dp_wait_size = 1; /* a group of one holds nothing back */
    all_pass("a collective on a group of one before the DP sum");
    good();
    for (int r = 0; r < NR; r++) ob[r].zero_optim = 0;
    ob[0].has_zero = 0;
    struct gr_why w;
    CHECK(judge("zero", &w), "a case without ZeRO-1 runs (dp = 1) fails: %s", first(&w));
    state_of((struct l9_case){4, 1, 2, 0});
    good();
    all_pass("(dp,tp,pp) = (4,1,2)");
    ob[6].zero_optim = 8.0 * l9_dp_floats(&st.train[0].cfg, &st.ref[0].layout, &st.cases[0],
                                          ob[6].coord[2], &(double){0}, &(double){0},
                                          &(double){0});
    expect("zero", "4.00 times the shares'", "the moments whole on dp = 4");
}

#endif
