/* cuda_kernels.h (gpu_emu): what lets lib/ops_gpu.cu compile as host C++ for the emulated
 * build. The build rewrites each launch k<<<grid, block>>>(args) into
 * pl_emu_launch(grid, block, [=]() { k(args); }) and force-includes this header: the launch
 * is queued on the compute stream like a real one and runs on the emulator's device thread,
 * one block after another, every CUDA thread of a block on its own small stack so that
 * __syncthreads is a real barrier and __shared__ memory is shared by the block. */
#ifndef PL_GPU_EMU_CUDA_KERNELS_H
#define PL_GPU_EMU_CUDA_KERNELS_H

#include <functional>

#include "cuda_runtime.h"

#define __global__
#define __device__
#define __host__
/* One copy for the device thread, which runs the blocks one at a time. */
#define __shared__ static thread_local

struct pl_emu_dim3 {
    unsigned x, y, z;
};
extern pl_emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

void __syncthreads(void);
void pl_emu_launch_fn(unsigned grid, unsigned block, std::function<void()> *kernel);

template <class F> static inline void pl_emu_launch(unsigned grid, unsigned block, F kernel)
{
    pl_emu_launch_fn(grid, block, new std::function<void()>(kernel));
}

#endif
