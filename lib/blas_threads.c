/* blas_threads.c: the BLAS thread policy of blas_threads.h. On a busy machine a BLAS
 * thread per core per rank fights the other ranks for the same cores, which measured
 * slower than one thread per rank (docs/library.md, "Threads"). */
#include "blas_threads.h"

#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#ifndef PL_GPU
#include <cblas.h>
#endif

int pl_cores_available(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int)online : 1;
}

int pl_blas_threads_for(int cores, int ranks_on_node)
{
    if (ranks_on_node < 1) ranks_on_node = 1;
    int per_rank = cores / ranks_on_node;
    return per_rank > 1 ? per_rank : 1;
}

static int user_chose(const char *name)
{
    const char *v = getenv(name);
    return v && *v;
}

int pl_blas_threads_apply(int ranks_on_node)
{
    if (user_chose("OPENBLAS_NUM_THREADS") || user_chose("OMP_NUM_THREADS")) return 0;
    int n = pl_blas_threads_for(pl_cores_available(), ranks_on_node);
#ifndef PL_GPU
    openblas_set_num_threads(n);
#endif
    return n;
}
