#!/bin/sh
# gpu_check.sh: `make gpu-check`, the validation of a GPU node in one command (docs/gpu.md):
# what the build finds (make deps GPU=1), the GPU build, `make test-gpu` run in parallel
# (harness -j N, N the node's cores; the tests' ranks share the GPUs there are), the
# reference solutions graded (make grade SOLUTIONS=1 GPU=1), Lab 1's benchmark where the
# node has 2 GPUs or more (make bench GPU=1 LAB=01), and the reference step against PyTorch
# on the same GPU (make bench-model GPU=1). Written to one report, build/gpu/gpu-check.md:
# the machine (GPU model, driver, CUDA, NCCL, MPI, OS, compiler, cores), then each step's
# verdict and time, then the end of each step's output; every step's whole output is kept
# in build/gpu/gpu-check/STEP.log.
#
# Each step has a time budget and is stopped when it spends it (the report says so and the
# check goes on), so the whole check ends within 8 minutes on one 16-core node with one GPU:
# deps 20 s, build 110 s, tests 170 s, grade 80 s, Lab 1's benchmark 30 s (2+ GPUs only),
# bench-model 60 s: 440 s, 470 s with the benchmark. The budgets are set from the issue's
# timings, not measured on such a node yet: the first report says whether they hold.
# GPU_CHECK_SCALE=F multiplies every budget (a slower node, a first build).
#
# Without a GPU it says so and exits 2 before building anything. Otherwise it exits 0 when
# every step it ran passed, 1 when one failed or ran out of its budget.
#
#     sh tests/gpu_check.sh         (make gpu-check)
set -u

sh tests/gpu_present.sh "make gpu-check" "the CPU build's checks (make, make test)" || exit 2

out=build/gpu/gpu-check
report=build/gpu/gpu-check.md
mkdir -p "$out"
cores=$(nproc 2>/dev/null || echo 4)
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
scale=${GPU_CHECK_SCALE:-1}
case $scale in
    '' | *[!0-9.]* | .* | *.*.*)
        echo "GPU_CHECK_SCALE=$scale: expected a number such as 1.5 (the factor on every" \
             "step's time budget)"
        exit 2 ;;
esac
budget() { awk -v b="$1" -v s="$scale" 'BEGIN { printf "%d", b * s + 0.5 }'; }

steps=""   # "name|verdict|seconds|budget" lines, in order
failed=0

# run NAME BUDGET_S COMMAND...: runs COMMAND with its output in $out/NAME.log, stopped at
# BUDGET_S (TERM, then KILL 10 s later); records its verdict and time.
run() {
    name=$1; b=$(budget "$2"); shift 2
    echo "== gpu-check: $name (budget ${b} s): $*"
    t0=$(date +%s)
    timeout -s TERM -k 10 "$b" "$@" > "$out/$name.log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - t0 ))
    case $rc in
        0) verdict="ok" ;;
        124 | 137) verdict="stopped at its budget of ${b} s"; failed=1 ;;
        *) verdict="FAIL (exit $rc)"; failed=1 ;;
    esac
    detail=$(summary "$name")
    [ -n "$detail" ] && verdict="$verdict: $detail"
    echo "   $verdict (${secs} s)"
    steps="$steps$name|$verdict|$secs|$b
"
}

skip() {
    echo "== gpu-check: $1: skipped ($2)"
    steps="$steps$1|skipped: $2|-|-
"
}

# The line of a step's output that says how it went.
summary() {
    log=$out/$1.log
    case $1 in
        tests)
            if ! grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1 | grep .; then
                echo "$(grep -c -E '== (OK|COLLECTED)' "$log") passed, $(grep -c '== FAIL' "$log") failed" \
                     "before it was stopped"
            fi ;;
        grade) grep -E '^Score: ' "$log" | tail -n 1 ;;
        build) grep -E '^built ' "$log" | tail -n 1 ;;
        *) ;;
    esac
}

t_start=$(date +%s)
run deps 20 make --no-print-directory deps GPU=1
run build 110 make --no-print-directory -j "$cores" GPU=1 all
if [ -x build/gpu/tests/harness ]; then
    # Lines are run -j N at once; the harness counts a test's ranks against N.
    run tests 170 build/gpu/tests/harness --build build/gpu --gpu -j "$cores" \
        tests/*.tests tests/labs/*.tests
    run grade 80 make --no-print-directory GPU=1 grade SOLUTIONS=1
    if [ "$gpus" -ge 2 ]; then
        run bench-lab01 30 make --no-print-directory GPU=1 bench LAB=01 SOLUTIONS=1
    else
        skip bench-lab01 "one GPU: Lab 1's benchmark compares NCCL rings, which need 2 GPUs"
    fi
    run bench-model 60 env BENCH_ROUNDS=1 BENCH_SECONDS=1 \
        make --no-print-directory GPU=1 bench-model
else
    skip tests "the build failed"
    skip grade "the build failed"
    skip bench-lab01 "the build failed"
    skip bench-model "the build failed"
fi
total=$(( $(date +%s) - t_start ))

# ---- the report ----
first() { "$@" 2>/dev/null | head -n 1; }
# What the build used, as `make deps GPU=1` printed it ("  nvcc   ...", "  NCCL   ...").
found() { sed -n "s/^  $1  *//p" "$out/deps.log" | head -n 1; }
{
    echo "# make gpu-check: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "| | |"
    echo "|---|---|"
    echo "| GPU | $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null |
        sort | uniq -c | sed 's/^ *\([0-9]*\) /\1 x /' | paste -sd ';' -) |"
    echo "| driver | $(first nvidia-smi --query-gpu=driver_version --format=csv,noheader) |"
    echo "| CUDA | $(found nvcc) |"
    echo "| NCCL | $(found NCCL) |"
    echo "| cuBLAS | $(found cuBLAS) |"
    echo "| MPI | $(first mpirun --version) |"
    echo "| OpenBLAS | $(found OpenBLAS) |"
    echo "| OS | $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"), $(uname -r) |"
    echo "| compiler | $(first cc --version) |"
    echo "| cores | $cores |"
    echo
    echo "| step | verdict | time (s) | budget (s) |"
    echo "|---|---|---|---|"
    printf '%s' "$steps" | while IFS='|' read -r n v s b; do
        echo "| $n | $v | $s | $b |"
    done
    echo
    echo "Total: ${total} s."
    for n in deps build tests grade bench-lab01 bench-model; do
        [ -f "$out/$n.log" ] || continue
        echo
        echo "## $n (last lines of $out/$n.log)"
        echo
        echo '```'
        case $n in
            tests) grep -E '== FAIL|^[0-9]+ passed' "$out/$n.log" | tail -n 40 ;;
            grade) grep -E 'FAIL|^Score|not judged|on backend' "$out/$n.log" | tail -n 40 ;;
            *) tail -n 25 "$out/$n.log" ;;
        esac
        echo '```'
    done
} > "$report"

echo "report: $report (total ${total} s)"
exit "$failed"
