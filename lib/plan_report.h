/* plan_report.h: the planner's two longer outputs: the derivation of a configuration's
 * figures in words and numbers (plan --explain), and a picture of the configuration space
 * (plan --svg: modelled MFU and memory per set of degrees). */
#ifndef PL_PLAN_REPORT_H
#define PL_PLAN_REPORT_H

#include <stdio.h>

#include "plan.h"

void pl_plan_explain(FILE *f, const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                     const struct pl_plan_choice *ch);
/* Writes path whole or not at all (a temporary file renamed); 0, or -1 with a message on
 * stderr. */
int pl_plan_write_svg(const char *path, const struct pl_plan_model *m,
                      const struct pl_plan_cluster *c, const struct pl_plan_result *res);
/* The same picture of res's points (whatever figures they hold: the kit's, or a lab's own
 * estimates of the same configurations), with the bar of chosen's degrees in orange (the
 * fastest when chosen is NULL) and caption after the model and cluster in the title. */
int pl_plan_write_svg_marked(const char *path, const struct pl_plan_model *m,
                             const struct pl_plan_cluster *c, const struct pl_plan_result *res,
                             const struct pl_plan_config *chosen, const char *caption);

#endif
