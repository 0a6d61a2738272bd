/* comm_sum.c: one number summed over a communicator's ranks (comm.h), on the library's
 * all-reduce, so the traffic ledger and the trace see it like any collective. */
#include "comm.h"

double pl_sum_over_ranks(struct pl_comm *comm, double x)
{
    float h = (float)x;
    float *buf = pl_comm_buf_alloc(1, "sum over ranks");
    pl_copy_from_host(buf, &h, 1);
    pl_all_reduce(comm, buf, buf, 1, PL_SUM);
    pl_copy_to_host(&h, buf, 1);
    pl_comm_buf_free(buf);
    return (double)h;
}
