/* driver.c: the trusted test driver of Lab 5 (sequence parallelism on top of tensor
 * parallelism), on the lab harness (grader/common/harness.h). The oracle is the
 * single-device block of lib/model.h on randomised full tensors, with dropout off and on;
 * each rank gets Lab 4's TP shard of the weights (lib/tp_shard.h) and its tokens of the
 * activations (lib/sp_shard.h), runs the student's SP block (sp.h), and is compared with
 * its rows of the output and input gradient and its block of every gradient. The
 * collectives of each pass come from the traffic ledger, the bytes kept between forward
 * and backward from the memory ledger. A training op runs K AdamW steps of a 2-block model
 * with dropout (the grader's embedding and head around the student's blocks) against
 * pl_model_step. Each rank records what it observed of every part while a case runs (figures
 * and names, lab05.h); the harness gathers the observations to rank 0, where judge.c gives
 * the verdicts without MPI.
 *
 *   driver --op conjugates|block|train --mode check [--parts correct,replicas,traffic,memory]
 *          [--seed S] [--seq T]                         t = the world size, and a tp x dp grid
 *   driver --op block-hidden|train-hidden ...          the hidden suite's grids and shapes
 *   driver --op ring|ring-hidden --mode check [--parts correct,traffic,memory,balance,overlap]
 *                                                       the second part: cp = the world
 *   driver --mode bench [--seq T] [--plots-dir DIR]     activation bytes per rank vs t (4
 *                                                       ranks), and the handout's figures */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab05.h"

/* The lab's flags: entry k's value is gr_args.opt[k] (bench.c reads them in this order). */
static const struct pl_flag OPTIONS[] = {
    {"--seq", PL_FLAG_INT, NULL, "T",
     "tokens per sequence of every case, a multiple of t up to 16 (default: the cases' own)", 0},
    {"--plots-dir", PL_FLAG_STR, NULL, "DIR",
     "bench: also draw the handout's figures (layout, bytes vs t) as SVGs in DIR (default "
     "none)", 0},
};

static void *setup(const struct gr_args *a)
{
    struct l5_state *st = calloc(1, sizeof *st);
    if (!st) pl_fatal("out of memory");
    st->seed = a->seed;
    st->seq = a->opt[0].i;
    st->plots_dir = a->opt[1].s;
    st->hidden = a->op && strstr(a->op, "-hidden") != NULL;
    st->kind = !a->op ? L5_CONJ : !strncmp(a->op, "block", 5) ? L5_BLOCK
               : !strncmp(a->op, "train", 5) ? L5_TRAIN
               : !strncmp(a->op, "ring", 4)  ? L5_RING : L5_CONJ;
    st->want_time = !strcmp(a->mode, "check") && strstr(a->parts, "time") != NULL;
    const int seq = st->seq;
    struct pl_model_config c = l5_config(st, 0);
    char err[320];
    if (pl_tp_degree_error(&c, pl_size(), err, sizeof err))
        pl_usage_error_all("%d ranks form one TP group here: %s", pl_size(), err);
    if (seq && (seq > c.seq_len || pl_sp_seq_error(&c, pl_size(), seq, err, sizeof err)))
        pl_usage_error_all("--seq %d: %s", seq,
                           seq > c.seq_len ? "longer than the graded model's seq_len=16"
                                                : err);
    return st;
}

static void finish(void *st)
{
    free(st);
}

static const char *subject(void *vst)
{
    const struct l5_state *st = vst;
    return st->kind == L5_BLOCK ? "the SP block" : st->kind == L5_TRAIN ? "SP training"
           : st->kind == L5_RING ? "ring attention" : "the conjugates";
}

static int count_cases(void *vst)
{
    const struct l5_state *st = vst;
    return st->kind == L5_BLOCK   ? L5_NCASES
           : st->kind == L5_TRAIN ? l5_train_cases(st, pl_size())
           : st->kind == L5_RING  ? L5_RING_NCASES
                                  : 1;
}

static void describe(void *vst, int i, char *buf, size_t len)
{
    const struct l5_state *st = vst;
    if (st->kind == L5_TRAIN) {
        struct l5_train_case k = l5_train_case_of(st, i, pl_size());
        if (k.dp > 1)
            snprintf(buf, len, "%d AdamW steps, 2 SP blocks, dropout on, t=%d on a tp=%d x "
                     "dp=%d grid (%s TP groups, numbered against the world's order), each "
                     "replica on its own %d sequence%s", L5_TRAIN_STEPS, pl_size() / k.dp,
                     pl_size() / k.dp, k.dp, k.strided ? "strided" : "consecutive", k.B,
                     k.B > 1 ? "s" : "");
        else
            snprintf(buf, len, "%d AdamW steps, 2 SP blocks, dropout on, B=%d, t=%d",
                     L5_TRAIN_STEPS, k.B, pl_size());
        return;
    }
    if (st->kind == L5_RING) {
        const struct l5_ring_case k = l5_ring_case_of(st, i, pl_size());
        snprintf(buf, len, "ring attention, cp=%d, B=%d T=%d (chunks of %d tokens), C=%d, "
                 "%d heads, %s", pl_size(), k.B, k.T, k.T / (2 * pl_size()), k.C, k.NH,
                 k.big > 0 ? "scores all about a hundred" : "scores of order one");
        return;
    }
    if (st->kind == L5_CONJ) {
        snprintf(buf, len, "gather and scatter on B=3 sequences of %d tokens, t=%d",
                 4 * pl_size(), pl_size());
        return;
    }
    struct l5_case k = l5_case_of(st, i, pl_size());
    char grid[64] = "";
    if (k.dp > 1)
        snprintf(grid, sizeof grid, " on a tp=%d x dp=%d grid (%s)", pl_size() / k.dp, k.dp,
                 k.order);
    snprintf(buf, len, "SP block, B=%d T=%d, t=%d%s, dropout %s%s", k.B, k.T,
             pl_size() / k.dp, grid,
             !k.dropout ? "off" : k.train ? "on" : "configured, evaluation (off)",
             k.accum ? ", gradients accumulated over 2 micro-batches" : "");
}

static size_t obs_size(const void *st, int i)
{
    (void)st;
    (void)i;
    return sizeof(struct l5_obs);
}

/* The TP group this rank is in: its size, its rank in it and which group (d). */
static void record_group(struct l5_state *st, struct pl_comm *tp, int d)
{
    struct l5_figs *f = &st->ob->figs;
    f->t = pl_comm_size(tp), f->member = pl_comm_rank(tp), f->group = d;
    f->world = pl_size();
}

static void observe(void *vst, int i, void *obs)
{
    struct l5_state *st = vst;
    st->ob = obs;
    st->cur = L5_CORRECT;
    /* the block's cases on their grid: tp = the world, or tp x dp (each replica its own
     * data); the TP communicator is split from the world and freed after the case */
    if (st->kind == L5_RING) {
        /* the ring is the world, cp = its size */
        struct pl_comm *cpg = pl_comm_split(pl_comm_world(), 0, pl_rank(), "cp");
        record_group(st, cpg, 0);
        l5_run_ring(st, cpg, i);
        pl_comm_free(cpg);
    } else if (st->kind == L5_TRAIN) {
        /* dp > 1: TP groups of strided or consecutive ranks, the highest world rank first */
        const struct l5_train_case kt = l5_train_case_of(st, i, pl_size());
        const int n = pl_size(), w = pl_rank(), d = kt.strided ? w % kt.dp : w / (n / kt.dp);
        struct pl_comm *tp = pl_comm_split(pl_comm_world(), d, kt.dp > 1 ? n - w : w, "tp");
        record_group(st, tp, d);
        l5_run_train(st, tp, &kt, d, i);
        pl_comm_free(tp);
    } else {
        struct l5_case kc = l5_case_of(st, i, pl_size());
        const int dp = st->kind == L5_BLOCK ? kc.dp : 1;
        struct pl_grid grid;
        char deg[64];
        snprintf(deg, sizeof deg, "tp=%d,dp=%d", pl_size() / dp, dp);
        pl_grid_init_or_die(&grid, dp > 1 ? kc.order : "tp-dp", deg, pl_size());
        struct pl_comm *tp = pl_grid_comm(&grid, pl_comm_world(), pl_grid_axis(&grid, "tp"));
        const int d = pl_grid_coord(&grid, pl_rank(), pl_grid_axis(&grid, "dp"));
        record_group(st, tp, d);
        if (st->kind == L5_BLOCK) l5_run_block(st, tp, &kc, d, i);
        else l5_run_conjugates(st, tp);
        pl_comm_free(tp);
    }
    st->ob = NULL;
}

static int judge(const void *vst, int i, const char *part, const struct gr_obs *all,
                 struct gr_why *why)
{
    const struct l5_state *st = vst;
    if (st->kind == L5_RING) return l5_judge_ring(i, count_cases((void *)st), part, all, why);
    return l5_judge(st->kind, i, count_cases((void *)st), part, all, why);
}

static int probe(void *st)
{
    return l5_probe(st);
}

static double perf(void *st)
{
    return l5_perf(st);
}

const struct gr_driver gr_lab_driver = {
    .options = OPTIONS,
    .noptions = (int)(sizeof OPTIONS / sizeof OPTIONS[0]),
    .setup = setup,
    .subject = subject,
    .correct_first = "must match the single device first",
    .ncases = count_cases,
    .describe = describe,
    .obs_size = obs_size,
    .observe = observe,
    .judge_obs = judge,
    .probe = probe,
    .perf = perf,
    .bench = l5_bench,
    .finish = finish,
};
