/* cases_train.c: Lab 7's training cases (lab07.h): K training steps of the MoE-GPT on the
 * world's ranks as EP groups, the driver running every part but the MoE branch (cases_pass.c),
 * against the single-device reference on the same slices (oracle.c): every step's MoE
 * outputs, loss and gradients, the parameters after K steps, branch written over stale
 * values, dln added into, no memory kept from step to step or after moe_free (correct); the
 * routing of the first step, exactly, and none before it (counts); the all-to-all calls and
 * bytes of the first step from the ledger (traffic); where the EP group sits (placement);
 * the student's MoE calls on the modelled timeline (time). */
#include <math.h>
#include <string.h>

#include "case_comm.h"
#include "lab07.h"

int l7_seq_len(const struct l7_state *st)
{
    return st->hidden ? 12 : 16;
}

/* The largest EP degree at n ranks: all of them up to 4 (and 6 ranks in the hidden suite);
 * at 8, EP groups of 4 (a node's worth on the placement test's 2 nodes of 4) and expert data
 * parallelism across them. */
static int ep_full(int n)
{
    return n <= 4 || n == 6 ? n : 4;
}

/* A smaller EP degree, so that several EP groups hold different slices of the batch (DP x
 * EP): a group mistaken for the world changes the numbers. */
static int ep_part(int n)
{
    return n == 1 ? 1 : n == 2 ? 1 : n == 6 ? 3 : 2;
}

struct pl_model_config l7_config(const struct l7_state *st, uint64_t seed,
                                 const struct l7_train_case *tc)
{
    struct pl_model_config c = pl_model_config_default();
    c.vocab = PL_BYTE_VOCAB;
    c.d_model = 32;
    c.n_layers = 2;
    c.n_heads = 2;
    /* The cases with more experts make them narrower than the model (fine-grained experts,
     * as DeepSeek's are): code that sizes a row of one width by the other's is off there. */
    c.d_ff = tc->E >= 8 ? (st->hidden ? 20 : 24) : (st->hidden ? 40 : 48);
    c.seq_len = l7_seq_len(st);
    c.dropout = 0.0f;
    c.n_experts = tc->E;
    c.top_k = tc->k;
    c.capacity_factor = l7_case_cf(tc);
    c.aux_loss_coef = tc->coef;
    c.seed = seed;
    return c;
}

/* The cases of top-k at n ranks: two expert counts, four capacity factors, then the router
 * pushed to a few experts so that the others receive no tokens. Every contract parameter
 * takes several values: the EP degree (all ranks, or groups smaller than the world), the
 * aux-loss coefficient (0.01, another, and 0), the loss scale (1/n, and others), the factor
 * (dropping, none at E/k, 1e10 and infinity). The hidden suite pairs them differently. */
int l7_make_cases(int k, int n, int hidden, struct l7_train_case *cs)
{
    static const float cfs[] = {0.5f, 1.0f, 1.25f, L7_CF_NONE};
    const int Es[2] = {n == 6 ? 6 : 4, n == 6 ? 12 : 8};
    int count = 0;
    for (int i = 0; i < 2; i++)
        for (int f = 0; f < 4; f++) {
            int odd = (f % 2) ^ hidden;
            struct l7_train_case c = {Es[i], k, odd ? ep_part(n) : ep_full(n), cfs[f], 0.01f,
                                      1.0f, 0};
            if (f == 1) c.coef = hidden ? 0.05f : 0.2f;
            if (f == 3 && i == 1) c.coef = 0.0f;
            if (f == (hidden ? 0 : 1)) c.scale = hidden ? 0.6f : 0.3f;
            if (f == 3) c.scale = 2.0f;
            cs[count++] = c;
        }
    cs[count++] = (struct l7_train_case){Es[1], k, ep_full(n), L7_CF_NONE, 0.01f, 1.0f, 4.0f};
    return count;
}

/* AdamW step t on what this rank holds: the non-expert tensors and its experts. */
static void l7_update_owned(struct pl_model *m, int ep, int ep_rank, int t,
                         const struct pl_adamw_config *opt)
{
    const struct pl_model_layout *lay = &m->layout;
    for (int i = 0; i < lay->n_tensors; i++) {
        size_t off, n;
        l7_or_owned_range(lay, i, ep_rank, ep, &off, &n);
        pl_model_adamw_flat(lay, off, n, m->params + off, m->grads + off, m->adam_m + off,
                            m->adam_v + off, t, opt);
    }
}

/* lab: the communicator the case runs on (this rank's slice is its rank there); the run
 * frees it after moe_free. */
void l7_run_open(struct l7_state *st, struct l7_run *r, const struct pl_tokens *data,
                 const struct l7_train_case *c, int steps, int with_reference,
                 struct pl_comm *lab)
{
    int n = pl_comm_size(lab), me = pl_comm_rank(lab);
    memset(r, 0, sizeof *r);
    r->lab = lab;
    r->loss_scale = c->scale / (float)n;
    r->setup.cfg = l7_config(st, pl_mix64(st->seed ^ 0x1417), c);
    r->setup.opt = pl_adamw_config_default();
    r->setup.opt.grad_clip = 0;
    r->setup.data = data;
    r->setup.global_B = l7_global_b(n);
    r->setup.steps = steps;
    r->setup.data_seed = pl_mix64(st->seed ^ 0x5eed);
    if (with_reference) l7_or_reference_run(&r->ref, &r->setup, n, me, r->loss_scale, c->hot);
    r->m = pl_model_new(&r->setup.cfg, PL_MODEL_ALL);
    if (c->hot > 0) l7_or_push_router(r->m, c->hot);
    gr_batch_new(&r->batch, &r->setup, me, n);
    l7_pass_new(&r->pass, &r->m->cfg, r->batch.B);
    r->host = pl_mem_alloc(r->m->layout.numel * sizeof(float), PL_MEM_WORK, PL_HOST,
                           "grader host");
    r->branches = pl_mem_alloc((size_t)r->m->cfg.n_layers * r->pass.N * r->m->cfg.d_model *
                               sizeof(float), PL_MEM_WORK, PL_HOST, "grader branches");
}

/* Frees the case's communicator after moe_free, as a caller would; one with operations
 * still in flight cannot be freed (pl_comm_free refuses), which is a verdict of part
 * correct. Collective: every rank agrees whether to free it. */
static void free_lab_comm(struct l7_state *st, struct l7_run *r)
{
    if (!r->lab || r->lab == pl_comm_world()) return;
    int mine = gr_case_comm_free(r->lab);
    if (mine) {
        int saved = st->why_part;
        st->why_part = L7_CORRECT;
        l7_note(st, L7_R_IN_FLIGHT, L7_V(mine), NULL);
        st->why_part = saved;
    }
    r->lab = NULL;
}

void l7_run_close(struct l7_state *st, struct l7_run *r)
{
    if (r->moe) moe_free(r->moe);
    r->moe = NULL;
    free_lab_comm(st, r);
    l7_pass_free(&r->pass);
    gr_batch_free(&r->batch);
    pl_model_free(r->m);
    l7_or_reference_free(&r->ref);
    pl_mem_free(r->host);
    pl_mem_free(r->branches);
}

/* One training step of the student's MoE; 0 when a stub was reached. */
int l7_train_step(struct l7_state *st, struct l7_run *r, int step, double *loss)
{
    pl_model_zero_grad(r->m);
    gr_batch_load(&r->batch, step);
    double mine = l7_pass_forward(st, &r->pass, r->m, r->moe, &r->batch, r->branches);
    if (gr_todo_any()) return 0;
    l7_pass_backward(st, &r->pass, r->m, r->moe, r->loss_scale);
    moe_finish_gradients(r->moe);
    if (gr_todo_any()) return 0;
    *loss = gr_global_loss(mine);
    return 1;
}

/* The judges of one step: what went wrong first goes into the part's reason. */
static int judge_step(struct l7_state *st, struct l7_run *r, int step, double loss,
                      const struct pl_ledger *delta)
{
    const int C = r->m->cfg.d_model;
    if (step == 0) {
        st->why_part = L7_COUNTS;
        l7_judge_counts(st, &r->ref, r->moe);
        st->why_part = L7_TRAFFIC;
        if (pl_size() > 1) l7_judge_traffic(st, &r->ref, delta);
        st->why_part = L7_PLACEMENT;
        l7_judge_placement(st, &r->ref, delta);
    }
    st->why_part = L7_CORRECT;
    int branches = l7_judge_branches(st, &r->ref, r->branches, r->pass.stale_h, C, step);
    if (branches != 1) {
        if (step == 0 && branches == 0 && l7_noted(st, L7_COUNTS))
            l7_note(st, L7_R_ROUTING_DIFFERS, NULL, NULL);
        return 0;
    }
    double e = gr_rel_err(loss, r->ref.loss[step]);
    if (!(e <= GR_TOL_LOSS)) {
        l7_note(st, L7_R_LOSS, L7_V(step), L7_X(loss, r->ref.loss[step], e, GR_TOL_LOSS));
        return 0;
    }
    pl_to_host(r->host, r->m->grads, r->ref.numel * sizeof(float));
    return l7_judge_tensors(st, &r->ref, r->host, r->ref.grads + (size_t)step * r->ref.numel,
                            GR_TOL_GRADS, step);
}

/* The case part time is judged on: 8 experts, so that each of up to 4 ranks owns several,
 * and capacity factor 1.25, so that most choices are kept. */
static int timed_case(const struct l7_state *st, const struct l7_train_case *c)
{
    return c->E == 8 && c->cf == 1.25f && c->hot == 0 && !st->hidden;
}

/* Part time's figures of the first step just traced (collective). */
static void record_time(struct l7_state *st, struct l7_run *r)
{
    double fx, bx, fig[4];
    l7_model_scale(r->pass.N, &r->m->cfg, &fx, &bx);
    l7_tl_record(&st->tl, &r->ref, fx, bx, fig, &st->ob->replayed);
    st->ob->timed = 1;
    st->ob->did_ms = fig[0];
    st->ob->need_ms = fig[1];
    st->ob->ratio = fig[2];
    st->ob->step_ms = fig[3];
}

/* After the last step (collective): moe.h says moe_backward adds into dln. The last block's
 * forward and backward twice on the same batch and parameters, from dln = 0 and from dln =
 * dbranch: the second must be the first plus dbranch. The gradients it accumulates are no
 * longer judged. */
static void judge_dln_adds(struct l7_state *st, struct l7_run *r)
{
    struct l7_pass *ps = &r->pass;
    const int l = ps->c->n_layers - 1;
    const size_t NC = (size_t)ps->N * ps->c->d_model;
    const float scale = r->loss_scale;
    float *h = pl_mem_alloc(3 * NC * sizeof(float), PL_MEM_WORK, PL_HOST, "dln probe");
    float *first = h, *second = h + NC, *held = h + 2 * NC;
    l7_pass_forward(st, ps, r->m, r->moe, &r->batch, NULL);
    pl_zero(ps->dln, NC);
    moe_backward(r->moe, l, ps->dbranch, ps->dln, scale);
    pl_to_host(first, ps->dln, NC * sizeof(float));
    l7_pass_forward(st, ps, r->m, r->moe, &r->batch, NULL);
    pl_copy(ps->dln, ps->dbranch, NC);
    pl_to_host(held, ps->dln, NC * sizeof(float));
    moe_backward(r->moe, l, ps->dbranch, ps->dln, scale);
    pl_to_host(second, ps->dln, NC * sizeof(float));
    for (size_t i = 0; i < NC; i++) second[i] -= first[i];
    double sc;
    int bad = 0;
    double rel = l7_rel_l2(second, held, NC, 0, &sc, &bad);
    st->why_part = L7_CORRECT;
    if (bad || rel > 1e-3) l7_note(st, L7_R_DLN, L7_V(l, fabs(sc) < 0.05), NULL);
    pl_mem_free(h);
}

/* What the code under test holds: not more allocations after every step than after the
 * one before (a buffer allocated once on first use, or replaced by a larger one, is no
 * leak: the routing bounds it, and tests/alt/07-moe/backward_scratch_grown is right), and
 * nothing after moe_free that it did not hold before moe_new. before: the ledger before
 * moe_new; held[s]: after step s; freed: after moe_free (NULL: not yet). */
static void judge_held(struct l7_state *st, const struct pl_mem_stats *before,
                       const struct pl_mem_stats *held,
                       const struct pl_mem_stats *freed)
{
    int cat, every = 1;
    st->why_part = L7_CORRECT;
    for (int s = 1; s < L7_K_STEPS; s++) every &= held[s].live_allocs > held[s - 1].live_allocs;
    double more = gr_mem_grown(&held[0], &held[L7_K_STEPS - 1], &cat);
    if (!freed && every) {
        l7_note(st, L7_R_HELD_EVERY, L7_V((long)held[0].live_allocs,
                                          (long)held[L7_K_STEPS - 1].live_allocs,
                                          L7_K_STEPS - 1, cat), L7_X(more));
        return;
    }
    more = freed ? gr_mem_grown(before, freed, &cat) : 0;
    if (more > 0) l7_note(st, L7_R_HELD_FREED, L7_V(cat), L7_X(more));
}

void l7_run_training(struct l7_state *st, const struct l7_train_case *c)
{
    struct l7_run r;
    /* the case's ranks in reverse order of the world's: code that takes pl_rank() or
     * pl_comm_world() for the communicator it was given gets other groups and experts */
    int n = pl_size();
    struct pl_comm *lab = pl_comm_split(pl_comm_world(), 0, n - 1 - pl_rank(), "moe lab");
    l7_run_open(st, &r, &st->data, c, L7_K_STEPS, 1, lab);
    struct pl_mem_stats before, held[L7_K_STEPS];
    pl_mem_get_stats(&before);
    r.moe = moe_new(lab, r.m, r.pass.N, c->ep);
    if (gr_todo_any()) {
        l7_run_close(st, &r);
        return;
    }
    st->why_part = L7_CORRECT;
    if (!l7_learn_ep_group(st, &r.ref, r.moe, lab, c->ep)) {
        l7_run_close(st, &r);
        return;
    }
    st->why_part = L7_COUNTS;
    if (moe_last_routing(r.moe, 0)) l7_note(st, L7_R_LAST_EARLY, NULL, NULL);
    int ok = 1, timed = st->tl.wanted && timed_case(st, c);
    for (int step = 0; step < L7_K_STEPS; step++) {
        struct pl_ledger mark, delta;
        gr_ledger_mark(&mark);
        double loss = 0;
        st->tracing = timed && step == 0;
        if (st->tracing) l7_tl_start(&st->tl);
        int ran = l7_train_step(st, &r, step, &loss);
        st->tracing = 0;
        if (!ran) {
            l7_run_close(st, &r);
            return;
        }
        if (timed && step == 0) record_time(st, &r);
        gr_ledger_since(&mark, &delta);
        if (ok) ok = judge_step(st, &r, step, loss, &delta);
        l7_update_owned(r.m, r.ref.ep, r.ref.ep_rank, step + 1, &r.setup.opt);
        pl_mem_get_stats(&held[step]);
    }
    pl_to_host(r.host, r.m->params, r.ref.numel * sizeof(float));
    st->why_part = L7_CORRECT;
    if (ok) ok = l7_judge_tensors(st, &r.ref, r.host, r.ref.params, GR_TOL_PARAMS, -1);
    judge_held(st, &before, held, NULL);
    judge_dln_adds(st, &r);
    moe_free(r.moe);
    r.moe = NULL;
    struct pl_mem_stats freed;
    pl_mem_get_stats(&freed);
    if (!l7_noted(st, L7_CORRECT)) judge_held(st, &before, held, &freed);
    free_lab_comm(st, &r);
    l7_run_close(st, &r);
}
