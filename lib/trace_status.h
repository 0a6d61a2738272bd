/* trace_status.h: each rank's status file, which says where the rank is now (its current
 * span or communication call), so that a supervisor that kills a hung job can say where
 * every rank was. Written when PL_STATUS_DIR is set, whether or not the trace records. */
#ifndef PL_TRACE_STATUS_H
#define PL_TRACE_STATUS_H

#include <stddef.h>

/* Records the call being made now in the status file (the comm layer calls this). The
 * file $PL_STATUS_DIR/rank.<world rank> holds one line, "<what> (in span \"<span>\")",
 * NUL-padded to a fixed size; it is memory-mapped, so a call costs a memcpy. pl_span writes
 * "span \"<label>\"". Works whether or not recording is enabled, from pl_init on (the
 * file is named by the rank). */
void pl_trace_where(const char *what);
/* Marks the call recorded last as returned: the record becomes "after <what>", so that a
 * supervisor tells a rank blocked inside a call from one that went on to compute. */
void pl_trace_where_done(void);
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
