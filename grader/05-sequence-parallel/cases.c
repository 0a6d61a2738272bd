/* cases.c: Lab 5's model and cases, the traffic of a pass, a rank's rows, the comparisons
 * the block's checks share, and op conjugates (integer-valued data, exact). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab05.h"

struct pl_model_config l5_config(const struct l5_state *st, float dropout)
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
    c.seed = st->seed;
    return c;
}

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
struct l5_case l5_case_of(const struct l5_state *st, int i, int n)
{
    float r[8];
    pl_rng_fill_uniform(r, 8, st->seed, pl_rng_stream("lab05.shape"), 0, 0.0f, 1.0f);
    struct l5_case k = {2, 16, 0, 0, 0, 0, 0, 1, 0, 0.0f, "tp"};
    if (i == 1)
        k = (struct l5_case){2, 16, 1, 3, 7, 1, 0, 1, 1, L5_DROPOUT, "tp"};
    else if (i == 2) {
        k = (struct l5_case){2, 16, 1, 3, 11, 1, 0, 1, 0, 0.25f, "tp"};
        k.B = 1 + (int)(r[0] * 3) % 3;
        k.T = n * (1 + (int)(r[1] * (16 / n)) % (16 / n));
        k.seq0 = (int)(r[2] * 50);
    } else if (i == L5_CASE_EVAL) {
        k = (struct l5_case){3, 8, 1, 2, 5, 0, 1, 1, 0, L5_DROPOUT, "tp"};
        if (st->hidden) k.B = 2 + (int)(r[3] * 3) % 3, k.T = short_seq(n, r[4]);
    } else if (i == L5_CASE_GRID) {
        k = (struct l5_case){2, 12, 1, 5, 2, 1, 1, n % 2 ? 1 : 2, 0, 0.3f, "tp-dp"};
        if (st->hidden) {
            /* strided TP groups, and on 8 ranks dp = 2 or 4 */
            k.order = "dp-tp";
            if (n >= 8 && r[5] < 0.5f) k.dp = 4;
        }
        const int t = n / k.dp;
        if (k.T % t || st->hidden) k.T = short_seq(t, r[6]);
    }
    if (st->seq) k.T = st->seq;
    return k;
}

/* ---- traffic of one pass, from the ledger ---- */

void l5_traffic_since(const struct pl_ledger *mark, struct l5_traffic *out)
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
double l5_coll_bytes(double NC, int t)
{
    return (double)(t - 1) / t * NC * 4.0;
}

/* ---- the layout's rows ---- */

float *l5_local_rows(const float *full, int B, int T, int C, int t, int r)
{
    float *l = gr_op_alloc((size_t)B * T / t * C, "lab05 local rows");
    pl_sp_slice(l, full, B, T, C, t, r);
    return l;
}

/* ---- op conjugates: integer-valued data, exact ---- */

static void member_data(uint64_t seed, const char *what, int w, size_t n, float *out)
{
    pl_rng_fill_int(out, n, seed, pl_rng_stream(what), (uint64_t)w * n, -64, 64);
}

/* Conjugate k's result (host, n) against want: 0 with the first wrong element recorded,
 * and whether the rows are in the collective's rank-major order. */
static int exact(struct l5_state *st, int k, const float *got, const float *want,
                 const float *rank_major, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            int ordered = rank_major != NULL;
            for (size_t j = 0; rank_major && j < n && ordered; j++)
                ordered = got[j] == rank_major[j];
            L5_FAIL(st, L5_W_CONJ, k, (double)i, got[i], want[i], ordered);
            return 0;
        }
    return 1;
}

/* The conjugates' data on the host: this rank's local rows and full buffer, and what each
 * collective must give: every rank's rows in place (and in the collective's rank-major
 * order, to name that mistake), and this rank's rows of the sum. */
struct conj_data {
    int t, r, B, T, C;
    size_t nf, nl;
    float *mine_l, *mine_f, *gath, *rm, *want_l;
};

static void conj_data_new(uint64_t seed, struct pl_comm *tp, struct conj_data *d)
{
    const int t = pl_comm_size(tp), r = pl_comm_rank(tp), B = 3, T = 4 * t, C = 5;
    const size_t nf = (size_t)B * T * C, nl = nf / t, rows = (size_t)(T / t) * C;
    *d = (struct conj_data){.t = t, .r = r, .B = B, .T = T, .C = C, .nf = nf, .nl = nl};
    d->mine_l = malloc(nl * sizeof(float)), d->mine_f = malloc(nf * sizeof(float));
    d->gath = calloc(nf, sizeof(float)), d->rm = malloc(nf * sizeof(float));
    d->want_l = malloc(nl * sizeof(float));
    float *sum = calloc(nf, sizeof *sum), *tmp = malloc(nf * sizeof *tmp);
    member_data(seed, "lab05.conj.local", pl_comm_world_rank(tp, r), nl, d->mine_l);
    member_data(seed, "lab05.conj.full", pl_comm_world_rank(tp, r), nf, d->mine_f);
    for (int m = 0; m < t; m++) {
        member_data(seed, "lab05.conj.local", pl_comm_world_rank(tp, m), nl, tmp);
        memcpy(d->rm + m * nl, tmp, nl * sizeof *tmp);
        for (int b = 0; b < B; b++)
            memcpy(d->gath + ((size_t)b * T + (size_t)m * (T / t)) * C, tmp + (size_t)b * rows,
                   rows * sizeof *tmp);
        member_data(seed, "lab05.conj.full", pl_comm_world_rank(tp, m), nf, tmp);
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

void l5_run_conjugates(struct l5_state *st, struct pl_comm *tp)
{
    struct conj_data d;
    conj_data_new(st->seed, tp, &d);
    const int B = d.B, T = d.T, C = d.C;
    const size_t nf = d.nf, nl = d.nl;
    float *dl = gr_op_alloc(nl, "lab05 local"), *df = gr_op_alloc(nf, "lab05 full");
    float *ol = gr_op_alloc(nl, "lab05 out local"), *of = gr_op_alloc(nf, "lab05 out full");
    struct l5_obs *ob = st->ob;
    ob->has_conj = 1;
    for (int k = 0; k < 4 && l5_ok_of(st, L5_CORRECT); k++) {
        int gathers = k == 0 || k == 3;
        pl_to_device(dl, d.mine_l, nl * sizeof(float));
        pl_to_device(df, d.mine_f, nf * sizeof(float));
        struct pl_ledger mark;
        gr_ledger_mark(&mark);
        if (k == 0) sp_gather_forward(tp, of, dl, B, T, C);
        else if (k == 1) sp_gather_backward(tp, ol, df, B, T, C);
        else if (k == 2) sp_scatter_forward(tp, ol, df, B, T, C);
        else sp_scatter_backward(tp, of, dl, B, T, C);
        l5_traffic_since(&mark, &ob->conj[k]);
        if (pl_todo_what()) break;
        float *got = gr_host_copy(gathers ? of : ol, gathers ? nf : nl);
        exact(st, k, got, gathers ? d.gath : d.want_l, gathers && B > 1 ? d.rm : NULL,
              gathers ? nf : nl);
        free(got);
    }
    ob->figs.B = B, ob->figs.T = T, ob->figs.C = C;
    float *p[] = {dl, df, ol, of};
    for (int i = 0; i < 4; i++) pl_mem_free(p[i]);
    conj_data_free(&d);
}

/* ---- what this rank records ---- */

struct l5_said *l5_fail(struct l5_state *st, enum l5_why code, const double *v, int n)
{
    struct l5_said *s = &st->ob->part[st->cur];
    if (s->code) return NULL;
    s->code = code;
    for (int k = 0; k < n && k < (int)(sizeof s->v / sizeof *s->v); k++) s->v[k] = v[k];
    return s;
}

void l5_name(struct l5_said *s, int k, const char *name)
{
    if (s) snprintf(s->name[k], sizeof s->name[k], "%s", name);
}

int l5_ok(const struct l5_state *st)
{
    return !st->ob->part[st->cur].code;
}

int l5_ok_of(const struct l5_state *st, int p)
{
    return !st->ob->part[p].code;
}

int l5_compare(struct l5_state *st, const char *what, const float *got, const float *ref,
               size_t n, double tol, struct l5_hint hint)
{
    struct l5_cmp m = {.hint = hint};
    int ok = gr_cmp_of(got, ref, n, tol, &m.fig);
    struct l5_said *s = ok ? NULL : L5_FAIL(st, L5_W_COMPARE, 0);
    l5_name(s, 0, what);
    if (s) s->cmp = m;
    return ok;
}

struct l5_hint l5_hint_of(int kind)
{
    struct l5_hint h = {.kind = kind};
    return h;
}

/* Relative L2 error of n floats of op memory against ref (op memory). */
double l5_rel_l2(const float *got, const float *ref, size_t n)
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

/* What a case on a tp x dp grid adds to a failure: the group is not the world. */
struct l5_hint l5_grid_hint(const struct l5_case *kc, int t)
{
    struct l5_hint h = {.kind = kc->dp > 1 ? L5_H_GRID : L5_H_NONE, .h = {t, kc->dp}};
    snprintf(h.order, sizeof h.order, "%s", kc->order);
    return h;
}
