/* driver.c: the trusted test driver of Lab 4 (tensor parallelism), on the lab harness
 * (grader/common/harness.h). It builds the single-device oracle from the library (lib/model.h,
 * lib/ops.h) on randomised full tensors, gives each rank the row or column block of them
 * that its shard holds (lib/tp_shard.h), runs the student's TP functions (tp.h) and compares
 * outputs, input gradients and each shard's gradient with the matching block of the full
 * gradient. The all-reduces of each pass come from the traffic ledger, and placement from
 * its link classes on a virtual 2 nodes x 4 ranks cluster. Each rank records its verdict of
 * every part while a case runs; judge() gathers them to rank 0.
 *
 *   driver --op conjugates|linear|mlp|attention|block --mode check [--parts correct,traffic]
 *          [--seed S]                                       t = the world size
 *   driver --op placement --mode check [--parts correct,placement,order] [--seed S]
 *                                                           8 ranks: 2 nodes x 4, tp = 4
 *   driver --mode bench                                     8 ranks: the modelled cost of
 *                                                           TP inside and across nodes */
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "harness.h"
#include "parts.h"
#include "paralab.h"
#include "todo.h"
#include "tp.h"
#include "tp_shard.h"
#include "train.h"
#include "units.h"

#define TOL_FWD 1e-5 /* DESIGN.md: relative L2 per tensor, fp32 forward */
#define TOL_BWD GR_TOL_GRADS
#define PLACE_NODES 2
#define PLACE_PER_NODE 4
#define PLACE_TP 4

static uint64_t base_seed = 1;

/* 8 heads so that t = 8 splits them too; every degree that divides 8 divides d_ff and
 * vocab. */
static struct pl_model_config graded_config(void)
{
    struct pl_model_config c = pl_model_config_default();
    c.vocab = 256;
    c.d_model = 64;
    c.n_layers = 1;
    c.n_heads = 8;
    c.d_ff = 128;
    c.seq_len = 16;
    c.dropout = 0.0f;
    c.n_experts = 0;
    c.seed = base_seed;
    return c;
}

static const struct {
    int B, T;
} CASES[] = {{2, 16}, {1, 7}};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

/* ---- the parts this rank judges (grader/common/parts.h), gathered to rank 0 by judge() ---- */

enum part { P_CORRECT, P_TRAFFIC, P_MEMORY, P_PLACEMENT, P_ORDER, NPARTS };
static const char *const PART_NAMES[NPARTS] = {"correct", "traffic", "memory", "placement", "order"};

/* ---- comparisons ---- */

static float *op_alloc(size_t n, const char *label)
{
    return pl_mem_alloc((n ? n : 1) * sizeof(float), PL_MEM_WORK, PL_DEVICE, label);
}

static float *host_copy(const float *op, size_t n)
{
    float *h = malloc((n ? n : 1) * sizeof *h);
    pl_to_host(h, op, n * sizeof *h);
    return h;
}

/* got against ref (op memory, n floats): a failure names what, the error and hint. */
static int compare(const char *what, const float *got, const float *ref, size_t n, double tol,
                   const char *hint)
{
    float *g = host_copy(got, n), *r = host_copy(ref, n);
    size_t bad = 0, at = 0;
    int ok = 1;
    if (!pl_all_finite(g, n, &bad)) {
        gr_fail("%s: element %zu is %g (expected %g)%s%s", what, bad, (double)g[bad],
             (double)r[bad], hint ? ": " : "", hint ? hint : "");
        ok = 0;
    } else {
        double rel = pl_rel_l2(g, r, n);
        if (rel > tol) {
            double mx = pl_max_abs_diff(g, r, n, &at);
            gr_fail("%s: relative L2 error %.2e (tolerance %.0e; max abs %.2e at element %zu: "
                 "expected %.6g, got %.6g)%s%s", what, rel, tol, mx, at, (double)r[at],
                 (double)g[at], hint ? ": " : "", hint ? hint : "");
            ok = 0;
        }
    }
    free(g);
    free(r);
    return ok;
}

/* got / ref by least squares: how many times the reference a wrong result is (t when a
 * replicated gradient was summed over the group). */
static double scale_of(const float *got, const float *ref, size_t n)
{
    float *g = host_copy(got, n), *r = host_copy(ref, n);
    double gr = 0, rr = 0;
    for (size_t i = 0; i < n; i++) {
        gr += (double)g[i] * r[i];
        rr += (double)r[i] * r[i];
    }
    free(g);
    free(r);
    return rr > 0 ? gr / rr : 0;
}

/* 1 when got - ref is (t-1) copies of bias b [OC] added to each of the N rows: a bias added
 * on every rank before the reduction. */
static int extra_bias(const float *got, const float *ref, const float *b, int N, int OC, int t)
{
    if (t < 2) return 0;
    float *g = host_copy(got, (size_t)N * OC), *r = host_copy(ref, (size_t)N * OC);
    float *hb = host_copy(b, (size_t)OC);
    double num = 0, den = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < OC; j++) {
            double e = (double)(t - 1) * hb[j], d = (double)g[i * OC + j] - r[i * OC + j];
            num += (d - e) * (d - e);
            den += e * e;
        }
    free(g);
    free(r);
    free(hb);
    return den > 0 && sqrt(num / den) < 1e-3;
}

/* ---- inputs ---- */

static uint64_t stream_of(const char *name)
{
    return pl_rng_stream(name);
}

/* n normal floats of stream name, the same on every rank (op memory). */
static float *normal(const char *name, size_t n, float mean, float std)
{
    float *h = malloc((n ? n : 1) * sizeof *h);
    pl_rng_fill_normal(h, n, base_seed, stream_of(name), 0, mean, std);
    float *d = op_alloc(n, name);
    pl_to_device(d, h, n * sizeof *h);
    free(h);
    return d;
}

/* A full block with every tensor random (biases and layernorm weights too, so that a bias
 * added t times or a layernorm gradient summed shows), as one flat part of the model's
 * layout, and the shard of TP rank r of t sliced from it. */
struct block_case {
    struct pl_model_config cfg;
    int t, r, B, T, N;
    size_t full_numel, shard_numel;
    float *full, *full_g;     /* one block, the model's order */
    float *shard, *shard_g;
    struct pl_block_params p, g, sp, sg;
    float *x, *dy;            /* [N, C] the same on every rank */
};

static void block_case_new(struct block_case *k, int t, int r, int B, int T)
{
    memset(k, 0, sizeof *k);
    k->cfg = graded_config();
    k->t = t;
    k->r = r;
    k->B = B;
    k->T = T;
    k->N = B * T;
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, &k->cfg);
    k->full_numel = lay.block_numel;
    pl_model_layout_free(&lay);
    k->shard_numel = pl_tp_block_numel(&k->cfg, t);
    k->full = normal("lab04.block", k->full_numel, 0.0f, 0.1f);
    /* layernorm weights near 1, as trained ones are */
    struct pl_block_params p;
    pl_block_bind(&k->cfg, k->full, &p);
    float *one = normal("lab04.ln", (size_t)k->cfg.d_model, 1.0f, 0.1f);
    pl_copy(p.ln1_w, one, (size_t)k->cfg.d_model);
    pl_copy(p.ln2_w, one, (size_t)k->cfg.d_model);
    pl_mem_free(one);
    k->full_g = op_alloc(k->full_numel, "lab04 full grads");
    pl_zero(k->full_g, k->full_numel);
    k->shard = op_alloc(k->shard_numel, "lab04 shard");
    k->shard_g = op_alloc(k->shard_numel, "lab04 shard grads");
    pl_zero(k->shard_g, k->shard_numel);
    pl_tp_block_slice(&k->cfg, t, r, k->full, k->shard);
    pl_block_bind(&k->cfg, k->full, &k->p);
    pl_block_bind(&k->cfg, k->full_g, &k->g);
    pl_tp_block_bind(&k->cfg, t, k->shard, &k->sp);
    pl_tp_block_bind(&k->cfg, t, k->shard_g, &k->sg);
    size_t nc = (size_t)k->N * k->cfg.d_model;
    k->x = normal("lab04.x", nc, 0.0f, 1.0f);
    k->dy = normal("lab04.dy", nc, 0.0f, 1.0f);
}

static void block_case_free(struct block_case *k)
{
    float *p[] = {k->full, k->full_g, k->shard, k->shard_g, k->x, k->dy};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) pl_mem_free(p[i]);
}

/* Each shard gradient of the tensors in `which` (indices into the block's tensor table)
 * against its block of the full gradient. */
static void compare_shard_grads(const struct block_case *k, const int *which, int n,
                                const char *hint)
{
    float *want = op_alloc(k->shard_numel, "lab04 expected shard");
    pl_tp_block_slice(&k->cfg, k->t, k->r, k->full_g, want);
    struct pl_tp_tensor d[PL_TP_BLOCK_TENSORS];
    pl_tp_block_tensors(&k->cfg, 0, k->t, d);
    for (int i = 0; i < n && gr_parts_ok(); i++) {
        const struct pl_tp_tensor *e = &d[which[i]];
        char what[160];
        snprintf(what, sizeof what, "gradient of your shard of %s (%s)", e->name,
                 e->split == PL_TP_REPLICATED ? "replicated"
                 : e->split == PL_TP_ROWS     ? "a row block" : "a column block");
        const float *got = k->shard_g + e->shard_offset, *ref = want + e->shard_offset;
        double s = scale_of(got, ref, e->shard_numel);
        char why[320] = "";
        if (k->t > 1 && fabs(s - k->t) < 1e-3 * k->t)
            snprintf(why, sizeof why, "it is %d (= t) times the single device's: a gradient "
                     "every rank already holds whole was summed over the group again "
                     "(section 7, question 3)", k->t);
        compare(what, got, ref, e->shard_numel, TOL_BWD, why[0] ? why : hint);
    }
    pl_mem_free(want);
}

/* ---- traffic of one pass, from the ledger ---- */

struct pass_traffic {
    long ar_calls, other_calls;
    double ar_bytes, other_bytes;
};

static void traffic_since(const struct pl_ledger *mark, struct pass_traffic *out)
{
    struct pl_ledger d;
    gr_ledger_since(mark, &d);
    out->ar_calls = d.calls[PL_ALL_REDUCE];
    out->ar_bytes = pl_ledger_bytes(&d, PL_ALL_REDUCE, -1);
    out->other_calls = gr_ledger_total_calls(&d) - d.calls[PL_ALL_REDUCE];
    out->other_bytes = gr_ledger_total_bytes(&d) - out->ar_bytes;
}

/* Every rank's pass made `calls` all-reduces of `count` floats each and nothing else. */
static void judge_pass_traffic(const char *pass, const struct pass_traffic *tr, long calls,
                               double count, int t, const char *where)
{
    /* the ring all-reduce: each rank sends 2(t-1)/t of the buffer */
    double want = (double)calls * 2.0 * (t - 1) / t * count * 4.0;
    char a[32], b[32];
    if (tr->other_calls || tr->other_bytes > 0)
        gr_fail("the %s made %ld operations other than all-reduce (%s): tensor parallelism "
             "needs only the all-reduces of f and g", pass, tr->other_calls,
             pl_format_bytes(tr->other_bytes, a, sizeof a));
    else if (tr->ar_calls != calls)
        gr_fail("the %s made %ld all-reduce%s on the TP group where it needs %ld (%s)%s", pass,
             tr->ar_calls, tr->ar_calls == 1 ? "" : "s", calls, where,
             tr->ar_calls < calls ? ": a g (forward) or f (backward) that skips its "
                                    "all-reduce leaves each rank with a partial sum"
                                  : ": f is the identity forward and g the identity "
                                    "backward; an all-reduce there adds traffic (and sums "
                                    "what is already whole)");
    else if (fabs(tr->ar_bytes - want) > 0.5)
        gr_fail("the %s sent %s per rank where %ld all-reduce%s of %.0f floats on %d ranks send "
             "%s (2(t-1)/t of each buffer): reduce exactly the [N, C] activation", pass,
             pl_format_bytes(tr->ar_bytes, a, sizeof a), calls, calls == 1 ? "" : "s", count,
             t, pl_format_bytes(want, b, sizeof b));
}

/* ---- op conjugates: f and g on integer-valued data, exact ---- */

static void member_data(int w, size_t n, float *out)
{
    pl_rng_fill_int(out, n, base_seed, stream_of("lab04.conj"), (uint64_t)w * n, -64, 64);
}

static void check_conjugate(struct pl_comm *tp, int which, const float *mine,
                            const float *sum, size_t n, struct pass_traffic *tr)
{
    static const char *names[] = {"f's forward", "f's backward", "g's forward",
                                  "g's backward"};
    static const char *rules[] = {
        "f (copy to the TP region) is the identity forward: every rank already holds x",
        "f's backward all-reduces (sums) the gradient over the TP group",
        "g (reduce from the TP region) all-reduces (sums) over the TP group forward",
        "g's backward is the identity: the sum's gradient reaches every term unchanged"};
    float *buf = op_alloc(n, "lab04 conj buf");
    pl_to_device(buf, mine, n * sizeof(float));
    struct pl_ledger mark;
    gr_ledger_mark(&mark);
    switch (which) {
    case 0: tp_copy_to_region_forward(tp, buf, n); break;
    case 1: tp_copy_to_region_backward(tp, buf, n); break;
    case 2: tp_reduce_from_region_forward(tp, buf, n); break;
    default: tp_reduce_from_region_backward(tp, buf, n); break;
    }
    traffic_since(&mark, &tr[which]);
    int sums = which == 1 || which == 2;
    float *got = host_copy(buf, n);
    const float *want = sums ? sum : mine;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            gr_fail("%s: element %zu is %g, expected %g (%s%s)", names[which], i, (double)got[i],
                 (double)want[i], rules[which],
                 !sums && got[i] == sum[i] ? "; you summed over the ranks" : "");
            break;
        }
    free(got);
    pl_mem_free(buf);
}

static void run_conjugates(struct pl_comm *tp)
{
    int t = pl_comm_size(tp);
    const size_t n = 1000;
    float *mine = malloc(n * sizeof *mine), *sum = calloc(n, sizeof *sum);
    float *tmp = malloc(n * sizeof *tmp);
    member_data(pl_comm_world_rank(tp, pl_comm_rank(tp)), n, mine);
    for (int m = 0; m < t; m++) {
        member_data(pl_comm_world_rank(tp, m), n, tmp);
        for (size_t i = 0; i < n; i++) sum[i] += tmp[i];
    }
    struct pass_traffic tr[4];
    for (int k = 0; k < 4; k++) check_conjugate(tp, k, mine, sum, n, tr);
    free(mine);
    free(sum);
    free(tmp);
    gr_parts_say_ok(P_CORRECT, "f and g forward and backward exact on every rank (t=%d)", t);
    static const char *names[] = {"f forward", "f backward", "g forward", "g backward"};
    gr_parts_set(P_TRAFFIC);
    for (int k = 0; k < 4 && t > 1; k++)
        judge_pass_traffic(names[k], &tr[k], k == 1 || k == 2, (double)n, t,
                           "one for f's backward and g's forward, none otherwise");
    gr_parts_set(P_CORRECT);
    gr_parts_say_ok(P_TRAFFIC, "one all-reduce in f's backward and g's forward, none in f's forward "
           "and g's backward");
}

/* ---- op linear: column- and row-parallel against nn.Linear on the full weight ---- */

struct linear_run {
    struct pass_traffic fwd, bwd;
};

static void column_linear_case(struct pl_comm *tp, int N, int C, int OC, struct linear_run *lr)
{
    int t = pl_comm_size(tp), r = pl_comm_rank(tp), OCt = OC / t;
    float *w = normal("lab04.lin.w", (size_t)OC * C, 0, 0.1f);
    float *b = normal("lab04.lin.b", (size_t)OC, 0, 0.1f);
    float *x = normal("lab04.lin.x", (size_t)N * C, 0, 1);
    float *dy = normal("lab04.lin.dy", (size_t)N * OC, 0, 1);
    float *y = op_alloc((size_t)N * OC, "y"), *dx = op_alloc((size_t)N * C, "dx");
    float *dw = op_alloc((size_t)OC * C, "dw"), *db = op_alloc((size_t)OC, "db");
    pl_zero(dx, (size_t)N * C);
    pl_zero(dw, (size_t)OC * C);
    pl_zero(db, (size_t)OC);
    pl_matmul_forward(y, x, w, b, N, C, OC);
    pl_matmul_backward(dx, dw, db, dy, x, w, N, C, OC);
    /* this rank's rows of w and b, columns of y and dy */
    struct pl_tp_rect rows = {(size_t)r * OCt, 0, (size_t)OCt, (size_t)C};
    struct pl_tp_rect brow = {(size_t)r * OCt, 0, (size_t)OCt, 1};
    struct pl_tp_rect cols = {0, (size_t)r * OCt, (size_t)N, (size_t)OCt};
    float *sw = op_alloc((size_t)OCt * C, "w shard"), *sb = op_alloc((size_t)OCt, "b shard");
    float *sdy = op_alloc((size_t)N * OCt, "dy cols"), *sy = op_alloc((size_t)N * OCt, "y");
    float *gy = op_alloc((size_t)N * OCt, "your y"), *gdx = op_alloc((size_t)N * C, "your dx");
    float *gdw = op_alloc((size_t)OCt * C, "your dw"), *gdb = op_alloc((size_t)OCt, "your db");
    float *ew = op_alloc((size_t)OCt * C, "expected dw"), *eb = op_alloc((size_t)OCt, "db");
    pl_tp_copy_rect_out(sw, w, (size_t)C, &rows);
    pl_tp_copy_rect_out(sb, b, 1, &brow);
    pl_tp_copy_rect_out(sdy, dy, (size_t)OC, &cols);
    pl_tp_copy_rect_out(sy, y, (size_t)OC, &cols);
    pl_tp_copy_rect_out(ew, dw, (size_t)C, &rows);
    pl_tp_copy_rect_out(eb, db, 1, &brow);
    pl_zero(gdw, (size_t)OCt * C);
    pl_zero(gdb, (size_t)OCt);
    struct pl_ledger mark;
    gr_ledger_mark(&mark);
    tp_column_linear_forward(tp, gy, x, sw, sb, N, C, OCt);
    traffic_since(&mark, &lr->fwd);
    gr_ledger_mark(&mark);
    tp_column_linear_backward(tp, gdx, gdw, gdb, sdy, x, sw, N, C, OCt);
    traffic_since(&mark, &lr->bwd);
    compare("column-parallel y (your columns of the output)", gy, sy, (size_t)N * OCt,
            TOL_FWD, "y = x w^T + b with this rank's rows of w: the output stays split");
    compare("column-parallel dx", gdx, dx, (size_t)N * C, TOL_BWD,
            "every rank's dy w is a part of dx: f's backward sums them over the group");
    compare("column-parallel dw (your rows)", gdw, ew, (size_t)OCt * C, TOL_BWD, NULL);
    compare("column-parallel db (your slice)", gdb, eb, (size_t)OCt, TOL_BWD, NULL);
    float *p[] = {w, b, x, dy, y, dx, dw, db, sw, sb, sdy, sy, gy, gdx, gdw, gdb, ew, eb};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) pl_mem_free(p[i]);
}

static void row_linear_case(struct pl_comm *tp, int N, int IC, int OC, struct linear_run *lr)
{
    int t = pl_comm_size(tp), r = pl_comm_rank(tp), ICt = IC / t;
    float *w = normal("lab04.row.w", (size_t)OC * IC, 0, 0.1f);
    float *b = normal("lab04.row.b", (size_t)OC, 0, 0.5f);
    float *x = normal("lab04.row.x", (size_t)N * IC, 0, 1);
    float *dy = normal("lab04.row.dy", (size_t)N * OC, 0, 1);
    float *y = op_alloc((size_t)N * OC, "y"), *dx = op_alloc((size_t)N * IC, "dx");
    float *dw = op_alloc((size_t)OC * IC, "dw"), *db = op_alloc((size_t)OC, "db");
    pl_zero(dx, (size_t)N * IC);
    pl_zero(dw, (size_t)OC * IC);
    pl_zero(db, (size_t)OC);
    pl_matmul_forward(y, x, w, b, N, IC, OC);
    pl_matmul_backward(dx, dw, db, dy, x, w, N, IC, OC);
    struct pl_tp_rect wc = {0, (size_t)r * ICt, (size_t)OC, (size_t)ICt};
    struct pl_tp_rect xc = {0, (size_t)r * ICt, (size_t)N, (size_t)ICt};
    float *sw = op_alloc((size_t)OC * ICt, "w cols"), *sx = op_alloc((size_t)N * ICt, "x cols");
    float *gy = op_alloc((size_t)N * OC, "your y"), *gdx = op_alloc((size_t)N * ICt, "dx");
    float *gdw = op_alloc((size_t)OC * ICt, "your dw"), *gdb = op_alloc((size_t)OC, "db");
    float *ex = op_alloc((size_t)N * ICt, "dx cols"), *ew = op_alloc((size_t)OC * ICt, "dw");
    float *gdy = op_alloc((size_t)N * OC, "dy");
    pl_tp_copy_rect_out(sw, w, (size_t)IC, &wc);
    pl_tp_copy_rect_out(sx, x, (size_t)IC, &xc);
    pl_tp_copy_rect_out(ex, dx, (size_t)IC, &xc);
    pl_tp_copy_rect_out(ew, dw, (size_t)IC, &wc);
    pl_copy(gdy, dy, (size_t)N * OC);
    pl_zero(gdw, (size_t)OC * ICt);
    pl_zero(gdb, (size_t)OC);
    struct pl_ledger mark;
    gr_ledger_mark(&mark);
    tp_row_linear_forward(tp, gy, sx, sw, b, N, ICt, OC);
    traffic_since(&mark, &lr->fwd);
    gr_ledger_mark(&mark);
    tp_row_linear_backward(tp, gdx, gdw, gdb, gdy, sx, sw, N, ICt, OC);
    traffic_since(&mark, &lr->bwd);
    const char *hint = extra_bias(gy, y, b, N, OC, t)
        ? "the output is the right sum plus t-1 extra copies of the bias: it was added on "
          "every rank before the reduction; add it once, after g (section 4)"
        : "each rank's x_r w_r^T is a partial sum: g's forward adds them, then the bias "
          "once";
    compare("row-parallel y (full, every rank)", gy, y, (size_t)N * OC, TOL_FWD, hint);
    compare("row-parallel dx (your columns)", gdx, ex, (size_t)N * ICt, TOL_BWD, NULL);
    compare("row-parallel dw (your columns)", gdw, ew, (size_t)OC * ICt, TOL_BWD, NULL);
    compare("row-parallel db (replicated)", gdb, db, (size_t)OC, TOL_BWD, NULL);
    float *p[] = {w, b, x, dy, y, dx, dw, db, sw, sx, gy, gdx, gdw, gdb, ex, ew, gdy};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) pl_mem_free(p[i]);
}

static void run_linear(struct pl_comm *tp, int i)
{
    int t = pl_comm_size(tp), N = CASES[i].B * CASES[i].T;
    struct linear_run col, row;
    column_linear_case(tp, N, 64, 128, &col);
    row_linear_case(tp, N, 128, 64, &row);
    gr_parts_say_ok(P_CORRECT, "column- and row-parallel outputs and gradients match the full "
           "nn.Linear's blocks (t=%d)", t);
    gr_parts_set(P_TRAFFIC);
    if (t > 1) {
        judge_pass_traffic("column-parallel forward", &col.fwd, 0, N * 64.0, t,
                           "f is the identity forward");
        judge_pass_traffic("column-parallel backward", &col.bwd, 1, N * 64.0, t,
                           "f's backward on dx");
        judge_pass_traffic("row-parallel forward", &row.fwd, 1, N * 64.0, t, "g's forward on y");
        judge_pass_traffic("row-parallel backward", &row.bwd, 0, N * 64.0, t,
                           "g is the identity backward");
    }
    gr_parts_set(P_CORRECT);
    gr_parts_say_ok(P_TRAFFIC, "one all-reduce of [N, C] in the column backward and the row forward, "
           "none elsewhere");
}

/* ---- the sub-layers and the block against the single-device oracle ---- */

enum sub { SUB_MLP, SUB_ATTN, SUB_BLOCK };

static const struct {
    const char *op, *title, *section;
    int ars;          /* all-reduces per pass */
    int tensors[PL_TP_BLOCK_TENSORS];
    int ntensors;
} SUBS[] = {
    {"mlp", "TP MLP", "5", 1, {8, 9, 10, 11}, 4},
    {"attention", "TP attention", "6", 1, {2, 3, 4, 5}, 4},
    {"block", "TP block", "7", 2, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 12},
};

/* The oracle of the MLP and the attention as sub-layers: y = sub(x) on the full weights,
 * its dx and parameter gradients, from lib's ops alone. */
static void oracle_sub(struct block_case *k, enum sub s, float *y, float *dx)
{
    const struct pl_model_config *c = &k->cfg;
    const int N = k->N, C = c->d_model, F = c->d_ff;
    pl_zero(dx, (size_t)N * C);
    if (s == SUB_MLP) {
        float *h = op_alloc((size_t)N * F, "h"), *g = op_alloc((size_t)N * F, "g");
        float *dg = op_alloc((size_t)N * F, "dg"), *dh = op_alloc((size_t)N * F, "dh");
        pl_matmul_forward(h, k->x, k->p.w_fc, k->p.b_fc, N, C, F);
        pl_gelu_forward(g, h, (size_t)N * F);
        pl_matmul_forward(y, g, k->p.w_fc2, k->p.b_fc2, N, F, C);
        pl_zero(dg, (size_t)N * F);
        pl_zero(dh, (size_t)N * F);
        pl_matmul_backward(dg, k->g.w_fc2, k->g.b_fc2, k->dy, g, k->p.w_fc2, N, F, C);
        pl_gelu_backward(dh, dg, h, (size_t)N * F);
        pl_matmul_backward(dx, k->g.w_fc, k->g.b_fc, dh, k->x, k->p.w_fc, N, C, F);
        float *p[] = {h, g, dg, dh};
        for (int i = 0; i < 4; i++) pl_mem_free(p[i]);
    } else {
        float *qkv = op_alloc((size_t)N * 3 * C, "qkv"), *hd = op_alloc((size_t)N * C, "heads");
        float *att = op_alloc((size_t)k->B * c->n_heads * k->T * k->T, "att");
        float *dqkv = op_alloc((size_t)N * 3 * C, "dqkv"), *dhd = op_alloc((size_t)N * C, "dh");
        pl_matmul_forward(qkv, k->x, k->p.w_qkv, k->p.b_qkv, N, C, 3 * C);
        pl_attention_forward(hd, att, qkv, k->B, k->T, C, c->n_heads);
        pl_matmul_forward(y, hd, k->p.w_proj, k->p.b_proj, N, C, C);
        pl_zero(dqkv, (size_t)N * 3 * C);
        pl_zero(dhd, (size_t)N * C);
        pl_matmul_backward(dhd, k->g.w_proj, k->g.b_proj, k->dy, hd, k->p.w_proj, N, C, C);
        pl_attention_backward(dqkv, dhd, qkv, att, k->B, k->T, C, c->n_heads);
        pl_matmul_backward(dx, k->g.w_qkv, k->g.b_qkv, dqkv, k->x, k->p.w_qkv, N, C, 3 * C);
        float *p[] = {qkv, hd, att, dqkv, dhd};
        for (int i = 0; i < 5; i++) pl_mem_free(p[i]);
    }
}

/* The block's oracle: pl_block_forward and pl_block_backward of the reference model. */
static void oracle_block(struct block_case *k, float *y, float *dx)
{
    struct pl_block_acts a;
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    pl_block_acts_new(&a, &k->cfg, k->B, k->T);
    pl_block_forward(&k->cfg, 0, &k->p, &a, &ctx, k->x, y);
    pl_block_backward(&k->cfg, 0, &k->p, &k->g, &a, &ctx, k->dy, dx);
    pl_block_acts_free(&a);
}

/* q, k, v of this rank right but its heads' outputs not: the head dimension was split. */
static int heads_split_wrong(struct block_case *k, const struct pl_tp_attn_acts *a)
{
    const struct pl_model_config *c = &k->cfg;
    const int N = k->N, C = c->d_model, t = k->t, Ct = C / t;
    if (t < 2) return 0;
    float *qkv = op_alloc((size_t)N * 3 * C, "qkv"), *hd = op_alloc((size_t)N * C, "heads");
    float *att = op_alloc((size_t)k->B * c->n_heads * k->T * k->T, "att");
    float *mine = op_alloc((size_t)N * 3 * Ct, "my qkv"), *my_hd = op_alloc((size_t)N * Ct, "");
    pl_matmul_forward(qkv, k->x, k->p.w_qkv, k->p.b_qkv, N, C, 3 * C);
    pl_attention_forward(hd, att, qkv, k->B, k->T, C, c->n_heads);
    for (int j = 0; j < 3; j++) {
        struct pl_tp_rect q = {0, (size_t)j * C + (size_t)k->r * Ct, (size_t)N, (size_t)Ct};
        float *col = op_alloc((size_t)N * Ct, "");
        pl_tp_copy_rect_out(col, qkv, (size_t)3 * C, &q);
        for (int n = 0; n < N; n++)
            pl_copy(mine + (size_t)n * 3 * Ct + (size_t)j * Ct, col + (size_t)n * Ct,
                    (size_t)Ct);
        pl_mem_free(col);
    }
    struct pl_tp_rect hc = {0, (size_t)k->r * Ct, (size_t)N, (size_t)Ct};
    pl_tp_copy_rect_out(my_hd, hd, (size_t)C, &hc);
    float *gq = host_copy(a->qkv, (size_t)N * 3 * Ct), *eq = host_copy(mine, (size_t)N * 3 * Ct);
    float *gh = host_copy(a->y, (size_t)N * Ct), *eh = host_copy(my_hd, (size_t)N * Ct);
    int wrong = pl_rel_l2(gq, eq, (size_t)N * 3 * Ct) < TOL_FWD &&
                pl_rel_l2(gh, eh, (size_t)N * Ct) > TOL_FWD;
    free(gq);
    free(eq);
    free(gh);
    free(eh);
    float *p[] = {qkv, hd, att, mine, my_hd};
    for (int i = 0; i < 5; i++) pl_mem_free(p[i]);
    return wrong;
}

struct sub_run {
    struct pass_traffic fwd, bwd;
    struct pl_ledger code; /* the student's forward and backward alone (not the oracle) */
};

/* a += b, field by field. */
static void ledger_add(struct pl_ledger *a, const struct pl_ledger *b)
{
    for (int k = 0; k < PL_NKINDS; k++) {
        for (int l = 0; l < PL_NLINKS; l++) a->bytes[k][l] += b->bytes[k][l];
        a->calls[k] += b->calls[k];
    }
    a->flops += b->flops;
}

/* The sub-layer's output against the oracle's, with the likeliest reason when it is
 * wrong; 1 when right. */
static int check_sub_output(struct block_case *k, enum sub s, const struct pl_tp_block_acts *a,
                            const struct sub_run *run, const float *gy, const float *y)
{
    const int B = k->B, T = k->T;
    const size_t nc = (size_t)k->N * k->cfg.d_model;
    char what[96], hint[400] = "";
    snprintf(what, sizeof what, "%s output y (B=%d, T=%d, t=%d)", SUBS[s].title, B, T, k->t);
    const float *bias = s == SUB_MLP ? k->p.b_fc2 : k->p.b_proj;
    if (s != SUB_BLOCK && extra_bias(gy, y, bias, k->N, k->cfg.d_model, k->t))
        snprintf(hint, sizeof hint, "it is the right sum plus t-1 extra copies of the output "
                 "bias: the row-parallel bias was added on every rank before the reduction "
                 "(section 4)");
    else if (s == SUB_ATTN && heads_split_wrong(k, &a->attn))
        snprintf(hint, sizeof hint, "your q, k and v are right but the heads' outputs are not: "
                 "this rank's C/t channels are NH/t WHOLE heads of size C/NH; attention over "
                 "all NH heads of size C/(NH t) splits each head's q.k dot product (section 6)");
    else if (run->fwd.ar_calls < SUBS[s].ars && k->t > 1)
        snprintf(hint, sizeof hint, "your forward made %ld all-reduce%s where it needs %d: "
                 "without g's all-reduce each rank holds only its partial sum (section 3)",
                 run->fwd.ar_calls, run->fwd.ar_calls == 1 ? "" : "s", SUBS[s].ars);
    else if (run->fwd.ar_calls > SUBS[s].ars && k->t > 1)
        snprintf(hint, sizeof hint, "your forward made %ld all-reduces where it needs %d: f is "
                 "the identity forward; summing x over the ranks multiplies it by t (section 3)",
                 run->fwd.ar_calls, SUBS[s].ars);
    return compare(what, gy, y, nc, TOL_FWD, hint[0] ? hint : NULL);
}

static void run_sub_case(struct pl_comm *tp, enum sub s, int B, int T, struct sub_run *run)
{
    struct block_case k;
    block_case_new(&k, pl_comm_size(tp), pl_comm_rank(tp), B, T);
    const size_t nc = (size_t)k.N * k.cfg.d_model;
    float *y = op_alloc(nc, "ref y"), *dx = op_alloc(nc, "ref dx");
    float *gy = op_alloc(nc, "your y"), *gdx = op_alloc(nc, "your dx");
    float *gdy = op_alloc(nc, "dy"), *gx = op_alloc(nc, "x");
    if (s == SUB_BLOCK) oracle_block(&k, y, dx);
    else oracle_sub(&k, s, y, dx);
    struct pl_tp_block_acts a;
    pl_tp_block_acts_new(&a, &k.cfg, k.t, B, T);
    pl_copy(gdy, k.dy, nc);
    pl_copy(gx, k.x, nc);
    struct pl_ledger mark;
    gr_ledger_mark(&mark);
    if (s == SUB_MLP) tp_mlp_forward(tp, &k.cfg, &k.sp, &a.mlp, gx, gy);
    else if (s == SUB_ATTN) tp_attention_forward(tp, &k.cfg, &k.sp, &a.attn, gx, gy);
    else tp_block_forward(tp, &k.cfg, &k.sp, &a, gx, gy);
    traffic_since(&mark, &run->fwd);
    gr_ledger_since(&mark, &run->code);
    memset(&run->bwd, 0, sizeof run->bwd);
    /* a wrong forward is the reason; the backward runs (on every rank) only after a right
     * one, so what it reads was written as the contract says */
    int ok = check_sub_output(&k, s, &a, run, gy, y), all_ok = 0;
    PL_CHECK_MPI(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (all_ok) {
        gr_ledger_mark(&mark);
        if (s == SUB_MLP) tp_mlp_backward(tp, &k.cfg, &k.sp, &k.sg, &a.mlp, gx, gdy, gdx);
        else if (s == SUB_ATTN)
            tp_attention_backward(tp, &k.cfg, &k.sp, &k.sg, &a.attn, gx, gdy, gdx);
        else tp_block_backward(tp, &k.cfg, &k.sp, &k.sg, &a, gdy, gdx);
        traffic_since(&mark, &run->bwd);
        struct pl_ledger bwd;
        gr_ledger_since(&mark, &bwd);
        ledger_add(&run->code, &bwd);
        char what[96];
        snprintf(what, sizeof what, "%s input gradient dx (B=%d, T=%d, t=%d)", SUBS[s].title,
                 B, T, k.t);
        compare(what, gdx, dx, nc, TOL_BWD, "every rank's branch saw all of x, so its dx is a "
                "part of the whole: f's backward sums them (section 3)");
        compare_shard_grads(&k, SUBS[s].tensors, SUBS[s].ntensors, NULL);
    }
    pl_tp_block_acts_free(&a);
    float *p[] = {y, dx, gy, gdx, gdy, gx};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) pl_mem_free(p[i]);
    block_case_free(&k);
}

static void run_sub(struct pl_comm *tp, enum sub s, int i)
{
    int t = pl_comm_size(tp), B = CASES[i].B, T = CASES[i].T;
    struct sub_run run;
    run_sub_case(tp, s, B, T, &run);
    gr_parts_say_ok(P_CORRECT, "output, dx and every shard's gradient match the single device (t=%d, "
           "%d cases)", t, NCASES);
    gr_parts_set(P_TRAFFIC);
    double nc = (double)B * T * 64;
    if (t > 1) {
        judge_pass_traffic("forward", &run.fwd, SUBS[s].ars, nc, t,
                           "g after each row-parallel linear");
        judge_pass_traffic("backward", &run.bwd, SUBS[s].ars, nc, t,
                           "f's backward before each column-parallel linear");
    }
    gr_parts_set(P_CORRECT);
    /* DESIGN.md: a block moves 8bsh(t-1)/t elements per rank per microbatch */
    double want = 8.0 * B * T * 64 * (t - 1) / t * 4.0 * SUBS[s].ars / 2;
    char a[32];
    gr_parts_say_ok(P_TRAFFIC, "%d all-reduce%s forward and %d backward per pass on the TP group; the "
           "last case (b=%d, s=%d, h=64) sent %s per rank = %s8bsh(t-1)/t x 4 bytes",
           SUBS[s].ars, SUBS[s].ars == 1 ? "" : "s", SUBS[s].ars, B, T,
           pl_format_bytes(want, a, sizeof a), s == SUB_BLOCK ? "" : "1/2 of ");
}

/* ---- op vocab: the vocabulary-parallel embedding, head and cross-entropy ---- */

/* n ids in [0, V) drawn from stream name, the same on every rank (op memory). */
static int *ids(const char *name, int n, int V)
{
    int *h = malloc((size_t)n * sizeof *h);
    for (int i = 0; i < n; i++)
        h[i] = (int)(pl_rng_u64(base_seed, stream_of(name), (uint64_t)i) % (uint64_t)V);
    int *d = pl_mem_alloc((size_t)n * sizeof *d, PL_MEM_WORK, PL_DEVICE, name);
    pl_to_device(d, h, (size_t)n * sizeof *h);
    free(h);
    return d;
}

/* Rows [r V/t, (r+1) V/t) of a [V, C] matrix, copied (op memory). */
static float *vocab_rows(const float *full, int V, int C, int t, int r)
{
    size_t Vt = (size_t)(V / t);
    struct pl_tp_rect q = {(size_t)r * Vt, 0, Vt, (size_t)C};
    float *out = op_alloc(Vt * C, "vocab rows");
    pl_tp_copy_rect_out(out, full, (size_t)C, &q);
    return out;
}

struct vocab_full {
    float *wte, *wpe, *w, *x, *dxe;    /* inputs */
    int *tokens, *targets;
    float *xe, *dwte, *dwpe, *dx, *dw; /* the oracle's results */
    double loss;
};

/* The single device's embedding and head + mean cross-entropy, from lib's ops. */
static void vocab_oracle(const struct pl_model_config *c, int B, int T, struct vocab_full *f)
{
    const int N = B * T, C = c->d_model, V = c->vocab;
    f->wte = normal("lab04.wte", (size_t)V * C, 0, 0.5f);
    f->wpe = normal("lab04.wpe", (size_t)c->seq_len * C, 0, 0.5f);
    f->w = normal("lab04.head", (size_t)V * C, 0, 0.5f);
    f->x = normal("lab04.head.x", (size_t)N * C, 0, 1);
    f->dxe = normal("lab04.embed.dx", (size_t)N * C, 0, 1);
    f->tokens = ids("lab04.tokens", N, V);
    f->targets = ids("lab04.targets", N, V);
    f->xe = op_alloc((size_t)N * C, "xe");
    f->dwte = op_alloc((size_t)V * C, "dwte");
    f->dwpe = op_alloc((size_t)c->seq_len * C, "dwpe");
    f->dx = op_alloc((size_t)N * C, "dx");
    f->dw = op_alloc((size_t)V * C, "dw");
    pl_zero(f->dwte, (size_t)V * C);
    pl_zero(f->dwpe, (size_t)c->seq_len * C);
    pl_zero(f->dx, (size_t)N * C);
    pl_zero(f->dw, (size_t)V * C);
    pl_encoder_forward(f->xe, f->tokens, f->wte, f->wpe, B, T, C, V);
    pl_encoder_backward(f->dwte, f->dwpe, f->dxe, f->tokens, B, T, C, V);
    float *logits = op_alloc((size_t)N * V, "logits"), *probs = op_alloc((size_t)N * V, "p");
    float *losses = op_alloc((size_t)N, "losses"), *dl = op_alloc((size_t)N * V, "dlogits");
    pl_matmul_forward(logits, f->x, f->w, NULL, N, C, V);
    pl_crossentropy_forward(losses, logits, f->targets, N, V);
    f->loss = pl_sum(losses, (size_t)N) / N;
    pl_softmax_forward(probs, logits, N, V);
    pl_zero(dl, (size_t)N * V);
    pl_crossentropy_softmax_backward(dl, probs, f->targets, 1.0f / (float)N, N, V);
    pl_matmul_backward(f->dx, f->dw, NULL, dl, f->x, f->w, N, C, V);
    float *p[] = {logits, probs, losses, dl};
    for (int i = 0; i < 4; i++) pl_mem_free(p[i]);
}

static void vocab_full_free(struct vocab_full *f)
{
    float *p[] = {f->wte, f->wpe, f->w, f->x, f->dxe, f->xe, f->dwte, f->dwpe, f->dx, f->dw};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) pl_mem_free(p[i]);
    pl_mem_free(f->tokens);
    pl_mem_free(f->targets);
}

/* Bytes held at peak beyond what was held before, while the student's head ran. */
static double peak_since(const struct pl_mem_stats *before)
{
    struct pl_mem_stats now;
    pl_mem_get_stats(&now);
    return (double)now.peak_total - (double)before->current_total;
}

/* The traffic of the vocabulary-parallel embedding and loss, and the head's memory. */
static void judge_vocab_comm(const struct pl_ledger *dp, double held, int t, int B, int T, int C,
                             int V)
{
    const struct pl_ledger d = *dp;
    const int N = B * T;
    /* traffic: g of the embedding and f's backward of the head ([N, C] each), the row
     * maxima gathered (N per rank), and one all-reduce of the 2N sums */
    gr_parts_set(P_TRAFFIC);
    double want = 2.0 * (t - 1) / t * (2.0 * N * C + 2.0 * N) * 4 + (t - 1.0) * N * 4;
    double got = gr_ledger_total_bytes(&d);
    char a1[32], a2[32];
    if (t > 1 && (d.calls[PL_ALL_REDUCE] != 3 || d.calls[PL_ALL_GATHER] != 1 ||
                  gr_ledger_total_calls(&d) != 4 || fabs(got - want) > 0.5))
        gr_fail("the embedding and the loss sent %s per rank in %ld all-reduces and %ld "
             "all-gathers where they need %s in 3 all-reduces ([N, C] forward in the "
             "embedding, [N, C] backward in the head, 2N for the sums) and 1 all-gather of "
             "the N row maxima%s", pl_format_bytes(got, a1, sizeof a1),
             d.calls[PL_ALL_REDUCE], d.calls[PL_ALL_GATHER], pl_format_bytes(want, a2, sizeof a2),
             pl_ledger_bytes(&d, PL_ALL_GATHER, -1) > (t - 1.0) * N * 4
                 ? ": gathering logits moves N x V floats; only the row maxima, the sums of "
                   "exponentials and the target logits need to cross ranks (section 10)"
                 : "");
    gr_parts_say_ok(P_TRAFFIC, "3 all-reduces and 1 all-gather of N floats: %s per rank for b=%d s=%d",
           pl_format_bytes(want, a1, sizeof a1), B, T);
    /* memory: nothing the size of the full logits */
    gr_parts_set(P_MEMORY);
    double full = 4.0 * N * V;
    if (t > 1 && held >= full)
        gr_fail("your head and loss held %s at peak beyond their activations: as much as the "
             "full [N, V] logits (%s). Vocabulary parallelism never builds them: each rank "
             "keeps its [N, V/t] columns and three numbers per row (section 10)",
             pl_format_bytes(held, a1, sizeof a1), pl_format_bytes(full, a2, sizeof a2));
    gr_parts_say_ok(P_MEMORY, "the head held at most %s beyond its activations, below the full logits' "
           "%s", pl_format_bytes(held, a1, sizeof a1), pl_format_bytes(full, a2, sizeof a2));
    gr_parts_set(P_CORRECT);
}

static void run_vocab(struct pl_comm *tp, int i)
{
    struct pl_model_config c = graded_config();
    const int t = pl_comm_size(tp), r = pl_comm_rank(tp), B = CASES[i].B, T = CASES[i].T;
    const int N = B * T, C = c.d_model, V = c.vocab, Vt = V / t;
    struct vocab_full f;
    vocab_oracle(&c, B, T, &f);
    float *wte_r = vocab_rows(f.wte, V, C, t, r), *w_r = vocab_rows(f.w, V, C, t, r);
    float *gx = op_alloc((size_t)N * C, "your x"), *gdx = op_alloc((size_t)N * C, "your dx");
    float *dwte_r = op_alloc((size_t)Vt * C, "dwte_r"), *dw_r = op_alloc((size_t)Vt * C, "dw");
    float *dwpe = op_alloc((size_t)c.seq_len * C, "dwpe"), *hx = op_alloc((size_t)N * C, "x");
    pl_zero(dwte_r, (size_t)Vt * C);
    pl_zero(dw_r, (size_t)Vt * C);
    pl_zero(dwpe, (size_t)c.seq_len * C);
    pl_copy(hx, f.x, (size_t)N * C);
    struct pl_tp_head_acts a;
    pl_tp_head_acts_new(&a, &c, t, B, T);
    struct pl_ledger mark, d;
    gr_ledger_mark(&mark);
    tp_embed_forward(tp, &c, wte_r, f.wpe, f.tokens, B, T, gx);
    tp_embed_backward(tp, &c, dwte_r, dwpe, f.tokens, B, T, f.dxe);
    struct pl_mem_stats before;
    pl_mem_reset_peak();
    pl_mem_get_stats(&before);
    double loss = tp_head_loss_forward(tp, &c, w_r, &a, hx, f.targets);
    tp_head_loss_backward(tp, &c, w_r, dw_r, &a, hx, f.targets, gdx);
    double held = peak_since(&before);
    gr_ledger_since(&mark, &d);

    float *e_wte = vocab_rows(f.dwte, V, C, t, r), *e_w = vocab_rows(f.dw, V, C, t, r);
    compare("embedding output x", gx, f.xe, (size_t)N * C, TOL_FWD, "ids outside your slice "
            "contribute zero rows; g sums the ranks' rows; the position embedding is added "
            "once, after the sum (section 9)");
    compare("gradient of your rows of wte", dwte_r, e_wte, (size_t)Vt * C, TOL_BWD, NULL);
    compare("gradient of wpe (replicated)", dwpe, f.dwpe, (size_t)c.seq_len * C, TOL_BWD, NULL);
    if (gr_parts_ok() && gr_rel_err(loss, f.loss) > TOL_FWD)
        gr_fail("loss %.7f, the single device's %.7f: the row maximum, the sum of exponentials "
             "and the target's logit must each cover the whole vocabulary (section 10)", loss,
             f.loss);
    compare("head input gradient dx", gdx, f.dx, (size_t)N * C, TOL_BWD, "f's backward sums "
            "the ranks' dlogits_r w_r (section 10)");
    compare("gradient of your rows of the head", dw_r, e_w, (size_t)Vt * C, TOL_BWD, NULL);
    gr_parts_say_ok(P_CORRECT, "embedding, loss and every gradient match the single device (t=%d)", t);

    judge_vocab_comm(&d, held, t, B, T, C, V);
    gr_parts_set(P_CORRECT);
    pl_tp_head_acts_free(&a);
    float *p[] = {wte_r, w_r, gx, gdx, dwte_r, dw_r, dwpe, hx, e_wte, e_w};
    for (size_t k = 0; k < sizeof p / sizeof *p; k++) pl_mem_free(p[k]);
    vocab_full_free(&f);
}

/* ---- op train: K steps of the whole model against pl_model_step ---- */

#define TRAIN_STEPS 3
#define TRAIN_B 4
#define TRAIN_LAYERS 2
#define CORPUS_TOKENS 8192

/* Per category, bytes held at peak during training beyond what was held before. */
static double grown(const struct pl_mem_stats *before, const struct pl_mem_stats *after,
                    enum pl_mem_cat cat)
{
    return (double)after->peak[cat] - (double)before->current[cat];
}

/* Parameters, gradients and AdamW's moments per rank: the split tensors' 1/t plus the
 * replicated ones whole, from the shapes; activations within the kit's TP formula for the
 * blocks, the head's [N, V/t] logits and four [N, C] buffers of the step's own. */
static void judge_train_memory(const struct pl_model_config *c, int t, int B,
                               const struct pl_mem_stats *before, const struct pl_mem_stats *after)
{
    gr_parts_set(P_MEMORY);
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, c);
    const double C = c->d_model, F = c->d_ff, V = c->vocab, L = c->n_layers;
    const double N = (double)B * c->seq_len;
    double split = 2 * V * C + L * (4 * C * C + 3 * C + 2 * F * C + F);
    double want = 4.0 * ((double)lay.numel - split + split / t);
    pl_model_layout_free(&lay);
    const struct {
        enum pl_mem_cat cat;
        double bound;
        const char *what;
    } K[] = {{PL_MEM_PARAMS, want, "parameters"},
             {PL_MEM_GRADS, want, "gradients"},
             {PL_MEM_OPTIM, 2 * want, "AdamW moments"}};
    char a[32], b[32];
    for (int k = 0; k < 3; k++) {
        double got = grown(before, after, K[k].cat);
        if (got > K[k].bound * 1.001)
            gr_fail("%s held %s at peak where a rank's shard needs %s: the split tensors' 1/t "
                 "(t=%d) plus the replicated layernorms, position embedding and biases whole",
                 K[k].what, pl_format_bytes(got, a, sizeof a),
                 pl_format_bytes(K[k].bound, b, sizeof b), t);
    }
    double act = L * pl_tp_block_act_bytes(c, t, B, c->seq_len) + 4 * N * (V / t + 3) +
                 4 * 4 * N * C;
    double got = grown(before, after, PL_MEM_ACTIV);
    if (got > act)
        gr_fail("activations held %s at peak, more than the kit's TP formula allows (%s: the "
             "blocks' split activations, the head's [N, V/t] logits, four [N, C] buffers)",
             pl_format_bytes(got, a, sizeof a), pl_format_bytes(act, b, sizeof b));
    gr_parts_say_ok(P_MEMORY, "per rank: %s of parameters (as many of gradients, twice of AdamW "
           "moments) for t=%d, from the shapes; activations %s at peak within %s",
           pl_format_bytes(want, a, sizeof a), t, pl_format_bytes(got, b, sizeof b),
           pl_format_bytes(act, (char[32]){0}, 32));
    gr_parts_set(P_CORRECT);
}

/* Every tensor's shard against its slice of the reference's final weights. */
static void check_train_weights(const struct tp_gpt *m, const struct gr_reference *ref, int t,
                                int r)
{
    /* every tensor's shard against the slice of the reference's final weights */
    float *want = op_alloc(m->numel, "expected shard");
    float *full = op_alloc(ref->numel, "reference params");
    pl_to_device(full, ref->params, ref->numel * sizeof(float));
    pl_tp_model_slice(&ref->layout, t, r, full, want);
    float *h = host_copy(want, m->numel), *g = host_copy(m->params, m->numel);
    double all = 0;
    for (size_t k = 0; k < m->numel; k++) all += (double)h[k] * h[k];
    double rms = sqrt(all / (double)m->numel);
    for (int i = 0; i < m->ntensors && gr_parts_ok(); i++) {
        const struct pl_tp_tensor *d = &m->tensors[i];
        /* as gr_check_params: a tensor that started at zero (a bias) is measured against
         * the whole shard's RMS, so that rounding alone never fails it */
        double e = 0, nr = 0;
        for (size_t k = d->shard_offset; k < d->shard_offset + d->shard_numel; k++) {
            e += ((double)g[k] - h[k]) * ((double)g[k] - h[k]);
            nr += (double)h[k] * h[k];
        }
        double rel = sqrt(e) / fmax(sqrt(nr), rms * sqrt((double)d->shard_numel));
        if (!(rel <= GR_TOL_PARAMS))
            gr_fail("your shard of %s after %d steps: relative L2 error %.2e (tolerance %.0e)%s",
                 d->name, TRAIN_STEPS, rel, GR_TOL_PARAMS,
                 d->split == PL_TP_REPLICATED ? ": a replicated tensor, updated the same "
                                                "on every rank" : "");
    }
    free(h);
    free(g);
    pl_mem_free(want);
    pl_mem_free(full);
}

static void run_train(struct pl_comm *tp)
{
    int t = pl_comm_size(tp), r = pl_comm_rank(tp);
    struct pl_tokens data = pl_corpus_tokens(pl_mix64(base_seed + 5), CORPUS_TOKENS);
    struct gr_train_setup setup;
    memset(&setup, 0, sizeof setup);
    setup.cfg = graded_config();
    setup.cfg.n_layers = TRAIN_LAYERS;
    setup.opt = pl_adamw_config_default();
    setup.data = &data;
    setup.global_B = TRAIN_B;
    setup.steps = TRAIN_STEPS;
    setup.data_seed = pl_mix64(base_seed + 11);
    struct gr_reference ref;
    gr_reference_run(&ref, &setup);
    /* every rank of the group trains on the whole batch */
    struct gr_batch b;
    gr_batch_new(&b, &setup, 0, 1);
    double loss[TRAIN_STEPS] = {0};
    struct pl_mem_stats before, after;
    pl_mem_reset_peak();
    pl_mem_get_stats(&before);
    struct tp_gpt *m = tp_gpt_new(&setup.cfg, &setup.opt, tp);
    for (int s = 0; m && s < TRAIN_STEPS && !pl_todo_what(); s++) {
        gr_batch_load(&b, s);
        loss[s] = tp_gpt_step(m, b.tokens, b.targets, b.B);
    }
    pl_mem_get_stats(&after);
    double err = 0;
    int bad = m ? gr_check_losses(loss, ref.loss, TRAIN_STEPS, &err) : 0;
    if (!m && !pl_todo_what()) gr_fail("tp_gpt_new returned NULL (section 11)");
    else if (bad >= 0 && m)
        gr_fail("the loss of step %d is %.7f where the single device's is %.7f (relative error "
             "%.1e, tolerance %.0e)%s", bad + 1, loss[bad], ref.loss[bad], err, GR_TOL_LOSS,
             bad > 0 ? ": the first steps agree, so the forward is right; look at the "
                       "gradient clipping (replicated tensors count once in the global norm) "
                       "and AdamW's weight decay per tensor (section 11)"
                     : "");
    if (m && gr_parts_ok()) check_train_weights(m, &ref, t, r);
    judge_train_memory(&setup.cfg, t, b.B, &before, &after);
    gr_parts_say_ok(P_CORRECT, "%d AdamW steps of a %d-block GPT on %d ranks: losses and every shard's "
           "weights match the single device (last loss %.5f)", TRAIN_STEPS, TRAIN_LAYERS, t,
           ref.loss[TRAIN_STEPS - 1]);
    tp_gpt_free(m);
    gr_batch_free(&b);
    gr_reference_free(&ref);
    pl_tokens_free(&data);
}

/* ---- op placement: 2 nodes x 4 ranks, tp = 4 ---- */

/* The ranks of this rank's TP group, in world ranks, as "{0,1,2,3}". */
static void describe_members(struct pl_comm *tp, char *buf, size_t len)
{
    size_t at = 0;
    at += (size_t)snprintf(buf + at, len - at, "{");
    for (int m = 0; m < pl_comm_size(tp) && at < len; m++)
        at += (size_t)snprintf(buf + at, len - at, "%s%d", m ? "," : "",
                               pl_comm_world_rank(tp, m));
    if (at < len) snprintf(buf + at, len - at, "}");
}

/* Modelled time on dgx-h100 of one block's forward and backward as traced in delta, and of
 * the same bytes had they all stayed on NVLink. */
static void modelled_cost(const struct pl_ledger *d, double *as_run, double *inside)
{
    const struct pl_profile *p = pl_profile_find("dgx-h100");
    struct pl_ledger in = *d;
    for (int k = 0; k < PL_NKINDS; k++) {
        in.bytes[k][PL_LINK_INTRA] += in.bytes[k][PL_LINK_INTER];
        in.bytes[k][PL_LINK_INTER] = 0;
    }
    *as_run = pl_ledger_modelled_time(d, p);
    *inside = pl_ledger_modelled_time(&in, p);
}

/* One block under grid order `order`; judges correctness, and returns the ledger delta. */
static void placement_run(const char *order, struct pl_comm **tp_out, struct pl_ledger *delta)
{
    struct pl_grid grid;
    char deg[32];
    snprintf(deg, sizeof deg, "tp=%d", PLACE_TP);
    pl_grid_init_or_die(&grid, order, deg, pl_size());
    struct pl_comm *tp = tp_group(&grid, pl_comm_world());
    *tp_out = tp;
    memset(delta, 0, sizeof *delta);
    if (!tp && pl_todo_what()) return;
    if (!tp || pl_comm_size(tp) != PLACE_TP) {
        gr_fail("tp_group gave a group of %d ranks under order %s, where the grid's tp axis has %d",
             tp ? pl_comm_size(tp) : 0, order, PLACE_TP);
        pl_comm_free(tp);
        *tp_out = NULL;
        return;
    }
    struct sub_run run;
    run_sub_case(tp, SUB_BLOCK, CASES[0].B, CASES[0].T, &run);
    *delta = run.code;
}

/* Case 0: the default order tp-dp, every TP group inside a node. Case 1: order dp-tp,
 * which puts each TP group across the nodes: the code must still be right, and the grader
 * reports the violation with its modelled cost. */
static void run_placement(int i)
{
    const char *order = i == 0 ? "tp-dp" : "dp-tp";
    struct pl_comm *tp = NULL;
    struct pl_ledger d;
    placement_run(order, &tp, &d);
    if (!tp) return;
    char mem[64], a[32], b[32];
    describe_members(tp, mem, sizeof mem);
    /* the slowest rank's modelled time and the busiest rank's network bytes: a ring
     * charges each rank the link to its successor, so only some members cross nodes */
    double v[3];
    modelled_cost(&d, &v[0], &v[1]);
    v[2] = pl_ledger_bytes(&d, -1, PL_LINK_INTER);
    PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, v, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    double run = v[0], inside = v[1], inter = v[2], mine = pl_ledger_bytes(&d, -1, PL_LINK_INTER);
    gr_parts_say_ok(P_CORRECT, "the block matches the single device in every TP group under orders "
           "tp-dp and dp-tp");
    if (i == 0) {
        gr_parts_set(P_PLACEMENT);
        if (mine > 0)
            gr_fail("your TP group %s spans nodes: %s of its %s crossed the network. Modelled on "
                 "dgx-h100 this block takes %.2f us where inside a node it takes %.2f us "
                 "(%.1fx). With tp leftmost in the order the grid puts a TP group on "
                 "consecutive ranks, one node: build the group from the grid's tp axis "
                 "(section 2)", mem, pl_format_bytes(mine, a, sizeof a),
                 pl_format_bytes(pl_ledger_bytes(&d, -1, -1), b, sizeof b), run * 1e6,
                 inside * 1e6, run / inside);
        gr_parts_say_ok(P_PLACEMENT, "every TP group of order tp-dp lies inside a node: all of its "
               "all-reduce bytes on intra-node links; modelled on dgx-h100 %.2f us per block "
               "forward+backward", run * 1e6);
    } else {
        gr_parts_set(P_ORDER);
        if (inter <= 0)
            gr_fail("under order dp-tp the TP group %s should cross nodes, yet no byte went "
                 "inter-node: does tp_group follow the grid it is given?", mem);
        gr_parts_say_ok(P_ORDER, "order dp-tp is a placement violation, found and costed: TP group %s "
               "crosses nodes, up to %s per rank inter-node; modelled on dgx-h100 %.2f us per "
               "block forward+backward vs %.2f us inside a node (%.1fx slower). Your code gave "
               "the right numbers under this order too", mem,
               pl_format_bytes(inter, a, sizeof a), run * 1e6, inside * 1e6, run / inside);
    }
    gr_parts_set(P_CORRECT);
    pl_comm_free(tp);
}

/* ---- bench: the modelled cost of one block per TP degree and order ---- */

/* One row of the table; returns the slowest rank's modelled time (s), -1 when no row. */
static double bench_row(int t, const char *order)
{
    struct pl_grid grid;
    char deg[32];
    snprintf(deg, sizeof deg, "tp=%d", t);
    pl_grid_init_or_die(&grid, order, deg, pl_size());
    pl_todo_reset();
    struct pl_comm *tp = tp_group(&grid, pl_comm_world());
    if (gr_todo_any() || !tp) {
        pl_print0("%-8s %4d   tp_group is still a stub: no row\n", order, t);
        return -1;
    }
    struct sub_run run;
    run_sub_case(tp, SUB_BLOCK, CASES[0].B, CASES[0].T, &run);
    struct pl_ledger d = run.code;
    double v[4];
    modelled_cost(&d, &v[0], &v[1]);
    v[2] = pl_ledger_bytes(&d, -1, PL_LINK_INTRA);
    v[3] = pl_ledger_bytes(&d, -1, PL_LINK_INTER);
    PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    int ok = gr_parts_ok_of(P_CORRECT), all_ok = 0;
    PL_CHECK_MPI(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    pl_print0("%-8s %4d %14.0f %14.0f %16.2f %16.2f %8s\n", order, t, v[2], v[3], v[0] * 1e6,
              v[1] * 1e6, all_ok ? "yes" : "NO");
    gr_parts_reset(PART_NAMES, NPARTS);
    pl_comm_free(tp);
    return v[0];
}

/* The tiny graded block is latency-bound; a GPT-3 sized block shows what TP buys and what
 * the network costs: compute 72bsh^2(1 + s/(6h)) FLOPs per block forward and backward,
 * split t ways, plus four ring all-reduces of bsh 16-bit values (DESIGN.md's 8bsh(t-1)/t
 * per rank), on dgx-h100's links inside and across nodes. */
static void big_block_table(void)
{
    const struct pl_profile *p = pl_profile_find("dgx-h100");
    const double b = 1, sq = 2048, h = 12288, S = 2 * b * sq * h;
    const double flops = 72 * b * sq * h * h * (1 + sq / (6 * h));
    double two = 0;
    pl_print0("#\n# one GPT-3 175B block (b=1, s=2048, h=12288, bf16) forward and backward on "
              "dgx-h100, modelled serially:\n# compute/t + 4 ring all-reduces of bsh values\n");
    pl_print0("# %4s %14s %16s %16s %12s\n", "tp", "compute (ms)", "TP in node (ms)",
              "TP across (ms)", "across/in");
    for (int t = 1; t <= 8; t *= 2) {
        double comp = flops / t / p->flops;
        double in = 4 * pl_coll_time(PL_ALL_REDUCE, t, S, p->latency[PL_LINK_INTRA],
                                     p->bw[PL_LINK_INTRA]);
        double out = 4 * pl_coll_time(PL_ALL_REDUCE, t, S, p->latency[PL_LINK_INTER],
                                      p->bw[PL_LINK_INTER]);
        pl_print0("  %4d %14.3f %16.3f %16.3f %12.2f\n", t, comp * 1e3, (comp + in) * 1e3,
                  (comp + out) * 1e3, (comp + out) / (comp + in));
        if (t == 8)
            pl_print0("# handout: a GPT-3 175B block on tp = 8 takes %.3f ms inside a node and "
                      "%.3f ms across nodes (%.2fx), where tp = 2 inside a node takes %.3f ms\n",
                      (comp + in) * 1e3, (comp + out) * 1e3, (comp + out) / (comp + in), two);
        if (t == 2) two = (comp + in) * 1e3;
    }
}

static void bench(const struct gr_args *args)
{
    base_seed = args->seed;
    gr_parts_reset(PART_NAMES, NPARTS);
    const struct pl_topo *topo = pl_topo();
    struct pl_model_config c = graded_config();
    pl_print0("# Lab 4 tensor parallelism: %s, one block (b=%d, s=%d, h=%d, %d heads) forward "
              "and backward\n# on %d nodes x %d ranks, modelled on dgx-h100 (the slowest "
              "rank; bytes of the busiest rank)\n#\n", args->label, CASES[0].B, CASES[0].T,
              c.d_model, c.n_heads, topo->nodes, topo->per_node);
    pl_print0("# %-6s %4s %14s %14s %16s %16s %8s\n", "order", "tp", "intra (B)", "inter (B)",
              "modelled (us)", "in a node (us)", "correct");
    static const int degrees[] = {1, 2, 4, 8};
    for (int k = 0; k < 4; k++) {
        int t = degrees[k];
        if (t > topo->per_node) {
            pl_print0("%-8s %4d   refused: a TP group of %d ranks is larger than a node's %d "
                      "and would cross the network on every all-reduce\n", "tp-dp", t, t,
                      topo->per_node);
            continue;
        }
        double in = bench_row(t, "tp-dp");
        double across = t > 1 ? bench_row(t, "dp-tp") : -1;
        if (t == PLACE_TP && in > 0 && across > 0)
            pl_print0("# handout: with tp = %d across nodes the graded block's modelled time on "
                      "dgx-h100 grows from %.2f us to %.2f us (%.1fx)\n", t, in * 1e6,
                      across * 1e6, across / in);
    }
    big_block_table();
    pl_print0("#\n# activation bytes per rank of one TP block (fp32, the ledger's PL_MEM_ACTIV "
              "of pl_tp_block_acts_new)\n# beside Korthikanti et al.'s 16-bit sbh(10 + 24/t + "
              "5as/(ht)) for the same shape\n");
    pl_print0("# %4s %14s %14s %16s\n", "tp", "measured (B)", "kit formula", "Korthikanti");
    for (int t = 1; t <= 4; t *= 2) {
        struct pl_mem_stats before, after;
        pl_mem_get_stats(&before);
        struct pl_tp_block_acts a;
        pl_tp_block_acts_new(&a, &c, t, CASES[0].B, CASES[0].T);
        pl_mem_get_stats(&after);
        double measured = (double)(after.current[PL_MEM_ACTIV] - before.current[PL_MEM_ACTIV]);
        pl_tp_block_acts_free(&a);
        double s = CASES[0].T, b = CASES[0].B, h = c.d_model, as = c.n_heads;
        double korth = s * b * h * (10 + 24.0 / t + 5 * as * s / (h * t));
        pl_print0("  %4d %14.0f %14.0f %16.0f\n", t, measured,
                  pl_tp_block_act_bytes(&c, t, CASES[0].B, CASES[0].T), korth);
        pl_print0("# handout: t = %d: %.0f bytes measured, %.0f by Korthikanti's formula\n", t,
                  measured, korth);
    }
}

/* ---- the lab's part of the harness ---- */

enum kind { K_CONJ, K_LINEAR, K_MLP, K_ATTN, K_BLOCK, K_VOCAB, K_TRAIN, K_PLACE };

static const char *KIND_OPS[] = {"conjugates", "linear", "mlp",   "attention",
                                 "block",      "vocab",  "train", "placement"};
static const char *KIND_SUBJECTS[] = {"f and g",          "the parallel linears",
                                      "the TP MLP",       "the TP attention",
                                      "the TP block",     "the vocabulary-parallel loss",
                                      "TP training",      "the TP block"};

static enum kind the_kind;

/* The placement op and the bench need the virtual 2 nodes x 4 ranks cluster, which
 * pl_init reads from the environment; the harness owns main, so this runs before it
 * (glibc passes a constructor the program's arguments). */
static void __attribute__((constructor)) placement_topology(int argc, char **argv)
{
    int want = 0;
    for (int i = 1; i + 1 < argc; i++)
        if ((!strcmp(argv[i], "--op") && !strcmp(argv[i + 1], "placement")) ||
            (!strcmp(argv[i], "--mode") && !strcmp(argv[i + 1], "bench")))
            want = 1;
    if (!want) return;
    char v[16];
    snprintf(v, sizeof v, "%d", PLACE_NODES);
    setenv("PL_NODES", v, 0);
    snprintf(v, sizeof v, "%d", PLACE_PER_NODE);
    setenv("PL_GPUS_PER_NODE", v, 0);
}

static void *setup(const struct gr_args *a)
{
    base_seed = a->seed;
    for (int k = 0; k <= K_PLACE; k++)
        if (!strcmp(a->op, KIND_OPS[k])) the_kind = (enum kind)k;
    struct pl_model_config c = graded_config();
    char err[256];
    if (the_kind == K_PLACE) {
        const struct pl_topo *topo = pl_topo();
        if (topo->nodes != PLACE_NODES || topo->per_node != PLACE_PER_NODE)
            pl_usage_error_all("--op placement runs on a virtual %d nodes x %d ranks (launch %d "
                               "ranks)", PLACE_NODES, PLACE_PER_NODE, PLACE_NODES * PLACE_PER_NODE);
    } else if (pl_tp_degree_error(&c, pl_size(), err, sizeof err)) {
        pl_usage_error_all("%d ranks form one TP group here: %s", pl_size(), err);
    }
    return NULL;
}

static const char *subject(void *st)
{
    return KIND_SUBJECTS[the_kind];
}

static int count_cases(void *st)
{
    return the_kind == K_CONJ || the_kind == K_TRAIN ? 1 : the_kind == K_PLACE ? 2 : NCASES;
}

static void describe(void *st, int i, char *buf, size_t len)
{
    if (the_kind == K_CONJ) snprintf(buf, len, "f and g on 1000 floats, t=%d", pl_size());
    else if (the_kind == K_TRAIN)
        snprintf(buf, len, "%d AdamW steps of a %d-block GPT on %d sequences, t=%d",
                 TRAIN_STEPS, TRAIN_LAYERS, TRAIN_B, pl_size());
    else if (the_kind == K_PLACE)
        snprintf(buf, len, "TP block, tp=%d on %d nodes x %d ranks, order %s", PLACE_TP,
                 PLACE_NODES, PLACE_PER_NODE, i == 0 ? "tp-dp" : "dp-tp");
    else
        snprintf(buf, len, "%s, B=%d T=%d, t=%d", KIND_SUBJECTS[the_kind], CASES[i].B,
                 CASES[i].T, pl_size());
}

/* The world as one TP group, through the student's tp_group; NULL when it is a stub. */
static struct pl_comm *world_tp_group(void)
{
    struct pl_grid grid;
    char deg[32];
    snprintf(deg, sizeof deg, "tp=%d", pl_size());
    pl_grid_init_or_die(&grid, "tp", deg, pl_size());
    struct pl_comm *tp = tp_group(&grid, pl_comm_world());
    if (!tp && !pl_todo_what()) gr_fail("tp_group returned no communicator (section 2)");
    return tp;
}

static void run(void *st, int i)
{
    gr_parts_reset(PART_NAMES, NPARTS);
    if (the_kind == K_PLACE) {
        run_placement(i);
        return;
    }
    struct pl_comm *tp = world_tp_group();
    if (!tp) return;
    if (the_kind == K_CONJ) run_conjugates(tp);
    else if (the_kind == K_LINEAR) run_linear(tp, i);
    else if (the_kind == K_VOCAB) run_vocab(tp, i);
    else if (the_kind == K_TRAIN) run_train(tp);
    else run_sub(tp, (enum sub)(the_kind - K_MLP), i);
    pl_comm_free(tp);
}

static int judge(void *st, int i, const char *part)
{
    for (int p = 0; p < NPARTS; p++)
        if (!strcmp(part, PART_NAMES[p]))
            return gr_parts_gather((enum part)p, i == count_cases(st) - 1);
    pl_usage_error_all("--parts %s: Lab 4 judges correct, traffic, memory, placement and order",
                       part);
}

const struct gr_driver gr_lab_driver = {
    .flags = NULL,
    .nflags = 0,
    .setup = setup,
    .subject = subject,
    .correct_first = "must match the single device first",
    .ncases = count_cases,
    .describe = describe,
    .run = run,
    .judge = judge,
    .bench = bench,
};
