/* schedule.c: the grader's own schedule definitions, partition optimum and ideal runs for
 * Lab 6. See schedule.h. */
#include "schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "replay.h"
#include "svg.h"

const char *l6_sched_name(enum pipe_schedule k)
{
    return k == PIPE_AFAB ? "AFAB (GPipe)" : k == PIPE_1F1B ? "1F1B"
           : k == PIPE_ZBH1 ? "ZB-H1" : "interleaved 1F1B";
}

int l6_sched_nops(enum pipe_schedule k, int v, int m)
{
    return k == PIPE_ZBH1 ? 3 * m : 2 * l6_sched_chunks(k, v) * m;
}

double l6_sched_unit(enum pipe_schedule k, char phase, int v)
{
    if (phase == 'F') return L6_SCHED_UNIT_F / v;
    if (phase == 'W') return L6_SCHED_UNIT_W;
    return (k == PIPE_ZBH1 ? L6_SCHED_UNIT_B - L6_SCHED_UNIT_W : L6_SCHED_UNIT_B) / v;
}

int l6_sched_chunks(enum pipe_schedule k, int v)
{
    return k == PIPE_INTERLEAVED ? v : 1;
}

int l6_sched_runs(enum pipe_schedule k, int p, int m)
{
    return k != PIPE_INTERLEAVED || m % p == 0;
}

/* Interleaved: the k-th forward of a stage is microbatch (k / pv) p + k % p of chunk
 * (k / p) % v: p microbatches through chunk 0, the same p through chunk 1, ...; backwards
 * run the chunks in reverse. */
static struct l6_sched_op interleaved_op(char phase, int k, int p, int v)
{
    int j = (k % (p * v)) / p;
    return (struct l6_sched_op){phase, (k / (p * v)) * p + k % p, phase == 'F' ? j : v - 1 - j};
}

/* AFAB: F 0..m-1, then B 0..m-1. 1F1B: w = min(p - s - 1, m) warm-up forwards, then
 * F(w + i) B(i) for i < m - w, then the last w backwards. Interleaved (Megatron-LM): the
 * same shape over the v m operations of the stage, with a warm-up of
 * (p - s - 1) 2 + (v - 1) p (all of them when m = p). */
void l6_sched_order(enum pipe_schedule k, int p, int v, int s, int m, struct l6_sched_op *ops)
{
    int n = 0;
    if (k == PIPE_ZBH1) {
        for (int x = 0; x < m + p - 1; x++) {
            int b = x - (p - 1 - s), w = x - (p - 1);
            if (x < m) ops[n++] = (struct l6_sched_op){'F', x, 0};
            if (b >= 0 && b < m) ops[n++] = (struct l6_sched_op){'B', b, 0};
            if (w >= 0 && w < m) ops[n++] = (struct l6_sched_op){'W', w, 0};
        }
        return;
    }
    if (k == PIPE_AFAB) {
        for (int i = 0; i < m; i++) ops[n++] = (struct l6_sched_op){'F', i, 0};
        for (int i = 0; i < m; i++) ops[n++] = (struct l6_sched_op){'B', i, 0};
        return;
    }
    int total = k == PIPE_INTERLEAVED ? v * m : m;
    int w = k == PIPE_INTERLEAVED ? (m == p ? total : (p - s - 1) * 2 + (v - 1) * p)
                                  : p - s - 1;
    if (w > total) w = total;
#define OP(ph, i)                                                                                  \
    (k == PIPE_INTERLEAVED ? interleaved_op(ph, i, p, v) : (struct l6_sched_op){ph, i, 0})
    for (int i = 0; i < w; i++) ops[n++] = OP('F', i);
    for (int i = 0; i < total - w; i++) {
        ops[n++] = OP('F', w + i);
        ops[n++] = OP('B', i);
    }
    for (int i = total - w; i < total; i++) ops[n++] = OP('B', i);
#undef OP
}

double l6_sched_bubble_formula(enum pipe_schedule k, int p, int m)
{
    if (k == PIPE_INTERLEAVED || (k == PIPE_ZBH1 && m < p)) return -1;
    if (k == PIPE_ZBH1) return (double)(p - 1) / (double)(3 * m + p - 1);
    return (double)(p - 1) / (double)(m + p - 1);
}

double l6_sched_peak_acts(enum pipe_schedule k, int p, int v, int s, int m,
                          const double *chunk_bytes, const double *wgrad_bytes)
{
    int n = l6_sched_nops(k, v, m);
    struct l6_sched_op *ops = malloc(sizeof *ops * (size_t)n);
    PL_ASSERT(ops);
    l6_sched_order(k, p, l6_sched_chunks(k, v), s, m, ops);
    double live = 0, peak = 0, kept = wgrad_bytes ? wgrad_bytes[0] : 0;
    for (int i = 0; i < n; i++) {
        double acts = chunk_bytes[ops[i].chunk];
        if (ops[i].phase == 'F') live += acts;
        else if (k == PIPE_ZBH1 && ops[i].phase == 'B') live += kept;
        else if (k == PIPE_ZBH1) live -= acts + kept;
        else live -= acts;
        if (live > peak) peak = live;
    }
    free(ops);
    return peak;
}

/* ---- ideal runs as traces ---- */

struct ev_list {
    struct pl_event *ev;
    int n;
};

static void push(struct ev_list *l, enum pl_ev_type t, const char *label, double flops, int peer,
                 int tag, double bytes)
{
    struct pl_event *e = &l->ev[l->n++];
    memset(e, 0, sizeof *e);
    e->type = t;
    if (label) snprintf(e->label, sizeof e->label, "%s", label);
    e->flops = flops;
    e->peer = peer;
    e->tag = tag;
    e->bytes = bytes;
}

void l6_sched_ideal_trace(enum pipe_schedule k, int p, int v, int m, double bytes,
                       struct pl_merged_trace *out)
{
    int nv = l6_sched_chunks(k, v), last = nv * p - 1;
    memset(out, 0, sizeof *out);
    out->nranks = p;
    out->nevents = calloc((size_t)p, sizeof *out->nevents);
    out->events = calloc((size_t)p, sizeof *out->events);
    PL_ASSERT(out->nevents && out->events);
    int nops = l6_sched_nops(k, v, m);
    struct l6_sched_op *ops = calloc((size_t)nops, sizeof *ops);
    PL_ASSERT(ops);
    for (int s = 0; s < p; s++) {
        struct ev_list l = {calloc((size_t)(3 * nops), sizeof(struct pl_event)), 0};
        PL_ASSERT(l.ev);
        l6_sched_order(k, p, nv, s, m, ops);
        for (int i = 0; i < nops; i++) {
            char label[PL_LABEL_LEN];
            int mb = ops[i].mb, j = ops[i].chunk, fwd = ops[i].phase == 'F';
            int c = j * p + s; /* the virtual stage */
            snprintf(label, sizeof label, "%c %d", ops[i].phase, mb);
            if (ops[i].phase == 'W') { /* no message: nothing waits for a W */
                push(&l, PL_EV_COMPUTE, label, l6_sched_unit(k, 'W', nv), -1, 0, 0);
                continue;
            }
            /* what comes in: the previous virtual stage's activation, or the next one's
             * gradient, tagged by the chunk that sent it */
            int in_c = fwd ? c - 1 : c + 1, out_c = fwd ? c + 1 : c - 1;
            if (in_c >= 0 && in_c <= last) {
                int tag =
                    fwd ? PIPE_TAG_ACT((in_c / p) * m + mb) : PIPE_TAG_GRAD((in_c / p) * m + mb);
                push(&l, PL_EV_RECV, NULL, 0, in_c % p, tag, bytes);
            }
            push(&l, PL_EV_COMPUTE, label, l6_sched_unit(k, ops[i].phase, nv), -1, 0, 0);
            if (out_c >= 0 && out_c <= last) {
                int tag = fwd ? PIPE_TAG_ACT(j * m + mb) : PIPE_TAG_GRAD(j * m + mb);
                push(&l, PL_EV_SEND, NULL, 0, out_c % p, tag, bytes);
            }
        }
        out->events[s] = l.ev;
        out->nevents[s] = l.n;
    }
    free(ops);
}

double l6_sched_best_max(const double *cost, int n, int p, int *start)
{
    /* best[j][k]: the smallest largest stage when the first k costs make j stages; from[j][k]:
     * where the last of those j stages starts */
    double *best = malloc(sizeof(double) * (size_t)(p + 1) * (size_t)(n + 1));
    int *from = malloc(sizeof(int) * (size_t)(p + 1) * (size_t)(n + 1));
    PL_ASSERT(best && from);
#define BEST(j, k) best[(size_t)(j) * (size_t)(n + 1) + (size_t)(k)]
#define FROM(j, k) from[(size_t)(j) * (size_t)(n + 1) + (size_t)(k)]
    double run = 0;
    for (int k = 0; k <= n; k++) {
        BEST(1, k) = run;
        FROM(1, k) = 0;
        if (k < n) run += cost[k];
    }
    for (int j = 2; j <= p; j++)
        for (int k = j; k <= n; k++) {
            double b = 1e300, tail = 0;
            int at = j - 1;
            for (int i = k - 1; i >= j - 1; i--) {
                tail += cost[i];
                double worst = BEST(j - 1, i) > tail ? BEST(j - 1, i) : tail;
                if (worst < b) b = worst, at = i;
            }
            BEST(j, k) = b;
            FROM(j, k) = at;
        }
    double r = BEST(p, n);
    if (start)
        for (int j = p, k = n; j >= 1; j--) start[j - 1] = k = FROM(j, k);
#undef BEST
#undef FROM
    free(best);
    free(from);
    return r;
}

/* ---- the student's trace with uniform stage times ---- */

/* "pipe F 3 @2": phase, microbatch and first part of a mark. */
static int parse_mark(const struct pl_event *e, struct l6_sched_op *op, int *first)
{
    size_t k = strlen(PL_PIPE_MARK);
    if (e->type != PL_EV_COMPUTE || strncmp(e->label, PL_PIPE_MARK, k)) return 0;
    char ph;
    int mb, f = 0;
    if (sscanf(e->label + k, "%c %d @%d", &ph, &mb, &f) < 2 || (ph != 'F' && ph != 'B' && ph != 'W'))
        return 0;
    op->phase = ph;
    op->mb = mb;
    op->chunk = 0;
    if (first) *first = f;
    return 1;
}

int l6_sched_read_marks(const struct pl_event *ev, int n, const int *chunk_first, int v,
                     struct l6_sched_op *ops, int cap)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        struct l6_sched_op op;
        int first;
        if (!parse_mark(&ev[i], &op, &first)) continue;
        op.chunk = v == 1 ? 0 : -1;
        for (int j = 0; j < v && v > 1; j++)
            if (chunk_first[j] == first) op.chunk = j;
        if (k < cap) ops[k] = op;
        k++;
    }
    return k;
}

void l6_sched_uniform_copy(enum pipe_schedule k, const struct pl_merged_trace *in, int v,
                           struct pl_merged_trace *out)
{
    memset(out, 0, sizeof *out);
    out->nranks = in->nranks;
    out->nevents = calloc((size_t)in->nranks, sizeof *out->nevents);
    out->events = calloc((size_t)in->nranks, sizeof *out->events);
    PL_ASSERT(out->nevents && out->events);
    for (int r = 0; r < in->nranks; r++) {
        int n = in->nevents[r];
        out->nevents[r] = n;
        out->events[r] = calloc((size_t)(n > 0 ? n : 1), sizeof(struct pl_event));
        PL_ASSERT(out->events[r]);
        for (int i = 0; i < n; i++) {
            struct pl_event e = in->events[r][i];
            struct l6_sched_op op;
            if (e.type == PL_EV_COMPUTE && parse_mark(&e, &op, NULL)) {
                e.flops = l6_sched_unit(k, op.phase, v);
                snprintf(e.label, sizeof e.label, "%c %d", op.phase, op.mb);
            } else if (e.type == PL_EV_COMPUTE) {
                e.flops = 0.0;
            }
            out->events[r][i] = e;
        }
    }
    out->ngroups = in->ngroups;
    out->groups = calloc((size_t)(in->ngroups > 0 ? in->ngroups : 1), sizeof *out->groups);
    PL_ASSERT(out->groups);
    for (int g = 0; g < in->ngroups; g++) {
        out->groups[g] = in->groups[g];
        out->groups[g].ranks = malloc(sizeof(int) * (size_t)(in->groups[g].n + 1));
        PL_ASSERT(out->groups[g].ranks);
        memcpy(out->groups[g].ranks, in->groups[g].ranks, sizeof(int) * (size_t)in->groups[g].n);
    }
}

/* The textbook picture: stages as rows, each F and B a box numbered by its microbatch,
 * idle time shaded. Returns 0, or -1 when the file cannot be written. */
static int write_svg(const struct pl_merged_trace *t, const struct pl_replay *r,
                     const char *title, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    const double left = 70, plot = 900, top = 44, lane = 26, gap = 6;
    double step = r->step_time > 0 ? r->step_time : 1;
    int any_w = 0;
    for (int s = 0; s < t->nranks; s++)
        for (int i = 0; i < t->nevents[s]; i++)
            any_w |= t->events[s][i].type == PL_EV_COMPUTE && t->events[s][i].label[0] == 'W';
    double height = top + t->nranks * (lane + gap) + 40 + (any_w ? 18 : 0);
    pl_svg_begin(f, left + plot + 20, height, 11);
    fprintf(f, "<text x=\"%.0f\" y=\"24\" font-size=\"14\" font-weight=\"bold\">%s (bubble "
               "%.1f%%)</text>\n", left, title ? title : "pipeline schedule",
            100 * pl_replay_idle_fraction(r));
    for (int s = 0; s < t->nranks; s++) {
        double y = top + s * (lane + gap);
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">stage %d</text>\n",
                left - 8, y + lane / 2 + 4, s);
        fprintf(f, "<rect x=\"%.0f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" "
                   "fill=\"#d9d9d9\"/>\n", left, y, plot, lane);
        for (int i = 0; i < t->nevents[s]; i++) {
            const struct pl_event *e = &t->events[s][i];
            const struct pl_span_time *sp = &r->span[s][i];
            if (e->type != PL_EV_COMPUTE || !(sp->end > sp->start)) continue;
            double x = left + plot * sp->start / step, w = plot * (sp->end - sp->start) / step;
            char ph = e->label[0];
            fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" "
                       "fill=\"%s\" stroke=\"white\"/>\n", x, y, w, lane,
                    ph == 'F' ? "#4e79a7" : ph == 'W' ? "#f28e2b" : "#59a14f");
            fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"white\">"
                       "%s</text>\n", x + w / 2, y + lane / 2 + 4, e->label + 2);
        }
    }
    double ly = top + t->nranks * (lane + gap) + 18;
    pl_svg_swatch(f, left, ly, "#4e79a7", "forward F of microbatch n");
    pl_svg_swatch(f, left + 200, ly, "#59a14f", "backward B of microbatch n");
    pl_svg_swatch(f, left + 400, ly, "#d9d9d9", "idle (the bubble)");
    if (any_w) pl_svg_swatch(f, left, ly + 18, "#f28e2b", "weight gradient W of microbatch n");
    int bad = pl_svg_end(f) != 0;
    if (fclose(f) != 0) bad = 1;
    return bad ? -1 : 0;
}

static struct pl_profile uniform_profile(void)
{
    /* one FLOP per second and free links: a compute's time is its units */
    return (struct pl_profile){.name = "uniform",
                               .description = "uniform stage times, free communication",
                               .flops = 1.0, .bw = {1e30, 1e30}, .latency = {0.0, 0.0},
                               .devices_per_node = 8, .device_mem = 1e30, .efficiency = 1.0};
}

int l6_sched_first_late(enum pipe_schedule k, int p, int v, int m, const struct pl_merged_trace *t,
                     const struct pl_merged_trace *uni, const int *chunk_first, int *stage,
                     struct l6_sched_op *op, double *t_got, double *t_ideal, char *err,
                     size_t errlen)
{
    int nv = l6_sched_chunks(k, v), nops = l6_sched_nops(k, v, m), found = 0;
    struct pl_profile prof = uniform_profile();
    struct pl_merged_trace ideal;
    struct pl_replay rg, ri;
    l6_sched_ideal_trace(k, p, v, m, 1.0, &ideal);
    if (pl_replay_run(uni, &prof, NULL, &rg, err, errlen) != 0) {
        pl_trace_merged_free(&ideal);
        return -1;
    }
    if (pl_replay_run(&ideal, &prof, NULL, &ri, err, errlen) != 0) {
        pl_replay_free(&rg);
        pl_trace_merged_free(&ideal);
        return -1;
    }
    struct l6_sched_op *want = calloc((size_t)nops, sizeof *want);
    double *when = calloc((size_t)nops, sizeof *when);
    PL_ASSERT(want && when);
    for (int s = 0; s < p && !found; s++) {
        /* the ideal run: its i-th labelled compute is operation i of the order */
        l6_sched_order(k, p, nv, s, m, want);
        for (int i = 0, n = 0; i < ideal.nevents[s] && n < nops; i++)
            if (ideal.events[s][i].type == PL_EV_COMPUTE && ideal.events[s][i].label[0])
                when[n++] = ri.span[s][i].start;
        int cf[64];
        for (int j = 0; j < nv && j < 64; j++) cf[j] = chunk_first[j * p + s];
        for (int i = 0; i < t->nevents[s] && i < uni->nevents[s] && !found; i++) {
            struct l6_sched_op got;
            if (l6_sched_read_marks(&t->events[s][i], 1, cf, nv, &got, 1) != 1) continue;
            for (int w = 0; w < nops; w++) {
                if (want[w].phase != got.phase || want[w].mb != got.mb
                    || want[w].chunk != got.chunk)
                    continue;
                if (rg.span[s][i].start > when[w] + 1e-9) {
                    *stage = s, *op = got, *t_got = rg.span[s][i].start, *t_ideal = when[w];
                    found = 1;
                }
                break;
            }
        }
    }
    free(want);
    free(when);
    pl_replay_free(&rg);
    pl_replay_free(&ri);
    pl_trace_merged_free(&ideal);
    return found;
}

int l6_sched_replay_bubble(const struct pl_merged_trace *t, const char *svg, const char *title,
                        double *bubble, char *err, size_t errlen)
{
    struct pl_profile uniform = uniform_profile();
    struct pl_replay r;
    if (pl_replay_run(t, &uniform, NULL, &r, err, errlen) != 0) return -1;
    *bubble = pl_replay_idle_fraction(&r);
    int rc = 0;
    if (svg && write_svg(t, &r, title, svg) != 0) {
        snprintf(err, errlen, "cannot write %s", svg);
        rc = -1;
    }
    pl_replay_free(&r);
    return rc;
}
