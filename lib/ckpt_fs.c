/* ckpt_fs.c: one POSIX call per function (ckpt_fs.h). */
#include "ckpt_fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int pl_fs_create(const char *path)
{
    return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

int pl_fs_write(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int pl_fs_sync(int fd)
{
    return fsync(fd);
}

int pl_fs_close(int fd)
{
    return close(fd);
}

int pl_fs_rename(const char *from, const char *to)
{
    return rename(from, to);
}

int pl_fs_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int pl_fs_mkdir(const char *path)
{
    struct stat sb;
    if (mkdir(path, 0755) == 0) return 0;
    return errno == EEXIST && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) ? 0 : -1;
}

int pl_fs_remove(const char *path)
{
    return unlink(path);
}

long long pl_fs_size(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return -1;
    return (long long)sb.st_size;
}

long long pl_fs_read(const char *path, void *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t got = 0;
    for (;;) {
        char extra;
        ssize_t r = got < cap ? read(fd, (char *)buf + got, cap - got) : read(fd, &extra, 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 || (got == cap && r > 0)) {
            close(fd);
            if (r > 0) errno = EFBIG;
            return -1;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    close(fd);
    return (long long)got;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

int pl_fs_list(const char *dir, char (*names)[PL_FS_NAME], int max)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && n < max;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (strlen(e->d_name) >= PL_FS_NAME) continue;
        strcpy(names[n++], e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], by_name);
    return n;
}
