/* contain.c: the subreaper, the sandbox user and the sweep of contain.h. */
#include "contain.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SWEEP_ROUNDS 50

static int lookup(const char *name, struct pl_contain_user *u)
{
    struct passwd *pw = getpwnam(name);
    if (!pw) return -1;
    if (pw->pw_uid == 0) {
        fprintf(stderr, "contain: sandbox user %s has uid 0; it must be unprivileged\n", name);
        return -2;
    }
    u->uid = pw->pw_uid;
    u->gid = pw->pw_gid;
    return 0;
}

int pl_contain_init(struct pl_contain_user *u)
{
    memset(u, 0, sizeof *u);
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    if (geteuid() != 0) return 0;
    const char *name = getenv("PL_SANDBOX_USER");
    snprintf(u->name, sizeof u->name, "%s", name && *name ? name : "paralab-student");
    int r = lookup(u->name, u);
    if (r == -1) {
        /* A system user with no home and no shell: it only ever runs the code under test. */
        char cmd[256];
        snprintf(cmd, sizeof cmd, "useradd --system --no-create-home --shell /usr/sbin/nologin "
                 "'%s' >/dev/null 2>&1", u->name);
        if (system(cmd) == -1 || (r = lookup(u->name, u)) == -1)
            fprintf(stderr, "contain: running as root, but cannot create the sandbox user %s "
                    "(useradd failed): create it, or set PL_SANDBOX_USER to an existing "
                    "unprivileged user\n", u->name);
    }
    if (r) return -1;
    u->active = 1;
    const char *ex = getenv("PL_SANDBOX_EXCLUSIVE");
    u->exclusive = ex && *ex && strcmp(ex, "0");
    return 0;
}

int pl_contain_drop(const struct pl_contain_user *u)
{
    if (!u || !u->active) return 0;
    if (setgroups(0, NULL) || setgid(u->gid) || setuid(u->uid)) return -1;
    /* No way back: a program that could regain root is not contained. */
    return setuid(0) == 0 ? -1 : 0;
}

/* Kills every process of the sandbox user: a child that becomes that user and signals -1
 * (every process it may signal, which is exactly that user's) cannot miss one the way a
 * walk of /proc could while they fork. */
static void kill_user(const struct pl_contain_user *u)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (pl_contain_drop(u) == 0) kill(-1, SIGKILL);
        _exit(0);
    }
    if (pid > 0) waitpid(pid, NULL, 0);
}

/* Kills this process's children (orphans re-parented here) but KEEP, found in /proc; the
 * dead are reaped by the caller. */
static int kill_children(pid_t keep)
{
    DIR *d = opendir("/proc");
    if (!d) return 0;
    int n = 0;
    pid_t me = getpid();
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!isdigit((unsigned char)e->d_name[0])) continue;
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        /* "pid (comm) state ppid ...": comm may hold spaces and parentheses. */
        char *close_paren = strrchr(buf, ')');
        int ppid = 0;
        pid_t pid = (pid_t)atoi(e->d_name);
        if (close_paren && sscanf(close_paren + 1, " %*c %d", &ppid) == 1 && ppid == me &&
            pid != keep) {
            kill(pid, SIGKILL);
            if (keep > 0) waitpid(pid, NULL, WNOHANG);
            n++;
        }
    }
    closedir(d);
    return n;
}

int pl_contain_sweep(const struct pl_contain_user *u)
{
    int total = 0;
    for (int round = 0; round < SWEEP_ROUNDS; round++) {
        if (u && u->active && u->exclusive) kill_user(u);
        int n = kill_children(0);
        while (waitpid(-1, NULL, WNOHANG) > 0) {}
        total += n;
        if (!n) break;
        usleep(10000);
    }
    return total;
}

int pl_contain_kill_orphans(pid_t job)
{
    return kill_children(job);
}

/* ---- a cgroup per job ---- */

/* Where the unified hierarchy is mounted ("cgroup2" in /proc/self/mounts). */
static int cgroup2_mount(char *out, size_t len)
{
    FILE *m = fopen("/proc/self/mounts", "r");
    char dev[256], dir[256], type[64];
    int found = 0;
    while (m && !found && fscanf(m, "%255s %255s %63s %*[^\n]", dev, dir, type) == 3)
        if (!strcmp(type, "cgroup2")) found = snprintf(out, len, "%s", dir) > 0;
    if (m) fclose(m);
    return found;
}

/* This process's cgroup in that hierarchy (the "0::PATH" line of /proc/self/cgroup). */
static int own_cgroup(char *out, size_t len)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[512];
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f))
        if (!strncmp(line, "0::", 3)) {
            line[strcspn(line, "\n")] = '\0';
            found = snprintf(out, len, "%s", strcmp(line + 3, "/") ? line + 3 : "") >= 0;
        }
    if (f) fclose(f);
    return found;
}

static int cgroup_write(const char *dir, const char *file, const char *text)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

int pl_contain_cgroup_make(struct pl_contain_cgroup *cg)
{
    static int made;
    memset(cg, 0, sizeof *cg);
    char mount[256], own[300];
    if (geteuid() != 0 || !cgroup2_mount(mount, sizeof mount) || !own_cgroup(own, sizeof own))
        return -1;
    snprintf(cg->dir, sizeof cg->dir, "%s%s/paralab-%d-%d", mount, own, (int)getpid(), made++);
    if (mkdir(cg->dir, 0755) != 0) {
        cg->dir[0] = '\0';
        return -1;
    }
    /* The controllers' files exist only where the parent enables them for its children. */
    char text[32];
    snprintf(text, sizeof text, "%d", PL_CONTAIN_PIDS);
    cg->limited = cgroup_write(cg->dir, "pids.max", text) == 0;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) {
        snprintf(text, sizeof text, "%lld", (long long)pages * page / 4 * 3);
        cgroup_write(cg->dir, "memory.max", text);
    }
    return 0;
}

int pl_contain_cgroup_enter(const struct pl_contain_cgroup *cg)
{
    if (!cg || !cg->dir[0]) return 0;
    return cgroup_write(cg->dir, "cgroup.procs", "0");
}

/* SIGKILL to every process listed in cg's cgroup.procs; returns how many were listed. */
static int kill_listed(const struct pl_contain_cgroup *cg)
{
    char path[700];
    snprintf(path, sizeof path, "%s/cgroup.procs", cg->dir);
    FILE *f = fopen(path, "r");
    int n = 0, pid;
    while (f && fscanf(f, "%d", &pid) == 1) {
        kill(pid, SIGKILL);
        n++;
    }
    if (f) fclose(f);
    return n;
}

int pl_contain_cgroup_end(struct pl_contain_cgroup *cg)
{
    if (!cg->dir[0]) return 0;
    int left = 0;
    for (int round = 0; round < SWEEP_ROUNDS * 10; round++) {
        int n = kill_listed(cg);
        if (round == 0) left = n;
        /* cgroup.kill (Linux 5.14) takes them all at once, a forking one included; before
         * it, freezing the cgroup stops forks while they are killed one by one. */
        if (n && cgroup_write(cg->dir, "cgroup.kill", "1") != 0)
            cgroup_write(cg->dir, "cgroup.freeze", "1");
        while (waitpid(-1, NULL, WNOHANG) > 0) {}
        if (rmdir(cg->dir) == 0 || errno != EBUSY) break;
        usleep(10000);
    }
    cg->dir[0] = '\0';
    return left;
}
