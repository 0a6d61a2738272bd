/* judge.c: Lab 1's verdicts, on rank 0 from every rank's observation of a case (lab01.h),
 * and in tests/judge/01-collectives.c alone: no MPI, nothing read but the arguments, every
 * reason worded here from the figures the ranks recorded. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "collectives.h"
#include "lab01.h"
#include "units.h"
#include "unseen.h"

const struct l1_op_info L1_OPS[L1_NOPS] = {
    {"reduce_scatter", "ring_reduce_scatter", "pl_reduce_scatter", PL_REDUCE_SCATTER, "3"},
    {"all_gather", "ring_all_gather", "pl_all_gather", PL_ALL_GATHER, "4"},
    {"all_reduce", "ring_all_reduce", "pl_all_reduce", PL_ALL_REDUCE, "5"},
    {"broadcast", "pipelined_broadcast", "pl_broadcast", PL_BROADCAST, "6"},
    {"all_to_all", "pairwise_all_to_all", "pl_all_to_all", PL_ALL_TO_ALL, "7"},
    {"recursive_doubling", "recursive_doubling_all_reduce", "pl_all_reduce", PL_ALL_REDUCE,
     "11"},
    {"hierarchical", "hierarchical_all_reduce", "pl_all_reduce", PL_ALL_REDUCE, "12"},
};

const struct l1_place_info L1_PLACES[L1_NPLACES] = {
    {"", ""},
    {"pl_send", "buffer"},
    {"pl_isend", "buffer"},
    {"pl_recv", "buffer"},
    {"pl_sendrecv", "send buffer"},
    {"pl_sendrecv", "receive buffer"},
    {"pl_irecv", "buffer"},
    {"coll_reduce", "destination"},
    {"coll_reduce", "source"},
    {"coll_copy", "destination"},
    {"coll_copy", "source"},
};

/* What each kind of case is for; %d: the rank count. */
static const char *const CASE_TEXTS[L1_NKINDS] = {
    "divisible by %d", "%d does not divide it", "prime", "one element",
    "fewer elements than ranks", "empty", "a size drawn from the seed", "1 MiB",
    "1 MiB and 3 elements", "not a whole number of segments",
    "ranks of a group are not world ranks", "a group, a size drawn from the seed",
    "one more element than ranks", "a small block", "one element per block", "empty blocks",
    "an odd block", "a block size drawn from the seed", "128 KiB blocks",
    "256 KiB and one element",
};

int l1_find_op(const char *name)
{
    if (!strcmp(name, L1_HIER_3_NODES)) return L1_HIER;
    for (int i = 0; i < L1_NOPS; i++)
        if (!strcmp(name, L1_OPS[i].name)) return i;
    return -1;
}

size_t l1_buffer_count(int op, uint64_t count, int n)
{
    return op == L1_A2A ? (size_t)count * (size_t)n : (size_t)count;
}

void l1_describe_case(int op, const struct l1_case *c, int n, char *buf, size_t len)
{
    char who[128], root[32] = "", why[96];
    if (c->split)
        snprintf(who, sizeof who, "%d ranks split in groups of %d and %d, group ranks in "
                 "reverse world order", n, (n + 1) / 2, n / 2);
    else
        snprintf(who, sizeof who, "%d ranks", n);
    if (op == L1_BC) snprintf(root, sizeof root, ", root %d", c->split ? 0 : c->root % n);
    int k = c->kind >= 0 && c->kind < L1_NKINDS ? c->kind : L1_K_EMPTY;
    snprintf(why, sizeof why, CASE_TEXTS[k], n);
    snprintf(buf, len, "count %zu%s%s, %s (%s)", (size_t)c->count,
             op == L1_A2A ? " per block" : "", root, who, why);
}

static const struct l1_obs *rank_obs(const struct gr_obs *all, int r)
{
    return gr_obs_rank(all, r);
}

/* Where element i of a rank's result sits, in the words of the handout. */
static void locate(int op, size_t count, int n, long i, char *buf, size_t len)
{
    if (op == L1_A2A) {
        size_t b = count ? (size_t)i / count : 0;
        snprintf(buf, len, "block %zu (from rank %zu), element %zu of %zu", b, b,
                 count ? (size_t)i % count : 0, count);
        return;
    }
    if (op == L1_BC || op >= L1_RD) {
        snprintf(buf, len, "element %ld of %zu", i, count);
        return;
    }
    for (int k = 0; k < n; k++) {
        size_t off, l = coll_chunk(count, n, k, &off);
        if ((size_t)i >= off && (size_t)i < off + l) {
            snprintf(buf, len, "chunk %d (elements %zu..%zu), element %ld", k, off,
                     off + l - 1, i);
            return;
        }
    }
    snprintf(buf, len, "element %ld", i);
}

/* The most messages a rank of recursive doubling sends on n ranks: log2 n exchanges, and
 * one more (handing the result back) when n is not a power of two. */
static int doubling_messages(int n)
{
    int k = 0;
    while ((2 << k) <= n) k++; /* floor(log2 n) */
    return (1 << k) == n ? k : k + 1;
}

/* 1 when the only wrong ranks of a recursive doubling on a rank count that is not a power
 * of two are among those that fold into a neighbour (the even ones of the first 2(n-p)). */
static int doubling_left_out(const struct gr_obs *all)
{
    int n = rank_obs(all, 0)->n, p = 1;
    while (2 * p <= n) p *= 2;
    if (p == n || n != all->nranks) return 0;
    for (int i = 0; i < all->nranks; i++) {
        const struct l1_obs *v = rank_obs(all, i);
        int folded = v->rank < 2 * (n - p) && v->rank % 2 == 0;
        if (v->nwrong && !folded) return 0;
    }
    return 1;
}

/* 1 when a rank of the two-level all-reduce got exactly the elements outside its own share
 * (its place l on its node: chunk l of the node's L) wrong. */
static int right_only_on_share(const struct l1_obs *v)
{
    size_t off, len = coll_chunk((size_t)v->c.count, v->per_node, v->rank % v->per_node, &off);
    return len < v->c.count && v->nwrong > 0 && v->wrong_in_share == 0;
}

static int judge_wrong(int op, int i, const struct gr_obs *all, const struct l1_obs *v,
                       struct gr_why *why)
{
    char cs[384], where[160];
    const struct l1_case *c = &v->c;
    l1_describe_case(op, c, all->nranks, cs, sizeof cs);
    size_t total = l1_buffer_count(op, c->count, v->n);
    gr_why_say(why, "wrong result for %s", cs);
    const char *who = c->split ? "group rank" : "rank";
    if (v->nonfinite) {
        locate(op, (size_t)c->count, v->n, v->first_nonfinite, where, sizeof where);
        gr_why_say(why, "%s %d: %s is not a number (expected %g); %ld of %zu elements are NaN "
                   "or Inf. NaN comes from arithmetic on memory that was never written (a "
                   "scratch buffer received into the wrong place) or from 0/0", who, v->rank,
                   where, (double)v->nonfinite_expected, v->nonfinite, total);
        return 0;
    }
    locate(op, (size_t)c->count, v->n, v->first_bad, where, sizeof where);
    gr_why_say(why, "%s %d: %s: expected %g, got %g; %ld of %zu elements wrong, max abs error "
               "%g, max rel error %.3g", who, v->rank, where, (double)v->expected,
               (double)v->got, v->nwrong, total, v->max_abs, v->max_rel);
    if (v->got == L1_SENTINEL)
        gr_why_say(why, "%g is the value the grader put there before the call: that element "
                   "was never written (a chunk not received, or received elsewhere)",
                   (double)L1_SENTINEL);
    if (op == L1_HIER && right_only_on_share(v))
        gr_why_say(why, "rank %d is right on its own 1/%d share of the buffer and wrong "
                   "everywhere else: every rank must end with every share, gathered again "
                   "inside its node (section 12)", v->rank, v->per_node);
    if (op == L1_RD && doubling_left_out(all))
        gr_why_say(why, "only ranks that are not among the %d exchanging ones are wrong: a rank "
                   "folded into its neighbour must get the finished sum back from it (section "
                   "11)", 1 << (doubling_messages(v->n) - 1));
    /* Case 0 is a size n divides: a failure after it points at the chunking. */
    if (i > 0 && (c->count % (uint64_t)v->n) != 0 && op != L1_BC && op != L1_A2A && op < L1_RD)
        gr_why_say(why, "sizes that %d divides passed, this one does not divide: cut chunks "
                   "with coll_chunk, which gives the first count %% n chunks one extra element",
                   v->n);
    return 0;
}

/* Returns 1 when every rank's result is right; otherwise says why (once). */
static int judge_correct(int op, int i, const struct gr_obs *all, struct gr_why *why)
{
    char cs[384];
    for (int r = 0; r < all->nranks; r++) {
        const struct l1_obs *v = rank_obs(all, r);
        if (v->coll_calls > 0) {
            gr_why_say(why, "rank %d called the library's %s: this lab builds every collective "
                       "from pl_send/pl_recv/pl_sendrecv/pl_isend/pl_irecv, so library "
                       "collectives do not count (handout section 2)", r,
                       pl_coll_kind_name((enum pl_coll_kind)v->coll_kind));
            return 0;
        }
    }
    for (int r = 0; r < all->nranks; r++)
        if (rank_obs(all, r)->nwrong) return judge_wrong(op, i, all, rank_obs(all, r), why);
    for (int r = 0; r < all->nranks; r++) {
        const struct l1_obs *v = rank_obs(all, r);
        if (!v->in_flight) continue;
        l1_describe_case(op, &v->c, all->nranks, cs, sizeof cs);
        gr_why_say(why, "%s: the result is right, but when %s returned, %s %d still had %d "
                   "operation(s) in flight on the communicator it was given: a handle of "
                   "pl_isend or pl_irecv was never waited for. The caller frees that "
                   "communicator after the call, and pl_comm_free refuses one with operations "
                   "in flight; pl_wait (or pl_wait_all) every handle before the collective "
                   "returns (handout section 2)", cs, L1_OPS[op].func,
                   v->c.split ? "group rank" : "rank", v->rank, v->in_flight);
        return 0;
    }
    return 1;
}

/* The bandwidth-optimal bytes a rank sends, as [lo, hi]: equal unless n does not divide the
 * count, when chunks differ by one element and the volume depends on which ones a rank
 * forwards. */
static void optimal_sent(int op, size_t count, int n, double *lo, double *hi)
{
    double fl = (double)(count / (size_t)n), ce = (double)((count + (size_t)n - 1) / (size_t)n);
    double f = op == L1_AR ? 8.0 : 4.0;
    if (op == L1_RS || op == L1_AG || op == L1_AR) {
        *lo = f * (n - 1) * fl;
        *hi = f * (n - 1) * ce;
    } else if (op == L1_A2A) {
        *lo = *hi = 4.0 * (n - 1) * (double)count;
    } else { /* broadcast is judged on the total and the busiest rank */
        *lo = 0;
        *hi = 8.0 * (double)count;
    }
}

static const char *formula(int op)
{
    return op == L1_AR ? "2(n-1)/n x S" : op == L1_BC || op >= L1_RD ? "S" : "(n-1)/n x S";
}

/* A buffer of at least this many bytes is cut into segments by a pipelined broadcast
 * (a segment of the hints' size, or smaller, leaves at least two). */
#define BCAST_PIPELINED_BYTES (1024.0 * 1024.0)

/* Broadcast: every spanning tree sends n-1 copies in all; a pipelined chain one per rank, a
 * binary tree at most two (collectives.h allows both), a flat tree n-1 from the root: refused
 * where that is more than two, from 4 ranks on (on 3 the flat tree is the binary tree). From
 * 3 ranks on a rank that forwards a large buffer sends it in two messages or more, so the
 * next rank forwards the first segment while the second is still arriving. Split cases hold
 * two groups. */
static int judge_broadcast_traffic(const struct gr_obs *all, const char *cs, double S,
                                   struct gr_why *why)
{
    char a[32], b[32];
    int split = rank_obs(all, 0)->c.split;
    for (int g = 0; g < (split ? 2 : 1); g++) {
        double sum = 0, max = 0;
        int busiest = -1, gn = 0;
        for (int j = 0; j < all->nranks; j++) {
            const struct l1_obs *v = rank_obs(all, j);
            if (split && v->world_rank % 2 != g) continue;
            gn = v->n;
            sum += v->sent;
            if (busiest < 0 || v->sent > max) {
                max = v->sent;
                busiest = j;
            }
        }
        if (busiest < 0) continue;
        if (sum != (gn - 1) * S) {
            gr_why_say(why, "%s: the ranks sent %s in all; a broadcast sends each of the n-1 "
                       "other ranks one copy: (n-1) x S = %s", cs,
                       pl_format_bytes(sum, a, sizeof a),
                       pl_format_bytes((gn - 1) * S, b, sizeof b));
            return 0;
        }
        if (max > 2 * S) {
            gr_why_say(why, "%s: rank %d sent %s, %.0f copies of the %s buffer: a rank that "
                       "sends everyone a copy makes its own link carry (n-1) x S while the "
                       "other links idle. In a pipelined chain every rank forwards one copy (in "
                       "a binary tree at most two), so the time stays near S/B whatever n "
                       "(handout section 6)", cs, rank_obs(all, busiest)->rank,
                       pl_format_bytes(max, a, sizeof a), max / S,
                       pl_format_bytes(S, b, sizeof b));
            return 0;
        }
        if (gn < 3 || S < BCAST_PIPELINED_BYTES) continue;
        for (int j = 0; j < all->nranks; j++) {
            const struct l1_obs *v = rank_obs(all, j);
            if (split && v->world_rank % 2 != g) continue;
            /* its sends only: receiving in segments and forwarding the whole is no pipeline */
            if (v->sent <= 0 || v->sent / v->sends <= S / 2) continue;
            gr_why_say(why, "%s: rank %d sent the %s buffer in %.0f message(s): the next rank "
                       "can forward only once the whole buffer has arrived, so the time grows "
                       "as (n-1) x S/B. A pipelined broadcast cuts the buffer into segments and "
                       "forwards segment k while segment k+1 arrives (handout section 6)", cs,
                       v->rank, pl_format_bytes(S, a, sizeof a), v->sends);
            return 0;
        }
    }
    return 1;
}

/* ---- the second part: latency (section 11) and nodes (section 12) ---- */

static int judge_doubling_traffic(int last, const struct gr_obs *all, struct gr_why *why)
{
    char cs[384], a[32];
    const struct l1_obs *v0 = rank_obs(all, 0);
    l1_describe_case(L1_RD, &v0->c, all->nranks, cs, sizeof cs);
    double S = 4.0 * (double)v0->c.count;
    for (int i = 0; i < all->nranks; i++) {
        const struct l1_obs *v = rank_obs(all, i);
        int n = v->n, k = doubling_messages(n);
        if (n < 2 || !(v->sends > k || v->sent > k * S)) continue;
        gr_why_say(why, "%s: rank %d sent %.0f messages, %s; recursive doubling on %d ranks "
                   "sends at most %d (floor(log2 n)%s), each the whole buffer. Every message "
                   "pays the link's latency alpha: a ring's %d steps pay it %d times, which is "
                   "what small messages are made of (section 11)", cs, v->rank, v->sends,
                   pl_format_bytes(v->sent, a, sizeof a), n, k,
                   (1 << (k - 1)) * 2 == n ? "" : " + 1 to hand the result back", 2 * (n - 1),
                   2 * (n - 1));
        return 0;
    }
    if (!last) return 1;
    /* The busiest rank over every case, in case order then rank order. */
    double most_msgs = 0, most_x = 0;
    int at_n = 0;
    for (int c = 0; c < v0->npast; c++)
        for (int i = 0; i < all->nranks; i++) {
            const struct l1_past *p = &rank_obs(all, i)->past[c];
            double Sc = 4.0 * (double)p->c.count;
            if (p->n < 2 || !(Sc > 0) || p->sends < most_msgs) continue;
            most_msgs = p->sends;
            most_x = p->sent / Sc > most_x ? p->sent / Sc : most_x;
            at_n = p->n;
        }
    if (at_n > 1)
        gr_why_say(why, "your busiest rank on %d ranks sent %.0f message%s, %.1f times the "
                   "buffer in all, where a ring rank sends %d of 1/%d of it: each message pays "
                   "the link's latency alpha once, whatever its size. Where that wins in time "
                   "is the crossover test's (section 11)", at_n, most_msgs,
                   most_msgs == 1 ? "" : "s", most_x, 2 * (at_n - 1), at_n);
    return 1;
}

/* The race of recursive doubling against the ring (lab01.h, struct l1_race): in the
 * alpha-beta model a ring all-reduce costs 2(n-1)(alpha + S/(nB)) and recursive doubling
 * k(alpha + S/B), so doubling wins below S* = alpha B (2(n-1) - k) / (k - 2(n-1)/n). The
 * replay must put doubling ahead at S* / 8, behind at 8 S*, and the crossing within a factor
 * of 2 of S*. */
static int judge_crossover(const struct l1_race *r, struct gr_why *why)
{
    char a[32], b[32], e[32];
    if (!r->done) return 1;
    if (r->ring_stub) {
        const struct l1_op_info *o = &L1_OPS[r->ring_stub - 1];
        gr_why_say(why, "not graded: this part races your recursive doubling against your "
                   "ring_all_reduce, and %s is still a stub (see docs/labs/01-collectives.md "
                   "section %s)", o->func, o->section);
        return 0;
    }
    if (r->failed) {
        gr_why_say(why, "your all-reduces' messages could not be replayed: %s", r->err);
        return 0;
    }
    pl_format_bytes(r->star, e, sizeof e);
    if (!(r->gap_lo < 0) || !(r->gap_hi > 0)) {
        gr_why_say(why, "on %s's NVLink (alpha %.1f us, B %.0f GB/s), %d ranks: the alpha-beta "
                   "model puts the crossover at S* = alpha B (2(n-1) - k) / (k - 2(n-1)/n) = %s "
                   "(k = %d rounds). Replayed, your recursive doubling is %s than your ring at "
                   "S*/8 = %s (by %.2f us) and %s at 8 S* = %s (by %.2f us): it should win "
                   "below S* and lose above (section 11)", L1_MODEL_PROFILE, r->alpha * 1e6,
                   r->B / 1e9, r->n, e, r->k, r->gap_lo < 0 ? "faster" : "not faster",
                   pl_format_bytes(r->star / 8, a, sizeof a), fabs(r->gap_lo) * 1e6,
                   r->gap_hi > 0 ? "slower" : "not slower",
                   pl_format_bytes(r->star * 8, b, sizeof b), fabs(r->gap_hi) * 1e6);
        return 0;
    }
    int ok = r->cross >= r->star / 2 && r->cross <= r->star * 2;
    gr_why_say(why, "%d ranks on %s: replayed, your recursive doubling and your ring cross at "
               "%s; the alpha-beta model says S* = %s (k = %d rounds, alpha %.1f us, B %.0f "
               "GB/s)%s", r->n, L1_MODEL_PROFILE, pl_format_bytes(r->cross, a, sizeof a), e,
               r->k, r->alpha * 1e6, r->B / 1e9,
               ok ? "" : ": more than a factor of 2 apart, so one of them sends more messages "
                         "or bytes than its algorithm needs (section 11)");
    return ok;
}

/* The most bytes a rank of the two-level all-reduce sends across nodes: 2(N-1)/N of its
 * 1/L share, chunks rounded up. */
static double across_bound(size_t count, int N, int L)
{
    size_t share = (count + (size_t)L - 1) / (size_t)L;
    return 4.0 * 2.0 * (N - 1) * (double)((share + (size_t)N - 1) / (size_t)N);
}

static int judge_hierarchical_traffic(int last, const struct gr_obs *all, struct gr_why *why)
{
    const struct l1_obs *v0 = rank_obs(all, 0);
    const int N = v0->nodes, L = v0->per_node, n = v0->n;
    const size_t count = (size_t)v0->c.count;
    const double S = 4.0 * (double)count, bound = across_bound(count, N, L);
    const double flat = 2.0 * (n - 1) / n * S; /* a ring rank next to another node */
    /* Inside the node a rank receives L-1 chunks of 1/L in the reduce-scatter and as many in
     * the all-gather, and across nodes what it sends there. A rank that collects its node's
     * whole buffers receives (L-1) x S before anything leaves the node. */
    const double chunk = 4.0 * (double)((count + (size_t)L - 1) / (size_t)L);
    const double received_bound = 2.0 * (L - 1) * chunk + bound;
    char cs[384], a[32], b[32], e[32];
    l1_describe_case(L1_HIER, &v0->c, all->nranks, cs, sizeof cs);
    double most = 0, slowest = 0;
    for (int i = 0; i < all->nranks; i++) {
        const struct l1_obs *v = rank_obs(all, i);
        if (v->sent_inter > bound) {
            gr_why_say(why, "%s: rank %d sent %s across nodes, where a rank of the two-level "
                       "all-reduce sends at most 2(N-1)/N of its 1/L share: %s for N = %d nodes "
                       "of L = %d ranks. A flat ring sends %s across on each link between two "
                       "nodes. Reduce inside the node first, so that only 1/L of the buffer per "
                       "rank goes over the network (section 12)", cs, v->rank,
                       pl_format_bytes(v->sent_inter, a, sizeof a),
                       pl_format_bytes(bound, b, sizeof b), N, L,
                       pl_format_bytes(flat, e, sizeof e));
            /* One leader per node all-reducing the whole node sum: within that volume. */
            if (L > 1 && v->sent_inter <= across_bound(count, N, 1))
                gr_why_say(why, "rank %d moved its node's whole sum across: one leader per node "
                           "leaves the other %d ranks' network links idle, so the network part "
                           "takes L = %d times longer than it needs. Give each rank of the "
                           "node 1/L of the buffer to all-reduce across nodes (section 12)",
                           v->rank, L - 1, L);
            else if (N > 2)
                gr_why_say(why, "here the ranks run on %d nodes: take each rank's node from "
                           "coll_node_of; code that takes the nodes to be two halves of the "
                           "ranks runs its node rings across the network", N);
            return 0;
        }
        if (v->received > received_bound) {
            gr_why_say(why, "%s: rank %d received %s, where a rank of the two-level all-reduce "
                       "receives at most %s: 2(L-1) chunks of 1/L inside its node (L = %d) and "
                       "its share across nodes. A rank that collects the node's whole buffers "
                       "does the node's work alone while its neighbours' links idle; "
                       "reduce-scatter inside the node instead, so each rank reduces 1/L "
                       "(section 12)", cs, v->rank, pl_format_bytes(v->received, a, sizeof a),
                       pl_format_bytes(received_bound, b, sizeof b), L);
            return 0;
        }
        if (v->sent_inter > most) most = v->sent_inter;
        if (v->modelled > slowest) slowest = v->modelled;
    }
    const struct pl_profile *p = pl_profile_find(L1_MODEL_PROFILE);
    double ring = pl_coll_time(PL_ALL_REDUCE, n, S, p->latency[PL_LINK_INTER],
                               p->bw[PL_LINK_INTER]);
    if (S >= 1048576.0 && slowest >= ring) {
        gr_why_say(why, "%s: modelled on %s, your slowest rank takes %.1f us, no faster than a "
                   "flat ring's %.1f us: the network bytes are few but the steps are many or "
                   "serial (section 12)", cs, L1_MODEL_PROFILE, slowest * 1e6, ring * 1e6);
        return 0;
    }
    if (last)
        gr_why_say(why, "%s: your busiest rank sent %s across nodes (the bound, 2(N-1)/N x S/L "
                   "for N = %d, L = %d: %s), where a flat ring sends %s on each link between "
                   "nodes; modelled on %s your slowest rank takes %.1f us, a flat ring %.1f us",
                   cs, pl_format_bytes(most, a, sizeof a), N, L,
                   pl_format_bytes(bound, e, sizeof e), pl_format_bytes(flat, b, sizeof b),
                   L1_MODEL_PROFILE, slowest * 1e6, ring * 1e6);
    return 1;
}

/* Returns 1 when every rank sent the ring's volume; otherwise says why (once). */
static int judge_traffic(int op, const struct gr_obs *all, struct gr_why *why)
{
    const struct l1_obs *v0 = rank_obs(all, 0);
    const size_t count = (size_t)v0->c.count;
    char cs[384], a[32], b[32], e[32];
    l1_describe_case(op, &v0->c, all->nranks, cs, sizeof cs);
    double S = 4.0 * (double)l1_buffer_count(op, count, v0->n);
    if (op == L1_BC) return judge_broadcast_traffic(all, cs, S, why);
    for (int i = 0; i < all->nranks; i++) {
        const struct l1_obs *v = rank_obs(all, i);
        double lo, hi;
        optimal_sent(op, count, v->n, &lo, &hi);
        if (v->sent >= lo && v->sent <= hi && v->received <= hi) continue;
        /* A rank that moves a whole buffer for each of the n-1 others is a hub; a ring rank
         * moves at most 2(n-1)/n of one. On 2 ranks the two are the same. */
        double whole = 4.0 * (double)count * (v->n - 1);
        int funnel = v->n > 2 && whole > 0 && (v->sent >= whole || v->received >= whole);
        if (lo == hi) snprintf(e, sizeof e, "%s", pl_format_bytes(lo, a, sizeof a));
        else snprintf(e, sizeof e, "%.0f..%.0f B", lo, hi);
        gr_why_say(why, "%s: rank %d sent %s and received %s; a ring rank sends %s = %s%s", cs,
                   v->rank, pl_format_bytes(v->sent, a, sizeof a),
                   pl_format_bytes(v->received, b, sizeof b), formula(op), e,
                   lo == hi ? "" : " (n does not divide the count, so chunks differ by one "
                                   "element and so may the volumes, by at most one element per "
                                   "step)");
        if (funnel)
            gr_why_say(why, "rank %d moves a whole buffer for every other rank: your algorithm "
                       "funnels the data through one rank, whose link carries (n-1) x S where a "
                       "ring link carries %s, so its time grows with n. A ring keeps every link "
                       "equally busy and the time flat whatever n (handout section 3)", v->rank,
                       formula(op));
        else if (v->sent > hi)
            gr_why_say(why, "%.0f bytes more than the ring needs: is a chunk sent twice, or a "
                       "whole buffer where a chunk would do?", v->sent - hi);
        else
            gr_why_say(why, "%.0f bytes fewer than any correct algorithm sends: were some "
                       "messages sent outside pl_send/pl_isend/pl_sendrecv?", lo - v->sent);
        return 0;
    }
    return 1;
}

static int judge_memory(int op, const struct gr_obs *all, struct gr_why *why)
{
    char cs[384], a[32], b[32];
    for (int i = 0; i < all->nranks; i++) {
        const struct l1_obs *v = rank_obs(all, i);
        double S = 4.0 * (double)l1_buffer_count(op, v->c.count, v->n);
        l1_describe_case(op, &v->c, all->nranks, cs, sizeof cs);
        if (v->leaked != 0) {
            gr_why_say(why, "%s: rank %d still holds %s allocated by %s after it returned: free "
                       "every pl_comm_buf_alloc with pl_comm_buf_free", cs, v->rank,
                       pl_format_bytes(v->leaked, a, sizeof a), L1_OPS[op].func);
            return 0;
        }
        if (v->unseen > L1_P_NONE && v->unseen < L1_NPLACES) {
            gr_why_say(why, "%s: rank %d: %s's %s lay %s: the memory ledger never sees it, so "
                       "the scratch your code holds cannot be measured, and on the GPU build a "
                       "message cannot land there. Take scratch from pl_comm_buf_alloc and free "
                       "it with pl_comm_buf_free (handout section 3)", cs, v->rank,
                       L1_PLACES[v->unseen].call, L1_PLACES[v->unseen].arg,
                       gr_unseen_where(v->unseen_where));
            return 0;
        }
        if (v->scratch > S) {
            gr_why_say(why, "%s: rank %d held %s of extra buffers at once, more than the %s "
                       "buffer itself; %s", cs, v->rank,
                       pl_format_bytes(v->scratch, a, sizeof a), pl_format_bytes(S, b, sizeof b),
                       op == L1_RD ? "doubling needs one buffer of scratch, for the partner's "
                                     "buffer of each exchange, reused from round to round"
                       : op == L1_HIER ? "the two levels need one chunk of scratch, 1/L of the "
                                         "buffer for the node's ring, which the ring across the "
                                         "nodes can reuse"
                                       : "a ring needs one chunk of scratch");
            return 0;
        }
    }
    return 1;
}

/* On a pass, the figures the lab is about, once per part, said after the last case: those
 * of the largest case (the first of that size), the busiest rank's bytes sent and received
 * or its peak scratch. */
static void note_figures(int op, const struct gr_obs *all, int memory, struct gr_why *why)
{
    const struct l1_obs *v0 = rank_obs(all, 0);
    double best_S = -1;
    int best = -1;
    for (int c = 0; c < v0->npast; c++) {
        double S = 4.0 * (double)l1_buffer_count(op, v0->past[c].c.count, v0->past[c].n);
        if (S > best_S) {
            best_S = S;
            best = c;
        }
    }
    if (best < 0) return;
    double sent = 0, recv = 0, scratch = 0;
    for (int j = 0; j < all->nranks; j++) {
        const struct l1_past *p = &rank_obs(all, j)->past[best];
        if (p->sent > sent) sent = p->sent;
        if (p->received > recv) recv = p->received;
        if (p->scratch > scratch) scratch = p->scratch;
    }
    char cs[384], a[32], b[32], e[32];
    l1_describe_case(op, &v0->past[best].c, all->nranks, cs, sizeof cs);
    pl_format_bytes(best_S, e, sizeof e);
    if (!memory)
        gr_why_say(why, "%s: the busiest rank sent %s and received %s of the %s buffer (%s)",
                   cs, pl_format_bytes(sent, a, sizeof a), pl_format_bytes(recv, b, sizeof b),
                   e, formula(op));
    else
        gr_why_say(why, "%s: at most %s of scratch held at once beside the %s buffer, nothing "
                   "left after the call", cs, pl_format_bytes(scratch, a, sizeof a), e);
}

int l1_judge(int op, int i, int ncases, const char *part, const struct gr_obs *all,
             struct gr_why *why)
{
    int last = i == ncases - 1;
    if (!strcmp(part, "correct")) return judge_correct(op, i, all, why);
    if (!strcmp(part, "crossover")) return judge_crossover(&rank_obs(all, 0)->race, why);
    if (!strcmp(part, "traffic") && op == L1_RD) return judge_doubling_traffic(last, all, why);
    if (!strcmp(part, "traffic") && op == L1_HIER)
        return judge_hierarchical_traffic(last, all, why);
    int memory = !strcmp(part, "memory");
    int ok = memory ? judge_memory(op, all, why) : judge_traffic(op, all, why);
    if (ok && last) note_figures(op, all, memory, why);
    return ok;
}
