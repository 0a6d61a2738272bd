/* bench.c: Lab 7's bench mode (lab07.h): all-to-all volume and balance as routing skews
 * towards expert 0, each row one training step of the code under test on the world as one EP
 * group, its block 0 modelled at a Mixtral-sized layer and its trace replayed on dgx-h100;
 * the figures the handout quotes, and the two SVGs of --plots-dir (plots.c). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab07.h"
#include "plots.h"
#include "units.h"

/* The MoE layer the bench's time models: Mixtral-sized experts and tokens per rank. */
#define MODEL_C 4096.0
#define MODEL_F 14336.0
#define MODEL_TOKENS 8192.0
#define MAX_E 64

/* Makes expert 0 hot: ln2's bias gets a 1 in channel 0 and the router's row 0 a weight of
 * `skew` on it, so expert 0's logit rises by about skew for every token. */
static void make_hot(struct pl_model *m, float skew)
{
    for (int l = 0; l < m->cfg.n_layers; l++) {
        float one = 1.0f, w;
        pl_to_device(m->blocks[l].ln2_b, &one, sizeof one);
        pl_to_host(&w, m->blocks[l].w_router, sizeof w);
        w += skew;
        pl_to_device(m->blocks[l].w_router, &w, sizeof w);
    }
}

/* Block 0's time on the busiest rank for the modelled layer, forward and backward: its
 * experts' FLOPs (4 C F per row forward, twice that backward) and its all-to-all-v bytes
 * (dispatch and combine, both ways) at the intra-node rate, plus one latency per call. cnt
 * is [n][E]: rank r's kept choices per expert. */
static double model_layer_time(const long *cnt, int n, int E, int N, const struct pl_profile *p)
{
    const int El = E / n;
    const double scale = MODEL_TOKENS / N, row = MODEL_C * sizeof(float);
    double worst = 0;
    for (int r = 0; r < n; r++) {
        double rows = 0, off = 0;
        for (int s = 0; s < n; s++)
            for (int e = 0; e < E; e++) {
                int mine = e / El == r;
                if (mine) rows += (double)cnt[s * E + e];
                if ((s == r && !mine) || (s != r && mine)) off += (double)cnt[s * E + e];
            }
        double t = 3.0 * rows * scale * 4.0 * MODEL_C * MODEL_F / p->flops +
                   2.0 * off * scale * row / p->bw[PL_LINK_INTRA] +
                   5.0 * p->latency[PL_LINK_INTRA];
        if (t > worst) worst = t;
    }
    return worst;
}

struct bench_result {
    long total[MAX_E]; /* kept choices per expert, all ranks, block 0 */
    double layer_time; /* seconds, the modelled layer */
    double step_time;  /* seconds, the traced step replayed (-1: could not be) */
};

/* The factors from the graded layer of N tokens a rank to the modelled one: FLOPs (tokens
 * and both widths) and bytes (tokens and the model width). */
void l7_model_scale(int N, const struct pl_model_config *c, double *flops_x, double *bytes_x)
{
    double tokens = MODEL_TOKENS / N;
    *flops_x = tokens * (MODEL_C * MODEL_F) / ((double)c->d_model * c->d_ff);
    *bytes_x = tokens * MODEL_C / c->d_model;
}

/* Rank 0: the merged trace of one step replayed on p, every compute event's FLOPs and every
 * transfer's bytes scaled to the modelled layer's size (tokens and widths). */
static double replay_step(const struct pl_merged_trace *t, const struct pl_profile *p, int N,
                          const struct pl_model_config *c)
{
    double flops_x, bytes_x;
    l7_model_scale(N, c, &flops_x, &bytes_x);
    struct gr_overlap ov;
    char err[256];
    if (gr_overlap_replay(t, p, flops_x, bytes_x, NULL, NULL, &ov, err, sizeof err) != 0)
        return -1;
    return ov.step_time;
}

static int bench_row(struct l7_state *st, const struct pl_tokens *data, int E, int k, float cf,
                     float skew,
                     const struct pl_profile *prof, struct bench_result *out)
{
    struct l7_train_case c = {E, k, pl_size(), cf, 0.01f, 1.0f, 0};
    struct l7_run r;
    int n = pl_size(), me = pl_rank();
    l7_run_open(st, &r, data, &c, 1, 0, pl_comm_world());
    make_hot(r.m, skew);
    r.moe = moe_new(pl_comm_world(), r.m, r.pass.N, n);
    struct pl_ledger mark, d, *all = pl_mem_alloc((size_t)n * sizeof *all, PL_MEM_WORK, PL_HOST,
                                                   "bench ledgers");
    gr_ledger_mark(&mark);
    double loss;
    pl_trace_enable(1);
    pl_trace_clear();
    int ran = !gr_todo_any() && l7_train_step(st, &r, 0, &loss);
    pl_trace_flush();
    pl_trace_enable(0);
    struct pl_merged_trace trace;
    memset(&trace, 0, sizeof trace);
    pl_trace_gather(&trace);
    gr_ledger_since(&mark, &d);
    gr_ledger_gather_world(&d, all);
    long counts[MAX_E] = {0}, *cnt = pl_mem_alloc((size_t)n * MAX_E * sizeof(long), PL_MEM_WORK,
                                                   PL_HOST, "bench counts");
    const struct pl_moe_routing *rt = ran ? moe_last_routing(r.moe, 0) : NULL;
    for (int e = 0; e < E && rt; e++) counts[e] = rt->count[e];
    long mydrop = rt ? rt->dropped : 0, dropped = 0;
    PL_CHECK_MPI(MPI_Gather(counts, E, MPI_LONG, cnt, E, MPI_LONG, 0, MPI_COMM_WORLD));
    PL_CHECK_MPI(MPI_Reduce(&mydrop, &dropped, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
    memset(out, 0, sizeof *out);
    if (me == 0 && ran) {
        double vmax = 0, vsum = 0;
        for (int i = 0; i < n; i++) {
            double v = pl_ledger_bytes(&all[i], PL_ALL_TO_ALL_V, -1);
            vsum += v;
            if (v > vmax) vmax = v;
        }
        long hot = 0, sum = 0;
        for (int e = 0; e < E; e++) {
            for (int i = 0; i < n; i++) out->total[e] += cnt[i * E + e];
            sum += out->total[e];
            if (out->total[e] > hot) hot = out->total[e];
        }
        out->layer_time = model_layer_time(cnt, n, E, r.pass.N, prof);
        out->step_time = replay_step(&trace, prof, r.pass.N, &r.m->cfg);
        char cf_s[16], v[32];
        if (cf == L7_CF_NONE) snprintf(cf_s, sizeof cf_s, "none");
        else snprintf(cf_s, sizeof cf_s, "%g", (double)cf);
        printf("%4d %3d %5s %5.3f %10s %9.2f %8.2f %8.1f%% %11.3f %10.3f   ", E, k, cf_s,
               (double)skew, pl_format_bytes(vsum / n, v, sizeof v),
               vsum > 0 ? vmax / (vsum / n) : 1.0, sum ? (double)hot * E / sum : 0.0,
               100.0 * dropped / ((double)r.pass.N * n * k), out->layer_time * 1e3,
               out->step_time * 1e3);
        for (int e = 0; e < E; e++) printf("%s%ld", e ? "," : "", out->total[e]);
        printf("\n");
    }
    if (!ran && me == 0)
        printf("not run: %s is still a stub (see docs/labs/07-moe.md section %s)\n",
               pl_todo_what() ? pl_todo_what() : "?", pl_todo_section() ? pl_todo_section() : "?");
    pl_trace_merged_free(&trace);
    pl_mem_free(cnt);
    pl_mem_free(all);
    l7_run_close(st, &r);
    return ran;
}

/* The figures docs/labs/07-moe.md quotes, one "# handout: TEXT" line each, TEXT verbatim
 * as the handout says it (tests/handout_figures.sh): the capacity rule's clamp to N. What
 * the rule does to a factor binary floating point cannot hold is question
 * why_capacity_cf11's, so the handout does not work it. */
static void handout_figures(void)
{
    printf("# handout: for N = 8, E = 4, k = 2 and cf = 8 the kit gives %d slots, the clamp "
           "to N\n", pl_moe_capacity(8, 4, 2, 8.0f));
}

/* The dispatch all-to-all of the modelled layer (MODEL_TOKENS tokens a rank, top-k, C in
 * BF16) at EP 8 and 64, on the torus profile (torus.h: the group the most cubic torus of its
 * size) against dgx-h100 (8 GPUs a node: EP 8 on NVLink, EP 64 over 8 nodes' network), and
 * the torus at EP 512 (8 x 8 x 8): handout section 11 quotes them. */
static void torus_figures(int k)
{
    const struct pl_profile *h = pl_profile_find("dgx-h100"), *t = pl_profile_find("tpu-v4");
    const double S = MODEL_TOKENS * k * MODEL_C * 2;
    static const int eps[3] = {8, 64, 512};
    static int ranks[512];
    char b[32];
    for (int i = 0; i < 512; i++) ranks[i] = i;
    printf("# handout: the dispatch of %s a rank (%.0f tokens, top-%d, C %.0f in BF16):", 
           pl_format_bytes(S, b, sizeof b), MODEL_TOKENS, k, MODEL_C);
    for (int i = 0; i < 3; i++) {
        int d[3], ep = eps[i];
        pl_torus_shape(ep, d);
        double tt = pl_torus_coll_time(d, PL_ALL_TO_ALL, ranks, ep, S,
                                       t->latency[PL_LINK_INTRA], t->bw[PL_LINK_INTRA]);
        enum pl_link l = ep > h->devices_per_node ? PL_LINK_INTER : PL_LINK_INTRA;
        double th = pl_coll_time(PL_ALL_TO_ALL, ep, S, h->latency[l], h->bw[l]);
        printf("%s EP %d: %.2f ms on %s (%dx%dx%d), %.2f ms on %s", i ? ";" : "", ep, tt * 1e3,
               t->name, d[0], d[1], d[2], th * 1e3, h->name);
    }
    printf("\n");
}

static void bench_mode(struct l7_state *st, int E, int k, float cf, float skew,
                       const char *plots_dir)
{
    if (pl_rank() == 0) handout_figures(), torus_figures(k);
    struct pl_tokens data = pl_corpus_tokens(pl_mix64(st->seed ^ 0xda7a), L7_CORPUS_TOKENS);
    const struct pl_profile *prof = pl_profile_find("dgx-h100");
    if (pl_rank() == 0) {
        printf("# MoE all-to-all volume and balance, %d ranks, %d tokens a rank, block 0's "
               "routing, one training step\n", pl_size(),
               l7_global_b(pl_size()) / pl_size() * l7_seq_len(st));
        printf("# a2a/rank: all-to-all-v bytes sent per rank (mean, all blocks); max/mean: the "
               "busiest rank's share; hot: the busiest expert's tokens / the mean;\n# layer: "
               "block 0 forward+backward modelled on %s for a layer of C %.0f, F %.0f, %.0f "
               "tokens a rank (the busiest rank's expert FLOPs and all-to-all bytes);\n"
               "# step: your step's trace replayed on %s, FLOPs and bytes scaled to that size\n",
               prof->name, MODEL_C, MODEL_F, MODEL_TOKENS, prof->name);
        printf("%4s %3s %5s %5s %10s %9s %8s %9s %11s %10s   %s\n", "E", "k", "cf", "skew ",
               "a2a/rank", "max/mean", "hot", "dropped", "layer(ms)", "step(ms)",
               "tokens per expert");
    }
    struct bench_result res;
    if (skew >= 0) {
        bench_row(st, &data, E, k, cf, skew, prof, &res);
        pl_tokens_free(&data);
        return;
    }
    enum { NCF = 3, NSKEW = 5 };
    static const float cfs[NCF] = {1.0f, 1.25f, L7_CF_NONE};
    static const float skews[NSKEW] = {0.0f, 0.025f, 0.05f, 0.1f, 0.2f};
    double times[NCF][NSKEW];
    long tokens[2][MAX_E];
    int ok = 1;
    for (int i = 0; i < NCF && ok; i++)
        for (int j = 0; j < NSKEW && ok; j++) {
            ok = bench_row(st, &data, E, k, cfs[i], skews[j], prof, &res);
            times[i][j] = res.step_time * 1e3;
            if (skews[j] == 0.1f && i != 1) memcpy(tokens[i ? 1 : 0], res.total, sizeof res.total);
        }
    if (ok && plots_dir && pl_rank() == 0) {
        char path[512];
        snprintf(path, sizeof path, "%s/07-moe-tokens.svg", plots_dir);
        l7_plot_tokens(path, E, tokens[0], tokens[1], "capacity factor 1.0", "no capacity limit",
                    "tokens per expert (4 ranks, top-2, skew 0.1: expert 0 hot)");
        printf("wrote %s\n", path);
        snprintf(path, sizeof path, "%s/07-moe-skew.svg", plots_dir);
        const char *labels[NCF] = {"capacity factor 1.0", "capacity factor 1.25",
                                   "no capacity limit"};
        l7_plot_lines(path, NSKEW, skews, NCF, &times[0][0], labels,
                   "your step's trace replayed on dgx-h100 (ms) vs skew towards expert 0",
                   "skew");
        printf("wrote %s\n", path);
    }
    pl_tokens_free(&data);
}

/* The configuration errors a course's student or instructor can make, exit 2. */
static void check_moe_args(int E, int k, float cf)
{
    int n = pl_size();
    if (E < 1 || E > 64)
        pl_usage_error_all("--experts %d: choose from 1 to 64 experts", E);
    if (E % n) {
        char d[128];
        pl_usage_error_all("n_experts=%d is not divisible by ep=%d ranks: every rank must own "
                           "the same number of experts (choose n_experts a multiple of %d, or "
                           "ep in {%s})", E, n, n, pl_divisors(E, d, sizeof d));
    }
    if (k < 1 || k > E)
        pl_usage_error_all("top_k=%d: a token picks k distinct experts of n_experts=%d "
                           "(choose top_k from 1 to %d)", k, E, E);
    if (!(cf > 0))
        pl_usage_error_all("capacity factor %g must be > 0 (1.0 gives each expert its even "
                           "share of the choices; a factor >= n_experts/top_k never drops)",
                           (double)cf);
}

void l7_bench(const struct gr_args *a)
{
    if (pl_size() > 4)
        pl_usage_error_all("the bench runs on 1, 2 or 4 ranks (one EP group), not %d",
                           pl_size());
    /* an option not given takes its default: 8 experts, top-2, factor 1.25, the skews' table */
    const union gr_opt *o = a->opt;
    int E = a->given[L7_OPT_EXPERTS] ? o[L7_OPT_EXPERTS].i : 8;
    int k = a->given[L7_OPT_TOP_K] ? o[L7_OPT_TOP_K].i : 2;
    float cf = a->given[L7_OPT_CF] ? o[L7_OPT_CF].f : 1.25f;
    float skew = a->given[L7_OPT_SKEW] ? o[L7_OPT_SKEW].f : -1.0f;
    check_moe_args(E, k, cf);
    struct l7_state *st = calloc(1, sizeof *st);
    if (!st) pl_fatal("out of memory");
    st->seed = a->seed;
    bench_mode(st, E, k, cf, skew, o[L7_OPT_PLOTS_DIR].s);
    free(st);
}
