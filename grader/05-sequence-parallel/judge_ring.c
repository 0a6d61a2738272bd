/* judge_ring.c: the verdicts of Lab 5's second part (op ring), on rank 0 from every rank's
 * observation of a ring case (struct l5_ring_obs). No MPI and nothing but the arguments:
 * tests/judge/05-sequence-parallel.c runs them on hand-built observations. A part fails on
 * the first rank (in rank order) that recorded a failure of it; the balance is the group's
 * (each rank's FLOPs against the mean, the mean against what the causal mask needs). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lab05.h"
#include "unseen.h"

static const char *const PARTS[L5_RING_PARTS] = {"correct", "traffic", "memory", "balance",
                                                  "overlap"};

#define L5_RING_BALANCE 0.02 /* each rank's FLOPs within 2% of the mean */

double l5_ring_fwd_units(int cp)
{
    return 2.0 * (cp - 1);
}

void l5_ring_bwd_units(int cp, double *lo, double *hi)
{
    *lo = 4.0 * (cp - 1);
    *hi = 4.0 * cp - 2;
}

double l5_ring_min_flops(int cp, int B, int T, int C, int NH)
{
    const int Tc = T / (2 * cp);
    return (double)B * (2 * cp + 1) *
           (pl_attn_block_flops(Tc, Tc, C, NH, 0) + pl_attn_block_flops(Tc, Tc, C, NH, 1));
}


static void layout_words(const struct l5_ring_said *s, int cp, char *buf, size_t len)
{
    const char *what[] = {"a chunk outside 0..2cp-1", "chunk[0] not before chunk[1]",
                          "a chunk another rank holds too"};
    int k = (int)s->v[3];
    int n = snprintf(buf, len, "cp_chunks(%d, %d) gives chunks %d and %d: %s", cp,
                     (int)s->v[0], (int)s->v[1], (int)s->v[2], what[k < 0 || k > 2 ? 0 : k]);
    if (k == 2 && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " (rank %d's)", (int)s->v[4]);
    if (n > 0 && (size_t)strlen(buf) < len)
        snprintf(buf + strlen(buf), len - strlen(buf), ". The 2cp chunks of Tc = T/(2cp) "
                 "tokens are each held by one rank, two per rank, the earlier first "
                 "(section 8.2)");
}

/* Rank o's failure s of part p in words. */
static void ring_reason(const struct l5_ring_obs *o, const struct l5_ring_said *s, char *buf,
                        size_t len)
{
    const double *v = s->v;
    const int Tc = o->T / (2 * o->cp);
    char what[96], hint[900];
    switch (s->code) {
    case L5_R_LAYOUT:
        layout_words(s, o->cp, buf, len);
        return;
    case L5_R_OUT:
        snprintf(what, sizeof what, "out (worst in chunk %d, global positions %d..%d)",
                 (int)v[0], (int)v[1], (int)v[1] + Tc - 1);
        if (!s->cmp.finite)
            snprintf(hint, sizeof hint, "this case's scores reach a hundred and more, and "
                     "exp of anything above 88.7 overflows fp32: weigh each partial output by "
                     "exp(lse_b - m), m the larger of the running and the block's lse, never "
                     "by exp(lse_b) itself (section 8.3)");
        else
            snprintf(hint, sizeof hint, "each block's causal mask compares GLOBAL positions "
                     "(pl_attn_block_forward's q0 and k0: chunk c starts at token c Tc, here "
                     "Tc = %d), not a row's place in a rank's buffer; and the merge weighs "
                     "each partial output by its share exp(lse_b - m) / sum of the row's "
                     "exp-sum (section 8.3)", Tc);
        break;
    case L5_R_GRAD:
        snprintf(what, sizeof what, "%s (worst in chunk %d, global positions %d..%d)", s->name,
                 (int)v[0], (int)v[1], (int)v[1] + Tc - 1);
        if (v[2] >= 0)
            snprintf(hint, sizeof hint, "these are rank %d's rows of the single device's %s: "
                     "the gradients of a rank's keys and values end the ring one step short "
                     "of their owner. After the last block they take one step more, home to "
                     "the rank that holds those keys (section 8.4)", (int)v[2], s->name);
        else if (!strcmp(s->name, "dq"))
            snprintf(hint, sizeof hint, "dq of a row sums its blocks against every key it "
                     "sees, each block's backward given the MERGED lse and delta = "
                     "rowsum(dout * out) of the merged out (section 8.4)");
        else
            snprintf(hint, sizeof hint, "dk and dv of a rank's keys sum the blocks of every "
                     "rank's queries that see them: their accumulators travel the ring with K "
                     "and V, each rank adding its blocks, and end at the owner (section 8.4)");
        break;
    case L5_R_LEFT:
        snprintf(buf, len, "%s left %.0f bytes allocated when it returned: what the backward "
                 "needs of the forward is in out and lse, the caller's; free every scratch "
                 "buffer before returning", v[0] ? "cp_attention_backward" :
                 "cp_attention_forward", v[1]);
        return;
    case L5_R_PEAK:
        snprintf(buf, len, "%s held up to %.0f bytes above its arguments, more than %.0f "
                 "(%s L + 2 lse bytes + %s%.0f of the kit's block call, L = %.0f bytes, one "
                 "rank's K): a ring keeps a few chunks in flight (the block computed on and the "
                 "one arriving), never every rank's K and V at once (section 8.5)",
                 v[0] ? "cp_attention_backward" : "cp_attention_forward", v[1], v[2],
                 v[0] ? "9" : "6", v[0] ? "" : "one block's partial output (4 Tc C) + ",
                 v[5], v[3]);
        return;
    case L5_R_TRAFFIC: {
        const char *pass = v[0] ? "backward" : "forward";
        int n = snprintf(buf, len, "the %s sent %.0f bytes in %.0f point-to-point messages "
                         "and made %.0f collective call%s; ", pass, v[1], v[2], v[3],
                         v[3] == 1 ? "" : "s");
        if (n < 0 || (size_t)n >= len) return;
        if (v[0] == 0)
            snprintf(buf + n, len - (size_t)n, "a ring sends its K and V to the next rank "
                     "cp-1 = %d times, %.0f bytes = 2(cp-1) L with L = %.0f bytes, and "
                     "nothing else: no collective, K and V never to every rank at once "
                     "(section 8.5)", o->cp - 1, v[4], v[6]);
        else
            snprintf(buf + n, len - (size_t)n, "the backward passes K and V round again "
                     "(2(cp-1) L) and the gradients of K and V back to their owners (from "
                     "2(cp-1) L sent straight home to 2cp L travelling with K and V): %.0f to "
                     "%.0f bytes, L = %.0f, and no collective (section 8.5)", v[4], v[5], v[6]);
        return;
    }
    case L5_R_HOME:
        snprintf(buf, len, "the %s sent %.0f message%s of K or V (L = %.0f bytes each) to the "
                 "rank that owns them, which holds them already: the bytes fit the range, but "
                 "they carry nothing. K and V reach every other rank in cp-1 steps; in the "
                 "backward it is the gradients of K and V that go home, not K and V "
                 "(section 8.4)", v[0] ? "backward" : "forward", v[1], v[1] == 1 ? "" : "s",
                 v[2]);
        return;
    case L5_R_UNSEEN:
        snprintf(buf, len, "in %s, %s lies %s: the memory ledger never sees it, so "
                 "what the pass holds there (every K and V that comes past, say) escapes "
                 "the peak bound. Every buffer, the blocks in flight included, comes from "
                 "pl_mem_alloc (sp.h, memory)", v[0] ? "cp_attention_backward" :
                 "cp_attention_forward", o->unseen,
                 v[1] == GR_UNSEEN_STACK ? "on the stack (a local or variable-length array)"
                                         : "in static storage (an array declared static)");
        return;
    default:
        snprintf(buf, len, "an observation this build does not know (code %d)", s->code);
        return;
    }
    gr_cmp_words(&s->cmp, what, hint, buf, len);
}

/* The group's balance: 1, or 0 with the reason. */
static int balance(const struct gr_obs *all, char *buf, size_t len, double *spread)
{
    const struct l5_ring_obs *o0 = &((const struct l5_obs *)gr_obs_rank(all, 0))->ring;
    double sum = 0, mx = 0;
    int at = 0;
    for (int r = 0; r < all->nranks; r++) {
        const struct l5_ring_obs *o = &((const struct l5_obs *)gr_obs_rank(all, r))->ring;
        const double f = o->fwd_flops + o->bwd_flops;
        sum += f;
        if (f > mx) mx = f, at = r;
    }
    const double mean = sum / all->nranks;
    const double need = l5_ring_min_flops(o0->cp, o0->B, o0->T, o0->C, o0->NH);
    *spread = mean > 0 ? mx / mean - 1 : 0;
    if (*spread > L5_RING_BALANCE) {
        const struct l5_ring_obs *o = &((const struct l5_obs *)gr_obs_rank(all, at))->ring;
        snprintf(buf, len, "rank %d (chunks %d and %d) spends %.3g attention FLOPs, %.2fx the "
                 "mean of the %d ranks (at most %.2fx): under the causal mask chunk c's "
                 "queries see c+1 chunks of keys, so the two chunks each rank holds decide its "
                 "share of the work, and the balance rule wants every rank's share within "
                 "%.0f%% of the mean (cp_chunks, section 8.2)", at, o->chunk[0], o->chunk[1],
                 mx, mx / mean, all->nranks, 1 + L5_RING_BALANCE, 100 * L5_RING_BALANCE);
        return 0;
    }
    if (mean > need * 1.001) {
        snprintf(buf, len, "the ranks spend %.3g attention FLOPs each on average where the "
                 "blocks the causal mask leaves something to see need %.3g (2cp+1 = %d "
                 "blocks of Tc x Tc per sequence, forward and backward): a block wholly in "
                 "its queries' future costs a whole block and adds nothing; skip it "
                 "(section 8.3)", mean, need, 2 * o0->cp + 1);
        return 0;
    }
    return 1;
}

/* The forward's exchange on the modelled timeline (rank 0's replay of case 0): 1, or 0
 * with the reason. */
static int overlap(const struct l5_ring_obs *o, char *buf, size_t len)
{
    if (o->cp < 2) return 1;
    if (!o->traced) {
        snprintf(buf, len, "the forward could not be replayed: %s", o->trace_err);
        return 0;
    }
    if (o->comm > 0 && o->exposed > L5_RING_EXPOSED * o->comm) {
        snprintf(buf, len, "on the modelled timeline (dgx-h100, one sequence of %.0f tokens, "
                 "C = %.0f, 16-bit) your forward takes %.1f ms: %.1f ms of attention compute "
                 "and %.1f ms of its %.1f ms of K/V transfers exposed (%.0f%%; at most %.0f%%). "
                 "Start the next step's pl_ring_shift_start before computing the blocks of the "
                 "keys you hold, and wait for it after them: the transfer then runs behind the "
                 "compute (section 8.5)", L5_RING_REAL_T, L5_RING_REAL_C, 1e3 * o->step,
                 1e3 * o->compute, 1e3 * o->exposed, 1e3 * o->comm,
                 100 * o->exposed / o->comm, 100 * L5_RING_EXPOSED);
        return 0;
    }
    return 1;
}

/* What a passing part shows, on the last case. */
static void note(int p, const struct gr_obs *all, double spread, struct gr_why *why)
{
    const struct l5_ring_obs *o = &((const struct l5_obs *)gr_obs_rank(all, 0))->ring;
    const double L = 4.0 * o->B * (o->T / o->cp) * o->C;
    if (p == 1 && o->cp > 1)
        gr_why_say(why, "rank 0 sent %.0f bytes forward (2(cp-1) L = %.0f) and %.0f backward, "
                   "L = %.0f bytes (one rank's K)", o->fwd_bytes, l5_ring_fwd_units(o->cp) * L,
                   o->bwd_bytes, L);
    else if (p == 2)
        gr_why_say(why, "from the forward to the backward a rank keeps q, k, v, out and lse: "
                   "%.0f bytes = 4 B (T/cp)(4C + NH), 1/cp of the sequence's and no T x T "
                   "scores; peaks above the arguments %.0f forward, %.0f backward",
                   o->held, o->fwd_peak, o->bwd_peak);
    else if (p == 4 && o->cp > 1 && o->traced)
        gr_why_say(why, "the forward's K/V transfers, %.1f ms on the modelled timeline "
                   "(dgx-h100, %.0f tokens, C = %.0f, 16-bit), run behind %.1f ms of attention "
                   "compute: %.2f ms exposed", 1e3 * o->comm, L5_RING_REAL_T, L5_RING_REAL_C,
                   1e3 * o->compute, 1e3 * o->exposed);
    else if (p == 3 && o->cp > 1 && o->cp <= 4) /* the handout's figures (cp = 8 a question's) */
        gr_why_say(why, "attention FLOPs per rank within %.1f%% of the mean; a contiguous "
                   "split would give the last rank %.2fx the mean at cp = %d", 100 * spread,
                   (4.0 * o->cp - 1) / (2.0 * o->cp + 1), o->cp);
    else if (p == 3 && o->cp > 1)
        gr_why_say(why, "attention FLOPs per rank within %.1f%% of the mean", 100 * spread);
}

int l5_judge_ring(int i, int ncases, const char *part, const struct gr_obs *all,
                  struct gr_why *why)
{
    const int p = l5_part_of(PARTS, L5_RING_PARTS, "Lab 5's ring attention", part, all, why);
    if (p < 0) return 0;
    char buf[L5_TEXT];
    for (int r = 0; r < all->nranks; r++) {
        const struct l5_ring_obs *o = &((const struct l5_obs *)gr_obs_rank(all, r))->ring;
        if (o->part[p].code) {
            ring_reason(o, &o->part[p], buf, sizeof buf);
        } else if (p == 0 && !o->ran) {
            snprintf(buf, sizeof buf, "the passes did not run to the end");
        } else {
            continue;
        }
        gr_why_say(why, "rank %d: %s", r, buf);
        return 0;
    }
    double spread = 0;
    const struct l5_ring_obs *o0 = &((const struct l5_obs *)gr_obs_rank(all, 0))->ring;
    if (p == 4 && !overlap(o0, buf, sizeof buf)) {
        gr_why_say(why, "%s", buf);
        return 0;
    }
    if (p == 3 && !balance(all, buf, sizeof buf, &spread)) {
        gr_why_say(why, "%s", buf);
        return 0;
    }
    if (i == ncases - 1) note(p, all, spread, why);
    return 1;
}
