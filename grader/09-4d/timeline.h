/* timeline.h: Lab 9's timeline picture (timeline.c), drawn by bench mode's --timeline-svg. */
#ifndef LAB09_TIMELINE_H
#define LAB09_TIMELINE_H

#include "lab09.h"

/* Collective, on 8 ranks: one step of the code's training on st's first grid, (2,2,2),
 * traced and replayed; rank 0 draws it to svg, the collectives coloured by axis, and says
 * so (who: whose code), or says why there is no picture. */
void l9_timeline(struct l9_state *st, const char *svg, const char *who);
/* Rank 0, on 8 ranks: the "# handout:" lines of the layout the timeline's paragraph
 * describes (tests/handout_figures.sh): which DP replica and ranks each node holds, and the
 * ranks of stage 0, from the grid of "tp-pp-dp" on the cluster's nodes. */
void l9_timeline_layout(const struct l9_state *st);

/* Collective, on 8 ranks: the same step traced and replayed; rank 0 prints, for each stage
 * (its ranks of DP replica 0, TP rank 0), how many buckets its DP sum took, their time on
 * the comm stream and the stalls waiting for them, as "# tag:" lines (section 3.3). */
void l9_cool_down_figures(struct l9_state *st, const char *tag);

/* One training step of grid i (st->cases[i], unclipped, ZeRO off) traced on every rank
 * (collective); 0 when the code stopped at a stub or gave no grid or model, 1 with the
 * merged trace on rank 0 otherwise. Free t with pl_trace_merged_free either way. */
int l9_trace_step(struct l9_state *st, int i, struct pl_merged_trace *t);
/* The axes of the lab's grid, as l9_axis_of names them. */
enum { L9_AX_TP, L9_AX_PP, L9_AX_DP, L9_NAX };
/* The axis of grid whose group through ranks[0] is exactly the set ranks[0..n), or -1. */
struct pl_grid;
int l9_axis_of(const struct pl_grid *grid, const int *ranks, int n);

#endif
