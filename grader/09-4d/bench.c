/* bench.c: Lab 9's bench mode: each grid of the rank count trained K steps, every step's
 * loss (unclipped run) and global norm (clipped run) beside the single device's, and the
 * pipeline's bubble by its formula, (p-1)/(m+p-1)
 * with m microbatches per replica. Nothing is judged. */
#include <stdio.h>

#include "lab09.h"

void l9_bench(const struct gr_args *a)
{
    if (pl_size() != 6 && pl_size() != 8) {
        if (pl_rank() == 0) printf("Lab 9 bench runs on 6 or 8 ranks (got %d)\n", pl_size());
        return;
    }
    struct l9_state *st = l9_setup(a->seed, pl_size(), 0);
    if (pl_rank() == 0)
        printf("%-12s %-5s %-12s %-12s %-12s %-12s %s\n", "dp,tp,pp", "step", "loss",
               "one device", "norm", "one device", "(p-1)/(m+p-1)");
    for (int i = 0; i < st->ncases; i++) {
        struct l9_obs ob = {0};
        pl_todo_reset();
        l9_observe(st, i, &ob);
        if (gr_todo_any()) break;
        const struct l9_case *k = &st->cases[i];
        double bubble = (double)(k->pp - 1) / (L9_MICRO + k->pp - 1);
        for (int s = 0; s < L9_K_STEPS && pl_rank() == 0; s++)
            printf("%d,%d,%-8d %-5d %-12.7f %-12.7f %-12.6f %-12.6f %.3f\n", k->dp, k->tp, k->pp,
                   s, ob.loss[s], st->free[i].loss[s], ob.norm[s], st->ref_norm[i][s], bubble);
    }
    l9_finish(st);
}
