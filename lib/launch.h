/* launch.h: runs a program on N ranks under the launcher (mpirun by default, $LAUNCHER or
 * an explicit one such as "srun"), with a timeout, in its own process group, capturing its
 * output. On timeout the whole group is killed (TERM, then KILL), so nothing is left behind.
 * While a job runs, SIGINT, SIGTERM and SIGHUP sent to the caller are forwarded to the
 * job's group the same way; then the caller's own handlers (restored after every run) or
 * the default action take the signal. Open MPI's run-as-root and oversubscribe settings,
 * Open MPI's ob1 messaging layer for mpirun jobs (one machine; OMPI_MCA_pml overrides it)
 * with hwloc's I/O discovery left out (pl_launch_one_machine_env),
 * and OpenBLAS threads shared out between the ranks (max(1, cores / np) each, unless
 * OPENBLAS_NUM_THREADS is already set), are set here rather than by the user. Used by the
 * test harness and by the grader. */
#ifndef PL_LAUNCH_H
#define PL_LAUNCH_H

#include <stddef.h>

#include "contain.h"

struct pl_launch_opts {
    int np;                 /* ranks; 0 runs the program directly, without a launcher */
    double timeout_s;
    const char *launcher;   /* NULL: $LAUNCHER, else "mpirun" */
    const char *status_dir; /* exported as PL_STATUS_DIR when set */
    const char *const *env; /* extra "NAME=value" entries, NULL-terminated, may be NULL */
    int passthrough;        /* 1: output goes to this process's stdout/stderr, not captured */
    const struct pl_contain_user *user; /* when active: the job runs as that user */
    const struct pl_contain_cgroup *cgroup; /* when made: the job runs in it (contain.h) */
    const char *cwd;        /* the job's working directory; NULL: the caller's */
    int kill_orphans;       /* 1: a process that leaves the job (double fork) is killed at
                             * once (the caller is a subreaper: contain.h) */
    void (*tick)(void *arg); /* called about every 50 ms while the job runs; may be NULL */
    void *tick_arg;
    const volatile int *stop; /* when it becomes nonzero (a tick may set it), the job is
                               * stopped as at its timeout, and result.stopped says so */
};

struct pl_launch_result {
    int exit_code;  /* the program's exit code, 128+signal if killed by one */
    int timed_out;
    int stopped;    /* ended early because *opts.stop was set (timed_out is 0 then) */
    double seconds;
    char *output;   /* stdout and stderr interleaved, NUL-terminated (its last 4 MiB) */
    size_t output_len;
};

/* Returns 0 when the program could be started (whatever it then did), -1 otherwise with a
 * message in res->output. */
int pl_launch(const struct pl_launch_opts *o, char *const argv[], struct pl_launch_result *res);
void pl_launch_result_free(struct pl_launch_result *res);
/* Sets the Open MPI variables a root user and an oversubscribed machine need, in this
 * process's environment (children inherit them; they do not depend on the job). */
void pl_launch_prepare_env(void);
/* Unless OMPI_MCA_pml is set: OMPI_MCA_pml=ob1 and hwloc without its I/O components
 * (HWLOC_COMPONENTS, unless set), in this process's environment: the settings of an Open
 * MPI job on one machine, a third of its start-up. pl_launch sets them in its mpirun jobs;
 * the test harness for every program it runs (singletons included). */
void pl_launch_one_machine_env(void);

#endif
