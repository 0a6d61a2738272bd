/* bench.c: Lab 10's bench mode (make bench LAB=10): the code under test saves and loads the
 * kit's sharded state on this machine, and the interval its measured save cost gives against
 * Llama 3's published failure rate. Figures from the code benchmarked, labelled as its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab10.h"
#include "todo.h"

/* Llama 3 405B's pre-training (Dubey et al. 2024, section 3.3.4): 419 unexpected
 * interruptions in 54 days on 16,384 H100s. */
#define L10_LLAMA3_DAYS 54.0
#define L10_LLAMA3_FAILURES 419.0

void l10_bench(const struct gr_args *a)
{
    const char *who = a->label ? a->label : "your code";
    struct pl_shard_run run = pl_shard_run_default(a->seed);
    struct pl_shard_state *s = pl_shard_state_new(&run, pl_comm_world());
    for (int k = 0; k < 3; k++) pl_shard_step(s);
    char root[] = "/tmp/pl-lab10-bench-XXXXXX";
    if (!mkdtemp(root)) pl_fatal("mkdtemp %s", root);
    struct ft_shard_info info;
    const int reps = 20;
    double t0 = pl_now();
    int rc = 0;
    for (int i = 0; i < reps && rc == 0; i++) {
        rc = ft_save_shard(root, s, &info);
        if (rc == 0) rc = ft_save_manifest(root, s, &info, 1);
    }
    double save = (pl_now() - t0) / reps;
    struct ft_load_report rep;
    t0 = pl_now();
    for (int i = 0; i < reps && rc == 0; i++) ft_load(root, s, &rep);
    double load = (pl_now() - t0) / reps;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "bench: could not remove %s\n", root);
    if (pl_todo_what() || rc != 0) {
        printf("%s: %s\n", who, pl_todo_what() ? "still a stub" : "a save failed");
        pl_shard_state_free(s);
        return;
    }
    double mtbf = L10_LLAMA3_DAYS * 86400.0 / L10_LLAMA3_FAILURES;
    printf("# %s: the kit's state (%zu parameters, 3 x 4 bytes each) on this disk\n", who,
           s->numel);
    printf("save %.3g ms, load %.3g ms (mean of %d)\n", save * 1e3, load * 1e3, reps);
    printf("with Llama 3's job MTBF of %.0f s (54 days / 419 interruptions): interval %.4g s\n",
           mtbf, ft_interval(save, mtbf));
    pl_shard_state_free(s);
}
