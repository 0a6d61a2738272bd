/* cases_ring.c: op ring, Lab 5's second part: causal ring attention on the cp ranks of the
 * world (sp.h: cp_chunks, cp_attention_forward, cp_attention_backward). Every rank draws
 * the whole sequences' q, k, v and dout from the seed and runs the single-device attention
 * on them (pl_attention_forward, pl_attention_backward: the oracle); it hands the student
 * its rows by the student's own layout and records, for judge_ring.c, the comparison of
 * out, dq, dk and dv with its rows of the oracle's, each pass's point-to-point bytes and
 * collectives, the memory it held above its arguments, and its attention FLOPs (the kit's
 * block calls', counted at each call). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_count.h"
#include "lab05.h"
#include "unseen.h"

/* An older sp.c, written before the second part, has none of its functions: these stand in
 * (the student's own definitions replace them), so that its first part is graded as before
 * and the second part's tests say which function to write. */
__attribute__((weak)) void cp_chunks(int cp, int r, int chunk[2])
{
    (void)cp, (void)r;
    chunk[0] = chunk[1] = -1;
    lab_todo("cp_chunks", "8.2");
}

__attribute__((weak)) void cp_attention_forward(struct pl_comm *cpg, float *out, float *lse,
                                                const float *q, const float *k,
                                                const float *v, int B, int T, int C, int NH)
{
    (void)cpg, (void)out, (void)lse, (void)q, (void)k, (void)v, (void)B, (void)T, (void)C;
    (void)NH;
    lab_todo("cp_attention_forward", "8.3");
}

__attribute__((weak)) void cp_attention_backward(struct pl_comm *cpg, float *dq, float *dk,
                                                 float *dv, const float *dout, const float *q,
                                                 const float *k, const float *v,
                                                 const float *out, const float *lse, int B,
                                                 int T, int C, int NH)
{
    (void)cpg, (void)dq, (void)dk, (void)dv, (void)dout, (void)q, (void)k, (void)v, (void)out;
    (void)lse, (void)B, (void)T, (void)C, (void)NH;
    lab_todo("cp_attention_backward", "8.4");
}

/* The kit's block calls, wrapped (lab.mk): what each charged goes to the count being
 * collected (core_count.h), so a pass's attention FLOPs are the blocks' alone, whatever else
 * the code charges to the ledger. */
void __real_pl_attn_block_forward(float *out, float *lse, const float *q, const float *k,
                                  const float *v, int Tq, int Tk, int C, int NH, int q0, int k0);
void __real_pl_attn_block_backward(float *dq, float *dk, float *dv, const float *dout,
                                   const float *q, const float *k, const float *v,
                                   const float *lse, const float *delta, int Tq, int Tk, int C,
                                   int NH, int q0, int k0);
void __wrap_pl_attn_block_forward(float *out, float *lse, const float *q, const float *k,
                                  const float *v, int Tq, int Tk, int C, int NH, int q0, int k0);
void __wrap_pl_attn_block_backward(float *dq, float *dk, float *dv, const float *dout,
                                   const float *q, const float *k, const float *v,
                                   const float *lse, const float *delta, int Tq, int Tk, int C,
                                   int NH, int q0, int k0);

void __real_pl_ring_shift_start(struct pl_comm *comm, const float *send, float *recv,
                                 size_t count, int shift, int tag, struct pl_ring_shift *s);
void __wrap_pl_ring_shift_start(struct pl_comm *comm, const float *send, float *recv,
                                size_t count, int shift, int tag, struct pl_ring_shift *s);

/* The kit's ring step, wrapped (lab.mk): what it sends is looked at first (kv_watch). Every
 * buffer handed to it and to the block calls is placed (grader/common/unseen.h): K and V
 * kept on the stack or in static storage would hold the whole sequence outside the memory
 * ledger, which the memory test reads. */
void __wrap_pl_ring_shift_start(struct pl_comm *comm, const float *send, float *recv,
                                size_t count, int shift, int tag, struct pl_ring_shift *s)
{
    gr_unseen_place(send, "pl_ring_shift_start", "send buffer", -2, "");
    gr_unseen_place(recv, "pl_ring_shift_start", "receive buffer", -2, "");
    gr_core_send(send, count, shift);
    __real_pl_ring_shift_start(comm, send, recv, count, shift, tag, s);
}

void __wrap_pl_attn_block_forward(float *out, float *lse, const float *q, const float *k,
                                  const float *v, int Tq, int Tk, int C, int NH, int q0, int k0)
{
    gr_unseen_place(out, "pl_attn_block_forward", "out", -2, "");
    gr_unseen_place(lse, "pl_attn_block_forward", "lse", -2, "");
    gr_unseen_place(k, "pl_attn_block_forward", "k", -2, "");
    gr_unseen_place(v, "pl_attn_block_forward", "v", -2, "");
    const double f0 = pl_ledger_flops_total();
    __real_pl_attn_block_forward(out, lse, q, k, v, Tq, Tk, C, NH, q0, k0);
    gr_core_note(0, pl_ledger_flops_total() - f0);
}

void __wrap_pl_attn_block_backward(float *dq, float *dk, float *dv, const float *dout,
                                   const float *q, const float *k, const float *v,
                                   const float *lse, const float *delta, int Tq, int Tk, int C,
                                   int NH, int q0, int k0)
{
    gr_unseen_place(dq, "pl_attn_block_backward", "dq", -2, "");
    gr_unseen_place(dk, "pl_attn_block_backward", "dk", -2, "");
    gr_unseen_place(dv, "pl_attn_block_backward", "dv", -2, "");
    gr_unseen_place(k, "pl_attn_block_backward", "k", -2, "");
    gr_unseen_place(v, "pl_attn_block_backward", "v", -2, "");
    const double f0 = pl_ledger_flops_total();
    __real_pl_attn_block_backward(dq, dk, dv, dout, q, k, v, lse, delta, Tq, Tk, C, NH, q0, k0);
    gr_core_note(1, pl_ledger_flops_total() - f0);
}

/* Case 0: two sequences, scores of order one; case 1: one sequence of chunks of 3 tokens
 * where some keys score about a hundred and the rest a few units (ring_data_new): exp of
 * them overflows fp32, so a merge that does not rescale by the larger lse gives inf or NaN. The hidden suite draws each case's B, chunk length
 * (1 to 5 tokens) and heads (2 or 4; of 4 or 8 channels in case 0, of 8 in case 1) from the
 * seed. */
struct l5_ring_case l5_ring_case_of(const struct l5_state *st, int i, int cp)
{
    struct l5_ring_case k = i == 0 ? (struct l5_ring_case){2, 8 * cp, 32, 4, 0.0f}
                                   : (struct l5_ring_case){1, 6 * cp, 16, 2, 17.0f};
    if (st->hidden) { /* the batch, the chunks' length and the heads from the seed */
        float r[4];
        pl_rng_fill_uniform(r, 4, st->seed, pl_rng_stream("lab05.ring.shape"), (uint64_t)i * 4,
                            0.0f, 1.0f);
        k.B = 1 + (int)(r[0] * 3) % 3;
        k.T = 2 * cp * (1 + (int)(r[1] * 5) % 5);
        k.NH = r[2] < 0.5f ? 2 : 4;
        /* heads of 8 channels where scores are near 17^2/sqrt(8): with fewer the softmax
         * peaks and fp32's rounding of the scores moves the gradients past 1e-4 */
        k.C = k.NH * (r[3] < 0.5f && k.big == 0 ? 4 : 8);
    }
    return k;
}

static struct l5_ring_said *ring_fail(struct l5_ring_obs *o, int part, int code,
                                      const double *v, int n)
{
    struct l5_ring_said *s = &o->part[part];
    if (s->code) return NULL;
    s->code = code;
    for (int k = 0; k < n && k < 8; k++) s->v[k] = v[k];
    return s;
}
#define RING_FAIL(o, part, code, ...)                                                        \
    ring_fail(o, part, code, (const double[]){__VA_ARGS__},                                  \
              (int)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double)))

/* Every rank's chunks, checked: 1 when they are a layout (the first problem recorded). */
static int layout_ok(struct l5_ring_obs *o, int cp, int (*ch)[2])
{
    int *owner = malloc(sizeof(int) * 2 * (size_t)cp), ok = 1;
    for (int c = 0; c < 2 * cp; c++) owner[c] = -1;
    for (int x = 0; x < cp && ok; x++) {
        cp_chunks(cp, x, ch[x]);
        if (pl_todo_what()) ok = 0;
        else if (ch[x][0] < 0 || ch[x][1] >= 2 * cp || ch[x][0] < 0 || ch[x][1] < 0 ||
                 ch[x][0] >= 2 * cp)
            ok = 0, RING_FAIL(o, 0, L5_R_LAYOUT, x, ch[x][0], ch[x][1], 0, -1);
        else if (ch[x][0] >= ch[x][1])
            ok = 0, RING_FAIL(o, 0, L5_R_LAYOUT, x, ch[x][0], ch[x][1], 1, -1);
        else
            for (int j = 0; j < 2 && ok; j++) {
                if (owner[ch[x][j]] >= 0)
                    ok = 0, RING_FAIL(o, 0, L5_R_LAYOUT, x, ch[x][0], ch[x][1], 2,
                                      owner[ch[x][j]]);
                owner[ch[x][j]] = x;
            }
    }
    free(owner);
    return ok;
}

/* Rank x's rows of a full [B, T, C] (host), into local [B, T/cp, C] (host). */
static void rows_of(float *local, const float *full, const int ch[2], int B, int T, int C,
                    int cp)
{
    const int Tc = T / (2 * cp);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < 2; j++)
            memcpy(local + ((size_t)b * 2 * Tc + (size_t)j * Tc) * C,
                   full + ((size_t)b * T + (size_t)ch[j] * Tc) * C, (size_t)Tc * C * sizeof(float));
}

/* The oracle: the whole sequences through the single device's attention (host arrays). */
struct ring_data {
    struct l5_ring_case k;
    size_t n, nl;
    float *q, *k_, *v, *dout, *out, *dq, *dk, *dv;
};

static void ring_data_new(const struct l5_state *st, const struct l5_ring_case *kc, int cp,
                          struct ring_data *d)
{
    const int B = kc->B, T = kc->T, C = kc->C;
    *d = (struct ring_data){.k = *kc, .n = (size_t)B * T * C, .nl = (size_t)B * T * C / cp};
    float **h[] = {&d->q, &d->k_, &d->v, &d->dout, &d->out, &d->dq, &d->dk, &d->dv};
    for (int i = 0; i < 8; i++) *h[i] = malloc(d->n * sizeof(float));
    const char *names[] = {"lab05.ring.q", "lab05.ring.k", "lab05.ring.v", "lab05.ring.dout"};
    for (int i = 0; i < 4; i++) {
        pl_rng_fill_normal(*h[i], d->n, st->seed, pl_rng_stream(names[i]), 0, 0.0f, 1.0f);
        /* big: every query of a head, and the keys of some chunks alone, share a component
         * of size big: those keys score about big^2/sqrt(HS) (a hundred: exp of it overflows),
         * the others (that component zeroed) of order one. Even heads: chunk 0's keys (a sink seen by every row, merged
         * after the local blocks on most ranks); odd heads: the late chunks', cp..2cp-1 (seen
         * first, then the early ones). A row's blocks' lse are thus about a hundred apart in
         * both orders: a merge that rescales by one side's lse instead of the larger
         * overflows one way or the other. */
        const int Tc = T / (2 * cp), HS = C / kc->NH;
        for (size_t t = 0; i < 2 && kc->big > 0 && t < (size_t)B * T; t++)
            for (int hd = 0; hd < kc->NH; hd++) {
                const int c = (int)(t % (size_t)T) / Tc, on = hd % 2 ? c >= cp : c == 0;
                float *x = *h[i] + t * C + (size_t)hd * HS;
                if (i == 0) *x += kc->big;
                else *x = on ? *x + kc->big : 0.0f;
            }
    }
    float *qkv = malloc(3 * d->n * sizeof(float));
    for (size_t t = 0; t < (size_t)B * T; t++)
        for (int w = 0; w < 3; w++)
            memcpy(qkv + (t * 3 + (size_t)w) * C, (w == 0 ? d->q : w == 1 ? d->k_ : d->v) + t * C,
                   (size_t)C * sizeof(float));
    float *o_qkv = gr_op_alloc(3 * d->n, "lab05 ring qkv"), *o_out = gr_op_alloc(d->n, "out");
    float *o_att = gr_op_alloc((size_t)B * kc->NH * T * T, "lab05 ring att");
    float *o_g = gr_op_alloc(d->n, "lab05 ring dout"), *o_d = gr_op_alloc(3 * d->n, "dqkv");
    pl_to_device(o_qkv, qkv, 3 * d->n * sizeof(float));
    pl_to_device(o_g, d->dout, d->n * sizeof(float));
    pl_zero(o_d, 3 * d->n);
    pl_attention_forward(o_out, o_att, o_qkv, B, T, C, kc->NH);
    pl_attention_backward(o_d, o_g, o_qkv, o_att, B, T, C, kc->NH);
    pl_to_host(d->out, o_out, d->n * sizeof(float));
    pl_to_host(qkv, o_d, 3 * d->n * sizeof(float));
    for (size_t t = 0; t < (size_t)B * T; t++)
        for (int w = 0; w < 3; w++)
            memcpy((w == 0 ? d->dq : w == 1 ? d->dk : d->dv) + t * C, qkv + (t * 3 + (size_t)w) * C,
                   (size_t)C * sizeof(float));
    free(qkv);
    float *ops[] = {o_qkv, o_out, o_att, o_g, o_d};
    for (int i = 0; i < 5; i++) pl_mem_free(ops[i]);
}

static void ring_data_free(struct ring_data *d)
{
    float *h[] = {d->q, d->k_, d->v, d->dout, d->out, d->dq, d->dk, d->dv};
    for (int i = 0; i < 8; i++) free(h[i]);
}

/* The messages of a pass that carry a rank's own K or V to it (it holds them already: the
 * bytes count within the backward's range, yet are sent for nothing): each message's
 * payload, piece by piece of one rank's K, against the receiving rank's k and v. */
struct kv_watch {
    const struct ring_data *d;
    int (*ch)[2];
    int cp, r;
    int home;
};

static void kv_watch_send(void *ctx, const float *send, size_t count, int shift)
{
    struct kv_watch *w = ctx;
    const size_t nl = w->d->nl;
    if (w->cp < 2 || count < nl || count % nl) return;
    const int to = ((w->r + shift) % w->cp + w->cp) % w->cp;
    const struct l5_ring_case *k = &w->d->k;
    float *got = malloc(count * sizeof(float)), *own = malloc(nl * sizeof(float));
    pl_to_host(got, send, count * sizeof(float));
    for (int which = 0; which < 2; which++) {
        rows_of(own, which ? w->d->v : w->d->k_, w->ch[to], k->B, k->T, k->C, w->cp);
        for (size_t at = 0; at < count; at += nl)
            w->home += !memcmp(got + at, own, nl * sizeof(float));
    }
    free(own);
    free(got);
}

/* The chunk (0 or 1 of this rank's) holding element e of a local [B, T/cp, C]. */
static int chunk_of(double e, int Tc, int C)
{
    return (int)((size_t)e / ((size_t)Tc * C)) % 2;
}

/* got (op memory) against this rank's rows of full: 1 when right; else the failure, with the
 * rank whose rows it matches when it is another's (dk, dv returned to the wrong owner). */
static int compare(struct l5_ring_obs *o, const char *what, const float *got, const float *full,
                   int (*ch)[2], double tol, int grad)
{
    const struct l5_ring_case k = {o->B, o->T, o->C, o->NH, 0};
    const int cp = o->cp, Tc = k.T / (2 * cp);
    const size_t nl = (size_t)k.B * k.T * k.C / cp;
    float *want = malloc(nl * sizeof(float));
    rows_of(want, full, ch[o->r], k.B, k.T, k.C, cp);
    struct gr_cmp m;
    float *d_want = gr_op_alloc(nl, "lab05 ring want");
    pl_to_device(d_want, want, nl * sizeof(float));
    int ok = gr_cmp_of(got, d_want, nl, tol, &m);
    if (!ok) {
        int match = -1;
        for (int x = 0; x < cp && match < 0 && grad && m.finite; x++) {
            if (x == o->r) continue;
            rows_of(want, full, ch[x], k.B, k.T, k.C, cp);
            struct gr_cmp mx;
            pl_to_device(d_want, want, nl * sizeof(float));
            if (gr_cmp_of(got, d_want, nl, tol, &mx)) match = x;
        }
        const int c = ch[o->r][chunk_of(m.at, Tc, k.C)];
        struct l5_ring_said *s =
            grad ? RING_FAIL(o, 0, L5_R_GRAD, c, (double)c * Tc, match)
                 : RING_FAIL(o, 0, L5_R_OUT, c, (double)c * Tc);
        if (s) s->cmp = m, snprintf(s->name, sizeof s->name, "%s", what);
    }
    pl_mem_free(d_want);
    free(want);
    return ok;
}

/* A buffer of the pass that the kit's calls got from the stack or static storage: the
 * memory part's first failure (the peak the ledger reads does not hold it). */
static void unseen_said(struct l5_ring_obs *o, int pass)
{
    const struct gr_unseen u = gr_unseen_end();
    if (u.where && RING_FAIL(o, 2, L5_R_UNSEEN, pass, u.where))
        snprintf(o->unseen, sizeof o->unseen, "%s", u.what);
}

/* A pass's traffic, memory and FLOPs, from the ledgers since the marks. */
static void pass_figures(struct l5_ring_obs *o, int pass, const struct pl_ledger *mark,
                         size_t before, double flops, int home)
{
    struct pl_ledger d;
    gr_ledger_since(mark, &d);
    struct pl_mem_stats now;
    pl_mem_get_stats(&now);
    const double p2p = pl_ledger_bytes(&d, PL_P2P, -1);
    const long other = gr_ledger_total_calls(&d); /* every kind but point-to-point */
    const double peak = (double)now.peak_total - (double)before;
    const double left = (double)now.current_total - (double)before;
    const double L = 4.0 * o->B * (o->T / o->cp) * o->C, lb = 4.0 * o->B * o->NH * (o->T / o->cp);
    if (pass == 0) o->fwd_bytes = p2p, o->fwd_peak = peak, o->fwd_flops = flops;
    else o->bwd_bytes = p2p, o->bwd_peak = peak, o->bwd_flops = flops;
    double lo, hi;
    if (pass == 0) lo = hi = l5_ring_fwd_units(o->cp);
    else l5_ring_bwd_units(o->cp, &lo, &hi);
    if (o->cp > 1 && (other || p2p < lo * L - 0.5 || p2p > hi * L + 0.5))
        RING_FAIL(o, 1, L5_R_TRAFFIC, pass, p2p, (double)d.calls[PL_P2P], (double)other,
                  lo * L, hi * L, L);
    if (o->cp > 1 && home) RING_FAIL(o, 1, L5_R_HOME, pass, home, L);
    if (left != 0) RING_FAIL(o, 2, L5_R_LEFT, pass, left);
    /* and the scratch of the kit's block call (a row of scores; on the GPU build the host
     * copies of its arrays) */
    const int Tc = o->T / (2 * o->cp);
    const double kit = fmax(pl_attn_block_work_bytes(Tc, Tc, o->C, o->NH, pass),
                            pass ? pl_attn_block_work_bytes(Tc, Tc, o->C, o->NH, 2) : 0);
    /* forward: room for one block's partial output beyond the handout's 6L, so that a design
     * merging a step's partials together before the running output fits as well */
    const double part = pass == 0 ? 4.0 * Tc * o->C : 0;
    const double bound = (pass == 0 ? 6 : 9) * L + 2 * lb + part + kit;
    if (peak > bound) RING_FAIL(o, 2, L5_R_PEAK, pass, peak, bound, L, lb, kit, part);
}

/* Rank 0: the traced forward replayed at one long sequence's scale (L5_RING_REAL_T tokens,
 * L5_RING_REAL_C channels, 16-bit) on dgx-h100: each block's FLOPs grow as Tc^2 C, each
 * message's bytes as Tc C; then every rank forgets the trace. */
static void replay_forward(struct l5_state *st, struct l5_ring_obs *o,
                           const struct l5_ring_case *kc)
{
    if (pl_rank() == 0) {
        const double Tc = kc->T / (2.0 * o->cp), Tr = L5_RING_REAL_T / (2.0 * o->cp);
        const double flop_x = (Tr * Tr * L5_RING_REAL_C) / (kc->B * Tc * Tc * kc->C);
        const double byte_x = (Tr * L5_RING_REAL_C * 2.0) / (kc->B * Tc * kc->C * 4.0);
        struct gr_overlap ov;
        snprintf(o->trace_err, sizeof o->trace_err, "the forward did not run to the end");
        if (gr_bt_traced() &&
            gr_bt_replay_scaled(flop_x, byte_x, st->ring_svg, st->ring_svg ? "ring attention's "
                                "forward on the modelled timeline" : NULL, &ov,
                                o->trace_err, sizeof o->trace_err) == 0) {
            o->traced = 1, o->trace_err[0] = '\0';
            o->step = ov.step_time, o->compute = ov.compute, o->comm = ov.comm;
            o->exposed = ov.exposed;
        }
        st->ring_traced = *o;
    }
    gr_bt_free();
}

void l5_run_ring(struct l5_state *st, struct pl_comm *cpg, int i)
{
    struct l5_ring_obs *o = &st->ob->ring;
    const int cp = pl_comm_size(cpg), r = pl_comm_rank(cpg);
    const struct l5_ring_case kc = l5_ring_case_of(st, i, cp);
    *o = (struct l5_ring_obs){.cp = cp, .r = r, .B = kc.B, .T = kc.T, .C = kc.C, .NH = kc.NH,
                              .big = kc.big > 0};
    int(*ch)[2] = malloc(sizeof *ch * (size_t)cp);
    if (!layout_ok(o, cp, ch)) {
        free(ch);
        return;
    }
    o->chunk[0] = ch[r][0], o->chunk[1] = ch[r][1];
    struct ring_data d;
    ring_data_new(st, &kc, cp, &d);
    const size_t nl = d.nl, nlse = (size_t)kc.B * kc.NH * (kc.T / cp);
    float *host = malloc(nl * sizeof(float));
    float *mine[4];
    const float *full[4] = {d.q, d.k_, d.v, d.dout};
    for (int w = 0; w < 4; w++) {
        rows_of(host, full[w], ch[r], kc.B, kc.T, kc.C, cp);
        mine[w] = gr_op_alloc(nl, "lab05 ring rows");
        pl_to_device(mine[w], host, nl * sizeof(float));
    }
    float *out = gr_op_alloc(nl, "your out"), *lse = gr_op_alloc(nlse, "your lse");
    float *dq = gr_op_alloc(nl, "your dq"), *dk = gr_op_alloc(nl, "your dk");
    float *dv = gr_op_alloc(nl, "your dv");
    /* handed over holding junk: the passes write them */
    pl_copy(out, mine[0], nl), pl_copy(dq, mine[1], nl), pl_copy(dk, mine[2], nl);
    pl_copy(dv, mine[0], nl);
    struct pl_mem_stats before;
    struct pl_ledger mark;
    pl_mem_reset_peak();
    pl_mem_get_stats(&before);
    gr_ledger_mark(&mark);
    struct gr_core_count att;
    struct kv_watch watch = {&d, ch, cp, r, 0};
    gr_core_begin(&att);
    att.on_send = kv_watch_send, att.ctx = &watch;
    const int traced = i == 0 && cp > 1;
    if (traced) gr_bt_begin();
    gr_unseen_begin(1);
    cp_attention_forward(cpg, out, lse, mine[0], mine[1], mine[2], kc.B, kc.T, kc.C, kc.NH);
    unseen_said(o, 0);
    if (traced) gr_bt_end(!pl_todo_what());
    gr_core_end(&att);
    pass_figures(o, 0, &mark, before.current_total, att.total, watch.home);
    if (traced) replay_forward(st, o, &kc);
    else if (i > 0 && pl_rank() == 0) { /* the traced case's replay, for this case's verdict */
        const struct l5_ring_obs *t = &st->ring_traced;
        o->traced = t->traced, o->step = t->step, o->compute = t->compute, o->comm = t->comm;
        o->exposed = t->exposed;
        snprintf(o->trace_err, sizeof o->trace_err, "%s", t->trace_err);
    }
    int ok = !pl_todo_what() && compare(o, "out", out, d.out, ch, L5_TOL_FWD, 0);
    if (!pl_todo_what()) {
        pl_mem_reset_peak();
        pl_mem_get_stats(&before);
        gr_ledger_mark(&mark);
        gr_core_begin(&att);
        watch.home = 0, att.on_send = kv_watch_send, att.ctx = &watch;
        gr_unseen_begin(1);
        cp_attention_backward(cpg, dq, dk, dv, mine[3], mine[0], mine[1], mine[2], out, lse,
                              kc.B, kc.T, kc.C, kc.NH);
        unseen_said(o, 1);
        gr_core_end(&att);
        pass_figures(o, 1, &mark, before.current_total, att.total, watch.home);
        o->ran = !pl_todo_what();
    }
    if (o->ran && ok) {
        const char *names[] = {"dq", "dk", "dv"};
        const float *got[] = {dq, dk, dv}, *want[] = {d.dq, d.dk, d.dv};
        for (int w = 0; w < 3 && compare(o, names[w], got[w], want[w], ch, L5_TOL_BWD, 1);
             w++) {
        }
    }
    o->held = 4.0 * (4 * nl + nlse); /* q, k, v, out and lse from the forward to the backward */
    float *fr[] = {mine[0], mine[1], mine[2], mine[3], out, lse, dq, dk, dv};
    for (int w = 0; w < 9; w++) pl_mem_free(fr[w]);
    free(host);
    free(ch);
    ring_data_free(&d);
}
