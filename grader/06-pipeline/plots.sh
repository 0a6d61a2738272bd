#!/bin/sh
# plots.sh BUILD_DIR OUT_DIR labs|solutions: Lab 6's schedule pictures (`make plots LAB=06`).
# Runs the lab's driver in bench mode on 4 stages: every schedule and m, its bubble and
# activation peak, and an SVG per run (yours, replayed with uniform stage times) beside the
# ideal one the grader computes from the schedule's definition.
set -e
B=$1 out=$2 v=${3:-labs}
. grader/plots_common.sh
plots_driver "$B" "$out" "$v" 06-pipeline
OPENBLAS_NUM_THREADS=1 "$B/bin/launch" --timeout 300 -np 4 -- "$d" --mode bench --svg-dir "$out"
