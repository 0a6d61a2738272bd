#!/bin/sh
# plots.sh BUILD_DIR OUT_DIR labs|solutions: Lab 3's picture (`make plots LAB=03`): the lab's
# benchmark on 4 ranks, from your own run, drawing the memory per rank of each stage by category.
set -e
B=$1 out=$2 v=${3:-labs}
d="$B/grader/$v/03-zero/driver"
if [ ! -x "$d" ]; then
    echo "no $v driver: $v/03-zero did not compile (make grade LAB=03 shows why)"
    exit 1
fi
mkdir -p "$out"
OPENBLAS_NUM_THREADS=1 "$B/bin/launch" --timeout 300 -np 4 -- "$d" --mode bench --label "$v" \
    --svg "$out/03-zero-memory.svg"
