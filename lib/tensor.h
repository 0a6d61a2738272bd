/* tensor.h: a named fp32 array of up to 4 dimensions, allocated through the memory ledger
 * with a category. Row-major; the last dimension varies fastest. */
#ifndef PL_TENSOR_H
#define PL_TENSOR_H

#include <stdint.h>
#include "mem.h"

#define PL_MAX_DIMS 4
#define PL_NAME_LEN 64

struct pl_tensor {
    float *data;
    int ndim;
    int64_t shape[PL_MAX_DIMS];
    int64_t numel;
    enum pl_where where;
    enum pl_mem_cat cat;
    char name[PL_NAME_LEN];
};

/* Allocates a zero-filled tensor; a dimension <= 0 is a usage error naming the tensor. */
struct pl_tensor pl_tensor_new(const char *name, enum pl_mem_cat cat, enum pl_where where,
                               int ndim, const int64_t *shape);
struct pl_tensor pl_tensor_1d(const char *name, enum pl_mem_cat cat, int64_t n);
struct pl_tensor pl_tensor_2d(const char *name, enum pl_mem_cat cat, int64_t rows, int64_t cols);
struct pl_tensor pl_tensor_3d(const char *name, enum pl_mem_cat cat, int64_t d0, int64_t d1,
                              int64_t d2);

/* A view onto existing memory; never freed by pl_tensor_free. */
struct pl_tensor pl_tensor_view(const char *name, float *data, int ndim, const int64_t *shape);

void pl_tensor_free(struct pl_tensor *t); /* frees and clears t; a view is only cleared */
size_t pl_tensor_bytes(const struct pl_tensor *t);
void pl_tensor_zero(struct pl_tensor *t);

/* "name[2x3x4]" into buf, for messages. */
const char *pl_tensor_describe(const struct pl_tensor *t, char *buf, size_t len);

/* Relative L2 error ||a-b|| / max(||b||, tiny) computed in double; the grader's measure. */
double pl_rel_l2(const float *a, const float *b, size_t n);

/* Largest |a-b| and its index. */
double pl_max_abs_diff(const float *a, const float *b, size_t n, size_t *where);

/* True when every element is finite; else *first_bad is the index of the first NaN/Inf. */
int pl_all_finite(const float *a, size_t n, size_t *first_bad);

#endif
