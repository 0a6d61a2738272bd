/* placement.c: Lab 8, placement: your memory estimate, time estimate and search.
 *
 * Read docs/labs/08-placement.md first (sections 2 to 5 explain each function below), then
 * replace each lab_todo() call with your code. Grade your work with
 *     make grade LAB=08                    every test of this lab
 *     make grade LAB=08 TEST=memory        the tests whose name contains "memory"
 * and compare any configuration with the kit's planner by hand:
 *     make plan ARGS="--model llama3-70b --cluster dgx-h100 --nodes 8 --explain"
 *
 * What you may call is listed in placement.h. The kit's own estimates (pl_plan_memory,
 * pl_plan_time, pl_plan_search and friends) are the grader's oracle and off limits here. */
#include "placement.h"

#include <string.h>

#include "todo.h"

/* Section 3. Per GPU of the first stage:
 *   - parameters: the stage's ceil(L/p) layers' share of the dense parameters, plus the
 *     input embedding (on one stage also the head), divided by tp; expert parameters divided
 *     by tp x ep (pl_plan_params gives the counts);
 *   - 2 bytes of parameters, 2 of gradients, 12 of optimizer state per parameter; ZeRO
 *     stage z divides the first z of (optimizer, gradients, parameters) by the
 *     data-parallel replicas: cp x ep x dp for dense parameters, cp x dp for experts;
 *   - activations: the layer formula x layers on the stage x microbatches in flight, plus
 *     one layer in full under full recomputation, plus the fp32 logits of one microbatch.
 * Fill every field of *out and return the total. */
double placement_memory(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                        const struct pl_plan_config *cfg, struct pl_plan_memory *out)
{
    (void)m, (void)c, (void)cfg;
    memset(out, 0, sizeof *out);
    lab_todo("placement_memory", "3");
    return 0;
}

/* Section 4. One microbatch slot on the first stage = its compute (FLOPs at peak x
 * efficiency) + its tp, cp, ep and pp communication (pl_coll_time on the axis' link class);
 * the step = m slots + the bubble ((p-1)/v slots) + the data-parallel time no compute
 * hides. Fill *out (step, compute, bubble, exposed[], bytes[], link[], mfu, hfu, tflops). */
double placement_step_time(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                           const struct pl_plan_config *cfg, struct pl_plan_time *out)
{
    (void)m, (void)c, (void)cfg;
    memset(out, 0, sizeof *out);
    lab_todo("placement_step_time", "4");
    return 0;
}

/* Section 6: your answers (0: unanswered). */
const struct placement_answers placement_answers = {0};

/* Section 5. The fastest configuration, by your placement_step_time, of the space section 5
 * defines, among those that obey every rule of section 2 (pl_rule_* in plan_rules.h, with
 * your own memory estimate), in the default rank order (pl_plan_config_default). */
int placement_search(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                     struct pl_plan_config *best)
{
    (void)m, (void)c;
    pl_plan_config_default(best);
    lab_todo("placement_search", "5");
    return -1;
}
