/* comm.h: communicators and collectives, the one transport API of the kit.
 *
 * Buffers are fp32 and live where the backend wants them: host memory on the CPU build
 * (MPI), device memory on the GPU build (NCCL, or MPI staged through the host when ranks
 * share a GPU). Counts are in elements; 0 is allowed everywhere. send == recv means in
 * place; any other overlap of send and recv is a usage error. The MPI backend takes at most
 * INT_MAX elements per call (and per all-to-all-v count or displacement) and rejects more
 * with a usage error rather than splitting the call.
 *
 * Every call is recorded twice: in the traffic ledger (bytes by kind and link class,
 * charged as the ring algorithm uses the links) and in the trace (issue and wait events),
 * so labs can be graded on volume and on the modelled timeline. PL_VERBOSE=1 prints
 * every call with its peers and sizes. */
#ifndef PL_COMM_H
#define PL_COMM_H

#include <stddef.h>
#include "comm_buf.h"
#include "comm_kind.h"

struct pl_comm;   /* a group of ranks; opaque */
struct pl_handle; /* an operation in flight; opaque */

/* ---- communicators ---- */
struct pl_comm *pl_comm_world(void);
/* Collective over parent: ranks with the same color form a group, ordered by key (ties by
 * rank in parent). A negative color leaves the rank out: it gets NULL. name ("tp", "dp",
 * ...) shows in traces and messages. */
struct pl_comm *pl_comm_split(struct pl_comm *parent, int color, int key, const char *name);
/* Collective over comm's members; none of its operations may be in flight. NULL is ignored;
 * the world comm is freed by pl_finalize, and freeing it here is a usage error. */
void pl_comm_free(struct pl_comm *comm);
int pl_comm_rank(const struct pl_comm *comm);
int pl_comm_size(const struct pl_comm *comm);
const char *pl_comm_name(const struct pl_comm *comm);
/* Operations started on comm (by this rank) whose handles have not been waited for: what
 * pl_comm_free refuses to free. A caller that owns comm checks it before freeing. */
int pl_comm_in_flight(const struct pl_comm *comm);
int pl_comm_id(const struct pl_comm *comm); /* same on every member, unique in the job; world 0 */
int pl_comm_world_rank(const struct pl_comm *comm, int rank); /* group rank -> world rank */

/* ---- blocking collectives ---- */
/* recv[i] = sum (or mean) over ranks of send[i], i < count. */
void pl_all_reduce(struct pl_comm *comm, const float *send, float *recv, size_t count,
                   enum pl_red op);
/* send holds size*recv_count elements; rank r receives the reduction of block r. In place:
 * send == recv (the result lands in the first recv_count elements) or
 * recv == send + r*recv_count (it lands in the rank's own block). */
void pl_reduce_scatter(struct pl_comm *comm, const float *send, float *recv, size_t recv_count,
                       enum pl_red op);
/* recv holds size*send_count elements; block r is rank r's send. In place:
 * send == recv + r*send_count (the rank's block is already where it belongs) or
 * send == recv (its block is first and is moved to block r). */
void pl_all_gather(struct pl_comm *comm, const float *send, float *recv, size_t send_count);
void pl_broadcast(struct pl_comm *comm, float *buf, size_t count, int root);
/* Block j of send (count elements) goes to rank j, arriving as block r (the sender's rank)
 * of its recv. */
void pl_all_to_all(struct pl_comm *comm, const float *send, float *recv, size_t count);
/* Per-peer counts and displacements in elements; counts must agree pairwise (send_counts[j]
 * on rank i == recv_counts[i] on rank j). In place (send == recv) needs equal send and recv
 * counts and displacements. */
void pl_all_to_all_v(struct pl_comm *comm, const float *send, const size_t *send_counts,
                     const size_t *send_displs, float *recv, const size_t *recv_counts,
                     const size_t *recv_displs);
void pl_barrier(struct pl_comm *comm);
/* The sum over comm's ranks of one number, through pl_all_reduce of one element (fp32, as
 * every collective here): e.g. the squared norm of a gradient each rank holds a part of. */
double pl_sum_over_ranks(struct pl_comm *comm, double x);

/* ---- asynchronous collectives: the handle is completed by pl_wait/pl_test ---- */
struct pl_handle *pl_all_reduce_async(struct pl_comm *comm, const float *send, float *recv,
                                      size_t count, enum pl_red op);
struct pl_handle *pl_reduce_scatter_async(struct pl_comm *comm, const float *send, float *recv,
                                          size_t recv_count, enum pl_red op);
struct pl_handle *pl_all_gather_async(struct pl_comm *comm, const float *send, float *recv,
                                      size_t send_count);

/* ---- point to point ----
 * Tags must be >= 0. A receive must get exactly the count it posted (a shorter or longer
 * message is a usage error on the MPI backend). NCCL has no tags: it matches sends and
 * receives between two ranks by their order, so code that relies on tags to reorder
 * messages runs on the CPU build only.
 * On NCCL, pl_isend and pl_irecv are launched together, as one NCCL group, at the first
 * pl_wait/pl_test on any of them or at the next blocking call (which joins the group), so
 * every pattern that completes on MPI completes there too: receive then send, rings,
 * pairwise exchange. A blocking pl_send completes only when its receive runs (NCCL never
 * buffers, where MPI buffers small messages): if every rank sends before it receives, the
 * job stops after PL_P2P_TIMEOUT_S seconds (default 60) with a message naming the fix
 * (pl_sendrecv, or pl_irecv first, then send, then pl_wait).
 * A pl_isend's buffer is the send's until its pl_wait (or successful pl_test): with checks
 * on (pl_comm_set_checks), the CPU build hashes it when the send starts and again when it
 * completes, and a change stops the program (exit 2) naming the send. */
void pl_send(struct pl_comm *comm, const float *buf, size_t count, int peer, int tag);
void pl_recv(struct pl_comm *comm, float *buf, size_t count, int peer, int tag);
/* Sends to dest and receives from src at once: the deadlock-free step of a ring. In place
 * (send == recv) needs send_count == recv_count. */
void pl_sendrecv(struct pl_comm *comm, const float *send, size_t send_count, int dest,
                 float *recv, size_t recv_count, int src, int tag);
struct pl_handle *pl_isend(struct pl_comm *comm, const float *buf, size_t count, int peer,
                           int tag);
struct pl_handle *pl_irecv(struct pl_comm *comm, float *buf, size_t count, int peer, int tag);

/* Blocks until the operation is done and frees the handle. NULL is ignored. On the GPU
 * build it also orders the compute stream after the operation. A handle is completed once:
 * waiting on (or testing) a completed handle is a usage error that says so, as is completing
 * an operation whose buffer was freed (pl_mem_free) while it was in flight. */
void pl_wait(struct pl_handle *h);
/* Waits on each and sets hs[i] to NULL. */
void pl_wait_all(struct pl_handle **hs, int n);
/* 1 (and frees the handle) when done, 0 when still in flight. A test that finds the
 * operation done is traced as a wait at that point, so the modelled timeline (replay.h)
 * stalls there until the modelled operation ends, whenever the test ran on the clock. */
int pl_test(struct pl_handle *h);

/* NCCL's rules for point-to-point on the MPI backend, to find on CPUs the code that would
 * deadlock on GPUs (off by default; PL_P2P_LIKE_NCCL=1 or pl_comm_set_p2p_like_nccl(1)
 * turns it on; every rank must use the same setting, switched while no pl_isend/pl_irecv
 * is in flight). Then nothing is buffered (a send completes only when its receive matches
 * it); pl_isend and pl_irecv start only at the first pl_wait/pl_test on any of them or at
 * the next blocking point-to-point call, which launch every one issued so far as one group;
 * and a call completes only with its whole group and every group launched before it on the
 * same communicator; and a receive takes the peer's next send on the communicator, whatever
 * its tag (NCCL pairs by order): a tag other than the receive's stops the program (exit 2)
 * naming both. No effect on the NCCL backend, which works that way. */
void pl_comm_set_p2p_like_nccl(int on);

/* Validation: with checks on (the default; PL_CHECK_COUNTS=0 or pl_comm_set_checks(0) turns
 * them off, as benchmarks do; every rank must use the same setting), the members of a
 * collective agree that they make the same call (the same collective, blocking or not, the
 * barrier included) with the same count, op and root; a mismatch is a usage error (exit 2)
 * naming the ranks and both calls or values.
 *   - Blocking collectives check before they start, so a mismatch is reported instead of a
 *     hang.
 *   - Asynchronous collectives start a nonblocking check beside the operation and complete
 *     it in pl_wait/pl_test, which report a mismatch there (the job is then aborted, since
 *     the mismatched operations are already in flight). Issuing never blocks on the check,
 *     so issue orders that are legal across communicators stay legal, and a GPU build's
 *     host is not held up at issue. */
void pl_comm_set_checks(int on);

/* Name of the active backend: "mpi", "nccl", or "mpi-staged" (device buffers through the
 * host, when ranks share a GPU). PL_COMM_BACKEND=mpi-staged forces staging (on the CPU
 * build through host copies, which tests that path without a GPU). */
const char *pl_comm_backend(void);

/* The most ranks of one node that run on one GPU, the same on every rank: 1 when each rank
 * has a GPU of its own, 4 when four ranks share one; 0 on the CPU build, which has no
 * device. Ranks that share a GPU contend for it, so their wall-clock times measure that
 * contention as much as their own code (the grader's speed tests ask this). */
int pl_comm_ranks_per_device(void);

/* 1 when the GPU build runs on the CUDA/NCCL stand-in of the kit's own tests (make EMU=1):
 * its devices are host threads on the cores the ranks use, so no time taken there says
 * anything about a GPU; 0 on the CPU build and on a real GPU. */
int pl_comm_device_emulated(void);

#endif
