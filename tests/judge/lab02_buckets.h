/* tests/judge/lab02_buckets.h: the bucket plan's and the overlap's part of Lab 2's judge
 * test, included by tests/judge/02-ddp.c after its helpers (judge, good, in_case, first):
 * one translation unit, as tests/testing.h's counters want, in files under 600 lines. */
#ifndef LAB02_BUCKETS_JUDGE_TEST_H
#define LAB02_BUCKETS_JUDGE_TEST_H

/* "[off, off+count), NAME" or "[off, off+count), FIRST .. LAST", as the judge names ranges. */
static void range_of(size_t off, size_t count, char *buf, size_t blen)
{
    const struct pl_param_desc *a = l2_tensor_at(&lay, off), *b = l2_tensor_at(&lay, off + count - 1);
    if (a == b) snprintf(buf, blen, "[%zu, %zu), %s", off, off + count, a->name);
    else snprintf(buf, blen, "[%zu, %zu), %s .. %s", off, off + count, a->name, b->name);
}

/* ---- the bucket plan: any plan of ddp.h's contract passes, each invariant broken fails ---- */

/* Whole tensors packed from the START of the flat buffer while they fit, then numbered from
 * the end as the contract numbers them: another plan with the fewest buckets. */
static int front_plan(size_t bytes, size_t *off, size_t *len)
{
    size_t cap = bytes / sizeof(float), o[256], l[256];
    int b = -1;
    for (int t = 0; t < lay.n_tensors; t++) {
        if (b < 0 || l[b] + lay.tensors[t].numel > cap) {
            o[++b] = lay.tensors[t].offset;
            l[b] = 0;
        }
        l[b] += lay.tensors[t].numel;
    }
    for (int i = 0; i <= b; i++) {
        off[i] = o[b - i];
        len[i] = l[b - i];
    }
    return b + 1;
}

/* The plan's reason as the traffic part words it, into why; 1 when the plan passes. */
static int plan_judged(size_t bytes, int n, const size_t *off, const size_t *len,
                       struct l2_plan_fig *pf, struct gr_why *why)
{
    struct l2_obs obs[NP];
    good(obs, DDP_BUCKETED, 1, 1);
    for (int r = 0; r < NP; r++) obs[r].c.opt.bucket_bytes = bytes;
    int ok = l2_judge_plan(&lay, bytes, n, off, len, pf);
    obs[0].traffic = (struct l2_tfig){.code = ok ? L2_T_NONE : L2_T_PLAN, .plan = *pf};
    int passed = judge(0, "traffic", obs, NP, why);
    CHECK(passed == ok, "the traffic part follows the plan's verdict (%d, %d)", passed, ok);
    return ok && passed;
}

/* A plan of BUCKET_SMALL that fails with code at bucket, saying both texts. */
static void fails_with(int n, const size_t *off, const size_t *len, int code, int bucket,
                       const char *text1, const char *text2, const char *what)
{
    struct gr_why why;
    struct l2_plan_fig pf;
    CHECK(!plan_judged(BUCKET_SMALL, n, off, len, &pf, &why) && pf.code == code &&
              pf.bucket == bucket && said(&why, text1) && said(&why, text2),
          "%s: %s", what, first(&why));
}

static void plan_reasons(void)
{
    struct gr_why why;
    struct l2_plan_fig pf;
    size_t off[256], len[256], cap = BUCKET_SMALL / sizeof(float);
    char want[1024], r[256];
    int fewest = l2_fewest_plan(&lay, BUCKET_SMALL, off, len);
    CHECK(plan_judged(BUCKET_SMALL, fewest, off, len, &pf, &why) && pf.want_n == fewest,
          "the plan filled from the end passes: %s", first(&why));
    /* every bucket within the cap, unless one tensor alone (wte and head.w exceed it) */
    int alone = 0;
    for (int i = 0; i < fewest; i++) {
        CHECK(len[i] <= cap || l2_tensor_at(&lay, off[i])->numel == len[i],
              "bucket %d of the fewest plan keeps the cap", i);
        alone += len[i] > cap;
    }
    CHECK(alone >= 2, "the graded model has tensors larger than a bucket (%d)", alone);
    size_t fo[256], fl[256];
    int nf = front_plan(BUCKET_SMALL, fo, fl);
    CHECK(nf == fewest && memcmp(fo, off, (size_t)nf * sizeof *fo),
          "filling from the front gives another plan of as many buckets (%d, %d)", nf, fewest);
    CHECK(plan_judged(BUCKET_SMALL, nf, fo, fl, &pf, &why),
          "another plan of the contract passes too: %s", first(&why));
    /* a bucket exactly as large as bucket_bytes is within it */
    size_t exact = len[0] * sizeof(float);
    int ne = l2_fewest_plan(&lay, exact, off, len);
    CHECK(len[0] * sizeof(float) == exact && plan_judged(exact, ne, off, len, &pf, &why),
          "a bucket of exactly bucket_bytes passes: %s", first(&why));

    /* one bucket per tensor: within the cap, but more buckets than the fewest */
    for (int i = 0; i < lay.n_tensors; i++) {
        off[i] = lay.tensors[lay.n_tensors - 1 - i].offset;
        len[i] = lay.tensors[lay.n_tensors - 1 - i].numel;
    }
    int pair = -1;
    for (int i = 0; i + 1 < lay.n_tensors && pair < 0; i++)
        if (len[i] + len[i + 1] <= cap) pair = i;
    CHECK(!plan_judged(BUCKET_SMALL, lay.n_tensors, off, len, &pf, &why) &&
              pf.code == L2_P_MORE && pf.bucket == pair && pair >= 0,
          "a bucket per tensor is too many: %s", first(&why));
    snprintf(want, sizeof want, "bucket_bytes %u: your plan has %d buckets where %d can hold "
             "the model within bucket_bytes: buckets %d and %d", BUCKET_SMALL, lay.n_tensors,
             fewest, pair, pair + 1);
    CHECK(said(&why, want) && said(&why, "pays the all-reduce's latency once"),
          "its words: %s", first(&why));

    /* numbered from the front: bucket 0 must end at the end of the buffer */
    fewest = l2_fewest_plan(&lay, BUCKET_SMALL, off, len);
    size_t ro[256], rl[256];
    for (int i = 0; i < fewest; i++) {
        ro[i] = off[fewest - 1 - i];
        rl[i] = len[fewest - 1 - i];
    }
    fails_with(fewest, ro, rl, L2_P_END, 0, "it must end at the end of the flat buffer",
               "backward makes the gradients final from there", "numbered from the front");
    /* bucket 1 overlapping bucket 0 */
    memcpy(ro, off, sizeof ro);
    memcpy(rl, len, sizeof rl);
    rl[1] += 1;
    fails_with(fewest, ro, rl, L2_P_END, 1, "overlapping the bucket before it",
               "where bucket 0 begins", "overlapping buckets");
    /* a bucket that begins inside a tensor (buckets cut at exact byte counts) */
    memcpy(ro, off, sizeof ro);
    memcpy(rl, len, sizeof rl);
    ro[1] += 1;
    rl[1] -= 1;
    rl[2] += 1;
    fails_with(fewest, ro, rl, L2_P_SPLIT, 1, "which begins inside tensor",
               "a bucket holds whole tensors", "a tensor split between buckets");
    /* bucket_bytes read as floats: four times the cap */
    int nq = l2_fewest_plan(&lay, 4 * BUCKET_SMALL, ro, rl);
    int over = 0;
    while (over < nq && (rl[over] <= cap || l2_tensor_at(&lay, ro[over])->numel == rl[over]))
        over++;
    CHECK(over < nq && !plan_judged(BUCKET_SMALL, nq, ro, rl, &pf, &why) &&
              pf.code == L2_P_CAP && pf.bucket == over,
          "buckets four times too large: %s", first(&why));
    range_of(ro[over], rl[over], r, sizeof r);
    snprintf(want, sizeof want, "bucket_bytes %u: bucket %d is elements %s, %d tensors in %zu "
             "bytes, more than bucket_bytes", BUCKET_SMALL, over, r, pf.tensors,
             rl[over] * sizeof(float));
    CHECK(said(&why, want) && said(&why, "bucket_bytes counts bytes, and m->grads holds 4-byte"),
          "its words: %s", first(&why));
    /* the last bucket left out of the count: the front of the buffer in no bucket */
    CHECK(!plan_judged(BUCKET_SMALL, fewest - 1, off, len, &pf, &why) &&
              pf.code == L2_P_UNCOVERED && pf.end == off[fewest - 2],
          "a plan that stops short: %s", first(&why));
    snprintf(want, sizeof want, "your %d buckets end at element %zu: elements [0, %zu)",
             fewest - 1, off[fewest - 2], off[fewest - 2]);
    CHECK(said(&why, want) && said(&why, "cover every tensor once"), "its words: %s",
          first(&why));
    /* no buckets at all, or more than tensors */
    CHECK(!plan_judged(BUCKET_SMALL, 0, off, len, &pf, &why) && pf.code == L2_P_COUNT &&
              said(&why, "ddp_num_buckets says 0"),
          "no buckets: %s", first(&why));
    CHECK(!plan_judged(BUCKET_SMALL, lay.n_tensors + 1, off, len, &pf, &why) &&
              pf.code == L2_P_COUNT,
          "more buckets than tensors: %s", first(&why));
}

static void overlap_reasons(void)
{
    struct l2_obs obs[NP];
    struct gr_why why;
    good(obs, DDP_OVERLAPPED, 1, 1);
    snprintf(obs[0].overlap.err, sizeof obs[0].overlap.err, "rank 1 has no events");
    CHECK(!judge(0, "overlap", obs, NP, &why) &&
              !strcmp(first(&why), "your step's trace could not be replayed: rank 1 has no "
                                   "events"), "no replay: %s", first(&why));
    obs[0].overlap = (struct l2_ofig){.replayed = 1, .hidden = 0.6, .exposed = 4e-4,
                                      .comm = 1e-3, .step_time = 5.4e-3, .compute = 5e-3,
                                      .wall_step = 0.05, .wall_wait = 0.002};
    char want[1024];
    snprintf(want, sizeof want, "modelled on %s at GPT-2 small scale (%d ranks): your step hid "
             "60%% of the all-reduce time behind backward (400 of 1000 us exposed); step 5400 us, "
             "between the perfect-overlap bound max(compute, all-reduce) = 5000 us and the serial "
             "sum compute + all-reduce = 6000 us; full marks from %.0f%% hidden, none up to %.0f%% "
             "(blocking all-reduces after backward hide nothing)", OVERLAP_PROFILE, NP,
             100 * OVERLAP_FULL, 100 * OVERLAP_NONE);
    CHECK(judge(0, "overlap", obs, NP, &why) && !strcmp(first(&why), want) && why.n == 2 &&
              why.fraction == 1 && said(&why, "rank 0's step took 50.00 ms, 2.00 ms of it"),
          "full marks: %s", first(&why));
    obs[0].overlap.hidden = 0.5 * (OVERLAP_FULL + OVERLAP_NONE);
    CHECK(judge(0, "overlap", obs, NP, &why) && fabs(why.fraction - 0.5) < 1e-12 && why.n == 3 &&
              said(&why, "start each bucket's pl_all_reduce_async from the backward hook"),
          "half marks: %g", why.fraction);
    obs[0].overlap.hidden = 0;
    CHECK(judge(0, "overlap", obs, NP, &why) && why.fraction == 0, "none hidden");

    /* a bucket started one hook late: the overlap fails, whatever the replay hid */
    obs[0].overlap.hidden = 0.9;
    size_t start, n;
    int blk = 2;
    pl_model_part_range(&lay, blk, &start, &n);
    obs[1].late = (struct l2_late_fig){.found = 1, .step = 3, .off = start, .count = n,
                                       .where = L2_IN_HOOK, .part = blk - 1};
    char rg[256];
    range_of(start, n, rg, sizeof rg);
    snprintf(want, sizeof want, "on rank 1: step 4: the all-reduce of gradient elements %s was "
             "issued in block %d's hook, though its range was final in block %d's hook, the call "
             "that could have started it: in DDP_OVERLAPPED each bucket's all-reduce starts as "
             "soon as its gradients exist (ddp.h), in the hook call of the part that holds its "
             "FIRST element (handout section 6)", rg, blk - 1, blk);
    CHECK(!judge(0, "overlap", obs, NP, &why) && !strncmp(first(&why), want, strlen(want)) &&
              why.n == 2 && !strncmp(why.line[1], "in: overlapped", 14),
          "late by a hook, then the case: %s", first(&why));
    obs[1].late = (struct l2_late_fig){.found = 1, .off = 0, .count = 10,
                                       .where = L2_IN_FINISH, .part = PL_PART_EMBED};
    CHECK(!judge(0, "overlap", obs, NP, &why) &&
              said(&why, "was issued in ddp_finish_gradients, though its range was final in "
                         "the embedding's hook"), "started in finish: %s", first(&why));
    obs[1].late.where = L2_OUT_OF_HOOK;
    CHECK(!judge(0, "overlap", obs, NP, &why) &&
              said(&why, "was issued after the last microbatch's backward, outside the hook, "
                         "though"), "started after backward: %s", first(&why));
    /* every overlapped case's starts are judged (a bucket at a part's first element is in the
     * tiny buckets' case only); the replay, on case 0 alone */
    CHECK(!judge(1, "overlap", obs, NP, &why) && said(&why, "outside the hook"),
          "a late start fails any overlapped case: %s", first(&why));
    obs[1].late.found = 0;
    obs[0].overlap.hidden = 0;
    CHECK(judge(1, "overlap", obs, NP, &why) && why.n == 0,
          "a later case with every start in its hook passes, unreported: %s", first(&why));
}

#endif
