/* blas_threads.h: how many threads OpenBLAS runs on each rank. The cores this process may
 * run on are shared out between the ranks of its node, so that ranks never oversubscribe
 * the machine with BLAS threads; pl_init applies it. */
#ifndef PL_BLAS_THREADS_H
#define PL_BLAS_THREADS_H

/* The cores this process may run on (its CPU affinity mask; the online count where the
 * mask cannot be read). */
int pl_cores_available(void);

/* BLAS threads for one of ranks_on_node ranks sharing `cores` cores: cores / ranks, at
 * least 1 (as many ranks as cores, or more: one thread each). */
int pl_blas_threads_for(int cores, int ranks_on_node);

/* Sets OpenBLAS's thread count for one of ranks_on_node ranks and returns it; a count the
 * user chose (OPENBLAS_NUM_THREADS or OMP_NUM_THREADS in the environment) wins, and then
 * 0 is returned and nothing changes. */
int pl_blas_threads_apply(int ranks_on_node);

#endif
