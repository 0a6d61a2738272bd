/* comm_kind.c: the names of the collective kinds of comm_kind.h. */
#include "comm_kind.h"

const char *pl_coll_kind_name(enum pl_coll_kind kind)
{
    static const char *names[PL_NKINDS] = {"all_reduce", "reduce_scatter", "all_gather",
                                           "broadcast",  "all_to_all",     "all_to_all_v",
                                           "p2p",        "barrier"};
    return (unsigned)kind < PL_NKINDS ? names[kind] : "unknown";
}
