/* test_ledger: the traffic ledger's formulas (ring volumes, bus-bandwidth factors, modelled
 * collective times) against step-by-step ring arithmetic, the running ledger and its gather
 * on real MPI, the modelled time of a ledger, the virtual topology's link classes, and the
 * cluster profiles.
 *     test_ledger                      all checks, on any rank count
 *     test_ledger profile NAME         prints a profile (unknown name: usage error, exit 2)
 *     test_ledger topo WORLD NODES PER builds a virtual topology (mismatch: exit 2) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paralab.h"
#include "testing.h"



/* ---- the ring algorithms, step by step ---- */

/* One rank of a ring reduce-scatter of S bytes sends one block of S/n per step, n-1 steps;
 * an all-gather the same; an all-reduce is the two in a row. Pairwise all-to-all: n-1 steps,
 * one block each. A pipelined broadcast chain: every rank but the last forwards all S. */
struct ring_cost {
    double bytes; /* sent by one rank */
    int steps;    /* messages in sequence, each paying a latency */
    double wire;  /* bytes on the slowest path in sequence, paying bandwidth */
};

static struct ring_cost simulate(enum pl_coll_kind kind, int n, double S)
{
    struct ring_cost c = {0, 0, 0};
    if (n == 1) return c;
    int phases = kind == PL_ALL_REDUCE ? 2 : 1;
    switch (kind) {
    case PL_ALL_REDUCE:
    case PL_REDUCE_SCATTER:
    case PL_ALL_GATHER:
    case PL_ALL_TO_ALL:
        for (int ph = 0; ph < phases; ph++)
            for (int step = 0; step < n - 1; step++) {
                c.bytes += S / n;
                c.wire += S / n;
                c.steps++;
            }
        break;
    case PL_BROADCAST:
        c.bytes = S;
        c.wire = S;
        c.steps = n - 1;
        break;
    default: break;
    }
    return c;
}

static void test_formulas(void)
{
    const enum pl_coll_kind kinds[] = {PL_ALL_REDUCE, PL_REDUCE_SCATTER, PL_ALL_GATHER,
                                       PL_ALL_TO_ALL, PL_BROADCAST};
    const double sizes[] = {0, 4, 1000, 1 << 20, 7.5e9};
    const double lat = 5e-6, bw = 25e9;
    for (int ki = 0; ki < 5; ki++)
        for (int n = 1; n <= 9; n++)
            for (int si = 0; si < 5; si++) {
                enum pl_coll_kind k = kinds[ki];
                double S = sizes[si];
                struct ring_cost c = simulate(k, n, S);
                const char *name = pl_coll_kind_name(k);
                double bytes = pl_ring_bytes_sent(k, n, S);
                CHECK(close_to(bytes, c.bytes), "%s n=%d S=%g: ring bytes %.17g, expected %.17g",
                      name, n, S, bytes, c.bytes);
                double t = pl_coll_time(k, n, S, lat, bw);
                double want_t = c.steps * lat + c.wire / bw;
                CHECK(close_to(t, want_t), "%s n=%d S=%g: time %.17g, expected %.17g", name, n, S,
                      t, want_t);
                /* nccl-tests: busbw = algbw x factor, the rank's share of the wire relative
                 * to S, which is what makes busbw comparable with the link speed. */
                double factor = pl_busbw_factor(k, n);
                double want_f = k == PL_BROADCAST ? 1.0 : S > 0 ? c.bytes / S : factor;
                CHECK(close_to(factor, want_f), "%s n=%d: busbw factor %.17g, expected %.17g",
                      name, n, factor, want_f);
            }
    /* The factors docs/design.md states, written as it writes them. */
    for (int n = 2; n <= 8; n++) {
        CHECK(close_to(pl_busbw_factor(PL_ALL_REDUCE, n), 2.0 * (n - 1) / n), "AR factor n=%d", n);
        CHECK(close_to(pl_busbw_factor(PL_REDUCE_SCATTER, n), (n - 1.0) / n), "RS factor n=%d", n);
        CHECK(close_to(pl_busbw_factor(PL_ALL_GATHER, n), (n - 1.0) / n), "AG factor n=%d", n);
        CHECK(close_to(pl_busbw_factor(PL_ALL_TO_ALL, n), (n - 1.0) / n), "A2A factor n=%d", n);
        CHECK(pl_busbw_factor(PL_BROADCAST, n) == 1.0, "broadcast factor n=%d", n);
        double S = 3e8;
        CHECK(close_to(pl_coll_time(PL_ALL_REDUCE, n, S, lat, bw),
                       2 * (n - 1) * lat + 2.0 * (n - 1) / n * S / bw),
              "ring all-reduce time 2(n-1)a + 2(n-1)/n S/B, n=%d", n);
    }
    CHECK(pl_coll_time(PL_ALL_REDUCE, 1, 1e9, lat, bw) == 0.0, "one rank costs nothing");
    CHECK(pl_ring_bytes_sent(PL_ALL_REDUCE, 1, 1e9) == 0.0, "one rank sends nothing");
    CHECK(close_to(pl_coll_time(PL_P2P, 2, 1e6, lat, bw), lat + 1e6 / bw), "p2p time");
    CHECK(pl_ring_bytes_sent(PL_P2P, 2, 123) == 123, "p2p bytes");
    CHECK(pl_ring_bytes_sent(PL_BARRIER, 8, 0) == 0, "barrier sends no payload");
    CHECK(close_to(pl_coll_time(PL_BARRIER, 8, 0, lat, bw), 3 * lat), "barrier: log2(8) rounds");
    /* Unbounded links cost only latency: how replay tests switch bandwidth off. */
    CHECK(pl_coll_time(PL_ALL_GATHER, 4, 1e9, 0.0, INFINITY) == 0.0, "infinite bandwidth");
}

/* ---- the running ledger ---- */

static void test_running_ledger(const struct pl_profile *p)
{
    pl_ledger_reset();
    struct pl_ledger *l = pl_ledger();
    CHECK(pl_ledger_bytes(l, -1, -1) == 0.0 && l->flops == 0.0, "reset clears the ledger");
    pl_ledger_add_flops(3e9);
    pl_ledger_charge(PL_ALL_REDUCE, PL_LINK_INTRA, 100.0);
    pl_ledger_charge(PL_ALL_REDUCE, PL_LINK_INTER, 40.0);
    pl_ledger_charge(PL_P2P, PL_LINK_INTRA, 7.0);
    pl_ledger_count_call(PL_ALL_REDUCE);
    pl_ledger_count_call(PL_P2P);
    pl_ledger_count_call(PL_P2P);
    struct pl_ledger before = *l;
    CHECK(pl_ledger_bytes(l, PL_ALL_REDUCE, -1) == 140.0, "all-reduce bytes over both links");
    CHECK(pl_ledger_bytes(l, -1, PL_LINK_INTRA) == 107.0, "intra bytes over all kinds");
    CHECK(pl_ledger_bytes(l, PL_P2P, PL_LINK_INTER) == 0.0, "p2p inter bytes");
    CHECK(pl_ledger_bytes(l, -1, -1) == 147.0, "all bytes");

    /* A serial modelled time: compute, each link class's bytes, one latency per call at
     * the slowest link its kind used. */
    double want = 3e9 / p->flops + 107.0 / p->bw[PL_LINK_INTRA] + 40.0 / p->bw[PL_LINK_INTER] +
                  1 * p->latency[PL_LINK_INTER] + 2 * p->latency[PL_LINK_INTRA];
    CHECK(close_to(pl_ledger_modelled_time(l, p), want), "modelled time %.17g, expected %.17g",
          pl_ledger_modelled_time(l, p), want);

    pl_ledger_add_flops(1e9);
    pl_ledger_charge(PL_ALL_GATHER, PL_LINK_INTER, 64.0);
    pl_ledger_count_call(PL_ALL_GATHER);
    struct pl_ledger d;
    pl_ledger_diff(l, &before, &d);
    CHECK(d.flops == 1e9, "diff flops %g", d.flops);
    CHECK(pl_ledger_bytes(&d, -1, -1) == 64.0 && d.bytes[PL_ALL_GATHER][PL_LINK_INTER] == 64.0,
          "diff holds only the step's bytes");
    CHECK(d.calls[PL_ALL_GATHER] == 1 && d.calls[PL_P2P] == 0, "diff calls");
}

/* Calls that sent nothing: a ring kind's ran on groups of one and cost no latency (a TP
 * block at t = 1 makes four all-reduces that wait for no one); a receive, the end of a
 * broadcast chain and a barrier send nothing yet wait, and pay theirs. */
static void test_silent_calls(const struct pl_profile *p)
{
    struct pl_ledger l;
    memset(&l, 0, sizeof l);
    l.flops = 2e9;
    l.calls[PL_ALL_REDUCE] = 4;
    l.calls[PL_REDUCE_SCATTER] = 1;
    l.calls[PL_ALL_GATHER] = 1;
    double compute = 2e9 / p->flops;
    CHECK(close_to(pl_ledger_modelled_time(&l, p), compute),
          "collectives on groups of one: modelled %.17g, expected the compute alone %.17g",
          pl_ledger_modelled_time(&l, p), compute);
    l.calls[PL_P2P] = 1;
    l.calls[PL_BROADCAST] = 1;
    l.calls[PL_BARRIER] = 2;
    double want = compute + 4 * p->latency[PL_LINK_INTRA];
    CHECK(close_to(pl_ledger_modelled_time(&l, p), want),
          "a receive, a broadcast's last hop and two barriers: modelled %.17g, expected %.17g",
          pl_ledger_modelled_time(&l, p), want);
    l.bytes[PL_ALL_REDUCE][PL_LINK_INTER] = 8.0;
    want += 8.0 / p->bw[PL_LINK_INTER] + 4 * p->latency[PL_LINK_INTER];
    CHECK(close_to(pl_ledger_modelled_time(&l, p), want),
          "an all-reduce kind that sent bytes pays a latency per call: modelled %.17g, "
          "expected %.17g", pl_ledger_modelled_time(&l, p), want);
}

/* Each rank charges what only it would; rank 0 gathers and checks every row, and gathering
 * charges nothing (it must not show up in the ledger it reports). */
static void test_gather(void)
{
    int n = pl_size(), me = pl_rank();
    pl_ledger_reset();
    pl_ledger_add_flops(1e6 * (me + 1));
    pl_ledger_charge(PL_REDUCE_SCATTER, (enum pl_link)(me % 2), 1000.0 + me);
    pl_ledger_count_call(PL_REDUCE_SCATTER);
    struct pl_ledger mine = *pl_ledger();
    struct pl_ledger *all = calloc((size_t)n, sizeof *all);
    pl_ledger_gather(pl_comm_world(), pl_ledger(), all);
    CHECK(!memcmp(&mine, pl_ledger(), sizeof mine), "gathering left the ledger unchanged");
    if (me == 0) {
        for (int r = 0; r < n; r++) {
            CHECK(all[r].flops == 1e6 * (r + 1), "rank %d's flops %g", r, all[r].flops);
            CHECK(all[r].bytes[PL_REDUCE_SCATTER][r % 2] == 1000.0 + r, "rank %d's bytes", r);
            CHECK(pl_ledger_bytes(&all[r], -1, -1) == 1000.0 + r, "rank %d's total", r);
            CHECK(all[r].calls[PL_REDUCE_SCATTER] == 1, "rank %d's calls", r);
        }
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        pl_ledger_print(f, all, n);
        fclose(f);
        int rows = 0;
        for (const char *q = buf; (q = strchr(q, '\n')); q++) rows++;
        CHECK(rows == n + 1, "the table has a header and a row per rank (%d lines)", rows);
        CHECK(strstr(buf, "reduce_scatter:intra") != NULL, "the table names kind:link columns:\n%s",
              buf);
        CHECK(strstr(buf, "all_reduce") == NULL, "unused kinds get no column");
        if (n > 1) CHECK(strstr(buf, "reduce_scatter:inter") != NULL, "inter column");
        free(buf);
    }
    free(all);

    /* A group communicator: ranks gather to the group's rank 0. */
    if (n >= 2) {
        struct pl_comm *half = pl_comm_split(pl_comm_world(), me % 2, me, "half");
        pl_ledger_reset();
        pl_ledger_add_flops(me);
        struct pl_ledger before = *pl_ledger();
        int hn = pl_comm_size(half);
        struct pl_ledger *rows = calloc((size_t)hn, sizeof *rows);
        pl_ledger_gather(half, pl_ledger(), rows);
        CHECK(!memcmp(&before, pl_ledger(), sizeof before), "group gather charged nothing");
        if (pl_comm_rank(half) == 0)
            for (int k = 0; k < hn; k++)
                CHECK(rows[k].flops == pl_comm_world_rank(half, k), "group row %d holds world "
                      "rank %d's ledger, got flops %g", k, pl_comm_world_rank(half, k), rows[k].flops);
        free(rows);
        pl_comm_free(half);
    }
    pl_ledger_reset();
}

/* ---- topology ---- */

static void test_topology(void)
{
    struct pl_topo t;
    char err[256];
    CHECK(pl_topo_virtual(&t, 8, 2, 4, err, sizeof err) == 0, "2x4 topology: %s", err);
    CHECK(t.nodes == 2 && t.per_node == 4 && t.world == 8 && t.is_virtual, "2x4 fields");
    for (int a = 0; a < 8; a++) {
        int node = a < 4 ? 0 : 1; /* ranks 0-3 on the first node, 4-7 on the second */
        CHECK(pl_topo_node(&t, a) == node, "rank %d on node %d, got %d", a, node,
              pl_topo_node(&t, a));
        for (int b = 0; b < 8; b++) {
            enum pl_link want = (a < 4) == (b < 4) ? PL_LINK_INTRA : PL_LINK_INTER;
            CHECK(pl_topo_link(&t, a, b) == want, "link %d-%d is %s, expected %s", a, b,
                  pl_link_name(pl_topo_link(&t, a, b)), pl_link_name(want));
        }
    }
    int tp[4] = {0, 1, 2, 3}, dp[2] = {1, 5}, edge[2] = {3, 4}, one[1] = {6}, back[2] = {7, 0};
    CHECK(pl_topo_group_link(&t, tp, 4) == PL_LINK_INTRA, "a group inside a node is intra");
    CHECK(pl_topo_group_link(&t, dp, 2) == PL_LINK_INTER, "a group across nodes is inter");
    CHECK(pl_topo_group_link(&t, edge, 2) == PL_LINK_INTER, "neighbours across the boundary");
    CHECK(pl_topo_group_link(&t, back, 2) == PL_LINK_INTER, "the ring's wrap-around");
    CHECK(pl_topo_group_link(&t, one, 1) == PL_LINK_INTRA, "a group of one");
    CHECK(!strcmp(pl_link_name(PL_LINK_INTRA), "intra") && !strcmp(pl_link_name(PL_LINK_INTER),
          "inter"), "link names");

    CHECK(pl_topo_virtual(&t, 6, 2, 4, err, sizeof err) == -1 &&
              strstr(err, "2 nodes x 4 gpus-per-node = 8 ranks, but the job has 6 ranks"),
          "mismatch message: %s", err);
    CHECK(pl_topo_virtual(&t, 8, 0, 4, err, sizeof err) == -1 && strstr(err, "at least 1"),
          "zero nodes: %s", err);

    /* Hostnames: equal names share a node, nodes numbered by first appearance. */
    const char *hosts[6] = {"b", "b", "a", "c", "a", "b"};
    CHECK(pl_topo_from_hostnames(&t, 6, hosts, err, sizeof err) == 0, "hostnames: %s", err);
    const int want_node[6] = {0, 0, 1, 2, 1, 0};
    for (int r = 0; r < 6; r++)
        CHECK(pl_topo_node(&t, r) == want_node[r], "host rank %d on node %d, expected %d", r,
              pl_topo_node(&t, r), want_node[r]);
    CHECK(t.nodes == 3 && t.per_node == 3 && !t.is_virtual, "3 hosts, at most 3 ranks on one");
    CHECK(pl_topo_link(&t, 2, 4) == PL_LINK_INTRA && pl_topo_link(&t, 0, 2) == PL_LINK_INTER,
          "host links");

    /* The runtime's own topology matches the rank count it runs on. */
    const struct pl_topo *rt = pl_topo();
    CHECK(rt->world == pl_size() && rt->nodes * rt->per_node >= pl_size(), "runtime topology");
}

/* ---- profiles ---- */

static void test_profiles(void)
{
    const struct pl_profile *h = pl_profile_get("dgx-h100");
    CHECK(h && h->devices_per_node == 8, "dgx-h100: 8 GPUs per node");
    CHECK(h->bw[PL_LINK_INTRA] == 450e9, "dgx-h100 NVLink 450 GB/s per direction");
    CHECK(h->bw[PL_LINK_INTER] == 400e9 / 8, "dgx-h100: a 400 Gb/s NIC per GPU, in bytes");
    CHECK(h->flops == 989e12, "dgx-h100: 989 TFLOP/s dense BF16");
    CHECK(h->device_mem == 80e9, "dgx-h100: 80 GB");
    CHECK(h->latency[PL_LINK_INTRA] < h->latency[PL_LINK_INTER], "network slower to start");
    const struct pl_profile *a = pl_profile_find("dgx-a100");
    CHECK(a && a->bw[PL_LINK_INTRA] == 300e9 && a->bw[PL_LINK_INTER] == 200e9 / 8 &&
              a->flops == 312e12 && a->device_mem == 80e9,
          "dgx-a100: NVLink 300 GB/s, 200 Gb/s network, 312 TFLOP/s, 80 GB");
    const struct pl_profile *c = pl_profile_find("cpu");
    CHECK(c && c->flops > 1e9 && c->flops < 1e12, "cpu: a laptop's GFLOP/s");
    CHECK(pl_profile_find("laptop") == c, "laptop is the cpu profile");
    CHECK(pl_profile_find("dgx-h200") == NULL && pl_profile_find(NULL) == NULL, "unknown: NULL");
    CHECK(pl_profile_count() >= 3, "at least three profiles");
    for (int i = 0; i < pl_profile_count(); i++) {
        const struct pl_profile *p = pl_profile_at(i);
        CHECK(pl_profile_find(p->name) == p, "profile %s found by name", p->name);
        CHECK(p->description && p->description[0], "profile %s has a description", p->name);
        for (int l = 0; l < PL_NLINKS; l++)
            CHECK(p->bw[l] > 0 && p->latency[l] > 0, "profile %s: %s link figures", p->name,
                  pl_link_name(l));
        CHECK(p->bw[PL_LINK_INTRA] >= p->bw[PL_LINK_INTER], "profile %s: intra-node is faster",
              p->name);
    }
}

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    if (argc >= 3 && !strcmp(argv[1], "profile")) {
        const struct pl_profile *p = pl_profile_get(argv[2]);
        pl_print0("%s: %s\n", p->name, p->description);
        pl_finalize();
        return 0;
    }
    if (argc >= 5 && !strcmp(argv[1], "topo")) {
        struct pl_topo t;
        char err[256];
        if (pl_topo_virtual(&t, atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), err, sizeof err))
            pl_usage_error_all("%s", err);
        pl_print0("%d nodes x %d per node\n", t.nodes, t.per_node);
        pl_finalize();
        return 0;
    }
    test_formulas();
    test_running_ledger(pl_profile_get("dgx-h100"));
    test_running_ledger(pl_profile_get("cpu"));
    test_silent_calls(pl_profile_get("dgx-h100"));
    test_gather();
    test_topology();
    test_profiles();

    double total = world_sum(failures);
    pl_print0("test_ledger on %d ranks: %s (%d checks on rank 0)\n", pl_size(),
              total == 0.0 ? "all checks passed" : "checks FAILED", checks);
    pl_finalize();
    return total == 0.0 ? 0 : 1;
}
