#!/bin/sh
# replay.sh: the Gradescope flow, replayed on lab 01 in a scratch folder standing in for
# /autograder (PL_AUTOGRADER): `make gradescope LAB=01`, the zip unpacked into source/,
# setup.sh run once, then for each submission its files in submission/ and run_autograder
# run. Checks that each attack of tests/attacks scores 0 (or fails its build with the rule
# it broke), leaves no process behind and leaks no secret, that the hygiene cases say what
# they should, and that an honest submission still scores full marks. To stay fast, only
# the ring all-reduce's tests run (TEST "ring all-reduce [np=": 5 visible runs, 3 hidden).
# Prints one line per case with the score it got; exit 1 on the first case that fails.
set -u
kit=$(pwd -P)
tmp=$(mktemp -d /tmp/pl-attacks-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
root=$tmp/autograder
seed=48611
mkdir -p "$root/source" "$root/submission"
SEED=$seed LAB=01 sh grader/gradescope/make_zip.sh "$tmp/zip" >/dev/null || exit 1
unzip -q "$tmp/zip/autograder-01.zip" -d "$root/source"
if [ -e "$root/source/solutions" ] || [ -n "$(find "$root/source" -name "*.patch")" ]; then
    echo "FAIL: the autograder zip holds solutions"
    exit 1
fi
[ "$(cat "$tmp/zip/autograder-01.seed")" = $seed ] || { echo "FAIL: no seed beside the zip"; exit 1; }
cp "$root/source/run_autograder" "$root/run_autograder"
# The build's compiled objects, when the zip's sources are its own (tests/reuse_objects.sh).
sh tests/reuse_objects.sh build/cpu "$root/source" >"$tmp/reuse.log"
export PL_AUTOGRADER="$root" PL_SANDBOX_EXCLUSIVE=0 PL_AUTOGRADER_TEST="ring all-reduce [np="
if ! PL_SETUP_NO_APT=1 sh "$root/source/setup.sh" >"$tmp/setup.log" 2>&1; then
    tail -n 20 "$tmp/setup.log"
    echo "FAIL: setup.sh"
    exit 1
fi
hidden_seed=$(awk -v s=$seed 'BEGIN { printf "%.0f", s * 2654435761 + 97 }')
stub=$kit/labs/01-collectives/collectives.c

# submit CASE FILE...: a fresh submission of FILE (a path, or NAME=path to rename it).
submit() {
    case_name=$1
    shift
    rm -rf "$root/submission" "$root/results"
    mkdir -p "$root/submission"
    for f in "$@"; do
        case $f in
            *=*) cp "${f#*=}" "$root/submission/${f%%=*}" ;;
            *) cp "$f" "$root/submission/" ;;
        esac
    done
    t0=$(date +%s)
    sh "$root/run_autograder" >"$tmp/$case_name.out" 2>&1
    took=$(($(date +%s) - t0))
    # What an escaped process would need to strike after the grader (an attack's code ran).
    case $case_name in attack:*) sleep 1 ;; esac
    res=$root/results/results.json
    score=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); ts=d.get("tests",[]); print("%g %g" % (sum(t.get("score",0) for t in ts), sum(t.get("max_score",0) for t in ts)))' "$res" 2>/dev/null)
    echo "$case_name: ${score:-no valid results.json}" | sed 's| \([0-9.]*\)$|/\1 points|;' |
        sed "s|\$| (${took}s)|"
}
fail() {
    echo "FAIL ($case_name): $*"
    sed -n '1,40p' "$tmp/$case_name.out"
    exit 1
}
expect_score() {
    [ "${score%% *}" = "$1" ] || fail "scored ${score:-nothing}, expected $1"
}
expect_text() {
    grep -qF -- "$1" "$2" || fail "no \"$1\" in $(basename "$2")"
}
reject_text() {
    if grep -qF -- "$1" "$2"; then fail "\"$1\" appears in $(basename "$2")"; fi
}

# runtime ATTACK OUT: the stub with ATTACK appended and run first thing in every call of its
# ring_all_reduce (a lab's code runs only when the grader calls it: constructors are refused).
runtime() {
    { echo "static void attack_run(void);"
      sed 's/lab_todo("ring_all_reduce"/attack_run(); &/' "$stub"
      cat "$1"; } >"$2"
    grep -q 'attack_run(); lab_todo' "$2" || { echo "FAIL: no ring_all_reduce stub to attack"; exit 1; }
}
runtime tests/attacks/orphan_results.c "$tmp/orphan.c"
runtime tests/attacks/forge_after_main.c "$tmp/forge_late.c"
runtime tests/attacks/leak_secret.c "$tmp/leak.c"
runtime tests/attacks/edit_report.c "$tmp/edit.c"
runtime tests/attacks/patch_own_code.c "$tmp/unprotect.c"
runtime tests/attacks/scan_memory.c "$tmp/scan.c"
runtime tests/attacks/timer_forge.c "$tmp/timer.c"
cat "$stub" tests/attacks/forge_constructor.c >"$tmp/forge.c"
cat "$stub" tests/attacks/interpose_libc.c >"$tmp/interpose.c"
cat "$stub" tests/attacks/compile_error.c >"$tmp/error.c"

submit "attack: include the shipped solution" collectives.c=tests/attacks/include_solution.c
expect_score 0
expect_text "solutions/01-collectives/collectives.c" "$res"

printf '#include "%s/solutions/01-collectives/collectives.c"\n' "$kit" >"$tmp/absolute.c"
submit "attack: include a solution by absolute path" collectives.c="$tmp/absolute.c"
expect_score 0
expect_text "outside what a lab may include" "$res"

submit "attack: orphan overwrites results.json" collectives.c="$tmp/orphan.c"
expect_score 0
reject_text "forged by an orphan" "$res"
if pgrep -f "$root/source/build" >/dev/null || pgrep -u paralab-student -f "$tmp" >/dev/null; then
    fail "a process of the submission outlived run_autograder"
fi

submit "attack: forge verdicts from a constructor" collectives.c="$tmp/forge.c"
expect_score 0
expect_text "runs before main or after it" "$res"

submit "attack: forge verdicts once the grader calls it" collectives.c="$tmp/forge_late.c"
expect_score 0
expect_text "still a stub" "$res"

# As root on a writable cgroup2 hierarchy, every job runs in a cgroup of its own.
cgroup2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)
rm -f /tmp/pl-attack-leak.txt
submit "attack: leak secrets via stderr" collectives.c="$tmp/leak.c"
expect_score 0
[ -s /tmp/pl-attack-leak.txt ] || fail "the leak attack did not run"
for secret in "$seed" "$hidden_seed"; do
    if grep -qw -- "$secret" /tmp/pl-attack-leak.txt; then
        fail "the code under test could read the seed $secret (environment or a command line)"
    fi
done
if [ "$(id -u)" = 0 ] && [ -n "$cgroup2" ] && [ -w "$cgroup2" ]; then
    own=$(sed -n 's|^0::\(.*/paralab-[0-9]*-[0-9]*\)$|\1|p' /tmp/pl-attack-leak.txt | head -n 1)
    [ -n "$own" ] ||
        fail "the job did not run in a cgroup of its own: $(grep "^0::" /tmp/pl-attack-leak.txt)"
    [ ! -e "$cgroup2$own" ] || fail "the job's cgroup $own outlived it"
fi
rm -f /tmp/pl-attack-leak.txt
expect_text "output (last lines)" "$res"
reject_text "$seed" "$res"
reject_text "$hidden_seed" "$res"
reject_text 'PL_SEED=$(cat seed)' "$res"
reject_text "\$(printf '%s'" "$res" # a line of run_autograder's end, which it printed last
reject_text "Lab 1 reference solution" "$res"

submit "attack: replace the C library's fprintf under the grader" collectives.c="$tmp/interpose.c"
expect_score 0
expect_text "not linked: it defines fprintf" "$res"

submit "attack: edit the grader's verdicts once written" collectives.c="$tmp/edit.c"
expect_score 0
expect_text "still a stub" "$res"

submit "attack: find the token in its own memory" collectives.c="$tmp/scan.c"
expect_score 0

submit "attack: make its own code writable" collectives.c="$tmp/unprotect.c"
expect_score 0
expect_text "calls mprotect" "$res"

submit "attack: a timer whose handler runs beside the checks" collectives.c="$tmp/timer.c"
expect_score 0
expect_text "calls setitimer, sigaction" "$res"

submit "hygiene: misnamed file" collective.c="$stub"
expect_score 0
expect_text "no collectives.c found" "$tmp/$case_name.out"
expect_text "received: collective.c" "$res"

submit "hygiene: extra file" collectives.c="$stub" notes.txt=tests/attacks/compile_error.c
expect_text "not graded (no lab has a file of that name): notes.txt" "$tmp/$case_name.out"

submit "hygiene: compile error is one failing test" collectives.c="$tmp/error.c"
expect_score 0
[ "$(grep -o "the lab did not compile" "$res" | wc -l)" = 1 ] || fail "compiler output not on one test"
expect_text "not run: the lab did not build" "$res"

submit "honest: the stub" collectives.c="$stub"
expect_score 0
expect_text "still a stub" "$res"

submit "honest: the solution" collectives.c="$kit/solutions/01-collectives/collectives.c"
[ -n "$score" ] && [ "${score%% *}" = "${score##* }" ] && [ "${score##* }" != 0 ] ||
    fail "the solution scored ${score:-nothing}, expected full marks"
# The lab's questions.txt uploaded beside the code is graded too (only the questions run).
PL_AUTOGRADER_TEST=question
submit "honest: the questions uploaded" collectives.c="$kit/solutions/01-collectives/collectives.c" \
    questions.txt="$kit/solutions/01-collectives/questions.txt"
PL_AUTOGRADER_TEST="ring all-reduce [np="
[ -n "$score" ] && [ "${score%% *}" = "${score##* }" ] && [ "${score##* }" != 0 ] ||
    fail "the uploaded answers scored ${score:-nothing}, expected full marks"
expect_text "graded file: labs/01-collectives/questions.txt (from questions.txt)" "$tmp/$case_name.out"

# make regrade on the same autograder: a folder of three students, one CSV row each.
subs=$tmp/subs
mkdir -p "$subs/alice" "$subs/bob" "$subs/carol" "$subs/dave"
cp "$kit/solutions/01-collectives/collectives.c" "$subs/alice/"
cp "$tmp/forge.c" "$subs/bob/collectives.c"
cp "$stub" "$subs/carol/collective.c"
cp "$tmp/timer.c" "$subs/dave/collectives.c"
case_name="regrade: four students"
REGRADE_ROOT=$root TEST="ring all-reduce [np=" sh grader/regrade.sh "$subs" "$tmp/grades.csv" \
    >"$tmp/$case_name.out" 2>&1 || fail "make regrade failed"
row() { grep "^$1," "$tmp/grades.csv" || fail "no row for $1"; }
echo "$case_name: $(($(wc -l <"$tmp/grades.csv") - 1)) rows"
head -n 1 "$tmp/grades.csv" | grep -q "^student,build,visible_score,visible_max,hidden_score,hidden_max,wall_s,sha256,flags,.*correctness" ||
    fail "CSV header: $(head -n 1 "$tmp/grades.csv")"
alice=$(row alice)
sum=$(sha256sum "$kit/solutions/01-collectives/collectives.c" | cut -c1-64)
echo "$alice" | awk -F, '$2 == "ok" && $3 == $4 && $3 > 0 && $5 == $6 && $5 > 0' | grep -q . ||
    fail "the solution's row is not full marks: $alice"
echo "$alice" | grep -q "collectives.c=$sum" || fail "no sha256 of the graded file: $alice"
row bob | awk -F, '$3 == 0 && $5 == 0' | grep -q . || fail "the forgery scored: $(row bob)"
row bob | grep -q "constructor" || fail "the static check did not flag the constructor: $(row bob)"
row carol | grep -q "^carol,missing-file,0,0,0,0," || fail "the misnamed file: $(row carol)"
row dave | awk -F, '$3 == 0 && $5 == 0' | grep -q . || fail "the timer: $(row dave)"
row dave | grep -q "signal" || fail "the static check did not flag the timer: $(row dave)"
if REGRADE_ROOT=$root sh grader/regrade.sh "$tmp/none" "$tmp/x.csv" >/dev/null 2>&1; then
    fail "a missing SUBMISSIONS folder was accepted"
fi
[ ! -e "$tmp/x.csv" ] || fail "a refused regrade wrote its CSV"

echo "all attacks score 0; honest submissions score as before; regrade writes one row per student"
