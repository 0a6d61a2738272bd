/* trace_read.c: the inverse of pl_trace_write_json (trace_read.h). The writer puts one
 * event a line, every field of struct pl_event in its "args", and the groups in
 * "otherData"; this reads exactly that shape, not JSON in general. */
#include "trace_read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"

#define TR_MAX_LINE 4096
#define TR_MAX_RANKS 4096

/* The number after "key": on the line, or 0 when absent. */
static double field_num(const char *line, const char *key, int *found)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    if (found) *found = p != NULL;
    return p ? strtod(p + strlen(pat), NULL) : 0.0;
}

/* The string after "key":" on the line, into buf. */
static int field_str(const char *line, const char *key, char *buf, size_t len)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = strstr(line, pat);
    if (!p) return 0;
    p += strlen(pat);
    size_t n = 0;
    while (p[n] && p[n] != '"' && n + 1 < len) n++;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return 1;
}

static int ev_type_of(const char *name)
{
    for (int t = 0; t < PL_EV_NTYPES; t++)
        if (!strcmp(pl_ev_type_name((enum pl_ev_type)t), name)) return t;
    return -1;
}

static int coll_kind_of(const char *name)
{
    for (int k = 0; k < PL_NKINDS; k++)
        if (!strcmp(pl_coll_kind_name((enum pl_coll_kind)k), name)) return k;
    return -1;
}

static void add_event(struct pl_merged_trace *m, int *cap, int r, const struct pl_event *e)
{
    if (m->nevents[r] == cap[r]) {
        cap[r] = cap[r] ? 2 * cap[r] : 64;
        m->events[r] = realloc(m->events[r], (size_t)cap[r] * sizeof *e);
        if (!m->events[r]) abort();
    }
    m->events[r][m->nevents[r]++] = *e;
}

/* "otherData":{"groups":{"0":"0 1 2 3","5":"0 2"}} */
static void read_groups(struct pl_merged_trace *m, const char *line)
{
    const char *p = strstr(line, "\"groups\":{");
    if (!p) return;
    p += strlen("\"groups\":{");
    while (*p == '"') {
        int id = (int)strtol(p + 1, NULL, 10);
        const char *q = strchr(p + 1, '"');
        if (!q || strncmp(q, "\":\"", 3)) return;
        q += 3;
        struct pl_group_def g = {id, 0, malloc(TR_MAX_RANKS * sizeof(int))};
        while (*q && *q != '"') {
            char *end;
            long v = strtol(q, &end, 10);
            if (end == q) break;
            if (g.n < TR_MAX_RANKS) g.ranks[g.n++] = (int)v;
            q = end;
        }
        m->groups = realloc(m->groups, (size_t)(m->ngroups + 1) * sizeof *m->groups);
        m->groups[m->ngroups++] = g;
        p = q + (*q == '"');
        if (*p == ',') p++;
    }
}

int pl_trace_read_json(const char *path, struct pl_merged_trace *out, char *err,
                       size_t errlen)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot open the trace %s (write one with --trace FILE or "
                 "PL_TRACE=FILE on any paralab run)", path);
        return -1;
    }
    out->nevents = calloc(TR_MAX_RANKS, sizeof *out->nevents);
    out->events = calloc(TR_MAX_RANKS, sizeof *out->events);
    int *cap = calloc(TR_MAX_RANKS, sizeof *cap);
    char *line = malloc(TR_MAX_LINE);
    if (!out->nevents || !out->events || !cap || !line) abort();
    int lineno = 0, bad = 0;
    while (!bad && fgets(line, TR_MAX_LINE, f)) {
        lineno++;
        if (strstr(line, "\"otherData\"")) read_groups(out, line);
        char tname[32], kname[32];
        if (!strstr(line, "\"args\":{\"event\":") || !field_str(line, "event", tname, sizeof tname))
            continue;
        int r = (int)field_num(line, "pid", NULL), t = ev_type_of(tname);
        if (r < 0 || r >= TR_MAX_RANKS || t < 0) {
            snprintf(err, errlen, "%s:%d: an event of rank %d, type \"%s\": not a paralab trace "
                     "event", path, lineno, r, tname);
            bad = 1;
            break;
        }
        struct pl_event e = {0};
        e.type = (enum pl_ev_type)t;
        field_str(line, "name", e.label, sizeof e.label);
        e.flops = field_num(line, "flops", NULL);
        if (field_str(line, "kind", kname, sizeof kname)) {
            int k = coll_kind_of(kname);
            e.kind = k < 0 ? PL_ALL_REDUCE : (enum pl_coll_kind)k;
        }
        e.group = (int)field_num(line, "group", NULL);
        e.bytes = field_num(line, "bytes", NULL);
        e.peer = (int)field_num(line, "peer", NULL);
        e.tag = (int)field_num(line, "tag", NULL);
        e.handle = (long)field_num(line, "handle", NULL);
        e.t0 = field_num(line, "ts", NULL) * 1e-6;
        e.t1 = e.t0 + field_num(line, "dur", NULL) * 1e-6;
        add_event(out, cap, r, &e);
        if (r + 1 > out->nranks) out->nranks = r + 1;
    }
    fclose(f);
    free(line);
    free(cap);
    if (!bad && out->nranks == 0) {
        snprintf(err, errlen, "%s holds no paralab trace events (is it a trace written with "
                 "--trace FILE?)", path);
        bad = 1;
    }
    if (bad) {
        out->nranks = TR_MAX_RANKS;
        pl_trace_merged_free(out);
        return -1;
    }
    return 0;
}
