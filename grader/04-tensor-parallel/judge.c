/* judge.c: Lab 4's verdicts (lab04.h), on rank 0 from every rank's observation of a case. No
 * MPI and nothing but the arguments: tests/judge/04-tensor-parallel.c runs these on recorded
 * and hand-built observations. A part fails on the first rank (in rank order) that stated a
 * failure or whose figures fail the part's rule, with "rank R: " before the reason; on the
 * last case a part that passed says rank 0's note. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lab04.h"

const char *const L4_PART_NAMES[L4_NPARTS] = {"correct", "traffic",  "memory",
                                              "placement", "order", "time"};
const char *const L4_KIND_OPS[L4_PLACE + 1] = {"conjugates", "linear", "mlp",   "attention",
                                               "block",      "vocab",  "train", "placement"};
const char *const L4_KIND_SUBJECTS[L4_PLACE + 1] = {
    "f and g",      "the parallel linears",         "the TP MLP",  "the TP attention",
    "the TP block", "the vocabulary-parallel loss", "TP training", "the TP block"};

/* ---- part traffic of the layer ops: each pass's all-reduces ---- */

/* Every rank's pass made `calls` all-reduces of `count` floats each and nothing else. */
int l4_judge_pass(const struct l4_pass *p, char *buf, size_t len)
{
    const struct l4_traffic *tr = &p->tr;
    const long calls = p->calls;
    const int t = p->t;
    /* the ring all-reduce: each rank sends 2(t-1)/t of the buffer */
    double want = (double)calls * 2.0 * (t - 1) / t * p->count * 4.0;
    char a[32], b[32];
    if (tr->other_calls || tr->other_bytes > 0)
        snprintf(buf, len, "the %s made %ld operations other than all-reduce (%s): tensor "
                 "parallelism needs only the all-reduces of f and g", p->name, tr->other_calls,
                 pl_format_bytes(tr->other_bytes, a, sizeof a));
    else if (tr->ar_calls != calls)
        snprintf(buf, len, "the %s made %ld all-reduce%s on the TP group where it needs %ld "
                 "(%s)%s", p->name, tr->ar_calls, tr->ar_calls == 1 ? "" : "s", calls, p->where,
                 tr->ar_calls < calls ? ": a g (forward) or f (backward) that skips its "
                                        "all-reduce leaves each rank with a partial sum"
                                      : ": f is the identity forward and g the identity "
                                        "backward; an all-reduce there adds traffic (and sums "
                                        "what is already whole)");
    else if (fabs(tr->ar_bytes - want) > 0.5)
        snprintf(buf, len, "the %s sent %s per rank where %ld all-reduce%s of %.0f floats on %d "
                 "ranks send %s (2(t-1)/t of each buffer): reduce exactly the [N, C] activation",
                 p->name, pl_format_bytes(tr->ar_bytes, a, sizeof a), calls,
                 calls == 1 ? "" : "s", p->count, t, pl_format_bytes(want, b, sizeof b));
    else
        return 1;
    return 0;
}

/* ---- op vocab: its collectives and the head's memory ---- */

/* By the handout's cost model (a ring all-reduce of n floats sends 2(t-1)/t n per rank, an
 * all-gather of n per rank (t-1) n): g of the embedding and f's backward of the head, an
 * all-reduce of [N, C] each, and the loss's three numbers per row (max, sum of
 * exponentials, target logit), each crossing ranks in at most one collective no costlier
 * than an all-gather of N. How a loss groups them is its choice; gathered logits move
 * N V/t floats per rank, far past the bound. */
static double vocab_most(const struct l4_vocab *v, double *per_number)
{
    const int t = v->t, N = v->B * v->T;
    const double acts = 2 * (2.0 * (t - 1) / t * N * v->C * 4);
    *per_number = fmax(2.0 * (t - 1) / t, t - 1.0) * N * 4;
    return acts + 3 * *per_number;
}

#define L4_VOCAB_MOST_CALLS 5 /* two all-reduces of [N, C], one per number of the loss */

static int vocab_traffic(const struct l4_vocab *v, char *buf, size_t len)
{
    double per_number, most = vocab_most(v, &per_number);
    char a1[32], a2[32];
    if (!(v->t > 1 && (v->calls > L4_VOCAB_MOST_CALLS || v->bytes > most + 0.5))) return 1;
    snprintf(buf, len, "the embedding and the loss sent %s per rank in %ld collectives (%ld "
             "all-reduce%s, %ld all-gather%s) where they need at most %s in %d collectives: "
             "an all-reduce of [N, C] forward in the embedding and one backward in the head, "
             "and for each of the loss's three numbers per row one collective of N floats "
             "(at most (t-1)N sent per rank, an all-gather's)%s",
             pl_format_bytes(v->bytes, a1, sizeof a1), v->calls, v->ar_calls,
             v->ar_calls == 1 ? "" : "s", v->ag_calls, v->ag_calls == 1 ? "" : "s",
             pl_format_bytes(most, a2, sizeof a2), L4_VOCAB_MOST_CALLS,
             v->ag_bytes > 3 * per_number
                 ? ": gathering logits moves N x V floats; only the row maxima, the sums of "
                   "exponentials and the target logits need to cross ranks (section 10)"
                 : "");
    return 0;
}

static void vocab_traffic_note(const struct l4_vocab *v, char *buf, size_t len)
{
    double per_number, most = vocab_most(v, &per_number);
    char a1[32], a2[32];
    snprintf(buf, len, "%s per rank in %ld collectives (%ld all-reduce%s, %ld all-gather%s) for "
             "b=%d s=%d, within %s: two all-reduces of [N, C] and at most one collective of N "
             "floats for each of the loss's three numbers per row",
             pl_format_bytes(v->bytes, a1, sizeof a1), v->calls, v->ar_calls,
             v->ar_calls == 1 ? "" : "s", v->ag_calls, v->ag_calls == 1 ? "" : "s", v->B, v->T,
             pl_format_bytes(most, a2, sizeof a2));
}

/* Nothing the size of the full logits, counting the collectives' buffers the ledger cannot
 * see. */
static int vocab_memory(const struct l4_vocab *v, char *buf, size_t len)
{
    const double full = 4.0 * v->B * v->T * v->V, held = v->held;
    char a1[32], a2[32], a3[32];
    if (v->t > 1 && held < full && held + v->hidden >= full)
        snprintf(buf, len, "your head and loss held %s at peak beyond their activations, %s of "
                 "it %s given to %s, where the memory ledger does not see it: as much as the "
                 "full [N, V] logits (%s). Vocabulary parallelism never builds them: each rank "
                 "keeps its [N, V/t] columns and three numbers per row (section 10)",
                 pl_format_bytes(held + v->hidden, a1, sizeof a1),
                 pl_format_bytes(v->hidden, a2, sizeof a2), v->hidden_region, v->hidden_call,
                 pl_format_bytes(full, a3, sizeof a3));
    else if (v->t > 1 && held >= full)
        snprintf(buf, len, "your head and loss held %s at peak beyond their activations: as "
                 "much as the full [N, V] logits (%s). Vocabulary parallelism never builds "
                 "them: each rank keeps its [N, V/t] columns and three numbers per row "
                 "(section 10)", pl_format_bytes(held, a1, sizeof a1),
                 pl_format_bytes(full, a2, sizeof a2));
    else
        return 1;
    return 0;
}

static void vocab_memory_note(const struct l4_vocab *v, char *buf, size_t len)
{
    char a1[32], a2[32];
    snprintf(buf, len, "the head held at most %s beyond its activations, below the full logits' "
             "%s", pl_format_bytes(v->held, a1, sizeof a1),
             pl_format_bytes(4.0 * v->B * v->T * v->V, a2, sizeof a2));
}

/* ---- part time: the block on the modelled timeline (block_time.h's bounds) ---- */

#define L4_TIME_COMM "4 ring all-reduces of bsh"
#define L4_TIME_SECTION "8"

/* Why a block is slower than the bound: its compute against the single device's split t
 * ways. */
static void slower_because(const struct l4_time *m, char *buf, size_t len)
{
    snprintf(buf, len,
             "your compute alone is %.2f ms, %.2fx the single device's split %d "
             "ways (%.2f ms). Each rank should do the products of its own shard once: a product "
             "repeated (the forward's, again in the backward, with its activations kept) or run "
             "on zero-padded or gathered full-size tensors is paid on every rank (section %s)",
             m->compute * 1e3, m->compute / m->split, m->t, m->split * 1e3, L4_TIME_SECTION);
}

/* Case 0: 1, or 0 with the reason; a ratio between full and no marks lowers the fraction. */
static int time_verdict(const struct l4_time *m, char *buf, size_t len, struct gr_why *why)
{
    char because[400];
    if (!m->traced) {
        snprintf(buf, len, "your block's trace could not be replayed: %s", m->err);
        return 0;
    }
    if (m->ratio >= GR_BT_NONE) {
        slower_because(m, because, sizeof because);
        snprintf(buf, len, "your block's modelled step is %.2f ms on %s at GPT-3 block scale, "
                 "%.2fx the %.2f ms a split block needs (compute/t + %s; no points from "
                 "%.2fx): %s", m->step * 1e3, GR_BT_PROFILE, m->ratio, m->bound * 1e3,
                 L4_TIME_COMM, GR_BT_NONE, because);
        return 0;
    }
    if (m->ratio > GR_BT_FULL)
        gr_why_partial(why, (GR_BT_NONE - m->ratio) / (GR_BT_NONE - GR_BT_FULL));
    return 1;
}

static void time_note(const struct l4_time *m, char *buf, size_t len)
{
    char because[400] = "";
    buf[0] = '\0';
    if (!m->traced || m->bound <= 0) return;
    if (m->ratio > GR_BT_FULL) slower_because(m, because, sizeof because);
    snprintf(buf, len, "your block forward and backward, modelled on %s at GPT-3 175B block "
             "scale, takes %.2f ms: %.2fx the %.2f ms of compute/t + %s (full marks up to "
             "%.2fx, none from %.2fx)%s%s", GR_BT_PROFILE, m->step * 1e3, m->ratio,
             m->bound * 1e3, L4_TIME_COMM, GR_BT_FULL, GR_BT_NONE, because[0] ? "; " : "",
             because);
}

/* ---- a part on one case ---- */

/* Rank r's figures against part p's rule: 1, or 0 with the reason in buf. */
static int figures_pass(const struct l4_obs *o, int p, int i, char *buf, size_t len,
                        struct gr_why *why)
{
    if (p == L4_TRAFFIC) {
        for (int k = 0; k < o->npass && k < (int)(sizeof o->pass / sizeof o->pass[0]); k++)
            if (!l4_judge_pass(&o->pass[k], buf, len)) return 0;
        if (o->has_vocab && !vocab_traffic(&o->vocab, buf, len)) return 0;
    }
    if (p == L4_MEMORY && o->has_vocab && !vocab_memory(&o->vocab, buf, len)) return 0;
    if (p == L4_TIME && o->has_time && i == 0) return time_verdict(&o->time, buf, len, why);
    return 1;
}

int l4_judge(int kind, int i, int ncases, const char *part, const struct gr_obs *all,
             struct gr_why *why)
{
    (void)kind;
    int p = 0;
    while (p < L4_NPARTS && strcmp(part, L4_PART_NAMES[p])) p++;
    if (p == L4_NPARTS) {
        gr_why_say(why, "Lab 4 judges no part '%s' (correct, traffic, memory, placement, order "
                   "and time)", part);
        return 0;
    }
    if (all->size != sizeof(struct l4_obs)) {
        gr_why_say(why, "an observation of %zu bytes where Lab 4's are %zu: a record of another "
                   "build", all->size, sizeof(struct l4_obs));
        return 0;
    }
    char buf[L4_TEXT];
    for (int r = 0; r < all->nranks; r++) {
        const struct l4_obs *o = gr_obs_rank(all, r);
        const char *text = o->part[p].why;
        if (!o->part[p].failed) {
            if (figures_pass(o, p, i, buf, sizeof buf, why)) continue;
            text = buf;
        }
        gr_why_say(why, "rank %d: %.*s", r, L4_TEXT - 1, text);
        return 0;
    }
    if (i != ncases - 1) return 1;
    /* the note of a passing part, rank 0's */
    const struct l4_obs *o = gr_obs_rank(all, 0);
    snprintf(buf, sizeof buf, "%s", o->part[p].note);
    if (p == L4_TRAFFIC && o->has_vocab) vocab_traffic_note(&o->vocab, buf, sizeof buf);
    if (p == L4_MEMORY && o->has_vocab) vocab_memory_note(&o->vocab, buf, sizeof buf);
    if (p == L4_TIME && o->has_time) time_note(&o->time, buf, sizeof buf);
    if (buf[0]) gr_why_say(why, "%s", buf);
    return 1;
}
