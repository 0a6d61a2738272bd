/* topo.h: the cluster the ranks run on (nodes x devices per node, which rank sits on which
 * node), the two link classes between ranks, and cluster profiles (compute rate, bandwidth
 * and latency per link class) that the ledger and replay turn bytes and FLOPs into time.
 *
 * On one machine the topology is virtual ("--nodes 2 --gpus-per-node 4" over 8 MPI ranks,
 * rank r on node r / gpus_per_node); on a cluster it is read from the hostnames. */
#ifndef PL_TOPO_H
#define PL_TOPO_H

#include <stddef.h>

enum pl_link { PL_LINK_INTRA, PL_LINK_INTER, PL_NLINKS };
const char *pl_link_name(enum pl_link link); /* "intra", "inter" */

#define PL_TOPO_MAX_RANKS 4096

struct pl_topo {
    int world;
    int nodes;
    int per_node;    /* ranks per node; on real clusters the largest count on any node */
    int is_virtual;
    int node_of[PL_TOPO_MAX_RANKS];
};

/* Virtual topology; returns 0, or -1 with a message in err (e.g. "2 nodes x 4 gpus-per-node
 * = 8 ranks, but the job has 6 ranks"). */
int pl_topo_virtual(struct pl_topo *t, int world, int nodes, int per_node, char *err,
                    size_t errlen);
/* Nodes from hostnames: ranks with equal names share a node; nodes numbered by first rank. */
int pl_topo_from_hostnames(struct pl_topo *t, int world, const char *const *hostnames,
                           char *err, size_t errlen);
int pl_topo_node(const struct pl_topo *t, int rank);
enum pl_link pl_topo_link(const struct pl_topo *t, int a, int b);
/* PL_LINK_INTER if any two of the world ranks sit on different nodes (a ring over them
 * crosses the network), else PL_LINK_INTRA. */
enum pl_link pl_topo_group_link(const struct pl_topo *t, const int *ranks, int n);

struct pl_profile {
    const char *name;
    const char *description;
    double flops;                 /* sustained FLOP/s per device used for compute time */
    double bw[PL_NLINKS];         /* bytes/s per direction per device */
    double latency[PL_NLINKS];    /* seconds per message or ring step */
    int devices_per_node;
    double device_mem;            /* bytes */
    /* Fraction of the peak rate that a transformer layer's kernels sustain on one device
     * (large GEMMs, attention, normalisation and elementwise kernels together): the planner
     * (plan.h) models compute at flops x efficiency. The replay keeps the peak. */
    double efficiency;
    /* 1: a torus network (torus.h): the job's ranks form the most cubic X x Y x Z torus,
     * bw and latency[PL_LINK_INTRA] are one neighbour link's per direction and per hop, and
     * the replay routes every message and collective over the torus, and the planner
     * (plan.h) times each axis' collectives over its chips the same way. 0: a switched
     * network (fat tree). */
    int torus;
};

/* Known profiles: "dgx-h100", "dgx-a100", "cpu" (a laptop, one rank per core; "laptop" is
 * accepted for it), "tpu-v4" (a torus); NULL if unknown. pl_profile_at lists them. */
const struct pl_profile *pl_profile_find(const char *name);
/* Like find, but an unknown name is a usage error listing the known ones, printed by the
 * calling rank alone: on several ranks with the same name, validate once instead with
 * pl_profile_find and pl_usage_error_all, listing pl_profile_names. */
const struct pl_profile *pl_profile_get(const char *name);
int pl_profile_count(void);
const struct pl_profile *pl_profile_at(int i);
/* "dgx-h100, dgx-a100, cpu": the known names for a message, in buf (returned). */
const char *pl_profile_names(char *buf, size_t len);

#endif
