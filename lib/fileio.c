/* fileio.c: the shared file helpers of fileio.h. */
#include "fileio.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

uint64_t pl_fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

void pl_put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

uint64_t pl_get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* ---- atomic files -------------------------------------------------------------------------- */

/* Fills a's names and creates the temporary file; -1 with the message when it cannot. */
static int open_tmp(struct pl_atomic_file *a, const char *path, const char *what, char *err,
                    size_t errlen)
{
    memset(a, 0, sizeof *a);
    a->what = what;
    if (!path || !*path) return pl_err(err, errlen, "the %s needs a file name", what);
    if (strlen(path) >= sizeof a->path)
        return pl_err(err, errlen, "%s path is too long (%zu characters, at most %zu)", what,
                       strlen(path), sizeof a->path - 1);
    snprintf(a->path, sizeof a->path, "%s", path);
    snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%ld", path, (long)getpid());
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return pl_err(err, errlen, "cannot write %s '%s': it is a directory (give a file name "
                       "inside it)", what, path);
    a->f = fopen(a->tmp, "wb");
    if (!a->f)
        return pl_err(err, errlen, "cannot write %s '%s': creating '%s' failed: %s (does its "
                       "directory exist, and may you write to it?)", what, path, a->tmp,
                       strerror(errno));
    return 0;
}

int pl_atomic_check(const char *path, const char *what, char *err, size_t errlen)
{
    struct pl_atomic_file a;
    if (open_tmp(&a, path, what, err, errlen) != 0) return -1;
    fclose(a.f);
    unlink(a.tmp);
    return 0;
}

void pl_atomic_open(struct pl_atomic_file *a, const char *path, const char *what)
{
    char err[8400];
    if (open_tmp(a, path, what, err, sizeof err) != 0) pl_usage_error("%s", err);
}

void pl_atomic_ok(struct pl_atomic_file *a, int ok)
{
    if (ok || a->failed) return;
    a->failed = 1;
    a->err = errno;
}

void pl_atomic_write(struct pl_atomic_file *a, const void *data, size_t n)
{
    if (a->failed || n == 0) return;
    pl_atomic_ok(a, fwrite(data, 1, n, a->f) == n);
}

void pl_atomic_commit(struct pl_atomic_file *a)
{
    pl_atomic_ok(a, fflush(a->f) == 0);
    pl_atomic_ok(a, fsync(fileno(a->f)) == 0);
    pl_atomic_ok(a, fclose(a->f) == 0);
    a->f = NULL;
    if (!a->failed) pl_atomic_ok(a, rename(a->tmp, a->path) == 0);
    if (a->failed) {
        unlink(a->tmp);
        pl_fatal("writing %s '%s' failed: %s", a->what, a->path, strerror(a->err));
    }
}

void pl_write_file_atomic(const char *path, const char *what, const void *data, size_t n)
{
    struct pl_atomic_file a;
    pl_atomic_open(&a, path, what);
    pl_atomic_write(&a, data, n);
    pl_atomic_commit(&a);
}
