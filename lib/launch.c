/* launch.c: runs a program on N ranks under the launcher with a timeout, in a process group
 * of its own so that a timeout kills every rank, never only mpirun. Because the group is out
 * of reach of the terminal's ^C, SIGINT, SIGTERM and SIGHUP sent to this process while a job
 * runs are forwarded to the whole group before this process takes them itself. */
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"

#define OUTPUT_CAP (4u << 20)
#define MAX_WORDS 64
#define KILL_GRACE_S 3.0

void pl_launch_prepare_env(void)
{
    if (geteuid() == 0) {
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    }
    /* More ranks than cores is the normal case on a laptop. */
    setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 0);
}

/* hwloc's components that discover I/O devices (PCI, GPUs, NICs). */
#define HWLOC_NO_IO "-linuxio,-pci,-opencl,-cuda,-nvml,-rsmi,-levelzero,-gl"

void pl_launch_one_machine_env(void)
{
    /* A job of this kit runs on one machine, where Open MPI's ob1 (shared memory between
     * ranks) carries its messages: naming it skips probing UCX and the fabric libraries,
     * half of every job's start-up (0.40 s against 0.20 s for four ranks on a 2-core
     * laptop). And every process of the job (mpirun and each rank) has hwloc discover the
     * machine, PCI devices included, which such a job never uses (NCCL finds its GPUs
     * itself): without the I/O components an 8-rank job starts in 0.22 s, not 0.33 s. A set
     * OMPI_MCA_pml (a fabric between machines, chosen by the user) keeps both as they are,
     * and a set HWLOC_COMPONENTS is kept. */
    if (getenv("OMPI_MCA_pml")) return;
    setenv("OMPI_MCA_pml", "ob1", 1);
    setenv("HWLOC_COMPONENTS", HWLOC_NO_IO, 0);
}

/* "OPENBLAS_NUM_THREADS=N" for a job of np ranks, or "" when the user chose a count or
 * nothing runs under a launcher: the cores shared out between the ranks, so that ranks do
 * not oversubscribe the machine with BLAS threads. It depends on np, so it goes into the
 * job's environment only, never into this process's, where a later job would inherit it. */
static void blas_threads_entry(int np, char *buf, size_t len)
{
    buf[0] = '\0';
    if (np < 1 || getenv("OPENBLAS_NUM_THREADS")) return;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long per_rank = cores / np;
    snprintf(buf, len, "OPENBLAS_NUM_THREADS=%ld", per_rank > 1 ? per_rank : 1);
}

/* ---- signals sent to this process while a job runs ---- */

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP};
#define NFORWARDED ((int)(sizeof forwarded / sizeof forwarded[0]))
static volatile sig_atomic_t caught;

static void on_signal(int sig) { caught = sig; }

struct saved_signals {
    struct sigaction old[NFORWARDED];
    int installed[NFORWARDED];
    sigset_t old_mask;
};

/* Installs the recording handler only around a run, keeping the caller's handlers (a
 * grader's cleanup) to be restored and run afterwards. A signal the caller ignores (nohup)
 * stays ignored. The signals stay blocked until the job's group exists. */
static void catch_signals(struct saved_signals *sv)
{
    sigset_t block;
    sigemptyset(&block);
    for (int i = 0; i < NFORWARDED; i++) sigaddset(&block, forwarded[i]);
    sigprocmask(SIG_BLOCK, &block, &sv->old_mask);
    caught = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < NFORWARDED; i++) {
        sigaction(forwarded[i], NULL, &sv->old[i]);
        sv->installed[i] = sv->old[i].sa_handler != SIG_IGN;
        if (sv->installed[i]) sigaction(forwarded[i], &sa, NULL);
    }
}

static void restore_signals(const struct saved_signals *sv)
{
    for (int i = 0; i < NFORWARDED; i++)
        if (sv->installed[i]) sigaction(forwarded[i], &sv->old[i], NULL);
    sigprocmask(SIG_SETMASK, &sv->old_mask, NULL);
}

/* TERM to the whole group, a grace period for it to exit cleanly, then KILL. */
static void stop_group(pid_t pid, int *status, int *done)
{
    killpg(pid, SIGTERM);
    double kill_at = pl_clock() + KILL_GRACE_S;
    while (!*done && pl_clock() < kill_at) {
        if (waitpid(pid, status, WNOHANG) == pid) *done = 1;
        else usleep(20000);
    }
    killpg(pid, SIGKILL);
    if (!*done && waitpid(pid, status, 0) == pid) *done = 1;
}

static int is_mpirun(const char *word)
{
    const char *base = strrchr(word, '/');
    base = base ? base + 1 : word;
    return !strcmp(base, "mpirun") || !strcmp(base, "mpiexec") || !strcmp(base, "orterun");
}

/* The launcher words, then "-np N" (or srun's "-n N"), then the program and its args. */
static int build_argv(const struct pl_launch_opts *o, char *const argv[], char **out,
                      char *words_buf, size_t buf_len)
{
    int n = 0;
    if (o->np > 0) {
        const char *launcher = o->launcher;
        if (!launcher || !*launcher) launcher = getenv("LAUNCHER");
        if (!launcher || !*launcher) launcher = "mpirun";
        snprintf(words_buf, buf_len, "%s", launcher);
        for (char *w = strtok(words_buf, " \t"); w && n < MAX_WORDS - 8; w = strtok(NULL, " \t"))
            out[n++] = w;
        static char npbuf[16];
        snprintf(npbuf, sizeof npbuf, "%d", o->np);
        const char *base = strrchr(out[0], '/');
        base = base ? base + 1 : out[0];
        out[n++] = !strcmp(base, "srun") ? "-n" : "-np";
        out[n++] = npbuf;
        if (is_mpirun(out[0])) out[n++] = "--oversubscribe";
    }
    for (int i = 0; argv[i]; i++) {
        if (n >= MAX_WORDS * 4 - 1) return -1;
        out[n++] = argv[i];
    }
    out[n] = NULL;
    return n;
}

/* Keeps the last OUTPUT_CAP bytes: when a job floods its output, the end (where it failed)
 * is what a reader needs. */
static void append(struct pl_launch_result *res, size_t *cap, const char *data, size_t len)
{
    if (len > OUTPUT_CAP) {
        data += len - OUTPUT_CAP;
        len = OUTPUT_CAP;
    }
    if (res->output_len + len > OUTPUT_CAP) {
        size_t drop = res->output_len + len - OUTPUT_CAP;
        memmove(res->output, res->output + drop, res->output_len - drop);
        res->output_len -= drop;
    }
    if (res->output_len + len + 1 > *cap) {
        size_t want = (*cap ? *cap * 2 : 8192);
        while (want < res->output_len + len + 1) want *= 2;
        char *p = realloc(res->output, want);
        if (!p) return;
        res->output = p;
        *cap = want;
    }
    memcpy(res->output + res->output_len, data, len);
    res->output_len += len;
    res->output[res->output_len] = '\0';
}

static void set_message(struct pl_launch_result *res, const char *msg)
{
    size_t cap = 0;
    res->output = NULL;
    res->output_len = 0;
    append(res, &cap, msg, strlen(msg));
}

int pl_launch(const struct pl_launch_opts *o, char *const argv[], struct pl_launch_result *res)
{
    memset(res, 0, sizeof *res);
    char words[1024];
    char *full[MAX_WORDS * 4];
    if (!argv || !argv[0] || build_argv(o, argv, full, words, sizeof words) < 1) {
        set_message(res, "launch: nothing to run\n");
        return -1;
    }
    pl_launch_prepare_env();
    char blas_env[64];
    blas_threads_entry(o->np, blas_env, sizeof blas_env);

    int fds[2] = {-1, -1};
    if (!o->passthrough && pipe(fds) != 0) {
        set_message(res, "launch: pipe() failed\n");
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    double start = pl_clock();
    struct saved_signals sv;
    catch_signals(&sv);
    pid_t pid = fork();
    if (pid < 0) {
        restore_signals(&sv);
        if (!o->passthrough) {
            close(fds[0]);
            close(fds[1]);
        }
        set_message(res, "launch: fork() failed\n");
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        restore_signals(&sv);
        if (!o->passthrough) {
            dup2(fds[1], STDOUT_FILENO);
            dup2(fds[1], STDERR_FILENO);
            close(fds[0]);
            close(fds[1]);
        }
        if (o->status_dir) setenv("PL_STATUS_DIR", o->status_dir, 1);
        /* When a rank exits non-zero, Open MPI 4's mpirun signals the others, then waits
         * odls_base_sigkill_timeout (1 s, and 2 s for a job of one rank) before it exits,
         * although no rank of this kit handles SIGTERM: 0 ends such a job at once (a usage
         * error's exit 2 in 0.14 s, not 2.1 s). An unknown variable is ignored by other
         * versions; one already set is kept. */
        if (o->np > 0 && is_mpirun(full[0])) setenv("OMPI_MCA_odls_base_sigkill_timeout", "0", 0);
        if (o->np > 0 && is_mpirun(full[0])) pl_launch_one_machine_env();
        if (blas_env[0]) putenv(blas_env);
        for (int i = 0; o->env && o->env[i]; i++) putenv((char *)o->env[i]);
        if (o->cwd && chdir(o->cwd) != 0) {
            fprintf(stderr, "launch: cannot enter %s: %s\n", o->cwd, strerror(errno));
            _exit(127);
        }
        if (pl_contain_cgroup_enter(o->cgroup) != 0) {
            fprintf(stderr, "launch: cannot enter the job's cgroup %s: %s\n", o->cgroup->dir,
                    strerror(errno));
            _exit(127);
        }
        if (pl_contain_drop(o->user) != 0) {
            fprintf(stderr, "launch: cannot become the sandbox user %s: %s\n",
                    o->user->name, strerror(errno));
            _exit(127);
        }
        execvp(full[0], full);
        fprintf(stderr, "launch: cannot run '%s': %s%s\n", full[0], strerror(errno),
                errno == ENOENT && o->np > 0 ? " (is Open MPI installed? `make deps`)" : "");
        _exit(127);
    }
    setpgid(pid, pid); /* also here, so the group exists before we might signal it */
    sigset_t forward_set;
    sigemptyset(&forward_set);
    for (int i = 0; i < NFORWARDED; i++) sigaddset(&forward_set, forwarded[i]);
    sigprocmask(SIG_UNBLOCK, &forward_set, NULL);
    if (!o->passthrough) {
        close(fds[1]);
        fcntl(fds[0], F_SETFL, O_NONBLOCK);
    }

    size_t cap = 0;
    int status = 0, done = 0, open_pipe = !o->passthrough;
    double deadline = o->timeout_s > 0 ? start + o->timeout_s : 0, kill_at = 0, done_at = 0;
    double next_orphan_check = 0;
    while (!done || open_pipe) {
        if (caught) {
            /* Take the job down first, then let the caller's disposition act (for most
             * callers: die of the same signal). */
            int sig = caught;
            stop_group(pid, &status, &done);
            if (!o->passthrough) close(fds[0]);
            free(res->output);
            memset(res, 0, sizeof *res);
            restore_signals(&sv);
            raise(sig);
            /* A caller's handler returned: report the job as killed by that signal. */
            set_message(res, "");
            res->exit_code = 128 + sig;
            res->seconds = pl_clock() - start;
            return 0;
        }
        if (o->tick) o->tick(o->tick_arg);
        if (o->kill_orphans && pl_clock() >= next_orphan_check) {
            pl_contain_kill_orphans(pid);
            next_orphan_check = pl_clock() + 0.2;
        }
        if (!done) {
            pid_t w = waitpid(pid, &status, WNOHANG);
            if (w == pid) done = 1;
        }
        double t = pl_clock();
        if (!done && deadline > 0 && t > deadline && !res->timed_out && !res->stopped) {
            res->timed_out = 1;
            killpg(pid, SIGTERM);
            kill_at = t + KILL_GRACE_S;
        }
        if (!done && o->stop && *o->stop && !res->timed_out && !res->stopped) {
            res->stopped = 1;
            killpg(pid, SIGTERM);
            kill_at = t + KILL_GRACE_S;
        }
        if (!done && kill_at > 0 && t > kill_at) {
            killpg(pid, SIGKILL);
            kill_at = t + 3600;
        }
        if (open_pipe) {
            struct pollfd p = {.fd = fds[0], .events = POLLIN};
            if (poll(&p, 1, 50) > 0) {
                char buf[65536];
                ssize_t r = read(fds[0], buf, sizeof buf);
                if (r > 0) append(res, &cap, buf, (size_t)r);
                else if (r == 0 || (errno != EAGAIN && errno != EINTR)) open_pipe = 0;
            }
            /* A rank that outlived mpirun may hold the pipe open: it dies with the group. A
             * process that left the group (setsid) may too: the caller's sweep
             * (contain.h) ends it; its output is not waited for. */
            if (done && open_pipe) {
                killpg(pid, SIGKILL);
                if (done_at == 0) done_at = t;
                if (t > done_at + KILL_GRACE_S) open_pipe = 0;
            }
        } else if (!done) {
            usleep(20000);
        }
    }
    killpg(pid, SIGKILL); /* anything left in the group */
    restore_signals(&sv);
    if (caught) raise(caught); /* arrived as the job ended: the caller's disposition acts */
    if (!o->passthrough) close(fds[0]);
    if (!res->output) set_message(res, "");

    res->seconds = pl_clock() - start;
    if (WIFEXITED(status)) res->exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) res->exit_code = 128 + WTERMSIG(status);
    return 0;
}

void pl_launch_result_free(struct pl_launch_result *res)
{
    free(res->output);
    memset(res, 0, sizeof *res);
}
