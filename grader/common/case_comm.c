/* case_comm.c: freeing a case's communicator unless something is in flight (case_comm.h). */
#include "case_comm.h"

#include <mpi.h>

#include "check.h"
#include "comm.h"

int gr_case_comm_free(struct pl_comm *comm)
{
    int mine = comm ? pl_comm_in_flight(comm) : 0, most = 0;
    PL_CHECK_MPI(MPI_Allreduce(&mine, &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (!most && comm && comm != pl_comm_world()) pl_comm_free(comm);
    return mine;
}
