#!/bin/sh
# bench.sh: the kit's benchmarks, run by `make bench` as `sh tests/bench.sh BUILD_DIR`.
# One section per benchmark program, each launched at a few rank counts. Benchmarks
# describe this machine; they are not tests, and nothing here fails on slow numbers.
set -e
B=${1:-build/cpu}
launch() { "$B/bin/launch" --timeout 600 "$@"; }
section() { printf '\n==== %s ====\n' "$*"; }

section "collectives, nccl-tests style (bench_comm)"
for np in 2 4 8; do
    launch -np "$np" -- "$B/tests/bench_comm"
done

section "training-step throughput vs OpenBLAS sgemm and PyTorch (bench_train)"
"$B/tests/bench_train"

# Lab 1: the student's collectives (labs/, or solutions/ with SOLUTIONS=1) beside the
# library's, at NP ranks (default 4). Selected by LAB=01 (or no LAB at all).
case "${LAB:-01}" in
01* | 1 | *collectives*)
    if [ "${SOLUTIONS:-0}" != 0 ]; then v=solutions; label="the solution (solutions/)"
    else v=labs; label="yours (labs/)"; fi
    section "Lab 1 collectives: $label beside the library's"
    if [ -x "$B/grader/$v/01-collectives/driver" ]; then
        launch -np "${NP:-4}" -- "$B/grader/$v/01-collectives/driver" --mode bench \
            --label "$label" --max-mib "${BENCH_MAX_MIB:-16}"
    else
        echo "no $v driver: labs/01-collectives did not compile (make grade LAB=01 shows why)"
    fi
    ;;
esac
