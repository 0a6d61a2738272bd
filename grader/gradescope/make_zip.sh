#!/bin/sh
# make_zip.sh OUTDIR: builds OUTDIR/autograder-LAB.zip (autograder-all.zip without LAB) for
# Gradescope: setup.sh and run_autograder at the top, the kit beside them staged by the same
# rule as the student kit (grader/kit_rule.sh: no solutions/, no tests that grade them), less
# tests/ and build/. The secret seed of the hidden suite (SEED, default random) travels in
# the file `seed`, which setup.sh makes readable by root alone; it is also saved beside the
# zip (autograder-LAB.seed) for the instructor. LAB limits the assignment to one lab.
set -eu
out=${1:-build/gradescope}
seed=${SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
name=autograder-${LAB:-all}
stage="$out/stage-$name"
rm -rf "$stage" "$out/$name.zip"
mkdir -p "$stage"
. grader/kit_rule.sh
kit_stage "$stage"
rm -rf "$stage/tests" "$stage/build"
sed -e "s/@LAB@/${LAB:-}/" grader/gradescope/run_autograder >"$stage/run_autograder"
sed -e "s/@LAB@/${LAB:-}/" grader/gradescope/setup.sh >"$stage/setup.sh"
printf '%s\n' "$seed" >"$stage/seed"
chmod +x "$stage/run_autograder" "$stage/setup.sh"
if command -v zip >/dev/null 2>&1; then
    (cd "$stage" && zip -qr "../$name.zip" .)
elif command -v python3 >/dev/null 2>&1; then
    (cd "$stage" && python3 -m zipfile -c "../$name.zip" ./*)
else
    echo "make gradescope needs zip (apt-get install zip)" >&2
    exit 1
fi
rm -rf "$stage"
printf '%s\n' "$seed" >"$out/$name.seed"
chmod 600 "$out/$name.seed"
echo "wrote $out/$name.zip (hidden-suite seed in $out/$name.seed${LAB:+, lab $LAB}): upload it"
echo "as the assignment's autograder; students upload their labs/NN-name/*.c files"
