#!/bin/sh
# plots.sh BUILD_DIR OUT_DIR labs|solutions: Lab 8's picture (`make plots LAB=08`, section 1's
# figure), drawn from the copy being graded: its search's choice for Llama 3 70B on 8 DGX H100
# nodes and its own estimates of every set of degrees the kit weighs (08-placement-space.svg).
# `plan --svg` draws the kit's.
set -e
B=$1 out=$2 v=${3:-labs}
. grader/plots_common.sh
plots_driver "$B" "$out" "$v" 08-placement
"$d" --mode bench --svg "$out/08-placement-space.svg"
