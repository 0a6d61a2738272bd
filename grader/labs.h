/* labs.h: the labs the grader knows, in order. A new lab adds its test plan header and one
 * line to the table. */
#ifndef GRADE_LABS_H
#define GRADE_LABS_H

#include "grade.h"
#include "01-collectives/tests.h"
#include "02-ddp/tests.h"
#include "03-zero/tests.h"
#include "06-pipeline/tests.h"

static const struct {
    const char *dir; /* labs/<dir>, solutions/<dir>, grader/<dir> */
    void (*plan)(const struct gr_plan_opts *o);
    int needs_solution; /* the driver compiles solutions/<dir> in (grader/<dir>/reference.c) */
} GR_LABS[] = {
    {"01-collectives", lab01_plan, 0},
    {"02-ddp", lab02_plan, 1},
    {"03-zero", lab03_plan, 1},
    {"06-pipeline", lab06_plan, 0},
};

#endif
