/* nccl.h (gpu_emu): the subset of NCCL the kit uses, emulated over MPI for tests without a
 * GPU. It keeps the rules that make NCCL code differ from MPI code: an operation runs when
 * its stream reaches it, a send completes only once the peer's matching receive runs (no
 * eager buffering), and sends and receives issued outside ncclGroupStart/ncclGroupEnd are
 * separate operations on the stream, so a receive queued ahead of the send its peer waits
 * for hangs, as it does on a GPU (the emulator reports it instead of hanging). */
#ifndef PL_GPU_EMU_NCCL_H
#define PL_GPU_EMU_NCCL_H

#include <stddef.h>
#include "cuda_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 0
#define NCCL_VERSION_CODE (NCCL_MAJOR * 10000 + NCCL_MINOR * 100 + NCCL_PATCH)
#define NCCL_SPLIT_NOCOLOR -1

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5
} ncclResult_t;

typedef enum { ncclFloat = 7, ncclFloat32 = 7 } ncclDataType_t;
typedef enum { ncclSum = 0, ncclAvg = 4 } ncclRedOp_t;

typedef struct pl_emu_nccl_comm *ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef struct { int blocking; } ncclConfig_t;

const char *ncclGetErrorString(ncclResult_t r);
ncclResult_t ncclGetVersion(int *version);
ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *out,
                           ncclConfig_t *config);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank);
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);

ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, cudaStream_t s);
ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t s);
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t s);
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recv_count,
                               ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t s);
ncclResult_t ncclAllGather(const void *send, void *recv, size_t send_count, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t s);
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type,
                           int root, ncclComm_t comm, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
