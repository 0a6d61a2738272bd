#!/bin/sh
# flake.sh: how stable speed grading is on a busy machine. Grades the reference solutions'
# speed-scored tests N times in a row while a CPU-bound load runs beside them on every core,
# then prints, per test, how many runs earned full marks and the spread of its scores and
# ratios. A benchmark, not a test: it says how far a correct submission's score depends on
# the machine, and never fails on that alone (exit 1 only when the grader itself could not
# run).
#
#   sh tests/flake.sh [BUILD_DIR]     (make flake)
#   FLAKE_RUNS=20   runs per test (default 20)
#   FLAKE_LOAD=N    busy processes beside the grader (default: one per core; 0 for none)
#   FLAKE_TEST=" vs "  which tests: a grade --test filter (default: the speed-scored ones,
#                   "X vs BASELINE")
#   LAB=01,03       which labs (default: every lab with solutions)
#   FLAKE_DRIVERS=DIR  grade these drivers instead of the solutions' (make flake
#                   DRIVERS=build/cpu/grader/alt/all_to_all_at_once: a correct alternative)
set -eu

b=${1:-build/cpu}
runs=${FLAKE_RUNS:-20}
[ -n "$runs" ] || runs=20
load=${FLAKE_LOAD:-$(getconf _NPROCESSORS_ONLN)}
filter=${FLAKE_TEST:- vs }
case $runs in '' | *[!0-9]* | 0)
    echo "flake.sh: FLAKE_RUNS=$runs is not a positive count of runs (for example FLAKE_RUNS=20)" >&2
    exit 2 ;;
esac
case $load in '' | *[!0-9]*)
    echo "flake.sh: FLAKE_LOAD=$load is not a count of busy processes (0 for none)" >&2
    exit 2 ;;
esac
if [ ! -x "$b/bin/grade" ]; then
    echo "flake.sh: $b/bin/grade is not built: run make first (or name the build folder)" >&2
    exit 2
fi

work=$(mktemp -d)
pids=""
stop_load() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    for p in $pids; do wait "$p" 2>/dev/null || true; done
    pids=""
}
trap 'stop_load; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM HUP

i=0
while [ "$i" -lt "$load" ]; do
    sh -c 'while :; do :; done' &
    pids="$pids $!"
    i=$((i + 1))
done

echo "flake: $runs runs of ${FLAKE_DRIVERS:-the solutions}' tests matching '$filter' beside $load busy processes"
r=1
while [ "$r" -le "$runs" ]; do
    if ! "$b/bin/grade" --build "$b" ${FLAKE_DRIVERS:+--drivers "$FLAKE_DRIVERS"} \
        $( [ -n "${FLAKE_DRIVERS:-}" ] || echo --solutions) ${LAB:+--lab "$LAB"} --test "$filter" \
        --results "$work/run$r.json" >"$work/run$r.log" 2>&1; then
        if [ ! -s "$work/run$r.json" ]; then
            echo "flake.sh: run $r of the grader failed without results:" >&2
            tail -20 "$work/run$r.log" >&2
            exit 1
        fi
    fi
    printf '  run %d of %d: %s\n' "$r" "$runs" "$(tail -1 "$work/run$r.log")"
    r=$((r + 1))
done
stop_load

python3 - "$work" "$runs" <<'EOF'
import json, re, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
rows = {}
for r in range(1, runs + 1):
    with open(f"{work}/run{r}.json") as f:
        for t in json.load(f)["tests"]:
            m = re.search(r"([0-9.]+)x", t.get("output", ""))
            row = rows.setdefault(t["name"], {"max": t["max_score"], "scores": [], "ratios": []})
            row["scores"].append(t["score"])
            if m:
                row["ratios"].append(float(m.group(1)))
print(f"\n{'test':<72} {'full':>7} {'min pts':>7} {'ratio min':>9} {'median':>7} {'max':>6}")
for name, row in rows.items():
    s, q = row["scores"], row["ratios"]
    full = sum(1 for x in s if x >= row["max"] - 1e-9)
    rq = (f"{min(q):9.2f} {statistics.median(q):7.2f} {max(q):6.2f}" if q
          else f"{'-':>9} {'-':>7} {'-':>6}")
    print(f"{name[:72]:<72} {full:>3}/{len(s):<3} {min(s):7.2f} {rq}")
EOF
