/* replay: a run's own trace replayed on a cluster profile, after the fact. Prints each
 * rank's modelled compute, communication and exposed communication, the step time and a
 * text timeline, and writes the timeline as an SVG: what a run's step would cost on the
 * profile's devices and links, measured from what the run actually issued.
 *
 *   replay --trace FILE [--profile NAME] [--nodes N] [--svg OUT.svg] [--width COLS]
 *
 * The trace comes from any paralab run with PL_TRACE=FILE (or --trace FILE where the program
 * takes it). --nodes splits
 * the trace's ranks over N nodes (equal counts, rank r on node r / per_node), so groups that
 * cross nodes run at the network's figures; 1 by default. `make replay TRACE=... PROFILE=...`
 * runs it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "replay.h"
#include "topo.h"
#include "trace_read.h"

static void usage(const char *msg, const char *arg)
{
    char names[256];
    fprintf(stderr, "replay: ");
    fprintf(stderr, msg, arg);
    fprintf(stderr, "\nusage: replay --trace FILE [--profile NAME] [--nodes N] [--svg OUT.svg] "
                    "[--width COLS]\nprofiles: %s\n", pl_profile_names(names, sizeof names));
    exit(PL_EXIT_USAGE);
}

int main(int argc, char **argv)
{
    const char *trace = NULL, *profile = "dgx-h100", *svg = NULL;
    int nodes = 1, width = 72;
    for (int i = 1; i < argc; i++) {
        int more = i + 1 < argc;
        if (!strcmp(argv[i], "--trace") && more) trace = argv[++i];
        else if (!strcmp(argv[i], "--profile") && more) profile = argv[++i];
        else if (!strcmp(argv[i], "--svg") && more) svg = argv[++i];
        else if (!strcmp(argv[i], "--nodes") && more) nodes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--width") && more) width = atoi(argv[++i]);
        else usage("unknown argument %s", argv[i]);
    }
    if (!trace) usage("which trace? %s", "--trace FILE (a run's --trace output)");
    const struct pl_profile *p = pl_profile_find(profile);
    if (!p) usage("no cluster profile named %s", profile);
    if (width < 20 || width > 400) usage("--width %s: choose 20 to 400 columns", "");

    char err[512];
    struct pl_merged_trace m;
    if (pl_trace_read_json(trace, &m, err, sizeof err) != 0) pl_usage_error("%s", err);
    if (nodes < 1 || m.nranks % nodes != 0)
        pl_usage_error("--nodes %d does not divide the trace's %d ranks (rank r sits on node "
                       "r / (ranks / nodes))", nodes, m.nranks);
    static struct pl_topo topo;
    if (pl_topo_virtual(&topo, m.nranks, nodes, m.nranks / nodes, err, sizeof err) != 0)
        pl_usage_error("%s", err);

    struct pl_replay r;
    if (pl_replay_run(&m, p, &topo, &r, err, sizeof err) != 0)
        pl_usage_error("the trace %s does not replay: %s", trace, err);
    double comm = 0, exposed = 0;
    for (int i = 0; i < r.nranks; i++) {
        comm += r.rank[i].comm;
        exposed += r.rank[i].exposed_comm;
    }
    printf("%s replayed on %s, %d rank(s) on %d node(s):\n", trace, p->name, m.nranks, nodes);
    pl_replay_print_summary(stdout, &r);
    pl_replay_print_timeline(stdout, &m, &r, width);
    printf("step %.3f ms; communication %.3f ms per rank, of which %.1f%% hidden behind "
           "compute\n", 1e3 * r.step_time, 1e3 * comm / r.nranks,
           comm > 0 ? 100.0 * (1.0 - (exposed > comm ? comm : exposed) / comm) : 100.0);
    int rc = 0;
    if (svg) {
        if (pl_replay_write_svg(&m, &r, trace, svg) == 0) {
            printf("timeline written to %s\n", svg);
        } else {
            fprintf(stderr, "replay: cannot write %s\n", svg);
            rc = 1;
        }
    }
    pl_replay_free(&r);
    pl_trace_merged_free(&m);
    return rc;
}
