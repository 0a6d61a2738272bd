/* hd.h: the single-source layer. Per-element math is written once as PL_HD inline
 * functions that gcc compiles for the CPU backend and nvcc for CUDA kernels, so the
 * CPU tests cover the arithmetic the GPU runs. */
#ifndef PL_HD_H
#define PL_HD_H

#ifdef __CUDACC__
/* C++'s inline, not static: one definition across the .cu files, and no unused-function
 * warning where a .cu file uses some of a header's functions (nvcc hands its host compiler
 * one file, headers included, which clang then warns about). */
#define PL_HD __host__ __device__ inline
#else
#define PL_HD static inline
#endif

#endif
