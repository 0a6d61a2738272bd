/* cublas_v2.h (gpu_emu): the emulated build compiles no cuBLAS call (ops_gpu.cu is not part
 * of it); files that include the header for its types get the runtime stand-in only. */
#ifndef PL_GPU_EMU_CUBLAS_V2_H
#define PL_GPU_EMU_CUBLAS_V2_H
#include "cuda_runtime.h"
typedef enum { CUBLAS_STATUS_SUCCESS = 0 } cublasStatus_t;
#endif
