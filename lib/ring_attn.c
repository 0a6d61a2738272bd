/* ring_attn.c: the pieces of ring attention (ring_attn.h). The block math runs on the
 * host: on the GPU build its arrays are staged through host scratch, which is correct and
 * slow (the lab's sizes are small; its speed is judged on the modelled timeline, from the
 * FLOPs charged here). */
#include "ring_attn.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "ledger.h"
#include "mem.h"
#include "ops.h"

int pl_cp_seq_error(int cp, int T, char *err, size_t len)
{
    if (cp >= 1 && T >= 2 * cp && T % (2 * cp) == 0) return 0;
    if (cp < 1) {
        snprintf(err, len, "cp=%d ranks: context parallelism needs cp >= 1", cp);
        return -1;
    }
    int n = snprintf(err, len, "T=%d tokens per sequence cannot be cut into 2cp=%d equal "
                     "chunks (choose T a multiple of %d:", T, 2 * cp, 2 * cp);
    for (int k = 1; k <= 4 && n > 0 && (size_t)n < len; k++)
        n += snprintf(err + n, len - (size_t)n, " %d%s", 2 * cp * k, k < 4 ? "," : ", ...)");
    return -1;
}

static void require_block(const char *fn, int Tq, int Tk, int C, int NH)
{
    if (Tq < 1 || Tk < 1 || C < 1 || NH < 1)
        pl_usage_error("%s: Tq=%d Tk=%d C=%d NH=%d must all be at least 1", fn, Tq, Tk, C, NH);
    if (C % NH)
        pl_usage_error("%s: C=%d is not divisible by NH=%d heads (each head takes C/NH "
                       "channels)", fn, C, NH);
}

double pl_attn_block_flops(int Tq, int Tk, int C, int NH, int backward)
{
    const double pairs = (double)Tq * Tk;
    return backward ? 8.0 * pairs * C + (double)PL_FLOPS_SOFTMAX_BWD * NH * pairs
                    : 4.0 * pairs * C + (double)PL_FLOPS_SOFTMAX_FWD * NH * pairs;
}

double pl_attn_block_work_bytes(int Tq, int Tk, int C, int NH, int backward)
{
    const double q = (double)Tq * C, k = (double)Tk * C, st = (double)NH * Tq;
    double views = backward == 0 ? 2 * q + 2 * k + st : backward == 1 ? 3 * q + 4 * k + 2 * st
                                                                      : 2 * q + st;
#ifndef PL_GPU
    views = 0; /* the arrays themselves */
#endif
    return 4.0 * ((backward == 0 ? Tk : 0) + views);
}

/* ---- host views of op memory: the arrays themselves on the CPU build, copies on the GPU
 * build (in: copied from the device; out: copied back by view_done) ---- */

struct view {
    float *host;
    const float *dev;
    size_t n;
    int back;
};

static float *view_in(struct view *v, const float *dev, size_t n, int back)
{
    *v = (struct view){.host = (float *)dev, .dev = dev, .n = n, .back = back};
#ifdef PL_GPU
    if (dev) {
        v->host = pl_mem_alloc(n * sizeof(float), PL_MEM_WORK, PL_HOST, "ring attention view");
        pl_to_host(v->host, dev, n * sizeof(float));
    }
#endif
    return v->host;
}

static void view_done(struct view *v)
{
#ifdef PL_GPU
    if (v->dev) {
        if (v->back) pl_to_device((float *)v->dev, v->host, v->n * sizeof(float));
        pl_mem_free(v->host);
    }
#else
    (void)v;
#endif
}

/* Keys query i of a block sees: [0, n). */
static int visible(int i, int Tk, int q0, int k0)
{
    int n = q0 + i - k0 + 1;
    return n < 0 ? 0 : n > Tk ? Tk : n;
}

static float dot(const float *a, const float *b, int n)
{
    float s = 0.0f;
    for (int c = 0; c < n; c++) s += a[c] * b[c];
    return s;
}

static void block_forward(float *out, float *lse, const float *q, const float *k,
                          const float *v, int Tq, int Tk, int C, int NH, int q0, int k0,
                          float *s)
{
    const int HS = C / NH;
    const float scale = 1.0f / sqrtf((float)HS);
    for (int h = 0; h < NH; h++)
        for (int i = 0; i < Tq; i++) {
            const int n = visible(i, Tk, q0, k0);
            float *o = out + (size_t)i * C + h * HS;
            memset(o, 0, (size_t)HS * sizeof *o);
            if (!n) {
                lse[(size_t)h * Tq + i] = -INFINITY;
                continue;
            }
            const float *qi = q + (size_t)i * C + h * HS;
            float mx = -INFINITY;
            for (int j = 0; j < n; j++) {
                s[j] = scale * dot(qi, k + (size_t)j * C + h * HS, HS);
                mx = s[j] > mx ? s[j] : mx;
            }
            float sum = 0.0f;
            for (int j = 0; j < n; j++) sum += s[j] = expf(s[j] - mx);
            for (int j = 0; j < n; j++) {
                const float p = s[j] / sum, *vj = v + (size_t)j * C + h * HS;
                for (int c = 0; c < HS; c++) o[c] += p * vj[c];
            }
            lse[(size_t)h * Tq + i] = mx + logf(sum);
        }
}

void pl_attn_block_forward(float *out, float *lse, const float *q, const float *k,
                           const float *v, int Tq, int Tk, int C, int NH, int q0, int k0)
{
    require_block("pl_attn_block_forward", Tq, Tk, C, NH);
    if (!out || !lse || !q || !k || !v)
        pl_usage_error("pl_attn_block_forward: out, lse, q, k and v must all be given");
    pl_ledger_add_flops(pl_attn_block_flops(Tq, Tk, C, NH, 0));
    struct view vo, vl, vq, vk, vv;
    float *s = pl_mem_alloc((size_t)Tk * sizeof *s, PL_MEM_WORK, PL_HOST, "block scores");
    block_forward(view_in(&vo, out, (size_t)Tq * C, 1), view_in(&vl, lse, (size_t)NH * Tq, 1),
                  view_in(&vq, q, (size_t)Tq * C, 0), view_in(&vk, k, (size_t)Tk * C, 0),
                  view_in(&vv, v, (size_t)Tk * C, 0), Tq, Tk, C, NH, q0, k0, s);
    struct view *all[] = {&vo, &vl, &vq, &vk, &vv};
    for (int i = 0; i < 5; i++) view_done(all[i]);
    pl_mem_free(s);
}

void pl_attn_block_delta(float *delta, const float *dout, const float *out, int Tq, int C,
                         int NH)
{
    require_block("pl_attn_block_delta", Tq, 1, C, NH);
    if (!delta || !dout || !out)
        pl_usage_error("pl_attn_block_delta: delta, dout and out must all be given");
    const int HS = C / NH;
    pl_ledger_add_flops(2.0 * Tq * C);
    struct view vd, vg, vo;
    float *d = view_in(&vd, delta, (size_t)NH * Tq, 1);
    const float *g = view_in(&vg, dout, (size_t)Tq * C, 0), *o = view_in(&vo, out,
                                                                         (size_t)Tq * C, 0);
    for (int h = 0; h < NH; h++)
        for (int i = 0; i < Tq; i++)
            d[(size_t)h * Tq + i] = dot(g + (size_t)i * C + h * HS, o + (size_t)i * C + h * HS,
                                        HS);
    view_done(&vd), view_done(&vg), view_done(&vo);
}

static void block_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                           const float *k, const float *v, const float *lse,
                           const float *delta, int Tq, int Tk, int C, int NH, int q0, int k0)
{
    const int HS = C / NH;
    const float scale = 1.0f / sqrtf((float)HS);
    for (int h = 0; h < NH; h++)
        for (int i = 0; i < Tq; i++) {
            const int n = visible(i, Tk, q0, k0);
            const float l = lse[(size_t)h * Tq + i], D = delta[(size_t)h * Tq + i];
            const float *qi = q + (size_t)i * C + h * HS, *gi = dout + (size_t)i * C + h * HS;
            for (int j = 0; j < n; j++) {
                const size_t kj = (size_t)j * C + h * HS;
                const float p = expf(scale * dot(qi, k + kj, HS) - l);
                const float ds = p * (dot(gi, v + kj, HS) - D) * scale;
                for (int c = 0; c < HS; c++) {
                    if (dv) dv[kj + c] += p * gi[c];
                    if (dk) dk[kj + c] += ds * qi[c];
                    if (dq) dq[(size_t)i * C + h * HS + c] += ds * k[kj + c];
                }
            }
        }
}

void pl_attn_block_backward(float *dq, float *dk, float *dv, const float *dout,
                            const float *q, const float *k, const float *v, const float *lse,
                            const float *delta, int Tq, int Tk, int C, int NH, int q0, int k0)
{
    require_block("pl_attn_block_backward", Tq, Tk, C, NH);
    if (!dq && !dk && !dv) return;
    if (!dout || !q || !k || !v || !lse || !delta)
        pl_usage_error("pl_attn_block_backward: dout, q, k, v, lse and delta must all be "
                       "given");
    pl_ledger_add_flops(pl_attn_block_flops(Tq, Tk, C, NH, 1));
    struct view vdq, vdk, vdv, vg, vq, vk, vv, vl, vd;
    block_backward(view_in(&vdq, dq, (size_t)Tq * C, 1), view_in(&vdk, dk, (size_t)Tk * C, 1),
                   view_in(&vdv, dv, (size_t)Tk * C, 1), view_in(&vg, dout, (size_t)Tq * C, 0),
                   view_in(&vq, q, (size_t)Tq * C, 0), view_in(&vk, k, (size_t)Tk * C, 0),
                   view_in(&vv, v, (size_t)Tk * C, 0), view_in(&vl, lse, (size_t)NH * Tq, 0),
                   view_in(&vd, delta, (size_t)NH * Tq, 0), Tq, Tk, C, NH, q0, k0);
    struct view *all[] = {&vdq, &vdk, &vdv, &vg, &vq, &vk, &vv, &vl, &vd};
    for (int i = 0; i < 9; i++) view_done(all[i]);
}

/* ---- the ring ---- */

void pl_ring_shift_start(struct pl_comm *comm, const float *send, float *recv, size_t count,
                         int shift, int tag, struct pl_ring_shift *s)
{
    if (!comm || !s) pl_usage_error("pl_ring_shift_start: comm and s must be given");
    if (count && (!send || !recv))
        pl_usage_error("pl_ring_shift_start: send and recv must be given (count=%zu)", count);
    const int n = pl_comm_size(comm), r = pl_comm_rank(comm);
    if (shift % n == 0 && n > 1)
        pl_usage_error("pl_ring_shift_start: shift=%d moves nothing on a ring of %d ranks "
                       "(choose a shift that %d does not divide, e.g. 1 or -1)", shift, n, n);
    *s = (struct pl_ring_shift){NULL, NULL};
    if (n == 1) {
        if (count && send != recv) pl_copy(recv, send, count);
        return;
    }
    const int to = ((r + shift) % n + n) % n, from = ((r - shift) % n + n) % n;
    /* the receive first: a rank's message finds its buffer posted */
    s->recv = pl_irecv(comm, recv, count, from, tag);
    s->send = pl_isend(comm, send, count, to, tag);
}

void pl_ring_shift_wait(struct pl_ring_shift *s)
{
    if (!s) return;
    pl_wait(s->recv);
    pl_wait(s->send);
    s->recv = s->send = NULL;
}
