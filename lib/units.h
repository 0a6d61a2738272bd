/* units.h: how the kit prints sizes, one way everywhere, so that a figure in a grader
 * message, a ledger report and a handout reads the same: bytes in powers of 1000 ("204.5
 * kB", as the ledger's volumes are compared with formulas), counts with their digits grouped
 * by three ("51 136", as the handouts print them). */
#ifndef PL_UNITS_H
#define PL_UNITS_H

#include <stddef.h>

/* "0 B", "812 B", "5.1 kB", "59.6 MB", "1.9 GB": one decimal from a kilobyte on. */
const char *pl_format_bytes(double bytes, char *buf, size_t len);
/* "58 156" */
const char *pl_format_count(size_t count, char *buf, size_t len);

#endif
