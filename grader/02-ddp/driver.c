/* driver.c: the trusted test driver of Lab 2. It owns main, gives every rank a replica of a
 * tiny GPT initialised differently per rank and its slice of each global batch, drives the
 * student's DDP (ddp.h) for K steps, and compares every step's averaged gradients and loss,
 * and the parameters after K steps, with the single-device reference on the whole batch
 * (grader/common). It reads what was sent from the traffic ledger (per microbatch and per
 * step), replays a traced step on the DGX H100 profile to judge overlap, and times the
 * student's step against the reference solution's (reference.c) in the same run. Verdicts
 * go to the grader's report file (PL_GRADE_REPORT), never to stdout.
 *
 *   driver --op OP --mode check [--parts correct,traffic,overlap] [--seed S]
 *   driver --op OP --mode perf [--seed S]
 *   driver --mode bench [--op OP] [--svg FILE] [--label NAME] [--bucket-bytes N]
 * OP is naive, bucketed, overlapped (one variant) or accumulation (all three with
 * microbatches). */
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp.h"
#include "ops.h"
#include "paralab.h"
#include "reference.h"
#include "todo.h"
#include "train.h"

/* ---- the setup every test shares ---- */

#define K_STEPS 4
#define GLOBAL_B 24      /* sequences per step: 1, 2, 3 and 4 ranks all divide it */
#define MICROBATCHES 2   /* accumulation: and every rank's slice splits in two */
#define CORPUS_TOKENS 65536
/* Buckets of 24 KiB cut the blocks' tensors at uneven places, and wte and head.w (32 KiB
 * each) are larger than a bucket; 1 MiB holds the whole gradient in one bucket. */
#define BUCKET_SMALL (24u * 1024u)
#define BUCKET_ALL (1024u * 1024u)
/* The overlap test replays the step as the step of a model with GPT-2 small's parameter
 * count and this many tokens per rank (handout section 8): every transfer's bytes times
 * MODEL_PSI / Psi, every compute's FLOPs times that and MODEL_TOKENS / tokens per rank. */
#define MODEL_PSI 124e6
#define MODEL_TOKENS 8192.0
#define OVERLAP_PROFILE "dgx-h100"
/* Full overlap marks while the fraction of all-reduce time left exposed is at most the
 * reference solution's plus this; none from OVERLAP_NONE (where blocking calls are). */
#define OVERLAP_SLACK 0.10
#define OVERLAP_NONE 0.95
#define PERF_ROUNDS 5
#define PERF_STEPS 10
#define PERF_BATCHES 3

static const char *const HANDOUT = "docs/labs/02-ddp.md";
static uint64_t base_seed = 1;
static const char *svg_path;
static size_t bench_bucket = BUCKET_SMALL;

static struct pl_model_config lab_config(uint64_t seed)
{
    struct pl_model_config c = pl_model_config_default();
    c.vocab = PL_BYTE_VOCAB;
    c.d_model = 32;
    c.n_layers = 4;
    c.n_heads = 2;
    c.d_ff = 64;
    c.seq_len = 16;
    c.dropout = 0.0f;
    c.n_experts = 0;
    c.seed = seed;
    return c;
}

/* ---- the two implementations: the student's and the reference's ---- */

struct impl {
    const char *who;
    void *(*make)(struct pl_comm *, struct pl_model *, const struct ddp_options *);
    void (*destroy)(void *);
    double (*fb)(void *, const int *, const int *, int, int, int);
    void (*finish)(void *);
    int (*nbuckets)(const void *);
    void (*range)(const void *, int, size_t *, size_t *);
};

static void *mine_new(struct pl_comm *c, struct pl_model *m, const struct ddp_options *o)
{
    return ddp_new(c, m, o);
}
static void mine_free(void *d) { ddp_free(d); }
static double mine_fb(void *d, const int *t, const int *y, int B, int mb, int M)
{
    return ddp_forward_backward(d, t, y, B, mb, M);
}
static void mine_finish(void *d) { ddp_finish_gradients(d); }
static int mine_nb(const void *d) { return ddp_num_buckets(d); }
static void mine_range(const void *d, int i, size_t *o, size_t *n) { ddp_bucket_range(d, i, o, n); }

static void *ref_new(struct pl_comm *c, struct pl_model *m, const struct ddp_options *o)
{
    return ref_ddp_new(c, m, o);
}
static void ref_free(void *d) { ref_ddp_free(d); }
static double ref_fb(void *d, const int *t, const int *y, int B, int mb, int M)
{
    return ref_ddp_forward_backward(d, t, y, B, mb, M);
}
static void ref_finish(void *d) { ref_ddp_finish_gradients(d); }
static int ref_nb(const void *d) { return ref_ddp_num_buckets(d); }
static void ref_range(const void *d, int i, size_t *o, size_t *n) { ref_ddp_bucket_range(d, i, o, n); }

static const struct impl MINE = {"yours", mine_new, mine_free, mine_fb, mine_finish, mine_nb,
                                 mine_range};
static const struct impl REFERENCE = {"the reference solution", ref_new, ref_free, ref_fb,
                                      ref_finish, ref_nb, ref_range};

/* ---- traffic verdicts wait for the correctness verdict ---- */

/* Traffic is judged while the case runs but only told when the variant trains correctly
 * (a wrong gradient explains its own traffic), and only its first failure. */
static char traffic_text[8192];
static int traffic_failed; /* later cases are not judged on traffic */

static void __attribute__((format(printf, 1, 2))) tsay(const char *fmt, ...)
{
    size_t used = strlen(traffic_text);
    if (used + 2 >= sizeof traffic_text) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(traffic_text + used, sizeof traffic_text - used - 1, fmt, ap);
    va_end(ap);
    strcat(traffic_text, "\n");
}

static void tsay_flush(void)
{
    for (char *line = traffic_text, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        if (!nl) break;
        *nl = '\0';
        gr_say("traffic", "%s", line);
    }
    traffic_text[0] = '\0';
}

/* ---- cases ---- */

static const char *const VARIANT_NAME[] = {"naive", "bucketed", "overlapped"};

struct ddp_case {
    struct ddp_options opt;
    int microbatches;
    char why[128];
};

static void describe_case(const struct ddp_case *c, char *buf, size_t len)
{
    char b[64] = "";
    if (c->opt.variant != DDP_NAIVE)
        snprintf(b, sizeof b, ", bucket_bytes %zu", c->opt.bucket_bytes);
    snprintf(buf, len, "%s%s, %d microbatch%s, %d ranks, %d steps of %d sequences (%s)",
             VARIANT_NAME[c->opt.variant], b, c->microbatches, c->microbatches > 1 ? "es" : "",
             pl_size(), K_STEPS, GLOBAL_B, c->why);
}

static int add_case(struct ddp_case *cs, int k, enum ddp_variant v, size_t bucket, int mb,
                    const char *why)
{
    cs[k].opt.variant = v;
    cs[k].opt.bucket_bytes = bucket;
    cs[k].microbatches = mb;
    snprintf(cs[k].why, sizeof cs[k].why, "%s", why);
    return k + 1;
}

/* A bucket size between 8 and 40 KiB drawn from the seed, never a multiple of 4 KiB. */
static size_t seeded_bucket(void)
{
    return 8192 + 4 * (size_t)(pl_mix64(base_seed ^ 0x2dd9) % 8192) + 4;
}

static int make_cases(const char *op, struct ddp_case *cs)
{
    int k = 0;
    char why[128];
    snprintf(why, sizeof why, "a bucket size drawn from the seed");
    if (!strcmp(op, "naive")) {
        k = add_case(cs, k, DDP_NAIVE, 0, 1, "one all-reduce per tensor");
    } else if (!strcmp(op, "bucketed")) {
        k = add_case(cs, k, DDP_BUCKETED, BUCKET_SMALL, 1,
                     "uneven bucket boundaries; wte and head.w are larger than a bucket");
        k = add_case(cs, k, DDP_BUCKETED, BUCKET_ALL, 1, "one bucket holds every gradient");
        k = add_case(cs, k, DDP_BUCKETED, seeded_bucket(), 1, why);
    } else if (!strcmp(op, "overlapped")) {
        k = add_case(cs, k, DDP_OVERLAPPED, BUCKET_SMALL, 1,
                     "uneven bucket boundaries; wte and head.w are larger than a bucket");
        k = add_case(cs, k, DDP_OVERLAPPED, seeded_bucket(), 1, why);
    } else if (!strcmp(op, "accumulation")) {
        k = add_case(cs, k, DDP_NAIVE, 0, MICROBATCHES, "gradient accumulation");
        k = add_case(cs, k, DDP_BUCKETED, BUCKET_SMALL, MICROBATCHES, "gradient accumulation");
        k = add_case(cs, k, DDP_OVERLAPPED, BUCKET_SMALL, MICROBATCHES,
                     "gradient accumulation: the hook must stay silent until the last "
                     "microbatch");
    }
    return k;
}

/* The plan the header's rule gives: whole tensors, last to first, while they fit. */
static int expected_plan(const struct pl_model_layout *lay, size_t bucket_bytes, size_t *off,
                         size_t *len)
{
    size_t cap = bucket_bytes / sizeof(float);
    int b = -1;
    for (int t = lay->n_tensors - 1; t >= 0; t--) {
        const struct pl_param_desc *p = &lay->tensors[t];
        if (b < 0 || len[b] + p->numel > cap) len[++b] = 0;
        off[b] = p->offset;
        len[b] += p->numel;
    }
    return b + 1;
}

/* "tensors h.3.mlp.w_fc2 .. head.w" for the range [off, off+len). */
static void range_tensors(const struct pl_model_layout *lay, size_t off, size_t len, char *buf,
                          size_t blen)
{
    const struct pl_param_desc *a = gr_tensor_at(lay, off);
    const struct pl_param_desc *b = len ? gr_tensor_at(lay, off + len - 1) : a;
    if (!a || !b) snprintf(buf, blen, "outside the parameters");
    else if (a == b) snprintf(buf, blen, "tensor %s", a->name);
    else snprintf(buf, blen, "tensors %s .. %s", a->name, b->name);
}

/* ---- one case ---- */

struct setup {
    struct pl_tokens data;
    struct gr_train_setup train;
    struct gr_reference ref;
};

/* The run's corpus, model and batches; with_reference also trains the single-device
 * reference for `steps` steps (the check mode's), otherwise only its layout is filled in. */
static void setup_init(struct setup *s, int steps, uint64_t data_seed, int with_reference)
{
    memset(s, 0, sizeof *s);
    s->data = pl_corpus_tokens(pl_mix64(base_seed ^ 0xda7a), CORPUS_TOKENS);
    s->train.cfg = lab_config(pl_mix64(base_seed ^ 0x1417));
    s->train.opt = pl_adamw_config_default();
    s->train.data = &s->data;
    s->train.global_B = GLOBAL_B;
    s->train.steps = steps;
    s->train.data_seed = data_seed;
    if (with_reference) {
        gr_reference_run(&s->ref, &s->train);
    } else {
        pl_model_layout_init(&s->ref.layout, &s->train.cfg);
        s->ref.numel = s->ref.layout.numel;
    }
}

static void setup_free(struct setup *s)
{
    gr_reference_free(&s->ref);
    pl_tokens_free(&s->data);
}

/* A replica initialised from another seed on every rank but 0: only a broadcast makes the
 * replicas equal. */
static struct pl_model *new_replica(const struct setup *s)
{
    struct pl_model_config c = s->train.cfg;
    if (pl_rank() != 0) c.seed = pl_mix64(c.seed + 7919u * (uint64_t)pl_rank());
    return pl_model_new(&c, PL_MODEL_ALL);
}

struct outcome {
    int correct, traffic;       /* verdicts (all ranks agree) */
    int todo;                   /* a stub was reached */
    struct pl_merged_trace trace; /* rank 0: the traced step, when asked */
    int traced;
};

/* Says which stub was reached, once, under every part asked for. */
static void say_todo(const char *parts)
{
    const char *w = pl_todo_what(), *sec = pl_todo_section();
    const char *all[] = {"correct", "traffic", "overlap", "perf"};
    for (int i = 0; i < 4; i++)
        if (gr_has_part(parts, all[i]))
            gr_say(all[i], "still a stub: %s (see %s section %s)", w ? w : "?", HANDOUT,
                   sec ? sec : "?");
}

/* Rank 0: why the gradients are wrong, from figures every rank computed. */
static void explain_grads(const struct setup *s, const struct ddp_case *c, int step,
                          const struct gr_param_verdict *v, int replicas_equal, int bad_rank,
                          size_t bad_elem, double ratio)
{
    char what[512];
    const struct pl_model_layout *lay = &s->ref.layout;
    int n = pl_size();
    gr_describe_param_error(&s->ref, v, what, sizeof what);
    gr_say("correct", "step %d: after ddp_finish_gradients the gradient differs from the "
           "single-device gradient of the whole batch: %s (tolerance %.0e)", step, what,
           GR_TOL_GRADS);
    if (!replicas_equal) {
        const struct pl_param_desc *d = gr_tensor_at(lay, bad_elem);
        gr_say("correct", "rank %d's gradient of %s differs from rank 0's (element %zu of "
               "the flat buffer): after ddp_finish_gradients every rank must hold the same "
               "average. A tensor that no all-reduce covered keeps each rank's own gradient "
               "-- is one missing from your loop or your buckets? (handout sections 4 and 5)",
               bad_rank, d ? d->name : "?", bad_elem);
        return;
    }
    if (n > 1 && fabs(ratio - n) < 0.02 * n)
        gr_say("correct", "your gradient is %.3g times the reference's, and %d ranks: the "
               "all-reduce summed the ranks' gradients. Average them: PL_AVG (handout section "
               "4)", ratio, n);
    else if (c->microbatches > 1 && fabs(ratio - c->microbatches) < 0.02 * c->microbatches)
        gr_say("correct", "your gradient is %.3g times the reference's with %d microbatches: "
               "scale each microbatch's loss by 1/microbatches (ctx.loss_scale) so the sum "
               "over microbatches is the mean (handout section 7)", ratio, c->microbatches);
    else if (c->microbatches > 1 && fabs(ratio * c->microbatches - 1) < 0.02)
        gr_say("correct", "your gradient is 1/%d of the reference's: were the gradients "
               "zeroed before every microbatch instead of once per step? (handout section 7)",
               c->microbatches);
}

/* Rank 0: the traffic of ddp_new and of one step against the formulas. */
static int judge_step_traffic(const struct setup *s, const struct ddp_case *c, int step,
                              const struct pl_ledger *all, int nplan)
{
    int n = pl_size();
    double psi = (double)s->ref.numel;
    double want = pl_ring_bytes_sent(PL_ALL_REDUCE, n, 4.0 * psi);
    long want_calls = c->opt.variant == DDP_NAIVE ? s->ref.layout.n_tensors : nplan;
    char a[32];
    for (int r = 0; r < n; r++) {
        const struct pl_ledger *l = &all[r];
        double got = gr_ledger_total_bytes(l), ar = pl_ledger_bytes(l, PL_ALL_REDUCE, -1);
        long calls = l->calls[PL_ALL_REDUCE], other = gr_ledger_total_calls(l) - calls;
        if (fabs(got - want) > 1e-9 * want || fabs(ar - want) > 1e-9 * want) {
            tsay("step %d: rank %d sent %.0f B (%.0f B of it in all-reduces); the "
                 "all-reduce of the gradient of Psi = %.0f parameters sends 2(n-1)/n x 4 Psi "
                 "= %.0f B (%s) per rank on %d ranks", step, r, got, ar, psi, want,
                 gr_human_bytes(want, a, sizeof a), n);
            if (got < want)
                tsay("less than the whole gradient: some gradients were not "
                       "all-reduced, or not with pl_all_reduce");
            else if (fabs(got / want - round(got / want)) < 1e-9)
                tsay("that is %.0f times the gradient: is it all-reduced more than "
                       "once per step?", got / want);
            return 0;
        }
        if (calls != want_calls || other != 0) {
            if (c->opt.variant == DDP_NAIVE)
                tsay("step %d: rank %d made %ld all-reduce calls and %ld other "
                       "collective calls; naive DDP makes one all-reduce per parameter tensor: "
                       "%ld calls (handout section 4)", step, r, calls, other, want_calls);
            else
                tsay("step %d: rank %d made %ld all-reduce calls and %ld other "
                       "collective calls; bucketed DDP makes one all-reduce per bucket: %ld "
                       "calls for bucket_bytes %zu (handout section 5)", step, r, calls, other,
                       want_calls, c->opt.bucket_bytes);
            return 0;
        }
    }
    return 1;
}

static int judge_broadcast_traffic(const struct setup *s, const struct pl_ledger *all)
{
    int n = pl_size();
    double S = 4.0 * (double)s->ref.numel, sum = 0;
    char a[32], b[32];
    for (int r = 0; r < n; r++) sum += pl_ledger_bytes(&all[r], PL_BROADCAST, -1);
    if (n > 1 && fabs(sum - (n - 1) * S) > 1e-9 * S) {
        tsay("ddp_new: the ranks sent %s in broadcasts in all; broadcasting the "
               "Psi = %zu parameters of rank 0 once sends (n-1) x 4 Psi = %s in all (handout "
               "section 3)", gr_human_bytes(sum, a, sizeof a), s->ref.numel,
               gr_human_bytes((n - 1) * S, b, sizeof b));
        return 0;
    }
    return 1;
}

/* Rank 0: the student's plan against the header's rule. */
static int judge_plan(const struct setup *s, const struct ddp_case *c, int got_n,
                      const size_t *got_off, const size_t *got_len)
{
    const struct pl_model_layout *lay = &s->ref.layout;
    size_t *off = malloc((size_t)lay->n_tensors * sizeof *off);
    size_t *len = malloc((size_t)lay->n_tensors * sizeof *len);
    int want_n = expected_plan(lay, c->opt.bucket_bytes, off, len), ok = 1;
    char t1[160], t2[160];
    for (int i = 0; i < want_n && i < got_n && ok; i++) {
        if (got_off[i] == off[i] && got_len[i] == len[i]) continue;
        range_tensors(lay, off[i], len[i], t1, sizeof t1);
        range_tensors(lay, got_off[i], got_len[i], t2, sizeof t2);
        tsay("bucket_bytes %zu: bucket %d should be elements [%zu, %zu) (%s), "
               "yours is [%zu, %zu) (%s). Buckets hold whole tensors, filled from the last "
               "tensor of the flat buffer to the first while they fit (ddp.h, handout section 5)",
               c->opt.bucket_bytes, i, off[i], off[i] + len[i], t1, got_off[i],
               got_off[i] + got_len[i], t2);
        ok = 0;
    }
    if (ok && want_n != got_n) {
        tsay("bucket_bytes %zu: the plan has %d buckets, yours %d (ddp.h, handout "
               "section 5)", c->opt.bucket_bytes, want_n, got_n);
        ok = 0;
    }
    free(off);
    free(len);
    return ok;
}

/* Broadcasts rank 0's verdict. */
static int agree(int ok)
{
    PL_CHECK_MPI(MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD));
    return ok;
}

/* Runs one case with impl; fills out. trace_step >= 0 records that step's trace. Every
 * check is collective, so all ranks follow the same path. */
static void run_case(const struct impl *im, const struct setup *s, const struct ddp_case *c,
                     const char *parts, int trace_step, struct outcome *out)
{
    memset(out, 0, sizeof *out);
    out->correct = out->traffic = 1;
    int n = pl_size(), me = pl_rank();
    int want_traffic = gr_has_part(parts, "traffic") && n > 1 && !traffic_failed;
    int report = im == &MINE;
    const struct pl_model_layout *lay = &s->ref.layout;
    size_t numel = s->ref.numel;
    struct pl_ledger *all = me == 0 ? calloc((size_t)n, sizeof *all) : NULL;
    struct pl_ledger mark, delta, step_delta;

    struct pl_model *m = new_replica(s);
    pl_todo_reset();
    gr_ledger_mark(&mark);
    void *d = im->make(pl_comm_world(), m, &c->opt);
    gr_ledger_since(&mark, &delta);
    if (gr_todo_any()) {
        out->todo = 1;
        out->correct = out->traffic = 0;
        if (report) say_todo(parts);
        goto done;
    }

    /* Section 3: replicas equal to rank 0's. */
    int bad_rank = -1;
    size_t bad_elem = 0;
    if (!gr_replicas_equal(m->params, numel, &bad_rank, &bad_elem)) {
        const struct pl_param_desc *t = gr_tensor_at(lay, bad_elem);
        if (report)
            gr_say("correct", "after ddp_new, rank %d's parameters differ from rank 0's (tensor "
                   "%s, element %zu of the flat buffer): the ranks initialise their replicas "
                   "differently, so ddp_new must broadcast rank 0's parameters (handout "
                   "section 3)", bad_rank, t ? t->name : "?", bad_elem);
        out->correct = 0;
        goto done;
    }
    if (want_traffic) {
        gr_ledger_gather_world(&delta, all);
        if (me == 0 && report && !judge_broadcast_traffic(s, all)) out->traffic = 0;
        out->traffic = agree(out->traffic);
    }

    /* The bucket plan, against the rule of ddp.h. */
    int nplan = c->opt.variant == DDP_NAIVE ? 0 : im->nbuckets(d);
    if (c->opt.variant != DDP_NAIVE && want_traffic && report && me == 0) {
        size_t *off = calloc((size_t)(nplan > 0 ? nplan : 1), sizeof *off);
        size_t *len = calloc((size_t)(nplan > 0 ? nplan : 1), sizeof *len);
        for (int i = 0; i < nplan; i++) im->range(d, i, &off[i], &len[i]);
        if (out->traffic && !judge_plan(s, c, nplan, off, len)) out->traffic = 0;
        free(off);
        free(len);
    }
    if (want_traffic) out->traffic = agree(out->traffic);

    struct gr_batch b;
    gr_batch_new(&b, &s->train, me, n);
    int M = c->microbatches, mbB = b.B / M, T = b.T;
    double *losses = calloc(K_STEPS, sizeof *losses);
    for (int step = 0; step < K_STEPS && out->correct; step++) {
        gr_batch_load(&b, step);
        if (step == trace_step) {
            pl_trace_enable(1);
            pl_trace_clear();
        }
        double loss = 0;
        memset(&step_delta, 0, sizeof step_delta);
        for (int mb = 0; mb < M; mb++) {
            size_t at = (size_t)mb * (size_t)mbB * (size_t)T;
            gr_ledger_mark(&mark);
            pl_span("fwd+bwd");
            loss += im->fb(d, b.tokens + at, b.targets + at, mbB, mb, M);
            gr_ledger_since(&mark, &delta);
            /* Accumulation microbatches send nothing. */
            if (mb < M - 1 && want_traffic) {
                gr_ledger_gather_world(&delta, all);
                if (me == 0 && out->traffic) {
                    for (int r = 0; r < n; r++) {
                        double by = gr_ledger_total_bytes(&all[r]);
                        long calls = gr_ledger_total_calls(&all[r]);
                        if (by == 0 && calls == 0) continue;
                        char h[32];
                        if (report)
                            tsay("step %d, microbatch %d of %d: rank %d sent %s in "
                                   "%ld collective calls. Only the last microbatch may "
                                   "communicate: accumulate the gradients locally and "
                                   "all-reduce once per step (handout section 7)", step, mb + 1,
                                   M, r, gr_human_bytes(by, h, sizeof h), calls);
                        out->traffic = 0;
                        break;
                    }
                }
                out->traffic = agree(out->traffic);
            }
            for (int k = 0; k < PL_NKINDS; k++) {
                step_delta.calls[k] += delta.calls[k];
                for (int l = 0; l < PL_NLINKS; l++) step_delta.bytes[k][l] += delta.bytes[k][l];
            }
        }
        gr_ledger_mark(&mark);
        pl_span("wait");
        im->finish(d);
        gr_ledger_since(&mark, &delta);
        for (int k = 0; k < PL_NKINDS; k++) {
            step_delta.calls[k] += delta.calls[k];
            for (int l = 0; l < PL_NLINKS; l++) step_delta.bytes[k][l] += delta.bytes[k][l];
        }
        if (gr_todo_any()) {
            out->todo = 1;
            out->correct = out->traffic = 0;
            if (report) say_todo(parts);
            if (step == trace_step) pl_trace_enable(0);
            break;
        }
        if (want_traffic) {
            gr_ledger_gather_world(&step_delta, all);
            if (me == 0 && out->traffic && report && !judge_step_traffic(s, c, step, all, nplan))
                out->traffic = 0;
            out->traffic = agree(out->traffic);
        }

        /* The averaged gradient against the single-device gradient of the whole batch. */
        struct gr_param_verdict v;
        gr_check_grads(&s->ref, step, GR_REPLICATED, 0, numel, m->grads, GR_TOL_GRADS, &v);
        if (!v.ok) {
            int eq = gr_replicas_equal(m->grads, numel, &bad_rank, &bad_elem);
            double g2 = 0, r2 = 0, g2all = 0, r2all = 0;
            float *host = malloc(numel * sizeof *host);
            pl_to_host(host, m->grads, numel * sizeof *host);
            const float *want = s->ref.grads + (size_t)step * numel;
            for (size_t i = 0; i < numel; i++) {
                g2 += (double)host[i] * host[i];
                r2 += (double)want[i] * want[i];
            }
            free(host);
            PL_CHECK_MPI(MPI_Reduce(&g2, &g2all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
            PL_CHECK_MPI(MPI_Reduce(&r2, &r2all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
            if (me == 0 && report)
                explain_grads(s, c, step, &v, eq, bad_rank, bad_elem,
                              r2all > 0 ? sqrt(g2all / r2all) : 0);
            out->correct = 0;
            if (step == trace_step) pl_trace_enable(0);
            break;
        }
        pl_span("adamw");
        pl_model_update(m, &s->train.opt);
        if (step == trace_step) {
            pl_trace_flush();
            pl_trace_enable(0);
            pl_trace_gather(&out->trace);
            out->traced = 1;
        }
        losses[step] = gr_global_loss(loss / M);
        double e = gr_rel_err(losses[step], s->ref.loss[step]);
        if (!(e <= GR_TOL_LOSS)) {
            if (report)
                gr_say("correct", "step %d: the loss of the whole batch is %.7g, the single-"
                       "device reference's %.7g (relative error %.2e, tolerance %.0e): "
                       "ddp_forward_backward returns each microbatch's mean loss, unscaled",
                       step, losses[step], s->ref.loss[step], e, GR_TOL_LOSS);
            out->correct = 0;
        }
    }
    if (out->correct) {
        struct gr_param_verdict v;
        gr_check_params(&s->ref, GR_REPLICATED, 0, numel, m->params, GR_TOL_PARAMS, &v);
        if (!v.ok) {
            char what[512];
            if (report)
                gr_say("correct", "after %d steps the parameters differ from the single-device "
                       "reference's: %s (tolerance %.0e)", K_STEPS,
                       gr_describe_param_error(&s->ref, &v, what, sizeof what), GR_TOL_PARAMS);
            out->correct = 0;
        }
    }
    free(losses);
    gr_batch_free(&b);
done:
    im->destroy(d);
    pl_model_free(m);
    free(all);
}

/* ---- overlap on the modelled timeline ---- */

/* Rank 0: not-hidden fraction of a traced step, replayed at GPT-2 small scale. */
static int replay_step(const struct pl_merged_trace *t, const struct setup *s, int tokens,
                       const char *svg, const char *title, struct gr_overlap *o, char *err,
                       size_t errlen)
{
    double bytes_x = MODEL_PSI / (double)s->ref.numel;
    double flops_x = bytes_x * MODEL_TOKENS / (double)tokens;
    return gr_overlap_replay(t, pl_profile_get(OVERLAP_PROFILE), flops_x, bytes_x, svg, title,
                             o, err, errlen);
}

/* Rank 0: wall-clock figures of rank 0's traced step: its span, and time spent waiting for
 * communication (waits and blocking collectives). */
static void wall_figures(const struct pl_merged_trace *t, double *step, double *waiting)
{
    *step = *waiting = 0;
    if (t->nranks < 1 || t->nevents[0] < 1) return;
    const struct pl_event *ev = t->events[0];
    int ne = t->nevents[0];
    *step = ev[ne - 1].t1 - ev[0].t0;
    for (int i = 0; i < ne; i++)
        if (ev[i].type == PL_EV_WAIT) *waiting += ev[i].t1 - ev[i].t0;
}

static void judge_overlap(const struct setup *s, const struct ddp_case *c,
                          const struct outcome *mine)
{
    int n = pl_size();
    int tokens = GLOBAL_B / n * s->train.cfg.seq_len;
    struct outcome ref;
    run_case(&REFERENCE, s, c, "", K_STEPS - 1, &ref);
    if (pl_rank() != 0) {
        pl_trace_merged_free(&ref.trace);
        return;
    }
    struct gr_overlap om, orf;
    char err[512];
    double fraction = 0;
    if (replay_step(&ref.trace, s, tokens, NULL, NULL, &orf, err, sizeof err) != 0) {
        gr_say("overlap", "the reference's step could not be replayed: %s", err);
    } else if (replay_step(&mine->trace, s, tokens, svg_path, "Lab 2: overlapped DDP, one "
                           "step modelled on dgx-h100", &om, err, sizeof err) != 0) {
        gr_say("overlap", "your step's trace could not be replayed: %s", err);
    } else {
        double full = orf.not_hidden + OVERLAP_SLACK;
        fraction = om.not_hidden <= full ? 1.0
                   : om.not_hidden >= OVERLAP_NONE ? 0.0
                   : (OVERLAP_NONE - om.not_hidden) / (OVERLAP_NONE - full);
        double ws, ww;
        wall_figures(&mine->trace, &ws, &ww);
        gr_say("overlap", "modelled on %s at GPT-2 small scale (%d ranks): %.0f%% of your "
               "all-reduce time is not hidden behind backward (%.0f of %.0f us exposed, step "
               "%.0f us); the reference solution leaves %.0f%%; full marks up to %.0f%%, none "
               "from %.0f%% (blocking all-reduces after backward hide nothing)",
               OVERLAP_PROFILE, n, 100 * om.not_hidden, 1e6 * om.exposed, 1e6 * om.comm,
               1e6 * om.step_time, 100 * orf.not_hidden, 100 * full, 100 * OVERLAP_NONE);
        gr_say("overlap", "wall clock on this machine, not graded: rank 0's step took %.2f ms, "
               "%.2f ms of it in pl_wait (MPI progresses shared-memory transfers only inside "
               "MPI calls, on the cores that compute: handout section 8)", 1e3 * ws, 1e3 * ww);
        if (fraction < 1)
            gr_say("overlap", "start each bucket's pl_all_reduce_async from the backward hook "
                   "as soon as its last gradient is written, and wait only in "
                   "ddp_finish_gradients (handout section 6)");
        gr_metric("ddp_not_hidden", om.not_hidden);
    }
    gr_result("overlap", fraction, 0);
    pl_trace_merged_free(&ref.trace);
}

/* ---- check mode ---- */

static void check_mode(const char *op, const char *parts)
{
    struct ddp_case cases[8];
    int ncases = make_cases(op, cases);
    if (!ncases)
        pl_usage_error_all("--op %s is not a Lab 2 test (choose naive, bucketed, overlapped or "
                           "accumulation)", op);
    int n = pl_size();
    if (GLOBAL_B % n || (GLOBAL_B / n) % MICROBATCHES)
        pl_usage_error_all("%d ranks do not divide the global batch of %d sequences into "
                           "slices of whole microbatches (use 1, 2, 3, 4, 6 or 12 ranks)",
                           n, GLOBAL_B);
    struct setup s;
    setup_init(&s, K_STEPS, pl_mix64(base_seed ^ 0x5eed), 1);
    double t0 = MPI_Wtime();
    int ok_correct = 1, ok_traffic = 1, want_overlap = gr_has_part(parts, "overlap");
    int todo = 0;
    struct outcome first;
    memset(&first, 0, sizeof first);
    for (int i = 0; i < ncases; i++) {
        char cs[384];
        describe_case(&cases[i], cs, sizeof cs);
        gr_case("%s", cs);
        struct outcome o;
        int trace = i == 0 && want_overlap ? K_STEPS - 1 : -1;
        run_case(&MINE, &s, &cases[i], parts, trace, &o);
        if (!o.correct && !o.todo) gr_say("correct", "in: %s", cs);
        if (!o.traffic && o.correct && n > 1) tsay("in: %s", cs);
        todo |= o.todo;
        ok_correct &= o.correct;
        ok_traffic &= o.traffic;
        if (!o.traffic) traffic_failed = 1;
        if (i == 0) first = o;
        else pl_trace_merged_free(&o.trace);
        if (!o.correct) break;
    }
    double secs = MPI_Wtime() - t0;
    gr_result("correct", ok_correct, secs);
    if (ok_correct) tsay_flush();
    if (gr_has_part(parts, "traffic")) {
        if (!ok_correct && !todo)
            gr_say("traffic", "not graded: the %s variant must train correctly first", op);
        gr_result("traffic", ok_correct && ok_traffic, secs);
    }
    if (want_overlap) {
        if (!ok_correct || !first.traced) {
            if (!todo)
                gr_say("overlap", "not graded: the %s variant must train correctly first", op);
            gr_result("overlap", 0, secs);
        } else {
            judge_overlap(&s, &cases[0], &first);
        }
    }
    pl_trace_merged_free(&first.trace);
    setup_free(&s);
}

/* ---- perf and bench modes ---- */

/* Seconds per step (forward, backward, synchronisation, AdamW), the slowest rank's. */
static double time_steps(const struct impl *im, void *d, struct pl_model *m,
                         const struct gr_batch *b, const struct pl_adamw_config *opt, int steps,
                         int microbatches)
{
    int mbB = b->B / microbatches;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int s = 0; s < steps; s++) {
        for (int mb = 0; mb < microbatches; mb++) {
            size_t at = (size_t)mb * (size_t)mbB * (size_t)b->T;
            im->fb(d, b->tokens + at, b->targets + at, mbB, mb, microbatches);
        }
        im->finish(d);
        pl_model_update(m, opt);
    }
    double t = (MPI_Wtime() - t0) / steps, tmax;
    PL_CHECK_MPI(MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    return tmax;
}

/* One round of gr_perf_compare: PERF_STEPS steps of the reference (0) or the student's (1). */
struct perf_ctx {
    void *d[2];
    struct pl_model *m[2];
    const struct gr_batch *b;
    const struct pl_adamw_config *opt;
};

static double perf_round(void *ctx, int mine)
{
    struct perf_ctx *c = ctx;
    return time_steps(mine ? &MINE : &REFERENCE, c->d[mine], c->m[mine], c->b, c->opt,
                      PERF_STEPS, 1);
}

static enum ddp_variant variant_of(const char *op)
{
    for (int v = 0; v < 3; v++)
        if (!strcmp(op, VARIANT_NAME[v])) return (enum ddp_variant)v;
    pl_usage_error_all("--op %s has no throughput test (choose naive, bucketed or overlapped)",
                       op);
}

static void perf_mode(const char *op)
{
    enum ddp_variant v = variant_of(op);
    struct setup s;
    setup_init(&s, 1, 1, 0);
    struct ddp_options o = {v, BUCKET_SMALL};
    int n = pl_size();
    gr_case("%s step time beside the reference solution's, %d ranks", op, n);
    double t0 = MPI_Wtime();

    struct pl_model *mm = new_replica(&s), *mr = new_replica(&s);
    pl_todo_reset();
    void *dm = MINE.make(pl_comm_world(), mm, &o);
    void *dr = REFERENCE.make(pl_comm_world(), mr, &o);
    struct gr_batch b;
    gr_batch_new(&b, &s.train, pl_rank(), n);
    gr_batch_load(&b, 0);
    pl_comm_set_checks(0);
    time_steps(&MINE, dm, mm, &b, &s.train.opt, 1, 1);
    int todo = gr_todo_any();
    struct gr_perf pf = {0};
    if (!todo) {
        time_steps(&REFERENCE, dr, mr, &b, &s.train.opt, 1, 1);
        struct perf_ctx pc = {{dr, dm}, {mr, mm}, &b, &s.train.opt};
        gr_perf_compare(perf_round, &pc, PERF_ROUNDS, PERF_BATCHES, &pf);
    }
    pl_comm_set_checks(1);
    gr_batch_free(&b);
    REFERENCE.destroy(dr);
    MINE.destroy(dm);
    pl_model_free(mr);
    pl_model_free(mm);
    setup_free(&s);
    if (todo) {
        say_todo("perf");
        gr_result("perf", 0, MPI_Wtime() - t0);
        return;
    }
    char baseline[64], metric[64];
    snprintf(baseline, sizeof baseline, "the reference solution's %s variant", op);
    snprintf(metric, sizeof metric, "tokens_per_s_%s", op);
    gr_perf_report_step(&pf, (double)GLOBAL_B * s.train.cfg.seq_len, baseline,
                        "the same bytes move in both: look for buffers allocated every step, "
                        "copies into staging buffers the flat gradient does not need, or extra "
                        "synchronisation (a barrier, a blocking wait inside the hook)",
                        metric, t0);
}

/* The table of `make bench LAB=02`: per variant, wall-clock step time, time waiting for
 * communication, tokens/s, and the modelled step on the DGX H100 profile (replayed trace
 * at GPT-2 small scale, and the ledger's serial figure for the bytes actually sent). */
static void bench_mode(const char *only, const char *label)
{
    int n = pl_size(), me = pl_rank();
    struct setup s;
    setup_init(&s, 1, 1, 0);
    const struct pl_model_layout lay = s.ref.layout;
    int tokens_rank = GLOBAL_B / n * s.train.cfg.seq_len;
    const struct pl_profile *prof = pl_profile_get(OVERLAP_PROFILE);
    pl_print0("# Lab 2 DDP: %s, %d ranks, backend %s; model Psi = %zu parameters (%s), global "
              "batch %d x %d tokens, buckets %zu bytes\n", label, n, pl_comm_backend(), lay.numel,
              "d_model 32, 4 layers", GLOBAL_B, s.train.cfg.seq_len, bench_bucket);
    pl_print0("# wall clock on this machine: step (best of 5 x 10), the share of a traced step "
              "spent waiting for communication (pl_wait and blocking collectives, rank 0), "
              "tokens/s.\n# modelled on %s: the step's trace replayed at GPT-2 small scale "
              "(Psi x %.0f, %g tokens/rank): step, exposed all-reduce, share of all-reduce time "
              "hidden behind compute\n", OVERLAP_PROFILE,
              MODEL_PSI / (double)lay.numel, MODEL_TOKENS);
    pl_print0("# ledger(us): this model's step on %s from the ledger alone (FLOPs, bytes and "
              "latencies added up, no overlap)\n#\n", OVERLAP_PROFILE);
    pl_print0("# %-11s %9s %9s %10s %10s %10s | %10s %11s %7s\n", "variant", "step(ms)",
              "waiting", "tokens/s", "sent/rank", "ledger(us)", "model(ms)", "exposed(ms)",
              "hidden");
    for (int v = 0; v < 3; v++) {
        if (only && strcmp(only, VARIANT_NAME[v])) continue;
        struct ddp_options o = {(enum ddp_variant)v, bench_bucket};
        struct pl_model *m = new_replica(&s);
        pl_todo_reset();
        void *d = MINE.make(pl_comm_world(), m, &o);
        struct gr_batch b;
        gr_batch_new(&b, &s.train, me, n);
        gr_batch_load(&b, 0);
        pl_comm_set_checks(0);
        time_steps(&MINE, d, m, &b, &s.train.opt, 1, 1);
        if (gr_todo_any()) {
            pl_print0("  %-11s still a stub: %s (see %s section %s)\n", VARIANT_NAME[v],
                      pl_todo_what(), HANDOUT, pl_todo_section());
        } else {
            double best = 1e30;
            for (int r = 0; r < 5; r++) {
                double t = time_steps(&MINE, d, m, &b, &s.train.opt, 10, 1);
                if (t < best) best = t;
            }
            struct pl_ledger mark, delta;
            gr_ledger_mark(&mark);
            pl_trace_enable(1);
            pl_trace_clear();
            pl_span("fwd+bwd");
            MINE.fb(d, b.tokens, b.targets, b.B, 0, 1);
            pl_span("wait");
            MINE.finish(d);
            pl_span("adamw");
            pl_model_update(m, &s.train.opt);
            pl_trace_flush();
            pl_trace_enable(0);
            gr_ledger_since(&mark, &delta);
            struct pl_merged_trace t;
            pl_trace_gather(&t);
            if (me == 0) {
                struct gr_overlap ov;
                char err[512], title[128];
                snprintf(title, sizeof title, "Lab 2: %s DDP, %d ranks, one step modelled on %s",
                         VARIANT_NAME[v], n, OVERLAP_PROFILE);
                const char *svg = svg_path && v == DDP_OVERLAPPED ? svg_path : NULL;
                double ws, ww, sent = gr_ledger_total_bytes(&delta);
                wall_figures(&t, &ws, &ww);
                char h[32];
                char hid[16] = "-";
                int ok = replay_step(&t, &s, tokens_rank, svg, title, &ov, err, sizeof err) == 0;
                if (ok && ov.comm > 0) snprintf(hid, sizeof hid, "%.0f%%", 100 * (1 - ov.not_hidden));
                if (ok)
                    printf("  %-11s %9.3f %8.0f%% %10.0f %10s %10.1f | %10.3f %11.3f %7s\n",
                           VARIANT_NAME[v], 1e3 * best, ws > 0 ? 100 * ww / ws : 0.0,
                           GLOBAL_B * s.train.cfg.seq_len / best,
                           gr_human_bytes(sent, h, sizeof h),
                           1e6 * pl_ledger_modelled_time(&delta, prof), 1e3 * ov.step_time,
                           1e3 * ov.exposed, hid);
                else
                    printf("  %-11s replay failed: %s\n", VARIANT_NAME[v], err);
            }
            pl_trace_merged_free(&t);
        }
        pl_comm_set_checks(1);
        gr_batch_free(&b);
        MINE.destroy(d);
        pl_model_free(m);
    }
    if (svg_path) pl_print0("# wrote the overlapped step's modelled timeline to %s\n", svg_path);
    setup_free(&s);
}

/* ---- main ---- */

int main(int argc, char **argv)
{
    gr_report_take_env();
    pl_init(&argc, &argv);
    pl_todo_set_handout(HANDOUT);
    gr_report_open();
    const char *op = NULL, *mode = "check", *parts = "correct", *label = "yours (labs/)";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--op") && val) op = argv[++i];
        else if (!strcmp(a, "--mode") && val) mode = argv[++i];
        else if (!strcmp(a, "--parts") && val) parts = argv[++i];
        else if (!strcmp(a, "--seed") && val) base_seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--svg") && val) svg_path = argv[++i];
        else if (!strcmp(a, "--label") && val) label = argv[++i];
        else if (!strcmp(a, "--bucket-bytes") && val) {
            char *end;
            long long b = strtoll(argv[++i], &end, 10);
            if (*end || b < 4)
                pl_usage_error_all("--bucket-bytes expects a whole number of bytes, at least 4 "
                                   "(one float), got '%s'", argv[i]);
            bench_bucket = (size_t)b;
        }
        else
            pl_usage_error_all("unknown argument '%s' (the driver takes --op OP --mode "
                               "check|perf|bench --parts LIST --seed S --svg FILE --label NAME "
                               "--bucket-bytes N)",
                               a);
    }
    if (!strcmp(mode, "bench")) {
        bench_mode(op, label);
    } else if (!op) {
        pl_usage_error_all("--mode %s needs --op (naive, bucketed, overlapped or accumulation)",
                           mode);
    } else if (!strcmp(mode, "check")) {
        check_mode(op, parts);
    } else if (!strcmp(mode, "perf")) {
        perf_mode(op);
    } else {
        pl_usage_error_all("--mode %s: choose check, perf or bench", mode);
    }
    gr_report_close();
    pl_finalize();
    return 0;
}
