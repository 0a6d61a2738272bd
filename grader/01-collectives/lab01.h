/* lab01.h: what the files of Lab 1's grader share, on the lab harness's new shape
 * (grader/common/harness.h). Its state (struct l1_state) is made by setup on the heap; a case
 * fills this rank's observation (struct l1_obs) and judge.c gives the verdicts from every
 * rank's, on rank 0, without MPI, wording every reason from the figures recorded. The files
 * depend one way: driver.c -> cases.c, judge.c, bench.c; bench.c -> cases.c; cases.c and
 * judge.c -> the tables of judge.c.
 *
 *   cases.c     the case table; inputs and results; one call observed through the ledgers;
 *               the crossover's race, traced and replayed (modelled.c)
 *   judge.c     the verdicts (no MPI; tests/judge/01-collectives.c runs them alone)
 *   bench.c     bench mode and the perf mode's speed test against the library
 *   modelled.c  the student's messages replayed on a cluster profile */
#ifndef LAB01_H
#define LAB01_H

#include <stddef.h>
#include <stdint.h>

#include "harness.h"
#include "paralab.h"

/* The ring collectives of the first part, then the second part's all-reduces (section 11:
 * for small messages; section 12: on nodes), which have no speed test against the library. */
enum l1_op { L1_RS, L1_AG, L1_AR, L1_BC, L1_A2A, L1_RD, L1_HIER, L1_NOPS };

struct l1_op_info {
    const char *name;    /* --op */
    const char *func;    /* the student's function */
    const char *lib;     /* the library's counterpart */
    enum pl_coll_kind kind;
    const char *section; /* of the handout */
};
extern const struct l1_op_info L1_OPS[L1_NOPS];

/* The two-level all-reduce on 3 virtual nodes instead of 2: code that takes the nodes to be
 * two halves of the ranks, rather than asking coll_node_of, is right on 2 nodes only. */
#define L1_HIER_3_NODES "hierarchical_3_nodes"
/* The op of --op NAME (L1_HIER_3_NODES included), or -1. */
int l1_find_op(const char *name);

/* Values in [-L1_DATA_MAX, L1_DATA_MAX]: sums over 8 ranks stay far below 2^24, so fp32 sums
 * are exact and results can be compared bit for bit. */
#define L1_DATA_MAX 64
/* Put in every element the student must write, so an element never written is told apart
 * from one written wrong. Exactly representable, and no sum of inputs can reach it. */
#define L1_SENTINEL (-999999.0f)
/* The cluster the second part's times are modelled on. */
#define L1_MODEL_PROFILE "dgx-h100"
#define L1_MAX_CASES 16

/* What a case is for, in messages (judge.c's L1_CASE_TEXTS; some name the rank count). */
enum l1_case_kind {
    L1_K_DIVISIBLE, L1_K_NOT_DIVIDE, L1_K_PRIME, L1_K_ONE, L1_K_FEWER, L1_K_EMPTY, L1_K_SEED,
    L1_K_MIB, L1_K_MIB3, L1_K_SEGMENTS, L1_K_GROUP, L1_K_GROUP_SEED, L1_K_ONE_MORE,
    L1_K_SMALL_BLOCK, L1_K_ONE_PER_BLOCK, L1_K_EMPTY_BLOCKS, L1_K_ODD_BLOCK, L1_K_SEED_BLOCK,
    L1_K_128K_BLOCKS, L1_K_256K1, L1_NKINDS
};

/* One case: a size (and root) on the world or on a split group. */
struct l1_case {
    uint64_t count; /* the buffer (all-to-all: one block) */
    int root;       /* broadcast (taken modulo the group's size) */
    int split;      /* 1: run on two interleaved groups with reversed rank order */
    int kind;       /* enum l1_case_kind */
};

/* This rank's figures of an earlier case, for the notes said after the last one. */
struct l1_past {
    struct l1_case c;
    int n; /* the size of the group the rank ran in */
    double sent, received, scratch, sends;
};

/* Where a buffer outside the memory ledger was handed over (judge.c's L1_PLACES). */
enum l1_place {
    L1_P_NONE, L1_P_SEND, L1_P_ISEND, L1_P_RECV, L1_P_SR_SEND, L1_P_SR_RECV, L1_P_IRECV,
    L1_P_REDUCE_DST, L1_P_REDUCE_SRC, L1_P_COPY_DST, L1_P_COPY_SRC, L1_NPLACES
};
struct l1_place_info {
    const char *call, *arg;
};
extern const struct l1_place_info L1_PLACES[L1_NPLACES];

/* The crossover (rank 0's, on the last case of a run judging it): the student's recursive
 * doubling and ring all-reduce, each traced once and replayed on L1_MODEL_PROFILE at sizes
 * around the alpha-beta model's S*. */
struct l1_race {
    int done;          /* 1: raced in this case */
    int ring_stub;     /* 1 + the op whose stub the ring reached, 0 when none */
    int failed;        /* 1: a trace could not be replayed (err) */
    char err[256];     /* lib/replay.c's diagnostic of the trace */
    int n, k;          /* ranks; rounds of doubling */
    double alpha, B;   /* the profile's intra-node latency (s) and bandwidth (B/s) */
    double star;       /* S*, bytes */
    double gap_lo, gap_hi; /* doubling minus ring at S* / 8 and 8 S* (seconds) */
    double cross;      /* bytes where they cross, by bisection */
};

/* What one rank saw in one case, gathered to rank 0 as plain bytes. */
struct l1_obs {
    int op, world, nodes, per_node; /* the run: op, world size, virtual cluster */
    struct l1_case c;
    int n, rank, world_rank, root; /* the group this rank ran in */
    long nwrong, first_bad, nonfinite, first_nonfinite;
    float expected, got;           /* at first_bad */
    float nonfinite_expected;
    double max_abs, max_rel;
    double sent, received;         /* bytes, point to point */
    double sent_inter;             /* of sent, bytes that crossed nodes */
    long wrong_in_share;           /* two-level: wrong elements of the rank's own share */
    double modelled;               /* the call's ledger on L1_MODEL_PROFILE */
    double sent_msgs;              /* point-to-point calls */
    double sends;                  /* of them, those that sent a message */
    double coll_calls;             /* library collectives called */
    int coll_kind;
    double leaked, scratch;        /* bytes */
    int in_flight;                 /* operations still in flight on comm after the call */
    int unseen;                    /* enum l1_place: a buffer outside the memory ledger */
    int unseen_where;              /* GR_UNSEEN_STACK or GR_UNSEEN_STATIC */
    double seconds;
    int npast;                     /* cases 0..this one */
    struct l1_past past[L1_MAX_CASES];
    struct l1_race race;
};

/* The lab's state, made by setup. */
struct l1_state {
    enum l1_op op;
    uint64_t seed;
    int world, nodes, per_node;
    int want_crossover;            /* the run judges part crossover */
    int ncases;
    struct l1_case cases[L1_MAX_CASES];
    int npast;                     /* this rank's figures of the cases run so far */
    struct l1_past past[L1_MAX_CASES];
    double size_mib;               /* perf */
};

/* ---- judge.c (pure) ---- */

size_t l1_buffer_count(int op, uint64_t count, int n);
/* "count 1009, 3 ranks (prime)": case c of op on a world of n ranks. */
void l1_describe_case(int op, const struct l1_case *c, int n, char *buf, size_t len);
/* The verdict of part on case i of ncases, from every rank's observation; why says why. */
int l1_judge(int op, int i, int ncases, const char *part, const struct gr_obs *all,
             struct gr_why *why);

/* ---- cases.c ---- */

/* The cases of op on n ranks, drawn from seed; returns how many. */
int l1_make_cases(int op, int n, uint64_t seed, struct l1_case *cs);
/* Builds this rank's input (host) and the result it must end with (expected, with NAN where
 * any value is allowed). */
void l1_make_input(int op, const struct l1_case *c, uint64_t seed, struct pl_comm *comm,
                   float *in, float *in2, float *expected);
void l1_call_student(int op, struct pl_comm *comm, float *buf, float *buf2, size_t count,
                     int root);
/* Elements of got that differ from expected (NaN there: any value). */
long l1_count_wrong(const float *got, const float *expected, size_t total);
/* Collective: case i run on this rank, its figures in o. */
void l1_observe(struct l1_state *st, int i, struct l1_obs *o);

/* ---- bench.c ---- */

int l1_probe(struct l1_state *st);
double l1_perf(struct l1_state *st);
void l1_bench(const struct gr_args *a);

#endif
