/* judge.c: Lab 4's verdicts (lab04.h), on rank 0 from every rank's observation of a case. No
 * MPI and nothing but the arguments: tests/judge/04-tensor-parallel.c runs these on recorded
 * and hand-built observations. A rank records figures, never text: a part fails on the first
 * rank (in rank order) that recorded a failure (l4_reason words it) or whose figures fail the
 * part's rule, with "rank R: " before the reason; on the last case a part that passed says
 * what rank 0's figures show. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lab04.h"

const char *const L4_PART_NAMES[L4_NPARTS] = {"correct", "traffic",  "memory",
                                              "placement", "order", "time"};
const char *const L4_KIND_OPS[L4_PLACE + 1] = {"conjugates", "linear", "mlp",   "attention",
                                               "block",      "vocab",  "train", "placement"};
const struct l4_shape L4_SHAPES[2] = {{2, 16}, {1, 7}};
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
                 tr->ar_calls < calls ? ": with fewer, some rank leaves the split region "
                                        "holding only its own term of a sum (section 3)"
                                      : ": each one past that count sums what every rank "
                                        "already holds whole, traffic tensor parallelism does "
                                        "not need (section 3)");
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

/* ---- a rank's failure in words ---- */

/* The hint of a comparison: what is likeliest wrong. */
static void hint_text(const struct l4_hint *h, char *buf, size_t len)
{
    static const char *const fixed[] = {
        [L4_H_COL_Y] = "y = x w^T + b with this rank's rows of w: the output stays split",
        [L4_H_COL_DX] = "every rank's dy_r w_r is one part of dx, and dx is the single "
                        "device's whole gradient on every rank (section 4)",
        [L4_H_ROW_Y] = "each rank's x_r w_r^T is one term of y, and y is the single device's "
                       "whole output on every rank, its bias held once (section 4)",
        [L4_H_ROW_BIAS] = "the output is the right sum plus t-1 extra copies of the bias: it was "
                          "added on every rank before the reduction (section 4)",
        [L4_H_OUT_BIAS] = "it is the right sum plus t-1 extra copies of the output bias: the "
                          "row-parallel bias was added on every rank before the reduction "
                          "(section 4)",
        [L4_H_HEADS] = "your q, k and v are right but the heads' outputs are not: this rank's "
                       "C/t channels are NH/t WHOLE heads of size C/NH; attention over all NH "
                       "heads of size C/(NH t) splits each head's q.k dot product (section 6)",
        [L4_H_HEAD_DX] = "each rank's dlogits_r w_r is one part of dx, which is the single "
                         "device's whole gradient on every rank (sections 4 and 10)",
        [L4_H_OVERWROTE] = "it was handed over holding other values and your backward "
                           "overwrote them with this call's gradient: parameter gradients "
                           "ACCUMULATE (+=, tp.h), as model.h's backward does, so that a model "
                           "can sum them over micro-batches; add into the buffer "
                           "(pl_matmul_backward already does), never zero or copy over it",
        [L4_H_WRITTEN_ADDED] = "it is the right gradient plus what the buffer held when handed "
                               "over: backward functions WRITE (=) input gradients (tp.h), so "
                               "zero dx (or copy into it) before adding to it",
    };
    const char *world =
        h->world ? ". Here each TP group is only some of the ranks and each DP replica has its "
                   "own data: a rank's slice is its rank IN THE GROUP (pl_comm_rank(tp)), and "
                   "every collective runs on the group, never on the world (pl_rank, pl_size, "
                   "pl_comm_world)"
                 : "";
    char base[L4_TEXT] = "";
    long made = (long)h->h[0];
    int need = (int)h->h[1];
    if (h->kind == L4_H_FEWER_AR)
        snprintf(base, sizeof base, "your forward made %ld all-reduce%s where it needs %d: "
                 "with fewer, a rank leaves the split region holding only its own term of a sum "
                 "(section 3)", made,
                 made == 1 ? "" : "s", need);
    else if (h->kind == L4_H_MORE_AR)
        snprintf(base, sizeof base, "your forward made %ld all-reduces where it needs %d: "
                 "summing x, which every rank already holds whole, multiplies it by t "
                 "(section 3)",
                 made, need);
    else if (h->kind == L4_H_SUB_DX)
        snprintf(base, sizeof base, "every rank's branch saw all of x, so each rank's dx is one "
                 "part of the single device's, which every rank must hold whole (section 3)%s",
                 world);
    else if (h->kind == L4_H_SUMMED)
        snprintf(base, sizeof base, "it is %d (= t) times the single device's: a gradient "
                 "every rank already holds whole was summed over the group again (section 7, "
                 "question why_ln_grads_equal)", (int)h->h[0]);
    else if (h->kind == L4_H_EMBED)
        snprintf(base, sizeof base, "ids %d and %d (the first and last of your slice) are yours "
                 "and no others are; x is the single device's on every rank, the position "
                 "embedding (position of token i: i mod T, T=%d here%s) held once in it "
                 "(section 9)%s", (int)h->h[0], (int)h->h[1], (int)h->h[2],
                 h->h[3] ? ", not seq_len" : "", world);
    else if (h->kind > 0 && h->kind < (int)(sizeof fixed / sizeof *fixed) && fixed[h->kind])
        snprintf(base, sizeof base, "%s", fixed[h->kind]);
    if (h->handed)
        snprintf(buf, len, "%s%shanded over non-zero, so what is compared is what your "
                 "backward added to it (the contract is +=)", base,
                 base[0] ? "; the gradient was " : "the gradient was ");
    else
        snprintf(buf, len, "%s", base);
}

void l4_reason(const struct l4_said *s, char *buf, size_t len)
{
    static const char *const pass[] = {"f's forward", "f's backward", "g's forward",
                                       "g's backward"};
    static const char *const rule[] = {
        "f (copy to the TP region) forward: every rank's branch gets x as the single device "
        "holds it",
        "f's backward: every rank holds the single device's gradient of x, to which each "
        "rank's branch gave one part",
        "g (reduce from the TP region) forward: every rank holds the region's output, the sum "
        "of the ranks' terms",
        "g's backward: every rank's term gets the gradient of the sum it is a term of"};
    static const char *const category[] = {"parameters", "gradients", "AdamW moments"};
    const double *v = s->v;
    const char *n0 = s->name[0], *n1 = s->name[1], *n2 = s->name[2];
    char a[32], b[32], c[32], d[32], e[32], hint[L4_TEXT];
    switch (s->code) {
    case L4_W_COMPARE: {
        hint_text(&s->cmp.hint, hint, sizeof hint);
        gr_cmp_words(&s->cmp.fig, n0, hint, buf, len);
        break;
    }
    case L4_W_CONJ: {
        int k = (int)v[0] & 3, sums = k == 1 || k == 2;
        snprintf(buf, len, "%s: element %zu is %g, expected %g (%s%s)", pass[k], (size_t)v[1],
                 v[2], v[3], rule[k], !sums && v[2] == v[4] ? "; you summed over the ranks" : "");
        break;
    }
    case L4_W_NO_GROUP:
        snprintf(buf, len, "tp_group returned no communicator (section 2)");
        break;
    case L4_W_NOT_TP_GROUP:
        snprintf(buf, len, "on grid %s tp_group gave rank %d a group of %d ranks that is not its "
                 "TP group of %d (the ranks that share its coordinate on every axis but tp, "
                 "ordered by the tp coordinate, section 2)", n0,
                 (int)v[0], (int)v[1], (int)v[2]);
        break;
    case L4_W_GROUP_ORDER:
        snprintf(buf, len, "on grid %s tp_group gave rank %d the right ranks in the wrong order, "
                 "%s by group rank where the tp coordinates give %s: group rank must be the tp "
                 "coordinate, so that rank r of the group holds block r of every split tensor "
                 "(section 2)", n0, (int)v[0], n1, n2);
        break;
    case L4_W_GROUP_WRONG:
        snprintf(buf, len, "on grid %s tp_group gave rank %d the group %s where its TP group is "
                 "%s: the ranks that share its coordinate on every axis but tp, whatever the "
                 "axes and their order (section 2)", n0, (int)v[0],
                 n1, n2);
        break;
    case L4_W_PLACE_SIZE:
        snprintf(buf, len, "tp_group gave a group of %d ranks under order %s, where the grid's "
                 "tp axis has %d", (int)v[0], n0, L4_PLACE_TP);
        break;
    case L4_W_SPANS:
        snprintf(buf, len, "your TP group %s spans nodes: %s of its %s crossed the network. "
                 "Modelled on dgx-h100 this block takes %.2f us where inside a node it takes "
                 "%.2f us (%.1fx). With tp leftmost in the order the grid puts a TP group on "
                 "consecutive ranks, one node: build the group from the grid's tp axis "
                 "(section 2)", n0, pl_format_bytes(v[0], a, sizeof a),
                 pl_format_bytes(v[1], b, sizeof b), v[2] * 1e6, v[3] * 1e6, v[2] / v[3]);
        break;
    case L4_W_NO_CROSS:
        snprintf(buf, len, "under order dp-tp the TP group %s should cross nodes, yet no byte "
                 "went inter-node: does tp_group follow the grid it is given?", n0);
        break;
    case L4_W_LOSS_INF:
        snprintf(buf, len, "loss %g where the single device's is %.7f: these logits reach the "
                 "hundreds, and exp of anything past 88 overflows a float; subtract each row's "
                 "maximum over the WHOLE vocabulary before exp (M_n, section 10), which leaves "
                 "the loss unchanged", v[0], v[1]);
        break;
    case L4_W_LOSS:
        snprintf(buf, len, "loss %.7f, the single device's %.7f: the row maximum, the sum of "
                 "exponentials and the target's logit must each cover the whole vocabulary, and "
                 "target ids %d and %d (the first and last of your slice) are yours (section "
                 "10)", v[0], v[1], (int)v[2], (int)v[3]);
        break;
    case L4_W_LIVE_GROWS:
        snprintf(buf, len, "after step %d your code held %s more than after step 1 (%s live in "
                 "all): each step frees what it allocates (activations, work buffers, the "
                 "head's acts), or memory grows with every step until training runs out",
                 (int)v[0], pl_format_bytes(v[1], a, sizeof a),
                 pl_format_bytes(v[2], b, sizeof b));
        break;
    case L4_W_KEPT_AFTER_FREE:
        snprintf(buf, len, "after tp_gpt_free the ledger still held %s that it did not hold "
                 "before tp_gpt_new (%s of them %s): tp_gpt_free frees everything tp_gpt_new "
                 "and the steps allocated, records and statics included, or every model a "
                 "program makes (a pipeline's stages, a restart) keeps its own for good",
                 pl_format_bytes(v[0], a, sizeof a), pl_format_bytes(v[1], b, sizeof b),
                 pl_mem_cat_name((enum pl_mem_cat)v[2]));
        break;
    case L4_W_SHARD_MEM:
        snprintf(buf, len, "%s held %s at peak where a rank's shard needs %s: the split "
                 "tensors' 1/t (t=%d) plus the replicated layernorms, position embedding and "
                 "biases whole", category[(int)v[0] % 3], pl_format_bytes(v[1], a, sizeof a),
                 pl_format_bytes(v[2], b, sizeof b), (int)v[3]);
        break;
    case L4_W_ACT_MEM:
        snprintf(buf, len, "activations held %s at peak, more than the kit's TP formula allows "
                 "(%s: the blocks' split activations, the head's [N, V/t] logits, four [N, C] "
                 "buffers, the final layernorm's statistics and the blocks' records)",
                 pl_format_bytes(v[0], a, sizeof a), pl_format_bytes(v[1], b, sizeof b));
        break;
    case L4_W_TOTAL_MEM:
        snprintf(buf, len, "your %d steps held %s at peak over all memory categories%s, where a "
                 "TP rank needs at most %s: its shard's parameters, gradients and AdamW moments "
                 "(%s), the activations above (%s) and one step's work buffers (%s: a block "
                 "backward's [N, C] gradients, the head's [N, V/t], the loss's numbers). "
                 "Something larger was kept, whatever category it was filed in: a full-size "
                 "copy of a tensor, or buffers kept across steps (section 11)%s%s",
                 L4_TRAIN_STEPS, pl_format_bytes(v[0], a, sizeof a),
                 v[5] > 0 ? " (buffers given to collectives outside the ledger included)" : "",
                 pl_format_bytes(v[1], b, sizeof b), pl_format_bytes(v[2], c, sizeof c),
                 pl_format_bytes(v[3], d, sizeof d), pl_format_bytes(v[4], e, sizeof e),
                 v[5] > 0 ? "; " : "", v[5] > 0 ? n0 : "");
        break;
    case L4_W_FLOPS:
        snprintf(buf, len, "your steps computed %.3g FLOPs on this rank where the single "
                 "device's take %.3g and a TP rank about 1/%d of them (%.3g): the whole model's "
                 "products ran on every rank (a full copy of the weights, or gathered ones), so "
                 "the right losses are the single device's, not tensor parallelism. Each rank "
                 "computes with its shard only (section 11)", v[0], v[1], (int)v[2],
                 v[1] / v[2]);
        break;
    case L4_W_FLOPS_LOW:
        snprintf(buf, len, "your steps computed %.3g FLOPs in lib's ops on this rank, %.0f%% "
                 "of F/t (the single device's F = %.3g, t = %d): a TP rank splits every product "
                 "and skips none, so it does at least F/t. Products written as loops of your own "
                 "are work that the ledger, the modelled timeline and every cost model of the "
                 "kit cannot see (and far slower than sgemm): use lib's ops, pl_matmul_forward "
                 "and the rest (tp.h, compute)", v[0], 100 * v[0] * v[2] / v[1], v[1], (int)v[2]);
        break;
    case L4_W_SENT_FLOOR:
        snprintf(buf, len, "your %d steps sent %s per rank where a TP rank sends at least %s "
                 "(g's all-reduce of [N, C] twice per block forward: %d steps x 2L x 2(t-1)/t x "
                 "NC x 4 bytes): the right losses without those sums mean the whole model ran on "
                 "every rank (a full copy of the weights, its products out of the FLOP count), "
                 "so they are the single device's, not tensor parallelism. Each rank computes "
                 "with its shard only (section 11)", L4_TRAIN_STEPS,
                 pl_format_bytes(v[0], a, sizeof a), pl_format_bytes(v[1], b, sizeof b),
                 L4_TRAIN_STEPS);
        break;
    case L4_W_SENT_MOST:
        snprintf(buf, len, "your %d steps sent %s per rank in %ld collectives (%ld all-reduces) "
                 "where a TP step needs at most %s in %ld: per step the blocks' 4L all-reduces "
                 "of [N, C] (L=%d), the embedding's and the head's two, one collective of N "
                 "floats for each of the loss's three numbers per row, and the global norm in "
                 "at most two collectives in all, each of at most one float per tensor. A "
                 "replicated tensor's gradient is already the same on every rank (section 7), "
                 "so syncing it, or "
                 "any other all-reduce, is traffic that tensor parallelism does not need "
                 "(section 11)", L4_TRAIN_STEPS, pl_format_bytes(v[0], a, sizeof a), (long)v[1],
                 (long)v[2], pl_format_bytes(v[3], b, sizeof b), (long)v[4], (int)v[5]);
        break;
    case L4_W_WEIGHTS:
        snprintf(buf, len, "your shard of %s after %d steps: relative L2 error %.2e (tolerance "
                 "%.0e)%s", n0, L4_TRAIN_STEPS, v[0], GR_TOL_PARAMS,
                 v[1] ? ": a replicated tensor, updated the same on every rank" : "");
        break;
    case L4_W_NO_MODEL:
        snprintf(buf, len, "tp_gpt_new returned NULL (section 11)");
        break;
    case L4_W_STEP_LOSS:
        snprintf(buf, len, "the loss of step %d is %.7f where the single device's is %.7f "
                 "(relative error %.1e, tolerance %.0e)%s", (int)v[0], v[1], v[2], v[3],
                 GR_TOL_LOSS, v[0] > 1 ? ": the first steps agree, so the forward is right "
                                         "and an update went wrong: the gradient clipping "
                                         "(replicated tensors count once in the global "
                                         "norm), AdamW's weight decay per tensor, gradients "
                                         "zeroed before each step's backward, or anything a "
                                         "step carries to the next, such as tokens cached "
                                         "from an earlier batch (section 11)" : "");
        break;
    case L4_W_ATT_OVERRUN: {
        char mine[160] = "";
        if (v[5])
            snprintf(mine, sizeof mine, " Your q, k and v are right, your heads' outputs wrong "
                     "(relative L2 error %.2e).", v[6]);
        snprintf(buf, len, "%syour tp_attention_forward filled %.0f floats of a->att, which "
                 "holds %.0f: the scores of this rank's NH/t = %d heads, [B, NH/t, T, T]. %.0f "
                 "floats are the scores of %.0f heads: you split the head dimension instead of "
                 "the heads, every head on every rank with C/(NH t) of its channels.%s This "
                 "rank's C/t channels of q, k and v are NH/t WHOLE heads of size C/NH: run "
                 "attention on those alone; cut into t parts, each head's q.k dot product is a "
                 "partial sum, and the softmax of a partial sum is not a partial softmax "
                 "(section 6). The grader gave a->att room for every head, so nothing else was "
                 "overwritten%s", v[7] ? "before the training: " : "", v[0], v[1],
                 (int)(v[3] / v[4]), v[0], ceil(v[0] / v[2]), mine,
                 v[7] ? "; the training did not run" : "");
        break;
    }
    default:
        snprintf(buf, len, "a failure this build of the grader does not know (code %d)",
                 s->code);
    }
}

/* ---- what a passing part says on the last case: rank 0's figures ---- */

/* What every pass of the case sent per rank, together: the figure a traffic note gives in
 * place of which pass made which all-reduce, which section 3's table and section 4's
 * derivation ask of the student (a note is read by whoever passed, derived or not). */
static double passes_sent(const struct l4_obs *o)
{
    double sent = 0;
    for (int k = 0; k < o->npass && k < (int)(sizeof o->pass / sizeof o->pass[0]); k++)
        sent += o->pass[k].tr.ar_bytes;
    return sent;
}

#define L4_TIME_COMM "4 ring all-reduces of bsh"
#define L4_TIME_SECTION "8"

static void note(int kind, int p, int np, const struct l4_obs *o, char *buf, size_t len)
{
    const struct l4_figs *f = &o->figs;
    /* w: the first case's figures, its TP group the world (t = np); the last case's own
     * when no earlier case was run. From 4 ranks up the last case is a TP x DP grid whose
     * groups are smaller: the note names it after the world's figures, never in their place */
    const struct l4_figs *w = o->has_world ? &o->world : f;
    const int groups = np / (f->t ? f->t : 1), ars = kind == L4_BLOCK ? 2 : 1;
    char a[32], b[32], c[32], d[32], e[32], grid[96] = "", last[96];
    if (groups > 1 && w != f)
        snprintf(grid, sizeof grid, "; the last case on %d TP groups of %d, each with its own "
                 "data", groups, f->t);
    /* the traffic is the last case's: name its groups, not only its t */
    if (groups > 1)
        snprintf(last, sizeof last, "in the last case (%d TP groups of t=%d on the %d ranks)",
                 groups, f->t, np);
    else
        snprintf(last, sizeof last, "on t=%d", f->t);
    buf[0] = '\0';
    if (p == L4_TRAFFIC && o->has_vocab) vocab_traffic_note(&o->vocab, buf, len);
    else if (p == L4_MEMORY && o->has_vocab) vocab_memory_note(&o->vocab, buf, len);
    else if (p == L4_TIME && o->has_time)
        gr_bt_note(&o->time, L4_TIME_COMM, L4_TIME_SECTION, buf, len);
    else if (p == L4_CORRECT && kind == L4_CONJ)
        snprintf(buf, len, "f and g forward and backward exact on every rank (t=%d, the TP "
                 "group the world%s)", w->t, grid);
    else if (p == L4_TRAFFIC && kind == L4_CONJ)
        snprintf(buf, len, "f's and g's four passes sent %s per rank in all %s, only "
                 "all-reduces, as many as your table of section 3 calls for and no more",
                 pl_format_bytes(passes_sent(o), a, sizeof a), last);
    else if (p == L4_CORRECT && kind == L4_LINEAR)
        snprintf(buf, len, "column- and row-parallel outputs and gradients match the full "
                 "nn.Linear's blocks (t=%d, the TP group the world%s)", w->t, grid);
    else if (p == L4_TRAFFIC && kind == L4_LINEAR)
        snprintf(buf, len, "the two linears' four passes sent %s per rank in all %s, only "
                 "all-reduces of [N, C], as many as the partial sums of section 4 call for",
                 pl_format_bytes(passes_sent(o), a, sizeof a), last);
    else if (p == L4_CORRECT && kind >= L4_MLP && kind <= L4_BLOCK)
        snprintf(buf, len, "output, dx and every shard's gradient match the single device "
                 "(t=%d, %d cases, the last with B=%d T=%d on %d TP group%s of %d, each with its "
                 "own data; gradients handed over non-zero)", np, L4_NCASES, f->B, f->T, groups,
                 groups == 1 ? "" : "s", f->t);
    else if (p == L4_TRAFFIC && kind >= L4_MLP && kind <= L4_BLOCK) {
        /* docs/design.md: a block moves 8bsh(t-1)/t elements per rank per microbatch (said
         * of case 1, whose group is the world) */
        const int b1 = L4_SHAPES[1].B, s1 = L4_SHAPES[1].T;
        double want = 8.0 * b1 * s1 * 64 * (np - 1) / np * 4.0 * ars / 2;
        snprintf(buf, len, "%d all-reduce%s forward and %d backward per pass on the TP group; "
                 "the case b=%d, s=%d, h=64 on t=%d sent %s per rank = %s8bsh(t-1)/t x 4 bytes",
                 ars, ars == 1 ? "" : "s", ars, b1, s1, np, pl_format_bytes(want, a, sizeof a),
                 kind == L4_BLOCK ? "" : "1/2 of ");
    } else if (p == L4_CORRECT && kind == L4_PLACE)
        snprintf(buf, len, "the block matches the single device in every TP group under orders "
                 "tp-dp and dp-tp");
    else if (p == L4_ORDER && kind == L4_PLACE)
        snprintf(buf, len, "order dp-tp is a placement violation, found and costed: TP group %s "
                 "crosses nodes, up to %s per rank inter-node; modelled on dgx-h100 %.2f us per "
                 "block forward+backward vs %.2f us inside a node (%.1fx slower). Your code gave "
                 "the right numbers under this order too", f->members,
                 pl_format_bytes(f->inter, a, sizeof a), f->run * 1e6, f->inside * 1e6,
                 f->run / f->inside);
    else if (p == L4_CORRECT && kind == L4_VOCAB)
        snprintf(buf, len, "embedding, loss and every gradient match the single device (t=%d; "
                 "%d cases, ids at every shard boundary, logits past exp's float range, "
                 "gradients handed over non-zero, the last on %d TP group%s of %d)", w->t,
                 L4_NCASES, groups, groups == 1 ? "" : "s", f->t);
    else if (p == L4_CORRECT && kind == L4_TRAIN)
        snprintf(buf, len, "%d AdamW steps of a %d-block GPT on a TP group of %d ranks, the "
                 "world: losses and every shard's weights match the single device (last loss "
                 "%.5f), with %.3f of its FLOPs per rank%s", L4_TRAIN_STEPS, L4_TRAIN_LAYERS,
                 w->t, w->loss, w->share, grid);
    else if (p == L4_MEMORY && kind == L4_TRAIN)
        snprintf(buf, len, "per rank on a TP group of %d, the world: %s of parameters (as many "
                 "of gradients, twice of AdamW moments), from the shapes; activations %s at peak "
                 "within %s; %s in all within %s; live memory the same after every step%s",
                 w->t, pl_format_bytes(w->states, a, sizeof a),
                 pl_format_bytes(w->act, b, sizeof b), pl_format_bytes(w->act_bound, c, sizeof c),
                 pl_format_bytes(w->total, d, sizeof d),
                 pl_format_bytes(w->total_bound, e, sizeof e), grid);
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
    if (p == L4_TIME && o->has_time && i == 0) {
        double fraction;
        if (!gr_bt_decide(&o->time, L4_TIME_COMM, L4_TIME_SECTION, &fraction, buf, len))
            return 0;
        gr_why_partial(why, fraction);
    }
    return 1;
}

int l4_judge(int kind, int i, int ncases, const char *part, const struct gr_obs *all,
             struct gr_why *why)
{
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
        if (o->part[p].code) l4_reason(&o->part[p], buf, sizeof buf);
        else if (figures_pass(o, p, i, buf, sizeof buf, why)) continue;
        gr_why_say(why, "rank %d: %s", r, buf);
        return 0;
    }
    if (i != ncases - 1) return 1;
    note(kind, p, all->nranks, gr_obs_rank(all, 0), buf, sizeof buf);
    if (buf[0]) gr_why_say(why, "%s", buf);
    return 1;
}
