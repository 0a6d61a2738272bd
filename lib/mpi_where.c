/* mpi_where.c: the blocking MPI calls made outside the communication layer, seen through
 * MPI's profiling interface as abort_note.c sees MPI_Abort. The kit's and the graders' own
 * exchanges (a gather of the ledger, a check that every replica is equal) call MPI directly;
 * while one blocks, the rank's status file (trace_status.h) says so, so that a supervisor
 * tells a rank that waits there from one that computes: a rank that skipped a collective
 * and went on to the grader's next exchange is then seen waiting, and the deadlock is
 * stopped within seconds (deadlock.h) instead of at the timeout. Inside a call of the
 * communication layer (whose backend calls these same functions) the record already names
 * the call, and a wrapper costs one test of a flag. Lab code never calls MPI (the symbol
 * rules refuse it), so every call seen here is the kit's. */
#include <mpi.h>
#include <stdio.h>

#include "trace_status.h"

/* The status line of a raw call: "MPI_Allreduce of the kit's own code, on 4 ranks" for a
 * collective (group is its communicator), without the size for point to point and waits
 * (group is MPI_COMM_NULL), which complete no group. The judge (deadlock.c) reads the name
 * and the size back. */
#define KIT_CALL(name, group, call)                                                         \
    do {                                                                                   \
        if (pl_trace_in_call()) return call;                                               \
        char what_[96], saved_[PL_STATUS_BYTES];                                           \
        int n_ = 0;                                                                        \
        if ((group) != MPI_COMM_NULL && PMPI_Comm_size(group, &n_) == MPI_SUCCESS)         \
            snprintf(what_, sizeof what_, "%s of the kit's own code, on %d ranks", name,   \
                     n_);                                                                  \
        else                                                                               \
            snprintf(what_, sizeof what_, "%s of the kit's own code", name);               \
        int rec_ = pl_trace_where_mpi(what_, saved_);                                      \
        int rc_ = call;                                                                    \
        if (rec_) pl_trace_where_mpi_done(saved_);                                         \
        return rc_;                                                                        \
    } while (0)

int MPI_Barrier(MPI_Comm comm)
{
    KIT_CALL("MPI_Barrier", comm, PMPI_Barrier(comm));
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    KIT_CALL("MPI_Bcast", comm, PMPI_Bcast(buf, count, type, root, comm));
}

int MPI_Reduce(const void *send, void *recv, int count, MPI_Datatype type, MPI_Op op, int root,
               MPI_Comm comm)
{
    KIT_CALL("MPI_Reduce", comm, PMPI_Reduce(send, recv, count, type, op, root, comm));
}

int MPI_Allreduce(const void *send, void *recv, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm)
{
    KIT_CALL("MPI_Allreduce", comm, PMPI_Allreduce(send, recv, count, type, op, comm));
}

int MPI_Gather(const void *send, int scount, MPI_Datatype stype, void *recv, int rcount,
               MPI_Datatype rtype, int root, MPI_Comm comm)
{
    KIT_CALL("MPI_Gather", comm,
             PMPI_Gather(send, scount, stype, recv, rcount, rtype, root, comm));
}

int MPI_Gatherv(const void *send, int scount, MPI_Datatype stype, void *recv,
                const int rcounts[], const int displs[], MPI_Datatype rtype, int root,
                MPI_Comm comm)
{
    KIT_CALL("MPI_Gatherv", comm,
             PMPI_Gatherv(send, scount, stype, recv, rcounts, displs, rtype, root, comm));
}

int MPI_Allgather(const void *send, int scount, MPI_Datatype stype, void *recv, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm)
{
    KIT_CALL("MPI_Allgather", comm,
             PMPI_Allgather(send, scount, stype, recv, rcount, rtype, comm));
}

int MPI_Alltoall(const void *send, int scount, MPI_Datatype stype, void *recv, int rcount,
                 MPI_Datatype rtype, MPI_Comm comm)
{
    KIT_CALL("MPI_Alltoall", comm,
             PMPI_Alltoall(send, scount, stype, recv, rcount, rtype, comm));
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *out)
{
    KIT_CALL("MPI_Comm_split", comm, PMPI_Comm_split(comm, color, key, out));
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *out)
{
    KIT_CALL("MPI_Comm_dup", comm, PMPI_Comm_dup(comm, out));
}

/* Point to point and waits: a rank blocked in them waits too, though no group completes. */
int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    KIT_CALL("MPI_Send", MPI_COMM_NULL, PMPI_Send(buf, count, type, dest, tag, comm));
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm,
             MPI_Status *st)
{
    KIT_CALL("MPI_Recv", MPI_COMM_NULL, PMPI_Recv(buf, count, type, src, tag, comm, st));
}

int MPI_Wait(MPI_Request *req, MPI_Status *st)
{
    KIT_CALL("MPI_Wait", MPI_COMM_NULL, PMPI_Wait(req, st));
}
