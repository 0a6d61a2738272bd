/* prefetch.c: Lab 3's ZeRO-3 step on the modelled timeline, and its pictures (prefetch.h). */
#include "prefetch.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_comm.h"
#include "formulas.h"
#include "memory_time.h"
#include "paralab.h"
#include "part_pass.h"

/* ---- the traced step (check mode) ---- */

void l3_prefetch_want(struct l3_prefetch *pf, int on)
{
    pf->wanted = on;
}

static int traced_step(const struct l3_prefetch *pf, int step, int steps)
{
    return pf->wanted && step == steps - 1;
}

void l3_prefetch_step_begin(struct l3_prefetch *pf, int step, int steps)
{
    if (!traced_step(pf, step, steps)) return;
    pf->was_on = pl_trace_enabled();
    pl_trace_enable(1);
    pl_trace_clear();
}

void l3_prefetch_step_end(struct l3_prefetch *pf, int step, int steps)
{
    if (!traced_step(pf, step, steps)) return;
    pl_trace_flush();
    pl_trace_enable(0);
    pl_trace_merged_free(&pf->trace);
    pl_trace_gather(&pf->trace);
    pf->traced = 1;
    pl_trace_enable(pf->was_on);
}

void l3_prefetch_free(struct l3_prefetch *pf)
{
    pl_trace_merged_free(&pf->trace);
    pf->traced = 0;
}

/* ---- the replay, with and without prefetch ---- */

/* The same step with every all-gather waited for where it is issued: each one's handle
 * dropped, so that the replay treats it as blocking, and its wait with it. */
static void wait_each_gather_at_issue(struct pl_merged_trace *c)
{
    for (int r = 0; r < c->nranks; r++) {
        struct pl_event *ev = c->events[r];
        for (int i = 0; i < c->nevents[r]; i++) {
            if (ev[i].type != PL_EV_ISSUE || ev[i].kind != PL_ALL_GATHER || ev[i].handle <= 0)
                continue;
            for (int j = i + 1; j < c->nevents[r]; j++)
                if (ev[j].type == PL_EV_WAIT && ev[j].handle == ev[i].handle) ev[j].handle = 0;
            ev[i].handle = 0;
        }
    }
}

/* Compute outside the model's forward and backward (labelled F and B by lib/model.c), such
 * as the norm of the gradient and AdamW, grows with the parameters and not with the tokens:
 * its FLOPs times x, which undoes the tokens' part of the scale. */
static void per_parameter_compute(struct pl_merged_trace *c, double x)
{
    for (int r = 0; r < c->nranks; r++)
        for (int i = 0; i < c->nevents[r]; i++) {
            struct pl_event *ev = &c->events[r][i];
            if (ev->type == PL_EV_COMPUTE && !(ev->label[0] == 'F' || ev->label[0] == 'B'))
                ev->flops *= x;
        }
}

/* Time rank r's comm stream spent on all-gathers. */
static double gather_time(const struct pl_merged_trace *c, const struct pl_replay *rp, int r)
{
    double t = 0;
    for (int i = 0; i < c->nevents[r]; i++)
        if (c->events[r][i].type == PL_EV_ISSUE && c->events[r][i].kind == PL_ALL_GATHER)
            t += rp->span[r][i].end - rp->span[r][i].start;
    return t;
}

/* All-gather time rank r's compute stream waited for: the part of each all-gather's run on
 * the comm stream during which the compute stream stood still (before its last activity, and
 * not computing). A stall only for a reduce-scatter queued ahead of a gather is not counted:
 * waiting for a gather right at its issue exposes that gather's own run, whatever else the
 * comm stream still had to do first. */
static double gather_exposed(const struct pl_merged_trace *c, const struct pl_replay *rp, int r)
{
    const struct pl_event *ev = c->events[r];
    const struct pl_span_time *sp = rp->span[r];
    double until = 0; /* the compute stream's last activity: compute, a wait, a blocking op */
    for (int i = 0; i < c->nevents[r]; i++)
        if (sp[i].stream == 0 || (ev[i].type == PL_EV_ISSUE && ev[i].handle <= 0))
            until = fmax(until, sp[i].end);
    double t = 0;
    for (int i = 0; i < c->nevents[r]; i++) {
        if (ev[i].type != PL_EV_ISSUE || ev[i].kind != PL_ALL_GATHER) continue;
        double a = sp[i].start, b = fmin(sp[i].end, until);
        if (b <= a) continue;
        double busy = 0; /* compute running beside it */
        for (int j = 0; j < c->nevents[r]; j++)
            if (ev[j].type == PL_EV_COMPUTE)
                busy += fmax(0.0, fmin(b, sp[j].end) - fmax(a, sp[j].start));
        t += fmax(0.0, (b - a) - busy);
    }
    return t;
}

/* FLOPs of each unit's forward and backward on B sequences, counted by running lib's pass
 * once on scratch parameters (the values do not change the count). */
static void unit_flops(const struct pl_model_config *cfg, int B, const struct zero_layout *e,
                       double *fwd, double *bwd)
{
    size_t toks = (size_t)B * (size_t)cfg->seq_len;
    float *p = pl_mem_alloc(e->numel * sizeof(float), PL_MEM_WORK, PL_DEVICE, "prefetch p");
    float *g = pl_mem_alloc(e->numel * sizeof(float), PL_MEM_WORK, PL_DEVICE, "prefetch g");
    int *tok = pl_mem_alloc(toks * sizeof(int), PL_MEM_WORK, PL_DEVICE, "prefetch tokens");
    struct pl_pass *s = pl_pass_new(cfg);
    pl_pass_begin(s, tok, tok, B);
    for (int u = 0; u < e->nunits; u++) {
        double f0 = pl_ledger_flops_total();
        pl_pass_forward(s, e->unit[u].part, p + e->unit[u].offset);
        fwd[u] = pl_ledger_flops_total() - f0;
    }
    for (int u = e->nunits - 1; u >= 0; u--) {
        double f0 = pl_ledger_flops_total();
        pl_pass_backward(s, e->unit[u].part, p + e->unit[u].offset, g + e->unit[u].offset);
        bwd[u] = pl_ledger_flops_total() - f0;
    }
    pl_pass_free(s);
    pl_mem_free(tok);
    pl_mem_free(g);
    pl_mem_free(p);
}

/* The most of its all-gather time a step with these gathers can hide: every unit gathered
 * before its forward and, unless keep_head, again before its backward (keep_head: the head,
 * the last unit, kept gathered from its forward into its backward), each gather issued as
 * early as the comm stream allows, with any number in flight. The comm stream runs one
 * gather at a time in the order they are used, and a unit computes once its gather is done
 * and the unit before it has computed; the stalls that remain no schedule avoids: the first
 * gather has no compute before it, and a gather longer than the compute before it (the
 * embedding's lookup is almost none) stays partly exposed however early it starts. */
static double hidden_at_most(int U, const double *ag, const double *fwd, const double *bwd,
                             int keep_head)
{
    double comm = 0, tc = 0, stalled = 0, total = 0;
    for (int k = 0; k < 2 * U; k++) {
        int u = k < U ? k : 2 * U - 1 - k;
        if (!(keep_head && k == U)) {
            comm += ag[u];
            total += ag[u];
            if (comm > tc) {
                stalled += comm - tc;
                tc = comm;
            }
        }
        tc += k < U ? fwd[u] : bwd[u];
    }
    return total > 0 ? 1.0 - stalled / total : 0.0;
}

/* The model's bound on the share of its all-gather time a step hides, from the model alone:
 * the larger of hidden_at_most over the two gather patterns the traffic test accepts (every
 * unit gathered twice, or the head once), so that no step the other tests pass exceeds it.
 * Reduce-scatters on the same comm stream can only delay the gathers further. */
static double ideal_hidden(const struct pl_model_config *cfg, int B, const struct zero_layout *e,
                           const struct pl_profile *prof, double bytes_x, double flops_x)
{
    int U = e->nunits, n = e->n;
    double fwd[ZERO_MAX_UNITS], bwd[ZERO_MAX_UNITS], ag[ZERO_MAX_UNITS];
    unit_flops(cfg, B, e, fwd, bwd);
    int *ranks = malloc((size_t)n * sizeof *ranks); /* the stage's group: the world */
    for (int r = 0; r < n; r++) ranks[r] = r;
    enum pl_link link = pl_topo_group_link(pl_topo(), ranks, n);
    free(ranks);
    for (int u = 0; u < U; u++) {
        ag[u] = pl_coll_time(PL_ALL_GATHER, n, 4.0 * (double)e->unit[u].padded * bytes_x,
                             prof->latency[link], prof->bw[link]);
        fwd[u] *= flops_x / prof->flops;
        bwd[u] *= flops_x / prof->flops;
    }
    return fmax(hidden_at_most(U, ag, fwd, bwd, 0), hidden_at_most(U, ag, fwd, bwd, 1));
}

/* Rank 0: replays trace t twice and fills out; svg paths may be NULL. Returns 0, or -1
 * with a message in err. */
static int measure(const struct pl_merged_trace *t, const struct pl_model_config *cfg, int B,
                   const struct zero_layout *e, const char *svg_with, const char *svg_without,
                   struct l3_prefetch_result *out, char *err, size_t len)
{
    memset(out, 0, sizeof *out);
    out->n = t->nranks;
    const struct pl_profile *prof = pl_profile_get(L3_PREFETCH_PROFILE);
    double bytes_x = L3_PREFETCH_PSI / (double)e->numel;
    double flops_x = bytes_x * L3_PREFETCH_TOKENS / ((double)B * cfg->seq_len);
    struct pl_merged_trace w, wo;
    gr_trace_scaled(t, flops_x, bytes_x, &w);
    per_parameter_compute(&w, bytes_x / flops_x);
    gr_trace_scaled(&w, 1, 1, &wo);
    wait_each_gather_at_issue(&wo);
    struct pl_replay rw, rwo;
    int rc = pl_replay_run(&w, prof, pl_topo(), &rw, err, len);
    if (rc == 0 && (rc = pl_replay_run(&wo, prof, pl_topo(), &rwo, err, len)) != 0)
        pl_replay_free(&rw);
    if (rc == 0) {
        /* The rank that hid least: the share of its all-gathers' run the compute stream
         * waited for, as recorded against each gather waited for at its issue. */
        out->hidden = 2;
        for (int r = 0; r < t->nranks; r++) {
            double ag = gather_time(&wo, &rwo, r);
            double ew = gather_exposed(&w, &rw, r), ewo = gather_exposed(&wo, &rwo, r);
            double hid = ewo > 0 ? fmin(1.0, fmax(0.0, 1.0 - ew / ewo)) : 0.0;
            if (hid >= out->hidden) continue;
            out->hidden = hid;
            out->ag = ag;
            out->without.ag_exposed = ewo;
            out->with.ag_exposed = ew;
        }
        out->with.step = rw.step_time;
        out->without.step = rwo.step_time;
        char title[160];
        snprintf(title, sizeof title, "ZeRO-3 step with prefetch, %d ranks, modelled on %s at "
                 "GPT-2 small scale", t->nranks, L3_PREFETCH_PROFILE);
        if (svg_with && pl_replay_write_svg(&w, &rw, title, svg_with) != 0)
            fprintf(stderr, "warning: cannot write %s\n", svg_with);
        snprintf(title, sizeof title, "The same step, each all-gather waited for where it is "
                 "issued (no prefetch), %d ranks", t->nranks);
        if (svg_without && pl_replay_write_svg(&wo, &rwo, title, svg_without) != 0)
            fprintf(stderr, "warning: cannot write %s\n", svg_without);
        pl_replay_free(&rwo);
        pl_replay_free(&rw);
        out->ideal = ideal_hidden(cfg, B, e, prof, bytes_x, flops_x);
    }
    gr_trace_scaled_free(&wo);
    gr_trace_scaled_free(&w);
    return rc;
}

void l3_prefetch_observe(const struct l3_prefetch *pf, const struct pl_model_config *cfg, int B,
                         const struct zero_layout *e, struct l3_prefetch_fig *f)
{
    f->traced = pf->traced;
    if (!pf->traced) return;
    struct l3_prefetch_result r;
    f->replayed = measure(&pf->trace, cfg, B, e, NULL, NULL, &r, f->err, sizeof f->err) == 0;
    if (!f->replayed) return;
    f->n = r.n;
    f->ag = r.ag;
    f->with_exposed = r.with.ag_exposed;
    f->with_step = r.with.step;
    f->without_exposed = r.without.ag_exposed;
    f->without_step = r.without.step;
    f->hidden = r.hidden;
    f->ideal = r.ideal;
    gr_metric("zero3_allgather_hidden", r.hidden);
}

/* ---- the bench ---- */

static void path_in(char *buf, size_t len, const char *dir, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

/* Rank 0: the pictures and the figures of the traced step. */
static void bench_report(const struct pl_merged_trace *t, const struct gr_train_setup *setup,
                         const struct zero_layout *e, int B, const struct l3_mem_series *mem,
                         const char *dir, const char *tag)
{
    char with[512], without[512], memt[512], err[512];
    if (dir) {
        path_in(with, sizeof with, dir, "03-zero-timeline-prefetch.svg");
        path_in(without, sizeof without, dir, "03-zero-timeline-no-prefetch.svg");
        path_in(memt, sizeof memt, dir, "03-zero-memory-time.svg");
        l3_mem_series_svg(memt, mem, t->nranks, (double)e->numel);
    }
    struct l3_prefetch_result r;
    if (measure(t, &setup->cfg, B, e, dir ? with : NULL, dir ? without : NULL, &r, err,
                sizeof err) != 0) {
        printf("# the ZeRO-3 step could not be replayed: %s\n", err);
    } else {
        printf("# ZeRO-3 step modelled on %s at GPT-2 small scale, %d ranks: all-gathers %.0f "
               "us, of which the compute waited %.0f us with prefetch, %.0f us without\n",
               L3_PREFETCH_PROFILE, r.n, 1e6 * r.ag, 1e6 * r.with.ag_exposed,
               1e6 * r.without.ag_exposed);
        printf("# handout: a model of %.0fM parameters (GPT-2 small's count) and %.0f tokens "
               "per rank\n", L3_PREFETCH_PSI / 1e6, L3_PREFETCH_TOKENS);
        printf("# handout: full marks from %.0f%% of that bound, none up to %.0f%%\n",
               100 * L3_PREFETCH_FULL, 100 * L3_PREFETCH_NONE);
        printf("# %s: on %d ranks no prefetch hides more than %.0f%% of the all-gather time\n",
               tag, r.n, 100 * r.ideal);
        printf("# %s: prefetching hides %.0f%% of it: the modelled step takes %.0f us "
               "with prefetch and %.0f us without\n", tag, 100 * r.hidden, 1e6 * r.with.step,
               1e6 * r.without.step);
    }
    if (dir) printf("# ZeRO-3 pictures written to %s, %s and %s\n", memt, with, without);
}

struct pl_comm *l3_comm_open(void)
{
    return pl_comm_split(pl_comm_world(), 0, pl_rank(), "zero");
}

int l3_prefetch_bench(const struct gr_train_setup *setup, const struct zero_layout *e,
                      const char *dir, const char *tag)
{
    int n = pl_size();
    pl_todo_reset();
    struct pl_comm *comm = l3_comm_open();
    struct l3_prefetch pf;
    memset(&pf, 0, sizeof pf);
    struct zero *z = zero_new(&setup->cfg, &setup->opt, 3, 1, comm);
    struct gr_batch b;
    gr_batch_new(&b, setup, pl_rank(), n);
    int ok = !gr_todo_any();
    struct l3_mem_series mem = {0, 0, NULL};
    for (int s = 0; s < 2 && ok; s++) { /* the first step allocates the activations */
        gr_batch_load(&b, s);
        if (s == 1) {
            struct pl_mem_stats now;
            pl_mem_get_stats(&now);
            l3_mem_series_add(&now, &mem); /* where the step starts */
            pl_mem_watch(l3_mem_series_add, &mem);
        }
        l3_prefetch_want(&pf, s == 1);
        l3_prefetch_step_begin(&pf, s, 2);
        zero_step(z, b.tokens, b.targets, b.B);
        l3_prefetch_step_end(&pf, s, 2);
        pl_mem_watch(NULL, NULL);
        ok = !gr_todo_any();
    }
    if (ok && pl_rank() == 0) bench_report(&pf.trace, setup, e, b.B, &mem, dir, tag);
    if (!ok) pl_print0("# ZeRO-3 is still a stub (see %s): no timeline\n", gr_handout());
    l3_prefetch_free(&pf);
    l3_mem_series_free(&mem);
    gr_batch_free(&b);
    zero_free(z);
    gr_case_comm_free(comm);
    return ok;
}
