/* cases_block.c: Lab 4's ops mlp, attention and block, and placement (lab04.h): the student's
 * MLP, attention and block against the single-device oracle built from lib's ops, shard by
 * shard, each pass's all-reduces from the ledger; the block on a virtual 2 nodes x 4 ranks
 * cluster under the default order and under one that puts TP across nodes, costed from the
 * ledger's link classes on dgx-h100. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab04.h"
#include "todo.h"
#include "tp_shard.h"
#include "units.h"

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
static void oracle_sub(struct l4_block *k, enum l4_sub s, float *y, float *dx)
{
    const struct pl_model_config *c = &k->cfg;
    const int N = k->N, C = c->d_model, F = c->d_ff;
    pl_zero(dx, (size_t)N * C);
    if (s == L4_SUB_MLP) {
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
static void oracle_block(struct l4_block *k, float *y, float *dx)
{
    struct pl_block_acts a;
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    pl_block_acts_new(&a, &k->cfg, k->B, k->T);
    pl_block_forward(&k->cfg, 0, &k->p, &a, &ctx, k->x, y);
    pl_block_backward(&k->cfg, 0, &k->p, &k->g, &a, &ctx, k->dy, dx);
    pl_block_acts_free(&a);
}

/* q, k, v of this rank right but its heads' outputs not: the head dimension was split.
 * heads_rel (may be NULL) gets the heads' relative L2 error. */
static int heads_split_wrong(struct l4_block *k, const struct pl_tp_attn_acts *a,
                             double *heads_rel)
{
    const struct pl_model_config *c = &k->cfg;
    const int N = k->N, C = c->d_model, t = k->t, Ct = C / t;
    if (heads_rel) *heads_rel = 0;
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
    double hrel = pl_rel_l2(gh, eh, (size_t)N * Ct);
    int wrong = pl_rel_l2(gq, eq, (size_t)N * 3 * Ct) < L4_TOL_FWD && hrel > L4_TOL_FWD;
    if (heads_rel) *heads_rel = hrel;
    free(gq);
    free(eq);
    free(gh);
    free(eh);
    float *p[] = {qkv, hd, att, mine, my_hd};
    for (int i = 0; i < 5; i++) pl_mem_free(p[i]);
    return wrong;
}

/* ---- the attention's scores: room for every head, and whether it was used ----
 * The kit's acts keep the scores of this rank's NH/t heads, a->att [B, NH/t, T, T].
 * Attention run on all NH heads with C/(NH t) channels each (the head dimension split
 * instead of the heads) fills t times that and would overwrite whatever the heap holds
 * next: the grader hands a->att over with room for all NH heads, the part past the kit's
 * size filled with a pattern, so that such code is told what it did instead of crashing. */

#define L4_ATT_PATTERN 0x7fa11a77u /* a NaN no op writes */

void l4_att_guard_set(struct l4_att_guard *g, struct pl_tp_attn_acts *a,
                      const struct pl_model_config *c, int t)
{
    const size_t TT = (size_t)a->T * a->T;
    g->kit = a->att;
    g->held = (size_t)a->B * (size_t)(c->n_heads / t) * TT;
    g->room = (size_t)a->B * (size_t)c->n_heads * TT;
    g->per_head = (size_t)a->B * TT;
    g->roomy = gr_op_alloc(g->room, "tp attn scores with room for every head");
    uint32_t *h = malloc((g->room - g->held) * sizeof *h + sizeof *h);
    for (size_t i = 0; i < g->room - g->held; i++) h[i] = L4_ATT_PATTERN;
    pl_to_device(g->roomy + g->held, h, (g->room - g->held) * sizeof *h);
    free(h);
    a->att = g->roomy;
}

double l4_att_guard_used(const struct l4_att_guard *g)
{
    size_t extra = g->room - g->held, last = 0;
    if (!extra) return (double)g->held;
    float *tail = gr_host_copy(g->roomy + g->held, extra);
    for (size_t i = 0; i < extra; i++) {
        uint32_t bits;
        memcpy(&bits, &tail[i], sizeof bits);
        if (bits != L4_ATT_PATTERN) last = i + 1;
    }
    free(tail);
    return (double)(g->held + last);
}

void l4_att_guard_end(struct l4_att_guard *g, struct pl_tp_attn_acts *a)
{
    a->att = g->kit;
    pl_mem_free(g->roomy);
    g->roomy = NULL;
}

/* Records the scores written past a->att as this part's failure (why L4_W_ATT_OVERRUN)
 * and returns 1, or returns 0 when the attention kept within them. */
static int att_overran(struct l4_state *st, struct l4_block *k, const struct pl_tp_attn_acts *a,
                       const struct l4_att_guard *g, int before_training)
{
    double used = l4_att_guard_used(g);
    if (used <= (double)g->held) return 0;
    double heads_rel = 0;
    int split = heads_split_wrong(k, a, &heads_rel);
    L4_FAIL(st, L4_W_ATT_OVERRUN, used, (double)g->held, (double)g->per_head,
            (double)k->cfg.n_heads, (double)k->t, split, heads_rel, before_training);
    return 1;
}

int l4_att_probe(struct l4_state *st, struct pl_comm *tp)
{
    const int t = pl_comm_size(tp), B = 1, T = l4_config(st).seq_len;
    struct l4_block k;
    l4_block_new(st, &k, t, pl_comm_rank(tp), B, T);
    struct pl_tp_block_acts a;
    pl_tp_block_acts_new(&a, &k.cfg, t, B, T);
    struct l4_att_guard g;
    l4_att_guard_set(&g, &a.attn, &k.cfg, t);
    const size_t nc = (size_t)k.N * k.cfg.d_model;
    float *x = gr_op_alloc(nc, "x"), *y = gr_op_alloc(nc, "y");
    pl_copy(x, k.x, nc);
    const char *stub = pl_todo_what();
    tp_attention_forward(tp, &k.cfg, &k.sp, &a.attn, x, y);
    int over = 0;
    if (!stub && pl_todo_what()) pl_todo_reset(); /* a stub here is the training's to name */
    else over = att_overran(st, &k, &a.attn, &g, 1);
    l4_att_guard_end(&g, &a.attn);
    pl_tp_block_acts_free(&a);
    pl_mem_free(x);
    pl_mem_free(y);
    l4_block_free(&k);
    int any = 0;
    PL_CHECK_MPI(MPI_Allreduce(&over, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    return any;
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
static int check_sub_output(struct l4_state *st, struct l4_block *k, enum l4_sub s, const struct pl_tp_block_acts *a,
                            const struct l4_att_guard *g, const struct l4_sub_run *run,
                            const float *gy, const float *y)
{
    if (s != L4_SUB_MLP && att_overran(st, k, &a->attn, g, 0)) return 0;
    const int B = k->B, T = k->T;
    const size_t nc = (size_t)k->N * k->cfg.d_model;
    char what[96];
    struct l4_hint hint = {.h = {(double)run->fwd.ar_calls, SUBS[s].ars}};
    snprintf(what, sizeof what, "%s output y (B=%d, T=%d, t=%d)", SUBS[s].title, B, T, k->t);
    const float *bias = s == L4_SUB_MLP ? k->p.b_fc2 : k->p.b_proj;
    if (s != L4_SUB_BLOCK && l4_extra_bias(gy, y, bias, k->N, k->cfg.d_model, k->t))
        hint.kind = L4_H_OUT_BIAS;
    else if (s == L4_SUB_ATTN && heads_split_wrong(k, &a->attn, NULL))
        hint.kind = L4_H_HEADS;
    else if (run->fwd.ar_calls < SUBS[s].ars && k->t > 1)
        hint.kind = L4_H_FEWER_AR;
    else if (run->fwd.ar_calls > SUBS[s].ars && k->t > 1)
        hint.kind = L4_H_MORE_AR;
    return l4_compare(st, what, gy, y, nc, L4_TOL_FWD, hint);
}

void l4_run_sub_case(struct l4_state *st, struct pl_comm *tp, enum l4_sub s, int B, int T, int traced,
                  struct l4_sub_run *run)
{
    struct l4_block k;
    l4_block_new(st, &k, pl_comm_size(tp), pl_comm_rank(tp), B, T);
    const size_t nc = (size_t)k.N * k.cfg.d_model;
    float *y = gr_op_alloc(nc, "ref y"), *dx = gr_op_alloc(nc, "ref dx");
    /* dx is handed over holding junk: backward functions write it (=) */
    float *gy = gr_op_alloc(nc, "your y"), *gdx = l4_junk(st, "lab04.dx.junk", nc);
    float *gdx0 = l4_junk(st, "lab04.dx.junk", nc);
    float *gdy = gr_op_alloc(nc, "dy"), *gx = gr_op_alloc(nc, "x");
    double f0 = pl_ledger_flops_total();
    if (s == L4_SUB_BLOCK) oracle_block(&k, y, dx);
    else oracle_sub(&k, s, y, dx);
    run->oracle_flops = pl_ledger_flops_total() - f0;
    run->activation_floats = (double)nc;
    struct pl_tp_block_acts a;
    pl_tp_block_acts_new(&a, &k.cfg, k.t, B, T);
    struct l4_att_guard guard;
    l4_att_guard_set(&guard, &a.attn, &k.cfg, k.t);
    pl_copy(gdy, k.dy, nc);
    pl_copy(gx, k.x, nc);
    struct pl_ledger mark;
    gr_ledger_mark(&mark);
    if (traced) gr_bt_begin();
    if (s == L4_SUB_MLP) tp_mlp_forward(tp, &k.cfg, &k.sp, &a.mlp, gx, gy);
    else if (s == L4_SUB_ATTN) tp_attention_forward(tp, &k.cfg, &k.sp, &a.attn, gx, gy);
    else tp_block_forward(tp, &k.cfg, &k.sp, &a, gx, gy);
    if (traced) gr_bt_pause();
    l4_traffic_since(&mark, &run->fwd);
    gr_ledger_since(&mark, &run->code);
    memset(&run->bwd, 0, sizeof run->bwd);
    /* a wrong forward is the reason; the backward runs (on every rank) only after a right
     * one, so what it reads was written as the contract says */
    int ok = check_sub_output(st, &k, s, &a, &guard, run, gy, y), all_ok = 0;
    PL_CHECK_MPI(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (all_ok) {
        gr_ledger_mark(&mark);
        if (traced) gr_bt_resume();
        if (s == L4_SUB_MLP) tp_mlp_backward(tp, &k.cfg, &k.sp, &k.sg, &a.mlp, gx, gdy, gdx);
        else if (s == L4_SUB_ATTN)
            tp_attention_backward(tp, &k.cfg, &k.sp, &k.sg, &a.attn, gx, gdy, gdx);
        else tp_block_backward(tp, &k.cfg, &k.sp, &k.sg, &a, gdy, gdx);
        if (traced) gr_bt_pause();
        l4_traffic_since(&mark, &run->bwd);
        struct pl_ledger bwd;
        gr_ledger_since(&mark, &bwd);
        ledger_add(&run->code, &bwd);
        char what[96];
        snprintf(what, sizeof what, "%s input gradient dx (B=%d, T=%d, t=%d)", SUBS[s].title,
                 B, T, k.t);
        struct l4_hint hint = {.kind = L4_H_SUB_DX, .world = pl_comm_size(tp) < pl_size()};
        l4_compare_written(st, what, gdx, gdx0, dx, nc, L4_TOL_BWD, hint);
        l4_compare_shard_grads(st, &k, SUBS[s].tensors, SUBS[s].ntensors);
    }
    if (traced) gr_bt_end(all_ok);
    l4_att_guard_end(&guard, &a.attn);
    pl_tp_block_acts_free(&a);
    float *p[] = {y, dx, gy, gdx, gdx0, gdy, gx};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) pl_mem_free(p[i]);
    l4_block_free(&k);
}

/* Part time: on case 0 (t = the world) rank 0 replays the traced block (block_time.h); the
 * other cases carry its figures again, for the part's note on the last case. */
static void record_time(struct l4_state *st, const struct l4_sub_run *run, int t, int i)
{
    gr_bt_record(i == 0, run->oracle_flops, run->activation_floats, t, &st->time_last);
    if (pl_rank() == 0) {
        st->ob->has_time = 1;
        st->ob->time = st->time_last;
    }
}

void l4_run_sub(struct l4_state *st, struct pl_comm *tp, enum l4_sub s, int i)
{
    int t = pl_comm_size(tp), B = l4_shape_of(st, i).B, T = l4_shape_of(st, i).T;
    struct l4_sub_run run;
    l4_run_sub_case(st, tp, s, B, T, st->want_time && s == L4_SUB_BLOCK && i == 0, &run);
    st->ob->figs = (struct l4_figs){.t = t, .B = B, .T = T};
    st->cur = L4_TRAFFIC;
    double nc = (double)B * T * 64;
    if (t > 1) {
        l4_pass(st, "forward", &run.fwd, SUBS[s].ars, nc, t,
                           "tp.h's traffic rule");
        l4_pass(st, "backward", &run.bwd, SUBS[s].ars, nc, t,
                           "tp.h's traffic rule");
    }
    st->cur = L4_CORRECT;
    if (st->want_time && s == L4_SUB_BLOCK && pl_size() > 1)
        record_time(st, &run, i == 0 ? t : pl_size(), i);
}

/* ---- op placement: 2 nodes x 4 ranks, tp = 4 ---- */

/* world ranks as "{0,1,2,3}". */
static void describe_list(const int *ranks, int n, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "{");
    for (int m = 0; m < n && at < len; m++)
        at += (size_t)snprintf(buf + at, len - at, "%s%d", m ? "," : "", ranks[m]);
    if (at < len) snprintf(buf + at, len - at, "}");
}

/* The group tp_group gave under grid g against the grid's own (lib/grid.h): the ranks that
 * share every coordinate but tp, group rank = tp coordinate. Each rank judges its own. */
static void check_group(struct l4_state *st, const struct pl_grid *g, struct pl_comm *tp)
{
    int want[64], got[64], n = pl_grid_group(g, pl_rank(), pl_grid_axis(g, "tp"), want);
    int size = tp ? pl_comm_size(tp) : 0, same = size == n, members = same;
    for (int m = 0; m < size && m < 64; m++) got[m] = pl_comm_world_rank(tp, m);
    for (int m = 0; same && m < n; m++) same = got[m] == want[m];
    for (int m = 0; members && m < n; m++) {
        int found = 0;
        for (int j = 0; j < n; j++) found |= got[j] == want[m];
        members = found;
    }
    char grid[64], a[200], b[200];
    pl_grid_describe(g, grid, sizeof grid);
    describe_list(got, size < 64 ? size : 64, a, sizeof a);
    describe_list(want, n, b, sizeof b);
    if (same) return;
    struct l4_said *f = L4_FAIL(st, members ? L4_W_GROUP_ORDER : L4_W_GROUP_WRONG, pl_rank());
    l4_name(f, 0, grid);
    l4_name(f, 1, size ? a : "{} (none)");
    l4_name(f, 2, b);
}

/* tp_group on a grid of three axes with tp in the middle, where a group built from one
 * other axis's coordinate (dp's, say) merges groups. */
static void check_three_axes(struct l4_state *st)
{
    struct pl_grid grid;
    pl_grid_init_or_die(&grid, "pp-tp-dp", "tp=2,pp=2", pl_size());
    struct pl_comm *tp = tp_group(&grid, pl_comm_world());
    check_group(st, &grid, tp);
    pl_comm_free(tp);
}

/* Modelled time on dgx-h100 of one block's forward and backward as traced in delta, and of
 * the same bytes had they all stayed on NVLink. */
void l4_modelled_cost(const struct pl_ledger *d, double *as_run, double *inside)
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
static void placement_run(struct l4_state *st, const char *order, struct pl_grid *g, struct pl_comm **tp_out,
                          struct pl_ledger *delta)
{
    struct pl_grid grid;
    char deg[32];
    snprintf(deg, sizeof deg, "tp=%d", L4_PLACE_TP);
    pl_grid_init_or_die(&grid, order, deg, pl_size());
    *g = grid;
    struct pl_comm *tp = tp_group(&grid, pl_comm_world());
    *tp_out = tp;
    memset(delta, 0, sizeof *delta);
    if (!tp && pl_todo_what()) return;
    if (!tp || pl_comm_size(tp) != L4_PLACE_TP) {
        l4_name(L4_FAIL(st, L4_W_PLACE_SIZE, tp ? pl_comm_size(tp) : 0), 0, order);
        pl_comm_free(tp);
        *tp_out = NULL;
        return;
    }
    /* each group its own data, named by its first member: the group tp_group gave, so that
     * a group formed wrongly still computes right and placement judges it */
    uint64_t first = (uint64_t)pl_comm_world_rank(tp, 0);
    st->base_seed = pl_mix64(st->grading_seed + 0x9e3779b97f4a7c15ull * (first + 1));
    struct l4_sub_run run;
    l4_run_sub_case(st, tp, L4_SUB_BLOCK, L4_SHAPES[0].B, L4_SHAPES[0].T, 0, &run);
    st->base_seed = st->grading_seed;
    *delta = run.code;
}

/* Case 0: the default order tp-dp, every TP group inside a node. Case 1: order dp-tp,
 * which puts each TP group across the nodes: the code must still be right, and the grader
 * reports the violation with its modelled cost. */
void l4_run_placement(struct l4_state *st, int i)
{
    const char *order = i == 0 ? "tp-dp" : "dp-tp";
    struct pl_comm *tp = NULL;
    struct pl_ledger d;
    struct pl_grid grid;
    placement_run(st, order, &grid, &tp, &d);
    if (!tp) return;
    struct l4_figs *f = &st->ob->figs;
    int members[64], n = pl_comm_size(tp) < 64 ? pl_comm_size(tp) : 64;
    for (int m = 0; m < n; m++) members[m] = pl_comm_world_rank(tp, m);
    describe_list(members, n, f->members, sizeof f->members);
    /* the slowest rank's modelled time and the busiest rank's network bytes: a ring
     * charges each rank the link to its successor, so only some members cross nodes */
    double v[3];
    l4_modelled_cost(&d, &v[0], &v[1]);
    v[2] = pl_ledger_bytes(&d, -1, PL_LINK_INTER);
    PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, v, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    f->run = v[0], f->inside = v[1], f->inter = v[2];
    double mine = pl_ledger_bytes(&d, -1, PL_LINK_INTER);
    if (i == 0) {
        st->cur = L4_PLACEMENT;
        if (mine > 0)
            l4_name(L4_FAIL(st, L4_W_SPANS, mine, pl_ledger_bytes(&d, -1, -1), f->run,
                            f->inside), 0, f->members);
        /* which ranks form the group, and in what order, is the placement: the grid's,
         * under this order and on a grid of three axes (once no group spans nodes, that
         * failure being the one to teach; inter is every rank's, so all ranks agree) */
        if (f->inter <= 0) {
            check_group(st, &grid, tp);
            check_three_axes(st);
        }
    } else {
        st->cur = L4_ORDER;
        if (f->inter <= 0) l4_name(L4_FAIL(st, L4_W_NO_CROSS, 0), 0, f->members);
    }
    st->cur = L4_CORRECT;
    pl_comm_free(tp);
}

