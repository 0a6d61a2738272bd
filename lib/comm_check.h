/* comm_check.h: the checks of the communication layer (comm_check.c): a call's own
 * arguments and, with checks on, the agreement of a collective's members on the call. The
 * front end (comm.c) runs them before a backend starts. Not for lab code. */
#ifndef PL_COMM_CHECK_H
#define PL_COMM_CHECK_H

#include <mpi.h>
#include "comm_op.h"

/* Called by pl_comm_startup: reads PL_CHECK_COUNTS and MPI's largest tag. */
void pl_comm_check_startup(void);
/* 1 when agreement checks are on (pl_comm_set_checks, comm.h). */
int pl_comm_checks(void);

/* This rank's arguments: buffers given and large enough, send and recv apart or in place. */
void pl_comm_validate(const struct pl_call *k);
void pl_comm_check_peer(const struct pl_call *k, const char *what, int peer);
void pl_comm_check_tag(const struct pl_call *k);

/* Agreement of the members (see the comment in comm_check.c): start gathers every member's
 * call on the communicator's check duplicate; finish, once req completes, stops every member
 * with one message when they differ (and frees all); pairwise checks all-to-all-v counts. */
long long *pl_comm_agree_start(const struct pl_call *k, MPI_Request *req);
void pl_comm_agree_finish(const struct pl_comm *c, long long *all);
void pl_comm_agree_pairwise(const struct pl_call *k);

/* The verdict of a check every member reached together: one message, exit code 2. */
void pl_comm_group_usage_error(const struct pl_comm *c, const char *msg)
    __attribute__((noreturn));


#endif
