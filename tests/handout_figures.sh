#!/bin/sh
# handout_figures.sh BUILD_DIR LAB NP: the figures a handout quotes are the kit's. Runs the
# lab's benchmark (its driver's bench mode, on the solution) on NP ranks and checks that
# every line it prints as "# handout: TEXT" appears in docs/labs/NN-name.md (line breaks and
# runs of spaces count as one space), so a figure that changes in the code fails here until
# the handout says it. A code block after a line "<!-- bench output -->" is checked line by
# line against the output the same way.
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
# A code block right after a line "<!-- bench output -->" quotes the benchmark's output:
# each of its lines must be one the benchmark printed (runs of spaces count as one).
awk '/^<!-- bench output -->$/ { want = 1; next }
    want && /^```/ { if (inside) want = inside = 0; else inside = 1; next }
    inside { print }' "docs/labs/$dir.md" | tr -s ' ' | sed 's/ *$//' >"$d/quoted"
tr -s ' ' <"$d/out" | sed 's/ *$//' >"$d/printed"
while IFS= read -r line; do
    grep -qxF -- "$line" "$d/printed" ||
        { echo "docs/labs/$dir.md quotes a line its benchmark did not print: $line"; bad=1; }
done <"$d/quoted"
[ "$bad" = 0 ] || exit 1
quoted=""
[ ! -s "$d/quoted" ] || quoted=" and $(wc -l <"$d/quoted") lines of its output"
echo "docs/labs/$dir.md quotes the $(wc -l <"$d/figures") figures of its benchmark$quoted on $np ranks"
