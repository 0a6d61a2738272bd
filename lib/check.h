/* check.h: errors that name file, line and the failing call, and stop every rank.
 *
 * Two kinds of failure:
 *   - bad input from a user (a config, a file, a rank count): pl_usage_error() prints
 *     what was wrong and what would be right, and ends the job with exit code 2;
 *   - a failing library call or broken invariant: PL_CHECK_* / pl_fatal() print
 *     "file:line: call: reason" and end the job with exit code 1.
 * Under MPI on several ranks, pl_usage_error and the fatal errors abort every rank
 * (MPI_Abort), so a job never hangs on a dead peer. pl_usage_error_all is for a verdict
 * every rank reaches together: it finalizes MPI and exits 2 on each rank instead, without
 * the launcher's abort banner. */
#ifndef PL_CHECK_H
#define PL_CHECK_H

#include <stdarg.h>

#define PL_EXIT_FAIL 1
#define PL_EXIT_USAGE 2

#if defined(__GNUC__)
#define PL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define PL_NORETURN __attribute__((noreturn))
#else
#define PL_PRINTF(a, b)
#define PL_NORETURN
#endif

/* 1 between MPI_Init and MPI_Finalize: error paths and gathers must not call MPI outside. */
int pl_mpi_running(void);

/* Stops the whole job with `code`: MPI_Abort when MPI is running, exit() otherwise. */
PL_NORETURN void pl_abort_all(int code);

/* "error: <message>" on stderr (prefixed with the rank when there are several), exit 2. */
PL_NORETURN PL_PRINTF(1, 2) void pl_usage_error(const char *fmt, ...);

/* Same, but every rank calls it with the same verdict (collective validation of
 * arguments): rank 0 prints, all ranks finalize MPI and exit 2 without MPI_Abort noise. */
PL_NORETURN PL_PRINTF(1, 2) void pl_usage_error_all(const char *fmt, ...);

/* "file:line: what: message" on stderr, exit 1 on every rank. */
PL_NORETURN PL_PRINTF(4, 5) void pl_fatal_at(const char *file, int line, const char *what,
                                             const char *fmt, ...);

#define pl_fatal(...) pl_fatal_at(__FILE__, __LINE__, "fatal", __VA_ARGS__)

/* Usage: PL_REQUIRE(n > 0, "n=%d must be positive", n); exits 2 when the check fails. */
#define PL_REQUIRE(cond, ...)                                                              \
    do {                                                                                   \
        if (!(cond)) pl_usage_error(__VA_ARGS__);                                          \
    } while (0)

/* Invariant that only a bug can break: exits 1 naming the condition. */
#define PL_ASSERT(cond)                                                                    \
    do {                                                                                   \
        if (!(cond)) pl_fatal_at(__FILE__, __LINE__, #cond, "assertion failed");          \
    } while (0)

#define PL_CHECK_MPI(call)                                                                 \
    do {                                                                                   \
        int pl_rc_ = (call);                                                               \
        if (pl_rc_ != 0) pl_check_mpi_failed(__FILE__, __LINE__, #call, pl_rc_);          \
    } while (0)
PL_NORETURN void pl_check_mpi_failed(const char *file, int line, const char *call, int rc);

#define PL_CHECK_CUDA(call)                                                                \
    do {                                                                                   \
        int pl_rc_ = (int)(call);                                                          \
        if (pl_rc_ != 0) pl_check_cuda_failed(__FILE__, __LINE__, #call, pl_rc_);         \
    } while (0)
PL_NORETURN void pl_check_cuda_failed(const char *file, int line, const char *call, int rc);

#define PL_CHECK_NCCL(call)                                                                \
    do {                                                                                   \
        int pl_rc_ = (int)(call);                                                          \
        if (pl_rc_ != 0) pl_check_nccl_failed(__FILE__, __LINE__, #call, pl_rc_);         \
    } while (0)
PL_NORETURN void pl_check_nccl_failed(const char *file, int line, const char *call, int rc);

#define PL_CHECK_CUBLAS(call)                                                              \
    do {                                                                                   \
        int pl_rc_ = (int)(call);                                                          \
        if (pl_rc_ != 0) pl_check_cublas_failed(__FILE__, __LINE__, #call, pl_rc_);       \
    } while (0)
PL_NORETURN void pl_check_cublas_failed(const char *file, int line, const char *call, int rc);

#endif
