/* hd.h: the single-source layer. Per-element math is written once as PL_HD inline
 * functions that gcc compiles for the CPU backend and nvcc for CUDA kernels, so the
 * CPU tests cover the arithmetic the GPU runs. */
#ifndef PL_HD_H
#define PL_HD_H

#ifdef __CUDACC__
#define PL_HD __host__ __device__ static inline
#else
#define PL_HD static inline
#endif

#endif
