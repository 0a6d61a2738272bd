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

#include "lab02_buckets.h"

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

#include "lab02_uneven.h"

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
