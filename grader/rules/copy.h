/* copy.h: code copied from a lab's oracle, judged from the sources before anything runs.
 * A lab whose oracle is kit source the student can read (Lab 7's router, lib/model_moe.c;
 * Lab 8's planner, lib/plan*.c) refuses a call to it by its symbol rule (symbols.h); this rule
 * refuses the same code pasted in under other names. Both texts are cut into C tokens with
 * every identifier, number and literal made one token each (so renaming and reformatting
 * change nothing), every run of GR_COPY_K tokens is hashed, and a winnowed sample of those
 * hashes (the smallest of every GR_COPY_W in a row) is the text's fingerprint. A run the
 * oracle's files hold at two places or more (a list of frees, a column of allocations) is the
 * language's pattern, not the oracle's work: no fingerprint holds it, and a function is judged
 * alone only when it holds as many other runs as GR_COPY_MIN_TOKENS tokens make. A function of
 * the code under test that is long enough to matter and whose fingerprint is mostly the
 * oracle's, or a file that is, breaks the rule. Code written from the handout shares short
 * runs with the oracle (a grid's set-up, a loop over the axes) but not whole functions: the
 * labs' own solutions' files share a tenth or less (tests/test_copy.c prints it). */
#ifndef GR_COPY_H
#define GR_COPY_H

#include <stddef.h>

#define GR_COPY_K 20          /* tokens per hashed run */
#define GR_COPY_W 6           /* runs per winnowing window */
#define GR_COPY_MIN_TOKENS 150 /* shorter (a grid's set-up, say) is not judged alone */
#define GR_COPY_FUNC_SHARE 0.6 /* a function whose fingerprint is this much the oracle's */
#define GR_COPY_FILE_SHARE 0.4 /* a whole file whose fingerprint is this much the oracle's */

/* The share of text's fingerprint found in oracle's (0 when text has no run of K tokens). */
double gr_copy_share(const char *text, const char *oracle);

/* What the rule sees of one source against the oracle's files (space-separated paths): the
 * share of the whole file, and that of the function judged alone that shares the most (0
 * when none is long enough), named in func_name. Returns 0, or -1 when a file cannot be
 * read. For the kit's own tests: how far a solution stays from the bounds. */
int gr_copy_measure(const char *source, const char *oracle_sources, double *file, double *func,
                    char *func_name, size_t len);

/* Judges the sources listed in sources_file (one path a line, written by the build beside
 * the driver) against the oracle's files (space-separated paths). Returns 0 when no source
 * is mostly the oracle's; else 1, with the reason in why: the function (or file), its
 * share and the oracle file it matches most, and rule, the sentence that says why the lab
 * refuses it. A missing or unreadable file is reported the same way (the build writes one
 * for every driver it links). */
int gr_copy_break_rule(const char *sources_file, const char *oracle_sources, const char *rule,
                       char *why, size_t len);

#endif
