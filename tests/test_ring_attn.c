/* test_ring_attn: the trusted pieces of ring attention (lib/ring_attn.h) against the
 * single-device attention of lib/ops.h. One sequence is cut into chunks (2cp equal chunks,
 * and blocks of unequal sizes at unaligned positions); every block of a
 * query chunk against a key chunk at or before it is computed, the partial outputs are
 * merged by their log-sum-exps (the merge written here, in double), and the merged output
 * must be pl_attention_forward's; the blocks' backward given the merged statistics must
 * sum to pl_attention_backward's dq, dk, dv. Also: a block wholly in its queries' future,
 * scores large enough that exp overflows without the max, the FLOPs charged, the
 * sequence-length message, and (on every rank count the file runs on) the ring shift's
 * data, direction and bytes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ledger.h"
#include "paralab.h"
#include "ring_attn.h"
#include "testing.h"

enum { C = 16, NH = 4 };

static float *host_alloc(size_t n)
{
    float *p = calloc(n, sizeof *p);
    if (!p) pl_fatal("out of memory");
    return p;
}

static double rel_l2(const float *got, const float *want, size_t n)
{
    double e = 0, w = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        w += (double)want[i] * want[i];
    }
    return w > 0 ? sqrt(e / w) : sqrt(e);
}

/* One block [q0, q0+Tq) x [k0, k0+Tk) of the sequence's q, k, v rows (host), its partial
 * output and lse read back. */
static void block(const float *q, const float *k, const float *v, int q0, int Tq, int k0,
                  int Tk, float *out, float *lse)
{
    float *dq = op_from_host(q + (size_t)q0 * C, (size_t)Tq * C * sizeof(float));
    float *dk = op_from_host(k + (size_t)k0 * C, (size_t)Tk * C * sizeof(float));
    float *dv = op_from_host(v + (size_t)k0 * C, (size_t)Tk * C * sizeof(float));
    float *dout = op_alloc((size_t)Tq * C * sizeof(float));
    float *dl = op_alloc((size_t)NH * Tq * sizeof(float));
    pl_attn_block_forward(dout, dl, dq, dk, dv, Tq, Tk, C, NH, q0, k0);
    pl_to_host(out, dout, (size_t)Tq * C * sizeof(float));
    pl_to_host(lse, dl, (size_t)NH * Tq * sizeof(float));
    float *all[] = {dq, dk, dv, dout, dl};
    for (int i = 0; i < 5; i++) pl_mem_free(all[i]);
}

/* The sequence's q, k, v (host), scores scaled by `big`, its qkv packed [T, 3C] for the
 * reference, and the reference's output, dout and dqkv. */
struct seq {
    int T;
    float *q, *k, *v, *qkv, *ref_out, *dout, *ref_dqkv;
};

static void seq_new(struct seq *s, int T, float big, uint64_t seed)
{
    const size_t n = (size_t)T * C;
    s->T = T;
    s->q = host_alloc(n), s->k = host_alloc(n), s->v = host_alloc(n);
    s->qkv = host_alloc(3 * n), s->ref_out = host_alloc(n), s->dout = host_alloc(n);
    s->ref_dqkv = host_alloc(3 * n);
    pl_rng_fill_uniform(s->q, n, seed, pl_rng_stream("test.ring.q"), 0, -big, big);
    pl_rng_fill_uniform(s->k, n, seed, pl_rng_stream("test.ring.k"), 0, -big, big);
    pl_rng_fill_uniform(s->v, n, seed, pl_rng_stream("test.ring.v"), 0, -1.0f, 1.0f);
    pl_rng_fill_uniform(s->dout, n, seed, pl_rng_stream("test.ring.dout"), 0, -1.0f, 1.0f);
    for (int t = 0; t < T; t++) {
        memcpy(s->qkv + (size_t)t * 3 * C, s->q + (size_t)t * C, C * sizeof(float));
        memcpy(s->qkv + (size_t)t * 3 * C + C, s->k + (size_t)t * C, C * sizeof(float));
        memcpy(s->qkv + (size_t)t * 3 * C + 2 * C, s->v + (size_t)t * C, C * sizeof(float));
    }
    float *d_qkv = op_from_host(s->qkv, 3 * n * sizeof(float));
    float *d_out = op_alloc(n * sizeof(float));
    float *d_att = op_alloc((size_t)NH * T * T * sizeof(float));
    float *d_dout = op_from_host(s->dout, n * sizeof(float));
    float *d_dqkv = op_alloc(3 * n * sizeof(float));
    pl_attention_forward(d_out, d_att, d_qkv, 1, T, C, NH);
    pl_attention_backward(d_dqkv, d_dout, d_qkv, d_att, 1, T, C, NH);
    pl_to_host(s->ref_out, d_out, n * sizeof(float));
    pl_to_host(s->ref_dqkv, d_dqkv, 3 * n * sizeof(float));
    float *all[] = {d_qkv, d_out, d_att, d_dout, d_dqkv};
    for (int i = 0; i < 5; i++) pl_mem_free(all[i]);
}

static void seq_free(struct seq *s)
{
    float *all[] = {s->q, s->k, s->v, s->qkv, s->ref_out, s->dout, s->ref_dqkv};
    for (int i = 0; i < 7; i++) free(all[i]);
}

/* Cuts [0, T) at the given edges (cuts[0] = 0, cuts[n] = T): every block of chunk a's
 * queries against chunk b's keys (b <= a; with all_blocks, b > a too, which must add
 * nothing), merged; then the backward of the same blocks. */
static void check_cuts(const struct seq *s, const int *cuts, int n, int all_blocks,
                       const char *what)
{
    const int T = s->T;
    float *out = host_alloc((size_t)T * C), *lse = host_alloc((size_t)NH * T);
    double *acc = calloc((size_t)T * C, sizeof *acc), *m = malloc((size_t)NH * T * sizeof *m);
    double *l = calloc((size_t)NH * T, sizeof *l);
    for (int i = 0; i < NH * T; i++) m[i] = -INFINITY;
    float *po = host_alloc((size_t)T * C), *pl = host_alloc((size_t)NH * T);
    /* the merge: out = sum_b exp(lse_b - M) o_b / sum_b exp(lse_b - M), lse = M + log(...) */
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            if (b > a && !all_blocks) continue;
            const int q0 = cuts[a], Tq = cuts[a + 1] - q0, k0 = cuts[b], Tk = cuts[b + 1] - k0;
            block(s->q, s->k, s->v, q0, Tq, k0, Tk, po, pl);
            for (int h = 0; h < NH; h++)
                for (int i = 0; i < Tq; i++) {
                    const double lb = pl[(size_t)h * Tq + i];
                    const size_t r = (size_t)h * T + q0 + i;
                    if (lb == -INFINITY) {
                        for (int c = 0; c < C / NH; c++)
                            CHECK(po[(size_t)i * C + h * (C / NH) + c] == 0.0f,
                                  "%s: a query that sees no key of the block has a zero "
                                  "output", what);
                        continue;
                    }
                    const double mn = fmax(m[r], lb), a0 = exp(m[r] - mn), a1 = exp(lb - mn);
                    for (int c = 0; c < C / NH; c++) {
                        double *o = acc + (size_t)(q0 + i) * C + h * (C / NH) + c;
                        *o = *o * a0 + po[(size_t)i * C + h * (C / NH) + c] * a1;
                    }
                    l[r] = l[r] * a0 + a1, m[r] = mn;
                }
        }
    for (int t = 0; t < T; t++)
        for (int h = 0; h < NH; h++) {
            const size_t r = (size_t)h * T + t;
            lse[r] = (float)(m[r] + log(l[r]));
            for (int c = 0; c < C / NH; c++)
                out[(size_t)t * C + h * (C / NH) + c] =
                    (float)(acc[(size_t)t * C + h * (C / NH) + c] / l[r]);
        }
    double e = rel_l2(out, s->ref_out, (size_t)T * C);
    CHECK(e <= 1e-5, "%s: merged blocks' output vs pl_attention_forward: rel L2 %.3g", what, e);

    /* backward: the merged lse and delta, every block's gradients summed */
    const size_t nT = (size_t)T * C;
    float *d_dq = op_alloc(nT * sizeof(float)), *d_dk = op_alloc(nT * sizeof(float));
    float *d_dv = op_alloc(nT * sizeof(float));
    float *d_q = op_from_host(s->q, nT * sizeof(float)), *d_k = op_from_host(s->k, nT * 4);
    float *d_v = op_from_host(s->v, nT * sizeof(float));
    float *d_g = op_from_host(s->dout, nT * sizeof(float));
    float *d_o = op_from_host(out, nT * sizeof(float));
    float *d_delta = op_alloc((size_t)NH * T * sizeof(float));
    float *d_lse = op_alloc((size_t)NH * T * sizeof(float));
    float *blk_lse = host_alloc((size_t)NH * T), *blk_delta = host_alloc((size_t)NH * T);
    float *delta = host_alloc((size_t)NH * T);
    pl_attn_block_delta(d_delta, d_g, d_o, T, C, NH);
    pl_to_host(delta, d_delta, (size_t)NH * T * sizeof(float));
    for (int a = 0; a < n; a++) {
        const int q0 = cuts[a], Tq = cuts[a + 1] - q0;
        /* this chunk's rows of the [NH, T] statistics, as [NH, Tq] */
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < Tq; i++) {
                blk_lse[(size_t)h * Tq + i] = lse[(size_t)h * T + q0 + i];
                blk_delta[(size_t)h * Tq + i] = delta[(size_t)h * T + q0 + i];
            }
        pl_to_device(d_lse, blk_lse, (size_t)NH * Tq * sizeof(float));
        pl_to_device(d_delta, blk_delta, (size_t)NH * Tq * sizeof(float));
        for (int b = 0; b < n; b++) {
            if (b > a && !all_blocks) continue;
            const int k0 = cuts[b], Tk = cuts[b + 1] - k0;
            pl_attn_block_backward(d_dq + (size_t)q0 * C, d_dk + (size_t)k0 * C,
                                   d_dv + (size_t)k0 * C, d_g + (size_t)q0 * C,
                                   d_q + (size_t)q0 * C, d_k + (size_t)k0 * C,
                                   d_v + (size_t)k0 * C, d_lse, d_delta, Tq, Tk, C, NH, q0, k0);
        }
    }
    float *g = host_alloc(nT), *want = host_alloc(nT);
    const char *names[] = {"dq", "dk", "dv"};
    float *dev[] = {d_dq, d_dk, d_dv};
    for (int w = 0; w < 3; w++) {
        pl_to_host(g, dev[w], nT * sizeof(float));
        for (int t = 0; t < T; t++)
            memcpy(want + (size_t)t * C, s->ref_dqkv + (size_t)t * 3 * C + w * C,
                   C * sizeof(float));
        e = rel_l2(g, want, nT);
        CHECK(e <= 1e-4, "%s: blocks' %s vs pl_attention_backward: rel L2 %.3g", what,
              names[w], e);
    }
    float *ops[] = {d_dq, d_dk, d_dv, d_q, d_k, d_v, d_g, d_o, d_delta, d_lse};
    for (int i = 0; i < 10; i++) pl_mem_free(ops[i]);
    float *hs[] = {out, lse, po, pl, blk_lse, blk_delta, delta, g, want};
    for (int i = 0; i < 9; i++) free(hs[i]);
    free(acc), free(m), free(l);
}

static void check_blocks(void)
{
    struct seq s;
    for (int big = 0; big < 2; big++) {
        /* big: scores of a few hundred, where exp without the row's max overflows fp32 */
        seq_new(&s, 24, big ? 40.0f : 1.0f, 7 + (uint64_t)big);
        for (int cp = 1; cp <= 3; cp++) {
            int cuts[7];
            for (int i = 0; i <= 2 * cp; i++) cuts[i] = i * 24 / (2 * cp);
            char what[64];
            snprintf(what, sizeof what, "%d chunks%s", 2 * cp, big ? ", large scores" : "");
            check_cuts(&s, cuts, 2 * cp, 0, what);
        }
        const int odd[] = {0, 5, 6, 13, 24};
        check_cuts(&s, odd, 4, 1, big ? "unequal blocks, every pair, large scores"
                                       : "unequal blocks, every pair");
        seq_free(&s);
    }
}

static void check_flops_and_messages(void)
{
    const int Tq = 3, Tk = 5;
    float *q = op_alloc((size_t)Tq * C * 4), *k = op_alloc((size_t)Tk * C * 4);
    float *v = op_alloc((size_t)Tk * C * 4), *o = op_alloc((size_t)Tq * C * 4);
    float *l = op_alloc((size_t)NH * Tq * 4), *d = op_alloc((size_t)NH * Tq * 4);
    pl_zero(q, (size_t)Tq * C), pl_zero(k, (size_t)Tk * C), pl_zero(v, (size_t)Tk * C);
    struct pl_ledger before, after;
    before = *pl_ledger();
    pl_attn_block_forward(o, l, q, k, v, Tq, Tk, C, NH, 0, 100); /* wholly in the future */
    after = *pl_ledger();
    CHECK(close_to(after.flops - before.flops,
                   4.0 * Tq * Tk * C + (double)PL_FLOPS_SOFTMAX_FWD * NH * Tq * Tk),
          "forward charges 4 Tq Tk C + the softmax's per score, masked entries included: "
          "got %.0f", after.flops - before.flops);
    float lse[NH * Tq];
    pl_to_host(lse, l, sizeof lse);
    CHECK(lse[0] == -INFINITY && lse[NH * Tq - 1] == -INFINITY,
          "a block wholly in the future gives lse = -inf");
    pl_zero(d, (size_t)NH * Tq);
    before = *pl_ledger();
    pl_attn_block_backward(q, k, v, o, q, k, v, l, d, Tq, Tk, C, NH, 0, 100);
    after = *pl_ledger();
    CHECK(close_to(after.flops - before.flops, pl_attn_block_flops(Tq, Tk, C, NH, 1)) &&
              close_to(pl_attn_block_flops(Tq, Tk, C, NH, 1),
                       8.0 * Tq * Tk * C + (double)PL_FLOPS_SOFTMAX_BWD * NH * Tq * Tk),
          "backward charges 8 Tq Tk C + the softmax backward's per score");
    /* the scratch each call holds, as pl_attn_block_work_bytes says */
    for (int which = 0; which < 3; which++) {
        struct pl_mem_stats m0, m1;
        pl_mem_reset_peak();
        pl_mem_get_stats(&m0);
        if (which == 0) pl_attn_block_forward(o, l, q, k, v, Tq, Tk, C, NH, 4, 0);
        else if (which == 1) pl_attn_block_backward(q, k, v, o, q, k, v, l, d, Tq, Tk, C, NH, 4, 0);
        else pl_attn_block_delta(d, o, o, Tq, C, NH);
        pl_mem_get_stats(&m1);
        const double want = pl_attn_block_work_bytes(Tq, Tk, C, NH, which);
        CHECK(close_to((double)(m1.peak_total - m0.current_total), want),
              "%s's scratch: %zu bytes, pl_attn_block_work_bytes %.0f",
              which == 0 ? "forward" : which == 1 ? "backward" : "delta",
              m1.peak_total - m0.current_total, want);
    }
    float *all[] = {q, k, v, o, l, d};
    for (int i = 0; i < 6; i++) pl_mem_free(all[i]);
    char err[200];
    CHECK(pl_cp_seq_error(2, 16, err, sizeof err) == 0, "T=16 splits into 4 chunks");
    CHECK(pl_cp_seq_error(4, 12, err, sizeof err) == -1 && strstr(err, "8, 16, 24, 32"),
          "T=12 on cp=4 names the multiples of 8: %s", err);
}

/* Each rank's buffer holds its rank; +1 receives the previous rank's, -1 the next's. */
static void check_shift(void)
{
    struct pl_comm *w = pl_comm_world();
    const int n = pl_comm_size(w), r = pl_comm_rank(w);
    const size_t count = 6;
    float mine[6], got[6];
    for (size_t i = 0; i < count; i++) mine[i] = (float)(100 * r + (int)i);
    float *d_send = op_from_host(mine, sizeof mine), *d_a = op_alloc(sizeof mine);
    float *d_b = op_alloc(sizeof mine);
    struct pl_ledger before, after;
    before = *pl_ledger();
    struct pl_ring_shift a, b;
    pl_ring_shift_start(w, d_send, d_a, count, 1, 3, &a);
    pl_ring_shift_start(w, d_send, d_b, count, -1, 4, &b);
    pl_ring_shift_wait(&a);
    pl_ring_shift_wait(&b);
    after = *pl_ledger();
    for (int dir = 0; dir < 2; dir++) {
        pl_to_host(got, dir ? d_b : d_a, sizeof got);
        const int from = dir ? (r + 1) % n : (r + n - 1) % n;
        int ok = 1;
        for (size_t i = 0; i < count; i++) ok &= got[i] == (float)(100 * from + (int)i);
        CHECK(ok, "shift %+d: rank %d holds rank %d's buffer", dir ? -1 : 1, r, from);
    }
    const double sent = pl_ledger_bytes(&after, PL_P2P, -1) - pl_ledger_bytes(&before, PL_P2P,
                                                                               -1);
    CHECK(close_to(sent, n > 1 ? 2.0 * sizeof mine : 0.0),
          "two shifts send two buffers on %d ranks (none on one): %.0f bytes", n, sent);
    float *all[] = {d_send, d_a, d_b};
    for (int i = 0; i < 3; i++) pl_mem_free(all[i]);
}

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    if (pl_rank() == 0) {
        check_blocks();
        check_flops_and_messages();
    }
    check_shift();
    int bad = (int)world_sum(failures);
    if (pl_rank() == 0)
        printf("test_ring_attn: %d checks, %d failures on rank 0, %d in all\n", checks,
               failures, bad);
    pl_finalize();
    return bad ? 1 : 0;
}
