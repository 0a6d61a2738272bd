/* tests/judge/07-moe.c: Lab 7's judge (grader/07-moe/judge.c) run alone, without mpirun, on
 * hand-built observations and on those a check run of the solution recorded (driver
 * --record FILE):
 *
 *   07-moe              the hand-built cases: one per finding a rank can record
 *   07-moe FILE PARTS   every case of FILE passes PARTS (comma-separated), and the same
 *                       observations with the last rank's made wrong fail naming that rank
 *
 * Expected texts are built here from the same figures, never pasted. Exit 0 when every check
 * holds; each failed one is printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab07.h"
#include "units.h"
#include "../testing.h"
#include "judge_test.h"

#define NP 4
static struct l7_obs obs[NP];
static const struct l7_train_case TC = {8, 2, 2, 1.25f, 0.01f, 1.0f, 0};

/* np ranks of op, every one right; a training op on case TC of 64 tokens a rank. */
static void ranks(int op)
{
    memset(obs, 0, sizeof obs);
    for (int r = 0; r < NP; r++) {
        obs[r].op = op;
        if (op == L7_OP_TRAIN) {
            obs[r].tc = TC;
            obs[r].N = 64;
        }
    }
}

/* A finding of rank r for part, its figures v and x. */
static struct l7_reason *add(int r, int part, int code, const long *v, const double *x)
{
    struct l7_reason *w = &obs[r].r[obs[r].n++];
    w->part = part;
    w->code = code;
    if (v) memcpy(w->v, v, sizeof w->v);
    if (x) memcpy(w->x, x, sizeof w->x);
    return w;
}

static int judge(const char *part, int np, struct gr_why *why)
{
    struct gr_obs all = {np, sizeof obs[0], (const unsigned char *)obs};
    gr_why_init(why);
    return l7_judge(part, &all, why);
}

/* Rank 0 alone records finding code for part; the verdict fails and says want. */
static void one(int op, int part, int code, const long *v, const double *x, const char *want,
                int line)
{
    struct gr_why why;
    ranks(op);
    add(0, part, code, v, x);
    int ok = judge(L7_PART_NAMES[part], 1, &why);
    CHECK(!ok && said(&why, want), "line %d, finding %d: want \"%s\", got \"%s\"", line, code,
          want, first(&why));
}
/* Rank 0 alone records finding code for part; the verdict fails and its words leave out
 * absent (the fix, or a question's answer). */
static void lacks(int op, int part, int code, const long *v, const double *x, const char *absent,
                  int line)
{
    struct gr_why why;
    ranks(op);
    add(0, part, code, v, x);
    int ok = judge(L7_PART_NAMES[part], 1, &why);
    CHECK(!ok && why.n > 0 && !said(&why, absent), "line %d, finding %d: \"%s\" said: %s", line,
          code, absent, first(&why));
}
#define LACKS(op, part, code, v, x, absent) lacks(op, part, code, v, x, absent, __LINE__)
#define ONE(op, part, code, v, x, ...)                                                       \
    do {                                                                                   \
        char want_[1024];                                                                  \
        snprintf(want_, sizeof want_, __VA_ARGS__);                                        \
        one(op, part, code, v, x, want_, __LINE__);                                        \
    } while (0)

static void router(void)
{
    const int R = L7_OP_ROUTER, C = L7_CORRECT;
    struct gr_why why;
    ranks(R);
    CHECK(judge("correct", 2, &why) && why.n == 0, "nothing found passes: %s", first(&why));
    ONE(R, C, L7_R_CAPACITY, L7_V(40, 4, 1, 9, 10), L7_X(1.0),
        "moe_capacity(N=%d, E=%d, k=%d, cf=%g) = %d, the kit's rule gives %d", 40, 4, 1, 1.0, 9,
        10);
    ONE(R, C, L7_R_CAPACITY, L7_V(40, 4, 1, 9, 10), L7_X(1.0),
        "; yours rounds down where the rule rounds up");
    ONE(R, C, L7_R_CAPACITY, L7_V(40, 4, 1, 3, 40), L7_X(1e10),
        "does not fit an int, and yours is not the clamp to N");
    LACKS(R, C, L7_R_CAPACITY, L7_V(40, 4, 1, 3, 40), L7_X(1e10), "in double first");
    /* choice index 5 of top-2: choice 2 of token 2 */
    ONE(R, C, L7_R_EXPERT, L7_V(5, 2, 3, 1), NULL,
        "choice %d of token %d: expert %d, the reference picks %d", 5 % 2 + 1, 5 / 2, 3, 1);
    ONE(R, C, L7_R_KEPT, L7_V(5, 2, 3, 0, 1), NULL,
        "choice %d of token %d (expert %d): kept, the reference drops it. Slots fill", 2, 2, 3);
    ONE(R, C, L7_R_SLOT, L7_V(4, 2, 1, 7, 6), NULL,
        "choice %d of token %d (expert %d) is in slot %d, the reference's slot %d", 1, 2, 1, 7,
        6);
    ONE(R, C, L7_R_COUNT, L7_V(3, 5, 6), NULL, "expert %d holds %d tokens, the reference %d", 3,
        5, 6);
    ONE(R, C, L7_R_DROPPED, L7_V(4, 2), NULL, "%d choices dropped, the reference drops %d", 4,
        2);
    ONE(R, C, L7_R_GATE, L7_V(3, 1), L7_X(0.25, 0.5),
        "gate of choice %d of token %d is %g, the reference %g: the gate is the router", 1, 3,
        0.25, 0.5);
    ONE(R, C, L7_R_ROW, L7_V(2, 1, 9, 8), L7_X(0.5, 0.25),
        "slot %d of expert %d holds token %d (gate %g), the reference token %d (gate %g)", 2, 1,
        9, 0.5, 8, 0.25);
    ONE(R, C, L7_R_FP, L7_V(2), L7_X(0.25, 0.3, 0.5, 0.3),
        "expert %d: f = %.9g, P = %.9g; the reference f = %.9g", 2, 0.25, 0.3, 0.5);
    /* the aux loss with a = 0.01 where the call gave 0.3 */
    ONE(R, C, L7_R_AUX, L7_V(1), L7_X(0.0101, 0.303, 0.01, 0.3),
        "aux loss %.9g, the reference %.9g = a x E x sum_i f_i P_i: yours is that sum times "
        "%.6g where a = aux_coef = %g in this call", 0.0101, 0.303, 0.01, 0.3);
    LACKS(R, C, L7_R_AUX, L7_V(1), L7_X(0.0101, 0.303, 0.01, 0.3), "use the argument");
    ranks(R);
    add(0, C, L7_R_AUX, L7_V(1), L7_X(0.2, 0.3, 0.3, 0.3));
    CHECK(!judge("correct", 1, &why) && !said(&why, "yours is that sum"),
          "no coefficient hint when a is the argument: %s", first(&why));
    ONE(R, C, L7_R_FRESH, NULL, NULL, "this was the second call into one routing");

    /* the case closes the reason, described from its figures */
    struct l7_route_case rc = {40, 8, 2, 1.25f, 2.0f, 3.0f, 1e-3f};
    char d[256];
    l7_describe_route_case(&rc, d, sizeof d);
    ONE(R, C, L7_R_IN_ROUTE, L7_V(rc.N, rc.E, rc.k), L7_X(rc.cf, rc.sharp, rc.hot, rc.coef),
        "in: %s", d);
    CHECK(strstr(d, ", a hot expert 0") && strstr(d, "(13 slots)"), "the case: %s", d);

    const int P = L7_OP_PERMUTE;
    ONE(P, C, L7_R_START, L7_V(3, 7, 8), NULL,
        "start[%d] = %d, expected %d: the kept choices of experts 0..%d", 3, 7, 8, 2);
    ONE(P, C, L7_R_PERM, L7_V(4, 1, 2), NULL, "perm[%d] = %d, expected token %d", 4, 1, 2);
    ONE(P, C, L7_R_INV, L7_V(3, 2, 5, -1), NULL,
        "inv[%d] (choice %d of token %d) = %d, expected %d (-1: it was dropped)", 3, 2, 1, 5,
        -1);

    /* the lowest failing rank is named on its first line only */
    ranks(R);
    add(2, C, L7_R_COUNT, L7_V(3, 5, 6), NULL);
    add(2, C, L7_R_FRESH, NULL, NULL);
    add(3, C, L7_R_DROPPED, L7_V(1, 2), NULL);
    CHECK(!judge("correct", NP, &why) && why.n == 2 &&
              !strncmp(why.line[0], "rank 2: expert 3 holds", 22) &&
              !strncmp(why.line[1], "this was the second", 19),
          "rank 2's two lines: %s", first(&why));
    CHECK(!judge("frobnicate", NP, &why) && said(&why, "not frobnicate"), "unknown part");
}

static void training(void)
{
    const int T = L7_OP_TRAIN, C = L7_CORRECT;
    struct gr_why why;
    char in[512], want[1024], g[32], b2[32];
    ranks(T);
    for (int p = 0; p < L7_NPARTS; p++)
        CHECK(judge(L7_PART_NAMES[p], 2, &why) && why.n == 0, "part %s passes: %s",
              L7_PART_NAMES[p], first(&why));
    ONE(T, C, L7_R_IN_FLIGHT, L7_V(2), NULL,
        "after moe_free, %d operation(s) you started on the communicator", 2);
    ONE(T, C, L7_R_EP_SIZE, L7_V(0, 4, 2), NULL,
        "moe_ep_comm gives no group; with %d ranks and ep = %d the EP groups have %d", 4, 2, 2);
    ONE(T, C, L7_R_EP_SIZE, L7_V(1, 4, 2), NULL, "moe_ep_comm gives a group of another size");
    struct l7_reason *w;
    ranks(T);
    w = add(0, C, L7_R_EP_ORDER, L7_V(3), NULL);
    w->list[0] = 2, w->list[1] = 1, w->list[2] = 0;
    CHECK(!judge("correct", 1, &why) &&
              said(&why, "moe_ep_comm's ranks 0..2 are ranks 2, 1, 0 of the communicator") &&
              !said(&why, "pl_grid_comm"),
          "EP group order, the call not named: %s", first(&why));

    /* the MoE output's hints, each from its figures */
    ONE(T, C, L7_R_BRANCH, L7_V(0, 1, 0), L7_X(0.5, GR_TOL_LOSS, GR_TOL_LOSS / 2, 1),
        "step %d: block %d's MoE output: relative L2 error %.2e against the reference, more "
        "than %.0e; it equals the experts' outputs summed WITHOUT their gates", 0, 1, 0.5,
        GR_TOL_LOSS);
    LACKS(T, C, L7_R_BRANCH, L7_V(0, 1, 0), L7_X(0.5, GR_TOL_LOSS, GR_TOL_LOSS / 2, 1),
          "multiplies each expert's output");
    ONE(T, C, L7_R_BRANCH, L7_V(0, 1, 0), L7_X(0.5, GR_TOL_LOSS, 1, 1e-4),
        "it equals the reference added onto what branch held before the call");
    LACKS(T, C, L7_R_BRANCH, L7_V(0, 1, 0), L7_X(0.5, GR_TOL_LOSS, 1, 1e-4), "so zero it");
    ONE(T, C, L7_R_BRANCH, L7_V(2, 0, 0), L7_X(0.5, GR_TOL_PARAMS, 1, 1),
        "step 0's outputs were right, so something your layer keeps");
    LACKS(T, C, L7_R_BRANCH, L7_V(2, 0, 0), L7_X(0.5, GR_TOL_PARAMS, 1, 1),
          "zero every buffer");
    ONE(T, C, L7_R_BRANCH, L7_V(0, 0, 1), L7_X(0.5, GR_TOL_LOSS, 1, 1),
        "in this case some experts receive no tokens (the router is pushed to experts 0, 3, 6)");
    LACKS(T, C, L7_R_BRANCH, L7_V(0, 0, 1), L7_X(0.5, GR_TOL_LOSS, 1, 1),
          "an expert without rows is skipped");
    /* a wrong output quotes the first routing finding of the same rank */
    ranks(T);
    add(1, L7_COUNTS, L7_R_COUNT, L7_V(3, 5, 6), NULL);
    add(1, C, L7_R_BRANCH, L7_V(0, 1, 0), L7_X(0.5, GR_TOL_LOSS, 1, 1));
    add(1, C, L7_R_ROUTING_DIFFERS, NULL, NULL);
    snprintf(want, sizeof want, "your routing differs from the reference's: expert %d holds %d "
             "tokens, the reference %d", 3, 5, 6);
    CHECK(!judge("correct", 2, &why) && why.n == 3 && !strncmp(first(&why), "rank 1: step 0", 14) &&
              said(&why, want), "routing quoted: %s", why.n > 1 ? why.line[1] : "");
    l7_describe_case(&TC, 64, 2, in, sizeof in);
    snprintf(want, sizeof want, "in: %s", in);
    CHECK(why.n == 3 && !strcmp(why.line[2], want), "case named: %s", why.n > 2 ? why.line[2] : "");
    CHECK(strstr(in, "8 experts on 2 ranks, top-2, capacity factor 1.25") != NULL, "case: %s",
          in);

    ONE(T, C, L7_R_LOSS, L7_V(1), L7_X(3.5, 3.25, 0.0769, GR_TOL_LOSS),
        "step %d: loss %.7f, the reference %.7f (relative error %.1e, more than %.0e)", 1, 3.5,
        3.25, 0.0769, GR_TOL_LOSS);

    /* a tensor off: v = step, expert, not finite, zeros, router alone, ep, ranks; x = own
     * error, tol, scale, loss_scale */
    const char *fc = "h.0.moe.w_fc";
    ranks(T);
    w = add(0, C, L7_R_TENSOR, L7_V(0, 1, 0, 0, 0, 2, 2), L7_X(0.5, GR_TOL_GRADS, 0.5, 0.5));
    snprintf(w->name[0], PL_NAME_LEN, "%s", fc);
    snprintf(want, sizeof want, "step %d: the gradient of %s (this rank's experts): relative "
             "L2 error %.2e (against that tensor's own norm), more than %.0e; yours is 1/%d of "
             "it, the EP group's size (section 7)", 0, fc, 0.5, GR_TOL_GRADS, 2);
    /* question expert_gradients asks why: the message gives the figure, not the answer */
    CHECK(!judge("correct", 1, &why) && said(&why, want) && !said(&why, "different experts") &&
              !said(&why, "already hold"),
          "averaged over EP, the why (question expert_gradients) not given: %s", first(&why));
    w->v[1] = 0;
    snprintf(w->name[0], PL_NAME_LEN, "wte");
    snprintf(want, sizeof want, "of wte: relative L2 error %.2e (against that tensor's own "
             "norm), more than %.0e; yours is 1/%d of it, the rank count (section 7)", 0.5,
             GR_TOL_GRADS, 2);
    CHECK(!judge("correct", 1, &why) && said(&why, want) && !said(&why, "already scaled") &&
              !said(&why, "summed, not averaged"),
          "averaged over ranks, the why (question expert_gradients) not given: %s", first(&why));
    w->v[0] = -1, w->v[1] = 1, w->v[6] = 4, w->x[2] = 0.5, w->x[3] = 0.25;
    snprintf(want, sizeof want, "after the last step, the parameters of wte (this rank's "
             "experts): relative L2 error %.2e (against that tensor's own norm), more than "
             "%.0e; yours is %d/%d of it: only your EP group's tokens", 0.5, GR_TOL_GRADS, 2, 4);
    CHECK(!judge("correct", 1, &why) && said(&why, want) && said(&why, "divided by the 2 copies") &&
              !said(&why, "expert-data-parallel group") && !said(&why, "do not average"),
          "summed over one EP group, the group and the operation not named: %s", first(&why));
    w->v[2] = 3;
    snprintf(want, sizeof want, "of wte (this rank's experts): not finite; %d elements are not "
             "numbers", 3);
    CHECK(!judge("correct", 1, &why) && said(&why, want), "not finite: %s", first(&why));
    w->v[2] = 0, w->v[3] = 1, w->x[0] = 0.125;
    snprintf(want, sizeof want, "the reference's is all zeros and yours is not (L2 norm %.2e)",
             0.125);
    CHECK(!judge("correct", 1, &why) && said(&why, want), "zeros: %s", first(&why));
    w->v[3] = 0, w->v[4] = 1, w->v[6] = 2, w->x[2] = 0.9, w->x[3] = 0.3 / 2;
    snprintf(w->name[0], PL_NAME_LEN, "h.1.moe.w_router");
    snprintf(w->name[1], PL_NAME_LEN, "wte");
    CHECK(!judge("correct", 1, &why) && said(&why, "so the router's backward is where it goes "
                                                   "wrong (wte is off too") &&
              said(&why, "This case's loss_scale is not 1/n") && !said(&why, "a E f_e / N") &&
              !said(&why, "takes the loss_scale argument"),
          "the router alone, the formula not given: %s", first(&why));
    w->x[3] = 0.5;
    CHECK(!judge("correct", 1, &why) && !said(&why, "is not 1/n"), "loss_scale 1/n: no hint");

    ONE(T, C, L7_R_HELD_EVERY, L7_V(10, 12, 2, PL_MEM_WORK), L7_X(2048),
        "every step left more allocations live than the one before (%d after step 0, %d after "
        "step %d; %s more %s)", 10, 12, 2, pl_format_bytes(2048, g, sizeof g),
        pl_mem_cat_name(PL_MEM_WORK));
    ONE(T, C, L7_R_HELD_FREED, L7_V(PL_MEM_ACTIV), L7_X(4096),
        "after moe_free the ledger still holds %s of %s", pl_format_bytes(4096, g, sizeof g),
        pl_mem_cat_name(PL_MEM_ACTIV));
    ONE(T, C, L7_R_DLN, L7_V(1, 1), NULL,
        "moe_backward of block %d, called with dln holding other gradients, threw them away",
        1);
    ONE(T, C, L7_R_DLN, L7_V(1, 0), NULL, "did not keep them as they were");
    LACKS(T, C, L7_R_DLN, L7_V(1, 0), NULL, "never zero it");
    LACKS(T, C, L7_R_HELD_EVERY, L7_V(10, 12, 2, PL_MEM_WORK), L7_X(2048), "allocated once");

    const int N = L7_COUNTS;
    ONE(T, N, L7_R_LAST_EARLY, NULL, NULL, "gives a routing before any moe_forward has run");
    ONE(T, N, L7_R_LAST_NULL, L7_V(1), NULL, "moe_last_routing(%d) is NULL after a forward", 1);
    ONE(T, N, L7_R_SHAPE, L7_V(1, 64, 8, 2, 20, 64, 8, 2, 21), NULL,
        "block %d's routing is for N=%d E=%d k=%d with %d slots; the reference routes N=%d "
        "tokens to E=%d experts, top-%d, %d slots", 1, 64, 8, 2, 20, 64, 8, 2, 21);
    ONE(T, N, L7_R_IN_BLOCK, L7_V(1), NULL, "in block %d", 1);

    const int F = L7_TRAFFIC;
    ONE(T, F, L7_R_CALLS, L7_V(2, 6, 2), NULL,
        "%d pl_all_to_all and %d pl_all_to_all_v in a step of %d MoE layers; expected %d and %d",
        2, 6, 2, 2, 8);
    ONE(T, F, L7_R_P2P, NULL, L7_X(8192), "%s sent point to point",
        pl_format_bytes(8192, g, sizeof g));
    ONE(T, F, L7_R_COUNTS_BYTES, L7_V(2, 1, 4), L7_X(64, 32),
        "the counts exchange sent %s; %d layers x %d peers x %d experts each x 4 bytes = %s",
        pl_format_bytes(64, g, sizeof g), 2, 1, 4, pl_format_bytes(32, b2, sizeof b2));
    ONE(T, F, L7_R_A2AV, L7_V(1), L7_X(1 << 20, 1 << 19),
        "all-to-all-v sent %s off this rank in a step; the routing sends %s",
        pl_format_bytes(1 << 20, g, sizeof g), pl_format_bytes(1 << 19, b2, sizeof b2));
    ONE(T, F, L7_R_A2AV, L7_V(1), L7_X(1 << 20, 1 << 19),
        "yours is every expert's whole capacity, empty slots included");
    LACKS(T, F, L7_R_A2AV, L7_V(1), L7_X(1 << 20, 1 << 19), "Exchange the counts first");
    ONE(T, F, L7_R_BALANCED, NULL, L7_X(1 << 20),
        "a balanced routing would send (ep-1)/ep x N x k x C x 4 bytes each way, %s a step",
        pl_format_bytes(1 << 20, g, sizeof g));
    ONE(T, F, L7_R_SUMS, L7_V(8, 2), L7_X(1 << 20, 1 << 19, 1000),
        "the gradient sums sent %s from this rank in a step; finishing the gradients needs %s "
        "(by the ring, on %d ranks in %d EP groups; section 7)",
        pl_format_bytes(1 << 20, g, sizeof g), pl_format_bytes(1 << 19, b2, sizeof b2), 8, 2);
    /* which tensors are summed over which group is question expert_gradients */
    LACKS(T, F, L7_R_SUMS, L7_V(8, 2), L7_X(1 << 20, 1 << 19, 1000), "summed over");
    LACKS(T, F, L7_R_SUMS, L7_V(8, 2), L7_X(1 << 20, 1 << 19, 1000), "other EP groups");
    ONE(T, F, L7_R_SUMS, L7_V(4, 1), L7_X(1 << 20, 1 << 19, 1000),
        "(by the ring, on %d ranks in 1 EP group; section 7)", 4);
    LACKS(T, F, L7_R_SUMS, L7_V(4, 1), L7_X(1 << 20, 1 << 19, 1000), "nothing for the experts");
    ONE(T, F, L7_R_SUMS_HOW, L7_V(1), L7_X(4096, 1024),
        "yours sums the experts' whole tensors (%d floats, every expert of every block) where "
        "this rank holds %d of them", 4096, 1024);
    LACKS(T, F, L7_R_SUMS_HOW, L7_V(1), L7_X(4096, 1024), "expert-data-parallel");
    ONE(T, F, L7_R_SUMS_HOW, L7_V(0), NULL,
        "the sums moved more than finishing the gradients needs");
    LACKS(T, F, L7_R_SUMS_HOW, L7_V(0), NULL, "over the world");
    LACKS(T, F, L7_R_SUMS_HOW, L7_V(0), NULL, "expert-data-parallel");

    ranks(T);
    w = add(0, L7_PLACEMENT, L7_R_PLACE, L7_V(4, 4), L7_X(40e-6, 10e-6));
    memcpy(w->list, (int[]){0, 2, 4, 6}, 4 * sizeof(int));
    snprintf(want, sizeof want, "your EP group (world ranks 0, 2, 4, 6) spans both nodes of 2 x "
             "%d: every all-to-all crosses the network. On dgx-h100 this step's all-to-all "
             "bytes take %.1f us across nodes against %.1f us inside one (%.1fx)", 4, 40.0,
             10.0, 4.0);
    CHECK(!judge("placement", 1, &why) && said(&why, want) && !said(&why, "ep before dp"),
          "placement, the order not given: %s", first(&why));
}

/* Part time: the rank furthest beyond its share, graded between L7_TL_FULL and L7_TL_NONE. */
static void timed(void)
{
    struct gr_why why;
    char want[512];
    ranks(L7_OP_TRAIN);
    for (int r = 0; r < 2; r++) {
        obs[r].timed = 1;
        obs[r].did_ms = 1.0, obs[r].need_ms = 1.0, obs[r].ratio = 1.0;
    }
    obs[0].replayed = 1, obs[0].step_ms = 3.5;
    CHECK(judge("time", 2, &why) && why.fraction == 1 &&
              said(&why, "take 3.50 ms on the slowest rank, modelled on dgx-h100") &&
              said(&why, "rank 0, the one furthest beyond its share"),
          "full marks: %s", first(&why));
    double half = (L7_TL_FULL + L7_TL_NONE) / 2;
    obs[1].ratio = half, obs[1].did_ms = half;
    CHECK(judge("time", 2, &why) && fabs(why.fraction - 0.5) < 1e-9 &&
              said(&why, "rank 1, the one furthest beyond its share"),
          "half marks: %g %s", why.fraction, first(&why));
    obs[1].ratio = 2, obs[1].did_ms = 2;
    snprintf(want, sizeof want, "rank 0: your MoE layers' forward and backward take %.2f ms",
             3.5);
    CHECK(!judge("time", 2, &why) && !strncmp(first(&why), want, strlen(want)) &&
              said(&why, "computes for 2.00 ms where its own experts' routed rows and its "
                         "router need 1.00 ms (2.00x") &&
              said(&why, "your experts computed more rows than were routed to them") &&
              !strncmp(why.line[why.n - 1], "in: ", 4),
          "none: %s", first(&why));
    obs[0].timed = 0;
    CHECK(judge("time", 2, &why) && why.n == 0, "a case not timed passes part time");
}

static void hand_built(void)
{
    router();
    training();
    timed();
}

/* Every case of a recorded run passes parts; then the last rank made wrong fails, named. */
static void recorded(const char *path, const char *parts)
{
    FILE *f = judge_record_open(path);
    struct gr_record rec;
    char err[256], list[128];
    int n = 0, got;
    while ((got = gr_record_read(f, &rec, err, sizeof err)) == 1) {
        CHECK(rec.obs.size == sizeof(struct l7_obs), "%s: observations of %zu bytes, not %zu",
              path, rec.obs.size, sizeof(struct l7_obs));
        if (rec.obs.size != sizeof(struct l7_obs)) exit(1);
        struct gr_why why;
        snprintf(list, sizeof list, "%s", parts);
        for (char *p = strtok(list, ","); p; p = strtok(NULL, ",")) {
            int v = l7_judge(p, &rec.obs, (gr_why_init(&why), &why));
            CHECK(v && why.fraction == 1, "%s case %d part %s of the solution: %s", rec.op,
                  rec.icase, p, first(&why));
        }
        struct l7_obs *mine = malloc(rec.obs.size * (size_t)rec.obs.nranks);
        memcpy(mine, rec.obs.data, rec.obs.size * (size_t)rec.obs.nranks);
        int last = rec.obs.nranks - 1;
        struct l7_obs *o = &mine[last];
        struct gr_obs bad = {rec.obs.nranks, rec.obs.size, (const unsigned char *)mine};
        struct l7_reason *w = &o->r[o->n++];
        memset(w, 0, sizeof *w);
        char want[256];
        if (o->op == L7_OP_TRAIN) {
            *w = (struct l7_reason){.part = L7_CORRECT, .code = L7_R_LOSS, .v = {1},
                                    .x = {3.5, 3.25, 0.0769, GR_TOL_LOSS}};
            snprintf(want, sizeof want, "step 1: loss %.7f, the reference %.7f", 3.5, 3.25);
        } else {
            *w = (struct l7_reason){.part = L7_CORRECT, .code = L7_R_COUNT, .v = {3, 5, 6}};
            snprintf(want, sizeof want, "expert 3 holds 5 tokens, the reference 6");
        }
        char named[300];
        if (rec.obs.nranks > 1) snprintf(named, sizeof named, "rank %d: %s", last, want);
        else snprintf(named, sizeof named, "%s", want);
        gr_why_init(&why);
        CHECK(!l7_judge("correct", &bad, &why) && !strncmp(first(&why), named, strlen(named)),
              "%s case %d, the last rank wrong: %s", rec.op, rec.icase, first(&why));
        free(mine);
        gr_record_free(&rec);
        n++;
    }
    judge_record_close(f, path, got, err, n);
}

int main(int argc, char **argv)
{
    return judge_test_main(argc, argv, hand_built, recorded);
}
