/* test_trace: on the launched ranks, record compute spans and real communication, gather the
 * trace to rank 0, check every rank's events in order, write the Chrome trace JSON and check
 * its structure (balanced outside strings, valid escapes, one "X" event per trace event, per
 * rank in order), and check the status files a supervisor reads after killing a job. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paralab.h"
#include "testing.h"


/* Quotes, a backslash, control characters and a non-ASCII letter: all must survive JSON. */
static const char *const odd_label = "fwd \"q\" \\ \n\t \xc3\xa9";
static const char *const odd_json = "\"fwd \\\"q\\\" \\\\ \\u000a\\u0009 \xc3\xa9\"";

/* 38 letters then a 2-byte character: the 40-byte label keeps only its first byte. */
#define LONG_LABEL "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\xc3\xa9"

static double flops_of(int rank, int phase) { return 100.0 * (rank + 1) * phase; }

/* What each rank records, in order. The buffers are comm buffers (device memory on the GPU
 * build), allocated before recording starts; their values do not matter here. */
static void record(int n, int me, long *async_handle)
{
    float *x = pl_comm_buf_alloc(1, "x"), *y = pl_comm_buf_alloc(1, "y");
    float *ring = pl_comm_buf_alloc(3, "ring"), *got = pl_comm_buf_alloc(3, "got");
    float *part = pl_comm_buf_alloc(2, "part"), *whole = pl_comm_buf_alloc(2 * (size_t)n, "whole");
    const float zeros[3] = {0, 0, 0};
    pl_copy_from_host(x, zeros, 1);
    pl_copy_from_host(ring, zeros, 3);
    pl_copy_from_host(part, zeros, 2);
    pl_trace_clear();

    pl_span(odd_label);
    pl_ledger_add_flops(flops_of(me, 1));
    pl_all_reduce(pl_comm_world(), x, y, 1, PL_SUM);       /* issue + wait */

    pl_span("bwd");
    pl_ledger_add_flops(flops_of(me, 2));
    pl_sendrecv(pl_comm_world(), ring, 3, (me + 1) % n, got, 3, (me - 1 + n) % n, 5);

    struct pl_handle *h = pl_all_gather_async(pl_comm_world(), part, whole, 2);
    *async_handle = pl_trace_events()[pl_trace_count() - 1].handle;
    pl_span("opt");
    pl_ledger_add_flops(flops_of(me, 3));
    pl_wait(h);

    pl_span(LONG_LABEL);
    pl_ledger_add_flops(1.0);
    pl_trace_flush();
    pl_comm_buf_free(x);
    pl_comm_buf_free(y);
    pl_comm_buf_free(ring);
    pl_comm_buf_free(got);
    pl_comm_buf_free(part);
    pl_comm_buf_free(whole);
}

struct want {
    enum pl_ev_type type;
    const char *label; /* compute only */
    double flops;
    enum pl_coll_kind kind;
    int peer;
    double bytes;
};

static void check_rank_events(const struct pl_merged_trace *m, int r, long handle)
{
    int n = m->nranks;
    char long_cut[PL_LABEL_LEN]; /* the label as the trace keeps it: cut to fit */
    memcpy(long_cut, LONG_LABEL, PL_LABEL_LEN - 1);
    long_cut[PL_LABEL_LEN - 1] = '\0';
    const struct want want[] = {
        {PL_EV_COMPUTE, odd_label, flops_of(r, 1), 0, -1, 0},
        {PL_EV_ISSUE, NULL, 0, PL_ALL_REDUCE, -1, 4},
        {PL_EV_WAIT, NULL, 0, PL_ALL_REDUCE, -1, 0},
        {PL_EV_COMPUTE, "bwd", flops_of(r, 2), 0, -1, 0},
        {PL_EV_SEND, NULL, 0, PL_P2P, (r + 1) % n, 12},
        {PL_EV_RECV, NULL, 0, PL_P2P, (r - 1 + n) % n, 12},
        {PL_EV_ISSUE, NULL, 0, PL_ALL_GATHER, -1, 8.0 * n},
        {PL_EV_COMPUTE, "opt", flops_of(r, 3), 0, -1, 0},
        {PL_EV_WAIT, NULL, 0, PL_ALL_GATHER, -1, 0},
        {PL_EV_COMPUTE, long_cut, 1.0, 0, -1, 0},
    };
    int nw = (int)(sizeof want / sizeof want[0]);
    CHECK(m->nevents[r] == nw, "rank %d recorded %d events, expected %d", r, m->nevents[r], nw);
    for (int i = 0; i < nw && i < m->nevents[r]; i++) {
        const struct pl_event *e = &m->events[r][i];
        const struct want *w = &want[i];
        CHECK(e->type == w->type, "rank %d event %d is %s, expected %s", r, i,
              pl_ev_type_name(e->type), pl_ev_type_name(w->type));
        if (e->type != w->type) continue;
        if (w->type == PL_EV_COMPUTE) {
            CHECK(!strcmp(e->label, w->label), "rank %d event %d label '%s', expected '%s'", r, i,
                  e->label, w->label);
            CHECK(e->flops == w->flops, "rank %d event %d flops %g, expected %g", r, i, e->flops,
                  w->flops);
        } else if (w->type == PL_EV_ISSUE) {
            CHECK(e->kind == w->kind && e->group == 0, "rank %d event %d: %s on group %d", r, i,
                  pl_coll_kind_name(e->kind), e->group);
            CHECK(e->bytes == w->bytes, "rank %d event %d: S = %g bytes, expected %g", r, i,
                  e->bytes, w->bytes);
        } else if (w->type == PL_EV_SEND || w->type == PL_EV_RECV) {
            CHECK(e->peer == w->peer && e->tag == 5 && e->bytes == w->bytes,
                  "rank %d event %d: peer %d tag %d bytes %g, expected %d 5 %g", r, i, e->peer,
                  e->tag, e->bytes, w->peer, w->bytes);
        }
        CHECK(e->t0 <= e->t1, "rank %d event %d ends before it starts", r, i);
        if (i > 0) CHECK(e->t0 >= m->events[r][i - 1].t0, "rank %d event %d before event %d", r, i,
                         i - 1);
    }
    if (m->nevents[r] == nw) {
        CHECK(m->events[r][1].handle == 0 && m->events[r][2].handle == 0,
              "blocking all-reduce: issue and wait carry no handle (0), got %ld and %ld",
              m->events[r][1].handle, m->events[r][2].handle);
        CHECK(m->events[r][6].handle > 0 && m->events[r][6].handle == m->events[r][8].handle,
              "async all-gather: issue and wait share handle %ld", m->events[r][6].handle);
        if (r == 0) CHECK(m->events[r][6].handle == handle, "rank 0's handle");
    }
}

/* ---- a small structural JSON check ---- */

static int json_structure(const char *s, char *why, size_t len)
{
    char stack[64];
    int depth = 0, in_string = 0;
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (in_string) {
            if (c < 0x20) return snprintf(why, len, "raw control byte 0x%02x in a string at %ld",
                                          c, (long)(p - s)), -1;
            if (c == '\\') {
                p++;
                if (*p == 'u') {
                    for (int k = 1; k <= 4; k++)
                        if (!strchr("0123456789abcdefABCDEF", p[k]) || !p[k])
                            return snprintf(why, len, "bad \\u escape at %ld", (long)(p - s)), -1;
                    p += 4;
                } else if (!*p || !strchr("\"\\/bfnrt", *p)) {
                    return snprintf(why, len, "bad escape at %ld", (long)(p - s)), -1;
                }
            } else if (c == '"') {
                in_string = 0;
            }
            continue;
        }
        if (c == '"') in_string = 1;
        else if (c == '{' || c == '[') {
            if (depth == 64) return snprintf(why, len, "nested too deep"), -1;
            stack[depth++] = (char)c;
        } else if (c == '}' || c == ']') {
            char open = c == '}' ? '{' : '[';
            if (depth == 0 || stack[depth - 1] != open)
                return snprintf(why, len, "unbalanced '%c' at %ld", c, (long)(p - s)), -1;
            depth--;
        } else if (strchr("nN", c) && !strncmp(p, "nan", 3)) {
            return snprintf(why, len, "NaN outside a string"), -1;
        }
    }
    if (in_string) return snprintf(why, len, "unterminated string"), -1;
    if (depth) return snprintf(why, len, "%d unclosed brackets", depth), -1;
    return 0;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = calloc(1, (size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) buf[0] = '\0';
    fclose(f);
    return buf;
}

static void check_json(const struct pl_merged_trace *m, const char *path)
{
    CHECK(pl_trace_write_json(m, path) == 0, "writing %s", path);
    char *s = read_file(path);
    CHECK(s != NULL, "reading %s back", path);
    if (!s) return;
    char why[128] = "";
    CHECK(json_structure(s, why, sizeof why) == 0, "the trace JSON is malformed: %s", why);
    CHECK(s[0] == '{' && strstr(s, "\"traceEvents\":["), "a Chrome trace object");

    /* One complete ("X") event per trace event; per pid, indices 0, 1, 2, ... in order. */
    int total = 0, next[PL_TOPO_MAX_RANKS] = {0};
    for (int r = 0; r < m->nranks; r++) total += m->nevents[r];
    int xs = 0;
    for (const char *p = s; (p = strstr(p, "\"ph\":\"X\"")); p++) {
        xs++;
        const char *pid = strstr(p, "\"pid\":"), *tid = strstr(p, "\"tid\":");
        const char *idx = strstr(p, "\"index\":"), *ts = strstr(p, "\"ts\":");
        const char *dur = strstr(p, "\"dur\":");
        if (!pid || !idx || !tid || !ts || !dur) break;
        int r = atoi(pid + 6), i = atoi(idx + 8), t = atoi(tid + 6);
        CHECK(r >= 0 && r < m->nranks && i == next[r], "pid %d event index %d, expected %d", r, i,
              r >= 0 && r < m->nranks ? next[r] : -1);
        if (r >= 0 && r < m->nranks && i < m->nevents[r]) {
            int want_tid = m->events[r][i].type == PL_EV_COMPUTE ? 0 : 1;
            CHECK(t == want_tid, "pid %d event %d on tid %d, expected %d", r, i, t, want_tid);
            CHECK(fabs(atof(ts + 5) - m->events[r][i].t0 * 1e6) < 1e-3 && atof(dur + 6) >= 0,
                  "pid %d event %d: ts in microseconds", r, i);
            next[r]++;
        }
    }
    CHECK(xs == total, "%d complete events in the JSON, expected %d", xs, total);
    CHECK(strstr(s, odd_json) != NULL, "the odd label is escaped as %s", odd_json);
    CHECK(strstr(s, "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa?\"") != NULL,
          "a label cut inside a UTF-8 character keeps valid text");
    CHECK(strstr(s, "\"flops\":100") != NULL && strstr(s, "\"peer\":") != NULL &&
              strstr(s, "\"bytes\":12") != NULL,
          "args carry flops, peer, bytes");
    CHECK(strstr(s, "\"thread_name\"") && strstr(s, "\"name\":\"comm\""), "thread names");
    free(s);
}

/* ---- status files ---- */

static void check_status(const char *dir, int me)
{
    char buf[512], path[600];
    pl_span("step 3");
    CHECK(pl_trace_read_status(dir, me, buf, sizeof buf) == 0 && !strcmp(buf, "span \"step 3\""),
          "after pl_span the status says the span, got '%s'", buf);
    char what[64];
    snprintf(what, sizeof what, "recv world from %d", me);
    pl_trace_where(what);
    char want[128];
    snprintf(want, sizeof want, "%s (in span \"step 3\")", what);
    CHECK(pl_trace_read_status(dir, me, buf, sizeof buf) == 0 && !strcmp(buf, want),
          "status '%s', expected '%s'", buf, want);
    /* Read as a supervisor would, with plain file I/O. */
    snprintf(path, sizeof path, "%s/rank.%d", dir, me);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "status file %s exists", path);
    if (f) {
        char line[512] = "";
        CHECK(fgets(line, sizeof line, f) && !strncmp(line, want, strlen(want)) &&
                  line[strlen(want)] == '\n',
              "the file's first line is the status: '%s'", line);
        fclose(f);
    }
    /* Every rank's file, as the supervisor sees them after the job. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0)
        for (int r = 0; r < pl_size(); r++) {
            snprintf(want, sizeof want, "recv world from %d (in span \"step 3\")", r);
            CHECK(pl_trace_read_status(dir, r, buf, sizeof buf) == 0 && !strcmp(buf, want),
                  "rank %d's status '%s', expected '%s'", r, buf, want);
        }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(pl_trace_read_status(dir, pl_size() + 5, buf, sizeof buf) == -1, "no such rank");
}

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    int n = pl_size(), me = pl_rank();
    if (n > 64) pl_usage_error_all("test_trace runs on at most 64 ranks");

    char dir[256] = "";
    if (me == 0) {
        snprintf(dir, sizeof dir, "/tmp/paralab_trace_XXXXXX");
        if (!mkdtemp(dir)) pl_fatal("cannot make a temporary directory");
    }
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    /* As a supervisor would set it; the first communication call opens the file. */
    setenv("PL_STATUS_DIR", dir, 1);

    /* Disabled: nothing is recorded. */
    pl_trace_enable(0);
    float *x = pl_comm_buf_alloc(1, "x");
    pl_copy_from_host(x, (const float[]){1.0f}, 1);
    pl_ledger_add_flops(5);
    pl_all_reduce(pl_comm_world(), x, x, 1, PL_SUM);
    pl_comm_buf_free(x);
    CHECK(pl_trace_count() == 0, "a disabled trace records nothing (%d events)", pl_trace_count());
    char status[256];
    CHECK(pl_trace_read_status(dir, me, status, sizeof status) == 0 &&
              strstr(status, "all_reduce") != NULL,
          "the status file under $PL_STATUS_DIR names the last call, got '%s'", status);

    pl_trace_enable(1);
    long handle = 0;
    record(n, me, &handle);
    struct pl_merged_trace m;
    pl_trace_gather(&m);
    if (me == 0) {
        CHECK(m.nranks == n, "merged trace of %d ranks, expected %d", m.nranks, n);
        for (int r = 0; r < m.nranks; r++) check_rank_events(&m, r, handle);
        int world_group = 0;
        for (int g = 0; g < m.ngroups; g++)
            if (m.groups[g].id == 0) world_group = m.groups[g].n == n;
        CHECK(world_group, "the group table has the world communicator");
        char path[300];
        snprintf(path, sizeof path, "%s/trace.json", dir);
        check_json(&m, path);
        unlink(path);
    } else {
        CHECK(m.nranks == 0 && m.events == NULL, "only rank 0 holds the merged trace");
    }
    pl_trace_merged_free(&m);

    /* Clearing forgets the events and the FLOPs counted so far. */
    pl_ledger_add_flops(7);
    pl_trace_clear();
    pl_trace_flush();
    CHECK(pl_trace_count() == 0, "clear forgets everything (%d events)", pl_trace_count());

    /* A ledger reset between two events must not eat into the next compute event. */
    pl_span("before reset");
    pl_ledger_add_flops(100);
    pl_trace_flush();
    pl_ledger_reset();
    pl_span("after reset");
    pl_ledger_add_flops(150);
    pl_trace_flush();
    const struct pl_event *ev = pl_trace_events();
    CHECK(pl_trace_count() == 2 && ev[0].flops == 100 && ev[1].flops == 150,
          "100 FLOPs, flush, ledger reset, 150 FLOPs, flush: expected events of 100 and 150 "
          "FLOPs, got %d event(s): %g, %g", pl_trace_count(),
          pl_trace_count() > 0 ? ev[0].flops : -1.0, pl_trace_count() > 1 ? ev[1].flops : -1.0);
    pl_trace_clear();
    pl_trace_enable(0);

    check_status(dir, me);
    pl_trace_set_status_dir(NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        char path[300];
        for (int r = 0; r < n; r++) {
            snprintf(path, sizeof path, "%s/rank.%d", dir, r);
            unlink(path);
        }
        rmdir(dir);
    }

    double total = world_sum(failures);
    pl_print0("test_trace on %d ranks: %s (%d checks on rank 0)\n", n,
              total == 0.0 ? "all checks passed" : "checks FAILED", checks);
    pl_finalize();
    return total == 0.0 ? 0 : 1;
}
