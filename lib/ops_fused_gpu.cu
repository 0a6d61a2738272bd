/* ops_fused_gpu.cu: the CUDA versions of the fused ops that ops.c adds beside the basic
 * ones (GPU build only): a thread per row around the same kernels.h function the CPU loop
 * calls, queued on the compute stream like every op in ops_gpu.cu and returning without
 * waiting for it. ops.c has validated the arguments and charged the FLOPs. */
#include <cuda_runtime.h>
#include <stddef.h>

extern "C" {
#include "check.h"
}
#include "kernels.h"

#define FUSED_THREADS 256

__global__ void softmax_crossentropy_kernel(float *probs, float *losses, const float *logits,
                                            const int *targets, int N, int V)
{
    for (size_t n = (size_t)blockIdx.x * blockDim.x + threadIdx.x; n < (size_t)N;
         n += (size_t)gridDim.x * blockDim.x)
        losses[n] = pl_k_softmax_crossentropy_row(probs + n * V, logits + n * V, V, targets[n]);
}

extern "C" void pl_gpu_softmax_crossentropy_forward(float *probs, float *losses,
                                                    const float *logits, const int *targets,
                                                    int N, int V)
{
    int blocks = (N + FUSED_THREADS - 1) / FUSED_THREADS;
    softmax_crossentropy_kernel<<<blocks < 65535 ? blocks : 65535, FUSED_THREADS>>>(
        probs, losses, logits, targets, N, V);
    PL_CHECK_CUDA(cudaGetLastError());
}
