#!/bin/sh
# plots.sh BUILD_DIR OUT_DIR labs|solutions: Lab 7's pictures (`make plots LAB=07`, the
# figures of the handout's section 8), from the copy being graded on 4 ranks.
set -e
B=$1 out=$2 v=${3:-labs}
. grader/plots_common.sh
plots_driver "$B" "$out" "$v" 07-moe
"$B/bin/launch" --timeout 300 -np 4 -- "$d" --mode bench --plots-dir "$out"
