#!/bin/sh
# bench.sh: the kit's benchmarks, run by `make bench` as `sh tests/bench.sh BUILD_DIR`.
# One section per benchmark program, each launched at a few rank counts. Benchmarks
# describe this machine; they are not tests, and nothing here fails on slow numbers.
set -e
B=${1:-build/cpu}
launch() { "$B/bin/launch" --timeout 600 "$@"; }
section() { printf '\n==== %s ====\n' "$*"; }

# Which copy of a lab runs: the student's (labs/) or, with SOLUTIONS=1, the solution.
if [ "${SOLUTIONS:-0}" != 0 ]; then v=solutions; label="the solution (solutions/)"
else v=labs; label="yours (labs/)"; fi
# lab_driver NN-name: sets $d to that lab's driver built with that copy, or says why not.
lab_driver() {
    d="$B/grader/$v/$1/driver"
    [ -x "$d" ] && return 0
    echo "no $v driver: labs/$1 did not compile (make grade LAB=${1%%-*} shows why)"
    return 1
}

# The library's own benchmarks run when no LAB is chosen; LAB=NN runs that lab's section only.
if [ -z "${LAB:-}" ]; then
    section "collectives, nccl-tests style (bench_comm)"
    for np in 2 4 8; do
        launch -np "$np" -- "$B/tests/bench_comm"
    done

    section "training-step throughput vs OpenBLAS sgemm and PyTorch (bench_train)"
    "$B/tests/bench_train"
fi

# Lab 1: the student's collectives (labs/, or solutions/ with SOLUTIONS=1) beside the
# library's, at NP ranks (default 4). Selected by LAB=01 (or no LAB at all).
case "${LAB:-01}" in
01* | 1 | *collectives*)
    section "Lab 1 collectives: $label beside the library's"
    if lab_driver 01-collectives; then
        launch -np "${NP:-4}" -- "$d" --mode bench \
            --label "$label" --max-mib "${BENCH_MAX_MIB:-16}"
    fi
    ;;
esac

# Lab 2: the student's DDP step (labs/, or solutions/ with SOLUTIONS=1) for the three
# variants on 1, 2 and 4 ranks: wall-clock step, time waiting for communication, tokens/s,
# and the step modelled on the DGX H100 profile. Selected by LAB=02 (or no LAB at all);
# BENCH_SVG=FILE also writes the overlapped step's modelled timeline (4 ranks).
case "${LAB:-02}" in
02* | 2 | *ddp*)
    section "Lab 2 data parallelism: $label"
    if lab_driver 02-ddp; then
        for np in 1 2 4; do
            svg=""
            [ "$np" = 4 ] && [ -n "${BENCH_SVG:-}" ] && svg="--svg $BENCH_SVG"
            # shellcheck disable=SC2086
            OPENBLAS_NUM_THREADS=1 launch -np "$np" -- "$d" --mode bench \
                --label "$label" $svg
        done
    fi
    ;;
esac

# Lab 3: memory per rank by category for DDP and the student's ZeRO stages (labs/, or
# solutions/ with SOLUTIONS=1) on 2 and 4 ranks, measured by the memory ledger beside the
# formulas, then the formulas for the ZeRO paper's 7.5B/64 example. Selected by LAB=03 (or
# no LAB at all); BENCH_SVG=FILE also writes the bar chart of the 4-rank run.
case "${LAB:-03}" in
03* | 3 | *zero*)
    section "Lab 3 ZeRO memory per rank: $label"
    if lab_driver 03-zero; then
        for np in 2 4; do
            svg=""
            [ "$np" = 4 ] && [ -n "${BENCH_SVG:-}" ] && svg="--svg $BENCH_SVG"
            # shellcheck disable=SC2086
            OPENBLAS_NUM_THREADS=1 launch -np "$np" -- "$d" \
                --mode report $svg
        done
    fi
    "$B/bin/zero_memory"
    ;;
esac

# Lab 7: the student's expert-parallel MoE (labs/, or solutions/ with SOLUTIONS=1) on 4 ranks:
# all-to-all-v volume and balance, dropped choices and tokens per expert as the routing skews
# towards one expert, and the MoE layer modelled on dgx-h100. Selected by LAB=07 (or no LAB).
case "${LAB:-07}" in
07* | 7 | *moe*)
    section "Lab 7 MoE all-to-all volume and balance: $label"
    if lab_driver 07-moe; then
        OPENBLAS_NUM_THREADS=1 launch -np 4 -- "$d" --mode bench
    fi
    ;;
esac
