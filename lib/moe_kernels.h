/* moe_kernels.h: the per-token math of mixture-of-experts routing, written once as PL_HD
 * functions: the reference model (model.c) runs them on the host, and a CUDA routing
 * kernel can call the same functions per token, so the rules cannot drift apart. */
#ifndef PL_MOE_KERNELS_H
#define PL_MOE_KERNELS_H

#include "hd.h"

/* The k largest of p[0..E) in decreasing order into idx/val; ties go to the lower index
 * (a strict > while scanning upwards keeps the first maximum). k <= E. */
PL_HD void pl_moe_topk_row(const float *p, int E, int k, int *idx, float *val)
{
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            int taken = 0;
            for (int i = 0; i < j; i++) taken |= idx[i] == e;
            if (taken) continue;
            if (best < 0 || p[e] > p[best]) best = e;
        }
        idx[j] = best;
        val[j] = p[best];
    }
}

/* Slots per expert: ceil(cf * N * k / E), at least 1 and at most N. A token's k choices
 * are k distinct experts, so an expert receives at most one choice per token, N in all:
 * slots beyond N would stay empty, and a huge factor would only allocate memory. Computed
 * in double, so that the usual factors (1.0, 1.25, 2.0) give the exact ceiling, and
 * clamped before converting, so that no factor can overflow the int. */
PL_HD int pl_moe_capacity_of(int N, int E, int k, float cf)
{
    double want = (double)cf * (double)N * (double)k / (double)E;
    if (!(want < (double)N)) return N;
    int cap = (int)want;
    if ((double)cap < want) cap++;
    return cap < 1 ? 1 : cap;
}

/* d aux / d p[t, e] for aux = coef * E * sum_i f_i P_i with P_i = (1/N) sum_t p[t, i] and
 * the f_i held constant. */
PL_HD double pl_moe_aux_grad(double coef, int E, double f_e, int N)
{
    return coef * (double)E * f_e / (double)N;
}

#endif
