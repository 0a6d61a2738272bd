/* topo.c: which rank sits on which node, the link class between two ranks, and the cluster
 * profiles that turn FLOPs and bytes into modelled time. */
#include "topo.h"

#include <stdio.h>
#include <string.h>

#include "check.h"
#include "util.h"

const char *pl_link_name(enum pl_link link)
{
    switch (link) {
    case PL_LINK_INTRA: return "intra";
    case PL_LINK_INTER: return "inter";
    default: return "?";
    }
}

int pl_topo_virtual(struct pl_topo *t, int world, int nodes, int per_node, char *err,
                    size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (world < 1 || world > PL_TOPO_MAX_RANKS)
        return pl_err(err, errlen, "a job of %d ranks is outside 1..%d", world, PL_TOPO_MAX_RANKS);
    if (nodes < 1 || per_node < 1)
        return pl_err(err, errlen, "%d nodes x %d gpus-per-node: both must be at least 1", nodes,
                    per_node);
    if ((long)nodes * per_node != world)
        return pl_err(err, errlen, "%d nodes x %d gpus-per-node = %ld ranks, but the job has %d "
                                 "ranks; choose nodes x gpus-per-node = %d",
                    nodes, per_node, (long)nodes * per_node, world, world);
    t->world = world;
    t->nodes = nodes;
    t->per_node = per_node;
    t->is_virtual = 1;
    for (int r = 0; r < world; r++) t->node_of[r] = r / per_node;
    return 0;
}

int pl_topo_from_hostnames(struct pl_topo *t, int world, const char *const *hostnames,
                           char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (world < 1 || world > PL_TOPO_MAX_RANKS)
        return pl_err(err, errlen, "a job of %d ranks is outside 1..%d", world, PL_TOPO_MAX_RANKS);
    /* first[k]: the first rank seen on node k, whose name stands for the node. */
    int first[PL_TOPO_MAX_RANKS], count[PL_TOPO_MAX_RANKS];
    int nodes = 0;
    for (int r = 0; r < world; r++) {
        if (!hostnames[r] || !hostnames[r][0])
            return pl_err(err, errlen, "rank %d reported no hostname", r);
        int k = 0;
        while (k < nodes && strcmp(hostnames[first[k]], hostnames[r]) != 0) k++;
        if (k == nodes) {
            first[nodes] = r;
            count[nodes] = 0;
            nodes++;
        }
        count[k]++;
        t->node_of[r] = k;
    }
    int most = 0;
    for (int k = 0; k < nodes; k++)
        if (count[k] > most) most = count[k];
    t->world = world;
    t->nodes = nodes;
    t->per_node = most;
    t->is_virtual = 0;
    return 0;
}

int pl_topo_node(const struct pl_topo *t, int rank)
{
    if (rank < 0 || rank >= t->world)
        pl_fatal("rank %d is outside the topology of %d ranks", rank, t->world);
    return t->node_of[rank];
}

enum pl_link pl_topo_link(const struct pl_topo *t, int a, int b)
{
    return pl_topo_node(t, a) == pl_topo_node(t, b) ? PL_LINK_INTRA : PL_LINK_INTER;
}

enum pl_link pl_topo_group_link(const struct pl_topo *t, const int *ranks, int n)
{
    for (int i = 1; i < n; i++)
        if (pl_topo_node(t, ranks[i]) != pl_topo_node(t, ranks[0])) return PL_LINK_INTER;
    return PL_LINK_INTRA;
}

/* The efficiencies are planning assumptions (plan.h), not data-sheet figures: a whole layer,
 * with attention, normalisation and elementwise kernels, sustains less of the peak than
 * cuBLAS's large BF16 GEMMs (about 80% of peak on A100 and 70% on H100). A100's 0.61 is
 * fitted (pl_plan_published_fit) on the fit rows of the published runs (plan_published.c),
 * and tests/test_plan holds it to that fit; H100's 0.55 was set by hand before those runs
 * were tabled and is not fitted. docs/labs/08-placement.md section 4.4 shows both against
 * the runs held out of the fit. The cpu profile's rate is already a sustained one.
 *
 * Figures from the vendors' data sheets. Compute rates are peak dense rates: modelled times
 * are therefore lower bounds at 100% utilisation, which is what comparisons between
 * schedules need (they are never compared with measured wall clock). Network bandwidth is
 * per GPU (one NIC each), as in these systems. */
static const struct pl_profile profiles[] = {
    {
        .name = "dgx-h100",
        .description = "8x H100 SXM per node: NVLink 4 at 450 GB/s per direction, one 400 Gb/s "
                       "NIC per GPU, 989 TFLOP/s dense BF16, 80 GB",
        .flops = 989e12,
        .bw = {[PL_LINK_INTRA] = 450e9, [PL_LINK_INTER] = 400e9 / 8},
        .latency = {[PL_LINK_INTRA] = 3e-6, [PL_LINK_INTER] = 10e-6},
        .devices_per_node = 8,
        .device_mem = 80e9,
        .efficiency = 0.55,
    },
    {
        .name = "dgx-a100",
        .description = "8x A100 SXM per node: NVLink 3 at 300 GB/s per direction, one 200 Gb/s "
                       "NIC per GPU, 312 TFLOP/s dense BF16, 80 GB",
        .flops = 312e12,
        .bw = {[PL_LINK_INTRA] = 300e9, [PL_LINK_INTER] = 200e9 / 8},
        .latency = {[PL_LINK_INTRA] = 3e-6, [PL_LINK_INTER] = 10e-6},
        .devices_per_node = 8,
        .device_mem = 80e9,
        .efficiency = 0.61,
    },
    /* One MPI rank per laptop core: about 10 GFLOP/s of fp32 per core once the small
     * matrices of the labs are counted in (OpenBLAS reaches more on large sgemm); shared
     * memory moves ~5 GB/s per rank with two copies per message, ~1 us per message; "nodes"
     * are other laptops on a 10 Gb/s network. 2 GB per rank (16 GB shared by 8 ranks). */
    {
        .name = "cpu",
        .description = "a laptop, one rank per core: 10 GFLOP/s fp32, 5 GB/s shared memory, "
                       "10 Gb/s between machines, 2 GB per rank",
        .flops = 10e9,
        .bw = {[PL_LINK_INTRA] = 5e9, [PL_LINK_INTER] = 10e9 / 8},
        .latency = {[PL_LINK_INTRA] = 1e-6, [PL_LINK_INTER] = 20e-6},
        .devices_per_node = 8,
        .device_mem = 2e9,
        .efficiency = 1.0,
    },
    /* A TPU v4 pod as the ranks of one slice see it: a 3D torus of chips, each wired to its
     * six neighbours by links of about 50 GB/s per direction (400 Gb/s: the pod's 24 TB/s
     * of bisection over the 512 links that cross the middle of its 16 x 16 x 16 torus),
     * about 1 us per hop, 275 TFLOP/s BF16 and 32 GB per chip. The whole slice is one ICI
     * domain, so there is no second link class: both carry the link's figures. */
    {
        .name = "tpu-v4",
        .description = "TPU v4-like pod: a 3D torus of chips, each with 6 neighbour links of "
                       "50 GB/s per direction, 1 us a hop, 275 TFLOP/s BF16, 32 GB",
        .flops = 275e12,
        .bw = {[PL_LINK_INTRA] = 50e9, [PL_LINK_INTER] = 50e9},
        .latency = {[PL_LINK_INTRA] = 1e-6, [PL_LINK_INTER] = 1e-6},
        .devices_per_node = 4096,
        .device_mem = 32e9,
        .efficiency = 0.55,
        .torus = 1,
    },
};
#define NPROFILES ((int)(sizeof profiles / sizeof profiles[0]))

const struct pl_profile *pl_profile_find(const char *name)
{
    if (!name) return NULL;
    /* "laptop" is what people call the cpu profile, so it is accepted as its alias. */
    if (!strcmp(name, "laptop")) name = "cpu";
    for (int i = 0; i < NPROFILES; i++)
        if (!strcmp(profiles[i].name, name)) return &profiles[i];
    return NULL;
}

const struct pl_profile *pl_profile_get(const char *name)
{
    const struct pl_profile *p = pl_profile_find(name);
    if (p) return p;
    char known[256];
    pl_usage_error("unknown cluster profile \"%s\" (known profiles: %s)", name ? name : "(none)",
                   pl_profile_names(known, sizeof known));
}

const char *pl_profile_names(char *buf, size_t len)
{
    size_t n = 0;
    if (len) buf[0] = '\0';
    for (int i = 0; i < NPROFILES && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", profiles[i].name);
    return buf;
}

int pl_profile_count(void) { return NPROFILES; }

const struct pl_profile *pl_profile_at(int i)
{
    if (i < 0 || i >= NPROFILES) pl_fatal("profile %d is outside 0..%d", i, NPROFILES - 1);
    return &profiles[i];
}
