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

/* Section 3. The memory of one GPU of the first pipeline stage, by category: its
 * parameters, gradients and optimizer state (section 3.1: what the stage holds, what
 * mixed-precision Adam keeps per parameter, what the configuration's ZeRO stage divides over
 * which replicas) and its activations (section 3.2: what each layer keeps for its backward
 * under the configuration's recomputation, for every microbatch the stage holds at once, and
 * the loss's logits). Fill every field of *out, the three factors of the activations
 * (layers_stage, in_flight, activ_layer) included, and return the total in bytes. */
double placement_memory(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                        const struct pl_plan_config *cfg, struct pl_plan_memory *out)
{
    (void)m, (void)c, (void)cfg;
    memset(out, 0, sizeof *out);
    lab_todo("placement_memory", "3");
    return 0;
}

/* Section 4. The time of one optimizer step on the critical path, the first stage: its
 * compute (4.1), each axis' communication on that axis' link class (4.2), the pipeline's
 * bubble and the data-parallel time no compute hides (4.3), and MFU, HFU and TFLOP/s from
 * the step (4.4). Fill *out (step, compute, bubble, exposed[], bytes[], link[], mfu, hfu,
 * tflops) and return the step in seconds. */
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
