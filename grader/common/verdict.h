/* verdict.h: what a judge of the lab harness's new shape (harness.h) is given and what it
 * says, with no MPI and no report channel, so that the same judge runs on rank 0 of a check
 * run and in a plain test program (tests/judge/NN-name.c).
 *
 * A judge is handed every rank's observation of one case (struct gr_obs: rank r's bytes at
 * gr_obs_rank(o, r)) and writes its reasons into a struct gr_why, one line per gr_why_say;
 * the harness then says each line for the part (gr_say) and applies the fraction
 * (gr_partial). A check run given --record FILE writes each case's gathered observations
 * to FILE (gr_record_write), and a test reads them back (gr_record_read). */
#ifndef GR_VERDICT_H
#define GR_VERDICT_H

#include <stddef.h>
#include <stdio.h>

/* Lines of one verdict: Lab 8's step-time judge names up to 21 figures of a case, one line
 * each, then the case and why a drawn one matters (Lab 3's memory report says 7 before its
 * reason's two). */
#define GR_WHY_LINES 24
#define GR_WHY_LEN 2048

/* The reasons of one part's verdict on one case. */
struct gr_why {
    int n;                               /* lines said */
    char line[GR_WHY_LINES][GR_WHY_LEN]; /* in order; a line too long is cut */
    double fraction;                     /* of the part's points when it passes (1: all) */
};

/* Every rank's observation of one case, gathered to rank 0 (or read from a record). */
struct gr_obs {
    int nranks;
    size_t size;               /* bytes of one rank's observation */
    const unsigned char *data; /* rank r's at data + r * size */
};

/* Empties w: no lines, fraction 1. */
void gr_why_init(struct gr_why *w);
/* Appends one line (lines past GR_WHY_LINES are dropped). */
void gr_why_say(struct gr_why *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A part that passes earns this fraction of its points (the smallest said counts). */
void gr_why_partial(struct gr_why *w, double fraction);
/* x with the fewest significant digits that still show it on its side of limit, into buf
 * ("1.2e-05" beside a limit of 1e-05, never "1e-05"). Pure: judges and report.h's
 * gr_fmt_beyond share it. */
const char *gr_fmt_beyond_into(double x, double limit, char *buf, size_t len);
/* Rank r's observation. */
const void *gr_obs_rank(const struct gr_obs *o, int r);

/* One tensor against its oracle, in figures: a rank records it (tensors.h's gr_cmp_of), a
 * judge words it (gr_cmp_words). */
struct gr_cmp {
    int finite;          /* 0: element `at` is not finite */
    double at, got, ref; /* the worst element (the first one not finite) and its two values */
    double rel, tol, max_abs;
};

/* "WHAT: relative L2 error E (tolerance T; max abs M at element I: expected R, got G)", or
 * "WHAT: element I is G (expected R)" when not finite, then ": HINT" unless hint is empty. */
void gr_cmp_words(const struct gr_cmp *m, const char *what, const char *hint, char *buf,
                  size_t len);

/* ---- records (--record FILE) ---- */

#define GR_RECORD_MAGIC "GROBS01"

/* One case's gathered observations as a check run wrote them. */
struct gr_record {
    char lab[40];   /* "04-tensor-parallel" */
    char op[32];    /* the --op */
    int icase;      /* the case's index */
    int ncases;     /* cases of the run */
    struct gr_obs obs; /* data malloc'd by gr_record_read */
};

/* Appends one case to f; 0, or -1 when it could not be written. */
int gr_record_write(FILE *f, const char *lab, const char *op, int icase, int ncases,
                    const struct gr_obs *o);
/* Reads the next case from f into r: 1, 0 at the end, -1 (err says why) on a file that is not
 * a record or is cut short. */
int gr_record_read(FILE *f, struct gr_record *r, char *err, size_t len);
void gr_record_free(struct gr_record *r);

#endif
