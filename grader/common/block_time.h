/* block_time.h: a split transformer block's forward and backward on the modelled timeline
 * (Labs 4 and 5). The driver records the student's passes of one block (the compute between
 * their calls, counted in FLOPs by the ledger, and every collective), leaving its own checks
 * out; rank 0 replays the trace on the dgx-h100 profile scaled to one GPT-3 175B block (b = 1,
 * s = 2048, h = 12288, 16-bit): FLOPs by the ratio of that block's 72bsh^2(1 + s/6h) to what
 * the single-device block counted, bytes by the ratio of the two activations bsh. A lab sets
 * the result against the least its scheme can take: the compute split t ways plus the
 * collectives its conjugates need, serially (each one's result is the next op's input). */
#ifndef GR_BLOCK_TIME_H
#define GR_BLOCK_TIME_H

#include <stddef.h>

#define GR_BT_PROFILE "dgx-h100"
#define GR_BT_B 1.0
#define GR_BT_S 2048.0
#define GR_BT_H 12288.0

/* Collective, around the student's forward (begin ... pause) and backward (resume ...
 * pause); end gathers the trace to rank 0 (complete = 0: the backward never ran). */
void gr_bt_begin(void);
void gr_bt_pause(void);
void gr_bt_resume(void);
void gr_bt_end(int complete);
/* Forgets the gathered trace. */
void gr_bt_free(void);
/* 1 when a complete trace is held (rank 0). */
int gr_bt_traced(void);

/* The scaled block: its forward and backward FLOPs, and the bytes of one [b, s, h] tensor. */
double gr_bt_flops(void);
double gr_bt_bytes(void);

/* The least a block of degree t can take at the scaled size inside a node: its compute
 * split t ways plus four ring all-reduces of bsh values on intra-node links (Lab 5's four
 * all-gathers and four reduce-scatters take the same). */
double gr_bt_bound(int t);

/* Full marks up to GR_BT_FULL times the bound, none from GR_BT_NONE, linear between. */
#define GR_BT_FULL 1.10
#define GR_BT_NONE 1.40

struct gr_bt_result {
    double step;    /* modelled forward and backward, the slowest rank (s) */
    double compute; /* the busiest rank's compute (s) */
    double comm;    /* the communication stream of the rank that waited most (s) */
};

/* A replayed block against its bound; what a judged block keeps for the cases after the
 * traced one. */
struct gr_bt_verdict {
    struct gr_bt_result r;
    double bound, ratio; /* 0 until judged */
};

/* Rank 0: replays the held trace of a block whose single-device passes counted
 * oracle_flops and whose activation is activation_floats floats, and sets its step against
 * gr_bt_bound(t); writes the timeline to svg (may be NULL) titled title. Returns 0, or -1
 * with a message in err. */
int gr_bt_replay(double oracle_flops, double activation_floats, int t, const char *svg,
                 const char *title, struct gr_bt_verdict *out, char *err, size_t len);

/* Rank 0: replays the held trace on the GR_BT_PROFILE cluster with every compute event's
 * FLOPs times flop_x and every transfer's bytes times byte_x (a lab's own scale) into ov
 * (train.h); svg non-NULL also draws the timeline there, titled title. Returns 0, or -1 with
 * a message in err. */
struct gr_overlap;
int gr_bt_replay_scaled(double flop_x, double byte_x, const char *svg, const char *title,
                        struct gr_overlap *ov, char *err, size_t len);

/* What a block's verdict is decided from, on rank 0 (a judge's observation). */
struct gr_bt_figures {
    int traced;     /* 1: a complete trace was replayed */
    char err[256];  /* why not */
    int t;
    double step, compute, bound, ratio; /* as struct gr_bt_verdict */
    double split;   /* the single device's compute split t ways (s) */
};

/* Rank 0: the figures of a replayed block v of degree t (v->bound 0: none replayed, err
 * says why). */
void gr_bt_figures_of(const struct gr_bt_verdict *v, int t, const char *err,
                      struct gr_bt_figures *m);
/* Collective, after a block's case: on the traced case (first != 0) rank 0 replays the held
 * trace (no picture) into *last, which says why when no complete trace is held; every rank
 * then forgets the trace. The cases after the first leave *last as it was, for the part's
 * note on the last case (Labs 4 and 5). */
void gr_bt_record(int first, double oracle_flops, double activation_floats, int t,
                  struct gr_bt_figures *last);

/* The verdict on m, no MPI (block_verdict.c; Labs 4 and 5's judges): 1 passes,
 * earning *fraction of the points (between GR_BT_FULL and GR_BT_NONE less than 1), or 0
 * with the reason in why (comm: the collectives the bound counts, in words; section: the
 * handout's). */
int gr_bt_decide(const struct gr_bt_figures *m, const char *comm, const char *section,
                 double *fraction, char *why, size_t len);
/* What a block that was replayed says (empty when none was). */
void gr_bt_note(const struct gr_bt_figures *m, const char *comm, const char *section, char *buf,
                size_t len);

#endif
