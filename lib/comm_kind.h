/* comm_kind.h: the kinds of communication the kit accounts by, and its reductions. A leaf:
 * the comm layer, the traffic ledger, the trace and the replay all name collectives by these
 * without depending on each other. */
#ifndef PL_COMM_KIND_H
#define PL_COMM_KIND_H

enum pl_red { PL_SUM, PL_AVG };

/* The kinds the ledger and trace account by. PL_P2P covers send, recv and sendrecv. */
enum pl_coll_kind {
    PL_ALL_REDUCE,
    PL_REDUCE_SCATTER,
    PL_ALL_GATHER,
    PL_BROADCAST,
    PL_ALL_TO_ALL,
    PL_ALL_TO_ALL_V,
    PL_P2P,
    PL_BARRIER,
    PL_NKINDS
};
const char *pl_coll_kind_name(enum pl_coll_kind kind); /* "all_reduce", ... */

#endif
