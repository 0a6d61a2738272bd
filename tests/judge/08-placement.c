/* tests/judge/08-placement.c: Lab 8's judges (grader/08-placement/judge.c) run alone,
 * without mpirun and without the planner's wrappers, on hand-built observations and on those
 * a check run of the solution recorded (driver --record FILE):
 *
 *   08-placement                 the hand-built cases
 *   08-placement FILE PARTS      every case of FILE passes PARTS (comma-separated), and the
 *                                same observations made wrong fail with the reason a student
 *                                would read
 *
 * Expected texts are built in code from the same figures, never pasted; a broken rule's is
 * the kit's own pl_plan_check on the same choice. Exit 0 when every check holds; each failed
 * one is printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab08.h"
#include "../testing.h"
#include "judge_test.h"

static struct l8_obs ob;

static int judge(int op, const char *part, struct gr_why *why)
{
    struct gr_obs all = {1, sizeof ob, (const unsigned char *)&ob};
    gr_why_init(why);
    return l8_judge(op, part, &all, why);
}

/* A case of a preset model on n nodes of a profile (per_node GPUs each), configuration text
 * (NULL: the default); the model and cluster also returned for the kit's own figures. */
static void where(const char *model, const char *profile, int nodes, int per_node,
                  const char *cfg, struct pl_plan_model *m, struct pl_plan_cluster *c)
{
    char err[256];
    memset(&ob, 0, sizeof ob);
    *m = *pl_plan_model_find(model);
    pl_plan_cluster_from_profile(c, pl_profile_find(profile), nodes);
    c->per_node = per_node;
    struct l8_where *w = &ob.where;
    snprintf(w->model, sizeof w->model, "%s", model);
    snprintf(w->cluster, sizeof w->cluster, "%s", profile);
    w->seq = m->seq;
    w->nodes = nodes;
    w->per_node = per_node;
    w->batch_tokens = m->batch_tokens;
    pl_plan_config_default(&w->cfg);
    if (cfg && pl_plan_config_parse(&w->cfg, cfg, err, sizeof err) != 0) {
        printf("bad configuration %s: %s\n", cfg, err);
        exit(2);
    }
}

/* "in: ..." as the judge words the case. */
static void in_line(int with_cfg, const char *tail, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "in: ");
    l8_describe_where(&ob.where, with_cfg, buf + k, len - k);
    k = strlen(buf);
    snprintf(buf + k, len - k, "%s", tail);
}

static void memory(void)
{
    struct gr_why why;
    struct pl_plan_model m;
    struct pl_plan_cluster c;
    char want[1024];
    where("llama3-8b", "dgx-h100", 1, 8, "dp=8,zero=0,micro=1,m=64", &m, &c);
    ob.op = L8_OP_MEMORY;
    ob.mem_ref = (struct pl_plan_memory){.params = 16e9, .grads = 16e9, .optim = 96e9,
                                         .activ = 20e9, .total = 148e9, .activ_layer = 300e6,
                                         .in_flight = 1, .layers_stage = 32};
    ob.mem = ob.mem_ref;
    CHECK(judge(L8_OP_MEMORY, "correct", &why) && why.n == 0, "the kit's figures pass: %s",
          first(&why));
    ob.mem.grads *= 1.005;
    CHECK(judge(L8_OP_MEMORY, "correct", &why), "0.5%% off passes: %s", first(&why));
    ob.mem.params = 2e9;
    snprintf(want, sizeof want, "parameters: yours %.4g GB, the kit's %.4g GB (within 1%%): "
             "what the first stage keeps of its bf16 parameters, and whether ZeRO-0 divides it "
             "over the data-parallel replicas (section 3.1)", 2.0, 16.0);
    CHECK(!judge(L8_OP_MEMORY, "correct", &why) && !strcmp(first(&why), want), "params: %s",
          first(&why));
    in_line(1, "", want, sizeof want);
    CHECK(!strcmp(why.line[why.n - 1], want) && !said(&why, "drawn"), "the case: %s",
          why.line[why.n - 1]);
    ob.mem = ob.mem_ref;
    ob.mem.activ = 0;
    CHECK(!judge(L8_OP_MEMORY, "correct", &why) &&
          said(&why, "activations: yours 0 GB, the kit's 20 GB (within 40%): none counted: "
               "every microbatch in flight keeps its layers' activations until its backward "
               "(section 3.2)"), "no activations: %s",
          first(&why));
    ob.mem = ob.mem_ref;
    ob.mem.in_flight = 4;
    ob.mem.layers_stage = 0;
    CHECK(!judge(L8_OP_MEMORY, "correct", &why) &&
          said(&why, "layers_stage: yours 0 layers, the kit's 32 layers (exactly): how many "
               "layers the first pipeline stage holds (section 3.1)") &&
          said(&why, "in_flight: yours 4 microbatches, the kit's 1 microbatches (exactly): how "
               "many microbatches the first stage holds at once under 1F1B (section 3.2)") &&
          !said(&why, "min(") && !said(&why, "ceil("),
          "the factors: %s", first(&why));
    ob.mem = ob.mem_ref;
    ob.mem.activ_layer = 150e6;
    snprintf(want, sizeof want, "activ_layer: yours %.4g MB, the kit's %.4g MB (within 1%%): "
             "what one layer keeps", 150.0, 300.0);
    CHECK(!judge(L8_OP_MEMORY, "correct", &why) && said(&why, want) &&
          said(&why, "shared experts included)") && !said(&why, "sbh"), "per layer: %s",
          first(&why));
    /* A modelling choice within its tolerance passes: activations and total are within
     * section 4.5's (the alternatives'), the layer figure and the factors are not. */
    ob.mem = ob.mem_ref;
    ob.mem.activ *= 1 + 0.9 * L8_TOL[L8_F_ACTIV];
    ob.mem.total = ob.mem_ref.total + ob.mem.activ - ob.mem_ref.activ;
    CHECK(judge(L8_OP_MEMORY, "correct", &why), "within the activations' tolerance passes: %s",
          first(&why));
    ob.mem.activ = ob.mem_ref.activ * (1 + 1.1 * L8_TOL[L8_F_ACTIV]);
    CHECK(!judge(L8_OP_MEMORY, "correct", &why) && said(&why, "activations: yours"),
          "past the activations' tolerance fails: %s", first(&why));
    ob.mem = ob.mem_ref;
    ob.mem.total = 100e9;
    CHECK(!judge(L8_OP_MEMORY, "correct", &why) &&
          !strcmp(first(&why), "total: yours 100 GB, the kit's 148 GB (within 25%): the sum of "
                  "the four categories (section 3)"), "the total alone: %s", first(&why));
    ob.drawn = 1;
    CHECK(!judge(L8_OP_MEMORY, "correct", &why) && why.n == 3, "drawn: three lines");
    in_line(1, " (drawn by the seed)", want, sizeof want);
    CHECK(!strcmp(why.line[1], want) &&
          said(&why, "yours matches the kit's on the listed configurations (they are judged "
               "first) but not on this one"), "drawn by the seed: %s", why.line[1]);
    ob.oracle = L8_OR_MEMORY;
    CHECK(!judge(L8_OP_MEMORY, "correct", &why) && why.n == 1 &&
          said(&why, "placement_memory called pl_plan_memory, the kit's planner: that is the "
               "grader's oracle"), "the oracle called: %s", first(&why));
}

#include "lab08_switches.h"

/* The kit's step of a configuration with every axis' figures set. */
static void time_of(struct pl_plan_time *t)
{
    memset(t, 0, sizeof *t);
    t->compute = 10;
    t->bubble = 1;
    t->step = 12;
    for (int a = 0; a < PL_NAXES; a++) {
        t->exposed[a] = a == PL_AX_DP ? 0.5 : 0.1;
        t->bytes[a] = (a + 1) * 1e9;
        t->link[a] = PL_LINK_INTRA;
    }
    t->mfu = 0.4;
    t->hfu = 0.5;
    t->tflops = 400;
}

static void step_time(void)
{
    struct gr_why why;
    struct pl_plan_model m;
    struct pl_plan_cluster c;
    char want[1024];
    where("llama3-70b", "dgx-h100", 8, 8, "tp=8,pp=4,dp=2,zero=1,m=256,v=2", &m, &c);
    ob.op = L8_OP_TIME;
    time_of(&ob.time_ref);
    ob.time = ob.time_ref;
    ob.dp_alt = ob.time_ref.exposed[PL_AX_DP];
    CHECK(judge(L8_OP_TIME, "correct", &why) && why.n == 0, "the kit's figures pass: %s",
          first(&why));
    ob.time.compute = 20;
    CHECK(!judge(L8_OP_TIME, "correct", &why) &&
          !strcmp(first(&why), "compute: yours 20 s, the kit's 10 s (within 1%): the FLOPs of "
                  "m microbatches on the slowest stage (the first, or the last with the head), "
                  "recomputation included, at the cluster's sustained rate (section 4.1)"),
          "compute: %s", first(&why));
    ob.time = ob.time_ref;
    ob.time.exposed[PL_AX_TP] = 0.3;
    ob.time.bubble = 2;
    CHECK(!judge(L8_OP_TIME, "correct", &why) &&
          said(&why, "exposed tp: yours 0.3 s, the kit's 0.1 s (within 1%): the time of the tp "
               "collectives of m microbatches on the first stage, on tp's own link (section "
               "4.2)") &&
          said(&why, "bubble: yours 2 s, the kit's 1 s (within 30%): the slowest stage's idle "
               "time while the other stages fill and drain the pipeline of 4 stages (v = 2;") &&
          !said(&why, "(p-1)"), "tp and bubble: %s", first(&why));
    ob.time.exposed[PL_AX_TP] = ob.time_ref.exposed[PL_AX_TP];
    ob.time.bubble = 1.2;
    ob.time.step = 12.2;
    ob.time.mfu = ob.time_ref.mfu * 12 / 12.2;
    ob.time.hfu = ob.time_ref.hfu * 12 / 12.2;
    ob.time.tflops = ob.time_ref.tflops * 12 / 12.2;
    CHECK(judge(L8_OP_TIME, "correct", &why), "a bubble and step within section 4.5's "
          "tolerance, MFU at that step, pass: %s", first(&why));
    ob.time = ob.time_ref;
    ob.time.hfu = ob.time.mfu;
    snprintf(want, sizeof want, "HFU: yours %.4g %%, the kit's %.4g %% (within 1%%): at your "
             "own step: the hardware FLOPs' utilisation", 40.0, 50.0);
    CHECK(!judge(L8_OP_TIME, "correct", &why) && said(&why, want), "HFU: %s", first(&why));
    ob.time = ob.time_ref;
    ob.time.tflops = 400.0 / 64;
    CHECK(!judge(L8_OP_TIME, "correct", &why) && said(&why, "model TFLOP/s per GPU"),
          "tflops: %s", first(&why));
    ob.time = ob.time_ref;
    ob.time.bytes[PL_AX_TP] = 0.5e9;
    ob.time.bytes[PL_AX_DP] = 0;
    snprintf(want, sizeof want, "bytes tp: yours %.4g GB, the kit's %.4g GB (within 1%%): what "
             "each GPU sends in the tp collectives of m microbatches (section 4.2)", 0.5, 1.0);
    CHECK(!judge(L8_OP_TIME, "correct", &why) && said(&why, want) &&
          said(&why, "bytes dp: yours 0 GB, the kit's 5 GB (within 1%): what each GPU sends in "
               "a step's data-parallel collectives under ZeRO-1") &&
          !said(&why, "pl_ring_bytes_sent"),
          "bytes: %s", first(&why));

    /* the step and the data-parallel time: within the band of section 4.3's two choices */
    ob.time = ob.time_ref;
    ob.dp_alt = 1.5;
    ob.time.exposed[PL_AX_DP] = 1.0;
    ob.time.step = 12.5;
    ob.time.mfu = ob.time_ref.mfu * 12 / 12.5;
    ob.time.hfu = ob.time_ref.hfu * 12 / 12.5;
    ob.time.tflops = ob.time_ref.tflops * 12 / 12.5;
    CHECK(judge(L8_OP_TIME, "correct", &why), "between the two choices passes: %s",
          first(&why));
    ob.time.exposed[PL_AX_DP] = 2.0;
    snprintf(want, sizeof want, "exposed dp: yours %.4g s, the kit's %.4g s, or %.4g s with "
             "the two parameter groups' reductions hidden together (section 4.3's "
             "alternative) (within 1%%): what no compute hides of the data-parallel "
             "collectives under ZeRO-1: which collectives this stage makes, and behind what "
             "(section 4.3)", 2.0, 0.5, 1.5);
    CHECK(!judge(L8_OP_TIME, "correct", &why) && !strcmp(first(&why), want), "past the band: %s",
          first(&why));
    ob.dp_alt = 0.5;
    ob.time = ob.time_ref;
    ob.time.exposed[PL_AX_DP] = 0;
    ob.where.cfg.zero = 0;
    CHECK(!judge(L8_OP_TIME, "correct", &why) &&
          said(&why, "collectives under ZeRO-0: which collectives this stage makes") &&
          !said(&why, "max(") && !said(&why, "AR"), "ZeRO-0's hint: %s", first(&why));
    where("llama3-8b", "dgx-h100", 2, 8, "cp=16,dp=1,zero=3,m=128", &m, &c);
    time_of(&ob.time_ref);
    ob.time = ob.time_ref;
    ob.dp_alt = ob.time_ref.exposed[PL_AX_DP];
    ob.time.exposed[PL_AX_DP] = 0;
    ob.time.link[PL_AX_DP] = PL_LINK_INTER;
    snprintf(want, sizeof want, "exposed dp: yours 0 s, the kit's 0.5 s (within 1%%): with dp "
             "= 1 the dense gradients are still reduced, over cp x ep = %d GPUs; section 4.3 "
             "says which link they are timed on", 16);
    CHECK(!judge(L8_OP_TIME, "correct", &why) && !strcmp(first(&why), want),
          "dp = 1 reduced over cp: %s", first(&why));
    CHECK(said(&why, "link of dp: yours inter-node, the kit's intra-node, for dp = 1: section "
               "4.2 says which link an axis reports"), "a size-1 axis' link: %s",
          why.n > 1 ? why.line[1] : first(&why));
    /* The symptom, the figures and the section; not the rule that settles it, which the
     * handout states (4.2: an axis of size 1 reports intra-node; 4.3: the gradients are
     * timed inter-node when cp's or ep's groups cross nodes). */
    CHECK(!said(&why, "size 1 has no group") && !said(&why, "inside a node") &&
          !said(&why, "counts as") && !said(&why, "pl_rule_inside_node") &&
          !said(&why, "link of the cp and ep groups") && !said(&why, "reports dp's link"),
          "the dp link's messages leave the rule to the handout: %s | %s", first(&why),
          why.n > 1 ? why.line[1] : "");
    /* The same link wrong where dp > 1 on a cluster of the preset shape: the axis' size, no
     * shape note. */
    where("llama3-70b", "dgx-h100", 8, 8, "tp=8,pp=4,dp=2,zero=1,m=256,v=2", &m, &c);
    time_of(&ob.time_ref);
    ob.dp_alt = ob.time_ref.exposed[PL_AX_DP];
    ob.time_ref.link[PL_AX_DP] = PL_LINK_INTER;
    ob.time = ob.time_ref;
    ob.time.link[PL_AX_DP] = PL_LINK_INTRA;
    CHECK(!judge(L8_OP_TIME, "correct", &why) && why.n == 2 &&
          !strcmp(first(&why), "link of dp: yours intra-node, the kit's inter-node, for dp = 2: "
                  "section 4.2 says which link an axis reports"), "dp's link: %s", first(&why));

    /* MFU off by the tokens counted while the step agrees: the figures and section 4.4,
     * which says what tokens per step are; not the answer (the model's batch). */
    where("mixtral-8x7b", "dgx-a100", 4, 8, "ep=8,dp=4,zero=1,micro=1,m=32", &m, &c);
    time_of(&ob.time_ref);
    ob.dp_alt = ob.time_ref.exposed[PL_AX_DP];
    ob.time = ob.time_ref;
    ob.time.mfu = ob.time_ref.mfu / 2;
    snprintf(want, sizeof want, "MFU: yours %.4g %%, the kit's %.4g %% (within 1%%): at your "
             "own step, so its definition is what differs: section 4.4 says which FLOPs and "
             "which tokens a step counts", 20.0, 40.0);
    CHECK(!judge(L8_OP_TIME, "correct", &why) && !strcmp(first(&why), want), "MFU: %s",
          first(&why));
    CHECK(!said(&why, "batch") && !said(&why, "batch_tokens") && !said(&why, "ep x dp") &&
          !said(&why, "configuration's") && !said(&why, "factor") && !said(&why, "peak)"),
          "the MFU message leaves what tokens count to the handout: %s", first(&why));
    /* A step twice the kit's: MFU is judged at that step, so an MFU that follows from it
     * is right and only the step is said. */
    ob.time.step = 24;
    CHECK(!judge(L8_OP_TIME, "correct", &why) && said(&why, "step: yours 24 s, the kit's 12 s") &&
          !said(&why, "MFU:"), "MFU at a wrong step: %s", first(&why));

    /* a link on nodes of 4, in an order other than the default, not a link class */
    where("llama3-8b", "dgx-h100", 4, 4, "tp=4,pp=2,dp=2,m=256,v=2", &m, &c);
    time_of(&ob.time_ref);
    ob.time = ob.time_ref;
    ob.dp_alt = ob.time_ref.exposed[PL_AX_DP];
    ob.time_ref.link[PL_AX_PP] = PL_LINK_INTER;
    ob.time = ob.time_ref;
    ob.time.link[PL_AX_PP] = PL_LINK_INTRA;
    CHECK(!judge(L8_OP_TIME, "correct", &why) &&
          said(&why, "link of pp: yours intra-node, the kit's inter-node") &&
          said(&why, "; this cluster's nodes hold 4 GPUs (c->per_node), not 8"),
          "nodes of 4: %s", first(&why));
    where("mixtral-8x7b", "dgx-h100", 4, 8, "tp=2,cp=2,ep=4,dp=2,m=128,order=tp-ep-cp-pp-dp",
          &m, &c);
    time_of(&ob.time_ref);
    ob.time = ob.time_ref;
    ob.dp_alt = ob.time_ref.exposed[PL_AX_DP];
    ob.time.link[PL_AX_EP] = (enum pl_link)7;
    CHECK(!judge(L8_OP_TIME, "correct", &why) &&
          said(&why, "link of ep: yours not a link class-node, the kit's intra-node") &&
          said(&why, "; this configuration's rank order is tp-ep-cp-pp-dp (cfg->order), not "
               "the default " PL_PLAN_ORDER), "another order: %s", first(&why));
    ob.oracle = L8_OR_TIME_LINKS;
    CHECK(!judge(L8_OP_TIME, "correct", &why) &&
          said(&why, "placement_step_time called pl_plan_time_links, the kit's planner"),
          "the oracle called: %s", first(&why));
}

/* The search chose cfg (text) on the case: the rules' figures as cases.c records them, the
 * kit's verdict on them; returns the kit's sentence when it rejects the choice. */
static int choose(const char *model, const char *profile, int nodes, int per_node,
                  const char *cfg, char *err, size_t len)
{
    struct pl_plan_model m;
    struct pl_plan_cluster c;
    where(model, profile, nodes, per_node, cfg, &m, &c);
    ob.op = L8_OP_SEARCH;
    ob.found = 1;
    ob.chosen = ob.where.cfg;
    pl_plan_config_default(&ob.where.cfg);
    struct l8_rules *r = &ob.rules;
    r->layers = m.layers;
    r->d_model = m.d_model;
    r->heads = m.heads;
    r->kv_heads = m.kv_heads;
    r->d_ff = m.d_ff;
    r->experts = m.experts;
    r->batch_seqs = m.batch_tokens / m.seq;
    r->memory = pl_plan_memory(&m, &c, &ob.chosen, NULL);
    r->hbm = c.hbm;
    err[0] = '\0';
    r->broken = pl_plan_check(&m, &c, &ob.chosen, err, len) != 0;
    return r->broken;
}

static void rules(void)
{
    /* Each choice breaks the rule named first (the kit checks them in this order). */
    static const struct {
        const char *model, *profile;
        int nodes, per_node;
        const char *cfg, *rule;
    } broken[] = {
        {"llama3-8b", "dgx-h100", 1, 8, "dp=4,m=64", "but the cluster has 8 GPUs"},
        {"llama3-8b", "dgx-h100", 1, 3, "tp=3,m=64", "tp=3 must divide heads=32"},
        {"llama3-8b", "dgx-h100", 1, 8, "ep=2,dp=4,m=64", "ep=2 must divide the 0 experts"},
        {"llama3-8b", "dgx-h100", 1, 6, "cp=3,dp=2,m=64", "cp=3 does not divide seq=8192"},
        {"llama3-8b", "dgx-h100", 8, 8, "pp=64,m=64", "chunks exceed the 32 layers"},
        {"llama3-8b", "dgx-h100", 1, 8, "dp=8,v=2,m=64", "interleaving needs pp > 1"},
        {"llama3-8b", "dgx-h100", 1, 8, "dp=8,m=64,order=tp-cp-ep-pp", NULL},
        {"llama3-8b", "dgx-h100", 2, 8, "tp=4,dp=2,pp=2,m=64,order=dp-pp-cp-ep-tp",
         "rule \"tp inside a node\": in"},
        {"mixtral-8x7b", "dgx-h100", 2, 4, "ep=8,m=64", "rule \"ep inside a node\": ep=8 is "
         "more than the 4 GPUs of a node"},
        {"llama3-8b", "dgx-h100", 1, 8, "tp=2,pp=2,cp=2,m=64,order=tp-pp-cp-ep-dp",
         "rule \"rank order\""},
        {"llama3-8b", "dgx-h100", 1, 8, "dp=8,micro=1,m=60", "rule \"batch reached\""},
        {"llama3-8b", "dgx-h100", 1, 8, "pp=8,micro=128,m=4", "rule \"microbatches\": 4 "
         "microbatches on 8 pipeline stages"},
        {"llama3-8b", "dgx-h100", 1, 6, "pp=3,dp=2,micro=16,m=16,v=3",
         "16 is not a multiple of 3"},
        {"llama3-8b", "dgx-h100", 1, 8, "pp=8,micro=64,m=8", "rule \"microbatches\": the bubble"},
        {"llama3-8b", "dgx-h100", 1, 8, "dp=8,zero=0,m=64", "rule \"memory fits\""},
    };
    struct gr_why why;
    char err[512], desc[256], want[512];
    for (size_t k = 0; k < sizeof broken / sizeof broken[0]; k++) {
        int b = choose(broken[k].model, broken[k].profile, broken[k].nodes, broken[k].per_node,
                       broken[k].cfg, err, sizeof err);
        CHECK(b && (!broken[k].rule || strstr(err, broken[k].rule)), "%s breaks %s: the kit "
              "says %s", broken[k].cfg, broken[k].rule ? broken[k].rule : "a rule", err);
        snprintf(want, sizeof want, "your choice %s breaks a placement rule (section 2):",
                 pl_plan_config_describe(&ob.chosen, desc, sizeof desc));
        CHECK(!judge(L8_OP_SEARCH, "correct", &why) && why.n == 3 && !strcmp(first(&why), want) &&
              !strcmp(why.line[1], err), "%s: in the kit's words (%s): %s", broken[k].cfg, err,
              why.n > 1 ? why.line[1] : first(&why));
    }
    CHECK(!choose("llama3-8b", "dgx-h100", 1, 8, "dp=8,zero=3,m=64,recompute=full", err,
                  sizeof err) &&
          judge(L8_OP_SEARCH, "correct", &why) && why.n == 0, "a choice that obeys every rule "
          "passes: %s %s", err, first(&why));
    ob.rules.broken = 1; /* the kit's verdict, whatever the figures say */
    CHECK(!judge(L8_OP_SEARCH, "correct", &why) && !strcmp(why.line[1], "pl_plan_check "
          "rejects it"), "the kit's verdict stands: %s", why.n > 1 ? why.line[1] : "");
    ob.found = 0;
    pl_plan_config_default(&ob.best);
    pl_plan_config_parse(&ob.best, "tp=8,pp=16,dp=8,zero=1,m=64", err, sizeof err);
    snprintf(want, sizeof want, "your search found no configuration; the kit's best is %s",
             pl_plan_config_describe(&ob.best, desc, sizeof desc));
    ob.drawn = 1;
    CHECK(!judge(L8_OP_SEARCH, "correct", &why) && why.n == 2 && !strcmp(first(&why), want),
          "found nothing: %s", first(&why));
    in_line(0, " (drawn by the seed from the sweep's space)", want, sizeof want);
    CHECK(!strcmp(why.line[1], want), "the drawn case, no configuration: %s", why.line[1]);
    ob.oracle = L8_OR_CHECK;
    CHECK(!judge(L8_OP_SEARCH_HIDDEN, "correct", &why) &&
          said(&why, "placement_search called pl_plan_check, the kit's planner"),
          "the oracle called: %s", first(&why));
}

static void quality(void)
{
    struct gr_why why;
    char err[256], mine[256], best[256], want[1024];
    choose("gpt3-175b", "dgx-h100", 64, 8,
           "tp=8,pp=16,dp=4,zero=1,micro=1,m=64,v=1,recompute=selective", err, sizeof err);
    pl_plan_config_default(&ob.best);
    pl_plan_config_parse(&ob.best, "tp=8,pp=16,dp=4,zero=1,micro=1,m=64,v=6,recompute=selective",
                         err, sizeof err);
    ob.best_step = 10;
    ob.step = 10 * (1 + L8_TOL_QUALITY) - 1e-9;
    CHECK(judge(L8_OP_SEARCH, "quality", &why) && why.n == 0, "3%% slower passes: %s",
          first(&why));
    ob.step = 11.1;
    snprintf(want, sizeof want, "your choice %s takes %.3f s per step by the kit's model, %.1f%% "
             "slower than the best it finds, %s (%.3f s); more than %.0f%%",
             pl_plan_config_describe(&ob.chosen, mine, sizeof mine), 11.1, 11.0,
             pl_plan_config_describe(&ob.best, best, sizeof best), 10.0, 3.0);
    CHECK(!judge(L8_OP_SEARCH, "quality", &why) && why.n == 3 && !strcmp(first(&why), want),
          "11%% slower: %s", first(&why));
    CHECK(said(&why, "they differ in: micro 1 v 1 vs micro 1 v 6. Does your search try every "
               "value"), "the difference: %s", why.line[1]);
    in_line(0, "", want, sizeof want);
    CHECK(!strcmp(why.line[2], want) && strstr(want, "on 64 x dgx-h100"), "the case: %s",
          why.line[2]);
    ob.best.deg[PL_AX_TP] = 1;
    ob.best.deg[PL_AX_CP] = 8;
    ob.best.zero = 3;
    ob.best.recompute = PL_RECOMPUTE_NONE;
    CHECK(!judge(L8_OP_SEARCH, "quality", &why) &&
          said(&why, "they differ in: tp 8 vs 1, cp 1 vs 8, ZeRO-1 vs ZeRO-3, recompute "
               "selective vs none, micro 1 v 1 vs micro 1 v 6"), "every field: %s",
          why.n > 1 ? why.line[1] : "");
}

static void sanity(void)
{
    struct gr_why why;
    struct pl_plan_model m;
    struct pl_plan_cluster c;
    char want[1024], desc[256];
    where("llama3-405b", "dgx-h100", 2048, 8, "tp=8,pp=16,dp=128,micro=1,m=16,v=7", &m, &c);
    ob.op = L8_OP_SANITY;
    ob.published_mfu = 41;
    snprintf(ob.source, sizeof ob.source, "Llama 3 (2024), 16K H100, 8K context");
    ob.time.mfu = (41 + L8_SANITY_POINTS) / 100;
    CHECK(judge(L8_OP_SANITY, "correct", &why) && why.n == 0, "5 points off passes: %s",
          first(&why));
    ob.time.mfu = 0.30;
    snprintf(want, sizeof want, "%s: your model gives %.1f%% MFU for %s, published %.0f%%; more "
             "than %.0f points apart (section 4.4: compute at the sustained rate, the bubble, "
             "exposed communication)", ob.source, 30.0,
             pl_plan_config_describe(&ob.where.cfg, desc, sizeof desc), 41.0, L8_SANITY_POINTS);
    CHECK(!judge(L8_OP_SANITY_HIDDEN, "correct", &why) && why.n == 1 && !strcmp(first(&why), want),
          "11 points off: %s", first(&why));
}

static void questions(void)
{
    struct gr_why why;
    struct pl_plan_model m;
    struct pl_plan_cluster c;
    where("llama3-70b", "dgx-h100", 1, 8, NULL, &m, &c);
    ob.op = L8_OP_QUESTIONS;
    CHECK(!judge(L8_OP_QUESTIONS, "correct", &why) && why.n == 1 &&
          !strcmp(first(&why), "still a stub: placement_answers (see docs/labs/08-placement.md "
                  "section 6)"), "unanswered: %s", first(&why));
    struct placement_answers *y = &ob.ans[0];
    ob.ans[1] = (struct placement_answers){4, 8, 2, 2, 1, 8.12, 200000};
    *y = (struct placement_answers){4, 8, 2, 2, 1, 8.1, 201999};
    CHECK(judge(L8_OP_QUESTIONS, "correct", &why) && why.n == 0, "right answers pass: %s",
          first(&why));
    y->q1_nodes = 3;
    y->q1_zero = 3;
    y->q2_bubble_percent = 8.3;
    y->q3_vocab = 202001;
    CHECK(!judge(L8_OP_QUESTIONS, "correct", &why) && why.n == 4 &&
          !strcmp(why.line[0], "Q1 nodes: yours 3, expected 4") &&
          !strcmp(why.line[1], "Q1 ZeRO stage: yours 3, expected 1") &&
          !strcmp(why.line[2], "Q2 bubble (%): yours 8.30, expected 8.12 (within 0.10)") &&
          !strcmp(why.line[3], "Q3 vocabulary (tokens): yours 202001.00, expected 200000.00 "
                  "(within 2000.00)"),
          "wrong answers: %s", first(&why));
}

/* Every case of a recorded run passes parts; then the same observation made wrong fails with
 * the reason a student would read. */
static void recorded(const char *path, const char *parts)
{
    FILE *f = judge_record_open(path);
    struct gr_record rec;
    char err[512], list[128], want[512];
    int n = 0, got;
    struct gr_why why;
    while ((got = gr_record_read(f, &rec, err, sizeof err)) == 1) {
        int op = l8_find_op(rec.op);
        CHECK(op >= 0 && rec.obs.nranks == 1 && rec.obs.size == sizeof ob,
              "%s: op %s, %d rank(s), %zu-byte records", path, rec.op, rec.obs.nranks,
              rec.obs.size);
        if (op < 0 || rec.obs.nranks != 1 || rec.obs.size != sizeof ob) break;
        memcpy(&ob, rec.obs.data, sizeof ob);
        CHECK(ob.op == op, "%s case %d: recorded op %d", rec.op, rec.icase, ob.op);
        snprintf(list, sizeof list, "%s", parts);
        for (char *p = strtok(list, ","); p; p = strtok(NULL, ",")) {
            CHECK(judge(op, p, &why) && why.fraction == 1, "%s case %d part %s of the solution: "
                  "%s", rec.op, rec.icase, p, first(&why));
        }
        /* made wrong */
        if (op == L8_OP_MEMORY || op == L8_OP_SWITCHES) {
            ob.mem.params = 2 * ob.mem_ref.params + 1e9;
            snprintf(want, sizeof want, "parameters: yours %.4g GB, the kit's %.4g GB",
                     ob.mem.params / 1e9, ob.mem_ref.params / 1e9);
        } else if (op == L8_OP_TIME) {
            ob.time.compute = 2 * ob.time_ref.compute;
            snprintf(want, sizeof want, "compute: yours %.4g s, the kit's %.4g s",
                     ob.time.compute, ob.time_ref.compute);
        } else if (op == L8_OP_SEARCH || op == L8_OP_SEARCH_HIDDEN) {
            ob.rules.broken = 1;
            ob.rules.batch_seqs += 1;
            const struct pl_plan_config *k = &ob.chosen;
            pl_rule_batch(k->deg[PL_AX_EP] * k->deg[PL_AX_DP], k->micro, k->m,
                          ob.rules.batch_seqs, want, sizeof want);
        } else if (op == L8_OP_QUESTIONS) {
            ob.ans[0].q1_nodes = ob.ans[1].q1_nodes + 1;
            snprintf(want, sizeof want, "Q1 nodes: yours %d, expected %d", ob.ans[0].q1_nodes,
                     ob.ans[1].q1_nodes);
        } else {
            ob.time.mfu = (ob.published_mfu + 2 * L8_SANITY_POINTS) / 100;
            snprintf(want, sizeof want, "%s: your model gives %.1f%% MFU", ob.source,
                     100 * ob.time.mfu);
        }
        CHECK(!judge(op, "correct", &why) && said(&why, want), "%s case %d made wrong: %s "
              "(wanted: %s)", rec.op, rec.icase, first(&why), want);
        if (op == L8_OP_SEARCH || op == L8_OP_SEARCH_HIDDEN) {
            ob.step = ob.best_step * (1 + 2 * L8_TOL_QUALITY);
            CHECK(!judge(op, "quality", &why) && said(&why, "slower than the best it finds"),
                  "%s case %d, a slow choice: %s", rec.op, rec.icase, first(&why));
        }
        ob.oracle = L8_OR_SEARCH;
        snprintf(want, sizeof want, "called pl_plan_search, the kit's planner");
        CHECK(!judge(op, "correct", &why) && said(&why, want), "%s case %d, the oracle called: "
              "%s", rec.op, rec.icase, first(&why));
        gr_record_free(&rec);
        n++;
    }
    judge_record_close(f, path, got, err, n);
}

/* Every hand-built check. */
static void hand_built(void)
{
    memory();
    switches();
    step_time();
    rules();
    quality();
    sanity();
    questions();
}

int main(int argc, char **argv)
{
    return judge_test_main(argc, argv, hand_built, recorded);
}
