/* cases_train.c: Lab 4's ops vocab and train (lab04.h): the vocabulary-parallel embedding
 * and cross-entropy against the single device (their traffic and the head's memory recorded
 * for judge.c: the full logits must never exist on one rank), and K AdamW steps of the TP
 * model against the single-device model. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab04.h"
#include "data.h"
#include "tp_shard.h"
#include "units.h"
#include "unseen.h"
#include "unseen_span.h"

/* ---- op vocab: the vocabulary-parallel embedding, head and cross-entropy ---- */

/* n ids in [0, V) drawn from stream name, the same on every rank of a group (op memory),
 * the first of them the ids at the shard boundaries of t ranks: the first and the last id of
 * every shard, v0 and v0 + V/t - 1, in turn (from the end when `reversed`, so that tokens
 * and targets together hold all 2t of them whenever N >= t). */
static int *ids(struct l4_state *st, const char *name, int n, int V, int t, int reversed)
{
    int *h = malloc((size_t)n * sizeof *h), Vt = V / t;
    for (int i = 0; i < n; i++)
        h[i] = (int)(pl_rng_u64(st->base_seed, pl_rng_stream(name), (uint64_t)i) % (uint64_t)V);
    for (int j = 0; j < n && j < 2 * t; j++) {
        int b = reversed ? 2 * t - 1 - j : j;
        h[j] = (b / 2) * Vt + (b % 2 ? Vt - 1 : 0);
    }
    int *d = pl_mem_alloc((size_t)n * sizeof *d, PL_MEM_WORK, PL_DEVICE, name);
    pl_to_device(d, h, (size_t)n * sizeof *h);
    free(h);
    return d;
}

/* Rows [r V/t, (r+1) V/t) of a [V, C] matrix, copied (op memory). */
static float *vocab_rows(const float *full, int V, int C, int t, int r)
{
    size_t Vt = (size_t)(V / t);
    struct pl_tp_rect q = {(size_t)r * Vt, 0, Vt, (size_t)C};
    float *out = gr_op_alloc(Vt * C, "vocab rows");
    pl_tp_copy_rect_out(out, full, (size_t)C, &q);
    return out;
}

struct vocab_full {
    float *wte, *wpe, *w, *x, *dxe;    /* inputs */
    int *tokens, *targets;
    float *xe, *dwte, *dwpe, *dx, *dw; /* the oracle's results */
    double loss;
};

/* The single device's embedding and head + mean cross-entropy, from lib's ops; the head's
 * weights drawn with std head_std (the logits' std is about 8 head_std), ids at the shard
 * boundaries of t ranks first. */
static void vocab_oracle(struct l4_state *st, const struct pl_model_config *c, int B, int T, int t, float head_std,
                         struct vocab_full *f)
{
    const int N = B * T, C = c->d_model, V = c->vocab;
    f->wte = gr_op_normal(st->base_seed, "lab04.wte", (size_t)V * C, 0, 0.5f);
    f->wpe = gr_op_normal(st->base_seed, "lab04.wpe", (size_t)c->seq_len * C, 0, 0.5f);
    f->w = gr_op_normal(st->base_seed, "lab04.head", (size_t)V * C, 0, head_std);
    f->x = gr_op_normal(st->base_seed, "lab04.head.x", (size_t)N * C, 0, 1);
    f->dxe = gr_op_normal(st->base_seed, "lab04.embed.dx", (size_t)N * C, 0, 1);
    f->tokens = ids(st, "lab04.tokens", N, V, t, 0);
    f->targets = ids(st, "lab04.targets", N, V, t, 1);
    f->xe = gr_op_alloc((size_t)N * C, "xe");
    f->dwte = gr_op_alloc((size_t)V * C, "dwte");
    f->dwpe = gr_op_alloc((size_t)c->seq_len * C, "dwpe");
    f->dx = gr_op_alloc((size_t)N * C, "dx");
    f->dw = gr_op_alloc((size_t)V * C, "dw");
    pl_zero(f->dwte, (size_t)V * C);
    pl_zero(f->dwpe, (size_t)c->seq_len * C);
    pl_zero(f->dx, (size_t)N * C);
    pl_zero(f->dw, (size_t)V * C);
    pl_encoder_forward(f->xe, f->tokens, f->wte, f->wpe, B, T, C, V);
    pl_encoder_backward(f->dwte, f->dwpe, f->dxe, f->tokens, B, T, C, V);
    float *logits = gr_op_alloc((size_t)N * V, "logits"), *probs = gr_op_alloc((size_t)N * V, "p");
    float *losses = gr_op_alloc((size_t)N, "losses"), *dl = gr_op_alloc((size_t)N * V, "dlogits");
    pl_matmul_forward(logits, f->x, f->w, NULL, N, C, V);
    pl_crossentropy_forward(losses, logits, f->targets, N, V);
    f->loss = pl_sum(losses, (size_t)N) / N;
    pl_softmax_forward(probs, logits, N, V);
    pl_zero(dl, (size_t)N * V);
    pl_crossentropy_softmax_backward(dl, probs, f->targets, 1.0f / (float)N, N, V);
    pl_matmul_backward(f->dx, f->dw, NULL, dl, f->x, f->w, N, C, V);
    float *p[] = {logits, probs, losses, dl};
    for (int i = 0; i < 4; i++) pl_mem_free(p[i]);
}

static void vocab_full_free(struct vocab_full *f)
{
    float *p[] = {f->wte, f->wpe, f->w, f->x, f->dxe, f->xe, f->dwte, f->dwpe, f->dx, f->dw};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) pl_mem_free(p[i]);
    pl_mem_free(f->tokens);
    pl_mem_free(f->targets);
}

/* Bytes held at peak beyond what was held before, while the student's head ran. */
static double peak_since(const struct pl_mem_stats *before)
{
    struct pl_mem_stats now;
    pl_mem_get_stats(&now);
    return (double)now.peak_total - (double)before->current_total;
}

/* Collective buffers of the head in static storage or on the stack (unseen.c). */
struct unseen_held {
    double bytes;
    int where;
    const char *call;
};

void l4_run_vocab(struct l4_state *st, struct pl_comm *tp, int i)
{
    struct pl_model_config c = l4_config(st);
    const int t = pl_comm_size(tp), r = pl_comm_rank(tp);
    const int B = l4_shape_of(st, i).B, T = l4_shape_of(st, i).T;
    const int N = B * T, C = c.d_model, V = c.vocab, Vt = V / t;
    /* the last case's logits (std about 160) reach past 88, where exp overflows a float */
    const int large = i == L4_NCASES - 1;
    struct vocab_full f;
    vocab_oracle(st, &c, B, T, t, large ? 20.0f : 0.5f, &f);
    float *wte_r = vocab_rows(f.wte, V, C, t, r), *w_r = vocab_rows(f.w, V, C, t, r);
    /* gradients handed over non-zero (the parameters' accumulate, dx is written) */
    float *gx = gr_op_alloc((size_t)N * C, "your x"), *gdx = l4_junk(st, "lab04.vocab.dx0", (size_t)N * C);
    float *dwte_r = l4_junk(st, "lab04.vocab.dwte0", (size_t)Vt * C),
          *dw_r = l4_junk(st, "lab04.vocab.dw0", (size_t)Vt * C);
    float *dwpe = l4_junk(st, "lab04.vocab.dwpe0", (size_t)c.seq_len * C),
          *hx = gr_op_alloc((size_t)N * C, "x");
    float *dx0 = l4_junk(st, "lab04.vocab.dx0", (size_t)N * C);
    float *dwte0 = l4_junk(st, "lab04.vocab.dwte0", (size_t)Vt * C),
          *dw0 = l4_junk(st, "lab04.vocab.dw0", (size_t)Vt * C);
    float *dwpe0 = l4_junk(st, "lab04.vocab.dwpe0", (size_t)c.seq_len * C);
    pl_copy(hx, f.x, (size_t)N * C);
    struct pl_tp_head_acts a;
    pl_tp_head_acts_new(&a, &c, t, B, T);
    struct pl_ledger mark, d;
    gr_ledger_mark(&mark);
    tp_embed_forward(tp, &c, wte_r, f.wpe, f.tokens, B, T, gx);
    tp_embed_backward(tp, &c, dwte_r, dwpe, f.tokens, B, T, f.dxe);
    struct pl_mem_stats before;
    pl_mem_reset_peak();
    pl_mem_get_stats(&before);
    struct gr_span span;
    gr_span_begin(&span);
    double loss = tp_head_loss_forward(tp, &c, w_r, &a, hx, f.targets);
    tp_head_loss_backward(tp, &c, w_r, dw_r, &a, hx, f.targets, gdx);
    struct unseen_held hidden;
    hidden.bytes = gr_span_end(&span, &hidden.where, &hidden.call);
    double held = peak_since(&before);
    gr_ledger_since(&mark, &d);

    float *e_wte = vocab_rows(f.dwte, V, C, t, r), *e_w = vocab_rows(f.dw, V, C, t, r);
    const struct l4_hint none = {0};
    struct l4_hint hint = {.kind = L4_H_EMBED, .h = {r * Vt, r * Vt + Vt - 1, T, T < c.seq_len},
                           .world = t < pl_size()};
    l4_compare(st, "embedding output x", gx, f.xe, (size_t)N * C, L4_TOL_FWD, hint);
    l4_compare_accumulated(st, "gradient of your rows of wte", dwte_r, dwte0, e_wte,
                           (size_t)Vt * C, L4_TOL_BWD, none);
    l4_compare_accumulated(st, "gradient of wpe (replicated)", dwpe, dwpe0, f.dwpe,
                           (size_t)c.seq_len * C, L4_TOL_BWD, none);
    if (l4_ok(st) && !isfinite(loss)) L4_FAIL(st, L4_W_LOSS_INF, loss, f.loss);
    else if (l4_ok(st) && gr_rel_err(loss, f.loss) > L4_TOL_FWD)
        L4_FAIL(st, L4_W_LOSS, loss, f.loss, r * Vt, r * Vt + Vt - 1);
    l4_compare_written(st, "head input gradient dx", gdx, dx0, f.dx, (size_t)N * C, L4_TOL_BWD,
                       (struct l4_hint){.kind = L4_H_HEAD_DX});
    l4_compare_accumulated(st, "gradient of your rows of the head", dw_r, dw0, e_w,
                           (size_t)Vt * C, L4_TOL_BWD, none);
    st->ob->figs.t = t;

    /* parts traffic and memory: judged from these (judge.c) */
    struct l4_vocab *v = &st->ob->vocab;
    st->ob->has_vocab = 1;
    *v = (struct l4_vocab){.t = t, .B = B, .T = T, .C = C, .V = V,
                           .calls = gr_ledger_total_calls(&d),
                           .ar_calls = d.calls[PL_ALL_REDUCE], .ag_calls = d.calls[PL_ALL_GATHER],
                           .bytes = gr_ledger_total_bytes(&d),
                           .ag_bytes = pl_ledger_bytes(&d, PL_ALL_GATHER, -1), .held = held,
                           .hidden = hidden.bytes, .hidden_where = hidden.where};
    snprintf(v->hidden_call, sizeof v->hidden_call, "%s", hidden.call ? hidden.call : "");
    snprintf(v->hidden_region, sizeof v->hidden_region, "%s", gr_unseen_where(hidden.where));
    pl_tp_head_acts_free(&a);
    float *p[] = {wte_r, w_r, gx, gdx, dwte_r, dw_r, dwpe, hx, e_wte, e_w, dx0, dwte0, dw0, dwpe0};
    for (size_t k = 0; k < sizeof p / sizeof *p; k++) pl_mem_free(p[k]);
    vocab_full_free(&f);
}

/* ---- op train: K steps of the whole model against pl_model_step ---- */

/* Per category, bytes held at peak during training beyond what was held before. */
static double grown(const struct pl_mem_stats *before, const struct pl_mem_stats *after,
                    enum pl_mem_cat cat)
{
    return (double)after->peak[cat] - (double)before->current[cat];
}

/* Parameters, gradients and AdamW's moments per rank: the split tensors' 1/t plus the
 * replicated ones whole, from the shapes; activations within the kit's TP formula for the
 * blocks, the head's [N, V/t] logits and what the step itself needs at the head's backward:
 * four [N, C] buffers (the last block's output and the one that takes turns with it, the
 * final layernorm's output and its gradient), the final layernorm's mean and 1/std, and the
 * L records of the blocks' activations (struct pl_tp_block_acts), whichever category a
 * step files them in. */
static void judge_train_memory(struct l4_state *st, const struct pl_model_config *c, int t, int B,
                               const struct pl_mem_stats *before, const struct pl_mem_stats *after,
                               const struct unseen_held *hidden, const size_t *live, int steps)
{
    st->cur = L4_MEMORY;
    /* live allocations may not grow from step to step */
    for (int s = 1; s < steps && l4_ok(st); s++)
        if (live[s] > live[0])
            L4_FAIL(st, L4_W_LIVE_GROWS, s + 1, (double)(live[s] - live[0]), (double)live[s]);
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, c);
    const double C = c->d_model, F = c->d_ff, V = c->vocab, L = c->n_layers;
    const double N = (double)B * c->seq_len;
    double split = 2 * V * C + L * (4 * C * C + 3 * C + 2 * F * C + F);
    double want = 4.0 * ((double)lay.numel - split + split / t);
    pl_model_layout_free(&lay);
    const enum pl_mem_cat cat[] = {PL_MEM_PARAMS, PL_MEM_GRADS, PL_MEM_OPTIM};
    for (int k = 0; k < 3; k++) {
        double got = grown(before, after, cat[k]), bound = k == 2 ? 2 * want : want;
        if (got > bound * 1.001) L4_FAIL(st, L4_W_SHARD_MEM, k, got, bound, t);
    }
    double act = L * pl_tp_block_act_bytes(c, t, B, c->seq_len) + 4 * N * (V / t + 3) +
                 4 * (4 * N * C + 2 * N) + L * sizeof(struct pl_tp_block_acts);
    double got = grown(before, after, PL_MEM_ACTIV);
    if (l4_ok(st) && got > act) L4_FAIL(st, L4_W_ACT_MEM, got, act);
    /* the total over every category, whatever a buffer is filed as: the above, plus what a
     * step needs for a moment (the work buffers of one block's backward: six [N, C] and the
     * attention's split [N, 4C/t] or the MLP's [N, 2F/t]; the head's [N, V/t] gradient and
     * the loss's (t + 3) N numbers) and 64 KiB for small records; plus any buffer a
     * collective was given in static storage or on the stack, which no category shows */
    double work = 4 * (6 * N * C + N * fmax(4 * C / t, 2 * F / t) + N * V / t + (t + 3) * N) +
                  65536;
    double total_bound = 4 * want + act + work;
    double total = (double)after->peak_total - (double)before->current_total + hidden->bytes;
    if (l4_ok(st) && total > total_bound)
        l4_name(L4_FAIL(st, L4_W_TOTAL_MEM, total, total_bound, 4 * want, act, work,
                        hidden->bytes), 0, gr_unseen_where(hidden->where));
    st->ob->figs.states = want;
    st->ob->figs.act = got;
    st->ob->figs.act_bound = act;
    st->ob->figs.total = total;
    st->ob->figs.total_bound = total_bound;
    st->cur = L4_CORRECT;
}

/* After tp_gpt_free, which frees everything tp_gpt_new and the steps allocated: what the
 * ledger holds beyond what it held before tp_gpt_new is kept for good (a static set of
 * activations or scratch, the model's own records), and every model made adds its own. */
static void judge_train_freed(struct l4_state *st, const struct pl_mem_stats *before)
{
    struct pl_mem_stats freed;
    pl_mem_get_stats(&freed);
    int was = st->cur, cat;
    st->cur = L4_MEMORY;
    if (l4_ok(st) && freed.current_total > before->current_total)
        L4_FAIL(st, L4_W_KEPT_AFTER_FREE, (double)(freed.current_total - before->current_total),
                gr_mem_grown(before, &freed, &cat), cat);
    st->cur = was;
}

/* The compute of the student's steps against the single device's, from the ledger's FLOP
 * counter: a TP rank does 1/t of every product (the replicated layernorms, residuals and
 * the loss's per-row pieces are a sliver of it), so more than halfway from F/t to F means
 * the whole model ran on the rank, whatever its results; and it does no less than F/t,
 * since every product is split and nothing is skipped, so under 95% of F/t means products
 * ran outside lib's ops (loops of the student's own), which the ledger, the modelled
 * timeline and the placement model cannot see (judge_train_compute_floor). Returns the
 * fraction of F. */
static double judge_train_compute(struct l4_state *st, double mine, double full, int t)
{
    double bound = full * (1.0 / t + 0.5 * (1.0 - 1.0 / t));
    if (t > 1 && mine > bound) L4_FAIL(st, L4_W_FLOPS, mine, full, t);
    return full > 0 ? mine / full : 0;
}

/* The floor on the same count, judged after the traffic's floor: a rank that ran the whole
 * model by hand does no sums either, and that is the cause to name first. */
static void judge_train_compute_floor(struct l4_state *st, double mine, double full, int t)
{
    if (mine < 0.95 * full / t) L4_FAIL(st, L4_W_FLOPS_LOW, mine, full, t);
}

/* The bytes of the student's steps against the least any shard-only step must send: in
 * every block g sums the row-parallel partial outputs forward, twice (attention and MLP),
 * and no rank can form the next layernorm's input from its shard without that sum, however
 * its collectives are grouped (a reduce-scatter and an all-gather send what the ring
 * all-reduce sends). Right losses with less traffic than those all-reduces alone mean each
 * rank computed the whole model itself; products written as plain loops hide that from the
 * FLOP count, never from the ledger's bytes. */
static void judge_train_traffic(struct l4_state *st, const struct pl_ledger *d, const struct pl_model_config *c,
                                int t, int B)
{
    const double N = (double)B * c->seq_len, NC = N * c->d_model, L = c->n_layers;
    double floor = L4_TRAIN_STEPS * 2.0 * L *
                   pl_ring_bytes_sent(PL_ALL_REDUCE, t, NC * sizeof(float));
    double sent = gr_ledger_total_bytes(d);
    long calls = gr_ledger_total_calls(d);
    if (t > 1 && sent < floor) L4_FAIL(st, L4_W_SENT_FLOOR, sent, floor);
    /* and at most, per step: the blocks' 4L all-reduces of [N, C], the embedding and loss as
     * section 10 bounds them (two all-reduces of [N, C], one collective of N floats, an
     * all-gather's (t-1)N at most, for each of the loss's three numbers), and the global
     * norm in at most two collectives of at most one float per tensor */
    const double per = fmax(2.0 * (t - 1) / t, t - 1.0) * 4;
    const double ntens = pl_tp_model_ntensors(c);
    const long most_calls = L4_TRAIN_STEPS * (long)(4 * L + 2 + 3 + 2);
    const double most = L4_TRAIN_STEPS * ((4 * L + 2) * pl_ring_bytes_sent(PL_ALL_REDUCE, t,
                                                                        NC * sizeof(float)) +
                                       3 * per * N + per * 2 * ntens);
    if (t > 1 && l4_ok(st) && (calls > most_calls || sent > most + 0.5))
        L4_FAIL(st, L4_W_SENT_MOST, sent, calls, d->calls[PL_ALL_REDUCE], most, most_calls,
                c->n_layers);
}

/* Every tensor's shard against its slice of the reference's final weights. */
static void check_train_weights(struct l4_state *st, const struct tp_gpt *m, const struct gr_reference *ref, int t,
                                int r)
{
    /* every tensor's shard against the slice of the reference's final weights */
    float *want = gr_op_alloc(m->numel, "expected shard");
    float *full = gr_op_alloc(ref->numel, "reference params");
    pl_to_device(full, ref->params, ref->numel * sizeof(float));
    pl_tp_model_slice(&ref->layout, t, r, full, want);
    float *h = gr_host_copy(want, m->numel), *g = gr_host_copy(m->params, m->numel);
    double all = 0;
    for (size_t k = 0; k < m->numel; k++) all += (double)h[k] * h[k];
    double rms = sqrt(all / (double)m->numel);
    for (int i = 0; i < m->ntensors && l4_ok(st); i++) {
        const struct pl_tp_tensor *d = &m->tensors[i];
        /* as gr_check_params: a tensor that started at zero (a bias) is measured against
         * the whole shard's RMS, so that rounding alone never fails it */
        double e = 0, nr = 0;
        for (size_t k = d->shard_offset; k < d->shard_offset + d->shard_numel; k++) {
            e += ((double)g[k] - h[k]) * ((double)g[k] - h[k]);
            nr += (double)h[k] * h[k];
        }
        double rel = sqrt(e) / fmax(sqrt(nr), rms * sqrt((double)d->shard_numel));
        if (!(rel <= GR_TOL_PARAMS))
            l4_name(L4_FAIL(st, L4_W_WEIGHTS, rel, d->split == PL_TP_REPLICATED), 0, d->name);
    }
    free(h);
    free(g);
    pl_mem_free(want);
    pl_mem_free(full);
}

void l4_run_train(struct l4_state *st, struct pl_comm *tp)
{
    int t = pl_comm_size(tp), r = pl_comm_rank(tp);
    /* attention that fills more scores than the kit's acts hold would overwrite the heap in
     * the student's own steps: said, and the steps not run */
    if (l4_att_probe(st, tp)) return;
    struct pl_tokens data = pl_corpus_tokens(pl_mix64(st->base_seed + 5), L4_CORPUS_TOKENS);
    struct gr_train_setup setup;
    memset(&setup, 0, sizeof setup);
    setup.cfg = l4_config(st);
    setup.cfg.n_layers = L4_TRAIN_LAYERS;
    setup.opt = pl_adamw_config_default();
    setup.data = &data;
    setup.global_B = L4_TRAIN_B;
    setup.steps = L4_TRAIN_STEPS;
    setup.data_seed = pl_mix64(st->base_seed + 11);
    struct gr_reference ref;
    double f0 = pl_ledger_flops_total();
    gr_reference_run(&ref, &setup);
    double ref_flops = pl_ledger_flops_total() - f0;
    /* every rank of the group trains on the whole batch */
    struct gr_batch b;
    gr_batch_new(&b, &setup, 0, 1);
    double loss[L4_TRAIN_STEPS] = {0};
    struct pl_mem_stats before, after;
    pl_mem_reset_peak();
    pl_mem_get_stats(&before);
    double f1 = pl_ledger_flops_total();
    struct pl_ledger mark, d;
    gr_ledger_mark(&mark);
    size_t live[L4_TRAIN_STEPS] = {0};
    struct gr_span span;
    gr_span_begin(&span);
    struct tp_gpt *m = tp_gpt_new(&setup.cfg, &setup.opt, tp);
    for (int s = 0; m && s < L4_TRAIN_STEPS && !pl_todo_what(); s++) {
        gr_batch_load(&b, s);
        loss[s] = tp_gpt_step(m, b.tokens, b.targets, b.B);
        struct pl_mem_stats now;
        pl_mem_get_stats(&now);
        live[s] = now.current_total;
    }
    struct unseen_held hidden;
    hidden.bytes = gr_span_end(&span, &hidden.where, &hidden.call);
    double my_flops = pl_ledger_flops_total() - f1;
    gr_ledger_since(&mark, &d);
    pl_mem_get_stats(&after);
    double err = 0;
    int bad = m ? gr_check_losses(loss, ref.loss, L4_TRAIN_STEPS, &err) : 0;
    if (!m && !pl_todo_what()) L4_FAIL(st, L4_W_NO_MODEL, 0);
    else if (bad >= 0 && m) L4_FAIL(st, L4_W_STEP_LOSS, bad + 1, loss[bad], ref.loss[bad], err);
    if (m && l4_ok(st)) check_train_weights(st, m, &ref, t, r);
    double share = m && l4_ok(st) ? judge_train_compute(st, my_flops, ref_flops, t) : 0;
    if (m && l4_ok(st)) judge_train_traffic(st, &d, &setup.cfg, t, b.B);
    if (m && l4_ok(st)) judge_train_compute_floor(st, my_flops, ref_flops, t);
    judge_train_memory(st, &setup.cfg, t, b.B, &before, &after, &hidden, live, L4_TRAIN_STEPS);
    st->ob->figs.t = t;
    st->ob->figs.loss = ref.loss[L4_TRAIN_STEPS - 1];
    st->ob->figs.share = share;
    tp_gpt_free(m);
    if (m) judge_train_freed(st, &before);
    gr_batch_free(&b);
    gr_reference_free(&ref);
    pl_tokens_free(&data);
}
