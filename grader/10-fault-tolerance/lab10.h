/* lab10.h: what Lab 10's grader files share (one prefix, l10_ / L10_), on the lab harness's
 * new shape (grader/common/harness.h). The state lives on the heap (driver.c's setup); only
 * const tables are at file scope. A case fills the rank's observation (struct l10_obs:
 * figures and names, no pointers, no sentences) and judge.c gives the verdict from it alone,
 * without MPI.
 *
 *   fsrec.c   the wrappers of lab.mk around lib/ckpt_fs.h's writing calls: each call of a
 *             save is recorded in memory shared with the forked process that runs the save,
 *             which is killed (SIGKILL, by itself) at the call a case names; the rules of a
 *             durable write checked over the record
 *   cases.c   the case tables; a training run, its saves in forked processes, the damage,
 *             the restart and its comparison with the one-rank reference; observe
 *   judge.c   the verdicts of every op and their reasons; the ops' names
 *   async.c   the asynchronous save: a snapshot taken with the recorder armed in the
 *             training process, a step trained on, the snapshot written in a process of its
 *             own
 *   detect.c  the failure detection's scenarios: what a supervisor sees of a model job at
 *             each sample of its clock, and the verdict each defines
 *   bench.c   the bench mode: the measured save and load costs and the interval they give
 *   driver.c  setup, the harness callbacks */
#ifndef LAB10_H
#define LAB10_H

#include <stddef.h>
#include <stdint.h>

#include "ft.h"
#include "harness.h"
#include "paralab.h"

#define L10_HANDOUT "docs/labs/10-fault-tolerance.md"
#define L10_MAX_CASES 12
#define L10_MAX_EVENTS 64   /* ckpt_fs calls recorded per saving process */
#define L10_NAME 48
#define L10_CONTINUE 2      /* steps trained after a restart and compared loss by loss */

enum l10_op { L10_OP_RESUME, L10_OP_CRASH, L10_OP_CORRUPT, L10_OP_RESHARD, L10_OP_INTERVAL,
              L10_OP_ASYNC, L10_OP_DETECT, L10_NOPS };
#define L10_DET_RANKS 4
#define L10_DET_SCENARIOS 10
extern const char *const L10_OP_NAMES[L10_NOPS];
extern const char *const L10_OP_FUNCS[L10_NOPS];

/* A ckpt_fs call, as recorded. */
enum l10_call { L10_CREATE, L10_WRITE, L10_SYNC, L10_CLOSE, L10_RENAME, L10_SYNC_DIR, L10_MKDIR,
                L10_REMOVE, L10_NCALLS };
extern const char *const L10_CALL_NAMES[L10_NCALLS];

/* Where a case kills a save: the process (a rank's shard, or rank 0's manifest), the call
 * (its kind and which one of that kind, from 1), and whether before the call runs or after.
 * With fail set the call is not killed but fails (returns -1, errno ENOSPC, doing nothing),
 * as on a full disk, and the process goes on. */
enum l10_who { L10_NOBODY, L10_SHARD_OF, L10_MANIFEST_OF };
struct l10_kill {
    int who;          /* enum l10_who */
    int rank;         /* L10_SHARD_OF: whose shard */
    int call;         /* enum l10_call */
    int nth;          /* from 1 */
    int after;        /* 1: once the call has returned */
    int fail;         /* 1: the call fails instead */
};

/* Damage done to the newest checkpoint before the restart. */
enum l10_damage { L10_DMG_NONE, L10_DMG_FLIP, L10_DMG_TRUNCATE, L10_DMG_REMOVE,
                  L10_DMG_OTHER_RUN, L10_DMG_MANIFEST_CUT, L10_DMG_MANIFEST_FLIP,
                  L10_DMG_TAIL_FLIP, L10_DMG_OTHER_SIZE, L10_DMG_EVERY, L10_DMG_MANIFEST_TAIL,
                  L10_DMG_HEAD_FLIP, L10_NDMG };

struct l10_case {
    const char *what;        /* the case in words */
    int n_save, n_load;      /* reshard: the rank counts; others: the world's */
    int save_at[2];          /* the steps saved (the second may be killed or damaged) */
    int total;               /* steps of the uninterrupted run */
    struct l10_kill kill;    /* crash */
    int damage, dmg_shard;   /* corrupt */
    int expect_fault;        /* enum ft_fault the load should name (corrupt, crash) */
    double save_s, mtbf_s;   /* interval */
};

/* The record of one saving process's calls (in memory shared with it). */
struct l10_event {
    int call;                /* enum l10_call */
    int fd;
    int ok;                  /* the call succeeded */
    char name[L10_NAME];     /* the file's (or directory's) last path component */
    char to[L10_NAME];       /* rename: the target's */
};
struct l10_rec {
    int armed;               /* the wrappers record (0 outside a save) */
    struct l10_kill kill;
    int counts[L10_NCALLS];
    int killed;              /* the injected kill fired (set just before it) */
    int failed;              /* the injected failure fired */
    int nev;
    struct l10_event ev[L10_MAX_EVENTS];
    int fds[L10_MAX_EVENTS]; /* open descriptors and their names */
    char fdname[L10_MAX_EVENTS][L10_NAME];
    int rc;                  /* the function's return */
    struct ft_shard_info info;
    const char *todo_what, *todo_section; /* a stub reached in the process (same addresses) */
};

/* The first rule of a durable write a save broke (fsrec.c's l10_rules). */
enum l10_rule { L10_R_OK, L10_R_FINAL_CREATED, L10_R_RENAME_UNSYNCED, L10_R_RENAME_OPEN,
                L10_R_NOT_WRITTEN, L10_R_NO_FINAL, L10_R_NAME_UNSYNCED, L10_R_ROOT_UNSYNCED,
                L10_NRULES };
struct l10_rule_obs {
    int rule;                /* enum l10_rule */
    int manifest;            /* in rank's manifest process (else its shard process) */
    char name[L10_NAME], to[L10_NAME];
};

/* What went wrong with a save's process. L10_P_IGNORED: a file call the case made fail,
 * and the function returned 0 all the same. */
enum l10_proc { L10_P_OK, L10_P_FAILED, L10_P_CRASHED, L10_P_FOREIGN_KILL, L10_P_GRADER,
                L10_P_IGNORED };

/* The state after the load against the reference at the step loaded. */
enum l10_field { L10_F_NONE, L10_F_PARAMS, L10_F_ADAM_M, L10_F_ADAM_V, L10_F_STEP, L10_F_RNG,
                 L10_F_DATA, L10_NFIELDS };

struct l10_obs {
    int op, active;          /* active: in the loading group */
    int n_save, n_load, rank;
    uint64_t numel, offset, count;
    int todo;                /* a stub was reached in a saving process */
    /* the saves */
    int proc, proc_sig, proc_manifest, proc_step; /* enum l10_proc, its signal (L10_P_IGNORED:
                                                      the call that failed), which save */
    char grader_err[96];
    struct l10_rule_obs rule;
    int killed;              /* the injected kill fired */
    /* the load */
    int64_t loaded, expect_loaded;
    int saved_ranks;
    int nskipped;
    struct ft_skip skip0;    /* the first checkpoint skipped */
    int expect_fault, expect_shard;
    int64_t expect_skip;
    /* the state against the reference at the step loaded */
    int field;               /* enum l10_field: the first that differs */
    uint64_t at;             /* params, moments: the element (flat index) */
    double got, ref;
    uint64_t got_u, ref_u;   /* step, RNG, data */
    /* the continued run */
    int loss_step;           /* the first step whose loss differs (0: none) */
    double loss_got, loss_ref;
    /* interval */
    double save_s, mtbf_s, interval, interval_ref;
    /* async: ft_snapshot_take's ckpt_fs calls (the first one's kind) and a NULL snapshot */
    int stall_calls, stall_call, snap_null;
    int async_newer;         /* a step directory of the step after the snapshot's appeared */
    double snap_bytes;       /* heap bytes ft_snapshot_take left allocated (glibc's count) */
    double snap_left;        /* heap bytes still allocated once ft_snapshot_free returned */
    /* detect: the first sample whose verdict is not the scenario's, and what was seen then */
    int det_bad, det_case;
    char det_what[96];
    double det_t, det_bound;
    struct ft_verdict det_got, det_want;
    struct ft_rank_seen det_seen[L10_DET_RANKS];
};

struct l10_state {
    enum l10_op op;
    uint64_t seed;
    int world, rank;
    struct l10_case cases[L10_MAX_CASES];
    int ncases;
    struct l10_rec *rec;     /* shared with the saving processes (mmap) */
    const struct ft_snapshot *snap; /* async: the snapshot this rank's shard is written from */
    char root[256];          /* the case's folder, the same on every rank */
};

/* fsrec.c */
struct l10_rec *l10_rec_new(void);
void l10_rec_free(struct l10_rec *r);
/* Runs fn(arg) in a forked process with r armed for kill; fills *proc (enum l10_proc) and
 * *sig; the grader's own failures go to err. */
void l10_run_saving(struct l10_rec *r, const struct l10_kill *kill, int (*fn)(void *),
                    void *arg, int *proc, int *sig, char *err, size_t errlen);
/* The first rule of a durable write the recorded calls break (L10_R_OK: none). */
/* root: the manifest's process, whose calls must also sync ROOT (the step directory's own
 * name); NULL for a shard's. */
int l10_rules(const struct l10_rec *r, const char *root, struct l10_rule_obs *out);

/* cases.c */
struct l10_state *l10_state_new(enum l10_op op, uint64_t seed);
void l10_state_free(struct l10_state *st);
void l10_setup_cases(struct l10_state *st);
void l10_observe(struct l10_state *st, int i, struct l10_obs *o);
void l10_describe(const struct l10_case *c, int op, char *buf, size_t len);
/* Collective: rank 0 makes the case's folder in st->root (empty after an error in err). */
void l10_make_root(struct l10_state *st, char *err, size_t errlen);
/* Collective over the world: every rank of the saving group (s not NULL: ranks 0..n-1) saves
 * its shard in a forked process, then rank 0 the manifest; kill (may be NULL) names the
 * call to kill. Returns 1 when committed, 0 when the kill stopped it, -1 when the code under
 * test failed (o says how). */
int l10_save_all(struct l10_state *st, const struct pl_shard_state *s, int n,
                 const struct l10_kill *kill, struct l10_obs *o);
/* Bytes a snapshot may hold beyond the shard's 3 x count floats: its header and bookkeeping. */
#define L10_SNAP_SLACK 4096
/* async.c: collective like l10_save_all; s (NULL off the saving group) is at the step to
 * save. Takes the snapshot, trains s one step on, writes the snapshot's checkpoint. */
int l10_save_async(struct l10_state *st, struct pl_shard_state *s, int n,
                   const struct l10_kill *kill, struct l10_obs *o);
/* detect.c: every scenario's samples; the first wrong verdict into o. */
void l10_detect_observe(struct l10_obs *o);
/* Removes a folder and everything in it (no links followed). */
void l10_rm_tree(const char *path);

/* judge.c: no MPI; reads its arguments alone */
int l10_find_op(const char *name);
int l10_judge(int op, const char *part, const struct gr_obs *all, struct gr_why *why);
extern const char *const L10_FAULT_NAMES[FT_NFAULTS];

/* bench.c */
void l10_bench(const struct gr_args *a);

#endif
