/* placement.h: Lab 8, placement. The fixed surface between your placement.c and the grader:
 * do not change this file. The handout is docs/labs/08-placement.md.
 *
 * Given a model that does not fit on one GPU and a cluster, you estimate what one parallel
 * configuration costs (memory per GPU, time per step) and search every configuration for the
 * fastest that obeys the placement rules. The types (model, cluster, configuration, the
 * memory and time breakdowns) are lib/plan.h's; the rules are lib/plan_rules.h's, the same
 * functions the tensor-parallel, pipeline and MoE labs check placement with.
 *
 * What you may call: pl_plan_params, pl_plan_flops_per_token, pl_plan_config_default,
 * pl_plan_axis_name (plan.h); every pl_rule_* function (plan_rules.h); pl_grid_init and
 * the other grid.h functions; pl_coll_time and pl_ring_bytes_sent (ledger.h). The kit's own
 * planner (pl_plan_memory, pl_plan_time, pl_plan_activation_layer, pl_plan_check,
 * pl_plan_search, pl_plan_min_nodes, and the rest of its estimates) is the grader's oracle:
 * code that calls it, or pastes its source (lib/plan.c, lib/plan_search.c) in under other
 * names, is refused before anything runs, every test at 0. */
#ifndef LAB_PLACEMENT_H
#define LAB_PLACEMENT_H

#include "ledger.h"
#include "plan.h"
#include "plan_rules.h"

/* Memory per GPU of the first pipeline stage for cfg, by category, into out (every field);
 * returns out->total in bytes. Handout section 3; cfg's switches fp32, no_dropout and
 * vocab_whole (0 unless a configuration sets them): section 3.3. */
double placement_memory(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                        const struct pl_plan_config *cfg, struct pl_plan_memory *out);

/* Modelled time of one optimizer step for cfg, into out (step, compute, bubble, exposed[],
 * bytes[], link[], mfu, hfu, tflops); returns out->step in seconds. Handout section 4:
 * link[] is each axis' own class (4.2), which need not be the link the data-parallel
 * gradients are timed on (4.3); MFU counts the model's batch (4.4). */
double placement_step_time(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                           const struct pl_plan_config *cfg, struct pl_plan_time *out);

/* The fastest configuration of all the cluster's GPUs that obeys every placement rule
 * (handout section 2), by your two estimates, into best; 0, or -1 when none fits. Handout
 * section 5. */
int placement_search(const struct pl_plan_model *m, const struct pl_plan_cluster *c,
                     struct pl_plan_config *best);

/* Your answers to the handout's questions (section 6), as numbers; 0 means unanswered.
 * Work them out with your functions or with `make plan ARGS=...`. */
struct placement_answers {
    /* Q1: Llama 3 70B at 4K context, 4M (4194304) tokens per step, on DGX H100 nodes: the
     * fewest nodes that fit, and the fastest configuration on that many. */
    int q1_nodes, q1_tp, q1_pp, q1_dp, q1_zero;
    /* Q2: with p = 16 stages and v = 7 chunks per GPU (Llama 3 405B's plan on 16K GPUs),
     * the share of the step (percent) the pipeline bubble takes at the fewest microbatches
     * that section 2's rule admits and that keep it at or under 5%, counted in slots: idle
     * slots over all slots, no communication or data-parallel time. */
    double q2_bubble_percent;
    /* Q3: the largest vocabulary (tokens) for which Llama 3 405B's first pipeline stage, not
     * its last, still paces 16 stages (section 4.1's split of the layers, no recomputation),
     * the model otherwise as it is. */
    double q3_vocab;
};
extern const struct placement_answers placement_answers;

#endif
