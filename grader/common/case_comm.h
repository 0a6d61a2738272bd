/* case_comm.h: the communicator a case handed the code under test, freed after the call as
 * a caller that owns one would free it. pl_comm_free refuses a communicator with operations
 * still in flight on it (a handle of pl_isend, pl_irecv or an async collective never
 * waited for) and stops the job with a usage error; here every rank first learns whether
 * any rank still has one, and then the communicator is left to the end of the run, so that
 * the verdict can say so instead. Labs 1, 2, 3, 6 and 7 check it with this one function. */
#ifndef GR_CASE_COMM_H
#define GR_CASE_COMM_H

struct pl_comm;

/* Collective over the world. Frees comm unless some rank still has an operation in flight
 * on it; the world's communicator and NULL are never freed. Returns this rank's operations
 * in flight on comm (0 when none), for its observation. */
int gr_case_comm_free(struct pl_comm *comm);

#endif
