/* util.h: small internals several library modules share (not part of the lab API). */
#ifndef PL_UTIL_H
#define PL_UTIL_H

#include <stdarg.h>
#include <stddef.h>

#include "check.h"

/* 1 between MPI_Init and MPI_Finalize: error paths and gathers must not call MPI outside. */
int pl_mpi_running(void);

/* Formats a message into err (when err and errlen allow) and returns -1, so that parsers
 * that report through an (err, errlen) pair can write `return pl_err(err, errlen, ...)`. */
PL_PRINTF(3, 4) int pl_err(char *err, size_t errlen, const char *fmt, ...);

#endif
