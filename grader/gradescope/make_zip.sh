#!/bin/sh
# make_zip.sh OUTDIR: builds OUTDIR/autograder.zip for Gradescope: setup.sh and
# run_autograder at the top, the kit beside them (without tests/ or build/). No driver needs
# solutions/; it goes along so that the bundle can be checked with `make grade SOLUTIONS=1`
# (an autograder's files are not shown to students).
# SEED (default: random) is the secret seed of the hidden suite; LAB limits the
# assignment to one lab.
set -eu
out=${1:-build/gradescope}
seed=${SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
stage="$out/stage"
rm -rf "$stage" "$out/autograder.zip"
mkdir -p "$stage"
for d in Makefile lib datasets grader labs solutions docs; do
    [ -e "$d" ] && cp -R "$d" "$stage/"
done
lab_arg=""
[ -n "${LAB:-}" ] && lab_arg="LAB=$LAB"
sed -e "s/@SEED@/$seed/" -e "s/@LAB@/$lab_arg/" grader/gradescope/run_autograder \
    >"$stage/run_autograder"
cp grader/gradescope/setup.sh "$stage/setup.sh"
chmod +x "$stage/run_autograder" "$stage/setup.sh"
if command -v zip >/dev/null 2>&1; then
    (cd "$stage" && zip -qr ../autograder.zip .)
elif command -v python3 >/dev/null 2>&1; then
    (cd "$stage" && python3 -m zipfile -c ../autograder.zip ./*)
else
    echo "make gradescope needs zip (apt-get install zip)" >&2
    exit 1
fi
rm -rf "$stage"
echo "wrote $out/autograder.zip (hidden-suite seed $seed${LAB:+, lab $LAB}): upload it as the"
echo "assignment's autograder; students upload their labs/NN-name/*.c files"
