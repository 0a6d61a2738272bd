/* cases.c: one case of Lab 3's check mode: the ZeRO group split from the world, the
 * single-device reference measured, the student's stage trained for L3_STEPS AdamW steps on
 * every rank's slice of each global batch with its bytes by collective kind (traffic ledger),
 * each category's peak (memory ledger), the gradient each update is given (gradients.c), the
 * replicas after each step, the losses and the trained parameters against the reference:
 * all recorded as figures in this rank's observation (struct l3_obs), for judge.c. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_comm.h"
#include "fileio.h"
#include "lab03.h"
#include "prefetch.h"
#include "todo.h"

/* ---- the run's model and data ---- */

struct pl_model_config l3_graded_config(uint64_t seed)
{
    struct pl_model_config c = pl_model_config_default();
    c.vocab = L3_VOCAB;
    c.d_model = L3_D_MODEL;
    c.n_layers = L3_N_LAYERS;
    c.n_heads = L3_N_HEADS;
    c.d_ff = L3_D_FF;
    c.seq_len = L3_SEQ_LEN;
    c.dropout = 0.0f;
    c.n_experts = 0;
    c.seed = pl_mix64(seed * 7919u + 3);
    return c;
}

struct gr_train_setup l3_graded_setup(const struct pl_tokens *data, uint64_t seed)
{
    struct gr_train_setup s;
    memset(&s, 0, sizeof s);
    s.cfg = l3_graded_config(seed);
    s.opt = pl_adamw_config_default();
    s.data = data;
    s.global_B = L3_GLOBAL_B;
    s.steps = L3_STEPS;
    s.data_seed = pl_mix64(seed + 11);
    return s;
}

/* ---- check mode ---- */

void l3_mem_current(double *out)
{
    struct pl_mem_stats st;
    pl_mem_get_stats(&st);
    for (int c = 0; c < PL_MEM_NCAT; c++) out[c] = (double)st.current[c];
}

static int run_student(struct l3_state *l, int stage, int prefetch,
                       const struct gr_train_setup *setup, struct l3_obs *v, double *losses,
                       struct zero **out, const struct pl_model_layout *lay,
                       struct zero_layout *e, struct gr_batch *bp, double *base,
                       double *before, double *after);

/* The mean over the group's ranks of each rank's loss: the loss of the group's global batch
 * (raw MPI, unseen by the traffic ledger). */
static double group_loss(const struct l3_group *g, double mine)
{
    double sum = 0;
    PL_CHECK_MPI(MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, g->mpi));
    return sum / g->n;
}

/* The peaks of the window so far (since base) folded into v's. */
static void fold_peaks(struct l3_obs *v, const double *base)
{
    struct pl_mem_stats st;
    pl_mem_get_stats(&st);
    double base_total = 0;
    for (int c = 0; c < PL_MEM_NCAT; c++) {
        double p = (double)st.peak[c] - base[c];
        if (p > v->peak[c]) v->peak[c] = p;
        base_total += base[c];
    }
    double t = (double)st.peak_total - base_total;
    if (t > v->peak_total) v->peak_total = t;
}

/* Collective: stages 1 and 2 end a step with the whole model on every rank, and every rank
 * must hold the same one, bit for bit, or the replicas drift apart a little more each step.
 * Records this rank's digest of its parameters after step `step` and, the first time they
 * differ from its group's first rank's, where; 0 on every rank when any rank's differ. */
static int replicas_after_step(struct l3_state *l, const struct zero *z,
                               const struct pl_model_layout *lay, const struct zero_layout *e,
                               int step)
{
    float *flat = l3_flat_params(z, e, l->grp.mpi);
    float *root = malloc((e->numel ? e->numel : 1) * sizeof *root);
    memcpy(root, flat, e->numel * sizeof *root);
    PL_CHECK_MPI(MPI_Bcast(root, (int)e->numel, MPI_FLOAT, 0, l->grp.mpi));
    long first = -1;
    for (size_t k = 0; k < e->numel && first < 0; k++)
        if (memcmp(&flat[k], &root[k], sizeof(float))) first = (long)k;
    l->ob->replica.digest[step] = pl_fnv1a(PL_FNV1A_START, flat, e->numel * sizeof *flat);
    l->ob->replica.steps = step + 1;
    free(root);
    free(flat);
    if (first >= 0 && l->ob->replica.step < 0) {
        const struct pl_param_desc *t = gr_tensor_at(lay, (size_t)first);
        l->ob->replica.step = step;
        l->ob->replica.elem = (double)first;
        for (int u = 0; u < e->nunits; u++)
            if ((size_t)first >= e->unit[u].offset &&
                (size_t)first < e->unit[u].offset + e->unit[u].numel)
                l->ob->replica.owner = (int)(((size_t)first - e->unit[u].offset) / e->unit[u].chunk);
        snprintf(l->ob->replica.tensor, sizeof l->ob->replica.tensor, "%s", t ? t->name : "?");
    }
    int equal = first < 0, all_equal;
    PL_CHECK_MPI(MPI_Allreduce(&equal, &all_equal, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    return all_equal;
}

/* Runs the student's stage (zero_new's prefetch flag as given) for L3_STEPS steps on this rank,
 * filling v; losses[L3_STEPS] get the global loss of each step. Returns 0 when it stopped at a
 * stub. */
static int train_student(struct l3_state *l, int stage, int prefetch,
                         const struct gr_train_setup *setup, struct l3_obs *v,
                         double *losses, struct zero **out)
{
    int n = l->grp.n, me = l->grp.rank;
    double base[PL_MEM_NCAT], before[PL_MEM_NCAT], after[PL_MEM_NCAT];
    /* What the driver itself needs is allocated before the window opens. */
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, &setup->cfg);
    struct gr_batch b;
    gr_batch_new(&b, setup, me, n);
    gr_unseen_begin(1);
    l3_host_begin(&l->watch);
    int reached = run_student(l, stage, prefetch, setup, v, losses, out, &lay, &l->mine, &b, base,
                              before, after);
    v->unseen = gr_unseen_end();
    v->on_host = l3_host_end(&l->watch);
    gr_batch_free(&b);
    pl_model_layout_free(&lay);
    return reached;
}

static int run_student(struct l3_state *l, int stage, int prefetch,
                       const struct gr_train_setup *setup, struct l3_obs *v, double *losses,
                       struct zero **out, const struct pl_model_layout *lay,
                       struct zero_layout *e, struct gr_batch *bp, double *base,
                       double *before, double *after)
{
    int n = l->grp.n, me = pl_rank();
    l3_mem_current(base);
    pl_mem_reset_peak();
    pl_todo_reset();
    if (l->grp.ngroups > 1)
        gr_case("zero_new(stage %d, prefetch %d) on a communicator of %d ranks split from the "
                "world of %d (rank %d of the world is rank %d of its group)", stage, prefetch,
                n, pl_size(), me, l->grp.rank);
    else
        gr_case("zero_new(stage %d, prefetch %d) on %d ranks", stage, prefetch, n);
    struct zero *z = zero_new(&setup->cfg, &setup->opt, stage, prefetch, l->grp.comm);
    *out = z;
    if (gr_todo_any()) return 0;
    if (!z) v->null_field = 5;
    else if (!z->params) v->null_field = 1;
    else if (!z->grads) v->null_field = 2;
    else if (!z->m || !z->v) v->null_field = 3;
    else if (!z->pass) v->null_field = 4;
    int bad = v->null_field, any_bad;
    PL_CHECK_MPI(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (any_bad) return 1;

    /* The layout every offset below is read by: this rank's z->zl, cut as the group's first
     * rank's (checked first, so that shards of different sizes are named for that) and
     * keeping zero.h's invariants. */
    struct l3_layout_diff *d = &v->layout;
    struct zero_layout g0 = z->zl;
    PL_CHECK_MPI(MPI_Bcast(&g0, (int)sizeof g0, MPI_BYTE, 0, l->grp.mpi));
    if (l3_same_cut(&z->zl, &g0, d) && l3_judge_layout(lay, n, l->grp.rank, &z->zl, d) &&
        z->stage != stage) {
        d->code = L3_LD_STAGE;
        d->got[0] = z->stage;
        d->want[0] = stage;
    }
    d->psi = (double)lay->numel;
    d->n = n;
    d->rank = me;
    if (d->code) { /* whose fault: zero_layout_init's cut, or zero_new's copy of it */
        struct zero_layout own;
        struct l3_layout_diff same;
        memset(&own, 0, sizeof own);
        zero_layout_init(&own, lay, n, l->grp.rank);
        d->altered = !l3_same_cut(&z->zl, &own, &same) || z->zl.rank != own.rank ||
                     z->zl.n != own.n;
    }
    bad = d->code != 0;
    PL_CHECK_MPI(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (any_bad) return 1;
    *e = z->zl;
    l->e0 = g0;
    l->e0.rank = 0;
    v->shape = l3_shape_of(&l->e0);
    /* zero.h's buffer sizes, then its zero padding, before anything reads by the layout */
    bad = !l3_check_buffers(z, e, v);
    PL_CHECK_MPI(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (any_bad) return 1;
    l3_check_padding(z, e, 1, v);

    v->leak_step = -1;
    for (int s = 0; s < L3_STEPS; s++) {
        gr_batch_load(bp, s);
        l3_mem_current(before);
        struct pl_ledger mark, d;
        gr_ledger_mark(&mark);
        gr_case("zero_step %d of %d (stage %d, %d ranks, %d sequences each)", s + 1, L3_STEPS,
                stage, n, bp->B);
        l3_prefetch_step_begin(&l->pf, s, L3_STEPS);
        l3_grads_begin(&l->watch, lay->numel);
        double loss = zero_step(z, bp->tokens, bp->targets, bp->B);
        l3_grads_end(&l->watch);
        l3_prefetch_step_end(&l->pf, s, L3_STEPS);
        gr_ledger_since(&mark, &d);
        if (gr_todo_any()) return 0;
        /* The grader's own checks below allocate: the window pauses for them. */
        fold_peaks(v, base);
        v->loss.mine[s] = loss;
        l3_check_padding(z, e, s + 2, v);
        if (l->grads_on && !l->grads_bad &&
            !l3_grads_observe(&l->watch, &l->ref, s, setup->opt.grad_clip, e, l->grp.mpi,
                              &v->grads))
            l->grads_bad = 1;
        if (l->grads_on && !l->grads_bad && stage != 3 && !replicas_after_step(l, z, lay, e, s))
            l->grads_bad = 1;
        l3_mem_current(after);
        /* Activations are the kit's, kept from one step to the next. */
        for (int c = 0; c < PL_MEM_NCAT; c++)
            if (c != PL_MEM_ACTIV && after[c] > before[c] && v->leak_step < 0) {
                v->leak_step = s;
                for (int k = 0; k < PL_MEM_NCAT; k++)
                    v->leak[k] = k != PL_MEM_ACTIV && after[k] > before[k] ? after[k] - before[k]
                                                                           : 0;
            }
        for (int k = 0; k < PL_NKINDS; k++) {
            v->bytes[s][k] = pl_ledger_bytes(&d, k, -1);
            v->calls[s][k] = d.calls[k];
        }
        losses[s] = group_loss(&l->grp, loss);
        v->steps_done = s + 1;
        pl_mem_reset_peak();
    }
    fold_peaks(v, base);
    return 1;
}

/* The workspace the kit's own zero_pass needs for a forward and a backward on this rank's
 * slice, parameters and gradients whole (filed as such): what a stage's workspace may be,
 * measured here rather than taken from the single-device run on the whole batch. */
static double kit_pass_work(const struct l3_group *grp, const struct gr_train_setup *setup)
{
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, &setup->cfg);
    struct gr_batch b;
    gr_batch_new(&b, setup, grp->rank, grp->n);
    gr_batch_load(&b, 0);
    float *p = pl_mem_alloc(lay.numel * sizeof(float), PL_MEM_PARAMS, PL_DEVICE, "lab03 p");
    float *g = pl_mem_alloc(lay.numel * sizeof(float), PL_MEM_GRADS, PL_DEVICE, "lab03 g");
    pl_model_init_flat(&lay, 0, lay.numel, p);
    struct pl_mem_stats st;
    pl_mem_get_stats(&st);
    double before = (double)st.current[PL_MEM_WORK];
    pl_mem_reset_peak();
    struct zero_pass *pass = zero_pass_new(&setup->cfg);
    zero_pass_begin(pass, b.tokens, b.targets, b.B);
    int L = setup->cfg.n_layers;
    size_t off, len;
    for (int part = -1; part <= L; part++) {
        pl_model_part_range(&lay, part, &off, &len);
        zero_forward_part(pass, part, p + off);
    }
    for (int part = L; part >= -1; part--) {
        pl_model_part_range(&lay, part, &off, &len);
        zero_backward_part(pass, part, p + off, g + off);
    }
    pl_mem_get_stats(&st);
    zero_pass_free(pass);
    pl_mem_free(g);
    pl_mem_free(p);
    gr_batch_free(&b);
    pl_model_layout_free(&lay);
    return (double)st.peak[PL_MEM_WORK] - before;
}

/* Memory DDP holds per rank: the single-device reference, measured while it trains. */
void l3_measure_reference(struct gr_reference *ref, const struct gr_train_setup *setup,
                              double *ddp)
{
    double base[PL_MEM_NCAT];
    l3_mem_current(base);
    pl_mem_reset_peak();
    gr_reference_run(ref, setup);
    struct pl_mem_stats st;
    pl_mem_get_stats(&st);
    ddp[0] = (double)st.peak[PL_MEM_PARAMS] - base[PL_MEM_PARAMS];
    ddp[1] = (double)st.peak[PL_MEM_GRADS] - base[PL_MEM_GRADS];
    ddp[2] = (double)st.peak[PL_MEM_OPTIM] - base[PL_MEM_OPTIM];
    ddp[3] = (double)st.peak[PL_MEM_WORK] - base[PL_MEM_WORK];
    ddp[4] = (double)st.peak[PL_MEM_ACTIV] - base[PL_MEM_ACTIV];
}

/* On 4 ranks and more (an even count), a last case splits the world into two ZeRO groups of
 * n/2, the first and the second half of the world, each ordered against the world (on 4
 * ranks no rank's group rank is its world rank), each training its own batches against its own single-device reference, with
 * another model shape and AdamW setting drawn from the seed: code that takes pl_rank(),
 * pl_size() or pl_comm_world() for the communicator it was given gets other numbers. */
int l3_has_groups(void)
{
    return pl_size() >= 4 && pl_size() % 2 == 0;
}

/* Collective: case i's ZeRO group (g), split from the world. */
void l3_group_open(struct l3_group *g, int i)
{
    int me = pl_rank();
    g->ngroups = i == L3_CASE_GROUPS ? 2 : 1;
    g->color = me / (pl_size() / g->ngroups);
    int key = g->ngroups > 1 ? -me : me; /* groups: the world's order reversed */
    g->comm = pl_comm_split(pl_comm_world(), g->color, key, "zero");
    PL_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, g->color, key, &g->mpi));
    g->n = pl_comm_size(g->comm);
    g->rank = pl_comm_rank(g->comm);
    int raw;
    PL_CHECK_MPI(MPI_Comm_rank(g->mpi, &raw));
    PL_REQUIRE(raw == g->rank, "the grader's group rank %d differs from the library's %d", raw,
               g->rank);
}

/* Collective, after zero_free: frees the case's communicator as the program that owns it
 * would (gr_case_comm_free), keeping in *in_flight (may be NULL) the operations zero_step or
 * zero_new left running on it. */
void l3_group_close(struct l3_group *g, int *in_flight)
{
    if (g->mpi == MPI_COMM_NULL) return;
    int left = gr_case_comm_free(g->comm);
    if (in_flight) *in_flight = left;
    g->comm = NULL;
    PL_CHECK_MPI(MPI_Comm_free(&g->mpi));
}

/* Case i's training setup: the graded model on the batches of this rank's group; the groups
 * case draws another shape and AdamW setting from the seed (odd d_ff, so padding shows on
 * every rank count) and gives each group batches of its own. */
static struct gr_train_setup case_setup(const struct pl_tokens *data, uint64_t seed, int color,
                                        int i)
{
    struct gr_train_setup s = l3_graded_setup(data, seed);
    if (i != L3_CASE_GROUPS) return s;
    uint64_t r = pl_mix64(seed ^ 0x3a09c5u);
    s.cfg.n_layers = 2 + (int)(r % 4);
    s.cfg.d_ff = 65 + 2 * (int)((r >> 8) % 64);
    s.cfg.seq_len = 3 + (int)((r >> 16) % 5);
    s.cfg.vocab = 129 + (int)((r >> 24) % 127);
    s.opt.lr = 3e-3f;
    s.opt.beta1 = 0.8f;
    s.opt.beta2 = 0.99f;
    s.opt.eps = 1e-6f;
    s.opt.weight_decay = 0.3f;
    s.opt.grad_clip = 0.5f;
    s.data_seed = pl_mix64(seed + 11 + 977u * (uint64_t)(color + 1));
    return s;
}

/* What the previous case left. */
void l3_forget_case(struct l3_state *l)
{
    free(l->flat);
    l->flat = NULL;
    if (l->z) zero_free(l->z);
    l->z = NULL;
    l3_group_close(&l->grp, NULL);
    if (l->ref.loss) gr_reference_free(&l->ref);
    memset(&l->ref, 0, sizeof l->ref);
    l->grads_on = 0;
    l->grads_bad = 0;
}

/* Collective, once the student's stage has trained: reads its parameters, frees it with
 * zero_free and records what is still allocated above held, the ledger as it stood before
 * zero_new. zero_free frees everything zero_new and zero_step allocated; a buffer it forgets
 * stays behind after every model a program makes and frees. */
static void read_then_free(struct l3_state *l, const double *held)
{
    l->flat = l3_flat_params(l->z, &l->mine, l->grp.mpi);
    zero_free(l->z);
    l->z = NULL;
    double now[PL_MEM_NCAT];
    l3_mem_current(now);
    for (int c = 0; c < PL_MEM_NCAT; c++) l->ob->left[c] = now[c] > held[c] ? now[c] - held[c] : 0;
}

/* This rank's trained parameters against its group's reference, tensor by tensor: the
 * worst by relative L2 error, a tensor of norm below the model's RMS times sqrt(its size)
 * measured against that floor (train.h's gr_check_params, on this rank alone). */
static void observe_params(const struct l3_state *l, struct l3_params_fig *f)
{
    const struct pl_model_layout *lay = &l->ref.layout;
    const float *want = l->ref.params, *got = l->flat;
    double ms = 0, err2 = 0, ref2 = 0;
    for (size_t i = 0; i < l->ref.numel; i++) ms += (double)want[i] * want[i];
    ms /= (double)(l->ref.numel ? l->ref.numel : 1);
    f->checked = 1;
    f->tensor = -1;
    for (int t = 0; t < lay->n_tensors; t++) {
        const struct pl_param_desc *d = &lay->tensors[t];
        double e2 = 0, r2 = 0, max_abs = 0, worst = -1;
        int bad = 0;
        for (size_t i = d->offset; i < d->offset + d->numel; i++) {
            double g = got[i], r = want[i];
            if (!isfinite(g)) {
                if (!bad) worst = (double)(i - d->offset);
                bad++;
                max_abs = INFINITY;
                continue;
            }
            e2 += (g - r) * (g - r);
            r2 += r * r;
            if (fabs(g - r) > max_abs) {
                max_abs = fabs(g - r);
                worst = (double)(i - d->offset);
            }
        }
        double den = fmax(r2, ms * (double)d->numel);
        double rel = bad ? INFINITY : den > 0 ? sqrt(e2 / den) : sqrt(e2);
        f->nonfinite += bad;
        err2 += e2;
        ref2 += r2;
        if (f->tensor >= 0 && !(rel > f->rel)) continue;
        f->tensor = t;
        f->rel = rel;
        f->max_abs = max_abs;
        f->worst_elem = worst < 0 ? 0 : worst;
        snprintf(f->name, sizeof f->name, "%s", d->name);
        size_t used = (size_t)snprintf(f->shape, sizeof f->shape, "[");
        for (int k = 0; k < d->ndim && used < sizeof f->shape; k++)
            used += (size_t)snprintf(f->shape + used, sizeof f->shape - used, "%s%lld",
                                     k ? ", " : "", (long long)d->shape[k]);
        if (used < sizeof f->shape) snprintf(f->shape + used, sizeof f->shape - used, "]");
    }
    f->overall = f->nonfinite ? INFINITY : ref2 > 0 ? sqrt(err2 / ref2) : sqrt(err2);
}

/* This rank's group's losses against its reference. */
static void observe_losses(const struct l3_state *l, struct l3_obs *o)
{
    double err;
    int bad = gr_check_losses(l->losses, l->ref.loss, L3_STEPS, &err);
    o->loss.step = bad;
    o->loss.got = bad >= 0 ? l->losses[bad] : 0;
    o->loss.want = bad >= 0 ? l->ref.loss[bad] : 0;
    o->loss.err = bad >= 0 ? err : 0;
    for (int s = 0; s < L3_STEPS && !o->loss.rank_off; s++) {
        double e = gr_rel_err(o->loss.mine[s], o->loss.slice[s]);
        if (e <= GR_TOL_LOSS) continue;
        o->loss.rank_off = s + 1;
        o->loss.rank_err = e;
    }
}

/* The case's figures the judge's wording and formulas read. */
static void observe_case(const struct l3_state *l, struct l3_obs *o)
{
    o->rank = pl_rank();
    o->color = l->grp.color;
    o->grp_rank = l->grp.rank;
    o->grp_n = l->grp.n;
    o->ngroups = l->grp.ngroups;
    o->n_layers = l->setup.cfg.n_layers;
    o->d_ff = l->setup.cfg.d_ff;
    o->seq_len = l->setup.cfg.seq_len;
    o->vocab = l->setup.cfg.vocab;
    o->shape = l3_shape_of(&l->e0);
    o->leak_step = -1;
    o->loss.step = -1;
    o->replica.step = -1;
}

void l3_run(struct l3_state *l, int i)
{
    struct l3_obs *o = l->ob;
    if (!l->stage) {
        l3_run_layouts(l->seed, &o->layout, &o->layout_tried);
        return;
    }
    l3_forget_case(l);
    l3_group_open(&l->grp, i);
    l->setup = case_setup(&l->data, l->seed, l->grp.color, i);
    pl_model_layout_free(&l->lay);
    pl_model_layout_init(&l->lay, &l->setup.cfg);
    /* The clip between the shards' norms needs the cut before zero_new has run: the one the
     * code's zero_layout_init gives, when it keeps the invariants. */
    l3_layout_of_code(&l->e0, &l->lay, l->grp.n, 0);
    if (i == L3_CASE_CLIP_OFF) l->setup.opt.grad_clip = 0;
    if (i == L3_CASE_CLIP_SOME_RANKS) { /* the first gradient does not depend on the clip */
        gr_reference_run(&l->ref, &l->setup);
        l->setup.opt.grad_clip = l3_clip_between_shards(&l->ref, &l->e0);
        gr_reference_free(&l->ref);
    }
    observe_case(l, o);
    if (l->grp.ngroups > 1)
        gr_case("the single-device reference of group %d: %d AdamW steps on its %d sequences",
                l->grp.color, L3_STEPS, L3_GLOBAL_B);
    else
        gr_case("the single-device reference: %d AdamW steps on %d sequences", L3_STEPS,
                L3_GLOBAL_B);
    l3_measure_reference(&l->ref, &l->setup, o->ddp);
    l3_slice_losses(&l->ref, l->grp.rank, l->grp.n, o->loss.slice);
    o->pass_work = kit_pass_work(&l->grp, &l->setup);
    l->grads_on = 1;
    int prefetch = l3_case_prefetch(l->stage, i);
    /* the prefetch test replays the trace of the first case */
    int traced = l->trace_prefetch && prefetch && i == L3_CASE_CLIP_DEFAULT;
    l3_prefetch_want(&l->pf, traced);
    double held[PL_MEM_NCAT];
    l3_mem_current(held);
    train_student(l, l->stage, prefetch, &l->setup, o, l->losses, &l->z);
    if (gr_agree(o->steps_done == L3_STEPS && !gr_todo_any())) {
        read_then_free(l, held);
        l3_group_close(&l->grp, &o->in_flight);
        o->trained = 1;
        observe_losses(l, o);
        observe_params(l, &o->params);
    }
    if (traced && pl_rank() == 0)
        l3_prefetch_observe(&l->pf, &l->setup.cfg, L3_GLOBAL_B / pl_size(), &l->e0,
                            &o->prefetch);
}
