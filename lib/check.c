/* check.c: the error paths of check.h. Every message starts with the rank when the job has
 * several, so a student reading interleaved output knows whose error it is. */
#include "check.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef PL_GPU
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>
#endif

int pl_mpi_running(void)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    return init && !fin;
}

static void print_prefix(void)
{
    if (!pl_mpi_running()) return;
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1) fprintf(stderr, "[rank %d] ", rank);
}

void pl_abort_all(int code)
{
    fflush(stdout);
    fflush(stderr);
    if (pl_mpi_running()) {
        int size = 1;
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        if (size > 1) MPI_Abort(MPI_COMM_WORLD, code);
        MPI_Finalize();
    }
    exit(code);
}

void pl_usage_error(const char *fmt, ...)
{
    va_list ap;
    print_prefix();
    fprintf(stderr, "error: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    pl_abort_all(PL_EXIT_USAGE);
}

void pl_usage_error_all(const char *fmt, ...)
{
    int rank = 0;
    if (pl_mpi_running()) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        va_list ap;
        fprintf(stderr, "error: ");
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "\n");
    }
    fflush(stdout);
    fflush(stderr);
    if (pl_mpi_running()) MPI_Finalize();
    exit(PL_EXIT_USAGE);
}

void pl_fatal_at(const char *file, int line, const char *what, const char *fmt, ...)
{
    va_list ap;
    print_prefix();
    fprintf(stderr, "%s:%d: %s: ", file, line, what);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    pl_abort_all(PL_EXIT_FAIL);
}

void pl_check_mpi_failed(const char *file, int line, const char *call, int rc)
{
    char msg[MPI_MAX_ERROR_STRING] = "unknown MPI error";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    pl_fatal_at(file, line, call, "%s", msg);
}

#ifdef PL_GPU
void pl_check_cuda_failed(const char *file, int line, const char *call, int rc)
{
    pl_fatal_at(file, line, call, "%s", cudaGetErrorString((cudaError_t)rc));
}

void pl_check_nccl_failed(const char *file, int line, const char *call, int rc)
{
    pl_fatal_at(file, line, call, "%s", ncclGetErrorString((ncclResult_t)rc));
}

void pl_check_cublas_failed(const char *file, int line, const char *call, int rc)
{
    pl_fatal_at(file, line, call, "cuBLAS status %d", rc);
}
#else
/* The CPU build never calls these, but they keep one header for both builds. */
void pl_check_cuda_failed(const char *file, int line, const char *call, int rc)
{
    pl_fatal_at(file, line, call, "CUDA error %d", rc);
}

void pl_check_nccl_failed(const char *file, int line, const char *call, int rc)
{
    pl_fatal_at(file, line, call, "NCCL error %d", rc);
}

void pl_check_cublas_failed(const char *file, int line, const char *call, int rc)
{
    pl_fatal_at(file, line, call, "cuBLAS status %d", rc);
}
#endif
