/* zero.c: Lab 9's ZeRO-1 test (fourd.h's "zero"): the shares of a rank's runs of floats,
 * the comparisons of the parameters and of the gradient AdamW was given (the whole of a
 * run, or a rank's shares of it), and the verdict on rank 0 from every rank's observation
 * of the runs with m->zero = 1 (no MPI): the DP replicas hold one model; the collectives on
 * dp_comm cover the gradients once and the parameters once a step; the norm, the losses,
 * the parameters and the clipped gradient as one device's; the moments of the shares alone.
 * The observations are made in cases.c; the judge test links this file too. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lab09.h"
#include "tp_shard.h"

void l9_zero_share(size_t n, int dp, int d, size_t *lo, size_t *own)
{
    const size_t c = (n + (size_t)dp - 1) / (size_t)dp;
    *lo = c * (size_t)d < n ? c * (size_t)d : n;
    *own = n - *lo < c ? n - *lo : c;
}

double l9_rms(const float *x, size_t n)
{
    double sq = 0;
    for (size_t j = 0; j < n; j++) sq += (double)x[j] * x[j];
    return n ? sqrt(sq / (double)n) : 0;
}

void l9_compare(struct l9_err *e, const char *name, const float *got, const float *ref,
                size_t n, double floor_rms)
{
    double d = 0, r = 0;
    int bad = 0;
    for (size_t j = 0; j < n; j++) {
        if (!isfinite(got[j])) bad++;
        d += ((double)got[j] - ref[j]) * ((double)got[j] - ref[j]);
        r += (double)ref[j] * ref[j];
    }
    double floor = floor_rms * sqrt((double)n);
    double rel = sqrt(d) / fmax(sqrt(r), fmax(floor, 1e-30));
    e->nonfinite += bad;
    if (bad || rel > e->rel || !e->name[0]) {
        if (bad || rel > e->rel) e->rel = bad ? INFINITY : rel;
        snprintf(e->name, sizeof e->name, "%.60s", name);
    }
}

/* [a, a + n) cut to [lo, lo + own): the floats from *at, or 0. */
static size_t cut(size_t a, size_t n, size_t lo, size_t own, size_t *at)
{
    size_t x = a > lo ? a : lo, y = a + n < lo + own ? a + n : lo + own;
    *at = x;
    return y > x ? y - x : 0;
}

void l9_compare_shares(struct l9_err *e, const struct pl_model_config *c,
                       const struct pl_model_layout *lay, const struct fourd_model *m,
                       const float *ref, int t, int r, int dp, int d)
{
    const double floor_rms = l9_rms(ref, lay->numel);
    const size_t bn = m->block_numel;
    size_t lo, own, at, n;
    l9_zero_share((size_t)(m->b1 - m->b0) * bn, dp, d, &lo, &own);
    float *want = pl_mem_alloc(bn * sizeof(float), PL_MEM_WORK, PL_HOST, "l9 share slice");
    float *got = pl_mem_alloc(bn * sizeof(float), PL_MEM_WORK, PL_HOST, "l9 share got");
    for (int l = m->b0; l < m->b1; l++) {
        size_t off, cnt;
        const size_t base = (size_t)(l - m->b0) * bn;
        pl_model_part_range(lay, l, &off, &cnt);
        l9_slice_host(c, t, r, ref + off, want);
        pl_to_host(got, m->grads + base, bn * sizeof(float));
        struct pl_tp_tensor td[PL_TP_BLOCK_TENSORS];
        pl_tp_block_tensors(c, l, t, td);
        for (int k = 0; k < PL_TP_BLOCK_TENSORS; k++) {
            if (!(n = cut(base + td[k].shard_offset, td[k].shard_numel, lo, own, &at))) continue;
            char name[64];
            snprintf(name, sizeof name, "%.40s (shard %d of %d)", td[k].name, r, t);
            l9_compare(e, name, got + (at - base), want + (at - base), n, floor_rms);
        }
    }
    pl_mem_free(want);
    pl_mem_free(got);
    for (int part = -1; m->rep && part <= c->n_layers; part += c->n_layers + 1) {
        if (part == -1 ? !m->has_embed : !m->has_head) continue;
        size_t off, cnt;
        pl_model_part_range(lay, part, &off, &cnt);
        const long shift = l9_rep_shift(m, part);
        if (shift == L9_NO_PART) {
            l9_missing_part(e, part);
            continue;
        }
        l9_zero_share(cnt, dp, d, &lo, &own);
        for (int i = 0; i < lay->n_tensors; i++) {
            const struct pl_param_desc *pd = &lay->tensors[i];
            if (pd->part != part || !(n = cut(pd->offset, pd->numel, off + lo, own, &at)))
                continue;
            float *h = pl_mem_alloc(n * sizeof(float), PL_MEM_WORK, PL_HOST, "l9 share rep");
            pl_to_host(h, m->rep->grads + (long)at + shift, n * sizeof(float));
            l9_compare(e, pd->name, h, ref + at, n, floor_rms);
            pl_mem_free(h);
        }
    }
}

/* Over the head's tensors whose decay flag is decay: their floats, and the sum of their
 * initial values' expected squares (std^2 each). */
static double head_floats(const struct pl_model_layout *lay, int decay, double *sq)
{
    double n = 0;
    *sq = 0;
    for (int j = 0; j < lay->n_tensors; j++) {
        const struct pl_param_desc *d = &lay->tensors[j];
        if (d->part != lay->cfg.n_layers || d->decay != decay) continue;
        n += (double)d->numel;
        *sq += (double)d->numel * d->std * d->std;
    }
    return n;
}

/* An uneven case's model and optimizer (lab09.h): the vocabulary grown by tp tokens at a
 * time (a TP group splits it evenly) until dp divides neither the embedding's run nor the
 * head's, and the weight decay that shows a share of the head stepped with the wrong flags.
 * In the first step AdamW moves a float by lr (g/(|g| + eps) + wd p), about lr when its
 * gradient is well above eps (head.w's all are: every row takes the softmax's), so a
 * share's step has a norm of about lr sqrt(c), c = ceil(n/dp); m floats stepped with the
 * wrong decay flag are off by lr wd |p| each, a relative error of wd rms(p) sqrt(m/c). With
 * m the head's undecayed floats (the final layernorm's 2C, which a share's flags read from
 * the run's start carry into head.w) and rms(p) head.w's initial std, wd makes that
 * L9_DECAY_SEEN times GR_TOL_GRADS. */
void l9_make_uneven(struct gr_train_setup *t, const struct l9_case *k)
{
    struct pl_model_layout lay;
    size_t off, e, h;
    for (;;) {
        pl_model_layout_init(&lay, &t->cfg);
        pl_model_part_range(&lay, PL_PART_EMBED, &off, &e);
        pl_model_part_range(&lay, t->cfg.n_layers, &off, &h);
        if (e % (size_t)k->dp && h % (size_t)k->dp) break;
        pl_model_layout_free(&lay);
        t->cfg.vocab += k->tp;
    }
    double sq_flipped, sq_decayed;
    const double m = head_floats(&lay, 0, &sq_flipped),
                 decayed = head_floats(&lay, 1, &sq_decayed);
    pl_model_layout_free(&lay);
    const double c = ceil((double)h / k->dp), rms = sqrt(sq_decayed / decayed);
    t->opt.weight_decay = (float)(L9_DECAY_SEEN * GR_TOL_GRADS / (rms * sqrt(m / c)));
}

/* One tensor of a run: where it starts in the run, its floats, its decay flag. */
struct piece {
    size_t at, n;
    int decay;
};

/* The floats of got - want in [lo, lo + own) off by more than a tenth of the worst: where
 * the error lies, into e (with sum (got - want) p0 and sum p0^2 over them). */
static void locate(struct l9_share_err *e, const float *got, const float *want, const float *p0,
                   size_t lo, size_t own)
{
    double worst = 0;
    for (size_t j = lo; j < lo + own; j++) {
        const double x = fabs((double)got[j] - want[j]);
        worst = !isfinite(x) || x > worst ? (isfinite(x) ? x : INFINITY) : worst;
    }
    e->off = e->dot = e->p0_sq = 0;
    for (size_t j = lo; j < lo + own && worst > 0; j++) {
        const double x = (double)got[j] - want[j];
        if (isfinite(x) && isfinite(worst) && fabs(x) <= 0.1 * worst) continue;
        if (!e->off) e->first = (double)j;
        e->off++, e->last = (double)j;
        e->dot += x * p0[j], e->p0_sq += (double)p0[j] * p0[j];
    }
}

/* got against want on [lo, lo + own), relative L2 against max(|want|, scale sqrt(own)). */
static double rel_l2(const float *got, const float *want, const float *base, size_t lo,
                     size_t own, double scale)
{
    double err = 0, ref = 0;
    for (size_t j = lo; j < lo + own; j++) {
        const double x = (double)got[j] - want[j], w = base ? (double)want[j] - base[j] : want[j];
        err += x * x, ref += w * w;
    }
    const double den = fmax(sqrt(ref), scale * sqrt((double)own));
    return err == 0 ? 0 : den > 0 && isfinite(err) ? sqrt(err / (den * den)) : INFINITY;
}

/* Rank d's share of one run of n floats after the first step: its gradient g against one
 * device's gw (floor: gw's whole RMS), and its parameters p against AdamW's first step from
 * p0 on g, each piece with its flag (the kit's AdamW, in op memory, as the code's would). */
static void share_obs(struct l9_share_err *e, const float *g, const float *gw, const float *p,
                      const float *p0, const struct piece *pc, int npc, size_t n, int dp, int d,
                      double grad_rms, const struct pl_adamw_config *opt)
{
    size_t lo, own;
    l9_zero_share(n, dp, d, &lo, &own);
    float *dev[4], *want = pl_mem_alloc((n ? n : 1) * sizeof(float), PL_MEM_WORK, PL_HOST,
                                        "l9 share step");
    for (int q = 0; q < 4; q++) {
        dev[q] = pl_mem_alloc((n ? n : 1) * sizeof(float), PL_MEM_WORK, PL_DEVICE, "l9 share op");
        pl_zero(dev[q], n);
    }
    pl_to_device(dev[0], p0, n * sizeof(float));
    pl_to_device(dev[1], g, n * sizeof(float));
    for (int k = 0; k < npc; k++) {
        size_t x = pc[k].at > lo ? pc[k].at : lo, y = pc[k].at + pc[k].n;
        y = y < lo + own ? y : lo + own;
        if (y > x)
            pl_adamw_step(dev[0] + x, dev[1] + x, dev[2] + x, dev[3] + x, y - x, 1, opt->lr,
                          opt->beta1, opt->beta2, opt->eps,
                          pc[k].decay ? opt->weight_decay : 0.0f);
    }
    pl_to_host(want, dev[0], n * sizeof(float));
    for (int q = 0; q < 4; q++) pl_mem_free(dev[q]);
    e->grad_rel = rel_l2(g, gw, NULL, lo, own, grad_rms);
    e->step_rel = rel_l2(p, want, p0, lo, own, 0);
    e->what = e->grad_rel > GR_TOL_GRADS ? 0 : 1;
    if (e->what == 0) locate(e, g, gw, p0, lo, own);
    else locate(e, p, want, p0, lo, own);
    pl_mem_free(want);
}

void l9_observe_shares(struct l9_share_err out[3], const struct pl_model_config *c,
                       const struct gr_reference *ref, const struct pl_adamw_config *opt,
                       const struct fourd_model *m, int t, int r, int dp, int d)
{
    const struct pl_model_layout *lay = &ref->layout;
    const double grad_rms = l9_rms(ref->grads, ref->numel);
    const size_t bn = m->block_numel, n = (size_t)(m->b1 - m->b0) * bn, nb = n ? n : 1;
    float *buf[4];
    for (int q = 0; q < 4; q++)
        buf[q] = pl_mem_alloc(nb * sizeof(float), PL_MEM_WORK, PL_HOST, "l9 share run");
    struct piece pc[4 * PL_TP_BLOCK_TENSORS];
    int npc = 0;
    for (int l = m->b0; l < m->b1; l++) {
        size_t off, cnt, base = (size_t)(l - m->b0) * bn;
        pl_model_part_range(lay, l, &off, &cnt);
        l9_slice_host(c, t, r, ref->grads + off, buf[1] + base);
        l9_slice_host(c, t, r, ref->init + off, buf[3] + base);
        struct pl_tp_tensor td[PL_TP_BLOCK_TENSORS];
        pl_tp_block_tensors(c, l, t, td);
        for (int k = 0; k < PL_TP_BLOCK_TENSORS && npc < 4 * PL_TP_BLOCK_TENSORS; k++) {
            int decay = 0;
            for (int j = 0; j < lay->n_tensors; j++)
                if (lay->tensors[j].part == l && lay->tensors[j].offset - off == td[k].full_offset)
                    decay = lay->tensors[j].decay;
            pc[npc++] = (struct piece){base + td[k].shard_offset, td[k].shard_numel, decay};
        }
    }
    pl_to_host(buf[0], m->grads, n * sizeof(float));
    pl_to_host(buf[2], m->params, n * sizeof(float));
    if (n) share_obs(&out[0], buf[0], buf[1], buf[2], buf[3], pc, npc, n, dp, d, grad_rms, opt);
    for (int q = 0; q < 4; q++) pl_mem_free(buf[q]);
    for (int part = -1; m->rep && part <= c->n_layers; part += c->n_layers + 1) {
        if (part == -1 ? !m->has_embed : !m->has_head) continue;
        size_t off, cnt;
        pl_model_part_range(lay, part, &off, &cnt);
        const long shift = l9_rep_shift(m, part);
        if (shift == L9_NO_PART) continue;
        npc = 0;
        for (int j = 0; j < lay->n_tensors && npc < 4 * PL_TP_BLOCK_TENSORS; j++)
            if (lay->tensors[j].part == part)
                pc[npc++] = (struct piece){lay->tensors[j].offset - off, lay->tensors[j].numel,
                                           lay->tensors[j].decay};
        float *h[2];
        for (int q = 0; q < 2; q++)
            h[q] = pl_mem_alloc(cnt * sizeof(float), PL_MEM_WORK, PL_HOST, "l9 share rep");
        pl_to_host(h[0], m->rep->grads + (long)off + shift, cnt * sizeof(float));
        pl_to_host(h[1], m->rep->params + (long)off + shift, cnt * sizeof(float));
        share_obs(&out[part == -1 ? 1 : 2], h[0], ref->grads + off, h[1], ref->init + off, pc,
                  npc, cnt, dp, d, grad_rms, opt);
        for (int q = 0; q < 2; q++) pl_mem_free(h[q]);
    }
}

/* ---- the verdict ---- */

/* Rank r's runs under the case's grid: n[3] floats (blocks, embedding, head), and the
 * formulas' sums: all of them, dp ceil(n/dp) of each, ceil(n/dp) and its own share. */
struct runs {
    double n[3], all, padded, chunks, own;
};

static struct runs runs_of(const struct l9_state *st, int i, const struct l9_obs *o)
{
    const struct l9_case *k = &st->cases[i];
    struct runs u;
    memset(&u, 0, sizeof u);
    u.all = l9_dp_floats(&st->train[i].cfg, &st->ref[i].layout, k, o->coord[2], &u.n[0],
                         &u.n[1], &u.n[2]);
    for (int j = 0; j < 3; j++) {
        size_t lo, own, c = ((size_t)u.n[j] + (size_t)k->dp - 1) / (size_t)k->dp;
        l9_zero_share((size_t)u.n[j], k->dp, o->coord[0], &lo, &own);
        u.padded += (double)c * k->dp, u.chunks += (double)c, u.own += (double)own;
    }
    return u;
}

/* The rank of the grid at dp coordinate d with r's TP and PP coordinates, or -1. */
static int replica(const struct gr_obs *all, const struct l9_obs *o, int d)
{
    for (int q = 0; q < all->nranks; q++) {
        const struct l9_obs *p = gr_obs_rank(all, q);
        if (p->coord[0] == d && p->coord[1] == o->coord[1] && p->coord[2] == o->coord[2])
            return q;
    }
    return -1;
}

#define WHO "rank %d (dp %d, tp %d, stage %d)"
#define WHO_OF(r, o) (r), (o)->coord[0], (o)->coord[1], (o)->coord[2]

static int zero_replicas(const struct gr_obs *all, struct gr_why *why)
{
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = gr_obs_rank(all, r);
        const int q = replica(all, o, 0);
        const struct l9_obs *first = q >= 0 ? gr_obs_rank(all, q) : o;
        for (int run = 0; run < 2; run++) {
            if (o->zero_digest[run] == first->zero_digest[run]) continue;
            gr_why_say(why, "after %d steps with m->zero = 1 (%s), " WHO " and rank %d (dp 0, "
                       "the same TP rank and stage) hold different parameters: every DP "
                       "replica holds the same model, bit for bit", L9_K_STEPS,
                       run ? "with the clip" : "no clipping", WHO_OF(r, o), q);
            gr_why_say(why, "under ZeRO-1 each replica steps its share alone; the all-gather "
                       "of the updated shares over dp_comm gives it the others' (%.0f floats "
                       "gathered on its DP group in %d steps): without it the replicas drift "
                       "apart from the first step", o->zero_floats[2], L9_K_STEPS);
            return 0;
        }
    }
    return 1;
}

/* The shares of a run of n floats over dp ranks, "[0, c), [c, 2c), ..." into buf. */
static void share_list(char *buf, size_t len, double n, int dp)
{
    size_t at = 0;
    buf[0] = 0;
    for (int d = 0; d < dp && at < len; d++) {
        size_t lo, own;
        l9_zero_share((size_t)n, dp, d, &lo, &own);
        at += (size_t)snprintf(buf + at, len - at, "%s[%zu, %zu)", d ? ", " : "", lo, lo + own);
    }
}

static int share_bad(const struct l9_share_err *e)
{
    return !(e->grad_rel <= GR_TOL_GRADS) || !(e->step_rel <= GR_TOL_GRADS);
}

/* After the first unclipped step each rank's share of each run holds the gradient summed
 * over the DP group and the parameters AdamW's first step makes of it (fourd.h). Fails
 * when some DP replicas' shares of a run do and one's does not: its bounds, or what its
 * AdamW did there (a bug of the sum or of the step itself is in every share). */
static int zero_shares(const struct l9_state *st, int i, const struct gr_obs *all,
                       struct gr_why *why)
{
    static const char *const RUN[3] = {"blocks' shards (m->params, m->grads)",
                                       "embedding's run (rep)", "head's run (rep)"};
    const struct l9_case *k = &st->cases[i];
    const struct pl_adamw_config *opt = &st->free_opt[i];
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = gr_obs_rank(all, r);
        const struct runs u = runs_of(st, i, o);
        for (int j = 0; j < 3; j++) {
            const struct l9_share_err *e = &o->zero_shares[j];
            if (u.n[j] <= 0 || !share_bad(e)) continue;
            int clean = 0;
            for (int d = 0; d < k->dp; d++) {
                const int q = replica(all, o, d);
                clean += q >= 0 && !share_bad(&((const struct l9_obs *)gr_obs_rank(all, q))
                                                   ->zero_shares[j]);
            }
            if (!clean) continue;
            const int d = o->coord[0];
            const double n = u.n[j], c = ceil(n / k->dp), rest = n - c * (k->dp - 1);
            size_t lo, own;
            l9_zero_share((size_t)n, k->dp, d, &lo, &own);
            char list[200];
            share_list(list, sizeof list, n, k->dp);
            gr_why_say(why, "in the first step with m->zero = 1 (no clipping), %d of the %d DP "
                       "replicas of " WHO " held one device's summed gradient and AdamW's step "
                       "of it in their shares of its %s (%.0f floats), and it did not in its "
                       "share, [%zu, %zu): its gradient there against one device's has "
                       "relative L2 error %.3g, its parameters' step against AdamW's first step "
                       "on that gradient %.3g (each at most %g); the %s's error lies on %.0f "
                       "float%s, from %.0f to %.0f", clean, k->dp, WHO_OF(r, o), RUN[j], n, lo,
                       lo + own, e->grad_rel, e->step_rel, GR_TOL_GRADS,
                       e->what ? "step" : "gradient", e->off, e->off == 1 ? "" : "s", e->first,
                       e->last);
            gr_why_say(why, "fourd.h: DP rank d sums, steps and gathers [d c, min((d+1) c, n)) "
                       "of a run of n floats, c = ceil(n/dp); here n = %.0f, c = ceil(%.0f/%d) "
                       "= %.0f: %s", n, n, k->dp, c, list);
            const double lost = fmod(n, k->dp), want = opt->lr * opt->weight_decay,
                         ratio = e->p0_sq > 0 ? e->dot / e->p0_sq : 0;
            if (lost > 0 && e->first >= n - lost)
                gr_why_say(why, "those are the run's last n mod dp = %.0f float%s, past dp "
                           "floor(n/dp) = %.0f: no share took them. The shares cover every "
                           "float; the last one is the shorter, %.0f floats here", lost,
                           lost == 1 ? "" : "s", n - lost, rest);
            else if (d == k->dp - 1 && rest < c && !(e->step_rel < 0.5))
                gr_why_say(why, "the last share took no AdamW step at all: it is "
                           "n - (dp-1) c = %.0f floats when dp does not divide n, shorter than "
                           "c but not empty; its owner sums, steps and gathers it like the "
                           "others", rest);
            else if (e->what && want > 0 && fabs(fabs(ratio) - want) <= 0.25 * want)
                gr_why_say(why, "each of those floats is off by %.3g of itself, about lr x "
                           "weight decay = %.3g: the weight decay applied to floats whose "
                           "tensor takes none, or left out of one that does. A share's floats "
                           "take their flags from their own tensors: pl_model_adamw_flat reads "
                           "them from the offset in rep's layout it is given", fabs(ratio), want);
            else if (e->first == (double)lo || e->last == (double)(lo + own - 1))
                gr_why_say(why, "at an end of its share: the share's bounds are not fourd.h's");
            else
                gr_why_say(why, "its owner sums the gradient on exactly its share's floats, "
                           "steps them with their own tensors' moments and decay flags, and "
                           "gathers them");
            return 0;
        }
    }
    return 1;
}

static int zero_traffic(const struct l9_state *st, int i, const struct gr_obs *all,
                        struct gr_why *why)
{
    const int K = L9_K_STEPS;
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = gr_obs_rank(all, r);
        const struct runs u = runs_of(st, i, o);
        const double *f = o->zero_floats, got = f[0] + f[1] + f[2];
        const double lo = K * 2 * u.all, hi = K * (2 * u.padded + L9_DP_SLACK);
        if (got >= lo && got <= hi) continue;
        gr_why_say(why, WHO " with m->zero = 1: its collectives on dp_comm covered %.0f floats "
                   "in %d steps (all-reduce %.0f, reduce-scatter %.0f, all-gather %.0f: a "
                   "reduce-scatter or all-gather counts dp x its chunk); a step sums the "
                   "gradients of the rank's %.0f floats once (a reduce-scatter of dp "
                   "ceil(n/dp) per run, %.0f in all, or an all-reduce) and gathers the updated "
                   "shares once (an all-gather of %.0f): between %.0f and %.0f in %d steps",
                   WHO_OF(r, o), got, K, f[0], f[1], f[2], u.all, u.padded, u.padded, lo, hi,
                   K);
        if (f[1] == 0 && f[2] == 0 && f[0] >= K * u.all)
            gr_why_say(why, "an all-reduce of the whole gradient and nothing gathered: the step "
                       "ran as without ZeRO-1. With m->zero = 1 each replica updates its share "
                       "alone and gathers the others' (section 3.2)");
        else if (got > hi)
            gr_why_say(why, "more: the gradients or the parameters crossed the DP group more "
                       "than once a step (an all-reduce and a reduce-scatter both, or a "
                       "second gather)");
        else if (f[0] + f[1] < K * u.all)
            gr_why_say(why, "the gradients were not summed over the DP group: each replica "
                       "stepped its share on the gradient of its own B/dp sequences alone");
        else
            gr_why_say(why, "the updated shares were not gathered: each replica holds the "
                       "others' shares as they were");
        return 0;
    }
    return 1;
}

static int zero_norm(const struct l9_state *st, int i, const struct gr_obs *all,
                     struct gr_why *why)
{
    const struct l9_case *k = &st->cases[i];
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = gr_obs_rank(all, r);
        for (int s = 0; s < L9_K_STEPS; s++) {
            const double want = st->ref_norm[i][s], got = o->zero_norm[s];
            if (gr_rel_err(got, want) <= L9_TOL_NORM) continue;
            double shares = 0;
            for (int d = 0; d < k->dp; d++) {
                int q = replica(all, o, d);
                double x = q < 0 ? 0 : ((const struct l9_obs *)gr_obs_rank(all, q))->zero_norm[s];
                shares += x * x;
            }
            gr_why_say(why, "step %d with m->zero = 1: " WHO "'s global gradient norm %.6g, one "
                       "device's %.6g (ratio %.4f; relative error at most %g)", s, WHO_OF(r, o),
                       got, want, got / want, L9_TOL_NORM);
            if (gr_rel_err(sqrt(shares), want) < 1e-4)
                gr_why_say(why, "that is the norm of its DP share alone: the squares of its %d "
                           "DP replicas' norms add up to one device's. Under ZeRO-1 a replica "
                           "holds the summed gradient on its share only: sum the shares' "
                           "squares over dp_comm too, each float once, by its owner",
                           k->dp);
            else if (fabs(got / want - sqrt((double)k->dp)) < 1e-3)
                gr_why_say(why, "that is sqrt(dp) = sqrt(%d) too large: every parameter "
                           "counted once per replica (a whole gradient summed over dp_comm, or "
                           "each share counted by every replica)", k->dp);
            return 0;
        }
    }
    return 1;
}

static int zero_results(const struct l9_state *st, int i, const struct gr_obs *all,
                        struct gr_why *why)
{
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = gr_obs_rank(all, r);
        for (int s = 0; s < L9_K_STEPS; s++) {
            const double want = st->free[i].loss[s], err = gr_rel_err(o->zero_loss[s], want);
            if (err <= GR_TOL_LOSS) continue;
            gr_why_say(why, "step %d with m->zero = 1: rank %d's fourd_step returned loss %.7g, "
                       "one device %.7g (relative error %.2g, at most %g)", s, r,
                       o->zero_loss[s], want, err, GR_TOL_LOSS);
            return 0;
        }
        const struct l9_err *e[3] = {&o->zero_params, &o->zero_grads, &o->zero_clipped_params};
        const char *what[3] = {"after the unclipped steps its parameter",
                               ("in the last clipped step the gradient AdamW was given, in "
                                "its DP share of"),
                               "after the clipped steps its parameter"};
        for (int j = 0; j < 3; j++) {
            const double tol = j == 1 ? GR_TOL_GRADS : GR_TOL_PARAMS;
            if (e[j]->rel <= tol) continue;
            gr_why_say(why, "with m->zero = 1, " WHO ": %s %s has relative L2 error %.3g "
                       "against one device's (at most %g)%s", WHO_OF(r, o), what[j], e[j]->name,
                       e[j]->rel, tol, e[j]->nonfinite ? ", with NaN or Inf elements" : "");
            if (j == 1)
                gr_why_say(why, "fourd.h: after a step a rank's shares of m->grads and "
                           "rep->grads hold the gradient summed over the DP group and clipped");
            return 0;
        }
    }
    return 1;
}

static int zero_memory(const struct l9_state *st, int i, const struct gr_obs *all,
                       struct gr_why *why)
{
    const struct l9_case *k = &st->cases[i];
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = gr_obs_rank(all, r);
        const struct runs u = runs_of(st, i, o);
        const double got = o->zero_optim, lo = 8 * u.own, hi = 8 * u.chunks + L9_ZERO_MEM_SLACK;
        if (got >= lo && got <= hi) continue;
        gr_why_say(why, WHO " with m->zero = 1 peaked at %.0f bytes of optimizer state (memory "
                   "ledger, PL_MEM_OPTIM, from fourd_model_new to the last step); it holds %.0f "
                   "floats (%.0f of block shards, %.0f of the embedding, %.0f of the head), "
                   "whose DP shares on dp rank %d of %d are %.0f floats: AdamW's m and v of "
                   "each, 8 bytes a float, make between %.0f and %.0f bytes (8 x the sum of "
                   "ceil(n/dp), and %d bytes over)", WHO_OF(r, o), got, u.all, u.n[0], u.n[1],
                   u.n[2], o->coord[0], k->dp, u.own, lo, hi, L9_ZERO_MEM_SLACK);
        if (got > 8 * (double)st->ref[i].layout.numel)
            gr_why_say(why, "more than the whole model's moments (%.0f bytes): is rep a "
                       "pl_model made with PL_MODEL_OPTIM? Its moments are every part's",
                       8 * (double)st->ref[i].layout.numel);
        else if (got >= 8 * u.all - L9_ZERO_MEM_SLACK)
            gr_why_say(why, "%.2f times the shares': the moments of everything the rank holds, "
                       "as without ZeRO-1, where each of the dp = %d replicas keeps only its "
                       "1/dp. Moments made whole in fourd_model_new count at the peak even when "
                       "the first step frees them: allocate them once m->zero is known",
                       got / lo, k->dp);
        else if (got < lo)
            gr_why_say(why, "fewer: AdamW keeps m and v for every float a rank updates, in "
                       "PL_MEM_OPTIM");
        return 0;
    }
    return 1;
}

/* The DP sum under ZeRO-1 starts once the stage's own backwards are done, as without it
 * (bubble.c): a collective over the pipeline first holds it behind the whole cool-down. */
static int zero_sum_start(const struct l9_state *st, int i, const struct gr_obs *all,
                          struct gr_why *why)
{
    const int r = st->cases[i].pp > 1 ? l9_latest_waiting(all, 1) : -1;
    if (r < 0) return 1;
    const struct l9_obs *o = gr_obs_rank(all, r);
    gr_why_say(why, "with m->zero = 1, " WHO " ran a collective over %d ranks (its "
               "pipeline's, or more) after its stage's last backward and before its DP "
               "sum (the first collective on dp_comm): that collective ends only when "
               "stage 0 has drained, so the sum waits for the whole pipeline, where 1F1B "
               "lets each stage start its own during the cool-down. Start the DP sum "
               "first, under ZeRO-1 as without it", WHO_OF(r, o), o->zero_dp_wait_size);
    return 0;
}

int l9_judge_zero(const struct l9_state *st, int i, const struct gr_obs *all,
                  struct gr_why *why)
{
    if (!((const struct l9_obs *)gr_obs_rank(all, 0))->has_zero) return 1; /* dp = 1 */
    for (int r = 0; r < all->nranks; r++) {
        const struct l9_obs *o = gr_obs_rank(all, r);
        if (o->zero_runs == 2) continue;
        gr_why_say(why, "rank %d: the runs with m->zero = 1 stopped before their end (a stub "
                   "reached, or a call that gave nothing)", r);
        return 0;
    }
    return zero_replicas(all, why) && zero_shares(st, i, all, why) &&
           zero_traffic(st, i, all, why) &&
           zero_norm(st, i, all, why) && zero_results(st, i, all, why) &&
           zero_memory(st, i, all, why) && zero_sum_start(st, i, all, why);
}
