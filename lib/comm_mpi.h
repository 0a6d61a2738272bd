/* comm_mpi.h: the MPI backend (comm_mpi.c), which the front end (comm.c) drives. */
#ifndef PL_COMM_MPI_H
#define PL_COMM_MPI_H

#include <mpi.h>
#include <stddef.h>
#include "comm_op.h"

/* The MPI backend. staged: the op's buffers are device memory, copied through host
 * buffers around a host MPI operation. */
void pl_mpi_start(struct pl_handle *h, int staged);
/* Completes h when block, or tests it; returns 1 when done (completion actions run). */
int pl_mpi_progress(struct pl_handle *h, int block);
/* Communicator options every MPI communicator of the layer gets (errors returned, so a
 * truncated message can be reported as the usage error it is). */
void pl_mpi_comm_setup(MPI_Comm c);
/* Point-to-point with NCCL's completion rules (pl_comm_set_p2p_like_nccl): on or off,
 * and whether it is on. */
void pl_mpi_set_p2p_like_nccl(int on);
int pl_mpi_p2p_like_nccl(void);
/* MPI passes counts as int: larger counts are rejected with a usage error naming the op. */
int pl_mpi_count(size_t n, const char *what, const struct pl_comm *c);

#endif
