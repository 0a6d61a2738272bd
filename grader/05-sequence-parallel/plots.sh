#!/bin/sh
# plots.sh BUILD_DIR OUT_DIR labs|solutions: Lab 5's pictures (`make plots LAB=05`), on 4
# ranks: the TP vs TP+SP layout, and activation bytes per rank against t measured from the
# copy being graded beside the kit's formulas, and the second part's ring attention forward on
# the modelled timeline (05-sequence-parallel-*.svg in OUT_DIR).
set -e
B=$1 out=$2 v=${3:-labs}
. grader/plots_common.sh
plots_driver "$B" "$out" "$v" 05-sequence-parallel
OPENBLAS_NUM_THREADS=1 "$B/bin/launch" --timeout 300 -np 4 -- "$d" --mode bench --label "$v/" \
    --plots-dir "$out"
