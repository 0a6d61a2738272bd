/* calls.c: the gradient all-reduces of one step, seen where they are made (the wrapped
 * pl_all_reduce and pl_all_reduce_async) and placed in the backward by the grader's own hook
 * (calls.h). */
#include "calls.h"

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "comm.h"
#include "mem.h"
#include "runtime.h"
#include "train.h"
#include "wrap_ctx.h"

#define MAX_CALLS 4096

struct call {
    size_t off, count;
    int in_grads;   /* the receive buffer (or else the send buffer) is a range of m->grads */
    int recv_in;    /* the receive buffer is, at off */
    int same;       /* in place: send == recv */
    int last;       /* made during the step's last microbatch or after it */
    size_t final;   /* gradients from this element on were final when it was issued */
    size_t before;  /* and before the hook it was issued in (== final outside a hook) */
    int part;       /* the part whose hook ran last (L2_NO_PART: none yet) */
    int where;      /* enum l2_where */
    int followed;   /* the grader's hook was in place: final, before and where hold */
    enum pl_red op;
    int async;      /* pl_all_reduce_async: the result lands when a wait completes it */
    int comm_mem;   /* send and receive lie in blocks made where comm buffers live
                     * (PL_DEVICE: pl_comm_buf_alloc), as NCCL needs on the GPU build */
};

struct l2_calls {
    struct pl_model *m;
    pl_model_hook theirs; /* the student's hook, called from ours */
    void *their_arg;
    int recording, last;
    size_t final;   /* first element of the gradients already final in this backward */
    size_t before;  /* final before the hook running now */
    int part;
    int in_hook, in_finish;
    int ncalls, overflow;
    struct call calls[MAX_CALLS];
};

static void our_hook(struct pl_model *m, int part, void *arg)
{
    struct l2_calls *w = arg;
    if (w->recording && w->last) {
        size_t start, n;
        pl_model_part_range(&m->layout, part, &start, &n);
        w->before = w->final;
        if (start < w->final) w->final = start;
        w->part = part;
    }
    w->in_hook = 1;
    if (w->theirs) w->theirs(m, part, w->their_arg);
    w->in_hook = 0;
    w->before = w->final;
}

/* The student may have set m->hook by hand: take it as theirs and put ours first. */
static void adopt_hook(struct l2_calls *w)
{
    if (!w->m || w->m->hook == our_hook) return;
    w->theirs = w->m->hook;
    w->their_arg = w->m->hook_arg;
    w->m->hook = our_hook;
    w->m->hook_arg = w;
}

void __real_pl_model_set_hook(struct pl_model *m, pl_model_hook hook, void *arg);

void __wrap_pl_model_set_hook(struct pl_model *m, pl_model_hook hook, void *arg)
{
    struct l2_calls *w = gr_wrap_ctx();
    if (!w || m != w->m) {
        __real_pl_model_set_hook(m, hook, arg);
        return;
    }
    w->theirs = hook;
    w->their_arg = arg;
    __real_pl_model_set_hook(m, our_hook, w);
}

struct l2_calls *l2_calls_watch(struct pl_model *m)
{
    struct l2_calls *w = calloc(1, sizeof *w);
    if (!w) pl_fatal("out of memory");
    w->m = m;
    __real_pl_model_set_hook(m, our_hook, w);
    gr_wrap_ctx_set(w);
    return w;
}

int l2_calls_hook_left(const struct l2_calls *w)
{
    return w->theirs != NULL || (w->m->hook != NULL && w->m->hook != our_hook);
}

void l2_calls_unwatch(struct l2_calls *w)
{
    if (gr_wrap_ctx() == w) gr_wrap_ctx_set(NULL);
    free(w);
}

/* 1 when [p, p + count floats) is a range of m->grads; its first element in *off. */
static int in_grads(const struct l2_calls *w, const float *p, size_t count, size_t *off)
{
    uintptr_t base = (uintptr_t)w->m->grads, q = (uintptr_t)p;
    size_t numel = w->m->layout.numel;
    if (q < base || (q - base) % sizeof(float) || (q - base) / sizeof(float) > numel ||
        count > numel - (q - base) / sizeof(float))
        return 0;
    *off = (q - base) / sizeof(float);
    return 1;
}

static void record(const float *send, const float *recv, size_t count, enum pl_red op,
                   int async)
{
    struct l2_calls *w = gr_wrap_ctx();
    if (!w || !w->recording || !w->m) return;
    if (w->ncalls >= MAX_CALLS) {
        w->overflow = 1;
        return;
    }
    struct call *c = &w->calls[w->ncalls++];
    size_t so = 0, ro = 0;
    int send_in = in_grads(w, send, count, &so);
    c->recv_in = in_grads(w, recv, count, &ro);
    c->in_grads = c->recv_in || send_in;
    c->same = send == recv;
    c->off = c->recv_in ? ro : so;
    c->count = count;
    c->last = w->last;
    /* a hook replaced by hand after ours was installed: the backward cannot be followed */
    c->followed = w->m->hook == our_hook || !w->last;
    c->final = c->followed ? w->final : 0;
    c->before = w->in_hook ? w->before : w->final;
    c->where = w->in_hook ? L2_IN_HOOK : w->in_finish ? L2_IN_FINISH : L2_OUT_OF_HOOK;
    c->part = w->part;
    c->op = op;
    c->async = async;
    enum pl_where ws, wr;
    c->comm_mem = pl_mem_block_of(send, &ws, NULL) && ws == PL_DEVICE &&
                  pl_mem_block_of(recv, &wr, NULL) && wr == PL_DEVICE;
}

void __real_pl_all_reduce(struct pl_comm *comm, const float *send, float *recv, size_t count,
                          enum pl_red op);
struct pl_handle *__real_pl_all_reduce_async(struct pl_comm *comm, const float *send,
                                             float *recv, size_t count, enum pl_red op);

void __wrap_pl_all_reduce(struct pl_comm *comm, const float *send, float *recv, size_t count,
                          enum pl_red op)
{
    record(send, recv, count, op, 0);
    __real_pl_all_reduce(comm, send, recv, count, op);
}

struct pl_handle *__wrap_pl_all_reduce_async(struct pl_comm *comm, const float *send,
                                             float *recv, size_t count, enum pl_red op)
{
    record(send, recv, count, op, 1);
    return __real_pl_all_reduce_async(comm, send, recv, count, op);
}

void l2_calls_step_begin(struct l2_calls *w)
{
    w->ncalls = w->overflow = 0;
    w->last = 0;
    w->recording = 1;
}

void l2_calls_microbatch(struct l2_calls *w, int last)
{
    adopt_hook(w);
    w->last = last;
    w->final = w->before = w->m ? w->m->layout.numel : 0;
    w->part = L2_NO_PART;
    w->in_finish = 0;
}

void l2_calls_backward_over(struct l2_calls *w)
{
    w->final = w->before = 0;
    w->in_finish = 1;
}

void l2_calls_step_end(struct l2_calls *w)
{
    w->recording = 0;
}

int l2_calls_summed(const struct l2_calls *w)
{
    for (int i = 0; i < w->ncalls; i++)
        if (w->calls[i].in_grads && w->calls[i].op == PL_SUM) return 1;
    return 0;
}

int l2_calls_async_avg(const struct l2_calls *w)
{
    for (int i = 0; i < w->ncalls; i++)
        if (w->calls[i].in_grads && w->calls[i].async && w->calls[i].op == PL_AVG) return 1;
    return 0;
}

/* ---- judging ---- */

int l2_calls_judge_timing(const struct l2_calls *w, int step, struct l2_early_fig *f)
{
    memset(f, 0, sizeof *f);
    for (int i = 0; i < w->ncalls && !f->found; i++) {
        const struct call *c = &w->calls[i];
        if (!c->last || !c->in_grads || c->off >= c->final) continue;
        *f = (struct l2_early_fig){.found = 1, .step = step, .off = c->off, .count = c->count,
                                   .final = c->final, .part = c->part};
    }
    int ok = !f->found, all;
    PL_CHECK_MPI(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    return all;
}

void l2_calls_judge_late(const struct l2_calls *w, int step, struct l2_late_fig *f)
{
    for (int i = 0; i < w->ncalls && !f->found; i++) {
        const struct call *c = &w->calls[i];
        if (!c->last || !c->in_grads || !c->followed || c->off < c->final) continue;
        if (c->where == L2_IN_HOOK && c->off < c->before) continue;
        *f = (struct l2_late_fig){.found = 1, .step = step, .off = c->off, .count = c->count,
                                  .where = c->where, .part = c->part};
    }
}

static int range_wanted(const size_t *off, const size_t *len, int n, size_t o, size_t c)
{
    for (int i = 0; i < n; i++)
        if (off[i] == o && len[i] == c) return i;
    return -1;
}

int l2_calls_judge_ranges(const struct l2_calls *w, int step, const size_t *off,
                          const size_t *len, int n, size_t count_floats,
                          struct l2_range_fig *f)
{
    int ok = 1, judged = !w->overflow, counted = 0;
    memset(f, 0, sizeof *f);
    int *seen = calloc((size_t)(n > 0 ? n : 1), sizeof *seen);
    for (int i = 0; judged && ok && i < w->ncalls; i++) {
        const struct call *c = &w->calls[i];
        if (!c->in_grads && c->count <= count_floats && !counted++) {
            if (c->comm_mem) continue;
            /* the count exchange from host memory: the CPU build's MPI reads it, NCCL on the
             * GPU build cannot */
            *f = (struct l2_range_fig){.rank = pl_rank(), .step = step, .staged = 3,
                                       .overlap = -1, .count = c->count};
            ok = 0;
            break;
        }
        if (!c->same || !c->in_grads) {
            *f = (struct l2_range_fig){.rank = pl_rank(), .step = step,
                                       .staged = c->in_grads ? 1 : 2,
                                       .recv_in_grads = c->recv_in, .overlap = -1,
                                       .off = c->off, .count = c->count};
            ok = 0;
            break;
        }
        int k = range_wanted(off, len, n, c->off, c->count);
        if (k >= 0 && !seen[k]++) continue;
        *f = (struct l2_range_fig){.rank = pl_rank(), .step = step, .repeated = k >= 0,
                                   .overlap = -1, .off = c->off, .count = c->count};
        for (int j = 0; j < n && k < 0 && f->overlap < 0; j++)
            if (off[j] < c->off + c->count && c->off < off[j] + len[j])
                f->overlap = j, f->ooff = off[j], f->olen = len[j];
        ok = 0;
    }
    free(seen);
    /* the lowest failing rank's figures reach rank 0 */
    int np = pl_size(), me = pl_rank(), mine = ok ? np : me, first;
    PL_CHECK_MPI(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (first == np) return 1;
    if (first != 0 && me == first)
        PL_CHECK_MPI(MPI_Send(f, (int)sizeof *f, MPI_BYTE, 0, 0x0dd3, MPI_COMM_WORLD));
    if (first != 0 && me == 0)
        PL_CHECK_MPI(MPI_Recv(f, (int)sizeof *f, MPI_BYTE, first, 0x0dd3, MPI_COMM_WORLD,
                              MPI_STATUS_IGNORE));
    return 0;
}
