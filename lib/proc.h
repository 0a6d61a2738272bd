/* proc.h: this process in the job: its world rank, the world size, its rank on its node,
 * the topology, whether PL_VERBOSE is on, and the clock. A leaf that pl_init (runtime.c)
 * fills in, so that the layers below the runtime (the comm layer, the trace, the status
 * file) know who and when they are without depending on the runtime that starts them.
 * runtime.h includes it: lab code reaches these through runtime.h or paralab.h. */
#ifndef PL_PROC_H
#define PL_PROC_H

struct pl_topo;

int pl_rank(void);       /* world rank */
int pl_size(void);       /* world size */
int pl_local_rank(void); /* rank among the ranks on this node */
const struct pl_topo *pl_topo(void);
double pl_now(void);     /* wall-clock seconds since pl_init */
int pl_verbose(void);
int pl_initialized(void);

/* Seconds on the monotonic clock from an arbitrary origin: the one timer of the kit, for
 * every duration it measures (differences of two readings). */
double pl_clock(void);

/* What pl_init publishes once MPI and the topology are up. */
struct pl_proc {
    int rank, size, local_rank;
    int verbose;
    double t0;                   /* pl_clock() at the start of pl_init: pl_now()'s zero */
    const struct pl_topo *topo;
};
void pl_proc_start(const struct pl_proc *p);
/* pl_finalize: pl_initialized() is 0 again. */
void pl_proc_stop(void);

#endif
