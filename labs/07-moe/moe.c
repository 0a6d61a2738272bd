/* moe.c: Lab 7, your mixture-of-experts layer with expert parallelism.
 *
 * Read docs/labs/07-moe.md first (sections 2 to 7 explain each function below), then replace
 * each lab_todo() call with your code. Grade your work with
 *     make grade LAB=07                    every test of this lab
 *     make grade LAB=07 TEST=router        the tests whose name contains "router"
 *     make grade LAB=07 NP=2               only 2 ranks
 * and see the all-to-all volume and balance with `make bench LAB=07` (handout section 8).
 *
 * What you may call: the model's views (lib/model.h: m->cfg, m->blocks[l] and m->blocks_g[l]
 * for the router and the stacked experts, m->layout.tensors, m->grads, pl_moe_routing_new and
 * pl_moe_routing_free -- but not pl_moe_route or pl_moe_capacity: writing them is the lab),
 * the ops of lib/ops.h (pl_matmul_forward/backward, pl_softmax_forward/backward,
 * pl_gelu_forward/backward, pl_gather_rows, pl_scatter_add_rows, pl_row_dot, pl_zero,
 * pl_to_device, pl_to_host), and the collectives of lib/comm.h (pl_all_to_all,
 * pl_all_to_all_v, pl_all_reduce, pl_comm_buf_alloc), and the rank grid of lib/grid.h for
 * the groups. The grader reads the bytes and calls
 * you make from the traffic ledger. */
#include "moe.h"

#include <string.h>

#include "check.h"
#include "mem.h"
#include "ops.h"

/* ---- section 2: the router ---- */

/* ceil(cf * N * k / E), computed in double from the float factor; at least 1, at most N
 * (an expert gets at most one choice per token). Section 2 says why each clamp is there. */
int moe_capacity(int N, int E, int k, float cf)
{
    lab_todo("moe_capacity", "2");
    (void)N, (void)E, (void)k, (void)cf;
    return 1;
}

/* For each token t: its top k experts by probability (ties to the lower index) into
 * r->expert[t*k + j] and their probabilities into r->gate[t*k + j]. Count every choice in
 * f and sum the probabilities in P. Then fill the slots CHOICE BY CHOICE: for j = 0..k-1,
 * for t = 0..N-1, a choice whose expert has count < cap takes slot count++ (r->slot, r->rows,
 * r->gates at e*cap + slot), otherwise slot -1 and dropped++. Finally f_e /= N*k,
 * P_e /= N, aux = aux_coef * E * sum_e f_e P_e. */
void moe_route(struct pl_moe_routing *r, const float *probs, float aux_coef)
{
    lab_todo("moe_route", "2");
    (void)r, (void)probs, (void)aux_coef;
}

/* ---- section 3: the permutation ---- */

/* A counting sort: the histogram is r->count, start its exclusive prefix sum; then every
 * kept choice i = t*k + j goes to position start[expert] + slot (inv[i]), perm of that
 * position is t; a dropped choice has inv[i] = -1. */
void moe_permute(const struct pl_moe_routing *r, int *start, int *perm, int *inv)
{
    lab_todo("moe_permute", "3");
    (void)r, (void)start, (void)perm, (void)inv;
}

/* ---- section 4: the state ---- */

/* Your state. A suggestion that the solution's shape fits: the comm, the model, the sizes,
 * and per layer what its backward needs (the routing, the router probabilities, the
 * permutation, the all-to-all counts and displacements both ways, the received rows in
 * expert order and the experts' activations). Allocate with pl_mem_alloc (zero-filled). */
struct moe {
    struct pl_comm *world, *ep, *edp; /* all ranks; this EP group; this expert's copies */
    struct pl_model *m;
    int N;
};

/* Build the groups with lib/grid.h: pl_grid_init_or_die(&g, "ep-dp", "ep=4", world size),
 * then pl_grid_comm along "ep" (your EP group) and along "dp" (the copies of your experts in
 * the other EP groups). Then the sizes and per-layer buffers of section 4. */
struct moe *moe_new(struct pl_comm *world, struct pl_model *m, int N, int ep)
{
    lab_todo("moe_new", "4");
    (void)world, (void)m, (void)N, (void)ep;
    return NULL;
}

struct pl_comm *moe_ep_comm(const struct moe *s)
{
    return s ? s->ep : NULL;
}

void moe_free(struct moe *s)
{
    pl_mem_free(s);
}

const struct pl_moe_routing *moe_last_routing(const struct moe *s, int layer)
{
    (void)s, (void)layer;
    return NULL;
}

/* ---- sections 4 and 5: the forward ---- */

/* 1. router: logits = ln @ w_router^T, softmax, copy to the host, moe_route, moe_permute;
 * 2. counts: pl_all_to_all of the per-expert counts, E/ep floats to each rank, so every
 *    rank knows how many rows it receives from whom, for each of its experts;
 * 3. dispatch: gather ln's rows in permutation order (they are then grouped by destination
 *    rank) and pl_all_to_all_v them;
 * 4. the local experts on the rows they received (grouped by expert first);
 * 5. combine: pl_all_to_all_v the outputs back, and branch[perm[p]] += gate[p] * y[p]. */
double moe_forward(struct moe *s, int layer, const float *ln, float *branch)
{
    lab_todo("moe_forward", "5");
    (void)s, (void)layer, (void)ln, (void)branch;
    return 0.0;
}

/* ---- section 6: the backward ---- */

/* The forward in reverse: d gate = dbranch[t] . y, d y = gate * dbranch[t] sent to the
 * experts (all-to-all-v), the experts' backward (their weight gradients accumulate here),
 * d inputs sent back (all-to-all-v) and added into dln at their tokens' rows; then d probs
 * (the gates' gradients at the kept choices, plus loss_scale * a * E * f_e / N on every
 * token for the load-balancing loss), the softmax's backward and the router's matmul. */
void moe_backward(struct moe *s, int layer, const float *dbranch, float *dln, float loss_scale)
{
    lab_todo("moe_backward", "6");
    (void)s, (void)layer, (void)dbranch, (void)dln, (void)loss_scale;
}

/* ---- section 7: the gradients ---- */

/* Sum the non-expert gradients over all the ranks (pl_all_reduce, PL_SUM: each rank's
 * backward already carries 1/n). Sum this rank's experts' rows of the expert tensors
 * (h.L.moe.w_fc, b_fc, w_proj, b_proj) over the expert-data-parallel group only (when it has
 * more than one rank); never across the EP group, whose ranks hold different experts. */
void moe_finish_gradients(struct moe *s)
{
    lab_todo("moe_finish_gradients", "7");
    (void)s;
}
