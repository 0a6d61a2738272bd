/* driver.c: the trusted test driver of Lab 6. It owns main, gives every rank the same tiny
 * GPT and the whole global batch of each step, drives the student's pipeline (pipeline.h)
 * for K steps per case (AFAB, 1F1B or interleaved 1F1B, m = 1..8 microbatches) on p =
 * world-size stages and, from 4 ranks up, one case more on a grid of two pipelines of n/2
 * stages numbered against world order, each on its own data (grid.h), and judges, each in
 * its own function so the parts stay separate (every pipeline of a grid on its own):
 *   correct   every step's loss (last stage) and gradients, the parameters after K steps,
 *             each stage's parts assembled into one model, against the single-device
 *             reference of the pipeline's own data (grader/common);
 *   balance   the student's partition against the best contiguous cut by the kit's FLOPs,
 *             on the lab's model and on seven others (partition.c);
 *   schedule  the order of F and B each rank ran, read from its own trace (the marks of
 *             lib/pipe_parts), against the schedule's definition (schedule.c);
 *   bubble    that trace replayed with uniform stage times against (p-1)/(m+p-1) and the
 *             ideal run of the definition (AFAB and 1F1B: every operation's start too);
 *   memory    each stage's peak in the memory ledger, its activations and every category
 *             together, against the figure of the schedule's order (sched_peak_acts), and
 *             what the code holds from step to step and after pipe_free;
 *   traffic   every message's peer, tag and bytes from the trace: one per microbatch per
 *             boundary, the activation's size.
 * The training runs with point-to-point under NCCL's rules (pl_comm_set_p2p_like_nccl), so
 * a schedule that completes on MPI only because MPI buffers small messages deadlocks on the
 * CPU build as it would on GPUs.
 * main, flags, the case loop and the report are the lab harness's (grader/common/harness.h).
 *
 *   driver --op afab|1f1b|interleaved[-hidden] --mode check [--parts LIST] [--seed S]
 *   driver --mode bench [--op afab|1f1b|interleaved] [--microbatches M] [--svg-dir DIR] */
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* lib's own view of a communicator (its handles in flight): read, never changed, so that
 * the grader can refuse to free one with a graded reason where pl_comm_free would stop the
 * job. */
#include "grid.h"
#include "harness.h"
#include "ops.h"
#include "outside.h"
#include "paralab.h"
#include "partition.h"
#include "pipeline.h"
#include "schedule.h"
#include "train.h"
#include "units.h"

/* ---- the setup every test shares ---- */

#define K_STEPS 3
#define GLOBAL_B 24 /* sequences per step: every m of CASES divides it */
#define CORPUS_TOKENS 65536
#define MAX_STAGES 64
#define MAX_OPS 64
static const int CASES[] = {1, 2, 3, 4, 6, 8}; /* microbatches, m < p among them */
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))
#define BUBBLE_TOL 1e-9
#define V_INTERLEAVED 2 /* chunks per rank of the interleaved schedule: the fewest graded */
#define V_MOST 3        /* the most graded: on stages that leave room for them */
#define BENCH_PROFILE "dgx-h100"
/* Dropout on: each microbatch must draw the masks its sequences draw in the whole batch on
 * one device (ctx.seq0 and ctx.step), which a run without dropout cannot tell. */
#define LAB_DROPOUT 0.1f

static uint64_t base_seed = 1;
static int one_microbatch_ok; /* the case m = 1 trained correctly */
static int hidden_shape;      /* --op NAME-hidden: the hidden suite's model */

/* The lab's model: 6 blocks of width 32 on 16 tokens; the hidden suite's is another depth,
 * width, head count and sequence length (7 blocks of width 40, 4 heads, 12 tokens). */
static struct pl_model_config lab_config(uint64_t seed)
{
    struct pl_model_config c = pl_model_config_default();
    c.vocab = PL_BYTE_VOCAB;
    c.d_model = hidden_shape ? 40 : 32;
    c.n_layers = hidden_shape ? 7 : 6;
    c.n_heads = hidden_shape ? 4 : 2;
    c.d_ff = hidden_shape ? 96 : 64;
    c.seq_len = hidden_shape ? 12 : 16;
    c.dropout = LAB_DROPOUT;
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

struct setup {
    struct pl_tokens data;
    struct gr_train_setup train;
    struct gr_reference ref;  /* the world's pipeline, or pipeline 0 of a grid */
    struct gr_reference ref1; /* pipeline 1 of a grid, on batches of its own (numel 0: none) */
};

/* v of the interleaved runs on p stages: 3 where the parts allow it (2 stages), so that a v
 * taken as 2 shows, else 2. */
static int chunks_for(int p)
{
    return p * V_MOST <= lab_config(1).n_layers + 2 ? V_MOST : V_INTERLEAVED;
}

/* Whether the world splits into a grid of two pipelines (an even world of 4 ranks or more). */
static int grid_fits(void)
{
    return pl_size() >= 4 && pl_size() % 2 == 0;
}

static void setup_init(struct setup *s, int with_reference)
{
    memset(s, 0, sizeof *s);
    s->data = pl_corpus_tokens(pl_mix64(base_seed ^ 0xda7a), CORPUS_TOKENS);
    s->train.cfg = lab_config(pl_mix64(base_seed ^ 0x1417));
    s->train.opt = lab_adamw();
    s->train.data = &s->data;
    s->train.global_B = GLOBAL_B;
    s->train.steps = K_STEPS;
    s->train.data_seed = pl_mix64(base_seed ^ 0x5eed);
    if (with_reference) {
        gr_reference_run(&s->ref, &s->train);
        if (grid_fits()) {
            struct gr_train_setup other = s->train;
            other.data_seed = pl_mix64(base_seed ^ 0x0dd5eed);
            gr_reference_run(&s->ref1, &other);
        }
    } else {
        pl_model_layout_init(&s->ref.layout, &s->train.cfg);
        s->ref.numel = s->ref.layout.numel;
    }
}

static void setup_free(struct setup *s)
{
    gr_reference_free(&s->ref);
    if (s->ref1.numel) gr_reference_free(&s->ref1);
    pl_tokens_free(&s->data);
}

/* ---- one case: K steps of one schedule with m microbatches ---- */

struct stage_stats {
    int first, last;
    double activ_peak;  /* bytes above the level before the step */
    double activ_left;  /* bytes still held after it */
    double total_peak;  /* bytes above the level before the step, every category together */
    double cat_peak[PL_MEM_NCAT]; /* each category's peak above its level before the step */
};
#define STATS_WORDS (5 + PL_MEM_NCAT)

/* What a stage's code held over the case, from the memory ledger and its communicator:
 * live allocations after each step, what pipe_free left that pipe_new found free, and the
 * operations still in flight on the communicator pipe_new was given, after pipe_free. */
struct lifetime {
    double live[K_STEPS]; /* live allocations after step s (-1: the step did not run) */
    double left;          /* bytes more than before pipe_new, in the category of most */
    int left_cat;
    int in_flight;
    struct outside outside; /* the first buffer sent or received outside the ledger */
};

/* The model's chunks (virtual stages) and which this rank holds: chunk c is on rank c % p. */
struct chunks {
    int n;                      /* p v */
    int first[MAX_STAGES], last[MAX_STAGES];
};

/* One pipeline's outcome of a case (a grid of two has two). */
struct outcome {
    int correct, todo;
    struct stage_stats st[MAX_STAGES]; /* rank 0: every stage's */
    struct lifetime life[MAX_STAGES];  /* rank 0: every stage's */
    struct pl_merged_trace trace;      /* rank 0: the last step, its ranks in stage order */
    struct chunks chunks;              /* every rank */
};

/* This rank's place in the case: its pipeline, its stage there, the driver's own (raw MPI)
 * communicator of the pipeline's ranks in stage order, and the pipeline's reference. */
struct member {
    struct grid grid;
    int pipe, stage, p;
    MPI_Comm comm;
    const struct gr_reference *ref;
};

static const char *op_sched_name(enum pipe_schedule k)
{
    return k == PIPE_AFAB ? "afab" : k == PIPE_1F1B ? "1f1b" : "interleaved";
}

/* Rank 0: a partition that is not a contiguous cover of the parts. */
static int judge_cover(const struct stage_stats *st, int p, const struct pl_model_config *c)
{
    int want = PL_PART_EMBED;
    for (int s = 0; s < p; s++) {
        if (st[s].first != want || st[s].last < st[s].first) {
            gr_say("correct", "pipe_stage_parts: stage %d holds parts %d..%d, but after stage "
                   "%d it must start at part %d and hold at least one part (the parts run from "
                   "-1, the embedding, through the %d blocks to %d, the head: handout section "
                   "2)", s, st[s].first, st[s].last, s - 1, want, c->n_layers,
                   PL_PART_HEAD(c));
            return 0;
        }
        want = st[s].last + 1;
    }
    if (want != PL_PART_HEAD(c) + 1) {
        gr_say("correct", "pipe_stage_parts: the last stage ends at part %d, but the head is "
               "part %d: every part must belong to a stage (handout section 2)", want - 1,
               PL_PART_HEAD(c));
        return 0;
    }
    return 1;
}

/* Rank 0: with m > 1, what dropout asks of each microbatch's context. */
static void say_dropout(int m)
{
    gr_say("correct", "dropout is on (p = %.1f): microbatch i must draw the masks its "
           "sequences draw in the whole batch on one device, ctx.seq0 = i * B/m (here i * %d) "
           "and ctx.step = m->adam_t + 1, or its activations differ from the reference's "
           "(handout section 3.1)", LAB_DROPOUT, GLOBAL_B / m);
}

/* Rank 0, step 0 with m > 1: whether the pipeline's loss (grads NULL) or its assembled
 * gradient (grads, op memory) is what one device computes on the same batch with every
 * microbatch's dropout masks drawn where the first microbatch's are (ctx.seq0 left at 0),
 * or at step 0 (ctx.step left at m->adam_t): the single-device model at its initial
 * parameters, run microbatch by microbatch with that context. 1 (said, before anything
 * else) when one of them matches. */
static int dropout_explains(const struct gr_reference *ref, const struct gr_batch *b, int m,
                            double loss, const float *grads)
{
    const struct pl_model_config *c = &ref->setup.cfg;
    struct pl_model *model = pl_model_new(c, PL_MODEL_PARAMS | PL_MODEL_GRADS);
    pl_copy_from_host(model->params, ref->init, ref->numel);
    size_t N = ref->numel;
    float *mine = malloc(N * sizeof *mine), *what = malloc(N * sizeof *what);
    PL_ASSERT(mine && what);
    if (grads) pl_copy_to_host(mine, grads, N);
    int was = pl_trace_enabled(), Bmb = b->B / m, T = c->seq_len, found = 0;
    pl_trace_enable(0);
    for (int how = 0; how < 2 && !found; how++) {
        double sum = 0, d2 = 0, r2 = 0;
        pl_model_zero_grad(model);
        for (int i = 0; i < m; i++) {
            struct pl_model_ctx ctx = pl_model_ctx_eval();
            ctx.train = 1;
            ctx.step = how == 0 ? 1 : 0;
            ctx.seq0 = how == 0 ? 0 : (int64_t)i * Bmb;
            ctx.loss_scale = 1.0f / (float)m;
            size_t at = (size_t)i * (size_t)Bmb * (size_t)T;
            sum += pl_model_forward(model, b->tokens + at, b->targets + at, Bmb, &ctx);
            if (grads) pl_model_backward(model, &ctx);
        }
        if (grads) {
            pl_copy_to_host(what, model->grads, N);
            for (size_t i = 0; i < N; i++)
                d2 += ((double)mine[i] - what[i]) * ((double)mine[i] - what[i]),
                r2 += (double)what[i] * what[i];
        }
        if (grads ? d2 <= GR_TOL_GRADS * GR_TOL_GRADS * r2
                  : fabs(loss - sum / m) <= GR_TOL_LOSS * fabs(sum / m)) {
            gr_say("correct", "step 0: the %s is what one device computes on this batch when "
                   "every microbatch draws its dropout masks %s: the masks are wrong. "
                   "Microbatch i's context must say where its sequences sit in the whole "
                   "batch, ctx.seq0 = i * B/m (here i * %d), and which step it is, ctx.step = "
                   "m->adam_t + 1 (handout section 3.1)",
                   grads ? "pipeline's gradient" : "last stage's loss",
                   how == 0 ? "at ctx.seq0 = 0, where the first microbatch's are"
                            : "at ctx.step = 0, those of no optimizer step",
                   Bmb);
            found = 1;
        }
    }
    pl_trace_enable(was);
    free(mine);
    free(what);
    pl_model_free(model);
    return found;
}

/* Rank 0, from figures every rank computed: what the gradient error suggests. */
static void explain_grads(const struct gr_reference *ref, int m, int step,
                          const struct gr_param_verdict *v, double ratio)
{
    char what[512];
    gr_describe_param_error(ref, v, what, sizeof what);
    gr_say("correct", "step %d: after pipe_step the gradient differs from the single-device "
           "gradient of the whole batch: %s (tolerance %.0e)", step, what, GR_TOL_GRADS);
    if (m > 1 && fabs(ratio - m) < 0.05 * m) {
        gr_say("correct", "your gradient is %.3g times the reference's with %d microbatches: "
               "scale each microbatch's loss by 1/m (ctx.loss_scale) so their sum is the "
               "mean (handout section 3)", ratio, m);
        return;
    }
    if (m > 1 && fabs(ratio * m * m - 1) < 0.05) {
        gr_say("correct", "your gradient is 1/%d of the reference's: it was scaled by 1/m "
               "twice (handout section 3)", m * m);
        return;
    }
    if (m > 1 && one_microbatch_ok)
        gr_say("correct", "one microbatch trained correctly, %d do not: the microbatches' "
               "gradients must add up to the step's. Zero the gradients once per step, before "
               "the first microbatch, and let every backward accumulate (+=) into them "
               "(handout section 3.1)", m);
    if (m > 1) say_dropout(m);
}

/* The flat range of parts [first, last]. */
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
static double last_stage_loss(const struct member *me, double mine, int from)
{
    double l = mine;
    PL_CHECK_MPI(MPI_Bcast(&l, 1, MPI_DOUBLE, from, me->comm));
    return l;
}

/* Every rank's values of src over the parts it holds, assembled into dst (op memory, the
 * whole flat buffer, the same on every rank of the pipeline): what the pipeline holds, as
 * one model. */
static void assemble(const struct member *me, const struct pl_model_layout *lay,
                     const struct chunks *ch, const float *src, float *dst)
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
static void stage_adamw(const struct member *me, struct pl_model *m, const struct chunks *ch,
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
static void gather_stats(const struct member *me, const struct stage_stats *mine,
                         struct outcome *o)
{
    enum { W = STATS_WORDS };
    double d[W] = {mine->first, mine->last, mine->activ_peak, mine->activ_left,
                   mine->total_peak};
    for (int c = 0; c < PL_MEM_NCAT; c++) d[5 + c] = mine->cat_peak[c];
    double *buf = malloc(sizeof(double) * W * (size_t)pl_size());
    PL_ASSERT(buf);
    PL_CHECK_MPI(MPI_Gather(d, W, MPI_DOUBLE, buf, W, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    for (int r = 0; r < pl_size() && pl_rank() == 0; r++) {
        struct stage_stats *st =
            &o[grid_pipe_of(&me->grid, r)].st[grid_stage_of(&me->grid, r)];
        const double *x = buf + (size_t)W * r;
        *st = (struct stage_stats){(int)x[0], (int)x[1], x[2], x[3], x[4], {0}};
        for (int c = 0; c < PL_MEM_NCAT; c++) st->cat_peak[c] = x[5 + c];
    }
    free(buf);
}

/* Rank 0, when a grid's pipeline is cut wrong: what its communicator's order means. */
static void say_grid(const struct grid *g, const char *part)
{
    char a[160], b[160];
    gr_say(part, "in this case the world is split into %d pipelines of %d stages, each training "
           "on data of its own, whose communicators number their ranks in another order than "
           "the world: pipeline 0 runs %s, pipeline 1 %s. The stage is this rank's rank in the "
           "communicator pipe_new is given (pl_comm_rank(comm)) and p its size "
           "(pl_comm_size(comm)); a stage taken from the world rank (pl_comm_world_rank) is "
           "right only while the pipeline is the whole world in world order (handout "
           "section 3)", g->pipes, g->p, grid_text(g, 0, a, sizeof a),
           grid_text(g, 1, b, sizeof b));
}

/* Rank 0, a grid: a stage of some pipeline holding the parts that the student's own cut
 * (cut: chunk c is parts first[c]..last[c]) gives another stage, the mark of a stage taken
 * from somewhere else than the pipeline's communicator. 1 (said) when one does. */
static int stage_mixed_up(const struct grid *g, const struct outcome *o, const struct chunks *cut)
{
    for (int pipe = 0; pipe < g->pipes; pipe++)
        for (int s = 0; s < g->p; s++) {
            const struct stage_stats *st = &o[pipe].st[s];
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
static int find_chunks(const struct member *me, const struct pipe *pp,
                       const struct pl_model_config *c, int v, struct chunks *ch,
                       struct outcome *o)
{
    struct stage_stats mine = {0, 0, 0, 0, 0, {0}};
    pipe_stage_parts(pp, &mine.first, &mine.last);
    gather_stats(me, &mine, o);
    int p = me->p, cover = 1;
    ch->n = p * v;
    if (me->grid.pipes > 1 && pl_rank() == 0) {
        struct chunks cut;
        pipe_partition(c, p * v, 1, c->seq_len, cut.first, cut.last);
        cover = !stage_mixed_up(&me->grid, o, &cut);
    }
    for (int g = 0; g < me->grid.pipes && cover && v == 1 && pl_rank() == 0; g++) {
        cover = judge_cover(o[g].st, p, c);
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
        struct stage_stats st[MAX_STAGES];
        for (int i = 0; i < ch->n; i++)
            st[i] = (struct stage_stats){ch->first[i], ch->last[i], 0, 0, 0, {0}};
        cover = pl_rank() == 0 ? cover && judge_cover(st, ch->n, c) : 0;
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
static int check_step(const struct member *me, struct pl_model *model, const struct chunks *ch,
                      const struct gr_batch *b, int m, int step, double loss, float *full)
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
        if (pl_rank() == 0 && step == 0 && m > 1 && grid_pipe_of(&me->grid, worst) == me->pipe
            && dropout_explains(ref, b, m, got, NULL)) {
            free(all);
            return 0;
        }
        if (pl_rank() == 0) {
            char in[64] = "";
            if (me->grid.pipes > 1)
                snprintf(in, sizeof in, " of pipeline %d", grid_pipe_of(&me->grid, worst));
            gr_say("correct", "step %d: the last stage%s's loss is %.6f, the single-device loss "
                   "%.6f (relative error %.1e): return the mean of the microbatches' losses, "
                   "each the mean over its own tokens (handout section 3)", step, in, got,
                   want, err);
        }
        if (pl_rank() == 0 && m > 1) say_dropout(m);
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
                && grid_pipe_of(&me->grid, v.rank) == me->pipe
                && dropout_explains(ref, b, m, 0, full);
    if (pl_rank() == 0 && !masks)
        explain_grads(me->ref, m, step, &v, all[v.rank >= 0 ? v.rank : 0]);
    if (pl_rank() == 0 && me->grid.pipes > 1 && v.rank >= 0)
        gr_say("correct", "in pipeline %d of %d (world rank %d is its stage %d)",
               grid_pipe_of(&me->grid, v.rank), me->grid.pipes, v.rank,
               grid_stage_of(&me->grid, v.rank));
    free(all);
    return 0;
}

/* One step of pipe_step; the traced one also records the trace and this rank's memory peak
 * above the level before it (activations, and every category together), and what is left
 * after. Returns the last stage's loss. */
static double one_step(const struct member *me, struct pipe *pp, const struct gr_batch *b,
                       int traced, int last_stage, struct stage_stats *mine, double *live)
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
static int check_params(const struct member *me, struct pl_model *model,
                        const struct chunks *ch, float *full)
{
    struct gr_param_verdict v;
    assemble(me, &model->layout, ch, model->params, full);
    gr_check_params(me->ref, GR_REPLICATED, 0, me->ref->numel, full, GR_TOL_PARAMS, &v);
    if (v.ok) return 1;
    char what[512];
    if (pl_rank() == 0)
        gr_say("correct", "after %d steps the parameters differ from the single-device model's: "
               "%s", K_STEPS, gr_describe_param_error(me->ref, &v, what, sizeof what));
    return 0;
}

/* After pipe_free: what this rank's code still holds, gathered to rank 0; the pipeline's
 * communicator is freed when no rank has an operation in flight on it (pl_comm_free would
 * stop the job: the verdict says it instead), and left allocated otherwise. */
static void close_lifetime(const struct member *me, struct pl_comm *comm,
                           const struct pl_mem_stats *before, struct lifetime *mine,
                           struct outcome *o)
{
    struct pl_mem_stats after;
    pl_mem_get_stats(&after);
    mine->left = gr_mem_grown(before, &after, &mine->left_cat);
    mine->in_flight = pl_comm_in_flight(comm);
    mine->outside = outside_seen();
    enum { W = K_STEPS + 4 };
    double d[W], *all = malloc(sizeof(double) * W * (size_t)pl_size());
    PL_ASSERT(all);
    for (int i = 0; i < K_STEPS; i++) d[i] = mine->live[i];
    d[K_STEPS] = mine->left, d[K_STEPS + 1] = mine->left_cat, d[K_STEPS + 2] = mine->in_flight;
    d[K_STEPS + 3] = mine->outside.where;
    PL_CHECK_MPI(MPI_Allgather(d, W, MPI_DOUBLE, all, W, MPI_DOUBLE, MPI_COMM_WORLD));
    int busy = 0;
    for (int r = 0; r < pl_size(); r++) {
        struct lifetime *l = &o[grid_pipe_of(&me->grid, r)].life[grid_stage_of(&me->grid, r)];
        for (int i = 0; i < K_STEPS; i++) l->live[i] = all[W * r + i];
        l->left = all[W * r + K_STEPS];
        l->left_cat = (int)all[W * r + K_STEPS + 1];
        l->in_flight = (int)all[W * r + K_STEPS + 2];
        l->outside.where = (int)all[W * r + K_STEPS + 3];
        /* the call's name is rank 0's own; other ranks' is said generically */
        snprintf(l->outside.call, sizeof l->outside.call, "%s",
                 r == pl_rank() ? mine->outside.call : "a send or receive");
        busy |= l->in_flight > 0;
    }
    free(all);
    if (!busy) pl_comm_free(comm);
}

/* Runs the K steps of `pipes` pipelines (1: the world; 2: a grid, grid.h) and judges
 * correctness on the way; the last step is traced and its memory peak measured. Each
 * pipeline runs on a communicator split from the world and freed after pipe_free, as a
 * group of a larger grid would be, and trains on batches of its own against its own
 * single-device reference. o[pipes]: each pipeline's outcome, in stage order (rank 0). */
static void run_case(const struct setup *s, enum pipe_schedule k, int m, int pipes,
                     struct outcome *o)
{
    memset(o, 0, sizeof *o * (size_t)pipes);
    const struct pl_model_config *c = &s->train.cfg;
    struct pl_adamw_config opt = s->train.opt;
    struct member me;
    grid_make(&me.grid, pl_size(), pipes);
    me.pipe = grid_pipe_of(&me.grid, pl_rank());
    me.stage = grid_stage_of(&me.grid, pl_rank());
    me.p = me.grid.p;
    me.ref = me.pipe == 0 ? &s->ref : &s->ref1;
    PL_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, me.pipe, me.stage, &me.comm));
    int v = sched_chunks(k, chunks_for(me.p));
    struct pl_model *model = pl_model_new(c, PL_MODEL_ALL);
    struct pipe_options po = {k, m, v};
    struct pl_comm *comm = pl_comm_split(pl_comm_world(), me.pipe, me.stage, "pipeline");
    struct pl_mem_stats before;
    struct lifetime life;
    for (int i = 0; i < K_STEPS; i++) life.live[i] = -1;
    pl_todo_reset();
    pl_mem_get_stats(&before);
    outside_reset();
    struct pipe *pp = pipe_new(comm, model, &po);
    struct stage_stats mine = {0, 0, 0, 0, 0, {0}};
    struct chunks ch;
    int correct = 0;
    if ((o->todo = gr_todo_any())) goto done;
    if (!find_chunks(&me, pp, c, v, &ch, o)) goto done;
    pipe_stage_parts(pp, &mine.first, &mine.last);
    float *full = pl_mem_alloc(me.ref->numel * sizeof(float), PL_MEM_WORK, PL_DEVICE,
                               "assembled model");
    struct gr_batch b;
    gr_batch_new(&b, &me.ref->setup, 0, 1);
    correct = 1;
    for (int step = 0; step < K_STEPS && correct; step++) {
        gr_batch_load(&b, step);
        outside_watch(1);
        double loss = one_step(&me, pp, &b, step == K_STEPS - 1, (ch.n - 1) % me.p, &mine,
                               &life.live[step]);
        outside_watch(0);
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
    for (int g = 0; g < pipes && pl_rank() == 0; g++) grid_trace(&me.grid, g, &world, &o[g].trace);
    pl_trace_merged_free(&world);
done:
    for (int g = 0; g < pipes; g++) o[g].correct = correct, o[g].todo = o->todo;
    pipe_free(pp);
    close_lifetime(&me, comm, &before, &life, o);
    pl_model_free(model);
    PL_CHECK_MPI(MPI_Comm_free(&me.comm));
}

/* ---- the judges (rank 0) ---- */

static const char *op_text(const struct sched_op *op, char *buf, size_t len)
{
    if (op->chunk > 0) snprintf(buf, len, "%c%d/c%d", op->phase, op->mb, op->chunk);
    else if (op->chunk < 0) snprintf(buf, len, "%c%d/c?", op->phase, op->mb);
    else snprintf(buf, len, "%c%d", op->phase, op->mb);
    return buf;
}

/* "F0 F1 F2 B0 ..." of up to n ops into buf. */
static const char *ops_text(const struct sched_op *ops, int n, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        char one[24];
        size_t used = strlen(buf);
        if (used + 16 >= len) break;
        snprintf(buf + used, len - used, "%s%s", i ? " " : "", op_text(&ops[i], one, sizeof one));
    }
    return buf;
}

static const char *schedule_rule(enum pipe_schedule k)
{
    if (k == PIPE_AFAB)
        return "AFAB: every forward in microbatch order, then every backward in microbatch "
               "order (handout section 4)";
    if (k == PIPE_1F1B)
        return "1F1B on stage s: min(p - s - 1, m) warm-up forwards, then F of the next "
               "microbatch and B of the oldest in turn, then the remaining backwards (handout "
               "section 5)";
    return "interleaved 1F1B: p microbatches through chunk 0, the same through chunk 1, ...; "
           "a warm-up of 2(p - s - 1) + (v - 1)p forwards (all of them when m = p), then one "
           "forward one backward, backwards through the chunks in reverse (handout section 8)";
}

static int judge_schedule(enum pipe_schedule k, int m, const struct outcome *o)
{
    const struct pl_merged_trace *t = &o->trace;
    int p = t->nranks, v = o->chunks.n / p, nops = 2 * v * m;
    struct sched_op want[MAX_OPS], got[MAX_OPS];
    for (int s = 0; s < p; s++) {
        int chunk_first[MAX_STAGES];
        for (int j = 0; j < v; j++) chunk_first[j] = o->chunks.first[j * p + s];
        sched_order(k, p, v, s, m, want);
        int n = sched_read_marks(t->events[s], t->nevents[s], chunk_first, v, got, MAX_OPS);
        int bad = n == nops ? -1 : (n < nops ? n : nops);
        for (int i = 0; i < nops && i < n && bad < 0; i++)
            if (got[i].phase != want[i].phase || got[i].mb != want[i].mb
                || got[i].chunk != want[i].chunk)
                bad = i;
        if (bad < 0) continue;
        char a[1024], b[1024];
        gr_say("schedule", "%s, %d stages, %d microbatches: stage %d ran %s; the schedule is %s",
               sched_name(k), p, m, s, ops_text(got, n < MAX_OPS ? n : MAX_OPS, a, sizeof a),
               ops_text(want, nops, b, sizeof b));
        if (bad < n && bad < nops) {
            char x[24], y[24];
            gr_say("schedule", "the first difference is operation %d: %s where the schedule has "
                   "%s", bad + 1, op_text(&got[bad], x, sizeof x), op_text(&want[bad], y, sizeof y));
        }
        gr_say("schedule", "%s", schedule_rule(k));
        return 0;
    }
    return 1;
}

/* Idle fraction of the trace replayed with uniform stage times against the schedule as
 * defined, replayed the same way (and, for AFAB and 1F1B, against (p-1)/(m+p-1)). */
static int judge_bubble(enum pipe_schedule k, int m, const struct outcome *o)
{
    const struct pl_merged_trace *t = &o->trace;
    int p = t->nranks, v = o->chunks.n / p;
    struct pl_merged_trace uni, ideal;
    sched_uniform_copy(t, v, &uni);
    sched_ideal_trace(k, p, v, m, 1.0, &ideal);
    double got = 0, best = 0;
    double formula = k == PIPE_INTERLEAVED ? -1 : sched_bubble_formula(k, p, m);
    char err[512];
    int ok = 0;
    if (sched_replay_bubble(&uni, NULL, NULL, &got, err, sizeof err) != 0) {
        gr_say("bubble", "%s, %d microbatches: your step's trace could not be replayed: %s",
               sched_name(k), m, err);
    } else if (sched_replay_bubble(&ideal, NULL, NULL, &best, err, sizeof err) != 0) {
        gr_say("bubble", "the ideal %s could not be replayed: %s", sched_name(k), err);
    } else if (fabs(got - best) > BUBBLE_TOL || (formula >= 0 && fabs(best - formula) > BUBBLE_TOL)) {
        if (formula >= 0)
            gr_say("bubble", "%s, %d stages, %d microbatches, uniform stage times (F %g, B %g, "
                   "free links): your stages idle %.4f of the step; the schedule idles "
                   "(p-1)/(m+p-1) = %d/%d = %.4f", sched_name(k), p, m, SCHED_UNIT_F,
                   SCHED_UNIT_B, got, p - 1, m + p - 1, formula);
        else
            gr_say("bubble", "%s, %d stages, %d chunks each, %d microbatches, uniform chunk "
                   "times (F %g/%d, B %g/%d, free links): your stages idle %.4f of the step; "
                   "the schedule as defined idles %.4f", sched_name(k), p, v, m, SCHED_UNIT_F,
                   v, SCHED_UNIT_B, v, got, best);
        gr_say("bubble", "%s", got > best ? "a stage waits where the schedule lets it work: a "
               "blocking send or a receive posted too early holds it (handout section 3.2)"
               : "less idle time than the schedule allows: is some work missing from the trace?");
    } else {
        ok = 1;
    }
    /* the same idle time can hide a stage that works late: every operation of AFAB and 1F1B
     * must start when the schedule starts it (interleaved, whose exchanges wait for a
     * step's messages together, is held to its idle time only) */
    int s = 0;
    struct sched_op op;
    double t_got = 0, t_want = 0;
    if (ok && v == 1
        && sched_first_late(k, p, v, m, t, &uni, o->chunks.first, &s, &op, &t_got, &t_want,
                            err, sizeof err) > 0) {
        char x[24];
        gr_say("bubble", "%s, %d stages, %d microbatches, uniform stage times (F %g, B %g, "
               "free links): stage %d starts %s at %g, where the schedule starts it at %g: the "
               "stage works in another order than the schedule, or waits where it could work, "
               "so the pipeline's critical path runs through other operations (handout "
               "section%s)", sched_name(k), p, m, SCHED_UNIT_F, SCHED_UNIT_B, s,
               op_text(&op, x, sizeof x), t_got, t_want,
               k == PIPE_1F1B ? "s 5 and 3.2: the warm-up is min(p - s - 1, m) forwards"
                              : "s 4 and 3.2");
        ok = 0;
    }
    pl_trace_merged_free(&uni);
    pl_trace_merged_free(&ideal);
    return ok;
}

/* What the code holds from step to step and after pipe_free: not more live allocations after
 * every step than after the one before (a buffer allocated once, on first use, is no leak),
 * and nothing after pipe_free that it did not hold before pipe_new. */
static int judge_held(enum pipe_schedule k, int m, const struct outcome *o)
{
    int p = o->trace.nranks;
    char a[32];
    for (int s = 0; s < p; s++) {
        const struct lifetime *l = &o->life[s];
        int every = 1;
        for (int i = 1; i < K_STEPS; i++)
            every &= l->live[i - 1] >= 0 && l->live[i] > l->live[i - 1];
        if (every) {
            gr_say("memory", "%s, %d microbatches: stage %d held more live allocations after "
                   "every step than after the one before (%.0f after step 0, %.0f after step "
                   "%d): pipe_step keeps something it allocates, a receive buffer per "
                   "microbatch perhaps, so memory grows until a long training run runs out. "
                   "Free what a step allocates before pipe_step returns; what lasts from step "
                   "to step is allocated once, in pipe_new, and freed in pipe_free (pipeline.h, "
                   "handout section 3)", sched_name(k), m, s, l->live[0], l->live[K_STEPS - 1],
                   K_STEPS - 1);
            return 0;
        }
        if (l->outside.where) {
            gr_say("memory", "%s, %d microbatches: stage %d gave %s a buffer that lies %s: "
                   "what a stage sends and receives is memory the ledger counts, from "
                   "pl_comm_buf_alloc (device memory on the GPU build, where NCCL reads and "
                   "writes it; an array in the program is host memory it cannot use), "
                   "freed before pipe_step returns or, if kept, in pipe_free (pipeline.h, "
                   "handout section 3)", sched_name(k), m, s, l->outside.call,
                   outside_where(l->outside.where));
            return 0;
        }
        if (l->left > 0) {
            gr_say("memory", "%s, %d microbatches: after pipe_free stage %d still holds %s of "
                   "%s that it did not hold before pipe_new: pipe_free frees everything "
                   "pipe_new and pipe_step allocated (pipeline.h, handout section 3)",
                   sched_name(k), m, s, pl_format_bytes(l->left, a, sizeof a),
                   pl_mem_cat_name((enum pl_mem_cat)l->left_cat));
            return 0;
        }
    }
    return 1;
}

/* An asynchronous send or receive of stage s's traced step that was never waited for: its
 * tag and peer into *tag and *peer, the event type as the result (0: none found). */
static int unwaited(const struct pl_merged_trace *t, int s, int *tag, int *peer)
{
    for (int i = 0; i < t->nevents[s]; i++) {
        const struct pl_event *e = &t->events[s][i];
        if (e->type != PL_EV_ISEND && e->type != PL_EV_IRECV) continue;
        int waited = 0;
        for (int j = i + 1; j < t->nevents[s] && !waited; j++)
            waited = t->events[s][j].type == PL_EV_WAIT && t->events[s][j].handle == e->handle;
        if (!waited) {
            *tag = e->tag, *peer = e->peer;
            return e->type;
        }
    }
    return 0;
}

/* No operation left in flight on the communicator pipe_new was given, after pipe_free: the
 * grader frees it then, and lib's pl_comm_free refuses one with operations in flight. */
static int judge_in_flight(enum pipe_schedule k, int m, const struct outcome *o)
{
    int p = o->trace.nranks;
    for (int s = 0; s < p; s++) {
        int n = o->life[s].in_flight, tag = 0, peer = 0, type;
        if (n <= 0) continue;
        gr_say("traffic", "%s, %d microbatches: after pipe_free stage %d still has %d "
               "operation%s in flight on the communicator pipe_new was given, so it cannot be "
               "freed (pl_comm_free refuses it): a pl_isend or pl_irecv whose handle was never "
               "waited for", sched_name(k), m, s, n, n > 1 ? "s" : "");
        if ((type = unwaited(&o->trace, s, &tag, &peer)))
            gr_say("traffic", "in the last step, stage %d's %s with tag %d (%s %d) was never "
                   "waited for", s, type == PL_EV_ISEND ? "pl_isend" : "pl_irecv", tag,
                   type == PL_EV_ISEND ? "to rank" : "from rank", peer);
        gr_say("traffic", "until a wait completes it, a send may still read its buffer (on "
               "GPUs the transfer runs on its own stream) and a receive may still write its "
               "own: pl_wait every handle before its buffer is reused or freed, at the latest "
               "before pipe_step returns (handout section 3.2)");
        return 0;
    }
    return 1;
}

/* What the kit itself holds for one microbatch on parts [first, last] between its forward
 * and its backward, every category together (*held: the activations and their bookkeeping),
 * and how far above that its forward and backward reach for scratch of their own
 * (*transient), measured on a scratch copy of the parts as pl_parts_acts_bytes measures the
 * activations. */
static void kit_stage_bytes(const struct pl_model_config *c, int first, int last, int B,
                            int T, double *held, double *transient)
{
    int was = pl_trace_enabled();
    pl_trace_enable(0);
    struct pl_model *m = pl_model_new(c, PL_MODEL_PARAMS | PL_MODEL_GRADS);
    size_t N = (size_t)B * (size_t)T, n = pl_parts_boundary_numel(c, B, T);
    int *tok = pl_mem_alloc(N * sizeof(int), PL_MEM_WORK, PL_DEVICE, "grader kit tokens");
    float *x = pl_mem_alloc(n * sizeof(float), PL_MEM_WORK, PL_DEVICE, "grader kit input");
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1;
    struct pl_parts_acts a;
    struct pl_mem_stats before, mid, after;
    pl_mem_reset_peak();
    pl_mem_get_stats(&before);
    pl_parts_forward(m, first, last, 0, &a, &ctx, tok, tok, B, T, x);
    pl_mem_get_stats(&mid);
    pl_parts_backward(m, &a, &ctx, x);
    pl_mem_get_stats(&after);
    *held = (double)mid.current_total - (double)before.current_total;
    *transient = (double)after.peak_total - (double)before.current_total - *held;
    pl_parts_acts_free(&a);
    pl_mem_free(x);
    pl_mem_free(tok);
    pl_model_free(m);
    pl_trace_enable(was);
}

/* The category other than activations that rose most above its level before the step. */
static int top_other_category(const struct stage_stats *st)
{
    int top = PL_MEM_WORK;
    for (int c = 0; c < PL_MEM_NCAT; c++)
        if (c != PL_MEM_ACTIV && st->cat_peak[c] > st->cat_peak[top]) top = c;
    return top;
}

/* Each stage's memory in the traced step, from the ledger, against figures computed from the
 * schedule's order (sched_peak_acts: each microbatch's activations of a chunk held from its
 * forward until its backward is done): the activations at their peak exactly what the
 * order holds (within one boundary buffer), nothing left after the step, and the peak of
 * every category together at most those activations, the kit's own bookkeeping and
 * scratch, and max(v m, 4) + 2 boundary-sized buffers (two to receive into, and one per
 * microbatch and chunk for copies of what is sent or receives posted ahead: handout
 * section 6). */
static int judge_memory(enum pipe_schedule k, int m, const struct outcome *o,
                        const struct pl_model_config *c)
{
    int p = o->trace.nranks, v = o->chunks.n / p, Bmb = GLOBAL_B / m, T = c->seq_len;
    double bnd = 4.0 * (double)pl_parts_boundary_numel(c, Bmb, T);
    const char *rule = k == PIPE_1F1B
        ? "1F1B bounds the warm-up by min(p - s - 1, m) forwards and runs a backward after "
          "every later forward, so a stage never holds more than p - s microbatches (handout "
          "section 5)"
        : k == PIPE_AFAB ? "AFAB holds at most the m microbatches of the step (handout section 4)"
        : "interleaved 1F1B frees a microbatch's activations of a chunk once that chunk's "
          "backward of it is done (once the gradient sent from them has gone, at the latest at "
          "the end of that step's exchange), as 1F1B does: stage s then holds at most its "
          "warm-up, 2(p - s - 1) + (v - 1)p chunk microbatches, plus one; on stage 0 about "
          "1 + (p-1)/(p v) times the p microbatches 1F1B holds there (handout section 8)";
    for (int s = 0; s < p; s++) {
        const struct stage_stats *st = &o->st[s];
        char a[32], b[32], d[32], e[32];
        if (st->activ_left > 0) {
            gr_say("memory", "%s, %d microbatches: stage %d still holds %s of activations after "
                   "pipe_step: free each microbatch's (pl_parts_acts_free) after its backward%s",
                   sched_name(k), m, s, pl_format_bytes(st->activ_left, a, sizeof a),
                   v > 1 ? ", once the gradient sent from them has gone (handout section 8)"
                         : "");
            return 0;
        }
        double chunk[MAX_STAGES], held[MAX_STAGES], kit_extra = 0, per_stage = 0;
        for (int j = 0; j < v; j++) {
            int f = o->chunks.first[j * p + s], l = o->chunks.last[j * p + s];
            double tr;
            chunk[j] = (double)pl_parts_acts_bytes(c, f, l, Bmb, T);
            per_stage += chunk[j];
            kit_stage_bytes(c, f, l, Bmb, T, &held[j], &tr);
            if (tr > kit_extra) kit_extra = tr;
        }
        double acts = sched_peak_acts(k, p, v, s, m, chunk);
        double kit = sched_peak_acts(k, p, v, s, m, held) + kit_extra;
        int nbuf = (v * m > 4 ? v * m : 4) + 2;
        double allowed = kit + nbuf * bnd;
        if (st->activ_peak > acts + bnd) {
            gr_say("memory", "%s, %d stages, %d microbatches: stage %d's activations peaked at %s, "
                   "%.2f microbatches of %s; the schedule holds at most %.2f there (%s)",
                   sched_name(k), p, m, s, pl_format_bytes(st->activ_peak, a, sizeof a),
                   st->activ_peak / per_stage, pl_format_bytes(per_stage, b, sizeof b),
                   acts / per_stage, pl_format_bytes(acts, d, sizeof d));
            gr_say("memory", "%s", rule);
            return 0;
        }
        if (st->activ_peak < acts - bnd) {
            gr_say("memory", "%s, %d stages, %d microbatches: stage %d's activations peaked at "
                   "%.2f microbatches of %s, but the schedule's order holds %.2f there at once "
                   "(%s): every forward before the backward that frees it keeps its activations "
                   "(handout sections 4 and 5)", sched_name(k), p, m, s,
                   st->activ_peak / per_stage, pl_format_bytes(per_stage, a, sizeof a),
                   acts / per_stage, pl_format_bytes(acts, b, sizeof b));
            return 0;
        }
        if (st->total_peak > allowed) {
            int top = top_other_category(st);
            char f[32];
            gr_say("memory", "%s, %d stages, %d microbatch%s: stage %d held %s at its peak, every "
                   "category of the ledger together, %s more than the schedule allows (%s: "
                   "its activations in flight with the kit's own bookkeeping and scratch, and "
                   "max(v m, 4) + 2 = %d boundary-sized buffers of %s, to receive into and for "
                   "copies of what is sent); besides the activations, %s rose most (by %s)",
                   sched_name(k), p, m, m > 1 ? "es" : "", s,
                   pl_format_bytes(st->total_peak, a, sizeof a),
                   pl_format_bytes(st->total_peak - allowed, b, sizeof b),
                   pl_format_bytes(allowed, d, sizeof d), nbuf, pl_format_bytes(bnd, e, sizeof e),
                   pl_mem_cat_name((enum pl_mem_cat)top),
                   pl_format_bytes(st->cat_peak[top], f, sizeof f));
            gr_say("memory", "a stage holds what its schedule keeps in flight, not a copy of "
                   "every microbatch's activations or scratch for the whole batch: free scratch "
                   "once its microbatch is done, and size it by one microbatch (handout "
                   "section 6)");
            return 0;
        }
    }
    return 1;
}

/* Which direction a send to `peer` goes from stage s: 0 forward (an activation), 1 back (a
 * gradient), -1 not to a neighbour. Interleaved the pipeline wraps around, and on 2 ranks
 * both neighbours are the same rank: then the tag's parity says which it is. */
static int send_direction(int s, int p, int v, int peer, int tag)
{
    int next = v > 1 ? (s + 1) % p : s + 1, prev = v > 1 ? (s + p - 1) % p : s - 1;
    if (peer == next && peer == prev) return tag >= 0 && tag % 2;
    return peer == next ? 0 : peer == prev ? 1 : -1;
}

/* Every send of the traced step: to the next stage for an activation (even tag), the
 * previous for a gradient (odd tag), interleaved wrapping around from the last rank to the
 * first; tags PIPE_TAG_ACT/GRAD(j m + mb) for the sender's chunk j, each used once, and
 * only after that chunk's forward (backward) of mb ran, read from the marks before the
 * send; the activation's bytes; no collectives. */
static int judge_traffic(enum pipe_schedule k, int m, const struct outcome *o,
                         const struct pl_model_config *c)
{
    const struct pl_merged_trace *t = &o->trace;
    int p = t->nranks, v = o->chunks.n / p, nc = o->chunks.n;
    double bytes = 4.0 * (double)pl_parts_boundary_numel(c, GLOBAL_B / m, c->seq_len);
    char hb[32];
    for (int s = 0; s < p; s++) {
        int seen[2 * MAX_OPS] = {0}, ran[2 * MAX_OPS] = {0}, nsend = 0, want = 0;
        int chunk_first[MAX_STAGES];
        struct sched_op last = {0, 0, 0};
        for (int j = 0; j < v; j++) chunk_first[j] = o->chunks.first[j * p + s];
        for (int j = 0; j < v; j++) want += m * ((j * p + s > 0) + (j * p + s < nc - 1));
        for (int i = 0; i < t->nevents[s]; i++) {
            const struct pl_event *e = &t->events[s][i];
            struct sched_op op;
            if (sched_read_marks(e, 1, chunk_first, v, &op, 1) == 1) {
                int at = op.chunk * m + op.mb;
                if (op.chunk >= 0 && op.mb >= 0 && op.mb < m) ran[2 * at + (op.phase == 'B')] = 1;
                last = op;
                continue;
            }
            if (e->type == PL_EV_ISSUE) {
                gr_say("traffic", "%s, %d microbatches: stage %d called a collective (%s): a "
                       "pipeline only sends to its neighbours", sched_name(k), m, s,
                       pl_coll_kind_name(e->kind));
                return 0;
            }
            if (e->type != PL_EV_SEND && e->type != PL_EV_ISEND) continue;
            nsend++;
            int grad = send_direction(s, p, v, e->peer, e->tag);
            const char *what = grad ? "a gradient" : "an activation";
            if (grad < 0) {
                gr_say("traffic", "%s: stage %d sent a message (tag %d) to rank %d, which is not "
                       "a neighbouring stage: activations go to the next stage, gradients to "
                       "the previous one", sched_name(k), s, e->tag, e->peer);
                return 0;
            }
            if (e->tag >= 0 && e->tag % 2 != grad) {
                gr_say("traffic", "%s, %d microbatches: stage %d sent tag %d to stage %d, the "
                       "%s stage, so it carries %s; pipeline.h tags %s PIPE_TAG_%s(mb) = 2 mb%s, "
                       "an %s number. The receiver tells the two directions apart by the tag: "
                       "use the header's macros (handout section 3)", sched_name(k), m, s,
                       e->tag, e->peer, grad ? "previous" : "next", what,
                       grad ? "a gradient" : "an activation", grad ? "GRAD" : "ACT",
                       grad ? " + 1" : "", grad ? "odd" : "even");
                return 0;
            }
            if (e->tag < 0 || e->tag >= 2 * v * m || seen[e->tag]++) {
                gr_say("traffic", "%s, %d microbatches: stage %d sent %s to stage %d with tag %d, "
                       "%s", sched_name(k), m, s, what, e->peer,
                       e->tag, e->tag >= 0 && e->tag < 2 * v * m
                       ? "a tag it had already used in this step: two microbatches' messages "
                         "can then be taken for each other"
                       : "not a tag pipeline.h gives it");
                gr_say("traffic", "microbatch i's activation goes with PIPE_TAG_ACT(i) = 2i and "
                       "its gradient with PIPE_TAG_GRAD(i) = 2i + 1 (handout section 3)");
                if (v > 1)
                    gr_say("traffic", "interleaved, the sender's chunk j sends microbatch mb's "
                           "messages as \"microbatch\" j m + mb, PIPE_TAG_ACT(j * m + mb) and "
                           "PIPE_TAG_GRAD(j * m + mb): without the chunk, the %d chunks' "
                           "messages between the same two ranks share one tag (handout "
                           "section 8)", v);
                return 0;
            }
            if (!ran[e->tag]) {
                int mb = e->tag / 2 % m, j = e->tag / 2 / m;
                char chunk[32] = "", x[24];
                if (v > 1) snprintf(chunk, sizeof chunk, " (chunk %d)", j);
                gr_say("traffic", "%s, %d microbatches: stage %d sent %s with tag %d, that of "
                       "microbatch %d%s, when it had not yet run that microbatch's %s (its "
                       "last operation was %s): a message carries the tag of the microbatch "
                       "whose %s it is, PIPE_TAG_%s(%s%d) (handout section 3)", sched_name(k),
                       m, s, what,
                       e->tag, mb, chunk, grad ? "backward" : "forward",
                       last.phase ? op_text(&last, x, sizeof x) : "none", grad ? "gradient"
                       : "activation", grad ? "GRAD" : "ACT", v > 1 ? "j m + " : "", mb);
                return 0;
            }
            if (e->bytes != bytes) {
                gr_say("traffic", "%s: stage %d's message to stage %d with tag %d has %.0f bytes; "
                       "one microbatch's activation is B/m x T x d_model floats = %.0f bytes "
                       "(%s)", sched_name(k), s, e->peer, e->tag, e->bytes, bytes,
                       pl_format_bytes(bytes, hb, sizeof hb));
                return 0;
            }
        }
        if (nsend != want) {
            gr_say("traffic", "%s, %d microbatches: stage %d sent %d messages; it sends one per "
                   "microbatch across each boundary of its chunks, %d", sched_name(k), m, s,
                   nsend, want);
            return 0;
        }
    }
    return 1;
}

/* ---- check mode: the harness's callbacks ---- */

/* The schedule of --op; NAME-hidden also sets the hidden suite's model. */
static enum pipe_schedule schedule_of(const char *op, int *hidden)
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

static void check_stages(const struct pl_model_config *c, enum pipe_schedule k)
{
    int p = pl_size();
    if (k == PIPE_INTERLEAVED && p * V_INTERLEAVED > c->n_layers + 2)
        pl_usage_error_all("interleaved 1F1B on %d stages cuts the model into %d x %d = %d "
                           "chunks, but it has only L + 2 = %d parts: run it on 1 to %d ranks",
                           p, p, V_INTERLEAVED, p * V_INTERLEAVED, c->n_layers + 2,
                           (c->n_layers + 2) / V_INTERLEAVED);
    if (p > c->n_layers + 2)
        pl_usage_error_all("%d stages but the model has %d blocks: a pipeline has at most "
                           "L + 2 = %d stages (the embedding, each block, the head), or a "
                           "stage would be empty; run on 1 to %d ranks",
                           p, c->n_layers, c->n_layers + 2, c->n_layers + 2);
}

struct state {
    enum pipe_schedule k;
    int ncases, cases[NCASES + 1]; /* the m of CASES the schedule runs with on p stages */
    int pipes[NCASES + 1];         /* 1, or 2 for the grid case (grid_fits) */
    struct setup s;
    struct outcome o[GRID_MAX_PIPES]; /* the case that ran last, per pipeline */
};

static void free_traces(struct state *st)
{
    for (int g = 0; g < GRID_MAX_PIPES; g++) pl_trace_merged_free(&st->o[g].trace);
}

static void *setup(const struct gr_args *a)
{
    base_seed = a->seed;
    struct state *st = calloc(1, sizeof *st);
    PL_ASSERT(st);
    st->k = schedule_of(a->op, &hidden_shape);
    struct pl_model_config c = lab_config(1);
    check_stages(&c, st->k);
    for (int i = 0; i < NCASES; i++)
        if (sched_runs(st->k, pl_size(), CASES[i]))
            st->pipes[st->ncases] = 1, st->cases[st->ncases++] = CASES[i];
    /* From 4 ranks up, one case more: two pipelines of n/2 stages (grid.h), m = 2 p, which
     * every schedule runs with (m > p: 1F1B reaches its steady state). */
    if (grid_fits() && sched_runs(st->k, pl_size() / 2, pl_size()))
        st->pipes[st->ncases] = 2, st->cases[st->ncases++] = pl_size();
    setup_init(&st->s, 1);
    /* Point-to-point as NCCL runs it (nothing buffered, a wait completes the whole group):
     * a pipeline that deadlocks on GPUs deadlocks here too, not only on a GPU node. */
    pl_comm_set_p2p_like_nccl(1);
    return st;
}

static const char *subject(void *p)
{
    return sched_name(((struct state *)p)->k);
}

static int count_cases(void *p)
{
    return ((struct state *)p)->ncases;
}

static void describe(void *p, int i, char *buf, size_t len)
{
    struct state *st = p;
    int m = st->cases[i], pipes = st->pipes[i], stages = pl_size() / pipes;
    char chunks[32] = "", grid[64] = "";
    if (st->k == PIPE_INTERLEAVED)
        snprintf(chunks, sizeof chunks, " x %d chunks", chunks_for(stages));
    if (pipes > 1)
        snprintf(grid, sizeof grid, "%d pipelines (each on its own data) of ", pipes);
    snprintf(buf, len, "%s, %s%d stages%s, %d microbatch%s of %d sequences, %d steps",
             sched_name(st->k), grid, stages, chunks, m, m > 1 ? "es" : "", GLOBAL_B / m,
             K_STEPS);
}

static void run(void *p, int i)
{
    struct state *st = p;
    free_traces(st);
    run_case(&st->s, st->k, st->cases[i], st->pipes[i], st->o);
    if (st->cases[i] == 1) one_microbatch_ok = st->o[0].correct;
}

/* One judge of the trace and the ledger on pipeline g's outcome. */
static int judge_pipe(const struct state *st, int m, const char *part, const struct outcome *o)
{
    const struct pl_model_config *c = &st->s.train.cfg;
    if (!strcmp(part, "schedule")) return judge_schedule(st->k, m, o);
    if (!strcmp(part, "bubble")) return judge_bubble(st->k, m, o);
    if (!strcmp(part, "memory")) return judge_memory(st->k, m, o, c) && judge_held(st->k, m, o);
    return judge_in_flight(st->k, m, o) && judge_traffic(st->k, m, o, c);
}

static int judge(void *p, int i, const char *part)
{
    struct state *st = p;
    int m = st->cases[i], pipes = st->pipes[i];
    const struct pl_model_config *c = &st->s.train.cfg;
    if (!strcmp(part, "correct")) {
        if (!st->o[0].correct && pl_rank() == 0)
            gr_say("correct", "in: %s, %s%d stages, %d microbatch%s", sched_name(st->k),
                   pipes > 1 ? "2 pipelines of " : "", pl_size() / pipes, m,
                   m > 1 ? "es" : "");
        return st->o[0].correct;
    }
    if (pl_rank() != 0) return 1;
    if (!strcmp(part, "balance"))
    {
        int first[MAX_STAGES], last[MAX_STAGES], p = pl_size();
        for (int s = 0; s < p; s++) first[s] = st->o[0].st[s].first, last[s] = st->o[0].st[s].last;
        return i > 0 || (part_judge_lab(first, last, p, c) && part_judge_others(c));
    }
    if (strcmp(part, "schedule") && strcmp(part, "bubble") && strcmp(part, "memory")
        && strcmp(part, "traffic")) {
        gr_say(part, "Lab 6 has no part '%s' (correct, balance, schedule, bubble, memory, "
               "traffic)", part);
        return 0;
    }
    for (int g = 0; g < pipes; g++) {
        if (judge_pipe(st, m, part, &st->o[g])) continue;
        if (pipes > 1) {
            struct grid gr;
            char who[160];
            grid_make(&gr, pl_size(), pipes);
            gr_say(part, "in: pipeline %d of %d, %s (stage s is rank s of its communicator)", g,
                   pipes, grid_text(&gr, g, who, sizeof who));
        }
        return 0;
    }
    return 1;
}

static void finish(void *p)
{
    struct state *st = p;
    free_traces(st);
    setup_free(&st->s);
    free(st);
}

/* ---- bench mode: bubble, memory and modelled step per schedule and m ---- */

/* The modelled step of a trace on a real profile, with the topology of the run. */
static double modelled_step(const struct pl_merged_trace *t, const char *profile)
{
    struct pl_replay r;
    char err[256];
    if (pl_replay_run(t, pl_profile_get(profile), pl_topo(), &r, err, sizeof err) != 0) return -1;
    double step = r.step_time;
    pl_replay_free(&r);
    return step;
}

/* One row of the bench table (rank 0); SVGs into svg_dir when given. */
static void bench_row(enum pipe_schedule k, int m, const struct outcome *o,
                      const struct pl_model_config *c, const char *svg_dir, char *row, size_t len)
{
    int p = o->trace.nranks, v = o->chunks.n / p;
    struct pl_merged_trace uni, ideal;
    sched_uniform_copy(&o->trace, v, &uni);
    sched_ideal_trace(k, p, v, m, 1.0, &ideal);
    double bubble = -1, best = -1;
    char err[256], svg[512], title[160];
    snprintf(svg, sizeof svg, "%s/06-%s-p%d-m%d.svg", svg_dir ? svg_dir : ".", op_sched_name(k),
             p, m);
    snprintf(title, sizeof title, "Lab 6: your %s, %d stages, %d microbatches, uniform stage "
             "times", sched_name(k), p, m);
    sched_replay_bubble(&uni, svg_dir ? svg : NULL, title, &bubble, err, sizeof err);
    snprintf(svg, sizeof svg, "%s/06-%s-p%d-m%d-ideal.svg", svg_dir ? svg_dir : ".",
             op_sched_name(k), p, m);
    snprintf(title, sizeof title, "Lab 6: %s as defined, %d stages, %d microbatches",
             sched_name(k), p, m);
    sched_replay_bubble(&ideal, svg_dir ? svg : NULL, title, &best, err, sizeof err);
    /* in microbatches of the whole stage: interleaved, one of each of its chunks */
    double per = 0;
    char held[16];
    for (int j = 0; j < v; j++)
        per += (double)pl_parts_acts_bytes(c, o->chunks.first[j * p], o->chunks.last[j * p],
                                           GLOBAL_B / m, c->seq_len);
    snprintf(held, sizeof held, "%.2f", o->st[0].activ_peak / per);
    snprintf(row, len, "%-16s %3d %9.4f %9.4f %11s %11.1f %12.1f", sched_name(k), m, bubble,
             best, held, o->st[0].activ_peak / 1e3, 1e6 * modelled_step(&o->trace, BENCH_PROFILE));
    pl_trace_merged_free(&uni);
    pl_trace_merged_free(&ideal);
}

static void bench_mode(const char *only, int only_m, const char *svg_dir, const char *label)
{
    struct setup s;
    setup_init(&s, 1);
    const struct pl_model_config *c = &s.train.cfg;
    check_stages(c, PIPE_AFAB);
    int p = pl_size(), nquoted = 0;
    char quoted[3 * NCASES][160];
    pl_print0("# Lab 6 pipeline: %s, %d stages, backend %s; model %d blocks, d_model %d, global "
              "batch %d x %d tokens\n", label ? label : "yours", p, pl_comm_backend(),
              c->n_layers, c->d_model, GLOBAL_B, c->seq_len);
    pl_print0("# bubble: your trace replayed with uniform stage times (F %g, B %g, free links; "
              "a chunk of the interleaved schedule 1/%d of that); ideal: the schedule as "
              "defined, replayed the same way. peak: stage 0's activations at their peak, in "
              "microbatches (interleaved: one of each of its chunks) and kB. %s(us): the trace "
              "on that profile\n", SCHED_UNIT_F, SCHED_UNIT_B, V_INTERLEAVED, BENCH_PROFILE);
    pl_print0("# %-16s %3s %9s %9s %11s %11s %12s\n", "schedule", "m", "bubble", "ideal",
              "peak(mb)", "peak(kB)", "dgx-h100(us)");
    for (int kk = 0; kk < 3; kk++) {
        enum pipe_schedule k = (enum pipe_schedule)kk;
        if (only && strcmp(only, op_sched_name(k))) continue;
        if (k == PIPE_INTERLEAVED && p * V_INTERLEAVED > c->n_layers + 2) continue;
        for (int i = 0; i < NCASES; i++) {
            int m = CASES[i];
            if ((only_m && m != only_m) || !sched_runs(k, p, m)) continue;
            struct outcome o;
            run_case(&s, k, m, 1, &o);
            if (pl_rank() == 0 && o.todo) {
                printf("  %-16s still a stub: %s (see %s section %s)\n", sched_name(k),
                       pl_todo_what(), gr_handout(), pl_todo_section());
            } else if (pl_rank() == 0 && o.trace.nranks) {
                char row[160];
                bench_row(k, m, &o, c, svg_dir, row, sizeof row);
                printf("  %s\n", row);
                /* the rows the handout quotes, on the 4 stages it describes */
                if (p == 4 && (m == 1 || m == 2 || m == 4 || m == 8))
                    snprintf(quoted[nquoted++], sizeof quoted[0], "%s", row);
            }
            pl_trace_merged_free(&o.trace);
            if (o.todo) break;
        }
    }
    for (int i = 0; i < nquoted; i++) pl_print0("# handout: %s\n", quoted[i]);
    if (pl_rank() == 0 && !only) part_print_figures(c);
    if (svg_dir) pl_print0("# wrote each schedule's timeline (yours and the ideal) to %s\n", svg_dir);
    setup_free(&s);
}

/* ---- the driver ---- */

static int bench_m = -1; /* -1: every m of CASES */
static const char *svg_dir;

static void bench(const struct gr_args *a)
{
    base_seed = a->seed;
    if (bench_m != -1) {
        int ok = 0;
        for (int i = 0; i < NCASES; i++) ok |= bench_m == CASES[i];
        if (!ok)
            pl_usage_error_all("--microbatches %d: a step needs m >= 1 microbatches that divide "
                               "its %d sequences (choose 1, 2, 3, 4, 6 or 8)", bench_m, GLOBAL_B);
    }
    if (a->op) schedule_of(a->op, NULL);
    bench_mode(a->op, bench_m > 0 ? bench_m : 0, svg_dir, a->label);
}

static struct pl_flag lab06_flags[] = {
    {"--microbatches", PL_FLAG_INT, &bench_m, "M", "bench: only m = M microbatches", 0},
    {"--svg-dir", PL_FLAG_STR, &svg_dir, "DIR",
     "bench: draw each schedule's timeline, yours and the ideal, into DIR", 0},
};

const struct gr_driver gr_lab_driver = {
    .flags = lab06_flags,
    .nflags = 2,
    .setup = setup,
    .subject = subject,
    .correct_first = "must train correctly first",
    .ncases = count_cases,
    .describe = describe,
    .run = run,
    .judge = judge,
    .bench = bench,
    .finish = finish,
};
