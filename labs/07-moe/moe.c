/* moe.c: Lab 7, your mixture-of-experts layer with expert parallelism.
 *
 * Read docs/labs/07-moe.md first (sections 2 to 7 explain each function below), then replace
 * each lab_todo() call with your code; the state, which buffers, which collective on which
 * group and in which order are yours to work out (one plan, call by call, is in
 * docs/labs/07-moe-hints.md, for when you are stuck). Grade your work with
 *     make grade LAB=07                    every test of this lab
 *     make grade LAB=07 TEST=router        the tests whose name contains "router"
 *     make grade LAB=07 NP=2               only 2 ranks
 * and see the all-to-all volume and balance with `make bench LAB=07` (handout section 8).
 *
 * Every rule the grader enforces is in moe.h: results, groups, traffic, compute, memory (all
 * of it through pl_mem_alloc: a call to malloc or its family scores 0 before anything runs),
 * the calls you may make (not pl_moe_route or pl_moe_capacity: writing them is the lab). The
 * kit gives you the model's views (lib/model.h: m->cfg, m->blocks[l] and m->blocks_g[l] for
 * the router and the stacked experts, m->layout.tensors, m->grads, pl_moe_routing_new and
 * pl_moe_routing_free), the ops of lib/ops.h, the collectives of lib/comm.h and the rank grid
 * of lib/grid.h. */
#include "moe.h"

#include <string.h>

#include "check.h"
#include "mem.h"
#include "ops.h"

/* ---- section 2: the router ---- */

/* Slots per expert, the kit's rule (section 2): moe.h. */
int moe_capacity(int N, int E, int k, float cf)
{
    lab_todo("moe_capacity", "2");
    (void)N, (void)E, (void)k, (void)cf;
    return 1;
}

/* Every field of r, as lib/model.h's routing fills it (section 2): moe.h. */
void moe_route(struct pl_moe_routing *r, const float *probs, float aux_coef)
{
    lab_todo("moe_route", "2");
    (void)r, (void)probs, (void)aux_coef;
}

/* ---- section 3: the permutation ---- */

/* start, perm and inv as moe.h defines them, by a counting sort (section 3). */
void moe_permute(const struct pl_moe_routing *r, int *start, int *perm, int *inv)
{
    lab_todo("moe_permute", "3");
    (void)r, (void)start, (void)perm, (void)inv;
}

/* ---- section 4: the state ---- */

/* Your state: what a rank keeps from moe_new to moe_free (section 4). The fields below are
 * what the other functions here use; add what your design needs. */
struct moe {
    struct pl_comm *world, *ep, *edp; /* all ranks; this EP group; this expert's copies */
    struct pl_model *m;
    int N;
};

/* The groups from the rank grid on world, and what lasts from step to step (section 4). */
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

/* The router, the counts, the journey of the rows and the combine (sections 4 and 5). */
double moe_forward(struct moe *s, int layer, const float *ln, float *branch)
{
    lab_todo("moe_forward", "5");
    (void)s, (void)layer, (void)ln, (void)branch;
    return 0.0;
}

/* ---- section 6: the backward ---- */

/* The forward in reverse, and the router's gradient (section 6). */
void moe_backward(struct moe *s, int layer, const float *dbranch, float *dln, float loss_scale)
{
    lab_todo("moe_backward", "6");
    (void)s, (void)layer, (void)dbranch, (void)dln, (void)loss_scale;
}

/* ---- section 7: the gradients ---- */

/* Each tensor this rank holds with the whole step's gradient (section 7). */
void moe_finish_gradients(struct moe *s)
{
    lab_todo("moe_finish_gradients", "7");
    (void)s;
}
