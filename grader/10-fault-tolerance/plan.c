/* plan.c: the descriptor and test plan of Lab 10 (fault tolerance), read by the grader.
 *
 * A checkpoint saved and resumed on 1 and 3 ranks (4 + 8), every file of it written whole
 * or not at all, its name made durable (8); a save killed at five points (between two shard
 * writes, before a shard's rename, before the manifest, in the middle of the manifest,
 * before its rename) or failing at two calls (a shard's write, the manifest's sync, as on a
 * full disk: the function must return -1): the restart loads the last committed checkpoint
 * and trains on bit for bit (16), no kill leaves a half-written file under a final name (8),
 * and the load reports the uncommitted one (4); twelve kinds of damage (a flipped byte in a
 * shard's middle, in its first and in its last byte, a shard cut short, a shard removed,
 * another run's checkpoint, one of this run with another parameter count, a manifest cut
 * short or with a byte flipped in its middle or its last byte, every checkpoint damaged in
 * shard 0 or in the last shard): the previous one is loaded, or none with the state left as
 * it was (10), and the damage named (10); restarts on other rank counts, 8 -> 6, 4
 * -> 3, 2 -> 4, 6 -> 8, 3 -> 1, on 6374 parameters that none of 3, 4, 6, 8 divides: every
 * shard bit for bit the one-rank reference's, the training after it too, and the rank count
 * that saved it reported (24); the checkpoint interval against the formula (12); a snapshot
 * taken at step 4 with no file call in it, one shard's size, given back by its free (4),
 * written after step 5 has trained, by section 2's rules, the restart from it bit for bit
 * (6), also with its writer killed or failing; the supervisor's verdict on ten scenarios
 * of a model job, sampled every 0.1 s (10). 124 points.
 * The
 * hidden suite runs the crash on 2 ranks, the damage on 3, the resume on 4 and the
 * restarts that fit on 6, on its own seed. */
#include <stdio.h>

#include "grade.h"
#include "rules/symbols.h"

#define LAB10_TIMEOUT 120

static int lab10_runs(int np)
{
    return np == 1 || np == 2 || np == 3 || np == 4 || np == 6 || np == 8;
}

static int asked(const struct gr_plan_opts *o, int np)
{
    if (!o->np_given) return 1;
    for (int i = 0; o->np[i]; i++)
        if (o->np[i] == np) return 1;
    return 0;
}

static void lab10_plan(const struct gr_plan_opts *o)
{
    static const struct gr_spec visible[] = {
        {"checkpoint and resume [np=1, 2 cases]", "resume", "check", "correct", "correctness", 1,
         4, LAB10_TIMEOUT, 0, NULL},
        {"checkpoint and resume, uneven shards [np=3, 2 cases]", "resume", "check", "correct",
         "correctness", 3, 8, LAB10_TIMEOUT, 0, NULL},
        {"every file whole or absent: temporary name, sync, close, rename [np=3]", "resume",
         "check", "atomic", "correctness", 3, 8, LAB10_TIMEOUT, 0, NULL},
        {"killed or failing during a save: restart from the last committed checkpoint, same "
         "losses [np=3, 5 kill points, 4 failed calls]", "crash", "check", "correct",
         "correctness", 3, 16, LAB10_TIMEOUT, 0, NULL},
        {"killed or failing during a save: no half-written file under a final name [np=3]",
         "crash", "check", "atomic", "correctness", 3, 8, LAB10_TIMEOUT, 0, NULL},
        {"killed or failing during a save: the uncommitted checkpoint reported as "
         "FT_NO_MANIFEST [np=3]", "crash", "check", "named", "correctness", 3, 4, LAB10_TIMEOUT,
         0, NULL},
        {"damaged checkpoint skipped, the previous one loaded [np=2, 12 kinds of damage]",
         "corrupt", "check", "correct", "correctness", 2, 10, LAB10_TIMEOUT, 0, NULL},
        {"each damage named by its fault [np=2, 12 kinds of damage]", "corrupt", "check", "named",
         "correctness", 2, 10, LAB10_TIMEOUT, 0, NULL},
        {"restart on another rank count, state and losses bit for bit [8->6, 4->3, 2->4, 6->8, "
         "3->1]", "reshard", "check", "correct", "correctness", 8, 24, LAB10_TIMEOUT, 0, NULL},
        {"asynchronous checkpoint: restart from the snapshot's step, same losses, the write "
         "whole or absent [np=3, 3 cases]", "async", "check", "correct", "correctness", 3, 6, LAB10_TIMEOUT, 0, NULL},
        {"asynchronous checkpoint: one shard's copy, no file call in the stall [np=3]", "async",
         "check", "stall",
         "correctness", 3, 4, LAB10_TIMEOUT, 0, NULL},
        {"failure detection: died, hung, deadlocked, finished, a straggler [np=1, 10 scenarios]",
         "detect", "check", "correct", "correctness", 1, 10, LAB10_TIMEOUT, 0, NULL},
        {"checkpoint interval [4 cases, 2 drawn by the seed]", "interval", "check", "correct",
         "correctness", 1, 12, LAB10_TIMEOUT, 0, NULL},
    };
    static const struct gr_spec hidden[] = {
        {"hidden: killed during a save [np=2]", "crash", "check", "correct", "correctness", 2, 2,
         LAB10_TIMEOUT, 1, NULL},
        {"hidden: damaged checkpoint skipped and named [np=3]", "corrupt", "check", "correct",
         "correctness", 3, 1, LAB10_TIMEOUT, 1, NULL},
        {"hidden: damage named [np=3]", "corrupt", "check", "named", "correctness", 3, 1,
         LAB10_TIMEOUT, 1, NULL},
        {"hidden: checkpoint and resume [np=4]", "resume", "check", "correct", "correctness", 4,
         1, LAB10_TIMEOUT, 1, NULL},
        {"hidden: restart on another rank count [4->3, 2->4, 3->1 on np=6]", "reshard", "check",
         "correct", "correctness", 6, 2, LAB10_TIMEOUT, 1, NULL},
    };
    for (size_t i = 0; i < sizeof visible / sizeof visible[0]; i++)
        if (asked(o, visible[i].np)) gr_add(&visible[i]);
    if (o->hidden)
        for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++)
            if (asked(o, hidden[i].np)) gr_add(&hidden[i]);
}

static const struct gr_lab lab10 = {
    .dir = "10-fault-tolerance",
    .title = "fault tolerance",
    .plan = lab10_plan,
    .metric = NULL,
    .metric_title = NULL,
    .bench_args = "--seed 1",
    .bench_np = "1",
    /* The disk only through lib/ckpt_fs.h, whose calls the grader counts and kills at. */
    .forbidden_symbols = GR_SYMBOLS_BELOW_KIT
    "open open64 openat openat64 creat creat64 fopen fopen64 freopen freopen64 "
    "rename renameat renameat2 unlink unlinkat remove rmdir mkdir mkdirat truncate ftruncate "
    "fsync fdatasync sync syncfs write pwrite pwrite64 writev pwritev link symlink "
    "fork vfork execv* execl* system popen kill raise pl_shard_step pl_shard_state_new",
    .allowed_symbols = NULL,
    .runs_on = lab10_runs,
    .runs_on_words = "1, 2, 3, 4, 6 or 8 ranks",
    .runs_on_why = "do not divide the kit's batch of 24 sequences",
    .symbol_rule = "Lab 10 reaches the disk only through the kit's file calls (lib/ckpt_fs.h), "
                   "which the grader counts to inject its crashes, and talks to no other rank: "
                   "no MPI_*, no file call of the C library, no process of its own; the "
                   "training step and its states are the grader's (pl_shard_step, "
                   "pl_shard_state_new)",
};
GR_REGISTER_LAB(lab10)
