/* deadlock.h: tells a deadlock from a slow run by the ranks' status records (trace_status.h),
 * for a supervisor that stops a stuck job within seconds instead of at its timeout (the
 * grader, the launch program). A job is stuck when every rank waits inside a call and no
 * call can complete: no group has all its ranks in the same collective (the same op and
 * count, as the same call in order on it). Ranks that wait for each other in point-to-point
 * calls, with no collective involved, are told apart: their advice differs. */
#ifndef PL_DEADLOCK_H
#define PL_DEADLOCK_H

#include <stddef.h>

#include "trace_status.h"

enum pl_stuck {
    PL_STUCK_NO,         /* some rank runs, or some call can still complete */
    PL_STUCK_P2P,        /* ranks wait in point-to-point calls only */
    PL_STUCK_COLLECTIVE, /* a rank waits in a collective that cannot complete */
};

/* Judges one look at the records: lines[r] is rank r's, np ranks. On a deadlock of
 * collectives, why (len bytes) says per group which rank waits in which call and how many
 * of the group's ranks are in none; else why is "". */
enum pl_stuck pl_deadlock_judge(const char *const *lines, int np, char *why, size_t len);

/* 1 when a record says the rank waits in a collective, of the communication layer or of
 * the kit's own code. */
int pl_deadlock_in_collective(const char *line);

/* What a student should check, one paragraph for each kind of deadlock. */
const char *pl_deadlock_advice(enum pl_stuck kind);

/* A job watched for deadlocks: the records must stay the same for quiet_s seconds before
 * the judge is asked, so that a slow but correct run (ranks oversubscribed on few cores)
 * is never stopped. */
struct pl_deadlock_watch {
    const char *status_dir;
    int np;
    double quiet_s;
    char (*last)[PL_STATUS_BYTES]; /* each rank's record when last seen */
    double quiet_since;            /* when a record last changed */
    double next_look;
    enum pl_stuck verdict;         /* set once the job is found stuck */
    char why[2048];
};

void pl_deadlock_watch_start(struct pl_deadlock_watch *w, const char *status_dir, int np,
                             double quiet_s);
/* Looks at the records (4 times a second at most); returns 1 once the job is stuck, with
 * verdict and why set, and every later call returns 1 too. */
int pl_deadlock_watch_tick(struct pl_deadlock_watch *w);
void pl_deadlock_watch_end(struct pl_deadlock_watch *w);

#endif
