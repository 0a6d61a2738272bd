/* comm_nccl_gpu.h: the GPU build's backend (comm_nccl_gpu.c): the device of this rank, NCCL
 * communicators and operations, and copies between host and device. The front end
 * (comm.c), the runtime and comm_buf.c call it on the GPU build only. */
#ifndef PL_COMM_NCCL_GPU_H
#define PL_COMM_NCCL_GPU_H

#include <mpi.h>
#include <stddef.h>
#include "comm_op.h"

#ifdef PL_GPU
/* The GPU build (comm_nccl_gpu.c). */
/* Called by pl_init before MPI_Init: sets this rank's device from the node-local rank the
 * launcher exports (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, ...), so that everything
 * MPI and NCCL set up afterwards lands on it. Does nothing when no launcher variable is set;
 * pl_gpu_comm_startup then picks by MPI's node-local rank. */
void pl_gpu_pick_device(void);
/* Sets this rank's device by local rank and decides the backend, the same on every rank
 * of world: returns 1 for NCCL (no two ranks of a node on one physical GPU), 0 for
 * mpi-staged. *per_device: the most ranks of any node on one physical GPU. */
int pl_gpu_comm_startup(MPI_Comm world, int *per_device);
void pl_nccl_comm_world(struct pl_comm *world);
void pl_nccl_comm_split(struct pl_comm *child, const struct pl_comm *parent, int color,
                        int key);
void pl_nccl_comm_free(struct pl_comm *c);
void pl_nccl_start(struct pl_handle *h);
int pl_nccl_progress(struct pl_handle *h, int block);
/* cudaMemcpy between host and device (to_host: device -> host). */
void pl_comm_gpu_copy(void *dst, const void *src, size_t bytes, int to_host);
#endif

#endif
