/* util.h: small internals several library modules share (not part of the lab API). */
#ifndef PL_UTIL_H
#define PL_UTIL_H

#include <stdarg.h>
#include <stddef.h>

#include "check.h"

/* pl_mpi_running: check.h (included here). */

/* Formats a message into err (when err and errlen allow) and returns -1, so that parsers
 * that report through an (err, errlen) pair can write `return pl_err(err, errlen, ...)`. */
PL_PRINTF(3, 4) int pl_err(char *err, size_t errlen, const char *fmt, ...);

#endif
