/* cases_linear.c: Lab 4's ops conjugates and linear (lab04.h): the student's f and g on
 * integer data (exact), and the column- and row-parallel linears against nn.Linear on the full
 * weight, with the all-reduces of each pass recorded for part traffic. */
#include <stdio.h>
#include <stdlib.h>

#include "lab04.h"
#include "tp_shard.h"

/* ---- op conjugates: f and g on integer-valued data, exact ---- */

static void member_data(struct l4_state *st, int w, size_t n, float *out)
{
    pl_rng_fill_int(out, n, st->base_seed, pl_rng_stream("lab04.conj"), (uint64_t)w * n, -64, 64);
}

static void check_conjugate(struct l4_state *st, struct pl_comm *tp, int which, const float *mine,
                            const float *sum, size_t n, struct l4_traffic *tr)
{
    float *buf = gr_op_alloc(n, "lab04 conj buf");
    pl_to_device(buf, mine, n * sizeof(float));
    struct pl_ledger mark;
    gr_ledger_mark(&mark);
    switch (which) {
    case 0: tp_copy_to_region_forward(tp, buf, n); break;
    case 1: tp_copy_to_region_backward(tp, buf, n); break;
    case 2: tp_reduce_from_region_forward(tp, buf, n); break;
    default: tp_reduce_from_region_backward(tp, buf, n); break;
    }
    l4_traffic_since(&mark, &tr[which]);
    int sums = which == 1 || which == 2;
    float *got = gr_host_copy(buf, n);
    const float *want = sums ? sum : mine;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            L4_FAIL(st, L4_W_CONJ, which, (double)i, got[i], want[i], sum[i]);
            break;
        }
    free(got);
    pl_mem_free(buf);
}

void l4_run_conjugates(struct l4_state *st, struct pl_comm *tp)
{
    int t = pl_comm_size(tp);
    const size_t n = 1000;
    float *mine = malloc(n * sizeof *mine), *sum = calloc(n, sizeof *sum);
    float *tmp = malloc(n * sizeof *tmp);
    member_data(st, pl_comm_world_rank(tp, pl_comm_rank(tp)), n, mine);
    for (int m = 0; m < t; m++) {
        member_data(st, pl_comm_world_rank(tp, m), n, tmp);
        for (size_t i = 0; i < n; i++) sum[i] += tmp[i];
    }
    struct l4_traffic tr[4];
    for (int k = 0; k < 4; k++) check_conjugate(st, tp, k, mine, sum, n, tr);
    free(mine);
    free(sum);
    free(tmp);
    st->ob->figs.t = t;
    static const char *names[] = {"f forward", "f backward", "g forward", "g backward"};
    st->cur = L4_TRAFFIC;
    for (int k = 0; k < 4 && t > 1; k++)
        l4_pass(st, names[k], &tr[k], k == 1 || k == 2, (double)n, t,
                           "section 3's table");
    st->cur = L4_CORRECT;
}

/* ---- op linear: column- and row-parallel against nn.Linear on the full weight ---- */

struct linear_run {
    struct l4_traffic fwd, bwd;
};

/* The single-device nn.Linear both parallel linears are judged against: w [OC, IC], b
 * [OC], x [N, IC] and dy [N, OC] drawn from the streams PREFIX.w, .b, .x and .dy (b with
 * bias_std), and its y, dx, dw and db. */
struct full_linear {
    float *w, *b, *x, *dy, *y, *dx, *dw, *db;
};

static void full_linear_run(struct l4_state *st, struct full_linear *f, const char *prefix, float bias_std, int N,
                            int IC, int OC)
{
    char name[32];
    snprintf(name, sizeof name, "%s.w", prefix);
    f->w = gr_op_normal(st->base_seed, name, (size_t)OC * IC, 0, 0.1f);
    snprintf(name, sizeof name, "%s.b", prefix);
    f->b = gr_op_normal(st->base_seed, name, (size_t)OC, 0, bias_std);
    snprintf(name, sizeof name, "%s.x", prefix);
    f->x = gr_op_normal(st->base_seed, name, (size_t)N * IC, 0, 1);
    snprintf(name, sizeof name, "%s.dy", prefix);
    f->dy = gr_op_normal(st->base_seed, name, (size_t)N * OC, 0, 1);
    f->y = gr_op_alloc((size_t)N * OC, "y"), f->dx = gr_op_alloc((size_t)N * IC, "dx");
    f->dw = gr_op_alloc((size_t)OC * IC, "dw"), f->db = gr_op_alloc((size_t)OC, "db");
    pl_zero(f->dx, (size_t)N * IC);
    pl_zero(f->dw, (size_t)OC * IC);
    pl_zero(f->db, (size_t)OC);
    pl_matmul_forward(f->y, f->x, f->w, f->b, N, IC, OC);
    pl_matmul_backward(f->dx, f->dw, f->db, f->dy, f->x, f->w, N, IC, OC);
}

static void full_linear_free(struct full_linear *f)
{
    float *p[] = {f->w, f->b, f->x, f->dy, f->y, f->dx, f->dw, f->db};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) pl_mem_free(p[i]);
}

static void column_linear_case(struct l4_state *st, struct pl_comm *tp, int N, int C, int OC, struct linear_run *lr)
{
    int t = pl_comm_size(tp), r = pl_comm_rank(tp), OCt = OC / t;
    struct full_linear f;
    full_linear_run(st, &f, "lab04.lin", 0.1f, N, C, OC);
    float *w = f.w, *b = f.b, *x = f.x, *dy = f.dy, *y = f.y, *dx = f.dx, *dw = f.dw, *db = f.db;
    /* this rank's rows of w and b, columns of y and dy */
    struct pl_tp_rect rows = {(size_t)r * OCt, 0, (size_t)OCt, (size_t)C};
    struct pl_tp_rect brow = {(size_t)r * OCt, 0, (size_t)OCt, 1};
    struct pl_tp_rect cols = {0, (size_t)r * OCt, (size_t)N, (size_t)OCt};
    float *sw = gr_op_alloc((size_t)OCt * C, "w shard"), *sb = gr_op_alloc((size_t)OCt, "b shard");
    float *sdy = gr_op_alloc((size_t)N * OCt, "dy cols"), *sy = gr_op_alloc((size_t)N * OCt, "y");
    /* dx handed over holding junk (written), dw and db non-zero (accumulated) */
    float *gy = gr_op_alloc((size_t)N * OCt, "your y"), *gdx = l4_junk(st, "lab04.lin.dx0", (size_t)N * C);
    float *gdw = l4_junk(st, "lab04.lin.dw0", (size_t)OCt * C), *gdb = l4_junk(st, "lab04.lin.db0", (size_t)OCt);
    float *dx0 = l4_junk(st, "lab04.lin.dx0", (size_t)N * C), *dw0 = l4_junk(st, "lab04.lin.dw0", (size_t)OCt * C);
    float *db0 = l4_junk(st, "lab04.lin.db0", (size_t)OCt);
    float *ew = gr_op_alloc((size_t)OCt * C, "expected dw"), *eb = gr_op_alloc((size_t)OCt, "db");
    pl_tp_copy_rect_out(sw, w, (size_t)C, &rows);
    pl_tp_copy_rect_out(sb, b, 1, &brow);
    pl_tp_copy_rect_out(sdy, dy, (size_t)OC, &cols);
    pl_tp_copy_rect_out(sy, y, (size_t)OC, &cols);
    pl_tp_copy_rect_out(ew, dw, (size_t)C, &rows);
    pl_tp_copy_rect_out(eb, db, 1, &brow);
    struct pl_ledger mark;
    gr_ledger_mark(&mark);
    tp_column_linear_forward(tp, gy, x, sw, sb, N, C, OCt);
    l4_traffic_since(&mark, &lr->fwd);
    gr_ledger_mark(&mark);
    tp_column_linear_backward(tp, gdx, gdw, gdb, sdy, x, sw, N, C, OCt);
    l4_traffic_since(&mark, &lr->bwd);
    const struct l4_hint none = {0};
    l4_compare(st, "column-parallel y (your columns of the output)", gy, sy, (size_t)N * OCt,
               L4_TOL_FWD, (struct l4_hint){.kind = L4_H_COL_Y});
    l4_compare_written(st, "column-parallel dx", gdx, dx0, dx, (size_t)N * C, L4_TOL_BWD,
                       (struct l4_hint){.kind = L4_H_COL_DX});
    l4_compare_accumulated(st, "column-parallel dw (your rows)", gdw, dw0, ew, (size_t)OCt * C,
                           L4_TOL_BWD, none);
    l4_compare_accumulated(st, "column-parallel db (your slice)", gdb, db0, eb, (size_t)OCt,
                           L4_TOL_BWD, none);
    float *p[] = {sw, sb, sdy, sy, gy, gdx, gdw, gdb, ew, eb, dx0, dw0, db0};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) pl_mem_free(p[i]);
    full_linear_free(&f);
}

static void row_linear_case(struct l4_state *st, struct pl_comm *tp, int N, int IC, int OC, struct linear_run *lr)
{
    int t = pl_comm_size(tp), r = pl_comm_rank(tp), ICt = IC / t;
    struct full_linear f;
    full_linear_run(st, &f, "lab04.row", 0.5f, N, IC, OC);
    float *w = f.w, *b = f.b, *x = f.x, *dy = f.dy, *y = f.y, *dx = f.dx, *dw = f.dw, *db = f.db;
    struct pl_tp_rect wc = {0, (size_t)r * ICt, (size_t)OC, (size_t)ICt};
    struct pl_tp_rect xc = {0, (size_t)r * ICt, (size_t)N, (size_t)ICt};
    float *sw = gr_op_alloc((size_t)OC * ICt, "w cols"),
          *sx = gr_op_alloc((size_t)N * ICt, "x cols");
    float *gy = gr_op_alloc((size_t)N * OC, "your y"), *gdx = l4_junk(st, "lab04.row.dx0", (size_t)N * ICt);
    float *gdw = l4_junk(st, "lab04.row.dw0", (size_t)OC * ICt), *gdb = l4_junk(st, "lab04.row.db0", (size_t)OC);
    float *dx0 = l4_junk(st, "lab04.row.dx0", (size_t)N * ICt), *dw0 = l4_junk(st, "lab04.row.dw0", (size_t)OC * ICt);
    float *db0 = l4_junk(st, "lab04.row.db0", (size_t)OC);
    float *ex = gr_op_alloc((size_t)N * ICt, "dx cols"), *ew = gr_op_alloc((size_t)OC * ICt, "dw");
    float *gdy = gr_op_alloc((size_t)N * OC, "dy");
    pl_tp_copy_rect_out(sw, w, (size_t)IC, &wc);
    pl_tp_copy_rect_out(sx, x, (size_t)IC, &xc);
    pl_tp_copy_rect_out(ex, dx, (size_t)IC, &xc);
    pl_tp_copy_rect_out(ew, dw, (size_t)IC, &wc);
    pl_copy(gdy, dy, (size_t)N * OC);
    struct pl_ledger mark;
    gr_ledger_mark(&mark);
    tp_row_linear_forward(tp, gy, sx, sw, b, N, ICt, OC);
    l4_traffic_since(&mark, &lr->fwd);
    gr_ledger_mark(&mark);
    tp_row_linear_backward(tp, gdx, gdw, gdb, gdy, sx, sw, N, ICt, OC);
    l4_traffic_since(&mark, &lr->bwd);
    const struct l4_hint none = {0};
    struct l4_hint hint = {.kind = l4_extra_bias(gy, y, b, N, OC, t) ? L4_H_ROW_BIAS : L4_H_ROW_Y};
    l4_compare(st, "row-parallel y (full, every rank)", gy, y, (size_t)N * OC, L4_TOL_FWD, hint);
    l4_compare_written(st, "row-parallel dx (your columns)", gdx, dx0, ex, (size_t)N * ICt,
                       L4_TOL_BWD, none);
    l4_compare_accumulated(st, "row-parallel dw (your columns)", gdw, dw0, ew, (size_t)OC * ICt,
                           L4_TOL_BWD, none);
    l4_compare_accumulated(st, "row-parallel db (replicated)", gdb, db0, db, (size_t)OC,
                           L4_TOL_BWD, none);
    float *p[] = {sw, sx, gy, gdx, gdw, gdb, ex, ew, gdy, dx0, dw0, db0};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) pl_mem_free(p[i]);
    full_linear_free(&f);
}

void l4_run_linear(struct l4_state *st, struct pl_comm *tp, int i)
{
    int t = pl_comm_size(tp), N = l4_shape_of(st, i).B * l4_shape_of(st, i).T;
    struct linear_run col, row;
    column_linear_case(st, tp, N, 64, 128, &col);
    row_linear_case(st, tp, N, 128, 64, &row);
    st->ob->figs.t = t;
    st->cur = L4_TRAFFIC;
    if (t > 1) {
        l4_pass(st, "column-parallel forward", &col.fwd, 0, N * 64.0, t,
                           "tp.h's traffic rule");
        l4_pass(st, "column-parallel backward", &col.bwd, 1, N * 64.0, t,
                           "tp.h's traffic rule");
        l4_pass(st, "row-parallel forward", &row.fwd, 1, N * 64.0, t, "tp.h's traffic rule");
        l4_pass(st, "row-parallel backward", &row.bwd, 0, N * 64.0, t,
                           "tp.h's traffic rule");
    }
    st->cur = L4_CORRECT;
}
