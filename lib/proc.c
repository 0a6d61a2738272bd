/* proc.c: this process in the job and the kit's clock (proc.h). */
#include "proc.h"

#include <time.h>

static struct {
    int initialized;
    struct pl_proc p;
} pr;

double pl_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void pl_proc_start(const struct pl_proc *p)
{
    pr.p = *p;
    pr.initialized = 1;
}

void pl_proc_stop(void) { pr.initialized = 0; }

int pl_rank(void) { return pr.p.rank; }
int pl_size(void) { return pr.p.size; }
int pl_local_rank(void) { return pr.p.local_rank; }
const struct pl_topo *pl_topo(void) { return pr.p.topo; }
double pl_now(void) { return pl_clock() - pr.p.t0; }
int pl_verbose(void) { return pr.p.verbose; }
int pl_initialized(void) { return pr.initialized; }
