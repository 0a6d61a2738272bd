/* runtime.h: the one runtime context of a paralab program: MPI (and on the GPU build the
 * device of this rank and NCCL), the world communicator, the topology, and the options every
 * program shares. Flags it takes out of argv:
 *     --nodes N --gpus-per-node G   virtual topology (also PL_NODES, PL_GPUS_PER_NODE)
 *     --trace FILE                  record and write the merged Chrome trace (also PL_TRACE)
 * Environment: PL_VERBOSE=1 prints every communication call; PL_STATUS_DIR see trace_status.h. */
#ifndef PL_RUNTIME_H
#define PL_RUNTIME_H

#include "proc.h"
#include "topo.h"

void pl_init(int *argc, char ***argv);
/* Writes the trace if asked, reports leaked allocations, shuts MPI down. */
void pl_finalize(void);

/* pl_rank, pl_size, pl_local_rank, pl_topo, pl_now, pl_verbose, pl_initialized: proc.h. */
int pl_gpu_build(void);  /* 1 when built with GPU=1 */

/* Like printf, only on world rank 0. */
void pl_print0(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
