/* timeline.c: Lab 9's timeline picture (make plots LAB=09): the (2,2,2) grid of the code
 * being graded, one training step traced on every rank and replayed on the dgx-h100 profile
 * at section 3.4's scale, as the step time test replays it (plantime.c: the lab's blocks at
 * width 12288, 2048 tokens a microbatch, kernels at the planner's rate, a comm stream per
 * link class), one row per rank. The collectives are coloured by the axis whose
 * group they run on, found by matching each traced group's ranks against the grid that
 * "tp-pp-dp" describes, and the legend says whether each axis's traffic stays inside a node
 * or crosses nodes on the virtual cluster (2 nodes of 4). The layout the handout's paragraph
 * reads off the picture (which replica each node holds, stage 0's ranks) is printed as
 * "# handout:" lines from the same grid. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block_time.h"
#include "lab09.h"
#include "pipe_parts.h"
#include "replay.h"
#include "timeline.h"
#include "todo.h"

static const char *const AX_NAME[L9_NAX] = {"tp", "pp", "dp"};
static const char *const AX_LABEL[L9_NAX] = {"TP", "PP", "DP"};
static const char *const AX_COLOR[L9_NAX] = {"#e15759", "#8c6d31", "#3b1f7a"};
#define MIN_PX 2.0 /* the least width of a transfer in the picture */

int l9_trace_step(struct l9_state *st, int i, struct pl_merged_trace *t)
{
    const struct l9_case *k = &st->cases[i];
    const struct gr_train_setup *ts = &st->train[i];
    struct fourd_grid g;
    memset(&g, 0, sizeof g);
    memset(t, 0, sizeof *t);
    pl_todo_reset();
    int ret = fourd_grid_new(&g, pl_comm_world(), L9_ORDER, k->dp, k->tp, k->pp);
    if (gr_agree(ret != 0 || pl_todo_what() != NULL)) {
        if (ret == 0) fourd_grid_free(&g);
        return 0;
    }
    struct fourd_model *m = fourd_model_new(&ts->cfg, &st->free_opt[i], &g);
    if (gr_agree(m == NULL || pl_todo_what() != NULL)) {
        if (m) fourd_model_free(m);
        fourd_grid_free(&g);
        return 0;
    }
    struct gr_batch b;
    gr_batch_new(&b, ts, 0, 1);
    gr_batch_load(&b, 0);
    const int was = pl_trace_enabled();
    pl_trace_enable(1);
    pl_trace_clear();
    pl_span("");
    (void)fourd_step(m, b.tokens, b.targets, b.B, L9_MICRO);
    pl_trace_flush();
    pl_trace_enable(was);
    int ok = !gr_agree(pl_todo_what() != NULL);
    pl_trace_gather(t);
    gr_batch_free(&b);
    fourd_model_free(m);
    fourd_grid_free(&g);
    return ok;
}

int l9_axis_of(const struct pl_grid *grid, const int *ranks, int n)
{
    for (int a = 0; a < L9_NAX; a++) {
        int members[L9_MAX_RANKS];
        int ax = pl_grid_axis(grid, AX_NAME[a]);
        if (n < 2 || n > L9_MAX_RANKS || pl_grid_group(grid, ranks[0], ax, members) != n)
            continue;
        int same = 1;
        for (int i = 0; i < n && same; i++) {
            int found = 0;
            for (int j = 0; j < n; j++) found |= members[j] == ranks[i];
            same = found;
        }
        if (same) return a;
    }
    return -1;
}

/* ", inside a node", ", across nodes" or "" (both) for the links seen (bit 0 intra, bit 1
 * inter). */
static const char *where(int links)
{
    return links == 1 ? ", inside a node" : links == 2 ? ", across nodes" : "";
}

/* Rank 0: the classes of the trace's groups by axis, the legend's names, the sends' name. */
static void classify(const struct pl_merged_trace *t, const struct pl_grid *grid,
                     int *group_class, struct pl_replay_svg_class *cls, char names[L9_NAX][48],
                     char *send_name, size_t len)
{
    const struct pl_topo *topo = pl_topo();
    int links[L9_NAX] = {0};
    for (int g = 0; g < t->ngroups; g++) {
        const struct pl_group_def *d = &t->groups[g];
        group_class[g] = l9_axis_of(grid, d->ranks, d->n);
        if (group_class[g] >= 0)
            links[group_class[g]] |= pl_topo_group_link(topo, d->ranks, d->n) == PL_LINK_INTER
                                         ? 2 : 1;
    }
    for (int a = 0; a < L9_NAX; a++) {
        snprintf(names[a], sizeof names[a], "%s collective%s", AX_LABEL[a], where(links[a]));
        cls[a] = (struct pl_replay_svg_class){names[a], AX_COLOR[a]};
    }
    /* the sends: the pipeline's when every one goes to a neighbouring stage */
    int pp = pl_grid_axis(grid, "pp"), send_links = 0, all_pp = 1;
    for (int r = 0; r < t->nranks; r++)
        for (int i = 0; i < t->nevents[r]; i++) {
            const struct pl_event *e = &t->events[r][i];
            if (e->type != PL_EV_SEND && e->type != PL_EV_ISEND) continue;
            if (e->peer < 0 || e->peer >= t->nranks) continue;
            all_pp &= e->peer == pl_grid_neighbor(grid, r, pp, 1) ||
                      e->peer == pl_grid_neighbor(grid, r, pp, -1);
            send_links |= pl_topo_link(topo, r, e->peer) == PL_LINK_INTER ? 2 : 1;
        }
    snprintf(send_name, len, "%s%s", all_pp ? "PP send" : "send", where(send_links));
}

/* Rank 0: the traced step replayed and drawn to svg; 0, or -1 with a message in err when
 * the trace does not replay (a file that cannot be written is a usage error, exit 2). */
static int draw(const struct l9_state *st, const struct pl_merged_trace *t, const char *svg,
                const char *who, char *err, size_t len)
{
    const struct l9_case *k = &st->cases[0];
    struct pl_grid grid;
    char deg[64];
    snprintf(deg, sizeof deg, "tp=%d,pp=%d,dp=%d", k->tp, k->pp, k->dp);
    if (pl_grid_init(&grid, L9_ORDER, deg, t->nranks, err, len) != 0) return -1;
    /* section 3.4's scale, as the step time test replays it */
    struct pl_merged_trace scaled;
    struct pl_replay rp;
    int rc = l9_replay_at_scale(st, 0, t, &scaled, &rp, err, len);
    if (rc == 0) {
        int *group_class = calloc((size_t)(t->ngroups > 0 ? t->ngroups : 1), sizeof(int));
        PL_ASSERT(group_class);
        struct pl_replay_svg_class cls[L9_NAX];
        char names[L9_NAX][48], send_name[48], title[256], note[256];
        classify(t, &grid, group_class, cls, names, send_name, sizeof send_name);
        snprintf(title, sizeof title, "Lab 9, %s: one step of (dp,tp,pp) = (%d,%d,%d), %s, "
                 "m = %d, on %s", who, k->dp, k->tp, k->pp, L9_ORDER, L9_MICRO, GR_BT_PROFILE);
        const struct pl_topo *topo = pl_topo();
        char nodes[64] = "";
        if (topo->is_virtual)
            snprintf(nodes, sizeof nodes, " (node = rank / %d)", topo->per_node);
        snprintf(note, sizeof note, "%d nodes of %d ranks%s. At section 3.4's scale: "
                 "blocks of width 12288, 2048 tokens a microbatch; kernels at the planner's "
                 "rate, a comm stream per link class. Transfers: %.0f px at least",
                 topo->nodes, topo->per_node, nodes, MIN_PX);
        struct pl_replay_svg_style style = {L9_NAX,       cls,    group_class, send_name,
                                            "compute", MIN_PX, note};
        if (pl_replay_write_svg_styled(&scaled, &rp, title, &style, svg) != 0) {
            remove(svg);
            pl_usage_error("--timeline-svg %s: cannot write it", svg);
        }
        free(group_class);
        pl_replay_free(&rp);
        gr_trace_scaled_free(&scaled);
    }
    return rc;
}

void l9_timeline_layout(const struct l9_state *st)
{
    const struct l9_case *k = &st->cases[0];
    const struct pl_topo *topo = pl_topo();
    struct pl_grid grid;
    char deg[64], err[256], line[256], part[96];
    snprintf(deg, sizeof deg, "tp=%d,pp=%d,dp=%d", k->tp, k->pp, k->dp);
    if (pl_rank() != 0 || pl_grid_init(&grid, L9_ORDER, deg, pl_size(), err, sizeof err) != 0)
        return;
    const int dp = pl_grid_axis(&grid, "dp"), pp = pl_grid_axis(&grid, "pp");
    size_t n = 0;
    line[0] = '\0';
    for (int node = 0; node < topo->nodes; node++) {
        int first = -1, last = -1, replica = -1, one = 1;
        for (int r = 0; r < pl_size(); r++) {
            if (pl_topo_node(topo, r) != node) continue;
            one &= first < 0 || (r == last + 1 && pl_grid_coord(&grid, r, dp) == replica);
            if (first < 0) first = r, replica = pl_grid_coord(&grid, r, dp);
            last = r;
        }
        if (!one || first < 0) {
            printf("# handout: node %d holds no DP replica whole\n", node);
            return;
        }
        if (node == 0)
            snprintf(part, sizeof part, "node 0 holds DP replica %d (ranks %d to %d)", replica,
                     first, last);
        else
            snprintf(part, sizeof part, "%s node %d replica %d",
                     node + 1 == topo->nodes ? " and" : ",", node, replica);
        n += (size_t)snprintf(line + n, n < sizeof line ? sizeof line - n : 0, "%s", part);
        if (n >= sizeof line) break;
    }
    printf("# handout: %s\n", line);
    n = (size_t)snprintf(line, sizeof line, "stage 0 (ranks");
    for (int r = 0, c = 0; r < pl_size() && n < sizeof line; r++)
        if (pl_grid_coord(&grid, r, pp) == 0)
            n += (size_t)snprintf(line + n, sizeof line - n, "%s %d", c++ ? "," : "", r);
    printf("# handout: %s)\n", line);
}

void l9_timeline(struct l9_state *st, const char *svg, const char *who)
{
    struct pl_merged_trace t;
    if (!l9_trace_step(st, 0, &t)) {
        if (pl_rank() == 0)
            printf("%s: no timeline: the (2,2,2) grid's step did not run (a stub or no grid "
                   "or model)\n", who);
        pl_trace_merged_free(&t);
        return;
    }
    char err[512];
    if (pl_rank() == 0) {
        if (draw(st, &t, svg, who, err, sizeof err) != 0)
            printf("%s: no timeline: %s\n", who, err);
        else
            printf("%s: wrote one step's modelled timeline, coloured by axis, to %s\n", who,
                   svg);
    }
    pl_trace_merged_free(&t);
}

/* Rank 0: stage s's DP buckets on the replayed step (the first rank of the stage): their
 * count, their time on the comm stream, and the compute stream's stalls waiting for them. */
static void stage_dp(const struct pl_merged_trace *t, const struct pl_replay *rp,
                     const struct pl_grid *grid, int r, int *n, double *busy, double *stall)
{
    long handles[64];
    *n = 0, *busy = 0, *stall = 0;
    for (int i = 0; i < t->nevents[r]; i++) {
        const struct pl_event *e = &t->events[r][i];
        const struct pl_span_time *sp = &rp->span[r][i];
        if (e->type == PL_EV_ISSUE && e->handle > 0) {
            const struct pl_group_def *d = NULL;
            for (int g = 0; g < t->ngroups; g++)
                if (t->groups[g].id == e->group) d = &t->groups[g];
            if (!d || l9_axis_of(grid, d->ranks, d->n) != L9_AX_DP || *n >= 64) continue;
            handles[(*n)++] = e->handle;
            *busy += sp->end - sp->start;
        } else if (e->type == PL_EV_WAIT) {
            for (int j = 0; j < *n; j++)
                if (handles[j] == e->handle) *stall += sp->end - sp->start;
        }
    }
}

void l9_cool_down_figures(struct l9_state *st, const char *tag)
{
    struct pl_merged_trace t;
    if (!l9_trace_step(st, 0, &t)) {
        pl_trace_merged_free(&t);
        return;
    }
    const struct l9_case *k = &st->cases[0];
    struct pl_grid grid;
    char deg[64], err[256];
    snprintf(deg, sizeof deg, "tp=%d,pp=%d,dp=%d", k->tp, k->pp, k->dp);
    if (pl_rank() == 0 && pl_grid_init(&grid, L9_ORDER, deg, t.nranks, err, sizeof err) == 0) {
        struct pl_merged_trace scaled;
        struct pl_replay rp;
        if (l9_replay_at_scale(st, 0, &t, &scaled, &rp, err, sizeof err) == 0) {
            const int pp = pl_grid_axis(&grid, "pp"), dp = pl_grid_axis(&grid, "dp"),
                      tp = pl_grid_axis(&grid, "tp");
            for (int r = 0; r < t.nranks; r++) {
                if (pl_grid_coord(&grid, r, dp) != 0 || pl_grid_coord(&grid, r, tp) != 0)
                    continue;
                int n;
                double busy, stall;
                stage_dp(&scaled, &rp, &grid, r, &n, &busy, &stall);
                printf("# %s: stage %d's DP sum, %d buckets, takes %.1f ms of the modelled "
                       "step on the comm stream, and the compute stream stalls %.1f ms "
                       "waiting for it: %.1f ms hidden\n", tag, pl_grid_coord(&grid, r, pp), n,
                       1e3 * busy, 1e3 * stall, 1e3 * (busy - stall));
            }
            pl_replay_free(&rp);
            gr_trace_scaled_free(&scaled);
        }
    }
    pl_trace_merged_free(&t);
}
