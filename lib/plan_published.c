/* plan_published.c: published training runs, each from its paper's (or its training log's)
 * own figures, that the planner is held to (plan --published-runs, docs/labs/08-placement.md
 * section 4.4), and the fit of a profile's efficiency on the rows marked for it.
 *
 * The split. The fit rows are one controlled experiment: Narayanan et al. (2021), table 2, two
 * models on the same cluster and code, each at three data-parallel degrees under a fixed
 * batch. The held-out rows differ from it in what a planner must get right on its own: a
 * deeper pipeline (p = 64, table 1), another pipeline engine and another cluster (MT-NLG and
 * BLOOM, Megatron-DeepSpeed; BLOOM on Omni-Path), another GPU (Llama 3 on H100, whose
 * efficiency was set before this table and is not fitted). A held-out row never sets a
 * constant. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "topo.h"
#include "util.h"

/* Shapes of published runs that are not presets (presets are drawn by Lab 8's grader, so the
 * list of plan_model.c stays as it is). Vocabularies are the padded ones the runs trained:
 * Megatron pads GPT-2's 50257 to 51200, BLOOM's 250680 to 250880. */
static const struct pl_plan_model shapes[] = {
    /* Narayanan et al. (2021), table 2: "175B" (GPT-3's shape) and "530B". */
    {.name = "megatron-175b", .layers = 96, .d_model = 12288, .heads = 96, .kv_heads = 96,
     .d_ff = 49152, .vocab = 51200, .seq = 2048, .tied = 1, .batch_tokens = 1536.0 * 2048},
    {.name = "megatron-530b", .layers = 105, .d_model = 20480, .heads = 128, .kv_heads = 128,
     .d_ff = 81920, .vocab = 51200, .seq = 2048, .tied = 1, .batch_tokens = 2240.0 * 2048},
    /* BigScience tr11-176B-ml (train/tr11-176B-ml/tr11-176B-ml.slurm): NLAYERS=70,
     * NHIDDEN=14336, NHEADS=112, SEQ_LEN=2048, GLOBAL_BATCH_SIZE=2048, tied embeddings. */
    {.name = "bloom-176b", .layers = 70, .d_model = 14336, .heads = 112, .kv_heads = 112,
     .d_ff = 57344, .vocab = 250880, .seq = 2048, .tied = 1, .batch_tokens = 2048.0 * 2048},
};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

/* Omni-Path on Jean Zay: 4 links of 100 Gb/s per node of 8 GPUs (tr11-176B-ml/README.md). */
#define JEAN_ZAY_INTER (4 * 100e9 / 8 / 8)

/* Figures as published. TFLOP/s per GPU over A100's 312 TFLOP/s dense BF16 peak where the
 * source gives TFLOP/s only. Degrees, microbatch, schedule (v), ZeRO stage and recomputation
 * are fixed where the source states them; the planner completes the rest. */
static const struct pl_plan_published runs[] = {
    /* Narayanan et al. (2021), table 2 (PTD-P rows): 175B, t 8, p 12, batch 1536, microbatch
     * 1, on 384 / 768 / 1536 A100 of Selene: 153 / 149 / 141 TFLOP/s per GPU, counted with
     * recomputation (the paper's 96 B s l h^2 formula). Full recomputation and no ZeRO, as
     * Megatron-LM ran in 2021. v = 1: the table names no schedule, and the drop from 153 to
     * 141 at a fixed batch is the plain 1F1B bubble (p-1)/(m+p-1) of m = 384, 192, 96. */
    {"megatron-175b", "dgx-a100", 48, 0, 0, 0, "tp=8,pp=12,dp=4,micro=1,v=1,zero=0,recompute=full",
     100 * 153 / 312.0, 1, 0, 5, "Megatron 175B, 384 A100 (2021 t2)"},
    {"megatron-175b", "dgx-a100", 96, 0, 0, 0, "tp=8,pp=12,dp=8,micro=1,v=1,zero=0,recompute=full",
     100 * 149 / 312.0, 1, 0, 5, "Megatron 175B, 768 A100 (2021 t2)"},
    {"megatron-175b", "dgx-a100", 192, 0, 0, 0,
     "tp=8,pp=12,dp=16,micro=1,v=1,zero=0,recompute=full", 100 * 141 / 312.0, 1, 0, 5,
     "Megatron 175B, 1536 A100 (2021 t2)"},
    /* The same table: 530B, t 8, p 35, batch 2240, microbatch 1, on 560 / 1120 / 2240 A100:
     * 171 / 167 / 159 TFLOP/s per GPU. */
    {"megatron-530b", "dgx-a100", 70, 0, 0, 0, "tp=8,pp=35,dp=2,micro=1,v=1,zero=0,recompute=full",
     100 * 171 / 312.0, 1, 0, 5, "Megatron 530B, 560 A100 (2021 t2)"},
    {"megatron-530b", "dgx-a100", 140, 0, 0, 0, "tp=8,pp=35,dp=4,micro=1,v=1,zero=0,recompute=full",
     100 * 167 / 312.0, 1, 0, 5, "Megatron 530B, 1120 A100 (2021 t2)"},
    {"megatron-530b", "dgx-a100", 280, 0, 0, 0, "tp=8,pp=35,dp=8,micro=1,v=1,zero=0,recompute=full",
     100 * 159 / 312.0, 1, 0, 5, "Megatron 530B, 2240 A100 (2021 t2)"},
    /* Held out. Narayanan et al. (2021), table 1, last row: 1T (128 layers, h 25600, 160
     * heads), t 8, p 64, 3072 A100, batch 3072: 163 TFLOP/s per GPU, 52% of peak (the
     * abstract: 502 PFLOP/s on 3072 GPUs), recomputation counted. The schedule is not given:
     * the planner chooses the interleaving. */
    {"megatron-1t", "dgx-a100", 384, 0, 0, 0, "tp=8,pp=64,dp=6,micro=1,zero=0,recompute=full",
     52, 1, 1, 5, "Megatron 1T, 3072 A100 (2021 t1)"},
    /* Held out. Smith et al. (2022), MT-NLG 530B, section 2.4: the 530B shape, t 8, p 35,
     * global batch 1920 on 280 / 350 / 420 DGX A100 nodes of Selene, 60.1 / 50.2 / 44.4 s per
     * iteration, 126 / 121 / 113 TFLOP/s per GPU by Megatron's formula (recomputation
     * counted). DeepSpeed's pipeline engine (plain 1F1B: v = 1), full recomputation. The
     * same shape, degrees and cluster as the 2240-GPU row above ran 21% slower here than in
     * that benchmark, which no formula of the hardware reproduces: the tolerance, 9 points,
     * is the largest of the three misses measured when the fit was made (8.8 points,
     * docs/labs/08-placement.md section 4.4) rounded up, so that a change that widens it
     * fails. */
    {"megatron-530b", "dgx-a100", 280, 0, 1920.0 * 2048, 0, "tp=8,pp=35,dp=8,v=1,recompute=full",
     100 * 126 / 312.0, 1, 1, 9, "MT-NLG 530B, 2240 A100 (2022)"},
    {"megatron-530b", "dgx-a100", 350, 0, 1920.0 * 2048, 0, "tp=8,pp=35,dp=10,v=1,recompute=full",
     100 * 121 / 312.0, 1, 1, 9, "MT-NLG 530B, 2800 A100 (2022)"},
    {"megatron-530b", "dgx-a100", 420, 0, 1920.0 * 2048, 0, "tp=8,pp=35,dp=12,v=1,recompute=full",
     100 * 113 / 312.0, 1, 1, 9, "MT-NLG 530B, 3360 A100 (2022)"},
    /* Held out. BLOOM 176B (Le Scao et al. 2022; BigScience tr11-176B-ml): 48 nodes of 8 A100
     * 80GB on Jean Zay, TP 4, PP 12, DP 8, MBS 2, GBS 2048, --checkpoint-activations (full),
     * DeepSpeed's pipeline engine (v = 1) and its BF16 optimizer (ZeRO-1); "training
     * throughput: about 150 TFLOPs" (the BigScience 176B model page), hardware TFLOPs with
     * recomputation counted (tr11 README, Throughput). The nodes' Omni-Path gives each GPU a
     * quarter of a DGX A100's network. */
    {"bloom-176b", "dgx-a100", 48, 0, 0, JEAN_ZAY_INTER,
     "tp=4,pp=12,dp=8,micro=2,v=1,zero=1,recompute=full", 100 * 150 / 312.0, 1, 1, 5,
     "BLOOM 176B, 384 A100 (2022)"},
    /* Held out. Llama 3: Dubey et al. (2024), table 4: 405B on 8K and 16K H100, TP 8, PP 16,
     * DP 64 and 128, 8K context, BF16 MFU 43% and 41% (model FLOPs). The planner chooses the
     * interleaving (the paper's schedule is interleaved) and the ZeRO stage. */
    {"llama3-405b", "dgx-h100", 1024, 0, 0, 0, "tp=8,pp=16,dp=64,micro=1,recompute=selective",
     43, 0, 1, 5, "Llama 3 405B, 8K H100, 8K context"},
    {"llama3-405b", "dgx-h100", 2048, 0, 0, 0, "tp=8,pp=16,dp=128,micro=1,recompute=selective", 41,
     0, 1, 5, "Llama 3 405B, 16K H100, 8K context"},
};
#define NRUNS ((int)(sizeof runs / sizeof runs[0]))

int pl_plan_published_count(void) { return NRUNS; }

const struct pl_plan_published *pl_plan_published_at(int i)
{
    if (i < 0 || i >= NRUNS) pl_fatal("published run %d is outside 0..%d", i, NRUNS - 1);
    return &runs[i];
}

void pl_plan_published_setup(const struct pl_plan_published *p, struct pl_plan_model *m,
                             struct pl_plan_cluster *c)
{
    const struct pl_plan_model *shape = pl_plan_model_find(p->model);
    for (int i = 0; !shape && i < NSHAPES; i++)
        if (!strcmp(shapes[i].name, p->model)) shape = &shapes[i];
    if (!shape) pl_fatal("published run %s: no model %s", p->source, p->model);
    *m = *shape;
    if (p->seq) m->seq = p->seq;
    if (p->batch_tokens > 0) m->batch_tokens = p->batch_tokens;
    const struct pl_profile *prof = pl_profile_find(p->profile);
    if (!prof) pl_fatal("published run %s: no profile %s", p->source, p->profile);
    pl_plan_cluster_from_profile(c, prof, p->nodes);
    if (p->inter_bw > 0) c->bw[PL_LINK_INTER] = p->inter_bw;
}

double pl_plan_published_figure(const struct pl_plan_published *p, double efficiency,
                                struct pl_plan_choice *out)
{
    struct pl_plan_model m;
    struct pl_plan_cluster c;
    pl_plan_published_setup(p, &m, &c);
    if (efficiency > 0) c.efficiency = efficiency;
    struct pl_plan_fixed fixed;
    char err[256];
    if (pl_plan_fixed_parse(p->fix, 1, &fixed, err, sizeof err) != 0)
        pl_fatal("published run %s: %s", p->source, err);
    struct pl_plan_result *res = malloc(sizeof *res);
    PL_ASSERT(res);
    if (!pl_plan_search(&m, &c, &fixed, res)) pl_fatal("nothing planned for %s", p->source);
    const struct pl_plan_choice *b = &res->best[0];
    double got = 100 * (p->counts_recompute ? b->time.hfu : b->time.mfu);
    if (out) *out = *b;
    free(res);
    return got;
}

/* Sum of squared misses, in points, of profile's fit rows at efficiency e; *n the rows. */
static double misses(const char *profile, double e, int *n)
{
    double sum = 0;
    *n = 0;
    for (int i = 0; i < NRUNS; i++) {
        const struct pl_plan_published *p = &runs[i];
        if (p->held_out || strcmp(p->profile, profile)) continue;
        double d = pl_plan_published_figure(p, e, NULL) - p->mfu;
        sum += d * d;
        (*n)++;
    }
    return sum;
}

double pl_plan_published_fit(const char *profile, double *rms)
{
    int n = 0;
    double best = 0, least = INFINITY;
    for (int k = 0; k <= 120; k++) {
        double e = 0.30 + 0.005 * k, s = misses(profile, e, &n);
        if (!n) break;
        if (s < least) {
            least = s;
            best = e;
        }
    }
    if (rms) *rms = n ? sqrt(least / n) : 0;
    return n ? best : 0;
}
