/* demo: a short multi-rank run that exercises the library end to end. The ranks form a
 * tp x dp x pp grid on a (virtual) cluster, do one "step" of the communication a 3-D
 * parallel training step does (TP all-reduces, a pipeline send/recv, a DP gradient
 * all-reduce overlapped with compute), and print the traffic ledger, the memory ledger and
 * the modelled timeline of that step on a DGX H100 profile.
 *     launch -np 8 -- demo --nodes 2 --gpus-per-node 4 [--order tp-dp-pp] [--degrees tp=2,pp=2]
 *                          [--profile dgx-h100] [--svg demo.svg] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paralab.h"

#define HIDDEN 4096      /* elements of one activation message */
#define GRAD_ELEMS 65536 /* elements of this rank's gradient shard */

/* Pretend compute: FLOPs are what the ledger and the replay see. */
static void compute(const char *label, double flops)
{
    pl_span(label);
    pl_ledger_add_flops(flops);
}

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    const char *order = "tp-dp-pp", *degrees = NULL, *profile_name = "dgx-h100", *svg = NULL;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--order")) order = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--degrees")) degrees = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--profile")) profile_name = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--svg")) svg = argv[++i];
        else pl_usage_error_all("unknown option '%s' (known: --order, --degrees, --profile, --svg, "
                                "--nodes, --gpus-per-node, --trace)", argv[i]);
    }
    /* Every rank has the same arguments, so the verdict is collective: one message. */
    const struct pl_profile *profile = pl_profile_find(profile_name);
    char known[256];
    if (!profile)
        pl_usage_error_all("--profile %s: unknown cluster profile (known profiles: %s)",
                           profile_name, pl_profile_names(known, sizeof known));
    int world = pl_size(), me = pl_rank();
    if (!degrees) degrees = world % 8 == 0 ? "tp=2,pp=2" : world % 2 == 0 ? "tp=2" : "";
    struct pl_grid grid;
    pl_grid_init_or_die(&grid, order, degrees, world);
    int tp_axis = pl_grid_axis(&grid, "tp"), dp_axis = pl_grid_axis(&grid, "dp"),
        pp_axis = pl_grid_axis(&grid, "pp");
    struct pl_comm *world_comm = pl_comm_world();
    struct pl_comm *tp = tp_axis >= 0 ? pl_grid_comm(&grid, world_comm, tp_axis) : NULL;
    struct pl_comm *dp = dp_axis >= 0 ? pl_grid_comm(&grid, world_comm, dp_axis) : NULL;

    float *act = pl_comm_buf_alloc(HIDDEN, "activation");
    float *grad = pl_comm_buf_alloc(GRAD_ELEMS, "grad bucket");
    float *params = pl_mem_alloc(GRAD_ELEMS * sizeof(float), PL_MEM_PARAMS, PL_DEVICE, "params");
    float *optim = pl_mem_alloc(2 * GRAD_ELEMS * sizeof(float), PL_MEM_OPTIM, PL_DEVICE, "adam m,v");
    float *host = malloc(GRAD_ELEMS * sizeof(float));
    pl_rng_fill_int(host, GRAD_ELEMS, 1, (uint64_t)me, 0, -8, 8);
    pl_copy_from_host(grad, host, GRAD_ELEMS);

    pl_trace_enable(1);
    pl_trace_clear();
    pl_ledger_reset();
    int prev = pp_axis >= 0 ? pl_grid_neighbor(&grid, me, pp_axis, -1) : -1;
    int next = pp_axis >= 0 ? pl_grid_neighbor(&grid, me, pp_axis, +1) : -1;
    double layer_flops = 2.0 * 8 * HIDDEN * HIDDEN * 64; /* a few linear layers' worth */

    /* Forward: receive from the previous stage, two TP all-reduces, send to the next. */
    if (prev >= 0) pl_recv(world_comm, act, HIDDEN, prev, 1);
    compute("F attn", layer_flops);
    if (tp) pl_all_reduce(tp, act, act, HIDDEN, PL_SUM);
    compute("F mlp", layer_flops);
    if (tp) pl_all_reduce(tp, act, act, HIDDEN, PL_SUM);
    if (next >= 0) pl_send(world_comm, act, HIDDEN, next, 1);
    /* Backward, with the DP gradient all-reduce overlapped with the rest of backward. */
    if (next >= 0) pl_recv(world_comm, act, HIDDEN, next, 2);
    compute("B mlp", 2 * layer_flops);
    struct pl_handle *h = dp ? pl_all_reduce_async(dp, grad, grad, GRAD_ELEMS, PL_AVG) : NULL;
    compute("B attn", 2 * layer_flops);
    if (prev >= 0) pl_send(world_comm, act, HIDDEN, prev, 2);
    pl_wait(h);
    compute("W adamw", 10.0 * GRAD_ELEMS);

    /* The averaged gradient must be the mean of what the dp group contributed. */
    if (dp) {
        int members[PL_TOPO_MAX_RANKS];
        int n = pl_grid_group(&grid, me, dp_axis, members);
        float *expect = calloc(GRAD_ELEMS, sizeof(float)), *mine = malloc(GRAD_ELEMS * sizeof(float));
        for (int k = 0; k < n; k++) {
            pl_rng_fill_int(mine, GRAD_ELEMS, 1, (uint64_t)members[k], 0, -8, 8);
            for (int i = 0; i < GRAD_ELEMS; i++) expect[i] += mine[i];
        }
        for (int i = 0; i < GRAD_ELEMS; i++) expect[i] /= (float)n;
        pl_copy_to_host(mine, grad, GRAD_ELEMS);
        double err = pl_rel_l2(mine, expect, GRAD_ELEMS);
        if (err > 1e-6) pl_fatal("dp all-reduce result is wrong on rank %d: rel L2 %g", me, err);
        free(expect);
        free(mine);
    }

    struct pl_ledger *all = calloc((size_t)world, sizeof *all);
    pl_ledger_gather(world_comm, pl_ledger(), all);
    struct pl_merged_trace m;
    pl_trace_gather(&m);
    char gbuf[64];
    if (me == 0) {
        printf("paralab demo: %d ranks as %s on %d node(s) x %d (%s topology), backend %s\n\n",
               world, pl_grid_describe(&grid, gbuf, sizeof gbuf), pl_topo()->nodes,
               pl_topo()->per_node, pl_topo()->is_virtual ? "virtual" : "real", pl_comm_backend());
        printf("traffic ledger (bytes sent per rank, by collective kind and link class):\n");
        pl_ledger_print(stdout, all, world);
        printf("\n");
    }
    int code = 0;
    if (me == 0) {
        pl_mem_print(stdout, "memory ledger of rank 0 (bytes):");
        printf("\n");
        struct pl_replay r;
        char err[256];
        if (pl_replay_run(&m, profile, pl_topo(), &r, err, sizeof err) != 0)
            pl_fatal("replay failed: %s", err);
        printf("the same step replayed on the %s profile (%s):\n", profile->name,
               profile->description);
        pl_replay_print_summary(stdout, &r);
        pl_replay_print_timeline(stdout, &m, &r, 72);
        errno = 0;
        if (svg && pl_replay_write_svg(&m, &r, "paralab demo step", svg) == 0) {
            printf("timeline written to %s\n", svg);
        } else if (svg) {
            fprintf(stderr, "error: cannot write the timeline to %s: %s (check that its folder "
                            "exists and is writable)\n", svg, errno ? strerror(errno) : "write failed");
            code = PL_EXIT_FAIL;
        }
        pl_replay_free(&r);
    }
    pl_trace_merged_free(&m);
    free(all);
    free(host);
    pl_mem_free(optim);
    pl_mem_free(params);
    pl_comm_buf_free(grad);
    pl_comm_buf_free(act);
    if (tp) pl_comm_free(tp);
    if (dp) pl_comm_free(dp);
    pl_finalize();
    return code;
}
