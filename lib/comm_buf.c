/* comm_buf.c: memory where communication buffers live on this build (host on the CPU build,
 * device on the GPU build), through the memory ledger, and copies between it and the host
 * (comm_buf.h). */
#include "comm_buf.h"

#include <stdint.h>
#include <string.h>

#include "check.h"
#include "mem.h"
#ifdef PL_GPU
#include "comm_nccl_gpu.h"
#endif

float *pl_comm_buf_alloc(size_t count, const char *label)
{
    if (count > SIZE_MAX / sizeof(float))
        pl_usage_error("pl_comm_buf_alloc('%s'): count=%zu floats does not fit in memory",
                       label ? label : "comm buffer", count);
    return pl_mem_alloc(count * sizeof(float), PL_MEM_COMM, PL_DEVICE,
                        label ? label : "comm buffer");
}

void pl_comm_buf_free(float *buf) { pl_mem_free(buf); }

void pl_copy_to_host(float *host, const float *buf, size_t count)
{
    if (!count || host == buf) return;
#ifdef PL_GPU
    pl_comm_gpu_copy(host, buf, count * sizeof(float), 1);
#else
    memmove(host, buf, count * sizeof(float));
#endif
}

void pl_copy_from_host(float *buf, const float *host, size_t count)
{
    if (!count || host == buf) return;
#ifdef PL_GPU
    pl_comm_gpu_copy(buf, host, count * sizeof(float), 0);
#else
    memmove(buf, host, count * sizeof(float));
#endif
}
