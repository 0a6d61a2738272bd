#!/bin/sh
# plots.sh BUILD_DIR OUT_DIR labs|solutions: Lab 10's picture (`make plots LAB=10`), drawn from
# a real run of the copy being graded on 4 ranks: a run whose save at step 9 is killed before
# its manifest, restarted on 3 ranks from step 6, over the uninterrupted run; and the time
# lost against the checkpoint interval for the measured save cost and Llama 3's failure rate
# (10-fault-tolerance-restart.svg).
set -e
B=$1 out=$2 v=${3:-labs}
. grader/plots_common.sh
plots_driver "$B" "$out" "$v" 10-fault-tolerance
"$B/bin/launch" -np 4 -- "$d" --mode bench --svg "$out/10-fault-tolerance-restart.svg"
