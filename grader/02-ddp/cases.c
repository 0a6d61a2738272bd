/* cases.c: Lab 2's model, its case table and single-device references, and one case of the
 * student's DDP run step by step (lab02.h). Each rank gets a replica of a tiny GPT
 * initialised differently per rank and its slice of each global batch, drives the student's
 * DDP (ddp.h) for K steps, and checks every step (checks.c) against the single-device
 * reference on the whole batch, on the world and, on an even rank count, on two groups of
 * every other rank, each its own DDP on the comm ddp_new is given. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_comm.h"
#include "lab02.h"

int l2_dp_size(const struct l2_case *c)
{
    return l2_group_size(c, pl_size());
}

static int add_case(struct l2_case *cs, int k, enum ddp_variant v, size_t bucket, int mb,
                    const char *why)
{
    cs[k].opt.variant = v;
    cs[k].opt.bucket_bytes = bucket;
    cs[k].microbatches = mb;
    cs[k].groups = 1;
    cs[k].uneven = 0;
    snprintf(cs[k].why, sizeof cs[k].why, "%s", why);
    return k + 1;
}

/* Bucket bytes that the two tensors before the last (the final layernorm's weight and
 * bias) fill exactly, the last (the head) being larger: a plan that starts a new bucket on
 * reaching the limit instead of passing it keeps them apart and has one bucket more than
 * the fewest. */
static size_t exact_bucket(void)
{
    struct pl_model_config cfg = l2_config(1);
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, &cfg);
    const struct pl_param_desc *t = lay.tensors + lay.n_tensors - 3;
    size_t bytes = (t[0].numel + t[1].numel) * sizeof(float);
    if (t[2].numel * sizeof(float) <= bytes)
        pl_fatal("lab02: the head no longer outgrows the final layernorm's two vectors");
    pl_model_layout_free(&lay);
    return bytes;
}

/* Bucket bytes below the smallest tensor's (half of it, a whole number of floats): every
 * tensor is a bucket of its own, and the overlapped hook starts many in one part. */
static size_t tiny_bucket(void)
{
    struct pl_model_config cfg = l2_config(1);
    struct pl_model_layout lay;
    size_t least = (size_t)-1;
    pl_model_layout_init(&lay, &cfg);
    for (int t = 0; t < lay.n_tensors; t++)
        if (lay.tensors[t].numel < least) least = lay.tensors[t].numel;
    pl_model_layout_free(&lay);
    return (least / 2 > 1 ? least / 2 : 1) * sizeof(float);
}

/* Microbatches of one sequence each: this rank's whole slice, one by one (12 on 2 ranks). */
static int one_sequence_microbatches(void)
{
    return GLOBAL_B / pl_size();
}

/* A bucket size between 8 and 40 KiB drawn from the seed, never a multiple of 4 KiB. */
static size_t seeded_bucket(uint64_t seed)
{
    return 8192 + 4 * (size_t)(pl_mix64(seed ^ 0x2dd9) % 8192) + 4;
}

int l2_make_cases(const char *op, uint64_t seed, struct l2_case *cs)
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
        k = add_case(cs, k, DDP_BUCKETED, exact_bucket(), 1,
                     "two tensors fill a bucket to its last byte");
        k = add_case(cs, k, DDP_BUCKETED, seeded_bucket(seed), 1, why);
        k = add_case(cs, k, DDP_BUCKETED, tiny_bucket(), 1,
                     "a bucket smaller than the smallest tensor: one bucket per tensor");
    } else if (!strcmp(op, "overlapped")) {
        k = add_case(cs, k, DDP_OVERLAPPED, BUCKET_SMALL, 1,
                     "uneven bucket boundaries; wte and head.w are larger than a bucket");
        k = add_case(cs, k, DDP_OVERLAPPED, seeded_bucket(seed), 1, why);
        k = add_case(cs, k, DDP_OVERLAPPED, tiny_bucket(), 1,
                     "a bucket smaller than the smallest tensor: several start in one part's "
                     "hook");
    } else if (!strcmp(op, "accumulation")) {
        k = add_case(cs, k, DDP_NAIVE, 0, MICROBATCHES, "gradient accumulation");
        k = add_case(cs, k, DDP_BUCKETED, BUCKET_SMALL, MICROBATCHES, "gradient accumulation");
        k = add_case(cs, k, DDP_OVERLAPPED, BUCKET_SMALL, MICROBATCHES,
                     "gradient accumulation: the hook must stay silent until the last "
                     "microbatch");
        k = add_case(cs, k, DDP_OVERLAPPED, BUCKET_ALL, one_sequence_microbatches(),
                     "microbatches of one sequence each; one bucket larger than the model");
    } else if (!strcmp(op, "uneven")) {
        k = add_case(cs, k, DDP_NAIVE, 0, 1, "ranks holding different numbers of sequences");
        k = add_case(cs, k, DDP_BUCKETED, BUCKET_SMALL, 1,
                     "ranks holding different numbers of sequences");
        k = add_case(cs, k, DDP_OVERLAPPED, BUCKET_SMALL, 1,
                     "ranks holding different numbers of sequences: the first bucket starts "
                     "during backward");
        /* over microbatches, every variant: an early microbatch weighted 1/microbatches
         * (right on equal slices) is wrong here */
        k = add_case(cs, k, DDP_NAIVE, 0, MICROBATCHES,
                     "ranks holding different numbers of sequences, over microbatches");
        k = add_case(cs, k, DDP_BUCKETED, BUCKET_SMALL, MICROBATCHES,
                     "ranks holding different numbers of sequences, over microbatches");
        k = add_case(cs, k, DDP_OVERLAPPED, BUCKET_SMALL, MICROBATCHES,
                     "ranks holding different numbers of sequences, over microbatches");
        for (int i = 0; i < k; i++) cs[i].uneven = 1;
        return k;
    }
    /* DDP over a group that is not the world, as in 2D and 3D parallelism: the comm's rank
     * and size are not the world's (pl_rank, pl_size), nor its collectives the world's. */
    if (k > 0 && strcmp(op, "accumulation") && pl_size() % 2 == 0) {
        k = add_case(cs, k, cs[0].opt.variant, cs[0].opt.bucket_bytes, 1,
                     "one DDP per group, on the comm ddp_new was given");
        cs[k - 1].groups = 2;
    }
    return k;
}

void l2_setup_init(struct l2_setup *s, uint64_t seed, int steps, uint64_t data_seed,
                   int with_reference)
{
    memset(s, 0, sizeof *s);
    s->data = pl_corpus_tokens(pl_mix64(seed ^ 0xda7a), CORPUS_TOKENS);
    s->train.cfg = l2_config(pl_mix64(seed ^ 0x1417));
    s->train.opt = pl_adamw_config_default();
    s->train.data = &s->data;
    s->train.global_B = GLOBAL_B;
    s->train.steps = steps;
    s->train.data_seed = data_seed;
    if (with_reference) {
        gr_reference_run(&s->ref, &s->train);
        if (pl_size() % 2 == 0) {
            struct gr_train_setup t = s->train;
            t.data_seed = pl_mix64(data_seed ^ 0x0a7e);
            gr_reference_run(&s->other, &t);
            s->has_other = 1;
        }
    } else {
        pl_model_layout_init(&s->ref.layout, &s->train.cfg);
        s->ref.numel = s->ref.layout.numel;
    }
}

void l2_setup_free(struct l2_setup *s)
{
    gr_reference_free(&s->ref);
    if (s->has_other) gr_reference_free(&s->other);
    pl_tokens_free(&s->data);
}

struct pl_model *l2_new_replica(const struct l2_setup *s, int rank)
{
    struct pl_model_config c = s->train.cfg;
    if (rank != 0) c.seed = pl_mix64(c.seed + 7919u * (uint64_t)rank);
    return pl_model_new(&c, PL_MODEL_ALL);
}

long l2_data_calls(const struct pl_ledger *l)
{
    return gr_ledger_total_calls(l) - l->calls[PL_BARRIER];
}


static void ledger_add(struct pl_ledger *sum, const struct pl_ledger *d)
{
    for (int k = 0; k < PL_NKINDS; k++) {
        sum->calls[k] += d->calls[k];
        for (int l = 0; l < PL_NLINKS; l++) sum->bytes[k][l] += d->bytes[k][l];
    }
}


/* Forward and backward of every microbatch of this step on this rank's slice (r->tokens,
 * r->B sequences of T tokens) and the synchronisation, with the traffic of each; returns the
 * sum of the microbatches' losses. */
static double run_step(struct l2_run *r, int T, int step)
{
    int M = r->c->microbatches, mbB = r->B / M;
    double count = pl_ring_bytes_sent(PL_ALL_REDUCE, l2_dp_size(r->c), 4.0 * L2_COUNT_FLOATS);
    struct pl_ledger mark, delta, step_delta, last_delta;
    memset(&step_delta, 0, sizeof step_delta);
    memset(&last_delta, 0, sizeof last_delta);
    double loss = 0;
    l2_calls_step_begin(r->calls);
    l2_accum_step_begin(&r->acc);
    if (r->counted) memset(r->counted, 0, (size_t)pl_size() * sizeof *r->counted);
    for (int mb = 0; mb < M; mb++) {
        size_t at = (size_t)mb * (size_t)mbB * (size_t)T;
        gr_ledger_mark(&mark);
        pl_span("fwd+bwd");
        l2_calls_microbatch(r->calls, mb == M - 1);
        loss += ddp_forward_backward(r->d, r->tokens + at, r->targets + at, mbB, mb, M);
        gr_ledger_since(&mark, &delta);
        if (mb < M - 1) l2_accum_microbatch(&r->acc, mb, &delta, r->m->grads, count);
        if (mb < M - 1 && r->want_traffic) {
            gr_ledger_gather_world(&delta, r->all);
            l2_traffic_verdict(r, pl_rank() != 0 || !r->out->traffic ||
                                   l2_judge_silent_microbatch(r, step, mb));
        }
        ledger_add(&step_delta, &delta);
        if (mb == M - 1) last_delta = delta;
    }
    l2_calls_backward_over(r->calls);
    gr_ledger_mark(&mark);
    pl_span("wait");
    ddp_finish_gradients(r->d);
    gr_ledger_since(&mark, &delta);
    l2_calls_step_end(r->calls);
    ledger_add(&step_delta, &delta);
    ledger_add(&last_delta, &delta);
    l2_accum_last(&r->acc, &last_delta);
    if (r->want_traffic && !gr_todo_any()) {
        gr_ledger_gather_world(&step_delta, r->all);
        l2_traffic_verdict(r, pl_rank() != 0 || !r->out->traffic ||
                               l2_judge_step_traffic(r, step));
        if (r->out->traffic) l2_traffic_verdict(r, l2_judge_call_ranges(r, step));
    }
    return loss;
}

double l2_mem_held(void)
{
    struct pl_mem_stats st;
    pl_mem_get_stats(&st);
    return (double)st.current_total;
}

/* This rank's slice of step `step` in b: its own (even batches), or its run of the whole
 * global batch (uneven ones: the ranks before it hold the first sequences). */
static void take_slice(struct l2_run *r, const struct gr_batch *b, int step)
{
    int n = pl_comm_size(r->comm), me = pl_comm_rank(r->comm), M = r->c->microbatches, at = 0;
    r->B = r->all_B = b->B;
    r->tokens = b->tokens;
    r->targets = b->targets;
    if (!r->c->uneven) {
        r->all_B = b->B * n;
        return;
    }
    for (int q = 0; q < me; q++) at += M * l2_uneven_seqs(q, n, step);
    r->B = M * l2_uneven_seqs(me, n, step);
    r->all_B = l2_uneven_total(n, M, step);
    r->tokens += (size_t)at * (size_t)b->T;
    r->targets += (size_t)at * (size_t)b->T;
}

/* K steps of training; trace_step's trace is kept in out. */
static void run_steps(struct l2_run *r, int trace_step)
{
    struct gr_batch b;
    if (r->c->uneven) gr_batch_new(&b, &r->ref->setup, 0, 1);
    else gr_batch_new(&b, &r->ref->setup, pl_comm_rank(r->comm), pl_comm_size(r->comm));
    for (int step = 0; step < K_STEPS && r->out->correct; step++) {
        gr_batch_load(&b, step);
        take_slice(r, &b, step);
        if (step == trace_step) {
            pl_trace_enable(1);
            pl_trace_clear();
        }
        /* The model sizes its activations at its first forward: from step 1 on, a step
         * that keeps memory leaks it, once per step of a run of any length. With uneven
         * batches a rank's B changes from step to step, and the activations with it: they
         * are left out, freed before and after each step. */
        if (r->c->uneven) pl_model_free_acts(r->m);
        double held = l2_mem_held();
        double loss = run_step(r, b.T, step);
        if (r->c->uneven) pl_model_free_acts(r->m);
        /* each rank's own figure, judged in part overlap (judge.c) */
        if (r->c->opt.variant == DDP_OVERLAPPED && !r->ob->late.found)
            l2_calls_judge_late(r->calls, step, &r->ob->late);
        if (gr_todo_any()) {
            r->out->correct = r->out->traffic = 0;
        } else if (!l2_check_issue_times(r, step)) {
            r->out->correct = 0;
        } else if (step > 0 && !l2_check_nothing_kept(held, &r->ob->step_kept)) {
            r->ob->code = L2_C_STEP_KEPT;
            r->ob->step = step;
            r->out->correct = 0;
        } else if (!l2_check_grads(r, step)) {
            r->out->correct = 0;
        } else {
            pl_span("adamw");
            pl_model_update(r->m, &r->s->train.opt);
            if (step == trace_step) {
                pl_trace_flush();
                pl_trace_enable(0);
                pl_trace_gather(&r->out->trace);
            }
            r->out->correct = l2_check_replicas(r, step) &&
                              l2_check_loss(r, step, loss / r->c->microbatches);
        }
        if (step == trace_step) pl_trace_enable(0);
    }
    if (r->out->correct) r->out->correct = l2_check_params(r);
    gr_batch_free(&b);
}

/* Collective, after ddp_free: the case's communicator is freed when no rank has an
 * operation on it still in flight (pl_comm_free would stop the job with a usage error);
 * otherwise it is left to the end of the run and the case fails (each rank records how many
 * it left, when the case had not failed before). */
static void free_case_comm(struct l2_run *r)
{
    int n = gr_case_comm_free(r->comm), most = 0;
    PL_CHECK_MPI(MPI_Allreduce(&n, &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (most && r->out->correct) {
        r->ob->in_flight = n;
        r->out->correct = 0;
    }
    r->comm = NULL;
}

void l2_run_case(struct l2_state *st, int i, int trace_step, struct l2_obs *ob)
{
    const struct l2_setup *s = &st->s;
    const struct l2_case *c = &st->cases[i];
    struct l2_outcome *out = &st->last;
    memset(out, 0, sizeof *out);
    out->correct = out->traffic = 1;
    *ob = (struct l2_obs){.rank = pl_rank(), .nranks = pl_size(), .c = *c,
                          .cfg = s->train.cfg, .numel = s->ref.numel};
    struct l2_run r = {.s = s, .c = c, .out = out, .ob = ob, .tfig = &ob->traffic,
                       .want_traffic = st->want_traffic && pl_size() > 1};
    r.all = pl_rank() == 0 ? calloc((size_t)pl_size(), sizeof *r.all) : NULL;
    /* Every case runs on a communicator of its own, split from the world and freed after
     * ddp_free, as the caller of a DDP inside 2D or 3D parallelism would. */
    int color = pl_rank() % c->groups;
    r.comm = pl_comm_split(pl_comm_world(), color, pl_rank(), "dp");
    PL_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, pl_rank(), &r.group));
    r.ref = color == 1 && s->has_other ? &s->other : &s->ref;
    r.counted = pl_rank() == 0 ? calloc((size_t)pl_size(), sizeof *r.counted) : NULL;
    struct gr_reference uneven;
    if (c->uneven) {
        l2_uneven_reference(&uneven, &s->train, l2_dp_size(c), c->microbatches);
        r.ref = &uneven;
    }
    double held = l2_mem_held();
    l2_accum_init(&r.acc, s->ref.numel);
    r.m = l2_new_replica(s, pl_comm_rank(r.comm));
    r.calls = l2_calls_watch(r.m);
    pl_todo_reset();
    struct pl_ledger mark, delta;
    gr_ledger_mark(&mark);
    r.d = ddp_new(r.comm, r.m, &c->opt);
    gr_ledger_since(&mark, &delta);
    if (gr_todo_any()) {
        out->correct = out->traffic = 0;
    } else if (l2_check_setup(&r, &delta)) {
        run_steps(&r, trace_step);
    }
    ddp_free(r.d);
    ob->hook_left = l2_calls_hook_left(r.calls);
    if (!gr_agree(!ob->hook_left)) out->correct = 0;
    l2_calls_unwatch(r.calls);
    pl_model_free(r.m);
    free_case_comm(&r);
    if (out->correct && !l2_check_nothing_kept(held, &ob->free_kept)) out->correct = 0;
    PL_CHECK_MPI(MPI_Comm_free(&r.group));
    l2_accum_free(&r.acc);
    if (c->uneven) gr_reference_free(&uneven);
    free(r.all);
    free(r.counted);
    free(r.plan_off);
    free(r.plan_len);
}
