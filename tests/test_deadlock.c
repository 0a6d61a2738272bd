/* test_deadlock: the deadlock judge (lib/deadlock.h) on status records written as the
 * communication layer writes them (PL_WHERE_COLL_FMT), the kit's own MPI calls
 * (mpi_where.c) and the other states a rank can be in. A run that is slow but can still
 * move is never called stuck; ranks in different collectives, or a rank missing from one
 * (in the kit's code, finished), are, with each group's calls named. No MPI job is needed:
 * the judge reads text. The live check of the same judge is the grader's (tests/labs/02-ddp.tests:
 * a rank that skips its last bucket's all-reduce). */
#include <stdio.h>
#include <string.h>

#include "deadlock.h"
#include "testing.h"

#define MAX_NP 8

static char lines[MAX_NP][PL_STATUS_BYTES];

/* Rank r waits in a collective of the communication layer (wait: through pl_wait). */
static void coll(int r, const char *op, const char *group, size_t count, long call, int id,
                 int size, int wait)
{
    char rec[160];
    snprintf(rec, sizeof rec, PL_WHERE_COLL_FMT, op, group, count, call, id, size);
    snprintf(lines[r], sizeof lines[r], "%s%s (in span \"rank %d\")", wait ? "wait h=4 " : "",
             rec, r);
}

static void line(int r, const char *text)
{
    snprintf(lines[r], sizeof lines[r], "%s", text);
}

static enum pl_stuck judge(int np, char *why, size_t len)
{
    const char *l[MAX_NP];
    for (int r = 0; r < np; r++) l[r] = lines[r];
    return pl_deadlock_judge(l, np, why, len);
}

int main(void)
{
    char why[2048];

    /* One and the same call on every rank of the group, blocking or waited on: slow, and
     * it completes. */
    coll(0, "all_reduce", "dp", 8192, 11, 3, 3, 0);
    coll(1, "all_reduce", "dp", 8192, 11, 3, 3, 1);
    coll(2, "all_reduce", "dp", 8192, 11, 3, 3, 0);
    CHECK(judge(3, why, sizeof why) == PL_STUCK_NO, "the same call on every rank is stuck");

    /* A rank that skipped the call and went on to the kit's next exchange. */
    line(2, "MPI_Allreduce of the kit's own code, on 3 ranks (in span \"wait\")");
    CHECK(judge(3, why, sizeof why) == PL_STUCK_COLLECTIVE, "a rank missing: not stuck");
    CHECK(strstr(why, "on group 'dp' (#3, 3 ranks): ranks 0 and 1 wait in their call 11 "
                      "there, all_reduce count=8192; rank 2 is in no collective on it"),
          "why: %s", why);
    CHECK(pl_deadlock_in_collective(lines[2]) && pl_deadlock_in_collective(lines[0]),
          "the kit's and the layer's collectives are collectives");

    /* ... or that finished; or that still computes (not stuck: it may yet come). */
    line(2, "pl_finalize: this rank has finished");
    CHECK(judge(3, why, sizeof why) == PL_STUCK_COLLECTIVE, "a finished rank: not stuck");
    line(2, "after all_reduce dp count=4096, call 10 on group #3 of 3 ranks");
    CHECK(judge(3, why, sizeof why) == PL_STUCK_NO, "a computing rank called stuck");
    line(2, "span \"B embed\"");
    CHECK(judge(3, why, sizeof why) == PL_STUCK_NO, "a rank in a span called stuck");

    /* Different collectives on two groups, each waiting for the other's rank. */
    coll(0, "all_reduce", "world", 100, 1, 0, 2, 0);
    coll(1, "all_gather", "tp", 50, 1, 5, 2, 1);
    CHECK(judge(2, why, sizeof why) == PL_STUCK_COLLECTIVE, "crossed groups: not stuck");
    CHECK(strstr(why, "on group 'world' (#0, 2 ranks): rank 0 waits in its call 1 there, "
                      "all_reduce count=100; rank 1 is in no collective on it") &&
              strstr(why, "on group 'tp' (#5, 2 ranks): rank 1 waits in its call 1 there, "
                          "all_gather count=50; rank 0 is in no collective on it"),
          "why: %s", why);

    /* One group, calls that do not meet: another number, another count, another op. */
    coll(0, "all_reduce", "dp", 64, 4, 3, 2, 0);
    coll(1, "all_reduce", "dp", 64, 5, 3, 2, 0);
    CHECK(judge(2, why, sizeof why) == PL_STUCK_COLLECTIVE, "calls 4 and 5 meet");
    CHECK(strstr(why, "rank 0 waits in its call 4 there") &&
              strstr(why, "rank 1 waits in its call 5 there"), "why: %s", why);
    coll(1, "all_reduce", "dp", 32, 4, 3, 2, 0);
    CHECK(judge(2, why, sizeof why) == PL_STUCK_COLLECTIVE, "counts 64 and 32 meet");
    coll(1, "broadcast", "dp", 64, 4, 3, 2, 1);
    CHECK(judge(2, why, sizeof why) == PL_STUCK_COLLECTIVE, "all_reduce meets broadcast");
    CHECK(strstr(why, "broadcast count=64"), "why: %s", why);

    /* A group of 2 that can complete lets the job move, whatever the others wait for. */
    coll(0, "all_reduce", "tp", 16, 2, 9, 2, 0);
    coll(1, "all_reduce", "tp", 16, 2, 9, 2, 0);
    coll(2, "all_reduce", "tp", 16, 2, 10, 2, 0);
    line(3, "MPI_Barrier of the kit's own code, on 4 ranks");
    CHECK(judge(4, why, sizeof why) == PL_STUCK_NO, "a complete group called stuck");
    CHECK(!strcmp(why, ""), "why is empty when not stuck: %s", why);
    /* ... and when none can, the group of 2 that misses one rank says so by count. */
    coll(1, "all_reduce", "tp", 16, 3, 9, 2, 0);
    CHECK(judge(4, why, sizeof why) == PL_STUCK_COLLECTIVE, "no group can complete");
    CHECK(strstr(why, "on group 'tp' (#10, 2 ranks): rank 2 waits in its call 2 there, "
                      "all_reduce count=16; 1 of its ranks is in no collective on it"),
          "why: %s", why);

    /* The kit's own exchange on every rank completes; one rank elsewhere does not. */
    for (int r = 0; r < 3; r++) line(r, "MPI_Gather of the kit's own code, on 3 ranks");
    CHECK(judge(3, why, sizeof why) == PL_STUCK_NO, "the kit's exchange on every rank");
    line(1, "MPI_Allreduce of the kit's own code, on 3 ranks");
    CHECK(judge(3, why, sizeof why) == PL_STUCK_COLLECTIVE, "two kit exchanges meet");

    /* Point-to-point only: a cycle of receives, told apart for its own advice. */
    line(0, "recv world from 2 tag=0 count=3");
    line(1, "recv world from 0 tag=0 count=3");
    line(2, "recv world from 1 tag=0 count=3 (in span \"ring\")");
    CHECK(judge(3, why, sizeof why) == PL_STUCK_P2P, "a receive cycle");
    CHECK(strstr(pl_deadlock_advice(PL_STUCK_P2P), "matching send") &&
              strstr(pl_deadlock_advice(PL_STUCK_COLLECTIVE), "same collective with the same "
                                                              "count, as the same call in order"),
          "the advice of each kind");
    /* A receive against a rank in a collective is a collective's deadlock. */
    coll(2, "barrier", "world", 0, 7, 0, 3, 0);
    CHECK(judge(3, why, sizeof why) == PL_STUCK_COLLECTIVE, "p2p against a collective");

    /* Every rank finished, or one rank alone: nothing to wait for. */
    for (int r = 0; r < 3; r++) line(r, "pl_finalize: this rank has finished");
    CHECK(judge(3, why, sizeof why) == PL_STUCK_NO, "a finished job called stuck");
    line(0, "recv world from 0 tag=0 count=3");
    CHECK(judge(1, why, sizeof why) == PL_STUCK_NO, "one rank called stuck");

    printf("test_deadlock: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
