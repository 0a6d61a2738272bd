/* tests/judge/02-ddp.c: Lab 2's judge (grader/02-ddp/judge.c) run alone, without mpirun, on
 * hand-built observations and on those a check run of the solution recorded (driver
 * --record FILE):
 *
 *   02-ddp                  the hand-built cases: each reason the judge gives
 *   02-ddp FILE PARTS       every case of FILE passes PARTS (comma-separated), and the same
 *                           observations with the last rank's made wrong fail naming it
 *
 * Expected texts are built here from the same figures, never pasted. Exit 0 when every check
 * holds; each failed one is printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab02.h"
#include "../testing.h"
#include "judge_test.h"

enum { NP = 2 };


static struct pl_model_layout lay;

static int judge(int i, const char *part, const struct l2_obs *obs, int np, struct gr_why *why)
{
    struct gr_obs all = {np, sizeof *obs, (const unsigned char *)obs};
    gr_why_init(why);
    return l2_judge(i, part, &all, why);
}

/* NP ranks of a naive case that trained as one device. */
static void good(struct l2_obs *obs, enum ddp_variant v, int microbatches, int groups)
{
    memset(obs, 0, NP * sizeof *obs);
    for (int r = 0; r < NP; r++) {
        struct l2_obs *o = &obs[r];
        o->rank = r;
        o->nranks = NP;
        o->c.opt.variant = v;
        o->c.opt.bucket_bytes = v == DDP_NAIVE ? 0 : BUCKET_SMALL;
        o->c.microbatches = microbatches;
        o->c.groups = groups;
        snprintf(o->c.why, sizeof o->c.why, "a case built by hand");
        o->cfg = l2_config(0);
        o->numel = lay.numel;
        o->step_kept = o->free_kept = -64;
        o->loss = (struct l2_loss_fig){5.5, 5.5, 0, 5.5};
    }
}

/* The line "in: CASE" closes every failure. */
static int in_case(const struct l2_obs *obs, const struct gr_why *why)
{
    char cs[384], want[400];
    l2_describe_case(&obs[0].c, NP, cs, sizeof cs);
    snprintf(want, sizeof want, "in: %s", cs);
    return why->n > 0 && !strcmp(why->line[why->n - 1], want);
}

static void passes(void)
{
    struct l2_obs obs[NP];
    struct gr_why why;
    good(obs, DDP_NAIVE, 1, 1);
    CHECK(judge(0, "correct", obs, NP, &why) && why.n == 0, "a right case passes quietly: %s",
          first(&why));
    CHECK(judge(0, "traffic", obs, NP, &why) && why.n == 0, "its traffic passes");
    CHECK(judge(1, "overlap", obs, NP, &why) && why.n == 0, "overlap is judged on case 0 only");
    CHECK(!judge(0, "speed", obs, NP, &why) && said(&why, "no part 'speed'"),
          "an unknown part is refused");
    char cs[384], want[400];
    l2_describe_case(&obs[0].c, 4, cs, sizeof cs);
    snprintf(want, sizeof want, "naive, 1 microbatch, 4 ranks, %d steps of %d sequences (a case "
             "built by hand)", K_STEPS, GLOBAL_B);
    CHECK(!strcmp(cs, want), "the case line: %s", cs);
    obs[0].c.groups = 2;
    obs[0].c.opt = (struct ddp_options){.variant = DDP_BUCKETED, .bucket_bytes = 4096};
    l2_describe_case(&obs[0].c, 4, cs, sizeof cs);
    snprintf(want, sizeof want, "bucketed, bucket_bytes 4096, 1 microbatch, 4 ranks in 2 groups "
             "of 2 (every other rank, each group its own batches: ddp_new gets the group's "
             "comm), %d steps of %d sequences (a case built by hand)", K_STEPS, GLOBAL_B);
    CHECK(!strcmp(cs, want), "the groups' case line: %s", cs);
}

/* After ddp_new: rank 0 kept its own parameters, and every replica took them. */
static void setup_reasons(void)
{
    struct l2_obs obs[NP];
    struct gr_why why;
    char want[1024];
    const struct pl_param_desc *t = &lay.tensors[3];
    good(obs, DDP_NAIVE, 1, 1);
    obs[0].code = obs[1].code = L2_C_INIT_CHANGED;
    obs[0].bad_elem = t->offset + 1;
    snprintf(want, sizeof want, "after ddp_new, rank 0's parameters are no longer the ones it was "
             "initialised with (tensor %s, element %zu of the flat buffer): every replica must "
             "take rank 0's, so broadcast m->params from root 0 (handout section 3)", t->name,
             t->offset + 1);
    CHECK(!judge(0, "correct", obs, NP, &why) && !strcmp(first(&why), want) &&
              in_case(obs, &why) && why.n == 2, "rank 0 not its own: %s", first(&why));
    obs[0].code = obs[1].code = L2_C_NOT_BROADCAST;
    obs[0].bad_rank = 1;
    snprintf(want, sizeof want, "after ddp_new, rank 1's parameters differ from rank 0's (tensor "
             "%s, element %zu of the flat buffer): the ranks initialise their replicas "
             "differently, so ddp_new must broadcast rank 0's parameters (handout section 3)",
             t->name, t->offset + 1);
    CHECK(!judge(0, "correct", obs, NP, &why) && !strcmp(first(&why), want),
          "not broadcast: %s", first(&why));
}

/* A step: an all-reduce started early, memory kept, the replicas, the loss. */
static void step_reasons(void)
{
    struct l2_obs obs[NP];
    struct gr_why why;
    char want[1024], b[32];
    const struct pl_param_desc *head = &lay.tensors[lay.n_tensors - 1];
    const struct pl_param_desc *prev = &lay.tensors[lay.n_tensors - 2];
    good(obs, DDP_OVERLAPPED, 1, 1);
    obs[0].code = obs[1].code = L2_C_EARLY_START;
    obs[1].early = (struct l2_early_fig){1, 2, prev->offset, prev->numel + head->numel,
                                         head->offset, lay.n_tensors > 0 ? 4 : 0};
    snprintf(want, sizeof want, "on rank 1: step 3: the all-reduce of gradient elements [%zu, "
             "%zu), %s .. %s started in the head's hook of the last microbatch's backward, when "
             "only elements [%zu, %zu), %s had their final gradients: it may send gradients "
             "backward has not written yet (on GPUs it would). A part's hook may start only the "
             "buckets whose FIRST element is at or after the part's first element (handout "
             "section 6)", prev->offset, head->offset + head->numel, prev->name, head->name,
             head->offset, lay.numel, head->name);
    CHECK(!judge(0, "correct", obs, NP, &why) && !strcmp(first(&why), want), "early: %s",
          first(&why));
    obs[1].early.final = lay.numel;
    obs[1].early.part = L2_NO_PART;
    CHECK(!judge(0, "correct", obs, NP, &why) &&
              said(&why, "started before the hook of any part had run of the last") &&
              said(&why, "when only no gradient was final yet had"), "early, none final: %s",
          first(&why));

    good(obs, DDP_NAIVE, 1, 1);
    obs[0].code = obs[1].code = L2_C_STEP_KEPT;
    obs[0].step = obs[1].step = 1;
    obs[0].step_kept = 100;
    obs[1].step_kept = 4096;
    snprintf(want, sizeof want, "step 2: after ddp_finish_gradients rank 1 holds %s more of "
             "pl_mem_alloc's memory than before the step's first ddp_forward_backward: a step "
             "must free what it allocates (handles, staging buffers), or a long run leaks one of "
             "them per step; keep what every step needs in struct ddp, allocated once in "
             "ddp_new", pl_format_bytes(4096, b, sizeof b));
    CHECK(!judge(0, "correct", obs, NP, &why) && !strcmp(first(&why), want), "step kept: %s",
          first(&why));

    good(obs, DDP_NAIVE, 1, 1);
    obs[0].code = obs[1].code = L2_C_GRAD_BITS;
    obs[0].step = 0;
    obs[0].bad_rank = 1;
    obs[0].bad_elem = head->offset;
    snprintf(want, sizeof want, "step 1: after ddp_finish_gradients rank 1's gradient of %s "
             "differs from rank 0's in its last bits (element %zu of the flat buffer): close to "
             "the reference, but every rank must hold the same average bit for bit, or the "
             "replicas drift apart a little more each step. Take the all-reduce's result as it "
             "is on every rank (handout section 4)", head->name, head->offset);
    CHECK(!judge(0, "correct", obs, NP, &why) && !strcmp(first(&why), want), "bits: %s",
          first(&why));
    obs[0].code = obs[1].code = L2_C_REPLICAS;
    obs[0].step = 3;
    snprintf(want, sizeof want, "step 4: after the update rank 1's parameters differ from rank "
             "0's, bit for bit, first in %s (element %zu of the flat buffer): the replicas must "
             "stay identical, so every rank must update with the same averaged gradient (handout "
             "section 4)", head->name, head->offset);
    CHECK(!judge(0, "correct", obs, NP, &why) && !strcmp(first(&why), want), "replicas: %s",
          first(&why));

    good(obs, DDP_NAIVE, 1, 2);
    obs[0].code = obs[1].code = L2_C_LOSS;
    obs[0].step = obs[1].step = 1;
    obs[0].loss = (struct l2_loss_fig){5.5, 5.5, 0, 5.5};
    obs[1].loss = (struct l2_loss_fig){5.625, 5.5, 0.125 / 5.5, 5.625};
    snprintf(want, sizeof want, "step 2: the loss of the whole batch is %.7g, the single-device "
             "reference's %.7g (relative error 2e-02, tolerance %.0e): ddp_forward_backward "
             "returns each microbatch's mean loss over its B sequences as the model computes it, "
             "unscaled (ddp.h, handout section 7); the ranks returned rank 0 5.5, rank 1 5.625",
             5.625, 5.5, GR_TOL_LOSS);
    CHECK(!judge(0, "correct", obs, NP, &why) && !strcmp(first(&why), want), "loss: %s",
          first(&why));
    obs[1].loss.err = 1.04e-5; /* just over: the digits that show it */
    CHECK(!judge(0, "correct", obs, NP, &why) && said(&why, "(relative error 1.04e-05, "),
          "loss near the tolerance: %s", first(&why));

    good(obs, DDP_NAIVE, 1, 1);
    obs[0].code = obs[1].code = L2_C_PARAMS;
    obs[0].params = (struct gr_param_verdict){.rank = 1, .tensor = 0, .rel = 0.02,
                                              .max_abs = 0.003, .worst_elem = 17,
                                              .overall = 0.001};
    const struct pl_param_desc *t0 = &lay.tensors[0];
    snprintf(want, sizeof want, "after %d steps the parameters differ from the single-device "
             "reference's: rank 1, tensor %s [%lld, %lld]: relative L2 error %.2e (largest "
             "element error %.2e, at element %d), all parameters %.2e (tolerance %.0e)", K_STEPS,
             t0->name, (long long)t0->shape[0], (long long)t0->shape[1], 0.02, 0.003, 17, 0.001,
             GR_TOL_PARAMS);
    CHECK(!judge(0, "correct", obs, NP, &why) && !strcmp(first(&why), want), "params: %s",
          first(&why));
    obs[0].params.nonfinite = 3;
    CHECK(!judge(0, "correct", obs, NP, &why) &&
              said(&why, ": 3 elements in all are NaN or Inf (first bad element 17 of this "
                         "tensor) (tolerance"), "params not finite: %s", first(&why));
}

/* A wrong gradient: its figures and the reason they point to. */
static void grads(struct l2_obs *obs, enum ddp_variant v, int mbs, int groups,
                  struct l2_gfig g)
{
    good(obs, v, mbs, groups);
    obs[0].code = obs[1].code = L2_C_GRADS;
    obs[0].step = obs[1].step = 1;
    g.v = (struct gr_param_verdict){.rank = 0, .tensor = 2, .rel = 0.5, .max_abs = 0.01,
                                    .worst_elem = 5, .overall = 0.4};
    g.replicas_equal = g.replicas_equal ? 1 : 0;
    obs[0].grads = g;
}

static void gradient_reasons(void)
{
    struct l2_obs obs[NP];
    struct gr_why why;
    char want[1024], what[512], b[32], w[32];
    const struct pl_param_desc *t2 = &lay.tensors[2];
    const struct l2_gfig base = {.replicas_equal = 1, .acc_mb = -1, .ratio = 1};
    struct l2_gfig g = base;
    g.ratio = 0.7;
    grads(obs, DDP_NAIVE, 1, 1, g);
    snprintf(what, sizeof what, "rank 0, tensor %s [%lld]: relative L2 error %.2e (largest "
             "element error %.2e, at element %d), all parameters %.2e", t2->name,
             (long long)t2->shape[0], 0.5, 0.01, 5, 0.4);
    snprintf(want, sizeof want, "step 2: after ddp_finish_gradients the gradient differs from "
             "the single-device gradient of the whole batch: %s (tolerance %.0e)", what,
             GR_TOL_GRADS);
    CHECK(!judge(0, "correct", obs, NP, &why) && !strcmp(first(&why), want) && why.n == 2 &&
              in_case(obs, &why), "gradient, no likelier mistake: %s", first(&why));

    g = base;
    g.acc_mb = 0;
    g.acc_rank = 1;
    g.acc_bytes = 4096;
    g.acc_calls = 10;
    grads(obs, DDP_OVERLAPPED, 2, 1, g);
    snprintf(want, sizeof want, "step 2, microbatch 1 of 2: rank 1 sent %s in 10 collective "
             "calls. Only the last microbatch may communicate: an all-reduce made during "
             "accumulation averages a partial gradient, and what the later microbatches add is "
             "never averaged: your hook started its buckets in an accumulation microbatch's "
             "backward, where it must start them only in the last one's (tell it which "
             "microbatch is running, from ddp_forward_backward). Accumulate the gradients "
             "locally and all-reduce once per step, during or after the last microbatch's "
             "backward (handout section 7)", pl_format_bytes(4096, b, sizeof b));
    CHECK(!judge(0, "correct", obs, NP, &why) && why.n == 3 && !strcmp(why.line[1], want),
          "accumulation traffic: %s", why.n > 1 ? why.line[1] : "");

    g = base;
    g.zeroed_each = 1;
    grads(obs, DDP_NAIVE, 2, 1, g);
    CHECK(!judge(0, "correct", obs, NP, &why) &&
              said(&why, "step 2: your gradient is the average of the last microbatch's alone: "
                         "the gradients were zeroed at every microbatch"), "zeroed each: %s",
          first(&why));

    g = base;
    g.replicas_equal = 0;
    g.bad_rank = 1;
    g.bad_elem = t2->offset;
    g.late_rank = 0;
    g.late_bytes = 1000;
    grads(obs, DDP_NAIVE, 1, 1, g);
    double whole = pl_ring_bytes_sent(PL_ALL_REDUCE, NP, 4.0 * (double)lay.numel);
    snprintf(want, sizeof want, "rank 1's gradient of %s differs from rank 0's (element %zu of "
             "the flat buffer): after ddp_finish_gradients every rank must hold the same average. "
             "Rank 0 sent %s in the last microbatch and ddp_finish_gradients together, where "
             "all-reducing the whole gradient sends %s a rank. A tensor that no all-reduce "
             "covered keeps each rank's own gradient -- is one missing from your loop or your "
             "buckets? (handout sections 4 and 5)", t2->name, t2->offset,
             pl_format_bytes(1000, b, sizeof b), pl_format_bytes(whole, w, sizeof w));
    CHECK(!judge(0, "correct", obs, NP, &why) && !strcmp(why.line[1], want),
          "replicas differ: %s", why.n > 1 ? why.line[1] : "");

    g = base;
    g.kept_last = 1;
    grads(obs, DDP_NAIVE, 1, 1, g);
    CHECK(!judge(0, "correct", obs, NP, &why) &&
              said(&why, "step 2: your gradient is this step's plus the last step's") &&
              said(&why, "zero them there (pl_model_zero_grad), every step"), "kept last: %s",
          first(&why));

    g = base;
    g.world_mean = 1;
    grads(obs, DDP_NAIVE, 1, 2, g);
    snprintf(want, sizeof want, "every rank's gradient is the mean over all %d ranks of the job: "
             "the 2 groups train on different batches, and your all-reduce mixed them", NP);
    CHECK(!judge(0, "correct", obs, NP, &why) && said(&why, want) &&
              said(&why, "never pl_comm_world()"), "world mean: %s", first(&why));

    g = base;
    g.ratio = 0.5;
    grads(obs, DDP_NAIVE, 1, 2, g);
    CHECK(!judge(0, "correct", obs, NP, &why) &&
              said(&why, "your gradient is 0.5 times the reference's, 1/2: the sum over a group "
                         "of 1 ranks divided by all 2 ranks of the job") &&
              said(&why, "the group's ddp_new was given, not the job's") &&
              !said(&why, "pl_comm_size"), "world size: %s",
          first(&why));

    g = base;
    g.ratio = 2;
    g.async_avg = 1;
    grads(obs, DDP_OVERLAPPED, 1, 1, g);
    CHECK(!judge(0, "correct", obs, NP, &why) &&
              said(&why, "your gradient is 2 times the reference's on 2 ranks, though your "
                         "all-reduces asked for PL_AVG") &&
              said(&why, "ddp_finish_gradients must wait for every all-reduce it started"),
          "not waited: %s", first(&why));
    obs[0].grads.summed = 1;
    CHECK(!judge(0, "correct", obs, NP, &why) &&
              said(&why, "your gradient is 2 times the reference's, and 2 ranks: the ranks' "
                         "gradients were summed where the step takes their mean") &&
              !said(&why, "PL_AVG"), "summed: %s",
          first(&why));

    g = base;
    g.ratio = 3;
    grads(obs, DDP_NAIVE, 3, 1, g);
    CHECK(!judge(0, "correct", obs, NP, &why) &&
              said(&why, "your gradient is 3 times the reference's with 3 microbatches: the "
                         "microbatches' gradients add up") &&
              !said(&why, "1/microbatches") && !said(&why, "loss_scale"), "loss not scaled: %s",
          first(&why));
    obs[0].grads.ratio = 6;
    obs[0].c.microbatches = obs[1].c.microbatches = 12;
    CHECK(!judge(0, "correct", obs, NP, &why) &&
              said(&why, "with 12 microbatches: each microbatch was weighted as if there were 2 "
                         "of them, where this call has 12") &&
              !said(&why, "loss_scale"), "scale fixed: %s", first(&why));
    obs[0].grads.ratio = 1.0 / 12;
    CHECK(!judge(0, "correct", obs, NP, &why) &&
              said(&why, "your gradient is 1/12 of the reference's: one microbatch's gradient "
                         "is left where the step's should add up all 12") &&
              !said(&why, "zeroed"), "a twelfth: %s", first(&why));
}

/* After ddp_free: operations in flight on the case's comm, memory kept. */
static void free_reasons(void)
{
    struct l2_obs obs[NP];
    struct gr_why why;
    char want[1024], b[32];
    good(obs, DDP_NAIVE, 1, 1);
    obs[1].in_flight = 4;
    snprintf(want, sizeof want, "after ddp_free, rank 1 still has 4 operation(s) in flight on "
             "the communicator ddp_new was given: a handle of pl_all_reduce_async (or another "
             "asynchronous call) was never waited for. The caller frees that communicator after "
             "ddp_free, and pl_comm_free refuses one with operations in flight; pl_wait (or "
             "pl_wait_all) every handle, at the latest in ddp_finish_gradients (handout section "
             "6)");
    CHECK(!judge(0, "correct", obs, NP, &why) && !strcmp(first(&why), want) && why.n == 2,
          "in flight: %s", first(&why));
    good(obs, DDP_NAIVE, 1, 1);
    obs[0].free_kept = 8192;
    snprintf(want, sizeof want, "after ddp_free (and the model's own free) rank 0 holds %s more "
             "of pl_mem_alloc's memory than before the model and ddp_new: ddp_free must "
             "pl_mem_free everything ddp_new and the steps allocated (a field added to struct "
             "ddp needs its pl_mem_free there too)", pl_format_bytes(8192, b, sizeof b));
    CHECK(!judge(0, "correct", obs, NP, &why) && !strcmp(first(&why), want), "free kept: %s",
          first(&why));
    obs[0].code = obs[1].code = L2_C_REPLICAS;
    CHECK(!judge(0, "correct", obs, NP, &why) && said(&why, "after the update rank") &&
              !said(&why, "after ddp_free"), "a stopped training speaks first: %s", first(&why));
}

/* The loss: the likeliest cause first, from the ranks' own returned losses. */
static void loss_reasons(void)
{
    struct l2_obs obs[NP];
    struct gr_why why;
    char want[1024];
    /* one group of both ranks, rank 1 returning 0: the group's mean is half the reference's,
     * and the ranks' own figures name the cause before any scale does */
    good(obs, DDP_NAIVE, 2, 1);
    obs[0].code = obs[1].code = L2_C_LOSS;
    obs[0].loss = (struct l2_loss_fig){2.75, 5.5, 0.5, 5.5};
    obs[1].loss = (struct l2_loss_fig){2.75, 5.5, 0.5, 0};
    snprintf(want, sizeof want, "step 1: the loss of the whole batch is 2.75, the single-device "
             "reference's 5.5 (relative error 5e-01, tolerance %.0e): your ranks returned losses "
             "far apart, more than their slices of one batch can make them differ (their mean "
             "of the step's ddp_forward_backward returns: rank 0 5.5, rank 1 0): every rank "
             "returns its own microbatch's mean loss, whatever its rank", GR_TOL_LOSS);
    CHECK(!judge(0, "correct", obs, NP, &why) && !strncmp(first(&why), want, strlen(want)) &&
              !said(&why, "divided by the 2 microbatches"), "loss of rank 0 alone: %s",
          first(&why));
    obs[0].loss.mine = 2.7;
    obs[1].loss.mine = 2.8;
    CHECK(!judge(0, "correct", obs, NP, &why) &&
              said(&why, "(relative error 5e-01, tolerance 1e-05): that is the reference's "
                         "divided by the 2 microbatches: ddp_forward_backward returns each "
                         "microbatch's mean loss unscaled; the weight 1/2 belongs in the "
                         "gradient only, through ctx.loss_scale"), "loss scaled: %s",
          first(&why));
}

static void traffic_reasons(void)
{
    struct l2_obs obs[NP];
    struct gr_why why;
    char want[1024], b[32];
    good(obs, DDP_NAIVE, 1, 1);
    double psi = (double)lay.numel, ar = pl_ring_bytes_sent(PL_ALL_REDUCE, NP, 4 * psi);
    obs[0].traffic = (struct l2_tfig){.code = L2_T_STEP_BYTES, .step = 0, .rank = 1, .n = NP,
                                      .world = NP, .got = 2 * ar, .ar = 2 * ar, .want = ar};
    snprintf(want, sizeof want, "step 1: rank 1 sent %.0f B (%.0f B of it in all-reduces); the "
             "all-reduce of the gradient of Psi = %.0f parameters sends 2(n-1)/n x 4 Psi = %.0f "
             "B (%s) per rank on %d ranks", 2 * ar, 2 * ar, psi, ar,
             pl_format_bytes(ar, b, sizeof b), NP);
    CHECK(!judge(0, "traffic", obs, NP, &why) && !strcmp(first(&why), want) &&
              said(&why, "that is 2 times the gradient") && in_case(obs, &why),
          "step bytes: %s", first(&why));
    obs[0].traffic = (struct l2_tfig){.code = L2_T_STEP_CALLS, .rank = 0, .calls = 3,
                                      .other = 1, .want_calls = lay.n_tensors};
    snprintf(want, sizeof want, "step 1: rank 0 made 3 all-reduce calls and 1 other collective "
             "calls; naive DDP makes one all-reduce per parameter tensor: %d calls (handout "
             "section 4)", lay.n_tensors);
    CHECK(!judge(0, "traffic", obs, NP, &why) && !strcmp(first(&why), want), "calls: %s",
          first(&why));
    obs[0].traffic = (struct l2_tfig){.code = L2_T_MICROBATCH, .step = 1, .mb = 0, .rank = 1,
                                      .got = 4096, .calls = 2};
    obs[0].c.microbatches = 2;
    CHECK(!judge(0, "traffic", obs, NP, &why) &&
              said(&why, "step 2, microbatch 1 of 2: rank 1 sent") &&
              said(&why, "Only the last microbatch may communicate"), "microbatch: %s",
          first(&why));
    const struct pl_param_desc *t = &lay.tensors[lay.n_tensors - 1];
    obs[0].c.microbatches = 1;
    obs[0].c.opt = (struct ddp_options){.variant = DDP_BUCKETED, .bucket_bytes = 4096};
    obs[0].traffic = (struct l2_tfig){.code = L2_T_RANGES, .range = {.rank = 1, .step = 0,
                                      .overlap = 0, .off = t->offset, .count = 1,
                                      .ooff = t->offset, .olen = t->numel}};
    snprintf(want, sizeof want, "on rank 1: step 1: an all-reduce covered gradient elements "
             "[%zu, %zu), %s, which is not one of the step's ranges (it overlaps bucket 0, [%zu, "
             "%zu), %s); each all-reduce covers exactly one bucket", t->offset, t->offset + 1,
             t->name, t->offset, t->offset + t->numel, t->name);
    CHECK(!judge(0, "traffic", obs, NP, &why) && said(&why, want), "ranges: %s", first(&why));
    /* the right range, reduced from a staging copy into m->grads: not in place */
    obs[0].traffic.range = (struct l2_range_fig){.rank = 0, .step = 1, .staged = 1,
                                                 .recv_in_grads = 1, .overlap = -1,
                                                 .off = t->offset, .count = t->numel};
    snprintf(want, sizeof want, "step 2: an all-reduce of %zu floats went into gradient elements "
             "[%zu, %zu), %s, from a buffer of its own: each all-reduce runs in place over its "
             "own range of m->grads, send and receive both m->grads + offset (ddp.h; handout "
             "section 5: the flat buffer makes a range of it the message, no copy)", t->numel,
             t->offset, t->offset + t->numel, t->name);
    char b4[32], bpsi[32], cost[512];
    snprintf(cost, sizeof cost, "the copy costs memory, a staging buffer as large as what it "
             "holds (%s for this call, up to 4 Psi = %s for the whole gradient), and time, one "
             "more pass that reads and writes the gradients every step, before the all-reduce "
             "can start", pl_format_bytes(4.0 * (double)t->numel, b4, sizeof b4),
             pl_format_bytes(4.0 * (double)lay.numel, bpsi, sizeof bpsi));
    CHECK(!judge(0, "traffic", obs, NP, &why) && !strcmp(first(&why), want) &&
              why.n == 3 && !strcmp(why.line[1], cost) && in_case(obs, &why),
          "out of place: %s | %s", first(&why), why.n > 1 ? why.line[1] : "");
    obs[0].traffic.range.staged = 2;
    obs[0].traffic.range.rank = 1;
    CHECK(!judge(0, "traffic", obs, NP, &why) &&
              said(&why, "on rank 1: step 2: an all-reduce of ") &&
              said(&why, "went from and into a buffer of its own, outside m->grads: each "
                         "all-reduce runs in place"), "staged both ways: %s", first(&why));
}

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
              why.n == 1, "late by a hook: %s", first(&why));
    obs[1].late = (struct l2_late_fig){.found = 1, .off = 0, .count = 10,
                                       .where = L2_IN_FINISH, .part = PL_PART_EMBED};
    CHECK(!judge(0, "overlap", obs, NP, &why) &&
              said(&why, "was issued in ddp_finish_gradients, though its range was final in "
                         "the embedding's hook"), "started in finish: %s", first(&why));
    obs[1].late.where = L2_OUT_OF_HOOK;
    CHECK(!judge(0, "overlap", obs, NP, &why) &&
              said(&why, "was issued after the last microbatch's backward, outside the hook, "
                         "though"), "started after backward: %s", first(&why));
    CHECK(judge(1, "overlap", obs, NP, &why), "a late start is judged on case 0, as the overlap");
}

/* Every case of a recorded run passes parts; then the last rank made wrong fails, named. */
static void recorded(const char *path, const char *parts)
{
    FILE *f = judge_record_open(path);
    struct gr_record rec;
    char err[256];
    int n = 0, got;
    while ((got = gr_record_read(f, &rec, err, sizeof err)) == 1) {
        CHECK(rec.obs.size == sizeof(struct l2_obs), "%s: observations of %zu bytes, not %zu",
              rec.op, rec.obs.size, sizeof(struct l2_obs));
        if (rec.obs.size != sizeof(struct l2_obs)) break;
        struct gr_why why;
        char list[128];
        snprintf(list, sizeof list, "%s", parts);
        for (char *p = strtok(list, ","); p; p = strtok(NULL, ",")) {
            gr_why_init(&why);
            int v = l2_judge(rec.icase, p, &rec.obs, &why);
            /* overlap's fraction is the naive variant's business: it passes with its figures */
            CHECK(v && (why.fraction == 1 || !strcmp(p, "overlap")),
                  "%s case %d part %s of the solution: %s", rec.op, rec.icase, p, first(&why));
        }
        int last = rec.obs.nranks - 1;
        struct l2_obs *mine = malloc(rec.obs.size * (size_t)rec.obs.nranks);
        memcpy(mine, rec.obs.data, rec.obs.size * (size_t)rec.obs.nranks);
        struct gr_obs bad = {rec.obs.nranks, rec.obs.size, (const unsigned char *)mine};
        char want[160];
        mine[last].in_flight = 1;
        snprintf(want, sizeof want, "after ddp_free, rank %d still has 1 operation(s) in flight",
                 last);
        gr_why_init(&why);
        CHECK(!l2_judge(rec.icase, "correct", &bad, &why) && said(&why, want),
              "%s case %d, a rank in flight: %s", rec.op, rec.icase, first(&why));
        memcpy(mine, rec.obs.data, rec.obs.size * (size_t)rec.obs.nranks);
        mine[last].free_kept = 1e6;
        snprintf(want, sizeof want, "after ddp_free (and the model's own free) rank %d holds", last);
        gr_why_init(&why);
        CHECK(!l2_judge(rec.icase, "correct", &bad, &why) && said(&why, want),
              "%s case %d, a rank's memory: %s", rec.op, rec.icase, first(&why));
        if (rec.icase == 0 && mine[0].c.opt.variant == DDP_OVERLAPPED && strstr(parts,
                                                                                  "overlap")) {
            memcpy(mine, rec.obs.data, rec.obs.size * (size_t)rec.obs.nranks);
            mine[last].late = (struct l2_late_fig){.found = 1, .off = 0, .count = 1,
                                                   .where = L2_IN_FINISH};
            gr_why_init(&why);
            CHECK(!l2_judge(0, "overlap", &bad, &why) &&
                      said(&why, "was issued in ddp_finish_gradients"),
                  "%s case 0, a rank's late start: %s", rec.op, first(&why));
        }
        free(mine);
        gr_record_free(&rec);
        n++;
    }
    judge_record_close(f, path, got, err, n);
}

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

/* Every hand-built check. */
static void hand_built(void)
{
    passes();
    setup_reasons();
    step_reasons();
    loss_reasons();
    gradient_reasons();
    free_reasons();
    traffic_reasons();
    plan_reasons();
    overlap_reasons();
    uneven_reasons();
}

int main(int argc, char **argv)
{
    struct pl_model_config c = l2_config(0);
    pl_model_layout_init(&lay, &c);
    int rc = judge_test_main(argc, argv, hand_built, recorded);
    pl_model_layout_free(&lay);
    return rc;
}
