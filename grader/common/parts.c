/* parts.c: per-rank verdicts of a driver's parts, gathered to rank 0 (parts.h). */
#include "parts.h"

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "paralab.h"
#include "report.h"

struct verdict {
    int ok;
    char msg[768];
};

static struct verdict verdicts[GR_MAX_PARTS];
static char ok_msg[GR_MAX_PARTS][768];
static const char *const *part_names;
static int cur;

void gr_parts_reset(const char *const *names, int nparts)
{
    part_names = names;
    for (int p = 0; p < nparts && p < GR_MAX_PARTS; p++) {
        verdicts[p].ok = 1;
        verdicts[p].msg[0] = 0;
    }
    cur = 0;
}

void gr_parts_set(int part)
{
    cur = part;
}

int gr_parts_ok(void)
{
    return verdicts[cur].ok;
}

int gr_parts_ok_of(int p)
{
    return verdicts[p].ok;
}

void gr_fail(const char *fmt, ...)
{
    struct verdict *v = &verdicts[cur];
    if (!v->ok) return;
    v->ok = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->msg, sizeof v->msg, fmt, ap);
    va_end(ap);
}

void gr_parts_say_ok(int p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ok_msg[p], sizeof ok_msg[p], fmt, ap);
    va_end(ap);
}

int gr_parts_gather(int p, int last)
{
    int n = pl_size();
    struct verdict *all = pl_rank() == 0 ? malloc((size_t)n * sizeof *all) : NULL;
    PL_CHECK_MPI(MPI_Gather(&verdicts[p], (int)sizeof verdicts[p], MPI_BYTE, all,
                            (int)sizeof verdicts[p], MPI_BYTE, 0, MPI_COMM_WORLD));
    int bad = -1;
    if (pl_rank() == 0) {
        for (int i = 0; i < n && bad < 0; i++)
            if (!all[i].ok) bad = i;
        if (bad >= 0) gr_say(part_names[p], "rank %d: %s", bad, all[bad].msg);
        else if (last && ok_msg[p][0]) gr_say(part_names[p], "%s", ok_msg[p]);
        free(all);
    }
    return bad < 0;
}
