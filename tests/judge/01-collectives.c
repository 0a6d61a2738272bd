/* tests/judge/01-collectives.c: Lab 1's judges (grader/01-collectives/judge.c) run alone,
 * without mpirun, on hand-built observations and on those a check run of the solution
 * recorded (driver --record FILE):
 *
 *   01-collectives                 the hand-built cases
 *   01-collectives FILE PARTS      every case of FILE passes PARTS (comma-separated), and the
 *                                  same observations with one rank's made wrong fail with the
 *                                  reason a student would read
 *
 * Expected figures come from the formulas in code, never pasted. Exit 0 when every check
 * holds; each failed one is printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives.h"
#include "lab01.h"
#include "units.h"
#include "unseen.h"
#include "../testing.h"
#include "judge_test.h"

#define NP 4
static struct l1_obs obs[NP];

/* Judges part of case i of n on the first np observations of obs. */
static int judge(int op, int i, int n, const char *part, int np, struct gr_why *why)
{
    struct gr_obs all = {np, sizeof obs[0], (const unsigned char *)obs};
    gr_why_init(why);
    return l1_judge(op, i, n, part, &all, why);
}

/* np ranks of a ring-like op on one world group, every rank right and sending (and
 * receiving) what the ring does: (n-1)/n x S, twice for the all-reduce. */
static void world(int op, int np, uint64_t count, int kind)
{
    memset(obs, 0, sizeof obs);
    double S = 4.0 * (double)l1_buffer_count(op, count, np);
    double ring = (op == L1_AR ? 2.0 : 1.0) * (np - 1) / np * S;
    for (int r = 0; r < np; r++) {
        struct l1_obs *o = &obs[r];
        o->op = op;
        o->world = o->n = np;
        o->nodes = 1;
        o->per_node = np;
        o->c = (struct l1_case){count, 0, 0, kind};
        o->rank = o->world_rank = r;
        o->coll_kind = -1;
        o->sent = o->received = ring;
        o->sends = 2.0 * (np - 1);
        o->npast = 1;
        o->past[0] = (struct l1_past){o->c, np, o->sent, o->received, 0, o->sends};
    }
}

static void correct(void)
{
    struct gr_why why;
    char want[1024], cs[384];
    world(L1_AR, NP, 64 * NP, L1_K_DIVISIBLE);
    CHECK(judge(L1_AR, 0, 3, "correct", NP, &why) && why.n == 0, "right results pass: %s",
          first(&why));

    obs[2].coll_calls = 1;
    obs[2].coll_kind = PL_ALL_REDUCE;
    snprintf(want, sizeof want, "rank 2 called the library's %s",
             pl_coll_kind_name(PL_ALL_REDUCE));
    CHECK(!judge(L1_AR, 0, 3, "correct", NP, &why) && said(&why, want), "library call: %s",
          first(&why));

    /* rank 1 never wrote element 4 of a count that 4 does not divide, after case 0 passed */
    world(L1_AR, NP, NP + 1, L1_K_NOT_DIVIDE);
    obs[1].nwrong = 1;
    obs[1].first_bad = NP;
    obs[1].expected = 12;
    obs[1].got = L1_SENTINEL;
    obs[1].max_abs = 12 - (double)L1_SENTINEL;
    CHECK(!judge(L1_AR, 1, 3, "correct", NP, &why), "a wrong element fails");
    l1_describe_case(L1_AR, &obs[1].c, NP, cs, sizeof cs);
    snprintf(want, sizeof want, "wrong result for %s", cs);
    CHECK(!strcmp(first(&why), want), "names the case: %s", first(&why));
    size_t off, len = coll_chunk(NP + 1, NP, NP - 1, &off); /* element NP: the last chunk's */
    snprintf(want, sizeof want, "rank 1: chunk %d (elements %zu..%zu), element %d: expected 12, "
             "got %g; 1 of %d elements wrong", NP - 1, off, off + len - 1, NP,
             (double)L1_SENTINEL, NP + 1);
    CHECK(said(&why, want), "locates the element: %s", why.n > 1 ? why.line[1] : "");
    CHECK(said(&why, "that element was never written"), "the sentinel is explained");
    snprintf(want, sizeof want, "sizes that %d divides passed, this one does not divide", NP);
    CHECK(said(&why, want), "the chunking hint after case 0");
    CHECK(!judge(L1_AR, 0, 3, "correct", NP, &why) && !said(&why, "sizes that"),
          "no chunking hint on case 0");

    obs[1].nonfinite = 1;
    obs[1].first_nonfinite = 0;
    obs[1].nonfinite_expected = 7;
    CHECK(!judge(L1_AR, 1, 3, "correct", NP, &why) && said(&why, "rank 1: chunk 0") &&
          said(&why, "is not a number (expected 7); 1 of 5 elements are NaN or Inf"),
          "a NaN: %s", why.n > 1 ? why.line[1] : "");

    /* recursive doubling on 3 ranks: only rank 0, folded into rank 1, is wrong */
    world(L1_RD, 3, 64, L1_K_ONE_MORE);
    obs[0].nwrong = 3;
    obs[0].got = 1;
    CHECK(!judge(L1_RD, 1, 7, "correct", 3, &why) &&
          said(&why, "only ranks that are not among the 2 exchanging ones are wrong"),
          "a folded rank left out: %s", why.n > 1 ? why.line[why.n - 1] : "");
    obs[1].nwrong = 1;
    CHECK(!judge(L1_RD, 1, 7, "correct", 3, &why) && !said(&why, "folded"),
          "an exchanging rank wrong too is not that");

    /* two levels, 2 nodes of 2: rank 3 right on its own share only */
    world(L1_HIER, NP, 1009, L1_K_PRIME);
    for (int r = 0; r < NP; r++) obs[r].nodes = 2, obs[r].per_node = 2;
    obs[3].nwrong = 504;
    obs[3].got = 1;
    CHECK(!judge(L1_HIER, 2, 7, "correct", NP, &why) &&
          said(&why, "rank 3 is right on its own 1/2 share of the buffer"), "own share: %s",
          first(&why));

    world(L1_BC, NP, 64 * NP, L1_K_DIVISIBLE);
    obs[3].in_flight = 1;
    CHECK(!judge(L1_BC, 0, 3, "correct", NP, &why) &&
          said(&why, "when pipelined_broadcast returned, rank 3 still had 1 operation(s) in "
               "flight"), "in flight: %s", first(&why));
}

static void traffic(void)
{
    struct gr_why why;
    char want[1024], a[32], b[32], e[32];
    uint64_t count = 64 * NP;
    double S = 4.0 * (double)count, ring = 2.0 * (NP - 1) / NP * S;
    world(L1_AR, NP, count, L1_K_DIVISIBLE);
    CHECK(judge(L1_AR, 0, 3, "traffic", NP, &why) && why.n == 0, "the ring passes: %s",
          first(&why));
    CHECK(judge(L1_AR, 0, 1, "traffic", NP, &why) && why.n == 1, "the last case notes");
    snprintf(want, sizeof want, "the busiest rank sent %s and received %s of the %s buffer "
             "(2(n-1)/n x S)", pl_format_bytes(ring, a, sizeof a),
             pl_format_bytes(ring, b, sizeof b), pl_format_bytes(S, e, sizeof e));
    CHECK(said(&why, want), "the note's figures: %s", first(&why));

    /* rank 0 gathers every buffer and sends every rank the sum: a hub */
    obs[0].sent = obs[0].received = (NP - 1) * S;
    snprintf(want, sizeof want, "rank 0 sent %s and received %s; a ring rank sends 2(n-1)/n x "
             "S = %s", pl_format_bytes((NP - 1) * S, a, sizeof a),
             pl_format_bytes((NP - 1) * S, b, sizeof b), pl_format_bytes(ring, e, sizeof e));
    CHECK(!judge(L1_AR, 0, 3, "traffic", NP, &why) && said(&why, want) &&
          said(&why, "funnels the data through one rank"), "a hub: %s", first(&why));
    obs[0].sent = obs[0].received = ring + 4;
    snprintf(want, sizeof want, "%.0f bytes more than the ring needs", 4.0);
    CHECK(!judge(L1_AR, 0, 3, "traffic", NP, &why) && said(&why, want), "4 bytes over: %s",
          why.n > 1 ? why.line[1] : "");

    /* broadcast of 1 MiB on 4 ranks: the chain passes; a flat tree and a whole buffer do not */
    count = 262144;
    S = 4.0 * (double)count;
    world(L1_BC, NP, count, L1_K_MIB);
    for (int r = 0; r < NP; r++) obs[r].sent = r < NP - 1 ? S : 0, obs[r].sends = 4;
    CHECK(judge(L1_BC, 7, 10, "traffic", NP, &why), "a pipelined chain passes: %s",
          first(&why));
    for (int r = 0; r < NP; r++) obs[r].sent = r ? 0 : (NP - 1) * S;
    snprintf(want, sizeof want, "rank 0 sent %s, %.0f copies of the %s buffer",
             pl_format_bytes((NP - 1) * S, a, sizeof a), (double)(NP - 1),
             pl_format_bytes(S, b, sizeof b));
    CHECK(!judge(L1_BC, 7, 10, "traffic", NP, &why) && said(&why, want), "a flat tree: %s",
          first(&why));
    for (int r = 0; r < NP; r++) obs[r].sent = r < NP - 1 ? S : 0, obs[r].sends = 1;
    CHECK(!judge(L1_BC, 7, 10, "traffic", NP, &why) &&
          said(&why, "rank 0 sent the 1.0 MB buffer in 1 message(s)"), "no pipeline: %s",
          first(&why));

    /* recursive doubling on 4 ranks: 2 messages of the whole buffer, not a ring's 6 */
    count = 64;
    S = 4.0 * (double)count;
    world(L1_RD, NP, count, L1_K_DIVISIBLE);
    for (int r = 0; r < NP; r++) {
        obs[r].sends = obs[r].past[0].sends = 2;
        obs[r].sent = obs[r].past[0].sent = 2 * S;
    }
    CHECK(judge(L1_RD, 0, 1, "traffic", NP, &why) &&
          said(&why, "your busiest rank on 4 ranks sent 2 messages, 2.0 times the buffer in "
               "all, where a ring rank sends 6 of 1/4 of it"), "doubling's note: %s",
          first(&why));
    obs[2].sends = 6;
    obs[2].sent = 6 * S / NP;
    CHECK(!judge(L1_RD, 0, 1, "traffic", NP, &why) &&
          said(&why, "rank 2 sent 6 messages") &&
          said(&why, "recursive doubling on 4 ranks sends at most 2 (floor(log2 n))"),
          "a ring is not doubling: %s", first(&why));

    /* two levels, 2 nodes of 2, 1 MiB and 3: one leader per node sends the whole sum across */
    count = 262147;
    world(L1_HIER, NP, count, L1_K_MIB3);
    size_t share = (count + 1) / 2, half = (share + 1) / 2;
    double bound = 4.0 * 2.0 * 1 * (double)half, whole = 4.0 * 2.0 * (double)((count + 1) / 2);
    for (int r = 0; r < NP; r++) {
        obs[r].nodes = obs[r].per_node = 2;
        obs[r].sent_inter = r % 2 ? 0 : bound;
        obs[r].received = 0;
        obs[r].modelled = 1e-9;
    }
    CHECK(judge(L1_HIER, 6, 7, "traffic", NP, &why) &&
          said(&why, "your busiest rank sent") && said(&why, "N = 2, L = 2"),
          "two levels within the bound: %s", first(&why));
    obs[0].sent_inter = whole;
    snprintf(want, sizeof want, "rank 0 sent %s across nodes, where a rank of the two-level "
             "all-reduce sends at most 2(N-1)/N of its 1/L share: %s for N = 2 nodes of L = 2",
             pl_format_bytes(whole, a, sizeof a), pl_format_bytes(bound, b, sizeof b));
    CHECK(!judge(L1_HIER, 6, 7, "traffic", NP, &why) && said(&why, want) &&
          said(&why, "one leader per node leaves the other 1 ranks' network links idle"),
          "one leader per node: %s", first(&why));
}

static void memory(void)
{
    struct gr_why why;
    char want[1024], a[32], b[32];
    uint64_t count = 64 * NP;
    world(L1_RD, NP, count, L1_K_DIVISIBLE);
    for (int r = 0; r < NP; r++) obs[r].scratch = obs[r].past[0].scratch = 4.0 * (double)count;
    snprintf(want, sizeof want, "at most %s of scratch held at once beside the %s buffer",
             pl_format_bytes(4.0 * (double)count, a, sizeof a),
             pl_format_bytes(4.0 * (double)count, b, sizeof b));
    CHECK(judge(L1_RD, 0, 1, "memory", NP, &why) && said(&why, want), "one buffer: %s",
          first(&why));
    obs[3].scratch = 2 * 4.0 * (double)count;
    CHECK(!judge(L1_RD, 0, 1, "memory", NP, &why) &&
          said(&why, "doubling needs one buffer of scratch"), "a buffer per round: %s",
          first(&why));
    obs[3].leaked = 4;
    CHECK(!judge(L1_RD, 0, 1, "memory", NP, &why) &&
          said(&why, "rank 3 still holds 4 B allocated by recursive_doubling_all_reduce"),
          "a leak: %s", first(&why));
    obs[3].leaked = 0;
    obs[3].scratch = 0;
    obs[1].unseen = L1_P_SR_RECV;
    obs[1].unseen_where = GR_UNSEEN_STACK;
    snprintf(want, sizeof want, "rank 1: pl_sendrecv's receive buffer lay %s",
             gr_unseen_where(GR_UNSEEN_STACK));
    CHECK(!judge(L1_RD, 0, 1, "memory", NP, &why) && said(&why, want), "on the stack: %s",
          first(&why));
}

static void crossover(void)
{
    struct gr_why why;
    struct l1_race *r = &obs[0].race;
    world(L1_RD, NP, 64, L1_K_DIVISIBLE);
    CHECK(judge(L1_RD, 0, 3, "crossover", NP, &why) && why.n == 0, "not raced: nothing said");
    *r = (struct l1_race){.done = 1, .ring_stub = 1 + L1_AR};
    CHECK(!judge(L1_RD, 0, 1, "crossover", NP, &why) &&
          said(&why, "and ring_all_reduce is still a stub (see docs/labs/01-collectives.md "
               "section 5)"), "a stub ring: %s", first(&why));
    *r = (struct l1_race){.done = 1, .n = NP, .k = 2, .alpha = 3e-6, .B = 450e9, .star = 4e6,
                          .gap_lo = -1e-6, .gap_hi = 2e-6, .cross = 4.5e6};
    char want[512], a[32], e[32];
    snprintf(want, sizeof want, "replayed, your recursive doubling and your ring cross at %s; "
             "the alpha-beta model says S* = %s (k = 2 rounds, alpha 3.0 us, B 450 GB/s)",
             pl_format_bytes(4.5e6, a, sizeof a), pl_format_bytes(4e6, e, sizeof e));
    CHECK(judge(L1_RD, 0, 1, "crossover", NP, &why) && said(&why, want), "near S*: %s",
          first(&why));
    r->cross = 4e6 * 2.5;
    CHECK(!judge(L1_RD, 0, 1, "crossover", NP, &why) &&
          said(&why, "more than a factor of 2 apart"), "too far: %s", first(&why));
    r->gap_lo = 1e-6;
    CHECK(!judge(L1_RD, 0, 1, "crossover", NP, &why) &&
          said(&why, "your recursive doubling is not faster than your ring at S*/8"),
          "never wins: %s", first(&why));
}

/* Every case of a recorded run passes parts; then each rank's result or traffic made wrong
 * in the same observations fails, naming that rank. */
static void recorded(const char *path, const char *parts)
{
    FILE *f = judge_record_open(path);
    struct gr_record rec;
    char err[256], part[32], want[128];
    int got, n = 0;
    while ((got = gr_record_read(f, &rec, err, sizeof err)) == 1) {
        int op = l1_find_op(rec.op);
        CHECK(op >= 0 && rec.obs.size == sizeof(struct l1_obs), "%s: op %s, %zu-byte records",
              path, rec.op, rec.obs.size);
        if (op < 0 || rec.obs.size != sizeof(struct l1_obs)) break;
        struct gr_why why;
        for (const char *w = parts; *w;) {
            size_t len = strcspn(w, ",");
            snprintf(part, sizeof part, "%.*s", (int)len, w);
            gr_why_init(&why);
            CHECK(l1_judge(op, rec.icase, rec.ncases, part, &rec.obs, &why),
                  "%s case %d: %s fails: %s", rec.op, rec.icase, part, first(&why));
            w += len + (w[len] == ',');
        }
        int last = rec.obs.nranks - 1;
        struct l1_obs *o = (struct l1_obs *)(rec.obs.data + (size_t)last * rec.obs.size);
        if (l1_buffer_count(op, o->c.count, o->n) > 0) {
            o->nwrong = 1;
            o->first_bad = 0;
            gr_why_init(&why);
            snprintf(want, sizeof want, "%s %d: ", o->c.split ? "group rank" : "rank", o->rank);
            CHECK(!l1_judge(op, rec.icase, rec.ncases, "correct", &rec.obs, &why) &&
                  said(&why, want), "%s case %d, rank %d wrong: %s", rec.op, rec.icase, last,
                  why.n > 1 ? why.line[1] : first(&why));
            o->nwrong = 0;
            if (strstr(parts, "traffic") && op != L1_HIER && op != L1_BC) {
                /* twice a whole buffer per rank more: past every op's bound */
                o->sent += 8.0 * (double)l1_buffer_count(op, o->c.count, o->n) * o->n;
                snprintf(want, sizeof want, "rank %d sent", o->rank);
                gr_why_init(&why);
                CHECK(!l1_judge(op, rec.icase, rec.ncases, "traffic", &rec.obs, &why) &&
                      said(&why, want), "%s case %d, rank %d sent more: %s", rec.op,
                      rec.icase, last, first(&why));
            }
        }
        n++;
        gr_record_free(&rec);
    }
    judge_record_close(f, path, got, err, n);
}

/* Every hand-built check. */
static void hand_built(void)
{
    correct();
    traffic();
    memory();
    crossover();
}

int main(int argc, char **argv)
{
    return judge_test_main(argc, argv, hand_built, recorded);
}
