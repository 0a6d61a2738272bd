/* lab04.h: what the files of Lab 4's driver share: the graded model and cases, the parts
 * each rank judges, the inputs and comparisons (check.c), the ops (layers.c, vocab.c,
 * placement.c), and the block on the modelled timeline with the lab's figures (timeline.c).
 * driver.c plugs them into the lab harness. */
#ifndef LAB04_H
#define LAB04_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "block_time.h"
#include "harness.h"
#include "paralab.h"
#include "tensors.h"
#include "tp.h"
#include "train.h"

#define TOL_FWD 1e-5 /* docs/design.md: relative L2 per tensor, fp32 forward */
#define TOL_BWD GR_TOL_GRADS
#define PLACE_NODES 2
#define PLACE_PER_NODE 4
#define PLACE_TP 4

/* The grading seed (--seed), and the seed the running case draws its inputs from: the
 * grading seed, or on a TP x DP grid one of its own per DP replica, so that the groups hold
 * different data and code that uses the world where it needs its group changes the numbers. */
extern uint64_t grading_seed, base_seed;

/* The graded model: 8 heads so that t = 8 splits them too; every degree that divides 8
 * divides d_ff and the vocabulary. */
struct pl_model_config graded_config(void);

/* The batch shapes of the layer ops' cases. */
struct lab04_case {
    int B, T;
};
#define NCASES 3
extern const struct lab04_case CASES[2];
/* Case i of the layer ops: CASES[0], CASES[1], then one drawn from the grading seed with
 * B > 1 and T < seq_len (on a TP x DP grid from 4 ranks up, driver.c). */
struct lab04_case case_shape(int i);

/* The parts this rank judges (grader/common/parts.h), gathered to rank 0 by judge(). */
enum part { P_CORRECT, P_TRAFFIC, P_MEMORY, P_PLACEMENT, P_ORDER, P_TIME, NPARTS };
extern const char *const PART_NAMES[NPARTS];

/* ---- check.c: inputs and comparisons (with grader/common/tensors.h) ---- */

int extra_bias(const float *got, const float *ref, const float *b, int N, int OC, int t);

/* A full block with every tensor random (biases and layernorm weights too, so that a bias
 * added t times or a layernorm gradient summed shows), as one flat part of the model's
 * layout, and the shard of TP rank r of t sliced from it. */
struct block_case {
    struct pl_model_config cfg;
    int t, r, B, T, N;
    size_t full_numel, shard_numel;
    float *full, *full_g;     /* one block, the model's order */
    float *shard, *shard_g;
    float *shard_g0;          /* what shard_g held when handed over */
    struct pl_block_params p, g, sp, sg;
    float *x, *dy;            /* [N, C] the same on every rank */
};

/* The shard's gradients are handed over holding non-zero values (parameter gradients
 * accumulate, +=), kept in shard_g0 for the comparison. */
void block_case_new(struct block_case *k, int t, int r, int B, int T);
void block_case_free(struct block_case *k);
/* "" when tp is the world; else a sentence (starting ". ") on the group's rank and
 * communicator against the world's, for hints. */
const char *world_hint(struct pl_comm *tp);
/* A parameter gradient handed over holding init (op memory) against the oracle's ref: got -
 * init must be ref, as the += of tp.h says; code that overwrote it is told so. 1 when right. */
int compare_accumulated(const char *what, const float *got, const float *init, const float *ref,
                        size_t n, double tol, const char *hint);
/* An input gradient handed over holding junk against ref: the backward writes it (=). */
int compare_written(const char *what, const float *got, const float *junk, const float *ref,
                    size_t n, double tol, const char *hint);
/* n floats of junk from stream name (op memory), to hand a buffer over non-zero. */
float *junk(const char *name, size_t n);

/* Each shard gradient of the tensors in `which` (indices into the block's tensor table)
 * against its block of the full gradient. */
void compare_shard_grads(const struct block_case *k, const int *which, int n, const char *hint);

/* The traffic of one pass, from the ledger. */
struct pass_traffic {
    long ar_calls, other_calls;
    double ar_bytes, other_bytes;
};

void traffic_since(const struct pl_ledger *mark, struct pass_traffic *out);
/* Every rank's pass made `calls` all-reduces of `count` floats each and nothing else. */
void judge_pass_traffic(const char *pass, const struct pass_traffic *tr, long calls,
                        double count, int t, const char *where);

/* ---- layers.c: f and g, the linears, the MLP, the attention and the block ---- */

enum sub { SUB_MLP, SUB_ATTN, SUB_BLOCK };

struct sub_run {
    struct pass_traffic fwd, bwd;
    struct pl_ledger code; /* the student's forward and backward alone (not the oracle) */
    double oracle_flops;   /* the single device's forward and backward, from the ledger */
    double activation_floats; /* N x C: the size of each all-reduce */
};

void run_conjugates(struct pl_comm *tp);
void run_linear(struct pl_comm *tp, int i);
/* One case of a sub-layer or the block: the student's forward and backward against the
 * oracle, its traffic in run; traced: recorded for the modelled timeline (collective). */
void run_sub_case(struct pl_comm *tp, enum sub s, int B, int T, int traced,
                  struct sub_run *run);
void run_sub(struct pl_comm *tp, enum sub s, int i);

/* ---- vocab.c: the vocabulary-parallel loss, and training the whole model ---- */

#define TRAIN_STEPS 3
#define TRAIN_B 4
#define TRAIN_LAYERS 2
#define CORPUS_TOKENS 8192

void run_vocab(struct pl_comm *tp, int i);
void run_train(struct pl_comm *tp);

/* ---- unseen.c: collective buffers outside the memory ledger ---- */

/* Starts noting the buffers this rank's collectives are given that lie in static storage
 * or on the stack. */
void lab04_unseen_begin(void);
/* Stops; returns the bytes those buffers span, with the region of the larger span (0 when
 * none, else GR_UNSEEN_STACK or GR_UNSEEN_STATIC) and the first collective that used it. */
double lab04_unseen_end(int *where, const char **call);

/* ---- placement.c: 2 nodes x 4 ranks, and the bench ---- */

void run_placement(int i);
void lab04_bench(const struct gr_args *args);

/* ---- perf.c: the block on the wall clock ---- */

/* Sets up the timed block on tp and runs it once; 1 when it ran. */
int lab04_probe(struct pl_comm *tp);
/* Times it against the kit's parts (report.h's paired rounds); the fraction of the points. */
double lab04_perf(void);

/* ---- figures.c: `make plots LAB=04` ---- */

/* --plots-dir: where bench mode draws the figures (NULL: none). */
extern const char *lab04_plots_dir;
/* PLOTS_DIR/name opened for an SVG page of w x h (path gets its name); closed with the
 * line "wrote PATH". */
FILE *lab04_svg_open(const char *name, char *path, size_t len, int w, int h);
void lab04_svg_close(FILE *f, const char *path);
/* The f/g figure of the TP MLP and attention. */
void lab04_plot_fg(void);

/* ---- timeline.c: the block on the modelled timeline ---- */

/* Whether check mode grades part time (set up from --parts). */
void time_want(int on);
/* Whether case i of sub-layer s is traced for it. */
int time_traced(enum sub s, int i);
/* Rank 0: replays the gathered trace of run, writes the timeline to svg (may be NULL), and
 * sets it against the bound inside a node (block_time.h). Returns 0, or -1 with a message
 * in err. */
int time_measure(const struct sub_run *run, int t, int across, const char *svg,
                 struct gr_bt_verdict *out, char *err, size_t len);
/* Collective: judges part time on case 0 (rank 0) and says the figures on every case. */
void time_judge(const struct sub_run *run, int t, int i);

#endif
