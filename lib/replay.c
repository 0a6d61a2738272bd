/* replay.c: the modelled timeline of replay.h. Each rank runs its events in program order on
 * a compute stream; collectives and sends queue, in issue order, on its comm stream (or,
 * per pl_replay_run_streams, on the stream of their link class). The
 * replay sweeps the ranks, advancing each as far as its dependencies allow, until every
 * event has a time; a sweep that moves nothing while events remain is a deadlock, and the
 * first blocked rank is reported with what it waits for. No MPI: it runs on any trace. */
#include "replay.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ledger.h"
#include "torus.h"
#include "util.h"

/* ---- small growable arrays ---- */

static void *xrealloc(void *p, size_t bytes)
{
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) pl_fatal("out of memory in the replay (%zu bytes)", bytes);
    return q;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) pl_fatal("out of memory in the replay (%zu x %zu bytes)", n, size);
    return p;
}

#define GROW(arr, n, cap)                                                                  \
    do {                                                                                   \
        if ((n) == (cap)) {                                                                \
            (cap) = (cap) ? 2 * (cap) : 8;                                                 \
            (arr) = xrealloc((arr), (size_t)(cap) * sizeof *(arr));                        \
        }                                                                                  \
    } while (0)

/* ---- operations on comm streams ---- */

enum op_type { OP_COLL, OP_SEND };

struct op {
    enum op_type type;
    int resolved;
    int lane;             /* the comm stream it queues on: 0, or its link class */
    double start, end;
    /* collective */
    int group;            /* index into the merged trace's groups */
    int k;                /* the k-th collective on that group */
    enum pl_coll_kind kind;
    double S;             /* largest size any member gave (all-to-all-v sizes differ) */
    int nissued;
    double *issue_t;      /* [group size], by member position */
    int *issued;          /* [group size] */
    /* send */
    int src, dst, tag;
    double bytes, issue;
};

/* Messages from src to dst with tag: the k-th send matches the k-th receive. */
struct channel {
    int src, dst, tag;
    int *sends, nsends, cap;
    int nrecvs;
};

/* What a handle stands for: an operation, or the k-th receive on a channel. */
struct handle_ref {
    long h;
    int is_recv;
    int a, b; /* op; or channel, k */
};

/* A comm stream: operations in issue order, qdone of them resolved. */
struct lane {
    int *queue, qn, qcap, qdone;
    double free;         /* end of the last resolved operation on it */
};

struct rank_state {
    int pc;
    double tc;           /* compute stream: when the next event may start */
    struct lane cs[PL_NLINKS]; /* comm streams: cs[0] alone, or one per link class */
    double compute, comm, exposed;
    int pending;         /* the event at pc has been registered and waits */
    int pend_a, pend_b;  /* its op, or its channel and k */
    int *gcount;         /* per group: collectives issued so far */
    struct handle_ref *handles;
    int nh, hcap;
    int *evop;           /* per event: its op, or -1 */
};

struct sim {
    const struct pl_merged_trace *m;
    const struct pl_profile *p;
    const struct pl_topo *topo;
    int per_link;          /* PL_REPLAY_STREAM_PER_LINK */
    struct rank_state *rs;
    struct op *ops;
    int nops, opcap;
    int **gops; /* per group: op of the k-th collective */
    int *gnops, *gcap;
    enum pl_link *glink;
    int tdims[3];          /* the torus the ranks form, when the profile is one */
    struct channel *ch;
    int nch, chcap;
    int *htab; /* channel index + 1, open addressing */
    int hsize;
    struct pl_replay *out;
    char *err;
    size_t errlen;
};

/* The replay's errors go to the caller's (err, errlen). */
#define fail(s, ...) pl_err((s)->err, (s)->errlen, __VA_ARGS__)

static enum pl_link link_between(const struct sim *s, int a, int b)
{
    return s->topo ? pl_topo_link(s->topo, a, b) : PL_LINK_INTRA;
}

static int new_op(struct sim *s, enum op_type type)
{
    GROW(s->ops, s->nops, s->opcap);
    struct op *o = &s->ops[s->nops];
    memset(o, 0, sizeof *o);
    o->type = type;
    return s->nops++;
}

/* op, on link, onto rank r's comm stream for it. */
static void enqueue(const struct sim *s, struct rank_state *r, struct op *o, int id,
                    enum pl_link link)
{
    o->lane = s->per_link ? (int)link : 0;
    struct lane *q = &r->cs[o->lane];
    GROW(q->queue, q->qn, q->qcap);
    q->queue[q->qn++] = id;
}

static uint64_t channel_key(int src, int dst, int tag)
{
    return ((uint64_t)(uint32_t)src << 44) ^ ((uint64_t)(uint32_t)dst << 32) ^ (uint32_t)tag;
}

static size_t hash_slot(uint64_t key, int hsize)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)(key & (uint64_t)(hsize - 1));
}

static int channel(struct sim *s, int src, int dst, int tag)
{
    if (2 * (s->nch + 1) > s->hsize) {
        int size = s->hsize ? 2 * s->hsize : 64;
        int *t = xcalloc((size_t)size, sizeof *t);
        for (int i = 0; i < s->nch; i++) {
            size_t j = hash_slot(channel_key(s->ch[i].src, s->ch[i].dst, s->ch[i].tag), size);
            while (t[j]) j = (j + 1) & (size_t)(size - 1);
            t[j] = i + 1;
        }
        free(s->htab);
        s->htab = t;
        s->hsize = size;
    }
    size_t j = hash_slot(channel_key(src, dst, tag), s->hsize);
    while (s->htab[j]) {
        struct channel *c = &s->ch[s->htab[j] - 1];
        if (c->src == src && c->dst == dst && c->tag == tag) return s->htab[j] - 1;
        j = (j + 1) & (size_t)(s->hsize - 1);
    }
    GROW(s->ch, s->nch, s->chcap);
    struct channel *c = &s->ch[s->nch];
    memset(c, 0, sizeof *c);
    c->src = src;
    c->dst = dst;
    c->tag = tag;
    s->htab[j] = s->nch + 1;
    return s->nch++;
}

static void handle_put(struct rank_state *r, long h, int is_recv, int a, int b)
{
    if (h <= 0) return;
    for (int i = r->nh - 1; i >= 0; i--)
        if (r->handles[i].h == h) { /* a handle value reused before its wait: latest wins */
            r->handles[i] = (struct handle_ref){h, is_recv, a, b};
            return;
        }
    GROW(r->handles, r->nh, r->hcap);
    r->handles[r->nh++] = (struct handle_ref){h, is_recv, a, b};
}

static struct handle_ref *handle_find(struct rank_state *r, long h)
{
    for (int i = r->nh - 1; i >= 0; i--)
        if (r->handles[i].h == h) return &r->handles[i];
    return NULL;
}

static void handle_drop(struct rank_state *r, struct handle_ref *ref)
{
    *ref = r->handles[--r->nh];
}

static int group_index(const struct pl_merged_trace *m, int id)
{
    for (int i = 0; i < m->ngroups; i++)
        if (m->groups[i].id == id) return i;
    return -1;
}

static int member_pos(const struct pl_group_def *g, int rank)
{
    for (int i = 0; i < g->n; i++)
        if (g->ranks[i] == rank) return i;
    return -1;
}

/* ---- resolution ---- */

/* A collective can start once every member issued it and it heads every member's stream. */
static int coll_ready(const struct sim *s, const struct op *o, int id)
{
    const struct pl_group_def *g = &s->m->groups[o->group];
    if (o->nissued < g->n) return 0;
    for (int i = 0; i < g->n; i++) {
        const struct lane *q = &s->rs[g->ranks[i]].cs[o->lane];
        if (q->qdone >= q->qn || q->queue[q->qdone] != id) return 0;
    }
    return 1;
}

static void resolve_coll(struct sim *s, struct op *o)
{
    const struct pl_group_def *g = &s->m->groups[o->group];
    double start = 0.0;
    for (int i = 0; i < g->n; i++) {
        const struct lane *q = &s->rs[g->ranks[i]].cs[o->lane];
        start = fmax(start, fmax(o->issue_t[i], q->free));
    }
    enum pl_link link = s->glink[o->group];
    double dur = s->p->torus ? pl_torus_coll_time(s->tdims, o->kind, g->ranks, g->n, o->S,
                                                  s->p->latency[link], s->p->bw[link])
                             : pl_coll_time(o->kind, g->n, o->S, s->p->latency[link],
                                            s->p->bw[link]);
    o->start = start;
    o->end = start + dur;
    o->resolved = 1;
    for (int i = 0; i < g->n; i++) {
        struct rank_state *r = &s->rs[g->ranks[i]];
        r->cs[o->lane].qdone++;
        r->cs[o->lane].free = o->end;
        r->comm += dur;
    }
}

/* Resolves what heads comm stream q of rank r, as far as possible; returns 1 on progress. */
static int resolve_lane(struct sim *s, struct rank_state *r, struct lane *q)
{
    int progress = 0;
    while (q->qdone < q->qn) {
        int id = q->queue[q->qdone];
        struct op *o = &s->ops[id];
        if (o->type == OP_SEND) {
            enum pl_link link = link_between(s, o->src, o->dst);
            o->start = fmax(o->issue, q->free);
            int pair[2] = {o->src, o->dst};
            o->end = o->start + (s->p->torus ? pl_torus_coll_time(s->tdims, PL_P2P, pair, 2,
                                                                  o->bytes,
                                                                  s->p->latency[link],
                                                                  s->p->bw[link])
                                             : pl_coll_time(PL_P2P, 2, o->bytes,
                                                            s->p->latency[link],
                                                            s->p->bw[link]));
            o->resolved = 1;
            r->comm += o->end - o->start;
            q->free = o->end;
            q->qdone++;
        } else if (coll_ready(s, o, id)) {
            resolve_coll(s, o);
        } else {
            break;
        }
        progress = 1;
    }
    return progress;
}

/* Resolves what heads each of rank's comm streams, as far as possible; returns 1 on
 * progress. */
static int resolve_queue(struct sim *s, int rank)
{
    struct rank_state *r = &s->rs[rank];
    int progress = 0;
    for (int l = 0; l < PL_NLINKS; l++) progress |= resolve_lane(s, r, &r->cs[l]);
    return progress;
}

/* Arrival of the k-th message on channel c, or -1 while unknown. */
static double arrival(const struct sim *s, int c, int k)
{
    const struct channel *ch = &s->ch[c];
    if (k >= ch->nsends || !s->ops[ch->sends[k]].resolved) return -1.0;
    return s->ops[ch->sends[k]].end;
}

/* The compute stream waits until t: the stall is exposed communication. */
static void stall_until(struct rank_state *r, struct pl_span_time *sp, double t)
{
    sp->start = r->tc;
    sp->stream = 0;
    if (t > r->tc) {
        r->exposed += t - r->tc;
        r->tc = t;
    }
    sp->end = r->tc;
}

static const char *kind_name(enum pl_coll_kind k)
{
    return (int)k >= 0 && k < PL_NKINDS ? pl_coll_kind_name(k) : "?";
}

/* "1st", "2nd", "3rd", "4th", ... for the k-th (from 0) operation of a kind. */
static const char *ordinal(int k, char *buf, size_t len)
{
    int n = k + 1, t = n % 100;
    const char *suf = t >= 11 && t <= 13 ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd"
                                          : n % 10 == 3 ? "rd" : "th";
    snprintf(buf, len, "%d%s", n, suf);
    return buf;
}

/* Registers the collective issued by event e of rank; returns the op or -1 (err set). */
static int issue_coll(struct sim *s, int rank, int i, const struct pl_event *e)
{
    struct rank_state *r = &s->rs[rank];
    int gi = group_index(s->m, e->group);
    if (gi < 0)
        return fail(s, "rank %d event %d issues %s on group %d, which is not in the trace's "
                       "group table", rank, i, kind_name(e->kind), e->group);
    const struct pl_group_def *g = &s->m->groups[gi];
    int pos = member_pos(g, rank);
    if (pos < 0)
        return fail(s, "rank %d event %d issues %s on group %d, which does not contain rank %d",
                    rank, i, kind_name(e->kind), e->group, rank);
    int k = r->gcount[gi]++;
    int id;
    if (k < s->gnops[gi]) {
        id = s->gops[gi][k];
    } else {
        id = new_op(s, OP_COLL);
        struct op *o = &s->ops[id];
        o->group = gi;
        o->k = k;
        o->kind = e->kind;
        o->issue_t = xcalloc((size_t)g->n, sizeof *o->issue_t);
        o->issued = xcalloc((size_t)g->n, sizeof *o->issued);
        GROW(s->gops[gi], s->gnops[gi], s->gcap[gi]);
        s->gops[gi][s->gnops[gi]++] = id;
    }
    struct op *o = &s->ops[id];
    if (o->kind != e->kind) {
        char nth[16];
        return fail(s, "rank %d event %d issues %s as its %s collective on group %d, where other "
                       "members issued %s: the members disagree on the order of collectives",
                    rank, i, kind_name(e->kind), ordinal(k, nth, sizeof nth), e->group,
                    kind_name(o->kind));
    }
    o->issue_t[pos] = r->tc;
    o->issued[pos] = 1;
    o->nissued++;
    o->S = fmax(o->S, e->bytes);
    enqueue(s, r, o, id, s->glink[gi]);
    return id;
}

static int new_send(struct sim *s, int rank, const struct pl_event *e)
{
    struct rank_state *r = &s->rs[rank];
    int id = new_op(s, OP_SEND);
    struct op *o = &s->ops[id];
    o->src = rank;
    o->dst = e->peer;
    o->tag = e->tag;
    o->bytes = e->bytes;
    o->issue = r->tc;
    int ci = channel(s, rank, e->peer, e->tag); /* may move s->ch */
    struct channel *c = &s->ch[ci];
    GROW(c->sends, c->nsends, c->cap);
    c->sends[c->nsends++] = id;
    enqueue(s, r, &s->ops[id], id, link_between(s, rank, e->peer));
    return id;
}

static int check_peer(struct sim *s, int rank, int i, const struct pl_event *e)
{
    if (e->peer < 0 || e->peer >= s->m->nranks)
        return fail(s, "rank %d event %d (%s) names peer %d, outside 0..%d", rank, i,
                    pl_ev_type_name(e->type), e->peer, s->m->nranks - 1);
    return 0;
}

/* Runs rank's events until one must wait. Returns 1 on progress, 0 when blocked or done,
 * -1 on a malformed trace. */
static int advance(struct sim *s, int rank)
{
    struct rank_state *r = &s->rs[rank];
    const struct pl_event *ev = s->m->events[rank];
    int n = s->m->nevents[rank];
    int progress = 0;
    while (r->pc < n) {
        int i = r->pc;
        const struct pl_event *e = &ev[i];
        struct pl_span_time *sp = &s->out->span[rank][i];
        struct handle_ref *ref;
        double t;
        int c;
        switch (e->type) {
        case PL_EV_COMPUTE:
            sp->start = r->tc;
            sp->stream = 0;
            r->tc += e->flops / s->p->flops;
            r->compute += r->tc - sp->start;
            sp->end = r->tc;
            break;
        case PL_EV_ISSUE:
            if (!r->pending) {
                int id = issue_coll(s, rank, i, e);
                if (id < 0) return -1;
                r->evop[i] = id;
                handle_put(r, e->handle, 0, id, 0);
                r->pending = 1;
                progress = 1;
            }
            if (e->handle <= 0) { /* no handle to wait on: a blocking collective */
                resolve_queue(s, rank);
                if (!s->ops[r->evop[i]].resolved) return progress;
                double start = r->tc;
                r->exposed += fmax(0.0, s->ops[r->evop[i]].end - start);
                r->tc = fmax(r->tc, s->ops[r->evop[i]].end);
            }
            r->pending = 0;
            break;
        case PL_EV_WAIT:
            if (e->handle <= 0) {
                stall_until(r, sp, r->tc);
                break;
            }
            ref = handle_find(r, e->handle);
            if (!ref)
                return fail(s, "rank %d event %d waits for handle %ld, which no earlier issue, "
                               "isend or irecv of rank %d started", rank, i, e->handle, rank);
            if (!ref->is_recv && !s->ops[ref->a].resolved) resolve_queue(s, rank);
            t = ref->is_recv ? arrival(s, ref->a, ref->b)
                             : (s->ops[ref->a].resolved ? s->ops[ref->a].end : -1.0);
            if (t < 0.0) return progress;
            stall_until(r, sp, t);
            handle_drop(r, ref);
            break;
        case PL_EV_SEND:
            if (check_peer(s, rank, i, e)) return -1;
            if (!r->pending) {
                r->evop[i] = new_send(s, rank, e);
                r->pending = 1;
                progress = 1;
            }
            resolve_queue(s, rank);
            if (!s->ops[r->evop[i]].resolved) return progress;
            t = r->tc;
            stall_until(r, sp, s->ops[r->evop[i]].end);
            sp->start = t;
            r->pending = 0;
            break;
        case PL_EV_ISEND:
            if (check_peer(s, rank, i, e)) return -1;
            r->evop[i] = new_send(s, rank, e);
            handle_put(r, e->handle, 0, r->evop[i], 0);
            break;
        case PL_EV_RECV:
            if (check_peer(s, rank, i, e)) return -1;
            if (!r->pending) {
                r->pend_a = channel(s, e->peer, rank, e->tag);
                r->pend_b = s->ch[r->pend_a].nrecvs++;
                r->pending = 1;
                progress = 1;
            }
            t = arrival(s, r->pend_a, r->pend_b);
            if (t < 0.0) return progress;
            stall_until(r, sp, t);
            r->pending = 0;
            break;
        case PL_EV_IRECV:
            if (check_peer(s, rank, i, e)) return -1;
            c = channel(s, e->peer, rank, e->tag);
            handle_put(r, e->handle, 1, c, s->ch[c].nrecvs++);
            stall_until(r, sp, r->tc);
            break;
        default:
            return fail(s, "rank %d event %d has unknown type %d", rank, i, (int)e->type);
        }
        r->pc++;
        progress = 1;
    }
    return progress;
}

/* ---- the report of a trace that cannot complete ---- */

static const char *where_is(const struct sim *s, int rank, char *buf, size_t len)
{
    const struct rank_state *r = &s->rs[rank];
    if (r->pc >= s->m->nevents[rank]) {
        snprintf(buf, len, "rank %d has finished its %d events", rank, s->m->nevents[rank]);
        return buf;
    }
    const struct pl_event *e = &s->m->events[rank][r->pc];
    snprintf(buf, len, "rank %d is itself blocked at event %d (%s", rank, r->pc,
             pl_ev_type_name(e->type));
    size_t n = strlen(buf);
    if (e->type == PL_EV_ISSUE)
        snprintf(buf + n, len - n, " %s on group %d)", kind_name(e->kind), e->group);
    else if (e->type >= PL_EV_SEND)
        snprintf(buf + n, len - n, " %s rank %d, tag %d)",
                 e->type == PL_EV_SEND || e->type == PL_EV_ISEND ? "to" : "from", e->peer, e->tag);
    else if (e->type == PL_EV_WAIT)
        snprintf(buf + n, len - n, " for handle %ld)", e->handle);
    else
        snprintf(buf + n, len - n, ")");
    return buf;
}

/* Why op (a collective) cannot start. */
static void why_coll(const struct sim *s, int id, char *buf, size_t len)
{
    const struct op *o = &s->ops[id];
    const struct pl_group_def *g = &s->m->groups[o->group];
    char w[160], nth[16];
    size_t n = (size_t)snprintf(buf, len, "the %s collective on group %d (%s, %d ranks)",
                                ordinal(o->k, nth, sizeof nth), g->id, kind_name(o->kind), g->n);
    for (int i = 0; i < g->n && n < len; i++) {
        int m = g->ranks[i];
        if (!o->issued[i]) {
            n += (size_t)snprintf(buf + n, len - n, "; rank %d never issues it: %s", m,
                                  where_is(s, m, w, sizeof w));
            return;
        }
    }
    for (int i = 0; i < g->n && n < len; i++) {
        const struct lane *q = &s->rs[g->ranks[i]].cs[o->lane];
        if (q->queue[q->qdone] != id) {
            const struct op *h = &s->ops[q->queue[q->qdone]];
            if (h->type == OP_COLL)
                snprintf(buf + n, len - n, "; rank %d's comm stream is still held by the %s "
                         "collective on group %d (%s), which cannot start", g->ranks[i],
                         ordinal(h->k, nth, sizeof nth), s->m->groups[h->group].id,
                         kind_name(h->kind));
            else
                snprintf(buf + n, len - n, "; rank %d's comm stream is held by an earlier send",
                         g->ranks[i]);
            return;
        }
    }
}

static void why_recv(const struct sim *s, int c, int k, char *buf, size_t len)
{
    const struct channel *ch = &s->ch[c];
    char w[160], nth[16];
    snprintf(buf, len, "the %s message from rank %d with tag %d, but rank %d has sent only %d "
             "such messages: %s", ordinal(k, nth, sizeof nth), ch->src, ch->tag, ch->src,
             ch->nsends, where_is(s, ch->src, w, sizeof w));
}

static int report_deadlock(struct sim *s)
{
    char why[512];
    for (int rank = 0; rank < s->m->nranks; rank++) {
        const struct rank_state *r = &s->rs[rank];
        if (r->pc >= s->m->nevents[rank]) continue;
        const struct pl_event *e = &s->m->events[rank][r->pc];
        const struct handle_ref *ref = NULL;
        why[0] = '\0';
        switch (e->type) {
        case PL_EV_ISSUE: why_coll(s, r->evop[r->pc], why, sizeof why); break;
        case PL_EV_SEND: {
            const struct lane *q = &r->cs[s->ops[r->evop[r->pc]].lane];
            snprintf(why, sizeof why, "its comm stream, held by an earlier operation");
            if (q->qdone < q->qn && s->ops[q->queue[q->qdone]].type == OP_COLL) {
                size_t n = strlen(why);
                snprintf(why + n, sizeof why - n, ": ");
                why_coll(s, q->queue[q->qdone], why + n + 2, sizeof why - n - 2);
            }
            break;
        }
        case PL_EV_RECV: why_recv(s, r->pend_a, r->pend_b, why, sizeof why); break;
        case PL_EV_WAIT:
            for (int i = r->nh - 1; i >= 0; i--)
                if (r->handles[i].h == e->handle) ref = &r->handles[i];
            if (ref && ref->is_recv) why_recv(s, ref->a, ref->b, why, sizeof why);
            else if (ref && s->ops[ref->a].type == OP_COLL) why_coll(s, ref->a, why, sizeof why);
            else snprintf(why, sizeof why, "its send, queued behind an operation that cannot "
                                           "start");
            break;
        default: break;
        }
        return fail(s, "the trace cannot complete (deadlock): rank %d event %d (%s) waits for %s",
                    rank, r->pc, pl_ev_type_name(e->type), why);
    }
    /* Every rank ran to its end, yet a collective was never completed by all members. */
    for (int id = 0; id < s->nops; id++) {
        if (s->ops[id].resolved) continue;
        if (s->ops[id].type == OP_COLL) {
            why_coll(s, id, why, sizeof why);
            return fail(s, "the trace cannot complete: %s", why);
        }
        return fail(s, "the trace cannot complete: a send from rank %d to rank %d never starts",
                    s->ops[id].src, s->ops[id].dst);
    }
    return fail(s, "the trace cannot complete");
}

/* ---- run ---- */

static void sim_free(struct sim *s)
{
    int nranks = s->m->nranks;
    for (int r = 0; s->rs && r < nranks; r++) {
        for (int l = 0; l < PL_NLINKS; l++) free(s->rs[r].cs[l].queue);
        free(s->rs[r].gcount);
        free(s->rs[r].handles);
        free(s->rs[r].evop);
    }
    free(s->rs);
    for (int i = 0; i < s->nops; i++) {
        free(s->ops[i].issue_t);
        free(s->ops[i].issued);
    }
    free(s->ops);
    for (int g = 0; s->gops && g < s->m->ngroups; g++) free(s->gops[g]);
    free(s->gops);
    free(s->gnops);
    free(s->gcap);
    free(s->glink);
    for (int c = 0; c < s->nch; c++) free(s->ch[c].sends);
    free(s->ch);
    free(s->htab);
}

static int check_inputs(struct sim *s)
{
    const struct pl_merged_trace *m = s->m;
    const struct pl_profile *p = s->p;
    if (!(p->flops > 0.0))
        return fail(s, "profile %s has a compute rate of %g FLOP/s; it must be positive",
                    p->name ? p->name : "(unnamed)", p->flops);
    for (int l = 0; l < PL_NLINKS; l++)
        if (!(p->bw[l] > 0.0) || !(p->latency[l] >= 0.0))
            return fail(s, "profile %s: %s links need a positive bandwidth and a latency >= 0",
                        p->name ? p->name : "(unnamed)", pl_link_name(l));
    if (s->topo && s->topo->world < m->nranks)
        return fail(s, "the trace has %d ranks but the topology only %d", m->nranks,
                    s->topo->world);
    for (int g = 0; g < m->ngroups; g++)
        for (int i = 0; i < m->groups[g].n; i++)
            if (m->groups[g].ranks[i] < 0 || m->groups[g].ranks[i] >= m->nranks)
                return fail(s, "group %d lists rank %d, outside the trace's %d ranks",
                            m->groups[g].id, m->groups[g].ranks[i], m->nranks);
    return 0;
}

int pl_replay_run(const struct pl_merged_trace *m, const struct pl_profile *p,
                  const struct pl_topo *topo, struct pl_replay *out, char *err, size_t errlen)
{
    return pl_replay_run_streams(m, p, topo, PL_REPLAY_ONE_STREAM, out, err, errlen);
}

/* 1 while some comm stream of r holds an unresolved operation. */
static int queued(const struct rank_state *r)
{
    for (int l = 0; l < PL_NLINKS; l++)
        if (r->cs[l].qdone < r->cs[l].qn) return 1;
    return 0;
}

int pl_replay_run_streams(const struct pl_merged_trace *m, const struct pl_profile *p,
                          const struct pl_topo *topo, enum pl_replay_streams streams,
                          struct pl_replay *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (err && errlen) err[0] = '\0';
    struct sim s;
    memset(&s, 0, sizeof s);
    s.m = m;
    s.p = p;
    s.topo = topo;
    s.per_link = streams == PL_REPLAY_STREAM_PER_LINK && !p->torus;
    s.out = out;
    s.err = err;
    s.errlen = errlen;
    if (check_inputs(&s) != 0) return -1;

    int nranks = m->nranks;
    out->nranks = nranks;
    out->rank = xcalloc((size_t)nranks, sizeof *out->rank);
    out->span = xcalloc((size_t)nranks, sizeof *out->span);
    s.rs = xcalloc((size_t)nranks, sizeof *s.rs);
    int ng = m->ngroups;
    s.gops = xcalloc((size_t)ng, sizeof *s.gops);
    s.gnops = xcalloc((size_t)ng, sizeof *s.gnops);
    s.gcap = xcalloc((size_t)ng, sizeof *s.gcap);
    s.glink = xcalloc((size_t)ng, sizeof *s.glink);
    if (p->torus) pl_torus_shape(nranks, s.tdims);
    for (int g = 0; g < ng; g++)
        s.glink[g] = topo ? pl_topo_group_link(topo, m->groups[g].ranks, m->groups[g].n)
                          : PL_LINK_INTRA;
    for (int r = 0; r < nranks; r++) {
        int n = m->nevents[r];
        out->span[r] = xcalloc((size_t)n, sizeof *out->span[r]);
        s.rs[r].gcount = xcalloc((size_t)ng, sizeof *s.rs[r].gcount);
        s.rs[r].evop = xcalloc((size_t)n, sizeof *s.rs[r].evop);
        for (int i = 0; i < n; i++) s.rs[r].evop[i] = -1;
    }

    int rc = 0;
    for (;;) {
        int progress = 0, done = 1;
        for (int r = 0; r < nranks && rc == 0; r++) {
            int a = advance(&s, r);
            if (a < 0) rc = -1;
            else progress |= a;
            progress |= resolve_queue(&s, r);
        }
        if (rc != 0) break;
        for (int r = 0; r < nranks; r++)
            if (s.rs[r].pc < m->nevents[r] || queued(&s.rs[r])) done = 0;
        if (done) break;
        if (!progress) {
            rc = report_deadlock(&s);
            break;
        }
    }

    if (rc == 0) {
        for (int r = 0; r < nranks; r++) {
            struct rank_state *st = &s.rs[r];
            for (int i = 0; i < m->nevents[r]; i++) {
                if (st->evop[i] < 0) continue;
                out->span[r][i].start = s.ops[st->evop[i]].start;
                out->span[r][i].end = s.ops[st->evop[i]].end;
                out->span[r][i].stream = 1;
            }
            struct pl_rank_time *rt = &out->rank[r];
            rt->end = st->tc;
            for (int l = 0; l < PL_NLINKS; l++) rt->end = fmax(rt->end, st->cs[l].free);
            rt->compute = st->compute;
            rt->comm = st->comm;
            rt->exposed_comm = st->exposed;
            out->step_time = fmax(out->step_time, rt->end);
        }
        for (int r = 0; r < nranks; r++) out->rank[r].idle = out->step_time - out->rank[r].compute;
    }
    sim_free(&s);
    if (rc != 0) pl_replay_free(out);
    return rc;
}

void pl_replay_free(struct pl_replay *r)
{
    for (int i = 0; r->span && i < r->nranks; i++) free(r->span[i]);
    free(r->span);
    free(r->rank);
    memset(r, 0, sizeof *r);
}

double pl_replay_idle_fraction(const struct pl_replay *r)
{
    if (r->nranks == 0 || r->step_time <= 0.0) return 0.0;
    double idle = 0.0;
    for (int i = 0; i < r->nranks; i++) idle += r->rank[i].idle;
    return idle / (r->nranks * r->step_time);
}
