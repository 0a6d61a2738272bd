/* cases.c: one case of Lab 6 (lab06.h): the lab's model and data, and K steps of one
 * schedule with m microbatches on one pipeline or a grid of two, checked for correctness on
 * the way (the first fault's class and figures recorded, the run stopped there), its last
 * step traced and its memory measured, into this rank's observation. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_comm.h"
#include "lab06.h"
#include "wrap_ctx.h"

const int L6_CASES[L6_NCASES] = {1, 2, 3, 4, 6, 8};

/* The lab's model: 6 blocks of width 32 on 16 tokens; the hidden suite's is another depth,
 * width, head count and sequence length (7 blocks of width 40, 4 heads, 12 tokens). */
struct pl_model_config l6_config(int hidden, uint64_t seed)
{
    struct pl_model_config c = pl_model_config_default();
    c.vocab = PL_BYTE_VOCAB;
    c.d_model = hidden ? 40 : 32;
    c.n_layers = hidden ? 7 : 6;
    c.n_heads = hidden ? 4 : 2;
    c.d_ff = hidden ? 96 : 64;
    c.seq_len = hidden ? 12 : 16;
    c.dropout = L6_LAB_DROPOUT;
    c.n_experts = 0;
    c.seed = seed;
    return c;
}

/* No clipping: a clipped step needs the global gradient norm, one more message across
 * the stages that this lab does not teach (the capstone does). */
static struct pl_adamw_config lab_adamw(void)
{
    struct pl_adamw_config o = pl_adamw_config_default();
    o.grad_clip = 0.0f;
    return o;
}


/* v of the interleaved runs on p stages: 3 where the parts allow it (2 stages), so that a v
 * taken as 2 shows, else 2. */
int l6_chunks_for(int hidden, int p)
{
    return p * L6_V_MOST <= l6_config(hidden, 1).n_layers + 2 ? L6_V_MOST : L6_V_INTERLEAVED;
}

/* Whether the world splits into a grid of two pipelines (an even world of 4 ranks or more). */
int l6_grid_fits(void)
{
    return pl_size() >= 4 && pl_size() % 2 == 0;
}

void l6_setup_init(struct l6_setup *s, uint64_t seed, int hidden, int with_reference)
{
    memset(s, 0, sizeof *s);
    s->seed = seed;
    s->hidden = hidden;
    gr_wrap_ctx_set(&s->watch);
    s->data = pl_corpus_tokens(pl_mix64(seed ^ 0xda7a), L6_CORPUS_TOKENS);
    s->train.cfg = l6_config(hidden, pl_mix64(seed ^ 0x1417));
    s->train.opt = lab_adamw();
    s->train.data = &s->data;
    s->train.global_B = L6_GLOBAL_B;
    s->train.steps = L6_K_STEPS;
    s->train.data_seed = pl_mix64(seed ^ 0x5eed);
    if (with_reference) {
        gr_reference_run(&s->ref, &s->train);
        if (l6_grid_fits()) {
            struct gr_train_setup other = s->train;
            other.data_seed = pl_mix64(seed ^ 0x0dd5eed);
            gr_reference_run(&s->ref1, &other);
        }
    } else {
        pl_model_layout_init(&s->ref.layout, &s->train.cfg);
        s->ref.numel = s->ref.layout.numel;
    }
}

void l6_setup_free(struct l6_setup *s)
{
    gr_wrap_ctx_set(NULL);
    gr_reference_free(&s->ref);
    if (s->ref1.numel) gr_reference_free(&s->ref1);
    pl_tokens_free(&s->data);
}

static void parts_range(const struct pl_model_layout *lay, int first, int last, size_t *off,
                        size_t *n)
{
    size_t o1, n1, o2, n2;
    pl_model_part_range(lay, first, &o1, &n1);
    pl_model_part_range(lay, last, &o2, &n2);
    *off = o1;
    *n = o2 + n2 - o1;
}

/* The model's chunks (virtual stages) and which this rank holds: chunk c is on rank c % p. */
struct l6_chunks {
    int n; /* p v */
    int first[L6_MAX_STAGES], last[L6_MAX_STAGES];
};

/* This rank's place in the case: its pipeline, its stage there, the driver's own (raw MPI)
 * communicator of the pipeline's ranks in stage order, and the pipeline's reference. */
struct l6_member {
    struct l6_grid grid;
    int pipe, stage, p;
    MPI_Comm comm;
    const struct gr_reference *ref;
    int one_mb_ok; /* the case m = 1 trained correctly */
};

/* The step's loss as the last stage of this rank's pipeline returned it, on each of its
 * ranks. */
static double last_stage_loss(const struct l6_member *me, double mine, int from)
{
    double l = mine;
    PL_CHECK_MPI(MPI_Bcast(&l, 1, MPI_DOUBLE, from, me->comm));
    return l;
}

/* Every rank's values of src over the parts it holds, assembled into dst (op memory, the
 * whole flat buffer, the same on every rank of the pipeline): what the pipeline holds, as
 * one model. */
static void assemble(const struct l6_member *me, const struct pl_model_layout *lay,
                     const struct l6_chunks *ch, const float *src, float *dst)
{
    size_t N = lay->numel;
    float *h = calloc(N, sizeof *h), *all = malloc(N * sizeof *all);
    PL_ASSERT(h && all);
    for (int c = me->stage; c < ch->n; c += me->p) {
        size_t off, n;
        parts_range(lay, ch->first[c], ch->last[c], &off, &n);
        pl_copy_to_host(h + off, src + off, n);
    }
    PL_CHECK_MPI(MPI_Allreduce(h, all, (int)N, MPI_FLOAT, MPI_SUM, me->comm));
    pl_copy_from_host(dst, all, N);
    free(h);
    free(all);
}

/* The share of the reference's gradient in ours: <g, r> / <r, r> (g on every rank). */
static double grad_ratio(const struct gr_reference *ref, int step, const float *g)
{
    size_t n = ref->numel;
    float *h = malloc(sizeof(float) * n);
    PL_ASSERT(h);
    pl_copy_to_host(h, g, n);
    const float *r = ref->grads + (size_t)step * n;
    double d = 0, rr = 0;
    for (size_t i = 0; i < n; i++) d += (double)h[i] * r[i], rr += (double)r[i] * r[i];
    free(h);
    return rr > 0 ? d / rr : 0;
}

/* One optimizer step on this rank's chunks, as the reference's pl_model_update does it. */
static void stage_adamw(const struct l6_member *me, struct pl_model *m, const struct l6_chunks *ch,
                        const struct pl_adamw_config *opt)
{
    m->adam_t++;
    for (int c = me->stage; c < ch->n; c += me->p) {
        size_t off, n;
        parts_range(&m->layout, ch->first[c], ch->last[c], &off, &n);
        pl_model_adamw_flat(&m->layout, off, n, m->params + off, m->grads + off,
                            m->adam_m + off, m->adam_v + off, m->adam_t, opt);
    }
}

/* A grid: a stage of some pipeline holding the parts that the student's own cut (chunk c is
 * parts cut->first[c]..last[c]) gives another stage, the mark of a stage taken from
 * somewhere else than the pipeline's communicator. 1 (into t) when one does. */
static int stage_mixed_up(const struct l6_grid *g, int (*st)[L6_MAX_STAGES][2],
                          const struct l6_chunks *cut, struct l6_train *t)
{
    for (int pipe = 0; pipe < g->pipes; pipe++)
        for (int s = 0; s < g->p; s++) {
            const int *x = st[pipe][s];
            if (x[0] == cut->first[s] && x[1] == cut->last[s]) continue;
            for (int u = 0; u < g->p; u++) {
                if (x[0] != cut->first[u] || x[1] != cut->last[u]) continue;
                *t = (struct l6_train){.wrong = L6_W_MIXED,
                                       .v = {pipe, g->ranks[pipe][s], s, x[0], x[1], u}};
                return 1;
            }
        }
    return 0;
}

/* The chunks of the run: each rank's parts from pipe_stage_parts (one chunk per rank), or,
 * interleaved, the student's pipe_partition into p v chunks. 0 (rank 0's fault into t, the
 * verdict rank 0's) when they are not a contiguous cover of the model in every pipeline,
 * or the pipelines cut it differently. */
static int find_chunks(const struct l6_member *me, const struct pipe *pp,
                       const struct pl_model_config *c, int v, struct l6_chunks *ch,
                       struct l6_obs *ob)
{
    int mine[2], (*parts)[2] = malloc(sizeof *parts * (size_t)pl_size());
    int (*st)[L6_MAX_STAGES][2] = calloc(L6_GRID_MAX_PIPES, sizeof *st);
    PL_ASSERT(parts && st);
    pipe_stage_parts(pp, &mine[0], &mine[1]);
    ob->first = mine[0], ob->last = mine[1];
    PL_CHECK_MPI(MPI_Allgather(mine, 2, MPI_INT, parts, 2, MPI_INT, MPI_COMM_WORLD));
    for (int w = 0; w < pl_size(); w++)
        memcpy(st[l6_grid_pipe_of(&me->grid, w)][l6_grid_stage_of(&me->grid, w)], parts[w],
               sizeof parts[w]);
    struct l6_train *t = &ob->train;
    int p = me->p, wrong = 0;
    ch->n = p * v;
    if (me->grid.pipes > 1) {
        struct l6_chunks cut;
        pipe_partition(c, p * v, 1, c->seq_len, cut.first, cut.last);
        wrong = stage_mixed_up(&me->grid, st, &cut, t);
    }
    for (int g = 0; g < me->grid.pipes && !wrong && v == 1; g++) {
        wrong = l6_cover_wrong((const int(*)[2])st[g], p, c, t);
        for (int s = 0; s < p && !wrong && g > 0; s++)
            if (st[g][s][0] != st[0][s][0] || st[g][s][1] != st[0][s][1]) {
                *t = (struct l6_train){.wrong = L6_W_PIPES, .v = {s, st[0][s][0], st[0][s][1],
                                                                  st[g][s][0], st[g][s][1], g}};
                wrong = 1;
            }
    }
    if (v == 1) {
        for (int s = 0; s < p; s++) ch->first[s] = st[0][s][0], ch->last[s] = st[0][s][1];
    } else {
        int x[L6_MAX_STAGES][2];
        pipe_partition(c, p * v, 1, c->seq_len, ch->first, ch->last);
        for (int i = 0; i < ch->n; i++) x[i][0] = ch->first[i], x[i][1] = ch->last[i];
        if (!wrong) wrong = l6_cover_wrong((const int(*)[2])x, ch->n, c, t);
    }
    for (int g = 0; g < me->grid.pipes && !wrong && v > 1; g++)
        for (int s = 0; s < p && !wrong; s++)
            if (st[g][s][0] != ch->first[s] || st[g][s][1] != ch->last[s]) {
                *t = (struct l6_train){.wrong = L6_W_CHUNK, .v = {s, st[g][s][0], st[g][s][1],
                                                                  ch->first[s], ch->last[s]}};
                wrong = 1;
            }
    PL_CHECK_MPI(MPI_Bcast(&wrong, 1, MPI_INT, 0, MPI_COMM_WORLD));
    free(parts);
    free(st);
    return !wrong;
}

/* Step `step`'s loss and gradients against the reference of each rank's pipeline; 0 (rank
 * 0's figures into t) when wrong in any pipeline, the same on every rank. */
static int check_step(const struct l6_member *me, struct pl_model *model,
                      const struct l6_chunks *ch, const struct gr_batch *b, int m, int step,
                      double loss, float *full, struct l6_train *t)
{
    const struct gr_reference *ref = me->ref;
    double mine[3] = {loss, ref->loss[step], fabs(loss - ref->loss[step]) / fabs(ref->loss[step])};
    double *all = malloc(sizeof(double) * 3 * (size_t)pl_size());
    PL_ASSERT(all);
    PL_CHECK_MPI(MPI_Allgather(mine, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, MPI_COMM_WORLD));
    int worst = 0, ok = 0;
    for (int r = 1; r < pl_size(); r++)
        if (!(all[3 * r + 2] <= all[3 * worst + 2])) worst = r;
    double got = all[3 * worst], want = all[3 * worst + 1], err = all[3 * worst + 2];
    /* rank 0's own pipeline, when it is the one off: is it only the dropout masks? */
    int mine_off = pl_rank() == 0 && step == 0 && m > 1;
    if (!(err <= GR_TOL_LOSS)) {
        if (!(mine_off && l6_grid_pipe_of(&me->grid, worst) == me->pipe
              && l6_dropout_explains(ref, b, m, got, NULL, t)))
            *t = (struct l6_train){.wrong = L6_W_LOSS,
                                   .v = {step, l6_grid_pipe_of(&me->grid, worst), got, want, err}};
        free(all);
        return 0;
    }
    /* Each rank against its own pipeline's reference; the verdict names the worst rank. */
    struct gr_param_verdict v;
    assemble(me, &model->layout, ch, model->grads, full);
    gr_check_grads(ref, step, GR_REPLICATED, 0, ref->numel, full, GR_TOL_GRADS, &v);
    if (!(ok = v.ok)) {
        double ratio = grad_ratio(ref, step, full);
        PL_CHECK_MPI(MPI_Allgather(&ratio, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, MPI_COMM_WORLD));
        if (!(mine_off && v.rank >= 0 && l6_grid_pipe_of(&me->grid, v.rank) == me->pipe
              && l6_dropout_explains(ref, b, m, 0, full, t))) {
            *t = (struct l6_train){.wrong = L6_W_GRADS,
                                   .v = {step, all[v.rank >= 0 ? v.rank : 0], me->one_mb_ok}};
            l6_param_err(ref, &v, &t->err);
        }
    }
    free(all);
    return ok;
}

/* One step of pipe_step; the traced one also records the trace and this rank's memory peak
 * above the level before it (activations, and every category together), and what is left
 * after. Returns the last stage's loss. */
static double one_step(const struct l6_member *me, struct pipe *pp, const struct gr_batch *b,
                       int traced, int last_stage, struct l6_obs *ob, double *live)
{
    struct pl_mem_stats before, after, held;
    if (traced) {
        pl_trace_enable(1);
        pl_trace_clear();
        pl_mem_reset_peak();
        pl_mem_get_stats(&before);
    }
    double mine_loss = pipe_step(pp, b->tokens, b->targets, b->B);
    pl_mem_get_stats(&held);
    *live = (double)held.live_allocs;
    double loss = last_stage_loss(me, mine_loss, last_stage);
    if (traced) {
        pl_trace_flush();
        pl_trace_enable(0);
        pl_mem_get_stats(&after);
        ob->activ_peak = (double)after.peak[PL_MEM_ACTIV] - before.current[PL_MEM_ACTIV];
        ob->activ_left = (double)after.current[PL_MEM_ACTIV] - before.current[PL_MEM_ACTIV];
        ob->total_peak = (double)after.peak_total - (double)before.current_total;
        for (int c = 0; c < PL_MEM_NCAT; c++)
            ob->cat_peak[c] = (double)after.peak[c] - (double)before.current[c];
    }
    return loss;
}

/* The parameters after K steps against the reference of each rank's pipeline; 0 (into t)
 * when wrong. */
static int check_params(const struct l6_member *me, struct pl_model *model,
                        const struct l6_chunks *ch, float *full, struct l6_train *t)
{
    struct gr_param_verdict v;
    assemble(me, &model->layout, ch, model->params, full);
    gr_check_params(me->ref, GR_REPLICATED, 0, me->ref->numel, full, GR_TOL_PARAMS, &v);
    if (v.ok) return 1;
    t->wrong = L6_W_PARAMS;
    l6_param_err(me->ref, &v, &t->err);
    return 0;
}

/* Rank 0: each pipeline's trace of the traced step, replayed into ob->bub, and kept in
 * trace[g] when trace is not NULL. */
static void gather_traces(const struct l6_member *me, const struct l6_chunks *ch,
                          enum pipe_schedule k, int m, int v, struct l6_obs *ob,
                          struct pl_merged_trace *trace)
{
    struct pl_merged_trace world;
    pl_trace_gather(&world);
    for (int g = 0; g < me->grid.pipes && pl_rank() == 0; g++) {
        struct pl_merged_trace t;
        l6_grid_trace(&me->grid, g, &world, &t);
        l6_replay(k, m, v, &t, ch->first, &ob->bub[g]);
        if (trace) trace[g] = t;
        else pl_trace_merged_free(&t);
    }
    pl_trace_merged_free(&world);
}

/* Runs the K steps of `pipes` pipelines (1: the world; 2: a grid, grid.h) and checks
 * correctness on the way; the last step is traced and its memory peak measured. Before step
 * L6_RENEW_STEP the pipe is freed and a new one made on the same model. Each
 * pipeline runs on a communicator split from the world and freed after pipe_free, as a
 * group of a larger grid would be, and trains on batches of its own against its own
 * single-device reference. */
void l6_run_case(struct l6_setup *s, enum pipe_schedule k, int m, int pipes,
                 struct l6_obs *ob, struct pl_merged_trace *trace)
{
    const struct pl_model_config *c = &s->train.cfg;
    struct pl_adamw_config opt = s->train.opt;
    struct l6_member me;
    l6_grid_make(&me.grid, pl_size(), pipes);
    me.pipe = l6_grid_pipe_of(&me.grid, pl_rank());
    me.stage = l6_grid_stage_of(&me.grid, pl_rank());
    me.p = me.grid.p;
    me.ref = me.pipe == 0 ? &s->ref : &s->ref1;
    me.one_mb_ok = s->one_mb_ok;
    int v = l6_sched_chunks(k, l6_chunks_for(s->hidden, me.p)), Bmb = L6_GLOBAL_B / m;
    if (l6_sched_nops(k, v, m) > L6_MAX_OPS)
        pl_fatal("internal error: %s with %d chunks and %d microbatches runs %d operations a "
                 "stage, more than an observation keeps (L6_MAX_OPS %d)", l6_sched_name(k), v,
                 m, l6_sched_nops(k, v, m), L6_MAX_OPS);
    *ob = (struct l6_obs){.k = k, .m = m, .p = me.p, .v = v, .pipes = pipes,
                          .hidden = s->hidden, .cfg = *c, .pipe = me.pipe, .stage = me.stage};
    ob->bnd = 4.0 * (double)pl_parts_boundary_numel(c, Bmb, c->seq_len);
    for (int i = 0; i < L6_K_STEPS; i++) ob->live[i] = -1;
    PL_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, me.pipe, me.stage, &me.comm));
    struct pl_model *model = pl_model_new(c, PL_MODEL_ALL);
    struct pipe_options po = {k, m, v};
    struct pl_comm *comm = pl_comm_split(pl_comm_world(), me.pipe, me.stage, "pipeline");
    struct pl_mem_stats before, after;
    pl_todo_reset();
    pl_mem_get_stats(&before);
    l6_outside_reset();
    struct pipe *pp = pipe_new(comm, model, &po);
    struct l6_chunks ch;
    int correct = 0;
    if ((ob->todo = gr_todo_any()) || !find_chunks(&me, pp, c, v, &ch, ob)) goto done;
    float *full = pl_mem_alloc(me.ref->numel * sizeof(float), PL_MEM_WORK, PL_DEVICE,
                               "assembled model");
    struct gr_batch b;
    gr_batch_new(&b, &me.ref->setup, 0, 1);
    correct = 1;
    for (int step = 0; step < L6_K_STEPS && correct; step++) {
        if (step == L6_RENEW_STEP) {
            pipe_free(pp);
            pp = pipe_new(comm, model, &po);
        }
        gr_batch_load(&b, step);
        l6_outside_watch(1);
        double loss = one_step(&me, pp, &b, step == L6_K_STEPS - 1, (ch.n - 1) % me.p, ob,
                               &ob->live[step]);
        l6_outside_watch(0);
        if ((ob->todo = gr_todo_any())
            || !check_step(&me, model, &ch, &b, m, step, loss, full, &ob->train))
            correct = 0;
        else
            stage_adamw(&me, model, &ch, &opt);
    }
    if (correct) correct = check_params(&me, model, &ch, full, &ob->train);
    gr_batch_free(&b);
    pl_mem_free(full);
    if (correct) {
        int cf[L6_V_MOST];
        for (int j = 0; j < v; j++) cf[j] = ch.first[j * me.p + me.stage];
        l6_read_trace(&me.grid, cf, ob);
        gather_traces(&me, &ch, k, m, v, ob, trace);
    }
done:
    pipe_free(pp);
    /* what this rank's code still holds; the pipeline's communicator is freed when no rank
     * has an operation in flight on it, and left allocated otherwise (gr_case_comm_free) */
    pl_mem_get_stats(&after);
    ob->left = gr_mem_grown(&before, &after, &ob->left_cat);
    ob->in_flight = gr_case_comm_free(comm);
    ob->outside = l6_outside_seen();
    pl_model_free(model);
    PL_CHECK_MPI(MPI_Comm_free(&me.comm));
    for (int j = 0; j < v && correct; j++) {
        int f = ch.first[j * me.p + me.stage], l = ch.last[j * me.p + me.stage];
        double tr;
        ob->chunk_acts[j] = (double)pl_parts_acts_bytes(c, f, l, Bmb, c->seq_len);
        l6_kit_bytes(c, f, l, Bmb, c->seq_len, &ob->chunk_held[j], &tr);
        ob->chunk_wgrad[j] = (double)pl_parts_wgrad_bytes(c, f, l, Bmb, c->seq_len);
        if (tr > ob->kit_extra) ob->kit_extra = tr;
    }
}

/* The schedule of --op; NAME-hidden also sets the hidden suite's model. */
enum pipe_schedule l6_schedule_of(const char *op, int *hidden)
{
    /* in enum pipe_schedule's order */
    static const char *const names[] = {"afab", "1f1b", "interleaved", "zbh1"};
    for (int k = 0; k < 4; k++) {
        size_t n = strlen(names[k]);
        if (strncmp(op, names[k], n)) continue;
        if (!op[n] || (hidden && !strcmp(op + n, "-hidden"))) {
            if (hidden) *hidden = op[n] != '\0';
            return (enum pipe_schedule)k;
        }
    }
    pl_usage_error_all("--op %s is not a Lab 6 schedule (choose afab, 1f1b, interleaved or "
                       "zbh1%s)", op,
                       hidden ? ", or one of them with -hidden" : "");
}

void l6_check_stages(const struct pl_model_config *c, enum pipe_schedule k)
{
    int p = pl_size();
    if (k == PIPE_INTERLEAVED && p * L6_V_INTERLEAVED > c->n_layers + 2)
        pl_usage_error_all("interleaved 1F1B on %d stages cuts the model into %d x %d = %d "
                           "chunks, but it has only L + 2 = %d parts: run it on 1 to %d ranks",
                           p, p, L6_V_INTERLEAVED, p * L6_V_INTERLEAVED, c->n_layers + 2,
                           (c->n_layers + 2) / L6_V_INTERLEAVED);
    if (p > c->n_layers + 2)
        pl_usage_error_all("%d stages but the model has %d blocks: a pipeline has at most "
                           "L + 2 = %d stages (the embedding, each block, the head), or a "
                           "stage would be empty; run on 1 to %d ranks",
                           p, c->n_layers, c->n_layers + 2, c->n_layers + 2);
}

