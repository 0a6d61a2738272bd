/* comm_buf.h: buffers for the communication backend (part of comm.h's API, which includes
 * it). The MPI backend's staging copies use them too. */
#ifndef PL_COMM_BUF_H
#define PL_COMM_BUF_H

#include <stddef.h>

/* Memory where comm buffers live on this build (host on CPU, device on GPU), through the
 * memory ledger, and copies between it and host memory. */
float *pl_comm_buf_alloc(size_t count, const char *label);
void pl_comm_buf_free(float *buf);
void pl_copy_to_host(float *host, const float *buf, size_t count);
void pl_copy_from_host(float *buf, const float *host, size_t count);

#endif
