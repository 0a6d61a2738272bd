/* train.h: what the drivers of the labs that train (DDP, ZeRO, ...) share. Compiled into
 * every lab's driver (grader/grader.mk), so a lab's driver.c includes "train.h" and calls:
 *
 *   (the report channel, timing and stubs come from harness.h and report.h)
 *   the reference        gr_reference_run(): K AdamW steps of the single-device reference
 *                        (lib/model.h) on the whole global batch of each step, keeping every
 *                        step's loss and the final flat parameters (host copies). Every rank
 *                        computes it (the models are tiny), so comparisons need no gather;
 *   batches              gr_batch_*(): this rank's slice of a step's global batch in op
 *                        memory, from the loader of datasets/data.h;
 *   comparisons          gr_global_loss(), gr_check_losses(), gr_check_params() with the
 *                        DESIGN tolerances (relative L2: 1e-5 per step for losses, 1e-4 for
 *                        parameters after K steps), naming rank, step, tensor and error;
 *   traffic              gr_ledger_mark()/gr_ledger_since()/gr_ledger_gather_world():
 *                        per-step (or per-call) deltas of the traffic ledger, gathered to
 *                        rank 0;
 *   the modelled overlap gr_overlap_replay(): the merged trace of a step replayed on a
 *                        cluster profile, with how much communication stayed exposed.
 *
 * All MPI the helpers do themselves is raw MPI on MPI_COMM_WORLD, so none of it is charged
 * to the traffic ledger or recorded in the trace the student's code is judged by. */
#ifndef GR_TRAIN_H
#define GR_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "data.h"
#include "harness.h"
#include "ledger.h"
#include "model.h"
#include "replay.h"
#include "trace.h"
#include "units.h"

/* ---- the single-device reference ---- */

#define GR_TOL_LOSS 1e-5   /* relative error of each step's loss */
#define GR_TOL_GRADS 1e-4  /* relative L2 error of each tensor's gradient in a step */
#define GR_TOL_PARAMS 1e-4 /* relative L2 error of each tensor after K steps */

struct gr_train_setup {
    struct pl_model_config cfg;
    struct pl_adamw_config opt;
    const struct pl_tokens *data;
    int global_B;       /* sequences per step, split evenly across the ranks */
    int steps;          /* K */
    uint64_t data_seed; /* the loader's shuffle */
};

struct gr_reference {
    struct gr_train_setup setup;
    struct pl_model_layout layout; /* tensor names and offsets, for messages */
    size_t numel;                  /* Psi */
    double *loss;                  /* [steps] objective of step s on the whole batch */
    float *init;                   /* [numel] host: parameters before the first step */
    float *params;                 /* [numel] host: parameters after the last step */
    float *grads;                  /* [steps * numel] host: step s's gradient (before
                                      clipping) at grads + s * numel */
};

/* Trains a fresh model (initialised from cfg.seed) for setup->steps steps on the whole
 * global batch of each step, exactly as pl_model_step does (no dropout), keeping each
 * step's gradient before the update. Local: every rank may call it. */
void gr_reference_run(struct gr_reference *ref, const struct gr_train_setup *setup);
void gr_reference_free(struct gr_reference *ref);

/* ---- batches ---- */

struct gr_batch {
    int B, T;               /* this rank's sequences and their length */
    int *h_tokens, *h_targets; /* host */
    int *tokens, *targets;  /* op memory (the same as host on the CPU build) */
    struct pl_loader loader;
};

/* This rank's slice (rank of nranks) of global batches of global_B sequences. */
void gr_batch_new(struct gr_batch *b, const struct gr_train_setup *s, int rank, int nranks);
/* Loads the slice of step `step` (from 0) into tokens/targets. */
void gr_batch_load(struct gr_batch *b, int64_t step);
void gr_batch_free(struct gr_batch *b);

/* ---- comparisons ---- */

/* |got - ref| / max(|ref|, 1e-30): the relative error of a scalar. */
double gr_rel_err(double got, double ref);
/* Collective (raw MPI): the mean over world ranks of each rank's local loss, which is the
 * loss of the whole global batch when the ranks hold equal slices. Every rank gets it. */
double gr_global_loss(double local_loss);
/* The first step whose loss is off by more than GR_TOL_LOSS, or -1 when all agree. */
int gr_check_losses(const double *got, const double *ref, int steps, double *err);

/* How far a rank's parameters are from the reference: the worst tensor by relative L2
 * error ||got - ref|| / ||ref||. A tensor whose norm is below the whole buffer's RMS times
 * sqrt(its size) (a bias that started at zero) is measured against that floor instead, so
 * that rounding alone never fails it. */
struct gr_param_verdict {
    int ok;
    int rank;          /* the rank holding the worst tensor (-1 when summed over shards) */
    int tensor;        /* index in layout.tensors */
    double rel;        /* its relative L2 error */
    double max_abs;    /* its largest element error */
    size_t worst_elem; /* and where (flat index into the tensor) */
    double overall;    /* relative L2 error of all parameters together */
    int nonfinite;     /* elements that are NaN or Inf (all ranks) */
};

enum gr_params_layout {
    GR_REPLICATED, /* every rank holds all parameters (DDP): the worst rank is named */
    GR_SHARDED     /* each rank holds [offset, offset+n) of the flat buffer (ZeRO): the
                      errors of a tensor are summed over the ranks holding parts of it */
};

/* Collective (raw MPI). got is op memory holding flat elements [offset, offset+n) of this
 * rank's parameters; they are compared with ref->params over the same range. The verdict is
 * valid on rank 0 (ok on every rank). tol is usually GR_TOL_PARAMS. */
void gr_check_params(const struct gr_reference *ref, enum gr_params_layout mode, size_t offset,
                     size_t n, const float *got, double tol, struct gr_param_verdict *v);
/* The same for a gradient: got (op memory) against ref->grads of step `step` over
 * [offset, offset+n); tol is usually GR_TOL_GRADS. */
void gr_check_grads(const struct gr_reference *ref, int step, enum gr_params_layout mode,
                    size_t offset, size_t n, const float *got, double tol,
                    struct gr_param_verdict *v);
/* "rank 2, tensor h.1.mlp.w_fc [64, 32]: relative L2 error 3.1e-02 (max abs 4.2e-03 at
 * element 17), all parameters 1.2e-03": the verdict's worst tensor for a message. */
const char *gr_describe_param_error(const struct gr_reference *ref,
                                    const struct gr_param_verdict *v, char *buf, size_t len);
/* The same words from the model's layout alone (verdict.c: no MPI, so a pure judge that
 * recorded the verdict words it too). */
const char *gr_param_error_words(const struct pl_model_layout *lay,
                                 const struct gr_param_verdict *v, char *buf, size_t len);
/* Same test between ranks instead of against the reference: 1 on every rank when every
 * rank's n elements (op memory) equal rank 0's bit for bit; otherwise *bad_rank and
 * *bad_elem (rank 0) say where first. */
int gr_replicas_equal(const float *x, size_t n, int *bad_rank, size_t *bad_elem);
/* The tensor holding flat element i, or NULL. */
const struct pl_param_desc *gr_tensor_at(const struct pl_model_layout *lay, size_t i);

/* ---- traffic ---- */

/* A copy of this rank's ledger now; gr_ledger_since gives what was added after it. */
void gr_ledger_mark(struct pl_ledger *mark);
void gr_ledger_since(const struct pl_ledger *mark, struct pl_ledger *delta);
/* Collective (raw MPI): every rank's ledger into all[world size] on rank 0. */
void gr_ledger_gather_world(const struct pl_ledger *mine, struct pl_ledger *all);
/* Bytes sent of every kind, and operations of every kind but point to point. */
double gr_ledger_total_bytes(const struct pl_ledger *l);
long gr_ledger_total_calls(const struct pl_ledger *l);

/* ---- the modelled overlap ---- */

struct gr_overlap {
    double step_time;  /* modelled step, the slowest rank */
    double compute;    /* compute-stream busy time, the slowest rank's */
    double comm;       /* communication-stream busy time (the rank with most) */
    double exposed;    /* compute stalled on communication (that rank) */
    double not_hidden; /* exposed / comm: 0 all hidden behind compute, 1 none */
};

/* A copy of m whose compute events carry flop_scale times their FLOPs and whose transfers
 * carry byte_scale times their bytes; its events are its own (edit them freely), its groups
 * m's. Free it with gr_trace_scaled_free, before m. */
void gr_trace_scaled(const struct pl_merged_trace *m, double flop_scale, double byte_scale,
                     struct pl_merged_trace *out);
void gr_trace_scaled_free(struct pl_merged_trace *c);

/* Rank 0 only, on a merged trace (pl_trace_gather): copies it with every compute event's
 * FLOPs times flop_scale and every transfer's bytes times byte_scale (1 and 1: as recorded),
 * replays it on profile p with the run's topology and fills out. svg_path non-NULL also
 * writes the modelled timeline there, titled title. Returns 0, or -1 with a message in
 * err when the trace cannot be replayed (a collective some rank never issued). */
int gr_overlap_replay(const struct pl_merged_trace *m, const struct pl_profile *p,
                      double flop_scale, double byte_scale, const char *svg_path,
                      const char *title, struct gr_overlap *out, char *err, size_t errlen);

/* The memory category that grew most from a to b (into *cat), and by how many bytes (0:
 * none grew): what a lab's code kept from one point of a run to a later one. */
double gr_mem_grown(const struct pl_mem_stats *a, const struct pl_mem_stats *b, int *cat);

#endif
