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
# The library's own benchmarks run when no LAB is chosen; LAB=NN runs that lab's section only.
if [ -z "${LAB:-}" ]; then
    section "collectives, nccl-tests style (bench_comm)"
    for np in 2 4 8; do
        launch -np "$np" -- "$B/tests/bench_comm"
    done

    section "training-step throughput vs OpenBLAS sgemm and PyTorch (bench_train)"
    "$B/tests/bench_train"
fi

# Every lab's benchmark, found through the orchestrator (grade --labs: folder, rank counts,
# the driver's arguments, title), each with the copy chosen above: labs/, or solutions/ with
# SOLUTIONS=1. LAB=NN (or a name) runs that lab's only. BENCH_SVG=FILE passes --svg FILE, on
# the largest rank count, to the labs whose driver draws a figure. NP=2,4 overrides the
# rank counts.
# Fields are cut, not read with IFS=tab: tab is white space to read, so an empty field
# (a lab with no bench arguments) would vanish and shift the title into the arguments.
# A LAB that names no lab stops here, with the labs listed (exit 2).
"$B/bin/grade" --labs ${LAB:+--lab "$LAB"} >/dev/null || exit 2
"$B/bin/grade" --labs ${LAB:+--lab "$LAB"} | while IFS= read -r line; do
    dir=$(printf '%s\n' "$line" | cut -f1)
    nps=$(printf '%s\n' "$line" | cut -f2)
    args=$(printf '%s\n' "$line" | cut -f3)
    title=$(printf '%s\n' "$line" | cut -f4)
    [ -n "$nps" ] || continue
    section "Lab ${dir%%-*} $title: $label"
    d="$B/grader/$v/$dir/driver"
    if [ ! -x "$d" ]; then
        echo "no $v driver: $v/$dir did not compile (make grade LAB=${dir%%-*} shows why)"
        continue
    fi
    [ -z "${NP:-}" ] || nps=$(echo "$NP" | tr ',' ' ')
    last=${nps##* }
    for np in $nps; do
        svg=""
        if [ "$np" = "$last" ] && [ -n "${BENCH_SVG:-}" ] && "$d" --help | grep -q -- --svg; then
            svg="--svg $BENCH_SVG"
        fi
        # shellcheck disable=SC2086
        OPENBLAS_NUM_THREADS=1 launch -np "$np" -- "$d" --mode bench --label "$label" $args $svg
    done
done
