#!/bin/sh
# plots.sh BUILD_DIR OUT_DIR labs|solutions: Lab 8's picture (`make plots LAB=08`): the
# kit's planner's search space for Llama 3 70B on 8 DGX H100 nodes (08-placement-space.svg).
# It is the kit's, not the copy being graded: the third argument is accepted and unused.
set -e
B=$1 out=$2
mkdir -p "$out"
"$B/bin/plan" --model llama3-70b --cluster dgx-h100 --nodes 8 --svg "$out/08-placement-space.svg" \
    >/dev/null
echo "wrote $out/08-placement-space.svg"
