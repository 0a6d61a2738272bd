/* tensors.c: op-memory tensors judged by a rank (tensors.h). */
#include "tensors.h"

#include <stdlib.h>

#include "paralab.h"

float *gr_op_alloc(size_t n, const char *label)
{
    return pl_mem_alloc((n ? n : 1) * sizeof(float), PL_MEM_WORK, PL_DEVICE, label);
}

float *gr_op_normal(uint64_t seed, const char *name, size_t n, float mean, float std)
{
    float *h = malloc((n ? n : 1) * sizeof *h);
    if (!h) pl_fatal("out of memory drawing %zu floats", n);
    pl_rng_fill_normal(h, n, seed, pl_rng_stream(name), 0, mean, std);
    float *d = gr_op_alloc(n, name);
    pl_to_device(d, h, n * sizeof *h);
    free(h);
    return d;
}

float *gr_host_copy(const float *op, size_t n)
{
    float *h = malloc((n ? n : 1) * sizeof *h);
    if (!h) pl_fatal("out of memory copying %zu floats to the host", n);
    pl_to_host(h, op, n * sizeof *h);
    return h;
}

double gr_scale_of(const float *got, const float *ref, size_t n)
{
    float *g = gr_host_copy(got, n), *r = gr_host_copy(ref, n);
    double gr = 0, rr = 0;
    for (size_t i = 0; i < n; i++) {
        gr += (double)g[i] * r[i];
        rr += (double)r[i] * r[i];
    }
    free(g);
    free(r);
    return rr > 0 ? gr / rr : 0;
}

int gr_cmp_of(const float *got, const float *ref, size_t n, double tol, struct gr_cmp *m)
{
    float *g = gr_host_copy(got, n), *r = gr_host_copy(ref, n);
    size_t at = 0;
    *m = (struct gr_cmp){.finite = pl_all_finite(g, n, &at), .tol = tol};
    if (m->finite) {
        m->rel = pl_rel_l2(g, r, n);
        if (m->rel > tol) m->max_abs = pl_max_abs_diff(g, r, n, &at);
    }
    m->at = (double)at;
    m->got = g[at];
    m->ref = r[at];
    free(g);
    free(r);
    return m->finite && m->rel <= tol;
}
