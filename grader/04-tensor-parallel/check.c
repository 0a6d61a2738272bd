/* check.c: Lab 4's inputs and comparisons (lab04.h): tensors drawn from the grading seed,
 * the random full block and the shard of it a rank holds, results against the oracle with
 * the likeliest mistake named, and the traffic of a pass from the ledger. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab04.h"
#include "parts.h"
#include "tensors.h"
#include "tp_shard.h"

/* ---- comparisons (the rest: grader/common/tensors.h) ---- */

/* 1 when got - ref is (t-1) copies of bias b [OC] added to each of the N rows: a bias added
 * on every rank before the reduction. */
int extra_bias(const float *got, const float *ref, const float *b, int N, int OC, int t)
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

/* ---- a group smaller than the world ---- */

const char *world_hint(struct pl_comm *tp)
{
    return pl_comm_size(tp) < pl_size()
               ? ". Here each TP group is only some of the ranks and each DP replica has its "
                 "own data: a rank's slice is its rank IN THE GROUP (pl_comm_rank(tp)), and "
                 "every collective runs on the group, never on the world (pl_rank, pl_size, "
                 "pl_comm_world)"
               : "";
}

/* ---- gradients handed over non-zero ---- */

float *junk(const char *name, size_t n)
{
    return gr_op_normal(base_seed, name, n, 0.0f, 1.0f);
}

/* got - init (op memory). */
static float *minus(const float *got, const float *init, size_t n)
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
static int near(const float *got, const float *ref, size_t n, double tol)
{
    float *g = gr_host_copy(got, n), *r = gr_host_copy(ref, n);
    double e = pl_rel_l2(g, r, n);
    free(g);
    free(r);
    return e <= tol;
}

int compare_accumulated(const char *what, const float *got, const float *init, const float *ref,
                        size_t n, double tol, const char *hint)
{
    float *d = minus(got, init, n);
    char why[400];
    int ok;
    if (!near(d, ref, n, tol) && near(got, ref, n, tol)) {
        snprintf(why, sizeof why, "it was handed over holding other values and your backward "
                 "overwrote them with this call's gradient: parameter gradients ACCUMULATE "
                 "(+=, tp.h), as model.h's backward does, so that a model can sum them over "
                 "micro-batches; add into the buffer (pl_matmul_backward already does), never "
                 "zero or copy over it");
        ok = gr_compare(what, d, ref, n, tol, why);
    } else {
        snprintf(why, sizeof why, "%s%shanded over non-zero, so what is compared is what "
                 "your backward added to it (the contract is +=)", hint ? hint : "",
                 hint ? "; the gradient was " : "the gradient was ");
        ok = gr_compare(what, d, ref, n, tol, why);
    }
    pl_mem_free(d);
    return ok;
}

int compare_written(const char *what, const float *got, const float *junk_in, const float *ref,
                    size_t n, double tol, const char *hint)
{
    float *d = minus(got, junk_in, n);
    int added = !near(got, ref, n, tol) && near(d, ref, n, tol);
    pl_mem_free(d);
    return gr_compare(what, got, ref, n, tol,
                      added ? "it is the right gradient plus what the buffer held when handed "
                              "over: backward functions WRITE (=) input gradients (tp.h), so "
                              "zero dx (or copy into it) before adding to it"
                            : hint);
}

/* ---- inputs (drawn with grader/common/tensors.h's gr_op_normal) ---- */

void block_case_new(struct block_case *k, int t, int r, int B, int T)
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
    k->full = gr_op_normal(base_seed, "lab04.block", k->full_numel, 0.0f, 0.1f);
    /* layernorm weights near 1, as trained ones are */
    struct pl_block_params p;
    pl_block_bind(&k->cfg, k->full, &p);
    float *one = gr_op_normal(base_seed, "lab04.ln", (size_t)k->cfg.d_model, 1.0f, 0.1f);
    pl_copy(p.ln1_w, one, (size_t)k->cfg.d_model);
    pl_copy(p.ln2_w, one, (size_t)k->cfg.d_model);
    pl_mem_free(one);
    k->full_g = gr_op_alloc(k->full_numel, "lab04 full grads");
    pl_zero(k->full_g, k->full_numel);
    k->shard = gr_op_alloc(k->shard_numel, "lab04 shard");
    k->shard_g = junk("lab04.shard.g0", k->shard_numel);
    k->shard_g0 = gr_op_alloc(k->shard_numel, "lab04 shard grads handed over");
    pl_copy(k->shard_g0, k->shard_g, k->shard_numel);
    pl_tp_block_slice(&k->cfg, t, r, k->full, k->shard);
    pl_block_bind(&k->cfg, k->full, &k->p);
    pl_block_bind(&k->cfg, k->full_g, &k->g);
    pl_tp_block_bind(&k->cfg, t, k->shard, &k->sp);
    pl_tp_block_bind(&k->cfg, t, k->shard_g, &k->sg);
    size_t nc = (size_t)k->N * k->cfg.d_model;
    k->x = gr_op_normal(base_seed, "lab04.x", nc, 0.0f, 1.0f);
    k->dy = gr_op_normal(base_seed, "lab04.dy", nc, 0.0f, 1.0f);
}

void block_case_free(struct block_case *k)
{
    float *p[] = {k->full, k->full_g, k->shard, k->shard_g, k->shard_g0, k->x, k->dy};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) pl_mem_free(p[i]);
}

/* Each shard gradient of the tensors in `which` (indices into the block's tensor table)
 * against its block of the full gradient. */
void compare_shard_grads(const struct block_case *k, const int *which, int n,
                                const char *hint)
{
    float *want = gr_op_alloc(k->shard_numel, "lab04 expected shard");
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
        /* summed over the group: this call's part alone, or the whole buffer after it */
        const float *g0 = k->shard_g0 + e->shard_offset;
        float *added = minus(got, g0, e->shard_numel);
        double s = gr_scale_of(added, ref, e->shard_numel);
        float *whole = gr_op_alloc(e->shard_numel, "lab04 handed + expected");
        pl_copy(whole, g0, e->shard_numel);
        pl_accumulate(whole, ref, e->shard_numel);
        pl_scale(whole, e->shard_numel, (float)k->t);
        int summed = k->t > 1 && (fabs(s - k->t) < 1e-3 * k->t ||
                                  near(got, whole, e->shard_numel, TOL_BWD));
        pl_mem_free(added);
        pl_mem_free(whole);
        char why[320] = "";
        if (summed)
            snprintf(why, sizeof why, "it is %d (= t) times the single device's: a gradient "
                     "every rank already holds whole was summed over the group again "
                     "(section 7, question 3)", k->t);
        compare_accumulated(what, got, k->shard_g0 + e->shard_offset, ref, e->shard_numel,
                            TOL_BWD, why[0] ? why : hint);
    }
    pl_mem_free(want);
}

/* ---- traffic of one pass, from the ledger ---- */

void traffic_since(const struct pl_ledger *mark, struct pass_traffic *out)
{
    struct pl_ledger d;
    gr_ledger_since(mark, &d);
    out->ar_calls = d.calls[PL_ALL_REDUCE];
    out->ar_bytes = pl_ledger_bytes(&d, PL_ALL_REDUCE, -1);
    out->other_calls = gr_ledger_total_calls(&d) - d.calls[PL_ALL_REDUCE];
    out->other_bytes = gr_ledger_total_bytes(&d) - out->ar_bytes;
}

/* Every rank's pass made `calls` all-reduces of `count` floats each and nothing else. */
void judge_pass_traffic(const char *pass, const struct pass_traffic *tr, long calls,
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
