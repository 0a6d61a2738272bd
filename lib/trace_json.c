/* trace_json.c: a merged trace (trace.h) written as Chrome trace JSON, one process per rank
 * with a compute and a comm thread, which Perfetto and chrome://tracing open. lib/trace_read.c
 * reads the same format back. */
#include "trace.h"

#include <stdio.h>

#include "json.h"

static const struct pl_group_def *merged_group(const struct pl_merged_trace *m, int id)
{
    for (int i = 0; i < m->ngroups; i++)
        if (m->groups[i].id == id) return &m->groups[i];
    return NULL;
}

static void event_name(const struct pl_merged_trace *m, const struct pl_event *e, char *buf,
                       size_t len)
{
    const struct pl_group_def *g;
    switch (e->type) {
    case PL_EV_COMPUTE: snprintf(buf, len, "%s", e->label[0] ? e->label : "compute"); return;
    case PL_EV_ISSUE:
        g = merged_group(m, e->group);
        if (e->label[0]) snprintf(buf, len, "%s", e->label);
        else snprintf(buf, len, "%s (%d ranks)", pl_coll_kind_name(e->kind), g ? g->n : 0);
        return;
    case PL_EV_WAIT: snprintf(buf, len, "wait%s%s", e->label[0] ? " " : "", e->label); return;
    case PL_EV_SEND:
    case PL_EV_ISEND: snprintf(buf, len, "%s to %d", pl_ev_type_name(e->type), e->peer); return;
    case PL_EV_RECV:
    case PL_EV_IRECV: snprintf(buf, len, "%s from %d", pl_ev_type_name(e->type), e->peer); return;
    default: snprintf(buf, len, "event %d", (int)e->type); return;
    }
}

int pl_trace_write_json(const struct pl_merged_trace *m, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
    int first = 1;
    for (int r = 0; r < m->nranks; r++) {
        fprintf(f, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                   "\"args\":{\"name\":\"rank %d\"}},\n",
                first ? "" : ",\n", r, r);
        fprintf(f, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                   "\"args\":{\"sort_index\":%d}},\n", r, r);
        fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                   "\"args\":{\"name\":\"compute\"}},\n", r);
        fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,"
                   "\"args\":{\"name\":\"comm\"}}", r);
        first = 0;
        for (int i = 0; i < m->nevents[r]; i++) {
            const struct pl_event *e = &m->events[r][i];
            char name[PL_LABEL_LEN + 64];
            event_name(m, e, name, sizeof name);
            double dur = e->t1 > e->t0 ? e->t1 - e->t0 : 0.0;
            fputs(",\n{\"name\":", f);
            pl_json_string(f, name);
            fprintf(f, ",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":",
                    e->type == PL_EV_COMPUTE ? "compute" : "comm", r,
                    e->type == PL_EV_COMPUTE ? 0 : 1);
            pl_json_number(f, e->t0 * 1e6);
            fputs(",\"dur\":", f);
            pl_json_number(f, dur * 1e6);
            fprintf(f, ",\"args\":{\"event\":\"%s\",\"index\":%d", pl_ev_type_name(e->type), i);
            if (e->type == PL_EV_COMPUTE) {
                fputs(",\"flops\":", f);
                pl_json_number(f, e->flops);
            } else {
                if (e->type == PL_EV_ISSUE || e->type == PL_EV_WAIT)
                    fprintf(f, ",\"kind\":\"%s\",\"group\":%d", pl_coll_kind_name(e->kind),
                            e->group);
                if (e->type != PL_EV_WAIT) {
                    fputs(",\"bytes\":", f);
                    pl_json_number(f, e->bytes);
                }
                if (e->type >= PL_EV_SEND) fprintf(f, ",\"peer\":%d,\"tag\":%d", e->peer, e->tag);
                if (e->handle > 0) fprintf(f, ",\"handle\":%ld", e->handle);
            }
            fputs("}}", f);
        }
    }
    fputs("\n],\"otherData\":{\"groups\":{", f);
    for (int i = 0; i < m->ngroups; i++) {
        fprintf(f, "%s\"%d\":\"", i ? "," : "", m->groups[i].id);
        for (int k = 0; k < m->groups[i].n; k++)
            fprintf(f, "%s%d", k ? " " : "", m->groups[i].ranks[k]);
        fputc('"', f);
    }
    fputs("}}}\n", f);
    int bad = ferror(f);
    if (fclose(f) != 0) bad = 1;
    return bad ? -1 : 0;
}
