/* ckpt_fs.h: the file calls a sharded checkpoint is written and read with (Lab 10). Each is
 * one POSIX call and nothing more: no buffering, no sync and no rename that the caller did
 * not ask for, so what reaches the disk, and in which order, is the caller's design. A
 * process killed between two calls leaves exactly what the calls before made.
 *
 * Every call returns -1 on failure with errno set (a write writes all n bytes or fails). */
#ifndef PL_CKPT_FS_H
#define PL_CKPT_FS_H

#include <stddef.h>

/* open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644): a descriptor, or -1. */
int pl_fs_create(const char *path);
/* All n bytes of data to fd (write, repeated on short writes). */
int pl_fs_write(int fd, const void *data, size_t n);
/* fsync(fd): the file's data and size are on the disk when it returns. */
int pl_fs_sync(int fd);
int pl_fs_close(int fd);
/* rename(from, to): atomic; to is replaced whole if it exists. */
int pl_fs_rename(const char *from, const char *to);
/* fsync of a directory: the names made or renamed in it are on the disk. */
int pl_fs_sync_dir(const char *dir);
/* mkdir(path, 0755); 0 also when it exists already as a directory. */
int pl_fs_mkdir(const char *path);
/* unlink(path). */
int pl_fs_remove(const char *path);
/* The size of the file at path in bytes, or -1 (no such file). */
long long pl_fs_size(const char *path);
/* Reads the whole file at path into buf (cap bytes at most): its size, or -1 (no such file,
 * or larger than cap). */
long long pl_fs_read(const char *path, void *buf, size_t cap);
/* The names in dir (not "." or ".."), sorted by strcmp, each at most PL_FS_NAME - 1 bytes
 * (longer names are left out): how many were found (at most max), or -1. */
#define PL_FS_NAME 64
int pl_fs_list(const char *dir, char (*names)[PL_FS_NAME], int max);

#endif
