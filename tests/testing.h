/* testing.h: the one CHECK of the project's test programs. It counts checks and failures
 * and prints each failure with file, line and (under MPI) rank; a program exits non-zero
 * when `failures` is not zero. One translation unit per test program includes it. */
#ifndef PL_TESTING_H
#define PL_TESTING_H

#include <stdio.h>

#include "runtime.h"

static int checks, failures;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        checks++;                                                                          \
        if (!(cond)) {                                                                     \
            failures++;                                                                    \
            printf("[rank %d] FAIL %s:%d: ", pl_initialized() ? pl_rank() : 0, __FILE__,   \
                   __LINE__);                                                              \
            printf(__VA_ARGS__);                                                           \
            printf("\n");                                                                  \
        }                                                                                  \
    } while (0)

#endif
