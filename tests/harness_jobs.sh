#!/bin/sh
# harness_jobs.sh: checks `harness -j N` (tests/harness.c) on a list of its own, without
# timing anything: two tests that can only pass together (each waits for the other's file)
# pass under -j 8 and fail when run one at a time (-j 1: the first waits out its timeout);
# each test's output comes out whole; the closing line and exit code are the serial run's,
# with each failed test's name listed again just above it;
# the time scale the harness chooses (unset outside) and one set outside reach the tests;
# the longest time limits start first; PL_TEST_CPU_LOG gets each test's CPU time; a bad -j
# is refused.
#
#     sh tests/harness_jobs.sh BUILD_DIR
set -eu

b=${1:?usage: sh tests/harness_jobs.sh BUILD_DIR}
dir=$(mktemp -d /tmp/pl-harness-jobs-XXXXXX)
trap 'rm -rf "$dir"' EXIT
export PL_HJ_DIR="$dir"

# Two rendezvous tests (np 0 takes 4 slots: two fit in 8), which then fail on purpose so
# that their output is printed (each prints 10 lines a few at a time: interleaved output
# would show); one that passes; one that fails to show the time scale it was given.
cat > "$dir/list" <<'LIST'
jobs: meets the other | 0 | 4 | exit=0 ~ not printed | touch $PL_HJ_DIR/a.$PL_HJ_RUN; for i in 1 2 3 4 5 6 7 8 9 10; do echo "a line $i"; sleep 0.05; done; while [ ! -e $PL_HJ_DIR/b.$PL_HJ_RUN ]; do sleep 0.05; done; echo a met b
jobs: meets the first | 0 | 4 | exit=0 ~ not printed | touch $PL_HJ_DIR/b.$PL_HJ_RUN; for i in 1 2 3 4 5 6 7 8 9 10; do echo "b line $i"; sleep 0.05; done; while [ ! -e $PL_HJ_DIR/a.$PL_HJ_RUN ]; do sleep 0.05; done; echo b met a
jobs: passes          | 0 | 4 | ok | true
jobs: time scale      | 0 | 4 | ok | echo scale is $PL_TEST_TIME_SCALE; exit 3
LIST

fail() { echo "FAIL: $*"; exit 1; }

PL_HJ_RUN=par; export PL_HJ_RUN
rc=0
env -u PL_TEST_TIME_SCALE "$b/tests/harness" -j 8 "$dir/list" > "$dir/par.out" 2>&1 || rc=$?
cat "$dir/par.out"
[ "$rc" -eq 1 ] || fail "-j 8: exit code $rc, expected 1 (three tests fail on purpose)"
[ "$(tail -n 1 "$dir/par.out")" = "1 passed, 3 failed" ] ||
    fail "-j 8: the closing line is '$(tail -n 1 "$dir/par.out")', not '1 passed, 3 failed'"
# The failed tests named again just above the closing line (in the order they ended).
[ "$(tail -n 4 "$dir/par.out" | head -n 3 | grep -c '^FAILED: jobs: \(meets the other\|meets the first\|time scale\)$')" -eq 3 ] ||
    fail "-j 8: the three failed tests are not named above the closing line"
grep -q "^    a met b$" "$dir/par.out" && grep -q "^    b met a$" "$dir/par.out" ||
    fail "-j 8: the two rendezvous tests did not run at once"
grep -q "scale is 1.5$" "$dir/par.out" || grep -q "scale is 2.25$" "$dir/par.out" ||
    fail "-j 8: PL_TEST_TIME_SCALE is not 1.5 (CPU build) or 2.25 (GPU build)"
# Output whole: the lines after a test's "==" line, up to the next one, are its own.
cur=""
while IFS= read -r line; do
    case $line in
    "== jobs: meets the other"*) cur=a ;;
    "== jobs: meets the first"*) cur=b ;;
    "== "*) cur=other ;;
    *"a line"*) [ "$cur" = a ] || fail "-j 8: 'a line' printed inside another test's output" ;;
    *"b line"*) [ "$cur" = b ] || fail "-j 8: 'b line' printed inside another test's output" ;;
    esac
done < "$dir/par.out"

# One at a time the pair cannot meet: the first waits out its timeout.
PL_HJ_RUN=ser
rc=0
PL_TEST_TIME_SCALE=1 "$b/tests/harness" -j 1 "$dir/list" > "$dir/ser.out" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "-j 1: exit code $rc, expected 1"
grep -q "did not finish within 4 s" "$dir/ser.out" && ! grep -q "^    a met b$" "$dir/ser.out" ||
    fail "-j 1: the first rendezvous test met the other alone, so -j 8 proves nothing"
grep -q "scale is 1$" "$dir/ser.out" || fail "-j 1: PL_TEST_TIME_SCALE=1 was not passed on"
grep -q "^FAILED: jobs: time scale$" "$dir/ser.out" || fail "-j 1: the failed tests are not named at the end"

# Under -j the longest time limits start first, equals in the file's order; one slot at a
# time (-j 2, each line taking both) makes the order the start order. Each test's CPU time
# (its waited-for processes' user + system) goes to PL_TEST_CPU_LOG: the busy loop's is
# above zero.
cat > "$dir/order" <<'LIST'
order: short | 0 | 5  | ok | echo short >> $PL_HJ_DIR/started
order: long  | 0 | 20 | ok | echo long >> $PL_HJ_DIR/started; i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done
order: mid   | 0 | 10 | ok | echo mid >> $PL_HJ_DIR/started
order: mid2  | 0 | 10 | ok | echo mid2 >> $PL_HJ_DIR/started
LIST
PL_TEST_CPU_LOG="$dir/cpu.log" "$b/tests/harness" -j 2 "$dir/order" > "$dir/order.out" 2>&1 ||
    { cat "$dir/order.out"; fail "-j 2: the ordering list failed"; }
[ "$(tr '\n' ' ' < "$dir/started")" = "long mid mid2 short " ] ||
    fail "-j 2: started as '$(tr '\n' ' ' < "$dir/started")', not longest time limit first"
[ "$(wc -l < "$dir/cpu.log")" -eq 4 ] || fail "PL_TEST_CPU_LOG: not one line per test"
awk -F'\t' '$2 == "order: long" && $1 > 0 { found = 1 } END { exit !found }' "$dir/cpu.log" ||
    fail "PL_TEST_CPU_LOG: no CPU time above zero for the busy test: $(cat "$dir/cpu.log")"

rc=0
"$b/tests/harness" -j x "$dir/list" > "$dir/bad.out" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q "expected a whole number" "$dir/bad.out" || fail "-j x: not refused with exit 2"
echo "harness -j: all checks passed"
