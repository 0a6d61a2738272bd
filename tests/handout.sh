#!/bin/sh
# handout.sh BUILD_DIR: the student kit end to end. Builds it with `make handout`, unpacks
# it in a temporary folder and checks that: every handout's hints file is in it; no solution
# text, no tests/broken, lab checks, docs/instructor.md, Gradescope packaging, .ci/ or
# instructor block, nor what is held back until the capstone's release, is in it; `make` builds
# there and the kit's test harness runs; `make grade` scores 0 with "still a stub" on every
# lab; and, once the solution files are copied into labs/, its grader gives full marks.
# NP (default 2) keeps the grading short; PL_KIT_FRESH=1 compiles the kit from nothing.
set -eu
np=${NP:-2}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() { echo "handout: $*"; exit 1; }

make -s handout >"$d/handout.log" 2>&1 || { cat "$d/handout.log"; fail "make handout failed"; }
tar -C "$d" -xzf build/handout/paralab-kit.tar.gz
k="$d/paralab-kit"
for p in solutions tests/broken tests/labs tests/grader.tests docs/instructor.md docs/threats tests/review \
    grader/gradescope .ci build; do
    [ ! -e "$k/$p" ] || fail "$p is in the kit"
done
# What kit_rule.sh holds back until the capstone is released (make handout CAPSTONE=1).
. grader/kit_rule.sh
for p in $KIT_LATER; do
    [ ! -e "$k/$p" ] || fail "$p is in the kit, which holds it back until CAPSTONE=1"
done
! grep -qs -E "$KIT_LATER_LINES" "$k/README.md" "$k/docs/grader.md" "$k/docs/design.md" ||
    fail "a lab table of the kit has a row of a held-back lab"
! grep -rqs -e '<!-- instructor -->' -e '<!-- kit' -e '<!-- capstone' "$k/README.md" "$k/docs/grader.md" "$k/docs/design.md" ||
    fail "an instructor or kit marker was left in the kit's README.md, docs/grader.md or docs/design.md"
! grep -qsF -e 'sbh(34 + 5as/h)' -e '(4+K)' "$k/docs/design.md" ||
    fail "the kit's docs/design.md writes out the reference formulas the labs ask students to derive"
# No line that only a solution has (longer than 30 characters, and found nowhere else in
# lib/, datasets/, labs/, grader/ or tests/, so that common calls do not count) is in the kit.
for s in solutions/*/*.c; do
    awk 'length($0) > 30' "$s" | sort -u >"$d/long.txt"
    grep -rhxF -f "$d/long.txt" lib datasets labs grader tests | sort -u >"$d/shared.txt" || true
    comm -23 "$d/long.txt" "$d/shared.txt" >"$d/own.txt"
    [ -s "$d/own.txt" ] || fail "$s has no line of its own to look for"
    if grep -rqxF -f "$d/own.txt" "$k"; then fail "text of $s is in the kit"; fi
done
# The hints the handouts point to ship beside them.
for h in docs/labs/*-hints.md; do
    case " $(echo $KIT_LATER) " in *" $h "*) continue ;; esac
    [ -f "$k/$h" ] || fail "$h is not in the kit (the handout $(basename "$h" -hints.md).md points to it)"
done
echo "kit contents: no solutions, no instructor material"

# The build's compiled objects, when the kit's sources are its own (tests/reuse_objects.sh).
sh tests/reuse_objects.sh "${1:-build/cpu}" "$k" >"$d/reuse.log"
make -C "$k" -s -j"$(nproc)" build-only >"$d/make.log" 2>&1 ||
    { tail -n 30 "$d/make.log"; fail "the kit does not build"; }
(cd "$k" && ./build/cpu/tests/harness --build build/cpu -j 4 tests/core.tests) >"$d/test.log" 2>&1 ||
    { tail -n 20 "$d/test.log"; fail "make test's harness does not run in the kit"; }
echo "kit builds; its test harness runs"

labs=$(cd "$k" && ./build/cpu/bin/grade --labs | cut -f1)
(cd "$k" && ./build/cpu/bin/grade --np "$np") >"$d/stubs.log" 2>&1 && fail "stubs passed"
grep -q '^Score: 0/' "$d/stubs.log" || { tail -n 20 "$d/stubs.log"; fail "stubs did not score 0"; }
for lab in $labs; do
    grep -q "^== $lab: .*FAIL" "$d/stubs.log" || fail "$lab has no failed test"
    grep -A3 "^== $lab: " "$d/stubs.log" | grep -q 'still a stub' ||
        fail "$lab does not say 'still a stub'"
done
echo "stubs: $(tail -n 2 "$d/stubs.log" | tr '\n' ' ')"

for s in solutions/*/*.c solutions/*/questions.txt; do
    lab=$(basename "$(dirname "$s")")
    [ ! -d "$k/labs/$lab" ] || cp "$s" "$k/labs/$lab/"
done
make -C "$k" -s -j"$(nproc)" build-only >"$d/make2.log" 2>&1 ||
    { tail -n 30 "$d/make2.log"; fail "the kit with the solutions does not build"; }
# Full marks, as `make grade` there gives them, less the wall-clock speed tests (--no-speed):
# their ratios say nothing on a busy machine, and each lab's own "solutions score full marks"
# test runs them on this build.
"$k/build/cpu/tests/test_grader" --expect-full --speed-may-vary -- --np "$np" --no-speed \
    >"$d/full.log" 2>&1 || { grep -A4 -e FAIL "$d/full.log" | head -n 30
    fail "the solutions copied into labs/ lost points"; }
echo "solutions copied into labs/: $(grep -e '^Score: ' -e ' passed, ' "$d/full.log" | tr '\n' ' ')"
