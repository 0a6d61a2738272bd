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
 *          [--seed S] [--seq T]                         t = the world size
 *   driver --mode bench [--seq T] [--plots-dir DIR]     activation bytes per rank vs t (4
 *                                                       ranks), and the handout's figures */
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block_time.h"
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

struct sp_case {
    int B, T, dropout, seq0, step;
};
#define NCASES 3

/* Case 0: dropout off; case 1: on, at a later sequence and step; case 2: on, batch and
 * sequence length drawn from the seed (a multiple of t up to seq_len). */
static struct sp_case case_of(int i, int t)
{
    struct sp_case k = {2, 16, 0, 0, 0};
    if (i >= 1) k = (struct sp_case){2, 16, 1, 3, 7};
    if (i == 2) {
        float r[3];
        pl_rng_fill_uniform(r, 3, base_seed, pl_rng_stream("lab05.shape"), 0, 0.0f, 1.0f);
        k.B = 1 + (int)(r[0] * 3) % 3;
        k.T = t * (1 + (int)(r[1] * (16 / t)) % (16 / t));
        k.seq0 = (int)(r[2] * 50);
        k.step = 11;
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
    double oracle_flops; /* the single device's forward and backward, from the ledger */
    double activation_floats; /* the whole [B, T, C] activation */
    struct gr_unseen unseen;  /* a core buffer in static storage (unseen.c) */
};

static const char *split_name(enum pl_tp_split s)
{
    return s == PL_TP_REPLICATED ? "replicated"
           : s == PL_TP_ROWS     ? "a row block"
                                 : "a column block";
}

/* The replicated tensors after the synchronisation: bitwise equal on every rank (collective),
 * then equal to the single device's. */
static int in_bench; /* the bench runs a TP group smaller than the world: no replica test */

static void judge_replicas(const struct pl_model_config *c, int t, const float *shard_g,
                           const float *want)
{
    struct pl_tp_tensor d[PL_TP_BLOCK_TENSORS];
    pl_tp_block_tensors(c, 0, t, d);
    /* collective first, every tensor on every rank; then each rank's values */
    for (int i = 0; i < PL_TP_BLOCK_TENSORS; i++) {
        if (d[i].split != PL_TP_REPLICATED) continue;
        int bad_rank = -1;
        size_t bad = 0;
        if (!gr_replicas_equal(shard_g + d[i].shard_offset, d[i].shard_numel, &bad_rank, &bad))
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
        char why[320] = "", what[PL_NAME_LEN + 128];
        if (t > 1 && fabs(s - t) < 1e-3 * t)
            snprintf(why, sizeof why, "it is %d (= t) times the single device's: summed over "
                     "the group twice, or reduced where every rank already held it whole", t);
        else if (t > 1 && fabs(s - 1.0 / t) < 1e-2 / t)
            /* equal on every rank (checked above), so reduced, but averaged */
            snprintf(why, sizeof why, "it is 1/t of the single device's and the same on "
                     "every rank: the partial sums were averaged (PL_AVG). Each rank's sum "
                     "covers its own T/t tokens, and the whole gradient is their sum: PL_SUM "
                     "(section 6)");
        snprintf(what, sizeof what, "gradient of %.64s (replicated) after the synchronisation",
                 d[i].name);
        gr_compare(what, got, ref, d[i].shard_numel, TOL_BWD, why[0] ? why : NULL);
    }
}

/* One block case's tensors: the full block and this rank's shard (with their gradients),
 * the input and output gradient of every token, and this rank's rows of each. */
struct block_case {
    struct pl_model_config c;
    int t, r, B, T, C;
    size_t nc, nl, full_numel, shard_numel;
    float *full, *full_g, *shard, *shard_g, *x, *dy, *y, *dx, *lx, *ldy, *ly, *ldx;
    struct pl_block_params p, g, sp, sg;
    struct pl_model_ctx ctx;
};

static void block_case_new(struct pl_comm *tp, const struct sp_case *kc, struct block_case *k)
{
    memset(k, 0, sizeof *k);
    k->t = pl_comm_size(tp), k->r = pl_comm_rank(tp), k->B = kc->B, k->T = kc->T;
    k->c = graded_config(kc->dropout ? DROPOUT : 0.0f);
    k->C = k->c.d_model;
    k->nc = (size_t)k->B * k->T * k->C, k->nl = k->nc / k->t;
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, &k->c);
    k->full_numel = lay.block_numel, k->shard_numel = pl_tp_block_numel(&k->c, k->t);
    pl_model_layout_free(&lay);
    /* a full block with every tensor random, layernorm weights near 1 */
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
    pl_zero(k->shard_g, k->shard_numel);
    pl_block_bind(&k->c, k->full_g, &k->g);
    pl_tp_block_slice(&k->c, k->t, k->r, k->full, k->shard);
    pl_tp_block_bind(&k->c, k->t, k->shard, &k->sp);
    pl_tp_block_bind(&k->c, k->t, k->shard_g, &k->sg);
    k->x = gr_op_normal(base_seed, "lab05.x", k->nc, 0.0f, 1.0f);
    k->dy = gr_op_normal(base_seed, "lab05.dy", k->nc, 0.0f, 1.0f);
    k->ctx = pl_model_ctx_eval();
    k->ctx.train = kc->dropout;
    k->ctx.seed = base_seed ^ 0x5eedULL;
    k->ctx.step = (uint64_t)kc->step;
    k->ctx.seq0 = kc->seq0;
}

static void block_case_free(struct block_case *k)
{
    float *fr[] = {k->full, k->full_g, k->shard, k->shard_g, k->x, k->dy,
                   k->y,    k->dx,     k->lx,    k->ldy,     k->ly, k->ldx};
    for (size_t i = 0; i < sizeof fr / sizeof *fr; i++) pl_mem_free(fr[i]);
}

/* The oracle: the reference model's block on every token. */
static void reference_block(struct block_case *k)
{
    k->y = gr_op_alloc(k->nc, "ref y"), k->dx = gr_op_alloc(k->nc, "ref dx");
    struct pl_block_acts ra;
    pl_block_acts_new(&ra, &k->c, k->B, k->T);
    pl_block_forward(&k->c, 0, &k->p, &ra, &k->ctx, k->x, k->y);
    pl_block_backward(&k->c, 0, &k->p, &k->g, &ra, &k->ctx, k->dy, k->dx);
    pl_block_acts_free(&ra);
}

/* This rank's tokens through the student's block: its traffic per pass, the bytes it held
 * from the forward to the backward and the step's peak; traced for part time (collective). */
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
    sp_block_forward(tp, &k->c, 0, &k->sp, &a, &k->ctx, k->lx, k->ly);
    if (traced) gr_bt_pause();
    traffic_since(&mark, &run->fwd);
    pl_mem_get_stats(&after);
    run->held = (double)after.current_total - (double)before.current_total;
    gr_ledger_mark(&mark);
    if (traced) gr_bt_resume();
    sp_block_backward(tp, &k->c, 0, &k->sp, &k->sg, &a, &k->ctx, k->ldy, k->ldx);
    run->unseen = gr_unseen_end();
    if (traced) gr_bt_end(1);
    traffic_since(&mark, &run->bwd);
    pl_mem_get_stats(&after);
    run->peak = (double)after.peak_total - (double)before.current_total;
    pl_sp_block_acts_free(&a);
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
    pl_block_forward(&k->c, 0, &q, &ra, &k->ctx, k->x, y);
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
    char what[PL_NAME_LEN + 128], hint[400] = "";
    if (kc->dropout)
        snprintf(hint, sizeof hint, "dropout is on in this case (p=%.1f, sequences from %d, "
                 "step %d) and the case without dropout matched: each rank must draw the "
                 "single device's mask of the same global tokens, row (seq0 + b) T + r T/t + i "
                 "of the full [B*T, C] (section 4)", (double)DROPOUT, kc->seq0, kc->step);
    float *want = gr_op_alloc(k->nl, "expected rows");
    pl_sp_slice(want, k->y, B, T, C, t, r);
    if (!hint[0] && t > 1 && rel_l2(k->ly, want, k->nl) > TOL_FWD) {
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
    int ok = gr_compare(what, mine, want, k->nl, TOL_FWD, "each rank draws the single "
                        "device's mask of the same global tokens, for the block and site it is "
                        "given (section 4)");
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
 * wg receives the expected shard gradients. */
static void judge_split_grads(const struct block_case *k, int fwd_ok, float *wg)
{
    char what[PL_NAME_LEN + 128];
    pl_tp_block_slice(&k->c, k->t, k->r, k->full_g, wg);
    struct pl_tp_tensor d[PL_TP_BLOCK_TENSORS];
    pl_tp_block_tensors(&k->c, 0, k->t, d);
    for (int i = 0; i < PL_TP_BLOCK_TENSORS && fwd_ok && gr_parts_ok(); i++) {
        if (d[i].split == PL_TP_REPLICATED) continue;
        snprintf(what, sizeof what, "gradient of your shard of %.64s (%s)", d[i].name,
                 split_name(d[i].split));
        gr_compare(what, k->shard_g + d[i].shard_offset, wg + d[i].shard_offset,
                d[i].shard_numel, TOL_BWD, NULL);
    }
}

static void run_block_case(struct pl_comm *tp, const struct sp_case *kc, int traced,
                           struct block_run *run)
{
    struct block_case k;
    block_case_new(tp, kc, &k);
    double f0 = pl_ledger_flops_total();
    reference_block(&k);
    run->oracle_flops = pl_ledger_flops_total() - f0;
    run->activation_floats = (double)k.nc;
    student_block(tp, &k, traced, run);
    int fwd_ok = judge_block_rows(&k, kc);
    if (fwd_ok && gr_parts_ok()) judge_dropout_alone(tp, &k);
    float *wg = gr_op_alloc(k.shard_numel, "expected shard grads");
    judge_split_grads(&k, fwd_ok, wg);
    /* the synchronisation of the replicated gradients */
    struct pl_ledger mark;
    gr_ledger_mark(&mark);
    sp_sync_replicated_grads(tp, &k.c, &k.sg);
    traffic_since(&mark, &run->sync);
    if (!pl_todo_what() && !in_bench) {
        gr_parts_set(P_REPLICAS);
        judge_replicas(&k.c, k.t, k.shard_g, wg);
        gr_parts_set(P_CORRECT);
    }
    pl_mem_free(wg);
    block_case_free(&k);
}

static void judge_block_traffic(const struct block_run *run, int t, double NC, int C)
{
    /* the six replicated vectors all-reduced: 2(t-1)/t of 6C floats; an all-reduce done as
     * its two halves, a reduce-scatter and an all-gather, may pad 6C to t equal shares */
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
    else if (s->ar_bytes + s->ag_bytes + s->rs_bytes < sync - 0.5 ||
             s->ar_bytes + s->ag_bytes + s->rs_bytes > (s->ar ? sync : sync_padded) + 0.5)
        gr_fail("sp_sync_replicated_grads sent %s per rank in %ld all-reduce%s and %ld other "
             "operation%s where all-reducing the six replicated vectors of C floats sends %s",
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
}

static void run_block(struct pl_comm *tp, int i)
{
    const int t = pl_comm_size(tp);
    struct sp_case kc = case_of(i, t);
    struct block_run run;
    memset(&run, 0, sizeof run);
    run_block_case(tp, &kc, time_wanted && i == 0, &run);
    if (pl_todo_what()) {
        gr_bt_free();
        return;
    }
    struct pl_model_config c = graded_config(0);
    const double NC = (double)kc.B * kc.T * c.d_model;
    char a[32], b[32], e[32];
    gr_parts_say_ok(P_CORRECT,
                    "outputs, input gradients and every split shard's gradient match the "
                    "single device with dropout off and on (t=%d, %d cases, the last B=%d T=%d)",
                    t, NCASES, kc.B, kc.T);
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
            gr_bt_judge(&time_verdict, i, P_TIME, "time", t, run.oracle_flops,
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
 * synchronisation of the replicated gradients. */

#define TRAIN_STEPS 3
#define TRAIN_B 2

struct sp_model {
    struct pl_model_config cfg;
    struct pl_model *m; /* embedding and head (its blocks unused); the layout */
    int t, r;
    float *shard[2], *grad[2], *am[2], *av[2];
    struct pl_block_params sp[2], sg[2];
    int adam_t;
};

static void step_tokens(const struct pl_model_config *c, int step, int *tok, int *tgt)
{
    size_t n = (size_t)TRAIN_B * c->seq_len;
    float *f = malloc(2 * n * sizeof *f);
    pl_rng_fill_int(f, 2 * n, base_seed, pl_rng_stream("lab05.tokens"), (uint64_t)step * 2 * n,
                    0, c->vocab - 1);
    for (size_t i = 0; i < n; i++) {
        tok[i] = (int)f[i];
        tgt[i] = (int)f[n + i];
    }
    free(f);
}

static void sp_model_new(struct sp_model *s, const struct pl_model_config *c, int t, int r)
{
    memset(s, 0, sizeof *s);
    s->cfg = *c;
    s->t = t;
    s->r = r;
    s->m = pl_model_new(c, PL_MODEL_ALL);
    size_t sn = pl_tp_block_numel(c, t);
    for (int l = 0; l < c->n_layers; l++) {
        size_t off, n;
        pl_model_part_range(&s->m->layout, l, &off, &n);
        s->shard[l] = gr_op_alloc(sn, "lab05 train shard");
        s->grad[l] = gr_op_alloc(sn, "lab05 train shard grads");
        s->am[l] = gr_op_alloc(sn, "lab05 train m");
        s->av[l] = gr_op_alloc(sn, "lab05 train v");
        pl_zero(s->am[l], sn);
        pl_zero(s->av[l], sn);
        pl_tp_block_slice(c, t, r, s->m->params + off, s->shard[l]);
        pl_tp_block_bind(c, t, s->shard[l], &s->sp[l]);
        pl_tp_block_bind(c, t, s->grad[l], &s->sg[l]);
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
}

/* Raw MPI sum of a replicated gradient (the grader's part: embedding and head). */
static void world_sum(float *x, size_t n)
{
    float *h = gr_host_copy(x, n);
    PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, h, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
    pl_to_device(x, h, n * sizeof *h);
    free(h);
}

/* This rank's T/t tokens of every sequence of a step, on the host and in op memory. */
struct local_batch {
    int *ltok, *ltgt, *dtok, *dtgt;
    size_t n;
};

static void local_batch_new(const struct sp_model *s, const int *tok, const int *tgt,
                            struct local_batch *lb)
{
    const int T = s->cfg.seq_len, Ts = T / s->t;
    lb->n = (size_t)TRAIN_B * Ts;
    lb->ltok = pl_mem_alloc(lb->n * sizeof(int), PL_MEM_WORK, PL_HOST, "tok");
    lb->ltgt = pl_mem_alloc(lb->n * sizeof(int), PL_MEM_WORK, PL_HOST, "tgt");
    for (int b = 0; b < TRAIN_B; b++)
        for (int i = 0; i < Ts; i++) {
            lb->ltok[b * Ts + i] = tok[b * T + s->r * Ts + i];
            lb->ltgt[b * Ts + i] = tgt[b * T + s->r * Ts + i];
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
    const int t = s->t, T = c->seq_len, Ts = T / t, C = c->d_model, L = c->n_layers;
    const size_t nl = (size_t)TRAIN_B * Ts * C;
    struct pl_model *m = s->m;
    struct pl_embed_params e = m->embed, eg = m->embed_g;
    e.wpe += (size_t)s->r * Ts * C;
    eg.wpe += (size_t)s->r * Ts * C;
    float *xs[3];
    for (int k = 0; k < 3; k++) xs[k] = gr_op_alloc(nl, "lab05 train stream");
    struct pl_sp_block_acts acts[2];
    pl_embed_forward(c, &e, lb->dtok, TRAIN_B, Ts, xs[0]);
    for (int l = 0; l < L; l++) {
        pl_sp_block_acts_new(&acts[l], c, t, TRAIN_B, T);
        sp_block_forward(tp, c, l, &s->sp[l], &acts[l], ctx, xs[l % 2], xs[(l + 1) % 2]);
    }
    struct pl_head_acts ha;
    pl_head_acts_new(&ha, c, TRAIN_B, Ts);
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
    pl_embed_backward(c, &eg, lb->dtok, TRAIN_B, Ts, xs[2]);
    for (int k = 0; k < 3; k++) pl_mem_free(xs[k]);
    return loss;
}

/* The student's synchronisation of the blocks' replicated gradients, the grader's sums of
 * the embedding's and head's, and the clipping scale from the global norm: replicated
 * tensors counted once, split ones summed over the ranks. */
static float sp_sync_and_clip(struct pl_comm *tp, struct sp_model *s,
                              const struct pl_adamw_config *opt)
{
    const struct pl_model_config *c = &s->cfg;
    struct pl_model *m = s->m;
    for (int l = 0; l < c->n_layers; l++) sp_sync_replicated_grads(tp, c, &s->sg[l]);
    size_t eo, en, ho, hn;
    pl_model_part_range(&m->layout, PL_PART_EMBED, &eo, &en);
    pl_model_part_range(&m->layout, PL_PART_HEAD(c), &ho, &hn);
    world_sum(m->grads + eo, en);
    world_sum(m->grads + ho, hn);
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
    PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &split, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
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
 * Returns the global batch's loss. */
static double sp_model_step(struct pl_comm *tp, struct sp_model *s, const int *tok,
                            const int *tgt, const struct pl_adamw_config *opt)
{
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1;
    ctx.seed = base_seed ^ 0x5eedULL;
    ctx.step = (uint64_t)s->adam_t + 1;
    ctx.loss_scale = 1.0f / s->t; /* the head's loss is the mean over this rank's tokens */
    pl_model_zero_grad(s->m);
    const size_t sn = pl_tp_block_numel(&s->cfg, s->t);
    for (int l = 0; l < s->cfg.n_layers; l++) pl_zero(s->grad[l], sn);
    struct local_batch lb;
    local_batch_new(s, tok, tgt, &lb);
    double loss = sp_forward_backward(tp, s, &lb, &ctx);
    sp_adamw(s, sp_sync_and_clip(tp, s, opt), opt);
    local_batch_free(&lb);
    return loss;
}

/* As train.h's parameter check: a tensor whose norm is below the shard's RMS times
 * sqrt(its size) (a bias that started at zero, whose gradient may be rounding alone, as the
 * key bias's is) is measured against that floor, so that rounding alone never fails it. */
static void compare_floor(const char *what, const float *got, const float *ref, size_t n,
                          double rms, const char *hint)
{
    float *g = gr_host_copy(got, n), *r = gr_host_copy(ref, n);
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)g[i] - r[i]) * ((double)g[i] - r[i]);
        den += (double)r[i] * r[i];
    }
    double floor = rms * rms * (double)n, e = sqrt(num / (den > floor ? den : floor));
    if (!(e <= GR_TOL_PARAMS))
        gr_fail("%s: relative L2 error %.2e (tolerance %.0e)%s%s", what, e, GR_TOL_PARAMS,
             hint ? ": " : "", hint ? hint : "");
    free(g);
    free(r);
}

static void run_train(struct pl_comm *tp)
{
    const int t = pl_comm_size(tp), r = pl_comm_rank(tp);
    struct pl_model_config c = graded_config(DROPOUT);
    c.n_layers = 2;
    struct pl_adamw_config opt = pl_adamw_config_default();
    const size_t n = (size_t)TRAIN_B * c.seq_len;
    int *tok = pl_mem_alloc(n * sizeof(int), PL_MEM_WORK, PL_HOST, "tokens");
    int *tgt = pl_mem_alloc(n * sizeof(int), PL_MEM_WORK, PL_HOST, "targets");
    int *dtok = pl_mem_alloc(n * sizeof(int), PL_MEM_WORK, PL_DEVICE, "tokens");
    int *dtgt = pl_mem_alloc(n * sizeof(int), PL_MEM_WORK, PL_DEVICE, "targets");
    struct pl_model *ref = pl_model_new(&c, PL_MODEL_ALL);
    struct sp_model s;
    sp_model_new(&s, &c, t, r);
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1;
    ctx.seed = base_seed ^ 0x5eedULL;
    double want[TRAIN_STEPS], got[TRAIN_STEPS];
    for (int k = 0; k < TRAIN_STEPS; k++) {
        step_tokens(&c, k, tok, tgt);
        pl_to_device(dtok, tok, n * sizeof(int));
        pl_to_device(dtgt, tgt, n * sizeof(int));
        want[k] = pl_model_step(ref, dtok, dtgt, TRAIN_B, &opt, &ctx);
        got[k] = sp_model_step(tp, &s, tok, tgt, &opt);
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
        struct pl_tp_tensor d[PL_TP_BLOCK_TENSORS];
        pl_tp_block_tensors(&c, l, t, d);
        for (int k = 0; k < PL_TP_BLOCK_TENSORS && gr_parts_ok(); k++) {
            char what[PL_NAME_LEN + 96];
            snprintf(what, sizeof what, "%.64s (your shard) after %d steps", d[k].name,
                     TRAIN_STEPS);
            compare_floor(what, s.shard[l] + d[k].shard_offset, w + d[k].shard_offset,
                          d[k].shard_numel, floor_rms,
                          d[k].split == PL_TP_REPLICATED ? "a replicated tensor whose gradient "
                          "was not the whole one on every rank steps differently (section 6)"
                          : NULL);
        }
        pl_mem_free(w);
    }
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
            struct sp_case kc = {B, T, 1, 0, 1};
            pl_todo_reset();
            run_block_case(tp, &kc, 0, &run);
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
    struct sp_case kc = {PERF_B, 16, 0, 0, 0};
    struct block_case *k = &pf.k;
    block_case_new(pf.tp, &kc, k);
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
    the_kind = !a->op ? K_CONJ : !strcmp(a->op, "block") ? K_BLOCK
               : !strcmp(a->op, "train") ? K_TRAIN : K_CONJ;
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
    return the_kind == K_BLOCK ? NCASES : 1;
}

static void describe(void *st, int i, char *buf, size_t len)
{
    if (the_kind == K_TRAIN) {
        snprintf(buf, len, "%d AdamW steps, 2 SP blocks, dropout on, t=%d", TRAIN_STEPS,
                 pl_size());
        return;
    }
    if (the_kind == K_CONJ) {
        snprintf(buf, len, "gather and scatter on B=3 sequences of %d tokens, t=%d",
                 4 * pl_size(), pl_size());
        return;
    }
    struct sp_case k = case_of(i, pl_size());
    snprintf(buf, len, "SP block, B=%d T=%d, t=%d, dropout %s", k.B, k.T, pl_size(),
             k.dropout ? "on" : "off");
}

static void run(void *st, int i)
{
    gr_parts_reset(PART_NAMES, NPARTS);
    struct pl_grid grid;
    char deg[32];
    snprintf(deg, sizeof deg, "tp=%d", pl_size());
    pl_grid_init_or_die(&grid, "tp", deg, pl_size());
    struct pl_comm *tp = pl_grid_comm(&grid, pl_comm_world(), pl_grid_axis(&grid, "tp"));
    if (the_kind == K_BLOCK) run_block(tp, i);
    else if (the_kind == K_TRAIN) run_train(tp);
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
