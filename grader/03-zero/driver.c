/* driver.c: the trusted test driver of Lab 3 (ZeRO). It owns main, trains the tiny GPT for K
 * AdamW steps with the student's stage (zero.h) on every rank's slice of each global batch,
 * and compares losses and parameters with the single-device reference (grader/common). It
 * reads each step's bytes by collective kind from the traffic ledger and each category's
 * peak from the memory ledger, and judges them against the ZeRO formulas computed in code
 * (formulas.h) for this model; it times the student's stage against the grader's own
 * implementation (reference.c). Verdicts go to the grader's report file (train.h).
 *
 *   driver --op layout --mode check [--seed S]
 *   driver --op zero1|zero2|zero3 --mode check [--parts correct,traffic,memory] [--seed S]
 *   driver --op zero1|zero2|zero3 --mode perf [--seed S]
 *   driver --mode report [--svg FILE] [--seed S]       measured memory per stage, a table
 *                                                       and a bar chart */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formulas.h"
#include "ops.h"
#include "paralab.h"
#include "reference.h"
#include "todo.h"
#include "train.h"
#include "zero.h"

/* The graded model: tiny, with a d_ff that makes every block's size odd, so that no rank
 * count from 2 to 4 divides it and padding is exercised. */
#define VOCAB 256
#define D_MODEL 32
#define N_LAYERS 4
#define N_HEADS 2
#define D_FF 91
#define SEQ_LEN 16
#define GLOBAL_B 12 /* 1, 2, 3 and 4 ranks get equal slices */
#define STEPS 4
#define CORPUS_TOKENS 8192

/* Memory: beside the formulas, a rank may hold the two largest units of gathered parameters
 * (the one computing and the one being prefetched) and two gradient buckets (one being
 * reduced, one being filled); its own bookkeeping (state struct, layout table, a scalar
 * buffer) stays under these many bytes of communication buffers, and of workspace beyond
 * what the ops' scratch takes in the single-device reference. */
#define MEM_SLACK_COMM 4096
#define MEM_SLACK_WORK (24 * 1024)
/* Activations: the kit's zero_pass keeps them for this rank's slice of the batch, so a rank
 * holds the single-device reference's activation peak on the whole batch times its share,
 * and this much beside (a full copy of the parameters is many times more). */
#define MEM_SLACK_ACTIV 4096
#define PERF_ROUNDS 10
#define PERF_BATCHES 3
#define PERF_ITERS 4

#define HANDOUT "docs/labs/03-zero.md"

static uint64_t base_seed = 1;

/* The reason of a part whose run reached a stub (rank 0 knows which, after gr_todo_any). */
static void say_todo(const char *part)
{
    gr_say(part, "still a stub: %s (see %s section %s)", pl_todo_what(), HANDOUT,
           pl_todo_section());
}

static const char *section_of_stage(int stage)
{
    return stage == 1 ? "3" : stage == 2 ? "4" : "5";
}

/* ---- the run's model and data ---- */

static struct pl_model_config graded_config(void)
{
    struct pl_model_config c = pl_model_config_default();
    c.vocab = VOCAB;
    c.d_model = D_MODEL;
    c.n_layers = N_LAYERS;
    c.n_heads = N_HEADS;
    c.d_ff = D_FF;
    c.seq_len = SEQ_LEN;
    c.dropout = 0.0f;
    c.n_experts = 0;
    c.seed = pl_mix64(base_seed * 7919u + 3);
    return c;
}

static struct gr_train_setup graded_setup(const struct pl_tokens *data)
{
    struct gr_train_setup s;
    memset(&s, 0, sizeof s);
    s.cfg = graded_config();
    s.opt = pl_adamw_config_default();
    s.data = data;
    s.global_B = GLOBAL_B;
    s.steps = STEPS;
    s.data_seed = pl_mix64(base_seed + 11);
    return s;
}

static const char *human(double bytes, char *buf, size_t len)
{
    return gr_human_bytes(bytes, buf, len);
}

/* ---- what a stage may hold: the formulas for this model, with the padding of its shards */

struct allowance {
    double psi;                  /* parameters */
    double full, shard;          /* padded elements: a full buffer, one rank's shard */
    double two_units;            /* the two largest padded units */
    struct zero_bytes formula;   /* fp32 formula with Psi (no padding) */
    struct zero_bytes allowed;   /* what the grader accepts */
};

static struct allowance stage_allowance(int stage, const struct zero_layout *zl)
{
    struct allowance a;
    a.psi = (double)zl->numel;
    a.full = (double)zl->full_numel;
    a.shard = (double)zl->shard_numel;
    double w1 = 0, w2 = 0;
    for (int u = 0; u < zl->nunits; u++) {
        double p = (double)zl->unit[u].padded;
        if (p > w1) {
            w2 = w1;
            w1 = p;
        } else if (p > w2) {
            w2 = p;
        }
    }
    a.two_units = w1 + w2;
    a.formula = zero_fp32(stage, a.psi, zl->n);
    /* The same formula with padded counts: a sharded category holds shard elements, a
     * replicated one a full padded buffer (stages) or Psi (DDP). */
    double rep = stage == 0 ? a.psi : a.full;
    a.allowed.optim = 8.0 * (stage >= 1 ? a.shard : rep);
    a.allowed.grads = stage >= 2 ? 4.0 * (a.shard + a.two_units) : 4.0 * rep;
    a.allowed.params = stage >= 3 ? 4.0 * (a.shard + a.two_units) : 4.0 * rep;
    return a;
}

/* ---- what one rank saw, gathered to rank 0 as plain bytes ---- */

struct verdict {
    int rank;
    int null_field;            /* 1 params, 2 grads, 3 m/v, 4 pass: a field zero_new left NULL */
    int layout_bad;
    char layout_msg[400];
    double peak[PL_MEM_NCAT];  /* bytes above what the rank held before zero_new */
    double leak[PL_MEM_NCAT];  /* bytes a step left allocated */
    int leak_step;             /* -1: none */
    double bytes[STEPS][PL_NKINDS];
    long calls[STEPS][PL_NKINDS];
    int steps_done;
};

/* ---- the layout (handout section 2) ---- */

static int compare_unit(const struct zero_unit *e, const struct zero_unit *g, char *msg,
                        size_t len, const char *where)
{
#define FIELD(f, why)                                                                      \
    if (e->f != g->f) {                                                                    \
        snprintf(msg, len, "%s: " #f " is %zu, expected %zu: " why, where, (size_t)g->f,    \
                 (size_t)e->f);                                                            \
        return 0;                                                                          \
    }
    if (e->part != g->part) {
        snprintf(msg, len, "%s: part is %d, expected %d (unit u holds part u - 1: the "
                 "embedding is -1, the blocks 0..L-1, the head L)", where, g->part, e->part);
        return 0;
    }
    FIELD(offset, "the part's first element, from pl_model_part_range")
    FIELD(numel, "the part's elements, from pl_model_part_range")
    FIELD(chunk, "ceil(numel / n), so that n chunks cover the unit and only the last one "
                 "needs padding")
    FIELD(padded, "n x chunk, what every reduce-scatter and all-gather of the unit moves")
    FIELD(full_offset, "the sum of the padded sizes of the units before it")
    FIELD(shard_offset, "the sum of the chunks of the units before it")
#undef FIELD
    return 1;
}

/* 1 when got equals the trusted layout; otherwise a message saying where it differs. */
static int compare_layout(const struct zero_layout *e, const struct zero_layout *g, char *msg,
                          size_t len, const char *what)
{
    char where[160];
    if (g->n != e->n || g->rank != e->rank) {
        snprintf(msg, len, "%s: n=%d rank=%d stored, expected n=%d rank=%d", what, g->n,
                 g->rank, e->n, e->rank);
        return 0;
    }
    if (g->nunits != e->nunits) {
        snprintf(msg, len, "%s: nunits is %d, expected %d (n_layers + 2: the embedding, every "
                 "block, the head)", what, g->nunits, e->nunits);
        return 0;
    }
    for (int u = 0; u < e->nunits; u++) {
        snprintf(where, sizeof where, "%s, unit %d (%zu elements)", what, u, e->unit[u].numel);
        if (!compare_unit(&e->unit[u], &g->unit[u], msg, len, where)) return 0;
    }
    if (g->numel != e->numel || g->full_numel != e->full_numel ||
        g->shard_numel != e->shard_numel) {
        snprintf(msg, len, "%s: numel %zu, full_numel %zu, shard_numel %zu; expected %zu, %zu "
                 "(the sum of padded) and %zu (the sum of chunks)", what, g->numel,
                 g->full_numel, g->shard_numel, e->numel, e->full_numel, e->shard_numel);
        return 0;
    }
    return 1;
}

static void layout_mode(void)
{
    gr_case("zero_layout_init on many model sizes and rank counts");
    double t0 = MPI_Wtime();
    uint64_t r = pl_mix64(base_seed ^ 0x1ab03);
    int ok = 1, tried = 0;
    for (int k = 0; k < 24 && ok; k++) {
        struct pl_model_config c = graded_config();
        if (k > 0) { /* sizes drawn from the seed: odd widths, few and many layers */
            r = pl_mix64(r + (uint64_t)k);
            c.n_heads = 1 + (int)(r % 3);
            c.d_model = c.n_heads * (1 + (int)((r >> 8) % 13));
            c.n_layers = 1 + (int)((r >> 16) % 9);
            c.d_ff = 1 + (int)((r >> 24) % 97);
            c.seq_len = 1 + (int)((r >> 32) % 23);
            c.vocab = 2 + (int)((r >> 40) % 300);
        }
        struct pl_model_layout lay;
        pl_model_layout_init(&lay, &c);
        for (int n = 1; n <= 9 && ok; n++)
            for (int rank = 0; rank < n && ok; rank++) {
                struct zero_layout e, g;
                memset(&g, 0, sizeof g);
                ref_zero_layout_init(&e, &lay, n, rank);
                pl_todo_reset();
                zero_layout_init(&g, &lay, n, rank);
                tried++;
                if (pl_todo_what()) {
                    say_todo("correct");
                    ok = 0;
                    break;
                }
                char what[200], msg[600];
                snprintf(what, sizeof what, "Psi=%zu parameters (n_layers=%d, d_model=%d, "
                         "d_ff=%d, vocab=%d) on n=%d, rank %d", lay.numel, c.n_layers,
                         c.d_model, c.d_ff, c.vocab, n, rank);
                if (!compare_layout(&e, &g, msg, sizeof msg, what)) {
                    gr_say("correct", "%s", msg);
                    ok = 0;
                }
            }
        pl_model_layout_free(&lay);
    }
    if (ok)
        gr_say("correct", "%d layouts (model sizes x rank counts 1..9 x ranks) as expected",
               tried);
    gr_result("correct", ok, MPI_Wtime() - t0);
}

/* ---- reading a stage's parameters back ---- */

/* The model's flat parameters (Psi floats, host) as this rank's state holds them: stages 1
 * and 2 from the full padded buffer, stage 3 gathered from every rank's shard (raw MPI, so
 * the ledger does not see it). zl is the trusted layout. */
static float *flat_params(const struct zero *z, const struct zero_layout *zl)
{
    float *flat = malloc((zl->numel ? zl->numel : 1) * sizeof *flat);
    if (z->stage != 3) {
        for (int u = 0; u < zl->nunits; u++) {
            const struct zero_unit *x = &zl->unit[u];
            pl_to_host(flat + x->offset, z->params + x->full_offset, x->numel * sizeof(float));
        }
        return flat;
    }
    size_t s = zl->shard_numel;
    float *mine = malloc((s ? s : 1) * sizeof *mine);
    float *all = malloc((s ? s : 1) * (size_t)zl->n * sizeof *all);
    pl_to_host(mine, z->params, s * sizeof(float));
    PL_CHECK_MPI(MPI_Allgather(mine, (int)s, MPI_FLOAT, all, (int)s, MPI_FLOAT, MPI_COMM_WORLD));
    for (int u = 0; u < zl->nunits; u++) {
        const struct zero_unit *x = &zl->unit[u];
        for (int r = 0; r < zl->n; r++) {
            size_t start = (size_t)r * x->chunk;
            if (start >= x->numel) break;
            size_t len = x->numel - start < x->chunk ? x->numel - start : x->chunk;
            memcpy(flat + x->offset + start, all + (size_t)r * s + x->shard_offset,
                   len * sizeof(float));
        }
    }
    free(mine);
    free(all);
    return flat;
}

/* ---- check mode ---- */

static void mem_current(double *out)
{
    struct pl_mem_stats st;
    pl_mem_get_stats(&st);
    for (int c = 0; c < PL_MEM_NCAT; c++) out[c] = (double)st.current[c];
}

static int run_student(int stage, const struct gr_train_setup *setup, struct verdict *v,
                       double *losses, struct zero **out, const struct pl_model_layout *lay,
                       const struct zero_layout *e, struct gr_batch *bp, double *base,
                       double *before, double *after);

/* Runs the student's stage for STEPS steps on this rank, filling v; losses[STEPS] get the
 * global loss of each step. Returns 0 when it stopped at a stub. */
static int train_student(int stage, const struct gr_train_setup *setup, struct verdict *v,
                         double *losses, struct zero **out)
{
    int n = pl_size(), me = pl_rank();
    double base[PL_MEM_NCAT], before[PL_MEM_NCAT], after[PL_MEM_NCAT];
    /* What the driver itself needs is allocated before the window opens. */
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, &setup->cfg);
    struct zero_layout e;
    ref_zero_layout_init(&e, &lay, n, me);
    struct gr_batch b;
    gr_batch_new(&b, setup, me, n);
    int reached = run_student(stage, setup, v, losses, out, &lay, &e, &b, base, before, after);
    gr_batch_free(&b);
    pl_model_layout_free(&lay);
    return reached;
}

static int run_student(int stage, const struct gr_train_setup *setup, struct verdict *v,
                       double *losses, struct zero **out, const struct pl_model_layout *lay,
                       const struct zero_layout *e, struct gr_batch *bp, double *base,
                       double *before, double *after)
{
    int n = pl_size(), me = pl_rank();
    mem_current(base);
    pl_mem_reset_peak();
    pl_todo_reset();
    gr_case("zero_new(stage %d) on %d ranks", stage, n);
    struct zero *z = zero_new(&setup->cfg, &setup->opt, stage, stage == 3, pl_comm_world());
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

    char what[120];
    snprintf(what, sizeof what, "rank %d's z->zl (Psi=%zu on %d ranks)", me, lay->numel, n);
    v->layout_bad = !compare_layout(e, &z->zl, v->layout_msg, sizeof v->layout_msg, what);
    if (!v->layout_bad && z->stage != stage) {
        v->layout_bad = 1;
        snprintf(v->layout_msg, sizeof v->layout_msg, "zero_new(stage %d) stored stage %d "
                 "in z->stage", stage, z->stage);
    }
    PL_CHECK_MPI(MPI_Allreduce(&v->layout_bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (any_bad) return 1;

    v->leak_step = -1;
    for (int s = 0; s < STEPS; s++) {
        gr_batch_load(bp, s);
        mem_current(before);
        struct pl_ledger mark, d;
        gr_ledger_mark(&mark);
        gr_case("zero_step %d of %d (stage %d, %d ranks, %d sequences each)", s + 1, STEPS,
                stage, n, bp->B);
        double loss = zero_step(z, bp->tokens, bp->targets, bp->B);
        gr_ledger_since(&mark, &d);
        if (gr_todo_any()) return 0;
        mem_current(after);
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
        losses[s] = gr_global_loss(loss);
        v->steps_done = s + 1;
    }
    struct pl_mem_stats st;
    pl_mem_get_stats(&st);
    for (int c = 0; c < PL_MEM_NCAT; c++)
        v->peak[c] = (double)st.peak[c] > base[c] ? (double)st.peak[c] - base[c] : 0;
    return 1;
}

static const char *cat_what(int c)
{
    switch (c) {
    case PL_MEM_PARAMS: return "parameters";
    case PL_MEM_GRADS: return "gradients";
    case PL_MEM_OPTIM: return "AdamW moments m and v";
    default: return pl_mem_cat_name((enum pl_mem_cat)c);
    }
}

/* What a stage keeps of category c, in words, for messages. */
static const char *cat_rule(int stage, int c)
{
    if (c == PL_MEM_OPTIM)
        return "every stage keeps m and v of its own shard only: 8 bytes x shard_numel";
    if (c == PL_MEM_GRADS)
        return stage == 1 ? "stage 1 keeps the full (padded) gradient: 4 bytes x full_numel"
                          : "stages 2 and 3 keep the gradient shard (4 bytes x shard_numel) "
                            "and at most two units' gradient buckets at a time, each freed "
                            "as soon as it is reduce-scattered";
    return stage == 3 ? "stage 3 keeps the parameter shard (4 bytes x shard_numel) and at "
                        "most two gathered units at a time (the one computing and the next, "
                        "prefetched), each freed right after use"
                      : "stages 1 and 2 keep the full (padded) parameters: 4 bytes x "
                        "full_numel";
}

/* Why a category overflowed, for each stage and category. */
static const char *cat_hint(int stage, int c, double peak, const struct allowance *a)
{
    double full = (c == PL_MEM_OPTIM ? 8.0 : 4.0) * a->psi;
    int sharded = (c == PL_MEM_OPTIM) || (c == PL_MEM_GRADS && stage >= 2) ||
                  (c == PL_MEM_PARAMS && stage >= 3);
    if (sharded && peak >= full) {
        if (c == PL_MEM_OPTIM)
            return "that is the whole model's optimizer state: allocate m and v with "
                   "zl.shard_numel elements and update only your chunks (handout section 3)";
        if (c == PL_MEM_GRADS)
            return "that is a full gradient: reduce-scatter each unit's gradient into the "
                   "shard as the backward produces it, from a bucket freed right after "
                   "(handout section 4)";
        return "that is a full copy of the parameters: gather one unit just before its "
               "forward or backward and pl_mem_free it right after (handout section 5)";
    }
    if (c == PL_MEM_PARAMS && stage == 3)
        return "gathered units are kept too long: free each one as soon as its forward or "
               "backward has run (handout section 5)";
    if (c == PL_MEM_GRADS && stage >= 2)
        return "gradient buckets are kept too long: free each as soon as it is "
               "reduce-scattered (handout section 4)";
    return "allocate exactly what the stage keeps (handout section 2 lists it)";
}

static int judge_memory(int stage, const struct verdict *all, int n, const struct zero_layout *e,
                        const double *ddp)
{
    struct allowance a = stage_allowance(stage, e);
    char b1[32], b2[32], b3[32];
    const int cats[3] = {PL_MEM_PARAMS, PL_MEM_GRADS, PL_MEM_OPTIM};
    const double allowed[3] = {a.allowed.params, a.allowed.grads, a.allowed.optim};
    const double formula[3] = {a.formula.params, a.formula.grads, a.formula.optim};
    /* The report: rank 0's measured bytes beside the formula, and what DDP holds. */
    gr_say("memory", "per rank (fp32, Psi=%.0f, n=%d; formula %s = %s): measured on rank 0 "
           "(formula, accepted):", a.psi, n, zero_fp32_text(stage),
           human(zero_bytes_total(a.formula), b1, sizeof b1));
    for (int k = 0; k < 3; k++)
        gr_say("memory", "  %-6s %10s  (%s, <= %s)", pl_mem_cat_name((enum pl_mem_cat)cats[k]),
               human(all[0].peak[cats[k]], b1, sizeof b1), human(formula[k], b2, sizeof b2),
               human(allowed[k], b3, sizeof b3));
    gr_say("memory", "  %-6s %10s  (the single-device reference's on the whole batch / %d "
           "ranks, <= %s)", "activ", human(all[0].peak[PL_MEM_ACTIV], b1, sizeof b1), n,
           human(ddp[4] / n + MEM_SLACK_ACTIV, b2, sizeof b2));
    gr_say("memory", "  DDP holds params %s, grads %s, optim %s (measured on the single-device "
           "reference); padding: full_numel %.0f, shard_numel %.0f", human(ddp[0], b1, sizeof b1),
           human(ddp[1], b2, sizeof b2), human(ddp[2], b3, sizeof b3), a.full, a.shard);
    for (int i = 0; i < n; i++) {
        const struct verdict *v = &all[i];
        if (v->leak_step >= 0) {
            for (int c = 0; c < PL_MEM_NCAT; c++)
                if (v->leak[c] > 0) {
                    gr_say("memory", "rank %d: zero_step %d left %s of %s allocated that it "
                           "did not hold before the step: %s", i, v->leak_step + 1,
                           human(v->leak[c], b1, sizeof b1), pl_mem_cat_name((enum pl_mem_cat)c),
                           c == PL_MEM_PARAMS ? "a gathered unit never freed? pl_mem_free "
                                                "each one right after its forward or backward "
                                                "(handout section 5)"
                                              : "every buffer a step allocates must be freed "
                                                "before it returns");
                    return 0;
                }
        }
        for (int k = 0; k < 3; k++) {
            if (v->peak[cats[k]] <= allowed[k]) continue;
            gr_say("memory", "rank %d held %s of %s (%s) at peak; ZeRO-%d on %d ranks accepts "
                   "%s (formula %s): %s", i, human(v->peak[cats[k]], b1, sizeof b1),
                   pl_mem_cat_name((enum pl_mem_cat)cats[k]), cat_what(cats[k]), stage, n,
                   human(allowed[k], b2, sizeof b2), human(formula[k], b3, sizeof b3),
                   cat_rule(stage, cats[k]));
            gr_say("memory", "%s", cat_hint(stage, cats[k], v->peak[cats[k]], &a));
            return 0;
        }
        /* Workspace: the ops' scratch, which the single-device reference on the whole
         * batch needs at least as much of, plus bookkeeping. */
        /* Activations: the category a copy filed elsewhere would hide in. */
        const int other[3] = {PL_MEM_COMM, PL_MEM_WORK, PL_MEM_ACTIV};
        const double limit[3] = {MEM_SLACK_COMM, ddp[3] + MEM_SLACK_WORK,
                                 ddp[4] / n + MEM_SLACK_ACTIV};
        for (int k = 0; k < 3; k++) {
            if (v->peak[other[k]] <= limit[k]) continue;
            gr_say("memory", "rank %d held %s of %s at peak, more than the %s a stage needs "
                   "there: parameters, gradients and optimizer state belong in their own "
                   "categories (pl_mem_alloc with PL_MEM_PARAMS, PL_MEM_GRADS or "
                   "PL_MEM_OPTIM, not pl_comm_buf_alloc or PL_MEM_ACTIV), where the formulas "
                   "count them", i,
                   human(v->peak[other[k]], b1, sizeof b1),
                   pl_mem_cat_name((enum pl_mem_cat)other[k]), human(limit[k], b2, sizeof b2));
            return 0;
        }
    }
    return 1;
}

static int judge_traffic(int stage, const struct verdict *all, int n, const struct zero_layout *e)
{
    char b1[32], b2[32], b3[32], b4[32];
    double per = 4.0 * (double)(n - 1) / n; /* bytes sent per element of a collective's size */
    double rs = per * (double)e->full_numel, ag = per * (double)e->full_numel;
    double head = per * (double)e->unit[e->nunits - 1].padded;
    double ag_lo = stage == 3 ? 2 * ag - head : ag, ag_hi = stage == 3 ? 2 * ag : ag;
    double scalar = pl_ring_bytes_sent(PL_ALL_REDUCE, n, 4.0 * 4); /* up to 4 numbers */
    double unit = per * (double)e->numel; /* 4 Psi (n-1)/n */
    const struct verdict *v0 = &all[0];
    double tot0 = 0;
    for (int k = 0; k < PL_NKINDS; k++) tot0 += v0->bytes[0][k];
    gr_say("traffic", "rank 0 sent per step: reduce-scatter %s, all-gather %s, all-reduce %s: "
           "%.3f x 4Psi(n-1)/n (formula %.0fPsi; padded to full_numel=%zu)",
           human(v0->bytes[0][PL_REDUCE_SCATTER], b1, sizeof b1),
           human(v0->bytes[0][PL_ALL_GATHER], b2, sizeof b2),
           human(v0->bytes[0][PL_ALL_REDUCE], b3, sizeof b3), unit > 0 ? tot0 / unit : 0.0,
           zero_comm_psi(stage), e->full_numel);
    for (int i = 0; i < n; i++)
        for (int s = 0; s < all[i].steps_done; s++) {
            const double *by = all[i].bytes[s];
            for (int k = 0; k < PL_NKINDS; k++) {
                if (k == PL_REDUCE_SCATTER || k == PL_ALL_GATHER || k == PL_ALL_REDUCE ||
                    k == PL_BARRIER || by[k] == 0)
                    continue;
                gr_say("traffic", "rank %d, step %d: %s of %s: ZeRO needs only reduce-scatter "
                       "(gradients) and all-gather (parameters)", i, s + 1,
                       human(by[k], b1, sizeof b1), pl_coll_kind_name((enum pl_coll_kind)k));
                return 0;
            }
            if (by[PL_ALL_REDUCE] > scalar) {
                gr_say("traffic", "rank %d, step %d: all-reduce of %s: %s", i, s + 1,
                       human(by[PL_ALL_REDUCE], b1, sizeof b1),
                       stage == 1
                           ? "an all-reduce of the gradient followed by the all-gather of the "
                             "parameters moves 3Psi; a rank updates only its own chunk, so it "
                             "needs only its chunk of the averaged gradient: reduce-scatter "
                             "it (half an all-reduce), and stage 1 costs 2Psi like DDP "
                             "(handout section 3)"
                           : "the gradient was all-reduced where ZeRO reduce-scatters it: "
                             "each rank keeps only its chunk, so the all-reduce's second half "
                             "(an all-gather of the gradient) is wasted traffic, and the full "
                             "gradient it produces is memory the stage promised not to hold "
                             "(handout section 4)");
                return 0;
            }
            if (fabs(by[PL_REDUCE_SCATTER] - rs) > 0.5) {
                gr_say("traffic", "rank %d, step %d: reduce-scatter sent %s; the gradient of "
                       "every unit, padded, reduce-scattered once: 4 x full_numel x (n-1)/n = "
                       "%s%s", i, s + 1, human(by[PL_REDUCE_SCATTER], b1, sizeof b1),
                       human(rs, b2, sizeof b2),
                       by[PL_REDUCE_SCATTER] > rs ? " (a unit reduced twice?)"
                                                  : " (a unit's gradient not reduced?)");
                return 0;
            }
            if (by[PL_ALL_GATHER] < ag_lo - 0.5 || by[PL_ALL_GATHER] > ag_hi + 0.5) {
                if (stage == 3)
                    gr_say("traffic", "rank %d, step %d: all-gather sent %s; stage 3 gathers "
                           "every unit before its forward and again before its backward: 2 x "
                           "4 x full_numel x (n-1)/n = %s (%s if the head stays gathered "
                           "from its forward to its backward)", i, s + 1,
                           human(by[PL_ALL_GATHER], b1, sizeof b1), human(ag_hi, b2, sizeof b2),
                           human(ag_lo, b3, sizeof b3));
                else
                    gr_say("traffic", "rank %d, step %d: all-gather sent %s; after the update "
                           "every unit's parameters are gathered once: 4 x full_numel x "
                           "(n-1)/n = %s", i, s + 1, human(by[PL_ALL_GATHER], b1, sizeof b1),
                           human(ag, b4, sizeof b4));
                return 0;
            }
        }
    return 1;
}

/* Memory DDP holds per rank: the single-device reference, measured while it trains. */
static void measure_reference(struct gr_reference *ref, const struct gr_train_setup *setup,
                              double *ddp)
{
    double base[PL_MEM_NCAT];
    mem_current(base);
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

static void check_mode(int stage, const char *parts)
{
    int n = pl_size(), me = pl_rank();
    int want_traffic = gr_has_part(parts, "traffic"), want_memory = gr_has_part(parts, "memory");
    double t0 = MPI_Wtime();
    struct pl_tokens data = pl_corpus_tokens(pl_mix64(base_seed + 5), CORPUS_TOKENS);
    struct gr_train_setup setup = graded_setup(&data);
    gr_case("the single-device reference: %d AdamW steps on %d sequences", STEPS, GLOBAL_B);
    struct gr_reference ref;
    double ddp[5];
    measure_reference(&ref, &setup, ddp);

    struct verdict v;
    memset(&v, 0, sizeof v);
    v.rank = me;
    double losses[STEPS] = {0};
    struct zero *z = NULL;
    int reached = train_student(stage, &setup, &v, losses, &z);
    struct verdict *all = me == 0 ? calloc((size_t)n, sizeof *all) : NULL;
    PL_CHECK_MPI(MPI_Gather(&v, (int)sizeof v, MPI_BYTE, all, (int)sizeof v, MPI_BYTE, 0,
                            MPI_COMM_WORLD));
    int ok = 1;
    const char *fn = stage == 1 ? "ZeRO-1" : stage == 2 ? "ZeRO-2" : "ZeRO-3";
    if (!reached) {
        say_todo("correct");
        ok = 0;
    } else if (me == 0) {
        for (int i = 0; i < n && ok; i++) {
            static const char *field[] = {"", "z->params", "z->grads", "z->m or z->v",
                                          "z->pass", "the state (zero_new returned NULL)"};
            if (all[i].null_field) {
                gr_say("correct", "rank %d: zero_new(stage %d) left %s NULL: allocate what the "
                       "stage keeps (handout section %s)", i, stage, field[all[i].null_field],
                       section_of_stage(stage));
                ok = 0;
            } else if (all[i].layout_bad) {
                gr_say("correct", "%s", all[i].layout_msg);
                gr_say("correct", "the shard layout decides every offset the grader reads: "
                       "fix zero_layout_init first (handout section 2)");
                ok = 0;
            }
        }
    }
    PL_CHECK_MPI(MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD));
    if (ok) {
        double err;
        int bad = gr_check_losses(losses, ref.loss, STEPS, &err);
        if (bad >= 0) {
            gr_say("correct", "%s on %d ranks, step %d of %d: the loss (mean over ranks) is "
                   "%.8g, the single-device model's on the same global batch %.8g: relative "
                   "error %.2g, more than %.0e", fn, n, bad + 1, STEPS, losses[bad],
                   ref.loss[bad], err, GR_TOL_LOSS);
            if (bad == 0)
                gr_say("correct", "the first forward already differs: are the parameters "
                       "initialised with pl_model_init_flat at their flat offsets, and does "
                       "every unit's forward get its own parameters?");
            else
                gr_say("correct", "the first %d step(s) agreed, so the forward is right and an "
                       "update went wrong: the average (PL_AVG) of the gradients, the clip "
                       "norm summed over all ranks' chunks, AdamW on the own chunk at its flat "
                       "offset, and the all-gather of the updated parameters", bad);
            ok = 0;
        }
    }
    if (ok) {
        struct pl_model_layout lay;
        pl_model_layout_init(&lay, &setup.cfg);
        struct zero_layout e;
        ref_zero_layout_init(&e, &lay, n, me);
        float *flat = flat_params(z, &e);
        float *dev = pl_mem_alloc(e.numel * sizeof(float), PL_MEM_WORK, PL_DEVICE, "lab03 got");
        pl_to_device(dev, flat, e.numel * sizeof(float));
        struct gr_param_verdict pv;
        gr_check_params(&ref, GR_REPLICATED, 0, e.numel, dev, GR_TOL_PARAMS, &pv);
        if (!pv.ok) {
            char desc[512];
            gr_describe_param_error(&ref, &pv, desc, sizeof desc);
            gr_say("correct", "%s on %d ranks: after %d steps the parameters%s differ from the "
                   "single-device model's: %s", fn, n, STEPS,
                   stage == 3 ? " (gathered from every rank's shard)" : "", desc);
            if (pv.nonfinite)
                gr_say("correct", "%d parameters are NaN or Inf: a chunk read past its unit, "
                       "or moments never zeroed?", pv.nonfinite);
            else
                gr_say("correct", "losses agreed, so the last update is off: check that the "
                       "padding is never updated and that every rank updates exactly its "
                       "chunk [rank x chunk, rank x chunk + chunk) of each unit");
            ok = 0;
        }
        pl_mem_free(dev);
        free(flat);
        pl_model_layout_free(&lay);
    }
    double secs = MPI_Wtime() - t0;
    if (ok)
        gr_say("correct", "%d steps on %d ranks match the single-device reference (losses to "
               "%.0e, parameters to %.0e)", STEPS, n, GR_TOL_LOSS, GR_TOL_PARAMS);
    gr_result("correct", ok, secs);

    struct pl_model_layout lay;
    pl_model_layout_init(&lay, &setup.cfg);
    struct zero_layout e;
    ref_zero_layout_init(&e, &lay, n, 0);
    if (want_traffic) {
        int good = 0;
        if (!ok) gr_say("traffic", "not graded: %s must train correctly first", fn);
        else if (me == 0) good = judge_traffic(stage, all, n, &e);
        gr_result("traffic", good, secs);
    }
    if (want_memory) {
        int good = 0;
        if (!ok) gr_say("memory", "not graded: %s must train correctly first", fn);
        else if (me == 0) good = judge_memory(stage, all, n, &e, ddp);
        gr_result("memory", good, secs);
    }
    pl_model_layout_free(&lay);
    free(all);
    zero_free(z);
    gr_reference_free(&ref);
    pl_tokens_free(&data);
}

/* ---- perf mode: the student's stage beside the grader's, same steps, same batch ---- */

/* Seconds of the fastest of iters steps, each the slowest rank's: a step lasts a few
 * milliseconds here, so single steps are timed and noise, which only ever slows a step
 * down, is left out by taking the best. */
static double time_steps(struct zero *z, int student, const struct gr_batch *b, int iters)
{
    double best = 1e30;
    for (int i = 0; i < iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (student) zero_step(z, b->tokens, b->targets, b->B);
        else ref_zero_step(z, b->tokens, b->targets, b->B);
        double t = MPI_Wtime() - t0, tmax;
        PL_CHECK_MPI(MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
        if (tmax < best) best = tmax;
    }
    return best;
}

/* One round of gr_perf_compare: the grader's stage (0) or the student's (1). */
struct perf_ctx {
    struct zero **z; /* [2] */
    const struct gr_batch *b;
};

static double perf_round(void *ctx, int mine)
{
    struct perf_ctx *c = ctx;
    return time_steps(c->z[mine], mine, c->b, PERF_ITERS);
}

static void perf_mode(int stage)
{
    int n = pl_size(), me = pl_rank();
    double t0 = MPI_Wtime();
    struct pl_tokens data = pl_corpus_tokens(pl_mix64(base_seed + 5), CORPUS_TOKENS);
    struct gr_train_setup setup = graded_setup(&data);
    gr_case("ZeRO-%d step time on %d ranks beside the grader's implementation", stage, n);
    pl_todo_reset();
    struct zero *zs = zero_new(&setup.cfg, &setup.opt, stage, stage == 3, pl_comm_world());
    struct zero *zr = ref_zero_new(&setup.cfg, &setup.opt, stage, stage == 3, pl_comm_world());
    struct gr_batch b;
    gr_batch_new(&b, &setup, me, n);
    gr_batch_load(&b, 0);
    if (!gr_todo_any()) time_steps(zs, 1, &b, 1);
    if (gr_todo_any()) {
        say_todo("perf");
        gr_result("perf", 0, 0);
    } else {
        time_steps(zr, 0, &b, 1);
        struct zero *zz[2] = {zr, zs};
        struct perf_ctx pc = {zz, &b};
        struct gr_perf pf;
        gr_perf_compare(perf_round, &pc, PERF_ROUNDS, PERF_BATCHES, &pf);
        char baseline[32], metric[32];
        snprintf(baseline, sizeof baseline, "the grader's ZeRO-%d", stage);
        snprintf(metric, sizeof metric, "zero%d_tokens_per_s", stage);
        gr_perf_report_step(&pf, (double)GLOBAL_B * SEQ_LEN, baseline,
                            "the same collectives on the same bytes: look for a buffer "
                            "allocated per element or per step that need not be, copies the "
                            "algorithm does not need, or waits that serialise the prefetch",
                            metric, t0);
    }
    gr_batch_free(&b);
    ref_zero_free(zr);
    zero_free(zs);
    pl_tokens_free(&data);
}

/* ---- report mode: measured memory per stage, a table and a bar chart ---- */

#define NBARS 5

struct bar {
    char label[32];
    int stage;
    double measured[3]; /* params, grads, optim: the largest rank's peak */
    double formula[3];
};

static void write_svg(const char *path, const struct bar *bars, int nb, int n, double psi)
{
    FILE *f = fopen(path, "w");
    if (!f) pl_usage_error("--svg %s: cannot write the file", path);
    const int W = 640, H = 360, left = 70, right = 150, top = 40, bottom = 50;
    double maxv = 0;
    for (int i = 0; i < nb; i++) {
        double t = bars[i].measured[0] + bars[i].measured[1] + bars[i].measured[2];
        double tf = bars[i].formula[0] + bars[i].formula[1] + bars[i].formula[2];
        if (t > maxv) maxv = t;
        if (tf > maxv) maxv = tf;
    }
    maxv *= 1.08;
    const char *colors[3] = {"#4c72b0", "#dd8452", "#55a868"};
    const char *names[3] = {"params (4Psi)", "grads (4Psi)", "optim m, v (8Psi)"};
    double plot_w = W - left - right, plot_h = H - top - bottom;
    double slot = plot_w / nb, bw = slot * 0.55;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"20\" font-size=\"14\">Memory per rank, measured by the "
               "memory ledger (Psi = %.0f, %d ranks, fp32)</text>\n", left, psi, n);
    for (int k = 0; k <= 4; k++) {
        double v = maxv * k / 4, y = top + plot_h - plot_h * k / 4;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                left, y, left + plot_w, y);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.0f kB</text>\n", left - 6,
                y + 4, v / 1e3);
    }
    for (int i = 0; i < nb; i++) {
        double x = left + slot * i + (slot - bw) / 2, y = top + plot_h;
        for (int c = 0; c < 3; c++) {
            double h = plot_h * bars[i].measured[c] / maxv;
            y -= h;
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                       "fill=\"%s\"/>\n", x, y, bw, h, colors[c]);
        }
        double tf = bars[i].formula[0] + bars[i].formula[1] + bars[i].formula[2];
        double yf = top + plot_h - plot_h * tf / maxv;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\" "
                   "stroke-width=\"2\" stroke-dasharray=\"4 3\"/>\n", x - 4, yf, x + bw + 4, yf);
        double t = bars[i].measured[0] + bars[i].measured[1] + bars[i].measured[2];
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f kB</text>\n",
                x + bw / 2, top + plot_h - plot_h * t / maxv - 6, t / 1e3);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", x + bw / 2,
                top + plot_h + 18, bars[i].label);
    }
    double lx = left + plot_w + 16;
    for (int c = 2; c >= 0; c--) {
        double ly = top + 20 + (2 - c) * 20;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>\n", lx,
                ly - 10, colors[c]);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", lx + 18, ly, names[c]);
    }
    fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\" "
               "stroke-width=\"2\" stroke-dasharray=\"4 3\"/>\n", lx, top + 90, lx + 12,
            top + 90);
    fprintf(f, "<text x=\"%.1f\" y=\"%d\">ZeRO formula</text>\n", lx + 18, top + 94);
    fprintf(f, "</svg>\n");
    fclose(f);
}

static void report_mode(const char *svg)
{
    int n = pl_size(), me = pl_rank();
    struct pl_tokens data = pl_corpus_tokens(pl_mix64(base_seed + 5), CORPUS_TOKENS);
    struct gr_train_setup setup = graded_setup(&data);
    struct gr_reference ref;
    double ddp[5];
    measure_reference(&ref, &setup, ddp);
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, &setup.cfg);
    struct zero_layout e;
    ref_zero_layout_init(&e, &lay, n, 0);
    double psi = (double)lay.numel;
    struct bar bars[NBARS];
    memset(bars, 0, sizeof bars);
    snprintf(bars[0].label, sizeof bars[0].label, "DDP");
    struct zero_bytes f0 = zero_fp32(0, psi, n);
    for (int c = 0; c < 3; c++) bars[0].measured[c] = ddp[c];
    bars[0].formula[0] = f0.params;
    bars[0].formula[1] = f0.grads;
    bars[0].formula[2] = f0.optim;
    int nb = 1;
    for (int k = 1; k <= 4; k++) {
        int stage = k < 4 ? k : 3, prefetch = k == 4;
        struct bar *bar = &bars[nb];
        bar->stage = stage;
        snprintf(bar->label, sizeof bar->label, "ZeRO-%d%s", stage, prefetch ? "+prefetch" : "");
        double base[PL_MEM_NCAT];
        mem_current(base);
        pl_mem_reset_peak();
        pl_todo_reset();
        struct zero *z = zero_new(&setup.cfg, &setup.opt, stage, prefetch, pl_comm_world());
        struct gr_batch b;
        gr_batch_new(&b, &setup, me, n);
        if (!gr_todo_any())
            for (int s = 0; s < 2; s++) {
                gr_batch_load(&b, s);
                zero_step(z, b.tokens, b.targets, b.B);
                if (gr_todo_any()) break;
            }
        int todo = pl_todo_what() != NULL;
        PL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &todo, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        gr_batch_free(&b);
        struct pl_mem_stats st;
        pl_mem_get_stats(&st);
        const int cats[3] = {PL_MEM_PARAMS, PL_MEM_GRADS, PL_MEM_OPTIM};
        for (int c = 0; c < 3; c++) {
            double mine = (double)st.peak[cats[c]] - base[cats[c]];
            PL_CHECK_MPI(MPI_Allreduce(&mine, &bar->measured[c], 1, MPI_DOUBLE, MPI_MAX,
                                       MPI_COMM_WORLD));
        }
        zero_free(z);
        struct zero_bytes fz = zero_fp32(stage, psi, n);
        bar->formula[0] = fz.params;
        bar->formula[1] = fz.grads;
        bar->formula[2] = fz.optim;
        if (todo) {
            pl_print0("# ZeRO-%d is still a stub (see %s): no row\n", stage, HANDOUT);
            continue;
        }
        nb++;
    }
    char b[6][32];
    pl_print0("# Lab 3 memory per rank by category: measured peak (the largest rank's) and the "
              "fp32 formula\n# Psi = %.0f parameters, %d ranks, full_numel %zu, shard_numel %zu "
              "(padding %zu)\n", psi, n, e.full_numel, e.shard_numel, e.full_numel - e.numel);
    pl_print0("# %-16s %-16s %12s %12s %12s %12s %12s %12s\n", "stage", "formula", "params",
              "(formula)", "grads", "(formula)", "optim", "(formula)");
    for (int i = 0; i < nb; i++) {
        for (int c = 0; c < 3; c++) {
            human(bars[i].measured[c], b[2 * c], sizeof b[0]);
            human(bars[i].formula[c], b[2 * c + 1], sizeof b[0]);
        }
        pl_print0("  %-16s %-16s %12s %12s %12s %12s %12s %12s\n", bars[i].label,
                  zero_fp32_text(bars[i].stage), b[0], b[1], b[2], b[3], b[4], b[5]);
    }
    if (svg && me == 0) {
        write_svg(svg, bars, nb, n, psi);
        pl_print0("# bar chart written to %s\n", svg);
    }
    pl_model_layout_free(&lay);
    gr_reference_free(&ref);
    pl_tokens_free(&data);
}

/* ---- main ---- */

int main(int argc, char **argv)
{
    gr_report_take_env();
    pl_init(&argc, &argv);
    pl_todo_set_handout(HANDOUT);
    gr_report_open();
    const char *op = NULL, *mode = "check", *parts = "correct", *svg = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--op") && val) op = argv[++i];
        else if (!strcmp(a, "--mode") && val) mode = argv[++i];
        else if (!strcmp(a, "--parts") && val) parts = argv[++i];
        else if (!strcmp(a, "--seed") && val) base_seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--svg") && val) svg = argv[++i];
        else
            pl_usage_error_all("unknown argument '%s' (the driver takes --op layout|zero1|zero2|"
                               "zero3 --mode check|perf|report --parts LIST --seed S --svg FILE)",
                               a);
    }
    int stage = 0;
    if (op && !strcmp(op, "zero1")) stage = 1;
    else if (op && !strcmp(op, "zero2")) stage = 2;
    else if (op && !strcmp(op, "zero3")) stage = 3;
    else if (op && strcmp(op, "layout"))
        pl_usage_error_all("--op %s is not a Lab 3 test (choose layout, zero1, zero2 or zero3)",
                           op);
    if (GLOBAL_B % pl_size())
        pl_usage_error_all("%d ranks do not divide the global batch of %d sequences (run on 1, "
                           "2, 3, 4, 6 or 12 ranks)", pl_size(), GLOBAL_B);
    if (!strcmp(mode, "report")) {
        report_mode(svg);
    } else if (!strcmp(mode, "check")) {
        if (!op) pl_usage_error_all("--mode check needs --op");
        if (stage) check_mode(stage, parts);
        else layout_mode();
    } else if (!strcmp(mode, "perf")) {
        if (!stage) pl_usage_error_all("--mode perf needs --op zero1, zero2 or zero3");
        perf_mode(stage);
    } else {
        pl_usage_error_all("--mode %s: choose check, perf or report", mode);
    }
    gr_report_close();
    pl_finalize();
    return 0;
}
