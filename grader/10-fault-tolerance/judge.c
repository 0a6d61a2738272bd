/* judge.c: Lab 10's verdicts, from the ranks' observations alone (no MPI, no files): what a
 * save's process did, the checkpoint the load chose and the faults it named, the loaded
 * state against the one-rank reference, the restarted run's losses, and the interval. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "lab10.h"

const char *const L10_OP_NAMES[L10_NOPS] = {"resume",   "crash", "corrupt", "reshard",
                                            "interval", "async", "detect"};
const char *const L10_OP_FUNCS[L10_NOPS] = {"ft_save_shard, ft_save_manifest and ft_load",
                                            "ft_load after a crash",
                                            "ft_load on a damaged checkpoint",
                                            "ft_load on another rank count", "ft_interval",
                                            "ft_snapshot_take and ft_snapshot_save",
                                            "ft_detect"};
const char *const L10_CALL_NAMES[L10_NCALLS] = {
    "pl_fs_create", "pl_fs_write", "pl_fs_sync", "pl_fs_close", "pl_fs_rename",
    "pl_fs_sync_dir", "pl_fs_mkdir", "pl_fs_remove"};

const char *const L10_FAULT_NAMES[FT_NFAULTS] = {
    "FT_OK", "FT_NO_MANIFEST", "FT_BAD_MANIFEST", "FT_OTHER_RUN", "FT_SHARD_MISSING",
    "FT_SHARD_SIZE", "FT_SHARD_CHECKSUM"};
static const char *const FIELD_NAMES[L10_NFIELDS] = {"", "params", "adam_m", "adam_v", "step",
                                                     "rng", "data_pos"};
/* Tokens a step moves the data position by: K sequences of T tokens (pl_shard_run_default). */
#define L10_TOKENS_PER_STEP (24 * 8)

int l10_find_op(const char *name)
{
    for (int i = 0; i < L10_NOPS; i++)
        if (name && !strcmp(name, L10_OP_NAMES[i])) return i;
    return -1;
}

static const char *fault_name(int f)
{
    return f >= 0 && f < FT_NFAULTS ? L10_FAULT_NAMES[f] : "(not an enum ft_fault)";
}

static const struct l10_obs *at(const struct gr_obs *all, int r)
{
    return gr_obs_rank(all, r);
}

/* A save's process that failed, crashed, or was killed by someone else. */
static int judge_proc(const struct gr_obs *all, struct gr_why *why)
{
    for (int r = 0; r < all->nranks; r++) {
        const struct l10_obs *o = at(all, r);
        const char *fn = o->proc_manifest ? "ft_save_manifest" : "ft_save_shard";
        switch (o->proc) {
        case L10_P_FAILED:
            gr_why_say(why, "rank %d: your %s returned -1 at step %d: a file call failed, so "
                       "nothing could be graded after it", r, fn, o->proc_step);
            for (int q = 0; q < all->nranks; q++)
                if (at(all, q)->async_newer) {
                    gr_why_say(why, "rank %d's ft_snapshot_save wrote under step %d's name, "
                               "the step trained after the snapshot: the snapshot read the "
                               "live state when it was written, where it must hold a copy "
                               "taken in ft_snapshot_take (section 6)", q, o->proc_step + 1);
                    break;
                }
            return 0;
        case L10_P_CRASHED:
            if (o->proc_sig > 0)
                gr_why_say(why, "rank %d: the process running your %s at step %d died of "
                           "signal %d (%s), not of the grader's kill", r, fn, o->proc_step,
                           o->proc_sig, strsignal(o->proc_sig));
            else
                gr_why_say(why, "rank %d: your %s called exit(%d) at step %d: return -1 "
                           "instead", r, fn, -o->proc_sig, o->proc_step);
            return 0;
        case L10_P_FOREIGN_KILL:
            gr_why_say(why, "rank %d: the process running %s at step %d was killed (SIGKILL) "
                       "by something other than the grader's injected crash, perhaps the "
                       "machine's memory limit: not a fault of your code the grader can "
                       "name; run it again", r, fn, o->proc_step);
            return 0;
        case L10_P_GRADER:
            gr_why_say(why, "the grader itself failed on rank %d (%s): not your code's fault; "
                       "run it again, and report it if it stays", r, o->grader_err);
            return 0;
        case L10_P_IGNORED:
            gr_why_say(why, "rank %d: %s failed in your %s at step %d (the grader made it fail "
                       "with ENOSPC, as a full disk does), and the function returned 0. ft.h: "
                       "-1 when a file call failed; a save that reports success for a file "
                       "that is not whole lets rank 0 commit a checkpoint that cannot be "
                       "loaded, and a failed sync cannot be retried into a durable file",
                       r, o->proc_sig >= 0 && o->proc_sig < L10_NCALLS
                              ? L10_CALL_NAMES[o->proc_sig] : "a file call",
                       fn, o->proc_step);
            return 0;
        default: break;
        }
    }
    return 1;
}

static void say_field(const struct l10_obs *o, int r, struct gr_why *why)
{
    const char *f = FIELD_NAMES[o->field];
    if (o->field <= L10_F_ADAM_V) {
        gr_why_say(why, "rank %d of %d (its shard [%llu, %llu) of %llu): %s element %llu is "
                   "%.9g after the load, %.9g in the run at step %lld", r, o->n_load,
                   (unsigned long long)o->offset, (unsigned long long)(o->offset + o->count),
                   (unsigned long long)o->numel, f, (unsigned long long)o->at, o->got, o->ref,
                   (long long)o->loaded);
        if (o->n_save != o->n_load && (o->numel % (uint64_t)o->n_save || o->numel % (uint64_t)o->n_load))
            gr_why_say(why, "%llu parameters do not split evenly on %d or %d ranks: the saved "
                       "shard r holds [floor(r P / n), floor((r+1) P / n)) (pl_shard_range), "
                       "and this rank's range must be gathered from every saved shard it "
                       "overlaps (section 4)", (unsigned long long)o->numel, o->n_save,
                       o->n_load);
        return;
    }
    if (o->field == L10_F_STEP) {
        gr_why_say(why, "rank %d: step is %llu after the load, the checkpoint's is %llu", r,
                   (unsigned long long)o->got_u, (unsigned long long)o->ref_u);
    } else if (o->field == L10_F_RNG) {
        gr_why_say(why, "rank %d: the RNG state is %#llx after the load, the run's at step "
                   "%lld is %#llx: every dropout mask after the restart would differ from "
                   "the uninterrupted run's (section 2: the RNG state is part of what a "
                   "shard saves)", r, (unsigned long long)o->got_u, (long long)o->loaded,
                   (unsigned long long)o->ref_u);
    } else {
        long long d = (long long)o->ref_u - (long long)o->got_u;
        gr_why_say(why, "rank %d: the data position is %llu after the load, the run's at step "
                   "%lld is %llu (%lld tokens, %.4g steps of %d tokens, %s): the restarted run "
                   "would train on %s (section 2: the data position is part of what a shard "
                   "saves)", r, (unsigned long long)o->got_u, (long long)o->loaded,
                   (unsigned long long)o->ref_u, d, (double)d / L10_TOKENS_PER_STEP,
                   L10_TOKENS_PER_STEP, d > 0 ? "behind" : "ahead",
                   d > 0 ? "batches it has already seen" : "the wrong batches");
    }
}

/* Async: a snapshot that was not taken. */
static int judge_snapshot(const struct gr_obs *all, struct gr_why *why)
{
    for (int r = 0; r < all->nranks; r++)
        if (at(all, r)->snap_null) {
            gr_why_say(why, "rank %d: ft_snapshot_take returned NULL: the snapshot is the "
                       "checkpoint's only source once the state trains on (section 6)", r);
            return 0;
        }
    return 1;
}

/* Async: the stall is the snapshot's copy, with no file call in it, and the copy is one
 * shard's size. */
static int judge_stall(const struct gr_obs *all, struct gr_why *why)
{
    if (!judge_snapshot(all, why)) return 0;
    for (int r = 0; r < all->nranks; r++) {
        const struct l10_obs *o = at(all, r);
        double shard = 3.0 * (double)o->count * sizeof(float);
        if (o->snap_left > L10_SNAP_SLACK) {
            gr_why_say(why, "rank %d: once ft_snapshot_free returned, %.0f bytes more of the C "
                       "library's heap were held than before ft_snapshot_take: the free did "
                       "not give the snapshot back, and a job that saves every interval runs "
                       "out of host memory (section 6)", r, o->snap_left);
            return 0;
        }
        if (o->snap_bytes >= shard && o->snap_bytes <= shard + L10_SNAP_SLACK) continue;
        gr_why_say(why, "rank %d: the snapshot holds %.0f bytes of the C library's heap, where "
                   "this rank's shard is 3 x %llu floats = %.0f bytes (and up to %d bytes of "
                   "header and bookkeeping): %s (section 6)", r, o->snap_bytes,
                   (unsigned long long)o->count, shard, L10_SNAP_SLACK,
                   o->snap_bytes < shard
                       ? "less than a copy of the shard, so it still reads the state it was "
                         "taken of"
                       : "more than one copy of the shard, which every rank pays in host "
                         "memory for every snapshot in flight");
        return 0;
    }
    for (int r = 0; r < all->nranks; r++) {
        const struct l10_obs *o = at(all, r);
        if (!o->stall_calls) continue;
        gr_why_say(why, "rank %d: ft_snapshot_take made %d call%s of ckpt_fs.h, the first "
                   "%s: the step waits for ft_snapshot_take, so the disk is back in the "
                   "stall that asynchronous checkpointing removes. Copy the state into the "
                   "snapshot there, and leave every file call to ft_snapshot_save, which runs "
                   "beside the next step (section 6)", r, o->stall_calls,
                   o->stall_calls == 1 ? "" : "s",
                   o->stall_call >= 0 && o->stall_call < L10_NCALLS
                       ? L10_CALL_NAMES[o->stall_call] : "?");
        return 0;
    }
    return 1;
}

/* The checkpoint loaded, the state, the losses after. */
static int judge_restart(const struct gr_obs *all, struct gr_why *why)
{
    if (!judge_proc(all, why) || !judge_snapshot(all, why)) return 0;
    for (int r = 0; r < all->nranks; r++) {
        const struct l10_obs *o = at(all, r);
        if (!o->active) continue;
        if (o->loaded != o->expect_loaded) {
            if (o->expect_loaded < 0)
                gr_why_say(why, "rank %d: ft_load returned %lld, but every checkpoint under "
                           "ROOT is damaged (steps %lld and older): it must return -1 and "
                           "leave the state as it was", r, (long long)o->loaded,
                           (long long)o->expect_skip);
            else if (o->loaded < 0)
                gr_why_say(why, "rank %d: ft_load found no whole checkpoint, but step %lld's "
                           "was committed and is whole", r, (long long)o->expect_loaded);
            else if (o->loaded == o->expect_skip && o->op == L10_OP_CRASH)
                gr_why_say(why, "rank %d: ft_load loaded step %lld, whose save was killed "
                           "before its manifest was committed: a half-written checkpoint "
                           "(the newest whole one is step %lld)", r, (long long)o->loaded,
                           (long long)o->expect_loaded);
            else if (o->loaded == o->expect_skip)
                gr_why_say(why, "rank %d: ft_load loaded step %lld, which should fail as %s: "
                           "the damage went unnoticed (the newest whole checkpoint is step "
                           "%lld)", r, (long long)o->loaded, fault_name(o->expect_fault),
                           (long long)o->expect_loaded);
            else
                gr_why_say(why, "rank %d: ft_load returned %lld, expected step %lld", r,
                           (long long)o->loaded, (long long)o->expect_loaded);
            if (o->nskipped > 0)
                gr_why_say(why, "it reported step %lld skipped as %s", (long long)o->skip0.step,
                           fault_name(o->skip0.fault));
            if (o->op == L10_OP_ASYNC && o->expect_loaded == o->expect_skip)
                gr_why_say(why, "step %lld's checkpoint was written from the snapshot after the "
                           "next step had trained: a snapshot that points into the state, "
                           "instead of holding a copy, writes the newer state or under the "
                           "newer step's name (section 6)", (long long)o->expect_skip);
            return 0;
        }
        if (o->field && o->expect_loaded < 0) {
            gr_why_say(why, "rank %d: ft_load found nothing whole and returned -1, but changed "
                       "the state (%s differs from the fresh state's): it must load nothing "
                       "until a whole checkpoint has passed, and leave s as it was when none "
                       "has (ft.h; section 3)", r, FIELD_NAMES[o->field]);
            return 0;
        }
        if (o->field) {
            say_field(o, r, why);
            if (o->op == L10_OP_ASYNC)
                gr_why_say(why, "the checkpoint was written from the snapshot after the next "
                           "step had trained: does the snapshot hold a copy of everything the "
                           "shard file holds, taken in ft_snapshot_take (section 6)?");
            return 0;
        }
        if (o->op == L10_OP_RESHARD && o->loaded >= 0 && o->saved_ranks != o->n_save) {
            gr_why_say(why, "rank %d: the report's saved_ranks is %d, but step %lld was saved "
                       "on %d rank%s and loaded on %d: the job's log reads it to tell a "
                       "reshard from a plain restart (ft.h, struct ft_load_report)", r,
                       o->saved_ranks, (long long)o->loaded, o->n_save, o->n_save == 1 ? "" : "s",
                       o->n_load);
            return 0;
        }
    }
    for (int r = 0; r < all->nranks; r++) {
        const struct l10_obs *o = at(all, r);
        if (o->active && o->loss_step) {
            gr_why_say(why, "the restarted run's loss at step %d is %.17g, the uninterrupted "
                       "run's %.17g: the state loaded compares equal, so something else the "
                       "step reads differs", o->loss_step, o->loss_got, o->loss_ref);
            return 0;
        }
    }
    return 1;
}

/* One broken rule of a durable write, in words. */
static void rule_words(const struct l10_rule_obs *u, char *buf, size_t len)
{
    switch (u->rule) {
    case L10_R_FINAL_CREATED:
        snprintf(buf, len, "created %s under its final name: a crash while it is being written "
                 "leaves a half-written %s that looks whole; write a temporary name, sync, "
                 "close, then rename", u->name, u->name);
        break;
    case L10_R_RENAME_UNSYNCED:
        snprintf(buf, len, "renamed %s to %s before syncing it after its last write: after a "
                 "power loss the final name can point at an empty or partial file; pl_fs_sync, "
                 "pl_fs_close, then pl_fs_rename", u->name, u->to);
        break;
    case L10_R_RENAME_OPEN:
        snprintf(buf, len, "renamed %s to %s while it was still open: sync and close it first",
                 u->name, u->to);
        break;
    case L10_R_NOT_WRITTEN:
        snprintf(buf, len, "renamed %s to %s, but wrote nothing to %s first", u->name, u->to,
                 u->name);
        break;
    case L10_R_NAME_UNSYNCED:
        snprintf(buf, len, "renamed %s to %s and returned without syncing the directory after "
                 "it: the new name is not on the disk yet, so after a power loss a committed "
                 "MANIFEST can name a shard that is gone, or the commit itself vanish after "
                 "ft_save_manifest said it was done; pl_fs_sync_dir once the rename is made "
                 "(section 2)", u->name, u->to);
        break;
    case L10_R_ROOT_UNSYNCED:
        snprintf(buf, len, "committed %s and returned without syncing ROOT (%s): the step "
                 "directory that holds it is a name the shards' pl_fs_mkdir added to ROOT, not "
                 "on the disk until ROOT is synced, so after a power loss the whole checkpoint "
                 "can vanish after ft_save_manifest said it was done; pl_fs_sync_dir(root) "
                 "before returning (section 2)", u->name, u->to);
        break;
    default:
        snprintf(buf, len, "returned 0 but gave no file its final name (%s or %s)", FT_MANIFEST,
                 "shard-RRRRR");
        break;
    }
}

static int judge_atomic(const struct gr_obs *all, struct gr_why *why)
{
    if (!judge_proc(all, why)) return 0;
    for (int r = 0; r < all->nranks; r++) {
        const struct l10_obs *o = at(all, r);
        if (o->rule.rule == L10_R_OK) continue;
        char words[512];
        rule_words(&o->rule, words, sizeof words);
        gr_why_say(why, "rank %d's %s %s", r,
                   o->rule.manifest ? "ft_save_manifest" : "ft_save_shard", words);
        return 0;
    }
    return 1;
}

/* Async: the restart, and the background write held to section 2's rules like any save. */
static int judge_async(const struct gr_obs *all, struct gr_why *why)
{
    return judge_restart(all, why) && judge_atomic(all, why);
}

static int judge_named(const struct gr_obs *all, struct gr_why *why)
{
    for (int r = 0; r < all->nranks; r++) {
        const struct l10_obs *o = at(all, r);
        if (!o->active) continue;
        const struct ft_skip *k = &o->skip0;
        if (o->nskipped < 1 || k->step != o->expect_skip) {
            gr_why_say(why, "rank %d: the report's first skipped checkpoint is %s, expected step "
                       "%lld as %s", r, o->nskipped < 1 ? "none" : "another step",
                       (long long)o->expect_skip, fault_name(o->expect_fault));
            return 0;
        }
        if (k->fault != o->expect_fault || (o->expect_shard >= 0 && k->shard != o->expect_shard)) {
            gr_why_say(why, "rank %d: step %lld was skipped as %s (shard %d), expected %s%s",
                       r, (long long)k->step, fault_name(k->fault), k->shard,
                       fault_name(o->expect_fault), o->expect_shard >= 0 ? " of that shard" : "");
            if (o->expect_shard >= 0)
                gr_why_say(why, "the shard at fault is %d", o->expect_shard);
            return 0;
        }
    }
    return 1;
}

static int judge_interval(const struct gr_obs *all, struct gr_why *why)
{
    const struct l10_obs *o = at(all, 0);
    double e = fabs(o->interval - o->interval_ref);
    if (!(e <= 1e-9 * o->interval_ref)) {
        gr_why_say(why, "save %.6g s, MTBF %.6g s: your interval is %.9g s, the first-order "
                   "optimum is %.9g s (section 5)", o->save_s, o->mtbf_s, o->interval,
                   o->interval_ref);
        return 0;
    }
    return 1;
}

static const char *const FAILURE_NAMES[] = {"FT_RUNNING", "FT_FINISHED", "FT_RANK_DIED",
                                             "FT_RANK_HUNG"};

static void verdict_words(const struct ft_verdict *v, char *buf, size_t len)
{
    const char *name = v->failure >= 0 && v->failure <= FT_RANK_HUNG ? FAILURE_NAMES[v->failure]
                                                                     : "(not an ft_failure)";
    if (v->failure == FT_RANK_DIED || v->failure == FT_RANK_HUNG)
        snprintf(buf, len, "%s, rank %d, step %lld", name, v->rank, (long long)v->step);
    else
        snprintf(buf, len, "%s", name);
}

static int judge_detect(const struct gr_obs *all, struct gr_why *why)
{
    const struct l10_obs *o = at(all, 0);
    if (!o->det_bad) return 1;
    char got[96], want[96], ranks[512] = "";
    verdict_words(&o->det_got, got, sizeof got);
    verdict_words(&o->det_want, want, sizeof want);
    for (int r = 0; r < L10_DET_RANKS; r++) {
        const struct ft_rank_seen *s = &o->det_seen[r];
        size_t n = strlen(ranks);
        if (s->ended)
            snprintf(ranks + n, sizeof ranks - n, "%srank %d ended (step %lld, %s %d)",
                     r ? "; " : "", r, (long long)s->step, s->signal ? "signal" : "exit code",
                     s->signal ? s->signal : s->exit_code);
        else
            snprintf(ranks + n, sizeof ranks - n, "%srank %d at step %lld, heartbeat %.2f s "
                     "old, %s", r ? "; " : "", r, (long long)s->step, o->det_t - s->beat_s,
                     s->in_call ? "inside a call" : "computing");
    }
    gr_why_say(why, "%s: at %.2f s your ft_detect said %s, where the scenario is %s (bound "
               "%.0f s). What the supervisor saw: %s (section 7)", o->det_what,
               o->det_t, got, want, o->det_bound, ranks);
    if (o->det_want.failure == FT_RUNNING && o->det_got.failure == FT_RANK_HUNG)
        gr_why_say(why, "a heartbeat late within the bound is a straggler or a rank waiting in "
                   "a call: restarting the job for it costs the work since the last checkpoint");
    else if (o->det_want.failure == FT_RANK_HUNG && o->det_got.failure == FT_RANK_HUNG)
        gr_why_say(why, "the ranks blocked inside a call are waiting for the one that is not: "
                   "restarting without it would leave the real fault in the job");
    return 0;
}

int l10_judge(int op, const char *part, const struct gr_obs *all, struct gr_why *why)
{
    if (op == L10_OP_DETECT) return judge_detect(all, why);
    if (op == L10_OP_ASYNC && !strcmp(part, "correct")) return judge_async(all, why);
    if (op == L10_OP_INTERVAL) return judge_interval(all, why);
    if (!strcmp(part, "atomic")) return judge_atomic(all, why);
    if (!strcmp(part, "stall")) return judge_stall(all, why);
    if (!strcmp(part, "named")) return judge_named(all, why);
    return judge_restart(all, why);
}
