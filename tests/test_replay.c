/* test_replay: the modelled timeline on hand-built traces whose answers follow from the
 * formulas (compute = flops / rate, a message = latency + bytes / bandwidth, ring
 * all-reduce = 2(n-1) latency + 2(n-1)/n S / bandwidth, GPipe bubble (p-1)/(m+p-1)),
 * computed here. No MPI: the replay runs on any machine, in one process. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paralab.h"
#include "testing.h"
#include "trace_build.h"

/* Equal up to rounding: the replay adds the same terms in another order. */

#define CHECK_NEAR(got, want, what)                                                        \
    CHECK(close_to((got), (want)), "%s: expected %.15g, got %.15g", (what), (double)(want),  \
          (double)(got))

/* ---- building traces ---- */

static void compute(struct pl_merged_trace *m, int rank, const char *label, double flops)
{
    struct pl_event *e = add(m, rank, PL_EV_COMPUTE);
    snprintf(e->label, sizeof e->label, "%s", label);
    e->flops = flops;
}

static void issue(struct pl_merged_trace *m, int rank, enum pl_coll_kind kind, int group,
                  double bytes, long handle)
{
    struct pl_event *e = add(m, rank, PL_EV_ISSUE);
    e->kind = kind;
    e->group = group;
    e->bytes = bytes;
    e->handle = handle;
}

static void wait_for(struct pl_merged_trace *m, int rank, long handle)
{
    add(m, rank, PL_EV_WAIT)->handle = handle;
}

static void p2p(struct pl_merged_trace *m, int rank, enum pl_ev_type type, int peer, int tag,
                double bytes, long handle)
{
    struct pl_event *e = add(m, rank, type);
    e->kind = PL_P2P;
    e->peer = peer;
    e->tag = tag;
    e->bytes = bytes;
    e->handle = handle;
}

/* Links that cost nothing, so a pipeline shows only its bubble. */
static const struct pl_profile free_links = {
    .name = "free-links",
    .description = "zero latency, unbounded bandwidth",
    .flops = 1e12,
    .bw = {[PL_LINK_INTRA] = INFINITY, [PL_LINK_INTER] = INFINITY},
    .latency = {0, 0},
    .devices_per_node = 4,
    .device_mem = 1e9,
};

static void make_topo(struct pl_topo *t, int world, int nodes)
{
    char err[256];
    if (pl_topo_virtual(t, world, nodes, world / nodes, err, sizeof err) != 0) {
        printf("FAIL: virtual topology: %s\n", err);
        exit(1);
    }
}

/* pl_replay_run_streams with one stream (per_link 0) or a stream per link class (1). */
static int run_streams(const struct pl_merged_trace *m, const struct pl_profile *p,
                       const struct pl_topo *t, int per_link, struct pl_replay *r,
                       const char *what)
{
    char err[512];
    int rc = pl_replay_run_streams(m, p, t,
                                   per_link ? PL_REPLAY_STREAM_PER_LINK : PL_REPLAY_ONE_STREAM,
                                   r, err, sizeof err);
    CHECK(rc == 0, "%s: replay failed: %s", what, err);
    return rc;
}

static int run(const struct pl_merged_trace *m, const struct pl_profile *p,
               const struct pl_topo *t, struct pl_replay *r, const char *what)
{
    return run_streams(m, p, t, 0, r, what);
}

/* (a) rank 0 computes F then sends S bytes; rank 1 receives. */
static void test_send_recv(void)
{
    const double F = 3e12, S = 5e9;
    for (int nodes = 1; nodes <= 2; nodes++) {
        enum pl_link link = nodes == 2 ? PL_LINK_INTER : PL_LINK_INTRA;
        double lat = test_profile.latency[link], bw = test_profile.bw[link];
        double msg = lat + S / bw, want = F / test_profile.flops + msg;
        struct pl_merged_trace m;
        trace_init(&m, 2);
        compute(&m, 0, "F", F);
        p2p(&m, 0, PL_EV_SEND, 1, 7, S, 0);
        p2p(&m, 1, PL_EV_RECV, 0, 7, S, 0);
        struct pl_topo t;
        make_topo(&t, 2, nodes);
        struct pl_replay r;
        if (run(&m, &test_profile, &t, &r, "send/recv") == 0) {
            CHECK_NEAR(r.rank[1].end, want, "receiver's end = F/rate + lat + S/bw");
            CHECK_NEAR(r.rank[1].exposed_comm, want, "receiver waits the whole time");
            CHECK_NEAR(r.rank[1].compute, 0.0, "receiver computes nothing");
            CHECK_NEAR(r.rank[0].end, want, "blocking sender ends when the send is done");
            CHECK_NEAR(r.rank[0].comm, msg, "sender's comm stream busy for lat + S/bw");
            CHECK_NEAR(r.rank[0].compute, F / test_profile.flops, "sender's compute");
            CHECK_NEAR(r.step_time, want, "step time");
            CHECK_NEAR(r.span[0][1].start, F / test_profile.flops, "send starts after compute");
            CHECK(r.span[0][1].stream == 1, "a send runs on the comm stream");
            pl_replay_free(&r);
        }
        pl_trace_merged_free(&m);
    }

    /* Nonblocking: the transfer overlaps compute on both sides. */
    const double C0 = 1e12, C1s[2] = {0.1e12, 2e12};
    for (int i = 0; i < 2; i++) {
        double msg = test_profile.latency[PL_LINK_INTRA] + S / test_profile.bw[PL_LINK_INTRA];
        struct pl_merged_trace m;
        trace_init(&m, 2);
        p2p(&m, 0, PL_EV_ISEND, 1, 3, S, 11);
        compute(&m, 0, "F", C0);
        wait_for(&m, 0, 11);
        p2p(&m, 1, PL_EV_IRECV, 0, 3, S, 5);
        compute(&m, 1, "F", C1s[i]);
        wait_for(&m, 1, 5);
        struct pl_replay r;
        if (run(&m, &test_profile, NULL, &r, "isend/irecv") == 0) {
            double c1 = C1s[i] / test_profile.flops;
            CHECK_NEAR(r.rank[1].end, fmax(c1, msg), "irecv's wait ends at max(compute, arrival)");
            CHECK_NEAR(r.rank[1].exposed_comm, fmax(0.0, msg - c1), "exposed = max(0, msg - C)");
            CHECK_NEAR(r.rank[0].end, fmax(C0 / test_profile.flops, msg), "isend's wait");
            pl_replay_free(&r);
        }
        pl_trace_merged_free(&m);
    }
}

/* Sends queue on the sender's comm stream: the second starts when the first is done. */
static void test_send_queue(void)
{
    const double S = 1e9;
    double msg = test_profile.latency[PL_LINK_INTRA] + S / test_profile.bw[PL_LINK_INTRA];
    struct pl_merged_trace m;
    trace_init(&m, 2);
    p2p(&m, 0, PL_EV_ISEND, 1, 0, S, 1);
    p2p(&m, 0, PL_EV_ISEND, 1, 1, S, 2);
    wait_for(&m, 0, 2);
    wait_for(&m, 0, 1);
    p2p(&m, 1, PL_EV_RECV, 0, 1, S, 0); /* the second message first: tags keep them apart */
    p2p(&m, 1, PL_EV_RECV, 0, 0, S, 0);
    struct pl_replay r;
    if (run(&m, &test_profile, NULL, &r, "two isends") == 0) {
        CHECK_NEAR(r.span[0][1].start, msg, "the second send waits for the first");
        CHECK_NEAR(r.rank[0].end, 2 * msg, "two messages back to back");
        CHECK_NEAR(r.rank[0].comm, 2 * msg, "comm stream busy for both");
        CHECK_NEAR(r.span[1][0].end, 2 * msg, "receiver gets tag 1 second");
        CHECK_NEAR(r.rank[1].end, 2 * msg, "receiver's end");
        pl_replay_free(&r);
    }
    pl_trace_merged_free(&m);
}

static double ring_all_reduce(int n, double S, double lat, double bw)
{
    return 2.0 * (n - 1) * lat + 2.0 * (n - 1) / n * S / bw;
}

/* (b) an all-reduce issued before compute B (overlapped) or after it (exposed). */
static void test_overlap(void)
{
    const int n = 4;
    int ranks[4] = {0, 1, 2, 3};
    const double A = 1e12, S = 4e9;
    const double Bs[2] = {0.05e12, 5e12}; /* shorter and longer than the all-reduce */
    for (int nodes = 1; nodes <= 2; nodes++) {
        enum pl_link link = nodes == 2 ? PL_LINK_INTER : PL_LINK_INTRA;
        double AR = ring_all_reduce(n, S, test_profile.latency[link], test_profile.bw[link]);
        struct pl_topo t;
        make_topo(&t, n, nodes);
        for (int bi = 0; bi < 2; bi++)
            for (int late = 0; late <= 2; late++) {
                /* late 0: issue before B; 1: after B; 2: after B, blocking (no handle) */
                double a = A / test_profile.flops, b = Bs[bi] / test_profile.flops;
                struct pl_merged_trace m;
                trace_init(&m, n);
                add_group(&m, 9, n, ranks);
                long h = late == 2 ? 0 : 1;
                for (int r = 0; r < n; r++) {
                    compute(&m, r, "F", A);
                    if (!late) issue(&m, r, PL_ALL_REDUCE, 9, S, h);
                    compute(&m, r, "B", Bs[bi]);
                    if (late) issue(&m, r, PL_ALL_REDUCE, 9, S, h);
                    wait_for(&m, r, h);
                }
                struct pl_replay rp;
                char what[96];
                snprintf(what, sizeof what, "all-reduce %s, %s B, %d node(s)",
                         late ? "after" : "before", bi ? "long" : "short", nodes);
                if (run(&m, &test_profile, &t, &rp, what) != 0) {
                    pl_trace_merged_free(&m);
                    continue;
                }
                double exposed = late ? AR : fmax(0.0, AR - b);
                for (int r = 0; r < n; r++) {
                    CHECK_NEAR(rp.rank[r].exposed_comm, exposed, what);
                    CHECK_NEAR(rp.rank[r].end, a + b + exposed, what);
                    CHECK_NEAR(rp.rank[r].comm, AR, what);
                    CHECK_NEAR(rp.rank[r].compute, a + b, what);
                }
                CHECK_NEAR(rp.step_time, a + b + exposed, what);
                int iss = late ? 2 : 1;
                CHECK_NEAR(rp.span[0][iss].start, late ? a + b : a, "all-reduce starts at issue");
                CHECK_NEAR(rp.span[0][iss].end - rp.span[0][iss].start, AR, "all-reduce lasts AR");
                pl_replay_free(&rp);
                pl_trace_merged_free(&m);
            }
    }
}

/* The streams a rank's communication queues on (pl_replay_run_streams), on 2 nodes of 2
 * ranks: each rank starts two all-reduces over its DP pair across the nodes ({0,2}, {1,3})
 * without waiting, then a blocking all-reduce over its TP pair inside its node ({0,1},
 * {2,3}) and compute C, then waits. On one stream the TP all-reduce waits behind both DP
 * ones; on a stream per link class it runs at once, while the second DP all-reduce still
 * waits for the first. Then a send inside a node issued after a DP all-reduce: held back
 * by it on one stream, not on a stream per link class. Without a topology every link is
 * one class and the two modes agree. */
static void test_streams(void)
{
    const double S = 4e9, C = 0.2e12, P = 1e9;
    const double ARx = ring_all_reduce(2, S, test_profile.latency[PL_LINK_INTER],
                                       test_profile.bw[PL_LINK_INTER]);
    const double ARi = ring_all_reduce(2, S, test_profile.latency[PL_LINK_INTRA],
                                       test_profile.bw[PL_LINK_INTRA]);
    const double msg = test_profile.latency[PL_LINK_INTRA] + P / test_profile.bw[PL_LINK_INTRA];
    const double c = C / test_profile.flops;
    struct pl_topo t;
    make_topo(&t, 4, 2);
    int dp0[2] = {0, 2}, dp1[2] = {1, 3}, tp0[2] = {0, 1}, tp1[2] = {2, 3};
    struct pl_merged_trace m;
    trace_init(&m, 4);
    add_group(&m, 10, 2, dp0);
    add_group(&m, 11, 2, dp1);
    add_group(&m, 20, 2, tp0);
    add_group(&m, 21, 2, tp1);
    for (int r = 0; r < 4; r++) {
        issue(&m, r, PL_ALL_REDUCE, 10 + r % 2, S, 1);
        issue(&m, r, PL_ALL_REDUCE, 10 + r % 2, S, 2);
        issue(&m, r, PL_ALL_REDUCE, 20 + r / 2, S, 0);
        compute(&m, r, "C", C);
        wait_for(&m, r, 1);
        wait_for(&m, r, 2);
    }
    for (int mode = 0; mode < 2; mode++) {
        struct pl_replay rp;
        const char *what = mode ? "a stream per link class" : "one stream";
        if (run_streams(&m, &test_profile, &t, mode, &rp, what) != 0) continue;
        const double tp_start = mode ? 0.0 : 2 * ARx;
        const double end = mode ? fmax(2 * ARx, ARi + c) : 2 * ARx + ARi + c;
        for (int r = 0; r < 4; r++) {
            CHECK_NEAR(rp.span[r][2].start, tp_start, what);
            CHECK_NEAR(rp.span[r][1].start, ARx, "the second DP all-reduce queues behind the first");
            CHECK_NEAR(rp.rank[r].end, end, what);
            CHECK_NEAR(rp.rank[r].comm, 2 * ARx + ARi, what);
            CHECK_NEAR(rp.rank[r].exposed_comm, end - c, what);
        }
        pl_replay_free(&rp);
        /* the same trace without a topology: one class, so per link is one stream */
        if (run_streams(&m, &test_profile, NULL, mode, &rp, "no topology") != 0) continue;
        const double ar = ring_all_reduce(2, S, test_profile.latency[PL_LINK_INTRA],
                                          test_profile.bw[PL_LINK_INTRA]);
        CHECK_NEAR(rp.rank[0].end, 3 * ar + c, "no topology: every operation in issue order");
        pl_replay_free(&rp);
    }
    pl_trace_merged_free(&m);

    trace_init(&m, 4);
    add_group(&m, 10, 2, dp0);
    issue(&m, 0, PL_ALL_REDUCE, 10, S, 1);
    p2p(&m, 0, PL_EV_SEND, 1, 5, P, 0);
    wait_for(&m, 0, 1);
    p2p(&m, 1, PL_EV_RECV, 0, 5, P, 0);
    issue(&m, 2, PL_ALL_REDUCE, 10, S, 1);
    wait_for(&m, 2, 1);
    for (int mode = 0; mode < 2; mode++) {
        struct pl_replay rp;
        const char *what = mode ? "a send beside a DP all-reduce" : "a send behind a DP all-reduce";
        if (run_streams(&m, &test_profile, &t, mode, &rp, what) != 0) continue;
        CHECK_NEAR(rp.rank[1].end, (mode ? 0.0 : ARx) + msg, what);
        CHECK_NEAR(rp.rank[0].end, mode ? fmax(msg, ARx) : ARx + msg, what);
        pl_replay_free(&rp);
    }
    pl_trace_merged_free(&m);
}

/* A collective starts when its last member issues it; comm streams run in issue order. */
static void test_collective_rules(void)
{
    const int n = 2;
    int ranks[2] = {0, 1};
    const double S = 1e9, slow = 2e12;
    double AR = ring_all_reduce(n, S, test_profile.latency[0], test_profile.bw[0]);
    struct pl_merged_trace m;
    trace_init(&m, n);
    add_group(&m, 1, n, ranks);
    compute(&m, 1, "F", slow);
    for (int r = 0; r < n; r++) {
        issue(&m, r, PL_ALL_REDUCE, 1, S, 1);
        issue(&m, r, PL_ALL_REDUCE, 1, S, 2);
        wait_for(&m, r, 1);
        wait_for(&m, r, 2);
    }
    struct pl_replay rp;
    if (run(&m, &test_profile, NULL, &rp, "late member") == 0) {
        double s = slow / test_profile.flops;
        CHECK_NEAR(rp.rank[0].exposed_comm, s + 2 * AR, "the early rank waits for the late one");
        CHECK_NEAR(rp.step_time, s + 2 * AR, "two all-reduces queue on the comm stream");
        CHECK_NEAR(rp.span[0][1].start, s + AR, "the second starts when the first ends");
        pl_replay_free(&rp);
    }
    pl_trace_merged_free(&m);

    /* Two groups through one rank: its comm stream orders them. Rank 1 issues on {0,1}
     * and then on {1,2}; rank 2 issued early but must wait for rank 1's stream. */
    int g01[2] = {0, 1}, g12[2] = {1, 2};
    trace_init(&m, 3);
    add_group(&m, 10, 2, g01);
    add_group(&m, 12, 2, g12);
    compute(&m, 0, "F", slow);
    issue(&m, 0, PL_ALL_REDUCE, 10, S, 1);
    wait_for(&m, 0, 1);
    issue(&m, 1, PL_ALL_REDUCE, 10, S, 1);
    issue(&m, 1, PL_ALL_REDUCE, 12, S, 2);
    wait_for(&m, 1, 1);
    wait_for(&m, 1, 2);
    issue(&m, 2, PL_ALL_REDUCE, 12, S, 4);
    wait_for(&m, 2, 4);
    if (run(&m, &test_profile, NULL, &rp, "two groups") == 0) {
        double s = slow / test_profile.flops;
        CHECK_NEAR(rp.rank[2].end, s + 2 * AR, "rank 2 waits for rank 1's earlier collective");
        CHECK_NEAR(rp.rank[0].end, s + AR, "rank 0's collective ends after one AR");
        pl_replay_free(&rp);
    }
    pl_trace_merged_free(&m);
}

/* ---- (c) pipelines ---- */

enum { FWD_TAG = 0, BWD_TAG = 100000 };

static void forward(struct pl_merged_trace *m, int s, int p, int j, double tf)
{
    if (s > 0) p2p(m, s, PL_EV_RECV, s - 1, FWD_TAG + j, 1e6, 0);
    compute(m, s, "F", tf);
    if (s < p - 1) p2p(m, s, PL_EV_SEND, s + 1, FWD_TAG + j, 1e6, 0);
}

static void backward(struct pl_merged_trace *m, int s, int p, int j, double tb)
{
    if (s < p - 1) p2p(m, s, PL_EV_RECV, s + 1, BWD_TAG + j, 1e6, 0);
    compute(m, s, "B", tb);
    if (s > 0) p2p(m, s, PL_EV_SEND, s - 1, BWD_TAG + j, 1e6, 0);
}

/* GPipe (all forwards, then all backwards) or 1F1B; returns the most microbatches any
 * stage holds at once (forwarded, not yet backwarded). */
static int build_pipeline(struct pl_merged_trace *m, int p, int mb, int one_f_one_b, double tf,
                          double tb)
{
    trace_init(m, p);
    int most = 0;
    for (int s = 0; s < p; s++) {
        int f = 0, b = 0;
        int warm = one_f_one_b ? (p - 1 - s < mb ? p - 1 - s : mb) : mb;
        for (; f < warm; f++) forward(m, s, p, f, tf);
        if (f - b > most) most = f - b;
        while (f < mb) {
            forward(m, s, p, f++, tf);
            if (f - b > most) most = f - b;
            backward(m, s, p, b++, tb);
        }
        while (b < mb) backward(m, s, p, b++, tb);
    }
    return most;
}

static void test_pipeline(void)
{
    const int p = 4, mbs[3] = {1, 4, 8};
    const double tf = 1e12, tb = 2e12; /* 1 s and 2 s at 1 TFLOP/s */
    for (int k = 0; k < 3; k++)
        for (int sched = 0; sched < 2; sched++) {
            int mb = mbs[k];
            struct pl_merged_trace m;
            int most = build_pipeline(&m, p, mb, sched, tf, tb);
            char what[96];
            snprintf(what, sizeof what, "%s p=%d m=%d", sched ? "1F1B" : "GPipe", p, mb);
            struct pl_replay r;
            int ok = run(&m, &free_links, NULL, &r, what) == 0;
            if (ok) {
                double unit = (tf + tb) / free_links.flops;
                double bubble = (double)(p - 1) / (mb + p - 1);
                double idle = pl_replay_idle_fraction(&r);
                CHECK(fabs(idle - bubble) <= 1e-12, "%s: idle fraction %.15g, expected "
                      "(p-1)/(m+p-1) = %.15g", what, idle, bubble);
                CHECK_NEAR(r.step_time, (mb + p - 1) * unit, what);
                for (int s = 0; s < p; s++)
                    CHECK_NEAR(r.rank[s].idle, (p - 1) * unit, what);
            }
            int bound = sched ? (mb < p ? mb : p) : mb;
            CHECK(most == bound, "%s: at most %d microbatches in flight, schedule holds %d", what,
                  bound, most);
            if (ok && sched == 0 && mb == 4) {
                /* One column per second: the picture is exact. */
                int width = 3 * (mb + p - 1);
                char *buf = NULL;
                size_t len = 0;
                FILE *f = open_memstream(&buf, &len);
                pl_replay_print_timeline(f, &m, &r, width);
                fclose(f);
                int t0 = mb + p - 1;
                for (int s = 0; s < p; s++) {
                    char want[64] = {0}, prefix[32];
                    for (int c = 0; c < width; c++) {
                        int bstart = t0 + 2 * (p - 1 - s);
                        want[c] = c >= s && c < s + mb ? 'F'
                                  : c >= bstart && c < bstart + 2 * mb ? 'B' : '.';
                    }
                    snprintf(prefix, sizeof prefix, "rank %3d |", s);
                    const char *row = strstr(buf, prefix);
                    CHECK(row && !strncmp(row + strlen(prefix), want, (size_t)width) &&
                              row[strlen(prefix) + (size_t)width] == '|',
                          "GPipe timeline of rank %d: expected |%s|, got %.*s", s, want,
                          row ? (int)(strlen(prefix) + (size_t)width + 1) : 4,
                          row ? row : "none");
                }
                free(buf);

                char path[] = "/tmp/test_replay_XXXXXX";
                int fd = mkstemp(path);
                CHECK(fd >= 0, "temporary file");
                if (fd >= 0) {
                    close(fd);
                    CHECK(pl_replay_write_svg(&m, &r, "GPipe <p=4 & m=4>", path) == 0, "svg");
                    FILE *in = fopen(path, "r");
                    char *svg = calloc(1, 1 << 20);
                    size_t n = in ? fread(svg, 1, (1 << 20) - 1, in) : 0;
                    if (in) fclose(in);
                    int rects = 0, titles = 0, close_titles = 0;
                    for (const char *q = svg; (q = strstr(q, "<rect")); q++) rects++;
                    for (const char *q = svg; (q = strstr(q, "<title>")); q++) titles++;
                    for (const char *q = svg; (q = strstr(q, "</title>")); q++) close_titles++;
                    CHECK(n > 0 && !strncmp(svg, "<svg", 4) && strstr(svg, "</svg>"),
                          "the SVG opens and closes its svg element");
                    CHECK(strstr(svg, "&lt;p=4 &amp; m=4&gt;") != NULL, "the title is escaped");
                    /* A titled rect per span that lasts (compute, stalls), plus lanes and
                     * legend without titles. */
                    int lasting = 0;
                    for (int s = 0; s < p; s++)
                        for (int i = 0; i < m.nevents[s]; i++)
                            lasting += r.span[s][i].end > r.span[s][i].start;
                    CHECK(lasting > 2 * mb * p, "stalls as well as compute have spans");
                    CHECK(titles == lasting && close_titles == titles,
                          "one titled rect per span that lasts: %d, expected %d", titles, lasting);
                    CHECK(rects >= titles + p, "rects for events and lanes: %d", rects);
                    free(svg);
                    unlink(path);
                }
            }
            pl_replay_free(&r);
            pl_trace_merged_free(&m);
        }
}

/* ---- (d) traces that cannot complete ---- */

static void expect_failure(struct pl_merged_trace *m, const char *what, const char *must1,
                           const char *must2)
{
    char err[512] = "";
    struct pl_replay r;
    int rc = pl_replay_run(m, &test_profile, NULL, &r, err, sizeof err);
    CHECK(rc == -1, "%s: expected -1, got %d", what, rc);
    CHECK(strstr(err, must1) && strstr(err, must2), "%s: message should name '%s' and '%s': %s",
          what, must1, must2, err);
    if (rc == 0) pl_replay_free(&r);
    pl_trace_merged_free(m);
}

static void test_deadlocks(void)
{
    struct pl_merged_trace m;
    int both[2] = {0, 1};

    trace_init(&m, 2); /* each receives first: the classic ring deadlock */
    p2p(&m, 0, PL_EV_RECV, 1, 0, 8, 0);
    p2p(&m, 0, PL_EV_SEND, 1, 0, 8, 0);
    p2p(&m, 1, PL_EV_RECV, 0, 0, 8, 0);
    p2p(&m, 1, PL_EV_SEND, 0, 0, 8, 0);
    expect_failure(&m, "recv before send on both ranks", "rank 0 event 0", "from rank 1");

    trace_init(&m, 2); /* a tag mismatch */
    p2p(&m, 0, PL_EV_SEND, 1, 1, 8, 0);
    p2p(&m, 1, PL_EV_RECV, 0, 2, 8, 0);
    expect_failure(&m, "tag mismatch", "rank 1 event 0", "tag 2");

    trace_init(&m, 2); /* rank 1 never joins the all-reduce */
    add_group(&m, 5, 2, both);
    compute(&m, 0, "F", 1e9);
    issue(&m, 0, PL_ALL_REDUCE, 5, 1e6, 1);
    wait_for(&m, 0, 1);
    compute(&m, 1, "F", 1e9);
    expect_failure(&m, "missing collective", "rank 0 event 2", "rank 1 never issues it");

    trace_init(&m, 2); /* issued by one, never waited, never joined */
    add_group(&m, 5, 2, both);
    issue(&m, 0, PL_ALL_GATHER, 5, 1e6, 1);
    expect_failure(&m, "orphan collective", "all_gather", "rank 1 never issues it");

    trace_init(&m, 2); /* the members disagree on what the first collective is */
    add_group(&m, 5, 2, both);
    issue(&m, 0, PL_ALL_REDUCE, 5, 1e6, 0);
    issue(&m, 1, PL_ALL_GATHER, 5, 1e6, 0);
    expect_failure(&m, "kind mismatch", "rank 1 event 0", "disagree");

    trace_init(&m, 1); /* a wait for a handle nobody started */
    wait_for(&m, 0, 42);
    expect_failure(&m, "unknown handle", "rank 0 event 0", "handle 42");

    trace_init(&m, 2); /* a group the table does not have */
    issue(&m, 0, PL_ALL_REDUCE, 77, 1e6, 0);
    expect_failure(&m, "unknown group", "rank 0 event 0", "group 77");
}

/* (g) The torus (torus.h, the tpu-v4 profile): shapes, routes, and collective times worked
 * out by hand from its model. Stops: a torus taken as switched (an all-to-all at link speed
 * whatever the group), routes that never wrap, a ring step that ignores a long route. */
static void test_torus(void)
{
    int d[3];
    const int n_of[6] = {1, 6, 7, 8, 64, 128}, want[6][3] = {{1, 1, 1}, {1, 2, 3}, {1, 1, 7},
                                                               {2, 2, 2}, {4, 4, 4}, {4, 4, 8}};
    for (int i = 0; i < 6; i++) {
        pl_torus_shape(n_of[i], d);
        CHECK(d[0] == want[i][0] && d[1] == want[i][1] && d[2] == want[i][2],
              "torus of %d: %dx%dx%d, expected %dx%dx%d", n_of[i], d[0], d[1], d[2], want[i][0],
              want[i][1], want[i][2]);
    }
    const int cube[3] = {4, 4, 4}, small[3] = {2, 2, 2};
    /* 0 -> 3 wraps round the x ring (1 link); 0 -> 2 is 2 either way; 0 -> 63 = (3,3,3)
     * is a wrap in each dimension; on 2 x 2 x 2, 0 -> 7 crosses each dimension's one link */
    CHECK(pl_torus_hops(cube, 0, 3) == 1 && pl_torus_hops(cube, 0, 2) == 2 &&
              pl_torus_hops(cube, 0, 63) == 3 && pl_torus_hops(small, 0, 7) == 3,
          "torus routes: %d %d %d %d", pl_torus_hops(cube, 0, 3), pl_torus_hops(cube, 0, 2),
          pl_torus_hops(cube, 0, 63), pl_torus_hops(small, 0, 7));

    const struct pl_profile *tpu = pl_profile_find("tpu-v4");
    CHECK(tpu && tpu->torus, "tpu-v4 is a torus profile");
    if (!tpu) return;
    const double lat = tpu->latency[PL_LINK_INTRA], bw = tpu->bw[PL_LINK_INTRA], S = 64e6;
    int xring[4] = {0, 1, 2, 3}, plane[16], all[64];
    for (int i = 0; i < 16; i++) plane[i] = i;
    for (int i = 0; i < 64; i++) all[i] = i;
    /* a ring along x: neighbours all the way round, the switched formula at link speed */
    CHECK_NEAR(pl_torus_coll_time(cube, PL_ALL_REDUCE, xring, 4, S, lat, bw),
               2 * 3 * lat + 2 * 0.75 * S / bw, "all-reduce round an x ring of 4");
    /* the x-y plane in rank order: 3 -> 4 is (3,0) -> (0,1), 2 links, so every step waits 2 */
    CHECK_NEAR(pl_torus_coll_time(cube, PL_ALL_REDUCE, plane, 16, S, lat, bw),
               2 * 15 * 2 * lat + 2 * 15.0 / 16 * S / bw, "all-reduce over a 4 x 4 plane");
    /* all-to-all over the 4 x 4 x 4 cube: the cut across z (4 planes, 2 each side) carries
     * 2 x 2 x 64 S / 16 = 16 S each way over 2 x 16 links: S / 2 per link, above what a chip
     * injects over its 6 links, 63/64 S / 6 */
    double a2a64 = 63 * lat + 16 * S / (32 * bw);
    CHECK_NEAR(pl_torus_coll_time(cube, PL_ALL_TO_ALL, all, 64, S, lat, bw), a2a64,
               "all-to-all over a 4 x 4 x 4 torus: bisection-bound");
    /* on 2 x 2 x 2 no dimension wraps: 2 S cross over 4 links; a chip injects over 3 */
    CHECK_NEAR(pl_torus_coll_time(small, PL_ALL_TO_ALL, all, 8, S, lat, bw),
               7 * lat + 2 * S / (4 * bw), "all-to-all over 2 x 2 x 2");
    /* a line of 4 along x in a cube: a ring of the torus, 2 x 2 x 4 S / 16 = S over 2 links;
     * injection 3/4 S over 2 links is less */
    CHECK_NEAR(pl_torus_coll_time(cube, PL_ALL_TO_ALL, xring, 4, S, lat, bw),
               3 * lat + S / (2 * bw), "all-to-all round an x ring of 4");
    /* a send: a route of 3 hops pays 3 latencies, the bytes stream at link speed */
    int corner[2] = {0, 63};
    CHECK_NEAR(pl_torus_coll_time(cube, PL_P2P, corner, 2, S, lat, bw), 3 * lat + S / bw,
               "send across the cube");

    /* the replay on 64 ranks: one all-to-all of the world, then rank 0 sends to rank 63 */
    struct pl_merged_trace m;
    trace_init(&m, 64);
    add_group(&m, 1, 64, all);
    for (int r = 0; r < 64; r++) issue(&m, r, PL_ALL_TO_ALL, 1, S, 0);
    p2p(&m, 0, PL_EV_SEND, 63, 5, S, 0);
    p2p(&m, 63, PL_EV_RECV, 0, 5, S, 0);
    struct pl_replay rp;
    if (run(&m, tpu, NULL, &rp, "torus replay") == 0) {
        CHECK_NEAR(rp.step_time, a2a64 + 3 * lat + S / bw,
                   "replay on tpu-v4: the world's all-to-all, then a send of 3 hops");
        pl_replay_free(&rp);
    }
    pl_trace_merged_free(&m);
}

int main(void)
{
    test_send_recv();
    test_send_queue();
    test_overlap();
    test_streams();
    test_collective_rules();
    test_pipeline();
    test_deadlocks();
    test_torus();
    if (failures) {
        printf("test_replay: %d of %d checks failed\n", failures, checks);
        return 1;
    }
    printf("test_replay: all %d checks passed\n", checks);
    return 0;
}
