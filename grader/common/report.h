/* report.h: how a lab's driver speaks to the orchestrator, and how it times code.
 *
 *   the report channel   gr_report_*(), gr_case/gr_say/gr_result/gr_metric: verdicts go to
 *                        the channel the orchestrator names in PL_GRADE_REPORT (a FIFO it
 *                        reads as lines arrive: grader/sandbox/sandbox.h), one line each,
 *                        carrying the run's token (read from PL_GRADE_TOKEN_FILE, which is
 *                        then removed), written by world rank 0 only. The harness opens and
 *                        closes it; a lab only says, reports results and metrics;
 *   performance          gr_perf_compare(): the code under test timed against a baseline in
 *                        interleaved rounds, and the fraction of the points it earns. */
#ifndef GR_REPORT_H
#define GR_REPORT_H

#include <stddef.h>
#include <stdint.h>

/* ---- the report channel ---- */

/* Call before pl_init: the report file's and token file's names leave the environment
 * (overwritten in place, then unset) before any code under test can read them. */
void gr_report_take_env(void);
/* Collective, right after pl_init and before any code under test runs: world rank 0 reads
 * the token file ("TOKEN SEED": the grading seed travels with the token, never on the
 * command line) and removes it, and opens the report file (stdout when none is named, so a
 * driver run by hand prints its verdicts). Every rank then has the grader's seed in *seed;
 * without a token file *seed is left as it was (the --seed flag). */
void gr_report_open(uint64_t *seed);
void gr_report_close(void);
/* "case TEXT": what the run is doing now, shown when it hangs or crashes. */
void gr_case(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "say PART TEXT": one line of the reason shown under test PART. */
void gr_say(const char *part, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "result PART FRACTION SECONDS": the verdict of PART, a fraction of its points. */
void gr_result(const char *part, double fraction, double seconds);
/* "metric NAME VALUE": a figure for the leaderboard or the log. */
void gr_metric(const char *name, double value);
/* x printed with as many digits as it takes to differ from limit printed the same way
 * (at most 9), so a verdict never reads "error 1e-05, more than 1e-05". A static buffer of
 * a small ring: up to 4 results may be used in one printf. */
const char *gr_fmt_beyond(double x, double limit);
/* 1 when the comma-separated list parts names p. */
int gr_has_part(const char *parts, const char *p);

/* ---- performance against a baseline ---- */

/* Full marks for performance from this fraction of the baseline's speed: every lab's bar on
 * every backend, unless the lab sets another one for its backend (gr_perf_set_bar). */
#define GR_PERF_FULL_RATIO 0.7

/* The bar gr_perf_compare judges by (GR_PERF_FULL_RATIO unless set), and setting it for the
 * rest of the run: Lab 1 on NCCL, where a point-to-point ring cannot use the collective
 * kernels' fused protocols (docs/gpu.md). */
double gr_perf_bar(void);
void gr_perf_set_bar(double bar);

/* Paired rounds measured at most, over every batch (the medians are taken over these). */
#define GR_PERF_MAX_PAIRS 64

struct gr_perf {
    /* Seconds per unit of work of the paired round whose ratio is nearest the median: the
     * times the ratio reads as (each side's own median may come from rounds of other load). */
    double best_base, best_mine;
    double ratio;                /* the median of the paired ratios base/mine: 1 is as fast */
    double spread;               /* half the interquartile range of the paired ratios */
    int pairs;                   /* paired rounds the median is taken over */
    double fraction;             /* of the points: 1 from the bar (gr_perf_bar), else linear */
    int undecided;               /* short of the bar, but within the noise of it */
    int not_judged;              /* this run cannot judge speed (gr_perf_judged): full marks */
};

/* Whether wall-clock times on this placement can judge speed: 1 when they can (the CPU
 * build, or the GPU build with one GPU per rank), with the backend the bar applies to in
 * why ("on backend nccl"); 0 when ranks share a GPU (per_device > 1, backend mpi-staged):
 * their kernels and copies contend for one device, so a ratio would measure the contention.
 * why then says so, for the verdict line; 0 too on the CUDA stand-in of the kit's tests
 * (emulated 1), whose devices are host threads on the cores the ranks use. backend is
 * pl_comm_backend(), per_device pl_comm_ranks_per_device() (0 on the CPU build), emulated
 * pl_comm_device_emulated(). Pure, so that it is tested anywhere. */
int gr_perf_judged(const char *backend, int per_device, int emulated, char *why, size_t len);

/* Collective. time(ctx, mine) measures one round of the baseline (mine 0) or of the code under
 * test (mine 1) and returns its seconds per unit, the same on every rank (the slowest rank's). One
 * warm-up pair is thrown away; then each round times both sides back to back (A/B, then B/A, so
 * neither always goes first) and keeps their ratio: a busy moment slows both halves of one pair,
 * not one side of the whole comparison. The verdict is the median of the paired ratios (a middle
 * pair's, whose times the verdict line gives). While the median is within its spread of
 * GR_PERF_FULL_RATIO (the noise could put it on either side), or short of it, another batch of
 * rounds is measured, up to batches in all, so a loaded machine costs time, not points. A median
 * that is still within its spread of the bar after every batch is undecided: the machine was too
 * busy to tell the two apart, and the code keeps full marks (said in the verdict). Points are lost
 * only when the ratio is short of the bar by more than its spread. Where this run cannot judge
 * speed (gr_perf_judged: ranks sharing a GPU), one batch is measured for the record, the code
 * keeps full marks and the verdict says why (not_judged). Each side's time must include the device
 * work it started: gr_perf_round waits for it (pl_ops_wait) before reading the clock, and so must
 * a lab's own time callback. */
void gr_perf_compare(double (*time)(void *ctx, int mine), void *ctx, int rounds, int batches,
                     struct gr_perf *out);
/* Collective: seconds per call of reps calls of mine(ctx) (mine 1) or base(ctx) (mine 0),
 * the slowest rank's, from a barrier: one round of gr_perf_compare for a lab whose two sides
 * are plain functions. */
double gr_perf_round(void (*base)(void *), void (*mine)(void *), void *ctx, int reps,
                     int which);

/* The median of v[0..n) and half its interquartile range (v is sorted in place). */
double gr_median_spread(double *v, int n, double *spread);

/* "median of N paired rounds, spread +-S": how a ratio was measured, for the verdict line
 * (a static buffer, valid until the next call); it ends with why speed was not judged, when
 * it was not. */
const char *gr_perf_how(const struct gr_perf *pf);

/* "full marks from 0.70x on backend nccl" (the bar and where it applies) for a verdict line;
 * a static buffer, valid until the next call. */
const char *gr_perf_bar_text(void);

/* The verdict of part "perf" for a training step timed by gr_perf_compare: "yours X ms per
 * step (T tokens/s), BASELINE Y ms per step: Rx (...); full marks from 0.70x on backend
 * mpi", the hint when the
 * ratio is short of full marks, the leaderboard metric (tokens/s); returns the fraction of the points. */
double gr_perf_report_step(const struct gr_perf *pf, double tokens, const char *baseline,
                           const char *hint, const char *metric);

#endif
