/* bench.c: Lab 9's bench mode: each grid of the rank count trained K steps, every step's
 * loss (unclipped run) and global norm (clipped run) beside the single device's, and the
 * pipeline's bubble by its formula, (p-1)/(m+p-1)
 * with m microbatches per replica. Nothing is judged.
 *
 * On 8 ranks the first grid, (2,2,2), is trained again with each recomputation (cases.c's
 * recompute runs): every rank's activation peak from the memory ledger, beside what
 * section 3.1 says a stage holds, min(p - s, m) microbatches in flight x its blocks x
 * pl_sp_block_saved_bytes of one block. --svg FILE (make plots LAB=09) draws them as bars
 * grouped by stage; --timeline-svg FILE draws one step of that grid on the modelled
 * timeline (timeline.c). Section 3.2's ZeRO-1 figures on (2,2,2) come from the formulas, and
 * section 2.1's vocabulary-parallel head's from the kit's count and the formulas (vocab_obs.c),
 * and section 3.4's plan against the run from nine more runs (planrun.c).
 * The "# handout:" lines are the numbers docs/labs/09-4d.md quotes
 * (tests/handout_figures.sh); the measured peaks are the handout's only under --figures. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "lab09.h"
#include "sp_block.h"
#include "svg.h"
#include "timeline.h"
#include "todo.h"

#define NRC 3 /* enum pl_recompute: none, selective, full */
#define KB 1e3

/* Every rank's recomputation figures (rank 0 after the gather). */
struct peaks {
    int np, pp, tp, dp, T;
    int stage[L9_MAX_RANKS], blocks[L9_MAX_RANKS], in_flight[L9_MAX_RANKS];
    double peak[L9_MAX_RANKS][NRC];    /* measured, bytes above where the run started */
    double formula[L9_MAX_RANKS][NRC]; /* in flight x blocks x one block's saved bytes */
};

static const char *const RC_FILL[NRC] = {"#2c7fb8", "#7fcdbb", "#f16913"};

/* Collective: this rank's observation of the (2,2,2) grid's recompute runs, to rank 0. */
static void gather_peaks(const struct l9_state *st, const struct l9_obs *ob, struct peaks *p)
{
    const struct l9_case *k = &st->cases[0];
    const struct pl_model_config *c = &st->train[0].cfg;
    double mine[2 + NRC] = {ob->coord[2], ob->stage_blocks};
    for (int r = 0; r < NRC; r++) mine[2 + r] = ob->activ_peak[r];
    double all[L9_MAX_RANKS][2 + NRC];
    PL_CHECK_MPI(MPI_Gather(mine, 2 + NRC, MPI_DOUBLE, all, 2 + NRC, MPI_DOUBLE, 0,
                            MPI_COMM_WORLD));
    memset(p, 0, sizeof *p);
    p->np = pl_size(), p->pp = k->pp, p->tp = k->tp, p->dp = k->dp, p->T = c->seq_len;
    for (int i = 0; i < p->np && pl_rank() == 0; i++) {
        p->stage[i] = (int)all[i][0];
        p->blocks[i] = (int)all[i][1];
        p->in_flight[i] = l9_in_flight(k->pp, p->stage[i], L9_MICRO);
        for (int r = 0; r < NRC; r++) {
            p->peak[i][r] = all[i][2 + r];
            p->formula[i][r] = (double)p->in_flight[i] * p->blocks[i] *
                               pl_sp_block_saved_bytes(c, k->tp, L9_MB_SEQS, c->seq_len,
                                                       (enum pl_recompute)r);
        }
    }
}

/* The largest measured peak of stage s's ranks with r. */
static double stage_peak(const struct peaks *p, int s, int r)
{
    double most = 0;
    for (int i = 0; i < p->np; i++)
        if (p->stage[i] == s && p->peak[i][r] > most) most = p->peak[i][r];
    return most;
}

/* tag: "handout" under --figures (the check runs the solution), else whose code it is, so
 * that a student's own peaks are never shown as the handout's. */
static void print_peaks(const struct peaks *p, const char *tag)
{
    printf("# recomputation on (%d,%d,%d): each rank's activation peak (memory ledger, kB = "
           "1000 bytes) beside min(p - s, m) x blocks x pl_sp_block_saved_bytes\n",
           p->dp, p->tp, p->pp);
    printf("%-5s %-6s %-9s %-7s", "rank", "stage", "in flight", "blocks");
    for (int r = 0; r < NRC; r++)
        printf(" %-10s %-10s", pl_recompute_name((enum pl_recompute)r), "formula");
    printf("\n");
    for (int i = 0; i < p->np; i++) {
        printf("%-5d %-6d %-9d %-7d", i, p->stage[i], p->in_flight[i], p->blocks[i]);
        for (int r = 0; r < NRC; r++)
            printf(" %-10.2f %-10.2f", p->peak[i][r] / KB, p->formula[i][r] / KB);
        printf("\n");
    }
    printf("# %s: stage 0's ranks peak at %.1f kB of activations with none and %.1f kB "
           "with full\n", tag, stage_peak(p, 0, PL_RECOMPUTE_NONE) / KB,
           stage_peak(p, 0, PL_RECOMPUTE_FULL) / KB);
}

/* Bars of each rank's peak with none, selective and full, grouped by stage, each with a
 * black line at its formula. */
static void draw(FILE *f, const struct peaks *p, const char *who)
{
    const double x0 = 90, y0 = 70, w = 840, h = 300;
    char t[256];
    double top = 0;
    for (int i = 0; i < p->np; i++)
        for (int r = 0; r < NRC; r++) top = fmax(top, fmax(p->peak[i][r], p->formula[i][r]));
    const double step = pl_svg_nice_step(top > 0 ? top / KB : 1, 5);
    top = ceil(top / KB / step) * step;
    pl_svg_begin(f, 960, 500, 13);
    snprintf(t, sizeof t, "Lab 9, %s: activation peak per rank, grid (dp,tp,pp) = (%d,%d,%d), "
             "m = %d microbatches of %d sequences, 1F1B", who, p->dp, p->tp, p->pp, L9_MICRO,
             L9_MB_SEQS);
    pl_svg_text(f, x0, 30, "font-weight=\"bold\"", t);
    pl_svg_text(f, x0, 50, "", "bars: the memory ledger's peak of PL_MEM_ACTIV over the steps, "
                "above where it started");
    pl_svg_y_grid(f, x0, y0, w, h, top, step, 50, "activation peak (kB, 1 kB = 1000 bytes)");
    /* a slot of NRC bars and a gap per rank, a wider gap between stages */
    const double slot = w / (p->np * (NRC + 1) + (p->pp - 1) * 2 + 1), bw = slot;
    double x = x0 + slot / 2;
    for (int s = 0; s < p->pp; s++) {
        const double gx = x;
        int nin = 0, blocks = 0, fl = 0;
        for (int i = 0; i < p->np; i++) {
            if (p->stage[i] != s) continue;
            nin++, blocks = p->blocks[i], fl = p->in_flight[i];
            for (int r = 0; r < NRC; r++) {
                double bh = h * p->peak[i][r] / KB / top, fy = y0 + h - h * p->formula[i][r] /
                                                                      KB / top;
                pl_svg_rect(f, x + r * bw, y0 + h - bh, bw - 1, bh, RC_FILL[r], "");
                pl_svg_line(f, x + r * bw - 1, fy, x + (r + 1) * bw, fy, "black",
                            "stroke-width=\"2\"");
            }
            snprintf(t, sizeof t, "rank %d", i);
            pl_svg_text(f, x + NRC * bw / 2, y0 + h + 16, "text-anchor=\"middle\"", t);
            x += (NRC + 1) * slot;
        }
        snprintf(t, sizeof t, "stage %d: %d blocks, min(p - s, m) = %d in flight", s, blocks,
                 fl);
        if (nin)
            pl_svg_text(f, (gx + x - slot) / 2, y0 + h + 36, "text-anchor=\"middle\"", t);
        if (s + 1 < p->pp)
            pl_svg_line(f, x + slot / 2, y0, x + slot / 2, y0 + h + 40, "#999", "");
        x += 2 * slot;
    }
    pl_svg_line(f, x0, y0 + h, x0 + w, y0 + h, "black", "");
    pl_svg_line(f, x0, y0, x0, y0 + h, "black", "");
    for (int r = 0; r < NRC; r++) {
        snprintf(t, sizeof t, "recompute %s", pl_recompute_name((enum pl_recompute)r));
        pl_svg_swatch(f, x0 + 170 * r, y0 + h + 70, RC_FILL[r], t);
    }
    pl_svg_line(f, x0 + 520, y0 + h + 65, x0 + 545, y0 + h + 65, "black", "stroke-width=\"2\"");
    pl_svg_text(f, x0 + 552, y0 + h + 70, "", "section 3.1's formula, same choice");
    snprintf(t, sizeof t, "pl_sp_block_saved_bytes of one block (t = %d, %d sequences of %d "
             "tokens) x the stage's blocks x its microbatches in flight", p->tp, L9_MB_SEQS,
             p->T);
    pl_svg_text(f, x0, y0 + h + 100, "fill=\"#555\"", t);
}

static void write_svg(const char *svg, const struct peaks *p, const char *who)
{
    FILE *f = fopen(svg, "w");
    if (!f) pl_usage_error("--svg %s: cannot write it", svg);
    draw(f, p, who);
    if (pl_svg_end(f) != 0 || fclose(f) != 0) {
        remove(svg);
        pl_fatal("writing %s failed", svg);
    }
    printf("%s: wrote each rank's activation peak by recomputation to %s\n", who, svg);
}

/* Section 3.2's figures on the (2,2,2) grid, by the formulas: each stage's floats, its
 * AdamW moments without and with ZeRO-1, and the bytes a rank sends on dp_comm a step (the
 * ring's, lib/ledger.h) for an all-reduce of its gradients, ZeRO-1's reduce-scatter and
 * all-gather, and an all-reduce followed by the all-gather; and rank 0's measured peak. */
static void print_zero(const struct l9_state *st, const struct l9_obs *first)
{
    const struct l9_case *k = &st->cases[0];
    printf("# ZeRO-1 on (%d,%d,%d), kB = 1000 bytes: a rank's floats, its moments without and "
           "with, its bytes on dp_comm a step\n", k->dp, k->tp, k->pp);
    for (int stage = 0; stage < k->pp; stage++) {
        double n[3], chunks = 0;
        const double all = l9_dp_floats(&st->train[0].cfg, &st->ref[0].layout, k, stage, &n[0],
                                        &n[1], &n[2]);
        for (int j = 0; j < 3; j++) chunks += ceil(n[j] / k->dp);
        const double ar = pl_ring_bytes_sent(PL_ALL_REDUCE, k->dp, 4 * all);
        const double rs = pl_ring_bytes_sent(PL_REDUCE_SCATTER, k->dp, 4 * chunks * k->dp);
        const double ag = pl_ring_bytes_sent(PL_ALL_GATHER, k->dp, 4 * chunks * k->dp);
        printf("# handout: a rank of stage %d holds %.0f floats: AdamW's moments take %.1f kB, "
               "%.1f kB under ZeRO-1\n", stage, all, 8 * all / KB, 8 * chunks / KB);
        if (stage == 0)
            printf("# handout: each step a rank of stage 0 sends %.1f kB on dp_comm for the "
                   "all-reduce of its gradients; under ZeRO-1 %.1f kB for the reduce-scatter "
                   "and %.1f kB for the all-gather, or %.1f kB with an all-reduce in place of "
                   "the reduce-scatter\n", ar / KB, rs / KB, ag / KB, (ar + ag) / KB);
    }
    printf("rank 0's optimizer state at its peak under ZeRO-1, measured: %.1f kB\n",
           first->zero_optim / KB);
    /* the 6-rank run's ZeRO-1 grid, uneven (cases.c's L9_CASES_6): its model by the rule */
    const struct l9_case u = {3, 2, 1, 1};
    struct gr_train_setup t = st->train[0];
    t.opt = pl_adamw_config_default();
    l9_make_uneven(&t, &u);
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, &t.cfg);
    size_t off, e, h;
    pl_model_part_range(&lay, PL_PART_EMBED, &off, &e);
    pl_model_part_range(&lay, t.cfg.n_layers, &off, &h);
    const struct pl_param_desc *hw = pl_model_find_param(&lay, "head.w");
    printf("# handout: `head.w`'s initial %g, the weight decay makes that %g times the "
           "tolerance\n", (double)hw->std, L9_DECAY_SEEN);
    pl_model_layout_free(&lay);
    printf("# handout: on (%d,%d,%d) the vocabulary grows to %d, %d rows a TP rank; the "
           "embedding's run is %zu floats and the head's %zu, c = %.0f and %.0f, and the "
           "weight decay is %.3g\n", u.dp, u.tp, u.pp, t.cfg.vocab, t.cfg.vocab / u.tp, e, h,
           ceil((double)e / u.dp), ceil((double)h / u.dp), (double)t.opt.weight_decay);
}

/* The options' order: driver.c's L9_OPTIONS (--svg FILE, --timeline-svg FILE, --plan-svg
 * FILE). */
void l9_bench(const struct gr_args *a)
{
    const char *who = a->label ? a->label : "your code";
    const char *svg = a->opt[0].s, *timeline = a->opt[1].s, *plan_svg = a->opt[2].s;
    if (pl_size() != 6 && pl_size() != 8)
        pl_usage_error_all("Lab 9 bench runs on 6 or 8 ranks (got %d)", pl_size());
    if (svg && pl_size() != 8)
        pl_usage_error_all("--svg %s: the recomputation picture is of the (2,2,2) grid, on 8 "
                           "ranks (got %d)", svg, pl_size());
    if (timeline && pl_size() != 8)
        pl_usage_error_all("--timeline-svg %s: the timeline is of the (2,2,2) grid, on 8 "
                           "ranks (got %d)", timeline, pl_size());
    if (plan_svg && pl_size() != 8)
        pl_usage_error_all("--plan-svg %s: the plan's picture is of the 8-rank grids (got %d "
                           "ranks)", plan_svg, pl_size());
    struct l9_state *st = l9_setup(a->seed, pl_size(), NULL, -1);
    const struct pl_model_config *c = &st->train[0].cfg;
    if (pl_rank() == 0)
        printf("# handout: trains the lab's model (%d blocks of width %d, %d heads, %d tokens, "
               "vocabulary %d, %s) for %d steps with m = %d microbatches of %d sequences per "
               "replica\n", c->n_layers, c->d_model, c->n_heads, c->seq_len, c->vocab,
               c->dropout == 0.0f ? "no dropout" : "dropout", L9_K_STEPS, L9_MICRO, L9_MB_SEQS);
    if (pl_size() == 8) l9_timeline_layout(st);
    struct l9_obs first = {0};
    for (int i = 0; i < st->ncases; i++) {
        struct l9_obs ob = {0};
        pl_todo_reset();
        l9_observe(st, i, &ob);
        if (gr_todo_any()) {
            if (pl_rank() == 0)
                printf("%s: Lab 9 is still a stub: %s (see %s section %s): no rows%s\n", who,
                       pl_todo_what(), gr_handout(), pl_todo_section(),
                       svg || timeline || plan_svg ? ", no picture" : "");
            l9_finish(st);
            return;
        }
        if (i == 0 && pl_rank() == 0)
            printf("%-12s %-5s %-12s %-12s %-12s %-12s %s\n", "dp,tp,pp", "step", "loss",
                   "one device", "norm", "one device", "(p-1)/(m+p-1)");
        if (i == 0) first = ob;
        const struct l9_case *k = &st->cases[i];
        double bubble = (double)(k->pp - 1) / (L9_MICRO + k->pp - 1);
        for (int s = 0; s < L9_K_STEPS && pl_rank() == 0; s++)
            printf("%d,%d,%-8d %-5d %-12.7f %-12.7f %-12.6f %-12.6f %.3f\n", k->dp, k->tp, k->pp,
                   s, ob.loss[s], st->free[i].loss[s], ob.norm[s], st->ref_norm[i][s], bubble);
    }
    if (gr_agree(first.has_recompute)) {
        struct peaks p;
        gather_peaks(st, &first, &p);
        if (pl_rank() == 0) print_peaks(&p, a->figures ? "handout" : who);
        if (pl_rank() == 0 && svg) write_svg(svg, &p, who);
    } else if (svg && pl_rank() == 0) {
        printf("%s: no picture: the recomputation runs did not finish\n", who);
    }
    if (pl_size() == 8 && pl_rank() == 0 && first.zero_runs == 2) print_zero(st, &first);
    if (pl_size() == 8 && first.zero_runs == 2)
        l9_cool_down_figures(st, a->figures ? "handout" : who);
    if (pl_size() == 8 && pl_rank() == 0) l9_vocab_figures(st);
    if (pl_size() == 8) l9_plan_figures(st, a->figures ? "handout" : who, plan_svg, who);
    if (pl_size() == 8) l9_time_figures(st, a->figures ? "handout" : who);
    if (timeline) l9_timeline(st, timeline, who);
    l9_finish(st);
}
