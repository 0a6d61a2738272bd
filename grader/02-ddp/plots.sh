#!/bin/sh
# plots.sh BUILD_DIR OUT_DIR labs|solutions: Lab 2's picture (`make plots LAB=02`): the lab's
# benchmark on 4 ranks, from your own run, drawing the overlapped step's modelled timeline on dgx-h100.
set -e
B=$1 out=$2 v=${3:-labs}
. grader/plots_common.sh
plots_driver "$B" "$out" "$v" 02-ddp
OPENBLAS_NUM_THREADS=1 "$B/bin/launch" --timeout 300 -np 4 -- "$d" --mode bench --label "$v" \
    --svg "$out/02-ddp-overlap-timeline.svg"
