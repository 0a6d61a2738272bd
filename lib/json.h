/* json.h: the kit's one JSON writer, for what any program writes as JSON (a merged trace, the
 * grader's results.json): strings that stay valid whatever they hold, numbers that stay
 * valid whatever their value. */
#ifndef PL_JSON_H
#define PL_JSON_H

#include <stdio.h>

/* s quoted: quotes and backslashes escaped, control characters as \u00XX, valid UTF-8 kept,
 * a byte that starts no valid UTF-8 sequence (a label cut inside a character, whatever a
 * crashing program printed) written as '?'. NULL is written as "". */
void pl_json_string(FILE *f, const char *s);
/* v, or null when it is NaN or infinite (JSON has neither). */
void pl_json_number(FILE *f, double v);

#endif
