/* prefetch.h: Lab 3's ZeRO-3 step on the modelled timeline. The student's own step is
 * traced, and its trace replayed on a cluster profile twice: as recorded, and with every
 * all-gather waited for right where it was issued (the same step without prefetch). The
 * difference in exposed communication is the all-gather time the prefetch hid; the model
 * says how much an ideal prefetch could hide (a gather hides only behind the compute of
 * the unit before it, and the first one behind nothing), and the grade is the share of
 * that reached. The bench draws one ZeRO-3 step: memory over time by category, from the
 * memory ledger, and the modelled timeline with and without prefetch. */
#ifndef LAB03_PREFETCH_H
#define LAB03_PREFETCH_H

#include "train.h"
#include "zero.h"

/* The step is replayed as the step of a model with GPT-2 small's parameter count and this
 * many tokens per rank, as Lab 2's overlap is: bytes times PREFETCH_PSI / Psi, FLOPs times
 * that and PREFETCH_TOKENS / the rank's tokens. */
#define PREFETCH_PROFILE "dgx-h100"
#define PREFETCH_PSI 124e6
#define PREFETCH_TOKENS 8192.0
/* Full marks from hiding PREFETCH_FULL of what an ideal prefetch hides, none up to
 * PREFETCH_NONE of it (gathers waited for where they are issued hide nothing). */
#define PREFETCH_FULL 0.80
#define PREFETCH_NONE 0.20

struct prefetch_side {
    double step;       /* modelled step time, the slowest rank */
    double ag_exposed; /* all-gather time the compute stream waited for (that rank) */
};

struct prefetch_result {
    int n;
    double ag;                    /* the all-gathers' time on the comm stream, per rank */
    struct prefetch_side with, without;
    double hidden;                /* 1 - with.ag_exposed / without.ag_exposed */
    double ideal;                 /* what the model's ideal prefetch hides of ag */
};

/* Whether the check run records a step for the prefetch test (--parts prefetch). */
void prefetch_want(int on);
/* Collective, around zero_step of step `step` of `steps`: the last one is traced when
 * wanted, and its merged trace kept on rank 0. */
void prefetch_step_begin(int step, int steps);
void prefetch_step_end(int step, int steps);
/* Rank 0, judge("prefetch"): replays the kept trace and reports the verdict (gr_say,
 * gr_partial). cfg and B: the graded model and the sequences of each rank. */
int prefetch_judge(const struct pl_model_config *cfg, int B, const struct zero_layout *e);
void prefetch_free(void);

/* Collective over the world: a communicator split from the world in world order, the one
 * zero_new is given outside check mode's cases; and its release after zero_free, as its
 * owner would. pl_comm_free refuses a communicator with operations in flight (a usage error
 * that ends the run), so the ranks first agree whether any has one: it is freed only when
 * none has. Returns this rank's operations still in flight. */
struct pl_comm *gr03_comm_open(void);
int gr03_comm_close(struct pl_comm *comm);

/* Collective, bench: one ZeRO-3 step with prefetch, traced and its memory watched; rank 0
 * writes 03-zero-memory-time.svg, 03-zero-timeline-prefetch.svg and
 * 03-zero-timeline-no-prefetch.svg into dir (when not NULL) and prints the figures the
 * handout quotes. e: rank 0's layout, computed by the grader. tag: what the figures of the
 * code's own step are printed as ("handout" under --figures, where the solution runs;
 * otherwise whose code it is). Returns 0 when the stage is still a stub. */
int prefetch_bench(const struct gr_train_setup *setup, const struct zero_layout *e,
                   const char *dir, const char *tag);

#endif
