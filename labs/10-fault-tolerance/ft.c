/* ft.c: Lab 10, fault tolerance: your sharded checkpoint, its load, and the interval.
 *
 * Read docs/labs/10-fault-tolerance.md first (sections 2 to 5 explain each function below),
 * then replace each lab_todo() call with your code. Grade your work with
 *     make grade LAB=10                    every test of this lab
 *     make grade LAB=10 TEST=killed        the tests whose name contains "killed"
 * The hints (docs/labs/10-fault-tolerance-hints.md) give one plan that works, call by call.
 *
 * What you may call is listed in ft.h: the disk only through lib/ckpt_fs.h, no MPI. */
#include "ft.h"

#include <string.h>

#include "todo.h"

/* Section 2. This rank's shard and the state every rank holds (step, RNG state, data
 * position), as ROOT/step-S/shard-R: the file has its final name only once it is whole and
 * synced. Fill *info (the manifest's entry for this shard: the file's size and FNV-1a). */
int ft_save_shard(const char *root, const struct pl_shard_state *s, struct ft_shard_info *info)
{
    (void)root, (void)s;
    memset(info, 0, sizeof *info);
    lab_todo("ft_save_shard", "2");
    return -1;
}

/* Section 2. Rank 0, after every shard: the manifest, the checkpoint's commit point. */
int ft_save_manifest(const char *root, const struct pl_shard_state *s,
                     const struct ft_shard_info *infos, int n)
{
    (void)root, (void)s, (void)infos, (void)n;
    lab_todo("ft_save_manifest", "2");
    return -1;
}

/* Sections 3 and 4. The newest whole checkpoint, newest first, each checked whole (manifest,
 * run, every shard's size and checksum) before anything of it is loaded; then this rank's
 * range [s->offset, s->offset + s->count) gathered from whichever saved shards overlap it.
 * Every checkpoint passed over goes into rep->skipped with its fault. */
int64_t ft_load(const char *root, struct pl_shard_state *s, struct ft_load_report *rep)
{
    (void)root, (void)s;
    memset(rep, 0, sizeof *rep);
    rep->loaded = -1;
    lab_todo("ft_load", "3");
    return -1;
}

/* Section 5. The interval that minimises the expected work lost to failures plus the time
 * spent saving, to first order. */
double ft_interval(double save_s, double mtbf_s)
{
    (void)save_s, (void)mtbf_s;
    lab_todo("ft_interval", "5");
    return 0;
}

/* Section 6. What a snapshot holds is yours. */
struct ft_snapshot {
    int unused;
};

/* Section 6. The stall: a copy of what the shard file will hold, no file call. */
struct ft_snapshot *ft_snapshot_take(const struct pl_shard_state *s)
{
    (void)s;
    lab_todo("ft_snapshot_take", "6");
    return NULL;
}

/* Section 6. The background write, from the snapshot alone. */
int ft_snapshot_save(const char *root, const struct ft_snapshot *snap,
                     struct ft_shard_info *info)
{
    (void)root, (void)snap;
    memset(info, 0, sizeof *info);
    lab_todo("ft_snapshot_save", "6");
    return -1;
}

void ft_snapshot_free(struct ft_snapshot *snap)
{
    (void)snap;
}

/* Section 7. The supervisor's verdict: running, finished, a rank died, a rank hung. */
struct ft_verdict ft_detect(const struct ft_rank_seen *seen, int n, double now_s,
                            double bound_s)
{
    (void)seen, (void)n, (void)now_s, (void)bound_s;
    lab_todo("ft_detect", "7");
    return (struct ft_verdict){FT_RUNNING, -1, -1};
}
