/* ft.h: Lab 10, fault tolerance. The fixed surface between your ft.c and the grader: do not
 * change this file. The handout is docs/labs/10-fault-tolerance.md.
 *
 * The kit trains a small GPT with its state sharded over n ranks (lib/shard_state.h: each
 * rank owns a contiguous shard of the parameters and of both AdamW moments, and every rank
 * holds the step, the RNG state and the data position). You write the checkpoint of that
 * state: a shard per rank and a manifest that commits them (section 2), the load that finds
 * the newest whole checkpoint, on any rank count (sections 3 and 4), the interval
 * between checkpoints (section 5), the snapshot that lets training go on while a
 * checkpoint is written (section 6), and the supervisor's verdict on a job that stopped
 * making progress (section 7).
 *
 * What you may call: the file calls of lib/ckpt_fs.h (the only way to the disk here: the
 * grader counts them, and kills the writing process at one of them), the shard functions of
 * lib/shard_state.h but pl_shard_step (pl_shard_range, pl_shard_get, pl_shard_set), the
 * checksum and field helpers of lib/fileio.h (pl_fnv1a, pl_put_le, pl_get_le), the C
 * library's memory and string functions, math.h. No MPI: each function runs on one rank
 * without talking to the others. */
#ifndef LAB_FT_H
#define LAB_FT_H

#include <stdint.h>

#include "ckpt_fs.h"
#include "fileio.h"
#include "shard_state.h"

/* The names the grader reads and damages: checkpoint S of a run lives in the directory
 * ROOT/step-SSSSSSSS (S in 8 digits, zero-padded), which holds one file per rank of the
 * run that saved it, shard-RRRRR (the rank in 5 digits), and the manifest, MANIFEST. Other
 * names in it (temporary files) are yours. */
#define FT_STEP_DIR "step-%08lld"
#define FT_SHARD "shard-%05d"
#define FT_MANIFEST "MANIFEST"

/* What one rank's save reports, for the manifest. */
struct ft_shard_info {
    int rank;
    uint64_t offset, count; /* the shard's elements of the flat parameter vector */
    uint64_t bytes;         /* the size of the file shard-RRRRR */
    uint64_t checksum;      /* FNV-1a 64 (pl_fnv1a) of that whole file */
};

/* Section 2. Writes this rank's shard of s (its parameters, both moments, and the step,
 * RNG state and data position) as ROOT/step-S/shard-R, S = s->step, R = s->rank, creating
 * the step's directory if no rank has yet; fills *info. The file has its final name only
 * once it is whole and on the disk. Runs on one rank with no communication: the grader runs
 * it in a process of its own, every rank at once, and may kill that process at any call of
 * ckpt_fs.h. A forked process has no GPU context and no MPI, so s is the copy
 * pl_shard_host_copy makes (shard_state.h): the shard in host memory, read with
 * pl_shard_get, and the training state; no communicator, no step buffers. Returns 0, or -1
 * when a file call failed. */
int ft_save_shard(const char *root, const struct pl_shard_state *s, struct ft_shard_info *info);

/* Section 2. On rank 0, once every rank's ft_save_shard has returned 0: commits checkpoint
 * s->step by writing ROOT/step-S/MANIFEST, which names the run (s->run.run_id), the step,
 * the rank count n and the parameter count, and every shard's offset, count, size and
 * checksum (infos[0..n), in rank order). The checkpoint exists from the moment MANIFEST has
 * its final name, and not before. Returns 0 once the commit is durable (MANIFEST's name, and
 * the step directory's own name in ROOT: ROOT synced too), or -1 when a file call failed. */
int ft_save_manifest(const char *root, const struct pl_shard_state *s,
                     const struct ft_shard_info *infos, int n);

/* Section 3: why a checkpoint is not loaded. */
enum ft_fault {
    FT_OK,             /* whole: loadable */
    FT_NO_MANIFEST,    /* no MANIFEST: the save never committed (a crash, or a save under way) */
    FT_BAD_MANIFEST,   /* a MANIFEST that does not check (cut short, flipped, or names a shard
                          layout this state cannot map: another parameter count) */
    FT_OTHER_RUN,      /* a whole checkpoint of another run (its run id) */
    FT_SHARD_MISSING,  /* a shard the manifest names is not there */
    FT_SHARD_SIZE,     /* a shard of another size than the manifest says (cut short) */
    FT_SHARD_CHECKSUM, /* a shard whose checksum is not the manifest's */
    FT_NFAULTS
};

#define FT_MAX_SKIPPED 16

/* What ft_load did, for the grader and for the job's log. */
struct ft_load_report {
    int64_t loaded;    /* the step loaded, -1 when none */
    int saved_ranks;   /* the rank count of the run that saved it */
    int nskipped;      /* newer checkpoints skipped, newest first (at most FT_MAX_SKIPPED) */
    struct ft_skip {
        int64_t step;
        int fault;     /* enum ft_fault */
        int shard;     /* the shard at fault (FT_SHARD_*), else -1 */
    } skipped[FT_MAX_SKIPPED];
};

/* Sections 3 and 4. On every rank of a new run, with no communication: finds the newest
 * checkpoint under ROOT (the highest step) that is whole, and loads it into s, whose state
 * is a fresh one of the same run (pl_shard_state_new) on any rank count: this rank's shard
 * of the parameters and both moments (s->offset, s->count on s->n ranks, whatever n saved
 * it), the step, the RNG state and the data position. Every newer checkpoint it passes over
 * goes into rep->skipped with its fault. Every rank must reach the same verdict on every
 * checkpoint, so each checks all of it. Returns the step loaded, or -1 when none is whole
 * (s is then left as it was). */
int64_t ft_load(const char *root, struct pl_shard_state *s, struct ft_load_report *rep);

/* Section 5. The checkpoint interval (seconds of training between two saves) that loses
 * the least work in expectation, for a save that stalls training save_s seconds and a
 * job that fails on average every mtbf_s seconds, to first order (Young, 1974). */
double ft_interval(double save_s, double mtbf_s);

/* Section 6: asynchronous checkpointing. A snapshot is yours (define struct ft_snapshot in
 * ft.c): everything this rank's shard file will hold, copied out of the state. */
struct ft_snapshot;

/* The stall: copies what ft_save_shard would write of s into host memory the snapshot owns
 * (one shard's copy, given back by ft_snapshot_free; host, since the background write runs
 * in a forked process, which has no GPU context), with no call of ckpt_fs.h (the step waits
 * for this function, and a disk in it is the stall asynchronous checkpointing removes).
 * NULL when memory is short. */
struct ft_snapshot *ft_snapshot_take(const struct pl_shard_state *s);

/* The background write: the shard file of the state the snapshot was taken of, as
 * ft_save_shard writes it (ROOT/step-S/shard-R for that state's step and rank, whole or
 * absent, *info filled), from the snapshot alone: the state has trained on since. The
 * grader runs it in a process of its own after the next step, as a checkpoint thread
 * would run beside it, and may kill or fail it like ft_save_shard. Returns 0, or -1 when a
 * file call failed. */
int ft_snapshot_save(const char *root, const struct ft_snapshot *snap,
                     struct ft_shard_info *info);
void ft_snapshot_free(struct ft_snapshot *snap);

/* Section 7: detecting a failure. What a supervisor outside the job sees of one rank: its
 * last heartbeat (written as each step starts), its status file (lib/trace_status.h: is it
 * blocked inside a communication call?), and its process, once that has ended. */
struct ft_rank_seen {
    int64_t step;          /* the step its last heartbeat named, -1 before the first */
    double beat_s;         /* when it wrote that heartbeat, on the supervisor's clock */
    int in_call;           /* 1: blocked inside a collective or point-to-point call */
    int ended;             /* 1: its process is gone, with ... */
    int exit_code, signal; /* ... this exit code, or killed by this signal (0: none) */
};

enum ft_failure { FT_RUNNING, FT_FINISHED, FT_RANK_DIED, FT_RANK_HUNG };

struct ft_verdict {
    int failure;  /* enum ft_failure */
    int rank;     /* FT_RANK_*: the rank at fault; else -1 */
    int64_t step; /* FT_RANK_*: that rank's last heartbeat's step; else -1 */
};

/* Section 7. The verdict on a job of n ranks at time now_s, a heartbeat older than bound_s
 * being a rank that stopped:
 *   FT_FINISHED   every rank ended with exit code 0 and no signal;
 *   FT_RANK_DIED  a rank ended otherwise (a signal, a non-zero code), or ended while another
 *                 has not: at fault the one among them whose last step is lowest (it
 *                 stopped first), ties to the lowest rank;
 *   FT_RANK_HUNG  no rank ended, and some heartbeat is older than bound_s: at fault the rank
 *                 that holds the others up, the one of those that is not blocked inside a
 *                 communication call (the others wait in theirs for it); when every such
 *                 rank is inside a call (a deadlock of the calls themselves), the one whose
 *                 last step is lowest, ties to the lowest rank;
 *   FT_RUNNING    otherwise: a heartbeat late within bound_s is a straggler, not a failure.
 * A died rank is reported at once, a hung one as soon as its heartbeat is more than bound_s
 * old. Before a rank's first heartbeat, beat_s is when the job started. */
struct ft_verdict ft_detect(const struct ft_rank_seen *seen, int n, double now_s,
                            double bound_s);

#endif
