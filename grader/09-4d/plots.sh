#!/bin/sh
# plots.sh BUILD_DIR OUT_DIR labs|solutions: Lab 9's pictures (`make plots LAB=09`), drawn
# from a real run of the copy being graded on 8 ranks (2 nodes of 4): the (2,2,2) grid
# trained with recompute none, selective and full, each rank's activation peak from the
# memory ledger beside section 3.1's formula, grouped by pipeline stage (09-4d-recompute.svg);
# and one step of that grid traced and replayed on dgx-h100 at GPT-3 175B block scale, a row
# per rank, its collectives coloured by the axis they run on and its sends apart
# (09-4d-timeline.svg); and every 8-rank run's memory on stage 0, by category, beside Lab
# 8's planner's figure for its configuration (09-4d-plan.svg).
set -e
B=$1 out=$2 v=${3:-labs}
. grader/plots_common.sh
plots_driver "$B" "$out" "$v" 09-4d
OPENBLAS_NUM_THREADS=1 "$B/bin/launch" --timeout 300 -np 8 -- "$d" --mode bench --label "$v" \
    --svg "$out/09-4d-recompute.svg" --timeline-svg "$out/09-4d-timeline.svg" \
    --plan-svg "$out/09-4d-plan.svg"
