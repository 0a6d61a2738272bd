/* cuda_kernels.h (gpu_emu): what lets lib/ops_gpu.cu compile as host C++ for the emulated
 * build. The build rewrites each launch k<<<grid, block>>>(args) into
 * pl_emu_launch(grid, block, "k", [=]() { k(args); }, args) and force-includes this header.
 * Every pointer among args must be device memory, as a GPU's kernel needs: a host pointer is
 * reported (naming the kernel and the argument), the kernel is not run, and the next
 * cudaGetLastError returns the error. Otherwise the launch
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

extern "C" int pl_emu_launch_check(const char *kernel, int arg, const void *p);

template <class T> static inline int pl_emu_arg_ok(const char *kernel, int arg, const T &)
{
    return 1;
}
template <class T> static inline int pl_emu_arg_ok(const char *kernel, int arg, T *p)
{
    return pl_emu_launch_check(kernel, arg, p);
}

template <class F, class... A>
static inline void pl_emu_launch(unsigned grid, unsigned block, const char *name, F kernel,
                                 const A &...args)
{
    int arg = 0, ok = 1;
    ((ok &= pl_emu_arg_ok(name, arg++, args)), ...);
    if (ok) pl_emu_launch_fn(grid, block, new std::function<void()>(kernel));
}

#endif
