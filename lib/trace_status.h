/* trace_status.h: each rank's status file, which says where the rank is now (its current
 * span or communication call), so that a supervisor that kills a hung job can say where
 * every rank was. Written when PL_STATUS_DIR is set, whether or not the trace records. */
#ifndef PL_TRACE_STATUS_H
#define PL_TRACE_STATUS_H

#include <stddef.h>

/* Bytes of one status record, its line and NUL padding. */
#define PL_STATUS_BYTES 256

/* Records the call being made now in the status file (the comm layer calls this). The
 * file $PL_STATUS_DIR/rank.<world rank> holds one line, "<what> (in span \"<span>\")",
 * NUL-padded to a fixed size; it is memory-mapped, so a call costs a memcpy. pl_span writes
 * "span \"<label>\"". Works whether or not recording is enabled, from pl_init on (the
 * file is named by the rank). */
void pl_trace_where(const char *what);
/* A collective's record (comm.c): "<op> <group name> count=<n>, call <k> on group #<id> of
 * <size> ranks", k counting this rank's collectives on that group from 1, so that the k-th
 * call of every member is the same call; pl_wait's record puts "wait h=<handle> " before it.
 * The deadlock judge (deadlock.h) reads it back. */
#define PL_WHERE_COLL_FMT "%s %s count=%zu, call %ld on group #%d of %d ranks"
/* Marks the call recorded last as returned: the record becomes "after <what>", so that a
 * supervisor tells a rank blocked inside a call from one that went on to compute. */
void pl_trace_where_done(void);
/* 1 while the call recorded last by pl_trace_where has not been marked returned. */
int pl_trace_in_call(void);
/* A blocking MPI call made outside the communication layer (the kit's and the grader's own
 * exchanges, seen through MPI's profiling interface: mpi_where.c): recorded while it blocks,
 * so that a supervisor knows the rank waits, then the record is put back as it was (saved,
 * PL_STATUS_BYTES), so that it goes on naming the rank's last communication call. Returns 1
 * when it recorded (then call pl_trace_where_mpi_done after the call), 0 while no
 * communication call has opened the file yet (a raw call never opens it). */
int pl_trace_where_mpi(const char *what, char *saved);
void pl_trace_where_mpi_done(const char *saved);
/* Writes status files into dir instead of $PL_STATUS_DIR (NULL or "" stops writing them);
 * call after pl_init. */
void pl_trace_set_status_dir(const char *dir);
/* Reads rank's status line from dir into buf without its trailing newline, for the
 * supervisor of a killed job; returns 0, or -1 when there is no such file. */
int pl_trace_read_status(const char *dir, int rank, char *buf, size_t len);

/* pl_span's part: the record now names the span label ("span \"<label>\"", and the
 * calls made in it "<what> (in span \"<label>\")"). */
void pl_trace_status_span(const char *label);

#endif
