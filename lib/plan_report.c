/* plan_report.c: plan --explain (every figure of a configuration, term by term with its
 * numbers; the formulas are Lab 8's to derive) and plan --svg (modelled MFU and memory over
 * the configuration space). */
#include "plan_report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "plan_internal.h"
#include "plan_rules.h"
#include "svg.h"

static void explain_model(FILE *f, const struct pl_plan_model *m)
{
    struct pl_plan_params p;
    pl_plan_params(m, &p);
    double d = m->d_model, kv = d * m->kv_heads / m->heads;
    fprintf(f, "  parameters: attention d(d + 2 d_kv) + d^2 = %.0f(%.0f + 2 x %.0f) + %.0f^2 "
               "= %.3gM per layer; MLP %d x d x d_ff = %.3gM%s\n",
            d, d, kv, d, (d * (d + 2 * kv) + d * d) / 1e6, m->gated ? 3 : 2,
            (m->gated ? 3.0 : 2.0) * d * m->d_ff / 1e6, m->experts ? " (dense layers)" : "");
    if (m->experts)
        fprintf(f, "    MoE: %d experts of %d, top-%d, %d shared: %.1fB expert parameters, "
                   "sharded by ep\n", m->experts, m->d_ff_expert, m->top_k, m->shared_experts,
                p.expert / 1e9);
    fprintf(f, "    embeddings %.2fB (%s); total %.2fB, active per token %.2fB\n",
            p.embedding / 1e9, m->tied ? "tied" : "input and head", p.total / 1e9,
            p.active / 1e9);
    fprintf(f, "  FLOPs per token: 6 x (active non-embedding + head) + 12 L d s = %.4g "
               "(12 L d s = %.3g of it)\n",
            pl_plan_flops_per_token(m), 12.0 * m->layers * d * m->seq);
}

/* The memory and the time of one configuration, factor by factor, with their numbers. The
 * formulas themselves are Lab 8's to derive (its handout states the choices, its hints file
 * writes them out): this names each term and gives its figure, never its formula. */
static void explain_memory(FILE *f, const struct pl_plan_model *m,
                           const struct pl_plan_config *g, const struct pl_plan_memory *r)
{
    double s = (double)m->seq / g->deg[PL_AX_CP], h = m->d_model;
    double r_mlp = (m->experts ? (m->top_k + m->shared_experts) * (double)m->d_ff_expert
                               : m->d_ff) / h;
    fprintf(f, "  model state (%s): ZeRO-%d shards %s over the data-parallel group (cp x ep x "
               "dp = %d; experts cp x dp = %d): params %.3f GB, grads %.3f GB, optimizer %.3f "
               "GB\n",
            g->fp32 ? "fp32 training" : "mixed-precision Adam", g->zero,
            g->zero == 0 ? "nothing" : g->zero == 1 ? "the optimizer state"
                                 : g->zero == 2 ? "optimizer state and gradients" : "all three",
            g->deg[PL_AX_CP] * g->deg[PL_AX_EP] * g->deg[PL_AX_DP],
            g->deg[PL_AX_CP] * g->deg[PL_AX_DP], r->params / 1e9, r->grads / 1e9,
            r->optim / 1e9);
    if (g->fp32 || g->no_dropout || g->vocab_whole)
        fprintf(f, "  switches: %s%s%s\n", g->fp32 ? "fp32 " : "",
                g->no_dropout ? "no-dropout " : "", g->vocab_whole ? "vocab-whole" : "");
    fprintf(f, "  one layer's activations for one microbatch (s=%.0f tokens, b=%d, h=%.0f, a=%d "
               "heads, t=%d, MLP width %.2f h, sequence parallelism with tp), as kept under "
               "recompute %s: %.4f GB\n",
            s, g->micro, h, m->heads, g->deg[PL_AX_TP], r_mlp, pl_recompute_name(g->recompute),
            r->activ_layer / 1e9);
    double layers = r->in_flight * r->layers_stage * r->activ_layer;
    fprintf(f, "    x %.0f layers on the first stage x %.2f microbatches in flight = %.3f GB; "
               "the rest (%sthe loss's logits) %.3f GB\n",
            r->layers_stage, r->in_flight, layers / 1e9,
            g->recompute == PL_RECOMPUTE_FULL ? "the layer being recomputed and " : "",
            (r->activ - layers) / 1e9);
}

static void explain_time(FILE *f, const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                         const struct pl_plan_config *g, const struct pl_plan_time *t)
{
    int head, p = g->deg[PL_AX_PP], stage = pl_plan_pacing_stage(m, g, &head);
    double rate = c->flops * c->efficiency;
    fprintf(f, "  compute: %.4g FLOPs a microbatch on the %s stage, the slowest (%d of %d "
               "layers%s, split over tp x cp = %d%s), x m = %d microbatches, at %.0f TFLOP/s x "
               "%.2f = %.3f s\n",
            g->m > 0 ? t->compute * rate / g->m : 0.0, p == 1 ? "only" : head ? "last" : "first",
            stage, m->layers, head ? " and the head" : "",
            g->deg[PL_AX_TP] * g->deg[PL_AX_CP],
            g->recompute == PL_RECOMPUTE_NONE ? "" : ", recomputation's FLOPs included", g->m,
            c->flops / 1e12, c->efficiency, t->compute);
    for (int a = 0; a < PL_NAXES; a++)
        if (a != PL_AX_DP && (t->bytes[a] > 0 || t->exposed[a] > 0))
            fprintf(f, "  %s: %.3f GB sent a step, %.3f s on the critical path\n",
                    pl_plan_axis_name(a), t->bytes[a] / 1e9, t->exposed[a]);
    if (c->torus) {
        int d[3];
        pl_plan_torus_dims(c, d);
        fprintf(f, "  torus: %d chips as %d x %d x %d, no node: every axis' collectives over "
                   "rank 0's group of chips (dp: the gradients' cp x ep x dp), timed as the "
                   "replay times them (torus.h): rings at one link's %.0f GB/s and %.0f us a "
                   "hop, all-to-alls bound by the links each chip uses or the bisection of "
                   "its box\n",
                pl_plan_gpus(c), d[0], d[1], d[2], c->bw[PL_LINK_INTRA] / 1e9,
                c->latency[PL_LINK_INTRA] * 1e6);
    }
    fprintf(f, "  bubble: %.3f s (%.1f%% of the step)\n", t->bubble, 100 * t->bubble / t->step);
    fprintf(f, "  dp: %s, hidden behind the compute where it can be: %.3f s exposed\n",
            g->zero == 0 ? "the gradients all-reduced"
            : g->zero == 3 ? "ZeRO-3's gathers and reduce-scatters, for every microbatch"
                           : "gradients reduce-scattered, parameters all-gathered",
            t->exposed[PL_AX_DP]);
    fprintf(f, "  MFU = FLOPs per token x batch / (step x GPUs x peak) = %.1f%%\n", 100 * t->mfu);
}

void pl_plan_explain(FILE *f, const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                     const struct pl_plan_choice *ch)
{
    fprintf(f, "derivation:\n");
    explain_model(f, m);
    explain_memory(f, m, &ch->cfg, &ch->mem);
    explain_time(f, m, c, &ch->cfg, &ch->time);
}

/* ---------------------------------------------------------------- svg */

#define SVG_MAX_BARS 48

static int by_step(const void *a, const void *b)
{
    const struct pl_plan_point *x = a, *y = b;
    if (x->fits != y->fits) return y->fits - x->fits;
    double kx = x->fits ? x->step : x->memory, ky = y->fits ? y->step : y->memory;
    return (kx > ky) - (kx < ky);
}

/* One stacked bar: values v[0..k) from the bottom, in colours col[], clipped at max. */
static void svg_stack(FILE *f, int x, int top, int height, double max, const double *v,
                      const char *const *col, int k)
{
    double base = 0;
    for (int j = 0; j < k && base < max; j++) {
        double lo = base, hi = fmin(base + v[j], max);
        base += v[j];
        if (hi <= lo) continue;
        pl_svg_rect(f, x, top + height - hi / max * height, 16, (hi - lo) / max * height,
                    col[j], NULL);
    }
}

static const char *const MEM_COLOURS[] = {"#7570b3", "#e6ab02", "#66a61e", "#1f78b4"};
static const char *const MEM_NAMES[] = {"parameters", "gradients", "optimizer", "activations"};

static void svg_bar_panel(FILE *f, const struct pl_plan_point *pt, int n, int top, int height,
                          double max, int mfu, double hbm, int mark)
{
    int left = 70, w = 16;
    fprintf(f, "<text x=\"10\" y=\"%d\" font-size=\"12\">%s</text>\n", top - 6,
            mfu ? "modelled MFU (%; orange: the chosen plan)"
                : "memory per GPU by category (GB; first stage)");
    for (int i = 0; i < n && !mfu; i++) {
        const struct pl_plan_memory *m = &pt[i].mem;
        double v[4] = {m->params / 1e9, m->grads / 1e9, m->optim / 1e9, m->activ / 1e9};
        svg_stack(f, left + i * (w + 2), top, height, max, v, MEM_COLOURS, 4);
    }
    for (int j = 0; j < 4 && !mfu; j++)
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%d\" "
                   "y=\"%d\" font-size=\"10\">%s</text>\n", 330 + 95 * j, top - 16, MEM_COLOURS[j],
                344 + 95 * j, top - 7, MEM_NAMES[j]);
    for (int i = 0; i < n && mfu; i++) {
        double v = pt[i].fits ? 100 * pt[i].mfu : 0;
        const char *col[] = {i == mark ? "#d95f02" : "#1b9e77"};
        svg_stack(f, left + i * (w + 2), top, height, max, &v, col, 1);
    }
    for (int k = 0; k <= 4; k++) {
        double y = top + height - k * height / 4.0;
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%.0f</text>\n",
                left - 4, y + 3, max * k / 4);
    }
    if (!mfu) {
        double y = top + height - PL_RULE_MEM_SHARE * hbm / 1e9 / max * height;
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e7298a\" "
                   "stroke-dasharray=\"4 3\"/>\n<text x=\"%d\" y=\"%.1f\" font-size=\"10\" "
                   "fill=\"#e7298a\">%.0f%% of HBM</text>\n",
                left, left + n * (w + 2), y, y, left + n * (w + 2) + 4, y + 3,
                100 * PL_RULE_MEM_SHARE);
    }
}

static void svg_labels(FILE *f, const struct pl_plan_point *pt, int n, int y)
{
    for (int i = 0; i < n; i++) {
        char label[64];
        const int *d = pt[i].cfg.deg;
        snprintf(label, sizeof label, "t%d%s%s p%d d%d", d[PL_AX_TP], d[PL_AX_CP] > 1 ? " c" : "",
                 d[PL_AX_EP] > 1 ? " e" : "", d[PL_AX_PP], d[PL_AX_DP]);
        if (d[PL_AX_CP] > 1 || d[PL_AX_EP] > 1)
            snprintf(label, sizeof label, "t%d c%d e%d p%d d%d", d[PL_AX_TP], d[PL_AX_CP],
                     d[PL_AX_EP], d[PL_AX_PP], d[PL_AX_DP]);
        int x = 70 + i * 18 + 11;
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"9\" transform=\"rotate(60 %d %d)\">%s"
                   "</text>\n", x, y, x, y, label);
    }
}

int pl_plan_write_svg(const char *path, const struct pl_plan_model *m,
                      const struct pl_plan_cluster *c, const struct pl_plan_result *res)
{
    return pl_plan_write_svg_marked(path, m, c, res, NULL,
                                    "the best settings of each set of degrees, fastest first");
}

static int same_degrees(const struct pl_plan_config *a, const struct pl_plan_config *b)
{
    return !memcmp(a->deg, b->deg, sizeof a->deg);
}

int pl_plan_write_svg_marked(const char *path, const struct pl_plan_model *m,
                             const struct pl_plan_cluster *c, const struct pl_plan_result *res,
                             const struct pl_plan_config *chosen, const char *caption)
{
    char err[512];
    if (pl_atomic_check(path, "plot", err, sizeof err) != 0) {
        fprintf(stderr, "error: %s\n", err);
        return -1;
    }
    static struct pl_plan_point pt[PL_PLAN_POINTS];
    int n = res->npoints;
    memcpy(pt, res->points, (size_t)n * sizeof pt[0]);
    qsort(pt, (size_t)n, sizeof pt[0], by_step);
    int mark = 0; /* the fastest, unless chosen names another */
    for (int i = 0; chosen && i < n; i++)
        if (same_degrees(&pt[i].cfg, chosen)) {
            mark = i;
            break;
        }
    if (n > SVG_MAX_BARS) n = SVG_MAX_BARS;
    if (mark >= n) { /* keep the chosen plan in the picture */
        pt[n - 1] = pt[mark];
        mark = n - 1;
    }
    double max_mfu = 0, max_mem = c->hbm / 1e9;
    for (int i = 0; i < n; i++) {
        if (pt[i].fits && 100 * pt[i].mfu > max_mfu) max_mfu = 100 * pt[i].mfu;
        if (pt[i].memory / 1e9 > max_mem) max_mem = pt[i].memory / 1e9;
    }
    max_mfu = 20 * ceil(max_mfu / 20); /* ticks at quarters: whole numbers */
    if (max_mfu <= 0) max_mfu = 20;
    if (max_mem > 4 * c->hbm / 1e9) max_mem = 4 * c->hbm / 1e9;
    int width = 70 + n * 18 + 90, height = 470;
    if (width < 760) width = 760;
    struct pl_atomic_file a;
    pl_atomic_open(&a, path, "plot");
    FILE *f = a.f;
    pl_svg_begin(f, width, height, 12);
    char where[96];
    if (c->torus)
        snprintf(where, sizeof where, "%d chips of %s (a torus)", pl_plan_gpus(c), c->name);
    else
        snprintf(where, sizeof where, "%d x %s (%d GPUs)", c->nodes, c->name, pl_plan_gpus(c));
    fprintf(f, "<text x=\"10\" y=\"18\" font-size=\"13\">%s on %s: %s (no MFU bar: fits no "
               "setting)</text>\n", m->name, where, caption);
    svg_bar_panel(f, pt, n, 50, 150, max_mfu, 1, c->hbm, mark);
    svg_bar_panel(f, pt, n, 250, 140, max_mem, 0, c->hbm, mark);
    svg_labels(f, pt, n, 400);
    pl_atomic_ok(&a, pl_svg_end(f) == 0);
    pl_atomic_commit(&a);
    return 0;
}
