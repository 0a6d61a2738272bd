/* ops_adamw.c: AdamW over runs of a flat buffer (ops.h, pl_adamw_step_runs), the
 * multi-tensor step of pl_model_adamw_flat. On the CPU build a pl_adamw_step per run; on the
 * GPU build one kernel launch per PL_ADAMW_RUNS_PER_LAUNCH runs (ops_gpu.cu), each element
 * stepped by the same pl_k_adamw with the same arguments as pl_adamw_step would give it. */
#include "ops.h"

#include <math.h>

#include "check.h"
#include "kernels.h"
#include "ledger.h"

#ifdef PL_GPU
static void check_ptr(const char *op, const char *name, const void *p)
{
    if (!p) pl_usage_error("%s: %s is NULL; it must point to the op's memory", op, name);
}
#endif

void pl_adamw_step_runs(float *param, const float *grad, float *m, float *v, size_t n,
                        const size_t *ends, const unsigned char *decay, int nruns, int t,
                        float lr, float beta1, float beta2, float eps, float weight_decay)
{
    const char *op = "pl_adamw_step_runs";
    if (nruns < 1 || !ends || !decay || ends[nruns - 1] != n)
        pl_usage_error("%s: %d runs ending at %zu for n=%zu elements: give at least one run, "
                       "the last ending at n", op, nruns, nruns > 0 && ends ? ends[nruns - 1] : 0,
                       n);
    for (int r = 0; r < nruns; r++)
        if (ends[r] <= (r ? ends[r - 1] : 0))
            pl_usage_error("%s: run %d ends at %zu, not after the previous run's end %zu: "
                           "runs are non-empty and in order", op, r, ends[r],
                           r ? ends[r - 1] : (size_t)0);
#ifdef PL_GPU
    /* pl_adamw_step's checks of t, the betas and eps (it returns at n = 0); then the
     * pointers, the charge and one launch per chunk of runs */
    pl_adamw_step(param, grad, m, v, 0, t, lr, beta1, beta2, eps, weight_decay);
    check_ptr(op, "param", param);
    check_ptr(op, "grad", grad);
    check_ptr(op, "m", m);
    check_ptr(op, "v", v);
    float bc1 = (float)(1.0 - pow(beta1, t)), bc2 = (float)(1.0 - pow(beta2, t));
    pl_ledger_add_flops((double)PL_FLOPS_ADAMW * n);
    pl_gpu_adamw_step_runs(param, grad, m, v, ends, decay, nruns, lr, beta1, beta2, eps,
                           weight_decay, bc1, bc2);
#else
    for (int r = 0; r < nruns; r++) {
        size_t k = r ? ends[r - 1] : 0;
        pl_adamw_step(param + k, grad + k, m + k, v + k, ends[r] - k, t, lr, beta1, beta2, eps,
                      decay[r] ? weight_decay : 0.0f);
    }
#endif
}
