/* helpers.c: the helpers collectives.h gives the student: the element-wise reduction and
 * copy on comm buffers (host loops here; helpers_gpu.cu has the CUDA versions). lab_todo()
 * is the library's (lib/todo.h). */
#include <string.h>

#include "collectives.h"

#ifndef PL_GPU
void coll_reduce(float *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = coll_reduce_elem(dst[i], src[i]);
}

void coll_copy(float *dst, const float *src, size_t n)
{
    if (n && dst != src) memmove(dst, src, n * sizeof *dst);
}
#else
/* ISO C forbids an empty translation unit. */
typedef int lab01_helpers_gpu_only;
#endif
