/* parts.h: a driver's per-rank verdict of each graded part, for labs whose every rank judges
 * its own shard (Labs 4, 5). A failure is recorded against the current part, the first one
 * of a rank standing; gr_parts_gather collects the part's verdicts to rank 0, which reports
 * the first failing rank's reason or, on the last case, the part's ok message. */
#ifndef GR_PARTS_H
#define GR_PARTS_H

#define GR_MAX_PARTS 8

/* Starts a case: every part ok, no messages, part 0 current. names outlives the driver. */
void gr_parts_reset(const char *const *names, int nparts);
/* The part that gr_fail reports to from now on. */
void gr_parts_set(int part);
/* 1 while this rank's current part (or part p) has no failure. */
int gr_parts_ok(void);
int gr_parts_ok_of(int p);
/* Records this rank's failure of the current part (only the first one counts). */
void gr_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* What part p says when every rank passed it, on the last case. */
void gr_parts_say_ok(int p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Collective: 1 when every rank passed part p; rank 0 says why not, or the ok message. */
int gr_parts_gather(int p, int last);

#endif
