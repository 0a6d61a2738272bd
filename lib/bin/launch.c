/* launch: runs a program on N ranks with the settings this machine needs (run-as-root,
 * oversubscription, one OpenBLAS thread per rank) and a timeout that kills every rank.
 *     launch -np 8 [--timeout 600] [--launcher "srun"] -- program args... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "launch.h"

static void usage(void)
{
    fprintf(stderr, "usage: launch -np N [--timeout SECONDS] [--launcher CMD] -- program [args...]\n"
                    "  runs program on N ranks under mpirun (or $LAUNCHER / --launcher, e.g. srun)\n");
}

int main(int argc, char **argv)
{
    struct pl_launch_opts o = {.np = 1, .timeout_s = 600, .passthrough = 1};
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--"); i++) {
        if (i + 1 >= argc) break;
        char *end = NULL;
        if (!strcmp(argv[i], "-np")) {
            o.np = (int)strtol(argv[++i], &end, 10);
            if (*end || o.np < 1) pl_usage_error("-np expects a positive rank count, got '%s'", argv[i]);
        } else if (!strcmp(argv[i], "--timeout")) {
            o.timeout_s = strtod(argv[++i], &end);
            if (*end || o.timeout_s <= 0) pl_usage_error("--timeout expects seconds > 0, got '%s'", argv[i]);
        } else if (!strcmp(argv[i], "--launcher")) {
            o.launcher = argv[++i];
        } else {
            usage();
            pl_usage_error("unknown option '%s'", argv[i]);
        }
    }
    if (i >= argc - 1) {
        usage();
        pl_usage_error("no program given after --");
    }
    struct pl_launch_result res;
    if (pl_launch(&o, argv + i + 1, &res) != 0) {
        fprintf(stderr, "%s", res.output);
        return PL_EXIT_USAGE;
    }
    if (res.timed_out)
        fprintf(stderr, "launch: %s did not finish within %.0f s; every rank was stopped\n",
                argv[i + 1], o.timeout_s);
    int code = res.timed_out ? 124 : res.exit_code;
    pl_launch_result_free(&res);
    return code;
}
