/* cases_train.c: op train, K AdamW steps of a 2-block model with dropout against
 * pl_model_step. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab05.h"

/* ---- op train: K AdamW steps of a 2-block model, dropout on, against pl_model_step ----
 * The embedding and the head are the grader's (replicated, their gradients summed with raw
 * MPI); the blocks are the student's SP blocks on Lab 4's shards, with the student's
 * synchronisation of the replicated gradients; on a tp x dp grid the grader averages the
 * blocks' gradients over the replicas after it, as data parallelism does. */

/* Case 0: the world as one TP group; case 1 (4 ranks and more): a tp x dp grid of strided
 * groups. The hidden suite's one case draws B, dp (2 or 4 on 8 ranks) and the groups' shape
 * (consecutive on 4 ranks, where the visible suite runs strided ones) from the seed. */
struct l5_train_case l5_train_case_of(const struct l5_state *st, int i, int n)
{
    struct l5_train_case k = {1, 0, L5_TRAIN_B};
    if (st->hidden) {
        float r[3];
        pl_rng_fill_uniform(r, 3, st->seed, pl_rng_stream("lab05.train"), 0, 0.0f, 1.0f);
        k.B = 1 + (int)(r[0] * 3) % 3;
        if (n >= 4) {
            k.dp = n >= 8 && r[1] < 0.5f ? 4 : 2;
            k.strided = n >= 8 && r[2] < 0.5f;
        }
    } else if (i == 1) {
        k.dp = 2, k.strided = 1;
    }
    return k;
}

int l5_train_cases(const struct l5_state *st, int n)
{
    return st->hidden ? 1 : n >= 4 ? 2 : 1;
}

struct l5_model {
    struct pl_model_config cfg;
    struct pl_model *m; /* embedding and head (its blocks unused); the layout */
    int t, r, d, dp, B, strided;
    MPI_Comm dp_comm, tp_comm; /* the grader's: the DP reduction and the norm's sum */
    float *shard[2], *grad[2], *am[2], *av[2];
    struct pl_block_params sp[2], sg[2];
    int adam_t;
    uint64_t seed; /* the grading seed: dropout's masks */
};

/* The tokens and targets of step `step`'s global batch of nseq sequences. */
static void step_tokens(uint64_t seed, const struct pl_model_config *c, int step, int nseq,
                        int *tok, int *tgt)
{
    size_t n = (size_t)nseq * c->seq_len;
    float *f = malloc(2 * n * sizeof *f);
    pl_rng_fill_int(f, 2 * n, seed, pl_rng_stream("lab05.tokens"), (uint64_t)step * 2 * n,
                    0, c->vocab - 1);
    for (size_t i = 0; i < n; i++) {
        tok[i] = (int)f[i];
        tgt[i] = (int)f[n + i];
    }
    free(f);
}

static void l5_model_new(struct l5_model *s, uint64_t seed, const struct pl_model_config *c,
                         struct pl_comm *tp, int d, const struct l5_train_case *kt)
{
    memset(s, 0, sizeof *s);
    s->cfg = *c;
    s->seed = seed;
    s->t = pl_comm_size(tp);
    s->r = pl_comm_rank(tp);
    s->d = d, s->dp = kt->dp, s->B = kt->B, s->strided = kt->strided;
    PL_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, s->r, d, &s->dp_comm));
    PL_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, d, s->r, &s->tp_comm));
    s->m = pl_model_new(c, PL_MODEL_ALL);
    size_t sn = pl_tp_block_numel(c, s->t);
    for (int l = 0; l < c->n_layers; l++) {
        size_t off, n;
        pl_model_part_range(&s->m->layout, l, &off, &n);
        s->shard[l] = gr_op_alloc(sn, "lab05 train shard");
        s->grad[l] = gr_op_alloc(sn, "lab05 train shard grads");
        s->am[l] = gr_op_alloc(sn, "lab05 train m");
        s->av[l] = gr_op_alloc(sn, "lab05 train v");
        pl_zero(s->am[l], sn);
        pl_zero(s->av[l], sn);
        pl_tp_block_slice(c, s->t, s->r, s->m->params + off, s->shard[l]);
        pl_tp_block_bind(c, s->t, s->shard[l], &s->sp[l]);
        pl_tp_block_bind(c, s->t, s->grad[l], &s->sg[l]);
    }
}

static void l5_model_free(struct l5_model *s)
{
    for (int l = 0; l < s->cfg.n_layers; l++) {
        pl_mem_free(s->shard[l]);
        pl_mem_free(s->grad[l]);
        pl_mem_free(s->am[l]);
        pl_mem_free(s->av[l]);
    }
    pl_model_free(s->m);
    MPI_Comm_free(&s->dp_comm);
    MPI_Comm_free(&s->tp_comm);
}

/* Raw MPI sum of n floats of op memory over comm, times scale (the grader's part: the
 * embedding's and head's gradients over the world, the blocks' over the replicas). */
static void raw_sum(MPI_Comm comm, float *x, size_t n, float scale)
{
    float *h = gr_host_copy(x, n);
    PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, h, (int)n, MPI_FLOAT, MPI_SUM, comm));
    if (scale != 1.0f)
        for (size_t i = 0; i < n; i++) h[i] *= scale;
    pl_to_device(x, h, n * sizeof *h);
    free(h);
}

/* This rank's T/t tokens of every sequence of its replica, on the host and in op memory. */
struct local_batch {
    int *ltok, *ltgt, *dtok, *dtgt;
    size_t n;
};

static void local_batch_new(const struct l5_model *s, const int *tok, const int *tgt,
                            struct local_batch *lb)
{
    const int T = s->cfg.seq_len, Ts = T / s->t, B = s->B;
    lb->n = (size_t)B * Ts;
    lb->ltok = pl_mem_alloc(lb->n * sizeof(int), PL_MEM_WORK, PL_HOST, "tok");
    lb->ltgt = pl_mem_alloc(lb->n * sizeof(int), PL_MEM_WORK, PL_HOST, "tgt");
    for (int b = 0; b < B; b++)
        for (int i = 0; i < Ts; i++) {
            size_t g = (size_t)(s->d * B + b) * T + (size_t)s->r * Ts + i;
            lb->ltok[b * Ts + i] = tok[g];
            lb->ltgt[b * Ts + i] = tgt[g];
        }
    lb->dtok = pl_mem_alloc(lb->n * sizeof(int), PL_MEM_WORK, PL_DEVICE, "tok");
    lb->dtgt = pl_mem_alloc(lb->n * sizeof(int), PL_MEM_WORK, PL_DEVICE, "tgt");
    pl_to_device(lb->dtok, lb->ltok, lb->n * sizeof(int));
    pl_to_device(lb->dtgt, lb->ltgt, lb->n * sizeof(int));
}

static void local_batch_free(struct local_batch *lb)
{
    pl_mem_free(lb->ltok);
    pl_mem_free(lb->ltgt);
    pl_mem_free(lb->dtok);
    pl_mem_free(lb->dtgt);
}

/* Forward and backward of this rank's tokens: the grader's embedding (at the tokens'
 * positions) and head around the student's SP blocks. Returns the global batch's loss. */
static double l5_forward_backward(struct pl_comm *tp, struct l5_model *s,
                                  const struct local_batch *lb, const struct pl_model_ctx *ctx)
{
    const struct pl_model_config *c = &s->cfg;
    const int t = s->t, T = c->seq_len, Ts = T / t, C = c->d_model, L = c->n_layers, B = s->B;
    const size_t nl = (size_t)B * Ts * C;
    struct pl_model *m = s->m;
    struct pl_embed_params e = m->embed, eg = m->embed_g;
    e.wpe += (size_t)s->r * Ts * C;
    eg.wpe += (size_t)s->r * Ts * C;
    float *xs[3];
    for (int k = 0; k < 3; k++) xs[k] = gr_op_alloc(nl, "lab05 train stream");
    struct pl_sp_block_acts acts[2];
    pl_embed_forward(c, &e, lb->dtok, B, Ts, xs[0]);
    for (int l = 0; l < L; l++) {
        pl_sp_block_acts_new(&acts[l], c, t, B, T);
        sp_block_forward(tp, c, l, &s->sp[l], &acts[l], ctx, xs[l % 2], xs[(l + 1) % 2]);
    }
    struct pl_head_acts ha;
    pl_head_acts_new(&ha, c, B, Ts);
    double loss = gr_global_loss(pl_head_forward(c, &m->head, &ha, xs[L % 2], lb->dtgt));
    pl_head_backward(c, &m->head, &m->head_g, &ha, ctx, xs[2]);
    pl_head_acts_free(&ha);
    for (int l = L - 1; l >= 0; l--) {
        float *dy = xs[2], *dx = xs[(l + 1) % 2];
        sp_block_backward(tp, c, l, &s->sp[l], &s->sg[l], &acts[l], ctx, dy, dx);
        pl_sp_block_acts_free(&acts[l]);
        float *tmp = xs[2];
        xs[2] = dx;
        xs[(l + 1) % 2] = tmp;
    }
    pl_embed_backward(c, &eg, lb->dtok, B, Ts, xs[2]);
    for (int k = 0; k < 3; k++) pl_mem_free(xs[k]);
    return loss;
}

/* Relative L2 error of got against ref (op memory), measured against at least
 * rms^2 x n: a tensor whose norm is below the shard's RMS times sqrt(its size) (a bias that
 * started at zero, whose gradient may be rounding alone, as the key bias's is) never fails
 * on rounding alone. */
static double rel_floor(const float *got, const float *ref, size_t n, double rms)
{
    float *g = gr_host_copy(got, n), *r = gr_host_copy(ref, n);
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)g[i] - r[i]) * ((double)g[i] - r[i]);
        den += (double)r[i] * r[i];
    }
    free(g);
    free(r);
    double floor = rms * rms * (double)n;
    return sqrt(num / (den > floor ? den : floor));
}

/* The single device's gradients of the blocks on the sequences of replica d (all replicas
 * summed when d < 0), at the reference's current parameters, this rank's shard of block l
 * in want[l]. */
static void replica_reference(struct pl_model *ref, const struct l5_model *s, const int *dtok,
                              const int *dtgt, int d, float **want)
{
    const struct pl_model_config *c = &s->cfg;
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1;
    ctx.seed = s->seed ^ 0x5eedULL;
    ctx.step = (uint64_t)s->adam_t + 1;
    pl_model_zero_grad(ref);
    for (int k = d < 0 ? 0 : d; k < (d < 0 ? s->dp : d + 1); k++) {
        const size_t at = (size_t)k * s->B * c->seq_len;
        ctx.seq0 = (int64_t)k * s->B;
        pl_model_forward(ref, dtok + at, dtgt + at, s->B, &ctx);
        pl_model_backward(ref, &ctx);
    }
    for (int l = 0; l < c->n_layers; l++) {
        size_t off, nb;
        pl_model_part_range(&ref->layout, l, &off, &nb);
        pl_tp_block_slice(c, s->t, s->r, ref->grads + off, want[l]);
    }
    pl_model_free_acts(ref);
}

/* This rank's TP group as world ranks, in group order ("2, 0"). */
static void group_members(struct pl_comm *tp, int t, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int m = 0; m < t; m++) {
        size_t l = strlen(buf);
        snprintf(buf + l, len - l, "%s%d", m ? ", " : "", pl_comm_world_rank(tp, m));
    }
}

/* On a tp x dp grid, after the student's synchronisation and before the replicas are
 * averaged: every tensor of this rank's shards against the single device's gradient on its
 * replica's sequences alone. A replicated one that holds every replica's sum was
 * synchronised over the world. */
static void check_replica_grads(struct l5_state *st, struct pl_comm *tp, const struct l5_model *s,
                                struct pl_model *ref, const int *dtok, const int *dtgt,
                                int step, int world_matched)
{
    const struct pl_model_config *c = &s->cfg;
    const size_t sn = pl_tp_block_numel(c, s->t);
    float *want[2], *all[2] = {NULL, NULL};
    for (int l = 0; l < c->n_layers; l++) want[l] = gr_op_alloc(sn, "replica's expected grads");
    replica_reference(ref, s, dtok, dtgt, s->d, want);
    for (int l = 0; l < c->n_layers && l5_ok(st); l++) {
        struct pl_tp_tensor d[PL_TP_BLOCK_TENSORS];
        pl_tp_block_tensors(c, l, s->t, d);
        const double rms = sqrt(pl_grad_norm_sq(want[l], sn) / (double)sn);
        for (int k = 0; k < PL_TP_BLOCK_TENSORS && l5_ok(st); k++) {
            const size_t o = d[k].shard_offset, n = d[k].shard_numel;
            const double e = rel_floor(s->grad[l] + o, want[l] + o, n, rms);
            if (e <= L5_TOL_BWD) continue;
            const int rep = d[k].split == PL_TP_REPLICATED;
            if (rep && !all[0]) {
                for (int m = 0; m < c->n_layers; m++) all[m] = gr_op_alloc(sn, "every replica's");
                replica_reference(ref, s, dtok, dtgt, -1, all);
            }
            struct l5_said *f;
            if (rep && rel_floor(s->grad[l] + o, all[l] + o, n, rms) <= L5_TOL_BWD) {
                f = L5_FAIL(st, L5_W_REPLICA_SUM, rep, step + 1, e, s->d, s->B, s->dp, s->t);
            } else {
                char members[160];
                group_members(tp, s->t, members, sizeof members);
                f = L5_FAIL(st, L5_W_REPLICA_GRID, rep, step + 1, e, s->d, s->B, s->dp, s->t,
                            s->strided, world_matched);
                l5_name(f, 1, members);
            }
            l5_name(f, 0, d[k].name);
        }
    }
    for (int l = 0; l < c->n_layers; l++) {
        pl_mem_free(want[l]);
        if (all[l]) pl_mem_free(all[l]);
    }
}

/* The student's synchronisation of the blocks' replicated gradients (checked per replica
 * on a grid), the trainer's average over the replicas and sums of the embedding's and head's,
 * and the clipping scale from the global norm: replicated tensors counted once, split ones
 * summed over the TP group. */
static float l5_sync_and_clip(struct l5_state *st, struct pl_comm *tp, struct l5_model *s,
                              const struct pl_adamw_config *opt, struct pl_model *ref,
                              const int *dtok, const int *dtgt, int step, int world_matched)
{
    const struct pl_model_config *c = &s->cfg;
    struct pl_model *m = s->m;
    const float inv_dp = 1.0f / (float)s->dp;
    for (int l = 0; l < c->n_layers; l++) sp_sync_replicated_grads(tp, c, &s->sg[l]);
    if (s->dp > 1) {
        check_replica_grads(st, tp, s, ref, dtok, dtgt, step, world_matched);
        for (int l = 0; l < c->n_layers; l++)
            raw_sum(s->dp_comm, s->grad[l], pl_tp_block_numel(c, s->t), inv_dp);
    }
    size_t eo, en, ho, hn;
    pl_model_part_range(&m->layout, PL_PART_EMBED, &eo, &en);
    pl_model_part_range(&m->layout, PL_PART_HEAD(c), &ho, &hn);
    raw_sum(MPI_COMM_WORLD, m->grads + eo, en, inv_dp);
    raw_sum(MPI_COMM_WORLD, m->grads + ho, hn, inv_dp);
    struct pl_tp_tensor d[PL_TP_BLOCK_TENSORS];
    pl_tp_block_tensors(c, 0, s->t, d);
    double rep = pl_grad_norm_sq(m->grads + eo, en) + pl_grad_norm_sq(m->grads + ho, hn);
    double split = 0;
    for (int l = 0; l < c->n_layers; l++)
        for (int k = 0; k < PL_TP_BLOCK_TENSORS; k++) {
            double q = pl_grad_norm_sq(s->grad[l] + d[k].shard_offset, d[k].shard_numel);
            if (d[k].split == PL_TP_REPLICATED) rep += q;
            else split += q;
        }
    PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &split, 1, MPI_DOUBLE, MPI_SUM, s->tp_comm));
    return pl_clip_scale(rep + split, opt->grad_clip);
}
/* AdamW on the embedding and head (whole) and on this rank's block shards, gradients scaled
 * by the clipping factor first. */
static void l5_adamw(struct l5_model *s, float scale, const struct pl_adamw_config *opt)
{
    const struct pl_model_config *c = &s->cfg;
    struct pl_model *m = s->m;
    const size_t sn = pl_tp_block_numel(c, s->t);
    s->adam_t++;
    if (!m->adam_m) {
        m->adam_m = pl_mem_alloc(m->layout.numel * sizeof(float), PL_MEM_OPTIM, PL_DEVICE, "m");
        m->adam_v = pl_mem_alloc(m->layout.numel * sizeof(float), PL_MEM_OPTIM, PL_DEVICE, "v");
    }
    size_t parts[2][2];
    pl_model_part_range(&m->layout, PL_PART_EMBED, &parts[0][0], &parts[0][1]);
    pl_model_part_range(&m->layout, PL_PART_HEAD(c), &parts[1][0], &parts[1][1]);
    for (int k = 0; k < 2; k++) {
        if (scale < 1.0f) pl_scale(m->grads + parts[k][0], parts[k][1], scale);
        pl_model_adamw_flat(&m->layout, parts[k][0], parts[k][1], m->params + parts[k][0],
                            m->grads + parts[k][0], m->adam_m + parts[k][0],
                            m->adam_v + parts[k][0], s->adam_t, opt);
    }
    for (int l = 0; l < c->n_layers; l++) {
        struct pl_tp_tensor dl[PL_TP_BLOCK_TENSORS];
        pl_tp_block_tensors(c, l, s->t, dl);
        if (scale < 1.0f) pl_scale(s->grad[l], sn, scale);
        for (int k = 0; k < PL_TP_BLOCK_TENSORS; k++) {
            const struct pl_param_desc *pd = pl_model_find_param(&m->layout, dl[k].name);
            size_t o = dl[k].shard_offset;
            pl_adamw_step(s->shard[l] + o, s->grad[l] + o, s->am[l] + o, s->av[l] + o,
                          dl[k].shard_numel, s->adam_t, opt->lr, opt->beta1, opt->beta2,
                          opt->eps, pd && pd->decay ? opt->weight_decay : 0.0f);
        }
    }
}

/* One step as pl_model_step: zero, forward, backward, sync, clip on the global norm, AdamW.
 * tok, tgt: the global batch on the host (replica d's sequences are its own), dtok, dtgt the
 * same in op memory for the per-replica reference. Returns the global batch's loss. */
static double l5_model_step(struct l5_state *st, struct pl_comm *tp, struct l5_model *s,
                            const int *tok, const int *tgt, const struct pl_adamw_config *opt,
                            struct pl_model *ref, const int *dtok, const int *dtgt,
                            int world_matched)
{
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1;
    ctx.seed = s->seed ^ 0x5eedULL;
    ctx.step = (uint64_t)s->adam_t + 1;
    ctx.seq0 = (int64_t)s->d * s->B;
    ctx.loss_scale = 1.0f / s->t; /* the head's loss is the mean over this rank's tokens */
    pl_model_zero_grad(s->m);
    const size_t sn = pl_tp_block_numel(&s->cfg, s->t);
    for (int l = 0; l < s->cfg.n_layers; l++) pl_zero(s->grad[l], sn);
    struct local_batch lb;
    local_batch_new(s, tok, tgt, &lb);
    double loss = l5_forward_backward(tp, s, &lb, &ctx);
    l5_adamw(s, l5_sync_and_clip(st, tp, s, opt, ref, dtok, dtgt, s->adam_t, world_matched),
             opt);
    local_batch_free(&lb);
    return loss;
}

/* K AdamW steps of the 2-block model on case i's grid against pl_model_step on the global
 * batch (every replica's sequences): every loss, every parameter shard after the steps, and
 * on a grid each replica's gradients at every step. */
void l5_run_train(struct l5_state *st, struct pl_comm *tp, const struct l5_train_case *kt, int d,
                  int i)
{
    const int t = pl_comm_size(tp), r = pl_comm_rank(tp);
    struct pl_model_config c = l5_config(st, L5_DROPOUT);
    c.n_layers = 2;
    struct pl_adamw_config opt = pl_adamw_config_default();
    const int nseq = kt->dp * kt->B;
    const size_t n = (size_t)nseq * c.seq_len;
    int *tok = pl_mem_alloc(n * sizeof(int), PL_MEM_WORK, PL_HOST, "tokens");
    int *tgt = pl_mem_alloc(n * sizeof(int), PL_MEM_WORK, PL_HOST, "targets");
    int *dtok = pl_mem_alloc(n * sizeof(int), PL_MEM_WORK, PL_DEVICE, "tokens");
    int *dtgt = pl_mem_alloc(n * sizeof(int), PL_MEM_WORK, PL_DEVICE, "targets");
    struct pl_model *ref = pl_model_new(&c, PL_MODEL_ALL);
    struct l5_model s;
    l5_model_new(&s, st->seed, &c, tp, d, kt);
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1;
    ctx.seed = st->seed ^ 0x5eedULL;
    double want[L5_TRAIN_STEPS], got[L5_TRAIN_STEPS];
    for (int k = 0; k < L5_TRAIN_STEPS; k++) {
        step_tokens(st->seed, &c, k, nseq, tok, tgt);
        pl_to_device(dtok, tok, n * sizeof(int));
        pl_to_device(dtgt, tgt, n * sizeof(int));
        got[k] = l5_model_step(st, tp, &s, tok, tgt, &opt, ref, dtok, dtgt, i > 0);
        want[k] = pl_model_step(ref, dtok, dtgt, nseq, &opt, &ctx);
        if (pl_todo_what()) break;
    }
    double err = 0;
    int bad = pl_todo_what() ? -1 : gr_check_losses(got, want, L5_TRAIN_STEPS, &err);
    if (bad >= 0) L5_FAIL(st, L5_W_STEP_LOSS, bad + 1, got[bad], want[bad], err);
    /* every parameter after K steps: the shards against their blocks of the reference */
    for (int l = 0; l < c.n_layers && l5_ok(st) && !pl_todo_what(); l++) {
        size_t off, nb;
        pl_model_part_range(&ref->layout, l, &off, &nb);
        size_t sn = pl_tp_block_numel(&c, t);
        float *w = gr_op_alloc(sn, "expected shard");
        pl_tp_block_slice(&c, t, r, ref->params + off, w);
        double floor_rms = sqrt(pl_grad_norm_sq(w, sn) / (double)sn);
        struct pl_tp_tensor dl[PL_TP_BLOCK_TENSORS];
        pl_tp_block_tensors(&c, l, t, dl);
        for (int k = 0; k < PL_TP_BLOCK_TENSORS && l5_ok(st); k++) {
            const size_t o = dl[k].shard_offset, sz = dl[k].shard_numel;
            double e = rel_floor(s.shard[l] + o, w + o, sz, floor_rms);
            if (!(e <= GR_TOL_PARAMS))
                l5_name(L5_FAIL(st, L5_W_WEIGHTS, e, dl[k].split == PL_TP_REPLICATED), 0,
                        dl[k].name);
        }
        pl_mem_free(w);
    }
    struct l5_figs *f = &st->ob->figs;
    f->dp = kt->dp, f->strided = kt->strided, f->B = kt->B, f->layers = c.n_layers;
    f->grid_after_world = i > 0;
    f->p = L5_DROPOUT;
    l5_model_free(&s);
    pl_model_free(ref);
    pl_mem_free(tok);
    pl_mem_free(tgt);
    pl_mem_free(dtok);
    pl_mem_free(dtgt);
}
