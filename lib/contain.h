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
/* Kills every process of the sandbox user (when active and exclusive) and every orphan
 * re-parented to this process, reaps them, and repeats until none is left. Returns how many
 * it killed. */
int pl_contain_sweep(const struct pl_contain_user *u);
/* While JOB (a child of this process) runs: kills every other child, i.e. every orphan of
 * the job re-parented here, so that one that escaped cannot hold the job's output open or
 * act in the meantime. Returns how many it killed. */
int pl_contain_kill_orphans(pid_t job);
/* In a child about to exec the code under test: drops to the sandbox user (no supplementary
 * groups). Returns -1 when that fails; the child must then not exec. */
int pl_contain_drop(const struct pl_contain_user *u);

/* A cgroup of its own for one job, where root may make one in the unified (v2) hierarchy:
 * every process of the job stays in it whatever it does with process groups, sessions or
 * double forks (leaving needs write access to another cgroup, which the sandbox user has
 * not), and all of them die at once when it ends. Where the pids and memory controllers are
 * enabled for it, the job is also limited to PL_CONTAIN_PIDS tasks (threads count) and
 * 3/4 of the machine's memory. Elsewhere (not root, no cgroup2, a read-only
 * /sys/fs/cgroup) none is made and the subreaper's sweep alone contains the job. */
#define PL_CONTAIN_PIDS 1024
struct pl_contain_cgroup {
    char dir[640]; /* "" when none was made */
    int limited;   /* 1: the pids limit is set (the memory one too where it could be) */
};
/* Makes a fresh cgroup below this process's own; returns 0, or -1 (cg->dir empty) when the
 * machine offers none. */
int pl_contain_cgroup_make(struct pl_contain_cgroup *cg);
/* In the job's first process, before it drops to the sandbox user and execs: moves it into
 * cg (its children follow). Returns -1 when that fails; the child must then not exec. */
int pl_contain_cgroup_enter(const struct pl_contain_cgroup *cg);
/* Kills every process in cg (cgroup.kill, else one by one until it is empty) and removes
 * it. Returns how many processes were left in it. */
int pl_contain_cgroup_end(struct pl_contain_cgroup *cg);

#endif
