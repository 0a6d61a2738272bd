/* comm_ledger.c: the traffic ledger (ledger.h) gathered over a group, the one place where the
 * ledger meets a communicator's internals; the ledger itself knows only collective kinds and
 * link classes, so that the comm layer can charge it without a cycle between the two. */
#include "ledger.h"

#include <mpi.h>

#include "check.h"
#include "comm_op.h"

/* Raw MPI rather than a library collective, so that reading the ledger does not add to it. */
void pl_ledger_gather(struct pl_comm *comm, const struct pl_ledger *mine, struct pl_ledger *all)
{
    if (!pl_mpi_running() || !comm || comm->size == 1) {
        if (all) all[0] = *mine;
        return;
    }
    PL_CHECK_MPI(MPI_Gather(mine, (int)sizeof *mine, MPI_BYTE, comm->rank == 0 ? all : NULL,
                            (int)sizeof *mine, MPI_BYTE, 0, comm->mpi));
}
