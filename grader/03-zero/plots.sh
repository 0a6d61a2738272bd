#!/bin/sh
# plots.sh BUILD_DIR OUT_DIR labs|solutions: Lab 3's pictures (`make plots LAB=03`), from the
# lab's benchmark on 4 ranks, your own run: the memory per rank of each stage by category
# (03-zero-memory.svg); one ZeRO-3 step's memory over time by category, the sawtooth of the
# gathered units (03-zero-memory-time.svg); and that step's modelled timeline on dgx-h100
# with and without prefetch (03-zero-timeline-prefetch.svg, 03-zero-timeline-no-prefetch.svg).
set -e
B=$1 out=$2 v=${3:-labs}
. grader/plots_common.sh
plots_driver "$B" "$out" "$v" 03-zero
OPENBLAS_NUM_THREADS=1 "$B/bin/launch" --timeout 300 -np 4 -- "$d" --mode bench --label "$v" \
    --svg "$out/03-zero-memory.svg" --plots "$out"
