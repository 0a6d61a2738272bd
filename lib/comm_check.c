/* comm_check.c: the checks of the communication layer, apart from the transport: each call's
 * own arguments (buffers, peers, tags, in-place layouts) and, with checks on, the agreement
 * of a collective's members that they make the same call with the same count, op and root
 * (comm_check.h). A failed check every member reaches together ends the job with one
 * message; comm.c calls these before a backend moves anything. */
#include "comm_check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "mem.h"
#include "proc.h"

static struct {
    int checks;
    int tag_ub;
} cs = {1, 32767};

void pl_comm_check_startup(void)
{
    const char *chk = getenv("PL_CHECK_COUNTS");
    if (chk && !strcmp(chk, "0")) cs.checks = 0;
    int *ub = NULL, flag = 0;
    PL_CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag));
    if (flag && ub) cs.tag_ub = *ub;
}

void pl_comm_set_checks(int on) { cs.checks = on != 0; }

int pl_comm_checks(void) { return cs.checks; }

/* ---- errors every member reaches together ---- */

/* in_flight: operations may have been started (asynchronous calls); finalizing MPI over
 * them could hang, so the job is aborted instead of ended cleanly. */
static void group_error(const struct pl_comm *c, const char *msg, int in_flight)
    __attribute__((noreturn));
static void group_error(const struct pl_comm *c, const char *msg, int in_flight)
{
    if (c->size == pl_size() && !in_flight) pl_usage_error_all("%s", msg);
    if (c->rank == 0) pl_usage_error("%s", msg);
    /* Ranks outside the group (or operations in flight) keep the job from ending cleanly:
     * the group's rank 0 prints once and aborts the job; the others wait to be stopped by
     * it, and speak up themselves only if it never comes (it may reach its check later). */
    for (int i = 0; i < 60; i++) {
        struct timespec ts = {0, 500 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    pl_usage_error("%s", msg);
}

void pl_comm_group_usage_error(const struct pl_comm *c, const char *msg)
{
    group_error(c, msg, 0);
}

/* ---- validation ---- */


static int overlap(const float *a, size_t na, const float *b, size_t nb)
{
    if (!na || !nb) return 0;
    uintptr_t a0 = (uintptr_t)a, a1 = a0 + na * sizeof(float);
    uintptr_t b0 = (uintptr_t)b, b1 = b0 + nb * sizeof(float);
    return a0 < b1 && b0 < a1;
}

/* The in-place layouts each op accepts, for the message when buffers overlap otherwise. */
static const char *in_place_rule(enum pl_op_type t)
{
    switch (t) {
    case PL_OP_REDUCE_SCATTER:
        return "send == recv (result in the first recv_count elements) or "
               "recv == send + rank*recv_count";
    case PL_OP_ALL_GATHER:
        return "send == recv (this rank's block first) or send == recv + rank*send_count";
    case PL_OP_ALL_TO_ALL_V:
        return "send == recv with equal send and recv counts and displacements";
    case PL_OP_SENDRECV: return "send == recv with send_count == recv_count";
    default: return "send == recv";
    }
}

static int layout_ok(const struct pl_op *op, const struct pl_comm *c)
{
    const float *s = op->send, *r = op->recv;
    if (s == r) {
        if (op->type == PL_OP_SENDRECV) return op->count == op->recv_count;
        if (op->type == PL_OP_ALL_TO_ALL_V) {
            size_t n = (size_t)c->size;
            return !memcmp(op->send_counts, op->recv_counts, n * sizeof(size_t)) &&
                   !memcmp(op->send_displs, op->recv_displs, n * sizeof(size_t));
        }
        return 1;
    }
    size_t off = (size_t)c->rank * op->count;
    if (op->type == PL_OP_REDUCE_SCATTER && r == s + off) return 1;
    if (op->type == PL_OP_ALL_GATHER && s == r + off) return 1;
    return 0;
}

static void check_buffer(const struct pl_call *k, const char *what, const void *p, size_t need)
{
    if (!need) return;
    if (!p)
        pl_usage_error("%s on group '%s': %s is NULL but the call needs %zu elements there",
                       k->fn, k->c->name, what, need);
    if (!cs.checks) return;
    /* Only the start of a ledger allocation has a known size; other pointers pass. */
    size_t have = pl_mem_size(p) / sizeof(float);
    if (have && have < need)
        pl_usage_error("%s on group '%s': %s is an allocation of %zu floats but the call "
                       "uses %zu of them (check the count and the group size %d)",
                       k->fn, k->c->name, what, have, need, k->c->size);
}

void pl_comm_validate(const struct pl_call *k)
{
    const struct pl_op *op = &k->op;
    const struct pl_comm *c = k->c;
    if (op->type == PL_OP_ALL_TO_ALL_V) {
        if (!op->send_counts || !op->send_displs || !op->recv_counts || !op->recv_displs)
            pl_usage_error("%s on group '%s': the four count and displacement arrays must "
                           "be given (each with %d entries, one per rank)", k->fn, c->name,
                           c->size);
    }
    size_t ns, nr;
    pl_op_extents(op, c, &ns, &nr);
    if (op->type == PL_OP_BROADCAST) {
        check_buffer(k, "buf", op->recv, nr);
        return;
    }
    check_buffer(k, "send", op->send, ns);
    check_buffer(k, "recv", op->recv, nr);
    if (overlap(op->send, ns, op->recv, nr) && !layout_ok(op, c))
        pl_usage_error("%s on group '%s': send and recv overlap but are not in place (in "
                       "place means %s)", k->fn, c->name, in_place_rule(op->type));
}

void pl_comm_check_peer(const struct pl_call *k, const char *what, int peer)
{
    if (peer < 0 || peer >= k->c->size)
        pl_usage_error("%s on group '%s': %s=%d is out of range (the group has %d ranks: "
                       "%s must be in 0..%d)", k->fn, k->c->name, what, peer, k->c->size, what,
                       k->c->size - 1);
}

void pl_comm_check_tag(const struct pl_call *k)
{
    if (k->op.tag < 0 || k->op.tag > cs.tag_ub)
        pl_usage_error("%s on group '%s': tag=%d must be in 0..%d", k->fn, k->c->name,
                       k->op.tag, cs.tag_ub);
}

/* ---- agreement: with checks on, every member makes the same call ----
 * Each member's call (which collective, whether asynchronous, count, op, root) is gathered
 * on the communicator's check duplicate. A blocking call completes the gather before it
 * starts, so a mismatch stops every member with one message before anything can hang. An
 * asynchronous call only starts the gather and completes it in pl_wait/pl_test: issuing
 * stays nonblocking, so issue orders that are legal across communicators stay legal. */

enum { AG_CALL, AG_ASYNC, AG_COUNT, AG_OP, AG_ROOT, AG_NV };

/* The public function a gathered call came from: "pl_all_reduce_async". */
static void call_name(char *buf, size_t len, const long long *v)
{
    snprintf(buf, len, "pl_%s%s", pl_op_word((enum pl_op_type)v[AG_CALL]),
             v[AG_ASYNC] ? "_async" : "");
}

/* Starts the gather; the returned array holds every member's call once req completes
 * (and this rank's own after them, which the nonblocking gather reads meanwhile). */
long long *pl_comm_agree_start(const struct pl_call *k, MPI_Request *req)
{
    struct pl_comm *c = k->c;
    long long *all = malloc(((size_t)c->size + 1) * AG_NV * sizeof *all);
    if (!all) pl_fatal("out of memory");
    long long *mine = all + (size_t)c->size * AG_NV;
    mine[AG_CALL] = k->op.type;
    mine[AG_ASYNC] = k->async;
    mine[AG_COUNT] = (long long)k->op.count;
    mine[AG_OP] = k->op.red;
    mine[AG_ROOT] = k->op.root;
    PL_CHECK_MPI(MPI_Iallgather(mine, AG_NV, MPI_LONG_LONG, all, AG_NV, MPI_LONG_LONG, c->check,
                                req));
    return all;
}

/* Every member holds the same gathered calls, so all reach the same verdict: nothing, or one
 * message naming the first rank that differs from rank 0. Frees all. */
void pl_comm_agree_finish(const struct pl_comm *c, long long *all)
{
    int bad = -1, r = 0, any_async = 0;
    for (int i = 0; i < c->size; i++) any_async |= all[(size_t)i * AG_NV + AG_ASYNC] != 0;
    for (int f = 0; f < AG_NV && bad < 0; f++)
        for (r = 1; r < c->size; r++)
            if (all[(size_t)r * AG_NV + f] != all[f]) {
                bad = f;
                break;
            }
    if (bad < 0) {
        free(all);
        return;
    }
    const long long *v0 = all, *vr = all + (size_t)r * AG_NV;
    char f0[48], fr[48], who[64] = "", msg[512];
    call_name(f0, sizeof f0, v0);
    call_name(fr, sizeof fr, vr);
    if (c->size != pl_size())
        snprintf(who, sizeof who, " (world ranks %d and %d)", c->world_ranks[r],
                 c->world_ranks[0]);
    if (bad == AG_CALL || bad == AG_ASYNC) {
        snprintf(msg, sizeof msg,
                 "collectives differ on group '%s': rank %d called %s but rank 0 called %s%s "
                 "(every member must make the same collective calls, in the same order)",
                 c->name, r, fr, f0, who);
    } else {
        static const char *names[AG_NV] = {"call", "async", "count", "op", "root"};
        char va[32], vz[32];
        if (bad == AG_OP) {
            snprintf(va, sizeof va, "%s", pl_red_name((enum pl_red)vr[bad]));
            snprintf(vz, sizeof vz, "%s", pl_red_name((enum pl_red)v0[bad]));
        } else {
            snprintf(va, sizeof va, "%lld", vr[bad]);
            snprintf(vz, sizeof vz, "%lld", v0[bad]);
        }
        snprintf(msg, sizeof msg,
                 "%s on group '%s': rank %d passed %s=%s but rank 0 passed %s=%s%s (every "
                 "member must pass the same %s)", f0, c->name, r, names[bad], va, names[bad], vz,
                 who, names[bad]);
    }
    free(all);
    group_error(c, msg, any_async);
}

/* all-to-all-v: what rank j sends to rank i must be what rank i expects from rank j. */
void pl_comm_agree_pairwise(const struct pl_call *k)
{
    struct pl_comm *c = k->c;
    int n = c->size;
    unsigned long long *sc = calloc((size_t)n, sizeof *sc), *got = calloc((size_t)n, sizeof *got);
    if (!sc || !got) pl_fatal("out of memory");
    for (int j = 0; j < n; j++) sc[j] = k->op.send_counts[j];
    PL_CHECK_MPI(MPI_Alltoall(sc, 1, MPI_UNSIGNED_LONG_LONG, got, 1, MPI_UNSIGNED_LONG_LONG,
                              c->mpi));
    int first = -1;
    for (int j = 0; j < n && first < 0; j++)
        if (got[j] != k->op.recv_counts[j]) first = j;
    int lowest = first >= 0 ? c->rank : n;
    PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, c->mpi));
    if (lowest < n) {
        unsigned long long info[3] = {0, 0, 0};
        if (lowest == c->rank) {
            info[0] = (unsigned long long)first;
            info[1] = got[first];
            info[2] = k->op.recv_counts[first];
        }
        PL_CHECK_MPI(MPI_Bcast(info, 3, MPI_UNSIGNED_LONG_LONG, lowest, c->mpi));
        char msg[512];
        snprintf(msg, sizeof msg,
                 "%s on group '%s': rank %llu sends send_counts[%d]=%llu to rank %d, but rank "
                 "%d expects recv_counts[%llu]=%llu (counts must agree pairwise: send_counts[j] "
                 "on rank i equals recv_counts[i] on rank j)", k->fn, c->name, info[0], lowest,
                 info[1], lowest, lowest, info[0], info[2]);
        pl_comm_group_usage_error(c, msg);
    }
    free(sc);
    free(got);
}
