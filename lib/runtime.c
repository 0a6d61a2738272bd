/* runtime.c: the one runtime context: MPI, the topology, the world communicator, and the
 * options every paralab program shares (see runtime.h). */
#include "runtime.h"

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas_threads.h"
#include "check.h"
#include "comm_internal.h"
#include "comm_nccl_gpu.h"
#include "mem.h"
#include "trace.h"

static struct {
    int initialized;
    int rank, size, local_rank;
    int verbose;
    double t0;
    struct pl_topo topo;
    char trace_path[512];
} rt;

static int parse_count(const char *flag, const char *text)
{
    char *end = NULL;
    long v = text ? strtol(text, &end, 10) : 0;
    if (!text || *end != '\0' || v < 1 || v > PL_TOPO_MAX_RANKS)
        pl_usage_error_all("%s expects a positive whole number, got '%s'", flag,
                           text ? text : "(nothing)");
    return (int)v;
}

/* Removes argv[i] and the n-1 words after it. */
static void drop_args(int *argc, char **argv, int i, int n)
{
    for (int j = i; j + n <= *argc; j++) argv[j] = argv[j + n];
    *argc -= n;
}

static void take_flags(int *argc, char **argv, int *nodes, int *per_node)
{
    for (int i = 1; i < *argc;) {
        const char *a = argv[i];
        int has_value = i + 1 < *argc;
        if (!strcmp(a, "--nodes") || !strcmp(a, "--gpus-per-node") || !strcmp(a, "--trace")) {
            if (!has_value) pl_usage_error_all("%s needs a value", a);
            if (!strcmp(a, "--nodes")) *nodes = parse_count(a, argv[i + 1]);
            else if (!strcmp(a, "--gpus-per-node")) *per_node = parse_count(a, argv[i + 1]);
            else snprintf(rt.trace_path, sizeof rt.trace_path, "%s", argv[i + 1]);
            drop_args(argc, argv, i, 2);
        } else {
            i++;
        }
    }
}

static void setup_topology(int nodes, int per_node)
{
    char err[256];
    if (nodes == 0 && per_node == 0) {
        const char *n = getenv("PL_NODES"), *g = getenv("PL_GPUS_PER_NODE");
        if (n && *n) nodes = parse_count("PL_NODES", n);
        if (g && *g) per_node = parse_count("PL_GPUS_PER_NODE", g);
    }
    if (nodes || per_node) {
        /* One of the two given: the other follows from the rank count when it divides. */
        if (!nodes && rt.size % per_node == 0) nodes = rt.size / per_node;
        if (!per_node && rt.size % nodes == 0) per_node = rt.size / nodes;
        if (!nodes || !per_node)
            pl_usage_error_all("%d ranks cannot be split into %s%d; choose a divisor of %d",
                               rt.size, nodes ? "nodes of equal size over " : "nodes of ",
                               nodes ? nodes : per_node, rt.size);
        if (pl_topo_virtual(&rt.topo, rt.size, nodes, per_node, err, sizeof err) != 0)
            pl_usage_error_all("%s", err);
        return;
    }
    char name[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0;
    PL_CHECK_MPI(MPI_Get_processor_name(name, &len));
    char *all = calloc((size_t)rt.size, MPI_MAX_PROCESSOR_NAME);
    const char **names = calloc((size_t)rt.size, sizeof *names);
    if (!all || !names) pl_fatal("out of memory gathering hostnames");
    PL_CHECK_MPI(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all,
                               MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD));
    for (int r = 0; r < rt.size; r++) names[r] = all + (size_t)r * MPI_MAX_PROCESSOR_NAME;
    if (pl_topo_from_hostnames(&rt.topo, rt.size, names, err, sizeof err) != 0)
        pl_usage_error_all("%s", err);
    free(names);
    free(all);
}

void pl_init(int *argc, char ***argv)
{
    if (rt.initialized) return;
    rt.t0 = pl_clock();
#ifdef PL_GPU
    pl_gpu_pick_device();
#endif
    PL_CHECK_MPI(MPI_Init(argc, argv));
    PL_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rt.rank));
    PL_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &rt.size));
    if (rt.size > PL_TOPO_MAX_RANKS)
        pl_usage_error_all("%d ranks: this build supports at most %d", rt.size, PL_TOPO_MAX_RANKS);

    MPI_Comm node;
    PL_CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rt.rank,
                                     MPI_INFO_NULL, &node));
    PL_CHECK_MPI(MPI_Comm_rank(node, &rt.local_rank));
    int ranks_on_node = 1;
    PL_CHECK_MPI(MPI_Comm_size(node, &ranks_on_node));
    PL_CHECK_MPI(MPI_Comm_free(&node));
    pl_blas_threads_apply(ranks_on_node);

    const char *v = getenv("PL_VERBOSE");
    rt.verbose = v && *v && strcmp(v, "0") != 0;
    const char *cap = getenv("PL_DEVICE_MEM");
    if (cap && *cap) {
        size_t bytes = 0;
        if (pl_mem_parse_bytes(cap, &bytes) != 0 || bytes == 0)
            pl_usage_error_all("PL_DEVICE_MEM=%s is not a device size: give a positive number "
                               "of bytes with an optional unit, e.g. 80GB, 512MiB or 1048576",
                               cap);
        pl_mem_set_device_cap(bytes);
    }

    int nodes = 0, per_node = 0;
    if (argc && argv) take_flags(argc, *argv, &nodes, &per_node);
    const char *tp = getenv("PL_TRACE");
    if (!rt.trace_path[0] && tp && *tp) snprintf(rt.trace_path, sizeof rt.trace_path, "%s", tp);

    setup_topology(nodes, per_node);
    rt.initialized = 1;
    struct pl_proc me = {rt.rank, rt.size, rt.local_rank, rt.verbose, rt.t0, &rt.topo};
    pl_proc_start(&me);
    pl_comm_startup();
    if (rt.trace_path[0]) pl_trace_enable(1);
}

void pl_finalize(void)
{
    if (!rt.initialized) return;
    /* From here on this rank makes no call of the labs: a rank that others still wait for
     * in a collective is seen to have left it out (deadlock.h). */
    pl_trace_where("pl_finalize: this rank has finished");
    if (rt.trace_path[0]) {
        struct pl_merged_trace m;
        pl_trace_gather(&m);
        if (rt.rank == 0) {
            if (pl_trace_write_json(&m, rt.trace_path) != 0)
                fprintf(stderr, "warning: could not write the trace to %s\n", rt.trace_path);
            else
                printf("trace: %s (open it in Perfetto or chrome://tracing)\n", rt.trace_path);
        }
        pl_trace_merged_free(&m);
    }
    pl_comm_shutdown();
    pl_mem_report_leaks(stderr);
    rt.initialized = 0;
    pl_proc_stop();
    PL_CHECK_MPI(MPI_Finalize());
}

int pl_gpu_build(void)
{
#ifdef PL_GPU
    return 1;
#else
    return 0;
#endif
}

void pl_print0(const char *fmt, ...)
{
    if (rt.rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}
