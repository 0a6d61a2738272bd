#!/bin/sh
# handout_figures.sh BUILD_DIR LAB NP: the figures a handout quotes are the kit's. Runs the
# lab's benchmark (its driver's bench mode, on the solution) on NP ranks and checks that
# every line it prints as "# handout: TEXT" appears in docs/labs/NN-name.md (line breaks and
# runs of spaces count as one space), so a figure that changes in the code fails here until
# the handout says it.
set -eu
B=$1 lab=$2 np=$3
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$B/bin/grade" --labs --lab "$lab" | head -n 1 >"$d/lab"
dir=$(cut -f1 "$d/lab")
args=$(cut -f3 "$d/lab")
[ -n "$dir" ] || { echo "no lab $lab"; exit 1; }
# shellcheck disable=SC2086
OPENBLAS_NUM_THREADS=1 "$B/bin/launch" --timeout 300 -np "$np" -- \
    "$B/grader/solutions/$dir/driver" --mode bench --figures --label "the solution" $args \
    >"$d/out" 2>&1 ||
    { tail -n 20 "$d/out"; exit 1; }
tr '\n' ' ' <"docs/labs/$dir.md" | tr -s ' ' >"$d/text"
sed -n 's/^# handout: //p' "$d/out" | tr -s ' ' >"$d/figures"
[ -s "$d/figures" ] || { echo "the $dir benchmark printed no '# handout:' line"; exit 1; }
bad=0
while IFS= read -r fig; do
    grep -qF -- "$fig" "$d/text" || { echo "docs/labs/$dir.md does not say: $fig"; bad=1; }
done <"$d/figures"
[ "$bad" = 0 ] || exit 1
echo "docs/labs/$dir.md quotes the $(wc -l <"$d/figures") figures of its benchmark on $np ranks"
