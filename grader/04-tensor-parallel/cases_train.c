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
    char hint[400];
    snprintf(hint, sizeof hint, "ids outside your slice contribute zero rows, ids %d and %d "
             "(the first and last of your slice) are yours; g sums the ranks' rows; the "
             "position embedding (position of token i: i mod T, T=%d here%s) is added once, "
             "after the sum (section 9)%s", r * Vt, r * Vt + Vt - 1, T,
             T < c.seq_len ? ", not seq_len" : "", l4_world_hint(tp));
    l4_compare(st, "embedding output x", gx, f.xe, (size_t)N * C, L4_TOL_FWD, hint);
    l4_compare_accumulated(st, "gradient of your rows of wte", dwte_r, dwte0, e_wte, (size_t)Vt * C,
                        L4_TOL_BWD, NULL);
    l4_compare_accumulated(st, "gradient of wpe (replicated)", dwpe, dwpe0, f.dwpe,
                        (size_t)c.seq_len * C, L4_TOL_BWD, NULL);
    if (l4_ok(st) && !isfinite(loss))
        l4_fail(st, "loss %g where the single device's is %.7f: these logits reach the hundreds, "
                "and exp of anything past 88 overflows a float; subtract each row's maximum "
                "over the WHOLE vocabulary before exp (M_n, section 10), which leaves the loss "
                "unchanged", loss, f.loss);
    else if (l4_ok(st) && gr_rel_err(loss, f.loss) > L4_TOL_FWD)
        l4_fail(st, "loss %.7f, the single device's %.7f: the row maximum, the sum of exponentials "
                "and the target's logit must each cover the whole vocabulary, and target ids "
                "%d and %d (the first and last of your slice) are yours (section 10)", loss,
                f.loss, r * Vt, r * Vt + Vt - 1);
    l4_compare_written(st, "head input gradient dx", gdx, dx0, f.dx, (size_t)N * C, L4_TOL_BWD,
                    "f's backward sums the ranks' dlogits_r w_r (section 10)");
    l4_compare_accumulated(st, "gradient of your rows of the head", dw_r, dw0, e_w, (size_t)Vt * C,
                        L4_TOL_BWD, NULL);
    l4_note(st, L4_CORRECT, "embedding, loss and every gradient match the single device (t=%d; "
                    "%d cases, ids at every shard boundary, logits past exp's float range, "
                    "gradients handed over non-zero, the last on %d TP group%s)",
                    t, L4_NCASES, pl_size() / t, pl_size() / t == 1 ? "" : "s");

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
    char a[32], b[32];
    /* live allocations may not grow from step to step */
    for (int s = 1; s < steps && l4_ok(st); s++)
        if (live[s] > live[0])
            l4_fail(st, "after step %d your code held %s more than after step 1 (%s live in "
                    "all): each step frees what it allocates (activations, work buffers, the "
                    "head's acts), or memory grows with every step until training runs out",
                    s + 1, pl_format_bytes((double)(live[s] - live[0]), a, sizeof a),
                    pl_format_bytes((double)live[s], b, sizeof b));
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, c);
    const double C = c->d_model, F = c->d_ff, V = c->vocab, L = c->n_layers;
    const double N = (double)B * c->seq_len;
    double split = 2 * V * C + L * (4 * C * C + 3 * C + 2 * F * C + F);
    double want = 4.0 * ((double)lay.numel - split + split / t);
    pl_model_layout_free(&lay);
    const struct {
        enum pl_mem_cat cat;
        double bound;
        const char *what;
    } K[] = {{PL_MEM_PARAMS, want, "parameters"},
             {PL_MEM_GRADS, want, "gradients"},
             {PL_MEM_OPTIM, 2 * want, "AdamW moments"}};
    for (int k = 0; k < 3; k++) {
        double got = grown(before, after, K[k].cat);
        if (got > K[k].bound * 1.001)
            l4_fail(st, "%s held %s at peak where a rank's shard needs %s: the split tensors' 1/t "
                 "(t=%d) plus the replicated layernorms, position embedding and biases whole",
                 K[k].what, pl_format_bytes(got, a, sizeof a),
                 pl_format_bytes(K[k].bound, b, sizeof b), t);
    }
    double act = L * pl_tp_block_act_bytes(c, t, B, c->seq_len) + 4 * N * (V / t + 3) +
                 4 * (4 * N * C + 2 * N) + L * sizeof(struct pl_tp_block_acts);
    double got = grown(before, after, PL_MEM_ACTIV);
    if (l4_ok(st) && got > act)
        l4_fail(st, "activations held %s at peak, more than the kit's TP formula allows (%s: the "
             "blocks' split activations, the head's [N, V/t] logits, four [N, C] buffers, "
             "the final layernorm's statistics and the blocks' records)",
             pl_format_bytes(got, a, sizeof a), pl_format_bytes(act, b, sizeof b));
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
        l4_fail(st, "your %d steps held %s at peak over all memory categories%s, where a TP rank "
                "needs at most %s: its shard's parameters, gradients and AdamW moments (%s), "
                "the activations above (%s) and one step's work buffers (%s: a block "
                "backward's [N, C] gradients, the head's [N, V/t], the loss's numbers). "
                "Something larger was kept, whatever category it was filed in: a full-size "
                "copy of a tensor, or buffers kept across steps (section 11)%s%s",
                L4_TRAIN_STEPS, pl_format_bytes(total, a, sizeof a),
                hidden->bytes > 0 ? " (buffers given to collectives outside the ledger "
                                    "included)" : "",
                pl_format_bytes(total_bound, b, sizeof b),
                pl_format_bytes(4 * want, (char[32]){0}, 32),
                pl_format_bytes(act, (char[32]){0}, 32), pl_format_bytes(work, (char[32]){0}, 32),
                hidden->bytes > 0 ? "; " : "", hidden->bytes > 0 ? gr_unseen_where(hidden->where)
                                                                 : "");
    l4_note(st, L4_MEMORY, "per rank: %s of parameters (as many of gradients, twice of AdamW "
           "moments) for t=%d, from the shapes; activations %s at peak within %s; %s in all "
           "within %s; live memory the same after every step",
           pl_format_bytes(want, a, sizeof a), t, pl_format_bytes(got, b, sizeof b),
           pl_format_bytes(act, (char[32]){0}, 32), pl_format_bytes(total, (char[32]){0}, 32),
           pl_format_bytes(total_bound, (char[32]){0}, 32));
    st->cur = L4_CORRECT;
}

/* The compute of the student's steps against the single device's, from the ledger's FLOP
 * counter: a TP rank does 1/t of every product (the replicated layernorms, residuals and
 * the loss's per-row pieces are a sliver of it), so more than halfway from F/t to F means
 * the whole model ran on the rank, whatever its results. Returns the fraction of F. */
static double judge_train_compute(struct l4_state *st, double mine, double full, int t)
{
    double bound = full * (1.0 / t + 0.5 * (1.0 - 1.0 / t));
    if (t > 1 && mine > bound)
        l4_fail(st, "your steps computed %.3g FLOPs on this rank where the single device's take "
                "%.3g and a TP rank about 1/%d of them (%.3g): the whole model's products ran "
                "on every rank (a full copy of the weights, or gathered ones), so the right "
                "losses are the single device's, not tensor parallelism. Each rank computes "
                "with its shard only (section 11)", mine, full, t, full / t);
    return full > 0 ? mine / full : 0;
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
    char a[32], b[32];
    if (t > 1 && sent < floor)
        l4_fail(st, "your %d steps sent %s per rank where a TP rank sends at least %s (g's "
                "all-reduce of [N, C] twice per block forward: %d steps x 2L x 2(t-1)/t x NC x 4 "
                "bytes): the right losses without those sums mean the whole model ran on every "
                "rank (a full copy of the weights, its products out of the FLOP count), so "
                "they are the single device's, not tensor parallelism. Each rank computes "
                "with its shard only (section 11)", L4_TRAIN_STEPS,
                pl_format_bytes(sent, a, sizeof a), pl_format_bytes(floor, b, sizeof b),
                L4_TRAIN_STEPS);
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
        l4_fail(st, "your %d steps sent %s per rank in %ld collectives (%ld all-reduces) where a TP "
                "step needs at most %s in %ld: per step the blocks' 4L all-reduces of [N, C] "
                "(L=%d), the embedding's and the head's two, one collective of N floats for "
                "each of the loss's three numbers per row, and the global norm in at most two "
                "collectives of one float per tensor. A replicated tensor's gradient is already "
                "the same on every rank (section 7), so syncing it, or any other all-reduce, "
                "is traffic that tensor parallelism does not need (section 11)", L4_TRAIN_STEPS,
                pl_format_bytes(sent, a, sizeof a), calls, d->calls[PL_ALL_REDUCE],
                pl_format_bytes(most, b, sizeof b), most_calls, c->n_layers);
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
            l4_fail(st, "your shard of %s after %d steps: relative L2 error %.2e (tolerance %.0e)%s",
                 d->name, L4_TRAIN_STEPS, rel, GR_TOL_PARAMS,
                 d->split == PL_TP_REPLICATED ? ": a replicated tensor, updated the same "
                                                "on every rank" : "");
    }
    free(h);
    free(g);
    pl_mem_free(want);
    pl_mem_free(full);
}

void l4_run_train(struct l4_state *st, struct pl_comm *tp)
{
    int t = pl_comm_size(tp), r = pl_comm_rank(tp);
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
    if (!m && !pl_todo_what()) l4_fail(st, "tp_gpt_new returned NULL (section 11)");
    else if (bad >= 0 && m)
        l4_fail(st, "the loss of step %d is %.7f where the single device's is %.7f (relative error "
             "%.1e, tolerance %.0e)%s", bad + 1, loss[bad], ref.loss[bad], err, GR_TOL_LOSS,
             bad > 0 ? ": the first steps agree, so the forward is right; look at the "
                       "gradient clipping (replicated tensors count once in the global norm) "
                       "and AdamW's weight decay per tensor (section 11)"
                     : "");
    if (m && l4_ok(st)) check_train_weights(st, m, &ref, t, r);
    double share = m && l4_ok(st) ? judge_train_compute(st, my_flops, ref_flops, t) : 0;
    if (m && l4_ok(st)) judge_train_traffic(st, &d, &setup.cfg, t, b.B);
    judge_train_memory(st, &setup.cfg, t, b.B, &before, &after, &hidden, live, L4_TRAIN_STEPS);
    l4_note(st, L4_CORRECT,
                    "%d AdamW steps of a %d-block GPT on %d ranks: losses and every shard's "
                    "weights match the single device (last loss %.5f), with %.3f of its "
                    "FLOPs per rank",
                    L4_TRAIN_STEPS, L4_TRAIN_LAYERS, t, ref.loss[L4_TRAIN_STEPS - 1], share);
    tp_gpt_free(m);
    gr_batch_free(&b);
    gr_reference_free(&ref);
    pl_tokens_free(&data);
}
