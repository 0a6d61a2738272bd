/* outside.c: buffers of the point-to-point calls that lie outside the memory ledger. A
 * stage's boundary buffers come from pl_comm_buf_alloc (device memory on the GPU build, where
 * NCCL reads and writes them), and what a step holds is judged from the ledger; a static or
 * stack array hands the network memory the ledger never sees, and on the GPU build host
 * memory NCCL cannot use. Every send and receive is wrapped (grader/06-pipeline/lab.mk) and
 * each buffer looked up in the ledger; the first one found outside it is kept for the
 * memory verdict. */
#include "outside.h"

#include <stdio.h>

#include "paralab.h"
#include "unseen.h"
#include "wrap_ctx.h"

void l6_outside_reset(void)
{
    struct l6_outside_watch *w = gr_wrap_ctx();
    if (!w) return;
    w->seen.where = 0;
    w->seen.call[0] = '\0';
    w->watching = 0;
}

void l6_outside_watch(int on)
{
    struct l6_outside_watch *w = gr_wrap_ctx();
    if (w) w->watching = on;
}

struct l6_outside l6_outside_seen(void)
{
    struct l6_outside_watch *w = gr_wrap_ctx();
    struct l6_outside none = {0, ""};
    return w ? w->seen : none;
}

/* noinline: gr_unseen_place's frame must lie below the wrapper's, and the wrapper's below
 * the caller's arrays. */
__attribute__((noinline)) static void place(const void *buf, size_t count, const char *call)
{
    struct l6_outside_watch *w = gr_wrap_ctx();
    if (!w || !w->watching || w->seen.where || !buf || !count) return;
    if (pl_mem_block_of(buf, NULL, NULL)) return;
    gr_unseen_begin(1);
    gr_unseen_place(buf, call, "buffer", -2, "");
    struct gr_unseen u = gr_unseen_end();
    w->seen.where = u.where ? u.where : L6_OUTSIDE_HEAP;
    snprintf(w->seen.call, sizeof w->seen.call, "%s", call);
}

void __real_pl_send(struct pl_comm *c, const float *b, size_t n, int peer, int tag);
void __real_pl_recv(struct pl_comm *c, float *b, size_t n, int peer, int tag);
void __real_pl_sendrecv(struct pl_comm *c, const float *s, size_t sn, int dest, float *r,
                        size_t rn, int src, int tag);
struct pl_handle *__real_pl_isend(struct pl_comm *c, const float *b, size_t n, int peer,
                                  int tag);
struct pl_handle *__real_pl_irecv(struct pl_comm *c, float *b, size_t n, int peer, int tag);

void __wrap_pl_send(struct pl_comm *c, const float *b, size_t n, int peer, int tag)
{
    place(b, n, "pl_send");
    __real_pl_send(c, b, n, peer, tag);
}

void __wrap_pl_recv(struct pl_comm *c, float *b, size_t n, int peer, int tag)
{
    place(b, n, "pl_recv");
    __real_pl_recv(c, b, n, peer, tag);
}

void __wrap_pl_sendrecv(struct pl_comm *c, const float *s, size_t sn, int dest, float *r,
                        size_t rn, int src, int tag)
{
    place(s, sn, "pl_sendrecv");
    place(r, rn, "pl_sendrecv");
    __real_pl_sendrecv(c, s, sn, dest, r, rn, src, tag);
}

struct pl_handle *__wrap_pl_isend(struct pl_comm *c, const float *b, size_t n, int peer, int tag)
{
    place(b, n, "pl_isend");
    return __real_pl_isend(c, b, n, peer, tag);
}

struct pl_handle *__wrap_pl_irecv(struct pl_comm *c, float *b, size_t n, int peer, int tag)
{
    place(b, n, "pl_irecv");
    return __real_pl_irecv(c, b, n, peer, tag);
}
