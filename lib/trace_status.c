/* trace_status.c: the status file of trace_status.h, one small memory-mapped record per
 * rank saying which call or span the rank is in, so that a supervisor that kills a hung job
 * can say where every rank was. Apart from the event trace (trace.c): it works whether or
 * not recording is on, and the MPI_Abort note (abort_note.c) needs nothing else. */
#include "trace_status.h"

#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "proc.h"
#include "check.h"

#define STATUS_BYTES PL_STATUS_BYTES

static struct {
    int status_tried;
    char *status; /* mmap'd record of STATUS_BYTES */
    char span[STATUS_BYTES]; /* the span the record names */
    char what[STATUS_BYTES]; /* the call recorded last */
    int in_call;             /* it has not returned yet */
} tr;

static int world_rank(void)
{
    if (pl_initialized()) return pl_rank();
    int r = 0;
    if (pl_mpi_running()) MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

static void status_close(void)
{
    if (tr.status) munmap(tr.status, STATUS_BYTES);
    tr.status = NULL;
}

void pl_trace_set_status_dir(const char *dir)
{
    status_close();
    tr.status_tried = 1;
    if (!dir || !*dir) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/rank.%d", dir, world_rank());
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, STATUS_BYTES) != 0) {
        /* A missing status file only costs the supervisor its report; the job goes on. */
        fprintf(stderr, "warning: cannot write status file %s: %s\n", path, strerror(errno));
        if (fd >= 0) close(fd);
        return;
    }
    void *p = mmap(NULL, STATUS_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        fprintf(stderr, "warning: cannot map status file %s: %s\n", path, strerror(errno));
        return;
    }
    tr.status = p;
}

/* Writes text into the record: a memcpy into shared memory that the kernel keeps in the
 * file even when the process is killed, so it costs no system call per communication. */
/* 1 when the record is mapped, opening it on first use. */
static int status_ready(void)
{
    if (!tr.status_tried) {
        /* Before MPI is up the rank, and so the file's name, is not known yet. */
        if (!pl_initialized() && !pl_mpi_running()) return 0;
        pl_trace_set_status_dir(getenv("PL_STATUS_DIR"));
    }
    return tr.status != NULL;
}

static void status_write(const char *what)
{
    if (!status_ready()) return;
    char rec[STATUS_BYTES];
    int n;
    if (what && tr.span[0]) n = snprintf(rec, sizeof rec, "%s (in span \"%s\")\n", what, tr.span);
    else if (what) n = snprintf(rec, sizeof rec, "%s\n", what);
    else n = snprintf(rec, sizeof rec, "span \"%s\"\n", tr.span);
    if (n < 0) return;
    if (n >= STATUS_BYTES) {
        n = STATUS_BYTES - 1;
        rec[n - 1] = '\n';
    }
    memset(rec + n, 0, (size_t)(STATUS_BYTES - n));
    memcpy(tr.status, rec, STATUS_BYTES);
}

void pl_trace_where(const char *what)
{
    snprintf(tr.what, sizeof tr.what, "%s", what ? what : "");
    tr.in_call = 1;
    status_write(tr.what);
}

int pl_trace_in_call(void)
{
    return tr.in_call;
}

int pl_trace_where_mpi(const char *what, char *saved)
{
    /* Only once a communication call opened the record: a raw call never opens it, so that
     * a program may still set PL_STATUS_DIR after its own first MPI exchanges. */
    if (!tr.status) return 0;
    memcpy(saved, tr.status, STATUS_BYTES);
    status_write(what);
    return 1;
}

void pl_trace_where_mpi_done(const char *saved)
{
    if (tr.status) memcpy(tr.status, saved, STATUS_BYTES);
}

void pl_trace_where_done(void)
{
    tr.in_call = 0;
    if (!tr.status || !tr.what[0]) return;
    char rec[STATUS_BYTES];
    snprintf(rec, sizeof rec, "after %.240s", tr.what);
    status_write(rec);
}

int pl_trace_read_status(const char *dir, int rank, char *buf, size_t len)
{
    if (!len) return -1;
    buf[0] = '\0';
    char path[4096];
    snprintf(path, sizeof path, "%s/rank.%d", dir, rank);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0) return -1;
    buf[n] = '\0';
    size_t k = strlen(buf);
    while (k && (buf[k - 1] == '\n' || buf[k - 1] == ' ')) buf[--k] = '\0';
    return 0;
}

void pl_trace_status_span(const char *label)
{
    snprintf(tr.span, sizeof tr.span, "%s", label ? label : "");
    status_write(NULL);
}
