/* train.c: the helpers of train.h that the drivers of the training labs share: the
 * single-device reference run, batches, comparisons with the
 * DESIGN tolerances, ledger deltas and the modelled overlap. */
#include "train.h"

#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "mem.h"
#include "ops.h"
#include "runtime.h"

/* ---- batches ---- */

void gr_batch_new(struct gr_batch *b, const struct gr_train_setup *s, int rank, int nranks)
{
    memset(b, 0, sizeof *b);
    pl_loader_init(&b->loader, s->data, s->global_B, s->cfg.seq_len, rank, nranks,
                   s->data_seed);
    b->B = b->loader.local_B;
    b->T = s->cfg.seq_len;
    size_t bytes = (size_t)b->B * (size_t)b->T * sizeof(int);
    b->h_tokens = pl_mem_alloc(bytes, PL_MEM_WORK, PL_HOST, "grader batch tokens");
    b->h_targets = pl_mem_alloc(bytes, PL_MEM_WORK, PL_HOST, "grader batch targets");
    if (pl_gpu_build()) {
        b->tokens = pl_mem_alloc(bytes, PL_MEM_WORK, PL_DEVICE, "grader batch tokens (device)");
        b->targets = pl_mem_alloc(bytes, PL_MEM_WORK, PL_DEVICE,
                                  "grader batch targets (device)");
    } else {
        b->tokens = b->h_tokens;
        b->targets = b->h_targets;
    }
}

void gr_batch_load(struct gr_batch *b, int64_t step)
{
    pl_loader_batch(&b->loader, step, b->h_tokens, b->h_targets);
    if (b->tokens != b->h_tokens) {
        size_t bytes = (size_t)b->B * (size_t)b->T * sizeof(int);
        pl_to_device(b->tokens, b->h_tokens, bytes);
        pl_to_device(b->targets, b->h_targets, bytes);
    }
}

void gr_batch_free(struct gr_batch *b)
{
    if (b->tokens != b->h_tokens) {
        pl_mem_free(b->tokens);
        pl_mem_free(b->targets);
    }
    pl_mem_free(b->h_tokens);
    pl_mem_free(b->h_targets);
    pl_loader_free(&b->loader);
    memset(b, 0, sizeof *b);
}

/* ---- the single-device reference ---- */

void gr_reference_run(struct gr_reference *ref, const struct gr_train_setup *setup)
{
    memset(ref, 0, sizeof *ref);
    ref->setup = *setup;
    pl_model_layout_init(&ref->layout, &setup->cfg);
    ref->numel = ref->layout.numel;
    size_t bytes = ref->numel * sizeof(float);
    ref->loss = pl_mem_alloc((size_t)setup->steps * sizeof *ref->loss, PL_MEM_WORK, PL_HOST,
                             "reference losses");
    ref->init = pl_mem_alloc(bytes, PL_MEM_WORK, PL_HOST, "reference initial params");
    ref->params = pl_mem_alloc(bytes, PL_MEM_WORK, PL_HOST, "reference final params");
    ref->grads = pl_mem_alloc(bytes * (size_t)setup->steps, PL_MEM_WORK, PL_HOST,
                              "reference gradients");

    struct pl_model *m = pl_model_new(&setup->cfg, PL_MODEL_ALL);
    pl_to_host(ref->init, m->params, bytes);
    struct gr_batch b;
    gr_batch_new(&b, setup, 0, 1);
    for (int s = 0; s < setup->steps; s++) {
        gr_batch_load(&b, s);
        /* pl_model_step, with the gradient kept between backward and update. */
        struct pl_model_ctx ctx = pl_model_ctx_eval();
        ctx.train = 1; /* dropout, where the config has it, as one device trains */
        ctx.step = (uint64_t)m->adam_t + 1;
        pl_model_zero_grad(m);
        ref->loss[s] = pl_model_forward(m, b.tokens, b.targets, b.B, &ctx);
        pl_model_backward(m, &ctx);
        pl_to_host(ref->grads + (size_t)s * ref->numel, m->grads, bytes);
        pl_model_update(m, &setup->opt);
    }
    pl_to_host(ref->params, m->params, bytes);
    gr_batch_free(&b);
    pl_model_free(m);
}

void gr_reference_free(struct gr_reference *ref)
{
    pl_mem_free(ref->loss);
    pl_mem_free(ref->init);
    pl_mem_free(ref->params);
    pl_mem_free(ref->grads);
    pl_model_layout_free(&ref->layout);
    memset(ref, 0, sizeof *ref);
}

/* ---- comparisons ---- */

double gr_rel_err(double got, double ref)
{
    double d = fabs(got - ref), r = fabs(ref);
    if (!isfinite(got)) return INFINITY;
    return d / (r > 1e-30 ? r : 1e-30);
}

double gr_global_loss(double local_loss)
{
    double sum = 0;
    PL_CHECK_MPI(MPI_Allreduce(&local_loss, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    return sum / pl_size();
}

int gr_check_losses(const double *got, const double *ref, int steps, double *err)
{
    for (int s = 0; s < steps; s++) {
        double e = gr_rel_err(got[s], ref[s]);
        if (!(e <= GR_TOL_LOSS)) {
            if (err) *err = e;
            return s;
        }
    }
    if (err) *err = 0;
    return -1;
}

const struct pl_param_desc *gr_tensor_at(const struct pl_model_layout *lay, size_t i)
{
    for (int t = 0; t < lay->n_tensors; t++) {
        const struct pl_param_desc *d = &lay->tensors[t];
        if (i >= d->offset && i < d->offset + d->numel) return d;
    }
    return NULL;
}

/* Per tensor: squared error, squared reference norm, largest element error and where, and
 * non-finite elements, over the part of [offset, offset+n) the tensor covers. */
struct tensor_sums {
    double err2, ref2, max_abs;
    double worst_elem; /* as double, so the reduction can move it with max_abs */
    double nonfinite;
};

static void tensor_sums(const struct gr_reference *ref, const float *want, size_t offset,
                        size_t n, const float *got, struct tensor_sums *ts)
{
    const struct pl_model_layout *lay = &ref->layout;
    for (int t = 0; t < lay->n_tensors; t++) {
        const struct pl_param_desc *d = &lay->tensors[t];
        size_t lo = offset > d->offset ? offset : d->offset;
        size_t hi = offset + n < d->offset + d->numel ? offset + n : d->offset + d->numel;
        struct tensor_sums *s = &ts[t];
        memset(s, 0, sizeof *s);
        s->worst_elem = -1;
        for (size_t i = lo; i < hi; i++) {
            double g = got[i - offset], r = want[i];
            if (!isfinite(g)) {
                s->nonfinite += 1;
                if (s->max_abs != INFINITY) s->worst_elem = (double)(i - d->offset);
                s->max_abs = INFINITY;
                continue;
            }
            double e = g - r;
            s->err2 += e * e;
            s->ref2 += r * r;
            if (fabs(e) > s->max_abs) {
                s->max_abs = fabs(e);
                s->worst_elem = (double)(i - d->offset);
            }
        }
    }
}

/* ||got - ref|| / ||ref||, where a tensor whose norm is below the whole model's RMS times
 * sqrt(its size) -- a bias or layernorm shift that started at zero -- is measured against
 * that floor instead, so rounding alone never fails it, while a wrong update still does. */
static double tensor_rel(const struct tensor_sums *s, double floor2)
{
    if (s->nonfinite > 0) return INFINITY;
    double den = s->ref2 > floor2 ? s->ref2 : floor2;
    return den > 0 ? sqrt(s->err2 / den) : sqrt(s->err2);
}

/* Tensor t's sums over the ranks holding pieces of it (all: every rank's nt sums). */
static void add_shards(const struct tensor_sums *all, int nt, int nranks, int t,
                       struct tensor_sums *s)
{
    memset(s, 0, sizeof *s);
    s->worst_elem = -1;
    for (int r = 0; r < nranks; r++) {
        const struct tensor_sums *x = &all[(size_t)r * nt + t];
        s->err2 += x->err2;
        s->ref2 += x->ref2;
        s->nonfinite += x->nonfinite;
        if (x->max_abs > s->max_abs || (s->worst_elem < 0 && x->worst_elem >= 0)) {
            s->max_abs = x->max_abs;
            s->worst_elem = x->worst_elem;
        }
    }
}

/* Compares got with want (host, the whole flat buffer) over [offset, offset+n). */
static void check_flat(const struct gr_reference *ref, const float *want,
                       enum gr_params_layout mode, size_t offset, size_t n, const float *got,
                       double tol, struct gr_param_verdict *v)
{
    PL_ASSERT(offset + n <= ref->numel);
    int nt = ref->layout.n_tensors, nranks = pl_size(), me = pl_rank();
    float *host = pl_mem_alloc(n * sizeof *host, PL_MEM_WORK, PL_HOST, "grader params copy");
    pl_to_host(host, got, n * sizeof *host);
    struct tensor_sums *mine = calloc((size_t)nt, sizeof *mine);
    struct tensor_sums *all = me == 0 ? calloc((size_t)nt * (size_t)nranks, sizeof *all) : NULL;
    tensor_sums(ref, want, offset, n, host, mine);
    int words = (int)(sizeof *mine / sizeof(double)) * nt;
    PL_CHECK_MPI(MPI_Gather(mine, words, MPI_DOUBLE, all, words, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    memset(v, 0, sizeof *v);
    v->rank = -1;
    v->tensor = -1;
    if (me == 0) {
        struct tensor_sums *sum = calloc((size_t)nt, sizeof *sum);
        double err2 = 0, ref2 = 0, nonfinite = 0, ms = 0;
        for (size_t i = 0; i < ref->numel; i++) ms += (double)want[i] * want[i];
        ms /= (double)(ref->numel ? ref->numel : 1);
        int groups = mode == GR_REPLICATED ? nranks : 1;
        for (int g = 0; g < groups; g++) {
            /* Replicas: each rank on its own. Shards: the ranks' pieces of a tensor added. */
            for (int t = 0; t < nt; t++) {
                struct tensor_sums *s = &sum[t];
                if (mode == GR_REPLICATED) *s = all[(size_t)g * nt + t];
                else add_shards(all, nt, nranks, t, s);
                double rel = tensor_rel(s, ms * (double)ref->layout.tensors[t].numel);
                if (v->tensor < 0 || rel > v->rel) {
                    v->tensor = t;
                    v->rel = rel;
                    v->rank = mode == GR_REPLICATED ? g : -1;
                    v->max_abs = s->max_abs;
                    v->worst_elem = s->worst_elem < 0 ? 0 : (size_t)s->worst_elem;
                }
                if (mode == GR_SHARDED || g == 0) {
                    err2 += s->err2;
                    ref2 += s->ref2;
                }
                nonfinite += s->nonfinite;
            }
        }
        /* Replicas: "all parameters" is rank 0's overall error, or the worst rank's. */
        if (mode == GR_REPLICATED && v->rank > 0) {
            err2 = ref2 = 0;
            for (int t = 0; t < nt; t++) {
                err2 += all[(size_t)v->rank * nt + t].err2;
                ref2 += all[(size_t)v->rank * nt + t].ref2;
            }
        }
        v->overall = nonfinite > 0 ? INFINITY : ref2 > 0 ? sqrt(err2 / ref2) : sqrt(err2);
        v->nonfinite = (int)nonfinite;
        v->ok = v->nonfinite == 0 && v->rel <= tol;
        free(sum);
    }
    PL_CHECK_MPI(MPI_Bcast(&v->ok, 1, MPI_INT, 0, MPI_COMM_WORLD));
    free(all);
    free(mine);
    pl_mem_free(host);
}

void gr_check_params(const struct gr_reference *ref, enum gr_params_layout mode, size_t offset,
                     size_t n, const float *got, double tol, struct gr_param_verdict *v)
{
    check_flat(ref, ref->params, mode, offset, n, got, tol, v);
}

void gr_check_grads(const struct gr_reference *ref, int step, enum gr_params_layout mode,
                    size_t offset, size_t n, const float *got, double tol,
                    struct gr_param_verdict *v)
{
    PL_ASSERT(step >= 0 && step < ref->setup.steps);
    check_flat(ref, ref->grads + (size_t)step * ref->numel, mode, offset, n, got, tol, v);
}

const char *gr_describe_param_error(const struct gr_reference *ref,
                                    const struct gr_param_verdict *v, char *buf, size_t len)
{
    return gr_param_error_words(&ref->layout, v, buf, len);
}

int gr_replicas_equal(const float *x, size_t n, int *bad_rank, size_t *bad_elem)
{
    float *mine = pl_mem_alloc(n * sizeof *mine, PL_MEM_WORK, PL_HOST, "grader replica");
    float *root = pl_mem_alloc(n * sizeof *root, PL_MEM_WORK, PL_HOST, "grader rank 0 copy");
    pl_to_host(mine, x, n * sizeof *mine);
    memcpy(root, mine, n * sizeof *mine);
    /* In pieces: MPI counts are ints. */
    for (size_t off = 0; off < n; off += (size_t)1 << 28) {
        size_t len = n - off < ((size_t)1 << 28) ? n - off : (size_t)1 << 28;
        PL_CHECK_MPI(MPI_Bcast(root + off, (int)len, MPI_FLOAT, 0, MPI_COMM_WORLD));
    }
    long first = -1;
    for (size_t i = 0; i < n && first < 0; i++)
        if (memcmp(&mine[i], &root[i], sizeof(float))) first = (long)i;
    int nranks = pl_size();
    long *all = malloc((size_t)nranks * sizeof *all);
    PL_CHECK_MPI(MPI_Allgather(&first, 1, MPI_LONG, all, 1, MPI_LONG, MPI_COMM_WORLD));
    int equal = 1;
    for (int r = 0; r < nranks; r++)
        if (all[r] >= 0) {
            equal = 0;
            if (bad_rank) *bad_rank = r;
            if (bad_elem) *bad_elem = (size_t)all[r];
            break;
        }
    free(all);
    pl_mem_free(root);
    pl_mem_free(mine);
    return equal;
}

/* ---- traffic ---- */

void gr_ledger_mark(struct pl_ledger *mark) { *mark = *pl_ledger(); }

void gr_ledger_since(const struct pl_ledger *mark, struct pl_ledger *delta)
{
    pl_ledger_diff(pl_ledger(), mark, delta);
}

void gr_ledger_gather_world(const struct pl_ledger *mine, struct pl_ledger *all)
{
    PL_CHECK_MPI(MPI_Gather(mine, (int)sizeof *mine, MPI_BYTE, all, (int)sizeof *mine, MPI_BYTE,
                            0, MPI_COMM_WORLD));
}

double gr_ledger_total_bytes(const struct pl_ledger *l) { return pl_ledger_bytes(l, -1, -1); }

long gr_ledger_total_calls(const struct pl_ledger *l)
{
    long n = 0;
    for (int k = 0; k < PL_NKINDS; k++)
        if (k != PL_P2P) n += l->calls[k];
    return n;
}

/* ---- the modelled overlap ---- */

void gr_trace_scaled(const struct pl_merged_trace *m, double flop_scale, double byte_scale,
                     struct pl_merged_trace *out)
{
    /* The events are plain structs, the groups are shared read-only. */
    *out = *m;
    out->events = calloc((size_t)m->nranks, sizeof *out->events);
    for (int r = 0; r < m->nranks; r++) {
        out->events[r] = malloc((size_t)(m->nevents[r] > 0 ? m->nevents[r] : 1) *
                                sizeof **out->events);
        for (int i = 0; i < m->nevents[r]; i++) {
            struct pl_event ev = m->events[r][i];
            ev.flops *= flop_scale;
            ev.bytes *= byte_scale;
            out->events[r][i] = ev;
        }
    }
}

void gr_trace_scaled_free(struct pl_merged_trace *c)
{
    for (int r = 0; r < c->nranks; r++) free(c->events[r]);
    free(c->events);
    c->events = NULL;
}

int gr_overlap_replay(const struct pl_merged_trace *m, const struct pl_profile *p,
                      double flop_scale, double byte_scale, const char *svg_path,
                      const char *title, struct gr_overlap *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    struct pl_merged_trace c;
    gr_trace_scaled(m, flop_scale, byte_scale, &c);
    struct pl_replay rp;
    int rc = pl_replay_run(&c, p, pl_topo(), &rp, err, errlen);
    if (rc == 0) {
        out->step_time = rp.step_time;
        int worst = 0;
        for (int r = 0; r < rp.nranks; r++) {
            const struct pl_rank_time *t = &rp.rank[r];
            if (t->compute > out->compute) out->compute = t->compute;
            if (t->exposed_comm > rp.rank[worst].exposed_comm) worst = r;
        }
        out->comm = rp.rank[worst].comm;
        out->exposed = rp.rank[worst].exposed_comm;
        out->not_hidden = out->comm > 0 ? out->exposed / out->comm : 0.0;
        if (out->not_hidden > 1) out->not_hidden = 1;
        if (svg_path && pl_replay_write_svg(&c, &rp, title, svg_path) != 0)
            fprintf(stderr, "warning: cannot write %s\n", svg_path);
        pl_replay_free(&rp);
    }
    gr_trace_scaled_free(&c);
    return rc;
}

double gr_mem_grown(const struct pl_mem_stats *a, const struct pl_mem_stats *b, int *cat)
{
    double most = 0;
    *cat = 0;
    for (int k = 0; k < PL_MEM_NCAT; k++)
        if (b->current[k] > a->current[k] && (double)(b->current[k] - a->current[k]) > most) {
            most = (double)(b->current[k] - a->current[k]);
            *cat = k;
        }
    return most;
}
