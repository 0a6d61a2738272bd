/* cases.c: one case of Lab 9 (lab09.h; its grids, model, data and reference: setup.c): a
 * (dp, tp, pp) grid laid out by "tp-pp-dp", K steps of the student's 4D training with a clip that binds, and what
 * this rank saw into its observation: the grid it was given, every step's loss and norm,
 * its parameters and last clipped gradient against the slices of the single-device
 * reference's, and its traffic by kind and link class from the ledger; and on the grids
 * with dp > 1 the same again with ZeRO-1 (m->zero = 1: its moments, its DP traffic). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "lab09.h"
#include "wrap_ctx.h"

/* ---- comparisons, on this rank ---- */

/* lab09.h */
void l9_compare_rank(struct l9_err *e, const struct pl_model_config *c,
                     const struct pl_model_layout *lay, const struct fourd_model *m,
                     const float *shards, const float *rep, const float *ref, int t, int r)
{
    const double floor_rms = l9_rms(ref, lay->numel);
    float *want = pl_mem_alloc(m->block_numel * sizeof(float), PL_MEM_WORK, PL_HOST, "l9 slice");
    float *got = pl_mem_alloc(m->block_numel * sizeof(float), PL_MEM_WORK, PL_HOST, "l9 got");
    for (int l = m->b0; l < m->b1; l++) {
        size_t off, n;
        pl_model_part_range(lay, l, &off, &n);
        l9_slice_host(c, t, r, ref + off, want);
        pl_to_host(got, shards + (size_t)(l - m->b0) * m->block_numel,
                   m->block_numel * sizeof(float));
        struct pl_tp_tensor d[PL_TP_BLOCK_TENSORS];
        pl_tp_block_tensors(c, l, t, d);
        for (int k = 0; k < PL_TP_BLOCK_TENSORS; k++) {
            char name[64];
            snprintf(name, sizeof name, "%.40s (shard %d of %d)", d[k].name, r, t);
            l9_compare(e, name, got + d[k].shard_offset, want + d[k].shard_offset,
                    d[k].shard_numel, floor_rms);
        }
    }
    pl_mem_free(want);
    pl_mem_free(got);
    if (!rep) return;
    for (int i = 0; i < lay->n_tensors; i++) {
        const struct pl_param_desc *d = &lay->tensors[i];
        int mine = (d->part == -1 && m->has_embed) || (d->part == c->n_layers && m->has_head);
        if (!mine) continue;
        const long shift = l9_rep_shift(m, d->part);
        if (shift == L9_NO_PART) {
            l9_missing_part(e, d->part);
            continue;
        }
        float *h = pl_mem_alloc(d->numel * sizeof(float), PL_MEM_WORK, PL_HOST, "l9 rep");
        pl_to_host(h, rep + (long)d->offset + shift, d->numel * sizeof(float));
        l9_compare(e, d->name, h, ref + d->offset, d->numel, floor_rms);
        pl_mem_free(h);
    }
}

/* ---- one case ---- */

/* The coordinates (dp, tp, pp) the code gave this rank, and its groups' world ranks. */
static void record_grid(const struct fourd_grid *g, int coord[3], int size[3],
                        int members[3][L9_MAX_RANKS])
{
    coord[0] = g->dp_rank, coord[1] = g->tp_rank, coord[2] = g->pp_rank;
    struct pl_comm *cm[3] = {g->dp_comm, g->tp_comm, g->pp_comm};
    for (int a = 0; a < 3; a++) {
        size[a] = cm[a] ? pl_comm_size(cm[a]) : 0;
        for (int j = 0; j < size[a] && j < L9_MAX_RANKS; j++)
            members[a][j] = pl_comm_world_rank(cm[a], j);
    }
}

/* The digest of what this rank holds after a run: its shards and its whole parts. */
static uint64_t digest_model(const struct fourd_model *m, uint64_t h)
{
    size_t n = (size_t)(m->b1 - m->b0) * m->block_numel;
    float *host = pl_mem_alloc((n ? n : 1) * sizeof(float), PL_MEM_WORK, PL_HOST, "l9 digest");
    pl_to_host(host, m->params, n * sizeof(float));
    h = pl_fnv1a(h, host, n * sizeof(float));
    pl_mem_free(host);
    if (!m->rep) return h;
    const struct pl_model_layout *lay = &m->rep->layout;
    for (int part = -1; part <= m->cfg.n_layers; part += m->cfg.n_layers + 1) {
        if ((part == -1 && !m->has_embed) || (part >= 0 && !m->has_head)) continue;
        size_t off, cnt;
        pl_model_part_range(lay, part, &off, &cnt);
        float *p = pl_mem_alloc(cnt * sizeof(float), PL_MEM_WORK, PL_HOST, "l9 digest part");
        pl_to_host(p, m->rep->params + off, cnt * sizeof(float));
        h = pl_fnv1a(h, p, cnt * sizeof(float));
        pl_mem_free(p);
    }
    return h;
}

/* MICRO: CLIP's run with L9_MICRO_ALT microbatches, its norms and last gradient only */
enum l9_run {
    L9_RUN_FREE,
    L9_RUN_CLIP,
    L9_RUN_RECOMPUTE,
    L9_RUN_ZERO,
    L9_RUN_ZERO_CLIP,
    L9_RUN_MICRO
};

/* What the unclipped steps are watched for (lab.mk's wraps; gr_wrap_ctx holds the watch
 * while they run): the all-reduces on the DP group, and the batch rows each embedding and
 * head call of pl_parts_forward was given. */
struct watch {
    const struct pl_comm *dp;
    double floats;
    int calls;
    const struct gr_batch *b; /* the step's batch */
    int L, step, b0;          /* b0: the stage's first block, whose calls make the order */
    struct l9_obs *ob;
    const struct pl_comm *tp;
    int backs;                /* the first step's backwards of the stage's first block */
    int dp_seen;              /* the first step's DP sum has started */
    int wait_size;            /* a collective past the TP group between the stage's last
                                 backward and its DP sum: its size (0: none) */
    double kinds[3];          /* floats the DP group's all-reduces, reduce-scatters and
                                 all-gathers covered (dp x the chunk for the last two) */
    int zero;                 /* the run with m->zero = 1: its order and its batch rows are
                                 the other run's, not recorded again; its DP sum's start is */
};

/* The stage's order of work in the first step, from its first block's calls. */
static void op_note(int layer, int kind, const struct pl_model_ctx *ctx)
{
    struct watch *w = gr_wrap_ctx();
    if (!w || w->step != 0) return;
    struct l9_obs *o = w->ob;
    o->cd_backs += kind == 'B' && !w->zero; /* every block's, for the overlap test */
    if (layer != w->b0) return;
    if (!w->zero && o->nops < L9_MAX_OPS)
        o->ops[o->nops] = (struct l9_op){kind, ctx ? (long long)ctx->seq0 : -1};
    o->nops += !w->zero;
    w->backs += kind == 'B';
}

#define SP_FWD_ARGS struct pl_comm *tp, const struct pl_model_config *c, int layer, \
    const struct pl_block_params *p
void __real_pl_sp_block_forward(SP_FWD_ARGS, struct pl_sp_block_acts *a,
                                const struct pl_model_ctx *ctx, const float *x, float *y);
void __wrap_pl_sp_block_forward(SP_FWD_ARGS, struct pl_sp_block_acts *a,
                                const struct pl_model_ctx *ctx, const float *x, float *y);
void __real_pl_sp_block_forward_saved(SP_FWD_ARGS, struct pl_sp_block_saved *s,
                                      const struct pl_model_ctx *ctx, const float *x, float *y);
void __wrap_pl_sp_block_forward_saved(SP_FWD_ARGS, struct pl_sp_block_saved *s,
                                      const struct pl_model_ctx *ctx, const float *x, float *y);
void __real_pl_sp_block_backward(SP_FWD_ARGS, const struct pl_block_params *g,
                                 const struct pl_sp_block_acts *a, const struct pl_model_ctx *ctx,
                                 const float *dy, float *dx);
void __wrap_pl_sp_block_backward(SP_FWD_ARGS, const struct pl_block_params *g,
                                 const struct pl_sp_block_acts *a, const struct pl_model_ctx *ctx,
                                 const float *dy, float *dx);
void __real_pl_sp_block_backward_saved(SP_FWD_ARGS, const struct pl_block_params *g,
                                       const struct pl_sp_block_saved *s,
                                       const struct pl_model_ctx *ctx, const float *dy, float *dx);
void __wrap_pl_sp_block_backward_saved(SP_FWD_ARGS, const struct pl_block_params *g,
                                       const struct pl_sp_block_saved *s,
                                       const struct pl_model_ctx *ctx, const float *dy, float *dx);

void __wrap_pl_sp_block_forward(SP_FWD_ARGS, struct pl_sp_block_acts *a,
                                const struct pl_model_ctx *ctx, const float *x, float *y)
{
    op_note(layer, 'F', ctx);
    __real_pl_sp_block_forward(tp, c, layer, p, a, ctx, x, y);
    l9_vocab_block(layer, 'F');
}

void __wrap_pl_sp_block_forward_saved(SP_FWD_ARGS, struct pl_sp_block_saved *s,
                                      const struct pl_model_ctx *ctx, const float *x, float *y)
{
    op_note(layer, 'F', ctx);
    __real_pl_sp_block_forward_saved(tp, c, layer, p, s, ctx, x, y);
    l9_vocab_block(layer, 'F');
}

void __wrap_pl_sp_block_backward(SP_FWD_ARGS, const struct pl_block_params *g,
                                 const struct pl_sp_block_acts *a, const struct pl_model_ctx *ctx,
                                 const float *dy, float *dx)
{
    op_note(layer, 'B', ctx);
    l9_vocab_block(layer, 'B');
    __real_pl_sp_block_backward(tp, c, layer, p, g, a, ctx, dy, dx);
}

void __wrap_pl_sp_block_backward_saved(SP_FWD_ARGS, const struct pl_block_params *g,
                                       const struct pl_sp_block_saved *s,
                                       const struct pl_model_ctx *ctx, const float *dy, float *dx)
{
    op_note(layer, 'B', ctx);
    l9_vocab_block(layer, 'B');
    __real_pl_sp_block_backward_saved(tp, c, layer, p, g, s, ctx, dy, dx);
}
#undef SP_FWD_ARGS

/* A collective on comm: the DP group's floats, and whether the first step's DP sum, once
 * the stage's backwards are done, waited on a collective beyond the TP group first (one
 * over the pipeline holds the sum until every stage has drained). */
static void order_note(struct watch *w, const struct pl_comm *comm)
{
    if (w->step != 0 || w->dp_seen) return;
    if (comm == w->dp) {
        w->dp_seen = 1;
        *(w->zero ? &w->ob->zero_dp_wait_size : &w->ob->dp_wait_size) = w->wait_size;
        return;
    }
    if (comm != w->tp && w->backs >= L9_MICRO && !w->wait_size)
        w->wait_size = pl_comm_size(comm);
}

/* A collective of floats on comm in the first step without ZeRO-1: on the DP group, beyond
 * the loss's few, a bucket of the DP sum, and the stage's block backwards begun by then. */
static void bucket_note(struct watch *w, const struct pl_comm *comm, double floats)
{
    if (w->step != 0 || w->zero || comm != w->dp || floats <= L9_DP_SLACK) return;
    if (w->ob->cd_dp_calls++ == 0) w->ob->cd_first_dp = w->ob->cd_backs;
}

static void coll_note(const struct pl_comm *comm, size_t count)
{
    struct watch *w = gr_wrap_ctx();
    l9_vocab_coll(comm, (double)count);
    if (!w) return;
    if (comm == w->dp) w->floats += (double)count, w->calls++, w->kinds[0] += (double)count;
    bucket_note(w, comm, (double)count);
    order_note(w, comm);
}

void __real_pl_barrier(struct pl_comm *comm);
void __wrap_pl_barrier(struct pl_comm *comm);

void __wrap_pl_barrier(struct pl_comm *comm)
{
    coll_note(comm, 0);
    __real_pl_barrier(comm);
}

/* The batch row whose `rows` rows from there are p's, or -1. A pointer into the batch (op
 * memory) is read by its place; any other by its content, copied to the host. */
static int batch_row(const int *p, const int *op, const int *host, int B, int T, int rows)
{
    if (!p || rows <= 0 || rows > B) return -1;
    const uintptr_t a = (uintptr_t)p, lo = (uintptr_t)op, n = (uintptr_t)B * (uintptr_t)T;
    if (a >= lo && a < lo + n * sizeof(int)) {
        uintptr_t d = (a - lo) / sizeof(int);
        return (a - lo) % sizeof(int) == 0 && d % (uintptr_t)T == 0 ? (int)(d / (uintptr_t)T) : -1;
    }
    const size_t bytes = (size_t)rows * (size_t)T * sizeof(int);
    int *h = malloc(bytes);
    PL_ASSERT(h);
    pl_to_host(h, p, bytes);
    int found = -1;
    for (int r = 0; r + rows <= B && found < 0; r++)
        if (!memcmp(h, host + (size_t)r * (size_t)T, bytes)) found = r;
    free(h);
    return found;
}

static void feed_note(struct l9_feed *f, int *calls, const int *p, const int *op, const int *host,
                      const struct gr_batch *b, int rows)
{
    int j = (*calls)++;
    if (j < L9_MICRO) f[j].rows = rows, f[j].seq = batch_row(p, op, host, b->B, b->T, rows);
}

double __real_pl_parts_forward(struct pl_model *m, int first, int last, int mb,
                               struct pl_parts_acts *a, const struct pl_model_ctx *ctx,
                               const int *tokens, const int *targets, int B, int T,
                               const float *x_in);
double __wrap_pl_parts_forward(struct pl_model *m, int first, int last, int mb,
                               struct pl_parts_acts *a, const struct pl_model_ctx *ctx,
                               const int *tokens, const int *targets, int B, int T,
                               const float *x_in);

double __wrap_pl_parts_forward(struct pl_model *m, int first, int last, int mb,
                               struct pl_parts_acts *a, const struct pl_model_ctx *ctx,
                               const int *tokens, const int *targets, int B, int T,
                               const float *x_in)
{
    struct watch *w = gr_wrap_ctx();
    if (w && w->b && !w->zero && w->step >= 0 && w->step < L9_K_STEPS) {
        struct l9_obs *o = w->ob;
        const int s = w->step;
        if (first == -1)
            feed_note(o->emb[s], &o->emb_calls[s], tokens, w->b->tokens, w->b->h_tokens, w->b, B);
        if (last == w->L)
            feed_note(o->head[s], &o->head_calls[s], targets, w->b->targets, w->b->h_targets,
                      w->b, B);
    }
    return __real_pl_parts_forward(m, first, last, mb, a, ctx, tokens, targets, B, T, x_in);
}

void __real_pl_all_reduce(struct pl_comm *comm, const float *send, float *recv, size_t count,
                          enum pl_red op);
void __wrap_pl_all_reduce(struct pl_comm *comm, const float *send, float *recv, size_t count,
                          enum pl_red op);
struct pl_handle *__real_pl_all_reduce_async(struct pl_comm *comm, const float *send,
                                             float *recv, size_t count, enum pl_red op);
struct pl_handle *__wrap_pl_all_reduce_async(struct pl_comm *comm, const float *send,
                                             float *recv, size_t count, enum pl_red op);

void __wrap_pl_all_reduce(struct pl_comm *comm, const float *send, float *recv, size_t count,
                          enum pl_red op)
{
    coll_note(comm, count);
    __real_pl_all_reduce(comm, send, recv, count, op);
}

struct pl_handle *__wrap_pl_all_reduce_async(struct pl_comm *comm, const float *send,
                                             float *recv, size_t count, enum pl_red op)
{
    coll_note(comm, count);
    return __real_pl_all_reduce_async(comm, send, recv, count, op);
}

/* A reduce-scatter (kind 1) or all-gather (2) of chunk floats per rank on comm: on the DP
 * group, the dp x chunk floats it covers. */
static void chunk_note(const struct pl_comm *comm, int kind, size_t chunk)
{
    struct watch *w = gr_wrap_ctx();
    l9_vocab_coll(comm, (double)chunk * pl_comm_size(comm));
    if (!w) return;
    if (comm == w->dp) w->kinds[kind] += (double)chunk * pl_comm_size(comm);
    bucket_note(w, comm, (double)chunk * pl_comm_size(comm));
    order_note(w, comm);
}

#define RS_ARGS struct pl_comm *comm, const float *send, float *recv, size_t n, enum pl_red op
#define AG_ARGS struct pl_comm *comm, const float *send, float *recv, size_t n
void __real_pl_reduce_scatter(RS_ARGS);
void __wrap_pl_reduce_scatter(RS_ARGS);
struct pl_handle *__real_pl_reduce_scatter_async(RS_ARGS);
struct pl_handle *__wrap_pl_reduce_scatter_async(RS_ARGS);
void __real_pl_all_gather(AG_ARGS);
void __wrap_pl_all_gather(AG_ARGS);
struct pl_handle *__real_pl_all_gather_async(AG_ARGS);
struct pl_handle *__wrap_pl_all_gather_async(AG_ARGS);

void __wrap_pl_reduce_scatter(RS_ARGS)
{
    chunk_note(comm, 1, n);
    __real_pl_reduce_scatter(comm, send, recv, n, op);
}

struct pl_handle *__wrap_pl_reduce_scatter_async(RS_ARGS)
{
    chunk_note(comm, 1, n);
    return __real_pl_reduce_scatter_async(comm, send, recv, n, op);
}

void __wrap_pl_all_gather(AG_ARGS)
{
    chunk_note(comm, 2, n);
    __real_pl_all_gather(comm, send, recv, n);
}

struct pl_handle *__wrap_pl_all_gather_async(AG_ARGS)
{
    chunk_note(comm, 2, n);
    return __real_pl_all_gather_async(comm, send, recv, n);
}
#undef RS_ARGS
#undef AG_ARGS

/* K steps of the student's training on this case's grid with opt: the losses or norms, the
 * traffic and memory, the parameters (and the last step's gradient) against ref's, into ob.
 * Returns 0 when a stub was reached or a call gave nothing. */
static int train_run(struct l9_state *st, int i, const struct pl_adamw_config *opt,
                     const struct gr_reference *ref, struct l9_obs *ob, enum l9_run mode,
                     enum pl_recompute rc)
{
    const int clipped = mode == L9_RUN_CLIP || mode == L9_RUN_ZERO_CLIP || mode == L9_RUN_MICRO;
    const int micro = mode == L9_RUN_MICRO ? L9_MICRO_ALT : L9_MICRO;
    const int zero = mode == L9_RUN_ZERO || mode == L9_RUN_ZERO_CLIP;
    const struct l9_case *k = &st->cases[i];
    const struct gr_train_setup *ts = &st->train[i];
    struct fourd_grid g;
    memset(&g, 0, sizeof g);
    struct pl_mem_stats held;
    pl_mem_get_stats(&held);
    ob->grid_ret = fourd_grid_new(&g, pl_comm_world(), L9_ORDER, k->dp, k->tp, k->pp);
    if (gr_agree(ob->grid_ret != 0 || pl_todo_what() != NULL)) {
        if (ob->grid_ret == 0) fourd_grid_free(&g);
        return 0;
    }
    record_grid(&g, ob->coord, ob->size, ob->members);
    pl_mem_reset_peak(); /* the peaks count from fourd_model_new: what it holds, even briefly */
    struct fourd_model *m = fourd_model_new(&ts->cfg, opt, &g);
    ob->model_null = m == NULL;
    if (gr_agree(m == NULL || pl_todo_what() != NULL)) {
        if (m) fourd_model_free(m);
        fourd_grid_free(&g);
        return 0;
    }
    ob->stage_b0 = m->b0, ob->stage_b1 = m->b1;
    m->recompute = rc;
    m->zero = zero;
    struct gr_batch b;
    gr_batch_new(&b, ts, 0, 1); /* every rank gets the whole global batch */
    struct pl_ledger mark, delta;
    gr_ledger_mark(&mark);
    struct pl_mem_stats ms;
    pl_mem_get_stats(&ms);
    const double activ0 = (double)ms.current[PL_MEM_ACTIV];
    int ok = 1;
    uint64_t h = PL_FNV1A_START;
    struct watch watch = {.dp = g.dp_comm, .b = &b, .L = ts->cfg.n_layers, .step = -1,
                          .b0 = m->b0, .ob = ob, .tp = g.tp_comm, .zero = zero};
    if (mode == L9_RUN_FREE || mode == L9_RUN_ZERO) gr_wrap_ctx_set(&watch);
    if (mode == L9_RUN_FREE) l9_vocab_watch(st, i, ob, &g, m);
    for (int s = 0; s < ts->steps && ok; s++) {
        gr_batch_load(&b, s);
        watch.step = s;
        double loss = fourd_step(m, b.tokens, b.targets, b.B, micro);
        if (mode == L9_RUN_MICRO) ob->micro_norm[s] = m->grad_norm;
        else if (clipped) (zero ? ob->zero_norm : ob->norm)[s] = m->grad_norm;
        else if (mode == L9_RUN_FREE) ob->loss[s] = loss;
        else if (zero) ob->zero_loss[s] = loss;
        h = pl_fnv1a(h, &loss, sizeof loss);
        ok = !gr_agree(pl_todo_what() != NULL);
        if (ok && s == 0 && mode == L9_RUN_ZERO)
            l9_observe_shares(ob->zero_shares, &ts->cfg, ref, opt, m, k->tp, g.tp_rank, k->dp,
                              g.dp_rank);
    }
    gr_wrap_ctx_set(NULL);
    if (mode == L9_RUN_FREE) l9_vocab_unwatch(ob, m);
    if (mode == L9_RUN_FREE) ob->dp_floats = watch.floats, ob->dp_calls = watch.calls;
    if (mode == L9_RUN_ZERO) memcpy(ob->zero_floats, watch.kinds, sizeof watch.kinds);
    pl_mem_get_stats(&ms);
    if (zero) {
        /* from fourd_model_new: the peak was reset just before it */
        double optim = (double)ms.peak[PL_MEM_OPTIM] - (double)held.current[PL_MEM_OPTIM];
        if (optim > ob->zero_optim) ob->zero_optim = optim;
        ob->zero_digest[clipped] = digest_model(m, PL_FNV1A_START);
    } else if (mode != L9_RUN_CLIP && mode != L9_RUN_MICRO) {
        ob->activ_peak[rc] = (double)ms.peak[PL_MEM_ACTIV] - activ0;
        ob->digest[rc] = digest_model(m, h);
        ob->stage_blocks = m->b1 - m->b0;
    }
    const int mj = mode == L9_RUN_FREE ? L9_MEM_FREE
                   : mode == L9_RUN_ZERO   ? L9_MEM_ZERO
                   : mode == L9_RUN_RECOMPUTE
                       ? (rc == PL_RECOMPUTE_FULL ? L9_MEM_FULL : L9_MEM_SELECTIVE)
                       : -1;
    if (ok && mj >= 0) {
        static const enum pl_mem_cat cat[4] = {PL_MEM_PARAMS, PL_MEM_GRADS, PL_MEM_OPTIM,
                                               PL_MEM_ACTIV};
        for (int c = 0; c < 4; c++)
            ob->mem[mj][c] = (double)ms.peak[cat[c]] - (double)held.current[cat[c]];
        ob->mem[mj][L9_MEM_DEVICE] = (double)ms.device_peak - (double)held.device_current;
        ob->has_mem[mj] = 1;
    }
    gr_ledger_since(&mark, &delta);
    if (mode == L9_RUN_FREE) {
        ob->sp_inter = delta.bytes[PL_ALL_GATHER][PL_LINK_INTER] +
                       delta.bytes[PL_REDUCE_SCATTER][PL_LINK_INTER];
        ob->p2p_bytes = delta.bytes[PL_P2P][PL_LINK_INTRA] + delta.bytes[PL_P2P][PL_LINK_INTER];
    }
    if (ok && mode != L9_RUN_RECOMPUTE && mode != L9_RUN_MICRO) {
        struct l9_err *e = clipped ? (zero ? &ob->zero_clipped_params : &ob->clipped_params)
                                   : (zero ? &ob->zero_params : &ob->params);
        l9_compare_rank(e, &ts->cfg, &ref->layout, m, m->params, m->rep ? m->rep->params : NULL,
                     ref->params, k->tp, g.tp_rank);
    }
    if (ok && clipped) {
        /* the gradient AdamW was given in the last step: the reference's, clipped */
        size_t n = ref->numel;
        float *want = pl_mem_alloc(n * sizeof(float), PL_MEM_WORK, PL_HOST, "l9 clipped");
        const float *g0 = ref->grads + (size_t)(ts->steps - 1) * n;
        double norm = st->ref_norm[i][ts->steps - 1];
        float scale = pl_clip_scale(norm * norm, opt->grad_clip);
        for (size_t j = 0; j < n; j++) want[j] = g0[j] * scale;
        if (zero)
            l9_compare_shares(&ob->zero_grads, &ts->cfg, &ref->layout, m, want, k->tp,
                              g.tp_rank, k->dp, g.dp_rank);
        else
            l9_compare_rank(mode == L9_RUN_MICRO ? &ob->micro_grads : &ob->grads, &ts->cfg,
                            &ref->layout, m, m->grads, m->rep ? m->rep->grads : NULL, want,
                            k->tp, g.tp_rank);
        pl_mem_free(want);
    }
    gr_batch_free(&b);
    fourd_model_free(m);
    fourd_grid_free(&g);
    pl_mem_get_stats(&ms);
    for (int c = 0; mode == L9_RUN_FREE && c < PL_MEM_NCAT; c++) {
        double left = (double)ms.current[c] - (double)held.current[c];
        if (left > ob->leak_bytes) ob->leak_bytes = left, ob->leak_cat = c;
    }
    return ok;
}

/* Every order of the axes on this case's degrees, and what must be refused. */
static void observe_orders(const struct l9_case *k, struct l9_obs *ob)
{
    ob->has_orders = 1;
    for (int j = 0; j < L9_NORDERS; j++) {
        struct l9_grid_obs *o = &ob->orders[j];
        struct fourd_grid g;
        memset(&g, 0, sizeof g);
        o->ret = fourd_grid_new(&g, pl_comm_world(), L9_ORDERS[j], k->dp, k->tp, k->pp);
        if (o->ret != 0) continue;
        record_grid(&g, o->coord, o->size, o->members);
        fourd_grid_free(&g);
    }
    for (int j = 0; j < L9_NBAD; j++) {
        struct fourd_grid g;
        memset(&g, 0, sizeof g);
        ob->bad_ret[j] = fourd_grid_new(&g, pl_comm_world(), L9_BAD[j].order,
                                        k->dp * L9_BAD[j].dp_times, k->tp, k->pp);
        if (ob->bad_ret[j] == 0) fourd_grid_free(&g);
    }
}

void l9_observe(struct l9_state *st, int i, struct l9_obs *ob)
{
    if (st->capped) {
        l9_observe_capped(st, i, ob);
        return;
    }
    if (!train_run(st, i, &st->free_opt[i], &st->free[i], ob, L9_RUN_FREE, PL_RECOMPUTE_NONE))
        return;
    if (!train_run(st, i, &st->train[i].opt, &st->ref[i], ob, L9_RUN_CLIP, PL_RECOMPUTE_NONE))
        return;
    /* a loss scale fitted to m = 4: the first grid again with L9_MICRO_ALT microbatches */
    if (i == 0) {
        if (!train_run(st, i, &st->train[i].opt, &st->ref[i], ob, L9_RUN_MICRO,
                       PL_RECOMPUTE_NONE))
            return;
        ob->has_micro = 1;
    }
    l9_vocab_big(st, i, ob); /* the loss with logits in the hundreds (t > 1, 8 ranks) */
    /* recomputation and the orders on the first grid of 8 ranks, (2,2,2): every axis at once */
    if (st->np == 8 && i == 0 && !st->hidden) observe_orders(&st->cases[i], ob);
    ob->has_recompute = st->np == 8 && i == 0 && !st->hidden;
    for (int r = PL_RECOMPUTE_SELECTIVE; ob->has_recompute && r <= PL_RECOMPUTE_FULL; r++)
        if (!train_run(st, i, &st->free_opt[i], &st->free[i], ob, L9_RUN_RECOMPUTE,
                       (enum pl_recompute)r))
            return;
    /* the step time held to the plan: one step traced, replayed at scale on rank 0 */
    ob->has_time = st->np == 8 && !st->hidden;
    if (ob->has_time && !l9_time_replay(st, i, &ob->time)) return;
    /* ZeRO-1 on the grids that have a DP group to shard over */
    ob->has_zero = !st->hidden && st->cases[i].dp > 1;
    if (!ob->has_zero) return;
    if (!train_run(st, i, &st->free_opt[i], &st->free[i], ob, L9_RUN_ZERO, PL_RECOMPUTE_NONE))
        return;
    ob->zero_runs++;
    if (train_run(st, i, &st->train[i].opt, &st->ref[i], ob, L9_RUN_ZERO_CLIP,
                  PL_RECOMPUTE_NONE))
        ob->zero_runs++;
}
