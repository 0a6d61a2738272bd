/* ft.c: Lab 10, fault tolerance: sharded checkpoints, a load that survives a crash and
 * reshards, and the checkpoint interval (the reference solution).
 *
 * A shard file: a header of SHARD_HDR bytes (magic, run id, step, rank, n, offset, count,
 * RNG state, data position, each little-endian), then count parameters, count first
 * moments and count second moments (fp32). The manifest: magic, run id, step, n, the
 * parameter count, then per shard its offset, count, size and checksum, then the FNV-1a of
 * everything before it. Each file is written to NAME.tmp, synced, closed and renamed; the
 * manifest last, by rank 0, once every shard is on the disk. */
#include "ft.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHARD_MAGIC 0x3144524148535446ULL /* "FTSHARD1" */
#define MANIF_MAGIC 0x31464e414d535446ULL /* "FTSMANF1" */
#define SHARD_HDR 80
#define MANIF_HDR 40
#define MANIF_ENTRY 32
#define MAX_RANKS 256
#define PATH_LEN 4096
#define MAX_DIRS 1024

static void step_dir(const char *root, int64_t step, char *buf, size_t len)
{
    char name[32];
    snprintf(name, sizeof name, FT_STEP_DIR, (long long)step);
    snprintf(buf, len, "%.3900s/%s", root, name);
}

/* data[0..n) as dir/name, whole or not at all: a temporary name, sync, close, rename, and
 * the directory synced so that the new name itself is on the disk. */
static int write_whole(const char *dir, const char *name, const unsigned char *data, size_t n,
                       size_t first)
{
    char tmp[PATH_LEN + 80], fin[PATH_LEN + 80];
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name);
    snprintf(fin, sizeof fin, "%s/%s", dir, name);
    int fd = pl_fs_create(tmp);
    if (fd < 0) return -1;
    /* two writes: the header, then the body */
    int ok = pl_fs_write(fd, data, first) == 0 && pl_fs_write(fd, data + first, n - first) == 0 &&
             pl_fs_sync(fd) == 0;
    if (pl_fs_close(fd) != 0 || !ok) return -1;
    if (pl_fs_rename(tmp, fin) != 0) return -1;
    return pl_fs_sync_dir(dir);
}

int ft_save_shard(const char *root, const struct pl_shard_state *s, struct ft_shard_info *info)
{
    char dir[PATH_LEN], name[32];
    step_dir(root, s->step, dir, sizeof dir);
    if (pl_fs_mkdir(dir) != 0) return -1;
    size_t body = 3 * s->count * sizeof(float), n = SHARD_HDR + body;
    unsigned char *buf = calloc(1, n);
    if (!buf) return -1;
    uint64_t hdr[10] = {SHARD_MAGIC, s->run.run_id, (uint64_t)s->step, (uint64_t)s->rank,
                        (uint64_t)s->n, s->offset, s->count, s->rng, (uint64_t)s->data_pos, 0};
    for (int i = 0; i < 10; i++) pl_put_le(buf + 8 * i, hdr[i], 8);
    float *f = (float *)(buf + SHARD_HDR);
    pl_shard_get(s, f, f + s->count, f + 2 * s->count);
    snprintf(name, sizeof name, FT_SHARD, s->rank);
    int rc = write_whole(dir, name, buf, n, SHARD_HDR);
    info->rank = s->rank;
    info->offset = s->offset;
    info->count = s->count;
    info->bytes = n;
    info->checksum = pl_fnv1a(PL_FNV1A_START, buf, n);
    free(buf);
    return rc;
}

int ft_save_manifest(const char *root, const struct pl_shard_state *s,
                     const struct ft_shard_info *infos, int n)
{
    char dir[PATH_LEN];
    step_dir(root, s->step, dir, sizeof dir);
    /* The shards' pl_fs_mkdir made the step directory, a new name in ROOT: durable once ROOT
     * is synced, before the commit, or a power loss could take the whole directory after it */
    if (pl_fs_sync_dir(root) != 0) return -1;
    size_t len = MANIF_HDR + (size_t)n * MANIF_ENTRY + 8;
    unsigned char *buf = calloc(1, len);
    if (!buf) return -1;
    uint64_t hdr[5] = {MANIF_MAGIC, s->run.run_id, (uint64_t)s->step, (uint64_t)n, s->numel};
    for (int i = 0; i < 5; i++) pl_put_le(buf + 8 * i, hdr[i], 8);
    for (int r = 0; r < n; r++) {
        unsigned char *e = buf + MANIF_HDR + (size_t)r * MANIF_ENTRY;
        pl_put_le(e, infos[r].offset, 8);
        pl_put_le(e + 8, infos[r].count, 8);
        pl_put_le(e + 16, infos[r].bytes, 8);
        pl_put_le(e + 24, infos[r].checksum, 8);
    }
    pl_put_le(buf + len - 8, pl_fnv1a(PL_FNV1A_START, buf, len - 8), 8);
    int rc = write_whole(dir, FT_MANIFEST, buf, len, MANIF_HDR);
    free(buf);
    return rc;
}

/* A manifest, read and checked. */
struct manifest {
    uint64_t run_id, step, n, numel;
    uint64_t offset[MAX_RANKS], count[MAX_RANKS], bytes[MAX_RANKS], checksum[MAX_RANKS];
};

static int read_manifest(const char *dir, const struct pl_shard_state *s, struct manifest *m)
{
    char path[PATH_LEN + 80];
    unsigned char buf[MANIF_HDR + MAX_RANKS * MANIF_ENTRY + 8];
    snprintf(path, sizeof path, "%s/%s", dir, FT_MANIFEST);
    long long len = pl_fs_read(path, buf, sizeof buf);
    if (len < 0) return pl_fs_size(path) < 0 ? FT_NO_MANIFEST : FT_BAD_MANIFEST;
    if (len < MANIF_HDR + 8 || pl_get_le(buf, 8) != MANIF_MAGIC) return FT_BAD_MANIFEST;
    if (pl_get_le(buf + len - 8, 8) != pl_fnv1a(PL_FNV1A_START, buf, (size_t)len - 8))
        return FT_BAD_MANIFEST;
    m->run_id = pl_get_le(buf + 8, 8);
    m->step = pl_get_le(buf + 16, 8);
    m->n = pl_get_le(buf + 24, 8);
    m->numel = pl_get_le(buf + 32, 8);
    if (m->n < 1 || m->n > MAX_RANKS || (size_t)len != MANIF_HDR + m->n * MANIF_ENTRY + 8)
        return FT_BAD_MANIFEST;
    if (m->run_id != s->run.run_id) return FT_OTHER_RUN;
    if (m->numel != s->numel) return FT_BAD_MANIFEST;
    for (uint64_t r = 0; r < m->n; r++) {
        const unsigned char *e = buf + MANIF_HDR + r * MANIF_ENTRY;
        size_t off, cnt;
        pl_shard_range(s->numel, (int)m->n, (int)r, &off, &cnt);
        m->offset[r] = pl_get_le(e, 8);
        m->count[r] = pl_get_le(e + 8, 8);
        m->bytes[r] = pl_get_le(e + 16, 8);
        m->checksum[r] = pl_get_le(e + 24, 8);
        if (m->offset[r] != off || m->count[r] != cnt ||
            m->bytes[r] != SHARD_HDR + 3 * cnt * sizeof(float))
            return FT_BAD_MANIFEST;
    }
    return FT_OK;
}

/* Every shard of the checkpoint in dir against its manifest; on success the overlap of
 * each with this rank's range [s->offset, s->offset + s->count) is copied into p, mo, v
 * and the state's scalars into st[0..3) (from shard 0). Returns FT_OK or the fault, and the
 * shard at fault in *bad. */
static int check_shards(const char *dir, const struct pl_shard_state *s,
                        const struct manifest *m, float *p, float *mo, float *v, uint64_t *st,
                        int *bad)
{
    for (uint64_t r = 0; r < m->n; r++) {
        char path[PATH_LEN + 80], name[32];
        snprintf(name, sizeof name, FT_SHARD, (int)r);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        *bad = (int)r;
        long long size = pl_fs_size(path);
        if (size < 0) return FT_SHARD_MISSING;
        if ((uint64_t)size != m->bytes[r]) return FT_SHARD_SIZE;
        unsigned char *buf = malloc(m->bytes[r]);
        if (!buf) return FT_SHARD_MISSING;
        long long got = pl_fs_read(path, buf, m->bytes[r]);
        int fault = got != (long long)m->bytes[r] ? FT_SHARD_SIZE
                    : pl_fnv1a(PL_FNV1A_START, buf, m->bytes[r]) != m->checksum[r]
                        ? FT_SHARD_CHECKSUM
                        : FT_OK;
        if (fault == FT_OK && (pl_get_le(buf, 8) != SHARD_MAGIC ||
                               pl_get_le(buf + 8, 8) != m->run_id ||
                               pl_get_le(buf + 16, 8) != m->step))
            fault = FT_SHARD_CHECKSUM;
        if (fault == FT_OK) {
            if (r == 0) { /* step, RNG state, data position */
                st[0] = pl_get_le(buf + 16, 8);
                st[1] = pl_get_le(buf + 56, 8);
                st[2] = pl_get_le(buf + 64, 8);
            }
            /* this rank's range against shard r's */
            uint64_t lo = m->offset[r] > s->offset ? m->offset[r] : s->offset;
            uint64_t hi_r = m->offset[r] + m->count[r], hi_s = s->offset + s->count;
            uint64_t hi = hi_r < hi_s ? hi_r : hi_s;
            const float *f = (const float *)(buf + SHARD_HDR);
            for (uint64_t k = lo; k < hi; k++) {
                uint64_t src = k - m->offset[r], dst = k - s->offset;
                p[dst] = f[src];
                mo[dst] = f[m->count[r] + src];
                v[dst] = f[2 * m->count[r] + src];
            }
        }
        free(buf);
        if (fault != FT_OK) return fault;
    }
    *bad = -1;
    return FT_OK;
}

int64_t ft_load(const char *root, struct pl_shard_state *s, struct ft_load_report *rep)
{
    memset(rep, 0, sizeof *rep);
    rep->loaded = -1;
    char (*names)[PL_FS_NAME] = malloc(MAX_DIRS * sizeof *names);
    size_t c = s->count ? s->count : 1;
    float *p = malloc(3 * c * sizeof(float));
    struct manifest *m = malloc(sizeof *m);
    int nnames = names && p && m ? pl_fs_list(root, names, MAX_DIRS) : -1;
    for (int i = nnames - 1; i >= 0; i--) {
        long long step;
        char tail;
        if (sscanf(names[i], "step-%lld%c", &step, &tail) != 1 || strlen(names[i]) != 13)
            continue;
        char dir[PATH_LEN];
        snprintf(dir, sizeof dir, "%.3900s/%s", root, names[i]);
        uint64_t st[3] = {0};
        int bad = -1, fault = read_manifest(dir, s, m);
        if (fault == FT_OK && m->step != (uint64_t)step) fault = FT_BAD_MANIFEST;
        if (fault == FT_OK) fault = check_shards(dir, s, m, p, p + c, p + 2 * c, st, &bad);
        if (fault == FT_OK) {
            pl_shard_set(s, p, p + c, p + 2 * c);
            s->step = (int64_t)st[0];
            s->rng = st[1];
            s->data_pos = (int64_t)st[2];
            rep->loaded = step;
            rep->saved_ranks = (int)m->n;
            break;
        }
        if (rep->nskipped < FT_MAX_SKIPPED)
            rep->skipped[rep->nskipped++] = (struct ft_skip){step, fault, bad};
    }
    free(names);
    free(p);
    free(m);
    return rep->loaded;
}

double ft_interval(double save_s, double mtbf_s)
{
    return sqrt(2.0 * save_s * mtbf_s);
}

/* ---- section 6: asynchronous checkpointing ---- */

/* A snapshot is the shard file's bytes, laid out in memory as ft_save_shard lays them out;
 * the save writes them. */
struct ft_snapshot {
    int rank;
    int64_t step;
    uint64_t offset, count;
    size_t n;
    unsigned char *buf;
};

struct ft_snapshot *ft_snapshot_take(const struct pl_shard_state *s)
{
    struct ft_snapshot *snap = calloc(1, sizeof *snap);
    size_t n = SHARD_HDR + 3 * s->count * sizeof(float);
    unsigned char *buf = snap ? calloc(1, n) : NULL;
    if (!buf) {
        free(snap);
        return NULL;
    }
    const uint64_t hdr[9] = {SHARD_MAGIC, s->run.run_id, (uint64_t)s->step, (uint64_t)s->rank,
                             (uint64_t)s->n, s->offset, s->count, s->rng, (uint64_t)s->data_pos};
    for (int i = 0; i < 9; i++) pl_put_le(buf + 8 * i, hdr[i], 8);
    float *f = (float *)(buf + SHARD_HDR);
    pl_shard_get(s, f, f + s->count, f + 2 * s->count);
    *snap = (struct ft_snapshot){s->rank, s->step, s->offset, s->count, n, buf};
    return snap;
}

int ft_snapshot_save(const char *root, const struct ft_snapshot *snap,
                     struct ft_shard_info *info)
{
    char dir[PATH_LEN], name[32];
    step_dir(root, snap->step, dir, sizeof dir);
    if (pl_fs_mkdir(dir) != 0) return -1;
    snprintf(name, sizeof name, FT_SHARD, snap->rank);
    info->rank = snap->rank;
    info->offset = snap->offset;
    info->count = snap->count;
    info->bytes = snap->n;
    info->checksum = pl_fnv1a(PL_FNV1A_START, snap->buf, snap->n);
    return write_whole(dir, name, snap->buf, snap->n, SHARD_HDR);
}

void ft_snapshot_free(struct ft_snapshot *snap)
{
    if (!snap) return;
    free(snap->buf);
    free(snap);
}

/* ---- section 7: detecting a failure ---- */

/* Of the ranks pick() accepts, the one whose last step is lowest, ties to the lowest rank;
 * -1 when it accepts none. */
static int first_stopped(const struct ft_rank_seen *seen, int n, const unsigned char *pick)
{
    int at = -1;
    for (int r = 0; r < n; r++)
        if (pick[r] && (at < 0 || seen[r].step < seen[at].step)) at = r;
    return at;
}

struct ft_verdict ft_detect(const struct ft_rank_seen *seen, int n, double now_s,
                            double bound_s)
{
    unsigned char pick[MAX_RANKS] = {0};
    int ended = 0, failed = 0;
    for (int r = 0; r < n && r < MAX_RANKS; r++) {
        ended += seen[r].ended;
        failed |= seen[r].ended && (seen[r].signal || seen[r].exit_code);
    }
    if (ended == n && !failed) return (struct ft_verdict){FT_FINISHED, -1, -1};
    int kind = FT_RANK_DIED;
    if (ended) { /* a death, or an exit while others still run */
        for (int r = 0; r < n && r < MAX_RANKS; r++) pick[r] = (unsigned char)seen[r].ended;
    } else {
        kind = FT_RANK_HUNG;
        int stale = 0, outside = 0;
        for (int r = 0; r < n && r < MAX_RANKS; r++) {
            int late = now_s - seen[r].beat_s > bound_s;
            stale |= late;
            outside |= late && !seen[r].in_call;
        }
        if (!stale) return (struct ft_verdict){FT_RUNNING, -1, -1};
        /* the rank the others wait for is the stale one outside any call */
        for (int r = 0; r < n && r < MAX_RANKS; r++)
            pick[r] = now_s - seen[r].beat_s > bound_s && (!outside || !seen[r].in_call);
    }
    int at = first_stopped(seen, n < MAX_RANKS ? n : MAX_RANKS, pick);
    return (struct ft_verdict){kind, at, seen[at].step};
}
