/* prefetch.h: Lab 3's ZeRO-3 step on the modelled timeline. The student's own step is
 * traced, and its trace replayed on a cluster profile twice: as recorded, and with every
 * all-gather waited for right where it was issued (the same step without prefetch). The
 * share of the all-gathers' run the compute stream stopped waiting for, against that
 * replay, is what the prefetch hid; the model bounds how much any step can hide (the first
 * gather has nothing before it, and the comm stream runs one gather at a time, so a gather
 * longer than the compute before it stays partly exposed), and the grade is the share of
 * that bound reached. The bench draws one ZeRO-3 step: memory over time by category, from
 * the memory ledger, and the modelled timeline with and without prefetch. */
#ifndef L3_PREFETCH_H
#define L3_PREFETCH_H

#include "lab03.h"

/* The step is replayed as the step of a model with GPT-2 small's parameter count and this
 * many tokens per rank, as Lab 2's overlap is: bytes times L3_PREFETCH_PSI / Psi, FLOPs times
 * that and L3_PREFETCH_TOKENS / the rank's tokens. */
#define L3_PREFETCH_PROFILE "dgx-h100"
#define L3_PREFETCH_PSI 124e6
#define L3_PREFETCH_TOKENS 8192.0
/* Full marks from hiding L3_PREFETCH_FULL of the most any step hides, none up to
 * L3_PREFETCH_NONE of it (gathers waited for where they are issued hide nothing). */
#define L3_PREFETCH_FULL 0.80
#define L3_PREFETCH_NONE 0.20

struct l3_prefetch_side {
    double step;       /* modelled step time, the slowest rank */
    double ag_exposed; /* all-gather time the compute stream waited for (that rank) */
};

struct l3_prefetch_result {
    int n;
    double ag;                    /* the all-gathers' time on the comm stream, per rank */
    struct l3_prefetch_side with, without;
    double hidden;                /* 1 - with.ag_exposed / without.ag_exposed */
    double ideal;                 /* the most of ag any step hides, from the model alone */
};

/* Whether the check run records a step into pf for the prefetch test (--parts prefetch). */
void l3_prefetch_want(struct l3_prefetch *pf, int on);
/* Collective, around zero_step of step `step` of `steps`: the last one is traced when
 * wanted, and its merged trace kept in pf on rank 0. */
void l3_prefetch_step_begin(struct l3_prefetch *pf, int step, int steps);
void l3_prefetch_step_end(struct l3_prefetch *pf, int step, int steps);
/* Rank 0, after the traced case: replays pf's trace into f's figures (and the report's
 * metric); the judge words them. cfg and B: the graded model and each rank's sequences. */
void l3_prefetch_observe(const struct l3_prefetch *pf, const struct pl_model_config *cfg, int B,
                         const struct zero_layout *e, struct l3_prefetch_fig *f);
void l3_prefetch_free(struct l3_prefetch *pf);

/* Collective over the world: a communicator split from the world in world order, the one
 * zero_new is given outside check mode's cases (released after zero_free with
 * gr_case_comm_free, case_comm.h, as its owner would). */
struct pl_comm *l3_comm_open(void);

/* Collective, bench: one ZeRO-3 step with prefetch, traced and its memory watched; rank 0
 * writes 03-zero-memory-time.svg, 03-zero-timeline-prefetch.svg and
 * 03-zero-timeline-no-prefetch.svg into dir (when not NULL) and prints the figures the
 * handout quotes. e: rank 0's layout, computed by the grader. tag: what the figures of the
 * code's own step are printed as ("handout" under --figures, where the solution runs;
 * otherwise whose code it is). Returns 0 when the stage is still a stub. */
int l3_prefetch_bench(const struct gr_train_setup *setup, const struct zero_layout *e,
                      const char *dir, const char *tag);

#endif
