/* overlap.c: Lab 9's cool-down test, pure (no MPI): each stage's DP sum started bucket by
 * bucket inside its cool-down, read from the first unclipped step of each grid with a DP
 * group (cases.c counts, on every rank, the calls of pl_sp_block_backward of its stage's
 * blocks and the collectives on dp_comm that carry more than L9_DP_SLACK floats).
 *
 * Block l's gradient is final once the stage's last microbatch has run l's backward; the
 * blocks before l still have theirs to run. A stage of two blocks or more can therefore
 * start a DP sum before its last block backward begins, and only a sum cut in buckets can:
 * one collective of every gradient waits for the last of them. The rule, on every rank of
 * a stage with two blocks or more: the first such collective starts before the step's last
 * block backward call, and the gradients cross dp_comm in two collectives at least. Both
 * hold for one bucket per block, for several blocks per bucket on a stage of many, with or
 * without the head's or the embedding's own; a sum started once the backwards are done
 * fails the first, whatever its buckets. */
#include <stdio.h>

#include "lab09.h"

int l9_judge_overlap(const struct l9_state *st, int i, const struct gr_obs *all,
                     struct gr_why *why)
{
    const struct l9_case *k = &st->cases[i];
    if (k->dp < 2) return 1; /* no DP group: no sum to hide */
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = gr_obs_rank(all, r);
        const int nb = o->stage_blocks;
        /* one block: its sum cannot start before its own backward; no backwards through
         * sp_block.h's calls: nothing observed */
        if (nb < 2 || o->cd_backs == 0) continue;
        const int late = o->cd_dp_calls > 0 && o->cd_first_dp >= o->cd_backs;
        if (o->cd_dp_calls >= 2 && !late) continue;
        char who[96];
        snprintf(who, sizeof who, "rank %d (dp %d, tp %d, stage %d, %d blocks)", r,
                 o->coord[0], o->coord[1], o->coord[2], nb);
        if (o->cd_dp_calls == 0) {
            gr_why_say(why, "%s started no collective of more than %d floats on dp_comm in "
                       "the first step: its gradients were not summed over the DP group",
                       who, L9_DP_SLACK);
            return 0;
        }
        if (late)
            gr_why_say(why, "%s started its first DP sum (a collective of more than %d floats "
                       "on dp_comm) after all %d of its stage's block backward calls of the "
                       "first step had begun: its DP sum waited for the whole cool-down. "
                       "Block l's gradient is final once the last microbatch's backward has "
                       "left it, while the blocks before l still run theirs (section 3.3): "
                       "on a stage of two blocks or more the first DP sum must start before "
                       "the stage's last block backward", who, L9_DP_SLACK, o->cd_backs);
        if (o->cd_dp_calls < 2)
            gr_why_say(why, "%s sent its gradients over dp_comm in %d collective of more than "
                       "%d floats: a single bucket can start only once its last float, the "
                       "first block's, is final, so nothing of the sum runs beside the "
                       "backwards; a stage of two blocks or more sums them in two buckets at "
                       "least (one per block, or per few blocks)", who, o->cd_dp_calls,
                       L9_DP_SLACK);
        return 0;
    }
    return 1;
}
