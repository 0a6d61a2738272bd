/* comm_internal.h: what the runtime calls to start and stop the communication layer
 * (comm.c). Not for lab code. */
#ifndef PL_COMM_INTERNAL_H
#define PL_COMM_INTERNAL_H

/* Called by pl_init after MPI_Init and once the topology is known: creates the world
 * communicator; on the GPU build picks this rank's device, chooses NCCL or mpi-staged and
 * bootstraps the NCCL world communicator. */
void pl_comm_startup(void);
/* Called by pl_finalize before MPI_Finalize. */
void pl_comm_shutdown(void);

#endif
