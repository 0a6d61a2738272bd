/* cublas_v2.h (gpu_emu): the cuBLAS calls the kit makes (ops_gpu.cu), run by OpenBLAS on
 * the emulator's device thread in stream order. Column-major, as cuBLAS is. cublasGemmEx and
 * cublasGemmStridedBatchedEx take what the kit passes (fp32 arrays, compute 32F or
 * 32F_FAST_16BF: inputs rounded to bf16 as the tensor cores read them) and answer
 * NOT_SUPPORTED to the rest. */
#ifndef PL_GPU_EMU_CUBLAS_V2_H
#define PL_GPU_EMU_CUBLAS_V2_H

#include "cuda_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_NOT_SUPPORTED = 15
} cublasStatus_t;
/* The values are CUDA's (library_types.h, cublas_api.h). */
typedef enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16BF = 14 } cudaDataType;
typedef enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_16BF = 75 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef struct pl_emu_cublas *cublasHandle_t;

cublasStatus_t cublasCreate(cublasHandle_t *handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb,
                           int m, int n, int k, const float *alpha, const float *A, int lda,
                           const float *B, int ldb, const float *beta, float *C, int ldc);
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t ta,
                                         cublasOperation_t tb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda,
                                         long long strideA, const float *B, int ldb,
                                         long long strideB, const float *beta, float *C,
                                         int ldc, long long strideC, int batch);
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb,
                            int m, int n, int k, const void *alpha, const void *A,
                            cudaDataType Atype, int lda, const void *B, cudaDataType Btype,
                            int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo);
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType Atype,
                                          int lda, long long strideA, const void *B,
                                          cudaDataType Btype, int ldb, long long strideB,
                                          const void *beta, void *C, cudaDataType Ctype,
                                          int ldc, long long strideC, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t algo);

#ifdef __cplusplus
}
#endif

#endif
