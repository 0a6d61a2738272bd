/* async.c: Lab 10's asynchronous save (section 6). The snapshot is taken in the training
 * process itself, with the recorder of fsrec.c armed there: any ckpt_fs call inside
 * ft_snapshot_take is the disk in the stall. Then the state trains one more step, so that a
 * snapshot that points into the state instead of holding a copy now reads the newer state,
 * and only then is the snapshot written, in a process of its own (l10_save_all, killed where
 * the case says), as a checkpoint thread would write it beside the next step. The manifest
 * is committed for the snapshot's step from a view of the state as it was then. What the
 * snapshot holds is read from the C library's allocator (mallinfo2) around the take. */
#include <malloc.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "lab10.h"
#include "todo.h"
#include "wrap_ctx.h"

/* What the C library's allocator holds now, mmapped blocks included. */
static double heap_bytes(void)
{
    struct mallinfo2 m = mallinfo2();
    return (double)m.uordblks + (double)m.hblkhd;
}

int l10_save_async(struct l10_state *st, struct pl_shard_state *s, int n,
                   const struct l10_kill *kill, struct l10_obs *o)
{
    struct ft_snapshot *snap = NULL;
    struct pl_shard_state then;
    memset(&then, 0, sizeof then);
    int bad = 0;
    if (s) {
        then = *s; /* the step, RNG state and data position the manifest names */
        o->count = s->count;
        memset(st->rec, 0, sizeof *st->rec);
        st->rec->armed = 1;
        gr_wrap_ctx_set(st->rec);
        double before = heap_bytes();
        snap = ft_snapshot_take(s);
        o->snap_bytes = heap_bytes() - before;
        o->snap_left = before;
        st->rec->armed = 0;
        gr_wrap_ctx_set(NULL);
        o->stall_calls = st->rec->nev;
        if (st->rec->nev) o->stall_call = st->rec->ev[0].call;
        o->snap_null = !snap && !pl_todo_what();
        bad = !snap;
        memset(st->rec, 0, sizeof *st->rec);
    }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (bad) {
        ft_snapshot_free(snap);
        return -1;
    }
    if (s) pl_shard_step(s); /* training goes on before the snapshot is written */
    st->snap = snap;
    int rc = l10_save_all(st, s ? &then : NULL, n, kill, o);
    st->snap = NULL;
    if (s) { /* written under the newer step's name: the snapshot read the live state */
        char newer[400], d[32];
        struct stat sb;
        snprintf(d, sizeof d, FT_STEP_DIR, (long long)(then.step + 1));
        snprintf(newer, sizeof newer, "%.300s/%s", st->root, d);
        o->async_newer = stat(newer, &sb) == 0;
    }
    ft_snapshot_free(snap);
    if (s) o->snap_left = heap_bytes() - o->snap_left; /* what the free did not give back */
    return rc;
}
