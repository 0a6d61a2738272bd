/* driver.c: the trusted test driver of Lab 5 (sequence parallelism on top of tensor
 * parallelism), on the lab harness (grader/common/harness.h). The oracle is the
 * single-device block of lib/model.h on randomised full tensors, with dropout off and on;
 * each rank gets Lab 4's TP shard of the weights (lib/tp_shard.h) and its tokens of the
 * activations (lib/sp_shard.h), runs the student's SP block (sp.h), and is compared with
 * its rows of the output and input gradient and its block of every gradient. The
 * collectives of each pass come from the traffic ledger, the bytes kept between forward
 * and backward from the memory ledger. A training op runs K AdamW steps of a 2-block model
 * with dropout (the grader's embedding and head around the student's blocks) against
 * pl_model_step. Each rank records its verdict of every part while a case runs; judge()
 * gathers them to rank 0.
 *
 *   driver --op conjugates|block|train --mode check [--parts correct,replicas,traffic,memory]
 *          [--seed S] [--seq T]                         t = the world size, and a tp x dp grid
 *   driver --op block-hidden|train-hidden ...          the hidden suite's grids and shapes
 *   driver --mode bench [--seq T] [--plots-dir DIR]     activation bytes per rank vs t (4
 *                                                       ranks), and the handout's figures */
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block_time.h"
#include "gpt3.h"
#include "harness.h"
#include "tensors.h"
#include "parts.h"
#include "paralab.h"
#include "sp.h"
#include "sp_shard.h"
#include "svg.h"
#include "todo.h"
#include "tp_shard.h"
#include "train.h"
#include "unseen.h"

#define TOL_FWD 1e-5 /* docs/design.md: relative L2 per tensor, fp32 forward */
#define TOL_BWD GR_TOL_GRADS
#define DROPOUT 0.1f

static uint64_t base_seed = 1;
static int seq_flag; /* --seq: every case's T (0: the cases' own) */

/* 8 heads so that t = 1, 2, 4 split them; seq_len 16 so that T/t is 4 tokens at t = 4. */
static struct pl_model_config graded_config(float dropout)
{
    struct pl_model_config c = pl_model_config_default();
    c.vocab = 256;
    c.d_model = 64;
    c.n_layers = 1;
    c.n_heads = 8;
    c.d_ff = 128;
    c.seq_len = 16;
    c.dropout = dropout;
    c.n_experts = 0;
    c.seed = base_seed;
    return c;
}

/* One block case. p: the configured dropout; train: ctx->train (evaluation keeps dropout
 * configured but off); dp > 1: the world is a tp x dp grid (order "tp-dp": TP groups of
 * consecutive ranks; "dp-tp": strided), each DP replica on its own sequences and data;
 * accum: the split gradients are handed over holding other values and a second
 * micro-batch's backward adds to them before the synchronisation. */
struct sp_case {
    int B, T, dropout, seq0, step, train, layer, dp, accum;
    float p;
    const char *order;
};
#define NCASES 5
#define CASE_EVAL 3
#define CASE_GRID 4

static int hidden_cases; /* --op block-hidden, train-hidden: other grids and shapes (the
                          * hidden suite) */

/* A multiple of t below seq_len 16 when there is one (T < seq_len: positions count in T),
 * from r in [0, 1). */
static int short_seq(int t, float r)
{
    const int n = 16 / t - 1; /* the multiples of t below 16 */
    return n < 1 ? t : t * (1 + (int)(r * n) % n);
}

/* Case 0: dropout off; case 1: on, at a later sequence and step, gradients accumulated over
 * two micro-batches; case 2: on with p = 0.25, batch and sequence length drawn from the seed
 * (a multiple of t up to seq_len); case 3: evaluation with dropout configured, B > 1 and
 * T < seq_len; case 4: a tp x dp grid, dropout p = 0.3 at block 1, T < seq_len. n is the
 * world's size; the hidden suite draws the last two cases' shapes and grid from the seed. */
static struct sp_case case_of(int i, int n)
{
    float r[8];
    pl_rng_fill_uniform(r, 8, base_seed, pl_rng_stream("lab05.shape"), 0, 0.0f, 1.0f);
    struct sp_case k = {2, 16, 0, 0, 0, 0, 0, 1, 0, 0.0f, "tp"};
    if (i == 1)
        k = (struct sp_case){2, 16, 1, 3, 7, 1, 0, 1, 1, DROPOUT, "tp"};
    else if (i == 2) {
        k = (struct sp_case){2, 16, 1, 3, 11, 1, 0, 1, 0, 0.25f, "tp"};
        k.B = 1 + (int)(r[0] * 3) % 3;
        k.T = n * (1 + (int)(r[1] * (16 / n)) % (16 / n));
        k.seq0 = (int)(r[2] * 50);
    } else if (i == CASE_EVAL) {
        k = (struct sp_case){3, 8, 1, 2, 5, 0, 1, 1, 0, DROPOUT, "tp"};
        if (hidden_cases) k.B = 2 + (int)(r[3] * 3) % 3, k.T = short_seq(n, r[4]);
    } else if (i == CASE_GRID) {
        k = (struct sp_case){2, 12, 1, 5, 2, 1, 1, n % 2 ? 1 : 2, 0, 0.3f, "tp-dp"};
        if (hidden_cases) {
            /* strided TP groups, and on 8 ranks dp = 2 or 4 */
            k.order = "dp-tp";
            if (n >= 8 && r[5] < 0.5f) k.dp = 4;
        }
        const int t = n / k.dp;
        if (k.T % t || hidden_cases) k.T = short_seq(t, r[6]);
    }
    if (seq_flag) k.T = seq_flag;
    return k;
}

/* ---- the parts this rank judges (grader/common/parts.h), gathered to rank 0 by judge() ---- */

enum part { P_CORRECT, P_REPLICAS, P_TRAFFIC, P_MEMORY, P_TIME, NPARTS };
static const char *const PART_NAMES[NPARTS] = {"correct", "replicas", "traffic", "memory",
                                               "time"};

/* Part time (grader/common/block_time.h): whether the run grades it, and its verdict. */
static int time_wanted;
static struct gr_bt_verdict time_verdict;

/* ---- buffers (comparisons: grader/common/tensors.h) ---- */

/* ---- traffic of one pass, from the ledger ---- */

struct pass_traffic {
    long ag, rs, ar, other;
    double ag_bytes, rs_bytes, ar_bytes, other_bytes;
};

static void traffic_since(const struct pl_ledger *mark, struct pass_traffic *out)
{
    struct pl_ledger d;
    gr_ledger_since(mark, &d);
    out->ag = d.calls[PL_ALL_GATHER];
    out->rs = d.calls[PL_REDUCE_SCATTER];
    out->ar = d.calls[PL_ALL_REDUCE];
    out->ag_bytes = pl_ledger_bytes(&d, PL_ALL_GATHER, -1);
    out->rs_bytes = pl_ledger_bytes(&d, PL_REDUCE_SCATTER, -1);
    out->ar_bytes = pl_ledger_bytes(&d, PL_ALL_REDUCE, -1);
    out->other = gr_ledger_total_calls(&d) - out->ag - out->rs - out->ar;
    out->other_bytes = gr_ledger_total_bytes(&d) - out->ag_bytes - out->rs_bytes - out->ar_bytes;
}

/* A ring all-gather or reduce-scatter of a full [N, C] sends (t-1)/t of it per rank. */
static double one_coll_bytes(double NC, int t)
{
    return (double)(t - 1) / t * NC * 4.0;
}

/* ---- the layout's rows ---- */

static float *local_rows(const float *full, int B, int T, int C, int t, int r)
{
    float *l = gr_op_alloc((size_t)B * T / t * C, "lab05 local rows");
    pl_sp_slice(l, full, B, T, C, t, r);
    return l;
}

/* ---- op conjugates: integer-valued data, exact ---- */

static void member_data(const char *what, int w, size_t n, float *out)
{
    pl_rng_fill_int(out, n, base_seed, pl_rng_stream(what), (uint64_t)w * n, -64, 64);
}

/* got (host, n) against want: 0 and a failure naming the first wrong element. */
static int exact(const char *what, const float *got, const float *want, const float *rank_major,
                 size_t n, const char *rule)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            int ordered = rank_major != NULL;
            for (size_t j = 0; rank_major && j < n && ordered; j++)
                ordered = got[j] == rank_major[j];
            gr_fail("%s: element %zu is %g, expected %g (%s)%s", what, i, (double)got[i],
                 (double)want[i], rule,
                 ordered ? ": the rows are in the collective's rank-major order; sequence b's "
                           "tokens from rank r belong at rows b T + r T/t "
                           "(pl_sp_from_rank_major, section 3)"
                         : "");
            return 0;
        }
    return 1;
}

static const char *const CONJ_NAMES[] = {"sp_gather_forward", "sp_gather_backward",
                                          "sp_scatter_forward", "sp_scatter_backward"};

/* Each conjugate's collectives from the ledger: exactly one all-gather or one reduce-scatter
 * of (t-1)/t of the full activation of nf values. */
static void judge_conjugate_traffic(const struct pass_traffic *tr, int t, size_t nf)
{
    for (int k = 0; k < 4 && t > 1 && !pl_todo_what(); k++) {
        int gathers = k == 0 || k == 3;
        long want_ag = gathers, want_rs = !gathers;
        double want = one_coll_bytes((double)nf, t);
        char a[32], b[32];
        const char *name = CONJ_NAMES[k];
        if (tr[k].ar)
            gr_fail("%s made %ld all-reduce%s (%s): an all-reduce leaves the whole sum on every "
                 "rank and sends 2(t-1)/t of the buffer where a reduce-scatter sends (t-1)/t "
                 "and leaves each rank only its tokens, which is all it keeps (section 3)",
                 name, tr[k].ar, tr[k].ar == 1 ? "" : "s",
                 pl_format_bytes(tr[k].ar_bytes, a, sizeof a));
        else if (tr[k].other || tr[k].ag != want_ag || tr[k].rs != want_rs)
            gr_fail("%s made %ld all-gather%s, %ld reduce-scatter%s and %ld other operation%s "
                 "where it needs exactly one %s (section 3)", name, tr[k].ag,
                 tr[k].ag == 1 ? "" : "s", tr[k].rs, tr[k].rs == 1 ? "" : "s", tr[k].other,
                 tr[k].other == 1 ? "" : "s", gathers ? "all-gather" : "reduce-scatter");
        else if (fabs(tr[k].ag_bytes + tr[k].rs_bytes - want) > 0.5)
            gr_fail("%s sent %s per rank where one %s of the full [B*T, C] sends %s ((t-1)/t of "
                 "it)", name, pl_format_bytes(tr[k].ag_bytes + tr[k].rs_bytes, a, sizeof a),
                 gathers ? "all-gather" : "reduce-scatter", pl_format_bytes(want, b, sizeof b));
    }
}

/* The conjugates' data on the host: this rank's local rows and full buffer, and what each
 * collective must give: every rank's rows in place (and in the collective's rank-major
 * order, to name that mistake), and this rank's rows of the sum. */
struct conj_data {
    int t, r, B, T, C;
    size_t nf, nl;
    float *mine_l, *mine_f, *gath, *rm, *want_l;
};

static void conj_data_new(struct pl_comm *tp, struct conj_data *d)
{
    const int t = pl_comm_size(tp), r = pl_comm_rank(tp), B = 3, T = 4 * t, C = 5;
    const size_t nf = (size_t)B * T * C, nl = nf / t, rows = (size_t)(T / t) * C;
    *d = (struct conj_data){.t = t, .r = r, .B = B, .T = T, .C = C, .nf = nf, .nl = nl};
    d->mine_l = malloc(nl * sizeof(float)), d->mine_f = malloc(nf * sizeof(float));
    d->gath = calloc(nf, sizeof(float)), d->rm = malloc(nf * sizeof(float));
    d->want_l = malloc(nl * sizeof(float));
    float *sum = calloc(nf, sizeof *sum), *tmp = malloc(nf * sizeof *tmp);
    member_data("lab05.conj.local", pl_comm_world_rank(tp, r), nl, d->mine_l);
    member_data("lab05.conj.full", pl_comm_world_rank(tp, r), nf, d->mine_f);
    for (int m = 0; m < t; m++) {
        member_data("lab05.conj.local", pl_comm_world_rank(tp, m), nl, tmp);
        memcpy(d->rm + m * nl, tmp, nl * sizeof *tmp);
        for (int b = 0; b < B; b++)
            memcpy(d->gath + ((size_t)b * T + (size_t)m * (T / t)) * C, tmp + (size_t)b * rows,
                   rows * sizeof *tmp);
        member_data("lab05.conj.full", pl_comm_world_rank(tp, m), nf, tmp);
        for (size_t i = 0; i < nf; i++) sum[i] += tmp[i];
    }
    for (int b = 0; b < B; b++)
        memcpy(d->want_l + (size_t)b * rows, sum + ((size_t)b * T + (size_t)r * (T / t)) * C,
               rows * sizeof *sum);
    free(sum);
    free(tmp);
}

static void conj_data_free(struct conj_data *d)
{
    float *p[] = {d->mine_l, d->mine_f, d->gath, d->rm, d->want_l};
    for (int i = 0; i < 5; i++) free(p[i]);
}

static void run_conjugates(struct pl_comm *tp)
{
    struct conj_data d;
    conj_data_new(tp, &d);
    const int t = d.t, B = d.B, T = d.T, C = d.C;
    const size_t nf = d.nf, nl = d.nl;
    float *dl = gr_op_alloc(nl, "lab05 local"), *df = gr_op_alloc(nf, "lab05 full");
    float *ol = gr_op_alloc(nl, "lab05 out local"), *of = gr_op_alloc(nf, "lab05 out full");
    static const char *rules[] = {
        "all-gather along the sequence: every rank's T/t tokens of each sequence in place",
        "reduce-scatter: this rank's tokens of the sum over the group",
        "reduce-scatter: this rank's tokens of the sum over the group",
        "all-gather along the sequence: every rank's T/t tokens of each sequence in place"};
    struct pass_traffic tr[4];
    for (int k = 0; k < 4 && gr_parts_ok_of(P_CORRECT); k++) {
        int gathers = k == 0 || k == 3;
        pl_to_device(dl, d.mine_l, nl * sizeof(float));
        pl_to_device(df, d.mine_f, nf * sizeof(float));
        struct pl_ledger mark;
        gr_ledger_mark(&mark);
        if (k == 0) sp_gather_forward(tp, of, dl, B, T, C);
        else if (k == 1) sp_gather_backward(tp, ol, df, B, T, C);
        else if (k == 2) sp_scatter_forward(tp, ol, df, B, T, C);
        else sp_scatter_backward(tp, of, dl, B, T, C);
        traffic_since(&mark, &tr[k]);
        if (pl_todo_what()) break;
        float *got = gr_host_copy(gathers ? of : ol, gathers ? nf : nl);
        exact(CONJ_NAMES[k], got, gathers ? d.gath : d.want_l, gathers && B > 1 ? d.rm : NULL,
              gathers ? nf : nl, rules[k]);
        free(got);
    }
    gr_parts_say_ok(P_CORRECT,
                    "both conjugates exact forward and backward on every rank (t=%d, B=%d, "
                    "T=%d, C=%d)",
                    t, B, T, C);
    gr_parts_set(P_TRAFFIC);
    judge_conjugate_traffic(tr, t, nf);
    gr_parts_set(P_CORRECT);
    gr_parts_say_ok(P_TRAFFIC, "one all-gather in sp_gather_forward and sp_scatter_backward, one "
           "reduce-scatter in sp_gather_backward and sp_scatter_forward, each (t-1)/t of the "
           "full activation per rank");
    float *p[] = {dl, df, ol, of};
    for (int i = 0; i < 4; i++) pl_mem_free(p[i]);
    conj_data_free(&d);
}

/* ---- op block: the SP block against the single device ---- */

struct block_run {
    struct pass_traffic fwd, bwd, sync;
    double held, peak; /* bytes kept from the forward to the backward; peak of the step */
    double left;       /* bytes still held once the backward returned and the acts were freed */
    double oracle_flops; /* the single device's forward and backward, from the ledger */
    double activation_floats; /* the whole [B, T, C] activation */
    double flops, core_flops; /* this rank's block, and the part of it in the kit's core */
    double core_once;         /* one forward and one backward of each half's core */
    struct gr_unseen unseen;  /* a buffer of the conjugates or the core in static storage */
    char kept[160];           /* another rank's rows found in static storage after the forward */
};

static const char *split_name(enum pl_tp_split s)
{
    return s == PL_TP_REPLICATED ? "replicated"
           : s == PL_TP_ROWS     ? "a row block"
                                 : "a column block";
}

/* Relative L2 error of n floats of op memory against ref (op memory). */
static double rel_l2(const float *got, const float *ref, size_t n)
{
    float *g = gr_host_copy(got, n), *r = gr_host_copy(ref, n);
    double e2 = 0, r2 = 0;
    for (size_t i = 0; i < n; i++) {
        e2 += ((double)g[i] - r[i]) * ((double)g[i] - r[i]);
        r2 += (double)r[i] * r[i];
    }
    free(g);
    free(r);
    return r2 > 0 ? sqrt(e2 / r2) : sqrt(e2);
}

/* Whether every rank's n floats (op memory) equal those of the rank 0 of its TP group, bit
 * for bit (collective over the world; the groups may be smaller than it). 0 with the first
 * group rank and element that differ. */
static int group_replicas_equal(struct pl_comm *tp, const float *x, size_t n, int *bad_rank,
                                size_t *bad)
{
    const int nw = pl_size(), t = pl_comm_size(tp);
    float *mine = gr_host_copy(x, n), *all = malloc((size_t)nw * n * sizeof *all);
    PL_CHECK_MPI(MPI_Allgather(mine, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT,
                               MPI_COMM_WORLD));
    const float *root = all + (size_t)pl_comm_world_rank(tp, 0) * n;
    int equal = 1;
    for (int m = 1; m < t && equal; m++) {
        const float *o = all + (size_t)pl_comm_world_rank(tp, m) * n;
        for (size_t e = 0; e < n && equal; e++)
            if (memcmp(&o[e], &root[e], sizeof *o)) equal = 0, *bad_rank = m, *bad = e;
    }
    free(mine);
    free(all);
    return equal;
}

/* What a case on a tp x dp grid adds to a failure: the group is not the world. */
static void grid_hint(const struct sp_case *kc, int t, char *buf, size_t len)
{
    buf[0] = 0;
    if (kc->dp > 1)
        snprintf(buf, len, "this case runs on a tp=%d x dp=%d grid (order %s), each DP "
                 "replica on its own sequences, and the cases whose TP group was the whole "
                 "world matched: the TP group is not the world. The group's rank and size are "
                 "pl_comm_rank(tp) and pl_comm_size(tp) and its collectives run on tp; "
                 "pl_rank(), pl_size() and pl_comm_world() are the world's (sections 4 and 6)",
                 t, kc->dp, kc->order);
}

/* The replicated tensors after the synchronisation: bitwise equal on every rank of the TP
 * group (collective), then equal to the single device's. last: the expected gradient of
 * the second micro-batch alone (accumulating cases), or NULL. */
static int in_bench; /* the bench runs a TP group smaller than the world: no replica test */

static void judge_replicas(struct pl_comm *tp, const struct sp_case *kc,
                           const struct pl_model_config *c, int t, const float *shard_g,
                           const float *want, const float *last)
{
    struct pl_tp_tensor d[PL_TP_BLOCK_TENSORS];
    pl_tp_block_tensors(c, 0, t, d);
    char grid[600];
    grid_hint(kc, t, grid, sizeof grid);
    /* collective first, every tensor on every rank; then each rank's values */
    for (int i = 0; i < PL_TP_BLOCK_TENSORS; i++) {
        if (d[i].split != PL_TP_REPLICATED) continue;
        int bad_rank = -1;
        size_t bad = 0;
        if (!group_replicas_equal(tp, shard_g + d[i].shard_offset, d[i].shard_numel, &bad_rank,
                                  &bad) && gr_parts_ok())
            gr_fail("the gradient of %s (replicated on every rank) differs between the ranks "
                 "after sp_sync_replicated_grads: rank %d's element %zu is not rank 0's. Each "
                 "rank's layernorm and bias saw only its own T/t tokens, so its gradient is a "
                 "partial sum: all-reduce it over the TP group, or every rank steps its copy "
                 "differently and the replicas drift apart (section 6)", d[i].name, bad_rank,
                 bad);
    }
    for (int i = 0; i < PL_TP_BLOCK_TENSORS && gr_parts_ok(); i++) {
        if (d[i].split != PL_TP_REPLICATED) continue;
        const float *got = shard_g + d[i].shard_offset, *ref = want + d[i].shard_offset;
        double s = gr_scale_of(got, ref, d[i].shard_numel);
        char why[700] = "", what[PL_NAME_LEN + 128];
        if (last && rel_l2(got, last + d[i].shard_offset, d[i].shard_numel) <= TOL_BWD)
            snprintf(why, sizeof why, "it is the second micro-batch's gradient alone: the "
                     "backward writes (=) it instead of adding (+=) to what the buffer held, "
                     "the first micro-batch's. sp.h: backward functions ACCUMULATE parameter "
                     "gradients; pl_sp_bias_backward and pl_layernorm_backward add, so never "
                     "zero or copy over g (section 5)");
        else if (grid[0])
            snprintf(why, sizeof why, "%s", grid);
        else if (t > 1 && fabs(s - t) < 1e-3 * t)
            snprintf(why, sizeof why, "it is %d (= t) times the single device's: summed over "
                     "the group twice, or reduced where every rank already held it whole", t);
        else if (t > 1 && fabs(s - 1.0 / t) < 1e-2 / t)
            /* equal on every rank (checked above), so reduced, but averaged */
            snprintf(why, sizeof why, "it is 1/t of the single device's and the same on "
                     "every rank: the partial sums were averaged (PL_AVG). Each rank's sum "
                     "covers its own T/t tokens, and the whole gradient is their sum: PL_SUM "
                     "(section 6)");
        snprintf(what, sizeof what, "gradient of %.64s (replicated) after the synchronisation%s",
                 d[i].name, last ? " of two micro-batches" : "");
        gr_compare(what, got, ref, d[i].shard_numel, TOL_BWD, why[0] ? why : NULL);
    }
}

/* One block case's tensors: the full block and this rank's shard (with their gradients),
 * the input and output gradient of every token, and this rank's rows of each; with accum,
 * the gradients the split tensors held before (g0) and a second micro-batch (x2, dy2). */
struct block_case {
    struct pl_model_config c;
    int t, r, B, T, C, layer, d;
    size_t nc, nl, full_numel, shard_numel;
    float *full, *full_g, *shard, *shard_g, *x, *dy, *y, *dx, *lx, *ldy, *ly, *ldx;
    float *g0, *g_last, *x2, *dy2; /* accum only: full [numel], full [numel], [nc], [nc] */
    struct pl_block_params p, g, sp, sg;
    struct pl_model_ctx ctx, ctx2;
};

/* A tensor's stream of case data, replica d's own on a tp x dp grid. */
static float *case_normal(const char *name, int d, size_t n, float mean, float std)
{
    char s[64];
    if (d) snprintf(s, sizeof s, "%s.dp%d", name, d);
    else snprintf(s, sizeof s, "%s", name);
    return gr_op_normal(base_seed, s, n, mean, std);
}

static void block_case_new(struct pl_comm *tp, const struct sp_case *kc, int d,
                           struct block_case *k)
{
    memset(k, 0, sizeof *k);
    k->t = pl_comm_size(tp), k->r = pl_comm_rank(tp), k->B = kc->B, k->T = kc->T;
    k->layer = kc->layer, k->d = d;
    k->c = graded_config(kc->dropout ? kc->p : 0.0f);
    k->C = k->c.d_model;
    k->nc = (size_t)k->B * k->T * k->C, k->nl = k->nc / k->t;
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, &k->c);
    k->full_numel = lay.block_numel, k->shard_numel = pl_tp_block_numel(&k->c, k->t);
    pl_model_layout_free(&lay);
    /* a full block with every tensor random, layernorm weights near 1 (the same on every
     * replica: data parallelism replicates the weights) */
    k->full = gr_op_normal(base_seed, "lab05.block", k->full_numel, 0.0f, 0.1f);
    pl_block_bind(&k->c, k->full, &k->p);
    float *one = gr_op_normal(base_seed, "lab05.ln", (size_t)k->C, 1.0f, 0.1f);
    pl_copy(k->p.ln1_w, one, (size_t)k->C);
    pl_copy(k->p.ln2_w, one, (size_t)k->C);
    pl_mem_free(one);
    k->full_g = gr_op_alloc(k->full_numel, "lab05 full grads");
    k->shard = gr_op_alloc(k->shard_numel, "lab05 shard");
    k->shard_g = gr_op_alloc(k->shard_numel, "");
    pl_zero(k->full_g, k->full_numel);
    if (kc->accum) {
        /* the split tensors' gradients hold an earlier micro-batch's (sp.h: backward
         * functions accumulate). The replicated ones start at zero: the synchronisation
         * all-reduces what it is given, and a backward that completes a bias gradient from
         * the gathered one is right too, so only zero is the same start for both; the
         * second micro-batch shows whether their backward adds. */
        k->g0 = gr_op_normal(base_seed, "lab05.g0", k->full_numel, 0.0f, 0.5f);
        struct pl_block_params z;
        pl_block_bind(&k->c, k->g0, &z);
        float *rep[] = {z.ln1_w, z.ln1_b, z.b_proj, z.ln2_w, z.ln2_b, z.b_fc2};
        for (int i = 0; i < 6; i++) pl_zero(rep[i], (size_t)k->C);
        pl_copy(k->full_g, k->g0, k->full_numel);
    }
    pl_block_bind(&k->c, k->full_g, &k->g);
    pl_tp_block_slice(&k->c, k->t, k->r, k->full, k->shard);
    pl_tp_block_slice(&k->c, k->t, k->r, k->full_g, k->shard_g);
    pl_tp_block_bind(&k->c, k->t, k->shard, &k->sp);
    pl_tp_block_bind(&k->c, k->t, k->shard_g, &k->sg);
    k->x = case_normal("lab05.x", d, k->nc, 0.0f, 1.0f);
    k->dy = case_normal("lab05.dy", d, k->nc, 0.0f, 1.0f);
    k->ctx = pl_model_ctx_eval();
    k->ctx.train = kc->train;
    k->ctx.seed = base_seed ^ 0x5eedULL;
    k->ctx.step = (uint64_t)kc->step;
    /* replica d's sequences follow replica d-1's, as a data-parallel batch is split */
    k->ctx.seq0 = kc->seq0 + d * kc->B;
    if (kc->accum) {
        k->x2 = case_normal("lab05.x2", d, k->nc, 0.0f, 1.0f);
        k->dy2 = case_normal("lab05.dy2", d, k->nc, 0.0f, 1.0f);
        k->ctx2 = k->ctx;
        k->ctx2.seq0 = k->ctx.seq0 + kc->B * (kc->dp > 1 ? kc->dp : 1);
    }
}

static void block_case_free(struct block_case *k)
{
    float *fr[] = {k->full, k->full_g, k->shard, k->shard_g, k->x, k->dy, k->y, k->dx,
                   k->lx, k->ldy, k->ly, k->ldx, k->g0, k->g_last, k->x2, k->dy2};
    for (size_t i = 0; i < sizeof fr / sizeof *fr; i++)
        if (fr[i]) pl_mem_free(fr[i]);
}

/* The oracle: the reference model's block on every token; with accum, the second
 * micro-batch's gradients too, alone in g_last and added to full_g. */
static void reference_block(struct block_case *k)
{
    k->y = gr_op_alloc(k->nc, "ref y"), k->dx = gr_op_alloc(k->nc, "ref dx");
    struct pl_block_acts ra;
    pl_block_acts_new(&ra, &k->c, k->B, k->T);
    pl_block_forward(&k->c, k->layer, &k->p, &ra, &k->ctx, k->x, k->y);
    pl_block_backward(&k->c, k->layer, &k->p, &k->g, &ra, &k->ctx, k->dy, k->dx);
    if (k->x2) {
        float *y2 = gr_op_alloc(k->nc, "ref y2"), *dx2 = gr_op_alloc(k->nc, "ref dx2");
        k->g_last = gr_op_alloc(k->full_numel, "ref second micro-batch grads");
        pl_zero(k->g_last, k->full_numel);
        struct pl_block_params g2;
        pl_block_bind(&k->c, k->g_last, &g2);
        pl_block_forward(&k->c, k->layer, &k->p, &ra, &k->ctx2, k->x2, y2);
        pl_block_backward(&k->c, k->layer, &k->p, &g2, &ra, &k->ctx2, k->dy2, dx2);
        pl_accumulate(k->full_g, k->g_last, k->full_numel);
        pl_mem_free(y2);
        pl_mem_free(dx2);
    }
    pl_block_acts_free(&ra);
}

/* Core FLOPs (unseen.c counts them in the wrappers of the kit's core): every call's, and
 * one call of each of the four (attention and MLP, forward and backward) at the shape last
 * seen, what a block's pass needs. */
double lab05_core_flops(void);
double lab05_core_flops_once(void);

/* Whether the static storage of this process holds a row of another rank of the TP group
 * after the forward: the layernorm outputs and inputs of every token are what Lab 4 kept
 * and SP must not, and a copy kept in a static array passes no call the grader can wrap
 * (a memcpy) and no ledger. Collective over the world; names what it found in kept. */
extern char __data_start[], _end[];

struct kept_row {
    uint32_t first; /* the row's first float's bits */
    int member, tensor;
    size_t row;
};

static int kept_row_cmp(const void *a, const void *b)
{
    uint32_t x = ((const struct kept_row *)a)->first, y = ((const struct kept_row *)b)->first;
    return x < y ? -1 : x > y;
}

static void find_kept_rows(struct pl_comm *tp, const struct pl_sp_block_acts *a, size_t nl,
                           int C, char *kept, size_t len)
{
    static const char *const names[] = {"the attention half's input x",
                                        "the attention half's layernorm output",
                                        "the MLP half's input", "the MLP half's layernorm output"};
    const int nw = pl_size(), t = pl_comm_size(tp), r = pl_comm_rank(tp);
    const size_t rows = nl / (size_t)C;
    const float *src[] = {a->x1, a->ln1, a->x2, a->ln2};
    float *mine = malloc(4 * nl * sizeof *mine), *all = malloc((size_t)nw * 4 * nl * sizeof *all);
    for (int k = 0; k < 4; k++) pl_to_host(mine + k * nl, src[k], nl * sizeof *mine);
    PL_CHECK_MPI(MPI_Allgather(mine, (int)(4 * nl), MPI_FLOAT, all, (int)(4 * nl), MPI_FLOAT,
                               MPI_COMM_WORLD));
    /* every row of the other members, sorted by its first word */
    struct kept_row *cand = malloc((size_t)t * 4 * rows * sizeof *cand);
    size_t nc = 0;
    for (int m = 0; m < t; m++)
        for (int k = 0; k < 4 && m != r; k++)
            for (size_t i = 0; i < rows; i++) {
                const float *row = all + ((size_t)pl_comm_world_rank(tp, m) * 4 + k) * nl +
                                   i * (size_t)C;
                memcpy(&cand[nc].first, row, sizeof(uint32_t));
                cand[nc].member = m, cand[nc].tensor = k, cand[nc].row = i;
                nc++;
            }
    qsort(cand, nc, sizeof *cand, kept_row_cmp);
    kept[0] = 0;
    const char *lo = __data_start, *hi = _end;
    for (const char *q = lo; q + (size_t)C * sizeof(float) <= hi && !kept[0];
         q += sizeof(float)) {
        struct kept_row key = {0};
        memcpy(&key.first, q, sizeof key.first);
        const struct kept_row *f = bsearch(&key, cand, nc, sizeof *cand, kept_row_cmp);
        if (!f) continue;
        while (f > cand && f[-1].first == key.first) f--;
        for (; f < cand + nc && f->first == key.first && !kept[0]; f++) {
            const float *row = all + ((size_t)pl_comm_world_rank(tp, f->member) * 4 +
                                      (size_t)f->tensor) * nl + f->row * (size_t)C;
            if (!memcmp(q, row, (size_t)C * sizeof(float)))
                snprintf(kept, len, "%s, token row %zu of rank %d's", names[f->tensor], f->row,
                         f->member);
        }
    }
    free(cand);
    free(mine);
    free(all);
}

/* One forward and backward of the student's block on this case's rows, writing y and dx. */
static void student_pass(struct pl_comm *tp, struct block_case *k, struct pl_sp_block_acts *a,
                         const struct pl_model_ctx *ctx, const float *x, float *y,
                         const float *dy, float *dx)
{
    sp_block_forward(tp, &k->c, k->layer, &k->sp, a, ctx, x, y);
    sp_block_backward(tp, &k->c, k->layer, &k->sp, &k->sg, a, ctx, dy, dx);
}

/* This rank's tokens through the student's block: its traffic per pass, the bytes it held
 * from the forward to the backward and the step's peak, what it left, its FLOPs; traced for
 * part time (collective). With accum, a second micro-batch's forward and backward follow
 * (unmeasured). */
static void student_block(struct pl_comm *tp, struct block_case *k, int traced,
                          struct block_run *run)
{
    k->lx = local_rows(k->x, k->B, k->T, k->C, k->t, k->r);
    k->ldy = local_rows(k->dy, k->B, k->T, k->C, k->t, k->r);
    k->ly = gr_op_alloc(k->nl, "your y"), k->ldx = gr_op_alloc(k->nl, "your dx");
    /* dx handed over holding other values (this rank's x rows): the backward writes it */
    pl_copy(k->ldx, k->lx, k->nl);
    struct pl_mem_stats before, after;
    pl_mem_reset_peak();
    pl_mem_get_stats(&before);
    struct pl_sp_block_acts a;
    pl_sp_block_acts_new(&a, &k->c, k->t, k->B, k->T);
    struct pl_ledger mark;
    gr_ledger_mark(&mark);
    if (traced) gr_bt_begin();
    gr_unseen_begin(0);
    double f0 = pl_ledger_flops_total(), c0 = lab05_core_flops();
    sp_block_forward(tp, &k->c, k->layer, &k->sp, &a, &k->ctx, k->lx, k->ly);
    double f1 = pl_ledger_flops_total(), c1 = lab05_core_flops();
    if (traced) gr_bt_pause();
    traffic_since(&mark, &run->fwd);
    pl_mem_get_stats(&after);
    run->held = (double)after.current_total - (double)before.current_total;
    if (k->t > 1 && !pl_todo_what() && !in_bench)
        find_kept_rows(tp, &a, k->nl, k->C, run->kept, sizeof run->kept);
    gr_ledger_mark(&mark);
    if (traced) gr_bt_resume();
    double f2 = pl_ledger_flops_total(), c2 = lab05_core_flops();
    sp_block_backward(tp, &k->c, k->layer, &k->sp, &k->sg, &a, &k->ctx, k->ldy, k->ldx);
    run->flops = f1 - f0 + pl_ledger_flops_total() - f2;
    run->core_flops = c1 - c0 + lab05_core_flops() - c2;
    run->core_once = lab05_core_flops_once();
    run->unseen = gr_unseen_end();
    if (traced) gr_bt_end(1);
    traffic_since(&mark, &run->bwd);
    pl_mem_get_stats(&after);
    run->peak = (double)after.peak_total - (double)before.current_total;
    pl_sp_block_acts_free(&a);
    pl_mem_get_stats(&after);
    run->left = (double)after.current_total - (double)before.current_total;
    if (k->x2 && !pl_todo_what()) {
        float *lx2 = local_rows(k->x2, k->B, k->T, k->C, k->t, k->r);
        float *ldy2 = local_rows(k->dy2, k->B, k->T, k->C, k->t, k->r);
        float *y2 = gr_op_alloc(k->nl, "your y2"), *dx2 = gr_op_alloc(k->nl, "your dx2");
        pl_sp_block_acts_new(&a, &k->c, k->t, k->B, k->T);
        student_pass(tp, k, &a, &k->ctx2, lx2, y2, ldy2, dx2);
        pl_sp_block_acts_free(&a);
        float *fr[] = {lx2, ldy2, y2, dx2};
        for (int i = 0; i < 4; i++) pl_mem_free(fr[i]);
    }
}

/* Whether this rank's output rows are the single device's with the row-parallel biases
 * (b_proj, b_fc2) scaled by s: added on every rank before the reduce-scatter (s = t), or
 * never (s = 0). */
static int rows_with_biases_times(const struct block_case *k, float s)
{
    float *full = gr_op_alloc(k->full_numel, "lab05 biases scaled");
    pl_copy(full, k->full, k->full_numel);
    struct pl_block_params q;
    pl_block_bind(&k->c, full, &q);
    pl_scale(q.b_proj, (size_t)k->C, s);
    pl_scale(q.b_fc2, (size_t)k->C, s);
    float *y = gr_op_alloc(k->nc, "lab05 y biases scaled"), *mine = gr_op_alloc(k->nl, "");
    struct pl_block_acts ra;
    pl_block_acts_new(&ra, &k->c, k->B, k->T);
    pl_block_forward(&k->c, k->layer, &q, &ra, &k->ctx, k->x, y);
    pl_block_acts_free(&ra);
    pl_sp_slice(mine, y, k->B, k->T, k->C, k->t, k->r);
    int same = rel_l2(k->ly, mine, k->nl) <= TOL_FWD;
    pl_mem_free(mine);
    pl_mem_free(y);
    pl_mem_free(full);
    return same;
}

/* Output and input gradient rows against the single device's; 1 when the output matched. */
static int judge_block_rows(const struct block_case *k, const struct sp_case *kc)
{
    const int B = k->B, T = k->T, C = k->C, t = k->t, r = k->r;
    char what[PL_NAME_LEN + 128], hint[800] = "";
    if (kc->dp > 1)
        grid_hint(kc, t, hint, sizeof hint);
    else if (kc->dropout && !kc->train)
        snprintf(hint, sizeof hint, "this case evaluates (ctx->train = 0) with dropout "
                 "configured (p=%.1f): dropout is off outside training, the branch passes "
                 "unchanged and its gradient is dy (sp.h: off when ctx->train is 0 or "
                 "c->dropout is 0)", (double)kc->p);
    else if (kc->dropout)
        snprintf(hint, sizeof hint, "dropout is on in this case (p=%.2g, block %d, sequences "
                 "from %d, step %d, T=%d where the model's seq_len is %d) and the case without "
                 "dropout matched: each rank must draw the single device's mask of the same "
                 "global tokens, row (seq0 + b) T + r T/t + i of the full [B*T, C], with T the "
                 "sequence length the block is given and the configuration's p (section 4)",
                 (double)kc->p, kc->layer, kc->seq0, kc->step, T, k->c.seq_len);
    float *want = gr_op_alloc(k->nl, "expected rows");
    pl_sp_slice(want, k->y, B, T, C, t, r);
    if (!kc->dropout && t > 1 && rel_l2(k->ly, want, k->nl) > TOL_FWD) {
        if (rows_with_biases_times(k, (float)t))
            snprintf(hint, sizeof hint, "your rows are the single device's with b_proj and "
                     "b_fc2 added t = %d times: every rank added the row-parallel bias to its "
                     "partial sum before the reduce-scatter, which sums the copies. Add it "
                     "after the reduce-scatter, once per token, on your own rows (section 5)",
                     t);
        else if (rows_with_biases_times(k, 0.0f))
            snprintf(hint, sizeof hint, "your rows are the single device's without b_proj "
                     "and b_fc2: add the row-parallel biases after the reduce-scatter, once "
                     "per token, on your own rows (section 5)");
    }
    snprintf(what, sizeof what, "output y, your T/t tokens (B=%d, T=%d, t=%d)", B, T, t);
    int fwd_ok = gr_compare(what, k->ly, want, k->nl, TOL_FWD, hint[0] ? hint : NULL);
    pl_sp_slice(want, k->dx, B, T, C, t, r);
    snprintf(what, sizeof what, "input gradient dx, your T/t tokens (B=%d, T=%d, t=%d)", B, T, t);
    float *added = gr_op_alloc(k->nl, "expected rows added to x");
    pl_copy(added, k->lx, k->nl);
    pl_accumulate(added, want, k->nl);
    if (fwd_ok && rel_l2(k->ldx, added, k->nl) <= TOL_BWD)
        snprintf(hint, sizeof hint, "your rows are the right dx added to what the buffer held "
                 "(the grader hands it over holding this rank's x rows): sp_block_backward "
                 "writes (=) dx, as sp.h says; pl_layernorm_backward accumulates, so start dx "
                 "from dy with a copy (section 5)");
    pl_mem_free(added);
    if (fwd_ok)
        gr_compare(what, k->ldx, want, k->nl, TOL_BWD, hint[0] ? hint : "every rank's TP branch "
                "saw every token, so its layernorm-output gradient is a part of the whole: the "
                "gather's backward sums the parts and keeps this rank's tokens (section 3)");
    pl_mem_free(want);
    return fwd_ok;
}

/* sp_dropout_forward and sp_dropout_backward called on their own, on this rank's rows of
 * another block and site than the block's: the forward must be the single device's mask of
 * the same tokens, and the backward must write (=) dbranch as sp.h says, so its buffer is
 * handed over holding other values first. (The student's own block may hand it a fresh,
 * zeroed buffer, where adding and writing look the same.) */
static void judge_dropout_alone(struct pl_comm *tp, const struct block_case *k)
{
    const int B = k->B, T = k->T, C = k->C, t = k->t, r = k->r, layer = 1, site = 1;
    char what[160], hint[400];
    float *full = gr_op_alloc(k->nc, "lab05 dropout full"), *want = gr_op_alloc(k->nl, "");
    float *mine = local_rows(k->x, B, T, C, t, r);
    /* the single device's dropout of the whole branch: global index from seq0's first row */
    const int on = k->ctx.train && k->c.dropout > 0.0f;
    const float p = on ? k->c.dropout : 0.0f;
    const uint64_t stream = pl_model_dropout_stream(layer, site, k->ctx.step);
    const uint64_t at = (uint64_t)k->ctx.seq0 * (uint64_t)T * (uint64_t)C;
    pl_dropout_forward(full, k->x, k->nc, p, k->ctx.seed, stream, at);
    pl_sp_slice(want, full, B, T, C, t, r);
    sp_dropout_forward(tp, &k->c, layer, site, &k->ctx, mine, B, T);
    snprintf(what, sizeof what, "sp_dropout_forward alone (block %d, site %d, sequences from "
             "%lld, B=%d, T=%d, t=%d), your T/t tokens", layer, site, (long long)k->ctx.seq0,
             B, T, t);
    int ok = gr_compare(what, mine, want, k->nl, TOL_FWD, !on && k->c.dropout > 0.0f
                        ? "in evaluation (ctx->train = 0) dropout is off although the "
                          "configuration has p > 0: the branch passes unchanged (sp.h)"
                        : "each rank draws the single device's mask of the same global tokens, "
                          "for the block and site it is given (section 4)");
    /* the backward, into a buffer that holds this rank's x rows */
    pl_zero(full, k->nc);
    pl_dropout_backward(full, k->dy, k->nc, p, k->ctx.seed, stream, at);
    pl_sp_slice(want, full, B, T, C, t, r);
    float *dbranch = local_rows(k->x, B, T, C, t, r);
    if (ok) sp_dropout_backward(tp, &k->c, layer, site, &k->ctx, dbranch, k->ldy, B, T);
    float *added = local_rows(k->x, B, T, C, t, r);
    pl_accumulate(added, want, k->nl);
    snprintf(hint, sizeof hint, "%s", rel_l2(dbranch, added, k->nl) <= TOL_BWD
             ? "your values are the right ones added to what the buffer held: the backward "
               "writes (=) dbranch; pl_dropout_backward_block accumulates, so zero dbranch "
               "first (section 4)"
             : "the backward writes (=) dbranch: dy through the forward's mask, scaled by "
               "1/(1-p), or dy itself when dropout is off (section 4)");
    snprintf(what, sizeof what, "sp_dropout_backward alone, dbranch handed over not zero "
             "(block %d, site %d, B=%d, T=%d, t=%d)", layer, site, B, T, t);
    if (ok) gr_compare(what, dbranch, want, k->nl, TOL_BWD, hint);
    pl_mem_free(added);
    pl_mem_free(dbranch);
    pl_mem_free(mine);
    pl_mem_free(want);
    pl_mem_free(full);
}

/* Every split tensor's gradient (before the synchronisation, which must not touch it);
 * wg receives the expected shard gradients, wl (accumulating cases) the second
 * micro-batch's alone. */
static void judge_split_grads(const struct block_case *k, int fwd_ok, float *wg, float *wl)
{
    char what[PL_NAME_LEN + 128];
    pl_tp_block_slice(&k->c, k->t, k->r, k->full_g, wg);
    float *w0 = NULL;
    if (k->g0) {
        pl_tp_block_slice(&k->c, k->t, k->r, k->g_last, wl);
        w0 = gr_op_alloc(k->shard_numel, "expected shard grads without what they held");
        pl_tp_block_slice(&k->c, k->t, k->r, k->g0, w0);
        pl_scale(w0, k->shard_numel, -1.0f);
        pl_accumulate(w0, wg, k->shard_numel);
    }
    struct pl_tp_tensor d[PL_TP_BLOCK_TENSORS];
    pl_tp_block_tensors(&k->c, 0, k->t, d);
    for (int i = 0; i < PL_TP_BLOCK_TENSORS && fwd_ok && gr_parts_ok(); i++) {
        if (d[i].split == PL_TP_REPLICATED) continue;
        const size_t o = d[i].shard_offset, n = d[i].shard_numel;
        const char *hint = NULL;
        if (w0 && (rel_l2(k->shard_g + o, w0 + o, n) <= TOL_BWD ||
                   rel_l2(k->shard_g + o, wl + o, n) <= TOL_BWD))
            hint = "the gradient buffers were handed over holding an earlier micro-batch's "
                   "gradients and your values lost them: sp_block_backward ACCUMULATES (+=) "
                   "parameter gradients (sp.h), as pl_block_backward does, so that micro-batches "
                   "add up before one synchronisation; the kit's core adds into g, so never zero "
                   "or overwrite it (section 5)";
        snprintf(what, sizeof what, "gradient of your shard of %.64s (%s)%s", d[i].name,
                 split_name(d[i].split), w0 ? ", two micro-batches added to what it held" : "");
        gr_compare(what, k->shard_g + o, wg + o, n, TOL_BWD, hint);
    }
    if (w0) pl_mem_free(w0);
}

static void run_block_case(struct pl_comm *tp, const struct sp_case *kc, int d, int traced,
                           struct block_run *run)
{
    struct block_case k;
    block_case_new(tp, kc, d, &k);
    double f0 = pl_ledger_flops_total();
    reference_block(&k);
    run->oracle_flops = pl_ledger_flops_total() - f0;
    if (k.x2) { /* the first micro-batch's only: the second ran the same ops again */
        run->oracle_flops /= 2;
    }
    run->activation_floats = (double)k.nc;
    student_block(tp, &k, traced, run);
    int fwd_ok = judge_block_rows(&k, kc);
    if (fwd_ok && gr_parts_ok()) judge_dropout_alone(tp, &k);
    float *wg = gr_op_alloc(k.shard_numel, "expected shard grads");
    float *wl = k.g0 ? gr_op_alloc(k.shard_numel, "expected second micro-batch") : NULL;
    judge_split_grads(&k, fwd_ok, wg, wl);
    /* the synchronisation of the replicated gradients */
    struct pl_ledger mark;
    gr_ledger_mark(&mark);
    sp_sync_replicated_grads(tp, &k.c, &k.sg);
    traffic_since(&mark, &run->sync);
    if (!pl_todo_what() && !in_bench) {
        gr_parts_set(P_REPLICAS);
        judge_replicas(tp, kc, &k.c, k.t, k.shard_g, wg, wl);
        gr_parts_set(P_CORRECT);
    }
    if (wl) pl_mem_free(wl);
    pl_mem_free(wg);
    block_case_free(&k);
}

static void judge_block_traffic(const struct block_run *run, int t, double NC, int C)
{
    /* at most the six replicated vectors all-reduced: 2(t-1)/t of 6C floats (an all-reduce
     * done as its two halves, a reduce-scatter and an all-gather, may pad 6C to t equal
     * shares). Less is right too: a backward that sums the bias gradients from the gathered
     * gradient, the same on every rank, leaves only the layernorms' to reduce. */
    const double sync = 2.0 * (t - 1) / t * 6 * C * 4.0;
    const double sync_padded = 2.0 * (t - 1) * ceil(6.0 * C / t) * 4.0;
    char a[32], b[32];
    const double one = one_coll_bytes(NC, t);
    /* Lab 4: two all-reduces of [N, C] per pass, 2(t-1)/t of each */
    const double lab4_pass = 2 * 2.0 * (t - 1) / t * NC * 4.0;
    const struct pass_traffic *f = &run->fwd, *k = &run->bwd, *s = &run->sync;
    if (f->ar || k->ar)
        gr_fail("the %s made %ld all-reduce%s (%s): sequence parallelism replaces each of Lab 4's "
             "all-reduces by a reduce-scatter and an all-gather, so that between them the "
             "activation lives split along the sequence (section 3)",
             f->ar ? "forward" : "backward", f->ar ? f->ar : k->ar,
             (f->ar ? f->ar : k->ar) == 1 ? "" : "s",
             pl_format_bytes(f->ar ? f->ar_bytes : k->ar_bytes, a, sizeof a));
    else if (f->ag != 2 || f->rs != 2 || f->other)
        gr_fail("the forward made %ld all-gathers, %ld reduce-scatters and %ld other operations "
             "where a block needs 2 and 2: one gather entering and one scatter leaving each of "
             "the two TP regions (section 5)", f->ag, f->rs, f->other);
    else if (fabs(f->ag_bytes + f->rs_bytes - lab4_pass) > 0.5)
        gr_fail("the forward sent %s per rank where 2 all-gathers and 2 reduce-scatters of the "
             "[B*T, C] activation send %s, Lab 4's two all-reduces' worth: gather and scatter "
             "exactly the layernorm output and the branch",
             pl_format_bytes(f->ag_bytes + f->rs_bytes, a, sizeof a),
             pl_format_bytes(lab4_pass, b, sizeof b));
    else if (k->rs != 2 || k->ag < 2 || k->ag > 4 || k->other)
        gr_fail("the backward made %ld all-gathers, %ld reduce-scatters and %ld other operations "
             "where a block needs 2 reduce-scatters (the gathers' backward) and 2 all-gathers "
             "(the scatters' backward), plus at most 2 all-gathers of the stored layernorm "
             "shards (section 5)", k->ag, k->rs, k->other);
    else if (fabs(k->ag_bytes + k->rs_bytes - one * (double)(k->ag + k->rs)) > 0.5)
        gr_fail("the backward sent %s per rank where its %ld collectives of the [B*T, C] "
             "activation send %s", pl_format_bytes(k->ag_bytes + k->rs_bytes, a, sizeof a),
             k->ag + k->rs, pl_format_bytes(one * (double)(k->ag + k->rs), b, sizeof b));
    else if (s->ag != s->rs || s->other)
        gr_fail("sp_sync_replicated_grads made %ld all-gather%s, %ld reduce-scatter%s and %ld "
             "other operation%s (%s per rank): each rank's replicated gradients are partial "
             "sums over its own tokens, and one all-reduce (PL_SUM) of the six vectors of C "
             "floats adds them (or its two halves, a reduce-scatter and an all-gather of the "
             "sums), %s per rank; all-gathering every rank's copy to add them locally sends "
             "(t-1) x 6C floats, t/2 times that (section 6)", s->ag,
             s->ag == 1 ? "" : "s", s->rs, s->rs == 1 ? "" : "s", s->other,
             s->other == 1 ? "" : "s",
             pl_format_bytes(s->ar_bytes + s->ag_bytes + s->rs_bytes + s->other_bytes, a,
                            sizeof a), pl_format_bytes(sync, b, sizeof b));
    else if (s->ar_bytes + s->ag_bytes + s->rs_bytes > (s->ar ? sync : sync_padded) + 0.5)
        gr_fail("sp_sync_replicated_grads sent %s per rank in %ld all-reduce%s and %ld other "
             "operation%s where all-reducing the six replicated vectors of C floats sends %s, "
             "which is enough: reduce only the partial sums, each once (section 6)",
             pl_format_bytes(s->ar_bytes + s->ag_bytes + s->rs_bytes + s->other_bytes, a,
                            sizeof a), s->ar, s->ar == 1 ? "" : "s", s->ag + s->rs + s->other,
             s->ag + s->rs + s->other == 1 ? "" : "s",
             pl_format_bytes(sync, b, sizeof b));
}

static void judge_block_memory(const struct block_run *run, const struct pl_model_config *c,
                               int t, int B, int T)
{
    const double want = pl_sp_block_act_bytes(c, t, B, T);
    const double lab4 = pl_tp_block_act_bytes(c, t, B, T), NC = (double)B * T * c->d_model;
    char a[32], b[32], e[32], l4[32];
    if (run->unseen.where)
        gr_fail("%s was an array in static storage: it outlives the forward where the memory "
             "ledger never sees it, so what the block holds between its forward and backward "
             "cannot be measured (a whole sequence's layernorm output kept there would be "
             "Lab 4's replicated activation again). Take every buffer from pl_mem_alloc "
             "(scratch as PL_MEM_WORK), free it before you return, and re-gather the stored "
             "layernorm shard in the backward (section 5)", run->unseen.what);
    else if (run->kept[0])
        gr_fail("after your forward returned, static storage held %s (the grader searched it "
             "for every other rank's rows): a copy of the whole sequence kept outside the "
             "memory ledger, Lab 4's replicated activation again where no test can see it. "
             "Keep only this rank's shards in the acts, free the gathered buffers before you "
             "return, and re-gather the stored layernorm shard in the backward (section 5)",
             run->kept);
    else if (run->held > want + 0.5)
        gr_fail("your block held %s between its forward and its backward where TP+SP keeps %s "
             "(4/t (8NC + 2NF + 4N + B NH T^2), sp_shard.h); the extra %s is %.2f full "
             "[B*T, C] activations: something of the whole sequence was kept. Lab 4's TP block "
             "keeps %s, its replicated part (inputs, layernorm outputs and statistics of every "
             "token) is what the layernorm on your T/t tokens removes: gather after the "
             "layernorm, just before the TP region, and keep only the local shards "
             "(section 5)", pl_format_bytes(run->held, a, sizeof a),
             pl_format_bytes(want, b, sizeof b), pl_format_bytes(run->held - want, e, sizeof e),
             (run->held - want) / (NC * 4.0), pl_format_bytes(lab4, l4, sizeof l4));
    else if (run->left > 0.5 || run->left < -0.5)
        gr_fail("%s %s once the backward returned and the acts were freed: %s. Every "
             "buffer a pass takes from pl_mem_alloc is freed before it returns; the acts "
             "belong to the caller (section 5)", run->left > 0 ? "your block still held"
             : "your block freed", pl_format_bytes(fabs(run->left), a, sizeof a),
             run->left > 0 ? "scratch never freed, which grows step after step"
                           : "memory it did not allocate");
}

/* The work outside the kit's core, summed over the TP group, against the single device's
 * (its forward and backward less one pass of the core, which the group's cores split
 * evenly; a core run twice is the modelled timeline's to judge): the
 * layernorms, residuals, dropouts and biases run once per token in all, on the rank that
 * owns it. Two-sided: at least WORK_LO of the single device's (less is work skipped), at
 * most WORK_HI of it plus WORK_GATHERED FLOPs per element of the [B*T, C] activation for
 * each rank beyond the first: room for a few sums over the gathered sequence (the bias
 * gradients summed from the gathered gradient, 4 a rank), not for a layernorm forward on it
 * (8 each) by every rank, which is t times the work sequence parallelism exists to split.
 * Collective over the world. */
#define WORK_LO 0.75
#define WORK_HI 1.15
#define WORK_GATHERED 6.0

static void judge_block_work(struct pl_comm *tp, const struct block_run *run, int t)
{
    const int nw = pl_size();
    double mine[2] = {run->flops - run->core_flops, run->core_once};
    double *all = malloc((size_t)nw * 2 * sizeof *all), group = 0, core = 0;
    PL_CHECK_MPI(MPI_Allgather(mine, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, MPI_COMM_WORLD));
    for (int m = 0; m < t; m++) {
        group += all[2 * pl_comm_world_rank(tp, m)];
        core += all[2 * pl_comm_world_rank(tp, m) + 1];
    }
    free(all);
    const double single = run->oracle_flops - core;
    const double hi = WORK_HI * single + WORK_GATHERED * (t - 1) * run->activation_floats;
    if (single <= 0 || group < WORK_LO * single || group > hi)
        gr_fail("outside the TP region (the kit's core) your block's %d ranks did %.4g FLOPs "
             "in all, %.2fx the single device's %.4g for the same tokens (the FLOPs ledger; "
             "allowed %.2fx to %.2fx here, the most being %.2fx plus %.0f FLOPs per element of "
             "the [B*T, C] activation for each rank beyond the first): %s (section 5)", t, group,
             group / single, single, WORK_LO, hi / single, WORK_HI, WORK_GATHERED,
             group > single ? "work done more than once. The layernorms, dropouts, residual "
                              "adds and row-parallel biases act on each token alone, so each "
                              "rank runs them on its own T/t tokens only; a layernorm on the "
                              "gathered sequence by every rank does t times the work sequence "
                              "parallelism exists to split: gather after the layernorm"
                            : "work missing: every token's layernorms, dropouts, residual "
                              "adds and biases run once, on the rank that owns it");
}

static void run_block(struct pl_comm *tp, const struct sp_case *kcp, int d, int i)
{
    const int t = pl_comm_size(tp);
    const struct sp_case kc = *kcp;
    struct block_run run;
    memset(&run, 0, sizeof run);
    run_block_case(tp, &kc, d, time_wanted && i == 0, &run);
    if (pl_todo_what()) {
        gr_bt_free();
        return;
    }
    struct pl_model_config c = graded_config(0);
    const double NC = (double)kc.B * kc.T * c.d_model;
    char a[32], b[32], e[32];
    gr_parts_say_ok(P_CORRECT,
                    "outputs, input gradients and every split shard's gradient match the "
                    "single device in %d cases: dropout off and on, gradients accumulated over "
                    "two micro-batches, evaluation with dropout configured, and (the last, "
                    "B=%d T=%d) t=%d on a %d-rank world split into %d TP group%s",
                    NCASES, kc.B, kc.T, t, pl_size(), kc.dp, kc.dp == 1 ? "" : "s");
    gr_parts_say_ok(P_REPLICAS,
                    "ln1, ln2, b_proj and b_fc2: the same gradient on every rank, bit for "
                    "bit, equal to the single device's (t=%d)",
                    t);
    if (t > 1) {
        gr_parts_set(P_TRAFFIC);
        judge_block_traffic(&run, t, NC, c.d_model);
        gr_parts_set(P_MEMORY);
        judge_block_memory(&run, &c, t, kc.B, kc.T);
        if (time_wanted) {
            gr_parts_set(P_TIME);
            judge_block_work(tp, &run, t);
            /* the verdict is case 0's, whose TP group is the world: its t names it */
            gr_bt_judge(&time_verdict, i, P_TIME, "time", pl_size(), run.oracle_flops,
                        run.activation_floats, "4 all-gathers and 4 reduce-scatters of bsh",
                        "5");
        }
        gr_parts_set(P_CORRECT);
    }
    const double lab4 = 2 * 2 * 2.0 * (t - 1) / t * NC * 4.0;
    gr_parts_say_ok(P_TRAFFIC, "forward 2 all-gathers + 2 reduce-scatters, backward 2 + 2 and %ld "
           "re-gather%s of the stored layernorm shards, no all-reduce in the block: its "
           "conjugates sent %s per rank = Lab 4's 8bsh(t-1)/t x 4 bytes (b=%d, s=%d, h=%d), "
           "the re-gathers %s more", run.bwd.ag - 2, run.bwd.ag - 2 == 1 ? "" : "s",
           pl_format_bytes(lab4, a, sizeof a), kc.B, kc.T, c.d_model,
           pl_format_bytes(one_coll_bytes(NC, t) * (double)(run.bwd.ag - 2), b, sizeof b));
    gr_parts_say_ok(P_MEMORY, "held %s between forward and backward (B=%d, T=%d, t=%d) = the TP+SP "
           "formula 4/t (8NC + 2NF + 4N + B NH T^2); Lab 4's TP block keeps %s; peak of the "
           "step %s", pl_format_bytes(run.held, a, sizeof a), kc.B, kc.T, t,
           pl_format_bytes(pl_tp_block_act_bytes(&c, t, kc.B, kc.T), b, sizeof b),
           pl_format_bytes(run.peak, e, sizeof e));
}

/* ---- op train: K AdamW steps of a 2-block model, dropout on, against pl_model_step ----
 * The embedding and the head are the grader's (replicated, their gradients summed with raw
 * MPI); the blocks are the student's SP blocks on Lab 4's shards, with the student's
 * synchronisation of the replicated gradients; on a tp x dp grid the grader averages the
 * blocks' gradients over the replicas after it, as data parallelism does. */

#define TRAIN_STEPS 3
#define TRAIN_B 2

/* A training case. dp = 1: the TP group is the world. dp > 1: a tp x dp grid whose TP
 * groups are smaller than the world and numbered against its order (strided: the ranks w
 * with the same w % dp; else consecutive: the same w / t; highest world rank first), each
 * DP replica d on its own B sequences, d B to d B + B - 1 of the global batch, and the
 * trainer (the grader) averages the block gradients over the replicas after the student's
 * synchronisation, as data parallelism does. */
struct train_case {
    int dp, strided, B;
};

/* Case 0: the world as one TP group; case 1 (4 ranks and more): a tp x dp grid of strided
 * groups. The hidden suite's one case draws B, dp (2 or 4 on 8 ranks) and the groups' shape
 * (consecutive on 4 ranks, where the visible suite runs strided ones) from the seed. */
static struct train_case train_case_of(int i, int n)
{
    struct train_case k = {1, 0, TRAIN_B};
    if (hidden_cases) {
        float r[3];
        pl_rng_fill_uniform(r, 3, base_seed, pl_rng_stream("lab05.train"), 0, 0.0f, 1.0f);
        k.B = 1 + (int)(r[0] * 3) % 3;
        if (n >= 4) {
            k.dp = n >= 8 && r[1] < 0.5f ? 4 : 2;
            k.strided = n >= 8 && r[2] < 0.5f;
        }
    } else if (i == 1) {
        k.dp = 2, k.strided = 1;
    }
    return k;
}

static int train_cases(int n)
{
    return hidden_cases ? 1 : n >= 4 ? 2 : 1;
}

struct sp_model {
    struct pl_model_config cfg;
    struct pl_model *m; /* embedding and head (its blocks unused); the layout */
    int t, r, d, dp, B, strided;
    MPI_Comm dp_comm, tp_comm; /* the grader's: the DP reduction and the norm's sum */
    float *shard[2], *grad[2], *am[2], *av[2];
    struct pl_block_params sp[2], sg[2];
    int adam_t;
};

/* The tokens and targets of step `step`'s global batch of nseq sequences. */
static void step_tokens(const struct pl_model_config *c, int step, int nseq, int *tok,
                        int *tgt)
{
    size_t n = (size_t)nseq * c->seq_len;
    float *f = malloc(2 * n * sizeof *f);
    pl_rng_fill_int(f, 2 * n, base_seed, pl_rng_stream("lab05.tokens"), (uint64_t)step * 2 * n,
                    0, c->vocab - 1);
    for (size_t i = 0; i < n; i++) {
        tok[i] = (int)f[i];
        tgt[i] = (int)f[n + i];
    }
    free(f);
}

static void sp_model_new(struct sp_model *s, const struct pl_model_config *c,
                         struct pl_comm *tp, int d, const struct train_case *kt)
{
    memset(s, 0, sizeof *s);
    s->cfg = *c;
    s->t = pl_comm_size(tp);
    s->r = pl_comm_rank(tp);
    s->d = d, s->dp = kt->dp, s->B = kt->B, s->strided = kt->strided;
    PL_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, s->r, d, &s->dp_comm));
    PL_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, d, s->r, &s->tp_comm));
    s->m = pl_model_new(c, PL_MODEL_ALL);
    size_t sn = pl_tp_block_numel(c, s->t);
    for (int l = 0; l < c->n_layers; l++) {
        size_t off, n;
        pl_model_part_range(&s->m->layout, l, &off, &n);
        s->shard[l] = gr_op_alloc(sn, "lab05 train shard");
        s->grad[l] = gr_op_alloc(sn, "lab05 train shard grads");
        s->am[l] = gr_op_alloc(sn, "lab05 train m");
        s->av[l] = gr_op_alloc(sn, "lab05 train v");
        pl_zero(s->am[l], sn);
        pl_zero(s->av[l], sn);
        pl_tp_block_slice(c, s->t, s->r, s->m->params + off, s->shard[l]);
        pl_tp_block_bind(c, s->t, s->shard[l], &s->sp[l]);
        pl_tp_block_bind(c, s->t, s->grad[l], &s->sg[l]);
    }
}

static void sp_model_free(struct sp_model *s)
{
    for (int l = 0; l < s->cfg.n_layers; l++) {
        pl_mem_free(s->shard[l]);
        pl_mem_free(s->grad[l]);
        pl_mem_free(s->am[l]);
        pl_mem_free(s->av[l]);
    }
    pl_model_free(s->m);
    MPI_Comm_free(&s->dp_comm);
    MPI_Comm_free(&s->tp_comm);
}

/* Raw MPI sum of n floats of op memory over comm, times scale (the grader's part: the
 * embedding's and head's gradients over the world, the blocks' over the replicas). */
static void raw_sum(MPI_Comm comm, float *x, size_t n, float scale)
{
    float *h = gr_host_copy(x, n);
    PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, h, (int)n, MPI_FLOAT, MPI_SUM, comm));
    if (scale != 1.0f)
        for (size_t i = 0; i < n; i++) h[i] *= scale;
    pl_to_device(x, h, n * sizeof *h);
    free(h);
}

/* This rank's T/t tokens of every sequence of its replica, on the host and in op memory. */
struct local_batch {
    int *ltok, *ltgt, *dtok, *dtgt;
    size_t n;
};

static void local_batch_new(const struct sp_model *s, const int *tok, const int *tgt,
                            struct local_batch *lb)
{
    const int T = s->cfg.seq_len, Ts = T / s->t, B = s->B;
    lb->n = (size_t)B * Ts;
    lb->ltok = pl_mem_alloc(lb->n * sizeof(int), PL_MEM_WORK, PL_HOST, "tok");
    lb->ltgt = pl_mem_alloc(lb->n * sizeof(int), PL_MEM_WORK, PL_HOST, "tgt");
    for (int b = 0; b < B; b++)
        for (int i = 0; i < Ts; i++) {
            size_t g = (size_t)(s->d * B + b) * T + (size_t)s->r * Ts + i;
            lb->ltok[b * Ts + i] = tok[g];
            lb->ltgt[b * Ts + i] = tgt[g];
        }
    lb->dtok = pl_mem_alloc(lb->n * sizeof(int), PL_MEM_WORK, PL_DEVICE, "tok");
    lb->dtgt = pl_mem_alloc(lb->n * sizeof(int), PL_MEM_WORK, PL_DEVICE, "tgt");
    pl_to_device(lb->dtok, lb->ltok, lb->n * sizeof(int));
    pl_to_device(lb->dtgt, lb->ltgt, lb->n * sizeof(int));
}

static void local_batch_free(struct local_batch *lb)
{
    pl_mem_free(lb->ltok);
    pl_mem_free(lb->ltgt);
    pl_mem_free(lb->dtok);
    pl_mem_free(lb->dtgt);
}

/* Forward and backward of this rank's tokens: the grader's embedding (at the tokens'
 * positions) and head around the student's SP blocks. Returns the global batch's loss. */
static double sp_forward_backward(struct pl_comm *tp, struct sp_model *s,
                                  const struct local_batch *lb, const struct pl_model_ctx *ctx)
{
    const struct pl_model_config *c = &s->cfg;
    const int t = s->t, T = c->seq_len, Ts = T / t, C = c->d_model, L = c->n_layers, B = s->B;
    const size_t nl = (size_t)B * Ts * C;
    struct pl_model *m = s->m;
    struct pl_embed_params e = m->embed, eg = m->embed_g;
    e.wpe += (size_t)s->r * Ts * C;
    eg.wpe += (size_t)s->r * Ts * C;
    float *xs[3];
    for (int k = 0; k < 3; k++) xs[k] = gr_op_alloc(nl, "lab05 train stream");
    struct pl_sp_block_acts acts[2];
    pl_embed_forward(c, &e, lb->dtok, B, Ts, xs[0]);
    for (int l = 0; l < L; l++) {
        pl_sp_block_acts_new(&acts[l], c, t, B, T);
        sp_block_forward(tp, c, l, &s->sp[l], &acts[l], ctx, xs[l % 2], xs[(l + 1) % 2]);
    }
    struct pl_head_acts ha;
    pl_head_acts_new(&ha, c, B, Ts);
    double loss = gr_global_loss(pl_head_forward(c, &m->head, &ha, xs[L % 2], lb->dtgt));
    pl_head_backward(c, &m->head, &m->head_g, &ha, ctx, xs[2]);
    pl_head_acts_free(&ha);
    for (int l = L - 1; l >= 0; l--) {
        float *dy = xs[2], *dx = xs[(l + 1) % 2];
        sp_block_backward(tp, c, l, &s->sp[l], &s->sg[l], &acts[l], ctx, dy, dx);
        pl_sp_block_acts_free(&acts[l]);
        float *tmp = xs[2];
        xs[2] = dx;
        xs[(l + 1) % 2] = tmp;
    }
    pl_embed_backward(c, &eg, lb->dtok, B, Ts, xs[2]);
    for (int k = 0; k < 3; k++) pl_mem_free(xs[k]);
    return loss;
}

/* Relative L2 error of got against ref (op memory), measured against at least
 * rms^2 x n: a tensor whose norm is below the shard's RMS times sqrt(its size) (a bias that
 * started at zero, whose gradient may be rounding alone, as the key bias's is) never fails
 * on rounding alone. */
static double rel_floor(const float *got, const float *ref, size_t n, double rms)
{
    float *g = gr_host_copy(got, n), *r = gr_host_copy(ref, n);
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)g[i] - r[i]) * ((double)g[i] - r[i]);
        den += (double)r[i] * r[i];
    }
    free(g);
    free(r);
    double floor = rms * rms * (double)n;
    return sqrt(num / (den > floor ? den : floor));
}

/* The single device's gradients of the blocks on the sequences of replica d (all replicas
 * summed when d < 0), at the reference's current parameters, this rank's shard of block l
 * in want[l]. */
static void replica_reference(struct pl_model *ref, const struct sp_model *s, const int *dtok,
                              const int *dtgt, int d, float **want)
{
    const struct pl_model_config *c = &s->cfg;
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1;
    ctx.seed = base_seed ^ 0x5eedULL;
    ctx.step = (uint64_t)s->adam_t + 1;
    pl_model_zero_grad(ref);
    for (int k = d < 0 ? 0 : d; k < (d < 0 ? s->dp : d + 1); k++) {
        const size_t at = (size_t)k * s->B * c->seq_len;
        ctx.seq0 = (int64_t)k * s->B;
        pl_model_forward(ref, dtok + at, dtgt + at, s->B, &ctx);
        pl_model_backward(ref, &ctx);
    }
    for (int l = 0; l < c->n_layers; l++) {
        size_t off, nb;
        pl_model_part_range(&ref->layout, l, &off, &nb);
        pl_tp_block_slice(c, s->t, s->r, ref->grads + off, want[l]);
    }
    pl_model_free_acts(ref);
}

/* What a failure on a tp x dp grid adds: this rank's group, and that it is not the world. */
static void train_grid_hint(struct pl_comm *tp, const struct sp_model *s, int world_matched,
                            char *buf, size_t len)
{
    char members[160] = "";
    for (int m = 0; m < s->t; m++) {
        size_t l = strlen(members);
        snprintf(members + l, sizeof members - l, "%s%d", m ? ", " : "",
                 pl_comm_world_rank(tp, m));
    }
    snprintf(buf, len, "this case runs on a tp=%d x dp=%d grid of %s TP groups: your TP group "
             "is world ranks "
             "%s, TP ranks 0 to %d in that order (not the world's), and replica %d holds its "
             "own %d sequence%s%s: the TP group is not the world. The rows of the dropout mask "
             "and the tokens a rank holds come from pl_comm_rank(tp) and pl_comm_size(tp), and "
             "the collectives run on tp; pl_rank(), pl_size() and pl_comm_world() are the "
             "world's (sections 4 and 6)", s->t, s->dp,
             s->strided ? "strided" : "consecutive", members, s->t - 1, s->d, s->B,
             s->B > 1 ? "s" : "", world_matched ? ", and the case whose TP group was the whole world matched" : "");
}

/* On a tp x dp grid, after the student's synchronisation and before the replicas are
 * averaged: every tensor of this rank's shards against the single device's gradient on its
 * replica's sequences alone. A replicated one that holds every replica's sum was
 * synchronised over the world. */
static void check_replica_grads(struct pl_comm *tp, const struct sp_model *s,
                                struct pl_model *ref, const int *dtok, const int *dtgt,
                                int step, int world_matched)
{
    const struct pl_model_config *c = &s->cfg;
    const size_t sn = pl_tp_block_numel(c, s->t);
    float *want[2], *all[2] = {NULL, NULL};
    for (int l = 0; l < c->n_layers; l++) want[l] = gr_op_alloc(sn, "replica's expected grads");
    replica_reference(ref, s, dtok, dtgt, s->d, want);
    for (int l = 0; l < c->n_layers && gr_parts_ok(); l++) {
        struct pl_tp_tensor d[PL_TP_BLOCK_TENSORS];
        pl_tp_block_tensors(c, l, s->t, d);
        const double rms = sqrt(pl_grad_norm_sq(want[l], sn) / (double)sn);
        for (int k = 0; k < PL_TP_BLOCK_TENSORS && gr_parts_ok(); k++) {
            const size_t o = d[k].shard_offset, n = d[k].shard_numel;
            const double e = rel_floor(s->grad[l] + o, want[l] + o, n, rms);
            if (e <= TOL_BWD) continue;
            const int rep = d[k].split == PL_TP_REPLICATED;
            char why[1000];
            if (rep && !all[0]) {
                for (int m = 0; m < c->n_layers; m++) all[m] = gr_op_alloc(sn, "every replica's");
                replica_reference(ref, s, dtok, dtgt, -1, all);
            }
            if (rep && rel_floor(s->grad[l] + o, all[l] + o, n, rms) <= TOL_BWD)
                snprintf(why, sizeof why, "it is the sum of all %d replicas' gradients, each "
                         "on its own sequences: sp_sync_replicated_grads reduced over the world "
                         "(pl_comm_world()), which holds every replica, where it must reduce "
                         "over tp, the TP group (a tp=%d x dp=%d grid here). Each replica's "
                         "gradient is its own until the data-parallel reduction, the trainer's, "
                         "averages them after yours (section 6)", s->dp, s->t, s->dp);
            else
                train_grid_hint(tp, s, world_matched, why, sizeof why);
            gr_fail("gradient of %.64s (your shard%s) at step %d, after sp_sync_replicated_grads "
                    "and before the replicas are averaged: relative L2 error %.2e against the "
                    "single device's on replica %d's %d sequence%s (tolerance %.0e): %s",
                    d[k].name, rep ? ", replicated" : "", step + 1, e, s->d, s->B,
                    s->B > 1 ? "s" : "", TOL_BWD, why);
        }
    }
    for (int l = 0; l < c->n_layers; l++) {
        pl_mem_free(want[l]);
        if (all[l]) pl_mem_free(all[l]);
    }
}

/* The student's synchronisation of the blocks' replicated gradients (checked per replica
 * on a grid), the trainer's average over the replicas and sums of the embedding's and head's,
 * and the clipping scale from the global norm: replicated tensors counted once, split ones
 * summed over the TP group. */
static float sp_sync_and_clip(struct pl_comm *tp, struct sp_model *s,
                              const struct pl_adamw_config *opt, struct pl_model *ref,
                              const int *dtok, const int *dtgt, int step, int world_matched)
{
    const struct pl_model_config *c = &s->cfg;
    struct pl_model *m = s->m;
    const float inv_dp = 1.0f / (float)s->dp;
    for (int l = 0; l < c->n_layers; l++) sp_sync_replicated_grads(tp, c, &s->sg[l]);
    if (s->dp > 1) {
        check_replica_grads(tp, s, ref, dtok, dtgt, step, world_matched);
        for (int l = 0; l < c->n_layers; l++)
            raw_sum(s->dp_comm, s->grad[l], pl_tp_block_numel(c, s->t), inv_dp);
    }
    size_t eo, en, ho, hn;
    pl_model_part_range(&m->layout, PL_PART_EMBED, &eo, &en);
    pl_model_part_range(&m->layout, PL_PART_HEAD(c), &ho, &hn);
    raw_sum(MPI_COMM_WORLD, m->grads + eo, en, inv_dp);
    raw_sum(MPI_COMM_WORLD, m->grads + ho, hn, inv_dp);
    struct pl_tp_tensor d[PL_TP_BLOCK_TENSORS];
    pl_tp_block_tensors(c, 0, s->t, d);
    double rep = pl_grad_norm_sq(m->grads + eo, en) + pl_grad_norm_sq(m->grads + ho, hn);
    double split = 0;
    for (int l = 0; l < c->n_layers; l++)
        for (int k = 0; k < PL_TP_BLOCK_TENSORS; k++) {
            double q = pl_grad_norm_sq(s->grad[l] + d[k].shard_offset, d[k].shard_numel);
            if (d[k].split == PL_TP_REPLICATED) rep += q;
            else split += q;
        }
    PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &split, 1, MPI_DOUBLE, MPI_SUM, s->tp_comm));
    return pl_clip_scale(rep + split, opt->grad_clip);
}
/* AdamW on the embedding and head (whole) and on this rank's block shards, gradients scaled
 * by the clipping factor first. */
static void sp_adamw(struct sp_model *s, float scale, const struct pl_adamw_config *opt)
{
    const struct pl_model_config *c = &s->cfg;
    struct pl_model *m = s->m;
    const size_t sn = pl_tp_block_numel(c, s->t);
    s->adam_t++;
    if (!m->adam_m) {
        m->adam_m = pl_mem_alloc(m->layout.numel * sizeof(float), PL_MEM_OPTIM, PL_DEVICE, "m");
        m->adam_v = pl_mem_alloc(m->layout.numel * sizeof(float), PL_MEM_OPTIM, PL_DEVICE, "v");
    }
    size_t parts[2][2];
    pl_model_part_range(&m->layout, PL_PART_EMBED, &parts[0][0], &parts[0][1]);
    pl_model_part_range(&m->layout, PL_PART_HEAD(c), &parts[1][0], &parts[1][1]);
    for (int k = 0; k < 2; k++) {
        if (scale < 1.0f) pl_scale(m->grads + parts[k][0], parts[k][1], scale);
        pl_model_adamw_flat(&m->layout, parts[k][0], parts[k][1], m->params + parts[k][0],
                            m->grads + parts[k][0], m->adam_m + parts[k][0],
                            m->adam_v + parts[k][0], s->adam_t, opt);
    }
    for (int l = 0; l < c->n_layers; l++) {
        struct pl_tp_tensor dl[PL_TP_BLOCK_TENSORS];
        pl_tp_block_tensors(c, l, s->t, dl);
        if (scale < 1.0f) pl_scale(s->grad[l], sn, scale);
        for (int k = 0; k < PL_TP_BLOCK_TENSORS; k++) {
            const struct pl_param_desc *pd = pl_model_find_param(&m->layout, dl[k].name);
            size_t o = dl[k].shard_offset;
            pl_adamw_step(s->shard[l] + o, s->grad[l] + o, s->am[l] + o, s->av[l] + o,
                          dl[k].shard_numel, s->adam_t, opt->lr, opt->beta1, opt->beta2,
                          opt->eps, pd && pd->decay ? opt->weight_decay : 0.0f);
        }
    }
}

/* One step as pl_model_step: zero, forward, backward, sync, clip on the global norm, AdamW.
 * tok, tgt: the global batch on the host (replica d's sequences are its own), dtok, dtgt the
 * same in op memory for the per-replica reference. Returns the global batch's loss. */
static double sp_model_step(struct pl_comm *tp, struct sp_model *s, const int *tok,
                            const int *tgt, const struct pl_adamw_config *opt,
                            struct pl_model *ref, const int *dtok, const int *dtgt,
                            int world_matched)
{
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1;
    ctx.seed = base_seed ^ 0x5eedULL;
    ctx.step = (uint64_t)s->adam_t + 1;
    ctx.seq0 = (int64_t)s->d * s->B;
    ctx.loss_scale = 1.0f / s->t; /* the head's loss is the mean over this rank's tokens */
    pl_model_zero_grad(s->m);
    const size_t sn = pl_tp_block_numel(&s->cfg, s->t);
    for (int l = 0; l < s->cfg.n_layers; l++) pl_zero(s->grad[l], sn);
    struct local_batch lb;
    local_batch_new(s, tok, tgt, &lb);
    double loss = sp_forward_backward(tp, s, &lb, &ctx);
    sp_adamw(s, sp_sync_and_clip(tp, s, opt, ref, dtok, dtgt, s->adam_t, world_matched), opt);
    local_batch_free(&lb);
    return loss;
}

/* K AdamW steps of the 2-block model on case i's grid against pl_model_step on the global
 * batch (every replica's sequences): every loss, every parameter shard after the steps, and
 * on a grid each replica's gradients at every step. */
static void run_train(struct pl_comm *tp, const struct train_case *kt, int d, int i)
{
    const int t = pl_comm_size(tp), r = pl_comm_rank(tp);
    struct pl_model_config c = graded_config(DROPOUT);
    c.n_layers = 2;
    struct pl_adamw_config opt = pl_adamw_config_default();
    const int nseq = kt->dp * kt->B;
    const size_t n = (size_t)nseq * c.seq_len;
    int *tok = pl_mem_alloc(n * sizeof(int), PL_MEM_WORK, PL_HOST, "tokens");
    int *tgt = pl_mem_alloc(n * sizeof(int), PL_MEM_WORK, PL_HOST, "targets");
    int *dtok = pl_mem_alloc(n * sizeof(int), PL_MEM_WORK, PL_DEVICE, "tokens");
    int *dtgt = pl_mem_alloc(n * sizeof(int), PL_MEM_WORK, PL_DEVICE, "targets");
    struct pl_model *ref = pl_model_new(&c, PL_MODEL_ALL);
    struct sp_model s;
    sp_model_new(&s, &c, tp, d, kt);
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1;
    ctx.seed = base_seed ^ 0x5eedULL;
    double want[TRAIN_STEPS], got[TRAIN_STEPS];
    for (int k = 0; k < TRAIN_STEPS; k++) {
        step_tokens(&c, k, nseq, tok, tgt);
        pl_to_device(dtok, tok, n * sizeof(int));
        pl_to_device(dtgt, tgt, n * sizeof(int));
        got[k] = sp_model_step(tp, &s, tok, tgt, &opt, ref, dtok, dtgt, i > 0);
        want[k] = pl_model_step(ref, dtok, dtgt, nseq, &opt, &ctx);
        if (pl_todo_what()) break;
    }
    double err = 0;
    int bad = pl_todo_what() ? -1 : gr_check_losses(got, want, TRAIN_STEPS, &err);
    if (bad >= 0)
        gr_fail("the loss of step %d is %.7g where the single device's is %.7g (relative error "
             "%.2e): the SP blocks in a model with dropout on train a different model "
             "(sections 4 to 6)", bad + 1, got[bad], want[bad], err);
    /* every parameter after K steps: the shards against their blocks of the reference */
    for (int l = 0; l < c.n_layers && gr_parts_ok() && !pl_todo_what(); l++) {
        size_t off, nb;
        pl_model_part_range(&ref->layout, l, &off, &nb);
        size_t sn = pl_tp_block_numel(&c, t);
        float *w = gr_op_alloc(sn, "expected shard");
        pl_tp_block_slice(&c, t, r, ref->params + off, w);
        double floor_rms = sqrt(pl_grad_norm_sq(w, sn) / (double)sn);
        struct pl_tp_tensor dl[PL_TP_BLOCK_TENSORS];
        pl_tp_block_tensors(&c, l, t, dl);
        for (int k = 0; k < PL_TP_BLOCK_TENSORS && gr_parts_ok(); k++) {
            const size_t o = dl[k].shard_offset, sz = dl[k].shard_numel;
            double e = rel_floor(s.shard[l] + o, w + o, sz, floor_rms);
            if (!(e <= GR_TOL_PARAMS))
                gr_fail("%.64s (your shard) after %d steps: relative L2 error %.2e (tolerance "
                        "%.0e)%s", dl[k].name, TRAIN_STEPS, e, GR_TOL_PARAMS,
                        dl[k].split == PL_TP_REPLICATED ? ": a replicated tensor whose "
                        "gradient was not the whole one on every rank steps differently "
                        "(section 6)" : "");
        }
        pl_mem_free(w);
    }
    if (kt->dp > 1)
        gr_parts_say_ok(P_CORRECT,
                        "%d AdamW steps of a %d-block model with dropout p=%.1f: every loss and "
                        "every parameter shard match pl_model_step%s on a tp=%d x dp=%d grid of "
                        "%s TP groups numbered against the world's order, where each replica's "
                        "gradients after your synchronisation match the single device's on its "
                        "own %d sequence%s",
                        TRAIN_STEPS, c.n_layers, (double)DROPOUT,
                        i > 0 ? " with the TP group the whole world and" : "", t, kt->dp,
                        kt->strided ? "strided" : "consecutive", kt->B, kt->B > 1 ? "s" : "");
    else
        gr_parts_say_ok(P_CORRECT,
                        "%d AdamW steps of a %d-block model with dropout p=%.1f: every loss and "
                        "every parameter shard match pl_model_step (t=%d)",
                        TRAIN_STEPS, c.n_layers, (double)DROPOUT, t);
    sp_model_free(&s);
    pl_model_free(ref);
    pl_mem_free(tok);
    pl_mem_free(tgt);
    pl_mem_free(dtok);
    pl_mem_free(dtgt);
}

/* ---- figures: `make plots LAB=05` (bench mode with --plots-dir) ---- */

static const char *plots_dir;

static FILE *svg_open(const char *name, int w, int h)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", plots_dir, name);
    FILE *f = fopen(path, "w");
    if (!f) pl_usage_error("--plots-dir %s: cannot write %s (does the folder exist?)", plots_dir,
                           path);
    pl_svg_begin(f, w, h, 12);
    return f;
}

static void svg_close(FILE *f, const char *name)
{
    int bad = pl_svg_end(f) != 0;
    if (fclose(f) != 0 || bad) pl_fatal("could not write %s/%s", plots_dir, name);
    printf("wrote %s/%s\n", plots_dir, name);
}

/* One stored [s, h] activation of rank r as a cell: the whole outlined, the part the rank
 * holds filled (rows: tokens [r0, r1) of s; columns: channels [c0, c1) of h). */
static void svg_cell(FILE *f, double x, double y, double w, double h, double r0, double r1,
                     double c0, double c1, const char *fill)
{
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"#888\"/>\n", x, y, w, h);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
            x + c0 * w, y + r0 * h, (c1 - c0) * w, (r1 - r0) * h, fill);
}

/* TP (Lab 4) above TP+SP (this lab), t = 2: what each rank holds at each step of a half,
 * from the layouts of tp_shard.h and sp_shard.h (rows: tokens, columns: channels). */
static void plot_layout(void)
{
    static const char *steps[] = {"x", "layernorm", "TP region in", "heads / fc1",
                                  "TP region out", "dropout + residual"};
    const int t = 2, ns = 6;
    const double cw = 70, ch = 46, gap = 40, left = 150, top = 40, panel = 2 * (ch + 18) + 50;
    FILE *f = svg_open("05-sequence-parallel-layout.svg", (int)(left + ns * (cw + gap) + 60),
                       (int)(top + 2 * panel + 22));
    for (int sp = 0; sp < 2; sp++) {
        double y0 = top + sp * panel;
        fprintf(f, "<text x=\"10\" y=\"%.1f\" font-weight=\"bold\">%s</text>\n", y0 - 12,
                sp ? "TP + SP (Lab 5): f, g become all-gather / reduce-scatter along s"
                   : "TP (Lab 4): f is the identity forward, g an all-reduce");
        for (int k = 0; k < ns; k++)
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                    left + k * (cw + gap) + cw / 2, y0 + 4, steps[k]);
        for (int r = 0; r < t; r++) {
            double y = y0 + 12 + r * (ch + 18);
            fprintf(f, "<text x=\"10\" y=\"%.1f\">rank %d</text>\n", y + ch / 2 + 4, r);
            for (int k = 0; k < ns; k++) {
                double x = left + k * (cw + gap);
                /* outside the TP region: every token (TP) or this rank's s/t (SP), all h */
                double r0 = 0, r1 = 1, c0 = 0, c1 = 1;
                const char *fill = "#e07b39"; /* replicated */
                if (k == 3) { /* inside: every token, this rank's channels */
                    c0 = (double)r / t;
                    c1 = (double)(r + 1) / t;
                    fill = "#3a7dc9";
                } else if (sp && k != 2) { /* the gathered input is whole on every rank */
                    r0 = (double)r / t;
                    r1 = (double)(r + 1) / t;
                    fill = "#4caf50";
                }
                svg_cell(f, x, y, cw, ch, r0, r1, c0, c1, fill);
                if (k + 1 < ns)
                    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                            "stroke=\"#444\"/>\n", x + cw, y + ch / 2, x + cw + gap, y + ch / 2);
            }
        }
        const char *in = sp ? "all-gather" : "f: identity",
                   *out = sp ? "reduce-scatter" : "g: all-reduce";
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#a00\">%s</text>\n",
                left + 2 * (cw + gap) - gap / 2, y0 + panel - 30, in);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#a00\">%s</text>\n",
                left + 4 * (cw + gap) - gap / 2, y0 + panel - 30, out);
    }
    fprintf(f, "<text x=\"10\" y=\"%.1f\" fill=\"#555\" font-size=\"11\">a cell is an "
            "[s, h] activation (rows: tokens, columns: channels), filled where the rank holds "
            "it:</text>\n<text x=\"10\" y=\"%.1f\" fill=\"#555\" font-size=\"11\">orange "
            "whole on every rank, green split along s, blue split along h</text>\n",
            top + 2 * panel - 2, top + 2 * panel + 12);
    svg_close(f, "05-sequence-parallel-layout.svg");
}

/* Bytes per rank against t: the three measured series as points, the kit's formulas as
 * lines. */
static void plot_bytes(const struct pl_model_config *c, int B, int T, const double *meas,
                       int nt)
{
    const double W = 700, H = 360, L = 80, R = 170, TOP = 30, BOT = 50;
    double ymax = 0;
    for (int i = 0; i < 3 * nt; i++) ymax = meas[i] > ymax ? meas[i] : ymax;
    ymax *= 1.1;
    FILE *f = svg_open("05-sequence-parallel-activations.svg", (int)W, (int)H);
#define PX(t) (L + ((t) - 1) / 3.0 * (W - L - R))
#define PY(v) (H - BOT - (v) / ymax * (H - TOP - BOT))
    fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", L, H - BOT,
            W - R, H - BOT);
    fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", L, TOP, L,
            H - BOT);
    for (int t = 1; t <= 4; t++)
        fprintf(f, "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%d</text>\n", PX(t),
                H - BOT + 16, t);
    fprintf(f, "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">t (TP degree)</text>\n",
            PX(2.5), H - 12);
    for (int k = 0; k <= 4; k++)
        fprintf(f, "<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\">%.0f kB</text>\n", L - 6,
                PY(ymax * k / 4) + 4, ymax * k / 4 / 1000);
    fprintf(f, "<text x=\"10\" y=\"18\">activation bytes per rank of one block (b=%d, s=%d, "
            "h=%d), measured (points) and the kit's formulas (lines)</text>\n", B, T,
            c->d_model);
    static const char *names[] = {"no TP", "TP (Lab 4)", "TP + SP"};
    static const char *colors[] = {"#777", "#e07b39", "#4caf50"};
    for (int sr = 0; sr < 3; sr++) {
        if (sr > 0) { /* the formula's line */
            fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" points=\"", colors[sr]);
            for (int k = 0; k <= 30; k++) {
                double t = 1 + 3.0 * k / 30;
                double N = (double)B * T, C = c->d_model, F = c->d_ff, NH = c->n_heads;
                double v = sr == 2 ? pl_sp_block_act_bytes(c, 1, B, T) / t
                                   : 4.0 * (4 * N * C + 4 * N) +
                                         4.0 / t * (4 * N * C + 2 * N * F + B * NH * (double)T * T);
                fprintf(f, "%.1f,%.1f ", PX(t), PY(v));
            }
            fprintf(f, "\"/>\n");
        }
        for (int i = 0; i < nt; i++) {
            int t = 1 << i;
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n", PX(t),
                    PY(meas[sr * nt + i]), colors[sr]);
        }
        fprintf(f, "<circle cx=\"%g\" cy=\"%g\" r=\"4\" fill=\"%s\"/><text x=\"%g\" "
                "y=\"%g\">%s</text>\n", W - R + 20, TOP + 20 + 20.0 * sr, colors[sr],
                W - R + 30, TOP + 24 + 20.0 * sr, names[sr]);
    }
#undef PX
#undef PY
    svg_close(f, "05-sequence-parallel-activations.svg");
}

/* ---- bench: activation bytes per rank against t ---- */

static double acts_bytes_of(int kind, const struct pl_model_config *c, int t, int B, int T)
{
    struct pl_mem_stats s0, s1;
    pl_mem_get_stats(&s0);
    struct pl_block_acts ba;
    struct pl_tp_block_acts ta;
    if (kind == 0) pl_block_acts_new(&ba, c, B, T);
    else pl_tp_block_acts_new(&ta, c, t, B, T);
    pl_mem_get_stats(&s1);
    if (kind == 0) pl_block_acts_free(&ba);
    else pl_tp_block_acts_free(&ta);
    return (double)(s1.current[PL_MEM_ACTIV] - s0.current[PL_MEM_ACTIV]);
}

/* Sections 1 and 7 of the handout from the kit's fp32 formulas, for the lab's block and for
 * the GPT-3 block of the questions: Lab 4's TP block keeps R + S/t bytes (R what does not
 * shrink with t: both halves' inputs, layernorm outputs and statistics), so R and S come from
 * pl_tp_block_act_bytes at t = 1 and 2; the first t dividing the heads where R exceeds S/t,
 * and what TP + SP keeps there as a fraction of TP's. */
static void handout_split_figures(const char *what, const char *name,
                                  const struct pl_model_config *c, int B, int T)
{
    const double tp1 = pl_tp_block_act_bytes(c, 1, B, T), tp2 = pl_tp_block_act_bytes(c, 2, B, T);
    const double R = 2 * tp2 - tp1, S = tp1 - R;
    int t = 1;
    while (t < c->n_heads && (R <= S / t || c->n_heads % t)) t++;
    const double f = pl_sp_block_act_bytes(c, t, B, T) / pl_tp_block_act_bytes(c, t, B, T);
    char a[32], b[32];
    pl_print0("# handout: for %s (b = %d, s = %d, h = %d, %d heads) the terms that do not shrink "
              "with t, %s, exceed the split ones from t = %d on (%s there)\n", what, B, T,
              c->d_model, c->n_heads, pl_format_bytes(R, a, sizeof a), t,
              pl_format_bytes(S / t, b, sizeof b));
    pl_print0("# handout: with sequence parallelism a rank keeps %.2f of Lab 4's TP bytes at "
              "t = %d for %s\n", f, t, name);
}

static void bench(const struct gr_args *args)
{
    base_seed = args->seed;
    in_bench = 1;
    gr_parts_reset(PART_NAMES, NPARTS);
    struct pl_model_config c = graded_config(0);
    const int B = 2, T = seq_flag ? seq_flag : 16;
    pl_print0("# Lab 5 sequence parallelism: %s, activation bytes per rank kept between one "
              "block's forward\n# and backward (b=%d, s=%d, h=%d, %d heads, d_ff %d), from the "
              "memory ledger; the kit's fp32\n# formulas beside Korthikanti et al.'s 16-bit "
              "ones for the same shape\n#\n", args->label, B, T, c.d_model, c.n_heads, c.d_ff);
    double meas[9] = {0};
    int nt = 0;
    pl_print0("# %3s %12s %12s %12s %12s %14s %14s %8s\n", "t", "no TP", "TP", "TP+SP",
              "TP+SP kit", "K. TP 16-bit", "K. TP+SP 16b", "correct");
    for (int t = 1; t <= 4 && t <= pl_size(); t *= 2) {
        char err[320];
        if (pl_sp_seq_error(&c, t, T, err, sizeof err)) {
            pl_print0("  %3d   refused: %s\n", t, err);
            continue;
        }
        struct pl_comm *tp = pl_comm_split(pl_comm_world(), pl_rank() < t ? 0 : -1,
                                           pl_rank(), "tp");
        double v[2] = {0, 0};
        int ok = 1;
        if (tp) {
            struct block_run run;
            memset(&run, 0, sizeof run);
            struct sp_case kc = {B, T, 1, 0, 1, 1, 0, 1, 0, DROPOUT, "tp"};
            pl_todo_reset();
            run_block_case(tp, &kc, 0, 0, &run);
            v[0] = run.held;
            ok = gr_parts_ok_of(P_CORRECT) && gr_parts_ok_of(P_REPLICAS) && !pl_todo_what();
            pl_comm_free(tp);
        }
        v[1] = ok;
        PL_CHECK_MPI(MPI_Bcast(v, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD));
        double s = T, b = B, h = c.d_model, as = c.n_heads;
        double ktp = s * b * h * (10 + 24.0 / t + 5 * as * s / (h * t));
        double ksp = s * b * h * (34.0 / t + 5 * as * s / (h * t));
        int i = t == 1 ? 0 : t == 2 ? 1 : 2;
        meas[i] = acts_bytes_of(0, &c, t, B, T);
        meas[3 + i] = acts_bytes_of(1, &c, t, B, T);
        meas[6 + i] = v[0];
        nt = i + 1;
        pl_print0("  %3d %12.0f %12.0f %12.0f %12.0f %14.0f %14.0f %8s\n", t, meas[i],
                  meas[3 + i], v[0], pl_sp_block_act_bytes(&c, t, B, T), ktp, ksp,
                  v[1] > 0 ? "yes" : "NO");
        if (t > 1 && v[1] > 0) {
            char a[32], b[32];
            pl_print0("# handout: at t = %d a rank keeps %s per block with sequence parallelism "
                      "where Lab 4's TP keeps %s\n", t, pl_format_bytes(v[0], a, sizeof a),
                      pl_format_bytes(meas[3 + i], b, sizeof b));
        }
        gr_parts_reset(PART_NAMES, NPARTS);
    }
    /* the graded shape, whatever --seq says: the handout's sentences are about it */
    handout_split_figures("this lab's block", "this lab's block", &c, 2, c.seq_len);
    struct pl_model_config g = lab05_gpt3_block();
    handout_split_figures("the GPT-3 block of the questions", "the GPT-3 block", &g, Q5_B, Q5_S);
    if (plots_dir && pl_rank() == 0) {
        double m[9];
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < nt; i++) m[k * nt + i] = meas[k * 3 + i];
        plot_layout();
        plot_bytes(&c, B, T, m, nt);
    }
}

/* ---- the lab's part of the harness ---- */

enum kind { K_CONJ, K_BLOCK, K_TRAIN };
static enum kind the_kind;

/* ---- perf mode: the SP block on the wall clock against the kit's parts ---- */

/* The student's block forward and backward on PERF_B sequences against the kit's parts of the
 * same work measured in the same run: the single-device block (lib/model.h) on PERF_B/t
 * sequences, the same products and the same local layernorms and residuals as one rank
 * does, then the library's four all-gathers and four reduce-scatters of the activation on
 * the TP group. The harness pairs the rounds (report.h). The modelled timeline grades what
 * the ledger counts; this grades what the code costs. */
#define PERF_B 8     /* sequences: t = 1, 2 and 4 divide it */
#define PERF_REPS 10 /* blocks per timed round */
#define PERF_ROUNDS 5
#define PERF_BATCHES 3

static struct {
    struct pl_comm *tp;
    struct block_case k;
    struct pl_sp_block_acts a;
    struct pl_block_acts ra;
    float *by, *bdx, *full, *part; /* the kit's: its block's outputs, the gathered [N, C] */
} pf;

static void perf_student(void *ctx)
{
    (void)ctx;
    sp_block_forward(pf.tp, &pf.k.c, 0, &pf.k.sp, &pf.a, &pf.k.ctx, pf.k.lx, pf.k.ly);
    sp_block_backward(pf.tp, &pf.k.c, 0, &pf.k.sp, &pf.k.sg, &pf.a, &pf.k.ctx, pf.k.ldy,
                      pf.k.ldx);
}

static void perf_kit(void *ctx)
{
    (void)ctx;
    pl_block_forward(&pf.k.c, 0, &pf.k.p, &pf.ra, &pf.k.ctx, pf.k.x, pf.by);
    pl_block_backward(&pf.k.c, 0, &pf.k.p, &pf.k.g, &pf.ra, &pf.k.ctx, pf.k.dy, pf.bdx);
    for (int i = 0; i < 4; i++) {
        pl_all_gather(pf.tp, pf.k.lx, pf.full, pf.k.nl);
        pl_reduce_scatter(pf.tp, pf.full, pf.part, pf.k.nl, PL_SUM);
    }
}

/* Seconds per block of one side, the slowest rank's. */
static double perf_round(void *ctx, int mine)
{
    return gr_perf_round(perf_kit, perf_student, ctx, PERF_REPS, mine);
}

static int probe(void *st)
{
    (void)st;
    if (the_kind != K_BLOCK) pl_usage_error_all("--mode perf: Lab 5 times --op block only");
    memset(&pf, 0, sizeof pf);
    struct pl_grid grid;
    char deg[32];
    snprintf(deg, sizeof deg, "tp=%d", pl_size());
    pl_grid_init_or_die(&grid, "tp", deg, pl_size());
    pf.tp = pl_grid_comm(&grid, pl_comm_world(), pl_grid_axis(&grid, "tp"));
    struct sp_case kc = {PERF_B, 16, 0, 0, 0, 0, 0, 1, 0, 0.0f, "tp"};
    struct block_case *k = &pf.k;
    block_case_new(pf.tp, &kc, 0, k);
    gr_case("SP block of %d sequences, t=%d, beside the kit's block on %d and the "
            "collectives", PERF_B, k->t, PERF_B / k->t);
    k->lx = local_rows(k->x, k->B, k->T, k->C, k->t, k->r);
    k->ldy = local_rows(k->dy, k->B, k->T, k->C, k->t, k->r);
    k->ly = gr_op_alloc(k->nl, "perf y"), k->ldx = gr_op_alloc(k->nl, "perf dx");
    pl_sp_block_acts_new(&pf.a, &k->c, k->t, k->B, k->T);
    pl_block_acts_new(&pf.ra, &k->c, k->B / k->t, k->T);
    pf.by = gr_op_alloc(k->nl, "perf kit y"), pf.bdx = gr_op_alloc(k->nl, "perf kit dx");
    pf.full = gr_op_alloc(k->nc, "perf gathered"), pf.part = gr_op_alloc(k->nl, "perf part");
    perf_student(NULL);
    return 1;
}

static double perf(void *st)
{
    (void)st;
    pl_comm_set_checks(0);
    perf_kit(NULL);
    struct gr_perf p;
    gr_perf_compare(perf_round, NULL, PERF_ROUNDS, PERF_BATCHES, &p);
    pl_comm_set_checks(1);
    char base[200];
    snprintf(base, sizeof base, "the kit's block on %d sequences and the library's 4 "
             "all-gathers and 4 reduce-scatters of [N, C], one after the other,",
             PERF_B / pf.k.t);
    double f = gr_perf_report_step(&p, (double)pf.k.B * pf.k.T, base,
                                   "the same products and the same bytes in both: look for "
                                   "hand-written loops where lib has an op, buffers allocated "
                                   "or zeroed that the block does not need, or whole-sequence "
                                   "copies outside the TP region (section 5)",
                                   "tokens_per_s_sp_block");
    float *bufs[] = {pf.by, pf.bdx, pf.full, pf.part};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) pl_mem_free(bufs[i]);
    pl_sp_block_acts_free(&pf.a);
    pl_block_acts_free(&pf.ra);
    block_case_free(&pf.k);
    pl_comm_free(pf.tp);
    return f;
}

static struct pl_flag lab_flags[] = {
    {"--seq", PL_FLAG_INT, &seq_flag, "T",
     "tokens per sequence of every case, a multiple of t up to 16 (default: the cases' own)", 0},
    {"--plots-dir", PL_FLAG_STR, &plots_dir, "DIR",
     "bench: also draw the handout's figures (layout, bytes vs t) as SVGs in DIR (default "
     "none)", 0},
};

static void *setup(const struct gr_args *a)
{
    base_seed = a->seed;
    hidden_cases = a->op && strstr(a->op, "-hidden") != NULL;
    the_kind = !a->op ? K_CONJ : !strncmp(a->op, "block", 5) ? K_BLOCK
               : !strncmp(a->op, "train", 5) ? K_TRAIN : K_CONJ;
    time_wanted = !strcmp(a->mode, "check") && strstr(a->parts, "time") != NULL;
    struct pl_model_config c = graded_config(0);
    char err[320];
    if (pl_tp_degree_error(&c, pl_size(), err, sizeof err))
        pl_usage_error_all("%d ranks form one TP group here: %s", pl_size(), err);
    if (seq_flag && (seq_flag > c.seq_len ||
                     pl_sp_seq_error(&c, pl_size(), seq_flag, err, sizeof err)))
        pl_usage_error_all("--seq %d: %s", seq_flag,
                           seq_flag > c.seq_len ? "longer than the graded model's seq_len=16"
                                                : err);
    return NULL;
}

static const char *subject(void *st)
{
    return the_kind == K_BLOCK ? "the SP block" : the_kind == K_TRAIN ? "SP training"
           : "the conjugates";
}

static int count_cases(void *st)
{
    return the_kind == K_BLOCK ? NCASES : the_kind == K_TRAIN ? train_cases(pl_size()) : 1;
}

static void describe(void *st, int i, char *buf, size_t len)
{
    if (the_kind == K_TRAIN) {
        struct train_case k = train_case_of(i, pl_size());
        if (k.dp > 1)
            snprintf(buf, len, "%d AdamW steps, 2 SP blocks, dropout on, t=%d on a tp=%d x "
                     "dp=%d grid (%s TP groups, numbered against the world's order), each "
                     "replica on its own %d sequence%s", TRAIN_STEPS, pl_size() / k.dp,
                     pl_size() / k.dp, k.dp, k.strided ? "strided" : "consecutive", k.B,
                     k.B > 1 ? "s" : "");
        else
            snprintf(buf, len, "%d AdamW steps, 2 SP blocks, dropout on, B=%d, t=%d",
                     TRAIN_STEPS, k.B, pl_size());
        return;
    }
    if (the_kind == K_CONJ) {
        snprintf(buf, len, "gather and scatter on B=3 sequences of %d tokens, t=%d",
                 4 * pl_size(), pl_size());
        return;
    }
    struct sp_case k = case_of(i, pl_size());
    char grid[64] = "";
    if (k.dp > 1)
        snprintf(grid, sizeof grid, " on a tp=%d x dp=%d grid (%s)", pl_size() / k.dp, k.dp,
                 k.order);
    snprintf(buf, len, "SP block, B=%d T=%d, t=%d%s, dropout %s%s", k.B, k.T,
             pl_size() / k.dp, grid,
             !k.dropout ? "off" : k.train ? "on" : "configured, evaluation (off)",
             k.accum ? ", gradients accumulated over 2 micro-batches" : "");
}

static void run(void *st, int i)
{
    gr_parts_reset(PART_NAMES, NPARTS);
    /* the block's cases on their grid: tp = the world, or tp x dp (each replica its own
     * data); the TP communicator is split from the world and freed after the case */
    if (the_kind == K_TRAIN) {
        /* dp > 1: TP groups of strided or consecutive ranks, the highest world rank first */
        const struct train_case kt = train_case_of(i, pl_size());
        const int n = pl_size(), w = pl_rank(), d = kt.strided ? w % kt.dp : w / (n / kt.dp);
        struct pl_comm *tp = pl_comm_split(pl_comm_world(), d, kt.dp > 1 ? n - w : w, "tp");
        run_train(tp, &kt, d, i);
        pl_comm_free(tp);
        return;
    }
    struct sp_case kc = case_of(i, pl_size());
    const int dp = the_kind == K_BLOCK ? kc.dp : 1;
    struct pl_grid grid;
    char deg[64];
    snprintf(deg, sizeof deg, "tp=%d,dp=%d", pl_size() / dp, dp);
    pl_grid_init_or_die(&grid, dp > 1 ? kc.order : "tp-dp", deg, pl_size());
    struct pl_comm *tp = pl_grid_comm(&grid, pl_comm_world(), pl_grid_axis(&grid, "tp"));
    const int d = pl_grid_coord(&grid, pl_rank(), pl_grid_axis(&grid, "dp"));
    if (the_kind == K_BLOCK) run_block(tp, &kc, d, i);
    else run_conjugates(tp);
    pl_comm_free(tp);
}

static int judge(void *st, int i, const char *part)
{
    for (int p = 0; p < NPARTS; p++)
        if (!strcmp(part, PART_NAMES[p]))
            return gr_parts_gather((enum part)p, i == count_cases(st) - 1);
    pl_usage_error_all("--parts %s: Lab 5 judges correct, replicas, traffic, memory and time",
                       part);
}

const struct gr_driver gr_lab_driver = {
    .flags = lab_flags,
    .nflags = (int)(sizeof lab_flags / sizeof lab_flags[0]),
    .setup = setup,
    .subject = subject,
    .correct_first = "must match the single device first",
    .ncases = count_cases,
    .describe = describe,
    .run = run,
    .judge = judge,
    .probe = probe,
    .perf = perf,
    .bench = bench,
};
