/* fileio.h: the file helpers the checkpoint, the token files and the data tools share:
 * writing a file through a temporary and a rename, FNV-1a 64 checksums and little-endian
 * fields. (Readers report errors with util.h's pl_err.) */
#ifndef PL_FILEIO_H
#define PL_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "check.h"

/* ---- checksums and fields ------------------------------------------------------------- */

#define PL_FNV1A_START 0xcbf29ce484222325ULL
/* FNV-1a 64 of n bytes, continuing from h (PL_FNV1A_START for a new checksum). */
uint64_t pl_fnv1a(uint64_t h, const void *data, size_t n);

/* `bytes` (1..8) little-endian bytes of v at p, and back. */
void pl_put_le(unsigned char *p, uint64_t v, int bytes);
uint64_t pl_get_le(const unsigned char *p, int bytes);

/* ---- writing a file whole or not at all ------------------------------------------------
 * The data goes to a temporary file next to the target (PATH.tmp.PID), which is flushed,
 * synced and renamed over PATH only once complete: a reader never sees a half-written
 * file, and an interrupted write leaves the previous file intact.
 * Two kinds of failure, as check.h has them: a path that cannot be written (no such
 * directory, no permission, PATH is a directory) is the user's to fix, a usage error
 * (exit 2); a write that fails after the file was created (disk full, I/O error) is
 * fatal (exit 1). `what` names the file in messages ("checkpoint", "token file"). */
struct pl_atomic_file {
    FILE *f;      /* write here, or through pl_atomic_write */
    int failed;   /* a write failed; the commit then removes the temporary file */
    int err;      /* errno of the first failure */
    const char *what;
    char path[4096], tmp[4096 + 32];
};

/* 0 when a file can be written at path: the temporary file is created and removed again,
 * so the check is the real one. Otherwise -1 with a message naming the path, why it cannot
 * be written and what would help. For checking an output path before long work. */
int pl_atomic_check(const char *path, const char *what, char *err, size_t errlen);
/* Opens the temporary file; a path that cannot be written is a usage error. */
void pl_atomic_open(struct pl_atomic_file *a, const char *path, const char *what);
/* Records a failed step of the caller's own (ok == 0), keeping the first errno. */
void pl_atomic_ok(struct pl_atomic_file *a, int ok);
/* fwrite of n bytes, recording a failure. */
void pl_atomic_write(struct pl_atomic_file *a, const void *data, size_t n);
/* Flushes, syncs, closes and renames over the path; any failure on the way, an earlier one
 * included, removes the temporary file and is fatal. */
void pl_atomic_commit(struct pl_atomic_file *a);
/* data[0..n) as the whole file at path, by the steps above. */
void pl_write_file_atomic(const char *path, const char *what, const void *data, size_t n);

#endif
