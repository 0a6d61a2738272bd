#!/bin/sh
# plots.sh BUILD_DIR OUT_DIR labs|solutions: Lab 4's pictures (`make plots LAB=04`), on 8
# ranks of a virtual 2 nodes x 4 cluster: the f/g figure of the TP MLP and attention, and the
# block of the copy being graded on the modelled timeline, with tp = 4 inside a node and
# across nodes (04-tensor-parallel-*.svg in OUT_DIR).
set -e
B=$1 out=$2 v=${3:-labs}
. grader/plots_common.sh
plots_driver "$B" "$out" "$v" 04-tensor-parallel
OPENBLAS_NUM_THREADS=1 "$B/bin/launch" --timeout 300 -np 8 -- "$d" --mode bench --label "$v/" \
    --plots-dir "$out"
