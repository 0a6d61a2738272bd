/* cases.c: Lab 10's cases. Every case trains the kit's sharded run (lib/shard_state.h) on
 * the ranks it names, saves it with the code under test (each save in a forked process,
 * fsrec.c, killed where a crash case says), damages the newest checkpoint where a
 * corruption case says, restarts a fresh run on the ranks the case names, loads with the
 * code under test, and compares what was loaded with the reference: the same run on one
 * rank (each rank runs it alone on a communicator of its own), which the kit's step makes
 * bit for bit the run on any rank count (tests/shard_state.tests). The restarted run then
 * trains L10_CONTINUE more steps, and each loss is compared bit for bit too. */
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lab10.h"

/* ---- the case tables ------------------------------------------------------------------- */

#define K(who, rank, call, nth, after) {who, rank, call, nth, after, 0}
#define FAIL(who, rank, call, nth) {who, rank, call, nth, 0, 1}
static const struct l10_case RESUME[] = {
    {"saved at step 3 of 5, restarted from it", 0, 0, {0, 3}, 5, {0}, 0, 0, FT_OK, 0, 0},
    {"saved at steps 2 and 4, restarted from the newest", 0, 0, {2, 4}, 6, {0}, 0, 0, FT_OK, 0, 0},
};
static const struct l10_case CRASH[] = {
    {"rank 1 killed after the first write of its shard, between two shard writes", 0, 0,
     {2, 4}, 6, K(L10_SHARD_OF, 1, L10_WRITE, 1, 1), 0, 0, FT_NO_MANIFEST, 0, 0},
    {"the last rank killed before it renames its shard", 0, 0, {2, 4}, 6,
     K(L10_SHARD_OF, -1, L10_RENAME, 1, 0), 0, 0, FT_NO_MANIFEST, 0, 0},
    {"every shard written, rank 0 killed before the manifest's first call", 0, 0, {2, 4}, 6,
     K(L10_MANIFEST_OF, 0, L10_CREATE, 1, 0), 0, 0, FT_NO_MANIFEST, 0, 0},
    {"rank 0 killed after the manifest's first write", 0, 0, {2, 4}, 6,
     K(L10_MANIFEST_OF, 0, L10_WRITE, 1, 1), 0, 0, FT_NO_MANIFEST, 0, 0},
    {"rank 0 killed before it renames the manifest", 0, 0, {2, 4}, 6,
     K(L10_MANIFEST_OF, 0, L10_RENAME, 1, 0), 0, 0, FT_NO_MANIFEST, 0, 0},
    {"the last rank's first write fails (ENOSPC: the disk is full)", 0, 0, {2, 4}, 6,
     FAIL(L10_SHARD_OF, -1, L10_WRITE, 1), 0, 0, FT_NO_MANIFEST, 0, 0},
    {"the manifest's sync fails (ENOSPC)", 0, 0, {2, 4}, 6, FAIL(L10_MANIFEST_OF, 0, L10_SYNC, 1),
     0, 0, FT_NO_MANIFEST, 0, 0},
    /* a sync's failure, and a directory sync's, are failures too (an outside review ignored
     * each return and was not seen while only writes and the manifest's sync failed) */
    {"rank 1's shard sync fails (ENOSPC)", 0, 0, {2, 4}, 6, FAIL(L10_SHARD_OF, 1, L10_SYNC, 1),
     0, 0, FT_NO_MANIFEST, 0, 0},
    {"the last rank's first directory sync fails (ENOSPC)", 0, 0, {2, 4}, 6,
     FAIL(L10_SHARD_OF, -1, L10_SYNC_DIR, 1), 0, 0, FT_NO_MANIFEST, 0, 0},
};
static const struct l10_case CORRUPT[] = {
    {"one byte flipped in the middle of the last shard", 0, 0, {2, 4}, 6, {0}, L10_DMG_FLIP, -1,
     FT_SHARD_CHECKSUM, 0, 0},
    {"shard 0 cut to half its size", 0, 0, {2, 4}, 6, {0}, L10_DMG_TRUNCATE, 0, FT_SHARD_SIZE,
     0, 0},
    {"the last shard removed", 0, 0, {2, 4}, 6, {0}, L10_DMG_REMOVE, -1, FT_SHARD_MISSING, 0, 0},
    {"a whole checkpoint of another run (another seed) in its place", 0, 0, {2, 4}, 6, {0},
     L10_DMG_OTHER_RUN, -1, FT_OTHER_RUN, 0, 0},
    {"the manifest cut to half its size", 0, 0, {2, 4}, 6, {0}, L10_DMG_MANIFEST_CUT, -1,
     FT_BAD_MANIFEST, 0, 0},
    {"one byte flipped in the middle of the manifest", 0, 0, {2, 4}, 6, {0},
     L10_DMG_MANIFEST_FLIP, -1, FT_BAD_MANIFEST, 0, 0},
    {"the manifest's last byte (not a separator) flipped", 0, 0, {2, 4}, 6, {0},
     L10_DMG_MANIFEST_TAIL, -1, FT_BAD_MANIFEST, 0, 0},
    {"the last byte of shard 0 flipped", 0, 0, {2, 4}, 6, {0}, L10_DMG_TAIL_FLIP, 0,
     FT_SHARD_CHECKSUM, 0, 0},
    {"a whole checkpoint of this run's seed with another parameter count in its place", 0, 0,
     {2, 4}, 6, {0}, L10_DMG_OTHER_SIZE, -1, FT_BAD_MANIFEST, 0, 0},
    {"one byte flipped in shard 0 of every checkpoint: none is whole", 0, 0, {2, 4}, 6, {0},
     L10_DMG_EVERY, 0, FT_SHARD_CHECKSUM, 0, 0},
    /* an outside review's load set the step, RNG and data position once shard 0 passed: seen
     * only when nothing is whole and the bad shard is another */
    {"one byte flipped in the last shard of every checkpoint: none is whole", 0, 0, {2, 4}, 6,
     {0}, L10_DMG_EVERY, -1, FT_SHARD_CHECKSUM, 0, 0},
    /* the checksum is of the whole file (ft.h): an outside review's over the floats alone
     * missed every flip above, which all land in the floats of a header-first file */
    {"the first byte of the last shard flipped", 0, 0, {2, 4}, 6, {0}, L10_DMG_HEAD_FLIP, -1,
     FT_SHARD_CHECKSUM, 0, 0},
};
static const struct l10_case RESHARD8[] = {
    {"saved on 8 ranks, loaded on 6", 8, 6, {0, 3}, 5, {0}, 0, 0, FT_OK, 0, 0},
    {"saved on 4 ranks, loaded on 3", 4, 3, {0, 3}, 5, {0}, 0, 0, FT_OK, 0, 0},
    {"saved on 2 ranks, loaded on 4", 2, 4, {0, 3}, 5, {0}, 0, 0, FT_OK, 0, 0},
    {"saved on 6 ranks, loaded on 8", 6, 8, {0, 3}, 5, {0}, 0, 0, FT_OK, 0, 0},
    {"saved on 3 ranks, loaded on 1", 3, 1, {0, 3}, 5, {0}, 0, 0, FT_OK, 0, 0},
};
static const struct l10_case ASYNC[] = {
    {"snapshot at step 4, step 5 trained, then the snapshot written", 0, 0, {2, 4}, 6, {0}, 0, 0,
     FT_OK, 0, 0},
    {"the same, the last rank's writer killed before its shard's rename", 0, 0, {2, 4}, 6,
     K(L10_SHARD_OF, -1, L10_RENAME, 1, 0), 0, 0, FT_NO_MANIFEST, 0, 0},
    {"the same, the last rank's writer's first write failing (ENOSPC)", 0, 0, {2, 4}, 6,
     FAIL(L10_SHARD_OF, -1, L10_WRITE, 1), 0, 0, FT_NO_MANIFEST, 0, 0},
};
static const struct l10_case INTERVAL[] = {
    {"a 60 s save, a failure every 3 hours", 0, 0, {0, 0}, 0, {0}, 0, 0, FT_OK, 60, 10800},
    {"a 5 min save, a failure a day", 0, 0, {0, 0}, 0, {0}, 0, 0, FT_OK, 300, 86400},
    {"a 2 s save, a failure every 20 minutes", 0, 0, {0, 0}, 0, {0}, 0, 0, FT_OK, 2, 1200},
    {"a 2 h save, a failure every 3 hours (the optimum passes the MTBF)", 0, 0, {0, 0}, 0, {0},
     0, 0, FT_OK, 7200, 10800},
};

struct l10_state *l10_state_new(enum l10_op op, uint64_t seed)
{
    struct l10_state *st = calloc(1, sizeof *st);
    PL_ASSERT(st);
    st->op = op;
    st->seed = seed;
    st->world = pl_size();
    st->rank = pl_rank();
    st->rec = l10_rec_new();
    return st;
}

void l10_state_free(struct l10_state *st)
{
    if (!st) return;
    l10_rec_free(st->rec);
    free(st);
}

static void add(struct l10_state *st, const struct l10_case *c, int n)
{
    for (int i = 0; i < n && st->ncases < L10_MAX_CASES; i++) {
        struct l10_case *t = &st->cases[st->ncases++];
        *t = c[i];
        if (!t->n_save) t->n_save = st->world;
        if (!t->n_load) t->n_load = st->world;
        if (t->kill.rank < 0) t->kill.rank = t->n_save - 1;
        if (t->dmg_shard < 0) t->dmg_shard = t->n_save - 1;
    }
}

void l10_setup_cases(struct l10_state *st)
{
#define ADD(tab) add(st, tab, (int)(sizeof tab / sizeof tab[0]))
    switch (st->op) {
    case L10_OP_RESUME: ADD(RESUME); break;
    case L10_OP_CRASH: ADD(CRASH); break;
    case L10_OP_CORRUPT: ADD(CORRUPT); break;
    case L10_OP_ASYNC: ADD(ASYNC); break;
    case L10_OP_DETECT: {
        static const struct l10_case every = {"the 10 scenarios of section 7", 1, 1, {0, 0}, 0,
                                              {0}, 0, 0, FT_OK, 0, 0};
        st->cases[st->ncases++] = every;
        break;
    }
    case L10_OP_RESHARD:
        for (size_t i = 0; i < sizeof RESHARD8 / sizeof RESHARD8[0]; i++)
            if (RESHARD8[i].n_save <= st->world && RESHARD8[i].n_load <= st->world)
                add(st, &RESHARD8[i], 1);
        break;
    case L10_OP_INTERVAL: {
        ADD(INTERVAL);
        /* two drawn by the seed: a save of 1 s to 30 min, a failure every 10 min to 30 days */
        for (int k = 0; k < 2 && st->ncases < L10_MAX_CASES; k++) {
            struct l10_case *t = &st->cases[st->ncases++];
            memset(t, 0, sizeof *t);
            t->what = "drawn by the seed";
            t->save_s = exp(log(1800.0) * pl_rng_uniform(st->seed, 0x10a, (uint64_t)k));
            t->mtbf_s = 600.0 * exp(log(4320.0) * pl_rng_uniform(st->seed, 0x10b, (uint64_t)k));
        }
        break;
    }
    default: break;
    }
#undef ADD
}

void l10_describe(const struct l10_case *c, int op, char *buf, size_t len)
{
    if (op == L10_OP_INTERVAL)
        snprintf(buf, len, "%s: save %.4g s, MTBF %.4g s", c->what, c->save_s, c->mtbf_s);
    else if (op == L10_OP_DETECT)
        snprintf(buf, len, "%s, 4 ranks, a heartbeat a step of 1 s, bound 3 s", c->what);
    else if (op == L10_OP_RESHARD)
        snprintf(buf, len, "%s, at step %d", c->what, c->save_at[1]);
    else
        snprintf(buf, len, "%d ranks, checkpoints at steps %d and %d: %s", c->n_save,
                 c->save_at[0], c->save_at[1], c->what);
}

/* ---- the reference: the run on one rank ------------------------------------------------ */

/* The snapshot of the fresh state: what a load that finds nothing whole leaves. */
#define L10_FRESH 2

struct ref_run {
    double loss[16];                 /* loss[k]: step k's, k = 1..total */
    float *snap[3];                  /* params, m, v (3 numel) after save_at[j] steps, and
                                        [L10_FRESH] before any */
    uint64_t rng[3], data[3];
    size_t numel;
};

static void take(const struct pl_shard_state *s, struct ref_run *r, int j)
{
    pl_shard_get(s, r->snap[j], r->snap[j] + s->numel, r->snap[j] + 2 * s->numel);
    r->rng[j] = s->rng;
    r->data[j] = (uint64_t)s->data_pos;
}

static void ref_run(const struct pl_shard_run *run, const struct l10_case *c, struct ref_run *r)
{
    struct pl_comm *self = pl_comm_split(pl_comm_world(), pl_rank(), 0, "self");
    struct pl_shard_state *s = pl_shard_state_new(run, self);
    r->numel = s->numel;
    for (int j = 0; j < 3; j++) {
        r->snap[j] = malloc(3 * s->numel * sizeof(float));
        PL_ASSERT(r->snap[j]);
    }
    take(s, r, L10_FRESH);
    for (int k = 1; k <= c->total; k++) {
        r->loss[k] = pl_shard_step(s);
        for (int j = 0; j < 2; j++)
            if (k == c->save_at[j]) take(s, r, j);
    }
    pl_shard_state_free(s);
    pl_comm_free(self);
}

static void ref_free(struct ref_run *r)
{
    for (int j = 0; j < 3; j++) free(r->snap[j]);
}

/* ---- the case's folder ----------------------------------------------------------------- */

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

void l10_rm_tree(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Rank 0 makes the folder, every rank learns its name. */
void l10_make_root(struct l10_state *st, char *err, size_t errlen)
{
    if (st->rank == 0) {
        /* Under the orchestrator the run's own folder, which it removes after the run, so
         * that even a run killed in the middle of a case leaves nothing behind. */
        char cwd[200];
        const char *tmp = getenv("TMPDIR");
        if (getcwd(cwd, sizeof cwd) && !strncmp(cwd, "/tmp/pl-grade-", 14)) tmp = cwd;
        snprintf(st->root, sizeof st->root, "%s/pl-lab10-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(st->root)) {
            snprintf(err, errlen, "mkdtemp in %.40s: %.40s", tmp && *tmp ? tmp : "/tmp", strerror(errno));
            st->root[0] = 0;
        }
    }
    MPI_Bcast(st->root, sizeof st->root, MPI_CHAR, 0, MPI_COMM_WORLD);
}

/* ---- a save by every rank of a group: shards in forked processes, then the manifest ----- */

struct saving {
    const char *root;
    const struct ft_snapshot *snap; /* async: the shard is written from it */
    const struct pl_shard_state *s;
    struct ft_shard_info *info;
    const struct ft_shard_info *infos;
    int n;
};

static int save_shard_fn(void *a)
{
    struct saving *v = a;
    return v->snap ? ft_snapshot_save(v->root, v->snap, v->info)
                   : ft_save_shard(v->root, v->s, v->info);
}

static int save_manifest_fn(void *a)
{
    struct saving *v = a;
    return ft_save_manifest(v->root, v->s, v->infos, v->n);
}

struct saved {
    int member, proc, sig, killed;
    struct ft_shard_info info;
};

/* The first thing that went wrong in a save, into the observation. */
static void note_proc(struct l10_obs *o, int proc, int sig, int manifest, int64_t step,
                      const char *err)
{
    if (proc == L10_P_OK || o->proc != L10_P_OK) return;
    o->proc = proc;
    o->proc_sig = sig;
    o->proc_manifest = manifest;
    o->proc_step = (int)step;
    if (err) snprintf(o->grader_err, sizeof o->grader_err, "%s", err);
}

static void note_rules(struct l10_state *st, struct l10_obs *o, int manifest)
{
    struct l10_rule_obs r = {0};
    const char *root = manifest ? st->root : NULL;
    if (o->rule.rule == L10_R_OK && l10_rules(st->rec, root, &r) != L10_R_OK) {
        o->rule = r;
        o->rule.manifest = manifest;
    }
}

/* Collective over the world; s is NULL on ranks outside the saving group (ranks 0..n-1).
 * Returns 1 when the checkpoint was committed, 0 when a kill stopped it, -1 when the code
 * under test failed (the observation says how). */
int l10_save_all(struct l10_state *st, const struct pl_shard_state *s, int n,
                    const struct l10_kill *kill, struct l10_obs *o)
{
    struct saved mine = {0}, *all = calloc((size_t)st->world, sizeof *all);
    PL_ASSERT(all);
    char err[96] = "";
    /* The save runs in a forked process (fsrec.c), where a GPU's context and MPI do not
     * carry over: it is given the shard in host memory, as pl_shard_get would return it. */
    struct pl_shard_state *h = s ? pl_shard_host_copy(s) : NULL;
    if (s) {
        mine.member = 1;
        struct saving v = {st->root, st->snap, h, &st->rec->info, NULL, n};
        int k = kill && kill->who == L10_SHARD_OF && kill->rank == s->rank;
        l10_run_saving(st->rec, k ? kill : NULL, save_shard_fn, &v, &mine.proc, &mine.sig, err,
                       sizeof err);
        /* a call the case made fail, reported as -1: the save stops as a killed one does */
        mine.killed = st->rec->killed || st->rec->failed;
        mine.info = st->rec->info;
        note_rules(st, o, 0);
        if (mine.killed) o->killed = 1;
        note_proc(o, mine.proc, mine.sig, 0, s->step, err);
    }
    MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all, sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
    int killed = 0, failed = 0;
    struct ft_shard_info infos[PL_SHARD_MAX_RANKS];
    for (int r = 0; r < st->world; r++) {
        if (!all[r].member) continue;
        killed |= all[r].killed;
        failed |= all[r].proc != L10_P_OK;
        infos[r] = all[r].info;
    }
    free(all);
    int m[3] = {0, 0, 0}; /* manifest: proc, sig, killed */
    if (!killed && !failed && st->rank == 0) {
        struct saving v = {st->root, NULL, h, NULL, infos, n};
        int k = kill && kill->who == L10_MANIFEST_OF;
        l10_run_saving(st->rec, k ? kill : NULL, save_manifest_fn, &v, &m[0], &m[1], err,
                       sizeof err);
        m[2] = st->rec->killed || st->rec->failed;
        note_rules(st, o, 1);
        if (m[2]) o->killed = 1;
        note_proc(o, m[0], m[1], 1, s->step, err);
    }
    pl_shard_state_free(h);
    MPI_Bcast(m, 3, MPI_INT, 0, MPI_COMM_WORLD);
    if (failed || m[0] != L10_P_OK) return -1;
    return killed || m[2] ? 0 : 1;
}

/* ---- damage ------------------------------------------------------------------------------ */

static void shard_path(const char *root, int64_t step, int shard, char *buf, size_t len)
{
    char d[32], f[32];
    snprintf(d, sizeof d, FT_STEP_DIR, (long long)step);
    if (shard < 0) snprintf(f, sizeof f, "%s", FT_MANIFEST);
    else snprintf(f, sizeof f, FT_SHARD, shard);
    snprintf(buf, len, "%s/%s/%s", root, d, f);
}

/* Rank 0 damages checkpoint `step` as the case says; an error is the grader's. */
static int damage_one(struct l10_state *st, const struct l10_case *c, int step, char *err,
                      size_t errlen)
{
    char path[512];
    int d = c->damage, manifest = d == L10_DMG_MANIFEST_CUT || d == L10_DMG_MANIFEST_FLIP ||
                                  d == L10_DMG_MANIFEST_TAIL;
    shard_path(st->root, step, manifest ? -1 : c->dmg_shard, path, sizeof path);
    FILE *f = fopen(path, "r+b");
    long size = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    int ok = size > 0;
    if (d == L10_DMG_FLIP || d == L10_DMG_MANIFEST_FLIP || d == L10_DMG_TAIL_FLIP ||
        d == L10_DMG_EVERY || d == L10_DMG_MANIFEST_TAIL || d == L10_DMG_HEAD_FLIP) {
        long at = d == L10_DMG_TAIL_FLIP || d == L10_DMG_MANIFEST_TAIL ? size - 1
                  : d == L10_DMG_HEAD_FLIP                             ? 0
                                                                       : size / 2;
        int b = EOF;
        /* the manifest's last byte that is not a separator: a text format's final newline
         * or padding carries nothing to check */
        while (ok && d == L10_DMG_MANIFEST_TAIL && at > 0 && fseek(f, at, SEEK_SET) == 0 &&
               ((b = fgetc(f)) == '\n' || b == '\r' || b == ' ' || b == 0))
            at--;
        ok = ok && fseek(f, at, SEEK_SET) == 0 && (b = fgetc(f)) != EOF &&
             fseek(f, at, SEEK_SET) == 0 && fputc(b ^ 0x40, f) != EOF;
    } else if (d == L10_DMG_TRUNCATE || d == L10_DMG_MANIFEST_CUT) {
        ok = ok && ftruncate(fileno(f), size / 2) == 0;
    } else if (d == L10_DMG_REMOVE) {
        ok = f && remove(path) == 0;
    }
    if (f) fclose(f);
    if (!ok) snprintf(err, errlen, "could not damage %.40s: %.30s", strrchr(path, '/') + 1, strerror(errno));
    return ok;
}

static int damage(struct l10_state *st, const struct l10_case *c, char *err, size_t errlen)
{
    int ok = damage_one(st, c, c->save_at[1], err, errlen);
    if (ok && c->damage == L10_DMG_EVERY) ok = damage_one(st, c, c->save_at[0], err, errlen);
    return ok;
}

/* The other run's checkpoint at the same step takes this one's place (collective): another
 * seed's, or (L10_DMG_OTHER_SIZE) this seed's, so this run's id, with another parameter
 * count, as a restart with a changed model configuration would find. */
static int other_run(struct l10_state *st, const struct l10_case *c, struct l10_obs *o)
{
    char other[300], from[400], to[400], d[32];
    PL_ASSERT(strlen(st->root) < 200);
    snprintf(other, sizeof other, "%s/other", st->root);
    if (st->rank == 0) mkdir(other, 0755);
    MPI_Barrier(MPI_COMM_WORLD);
    struct pl_shard_run run;
    if (c->damage == L10_DMG_OTHER_SIZE) {
        run = pl_shard_run_default(st->seed);
        run.cfg.d_ff += 1;
    } else {
        run = pl_shard_run_default(st->seed + 1000);
    }
    struct pl_comm *g = pl_comm_split(pl_comm_world(), 0, st->rank, "other run");
    struct pl_shard_state *s = pl_shard_state_new(&run, g);
    for (int k = 0; k < c->save_at[1]; k++) pl_shard_step(s);
    char keep[256];
    memcpy(keep, st->root, sizeof keep);
    snprintf(st->root, sizeof st->root, "%.200s/other", keep);
    int rc = l10_save_all(st, s, st->world, NULL, o);
    memcpy(st->root, keep, sizeof keep);
    pl_shard_state_free(s);
    pl_comm_free(g);
    if (rc != 1) return 0;
    if (st->rank == 0) {
        snprintf(d, sizeof d, FT_STEP_DIR, (long long)c->save_at[1]);
        snprintf(from, sizeof from, "%s/%s", other, d);
        snprintf(to, sizeof to, "%s/%s", st->root, d);
        l10_rm_tree(to);
        if (rename(from, to) != 0) rc = 0;
    }
    return rc;
}

/* ---- the restart -------------------------------------------------------------------------- */

static void compare(const struct pl_shard_state *s, const struct ref_run *r, int j,
                    struct l10_obs *o)
{
    size_t c = s->count ? s->count : 1;
    float *got = malloc(3 * c * sizeof(float));
    PL_ASSERT(got);
    pl_shard_get(s, got, got + c, got + 2 * c);
    for (int f = 0; f < 3 && !o->field; f++)
        for (size_t k = 0; k < s->count; k++) {
            float a = got[f * c + k], b = r->snap[j][f * r->numel + s->offset + k];
            if (memcmp(&a, &b, sizeof a)) {
                o->field = L10_F_PARAMS + f;
                o->at = s->offset + k;
                o->got = a;
                o->ref = b;
                break;
            }
        }
    free(got);
    uint64_t gv[3] = {(uint64_t)s->step, s->rng, (uint64_t)s->data_pos};
    uint64_t rv[3] = {(uint64_t)(j == L10_FRESH ? 0 : o->expect_loaded), r->rng[j], r->data[j]};
    for (int f = 0; f < 3 && !o->field; f++)
        if (gv[f] != rv[f]) {
            o->field = L10_F_STEP + f;
            o->got_u = gv[f];
            o->ref_u = rv[f];
        }
}

static void restart(struct l10_state *st, const struct l10_case *c,
                    const struct pl_shard_run *run, const struct ref_run *r, struct l10_obs *o)
{
    int member = st->rank < c->n_load;
    struct pl_comm *g = pl_comm_split(pl_comm_world(), member ? 0 : -1, st->rank, "restart");
    o->active = member;
    struct pl_shard_state *s = member ? pl_shard_state_new(run, g) : NULL;
    int go = 1;
    if (s) {
        o->offset = s->offset;
        o->count = s->count;
        struct ft_load_report rep;
        memset(&rep, 0, sizeof rep);
        o->loaded = ft_load(st->root, s, &rep);
        o->saved_ranks = rep.saved_ranks;
        o->nskipped = rep.nskipped;
        if (rep.nskipped > 0) o->skip0 = rep.skipped[0];
        go = o->loaded == o->expect_loaded && (o->loaded > 0 || o->expect_loaded < 0);
    }
    /* the continued run is collective: every member loaded the right step, or none trains */
    MPI_Allreduce(MPI_IN_PLACE, &go, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    /* nothing whole: the state must be the fresh one it was, and nothing trains on */
    int fresh = o->expect_loaded < 0;
    int j = fresh ? L10_FRESH : o->expect_loaded == c->save_at[1] ? 1 : 0;
    if (s && go) {
        compare(s, r, j, o);
        for (int k = 1; !fresh && k <= L10_CONTINUE && o->loaded + k <= c->total; k++) {
            double l = pl_shard_step(s);
            int step = (int)o->loaded + k;
            if (memcmp(&l, &r->loss[step], sizeof l) && !o->loss_step) {
                o->loss_step = step;
                o->loss_got = l;
                o->loss_ref = r->loss[step];
            }
        }
    }
    pl_shard_state_free(s);
    pl_comm_free(g);
}

/* ---- a case ------------------------------------------------------------------------------- */

static void run_case(struct l10_state *st, const struct l10_case *c, struct l10_obs *o)
{
    struct pl_shard_run run = pl_shard_run_default(st->seed);
    struct ref_run r;
    memset(&r, 0, sizeof r);
    ref_run(&run, c, &r);
    o->numel = r.numel;
    char err[96] = "";
    l10_make_root(st, err, sizeof err);
    if (!st->root[0]) {
        note_proc(o, L10_P_GRADER, 0, 0, 0, err);
        ref_free(&r);
        return;
    }
    int member = st->rank < c->n_save, ok = 1, last = 1;
    struct pl_comm *g = pl_comm_split(pl_comm_world(), member ? 0 : -1, st->rank, "saving");
    struct pl_shard_state *s = member ? pl_shard_state_new(&run, g) : NULL;
    for (int k = 1; k <= c->save_at[1] && ok; k++) {
        if (s) pl_shard_step(s);
        for (int j = 0; j < 2 && ok; j++)
            if (k == c->save_at[j]) {
                int rc = j == 1 && st->op == L10_OP_ASYNC
                             ? l10_save_async(st, s, c->n_save, &c->kill, o)
                             : l10_save_all(st, s, c->n_save, j == 1 ? &c->kill : NULL, o);
                ok = rc >= 0;
                if (j == 1) last = rc;
            }
    }
    pl_shard_state_free(s);
    pl_comm_free(g);
    int committed_last = last == 1;
    o->expect_loaded = c->damage == L10_DMG_EVERY            ? -1
                       : c->damage || !committed_last ? c->save_at[0]
                                                      : c->save_at[1];
    o->expect_fault = c->damage || !committed_last ? c->expect_fault : FT_OK;
    int whole_run = c->damage == L10_DMG_OTHER_RUN || c->damage == L10_DMG_OTHER_SIZE;
    int manifest = c->damage == L10_DMG_MANIFEST_CUT || c->damage == L10_DMG_MANIFEST_FLIP ||
                   c->damage == L10_DMG_MANIFEST_TAIL;
    o->expect_shard = whole_run || manifest || !c->damage ? -1 : c->dmg_shard;
    o->expect_skip = c->save_at[1];
    if (ok && whole_run) {
        ok = other_run(st, c, o);
        if (!ok && o->proc == L10_P_OK) note_proc(o, L10_P_GRADER, 0, 0, 0, "other run's save");
    } else if (ok && c->damage) {
        int d = st->rank == 0 ? damage(st, c, err, sizeof err) : 1;
        MPI_Bcast(&d, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (!d) note_proc(o, L10_P_GRADER, 0, 0, 0, err);
        ok = d;
    }
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (ok) restart(st, c, &run, &r, o);
    MPI_Barrier(MPI_COMM_WORLD);
    if (st->rank == 0) l10_rm_tree(st->root);
    ref_free(&r);
}

void l10_observe(struct l10_state *st, int i, struct l10_obs *o)
{
    const struct l10_case *c = &st->cases[i];
    o->op = st->op;
    o->rank = st->rank;
    o->n_save = c->n_save;
    o->n_load = c->n_load;
    if (st->op == L10_OP_DETECT) {
        l10_detect_observe(o);
        return;
    }
    if (st->op == L10_OP_INTERVAL) {
        o->active = 1;
        o->save_s = c->save_s;
        o->mtbf_s = c->mtbf_s;
        o->interval = ft_interval(c->save_s, c->mtbf_s);
        o->interval_ref = sqrt(2.0 * c->save_s * c->mtbf_s);
        return;
    }
    run_case(st, c, o);
}
