/* accum.c: what the accumulation microbatches of one step left behind (accum.h). */
#include "accum.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops.h"
#include "train.h"

void l2_accum_init(struct l2_accum *a, size_t numel)
{
    memset(a, 0, sizeof *a);
    a->numel = numel;
    a->partial = calloc(numel, sizeof *a->partial);
    PL_ASSERT(a->partial);
    l2_accum_step_begin(a);
}

void l2_accum_free(struct l2_accum *a)
{
    free(a->partial);
    memset(a, 0, sizeof *a);
}

void l2_accum_step_begin(struct l2_accum *a)
{
    a->mb = a->rank = a->late_rank = -1;
    a->bytes = a->late_bytes = 0;
    a->calls = 0;
    memset(a->partial, 0, a->numel * sizeof *a->partial);
}

/* Calls that move data: a barrier carries none. */
static long data_calls(const struct pl_ledger *l)
{
    return gr_ledger_total_calls(l) - l->calls[PL_BARRIER];
}

void l2_accum_microbatch(struct l2_accum *a, int mb, const struct pl_ledger *delta,
                           const float *grads, double count_bytes)
{
    float *host = malloc(a->numel * sizeof *host);
    PL_ASSERT(host);
    pl_to_host(host, grads, a->numel * sizeof *host);
    for (size_t i = 0; i < a->numel; i++) a->partial[i] += host[i];
    free(host);
    double mine[2] = {gr_ledger_total_bytes(delta), (double)data_calls(delta)};
    if (mine[1] == 1 && delta->calls[PL_ALL_REDUCE] == 1 && mine[0] <= count_bytes * (1 + 1e-9))
        mine[0] = mine[1] = 0;
    struct {
        double v;
        int r;
    } in = {mine[0] + mine[1], 0}, out;
    PL_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &in.r));
    PL_CHECK_MPI(MPI_Allreduce(&in, &out, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
    if (out.v <= 0 || a->mb >= 0) return;
    PL_CHECK_MPI(MPI_Bcast(mine, 2, MPI_DOUBLE, out.r, MPI_COMM_WORLD));
    a->mb = mb;
    a->rank = out.r;
    a->bytes = mine[0];
    a->calls = (long)mine[1];
}

void l2_accum_last(struct l2_accum *a, const struct pl_ledger *delta)
{
    struct {
        double v;
        int r;
    } in = {gr_ledger_total_bytes(delta), 0}, out;
    PL_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &in.r));
    PL_CHECK_MPI(MPI_Allreduce(&in, &out, 1, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD));
    a->late_rank = out.r;
    a->late_bytes = out.v;
}

double l2_accum_zeroed_each(const struct l2_accum *a, MPI_Comm group, const float *got,
                              const float *want)
{
    int n;
    PL_CHECK_MPI(MPI_Comm_size(group, &n));
    double *mean = malloc(a->numel * sizeof *mean);
    PL_ASSERT(mean);
    PL_CHECK_MPI(MPI_Allreduce(a->partial, mean, (int)a->numel, MPI_DOUBLE, MPI_SUM, group));
    double e2 = 0, w2 = 0;
    for (size_t i = 0; i < a->numel; i++) {
        double last = want[i] - mean[i] / n;
        e2 += (got[i] - last) * (got[i] - last);
        w2 += last * last;
    }
    free(mean);
    double mine = w2 > 0 ? sqrt(e2 / w2) : 1, most = 1;
    PL_CHECK_MPI(MPI_Reduce(&mine, &most, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    return most;
}
