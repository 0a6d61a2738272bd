/* abort_note.c: every MPI_Abort of a job leaves its rank's note. Through MPI's profiling
 * interface the kit sees every MPI_Abort, a student's included: the call and its error code
 * go to this rank's status file (trace_status.h) before the job ends, because when several ranks
 * abort at once the launcher's own message can come out garbled, and a supervisor still has
 * to say who aborted and why. Kept out of check.c, so that the error layer depends on
 * nothing but the C library and MPI. */
#include <mpi.h>
#include <stdio.h>

#include "trace_status.h"

int MPI_Abort(MPI_Comm comm, int errorcode)
{
    char what[64];
    snprintf(what, sizeof what, "called MPI_Abort (error code %d)", errorcode);
    pl_trace_where(what);
    return PMPI_Abort(comm, errorcode);
}
