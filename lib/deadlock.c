/* deadlock.c: the deadlock judge and watch of deadlock.h. A record (trace_status.h) is
 * read back into what the rank waits in: nothing (it runs), a point-to-point call, a
 * collective of the communication layer (op, count, group, its call number there), a
 * blocking MPI call of the kit's own code (mpi_where.c), or the end of the run. Only a
 * group whose every rank is in one and the same call can move; when none can and every
 * rank waits, nothing will ever change. */
#include "deadlock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "proc.h"

enum wait_kind { W_RUNS, W_P2P, W_COLL, W_KIT_COLL, W_KIT, W_DONE, W_OTHER };

struct waits {
    enum wait_kind kind;
    char op[32];        /* all_reduce, ...; MPI_Allreduce, ... for the kit's calls */
    char group[40];     /* the group's name (W_COLL) */
    size_t count;
    long call;          /* W_COLL: the call's number among the group's collectives */
    int id, size;       /* the group's id (W_COLL) and size (W_COLL, W_KIT_COLL) */
};

static int starts(const char *s, const char *prefix)
{
    return !strncmp(s, prefix, strlen(prefix));
}

/* A collective's record, PL_WHERE_COLL_FMT after an optional "wait h=N ". */
static int read_collective(const char *line, struct waits *w)
{
    const char *tail = strstr(line, ", call ");
    if (!tail || sscanf(tail, ", call %ld on group #%d of %d ranks", &w->call, &w->id,
                        &w->size) != 3)
        return 0;
    const char *p = line;
    if (starts(p, "wait h=")) {
        p = strchr(p + 7, ' ');
        if (!p) return 0;
        p++;
    }
    const char *sp = strchr(p, ' ');
    if (!sp || (size_t)(sp - p) >= sizeof w->op) return 0;
    memcpy(w->op, p, (size_t)(sp - p));
    w->op[sp - p] = '\0';
    /* The count is the last " count=" before the tail: a group's name may hold anything. */
    const char *c = NULL;
    for (const char *q = strstr(sp, " count="); q && q < tail; q = strstr(q + 1, " count="))
        c = q;
    if (!c) return 0;
    snprintf(w->group, sizeof w->group, "%.*s", (int)(c - sp - 1), sp + 1);
    w->count = (size_t)strtoull(c + 7, NULL, 10);
    w->kind = W_COLL;
    return 1;
}

static struct waits read_line(const char *line)
{
    struct waits w;
    memset(&w, 0, sizeof w);
    w.kind = W_OTHER;
    if (!line[0] || starts(line, "after ") || starts(line, "span ") ||
        strstr(line, "before its first message") || strstr(line, "MPI_Abort"))
        w.kind = W_RUNS;
    else if (starts(line, "pl_finalize"))
        w.kind = W_DONE;
    else if (read_collective(line, &w))
        ;
    else if (starts(line, "MPI_")) {
        const char *sp = strchr(line, ' ');
        size_t n = sp ? (size_t)(sp - line) : strlen(line);
        snprintf(w.op, sizeof w.op, "%.*s", (int)n, line);
        const char *on = strstr(line, ", on ");
        w.kind = on && sscanf(on, ", on %d ranks", &w.size) == 1 ? W_KIT_COLL : W_KIT;
    } else if (starts(line, "send ") || starts(line, "recv ") || starts(line, "sendrecv ") ||
               starts(line, "wait h="))
        w.kind = W_P2P;
    return w;
}

int pl_deadlock_in_collective(const char *line)
{
    enum wait_kind k = read_line(line).kind;
    return k == W_COLL || k == W_KIT_COLL;
}

static int same_call(const struct waits *a, const struct waits *b)
{
    if (a->kind != b->kind || strcmp(a->op, b->op) || a->size != b->size) return 0;
    return a->kind != W_COLL || (a->id == b->id && a->call == b->call && a->count == b->count);
}

/* "ranks 0, 2 and 3" of the ranks r with pick[r] set. */
static void rank_list(char *buf, size_t len, const int *pick, int np)
{
    int n = 0, total = 0;
    for (int r = 0; r < np; r++) total += pick[r];
    size_t at = (size_t)snprintf(buf, len, "%s", total == 1 ? "rank" : "ranks");
    for (int r = 0; r < np && at < len; r++) {
        if (!pick[r]) continue;
        n++;
        const char *sep = n == 1 ? " " : n == total ? " and " : ", ";
        at += (size_t)snprintf(buf + at, len - at, "%s%d", sep, r);
    }
}

/* Appends to why what every rank of the group of rank `first` waits in. */
static size_t say_group(char *why, size_t len, size_t at, const struct waits *w, int np,
                        int first, int *said)
{
    const struct waits *g = &w[first];
    int *pick = calloc((size_t)np, sizeof *pick);
    if (!pick) pl_fatal("out of memory");
    int in_group = 0;
    if (at < len)
        at += (size_t)snprintf(why + at, len - at, "on group '%s' (#%d, %d ranks):", g->group,
                               g->id, g->size);
    for (int r = first; r < np; r++) {
        if (said[r] || w[r].kind != W_COLL || w[r].id != g->id) continue;
        int n = 0;
        memset(pick, 0, (size_t)np * sizeof *pick);
        for (int q = r; q < np; q++) {
            pick[q] = !said[q] && w[q].kind == W_COLL && same_call(&w[q], &w[r]);
            n += pick[q];
        }
        char ranks[256];
        rank_list(ranks, sizeof ranks, pick, np);
        if (at < len)
            at += (size_t)snprintf(why + at, len - at, "%s %s %s in %s call %ld there, %s "
                                   "count=%zu", in_group ? ";" : "", ranks,
                                   n == 1 ? "waits" : "wait", n == 1 ? "its" : "their", w[r].call, w[r].op, w[r].count);
        for (int q = r; q < np; q++)
            if (pick[q]) said[q] = 1;
        in_group += n;
    }
    int missing = g->size - in_group;
    if (missing > 0 && g->size == np) {
        /* The whole job's group: the ranks it misses are the others. */
        for (int r = 0; r < np; r++) pick[r] = !(w[r].kind == W_COLL && w[r].id == g->id);
        char ranks[256];
        rank_list(ranks, sizeof ranks, pick, np);
        if (at < len)
            at += (size_t)snprintf(why + at, len - at, "; %s %s in no collective on it", ranks,
                                   missing == 1 ? "is" : "are");
    } else if (missing > 0 && at < len)
        at += (size_t)snprintf(why + at, len - at, "; %d of its ranks %s in no collective on "
                               "it", missing, missing == 1 ? "is" : "are");
    if (at < len) at += (size_t)snprintf(why + at, len - at, "\n");
    free(pick);
    return at;
}

enum pl_stuck pl_deadlock_judge(const char *const *lines, int np, char *why, size_t len)
{
    if (len) why[0] = '\0';
    if (np < 2) return PL_STUCK_NO;
    struct waits *w = calloc((size_t)np, sizeof *w);
    if (!w) pl_fatal("out of memory");
    int runs = 0, done = 0, coll = 0, p2p = 0, can_move = 0;
    for (int r = 0; r < np; r++) {
        w[r] = read_line(lines[r]);
        runs += w[r].kind == W_RUNS;
        done += w[r].kind == W_DONE;
        coll += w[r].kind == W_COLL;
        p2p += w[r].kind == W_P2P;
    }
    /* A group whose every rank is in the same collective completes it, however slowly. */
    for (int r = 0; r < np && !can_move; r++) {
        if (w[r].kind != W_COLL && w[r].kind != W_KIT_COLL) continue;
        int same = 0;
        for (int q = 0; q < np; q++) same += same_call(&w[q], &w[r]);
        can_move = same >= w[r].size;
    }
    enum pl_stuck v = runs || can_move || done == np ? PL_STUCK_NO
                      : coll || !p2p              ? PL_STUCK_COLLECTIVE
                                                  : PL_STUCK_P2P;
    if (v == PL_STUCK_COLLECTIVE && len) {
        int *said = calloc((size_t)np, sizeof *said);
        if (!said) pl_fatal("out of memory");
        size_t at = 0;
        for (int r = 0; r < np; r++)
            if (w[r].kind == W_COLL && !said[r]) at = say_group(why, len, at, w, np, r, said);
        free(said);
    }
    free(w);
    return v;
}

const char *pl_deadlock_advice(enum pl_stuck kind)
{
    if (kind == PL_STUCK_COLLECTIVE)
        return "a collective returns only when every rank of its group has called it: the same "
               "collective with the same count, as the same call in order (each rank's k-th "
               "collective on a group meets the k-th of every other member). Look for a rank "
               "that skips a call (a condition on its rank, a loop bound that differs between "
               "ranks), makes its calls in another order, or goes on before the others.";
    return "ranks that wait for each other in a cycle never return: check that every receive "
           "has a matching send on the peer, posted so that neither waits for the other "
           "first.";
}

void pl_deadlock_watch_start(struct pl_deadlock_watch *w, const char *status_dir, int np,
                             double quiet_s)
{
    memset(w, 0, sizeof *w);
    w->status_dir = status_dir;
    w->np = np;
    w->quiet_s = quiet_s;
    w->last = calloc((size_t)(np > 0 ? np : 1), sizeof *w->last);
    if (!w->last) pl_fatal("out of memory");
    w->quiet_since = pl_clock();
}

int pl_deadlock_watch_tick(struct pl_deadlock_watch *w)
{
    if (w->verdict != PL_STUCK_NO) return 1;
    double now = pl_clock();
    if (now < w->next_look || w->np < 2) return 0;
    w->next_look = now + 0.25;
    int changed = 0;
    const char **lines = malloc((size_t)w->np * sizeof *lines);
    if (!lines) pl_fatal("out of memory");
    for (int r = 0; r < w->np; r++) {
        char buf[PL_STATUS_BYTES];
        if (pl_trace_read_status(w->status_dir, r, buf, sizeof buf) != 0) buf[0] = '\0';
        if (strcmp(buf, w->last[r])) changed = 1;
        memcpy(w->last[r], buf, sizeof buf);
        lines[r] = w->last[r];
    }
    if (changed) w->quiet_since = now;
    else if (now - w->quiet_since >= w->quiet_s)
        w->verdict = pl_deadlock_judge(lines, w->np, w->why, sizeof w->why);
    free(lines);
    return w->verdict != PL_STUCK_NO;
}

void pl_deadlock_watch_end(struct pl_deadlock_watch *w)
{
    free(w->last);
    w->last = NULL;
}
