/* cases.c: Lab 4's cases (lab04.h): the graded model, the shapes and the grids of its cases,
 * the TP group of each, the inputs drawn from the grading seed and the comparisons against
 * the single-device oracle with the likeliest mistake named, f and g, the parallel linears;
 * and what a rank records of them in its observation (judge.c gives the verdicts). */
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab04.h"
#include "tensors.h"
#include "todo.h"
#include "tp_shard.h"

struct pl_model_config l4_config(const struct l4_state *st)
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
    c.seed = st->base_seed;
    return c;
}

/* The third shape: B in 2..4 and T in 3..seq_len-1 from the grading seed, so that positions
 * counted from seq_len rather than T, or a batch of one sequence assumed, show. */
struct l4_shape l4_shape_of(const struct l4_state *st, int i)
{
    if (i < 2) return L4_SHAPES[i];
    uint64_t u = pl_rng_u64(st->grading_seed, pl_rng_stream("lab04.shape"), 0);
    struct l4_shape c = {2 + (int)(u % 3), 3 + (int)((u >> 8) % 12)};
    return c;
}

/* ---- what this rank records ---- */

struct l4_said *l4_fail(struct l4_state *st, enum l4_why code, const double *v, int n)
{
    struct l4_said *s = &st->ob->part[st->cur];
    if (s->code) return NULL;
    s->code = code;
    for (int k = 0; k < n && k < (int)(sizeof s->v / sizeof *s->v); k++) s->v[k] = v[k];
    return s;
}

void l4_name(struct l4_said *s, int k, const char *name)
{
    if (s) snprintf(s->name[k], sizeof s->name[k], "%s", name);
}

int l4_ok(const struct l4_state *st)
{
    return !st->ob->part[st->cur].code;
}

void l4_pass(struct l4_state *st, const char *name, const struct l4_traffic *tr, long calls,
             double count, int t, const char *where)
{
    struct l4_obs *ob = st->ob;
    if (ob->npass == (int)(sizeof ob->pass / sizeof ob->pass[0])) pl_fatal("lab04: too many passes");
    struct l4_pass *p = &ob->pass[ob->npass++];
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->where, sizeof p->where, "%s", where);
    p->tr = *tr;
    p->calls = calls;
    p->count = count;
    p->t = t;
}

/* got against ref, the figures of a failure recorded in this rank's observation. */
int l4_compare(struct l4_state *st, const char *what, const float *got, const float *ref,
               size_t n, double tol, struct l4_hint hint)
{
    struct l4_cmp m = {.hint = hint};
    int ok = gr_cmp_of(got, ref, n, tol, &m.fig);
    struct l4_said *s = ok ? NULL : L4_FAIL(st, L4_W_COMPARE, 0);
    l4_name(s, 0, what);
    if (s) s->cmp = m;
    return ok;
}

/* ---- comparisons (the rest: grader/common/tensors.h) ---- */

/* 1 when got - ref is (t-1) copies of bias b [OC] added to each of the N rows: a bias added
 * on every rank before the reduction. */
int l4_extra_bias(const float *got, const float *ref, const float *b, int N, int OC, int t)
{
    if (t < 2) return 0;
    float *g = gr_host_copy(got, (size_t)N * OC), *r = gr_host_copy(ref, (size_t)N * OC);
    float *hb = gr_host_copy(b, (size_t)OC);
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

/* ---- gradients handed over non-zero ---- */

float *l4_junk(struct l4_state *st, const char *name, size_t n)
{
    return gr_op_normal(st->base_seed, name, n, 0.0f, 1.0f);
}

/* got - init (op memory). */
float *l4_minus(const float *got, const float *init, size_t n)
{
    float *d = gr_op_alloc(n, "lab04 got - handed"), *neg = gr_op_alloc(n, "lab04 -handed");
    pl_copy(d, got, n);
    pl_copy(neg, init, n);
    pl_scale(neg, n, -1.0f);
    pl_accumulate(d, neg, n);
    pl_mem_free(neg);
    return d;
}

/* 1 when got (op memory) is ref within tol, and finite. */
int l4_near(const float *got, const float *ref, size_t n, double tol)
{
    float *g = gr_host_copy(got, n), *r = gr_host_copy(ref, n);
    double e = pl_rel_l2(g, r, n);
    free(g);
    free(r);
    return e <= tol;
}

/* A parameter gradient handed over holding init: what the backward added is compared. */
int l4_compare_accumulated(struct l4_state *st, const char *what, const float *got,
                           const float *init, const float *ref, size_t n, double tol,
                           struct l4_hint hint)
{
    float *d = l4_minus(got, init, n);
    if (!l4_near(d, ref, n, tol) && l4_near(got, ref, n, tol))
        hint = (struct l4_hint){.kind = L4_H_OVERWROTE};
    else
        hint.handed = 1;
    int ok = l4_compare(st, what, d, ref, n, tol, hint);
    pl_mem_free(d);
    return ok;
}

/* An input gradient handed over holding junk: the backward writes it. */
int l4_compare_written(struct l4_state *st, const char *what, const float *got,
                       const float *junk_in, const float *ref, size_t n, double tol,
                       struct l4_hint hint)
{
    float *d = l4_minus(got, junk_in, n);
    if (!l4_near(got, ref, n, tol) && l4_near(d, ref, n, tol))
        hint = (struct l4_hint){.kind = L4_H_WRITTEN_ADDED};
    pl_mem_free(d);
    return l4_compare(st, what, got, ref, n, tol, hint);
}

/* ---- inputs (drawn with grader/common/tensors.h's gr_op_normal) ---- */

void l4_block_new(struct l4_state *st, struct l4_block *k, int t, int r, int B, int T)
{
    memset(k, 0, sizeof *k);
    k->cfg = l4_config(st);
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
    k->full = gr_op_normal(st->base_seed, "lab04.block", k->full_numel, 0.0f, 0.1f);
    /* layernorm weights near 1, as trained ones are */
    struct pl_block_params p;
    pl_block_bind(&k->cfg, k->full, &p);
    float *one = gr_op_normal(st->base_seed, "lab04.ln", (size_t)k->cfg.d_model, 1.0f, 0.1f);
    pl_copy(p.ln1_w, one, (size_t)k->cfg.d_model);
    pl_copy(p.ln2_w, one, (size_t)k->cfg.d_model);
    pl_mem_free(one);
    k->full_g = gr_op_alloc(k->full_numel, "lab04 full grads");
    pl_zero(k->full_g, k->full_numel);
    k->shard = gr_op_alloc(k->shard_numel, "lab04 shard");
    k->shard_g = l4_junk(st, "lab04.shard.g0", k->shard_numel);
    k->shard_g0 = gr_op_alloc(k->shard_numel, "lab04 shard grads handed over");
    pl_copy(k->shard_g0, k->shard_g, k->shard_numel);
    pl_tp_block_slice(&k->cfg, t, r, k->full, k->shard);
    pl_block_bind(&k->cfg, k->full, &k->p);
    pl_block_bind(&k->cfg, k->full_g, &k->g);
    pl_tp_block_bind(&k->cfg, t, k->shard, &k->sp);
    pl_tp_block_bind(&k->cfg, t, k->shard_g, &k->sg);
    size_t nc = (size_t)k->N * k->cfg.d_model;
    k->x = gr_op_normal(st->base_seed, "lab04.x", nc, 0.0f, 1.0f);
    k->dy = gr_op_normal(st->base_seed, "lab04.dy", nc, 0.0f, 1.0f);
}

void l4_block_free(struct l4_block *k)
{
    float *p[] = {k->full, k->full_g, k->shard, k->shard_g, k->shard_g0, k->x, k->dy};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) pl_mem_free(p[i]);
}

/* Each shard gradient of the tensors in `which` (indices into the block's tensor table)
 * against its block of the full gradient. */
void l4_compare_shard_grads(struct l4_state *st, const struct l4_block *k, const int *which,
                            int n)
{
    float *want = gr_op_alloc(k->shard_numel, "lab04 expected shard");
    pl_tp_block_slice(&k->cfg, k->t, k->r, k->full_g, want);
    struct pl_tp_tensor d[PL_TP_BLOCK_TENSORS];
    pl_tp_block_tensors(&k->cfg, 0, k->t, d);
    for (int i = 0; i < n && l4_ok(st); i++) {
        const struct pl_tp_tensor *e = &d[which[i]];
        char what[160];
        snprintf(what, sizeof what, "gradient of your shard of %s (%s)", e->name,
                 e->split == PL_TP_REPLICATED ? "replicated"
                 : e->split == PL_TP_ROWS     ? "a row block" : "a column block");
        const float *got = k->shard_g + e->shard_offset, *ref = want + e->shard_offset;
        /* summed over the group: this call's part alone, or the whole buffer after it */
        const float *g0 = k->shard_g0 + e->shard_offset;
        float *added = l4_minus(got, g0, e->shard_numel);
        double s = gr_scale_of(added, ref, e->shard_numel);
        float *whole = gr_op_alloc(e->shard_numel, "lab04 handed + expected");
        pl_copy(whole, g0, e->shard_numel);
        pl_accumulate(whole, ref, e->shard_numel);
        pl_scale(whole, e->shard_numel, (float)k->t);
        int summed = k->t > 1 && (fabs(s - k->t) < 1e-3 * k->t ||
                                  l4_near(got, whole, e->shard_numel, L4_TOL_BWD));
        pl_mem_free(added);
        pl_mem_free(whole);
        struct l4_hint h = {.kind = summed ? L4_H_SUMMED : L4_H_NONE, .h = {k->t}};
        l4_compare_accumulated(st, what, got, g0, ref, e->shard_numel, L4_TOL_BWD, h);
    }
    pl_mem_free(want);
}

/* ---- traffic of one pass, from the ledger ---- */

void l4_traffic_since(const struct pl_ledger *mark, struct l4_traffic *out)
{
    struct pl_ledger d;
    gr_ledger_since(mark, &d);
    out->ar_calls = d.calls[PL_ALL_REDUCE];
    out->ar_bytes = pl_ledger_bytes(&d, PL_ALL_REDUCE, -1);
    out->other_calls = gr_ledger_total_calls(&d) - d.calls[PL_ALL_REDUCE];
    out->other_bytes = gr_ledger_total_bytes(&d) - out->ar_bytes;
}

/* ---- the cases of the layer ops, vocab and train: grids and TP groups ---- */

int l4_ncases(const struct l4_state *st)
{
    if (st->kind == L4_CONJ || st->kind == L4_TRAIN) return pl_size() >= 4 ? 2 : 1;
    return st->kind == L4_PLACE ? 2 : L4_NCASES;
}

/* The grid of a case: t ranks per TP group, dp groups, and the axes' order. */
struct l4_grid {
    int t, dp;
    const char *order;
};

/* The world as one TP group, except for the TP x DP case (from 4 ranks up: the last case of
 * each op, the second of f and g and of training): dp = 2 groups of t = np/2, or on 8 ranks
 * t = 2 x dp = 4 for some seeds, in an order drawn from the grading seed ("tp-dp" puts a
 * group on consecutive ranks, "dp-tp" strides it). Each DP replica draws its own data. */
static struct l4_grid grid_of(const struct l4_state *st, int i)
{
    int np = pl_size(), last = st->kind == L4_CONJ || st->kind == L4_TRAIN ? 1 : L4_NCASES - 1;
    struct l4_grid g = {np, 1, "tp-dp"};
    if (i == last && np >= 4) {
        uint64_t u = pl_rng_u64(st->grading_seed, pl_rng_stream("lab04.grid"), 0);
        g.t = np >= 8 && (u & 1) ? 2 : np / 2;
        g.dp = np / g.t;
        g.order = (u >> 1) & 1 ? "dp-tp" : "tp-dp";
    }
    return g;
}

void l4_describe(const struct l4_state *st, int i, char *buf, size_t len)
{
    /* ", t=2 x dp=2 (order dp-tp), each DP replica its own data", or ", t=4" */
    char grid[96];
    struct l4_grid g = grid_of(st, i);
    if (g.dp > 1)
        snprintf(grid, sizeof grid, ", t=%d x dp=%d (order %s), each DP replica its own data",
                 g.t, g.dp, g.order);
    else
        snprintf(grid, sizeof grid, ", t=%d", g.t);
    enum l4_kind k = st->kind;
    if (k == L4_CONJ) snprintf(buf, len, "f and g on 1000 floats%s", grid);
    else if (k == L4_TRAIN)
        snprintf(buf, len, "%d AdamW steps of a %d-block GPT on %d sequences%s", L4_TRAIN_STEPS,
                 L4_TRAIN_LAYERS, L4_TRAIN_B, grid);
    else if (k == L4_PLACE)
        snprintf(buf, len, "TP block, tp=%d on %d nodes x %d ranks, order %s", L4_PLACE_TP,
                 L4_PLACE_NODES, L4_PLACE_PER_NODE, i == 0 ? "tp-dp" : "dp-tp");
    else
        snprintf(buf, len, "%s, B=%d T=%d%s%s", L4_KIND_SUBJECTS[k], l4_shape_of(st, i).B,
                 l4_shape_of(st, i).T, grid,
                 k == L4_VOCAB && i == L4_NCASES - 1 ? ", logits past exp's float range" : "");
}

/* The student's TP group on the case's grid over `world`, checked against the grid's own
 * (size and members); NULL when it is a stub or wrong. dp gets this rank's DP coordinate. */
static struct pl_comm *case_tp_group(struct l4_state *st, const struct l4_grid *cg,
                                     struct pl_comm *world, int *dp)
{
    struct pl_grid grid;
    char deg[32], desc[64];
    snprintf(deg, sizeof deg, "tp=%d,dp=%d", cg->t, cg->dp);
    pl_grid_init_or_die(&grid, cg->order, deg, pl_comm_size(world));
    pl_grid_describe(&grid, desc, sizeof desc);
    *dp = pl_grid_coord(&grid, pl_comm_rank(world), pl_grid_axis(&grid, "dp"));
    struct pl_comm *tp = tp_group(&grid, world);
    if (!tp) {
        if (!pl_todo_what()) L4_FAIL(st, L4_W_NO_GROUP, 0);
        return NULL;
    }
    int want[64], n = pl_grid_group(&grid, pl_comm_rank(world), pl_grid_axis(&grid, "tp"), want);
    int same = pl_comm_size(tp) == n;
    for (int m = 0; same && m < n; m++)
        same = pl_comm_world_rank(tp, m) == pl_comm_world_rank(world, want[m]);
    if (!same) {
        l4_name(L4_FAIL(st, L4_W_NOT_TP_GROUP, pl_rank(), pl_comm_size(tp), n), 0, desc);
        pl_comm_free(tp);
        return NULL;
    }
    return tp;
}

/* Each case runs on a communicator split from the world and freed after the lab's work (a
 * free refuses operations still in flight), its TP groups built from it. */
void l4_run_case(struct l4_state *st, int i)
{
    struct l4_grid cg = grid_of(st, i);
    struct pl_comm *world = pl_comm_split(pl_comm_world(), 0, pl_rank(), "lab04");
    int dp = 0;
    struct pl_comm *tp = case_tp_group(st, &cg, world, &dp);
    if (tp) {
        /* every DP replica its own inputs: a sum or a slice over the world shows */
        st->base_seed = cg.dp > 1 ? pl_mix64(st->grading_seed +
                                             0x9e3779b97f4a7c15ull * (uint64_t)(dp + 1))
                                  : st->grading_seed;
        if (st->kind == L4_CONJ) l4_run_conjugates(st, tp);
        else if (st->kind == L4_LINEAR) l4_run_linear(st, tp, i);
        else if (st->kind == L4_VOCAB) l4_run_vocab(st, tp, i);
        else if (st->kind == L4_TRAIN) l4_run_train(st, tp);
        else l4_run_sub(st, tp, (enum l4_sub)(st->kind - L4_MLP), i);
        st->base_seed = st->grading_seed;
        pl_comm_free(tp);
    }
    /* case 0's figures (its TP group the world) travel with every later case: from 4 ranks
     * up the last case is a TP x DP grid, and the notes of a passing part, said on the last
     * case, quote the group that is the world rather than the grid's smaller one */
    if (i == 0 && cg.dp == 1) {
        st->has_world = 1;
        st->world_figs = st->ob->figs;
    }
    st->ob->has_world = st->has_world;
    st->ob->world = st->world_figs;
    pl_comm_free(world);
}
