/* tests/judge/09-4d.c: Lab 9's judges (grader/09-4d/judge.c) run alone, without mpirun, on
 * hand-built observations of 8 ranks: a right run built from lib/grid.h's layout and the
 * formulas the judges hold the code to (each part passes, ZeRO-1's and the plan's too), then each part's
 * reasons, made by changing one rank's observation as a wrong submission would (the
 * vocabulary-parallel head's among them).
 *
 *   09-4d            the hand-built cases
 *
 * Lab 9's judges read the single-device reference from the run's state (the losses, the
 * norms and, for the clip's diagnosis, the gradients), which only a run of the driver
 * computes: a recorded file holds observations alone, so this program takes none. The
 * end-to-end records in tests/labs/09-4d.tests judge real runs.
 * Exit 0 when every check holds; each failed one is printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grid.h"
#include "plan.h"
#include "plan_rules.h"
#include "lab09.h"
#include "sp_block.h"
#include "tp_shard.h"
#include "../testing.h"
#include "judge_test.h"

#define NR 8

static struct l9_state st;
static struct l9_obs ob[NR];

static int judge(const char *part, struct gr_why *why)
{
    struct gr_obs all = {NR, sizeof ob[0], (const unsigned char *)ob};
    gr_why_init(why);
    return l9_judge(&st, 0, part, &all, why);
}

static void expect(const char *part, const char *text, const char *what)
{
    struct gr_why w;
    int ok = judge(part, &w);
    CHECK(!ok && said(&w, text), "%s: %s: expected a failure saying \"%s\", got %s: %s", part,
          what, text, ok ? "a pass" : "a failure", first(&w));
}

/* Rank r's view of the grid of (dp, tp, pp) under order, as lib/grid.h lays it out. */
static void grid_view(const struct l9_case *k, const char *order, int r, int coord[3],
                      int size[3], int members[3][L9_MAX_RANKS])
{
    static const char *axes[3] = {"dp", "tp", "pp"};
    struct pl_grid g;
    char degrees[64], err[256];
    snprintf(degrees, sizeof degrees, "tp=%d,pp=%d,dp=%d", k->tp, k->pp, k->dp);
    if (pl_grid_init(&g, order, degrees, NR, err, sizeof err) != 0) {
        printf("internal: %s\n", err);
        exit(2);
    }
    for (int a = 0; a < 3; a++) {
        int axis = pl_grid_axis(&g, axes[a]);
        coord[a] = pl_grid_coord(&g, r, axis);
        size[a] = pl_grid_group(&g, r, axis, members[a]);
    }
}

/* The state of case k: its model, batch, the reference's losses and norms, and gradients
 * that are zero but for h.0.ln1.w, all ones (a tensor every TP rank holds whole): one
 * device's norm is then sqrt(C). */
static void state_of(struct l9_case k)
{
    static double loss[L9_K_STEPS];
    static float *grads;
    if (grads) pl_model_layout_free(&st.ref[0].layout);
    free(grads);
    memset(&st, 0, sizeof st);
    st.np = NR, st.ncases = 1, st.cases[0] = k;
    st.train[0].cfg = l9_config(7);
    st.train[0].global_B = k.dp * L9_MICRO * L9_MB_SEQS;
    for (int s = 0; s < L9_K_STEPS; s++) loss[s] = 5.5 - 0.1 * s;
    st.free[0].loss = loss;
    struct gr_reference *ref = &st.ref[0];
    pl_model_layout_init(&ref->layout, &st.train[0].cfg);
    ref->numel = ref->layout.numel;
    grads = calloc(L9_K_STEPS * ref->numel, sizeof(float));
    const struct pl_param_desc *ln = pl_model_find_param(&ref->layout, "h.0.ln1.w");
    for (int s = 0; s < L9_K_STEPS; s++)
        for (size_t j = 0; j < ln->numel; j++) grads[s * ref->numel + ln->offset + j] = 1.0f;
    ref->grads = grads;
    for (int s = 0; s < L9_K_STEPS; s++) st.ref_norm[0][s] = sqrt((double)ln->numel);
}

/* What the bytes one block keeps come to under recomputation rc, on this case. */
static double kept(enum pl_recompute rc)
{
    const struct pl_model_config *c = &st.train[0].cfg;
    return pl_sp_block_saved_bytes(c, st.cases[0].tp, L9_MB_SEQS, c->seq_len, rc);
}

/* Rank o's stage's order of work under 1F1B with m = L9_MICRO: min(p - s - 1, m) forwards,
 * then a forward and a backward in turn, then the last backwards; each call's ctx.seq0 the
 * replica's first sequence + j B/(dp m). */
static void one_f_one_b(struct l9_obs *o, int p)
{
    const int m = L9_MICRO, s = o->coord[2];
    const long long first = (long long)o->coord[0] * m * L9_MB_SEQS;
    int warm = p - s - 1 < m ? p - s - 1 : m, n = 0, f = 0, b = 0;
    while (f < warm) o->ops[n++] = (struct l9_op){'F', first + f++ * L9_MB_SEQS};
    while (f < m) {
        o->ops[n++] = (struct l9_op){'F', first + f++ * L9_MB_SEQS};
        o->ops[n++] = (struct l9_op){'B', first + b++ * L9_MB_SEQS};
    }
    while (b < m) o->ops[n++] = (struct l9_op){'B', first + b++ * L9_MB_SEQS};
    o->nops = n;
}

/* Every stage of the state's case runs all forwards, then all backwards (AFAB): or, with
 * one_at_a_time, each microbatch forward and back before the next. */
static void reorder(int one_at_a_time)
{
    for (int r = 0; r < NR; r++) {
        const long long first = (long long)ob[r].coord[0] * L9_MICRO * L9_MB_SEQS;
        for (int j = 0; j < L9_MICRO; j++) {
            struct l9_op f = {'F', first + j * L9_MB_SEQS}, b = {'B', first + j * L9_MB_SEQS};
            ob[r].ops[one_at_a_time ? 2 * j : j] = f;
            ob[r].ops[one_at_a_time ? 2 * j + 1 : L9_MICRO + j] = b;
        }
    }
}

/* The vocab part of a right run: on the last stage with t > 1 a t-th of one device's head's
 * FLOPs, its slice's logits and their gradient held, the SP conjugates and (t + 2) n floats
 * of statistics on tp_comm a head run, the TP group's heads equal; every rank's loss with
 * logits in the hundreds one device's. */
static void vocab_good(struct l9_obs *o)
{
    const struct l9_case *k = &st.cases[0];
    const struct pl_model_config *c = &st.train[0].cfg;
    const int n = L9_MB_SEQS * c->seq_len, runs = L9_K_STEPS * L9_MICRO, t = k->tp;
    o->vocab_big_loss = o->vocab_big_ref = 136.9;
    o->has_vocab = t > 1 && o->coord[2] == k->pp - 1;
    if (!o->has_vocab) return;
    o->vocab_runs = runs;
    o->vocab_flops = runs * pl_part_flops(c, c->n_layers, L9_MB_SEQS, c->seq_len) / t;
    o->vocab_peak = 4.0 * (2.0 * n * c->vocab / t + 2.0 * n * c->d_model);
    o->vocab_tp_floats = runs * (2.0 * n * c->d_model + (t + 2.0) * n);
    o->vocab_digest = 1000u + (unsigned)o->coord[0];
}

/* Every rank of a right run of the state's case: its grid, the reference's losses and
 * norms, the pipeline's bytes, every order of the axes and the refusals, and activation
 * peaks lowered by exactly what each recomputation leaves unsaved in the blocks in flight. */
static void good(void)
{
    const struct l9_case *k = &st.cases[0];
    const struct pl_model_config *c = &st.train[0].cfg;
    memset(ob, 0, sizeof ob);
    for (int r = 0; r < NR; r++) {
        struct l9_obs *o = &ob[r];
        grid_view(k, L9_ORDER, r, o->coord, o->size, o->members);
        o->stage_blocks = c->n_layers / k->pp;
        fourd_stage_blocks(c->n_layers, k->pp, o->coord[2], &o->stage_b0, &o->stage_b1);
        for (int s = 0; s < L9_K_STEPS; s++)
            o->loss[s] = st.free[0].loss[s], o->norm[s] = st.ref_norm[0][s];
        snprintf(o->params.name, sizeof o->params.name, "h.1.attn.w_qkv (shard 1 of 2)");
        o->grads.name[0] = o->clipped_params.name[0] = '\0';
        o->p2p_bytes = L9_K_STEPS * l9_p2p_bytes(c, k, o->coord[2], st.train[0].global_B);
        double shards, embed, head;
        o->dp_floats = L9_K_STEPS * (l9_dp_floats(c, &st.ref[0].layout, k, o->coord[2], &shards,
                                                  &embed, &head) + 1);
        for (int s = 0; s < L9_K_STEPS; s++)
            for (int j = 0; j < L9_MICRO; j++) {
                struct l9_feed f = {(o->coord[0] * L9_MICRO + j) * L9_MB_SEQS, L9_MB_SEQS};
                if (o->coord[2] == 0) o->emb[s][j] = f, o->emb_calls[s] = L9_MICRO;
                if (o->coord[2] == k->pp - 1) o->head[s][j] = f, o->head_calls[s] = L9_MICRO;
            }
        one_f_one_b(o, k->pp);
        /* the DP sum bucket by bucket: block l's as soon as the last microbatch has left it,
         * the head's and the embedding's in their own */
        o->cd_backs = L9_MICRO * o->stage_blocks;
        o->cd_first_dp = o->cd_backs - o->stage_blocks + 1;
        o->cd_dp_calls = o->stage_blocks + (o->coord[2] == 0) + (o->coord[2] == k->pp - 1);
        o->has_orders = 1;
        for (int j = 1; j < L9_NORDERS; j++)
            grid_view(k, L9_ORDERS[j], r, o->orders[j].coord, o->orders[j].size,
                      o->orders[j].members);
        for (int j = 0; j < L9_NBAD; j++) o->bad_ret[j] = -1;
        o->has_recompute = 1;
        const double blocks = (double)l9_in_flight(k->pp, o->coord[2], L9_MICRO) *
                              o->stage_blocks;
        /* ZeRO-1: the replicas agree, one sum and one gather of the padded runs a step (and
         * the loss's and the norm's floats), 8 bytes a float of the rank's shares */
        o->has_zero = 1, o->zero_runs = 2;
        for (int s = 0; s < L9_K_STEPS; s++)
            o->zero_loss[s] = st.free[0].loss[s], o->zero_norm[s] = st.ref_norm[0][s];
        o->zero_digest[0] = 100u * (unsigned)o->coord[1] + (unsigned)o->coord[2];
        o->zero_digest[1] = o->zero_digest[0];
        const double n[3] = {shards, embed, head};
        double padded = 0, own = 0;
        for (int j = 0; j < 3; j++) {
            size_t lo, mine, chunk = ((size_t)n[j] + (size_t)k->dp - 1) / (size_t)k->dp;
            l9_zero_share((size_t)n[j], k->dp, o->coord[0], &lo, &mine);
            padded += (double)chunk * k->dp, own += (double)mine;
        }
        o->zero_floats[0] = 2 * L9_K_STEPS;
        o->zero_floats[1] = o->zero_floats[2] = L9_K_STEPS * padded;
        o->zero_optim = 8 * own;
        vocab_good(o);
        o->activ_peak[PL_RECOMPUTE_NONE] = 1e6;
        for (int rc = PL_RECOMPUTE_SELECTIVE; rc <= PL_RECOMPUTE_FULL; rc++) {
            double saved = blocks * (kept(PL_RECOMPUTE_NONE) - kept((enum pl_recompute)rc));
            if (rc == PL_RECOMPUTE_FULL) saved -= kept(PL_RECOMPUTE_NONE);
            o->activ_peak[rc] = 1e6 - saved;
        }
    }
}

static void all_pass(const char *what)
{
    static const char *parts[] = {"correct", "clip", "grid", "traffic", "recompute", "bubble",
                                  "overlap", "zero", "vocab", "plan", "time"};
    for (int p = 0; p < (int)(sizeof parts / sizeof *parts); p++) {
        struct gr_why w;
        int ok = judge(parts[p], &w);
        CHECK(ok, "%s: a right run fails %s: %s", what, parts[p], first(&w));
    }
}

#include "lab09_zero.h" /* zero(): the ZeRO-1 part */

static void correct_and_clip(void)
{
    state_of((struct l9_case){2, 2, 2, 0});
    good();
    all_pass("(dp,tp,pp) = (2,2,2)");
    ob[3].grid_ret = -1;
    expect("correct", "fourd_grid_new returned -1 on rank 3 for order tp-pp-dp, dp=2 tp=2 pp=2",
           "a grid refused");
    /* an outside review's split of its own (the extra blocks in front): same numbers */
    good();
    ob[2].stage_b0 = 0, ob[2].stage_b1 = 3;
    expect("correct", "rank 2, stage 1 of 2: the model holds blocks [0, 3), where "
           "fourd_stage_blocks gives that stage [2, 4) of the 4",
           "a stage's blocks not fourd_stage_blocks'");
    good();
    ob[5].loss[1] *= 1.01;
    expect("correct", "step 1: rank 5's fourd_step returned loss", "one rank's loss off");
    good();
    ob[6].params.rel = 3e-3;
    char want[160];
    snprintf(want, sizeof want, "rank 6 (dp %d, tp %d, stage %d) holds h.1.attn.w_qkv "
             "(shard 1 of 2) with relative L2 error 0.003", ob[6].coord[0], ob[6].coord[1],
             ob[6].coord[2]);
    expect("correct", want, "one rank's parameters off, named with its coordinates");
    /* the data each replica's microbatches take: strided over the replicas (the same sum
     * without dropout), rows copied from nowhere in the batch, a microbatch too many; a
     * stage whose ends are not run through pl_parts_forward is not observed */
    good();
    for (int s = 0; s < L9_K_STEPS; s++)
        for (int j = 0; j < L9_MICRO; j++) ob[4].emb[s][j].seq = (j * 2 + 1) * L9_MB_SEQS;
    expect("correct", "from the batch's sequences 2, 6, 10, 14 in turn", "strided microbatches");
    expect("correct", "replica 1's 4 microbatches start at 8, 10, 12, 14, with 2 sequences each",
           "the contract's rows");
    good();
    ob[7].head[1][2].seq = -1;
    expect("correct", "the head's targets of 2 sequences each, from the batch's sequences 8, "
           "10, ?, 14", "rows that are no run of the batch");
    good();
    ob[0].emb_calls[0] = L9_MICRO + 1;
    expect("correct", "rank 0 (dp 0, tp 0, stage 0) ran 5 microbatches", "one call too many");
    good();
    for (int r = 0; r < NR; r++)
        for (int s = 0; s < L9_K_STEPS; s++) ob[r].emb_calls[s] = ob[r].head_calls[s] = 0;
    all_pass("ends run without pl_parts_forward");
    /* the classic 4D norm bugs */
    good();
    for (int r = 0; r < NR; r++)
        for (int s = 0; s < L9_K_STEPS; s++) ob[r].norm[s] *= sqrt(2.0);
    expect("clip", "that is sqrt(dp) = sqrt(2) too large", "replicas summed dp times");
    good();
    ob[4].norm[0] *= 0.5;
    expect("clip", "too small: some parameters' squares never reach the sum", "a norm short");
    good();
    ob[1].grads.rel = 1e-2;
    snprintf(ob[1].grads.name, sizeof ob[1].grads.name, "lnf.w");
    expect("clip", "the last step's gradient AdamW was given on rank 1",
           "the clip not applied");
    /* dp = 1, tp = 2: a norm that counts the TP-replicated layernorm once per TP rank */
    state_of((struct l9_case){1, 2, 4, 0});
    good();
    all_pass("(dp,tp,pp) = (1,2,4)");
    for (int r = 0; r < NR; r++)
        for (int s = 0; s < L9_K_STEPS; s++)
            ob[r].norm[s] = sqrt(2.0) * st.ref_norm[0][s];
    expect("clip", "counted t = 2 times, once per TP rank",
           "replicated layernorm counted t times");
    expect("clip", "blocks' layernorms and replicated biases", "which tensors, named");
}

/* The bubble of each pipeline's order with uniform stage times: 1F1B's and AFAB's are
 * (p-1)/(m+p-1); one microbatch at a time is not; an order that waits forever; a count off;
 * without a ctx the calls are counted; stages whose blocks are not sp_block.h's are not
 * observed. */
static void bubble(void)
{
    state_of((struct l9_case){2, 2, 2, 0});
    good();
    reorder(0);
    all_pass("AFAB on (2,2,2)");
    reorder(1);
    expect("bubble", "the pipeline of DP replica 0, TP rank 0 idles 50.0% of the step",
           "one microbatch at a time");
    expect("bubble", "(p-1)/(m+p-1) = 1/5 = 20.0%", "the formula, with numbers");
    expect("bubble", "stage 0's order of work (its first block's calls in the first step): F0 "
           "B0 F1 B1 F2 B2 F3 B3", "the order, read back");
    expect("bubble", "stage 0 runs microbatch 0's backward before microbatch 1's forward",
           "the warm-up named");
    good();
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < 2 * L9_MICRO; j++) ob[r].ops[j].seq0 = -1;
    all_pass("no ctx: microbatches by count");
    good();
    /* stage 1 (ranks 2, 3, 6, 7) takes a second forward before it sends the first backward
     * back, while stage 0 waits for that backward before its second forward */
    reorder(1);
    for (int r = 0; r < NR; r++)
        if (ob[r].coord[2] == 1) {
            const struct l9_op b0 = ob[r].ops[1];
            ob[r].ops[1] = ob[r].ops[2], ob[r].ops[2] = b0;
        }
    expect("bubble", "stage 1's order of work (its first block's calls in the first step) is "
           "F0 F1 B0 B1 F2 B2 F3 B3, which waits", "an order that cannot run");
    good();
    ob[5].nops = 2 * L9_MICRO + 1;
    expect("bubble", "rank 5 (dp 1, tp 1, stage 0) ran its first block forward", "a call too many");
    good();
    for (int r = 0; r < NR; r++) ob[r].nops = 0;
    all_pass("blocks not run through sp_block.h");
    /* a collective over the pipeline between a stage's last backward and its DP sum: named
     * on the latest stage that waited; nothing to lose without a pipeline or a DP group */
    good();
    ob[0].dp_wait_size = ob[2].dp_wait_size = 2;
    expect("bubble", "rank 2 (dp 0, tp 0, stage 1) ran a collective over 2 ranks",
           "the DP sum behind the pipeline");
    good();
    ob[3].dp_wait_size = 1;
    all_pass("a collective of one rank holds nothing");
    state_of((struct l9_case){2, 4, 1, 0});
    good();
    reorder(1);
    for (int r = 0; r < NR; r++) ob[r].dp_wait_size = 4;
    all_pass("one stage: no bubble to lose");
    state_of((struct l9_case){1, 2, 4, 0});
    good();
    for (int r = 0; r < NR; r++) ob[r].dp_wait_size = 4;
    all_pass("no DP group: no sum to hold");
}

static void grid_and_traffic(void)
{
    state_of((struct l9_case){2, 2, 2, 0});
    good();
    /* rank 1's TP group across the nodes, as tp outermost would make it */
    ob[1].members[1][0] = 1, ob[1].members[1][1] = 5;
    expect("grid", "rank 1: its tp group is ranks {1,5}", "a TP group laid out wrong");
    expect("grid", "that TP group spans nodes of 4 ranks", "the node crossing named");
    good();
    ob[2].orders[3].coord[2] ^= 1;
    char want[96];
    snprintf(want, sizeof want, "order %s (leftmost varies fastest)", L9_ORDERS[3]);
    expect("grid", want, "another order's grid wrong");
    expect("grid", "the grid test asks every permutation", "every order asked, said");
    good();
    ob[7].bad_ret[4] = 0;
    expect("grid", "returned 0 on 8 ranks, where fourd.h's contract is -1: the degrees' "
           "product is not the world's size", "degrees that do not fit accepted");
    good();
    ob[7].bad_ret[1] = 0;
    expect("grid", "the order is not a permutation of tp, pp and dp", "a bad order accepted");
    good();
    ob[2].sp_inter = 4096;
    expect("traffic", "rank 2 sent 4096 bytes of all-gathers and reduce-scatters (the SP "
           "conjugates) across nodes", "SP traffic between nodes");
    good();
    ob[0].p2p_bytes *= 2;
    expect("traffic", "more than that: a whole sequence sent", "pipeline bytes doubled");
    /* the DP sum: twice a step, or never */
    good();
    ob[6].dp_floats = 2 * ob[6].dp_floats;
    expect("traffic", "the gradients crossed the DP group more than once a step",
           "the DP sum made twice");
    good();
    ob[6].dp_floats = 0;
    expect("traffic", "fewer: some gradients were never summed over the DP group",
           "the DP sum skipped with dp = 2");
    {
        double blocks, embed, head;
        const double g = l9_dp_floats(&st.train[0].cfg, &st.ref[0].layout, &st.cases[0],
                                      ob[6].coord[2], &blocks, &embed, &head);
        CHECK(ob[6].coord[2] == 1 && embed == 0 && head > 0 && g == blocks + head &&
                  blocks == 2.0 * pl_tp_block_numel(&st.train[0].cfg, 2),
              "the last stage's DP floats: 2 block shards and the head (got %g, %g, %g)",
              blocks, embed, head);
    }
    good();
    ob[0].p2p_bytes /= 2;
    {
        struct gr_why w;
        CHECK(!judge("traffic", &w) && !said(&w, "more than that"),
              "pipeline bytes halved: failed without the 'more' hint: %s", first(&w));
    }
}

static void recompute(void)
{
    state_of((struct l9_case){2, 2, 2, 0});
    good();
    ob[3].leak_bytes = 2048, ob[3].leak_cat = PL_MEM_ACTIV;
    expect("recompute", "rank 3 (stage 1): after fourd_model_free and fourd_grid_free, 2048 "
           "bytes of", "memory left after the free");
    good();
    ob[5].digest[PL_RECOMPUTE_FULL] ^= 1;
    expect("recompute", "with recompute full the losses or the parameters after 2 steps differ",
           "a rerun that changes the training");
    good();
    /* stage 0 holds min(p - s, m) = 2 microbatches: a saving of three is a schedule that
     * held more with none */
    const double blocks = 2.0 * ob[0].stage_blocks;
    ob[0].activ_peak[PL_RECOMPUTE_SELECTIVE] =
        1e6 - 1.5 * blocks * (kept(PL_RECOMPUTE_NONE) - kept(PL_RECOMPUTE_SELECTIVE)) - 4096;
    expect("recompute", "more than the 2 microbatches 1F1B holds at once on this stage",
           "activations held past their backward");
    good();
    ob[0].activ_peak[PL_RECOMPUTE_FULL] += 100;
    expect("recompute", "is m->recompute given to every block of every microbatch",
           "recomputation not applied to every block");
    good();
    struct gr_why w;
    CHECK(!judge("speed", &w) && said(&w, "internal: no part speed"), "an unknown part: %s",
          first(&w));
}

/* Each stage's DP sum inside its cool-down: started once every backward had begun, in one
 * collective, or never, each fails on a stage of two blocks; two buckets of two blocks pass
 * on a stage of four; a grid without a DP group and blocks not run through sp_block.h's
 * calls are not judged. */
static void cool_down(void)
{
    state_of((struct l9_case){2, 2, 2, 0});
    good();
    for (int r = 0; r < NR; r++) ob[r].cd_first_dp = ob[r].cd_backs;
    expect("overlap", "rank 0 (dp 0, tp 0, stage 0, 2 blocks) started its first DP sum",
           "the sum after the cool-down, named with its stage");
    expect("overlap", "after all 8 of its stage's block backward calls of the first step had "
           "begun", "when it started, against the backwards");
    expect("overlap", "the first DP sum must start before the stage's last block backward",
           "the rule");
    good();
    ob[6].cd_dp_calls = 1;
    expect("overlap", "rank 6 (dp 1, tp 0, stage 1, 2 blocks) sent its gradients over dp_comm "
           "in 1 collective", "one bucket");
    good();
    ob[3].cd_dp_calls = 0;
    expect("overlap", "started no collective of more than 16 floats on dp_comm", "no sum");
    good();
    for (int r = 0; r < NR; r++) ob[r].cd_backs = 0;
    all_pass("blocks not run through sp_block.h");
    state_of((struct l9_case){2, 4, 1, 0});
    good();
    for (int r = 0; r < NR; r++) ob[r].cd_first_dp = ob[r].cd_backs - 2, ob[r].cd_dp_calls = 3;
    all_pass("(2,4,1): two buckets of two blocks, and the ends'");
    state_of((struct l9_case){1, 2, 4, 0});
    good();
    for (int r = 0; r < NR; r++) ob[r].cd_first_dp = ob[r].cd_backs, ob[r].cd_dp_calls = 1;
    all_pass("no DP group: no sum to hide");
}

/* The vocab part's reasons on (2,2,2), last stage ranks 2, 3, 6, 7: the whole head's work,
 * the whole logits held, the logits on tp_comm or no statistics at all, the TP group's heads
 * apart (said by the results test too), the loss overflowing with large logits; and (4,1,2),
 * t = 1, not judged. */
static void vocab(void)
{
    state_of((struct l9_case){2, 2, 2, 0});
    good();
    ob[2].vocab_flops *= 2;
    expect("vocab", "1.00 times one device's whole head on them", "the whole head's work");
    good();
    ob[3].vocab_peak = 4.0 * 16 * 256 * 3;
    expect("vocab", "the whole vocabulary's logits (n V = 4096 floats, 16384 bytes) were held",
           "the whole logits");
    good();
    ob[6].vocab_tp_floats += L9_K_STEPS * L9_MICRO * 16 * 256;
    expect("vocab", "the logits themselves (n V/t a rank) travel", "the logits gathered");
    good();
    ob[7].vocab_tp_floats = L9_K_STEPS * L9_MICRO * 16 * 32;
    expect("vocab", "fewer: the slices' statistics did not cross the TP group", "no statistics");
    good();
    ob[2].vocab_runs = 0;
    expect("vocab", "0 head runs seen in 2 steps of 4 microbatches, 8 expected", "no run seen");
    good();
    ob[7].vocab_digest ^= 1;
    expect("vocab", "rank 7 (dp 1, tp 1, the last stage) and rank 6 (tp 0 of the same TP "
           "group) hold different heads", "the heads apart");
    ob[7].params.rel = 1e-2;
    snprintf(ob[7].params.name, sizeof ob[7].params.name, "head.w");
    expect("correct", "rank 7 (dp 1, tp 1, the last stage) and rank 6", "the results' hint");
    good();
    ob[0].vocab_big_loss = INFINITY;
    expect("vocab", "exp of a logit above 88 overflows a float", "no max subtracted");
    state_of((struct l9_case){4, 1, 2, 0});
    good();
    ob[2].vocab_flops = 1; /* never seen with t = 1: not judged */
    all_pass("vocab on t = 1");
}

/* Every rank holding the planner's figures for (2,2,2) unclipped; rank r's holding less
 * than stage 0's is right on a later stage and wrong on stage 0. */
static void plan(void)
{
    state_of((struct l9_case){2, 2, 2, 0});
    struct pl_plan_model pm;
    struct pl_plan_config cfg;
    struct pl_plan_memory p;
    l9_plan_model(&st.train[0].cfg, &st.cases[0], &pm);
    l9_plan_config(&st.cases[0], 0, PL_RECOMPUTE_NONE, &cfg);
    pl_plan_memory(&pm, NULL, &cfg, &p);
    const double want[4] = {p.params, p.grads, p.optim, p.activ};
    good();
    for (int r = 0; r < NR; r++) {
        ob[r].has_mem[L9_MEM_FREE] = 1;
        for (int c = 0; c < 4; c++) ob[r].mem[L9_MEM_FREE][c] = want[c];
    }
    struct gr_why w;
    CHECK(judge("plan", &w), "the plan's own figures fail the plan test: %s", first(&w));
    ob[2].mem[L9_MEM_FREE][L9_MEM_ACTIV] = 0; /* stage 1: fewer microbatches in flight */
    CHECK(judge("plan", &w), "a later stage holding less fails the plan test: %s", first(&w));
    ob[2].mem[L9_MEM_FREE][L9_MEM_ACTIV] = p.activ;
    ob[2].mem[L9_MEM_FREE][L9_MEM_PARAMS] += 0.2 * p.total;
    expect("plan", "grid (2,2,2), rank 2 (stage 1): it holds", "a rank over the plan");
    expect("plan", "the most over is params", "the category named");
    ob[2].mem[L9_MEM_FREE][L9_MEM_PARAMS] = p.params;
    ob[0].mem[L9_MEM_FREE][L9_MEM_ACTIV] = 0;
    expect("plan", "less than 10% under, on the stage the plan describes", "stage 0 under");
    ob[0].mem[L9_MEM_FREE][L9_MEM_ACTIV] = p.activ;
    ob[5].has_mem[L9_MEM_ZERO] = ob[0].has_mem[L9_MEM_ZERO] = 1;
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < 4; c++) ob[r].mem[L9_MEM_ZERO][c] = want[c];
    expect("plan", "grid (2,2,2) with ZeRO-1, rank 0 (stage 0)", "ZeRO-1 with whole moments");
    expect("plan", "the most over is optim", "the moments named");
}

/* A step replayed on (2,2,2) at the plan's own figures, then off it: over with a rank
 * computing more than the pacing stage, over with bytes across nodes beyond the plan's, over
 * with neither (the ranks wait), under, and a trace that does not replay. */
static void step_time(void)
{
    state_of((struct l9_case){2, 2, 2, 0});
    good();
    struct l9_time *t = &ob[0].time;
    ob[0].has_time = 1;
    memset(t, 0, sizeof *t);
    t->replayed = 1, t->with_head = 1;
    t->plan_step = 0.3689, t->plan_compute = 0.167, t->plan_bubble = 0.0305;
    t->plan_exposed[L9_T_TP] = 0.0074, t->plan_exposed[L9_T_PP] = 0.0009;
    t->plan_exposed[L9_T_DP] = 0.1632, t->plan_sent[1] = 9.55e9, t->plan_sent[0] = 3.6e9;
    for (int r = 0; r < NR; r++) {
        t->compute[r] = r % 4 < 2 ? 0.115 : 0.167;
        t->sent[r][0] = 4.5e9, t->sent[r][1] = 9.7e9;
    }
    struct gr_why w;
    t->step = 1.07 * t->plan_step;
    CHECK(judge("time", &w), "7%% over the plan fails the step time test: %s", first(&w));
    t->step = 0.93 * t->plan_step;
    CHECK(judge("time", &w), "7%% under the plan fails the step time test: %s", first(&w));
    t->step = 1.21 * t->plan_step;
    t->compute[6] = 0.222;
    expect("time", "grid (2,2,2): one step replayed at scale takes 446.4 ms, +21.0% off the "
           "plan's 368.9 ms", "the step over the plan");
    expect("time", "rank 6 computes 222.0 ms against the plan's 167.0 ms for the last stage",
           "the rank that computes too much");
    t->compute[6] = 0.167;
    t->sent[4][1] = 2 * 9.7e9;
    expect("time", "rank 4 sends 19.40 GB across nodes a step at scale, against the plan's "
           "9.55 GB", "the bytes across nodes");
    t->sent[4][1] = 9.7e9;
    t->sent[4][0] = 3 * 4.5e9; /* inside a node: the lab's head sends more than the plan's */
    expect("time", "so the ranks wait", "neither compute nor bytes across nodes: the waits");
    t->step = 0.8 * t->plan_step;
    expect("time", "faster than the plan for this configuration", "under the plan");
    t->replayed = 0;
    snprintf(t->err, sizeof t->err, "the trace cannot complete (deadlock)");
    expect("time", "one step's trace does not replay: the trace cannot complete", "no replay");
}

/* The capped run (--op capped) on (2,2,2): the device sits where Lab 8's rule admits full
 * recomputation alone, by the planner's own totals; every rank's steps finishing with one
 * device's losses and parameters pass; a loss or a tensor off, a rank that made no capped
 * run, or host memory held to dodge the device's cap, each fail with its reason. */
static void capped(void)
{
    state_of((struct l9_case){2, 2, 2, 0});
    struct l9_cap c;
    l9_cap_device(&st, 0, &c);
    char err[256];
    CHECK(c.pick == PL_RECOMPUTE_FULL, "the capped run's device admits %s, not full",
          pl_recompute_name((enum pl_recompute)c.pick));
    CHECK(pl_rule_memory(c.plan[PL_RECOMPUTE_FULL], c.device, err, sizeof err) == 0 &&
              pl_rule_memory(c.plan[PL_RECOMPUTE_SELECTIVE], c.device, err, sizeof err) != 0 &&
              pl_rule_memory(c.plan[PL_RECOMPUTE_NONE], c.device, err, sizeof err) != 0,
          "the rule on %.1f kB: full %.1f, selective %.1f, none %.1f kB planned", c.device / 1e3,
          c.plan[2] / 1e3, c.plan[1] / 1e3, c.plan[0] / 1e3);
    CHECK(fabs(PL_RULE_MEM_SHARE * c.device -
               0.5 * (c.plan[PL_RECOMPUTE_NONE] + c.plan[PL_RECOMPUTE_FULL])) < 1e-6,
          "the device's %.0f%% is not halfway between the plans", 100 * PL_RULE_MEM_SHARE);
    st.capped = 1, st.cap_rc = c.pick;
    for (int r = 0; r < NR; r++) {
        ob[r].has_cap = 1, ob[r].cap_done = 1, ob[r].cap_rc = PL_RECOMPUTE_FULL;
        for (int s = 0; s < L9_K_STEPS; s++) ob[r].cap_loss[s] = st.free[0].loss[s];
        ob[r].cap_params = (struct l9_err){0};
        ob[r].cap_host = 1600;
    }
    struct gr_why w;
    CHECK(judge("cap", &w), "a right capped run fails: %s", first(&w));
    CHECK(judge("correct", &w), "the capped run's correct part is its cap part's: %s", first(&w));
    ob[5].cap_loss[1] *= 1.001;
    expect("cap", "under the cap with recompute full, step 1: rank 5's fourd_step returned loss",
           "a loss off");
    ob[5].cap_loss[1] = st.free[0].loss[1];
    ob[3].cap_params.rel = 0.02;
    snprintf(ob[3].cap_params.name, sizeof ob[3].cap_params.name, "h.1.mlp.w_fc (shard 1 of 2)");
    expect("cap", "after 2 steps rank 3 holds h.1.mlp.w_fc (shard 1 of 2) with relative L2 error",
           "a tensor off");
    ob[3].cap_params.rel = 0;
    ob[6].cap_host = 70e3;
    expect("cap", "rank 6 held 70.0 kB of host memory (PL_HOST) at once during the steps, where "
           "4.1 kB is allowed", "host memory to dodge the cap");
    ob[6].cap_host = 1600;
    ob[2].cap_done = 0;
    expect("cap", "rank 2 did not run its steps under the cap", "no steps");
    ob[2].cap_done = 1;
    ob[0].has_cap = 0;
    expect("cap", "internal: rank 0 made no capped run", "no capped run");
    memset(ob, 0, sizeof ob);
    st.capped = 0;
}

static void hand_built(void)
{
    correct_and_clip();
    bubble();
    cool_down();
    grid_and_traffic();
    recompute();
    zero();
    vocab();
    plan();
    step_time();
    capped();
}

static void recorded(const char *path, const char *parts)
{
    (void)parts;
    printf("%s: Lab 9's judges read the reference from the run's state, which a record does "
           "not hold; run this program without arguments\n", path);
    exit(2);
}

int main(int argc, char **argv)
{
    return judge_test_main(argc, argv, hand_built, recorded);
}
