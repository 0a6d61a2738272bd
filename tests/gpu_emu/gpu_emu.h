/* gpu_emu.h: what the CUDA/NCCL stand-in counts, for tests that assert how the GPU path
 * uses the device (tests/gpu_emu only). */
#ifndef PL_GPU_EMU_H
#define PL_GPU_EMU_H

struct pl_emu_counts {
    long device_syncs; /* device-wide: cudaDeviceSynchronize and cudaFree (which implies one) */
    long host_waits;   /* the host waited for one stream or event (not device-wide) */
    long mallocs;      /* cudaMalloc calls (each may synchronise on a real device) */
    long nccl_groups;  /* NCCL launches: one per group, or per call outside a group */
    long kernels;      /* kernel launches queued */
    int device_before_mpi; /* cudaSetDevice was called before MPI_Init */
};

#include "cuda_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

void pl_emu_counts(struct pl_emu_counts *out);
/* Counts one kernel launch (kernel_emu.cpp, at each launch). */
void pl_emu_note_kernel(void);
/* Queues fn(arg) on stream s, to run on the device thread in stream order (kernels). */
void pl_emu_enqueue_host(cudaStream_t s, void (*fn)(void *), void *arg);

#ifdef __cplusplus
}
#endif

#endif
