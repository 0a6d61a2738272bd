/* fsrec.c: Lab 10's wrappers of the kit's file calls (lab.mk wraps lib/ckpt_fs.h's writing
 * calls), the forked process each save runs in, and the rules of a durable write checked
 * over what the process called.
 *
 * A save runs in a process of its own (fork) so that the grader can kill it as a crash
 * kills a rank: with SIGKILL, which nothing can catch, at exactly the call a case names.
 * The process sends the signal to itself from the wrapper, after setting `killed` in the
 * record, so the parent tells the injected kill from any other death (a crash of the code
 * under test, or a kill from outside, which it reports as not the student's). The record
 * lives in memory shared with the parent (mmap), which reads it once the process is gone.
 * Nothing survives a case: the process is always waited for, and cases.c removes the
 * case's folder. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lab10.h"
#include "todo.h"
#include "wrap_ctx.h"

int __real_pl_fs_create(const char *path);
int __real_pl_fs_write(int fd, const void *data, size_t n);
int __real_pl_fs_sync(int fd);
int __real_pl_fs_close(int fd);
int __real_pl_fs_rename(const char *from, const char *to);
int __real_pl_fs_sync_dir(const char *dir);
int __real_pl_fs_mkdir(const char *path);
int __real_pl_fs_remove(const char *path);

struct l10_rec *l10_rec_new(void)
{
    void *p = mmap(NULL, sizeof(struct l10_rec), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    PL_ASSERT(p != MAP_FAILED);
    memset(p, 0, sizeof(struct l10_rec));
    return p;
}

void l10_rec_free(struct l10_rec *r)
{
    if (r) munmap(r, sizeof *r);
}

static void basename_into(const char *path, char *out)
{
    const char *b = strrchr(path, '/');
    snprintf(out, L10_NAME, "%s", b ? b + 1 : path);
}

static struct l10_rec *armed(void)
{
    struct l10_rec *r = gr_wrap_ctx();
    return r && r->armed ? r : NULL;
}

/* The case's kill, if this call is the one: the record says so before the signal. */
static void maybe_kill(struct l10_rec *r, int call, int after)
{
    const struct l10_kill *k = &r->kill;
    if (k->who == L10_NOBODY || k->fail || k->call != call || k->after != after ||
        r->counts[call] != k->nth)
        return;
    r->killed = 1;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    kill(getpid(), SIGKILL);
    _exit(137); /* not reached */
}

static const char *fd_name(const struct l10_rec *r, int fd)
{
    for (int i = 0; i < L10_MAX_EVENTS; i++)
        if (r->fds[i] == fd + 1) return r->fdname[i];
    return "?";
}

static void record(struct l10_rec *r, int call, int fd, int ok, const char *path, const char *to)
{
    if (r->nev >= L10_MAX_EVENTS) return;
    struct l10_event *e = &r->ev[r->nev++];
    e->call = call;
    e->fd = fd;
    e->ok = ok;
    if (path) basename_into(path, e->name);
    else snprintf(e->name, sizeof e->name, "%s", fd_name(r, fd));
    if (to) basename_into(to, e->to);
}

/* Counts the call, kills before it where the case says; 1 when the case makes it fail. */
static int enter(struct l10_rec *r, int call)
{
    r->counts[call]++;
    maybe_kill(r, call, 0);
    const struct l10_kill *k = &r->kill;
    if (!k->fail || k->call != call || r->counts[call] != k->nth) return 0;
    r->failed = 1;
    errno = ENOSPC;
    return 1;
}

int __wrap_pl_fs_create(const char *path)
{
    struct l10_rec *r = armed();
    if (!r) return __real_pl_fs_create(path);
    int fd = enter(r, L10_CREATE) ? -1 : __real_pl_fs_create(path);
    record(r, L10_CREATE, fd, fd >= 0, path, NULL);
    if (fd >= 0)
        for (int i = 0; i < L10_MAX_EVENTS; i++)
            if (r->fds[i] == 0) {
                r->fds[i] = fd + 1;
                basename_into(path, r->fdname[i]);
                break;
            }
    maybe_kill(r, L10_CREATE, 1);
    return fd;
}

int __wrap_pl_fs_write(int fd, const void *data, size_t n)
{
    struct l10_rec *r = armed();
    if (!r) return __real_pl_fs_write(fd, data, n);
    int rc = enter(r, L10_WRITE) ? -1 : __real_pl_fs_write(fd, data, n);
    record(r, L10_WRITE, fd, rc == 0, NULL, NULL);
    maybe_kill(r, L10_WRITE, 1);
    return rc;
}

int __wrap_pl_fs_sync(int fd)
{
    struct l10_rec *r = armed();
    if (!r) return __real_pl_fs_sync(fd);
    int rc = enter(r, L10_SYNC) ? -1 : __real_pl_fs_sync(fd);
    record(r, L10_SYNC, fd, rc == 0, NULL, NULL);
    maybe_kill(r, L10_SYNC, 1);
    return rc;
}

int __wrap_pl_fs_close(int fd)
{
    struct l10_rec *r = armed();
    if (!r) return __real_pl_fs_close(fd);
    int fail = enter(r, L10_CLOSE);
    record(r, L10_CLOSE, fd, 1, NULL, NULL);
    int rc = __real_pl_fs_close(fd); /* a failed close has closed the descriptor too */
    if (fail) rc = -1;
    r->ev[r->nev - 1].ok = rc == 0;
    for (int i = 0; i < L10_MAX_EVENTS; i++)
        if (r->fds[i] == fd + 1) r->fds[i] = 0;
    maybe_kill(r, L10_CLOSE, 1);
    return rc;
}

int __wrap_pl_fs_rename(const char *from, const char *to)
{
    struct l10_rec *r = armed();
    if (!r) return __real_pl_fs_rename(from, to);
    int rc = enter(r, L10_RENAME) ? -1 : __real_pl_fs_rename(from, to);
    record(r, L10_RENAME, -1, rc == 0, from, to);
    maybe_kill(r, L10_RENAME, 1);
    return rc;
}

int __wrap_pl_fs_sync_dir(const char *dir)
{
    struct l10_rec *r = armed();
    if (!r) return __real_pl_fs_sync_dir(dir);
    int rc = enter(r, L10_SYNC_DIR) ? -1 : __real_pl_fs_sync_dir(dir);
    record(r, L10_SYNC_DIR, -1, rc == 0, dir, NULL);
    maybe_kill(r, L10_SYNC_DIR, 1);
    return rc;
}

int __wrap_pl_fs_mkdir(const char *path)
{
    struct l10_rec *r = armed();
    if (!r) return __real_pl_fs_mkdir(path);
    int rc = enter(r, L10_MKDIR) ? -1 : __real_pl_fs_mkdir(path);
    record(r, L10_MKDIR, -1, rc == 0, path, NULL);
    maybe_kill(r, L10_MKDIR, 1);
    return rc;
}

int __wrap_pl_fs_remove(const char *path)
{
    struct l10_rec *r = armed();
    if (!r) return __real_pl_fs_remove(path);
    int rc = enter(r, L10_REMOVE) ? -1 : __real_pl_fs_remove(path);
    record(r, L10_REMOVE, -1, rc == 0, path, NULL);
    maybe_kill(r, L10_REMOVE, 1);
    return rc;
}

void l10_run_saving(struct l10_rec *r, const struct l10_kill *kill, int (*fn)(void *),
                    void *arg, int *proc, int *sig, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (kill) r->kill = *kill;
    r->rc = -1;
    *proc = L10_P_OK;
    *sig = 0;
    fflush(NULL); /* nothing buffered is written twice */
    r->armed = 1;
    gr_wrap_ctx_set(r);
    pid_t pid = fork();
    if (pid < 0) {
        r->armed = 0;
        gr_wrap_ctx_set(NULL);
        *proc = L10_P_GRADER;
        snprintf(err, errlen, "fork failed: %s", strerror(errno));
        return;
    }
    if (pid == 0) {
        pl_todo_reset();
        r->rc = fn(arg);
        r->todo_what = pl_todo_what();
        r->todo_section = pl_todo_section();
        _exit(0);
    }
    int status = 0;
    pid_t w;
    while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
    r->armed = 0;
    gr_wrap_ctx_set(NULL);
    if (w != pid) {
        *proc = L10_P_GRADER;
        snprintf(err, errlen, "waitpid failed: %s", strerror(errno));
        return;
    }
    if (r->todo_what) pl_todo_note(r->todo_what, r->todo_section);
    if (WIFSIGNALED(status)) {
        *sig = WTERMSIG(status);
        *proc = *sig == SIGKILL && r->killed ? L10_P_OK
                : *sig == SIGKILL              ? L10_P_FOREIGN_KILL
                                               : L10_P_CRASHED;
    } else if (WEXITSTATUS(status) != 0) {
        *proc = L10_P_CRASHED; /* it called exit itself */
        *sig = -WEXITSTATUS(status);
    } else if (r->failed) {
        /* the case made a call fail: -1 is the right answer, 0 is not */
        if (r->rc == 0 && !r->todo_what) *proc = L10_P_IGNORED, *sig = r->kill.call;
    } else if (r->rc != 0 && !r->todo_what) {
        *proc = L10_P_FAILED;
    }
}

/* ---- the rules of a durable write -------------------------------------------------------- */

static int is_final(const char *name)
{
    if (!strcmp(name, FT_MANIFEST)) return 1;
    int rank, len = 0;
    return sscanf(name, "shard-%5d%n", &rank, &len) == 1 && len == 11 && name[len] == 0;
}

/* The rename at event i: its source was created, written, synced after its last write and
 * closed, in that order, before it. */
static int check_rename(const struct l10_rec *r, int i)
{
    const struct l10_event *rn = &r->ev[i];
    int c = -1;
    for (int j = i - 1; j >= 0 && c < 0; j--)
        if (r->ev[j].call == L10_CREATE && !strcmp(r->ev[j].name, rn->name)) c = j;
    if (c < 0) return L10_R_NOT_WRITTEN;
    int fd = r->ev[c].fd, wrote = 0, synced = 0, closed = 0;
    for (int j = c + 1; j < i && !closed; j++) {
        if (r->ev[j].fd != fd) continue;
        if (r->ev[j].call == L10_WRITE) wrote = 1, synced = 0;
        if (r->ev[j].call == L10_SYNC && r->ev[j].ok) synced = 1;
        if (r->ev[j].call == L10_CLOSE) closed = 1;
    }
    if (!wrote) return L10_R_NOT_WRITTEN;
    if (!synced) return L10_R_RENAME_UNSYNCED;
    if (!closed) return L10_R_RENAME_OPEN;
    return L10_R_OK;
}

/* 1 when a directory sync at event `from` or later succeeded (of `name`, when not NULL). */
static int dir_synced(const struct l10_rec *r, int from, const char *name)
{
    for (int i = from; i < r->nev; i++) {
        const struct l10_event *e = &r->ev[i];
        if (e->call == L10_SYNC_DIR && e->ok && (!name || !strcmp(e->name, name))) return 1;
    }
    return 0;
}

static int broken_rule(struct l10_rule_obs *out, int rule, const char *name, const char *to)
{
    out->rule = rule;
    snprintf(out->name, sizeof out->name, "%s", name);
    snprintf(out->to, sizeof out->to, "%s", to);
    return rule;
}

int l10_rules(const struct l10_rec *r, const char *root, struct l10_rule_obs *out)
{
    int renamed = 0, last = -1;
    for (int i = 0; i < r->nev; i++) {
        const struct l10_event *e = &r->ev[i];
        int rule = L10_R_OK;
        if (e->call == L10_CREATE && is_final(e->name)) rule = L10_R_FINAL_CREATED;
        if (e->call == L10_RENAME && is_final(e->to)) {
            renamed = 1;
            last = i;
            rule = check_rename(r, i);
        }
        if (rule != L10_R_OK) return broken_rule(out, rule, e->name, e->to);
    }
    if (r->killed || r->rc != 0) return L10_R_OK;
    if (!renamed) {
        out->rule = L10_R_NO_FINAL;
        return L10_R_NO_FINAL;
    }
    /* the final name is durable once its directory is synced after the rename */
    if (!dir_synced(r, last + 1, NULL))
        return broken_rule(out, L10_R_NAME_UNSYNCED, r->ev[last].name, r->ev[last].to);
    if (!root) return L10_R_OK;
    /* and the commit's step directory is a name in ROOT, made by the shards' mkdir: durable
     * once ROOT is synced, at any point of ft_save_manifest */
    char base[L10_NAME];
    basename_into(root, base);
    if (dir_synced(r, 0, base)) return L10_R_OK;
    return broken_rule(out, L10_R_ROOT_UNSYNCED, r->ev[last].to, base);
}
