/* cases_check.c: the figures of a Lab 6 case that are more than a number read off
 * (lab06.h): a partition that is not a cover of the model, what a loss or gradient error
 * matches, the traced step's marks and sends, its replay, and what the kit holds. No
 * sentences: judge.c and judge_train.c word them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab06.h"

int l6_cover_wrong(const int (*st)[2], int n, const struct pl_model_config *c,
                   struct l6_train *t)
{
    int want = PL_PART_EMBED;
    for (int s = 0; s < n; s++) {
        if (st[s][0] != want || st[s][1] < st[s][0]) {
            *t = (struct l6_train){.wrong = L6_W_COVER, .v = {s, st[s][0], st[s][1], want}};
            return 1;
        }
        want = st[s][1] + 1;
    }
    if (want == PL_PART_HEAD(c) + 1) return 0;
    *t = (struct l6_train){.wrong = L6_W_COVER_END, .v = {want - 1}};
    return 1;
}

/* Rank 0, step 0 with m > 1: whether the pipeline's loss (grads NULL) or its assembled
 * gradient (grads, op memory) is what one device computes on the same batch with every
 * microbatch's dropout masks drawn where the first microbatch's are (ctx.seq0 left at 0),
 * or at step 0 (ctx.step left at m->adam_t): the single-device model at its initial
 * parameters, run microbatch by microbatch with that context. 1 (into t) when one of them
 * matches. */
int l6_dropout_explains(const struct gr_reference *ref, const struct gr_batch *b, int m,
                        double loss, const float *grads, struct l6_train *t)
{
    const struct pl_model_config *c = &ref->setup.cfg;
    struct pl_model *model = pl_model_new(c, PL_MODEL_PARAMS | PL_MODEL_GRADS);
    pl_copy_from_host(model->params, ref->init, ref->numel);
    size_t N = ref->numel;
    float *mine = malloc(N * sizeof *mine), *what = malloc(N * sizeof *what);
    PL_ASSERT(mine && what);
    if (grads) pl_copy_to_host(mine, grads, N);
    int was = pl_trace_enabled(), Bmb = b->B / m, T = c->seq_len, found = 0;
    pl_trace_enable(0);
    for (int how = 0; how < 2 && !found; how++) {
        double sum = 0, d2 = 0, r2 = 0;
        pl_model_zero_grad(model);
        for (int i = 0; i < m; i++) {
            struct pl_model_ctx ctx = pl_model_ctx_eval();
            ctx.train = 1;
            ctx.step = how == 0 ? 1 : 0;
            ctx.seq0 = how == 0 ? 0 : (int64_t)i * Bmb;
            ctx.loss_scale = 1.0f / (float)m;
            size_t at = (size_t)i * (size_t)Bmb * (size_t)T;
            sum += pl_model_forward(model, b->tokens + at, b->targets + at, Bmb, &ctx);
            if (grads) pl_model_backward(model, &ctx);
        }
        if (grads) {
            pl_copy_to_host(what, model->grads, N);
            for (size_t i = 0; i < N; i++)
                d2 += ((double)mine[i] - what[i]) * ((double)mine[i] - what[i]),
                r2 += (double)what[i] * what[i];
        }
        if (grads ? d2 <= GR_TOL_GRADS * GR_TOL_GRADS * r2
                  : fabs(loss - sum / m) <= GR_TOL_LOSS * fabs(sum / m)) {
            *t = (struct l6_train){.wrong = L6_W_MASKS, .v = {how, grads != NULL}};
            found = 1;
        }
    }
    pl_trace_enable(was);
    free(mine);
    free(what);
    pl_model_free(model);
    return found;
}

void l6_param_err(const struct gr_reference *ref, const struct gr_param_verdict *v,
                  struct l6_param_err *e)
{
    *e = (struct l6_param_err){v->rank, v->tensor, v->nonfinite, v->rel, v->max_abs,
                               v->overall, (double)v->worst_elem, ""};
    if (v->tensor < 0) return;
    const struct pl_param_desc *d = &ref->layout.tensors[v->tensor];
    size_t used = (size_t)snprintf(e->name, sizeof e->name, "%s [", d->name);
    for (int k = 0; k < d->ndim && used < sizeof e->name; k++)
        used += (size_t)snprintf(e->name + used, sizeof e->name - used, "%s%lld", k ? ", " : "",
                                 (long long)d->shape[k]);
    if (used < sizeof e->name) snprintf(e->name + used, sizeof e->name - used, "]");
}

/* Which direction a send to `peer` goes from stage s: 0 forward (an activation), 1 back (a
 * gradient), -1 not to a neighbour. Interleaved the pipeline wraps around, and on 2 ranks
 * both neighbours are the same rank: then the tag's parity says which it is. */
static int send_direction(int s, int p, int v, int peer, int tag)
{
    int next = v > 1 ? (s + 1) % p : s + 1, prev = v > 1 ? (s + p - 1) % p : s - 1;
    if (peer == next && peer == prev) return tag >= 0 && tag % 2;
    return peer == next ? 0 : peer == prev ? 1 : -1;
}

/* The first fault of one send e (peer a stage) of stage s, given which operations ran
 * before it; L6_T_NONE when none. */
static int send_fault(const struct l6_obs *ob, const struct pl_event *e, int *seen,
                      const int *ran, struct l6_sent *f)
{
    int s = ob->stage, vm = ob->v * ob->m;
    f->tag = e->tag, f->peer = e->peer, f->bytes = e->bytes;
    f->grad = send_direction(s, ob->p, ob->v, e->peer, e->tag);
    if (f->grad < 0) return L6_T_FAR;
    if (e->tag >= 0 && e->tag % 2 != f->grad) return L6_T_PARITY;
    if (e->tag < 0 || e->tag >= 2 * vm || seen[e->tag]++) return L6_T_TAG;
    if (!ran[e->tag]) return L6_T_EARLY;
    return e->bytes != ob->bnd ? L6_T_BYTES : L6_T_NONE;
}

/* Every send of the traced step: to the next stage for an activation (even tag), the
 * previous for a gradient (odd tag), interleaved wrapping around from the last rank to the
 * first; tags PIPE_TAG_ACT/GRAD(j m + mb) for the sender's chunk j, each used once, and
 * only after that chunk's forward (backward) of mb ran, read from the marks before the
 * send; the activation's bytes; no collectives. Also the marks, and an asynchronous send
 * or receive never waited for. */
void l6_read_trace(const struct l6_grid *g, const int *chunk_first, struct l6_obs *ob)
{
    const struct pl_event *ev = pl_trace_events();
    int n = pl_trace_count(), p = ob->p, v = ob->v, m = ob->m, s = ob->stage;
    int seen[2 * L6_MAX_OPS] = {0}, ran[2 * L6_MAX_OPS] = {0}, want = 0;
    struct l6_sent *f = &ob->sent;
    ob->nops = l6_sched_read_marks(ev, n, chunk_first, v, ob->ops, L6_MAX_OPS);
    for (int j = 0; j < v; j++) want += m * ((j * p + s > 0) + (j * p + s < p * v - 1));
    for (int i = 0; i < n && !f->code; i++) {
        struct pl_event e = ev[i];
        struct l6_sched_op op;
        if (l6_sched_read_marks(&e, 1, chunk_first, v, &op, 1) == 1) {
            int at = op.chunk * m + op.mb;
            if (op.chunk >= 0 && op.mb >= 0 && op.mb < m && op.phase != 'W')
                ran[2 * at + (op.phase == 'B')] = 1;
            f->last = op;
        } else if (e.type == PL_EV_ISSUE) {
            f->code = L6_T_COLL, f->kind = (int)e.kind;
        } else if (e.type == PL_EV_SEND || e.type == PL_EV_ISEND) {
            f->nsend++;
            e.peer = l6_grid_pipe_of(g, e.peer) == ob->pipe ? l6_grid_stage_of(g, e.peer) : -1;
            f->code = send_fault(ob, &e, seen, ran, f);
        }
    }
    f->want = want;
    if (!f->code && f->nsend != want) f->code = L6_T_COUNT;
    for (int i = 0; i < n && !ob->unwaited_type; i++) {
        if (ev[i].type != PL_EV_ISEND && ev[i].type != PL_EV_IRECV) continue;
        int waited = 0;
        for (int j = i + 1; j < n && !waited; j++)
            waited = ev[j].type == PL_EV_WAIT && ev[j].handle == ev[i].handle;
        if (waited) continue;
        ob->unwaited_type = ev[i].type, ob->unwaited_tag = ev[i].tag;
        ob->unwaited_peer = l6_grid_pipe_of(g, ev[i].peer) == ob->pipe
                                ? l6_grid_stage_of(g, ev[i].peer) : -1;
    }
}

void l6_replay(enum pipe_schedule k, int m, int v, const struct pl_merged_trace *t,
               const int *chunk_first, struct l6_bubble *b)
{
    struct pl_merged_trace uni, ideal;
    l6_sched_uniform_copy(k, t, v, &uni);
    l6_sched_ideal_trace(k, t->nranks, v, m, 1.0, &ideal);
    char err[256];
    if (l6_sched_replay_bubble(&uni, NULL, NULL, &b->got, b->err, sizeof b->err) != 0)
        b->failed = 1;
    else if (l6_sched_replay_bubble(&ideal, NULL, NULL, &b->best, b->err, sizeof b->err) != 0)
        b->failed = 2;
    /* the same idle time can hide a stage that works late (AFAB and 1F1B) */
    if (!b->failed && v == 1)
        b->late = l6_sched_first_late(k, t->nranks, v, m, t, &uni, chunk_first, &b->late_stage,
                                      &b->late_op, &b->t_got, &b->t_want, err, sizeof err) > 0;
    pl_trace_merged_free(&uni);
    pl_trace_merged_free(&ideal);
}

/* What the kit itself holds for one microbatch on parts [first, last] between its forward
 * and its backward, every category together (*held: the activations and their bookkeeping),
 * and how far above that its forward and backward reach for scratch of their own
 * (*transient), measured on a scratch copy of the parts as pl_parts_acts_bytes measures the
 * activations. */
void l6_kit_bytes(const struct pl_model_config *c, int first, int last, int B, int T,
                  double *held, double *transient)
{
    int was = pl_trace_enabled();
    pl_trace_enable(0);
    struct pl_model *m = pl_model_new(c, PL_MODEL_PARAMS | PL_MODEL_GRADS);
    size_t N = (size_t)B * (size_t)T, n = pl_parts_boundary_numel(c, B, T);
    int *tok = pl_mem_alloc(N * sizeof(int), PL_MEM_WORK, PL_DEVICE, "grader kit tokens");
    float *x = pl_mem_alloc(n * sizeof(float), PL_MEM_WORK, PL_DEVICE, "grader kit input");
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1;
    struct pl_parts_acts a;
    struct pl_mem_stats before, mid, after;
    pl_mem_reset_peak();
    pl_mem_get_stats(&before);
    pl_parts_forward(m, first, last, 0, &a, &ctx, tok, tok, B, T, x);
    pl_mem_get_stats(&mid);
    pl_parts_backward(m, &a, &ctx, x);
    pl_mem_get_stats(&after);
    *held = (double)mid.current_total - (double)before.current_total;
    *transient = (double)after.peak_total - (double)before.current_total - *held;
    pl_parts_acts_free(&a);
    pl_mem_free(x);
    pl_mem_free(tok);
    pl_model_free(m);
    pl_trace_enable(was);
}
