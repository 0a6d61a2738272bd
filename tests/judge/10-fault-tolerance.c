/* tests/judge/10-fault-tolerance.c: Lab 10's judges (grader/10-fault-tolerance/judge.c) run
 * alone, without mpirun, forks or files, on hand-built observations and on those a check run
 * of the solution recorded (driver --record FILE):
 *
 *   10-fault-tolerance             the hand-built cases: each reason, its figures built here
 *   10-fault-tolerance FILE PARTS  every case of FILE passes PARTS (comma-separated), and the
 *                                  same observations made wrong on their last rank fail
 *                                  naming that rank
 * Exit 0 when every check holds; each failed one is printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab10.h"
#include "../testing.h"
#include "judge_test.h"

#define NR 3

static struct l10_obs ob[NR];

static int judge(int op, const char *part, int n, struct gr_why *why)
{
    struct gr_obs all = {n, sizeof ob[0], (const unsigned char *)ob};
    gr_why_init(why);
    return l10_judge(op, part, &all, why);
}

/* A restart on 3 ranks that loaded step 2, as expected, and matched. */
static void good(int op)
{
    memset(ob, 0, sizeof ob);
    for (int r = 0; r < NR; r++) {
        struct l10_obs *o = &ob[r];
        o->op = op;
        o->active = 1;
        o->rank = r;
        o->n_save = o->n_load = NR;
        o->numel = 6374;
        pl_shard_range(6374, NR, r, &o->offset, &o->count);
        o->loaded = o->expect_loaded = 2;
        o->saved_ranks = NR;
        o->snap_bytes = 3.0 * (double)o->count * sizeof(float) + 80; /* a copy and a header */
        o->expect_skip = 4;
        o->expect_fault = FT_SHARD_CHECKSUM;
        o->expect_shard = 2;
        o->nskipped = 1;
        o->skip0 = (struct ft_skip){4, FT_SHARD_CHECKSUM, 2};
    }
}

static void expect(int op, const char *part, int n, const char *text)
{
    struct gr_why w;
    int ok = judge(op, part, n, &w);
    CHECK(!ok && said(&w, text), "%s %s: expected a failure saying \"%s\", got %s: %s",
          L10_OP_NAMES[op], part, text, ok ? "a pass" : "a failure", first(&w));
}

static void hand_built(void)
{
    struct gr_why w;
    char text[512];
    for (int op = 0; op < L10_NOPS - 1; op++) {
        good(op);
        CHECK(judge(op, "correct", NR, &w), "%s: a good restart fails: %s", L10_OP_NAMES[op],
              first(&w));
        CHECK(judge(op, "atomic", NR, &w), "%s: no rule broken fails: %s", L10_OP_NAMES[op],
              first(&w));
        CHECK(judge(op, "named", NR, &w), "%s: the right fault fails: %s", L10_OP_NAMES[op],
              first(&w));
    }
    /* the state's fields, each worded */
    good(L10_OP_RESUME);
    ob[2].field = L10_F_RNG;
    ob[2].got_u = 0x1234;
    ob[2].ref_u = 0x5678;
    expect(L10_OP_RESUME, "correct", NR, "rank 2: the RNG state is 0x1234 after the load, the "
           "run's at step 2 is 0x5678: every dropout mask after the restart would differ");
    good(L10_OP_RESUME);
    ob[1].field = L10_F_DATA;
    ob[1].got_u = 1000;
    ob[1].ref_u = 1000 + 2 * 192;
    expect(L10_OP_RESUME, "correct", NR, "(384 tokens, 2 steps of 192 tokens, behind): the "
           "restarted run would train on batches it has already seen");
    good(L10_OP_RESHARD);
    for (int r = 0; r < NR; r++) ob[r].n_save = ob[r].saved_ranks = 8;
    ob[2].field = L10_F_ADAM_M;
    ob[2].at = ob[2].offset;
    ob[2].got = 1;
    ob[2].ref = 2;
    snprintf(text, sizeof text, "rank 2 of 3 (its shard [%llu, 6374) of 6374): adam_m element "
             "%llu is 1 after the load, 2 in the run at step 2", (unsigned long long)ob[2].offset,
             (unsigned long long)ob[2].offset);
    expect(L10_OP_RESHARD, "correct", NR, text);
    expect(L10_OP_RESHARD, "correct", NR, "6374 parameters do not split evenly on 8 or 3 ranks");
    /* the checkpoint chosen */
    good(L10_OP_CRASH);
    ob[0].loaded = 4;
    expect(L10_OP_CRASH, "correct", NR, "rank 0: ft_load loaded step 4, whose save was killed "
           "before its manifest was committed: a half-written checkpoint");
    good(L10_OP_CORRUPT);
    ob[0].loaded = 4;
    expect(L10_OP_CORRUPT, "correct", NR, "which should fail as FT_SHARD_CHECKSUM: the damage "
           "went unnoticed");
    good(L10_OP_CORRUPT);
    ob[1].loaded = -1;
    expect(L10_OP_CORRUPT, "correct", NR, "rank 1: ft_load found no whole checkpoint, but step "
           "2's was committed and is whole");
    /* nothing whole: -1, and the state as it was */
    good(L10_OP_CORRUPT);
    for (int r = 0; r < NR; r++) ob[r].loaded = ob[r].expect_loaded = -1;
    CHECK(judge(L10_OP_CORRUPT, "correct", NR, &w), "nothing whole, -1, fails: %s", first(&w));
    ob[2].loaded = 2;
    expect(L10_OP_CORRUPT, "correct", NR, "rank 2: ft_load returned 2, but every checkpoint "
           "under ROOT is damaged (steps 4 and older): it must return -1");
    ob[2].loaded = -1;
    ob[2].field = L10_F_STEP;
    expect(L10_OP_CORRUPT, "correct", NR, "rank 2: ft_load found nothing whole and returned -1, "
           "but changed the state (step differs from the fresh state's)");
    /* the rank count that saved it, on a reshard */
    good(L10_OP_RESHARD);
    ob[1].saved_ranks = 0;
    expect(L10_OP_RESHARD, "correct", NR, "rank 1: the report's saved_ranks is 0, but step 2 "
           "was saved on 3 ranks and loaded on 3");
    good(L10_OP_CORRUPT);
    ob[1].loss_step = 3;
    ob[1].loss_got = 1.5;
    ob[1].loss_ref = 2.5;
    expect(L10_OP_CORRUPT, "correct", NR, "the restarted run's loss at step 3 is 1.5, the "
           "uninterrupted run's 2.5");
    /* the fault named */
    good(L10_OP_CORRUPT);
    ob[1].skip0.fault = FT_SHARD_SIZE;
    expect(L10_OP_CORRUPT, "named", NR, "rank 1: step 4 was skipped as FT_SHARD_SIZE (shard 2), "
           "expected FT_SHARD_CHECKSUM of that shard");
    good(L10_OP_CORRUPT);
    ob[0].nskipped = 0;
    expect(L10_OP_CORRUPT, "named", NR, "the report's first skipped checkpoint is none, "
           "expected step 4 as FT_SHARD_CHECKSUM");
    /* the rules of a durable write */
    static const struct {
        int rule;
        const char *name, *to, *text;
    } rules[] = {
        {L10_R_FINAL_CREATED, "shard-00001", "", "rank 1's ft_save_shard created shard-00001 "
         "under its final name"},
        {L10_R_RENAME_UNSYNCED, "MANIFEST.tmp", "MANIFEST", "rank 1's ft_save_manifest renamed "
         "MANIFEST.tmp to MANIFEST before syncing it after its last write"},
        {L10_R_RENAME_OPEN, "x", "shard-00001", "renamed x to shard-00001 while it was still open"},
        {L10_R_NOT_WRITTEN, "y", "shard-00001", "renamed y to shard-00001, but wrote nothing to y"},
        {L10_R_NO_FINAL, "", "", "returned 0 but gave no file its final name"},
        {L10_R_NAME_UNSYNCED, "MANIFEST.tmp", "MANIFEST", "renamed MANIFEST.tmp to MANIFEST and "
         "returned without syncing the directory after it"},
    };
    for (size_t k = 0; k < sizeof rules / sizeof rules[0]; k++) {
        good(L10_OP_RESUME);
        ob[1].rule.rule = rules[k].rule;
        ob[1].rule.manifest = !strcmp(rules[k].to, "MANIFEST");
        snprintf(ob[1].rule.name, sizeof ob[1].rule.name, "%s", rules[k].name);
        snprintf(ob[1].rule.to, sizeof ob[1].rule.to, "%s", rules[k].to);
        expect(L10_OP_RESUME, "atomic", NR, rules[k].text);
    }
    /* the commit's step directory: ROOT synced by ft_save_manifest */
    good(L10_OP_RESUME);
    ob[1].rule.rule = L10_R_ROOT_UNSYNCED;
    ob[1].rule.manifest = 1;
    snprintf(ob[1].rule.name, sizeof ob[1].rule.name, "%s", "MANIFEST");
    snprintf(ob[1].rule.to, sizeof ob[1].rule.to, "%s", "ckpt");
    expect(L10_OP_RESUME, "atomic", NR, "rank 1's ft_save_manifest committed MANIFEST and "
           "returned without syncing ROOT (ckpt): the step directory that holds it is a name the "
           "shards' pl_fs_mkdir added to ROOT");
    /* a save's process: the code's failures, and those that are not the code's */
    good(L10_OP_CRASH);
    ob[2].proc = L10_P_CRASHED;
    ob[2].proc_sig = 11;
    ob[2].proc_step = 4;
    expect(L10_OP_CRASH, "correct", NR, "rank 2: the process running your ft_save_shard at step "
           "4 died of signal 11");
    good(L10_OP_CRASH);
    ob[1].proc = L10_P_FOREIGN_KILL;
    expect(L10_OP_CRASH, "atomic", NR, "by something other than the grader's injected crash");
    good(L10_OP_CRASH);
    ob[0].proc = L10_P_GRADER;
    snprintf(ob[0].grader_err, sizeof ob[0].grader_err, "fork failed: Resource temporarily "
             "unavailable");
    expect(L10_OP_CRASH, "correct", NR, "the grader itself failed on rank 0 (fork failed: "
           "Resource temporarily unavailable): not your code's fault");
    good(L10_OP_CRASH);
    ob[1].proc = L10_P_IGNORED;
    ob[1].proc_sig = L10_SYNC;
    ob[1].proc_manifest = 1;
    ob[1].proc_step = 4;
    expect(L10_OP_CRASH, "correct", NR, "rank 1: pl_fs_sync failed in your ft_save_manifest at "
           "step 4 (the grader made it fail with ENOSPC, as a full disk does), and the function "
           "returned 0");
    /* the asynchronous save: a disk call in the stall, a snapshot not taken */
    good(L10_OP_ASYNC);
    CHECK(judge(L10_OP_ASYNC, "stall", NR, &w), "async: no call in the stall fails: %s",
          first(&w));
    ob[2].stall_calls = 3;
    ob[2].stall_call = L10_CREATE;
    expect(L10_OP_ASYNC, "stall", NR, "rank 2: ft_snapshot_take made 3 calls of ckpt_fs.h, the "
           "first pl_fs_create");
    good(L10_OP_ASYNC);
    ob[0].snap_bytes = 6.0 * (double)ob[0].count * sizeof(float);
    expect(L10_OP_ASYNC, "stall", NR, "more than one copy of the shard");
    ob[0].snap_bytes = 16;
    expect(L10_OP_ASYNC, "stall", NR, "less than a copy of the shard, so it still reads the state");
    good(L10_OP_ASYNC);
    ob[1].snap_null = 1;
    expect(L10_OP_ASYNC, "correct", NR, "rank 1: ft_snapshot_take returned NULL");
    /* the supervisor's verdict */
    good(L10_OP_DETECT);
    CHECK(judge(L10_OP_DETECT, "correct", 1, &w), "detect: no wrong sample fails: %s", first(&w));
    ob[0].det_bad = 1;
    ob[0].det_t = 8.13;
    ob[0].det_bound = 3;
    snprintf(ob[0].det_what, sizeof ob[0].det_what, "rank 3 hung");
    ob[0].det_got = (struct ft_verdict){FT_RANK_HUNG, 1, 5};
    ob[0].det_want = (struct ft_verdict){FT_RANK_HUNG, 3, 5};
    ob[0].det_seen[1] = (struct ft_rank_seen){5, 5.1, 1, 0, 0, 0};
    expect(L10_OP_DETECT, "correct", 1, "rank 3 hung: at 8.13 s your ft_detect said "
           "FT_RANK_HUNG, rank 1, step 5, where the scenario is FT_RANK_HUNG, rank 3, step 5");
    expect(L10_OP_DETECT, "correct", 1, "rank 1 at step 5, heartbeat 3.03 s old, inside a call");
    /* the interval */
    good(L10_OP_INTERVAL);
    ob[0].save_s = 60;
    ob[0].mtbf_s = 10800;
    ob[0].interval_ref = 1138.4199576606166;
    ob[0].interval = ob[0].interval_ref;
    CHECK(judge(L10_OP_INTERVAL, "correct", 1, &w), "the right interval fails: %s", first(&w));
    ob[0].interval = 804.98447189992433;
    expect(L10_OP_INTERVAL, "correct", 1, "your interval is 804.984472 s, the first-order "
           "optimum is 1138.41996 s");
}

/* Every recorded case passes parts; made wrong on its last active rank, it fails naming it. */
static void recorded(const char *path, const char *parts)
{
    FILE *f = judge_record_open(path);
    struct gr_record rec;
    char err[256] = "";
    int got, n = 0;
    while ((got = gr_record_read(f, &rec, err, sizeof err)) == 1) {
        n++;
        int op = l10_find_op(rec.op), nr = rec.obs.nranks;
        CHECK(op >= 0 && rec.obs.size == sizeof ob[0] && nr <= NR, "%s case %d: op %s, %zu "
              "bytes, %d ranks", path, rec.icase, rec.op, rec.obs.size, nr);
        if (op < 0 || rec.obs.size != sizeof ob[0] || nr > NR) {
            gr_record_free(&rec);
            continue;
        }
        memcpy(ob, rec.obs.data, (size_t)nr * sizeof ob[0]);
        char list[128], *save = NULL;
        snprintf(list, sizeof list, "%s", parts);
        for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
            struct gr_why w;
            CHECK(judge(op, p, nr, &w), "%s case %d part %s fails: %s", rec.op, rec.icase, p,
                  first(&w));
        }
        int last = nr - 1;
        while (last > 0 && !ob[last].active) last--;
        char text[64];
        if (op == L10_OP_INTERVAL) {
            ob[0].interval *= 1.01;
            snprintf(text, sizeof text, "your interval is");
        } else {
            ob[last].field = L10_F_RNG;
            ob[last].got_u = ob[last].ref_u + 1;
            /* a load that found nothing whole is held to the fresh state instead */
            snprintf(text, sizeof text, "rank %d: %s", last,
                     ob[last].expect_loaded < 0 ? "ft_load found nothing whole"
                                                : "the RNG state is");
        }
        expect(op, "correct", nr, text);
        gr_record_free(&rec);
    }
    judge_record_close(f, path, got, err, n);
}

int main(int argc, char **argv)
{
    return judge_test_main(argc, argv, hand_built, recorded);
}
