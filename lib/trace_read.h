/* trace_read.h: reads back a Chrome trace JSON written by pl_trace_write_json (a run with
 * --trace FILE or PL_TRACE=FILE), so a student's own run can be replayed on any cluster
 * profile after the fact (lib/bin/replay.c, `make replay`). */
#ifndef PL_TRACE_READ_H
#define PL_TRACE_READ_H

#include <stddef.h>
#include "trace.h"

/* Returns 0 with out filled (free it with pl_trace_merged_free), or -1 with a message in
 * err naming the file and line when it is not a paralab trace. */
int pl_trace_read_json(const char *path, struct pl_merged_trace *out, char *err,
                       size_t errlen);

#endif
