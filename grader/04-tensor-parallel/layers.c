/* layers.c: Lab 4's ops conjugates, linear, mlp, attention and block (lab04.h): the
 * student's f and g, parallel linears, MLP, attention and block against the single-device
 * oracle built from lib's ops, shard by shard, and each pass's all-reduces from the ledger. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab04.h"
#include "parts.h"
#include "tp_shard.h"
#include "units.h"

/* ---- op conjugates: f and g on integer-valued data, exact ---- */

static void member_data(int w, size_t n, float *out)
{
    pl_rng_fill_int(out, n, base_seed, pl_rng_stream("lab04.conj"), (uint64_t)w * n, -64, 64);
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
    traffic_since(&mark, &tr[which]);
    int sums = which == 1 || which == 2;
    float *got = gr_host_copy(buf, n);
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

void run_conjugates(struct pl_comm *tp)
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
    gr_parts_say_ok(P_TRAFFIC,
                    "one all-reduce in f's backward and g's forward, none in f's forward "
                    "and g's backward");
}

/* ---- op linear: column- and row-parallel against nn.Linear on the full weight ---- */

struct linear_run {
    struct pass_traffic fwd, bwd;
};

/* The single-device nn.Linear both parallel linears are judged against: w [OC, IC], b
 * [OC], x [N, IC] and dy [N, OC] drawn from the streams PREFIX.w, .b, .x and .dy (b with
 * bias_std), and its y, dx, dw and db. */
struct full_linear {
    float *w, *b, *x, *dy, *y, *dx, *dw, *db;
};

static void full_linear_run(struct full_linear *f, const char *prefix, float bias_std, int N,
                            int IC, int OC)
{
    char name[32];
    snprintf(name, sizeof name, "%s.w", prefix);
    f->w = gr_op_normal(base_seed, name, (size_t)OC * IC, 0, 0.1f);
    snprintf(name, sizeof name, "%s.b", prefix);
    f->b = gr_op_normal(base_seed, name, (size_t)OC, 0, bias_std);
    snprintf(name, sizeof name, "%s.x", prefix);
    f->x = gr_op_normal(base_seed, name, (size_t)N * IC, 0, 1);
    snprintf(name, sizeof name, "%s.dy", prefix);
    f->dy = gr_op_normal(base_seed, name, (size_t)N * OC, 0, 1);
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

static void column_linear_case(struct pl_comm *tp, int N, int C, int OC, struct linear_run *lr)
{
    int t = pl_comm_size(tp), r = pl_comm_rank(tp), OCt = OC / t;
    struct full_linear f;
    full_linear_run(&f, "lab04.lin", 0.1f, N, C, OC);
    float *w = f.w, *b = f.b, *x = f.x, *dy = f.dy, *y = f.y, *dx = f.dx, *dw = f.dw, *db = f.db;
    /* this rank's rows of w and b, columns of y and dy */
    struct pl_tp_rect rows = {(size_t)r * OCt, 0, (size_t)OCt, (size_t)C};
    struct pl_tp_rect brow = {(size_t)r * OCt, 0, (size_t)OCt, 1};
    struct pl_tp_rect cols = {0, (size_t)r * OCt, (size_t)N, (size_t)OCt};
    float *sw = gr_op_alloc((size_t)OCt * C, "w shard"), *sb = gr_op_alloc((size_t)OCt, "b shard");
    float *sdy = gr_op_alloc((size_t)N * OCt, "dy cols"), *sy = gr_op_alloc((size_t)N * OCt, "y");
    /* dx handed over holding junk (written), dw and db non-zero (accumulated) */
    float *gy = gr_op_alloc((size_t)N * OCt, "your y"), *gdx = junk("lab04.lin.dx0", (size_t)N * C);
    float *gdw = junk("lab04.lin.dw0", (size_t)OCt * C), *gdb = junk("lab04.lin.db0", (size_t)OCt);
    float *dx0 = junk("lab04.lin.dx0", (size_t)N * C), *dw0 = junk("lab04.lin.dw0", (size_t)OCt * C);
    float *db0 = junk("lab04.lin.db0", (size_t)OCt);
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
    traffic_since(&mark, &lr->fwd);
    gr_ledger_mark(&mark);
    tp_column_linear_backward(tp, gdx, gdw, gdb, sdy, x, sw, N, C, OCt);
    traffic_since(&mark, &lr->bwd);
    gr_compare("column-parallel y (your columns of the output)", gy, sy, (size_t)N * OCt,
            TOL_FWD, "y = x w^T + b with this rank's rows of w: the output stays split");
    compare_written("column-parallel dx", gdx, dx0, dx, (size_t)N * C, TOL_BWD,
                    "every rank's dy w is a part of dx: f's backward sums them over the group");
    compare_accumulated("column-parallel dw (your rows)", gdw, dw0, ew, (size_t)OCt * C, TOL_BWD,
                        NULL);
    compare_accumulated("column-parallel db (your slice)", gdb, db0, eb, (size_t)OCt, TOL_BWD,
                        NULL);
    float *p[] = {sw, sb, sdy, sy, gy, gdx, gdw, gdb, ew, eb, dx0, dw0, db0};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) pl_mem_free(p[i]);
    full_linear_free(&f);
}

static void row_linear_case(struct pl_comm *tp, int N, int IC, int OC, struct linear_run *lr)
{
    int t = pl_comm_size(tp), r = pl_comm_rank(tp), ICt = IC / t;
    struct full_linear f;
    full_linear_run(&f, "lab04.row", 0.5f, N, IC, OC);
    float *w = f.w, *b = f.b, *x = f.x, *dy = f.dy, *y = f.y, *dx = f.dx, *dw = f.dw, *db = f.db;
    struct pl_tp_rect wc = {0, (size_t)r * ICt, (size_t)OC, (size_t)ICt};
    struct pl_tp_rect xc = {0, (size_t)r * ICt, (size_t)N, (size_t)ICt};
    float *sw = gr_op_alloc((size_t)OC * ICt, "w cols"),
          *sx = gr_op_alloc((size_t)N * ICt, "x cols");
    float *gy = gr_op_alloc((size_t)N * OC, "your y"), *gdx = junk("lab04.row.dx0", (size_t)N * ICt);
    float *gdw = junk("lab04.row.dw0", (size_t)OC * ICt), *gdb = junk("lab04.row.db0", (size_t)OC);
    float *dx0 = junk("lab04.row.dx0", (size_t)N * ICt), *dw0 = junk("lab04.row.dw0", (size_t)OC * ICt);
    float *db0 = junk("lab04.row.db0", (size_t)OC);
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
    traffic_since(&mark, &lr->fwd);
    gr_ledger_mark(&mark);
    tp_row_linear_backward(tp, gdx, gdw, gdb, gdy, sx, sw, N, ICt, OC);
    traffic_since(&mark, &lr->bwd);
    const char *hint = extra_bias(gy, y, b, N, OC, t)
        ? "the output is the right sum plus t-1 extra copies of the bias: it was added on "
          "every rank before the reduction; add it once, after g (section 4)"
        : "each rank's x_r w_r^T is a partial sum: g's forward adds them, then the bias "
          "once";
    gr_compare("row-parallel y (full, every rank)", gy, y, (size_t)N * OC, TOL_FWD, hint);
    compare_written("row-parallel dx (your columns)", gdx, dx0, ex, (size_t)N * ICt, TOL_BWD,
                    NULL);
    compare_accumulated("row-parallel dw (your columns)", gdw, dw0, ew, (size_t)OC * ICt,
                        TOL_BWD, NULL);
    compare_accumulated("row-parallel db (replicated)", gdb, db0, db, (size_t)OC, TOL_BWD, NULL);
    float *p[] = {sw, sx, gy, gdx, gdw, gdb, ex, ew, gdy, dx0, dw0, db0};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) pl_mem_free(p[i]);
    full_linear_free(&f);
}

void run_linear(struct pl_comm *tp, int i)
{
    int t = pl_comm_size(tp), N = case_shape(i).B * case_shape(i).T;
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
    gr_parts_say_ok(P_TRAFFIC,
                    "one all-reduce of [N, C] in the column backward and the row forward, "
                    "none elsewhere");
}

/* ---- the sub-layers and the block against the single-device oracle ---- */

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
        float *h = gr_op_alloc((size_t)N * F, "h"), *g = gr_op_alloc((size_t)N * F, "g");
        float *dg = gr_op_alloc((size_t)N * F, "dg"), *dh = gr_op_alloc((size_t)N * F, "dh");
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
        float *qkv = gr_op_alloc((size_t)N * 3 * C, "qkv"),
              *hd = gr_op_alloc((size_t)N * C, "heads");
        float *att = gr_op_alloc((size_t)k->B * c->n_heads * k->T * k->T, "att");
        float *dqkv = gr_op_alloc((size_t)N * 3 * C, "dqkv"),
              *dhd = gr_op_alloc((size_t)N * C, "dh");
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
    float *qkv = gr_op_alloc((size_t)N * 3 * C, "qkv"), *hd = gr_op_alloc((size_t)N * C, "heads");
    float *att = gr_op_alloc((size_t)k->B * c->n_heads * k->T * k->T, "att");
    float *mine = gr_op_alloc((size_t)N * 3 * Ct, "my qkv"),
          *my_hd = gr_op_alloc((size_t)N * Ct, "");
    pl_matmul_forward(qkv, k->x, k->p.w_qkv, k->p.b_qkv, N, C, 3 * C);
    pl_attention_forward(hd, att, qkv, k->B, k->T, C, c->n_heads);
    for (int j = 0; j < 3; j++) {
        struct pl_tp_rect q = {0, (size_t)j * C + (size_t)k->r * Ct, (size_t)N, (size_t)Ct};
        float *col = gr_op_alloc((size_t)N * Ct, "");
        pl_tp_copy_rect_out(col, qkv, (size_t)3 * C, &q);
        for (int n = 0; n < N; n++)
            pl_copy(mine + (size_t)n * 3 * Ct + (size_t)j * Ct, col + (size_t)n * Ct,
                    (size_t)Ct);
        pl_mem_free(col);
    }
    struct pl_tp_rect hc = {0, (size_t)k->r * Ct, (size_t)N, (size_t)Ct};
    pl_tp_copy_rect_out(my_hd, hd, (size_t)C, &hc);
    float *gq = gr_host_copy(a->qkv, (size_t)N * 3 * Ct),
          *eq = gr_host_copy(mine, (size_t)N * 3 * Ct);
    float *gh = gr_host_copy(a->y, (size_t)N * Ct), *eh = gr_host_copy(my_hd, (size_t)N * Ct);
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
    return gr_compare(what, gy, y, nc, TOL_FWD, hint[0] ? hint : NULL);
}

void run_sub_case(struct pl_comm *tp, enum sub s, int B, int T, int traced,
                  struct sub_run *run)
{
    struct block_case k;
    block_case_new(&k, pl_comm_size(tp), pl_comm_rank(tp), B, T);
    const size_t nc = (size_t)k.N * k.cfg.d_model;
    float *y = gr_op_alloc(nc, "ref y"), *dx = gr_op_alloc(nc, "ref dx");
    /* dx is handed over holding junk: backward functions write it (=) */
    float *gy = gr_op_alloc(nc, "your y"), *gdx = junk("lab04.dx.junk", nc);
    float *gdx0 = junk("lab04.dx.junk", nc);
    float *gdy = gr_op_alloc(nc, "dy"), *gx = gr_op_alloc(nc, "x");
    double f0 = pl_ledger_flops_total();
    if (s == SUB_BLOCK) oracle_block(&k, y, dx);
    else oracle_sub(&k, s, y, dx);
    run->oracle_flops = pl_ledger_flops_total() - f0;
    run->activation_floats = (double)nc;
    struct pl_tp_block_acts a;
    pl_tp_block_acts_new(&a, &k.cfg, k.t, B, T);
    pl_copy(gdy, k.dy, nc);
    pl_copy(gx, k.x, nc);
    struct pl_ledger mark;
    gr_ledger_mark(&mark);
    if (traced) gr_bt_begin();
    if (s == SUB_MLP) tp_mlp_forward(tp, &k.cfg, &k.sp, &a.mlp, gx, gy);
    else if (s == SUB_ATTN) tp_attention_forward(tp, &k.cfg, &k.sp, &a.attn, gx, gy);
    else tp_block_forward(tp, &k.cfg, &k.sp, &a, gx, gy);
    if (traced) gr_bt_pause();
    traffic_since(&mark, &run->fwd);
    gr_ledger_since(&mark, &run->code);
    memset(&run->bwd, 0, sizeof run->bwd);
    /* a wrong forward is the reason; the backward runs (on every rank) only after a right
     * one, so what it reads was written as the contract says */
    int ok = check_sub_output(&k, s, &a, run, gy, y), all_ok = 0;
    PL_CHECK_MPI(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (all_ok) {
        gr_ledger_mark(&mark);
        if (traced) gr_bt_resume();
        if (s == SUB_MLP) tp_mlp_backward(tp, &k.cfg, &k.sp, &k.sg, &a.mlp, gx, gdy, gdx);
        else if (s == SUB_ATTN)
            tp_attention_backward(tp, &k.cfg, &k.sp, &k.sg, &a.attn, gx, gdy, gdx);
        else tp_block_backward(tp, &k.cfg, &k.sp, &k.sg, &a, gdy, gdx);
        if (traced) gr_bt_pause();
        traffic_since(&mark, &run->bwd);
        struct pl_ledger bwd;
        gr_ledger_since(&mark, &bwd);
        ledger_add(&run->code, &bwd);
        char what[96];
        snprintf(what, sizeof what, "%s input gradient dx (B=%d, T=%d, t=%d)", SUBS[s].title,
                 B, T, k.t);
        char hint[600];
        snprintf(hint, sizeof hint, "every rank's branch saw all of x, so its dx is a part of "
                 "the whole: f's backward sums them over the TP group (section 3)%s",
                 world_hint(tp));
        compare_written(what, gdx, gdx0, dx, nc, TOL_BWD, hint);
        compare_shard_grads(&k, SUBS[s].tensors, SUBS[s].ntensors, NULL);
    }
    if (traced) gr_bt_end(all_ok);
    pl_tp_block_acts_free(&a);
    float *p[] = {y, dx, gy, gdx, gdx0, gdy, gx};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) pl_mem_free(p[i]);
    block_case_free(&k);
}

void run_sub(struct pl_comm *tp, enum sub s, int i)
{
    int t = pl_comm_size(tp), B = case_shape(i).B, T = case_shape(i).T;
    struct sub_run run;
    run_sub_case(tp, s, B, T, time_traced(s, i), &run);
    gr_parts_say_ok(P_CORRECT,
                    "output, dx and every shard's gradient match the single device (t=%d, "
                    "%d cases, the last with B=%d T=%d on %d TP group%s of %d, each with its "
                    "own data; gradients handed over non-zero)",
                    pl_size(), NCASES, B, T, pl_size() / t, pl_size() / t == 1 ? "" : "s", t);
    gr_parts_set(P_TRAFFIC);
    double nc = (double)B * T * 64;
    if (t > 1) {
        judge_pass_traffic("forward", &run.fwd, SUBS[s].ars, nc, t,
                           "g after each row-parallel linear");
        judge_pass_traffic("backward", &run.bwd, SUBS[s].ars, nc, t,
                           "f's backward before each column-parallel linear");
    }
    gr_parts_set(P_CORRECT);
    /* docs/design.md: a block moves 8bsh(t-1)/t elements per rank per microbatch (said of
     * case 1, whose group is the world) */
    const int b1 = CASES[1].B, s1 = CASES[1].T, tw = pl_size();
    double want = 8.0 * b1 * s1 * 64 * (tw - 1) / tw * 4.0 * SUBS[s].ars / 2;
    char a[32];
    gr_parts_say_ok(P_TRAFFIC,
                    "%d all-reduce%s forward and %d backward per pass on the TP group; the "
                    "case b=%d, s=%d, h=64 on t=%d sent %s per rank = %s8bsh(t-1)/t x 4 bytes",
                    SUBS[s].ars, SUBS[s].ars == 1 ? "" : "s", SUBS[s].ars, b1, s1, tw,
                    pl_format_bytes(want, a, sizeof a), s == SUB_BLOCK ? "" : "1/2 of ");
    if (time_traced(s, 0) && pl_size() > 1) {
        /* judged on case 0 (t = the world); the other cases say its verdict again */
        gr_parts_set(P_TIME);
        time_judge(&run, i == 0 ? t : pl_size(), i);
        gr_parts_set(P_CORRECT);
    }
}
