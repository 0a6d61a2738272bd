/* trace.c: the per-rank event trace of trace.h, its groups and the gather to rank 0 (the
 * status file is trace_status.c, the JSON writer trace_json.c). The event buffer is plain
 * malloc, not the memory ledger: the trace is instrumentation, and counting it would change
 * the memory figures that the ZeRO lab grades. */
#include "trace.h"

#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ledger.h"
#include "proc.h"

/* The runtime context of this rank's trace. */
static struct {
    int enabled;
    struct pl_event *ev;
    int n, cap;
    char span[PL_LABEL_LEN];
    double flops_base; /* pl_ledger_flops_total() already in an event */
    double t_last;     /* end of the last event, wall clock */
    struct pl_group_def *groups;
    int ngroups, gcap;
} tr;

const char *pl_ev_type_name(enum pl_ev_type t)
{
    switch (t) {
    case PL_EV_COMPUTE: return "compute";
    case PL_EV_ISSUE: return "issue";
    case PL_EV_WAIT: return "wait";
    case PL_EV_SEND: return "send";
    case PL_EV_RECV: return "recv";
    case PL_EV_ISEND: return "isend";
    case PL_EV_IRECV: return "irecv";
    default: return "?";
    }
}

static double now(void) { return pl_initialized() ? pl_now() : 0.0; }

static void copy_label(char *dst, const char *src)
{
    snprintf(dst, PL_LABEL_LEN, "%s", src ? src : "");
}

void pl_trace_enable(int on)
{
    if (on && !tr.enabled) {
        tr.flops_base = pl_ledger_flops_total();
        tr.t_last = now();
    }
    tr.enabled = on != 0;
}

int pl_trace_enabled(void) { return tr.enabled; }

void pl_trace_clear(void)
{
    tr.n = 0;
    tr.flops_base = pl_ledger_flops_total();
    tr.t_last = now();
}

static void append(const struct pl_event *ev)
{
    if (tr.n == tr.cap) {
        int cap = tr.cap ? 2 * tr.cap : 256;
        struct pl_event *p = realloc(tr.ev, (size_t)cap * sizeof *p);
        if (!p) pl_fatal("out of memory growing the trace to %d events", cap);
        tr.ev = p;
        tr.cap = cap;
    }
    tr.ev[tr.n++] = *ev;
}

void pl_trace_flush(void)
{
    if (!tr.enabled) return;
    double flops = pl_ledger_flops_total();
    double delta = flops - tr.flops_base;
    double t = now();
    if (delta > 0.0) {
        struct pl_event ev;
        memset(&ev, 0, sizeof ev);
        ev.type = PL_EV_COMPUTE;
        copy_label(ev.label, tr.span);
        ev.flops = delta;
        ev.peer = -1;
        ev.t0 = tr.t_last;
        ev.t1 = t;
        append(&ev);
    }
    tr.flops_base = flops;
    tr.t_last = t;
}

void pl_trace_add(const struct pl_event *ev)
{
    if (!tr.enabled) return;
    pl_trace_flush();
    struct pl_event e = *ev;
    e.label[PL_LABEL_LEN - 1] = '\0';
    if (e.t0 == 0.0 && e.t1 == 0.0) e.t0 = e.t1 = now();
    append(&e);
    if (e.t1 > tr.t_last) tr.t_last = e.t1;
}

int pl_trace_count(void) { return tr.n; }
const struct pl_event *pl_trace_events(void) { return tr.ev; }

void pl_span(const char *label)
{
    /* The FLOPs so far belong to the span that is ending. */
    pl_trace_flush();
    copy_label(tr.span, label);
    pl_trace_status_span(tr.span);
}

const char *pl_span_label(void) { return tr.span; }

/* ---- groups ---- */

static struct pl_group_def *find_group(struct pl_group_def *gs, int n, int id)
{
    for (int i = 0; i < n; i++)
        if (gs[i].id == id) return &gs[i];
    return NULL;
}

static int same_members(const struct pl_group_def *g, int n, const int *ranks)
{
    if (g->n != n) return 0;
    for (int i = 0; i < n; i++)
        if (g->ranks[i] != ranks[i]) return 0;
    return 1;
}

static void add_group(struct pl_group_def **gs, int *ngroups, int *cap, int id, int n,
                      const int *ranks)
{
    struct pl_group_def *g = find_group(*gs, *ngroups, id);
    if (g) {
        if (!same_members(g, n, ranks))
            pl_fatal("communicator id %d names two different groups (of %d and %d ranks)", id,
                     g->n, n);
        return;
    }
    if (*ngroups == *cap) {
        int c = *cap ? 2 * *cap : 16;
        struct pl_group_def *p = realloc(*gs, (size_t)c * sizeof *p);
        if (!p) pl_fatal("out of memory registering group %d", id);
        *gs = p;
        *cap = c;
    }
    g = &(*gs)[(*ngroups)++];
    g->id = id;
    g->n = n;
    g->ranks = malloc((size_t)(n > 0 ? n : 1) * sizeof *g->ranks);
    if (!g->ranks) pl_fatal("out of memory registering group %d", id);
    memcpy(g->ranks, ranks, (size_t)n * sizeof *ranks);
}

void pl_trace_register_group(int id, int n, const int *world_ranks)
{
    add_group(&tr.groups, &tr.ngroups, &tr.gcap, id, n, world_ranks);
}

/* ---- gather ---- */

static void *xmalloc(size_t bytes, const char *what)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) pl_fatal("out of memory for %s (%zu bytes)", what, bytes);
    return p;
}

/* This rank's groups as ints: id, n, ranks..., one after the other. */
static int *pack_groups(int *len)
{
    int n = 0;
    for (int i = 0; i < tr.ngroups; i++) n += 2 + tr.groups[i].n;
    int *buf = xmalloc((size_t)n * sizeof *buf, "the group table");
    int k = 0;
    for (int i = 0; i < tr.ngroups; i++) {
        buf[k++] = tr.groups[i].id;
        buf[k++] = tr.groups[i].n;
        memcpy(buf + k, tr.groups[i].ranks, (size_t)tr.groups[i].n * sizeof *buf);
        k += tr.groups[i].n;
    }
    *len = n;
    return buf;
}

static void unpack_groups(struct pl_merged_trace *m, const int *buf, int len, int *cap)
{
    for (int k = 0; k + 2 <= len;) {
        int id = buf[k], n = buf[k + 1];
        add_group(&m->groups, &m->ngroups, cap, id, n, buf + k + 2);
        k += 2 + n;
    }
}

/* Counts and displacements for MPI_Gatherv; int overflow would truncate the trace. */
static int *displacements(const int *counts, int n, const char *what)
{
    int *d = xmalloc((size_t)n * sizeof *d, "displacements");
    long long sum = 0;
    for (int i = 0; i < n; i++) {
        if (sum > INT32_MAX) pl_fatal("the merged %s exceeds 2 GB; trace fewer steps", what);
        d[i] = (int)sum;
        sum += counts[i];
    }
    if (sum > INT32_MAX) pl_fatal("the merged %s exceeds 2 GB; trace fewer steps", what);
    return d;
}

void pl_trace_gather(struct pl_merged_trace *out)
{
    memset(out, 0, sizeof *out);
    pl_trace_flush();
    int rank = 0, size = 1;
    int running = pl_mpi_running();
    if (running) {
        PL_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
        PL_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    }
    if ((size_t)tr.n * sizeof(struct pl_event) > INT32_MAX)
        pl_fatal("this rank's trace (%d events) exceeds 2 GB; trace fewer steps", tr.n);
    int mybytes = tr.n * (int)sizeof(struct pl_event);
    int glen = 0;
    int *gbuf = pack_groups(&glen);

    int *counts = NULL, *gcounts = NULL, *displ = NULL, *gdispl = NULL;
    char *allev = NULL;
    int *allg = NULL;
    if (rank == 0) {
        counts = xmalloc((size_t)size * sizeof *counts, "trace counts");
        gcounts = xmalloc((size_t)size * sizeof *gcounts, "group counts");
    }
    if (running && size > 1) {
        /* Raw MPI on the world: gathering the trace must not record or charge anything. */
        PL_CHECK_MPI(MPI_Gather(&mybytes, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD));
        PL_CHECK_MPI(MPI_Gather(&glen, 1, MPI_INT, gcounts, 1, MPI_INT, 0, MPI_COMM_WORLD));
        long long total = 0, gtotal = 0;
        if (rank == 0) {
            displ = displacements(counts, size, "trace");
            gdispl = displacements(gcounts, size, "group table");
            for (int r = 0; r < size; r++) {
                total += counts[r];
                gtotal += gcounts[r];
            }
            allev = xmalloc((size_t)total, "the merged trace");
            allg = xmalloc((size_t)gtotal * sizeof *allg, "the merged group table");
        }
        PL_CHECK_MPI(MPI_Gatherv(tr.ev, mybytes, MPI_BYTE, allev, counts, displ, MPI_BYTE, 0,
                                 MPI_COMM_WORLD));
        PL_CHECK_MPI(MPI_Gatherv(gbuf, glen, MPI_INT, allg, gcounts, gdispl, MPI_INT, 0,
                                 MPI_COMM_WORLD));
    } else {
        counts[0] = mybytes;
        gcounts[0] = glen;
        displ = displacements(counts, 1, "trace");
        gdispl = displacements(gcounts, 1, "group table");
        allev = xmalloc((size_t)mybytes, "the merged trace");
        if (mybytes) memcpy(allev, tr.ev, (size_t)mybytes);
        allg = xmalloc((size_t)glen * sizeof *allg, "the merged group table");
        memcpy(allg, gbuf, (size_t)glen * sizeof *allg);
    }
    free(gbuf);
    if (rank != 0) return;

    out->nranks = size;
    out->nevents = xmalloc((size_t)size * sizeof *out->nevents, "the merged trace");
    out->events = xmalloc((size_t)size * sizeof *out->events, "the merged trace");
    int gcap = 0;
    for (int r = 0; r < size; r++) {
        int n = counts[r] / (int)sizeof(struct pl_event);
        out->nevents[r] = n;
        out->events[r] = xmalloc((size_t)n * sizeof(struct pl_event), "the merged trace");
        if (n) memcpy(out->events[r], allev + displ[r], (size_t)n * sizeof(struct pl_event));
        unpack_groups(out, allg + gdispl[r], gcounts[r], &gcap);
    }
    free(counts);
    free(gcounts);
    free(displ);
    free(gdispl);
    free(allev);
    free(allg);
}

void pl_trace_merged_free(struct pl_merged_trace *m)
{
    for (int r = 0; r < m->nranks; r++) free(m->events ? m->events[r] : NULL);
    free(m->events);
    free(m->nevents);
    for (int i = 0; i < m->ngroups; i++) free(m->groups[i].ranks);
    free(m->groups);
    memset(m, 0, sizeof *m);
}
