/* plan.h: placement of a model on a cluster. A model shape (or a named preset) and a cluster
 * (a profile of topo.h and a node count) go in; for a parallel configuration (tp, cp, ep, pp,
 * dp, ZeRO stage, microbatch size and count, interleaving, recomputation, rank order) it
 * gives the memory per GPU by category, the communication per step by axis and link class,
 * and the modelled step time and MFU; a search enumerates the configurations that obey the
 * placement rules (plan_rules.h) and ranks them by step time.
 *
 * Its terms: mixed-precision Adam's bytes per parameter divided per ZeRO stage, activations
 * per layer after Korthikanti et al. (2022), the interleaved 1F1B bubble, ring collectives
 * at each link class' bandwidth and latency (ledger.h's pl_coll_time), training FLOPs of the
 * dense products and of attention; Lab 8's handout states each choice and its hints file
 * writes the formulas out.
 * The model is a planning model: the efficiency assumptions it makes are stated where they
 * are made (plan.c) and in docs/labs/08-placement.md. */
#ifndef PL_PLAN_H
#define PL_PLAN_H

#include <stddef.h>

#include "recompute.h"
#include "topo.h"

/* ---------------------------------------------------------------- model */

struct pl_plan_model {
    const char *name;
    int layers, d_model, heads, kv_heads, d_ff, vocab, seq;
    int gated;          /* SwiGLU MLP: three matrices instead of two */
    int tied;           /* embedding and output head share one matrix */
    /* MoE (experts == 0: dense). The first dense_layers layers keep a dense MLP of d_ff;
     * the others route each token to top_k of experts MLPs of d_ff_expert, plus
     * shared_experts always-on ones of the same size. */
    int experts, top_k, d_ff_expert, shared_experts, dense_layers;
    double batch_tokens; /* global batch per optimizer step, in tokens */
};

/* Parameter counts. Expert parameters are those sharded by expert parallelism; dense ones
 * (attention, dense MLPs, shared experts, router, embeddings) are replicated across it. */
struct pl_plan_params {
    double total, dense, expert, embedding;
    double active; /* used per token: dense + top_k experts' worth (what 6N counts) */
};
void pl_plan_params(const struct pl_plan_model *m, struct pl_plan_params *out);
/* Model FLOPs per token of training (forward and backward): 6 x the active non-embedding
 * parameters and the output head, plus attention scores 12 L d s (PaLM's count). */
double pl_plan_flops_per_token(const struct pl_plan_model *m);

/* Presets: "gpt3-175b", "llama3-8b", "llama3-70b", "llama3-405b", "mixtral-8x7b",
 * "deepseek-v3", "megatron-1t"; NULL if unknown. */
const struct pl_plan_model *pl_plan_model_find(const char *name);
int pl_plan_model_count(void);
const struct pl_plan_model *pl_plan_model_at(int i);
const char *pl_plan_model_names(char *buf, size_t len);
/* Shape checks with errors that teach ("heads=30 does not divide d_model=4096"). */
int pl_plan_model_check(const struct pl_plan_model *m, char *err, size_t errlen);

/* ---------------------------------------------------------------- cluster */

struct pl_plan_cluster {
    const char *name;
    int nodes, per_node;
    double hbm;         /* bytes per GPU */
    double flops;       /* peak dense BF16 FLOP/s per GPU */
    double efficiency;  /* fraction of peak a transformer layer's kernels sustain */
    double bw[PL_NLINKS], latency[PL_NLINKS];
    /* 1: a torus of chips (topo.h's torus profiles, torus.h) and no node: nodes counts the
     * chips, per_node is 1, and the job's chips form pl_torus_shape(nodes); bw and
     * latency[PL_LINK_INTRA] are one neighbour link's, per direction and per hop. Each
     * axis' collectives are timed over rank 0's group of chips by pl_torus_coll_time, as the
     * replay times them, and "tp on a torus ring" (plan_rules.h) replaces the rules "tp
     * inside a node" and "ep inside a node". 0: nodes of per_node GPUs on a switched
     * network, each axis on its link class. */
    int torus;
};
/* The cluster of nodes nodes (chips, on a torus profile) of a topo.h profile. */
void pl_plan_cluster_from_profile(struct pl_plan_cluster *c, const struct pl_profile *p,
                                  int nodes);
static inline int pl_plan_gpus(const struct pl_plan_cluster *c) { return c->nodes * c->per_node; }
/* The torus that a torus cluster's chips form: pl_torus_shape(pl_plan_gpus(c)). */
void pl_plan_torus_dims(const struct pl_plan_cluster *c, int dims[3]);

/* ---------------------------------------------------------------- configuration */

/* enum pl_recompute and its names: recompute.h, shared with the reference model. */

/* The axes a configuration has, in the order the rules want them from innermost out. */
enum pl_plan_axis { PL_AX_TP, PL_AX_CP, PL_AX_EP, PL_AX_PP, PL_AX_DP, PL_NAXES };
const char *pl_plan_axis_name(enum pl_plan_axis a); /* "tp", ... */

#define PL_PLAN_ORDER "tp-cp-ep-pp-dp"

struct pl_plan_config {
    int deg[PL_NAXES];  /* degrees; world = their product. The dense part's data-parallel
                         * degree is ep x dp: expert parallelism splits the data-parallel
                         * ranks, as in Megatron-Core and DeepSeek-V3. */
    int micro;          /* sequences per microbatch */
    int m;              /* microbatches per step on each pipeline */
    int v;              /* model chunks per GPU (interleaved 1F1B); 1: plain 1F1B */
    int zero;           /* ZeRO stage 0..3 over the data-parallel group */
    enum pl_recompute recompute;
    char order[32];     /* rank order, leftmost fastest (grid.h); PL_PLAN_ORDER by default */
    /* How the training holds what it holds; 0 is the mixed-precision training above, and
     * a configuration that leaves them 0 is planned as before they were added.
     * fp32: parameters, gradients, optimizer state (no master copy), activations and the
     * traffic of every axis in 4-byte floats. no_dropout: no dropout, so nothing of it is
     * kept. vocab_whole: the embedding and the output head held whole by every TP rank of
     * the stage that has them; the head's logits stay split over the vocabulary by tp.
     * Lab 8's handout (section 3.3) states them; the bytes they give are Lab 8's to derive. */
    int fp32, no_dropout, vocab_whole;
};
/* tp x cp x ep x pp x dp: the ranks of cfg's job. On a torus they form
 * pl_torus_shape(pl_plan_world(cfg)), as the replay lays out a job's ranks: the cluster's
 * torus when the configuration fills it, as pl_plan_check's first rule wants. */
int pl_plan_world(const struct pl_plan_config *cfg);
/* The world ranks of rank 0's group over the axes of mask (bit 1 << PL_AX_TP and so on),
 * in rank order, into ranks (room for pl_plan_world(cfg)): one axis gives rank 0's tp, cp, ep or pp
 * group; cp|ep|dp the group the dense gradients are reduced over, cp|dp the experts'. These
 * are the groups the planner times on a torus, for the first stage. Returns the group's
 * size, or -1 when cfg's order or degrees do not make a grid. */
int pl_plan_group(const struct pl_plan_config *cfg, unsigned mask, int *ranks);
/* "tp8 pp16 dp128 | zero1 mb1 x16 v4 | recompute none | tp-cp-ep-pp-dp" into buf. */
const char *pl_plan_config_describe(const struct pl_plan_config *c, char *buf, size_t len);
/* Parses "tp=8,pp=16,dp=128,zero=1,micro=1,m=16,v=4,recompute=none,order=tp-cp-ep-pp-dp"
 * and the switches "fp32=1,no_dropout=1,vocab_whole=1" (0 or 1); keys absent keep what c
 * holds. Returns 0 or -1 with a message in err. The description adds the switches that
 * are on ("| fp32 no-dropout vocab-whole"), nothing when none is. */
int pl_plan_config_parse(struct pl_plan_config *c, const char *text, char *err, size_t errlen);
void pl_plan_config_default(struct pl_plan_config *c);

/* ---------------------------------------------------------------- estimates */

/* Memory of the GPU that holds the most (the first pipeline stage), in bytes. */
struct pl_plan_memory {
    double params, grads, optim, activ, total;
    double activ_layer;   /* one layer, one microbatch, as stored (after recomputation) */
    double in_flight;     /* microbatches whose activations the first stage holds at once */
    double layers_stage;  /* layers on the first stage */
};
double pl_plan_memory(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                      const struct pl_plan_config *cfg, struct pl_plan_memory *out);

/* Activation bytes of one layer for one microbatch as stored under cfg's recomputation and
 * switches, after Korthikanti et al. (2022) with the MLP's share scaled by its width and
 * sequence parallelism on whenever t > 1 (the count is Lab 8's to derive; its hints file
 * writes it out). */
double pl_plan_activation_layer(const struct pl_plan_model *m, const struct pl_plan_config *cfg);

/* Time per step, in seconds, on the critical path, and traffic per GPU per step. */
struct pl_plan_time {
    double compute;              /* all microbatches' compute on the slowest stage (the first,
                                  * or the last, which also runs the output head), no bubble */
    double exposed[PL_NAXES];    /* communication on the critical path, per axis */
    double bubble;               /* pipeline fill and drain: the other stages' slots, over v */
    double step;
    double bytes[PL_NAXES];      /* bytes each GPU sends per step along each axis */
    enum pl_link link[PL_NAXES]; /* each axis' own link class: intra-node when
                                  * pl_rule_inside_node holds for it (size 1 does), else
                                  * inter-node; the data-parallel gradient collectives are
                                  * timed on the inter-node link when dp's, ep's or cp's
                                  * class is inter-node, which link[PL_AX_DP] does not show.
                                  * On a torus every axis is intra: one network of links */
    double mfu;                  /* model FLOPs of the model's batch (batch_tokens) per step
                                  * / (step x GPUs x peak) */
    double hfu;                  /* the same with recomputation's FLOPs counted */
    double tflops;               /* model TFLOP/s per GPU */
};
double pl_plan_time(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                    const struct pl_plan_config *cfg, struct pl_plan_time *out);

/* Every placement rule (plan_rules.h) for cfg; 0, or -1 with the first rule broken in err. */
int pl_plan_check(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                  const struct pl_plan_config *cfg, char *err, size_t errlen);

/* ---------------------------------------------------------------- search */

#define PL_PLAN_KEEP 6
/* Two limits of the search's space that no placement rule states: interleaving deeper than
 * PL_PLAN_MAX_V gains little and multiplies pipeline messages; context parallelism only
 * pays for long sequences, so cp > 1 is tried only for sequences of PL_PLAN_CP_FROM_SEQ
 * tokens or more, and then as a power of two. */
#define PL_PLAN_MAX_V 8
#define PL_PLAN_CP_FROM_SEQ 32768

struct pl_plan_choice {
    struct pl_plan_config cfg;
    struct pl_plan_memory mem;
    struct pl_plan_time time;
};

/* What the search must keep, for published configurations: degrees and micro (0: free),
 * zero and recompute (-1: free). ignore_memory lets a published configuration be timed
 * where the memory model says it would not fit (plan --fix reports the memory beside). */
struct pl_plan_fixed {
    int deg[PL_NAXES];
    int micro;
    int v;              /* 0: free */
    int zero, recompute;
    int ignore_memory;
};
/* Nothing fixed. */
struct pl_plan_fixed pl_plan_fixed_none(void);
/* "tp=8,pp=35,dp=8,micro=1,v=1,zero=0,recompute=full": the keys given are fixed, the others
 * free. Returns 0, or -1 with a message in err. */
int pl_plan_fixed_parse(const char *text, int ignore_memory, struct pl_plan_fixed *fixed,
                        char *err, size_t errlen);

/* One point of the configuration space for plots: the best settings of one set of degrees
 * (or, when none fits, the one needing the least memory). */
struct pl_plan_point {
    struct pl_plan_config cfg;
    double step, mfu, memory;
    struct pl_plan_memory mem;
    int fits;
};
#define PL_PLAN_POINTS 256

struct pl_plan_result {
    int found;      /* configurations obeying every rule */
    int tried;
    /* Fastest first, each the best of different degrees (tp, cp, ep, pp, dp). */
    struct pl_plan_choice best[PL_PLAN_KEEP];
    int nbest;
    struct pl_plan_point points[PL_PLAN_POINTS];
    int npoints;
};

/* Exhaustive search over every configuration of the cluster's GPUs (fixed may be NULL).
 * Returns the number found; 0 when nothing fits. */
int pl_plan_search(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                   const struct pl_plan_fixed *fixed, struct pl_plan_result *res);
/* The fewest nodes (up to max_nodes) on which some configuration fits; 0 if none. On a torus
 * the chips are tried in powers of two, whose most cubic tori (pl_torus_shape) are the
 * shapes of TPU v4 slices from 8 chips up (2x2x2, 2x2x4, ..., 4x4x4, ..., 16x16x16). */
int pl_plan_min_nodes(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                      int max_nodes);

/* ---------------------------------------------------------------- published runs */

/* Published training runs (lib/plan_published.c, each row with its source): the degrees,
 * microbatch and schedule as published; the planner completes the rest and times it on the
 * row's cluster. counts_recompute: the published figure counts recomputed FLOPs (hardware
 * FLOPs utilisation), as Megatron's papers and BLOOM's logs do; 0: model FLOPs (MFU). The
 * rows are split in two: held_out 0 are those pl_plan_published_fit fits a profile's
 * efficiency on, held_out 1 are never used to set a constant. */
struct pl_plan_published {
    const char *model;       /* a preset of plan_model.c or a shape of plan_published.c */
    const char *profile;
    int nodes, seq;          /* seq 0: the shape's */
    double batch_tokens;     /* 0: the shape's */
    double inter_bw;         /* bytes/s per GPU between nodes; 0: the profile's */
    const char *fix;         /* --fix text (pl_plan_fixed_parse) */
    double mfu;              /* percent of peak, as published */
    int counts_recompute;
    int held_out;
    double tol;              /* points: the planner's figure must land within it */
    const char *source;      /* run, paper and table */
};
int pl_plan_published_count(void);
const struct pl_plan_published *pl_plan_published_at(int i);
/* The row's model and cluster, as the planner takes them. */
void pl_plan_published_setup(const struct pl_plan_published *p, struct pl_plan_model *m,
                             struct pl_plan_cluster *c);
/* The planner's figure for row p in percent (HFU where the row counts recomputation, else
 * MFU), its cluster's efficiency replaced by efficiency when efficiency > 0; the plan into
 * out when not NULL. */
double pl_plan_published_figure(const struct pl_plan_published *p, double efficiency,
                                struct pl_plan_choice *out);
/* The efficiency of profile that minimises the squared differences, in points, over its rows
 * with held_out 0 (a grid of 0.005 over [0.30, 0.90]); their root mean square into rms. Returns
 * 0 when profile has no fit row. */
double pl_plan_published_fit(const char *profile, double *rms);

#endif
