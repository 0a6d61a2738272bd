/* cases.c: one case of Lab 6 (lab06.h): the lab's model and data, and K steps of one
 * schedule with m microbatches on one pipeline or a grid of two, judged for correctness on
 * the way, its last step traced and its memory measured. */
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

/* Gathers every rank's stats to rank 0, into o[its pipeline].st[its stage]. */
static void gather_stats(const struct l6_member *me, const struct l6_stage_stats *mine,
                         struct l6_outcome *o)
{
    enum { W = L6_STATS_WORDS };
    double d[W] = {mine->first, mine->last, mine->activ_peak, mine->activ_left,
                   mine->total_peak};
    for (int c = 0; c < PL_MEM_NCAT; c++) d[5 + c] = mine->cat_peak[c];
    double *buf = malloc(sizeof(double) * W * (size_t)pl_size());
    PL_ASSERT(buf);
    PL_CHECK_MPI(MPI_Gather(d, W, MPI_DOUBLE, buf, W, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    for (int r = 0; r < pl_size() && pl_rank() == 0; r++) {
        struct l6_stage_stats *st =
            &o[l6_grid_pipe_of(&me->grid, r)].st[l6_grid_stage_of(&me->grid, r)];
        const double *x = buf + (size_t)W * r;
        *st = (struct l6_stage_stats){(int)x[0], (int)x[1], x[2], x[3], x[4], {0}};
        for (int c = 0; c < PL_MEM_NCAT; c++) st->cat_peak[c] = x[5 + c];
    }
    free(buf);
}

/* Rank 0, when a grid's pipeline is cut wrong: what its communicator's order means. */
static void say_grid(const struct l6_grid *g, const char *part)
{
    char a[160], b[160];
    gr_say(part, "in this case the world is split into %d pipelines of %d stages, each training "
           "on data of its own, whose communicators number their ranks in another order than "
           "the world: pipeline 0 runs %s, pipeline 1 %s. The stage is this rank's rank in the "
           "communicator pipe_new is given (pl_comm_rank(comm)) and p its size "
           "(pl_comm_size(comm)); a stage taken from the world rank (pl_comm_world_rank) is "
           "right only while the pipeline is the whole world in world order (handout "
           "section 3)", g->pipes, g->p, l6_grid_text(g, 0, a, sizeof a),
           l6_grid_text(g, 1, b, sizeof b));
}

/* Rank 0, a grid: a stage of some pipeline holding the parts that the student's own cut
 * (cut: chunk c is parts first[c]..last[c]) gives another stage, the mark of a stage taken
 * from somewhere else than the pipeline's communicator. 1 (said) when one does. */
static int stage_mixed_up(const struct l6_grid *g, const struct l6_outcome *o,
                          const struct l6_chunks *cut)
{
    for (int pipe = 0; pipe < g->pipes; pipe++)
        for (int s = 0; s < g->p; s++) {
            const struct l6_stage_stats *st = &o[pipe].st[s];
            if (st->first == cut->first[s] && st->last == cut->last[s]) continue;
            for (int t = 0; t < g->p; t++) {
                if (st->first != cut->first[t] || st->last != cut->last[t]) continue;
                gr_say("correct", "pipeline %d: world rank %d, stage %d of its pipeline's "
                       "communicator, holds parts %d..%d, which your pipe_partition gives stage "
                       "%d", pipe, g->ranks[pipe][s], s, st->first, st->last, t);
                say_grid(g, "correct");
                return 1;
            }
        }
    return 0;
}

/* The chunks of the run: each rank's parts from pipe_stage_parts (one chunk per rank), or,
 * interleaved, the student's pipe_partition into p v chunks. 0 (said) when they are not a
 * contiguous cover of the model in every pipeline, or the pipelines cut it differently. */
static int find_chunks(const struct l6_member *me, const struct pipe *pp,
                       const struct pl_model_config *c, int v, struct l6_chunks *ch,
                       struct l6_outcome *o)
{
    struct l6_stage_stats mine = {0, 0, 0, 0, 0, {0}};
    pipe_stage_parts(pp, &mine.first, &mine.last);
    gather_stats(me, &mine, o);
    int p = me->p, cover = 1;
    ch->n = p * v;
    if (me->grid.pipes > 1 && pl_rank() == 0) {
        struct l6_chunks cut;
        pipe_partition(c, p * v, 1, c->seq_len, cut.first, cut.last);
        cover = !stage_mixed_up(&me->grid, o, &cut);
    }
    for (int g = 0; g < me->grid.pipes && cover && v == 1 && pl_rank() == 0; g++) {
        cover = l6_judge_cover(o[g].st, p, c);
        for (int s = 0; s < p && cover && g > 0; s++)
            if (o[g].st[s].first != o[0].st[s].first || o[g].st[s].last != o[0].st[s].last) {
                gr_say("correct", "stage %d holds parts %d..%d in pipeline 0 but %d..%d in "
                       "pipeline %d: one pipe_partition of the model for p = %d, the same in "
                       "every pipeline (handout section 2)", s, o[0].st[s].first,
                       o[0].st[s].last, o[g].st[s].first, o[g].st[s].last, g, p);
                cover = 0;
            }
        if (!cover && me->grid.pipes > 1) say_grid(&me->grid, "correct");
    }
    if (v == 1) {
        for (int s = 0; s < p && pl_rank() == 0; s++)
            ch->first[s] = o[0].st[s].first, ch->last[s] = o[0].st[s].last;
        PL_CHECK_MPI(MPI_Bcast(ch->first, p, MPI_INT, 0, MPI_COMM_WORLD));
        PL_CHECK_MPI(MPI_Bcast(ch->last, p, MPI_INT, 0, MPI_COMM_WORLD));
    } else {
        pipe_partition(c, p * v, 1, c->seq_len, ch->first, ch->last);
        struct l6_stage_stats st[L6_MAX_STAGES];
        for (int i = 0; i < ch->n; i++)
            st[i] = (struct l6_stage_stats){ch->first[i], ch->last[i], 0, 0, 0, {0}};
        cover = pl_rank() == 0 ? cover && l6_judge_cover(st, ch->n, c) : 0;
    }
    for (int g = 0; g < me->grid.pipes && cover && v > 1 && pl_rank() == 0; g++)
        for (int s = 0; s < p && cover; s++)
            if (o[g].st[s].first != ch->first[s] || o[g].st[s].last != ch->last[s]) {
                gr_say("correct", "interleaved, %d stages, %d chunks each: pipe_stage_parts on "
                       "stage %d gives parts %d..%d, but chunk %d of your pipe_partition into p "
                       "v = %d chunks is parts %d..%d: cut the model into p * "
                       "o->virtual_stages chunks and give rank s chunks s, s + p, ... (handout "
                       "section 8)", p, v, s, o[g].st[s].first, o[g].st[s].last, s, ch->n,
                       ch->first[s], ch->last[s]);
                if (me->grid.pipes > 1) say_grid(&me->grid, "correct");
                cover = 0;
            }
    PL_CHECK_MPI(MPI_Bcast(&cover, 1, MPI_INT, 0, MPI_COMM_WORLD));
    for (int g = 0; g < me->grid.pipes; g++) o[g].chunks = *ch;
    return cover;
}

/* Step `step`'s loss and gradients against the reference of each rank's pipeline; 0 (said)
 * when wrong in any pipeline, the same on every rank. */
static int check_step(const struct l6_member *me, struct pl_model *model,
                      const struct l6_chunks *ch, const struct gr_batch *b, int m, int step,
                      double loss, float *full)
{
    const struct gr_reference *ref = me->ref;
    double mine[3] = {loss, ref->loss[step], fabs(loss - ref->loss[step]) / fabs(ref->loss[step])};
    double *all = malloc(sizeof(double) * 3 * (size_t)pl_size());
    PL_ASSERT(all);
    PL_CHECK_MPI(MPI_Allgather(mine, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, MPI_COMM_WORLD));
    int worst = 0;
    for (int r = 1; r < pl_size(); r++)
        if (!(all[3 * r + 2] <= all[3 * worst + 2])) worst = r;
    double got = all[3 * worst], want = all[3 * worst + 1], err = all[3 * worst + 2];
    if (!(err <= GR_TOL_LOSS)) {
        /* rank 0's own pipeline, when it is the one off: is it only the dropout masks? */
        if (pl_rank() == 0 && step == 0 && m > 1 && l6_grid_pipe_of(&me->grid, worst) == me->pipe
            && l6_dropout_explains(ref, b, m, got, NULL)) {
            free(all);
            return 0;
        }
        if (pl_rank() == 0) {
            char in[64] = "";
            if (me->grid.pipes > 1)
                snprintf(in, sizeof in, " of pipeline %d", l6_grid_pipe_of(&me->grid, worst));
            gr_say("correct", "step %d: the last stage%s's loss is %.6f, the single-device loss "
                   "%.6f (relative error %.1e): return the mean of the microbatches' losses, "
                   "each the mean over its own tokens (handout section 3)", step, in, got,
                   want, err);
        }
        if (pl_rank() == 0 && m > 1) l6_say_dropout(m);
        free(all);
        return 0;
    }
    /* Each rank against its own pipeline's reference; the verdict names the worst rank. */
    struct gr_param_verdict v;
    assemble(me, &model->layout, ch, model->grads, full);
    gr_check_grads(ref, step, GR_REPLICATED, 0, ref->numel, full, GR_TOL_GRADS, &v);
    if (v.ok) {
        free(all);
        return 1;
    }
    double ratio = grad_ratio(ref, step, full);
    PL_CHECK_MPI(MPI_Allgather(&ratio, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, MPI_COMM_WORLD));
    int masks = pl_rank() == 0 && step == 0 && m > 1 && v.rank >= 0
                && l6_grid_pipe_of(&me->grid, v.rank) == me->pipe
                && l6_dropout_explains(ref, b, m, 0, full);
    if (pl_rank() == 0 && !masks)
        l6_explain_grads(me->ref, m, step, &v, all[v.rank >= 0 ? v.rank : 0], me->one_mb_ok);
    if (pl_rank() == 0 && me->grid.pipes > 1 && v.rank >= 0)
        gr_say("correct", "in pipeline %d of %d (world rank %d is its stage %d)",
               l6_grid_pipe_of(&me->grid, v.rank), me->grid.pipes, v.rank,
               l6_grid_stage_of(&me->grid, v.rank));
    free(all);
    return 0;
}

/* One step of pipe_step; the traced one also records the trace and this rank's memory peak
 * above the level before it (activations, and every category together), and what is left
 * after. Returns the last stage's loss. */
static double one_step(const struct l6_member *me, struct pipe *pp, const struct gr_batch *b,
                       int traced, int last_stage, struct l6_stage_stats *mine, double *live)
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
        mine->activ_peak = (double)after.peak[PL_MEM_ACTIV] - before.current[PL_MEM_ACTIV];
        mine->activ_left = (double)after.current[PL_MEM_ACTIV] - before.current[PL_MEM_ACTIV];
        mine->total_peak = (double)after.peak_total - (double)before.current_total;
        for (int c = 0; c < PL_MEM_NCAT; c++)
            mine->cat_peak[c] = (double)after.peak[c] - (double)before.current[c];
    }
    return loss;
}

/* The parameters after K steps against the reference of each rank's pipeline; 0 (said)
 * when wrong. */
static int check_params(const struct l6_member *me, struct pl_model *model,
                        const struct l6_chunks *ch, float *full)
{
    struct gr_param_verdict v;
    assemble(me, &model->layout, ch, model->params, full);
    gr_check_params(me->ref, GR_REPLICATED, 0, me->ref->numel, full, GR_TOL_PARAMS, &v);
    if (v.ok) return 1;
    char what[512];
    if (pl_rank() == 0)
        gr_say("correct", "after %d steps the parameters differ from the single-device model's: "
               "%s", L6_K_STEPS, gr_describe_param_error(me->ref, &v, what, sizeof what));
    return 0;
}

/* After pipe_free: what this rank's code still holds, gathered to rank 0; the pipeline's
 * communicator is freed when no rank has an operation in flight on it, and left allocated
 * otherwise (gr_case_comm_free: the verdict says it instead). */
static void close_lifetime(const struct l6_member *me, struct pl_comm *comm,
                           const struct pl_mem_stats *before, struct l6_lifetime *mine,
                           struct l6_outcome *o)
{
    struct pl_mem_stats after;
    pl_mem_get_stats(&after);
    mine->left = gr_mem_grown(before, &after, &mine->left_cat);
    mine->in_flight = gr_case_comm_free(comm);
    mine->outside = l6_outside_seen();
    enum { W = L6_K_STEPS + 4 };
    double d[W], *all = malloc(sizeof(double) * W * (size_t)pl_size());
    PL_ASSERT(all);
    for (int i = 0; i < L6_K_STEPS; i++) d[i] = mine->live[i];
    d[L6_K_STEPS] = mine->left, d[L6_K_STEPS + 1] = mine->left_cat,
    d[L6_K_STEPS + 2] = mine->in_flight;
    d[L6_K_STEPS + 3] = mine->outside.where;
    PL_CHECK_MPI(MPI_Allgather(d, W, MPI_DOUBLE, all, W, MPI_DOUBLE, MPI_COMM_WORLD));
    for (int r = 0; r < pl_size(); r++) {
        struct l6_lifetime *l =
            &o[l6_grid_pipe_of(&me->grid, r)].life[l6_grid_stage_of(&me->grid, r)];
        for (int i = 0; i < L6_K_STEPS; i++) l->live[i] = all[W * r + i];
        l->left = all[W * r + L6_K_STEPS];
        l->left_cat = (int)all[W * r + L6_K_STEPS + 1];
        l->in_flight = (int)all[W * r + L6_K_STEPS + 2];
        l->outside.where = (int)all[W * r + L6_K_STEPS + 3];
        /* the call's name is rank 0's own; other ranks' is said generically */
        snprintf(l->outside.call, sizeof l->outside.call, "%s",
                 r == pl_rank() ? mine->outside.call : "a send or receive");
    }
    free(all);
}

/* Runs the K steps of `pipes` pipelines (1: the world; 2: a grid, grid.h) and judges
 * correctness on the way; the last step is traced and its memory peak measured. Each
 * pipeline runs on a communicator split from the world and freed after pipe_free, as a
 * group of a larger grid would be, and trains on batches of its own against its own
 * single-device reference. o[pipes]: each pipeline's outcome, in stage order (rank 0). */
void l6_run_case(struct l6_setup *s, enum pipe_schedule k, int m, int pipes,
                     struct l6_outcome *o)
{
    memset(o, 0, sizeof *o * (size_t)pipes);
    const struct pl_model_config *c = &s->train.cfg;
    struct pl_adamw_config opt = s->train.opt;
    struct l6_member me;
    l6_grid_make(&me.grid, pl_size(), pipes);
    me.pipe = l6_grid_pipe_of(&me.grid, pl_rank());
    me.stage = l6_grid_stage_of(&me.grid, pl_rank());
    me.p = me.grid.p;
    me.ref = me.pipe == 0 ? &s->ref : &s->ref1;
    me.one_mb_ok = s->one_mb_ok;
    PL_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, me.pipe, me.stage, &me.comm));
    int v = l6_sched_chunks(k, l6_chunks_for(s->hidden, me.p));
    struct pl_model *model = pl_model_new(c, PL_MODEL_ALL);
    struct pipe_options po = {k, m, v};
    struct pl_comm *comm = pl_comm_split(pl_comm_world(), me.pipe, me.stage, "pipeline");
    struct pl_mem_stats before;
    struct l6_lifetime life;
    for (int i = 0; i < L6_K_STEPS; i++) life.live[i] = -1;
    pl_todo_reset();
    pl_mem_get_stats(&before);
    l6_outside_reset();
    struct pipe *pp = pipe_new(comm, model, &po);
    struct l6_stage_stats mine = {0, 0, 0, 0, 0, {0}};
    struct l6_chunks ch;
    int correct = 0;
    if ((o->todo = gr_todo_any())) goto done;
    if (!find_chunks(&me, pp, c, v, &ch, o)) goto done;
    pipe_stage_parts(pp, &mine.first, &mine.last);
    float *full = pl_mem_alloc(me.ref->numel * sizeof(float), PL_MEM_WORK, PL_DEVICE,
                               "assembled model");
    struct gr_batch b;
    gr_batch_new(&b, &me.ref->setup, 0, 1);
    correct = 1;
    for (int step = 0; step < L6_K_STEPS && correct; step++) {
        gr_batch_load(&b, step);
        l6_outside_watch(1);
        double loss = one_step(&me, pp, &b, step == L6_K_STEPS - 1, (ch.n - 1) % me.p, &mine,
                               &life.live[step]);
        l6_outside_watch(0);
        if ((o->todo = gr_todo_any()) || !check_step(&me, model, &ch, &b, m, step, loss, full))
            correct = 0;
        else
            stage_adamw(&me, model, &ch, &opt);
    }
    if (correct) correct = check_params(&me, model, &ch, full);
    gr_batch_free(&b);
    pl_mem_free(full);
    gather_stats(&me, &mine, o);
    struct pl_merged_trace world;
    pl_trace_gather(&world);
    for (int g = 0; g < pipes && pl_rank() == 0; g++)
        l6_grid_trace(&me.grid, g, &world, &o[g].trace);
    pl_trace_merged_free(&world);
done:
    for (int g = 0; g < pipes; g++) o[g].correct = correct, o[g].todo = o->todo;
    pipe_free(pp);
    close_lifetime(&me, comm, &before, &life, o);
    pl_model_free(model);
    PL_CHECK_MPI(MPI_Comm_free(&me.comm));
}

/* The schedule of --op; NAME-hidden also sets the hidden suite's model. */
enum pipe_schedule l6_schedule_of(const char *op, int *hidden)
{
    static const char *const names[] = {"afab", "1f1b", "interleaved"};
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(names[k]);
        if (strncmp(op, names[k], n)) continue;
        if (!op[n] || (hidden && !strcmp(op + n, "-hidden"))) {
            if (hidden) *hidden = op[n] != '\0';
            return (enum pipe_schedule)k;
        }
    }
    pl_usage_error_all("--op %s is not a Lab 6 schedule (choose afab, 1f1b or interleaved%s)", op,
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

