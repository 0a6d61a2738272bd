/* harness.h: the lab harness. It owns a lab driver's main: the flags (lib/flags.h, with
 * help and "did you mean"), the modes, the case loop, the collective verdicts, "not graded
 * until correct", stub detection, and the report lines the orchestrator reads. A lab's
 * grader/NN-name/driver.c supplies one struct gr_driver named gr_lab_driver: how to set up
 * an --op, build and run each case, and judge each part; how to probe and time its code for
 * the perf mode; and what its bench mode prints. Its plan (grader/NN-name/plan.c, grade.h)
 * is linked in too: --op accepts exactly the ops its tests name.
 *
 *   driver --op OP --mode check [--parts correct,traffic,...] [--seed S] [lab flags]
 *   driver --op OP --mode perf [--seed S] [lab flags]
 *   driver --mode bench [--op OP] [--label NAME] [lab flags]
 *
 * check: for each case i of the op: "case" line, pl_todo_reset(), run(i); a stub reached on
 * any rank fails part "correct" with "still a stub: WHAT (see docs/labs/NN-name.md section
 * S)"; then judge(i, "correct"), then judge(i, p) for every other part asked for that has
 * not failed yet. judge is called on every rank and rank 0's answer is the verdict of all
 * (a lab may gather its ranks' observations to rank 0 in run or judge). The first wrong
 * case stops the loop. Each part then gets one result; the parts after a wrong "correct"
 * get 0 with "not graded: SUBJECT CORRECT_FIRST".
 * perf: pl_todo_reset(), probe() (a stub reached fails it with the stub message; probe
 * returns 0 after saying why the code is wrong), then perf() measures, says its figures and
 * the leaderboard metric, and returns the fraction of the points.
 * bench: bench() prints a table; nothing is judged.
 * A lab on the new shape (observe, obs_size, judge_obs below) is judged from every rank's
 * observation gathered once to rank 0; its judge calls no MPI. */
#ifndef GR_HARNESS_H
#define GR_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "flags.h"
#include "grade.h"
#include "report.h"
#include "verdict.h"

#define GR_MAX_OPTS 8

/* What the harness parsed, for the lab. */
struct gr_args {
    const char *op;    /* NULL in bench mode without --op */
    const char *mode;  /* check, perf or bench */
    const char *parts; /* comma-separated, check mode */
    const char *label; /* bench: whose code this is, for the table's title */
    uint64_t seed;     /* the grading seed: data and sizes drawn from it */
    int figures;       /* bench: only what the handout quotes (no wall-clock timing) */
    const char *record; /* check: --record FILE, where rank 0 writes the gathered observations */
    /* The lab's options (gr_driver.options), in the table's order; a value not given keeps
     * the table's default (0 or NULL). */
    union gr_opt {
        int i;          /* PL_FLAG_INT, PL_FLAG_SWITCH */
        int64_t l;      /* PL_FLAG_I64 */
        uint64_t u;     /* PL_FLAG_U64 */
        float f;        /* PL_FLAG_FLOAT */
        double d;       /* PL_FLAG_DOUBLE */
        const char *s;  /* PL_FLAG_STR */
    } opt[GR_MAX_OPTS];
    int given[GR_MAX_OPTS]; /* 1 where option k was on the command line */
};

struct gr_driver {
    /* The lab's own flags (may be NULL), parsed with the harness's. */
    struct pl_flag *flags;
    int nflags;
    /* Collective, once flags are parsed: checks what the run can do (pl_usage_error_all with
     * a message when it cannot, e.g. a rank count) and returns the lab's state. */
    void *(*setup)(const struct gr_args *a);
    /* What messages name for this op: "ring_all_reduce", "ZeRO-2". */
    const char *(*subject)(void *st);
    /* Ends the sentence "not graded: SUBJECT ...", e.g. "must give correct results first". */
    const char *correct_first;
    /* check mode: the number of cases, each one's description ("case" line), running case i
     * (collective), and the verdict of one part on it (collective, rank 0's counts; it says
     * why with gr_say when it fails). */
    int (*ncases)(void *st);
    void (*describe)(void *st, int i, char *buf, size_t len);
    void (*run)(void *st, int i);
    int (*judge)(void *st, int i, const char *part);
    /* perf mode (may be NULL when the plan has no perf test): see above. */
    int (*probe)(void *st);
    double (*perf)(void *st);
    /* bench mode (may be NULL). */
    void (*bench)(const struct gr_args *a);
    /* Frees the state (may be NULL). */
    void (*finish)(void *st);
    /* Called before the library starts, with the --op (NULL when none) and --mode given;
     * may be NULL. It may set what the library reads when it starts: environment (NCCL's,
     * on the GPU build) and the virtual cluster the op runs on, *nodes and/or *per_node
     * (as --nodes N --gpus-per-node G; one alone: the other follows from the rank count;
     * left 0: the machine's own topology). A --nodes, PL_NODES or PL_GPUS_PER_NODE given
     * by the person running the driver wins. */
    void (*before_init)(const char *op, const char *mode, int *nodes, int *per_node);

    /* ---- the new shape (optional: a lab that sets observe uses it, run and judge unused) ----
     * The harness owns the lab's state and the gather. setup returns the state on the heap
     * (seed, config, cases; only const tables stay at file scope), finish frees it. For case
     * i the harness zeroes obs_size(st, i) bytes for this rank, calls observe (collective: it
     * runs the case and fills this rank's observation), gathers every rank's to rank 0 once,
     * and calls judge_obs there alone for "correct", then for every other part asked for
     * that has not failed yet. judge_obs calls no MPI and reads nothing but its arguments: it
     * returns 1 (the part passes this case) or 0, and says why, and any figures a passing
     * part shows, with gr_why_say (verdict.h); the harness says each line for the part,
     * applies gr_why_partial's fraction, and broadcasts the verdict. --record FILE writes the
     * gathered observations of every case to FILE, for tests/judge/NN-name.c. */
    size_t (*obs_size)(const void *st, int i);
    void (*observe)(void *st, int i, void *obs);
    int (*judge_obs)(const void *st, int i, const char *part, const struct gr_obs *all,
                     struct gr_why *why);
    /* The lab's own flags without storage of its own (may be NULL): each is parsed like
     * flags, its ptr ignored, and its value is gr_args.opt[k] for entry k (at most
     * GR_MAX_OPTS). */
    const struct pl_flag *options;
    int noptions;
};

/* Defined by the lab's driver.c. */
extern const struct gr_driver gr_lab_driver;

/* The lab this driver grades (its plan.c's descriptor). */
const struct gr_lab *gr_this_lab(void);
/* "docs/labs/NN-name.md" */
const char *gr_handout(void);

/* Collective: 1 on every rank when any rank reached a stub since pl_todo_reset(); rank 0
 * then knows which (pl_todo_what). */
int gr_todo_any(void);
/* Part's reason "still a stub: WHAT (see HANDOUT section S)" (rank 0, after gr_todo_any). */
void gr_say_stub(const char *part);
/* A part that passes earns this fraction of its points (the smallest given in the run; rank
 * 0's counts), e.g. an overlap between no marks and full marks. Check mode only. */
void gr_partial(const char *part, double fraction);
/* Collective: rank 0's value of x on every rank. */
int gr_agree(int x);

#endif
