/* test_shard_state: the kit's sharded state and step (lib/shard_state.h). The shards cover
 * the parameters exactly once, uneven by at most one element; the initial shard is that
 * slice of the full initialisation; and the step is the same arithmetic on any rank count:
 * after 3 steps on the world's ranks, every shard of the parameters and both moments, the
 * losses, the RNG state and the data position equal bit for bit those of the same run on
 * one rank (each rank runs it alone on a communicator of its own), while the loss falls; and
 * pl_shard_host_copy holds the same shard and state in host memory. */
#include <stdlib.h>
#include <string.h>

#include "paralab.h"
#include "shard_state.h"
#include "testing.h"

static void check_ranges(void)
{
    size_t numel[] = {0, 1, 7, 6374, 1000003};
    for (size_t a = 0; a < sizeof numel / sizeof numel[0]; a++)
        for (int n = 1; n <= 9; n++) {
            size_t next = 0, lo = (size_t)-1, hi = 0;
            for (int r = 0; r < n; r++) {
                size_t off, cnt;
                pl_shard_range(numel[a], n, r, &off, &cnt);
                CHECK(off == next, "numel %zu n %d rank %d starts at %zu, not %zu", numel[a], n,
                      r, off, next);
                next = off + cnt;
                lo = cnt < lo ? cnt : lo;
                hi = cnt > hi ? cnt : hi;
            }
            CHECK(next == numel[a] && hi - lo <= 1, "numel %zu on %d ranks: covered %zu, sizes "
                  "%zu..%zu", numel[a], n, next, lo, hi);
        }
}

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    check_ranges();
    struct pl_shard_run run = pl_shard_run_default(5);
    struct pl_comm *self = pl_comm_split(pl_comm_world(), pl_rank(), 0, "self");
    struct pl_shard_state *ref = pl_shard_state_new(&run, self);
    struct pl_shard_state *s = pl_shard_state_new(&run, pl_comm_world());
    CHECK(ref->numel == 6374 && ref->numel % 3 && ref->numel % 4,
          "the lab's model has %zu parameters (6374 expected: uneven on 3, 4, 6, 8)", ref->numel);
    float *full = malloc(ref->numel * 3 * sizeof(float));
    float *mine = malloc((s->count + 1) * 3 * sizeof(float));
    struct pl_model *m = pl_model_new(&run.cfg, PL_MODEL_PARAMS);
    pl_shard_get(s, mine, NULL, NULL);
    pl_to_host(full, m->params, ref->numel * sizeof(float));
    CHECK(!memcmp(mine, full + s->offset, s->count * sizeof(float)),
          "rank %d's initial shard is not its slice of the model's initialisation", pl_rank());
    double first = 0, last = 0;
    for (int step = 0; step < 3; step++) {
        double a = pl_shard_step(ref), b = pl_shard_step(s);
        CHECK(a == b, "step %d: loss %.17g on %d ranks, %.17g on one", step + 1, b, s->n, a);
        if (step == 0) first = a;
        last = a;
    }
    CHECK(last < first, "the loss does not fall: %g then %g", first, last);
    pl_shard_get(ref, full, full + ref->numel, full + 2 * ref->numel);
    pl_shard_get(s, mine, mine + s->count, mine + 2 * s->count);
    const char *what[] = {"params", "adam_m", "adam_v"};
    for (int k = 0; k < 3; k++)
        CHECK(!memcmp(mine + k * s->count, full + k * ref->numel + s->offset,
                      s->count * sizeof(float)),
              "rank %d of %d: %s after 3 steps differs from the one-rank run's", pl_rank(), s->n,
              what[k]);
    CHECK(s->step == 3 && s->rng == ref->rng && s->data_pos == ref->data_pos,
          "state after 3 steps: step %lld rng %llx data %lld vs %lld %llx %lld",
          (long long)s->step, (unsigned long long)s->rng, (long long)s->data_pos,
          (long long)ref->step, (unsigned long long)ref->rng, (long long)ref->data_pos);
    /* The host copy a forked save is given: the same shard and state, read without the
     * device, and nothing of the step's (threat: a copy still pointing at device memory or
     * at the step's buffers, which a forked process cannot use). */
    struct pl_shard_state *h = pl_shard_host_copy(s);
    float *copy = calloc(3 * s->count + 1, sizeof(float));
    PL_ASSERT(copy);
    pl_shard_get(h, copy, copy + s->count, copy + 2 * s->count);
    enum pl_where where = PL_DEVICE;
    CHECK(h->on_host && !s->on_host && pl_mem_block_of(h->params, &where, NULL) &&
              where == PL_HOST && !h->comm && !h->model && !h->send && !h->recv,
          "the host copy: on_host %d, params in %s, comm %p model %p", h->on_host,
          where == PL_HOST ? "host" : "device", (void *)h->comm, (void *)h->model);
    CHECK(!memcmp(copy, mine, 3 * s->count * sizeof(float)) && h->step == s->step &&
              h->rng == s->rng && h->data_pos == s->data_pos && h->offset == s->offset &&
              h->count == s->count && h->rank == s->rank,
          "rank %d: the host copy's shard or state differs from the state's", pl_rank());
    free(copy);
    pl_shard_state_free(h);
    pl_model_free(m);
    free(full);
    free(mine);
    pl_shard_state_free(s);
    pl_shard_state_free(ref);
    pl_comm_free(self);
    printf("test_shard_state: %d checks, %d failed\n", checks, failures);
    pl_finalize();
    return failures != 0;
}
