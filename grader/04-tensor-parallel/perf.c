/* perf.c: Lab 4's perf mode (lab04.h): the student's TP block, forward and backward, timed
 * on the wall clock against the kit's parts of the same work measured in the same run: the
 * single-device block (lib/model.h) on B/t of the sequences, which does the same products
 * as one rank's shard does on all B (1/t of every matrix, every token), then the library's
 * four all-reduces of the [N, C] activation on the TP group, one after the other. The
 * harness pairs the rounds and takes the median ratio (report.h). The modelled timeline
 * grades what the ledger counts; this grades what the code costs, hand-written loops and
 * allocations included. */
#include <mpi.h>
#include <string.h>

#include "lab04.h"

#define PERF_B 8      /* sequences: every t of 1, 2, 4 and 8 divides it */
#define PERF_REPS 10  /* blocks per timed round */
#define PERF_ROUNDS 5
#define PERF_BATCHES 3

static struct {
    struct pl_comm *tp;
    struct block_case k;
    struct pl_tp_block_acts a;
    struct pl_block_acts ra;
    struct pl_model_ctx ctx;
    float *gx, *gy, *gdy, *gdx; /* the student's: [N, C] */
    float *by, *bdx, *ar;       /* the baseline's: [N/t, C], and the all-reduced [N, C] */
} pf;

/* One TP block forward and backward, as the check mode runs it. */
static void student_block(void *ctx)
{
    (void)ctx;
    const size_t nc = (size_t)pf.k.N * pf.k.cfg.d_model;
    pl_copy(pf.gdy, pf.k.dy, nc); /* g's backward may work on dy in place */
    tp_block_forward(pf.tp, &pf.k.cfg, &pf.k.sp, &pf.a, pf.gx, pf.gy);
    tp_block_backward(pf.tp, &pf.k.cfg, &pf.k.sp, &pf.k.sg, &pf.a, pf.gdy, pf.gdx);
}

static void kit_parts(void *ctx)
{
    (void)ctx;
    const size_t nc = (size_t)pf.k.N * pf.k.cfg.d_model;
    pl_block_forward(&pf.k.cfg, 0, &pf.k.p, &pf.ra, &pf.ctx, pf.k.x, pf.by);
    pl_block_backward(&pf.k.cfg, 0, &pf.k.p, &pf.k.g, &pf.ra, &pf.ctx, pf.k.dy, pf.bdx);
    for (int i = 0; i < 4; i++) pl_all_reduce(pf.tp, pf.ar, pf.ar, nc, PL_AVG);
}

/* Seconds per block of one side, the slowest rank's. */
static double round_of(void *ctx, int mine)
{
    return gr_perf_round(kit_parts, student_block, ctx, PERF_REPS, mine);
}

int lab04_probe(struct pl_comm *tp)
{
    memset(&pf, 0, sizeof pf);
    pf.tp = tp;
    const int t = pl_comm_size(tp), T = CASES[0].T;
    block_case_new(&pf.k, t, pl_comm_rank(tp), PERF_B, T);
    gr_case("TP block of %d sequences, t=%d, beside the kit's block on %d and 4 all-reduces",
            PERF_B, t, PERF_B / t);
    const size_t nc = (size_t)pf.k.N * pf.k.cfg.d_model;
    pl_tp_block_acts_new(&pf.a, &pf.k.cfg, t, PERF_B, T);
    pl_block_acts_new(&pf.ra, &pf.k.cfg, PERF_B / t, T);
    pf.ctx = pl_model_ctx_eval();
    pf.gx = gr_op_alloc(nc, "perf x");
    pf.gy = gr_op_alloc(nc, "perf y");
    pf.gdy = gr_op_alloc(nc, "perf dy");
    pf.gdx = gr_op_alloc(nc, "perf dx");
    pf.by = gr_op_alloc(nc / t, "perf kit y");
    pf.bdx = gr_op_alloc(nc / t, "perf kit dx");
    pf.ar = gr_op_alloc(nc, "perf all-reduced");
    pl_copy(pf.gx, pf.k.x, nc);
    pl_copy(pf.ar, pf.k.x, nc);
    student_block(NULL);
    return 1;
}

double lab04_perf(void)
{
    pl_comm_set_checks(0);
    kit_parts(NULL);
    struct gr_perf p;
    gr_perf_compare(round_of, NULL, PERF_ROUNDS, PERF_BATCHES, &p);
    pl_comm_set_checks(1);
    char base[160];
    snprintf(base, sizeof base, "the kit's block on %d sequences and the library's 4 "
             "all-reduces of [N, C], one after the other,", PERF_B / pf.k.t);
    double f = gr_perf_report_step(&p, (double)pf.k.N, base,
                                   "the same products and the same bytes in both: look for "
                                   "hand-written loops where lib has an op, buffers allocated "
                                   "or zeroed that the block does not need, or copies of whole "
                                   "activations (section 8)",
                                   "tokens_per_s_tp_block");
    float *bufs[] = {pf.gx, pf.gy, pf.gdy, pf.gdx, pf.by, pf.bdx, pf.ar};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) pl_mem_free(bufs[i]);
    pl_tp_block_acts_free(&pf.a);
    pl_block_acts_free(&pf.ra);
    block_case_free(&pf.k);
    return f;
}
