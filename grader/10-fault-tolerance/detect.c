/* detect.c: Lab 10's failure detection (section 7). A model job of L10_DET_RANKS ranks, one
 * step a second, each rank's step starting a little after the next one's, a heartbeat at
 * each step's start and the step's last 30% blocked in its collective; the scenarios stop
 * it in the ways a supervisor must tell apart (a rank killed, a rank hung in its compute
 * while the others wait in the collective it never joins, a deadlock of the calls
 * themselves with one rank a step behind, a rank that leaves early with code 0, two
 * failures one after the other, a normal end, a straggler within the bound). The grader
 * samples the supervisor's clock every L10_DET_DT seconds, builds what a supervisor would
 * see at that moment from the scenario alone, and asks ft_detect; the verdict it wants
 * comes from the scenario's own definition: running before the fault, the fault once it is
 * visible (a death at once, a hang once the stopped rank's heartbeat is older than the
 * bound), the same verdict at every later sample. Pure: no MPI, no files. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "lab10.h"

#define L10_DET_STEP_S 1.0
#define L10_DET_BOUND_S 3.0
#define L10_DET_DT 0.1
#define L10_DET_END_S 12.0
#define L10_DET_CALL 0.7 /* a step's share spent before its collective */

enum det_kind { DET_NONE, DET_KILLED, DET_HUNG, DET_DEADLOCK, DET_EXIT0, DET_TWO, DET_FINISH,
                DET_TWIN, DET_EXIT0_KILL, DET_FINISH_CODE };

struct det_scenario {
    const char *what;
    int kind;
    int rank, step;  /* the rank at fault and the step it stops in */
    int straggler;   /* a rank whose every step starts 1.5 s late (-1 none) */
};

static const struct det_scenario L10_DET[L10_DET_SCENARIOS] = {
    {"rank 2 killed (SIGKILL) in step 5", DET_KILLED, 2, 5, -1},
    {"rank 3 hung in step 5's compute; the others wait in its collective", DET_HUNG, 3, 5, -1},
    {"rank 1 blocked in a call of step 4, the others in step 5's collective", DET_DEADLOCK, 1, 4,
     -1},
    {"rank 0 returned with exit code 0 in step 5 while the others run", DET_EXIT0, 0, 5, -1},
    {"rank 3 killed in step 4, then rank 1 exited with code 2 in step 5", DET_TWO, 3, 4, -1},
    {"every rank ended with code 0 after step 8", DET_FINISH, -1, 8, -1},
    {"ranks 1 and 2 killed together in step 5", DET_TWIN, 1, 5, -1},
    {"rank 0 returned with code 0 in step 4, then rank 2 was killed in step 5", DET_EXIT0_KILL,
     0, 4, -1},
    {"no failure; rank 1 starts every step 1.5 s after the others", DET_NONE, -1, -1, 1},
    /* an outside review took a non-zero exit with no signal, at a normal end, as finished */
    {"every rank ended after step 8, rank 2 with exit code 1", DET_FINISH_CODE, 2, 8, -1},
};

/* When rank r starts step k: ranks are skewed by 50 ms, the highest rank first. */
static double start_of(const struct det_scenario *sc, int r, int64_t k)
{
    double late = r == sc->straggler ? 1.5 : 0;
    return (double)k * L10_DET_STEP_S + 0.05 * (L10_DET_RANKS - 1 - r) + late;
}

/* What the supervisor sees of rank r at time t. */
static struct ft_rank_seen seen_at(const struct det_scenario *sc, int r, double t)
{
    struct ft_rank_seen v = {-1, 0, 0, 0, 0, 0};
    int64_t k = (int64_t)floor((t - start_of(sc, r, 0)) / L10_DET_STEP_S);
    int64_t stop = -1; /* the step this rank stays in, -1: it goes on */
    double fault_t = start_of(sc, sc->rank < 0 ? 0 : sc->rank, sc->step) + 0.5;
    int blocked = 0, ends = 0, code = 0, sig = 0;
    switch (sc->kind) {
    case DET_KILLED:
    case DET_HUNG:
    case DET_EXIT0:
        stop = sc->step;
        if (r == sc->rank && t >= fault_t) {
            ends = sc->kind != DET_HUNG;
            sig = sc->kind == DET_KILLED ? SIGKILL : 0;
        }
        blocked = r != sc->rank; /* the others wait in step 5's collective */
        break;
    case DET_DEADLOCK:
        stop = r == sc->rank ? sc->step : sc->step + 1;
        blocked = 1;
        break;
    case DET_TWO:
        stop = r == sc->rank ? sc->step : sc->step + 1;
        if (r == sc->rank && t >= fault_t) ends = 1, sig = SIGKILL;
        if (r == 1 && t >= start_of(sc, 1, sc->step + 1) + 0.5) ends = 1, code = 2;
        blocked = r != sc->rank && r != 1;
        break;
    case DET_TWIN: /* two ranks of one node lost at one moment */
        stop = sc->step;
        if ((r == sc->rank || r == sc->rank + 1) && t >= fault_t) ends = 1, sig = SIGKILL;
        blocked = r != sc->rank && r != sc->rank + 1;
        break;
    case DET_EXIT0_KILL:
        stop = r == sc->rank ? sc->step : sc->step + 1;
        if (r == sc->rank && t >= fault_t) ends = 1;
        if (r == 2 && t >= start_of(sc, 2, sc->step + 1) + 0.5) ends = 1, sig = SIGKILL;
        blocked = r != sc->rank && r != 2;
        break;
    case DET_FINISH:
    case DET_FINISH_CODE:
        stop = sc->step;
        ends = t >= start_of(sc, 0, sc->step) + L10_DET_STEP_S; /* together, as a job ends */
        code = sc->kind == DET_FINISH_CODE && r == sc->rank && ends;
        break;
    default: break;
    }
    if (k < 0) return v;
    if (stop >= 0 && k > stop) k = stop;
    v.step = k;
    v.beat_s = start_of(sc, r, k);
    double into = t - v.beat_s;
    v.in_call = into > L10_DET_CALL * L10_DET_STEP_S &&
                (stop < 0 || k < stop || blocked || into < L10_DET_STEP_S);
    if (sc->kind == DET_HUNG && r == sc->rank && k == stop) v.in_call = 0;
    v.ended = ends, v.exit_code = code, v.signal = sig;
    if (ends) v.in_call = 0;
    return v;
}

/* The verdict the scenario defines at time t (seen: what the supervisor sees then). */
static struct ft_verdict wanted(const struct det_scenario *sc, const struct ft_rank_seen *seen,
                                double t)
{
    struct ft_verdict run = {FT_RUNNING, -1, -1};
    if (sc->kind == DET_NONE) return run;
    if (sc->kind == DET_FINISH) {
        for (int r = 0; r < L10_DET_RANKS; r++)
            if (!seen[r].ended) return run;
        return (struct ft_verdict){FT_FINISHED, -1, -1};
    }
    const struct ft_rank_seen *f = &seen[sc->rank];
    if (sc->kind == DET_HUNG || sc->kind == DET_DEADLOCK)
        return t - f->beat_s > L10_DET_BOUND_S
                   ? (struct ft_verdict){FT_RANK_HUNG, sc->rank, f->step}
                   : run;
    return f->ended ? (struct ft_verdict){FT_RANK_DIED, sc->rank, f->step} : run;
}

void l10_detect_observe(struct l10_obs *o)
{
    o->active = 1;
    o->det_bound = L10_DET_BOUND_S;
    for (int k = 0; k < L10_DET_SCENARIOS; k++) {
        const struct det_scenario *sc = &L10_DET[k];
        for (double t = 0.03; t < L10_DET_END_S; t += L10_DET_DT) {
            struct ft_rank_seen seen[L10_DET_RANKS];
            for (int r = 0; r < L10_DET_RANKS; r++) seen[r] = seen_at(sc, r, t);
            struct ft_verdict want = wanted(sc, seen, t);
            struct ft_verdict got = ft_detect(seen, L10_DET_RANKS, t, L10_DET_BOUND_S);
            if (got.failure == want.failure && got.rank == want.rank &&
                (want.rank < 0 || got.step == want.step))
                continue;
            /* every rank ended in one sample, one with code 1: ft.h's "the one among them
             * whose last step is lowest, ties to the lowest rank" reads both ways, among the
             * ranks that ended otherwise (rank 2) or among every ended rank (rank 0, as the
             * reference and five right reviews read it); FT_FINISHED is wrong either way */
            if (sc->kind == DET_FINISH_CODE && want.failure == FT_RANK_DIED &&
                got.failure == FT_RANK_DIED && got.rank == 0 && got.step == want.step)
                continue;
            o->det_bad = 1;
            o->det_case = k;
            snprintf(o->det_what, sizeof o->det_what, "%s", sc->what);
            o->det_t = t;
            o->det_got = got;
            o->det_want = want;
            memcpy(o->det_seen, seen, sizeof seen);
            return;
        }
    }
}
