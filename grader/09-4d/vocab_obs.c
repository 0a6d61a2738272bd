/* vocab_obs.c: what the "vocab" part of Lab 9 observes (lab09.h): on the last stage of the
 * 8-rank grids with t > 1, each head run of the unclipped run -- from the return of the
 * model's last block's forward to the start of its backward, when the stage does the
 * final layernorm, the LM head and the loss of one microbatch and their backward, and
 * nothing else -- its FLOPs (the traffic ledger's count), the most bytes it held above what
 * was held when it began (the memory ledger, every category) and the floats its
 * collectives on tp_comm covered; a digest of rep's head after the run, which every TP rank
 * must hold equal; and one step on a model whose LM head is scaled so that the logits reach
 * the hundreds, against one device's loss of the same model. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fileio.h"
#include "lab09.h"
#include "ledger.h"
#include "plan.h"

/* The watch of the unclipped run: on while it runs on a rank that has it; in: inside a head
 * run, which began with flops0 FLOPs counted and mem0 bytes held; peak: the most held. */
static struct {
    int on, in, L;
    const struct pl_comm *tp;
    struct l9_obs *ob;
    double flops0, mem0, peak;
} vw;

static void mem_seen(const struct pl_mem_stats *now, void *ctx)
{
    (void)ctx;
    if ((double)now->current_total > vw.peak) vw.peak = (double)now->current_total;
}

void l9_vocab_block(int layer, int kind)
{
    if (!vw.on || layer != vw.L - 1) return;
    if (kind == 'F') {
        struct pl_mem_stats ms;
        pl_mem_get_stats(&ms);
        vw.in = 1;
        vw.flops0 = pl_ledger_flops_total();
        vw.mem0 = vw.peak = (double)ms.current_total;
        pl_mem_watch(mem_seen, NULL);
        return;
    }
    if (!vw.in) return;
    pl_mem_watch(NULL, NULL);
    vw.in = 0;
    vw.ob->vocab_runs++;
    vw.ob->vocab_flops += pl_ledger_flops_total() - vw.flops0;
    if (vw.peak - vw.mem0 > vw.ob->vocab_peak) vw.ob->vocab_peak = vw.peak - vw.mem0;
}

void l9_vocab_coll(const struct pl_comm *comm, double floats)
{
    if (vw.on && vw.in && comm == vw.tp) vw.ob->vocab_tp_floats += floats;
}

/* The part is judged on the 8-rank grids with a TP group to split the vocabulary over. */
static int vocab_case(const struct l9_state *st, int i)
{
    return st->np == 8 && !st->hidden && st->cases[i].tp > 1;
}

void l9_vocab_watch(const struct l9_state *st, int i, struct l9_obs *ob,
                    const struct fourd_grid *g, const struct fourd_model *m)
{
    memset(&vw, 0, sizeof vw);
    ob->has_vocab = vocab_case(st, i) && m->has_head;
    if (!ob->has_vocab) return;
    vw.on = 1, vw.L = m->cfg.n_layers, vw.tp = g->tp_comm, vw.ob = ob;
}

void l9_vocab_unwatch(struct l9_obs *ob, const struct fourd_model *m)
{
    if (vw.in) pl_mem_watch(NULL, NULL);
    memset(&vw, 0, sizeof vw);
    if (!ob->has_vocab || !m->rep || !pl_model_layout_holds(&m->rep->layout, m->cfg.n_layers))
        return;
    size_t off, n;
    pl_model_part_range(&m->rep->layout, m->cfg.n_layers, &off, &n);
    float *h = pl_mem_alloc(n * sizeof(float), PL_MEM_WORK, PL_HOST, "l9 head digest");
    pl_to_host(h, m->rep->params + off, n * sizeof(float));
    ob->vocab_digest = pl_fnv1a(PL_FNV1A_START, h, n * sizeof(float));
    pl_mem_free(h);
}

/* The largest |x| of n floats of op memory. */
static double max_abs(const float *x, size_t n)
{
    float *h = pl_mem_alloc(n * sizeof(float), PL_MEM_WORK, PL_HOST, "l9 logits");
    pl_to_host(h, x, n * sizeof(float));
    double most = 0;
    for (size_t j = 0; j < n; j++) most = fmax(most, fabs((double)h[j]));
    pl_mem_free(h);
    return most;
}

void l9_vocab_big(struct l9_state *st, int i, struct l9_obs *ob)
{
    if (!vocab_case(st, i)) return;
    const struct l9_case *k = &st->cases[i];
    const struct gr_train_setup *ts = &st->train[i];
    struct gr_batch b;
    gr_batch_new(&b, ts, 0, 1);
    gr_batch_load(&b, 0);
    /* one device: the scale that takes its largest logit to L9_BIG_LOGIT, and its loss */
    struct pl_model *one = pl_model_new(&ts->cfg, PL_MODEL_PARAMS);
    const size_t V = (size_t)ts->cfg.vocab, C = (size_t)ts->cfg.d_model;
    pl_model_forward(one, b.tokens, NULL, b.B, NULL);
    const float scale =
        (float)(L9_BIG_LOGIT / max_abs(one->head_acts.logits, (size_t)b.B * b.T * V));
    pl_model_free_acts(one);
    pl_scale(one->head.w_head, V * C, scale);
    ob->vocab_big_ref = pl_model_loss(one, b.tokens, b.targets, b.B);
    pl_model_free(one);
    /* the code under test, the same model: its first step's loss is the scaled model's */
    struct fourd_grid g;
    memset(&g, 0, sizeof g);
    ob->vocab_big_loss = NAN;
    if (fourd_grid_new(&g, pl_comm_world(), L9_ORDER, k->dp, k->tp, k->pp) == 0) {
        struct fourd_model *m = fourd_model_new(&ts->cfg, &st->free_opt[i], &g);
        if (m && m->has_head && m->rep) pl_scale(m->rep->head.w_head, V * C, scale);
        if (m) ob->vocab_big_loss = fourd_step(m, b.tokens, b.targets, b.B, L9_MICRO);
        if (m) fourd_model_free(m);
        fourd_grid_free(&g);
    }
    gr_batch_free(&b);
}

/* The handout's figures of section 2.1 (rank 0, bench mode): a head run of one microbatch
 * of the (2,2,2) grid, whole (the kit's FLOP count, pl_part_flops) and a TP rank's t-th, its
 * logits either way; and the same at GPT-3 175B's shape (lib/plan.h's preset) with t = 8 and
 * one sequence a microbatch, by the formulas: the head's products 6 n C V (forward 2,
 * backward 4), a block's 72 n C^2 (its four products, 12 C^2 weights), the logits n V fp32
 * floats, V padded up to a multiple of t. */
void l9_vocab_figures(const struct l9_state *st)
{
    const struct pl_model_config *c = &st->train[0].cfg;
    const int t = st->cases[0].tp, n = L9_MB_SEQS * c->seq_len;
    const double whole = pl_part_flops(c, c->n_layers, L9_MB_SEQS, c->seq_len);
    printf("# handout: a head run of one microbatch of the (%d,%d,%d) grid (%d tokens, "
           "vocabulary %d) does %.0f FLOPs whole (the kit's count); vocabulary-parallel a TP "
           "rank does a t-th, %.0f, and holds %.1f kB of logits instead of %.1f kB\n",
           st->cases[0].dp, t, st->cases[0].pp, n, c->vocab, whole, whole / t,
           4.0 * n * c->vocab / t / 1e3, 4.0 * n * c->vocab / 1e3);
    const struct pl_plan_model *g = pl_plan_model_find("gpt3-175b");
    const int tg = 8;
    const double N = g->seq, C = g->d_model, V = g->vocab, rows = ceil(V / tg);
    const double head = 6 * N * C * V, split = 6 * N * C * rows, block = 72 * N * C * C / tg;
    printf("# handout: at GPT-3 175B's shape (d_model %.0f, vocabulary %.0f, %.0f tokens a "
           "microbatch) with t = %d, the head's products take %.2f TFLOP and its logits %.1f "
           "MB on every TP rank that runs it whole; vocabulary-parallel, %.0f rows a rank "
           "(the vocabulary padded to %.0f), %.2f TFLOP and %.1f MB\n", C, V, N, tg,
           head / 1e12, 4 * N * V / 1e6, rows, rows * tg, split / 1e12, 4 * N * rows / 1e6);
    printf("# handout: a block's products are %.2f TFLOP a TP rank there: the whole head "
           "costs each TP rank as much as %.1f blocks, the vocabulary-parallel one %.2f of "
           "one\n", block / 1e12, head / block, split / block);
}
