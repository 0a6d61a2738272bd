/* emu_testing.h: the check the stand-in's step tests share (after testing.h): a training
 * step makes no device-wide synchronisation, and once the caching allocator is warm (after
 * step 0) no cudaMalloc either. a and b are the emulator's counts before and after. */
#ifndef PL_EMU_TESTING_H
#define PL_EMU_TESTING_H

#include "gpu_emu.h"
#include "testing.h"

static inline void expect_no_device_sync(const char *what, int step,
                                         const struct pl_emu_counts *a,
                                         const struct pl_emu_counts *b)
{
    CHECK(b->device_syncs == a->device_syncs, "%s step %d: %ld device-wide synchronisation(s) "
          "(cudaDeviceSynchronize or cudaFree) inside the step", what, step,
          b->device_syncs - a->device_syncs);
    if (step > 0)
        CHECK(b->mallocs == a->mallocs, "%s step %d: %ld cudaMalloc call(s) once the caching "
              "allocator is warm", what, step, b->mallocs - a->mallocs);
}

#endif
