/* tensor.c: named fp32 tensors on top of the memory ledger, and the error measures the
 * grader and tests compare tensors with. */
#include "tensor.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

struct pl_tensor pl_tensor_new(const char *name, enum pl_mem_cat cat, enum pl_where where,
                               int ndim, const int64_t *shape)
{
    struct pl_tensor t = {0};
    snprintf(t.name, sizeof t.name, "%s", name ? name : "tensor");
    PL_REQUIRE(ndim >= 1 && ndim <= PL_MAX_DIMS,
               "tensor '%s' has %d dimensions; a tensor has 1 to %d", t.name, ndim, PL_MAX_DIMS);
    t.ndim = ndim;
    t.numel = 1;
    for (int i = 0; i < ndim; i++) {
        PL_REQUIRE(shape[i] > 0, "tensor '%s': dimension %d is %lld; every dimension must be >= 1",
                   t.name, i, (long long)shape[i]);
        t.shape[i] = shape[i];
        t.numel *= shape[i];
    }
    t.where = where;
    t.cat = cat;
    t.data = pl_mem_alloc((size_t)t.numel * sizeof(float), cat, where, t.name);
    return t;
}

struct pl_tensor pl_tensor_1d(const char *name, enum pl_mem_cat cat, int64_t n)
{
    return pl_tensor_new(name, cat, PL_HOST, 1, (int64_t[]){n});
}

struct pl_tensor pl_tensor_2d(const char *name, enum pl_mem_cat cat, int64_t rows, int64_t cols)
{
    return pl_tensor_new(name, cat, PL_HOST, 2, (int64_t[]){rows, cols});
}

struct pl_tensor pl_tensor_3d(const char *name, enum pl_mem_cat cat, int64_t d0, int64_t d1,
                              int64_t d2)
{
    return pl_tensor_new(name, cat, PL_HOST, 3, (int64_t[]){d0, d1, d2});
}

struct pl_tensor pl_tensor_view(const char *name, float *data, int ndim, const int64_t *shape)
{
    struct pl_tensor t = {0};
    snprintf(t.name, sizeof t.name, "%s", name ? name : "view");
    PL_REQUIRE(ndim >= 1 && ndim <= PL_MAX_DIMS, "view '%s' has %d dimensions", t.name, ndim);
    t.ndim = ndim;
    t.numel = 1;
    for (int i = 0; i < ndim; i++) {
        t.shape[i] = shape[i];
        t.numel *= shape[i];
    }
    t.data = data;
    t.where = PL_HOST;
    t.cat = PL_MEM_NCAT; /* marks a view: not owned */
    return t;
}

void pl_tensor_free(struct pl_tensor *t)
{
    if (t->cat != PL_MEM_NCAT) pl_mem_free(t->data);
    memset(t, 0, sizeof *t);
}

size_t pl_tensor_bytes(const struct pl_tensor *t)
{
    return (size_t)t->numel * sizeof(float);
}

void pl_tensor_zero(struct pl_tensor *t)
{
    PL_REQUIRE(t->where == PL_HOST, "pl_tensor_zero on a device tensor: it clears host "
               "memory only; use pl_zero on op memory");
    memset(t->data, 0, pl_tensor_bytes(t));
}

const char *pl_tensor_describe(const struct pl_tensor *t, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s[", t->name);
    for (int i = 0; i < t->ndim && n > 0 && (size_t)n < len; i++)
        n += snprintf(buf + n, len - n, i ? "x%lld" : "%lld", (long long)t->shape[i]);
    if (n > 0 && (size_t)n < len) snprintf(buf + n, len - n, "]");
    return buf;
}

double pl_rel_l2(const float *a, const float *b, size_t n)
{
    double diff = 0, ref = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        diff += d * d;
        ref += (double)b[i] * (double)b[i];
    }
    if (diff == 0) return 0;
    return sqrt(diff) / fmax(sqrt(ref), 1e-30);
}

double pl_max_abs_diff(const float *a, const float *b, size_t n, size_t *where)
{
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > worst || isnan(d)) {
            worst = d;
            at = i;
            if (isnan(d)) break;
        }
    }
    if (where) *where = at;
    return worst;
}

int pl_all_finite(const float *a, size_t n, size_t *first_bad)
{
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) {
            if (first_bad) *first_bad = i;
            return 0;
        }
    }
    return 1;
}
