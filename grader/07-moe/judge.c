/* judge.c: Lab 7's verdicts, on rank 0 from every rank's observation of a case (lab07.h),
 * and in tests/judge/07-moe.c alone: no MPI, nothing read but the arguments, every reason
 * worded here from the figures the ranks recorded. A part fails on the lowest rank that
 * found something for it, whose findings are said in the order it found them. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lab07.h"
#include "units.h"

const char *const L7_PART_NAMES[L7_NPARTS] = {"correct", "counts", "traffic", "placement",
                                              "time"};

int l7_global_b(int n)
{
    return n == 6 ? 12 : 8;
}

/* The factor of case c: L7_CF_NONE is E / k for the smaller expert count, and a factor far
 * beyond it (1e10 for top-1, infinity for top-2) for the larger. */
float l7_case_cf(const struct l7_train_case *c)
{
    if (c->cf != L7_CF_NONE) return c->cf;
    if (c->E <= 6 || c->hot > 0) return (float)c->E / (float)c->k;
    return c->k == 1 ? 1e10f : INFINITY;
}

void l7_describe_case(const struct l7_train_case *c, int N, int n, char *buf, size_t len)
{
    char cf[64];
    float factor = l7_case_cf(c);
    if (c->cf == L7_CF_NONE)
        snprintf(cf, sizeof cf, "no capacity limit (factor %g)", (double)factor);
    else snprintf(cf, sizeof cf, "capacity factor %g", (double)c->cf);
    char groups[64] = "";
    if (c->ep < n) snprintf(groups, sizeof groups, " (EP groups of %d)", c->ep);
    snprintf(buf, len, "%d experts on %d ranks%s, top-%d, %s (%d slots for %d tokens a rank), "
             "aux_coef %g, loss_scale %g/n, %d steps of %d sequences%s", c->E, n, groups,
             c->k, cf, pl_moe_capacity(N, c->E, c->k, factor), N, (double)c->coef,
             (double)c->scale, L7_K_STEPS, l7_global_b(n),
             c->hot > 0 ? "; the router pushed to experts 0, 3, 6: the others get no tokens" : "");
}

void l7_describe_route_case(const struct l7_route_case *c, char *buf, size_t len)
{
    snprintf(buf, len, "N=%d tokens, E=%d experts, top-%d, capacity factor %g (%d slots), "
             "aux_coef %g%s%s", c->N, c->E, c->k, (double)c->cf,
             pl_moe_capacity(c->N, c->E, c->k, c->cf), (double)c->coef,
             c->hot > 0 ? ", a hot expert 0" : "", c->sharp == 0 ? ", all experts tied" : "");
}

static const char *const ORDER = "Slots fill choice by choice: every first choice in token "
                                 "order, then every second choice; a choice finding its "
                                 "expert full is dropped (section 2)";

/* "a, b, c" from n ints. */
static void list_of(const int *v, long n, char *buf, size_t len)
{
    buf[0] = '\0';
    for (long i = 0; i < n && i < L7_LIST; i++) {
        size_t l = strlen(buf);
        snprintf(buf + l, len - l, "%s%d", i ? ", " : "", v[i]);
    }
}

/* What a gradient or parameter off against the reference suggests. */
static void tensor_hint(const struct l7_reason *r, char *hint, size_t len)
{
    const long *v = r->v;
    const double *x = r->x, scale = x[2];
    const int expert = (int)v[1], ep = (int)v[5], slices = (int)v[6];
    const int edp = slices > ep && fabs(scale * slices - ep) < 0.05 * ep;
    hint[0] = '\0';
    if (v[2])
        snprintf(hint, len, "; %ld elements are not numbers", v[2]);
    else if (v[4])
        snprintf(hint, len, "; the last block's router gradient is off while its experts' are "
                 "right, so the router's backward is where it goes wrong (%s is off too, as is "
                 "every tensor the backward reaches after it): its two sources, the gates "
                 "and the load-balancing loss (section 6)%s", r->name[1],
                 fabs((float)x[3] * (float)slices - 1) > 1e-6
                     ? ". This case's loss_scale is not 1/n (moe.h)"
                     : "");
    else if (expert && ep > 1 && fabs(scale * ep - 1) < 0.05 && !edp)
        snprintf(hint, len, "; yours is 1/%d of it, the EP group's size (section 7)", ep);
    else if (!expert && slices > 1 && fabs(scale * slices - 1) < 0.05)
        snprintf(hint, len, "; yours is 1/%d of it, the rank count (section 7)", slices);
    else if (expert && edp)
        snprintf(hint, len, "; yours is %d/%d of it: only your EP group's tokens are in it, "
                 "or their sum was divided by the %d copies (section 7)", ep, slices,
                 slices / ep);
}

static void word_tensor(const struct l7_reason *r, char *buf, size_t len)
{
    char what[64], hint[640];
    if (r->v[0] >= 0) snprintf(what, sizeof what, "step %ld: the gradient", r->v[0]);
    else snprintf(what, sizeof what, "after the last step, the parameters");
    tensor_hint(r, hint, sizeof hint);
    const char *mine = r->v[1] ? " (this rank's experts)" : "";
    if (r->v[2])
        snprintf(buf, len, "%s of %s%s: not finite%s", what, r->name[0], mine, hint);
    else if (r->v[3])
        snprintf(buf, len, "%s of %s%s: the reference's is all zeros and yours is not (L2 norm "
                 "%.2e)%s", what, r->name[0], mine, r->x[0], hint);
    else
        snprintf(buf, len, "%s of %s%s: relative L2 error %.2e (against that tensor's own "
                 "norm), more than %.0e%s", what, r->name[0], mine, r->x[0], r->x[1], hint);
}

static void word_branch(const struct l7_reason *r, char *buf, size_t len)
{
    const double *x = r->x, tol = x[1];
    snprintf(buf, len, "step %ld: block %ld's MoE output: relative L2 error %.2e against the "
             "reference, more than %.0e%s", r->v[0], r->v[1], x[0], tol,
             x[2] <= tol ? "; it equals the experts' outputs summed WITHOUT their gates "
                           "(section 5)"
             : x[3] <= 1e-3 ? "; it equals the reference added onto what branch held before "
                              "the call, where moe_forward writes branch (moe.h, section 5)"
             : r->v[0] > 0 ? "; step 0's outputs were right, so something your layer keeps "
                             "from one call to the next carried over into this one "
                             "(section 5)"
             : r->v[2] ? "; in this case some experts receive no tokens (the router is pushed "
                         "to experts 0, 3, 6): look at what your layer does with an expert "
                         "that has no rows (section 5)"
                       : "");
}

/* The router's and the permutation's findings. */
static void word_route(const struct l7_reason *r, char *buf, size_t len)
{
    const long *v = r->v;
    const double *x = r->x;
    const int choice = v[1] ? (int)(v[0] % v[1] + 1) : 0, token = v[1] ? (int)(v[0] / v[1]) : 0;
    switch (r->code) {
    case L7_R_CAPACITY: {
        double product = x[0] * (double)v[0] * (double)v[2] / (double)v[1];
        snprintf(buf, len, "moe_capacity(N=%ld, E=%ld, k=%ld, cf=%g) = %ld, the kit's rule "
                 "gives %ld: ceil(cf x N x k / E) computed in double from the float factor, "
                 "at least 1 and at most N (section 2)%s", v[0], v[1], v[2], x[0], v[3], v[4],
                 v[3] == v[4] - 1 ? "; yours rounds down where the rule rounds up"
                 : !(product < 2147483647.0)
                     ? "; here cf x N x k / E does not fit an int, and yours is not the clamp "
                       "to N"
                     : "");
        break;
    }
    case L7_R_EXPERT:
        snprintf(buf, len, "choice %d of token %d: expert %ld, the reference picks %ld (top-k "
                 "by probability, ties to the lower expert index)", choice, token, v[2], v[3]);
        break;
    case L7_R_KEPT:
        snprintf(buf, len, "choice %d of token %d (expert %ld): %s, the reference %s. %s",
                 choice, token, v[2], v[3] ? "dropped" : "kept", v[4] ? "drops it" : "keeps it",
                 ORDER);
        break;
    case L7_R_SLOT:
        snprintf(buf, len, "choice %d of token %d (expert %ld) is in slot %ld, the reference's "
                 "slot %ld. %s", choice, token, v[2], v[3], v[4], ORDER);
        break;
    case L7_R_COUNT:
        snprintf(buf, len, "expert %ld holds %ld tokens, the reference %ld", v[0], v[1], v[2]);
        break;
    case L7_R_DROPPED:
        snprintf(buf, len, "%ld choices dropped, the reference drops %ld", v[0], v[1]);
        break;
    case L7_R_GATE:
        snprintf(buf, len, "gate of choice %d of token %d is %g, the reference %g: the gate is "
                 "the router probability itself, not renormalised", choice, token, x[0], x[1]);
        break;
    case L7_R_ROW:
        snprintf(buf, len, "slot %ld of expert %ld holds token %ld (gate %g), the reference "
                 "token %ld (gate %g)", v[0], v[1], v[2], x[0], v[3], x[1]);
        break;
    case L7_R_FP:
        snprintf(buf, len, "expert %ld: f = %.9g, P = %.9g; the reference f = %.9g (its share "
                 "of the N k choices, before dropping), P = %.9g (its mean probability)", v[0],
                 x[0], x[1], x[2], x[3]);
        break;
    case L7_R_AUX: {
        char hint[200] = "";
        if (v[0] && fabs(x[2] - x[3]) > 1e-6 * (fabs(x[3]) + 1e-3))
            snprintf(hint, sizeof hint, ": yours is that sum times %.6g where a = aux_coef = "
                     "%g in this call", x[2], x[3]);
        snprintf(buf, len, "aux loss %.9g, the reference %.9g = a x E x sum_i f_i P_i%s", x[0],
                 x[1], hint);
        break;
    }
    case L7_R_FRESH:
        snprintf(buf, len, "this was the second call into one routing; into a fresh one yours "
                 "is right. moe_route sets every field on every call (moe_forward routes each "
                 "layer into the same routing step after step): count, f, P and dropped start "
                 "again from zero, not from the last call's (section 2)");
        break;
    case L7_R_IN_ROUTE: {
        struct l7_route_case c = {(int)v[0], (int)v[1], (int)v[2], (float)x[0], (float)x[1],
                                  (float)x[2], (float)x[3]};
        char d[200];
        l7_describe_route_case(&c, d, sizeof d);
        snprintf(buf, len, "in: %s", d);
        break;
    }
    case L7_R_START:
        snprintf(buf, len, "start[%ld] = %ld, expected %ld: the kept choices of experts 0..%ld "
                 "(an exclusive prefix sum of count)", v[0], v[1], v[2], v[0] - 1);
        break;
    case L7_R_PERM:
        snprintf(buf, len, "perm[%ld] = %ld, expected token %ld: position start[e] + slot "
                 "holds the token of expert e's slot", v[0], v[1], v[2]);
        break;
    case L7_R_INV:
        snprintf(buf, len, "inv[%ld] (choice %d of token %d) = %ld, expected %ld%s", v[0],
                 choice, token, v[2], v[3], v[3] < 0 ? " (-1: it was dropped)" : "");
        break;
    default:
        buf[0] = '\0';
    }
}

/* The training cases' findings of part traffic and placement. */
static void word_traffic(const struct l7_reason *r, char *buf, size_t len)
{
    const long *v = r->v;
    const double *x = r->x;
    char g[32], w[32], list[128];
    switch (r->code) {
    case L7_R_CALLS:
        snprintf(buf, len, "%ld pl_all_to_all and %ld pl_all_to_all_v in a step of %ld MoE "
                 "layers; expected %ld and %ld: per layer one all-to-all of the counts, then "
                 "dispatch and combine forward and the same two in reverse backward (moe.h)",
                 v[0], v[1], v[2], v[2], 4 * v[2]);
        break;
    case L7_R_P2P:
        snprintf(buf, len, "%s sent point to point: the tokens travel in the all-to-all-v "
                 "calls only", pl_format_bytes(x[0], g, sizeof g));
        break;
    case L7_R_BARRIER:
        snprintf(buf, len, "%ld pl_barrier calls in a step of %ld MoE layers, where none is "
                 "needed: a barrier moves no data and makes every rank wait for the slowest, "
                 "and the all-to-alls already carry every dependency between ranks (moe.h: "
                 "per layer one pl_all_to_all and four pl_all_to_all_v, then the gradient "
                 "sums)", v[0], v[1]);
        break;
    case L7_R_COUNTS_BYTES:
        snprintf(buf, len, "the counts exchange sent %s; %ld layers x %ld peers x %ld experts "
                 "each x 4 bytes = %s", pl_format_bytes(x[0], g, sizeof g), v[0], v[1], v[2],
                 pl_format_bytes(x[1], w, sizeof w));
        break;
    case L7_R_A2AV:
        snprintf(buf, len, "all-to-all-v sent %s off this rank in a step; the routing sends %s "
                 "(the rows of kept choices whose expert lives on another rank, and the "
                 "outputs of this rank's experts for other ranks' tokens, both ways)%s",
                 pl_format_bytes(x[0], g, sizeof g), pl_format_bytes(x[1], w, sizeof w),
                 v[0] ? ": yours is every expert's whole capacity, empty slots included "
                        "(section 4)"
                      : "");
        break;
    case L7_R_BALANCED:
        snprintf(buf, len, "for scale: a balanced routing would send (ep-1)/ep x N x k x C x 4 "
                 "bytes each way, %s a step", pl_format_bytes(x[0], g, sizeof g));
        break;
    case L7_R_SUMS:
        pl_format_bytes(x[0], g, sizeof g);
        pl_format_bytes(x[1], w, sizeof w);
        if (!strcmp(g, w)) { /* the same when rounded: say the bytes */
            snprintf(g, sizeof g, "%.0f B", x[0]);
            snprintf(w, sizeof w, "%.0f B", x[1]);
        }
        snprintf(buf, len, "the gradient sums sent %s from this rank in a step; finishing the "
                 "gradients needs %s (by the ring, on %ld ranks in %ld EP group%s; section 7)",
                 g, w, v[0], v[1], v[1] > 1 ? "s" : "");
        break;
    case L7_R_SUMS_HOW:
        if (v[0])
            snprintf(buf, len, "yours sums the experts' whole tensors (%.0f floats, every "
                     "expert of every block) where this rank holds %.0f of them: the rows of "
                     "other ranks' experts are zero here and belong to other ranks (section "
                     "7)", x[0], x[1]);
        else
            snprintf(buf, len, "the sums moved more than finishing the gradients needs: a "
                     "tensor summed that need not be, or over more ranks than hold its "
                     "contributions (section 7)");
        break;
    case L7_R_PLACE:
        list_of(r->list, v[1], list, sizeof list);
        snprintf(buf, len, "your EP group (world ranks %s) spans both nodes of 2 x %ld: every "
                 "all-to-all crosses the network. On dgx-h100 this step's all-to-all bytes "
                 "take %.1f us across nodes against %.1f us inside one (%.1fx); an EP group of "
                 "%ld fits inside a node (section 4)", list, v[0], x[0] * 1e6, x[1] * 1e6,
                 x[0] / x[1], v[1]);
        break;
    default:
        snprintf(buf, len, "finding %d, which Lab 7's judge does not know", r->code);
    }
}

/* One finding of rank observation o, in words. */
static void word(const struct l7_obs *o, const struct l7_reason *r, char *buf, size_t len)
{
    const long *v = r->v;
    const double *x = r->x;
    char b[32], list[160];
    switch (r->code) {
    case L7_R_IN_FLIGHT:
        snprintf(buf, len, "after moe_free, %ld operation(s) you started on the communicator "
                 "moe_new was given are still in flight: a handle of pl_all_reduce_async (or "
                 "another async call) was never waited. The caller frees that communicator "
                 "after moe_free, and pl_comm_free refuses one with operations in flight; "
                 "pl_wait every handle before the call that started it returns (section 7)",
                 v[0]);
        break;
    case L7_R_EP_SIZE:
        snprintf(buf, len, "moe_ep_comm gives %s; with %ld ranks and ep = %ld the EP groups "
                 "have %ld ranks (moe_new's ep)", v[0] ? "a group of another size" : "no group",
                 v[1], v[2], v[2]);
        break;
    case L7_R_EP_ORDER:
        list_of(r->list, v[0], list, sizeof list);
        snprintf(buf, len, "moe_ep_comm's ranks 0..%ld are ranks %s of the communicator "
                 "moe_new was given, not in its order. The grader hands moe_new a "
                 "communicator split from the job's world with its ranks in another order, as "
                 "a caller with several groups would, and your EP group follows another "
                 "order: the job's world's? (moe.h, section 4)", v[0] - 1, list);
        break;
    case L7_R_BRANCH:
        word_branch(r, buf, len);
        break;
    case L7_R_ROUTING_DIFFERS: {
        char first[GR_WHY_LEN] = "";
        for (int k = 0; o && k < o->n && k < L7_MAX_REASONS; k++)
            if (o->r[k].part == L7_COUNTS) {
                word(o, &o->r[k], first, sizeof first);
                break;
            }
        snprintf(buf, len, "your routing differs from the reference's: %s", first);
        break;
    }
    case L7_R_LOSS:
        snprintf(buf, len, "step %ld: loss %.7f, the reference %.7f (relative error %.1e, more "
                 "than %.0e)", v[0], x[0], x[1], x[2], x[3]);
        break;
    case L7_R_TENSOR:
        word_tensor(r, buf, len);
        break;
    case L7_R_HELD_EVERY:
        snprintf(buf, len, "every step left more allocations live than the one before (%ld "
                 "after step 0, %ld after step %ld; %s more %s): moe_forward or moe_backward "
                 "keeps what it allocates, so memory grows until a long run runs out "
                 "(section 4)", v[0], v[1], v[2],
                 pl_format_bytes(x[0], b, sizeof b), pl_mem_cat_name((enum pl_mem_cat)v[3]));
        break;
    case L7_R_HELD_FREED:
        snprintf(buf, len, "after moe_free the ledger still holds %s of %s that it did not "
                 "hold before moe_new: moe_free frees everything moe_new and the calls "
                 "allocated (section 4)", pl_format_bytes(x[0], b, sizeof b),
                 pl_mem_cat_name((enum pl_mem_cat)v[0]));
        break;
    case L7_R_DLN:
        snprintf(buf, len, "moe_backward of block %ld, called with dln holding other gradients, "
                 "%s; moe.h says dln += d(objective)/d(ln): the caller may sum several "
                 "branches' gradients in it (section 6)",
                 v[0], v[1] ? "threw them away" : "did not keep them as they were");
        break;
    case L7_R_LAST_EARLY:
        snprintf(buf, len, "moe_last_routing(0) gives a routing before any moe_forward has "
                 "run; moe.h says NULL until then, so that a caller cannot take an empty "
                 "routing for a real one");
        break;
    case L7_R_LAST_NULL:
        snprintf(buf, len, "moe_last_routing(%ld) is NULL after a forward", v[0]);
        break;
    case L7_R_SHAPE:
        snprintf(buf, len, "block %ld's routing is for N=%ld E=%ld k=%ld with %ld slots; the "
                 "reference routes N=%ld tokens to E=%ld experts, top-%ld, %ld slots", v[0],
                 v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]);
        break;
    case L7_R_IN_BLOCK:
        snprintf(buf, len, "in block %ld", v[0]);
        break;
    default:
        if (r->code <= L7_R_INV) word_route(r, buf, len);
        else word_traffic(r, buf, len);
    }
}

/* Part time: the rank furthest beyond its share (the lowest of equals), its figures and
 * rank 0's replay; full marks up to L7_TL_FULL times the work, none from L7_TL_NONE. */
static int judge_time(const struct gr_obs *all, struct gr_why *why, const char *in)
{
    const struct l7_obs *o0 = gr_obs_rank(all, 0), *w = o0;
    if (!o0->timed) return 1;
    int worst = 0;
    for (int r = 1; r < all->nranks; r++) {
        const struct l7_obs *o = gr_obs_rank(all, r);
        if (o->ratio > w->ratio) worst = r, w = o;
    }
    double v = w->ratio;
    double fraction = v <= L7_TL_FULL ? 1 : v >= L7_TL_NONE ? 0
                    : (L7_TL_NONE - v) / (L7_TL_NONE - L7_TL_FULL);
    char step[200] = "";
    if (o0->replayed)
        snprintf(step, sizeof step, "your MoE layers' forward and backward take %.2f ms on the "
                 "slowest rank, modelled on %s at a Mixtral-sized layer; ", o0->step_ms,
                 L7_TL_PROFILE);
    char text[1024];
    snprintf(text, sizeof text, "%srank %d, the one furthest beyond its share, computes for "
             "%.2f ms where its own experts' routed rows and its router need %.2f ms (%.2fx; "
             "full marks up to %.2fx, none from %.2fx)%s", step, worst, w->did_ms, w->need_ms,
             v, L7_TL_FULL, L7_TL_NONE,
             v > L7_TL_FULL ? ": your experts computed more rows than were routed to them "
                              "(section 5)" : "");
    if (fraction > 0) {
        gr_why_partial(why, fraction);
        gr_why_say(why, "%s", text);
        return 1;
    }
    gr_why_say(why, "%s%s", all->nranks > 1 ? "rank 0: " : "", text);
    gr_why_say(why, "in: %s", in);
    return 0;
}

int l7_judge(const char *part, const struct gr_obs *all, struct gr_why *why)
{
    int p = 0;
    while (p < L7_NPARTS && strcmp(part, L7_PART_NAMES[p])) p++;
    if (p == L7_NPARTS) {
        gr_why_say(why, "Lab 7 judges correct, counts, traffic, placement and time, not %s",
                   part);
        return 0;
    }
    const struct l7_obs *o0 = gr_obs_rank(all, 0);
    char in[512] = "";
    if (o0->op == L7_OP_TRAIN) l7_describe_case(&o0->tc, o0->N, all->nranks, in, sizeof in);
    if (p == L7_TIME) return judge_time(all, why, in);
    for (int r = 0; r < all->nranks; r++) {
        const struct l7_obs *o = gr_obs_rank(all, r);
        int said = 0;
        for (int k = 0; k < o->n && k < L7_MAX_REASONS; k++) {
            if (o->r[k].part != p) continue;
            char line[GR_WHY_LEN];
            word(o, &o->r[k], line, sizeof line);
            if (!said++ && all->nranks > 1) gr_why_say(why, "rank %d: %s", r, line);
            else gr_why_say(why, "%s", line);
        }
        if (!said) continue;
        if (o0->op == L7_OP_TRAIN) gr_why_say(why, "in: %s", in);
        return 0;
    }
    return 1;
}
