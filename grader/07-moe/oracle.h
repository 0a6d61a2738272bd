/* oracle.h: what Lab 7's driver expects, from lib/model.h and the grader's own arithmetic,
 * never from solutions/. */
#ifndef LAB07_ORACLE_H
#define LAB07_ORACLE_H

#include <stddef.h>

#include "model.h"
#include "train.h"

#define L7_MAX_EP 64

/* One slice's routing of one layer in the reference's first step. */
struct l7_or_routing {
    int cap;
    int *count;  /* [E] */
    int *expert; /* [N*k] */
    int *slot;   /* [N*k], -1 dropped */
    long dropped;
    double aux;
};

struct l7_or_reference {
    int slices, me, steps, N; /* ranks (one slice each), this rank, N tokens a slice */
    float loss_scale;         /* of every slice's objective */
    /* Set by the driver from the code under test's EP group: its size, this rank's place in
     * it, its members' ranks in the case's communicator (their slices), and in the world. */
    int ep, ep_rank, members[L7_MAX_EP], world[L7_MAX_EP];
    size_t numel;
    struct pl_model_layout layout;
    double *loss;   /* [steps] mean over the slices of each slice's objective */
    float *grads;   /* [steps * numel] the step's gradient */
    float *params;  /* [numel] after the last step */
    struct l7_or_routing *route; /* [ep * L] first step, slice-major */
    float *branch;  /* [steps * L * N * C] slice `me`'s MoE outputs in every step */
    float *ungated; /* the same, combined without the gates */
};

/* K steps of the single-device reference (no clipping), each on the slices of the global
 * batch (one per rank of the case) as microbatches with loss scale loss_scale (1/slices, or
 * another the case chooses): the objective the lab's ranks share. hot > 0: the router
 * pushed as l7_or_push_router does. */
void l7_or_reference_run(struct l7_or_reference *o, const struct gr_train_setup *s, int slices,
                      int me, float loss_scale, float hot);
/* Pushes every block's router towards experts 0, 3, 6, ... and away from the others by hot
 * (ln2's channel 0 made a constant 1, the router's weight on it +hot or -hot), so that the
 * others receive no tokens. */
void l7_or_push_router(struct pl_model *m, float hot);
void l7_or_reference_free(struct l7_or_reference *o);

/* 1 for the stacked expert tensors (w_fc, b_fc, w_proj, b_proj of a block's MoE). */
int l7_or_is_expert_tensor(const struct pl_param_desc *d);
/* The part of tensor t that EP rank ep_rank of ep holds: all of it, or its experts' rows of
 * an expert tensor. */
void l7_or_owned_range(const struct pl_model_layout *lay, int t, int ep_rank, int ep, size_t *off,
                    size_t *n);

/* The permutation moe.h defines, by counting sort. */
void l7_or_permutation(const struct pl_moe_routing *r, int *start, int *perm, int *inv);

/* Rows this rank sends off-rank in layer's dispatch (its kept choices whose expert lives on
 * another member of its EP group) and in the combine (kept choices of the other members'
 * tokens for its experts), in the reference's first step. */
void l7_or_a2a_rows(const struct l7_or_reference *o, int layer, long *dispatch, long *combine);

#endif
