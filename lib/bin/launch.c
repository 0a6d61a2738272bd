/* launch: runs a program on N ranks with the settings this machine needs (run-as-root,
 * oversubscription, OpenBLAS threads shared out between the ranks) and a timeout that kills
 * every rank, as does stopping launch itself (^C, SIGTERM, SIGHUP).
 *     launch -np 8 [--timeout 600] [--launcher "srun"] -- program args... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "launch.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: launch -np N [--timeout SECONDS] [--launcher CMD] -- program [args...]\n"
               "  runs program on N ranks under mpirun (or $LAUNCHER / --launcher, e.g. srun);\n"
               "  after the timeout (default 600 s), or on ^C, every rank is stopped\n");
}

/* The value after option argv[i], or a usage error that names the option. */
static const char *value_of(int argc, char **argv, int i, const char *what)
{
    if (i + 1 >= argc || !strcmp(argv[i + 1], "--")) {
        usage(stderr);
        pl_usage_error("%s needs a value (%s)", argv[i], what);
    }
    return argv[i + 1];
}

int main(int argc, char **argv)
{
    struct pl_launch_opts o = {.np = 1, .timeout_s = 600, .passthrough = 1};
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--"); i++) {
        char *end = NULL;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "-np")) {
            const char *v = value_of(argc, argv, i++, "a positive rank count, e.g. -np 4");
            o.np = (int)strtol(v, &end, 10);
            if (!*v || *end || o.np < 1)
                pl_usage_error("-np expects a positive rank count, got '%s'", v);
        } else if (!strcmp(argv[i], "--timeout")) {
            const char *v = value_of(argc, argv, i++, "seconds > 0, e.g. --timeout 120");
            o.timeout_s = strtod(v, &end);
            if (!*v || *end || o.timeout_s <= 0)
                pl_usage_error("--timeout expects seconds > 0, got '%s'", v);
        } else if (!strcmp(argv[i], "--launcher")) {
            o.launcher = value_of(argc, argv, i++, "a launcher command, e.g. --launcher srun");
        } else {
            usage(stderr);
            pl_usage_error("unknown option '%s' (the program to run goes after --)", argv[i]);
        }
    }
    if (i >= argc - 1) {
        usage(stderr);
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
