/* helpers_gpu.cu: the GPU build's coll_reduce and coll_copy. The per-element math is
 * coll_reduce_elem from collectives.h, the same function the CPU build's host loop calls. */
extern "C" {
#include "check.h"
#include "collectives.h"
}

#include <cuda_runtime.h>

static __global__ void reduce_kernel(float *dst, const float *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = coll_reduce_elem(dst[i], src[i]);
}

extern "C" void coll_reduce(float *dst, const float *src, size_t n)
{
    if (n == 0) return;
    size_t blocks = (n + 255) / 256;
    reduce_kernel<<<(unsigned)(blocks < 4096 ? blocks : 4096), 256>>>(dst, src, n);
    PL_CHECK_CUDA(cudaGetLastError());
    /* The next send reads dst from another stream (or from the host, staged). */
    PL_CHECK_CUDA(cudaDeviceSynchronize());
}

extern "C" void coll_copy(float *dst, const float *src, size_t n)
{
    if (n == 0 || dst == src) return;
    PL_CHECK_CUDA(cudaMemcpy(dst, src, n * sizeof *dst, cudaMemcpyDeviceToDevice));
}
