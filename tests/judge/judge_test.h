/* judge_test.h: what every tests/judge/NN-name.c program shares around its own checks:
 * finding a text in a verdict's lines, opening a record a driver wrote with --record FILE,
 * the checks once its cases are read, and main (no argument: the hand-built checks; RECORD
 * PARTS: every case of a recorded run judged on those parts). Included after
 * tests/testing.h, whose CHECK it uses. */
#ifndef JUDGE_TEST_H
#define JUDGE_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verdict.h"

/* 1 when some line of w contains text. */
static inline int said(const struct gr_why *w, const char *text)
{
    for (int k = 0; k < w->n; k++)
        if (strstr(w->line[k], text)) return 1;
    return 0;
}

/* w's first line, for a failed check's message. */
static inline const char *first(const struct gr_why *w)
{
    return w->n ? w->line[0] : "(nothing said)";
}

static inline FILE *judge_record_open(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("cannot read %s: give a file written by the driver's --record FILE\n", path);
        exit(2);
    }
    return f;
}

/* After the loop over gr_record_read: the file was read to its end (got 0; else err says
 * why not) and held at least one case (n of them). */
static inline void judge_record_close(FILE *f, const char *path, int got, const char *err, int n)
{
    fclose(f);
    CHECK(got == 0, "%s: %s", path, err);
    CHECK(n > 0, "%s holds no case", path);
    printf("%s: %d recorded cases judged\n", path, n);
}

static int judge_test_main(int argc, char **argv, void (*hand_built)(void),
                           void (*recorded)(const char *path, const char *parts))
{
    if (argc == 3) {
        recorded(argv[1], argv[2]);
    } else if (argc == 1) {
        hand_built();
    } else {
        printf("usage: %s [RECORD PARTS]\n", argv[0]);
        return 2;
    }
    printf("%s\n", failures ? "judge tests FAILED" : "judge tests passed");
    return failures ? 1 : 0;
}

#endif
