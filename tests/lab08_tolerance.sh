#!/bin/sh
# lab08_tolerance.sh BUILD_DIR: Lab 8's tolerances are derived, not picked. Each correct
# alternative of tests/alt/08-placement (and the solution) prints, with bench --tolerance, its
# worst deviation from the kit's figures per field over every configuration the memory and
# time tests can grade. A field that rests on a modelling choice (class "choice") must have as
# its tolerance (L8_TOL, grader/08-placement/judge.c) the smallest rung that the worst of them
# meets: a larger one lets wrong code through for nothing, a smaller one fails a defensible
# choice. Facts and the model state keep theirs, and every alternative must meet them. Each
# tolerance above the first rung is a figure the handout quotes, with the alternative that
# needs it: "FIELD within T%: the alternative NAME deviates up to D%".
set -eu
B=$1
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
: >"$d/all"
for drv in "$B/grader/solutions/08-placement/driver" "$B"/grader/alt/*/08-placement/driver; do
    [ -x "$drv" ] || { echo "no driver $drv (make variants builds them)"; exit 1; }
    name=$(basename "$(dirname "$(dirname "$drv")")")
    [ "$name" = solutions ] && name=solution
    "$drv" --mode bench --tolerance >"$d/out" 2>&1 || true
    grep -q '^tolerance-rungs' "$d/out" || { echo "$name: bench --tolerance failed"; tail -n 5 "$d/out"; exit 1; }
    awk -F '\t' -v n="$name" '$1 == "tolerance" { print n "\t" $0 }' "$d/out" >>"$d/all"
    rungs=$(sed -n 's/^tolerance-rungs\t//p' "$d/out")
done
tr -s ' ' <docs/labs/08-placement.md | tr '\n' ' ' | tr -s ' ' >"$d/text"
# all: NAME tolerance FIELD WORST TOL CLASS OK CASE
awk -F '\t' -v rungs="$rungs" -v text="$d/text" '
BEGIN { nr = split(rungs, r, "\t"); getline handout < text }
{
    f = $3; tol[f] = $5; cls[f] = $6
    if (!(f in order)) { order[f] = ++nf; names[nf] = f }
    if (!(f in worst) || $4 + 0 > worst[f] + 0) { worst[f] = $4; who[f] = $1; at[f] = $8 }
}
END {
    bad = 0
    for (k = 1; k <= nf; k++) {
        f = names[k]
        if (worst[f] + 0 > tol[f] + 0) {
            printf "%s: %s deviates %.4f%% at %s, over its tolerance %g%%\n", who[f], f,
                100 * worst[f], at[f], 100 * tol[f]; bad = 1
        }
        if (cls[f] != "choice") continue
        need = r[nr]
        for (i = nr; i >= 1; i--) if (worst[f] + 0 <= r[i] + 0) need = r[i]
        if (need + 0 != tol[f] + 0) {
            printf "%s: L8_TOL says %g%%, the alternatives need %g%% (worst %.4f%%, %s, at %s)\n",
                f, 100 * tol[f], 100 * need, 100 * worst[f], who[f], at[f]; bad = 1
        }
        line = sprintf("%s within %g%%", f, 100 * tol[f])
        if (tol[f] + 0 > r[1] + 0)
            line = sprintf("%s: the alternative %s deviates up to %.1f%%", line,
                           who[f], 100 * worst[f])
        printf "%-16s %8.4f%% %-26s tolerance %g%%\n", f, 100 * worst[f], who[f], 100 * tol[f]
        if (tol[f] + 0 > r[1] + 0 && index(handout, line) == 0) {
            printf "docs/labs/08-placement.md does not say: %s\n", line; bad = 1
        }
    }
    exit bad
}' "$d/all"
