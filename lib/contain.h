/* contain.h: keeps the programs the grader runs for a student contained. The caller becomes
 * a subreaper, so a process that double-forks and calls setsid() to leave its job's process
 * group is still re-parented to the caller, never to init; pl_contain_sweep() then kills
 * and reaps every such orphan. Run as root, the code under test runs as a dedicated
 * unprivileged user (pl_contain_user), created on demand. Where the machine grades one
 * submission at a time (Gradescope: PL_SANDBOX_EXCLUSIVE=1), the sweep also kills every
 * process of that user, wherever it is; elsewhere other gradings may share the user, so the
 * sweep stays within this process's descendants, which the subreaper keeps them all. */
#ifndef PL_CONTAIN_H
#define PL_CONTAIN_H

#include <sys/types.h>

struct pl_contain_user {
    int active;    /* 1: children run as uid/gid below (the caller is root) */
    int exclusive; /* 1: every process of the user is this grading's ($PL_SANDBOX_EXCLUSIVE) */
    uid_t uid;
    gid_t gid;
    char name[64];
};

/* Makes this process a subreaper. As root, finds (or creates with useradd) the user named
 * by $PL_SANDBOX_USER, default "paralab-student", and fills *u; as anyone else u->active is
 * 0 and the code under test runs as the caller. Returns -1 with a message on stderr when
 * root cannot get the user (the caller must then refuse to run student code). */
int pl_contain_init(struct pl_contain_user *u);
/* Kills every process of the sandbox user (when active and exclusive) and every orphan re-parented to this
 * process, reaps them, and repeats until none is left. Returns how many it killed. */
int pl_contain_sweep(const struct pl_contain_user *u);
/* While JOB (a child of this process) runs: kills every other child, i.e. every orphan of
 * the job re-parented here, so that one that escaped cannot hold the job's output open or
 * act in the meantime. Returns how many it killed. */
int pl_contain_kill_orphans(pid_t job);
/* In a child about to exec the code under test: drops to the sandbox user (no supplementary
 * groups). Returns -1 when that fails; the child must then not exec. */
int pl_contain_drop(const struct pl_contain_user *u);

#endif
