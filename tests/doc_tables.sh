#!/bin/sh
# doc_tables.sh --write|--check BUILD_DIR: the lab tables of README.md, docs/instructor.md and
# docs/grader.md are generated, never edited by hand. The labs and their order come from
# `grade --labs`; each row's cells from its handout, docs/labs/NN-name.md, whose lines
#     <!-- table KEY: TEXT -->
# give implement (README), prerequisite and learn (instructor.md), graded, baseline and hidden
# (grader.md). Each table sits between the lines
#     <!-- lab table: ... -->   and   <!-- /lab table -->
# A handout's total (between "<!-- lab points -->" and "<!-- /lab points -->") is written
# from `grade --list` the same way, below.
# --write rewrites the tables in place (make docs-tables); --check exits 1 naming each file
# whose table is out of date, 2 on bad input. A document this copy lacks (the student kit has
# no docs/instructor.md) is passed over.
set -eu
cd "$(dirname "$0")/.."
die() {
    echo "doc_tables.sh: $*" >&2
    exit 2
}
usage() { die "usage: sh tests/doc_tables.sh --write|--check BUILD_DIR (e.g. build/cpu)"; }
[ $# -eq 2 ] || usage
mode=$1 B=$2
case $mode in --write|--check) ;; *) usage ;; esac
[ -x "$B/bin/grade" ] || die "$B/bin/grade is not built; run make first"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$B/bin/grade" --labs >"$d/labs" || die "$B/bin/grade --labs failed"
[ -s "$d/labs" ] || die "$B/bin/grade --labs listed no lab"

# cell DIR KEY: the handout's "table KEY" line (checked present first: an exit inside $(...)
# would not stop the script).
cell() {
    sed -n "s/^<!-- table $2: \(.*\) -->\$/\1/p" "docs/labs/$1.md" | head -n 1
}
while IFS="$(printf '\t')" read -r dir _; do
    for key in implement prerequisite learn graded baseline hidden; do
        if [ ! -f "docs/labs/$dir.md" ] || [ -z "$(cell "$dir" $key)" ]; then
            die "docs/labs/$dir.md has no line '<!-- table $key: ... -->'" \
                "(each lab's handout gives the cells of its row in the lab tables)"
        fi
    done
done <"$d/labs"

{
    echo "| # | folder | you implement | handout |"
    echo "|---|---|---|---|"
} >"$d/README.md"
{
    echo "| lab | prerequisite | what students learn |"
    echo "|---|---|---|"
} >"$d/docs_instructor.md"
{
    echo "| lab | visible tests (100 points) | performance baseline | hidden suite |"
    echo "|-----|----------------------------|----------------------|--------------|"
} >"$d/docs_grader.md"
while IFS="$(printf '\t')" read -r dir _; do
    n=${dir%%-*}
    n=${n#0}
    printf '| %s | `labs/%s` | %s | [docs/labs/%s.md](docs/labs/%s.md) |\n' "$n" "$dir" \
        "$(cell "$dir" implement)" "$dir" "$dir" >>"$d/README.md"
    printf '| %s | %s | %s |\n' "$dir" "$(cell "$dir" prerequisite)" "$(cell "$dir" learn)" \
        >>"$d/docs_instructor.md"
    printf '| %s | %s | %s | %s |\n' "$dir" "$(cell "$dir" graded)" "$(cell "$dir" baseline)" \
        "$(cell "$dir" hidden)" >>"$d/docs_grader.md"
done <"$d/labs"

stale=0
checked=""
for doc in README.md docs/instructor.md docs/grader.md; do
    # The student kit (make handout) leaves docs/instructor.md out.
    [ -f "$doc" ] || continue
    checked="$checked $doc"
    table="$d/$(echo "$doc" | tr / _)"
    if ! grep -q '^<!-- lab table' "$doc" || ! grep -q '^<!-- /lab table -->' "$doc"; then
        die "$doc has no '<!-- lab table: ... -->' ... '<!-- /lab table -->' markers"
    fi
    awk -v table="$table" '
        /^<!-- lab table/ { print; while ((getline line < table) > 0) print line; skip = 1; next }
        /^<!-- \/lab table -->/ { skip = 0 }
        !skip { print }' "$doc" >"$d/new"
    if ! cmp -s "$doc" "$d/new"; then
        if [ "$mode" = --write ]; then
            cat "$d/new" >"$doc"
            echo "rewrote the lab table of $doc"
        else
            echo "$doc: the lab table is out of date (run make docs-tables):"
            diff "$doc" "$d/new" | sed 's/^/    /' | head -n 20
            stale=1
        fi
    fi
done

# A handout may state its lab's total between the lines "<!-- lab points -->" and
# "<!-- /lab points -->": the sentence there is written from `grade --list`, the points the
# grader gives (questions apart), so the handout's total cannot drift from the grader's.
points_line() {
    "$B/bin/grade" --lab "$1" --list </dev/null >"$d/list" || die "$B/bin/grade --lab $1 --list failed"
    sed -n 's/.*(\([0-9.]*\) points\{0,1\}, \([a-z]*\))$/\1 \2/p' "$d/list" | awk '
        { all += $1; if ($2 == "questions") q += $1 }
        END {
            if (all <= 0) exit 1
            if (q > 0)
                printf "**%g points** in all, as `make grade` counts them: %g for the tests above " \
                    "and %g for the questions answered with a number (the answers in words are " \
                    "read by a person).\n", all, all - q, q
            else printf "**%g points** in all, as `make grade` counts them.\n", all
        }' || die "$B/bin/grade --lab $1 --list gave no points"
}
handouts=""
while IFS="$(printf '\t')" read -r dir _; do
    h="docs/labs/$dir.md"
    grep -q '^<!-- lab points -->$' "$h" || continue
    grep -q '^<!-- /lab points -->$' "$h" ||
        die "$h has '<!-- lab points -->' but no '<!-- /lab points -->' after it"
    handouts="$handouts $h"
    points_line "${dir%%-*}" >"$d/points"
    awk -v points="$d/points" '
        /^<!-- lab points -->$/ { print; while ((getline line < points) > 0) print line; skip = 1; next }
        /^<!-- \/lab points -->$/ { skip = 0 }
        !skip { print }' "$h" >"$d/new"
    if ! cmp -s "$h" "$d/new"; then
        if [ "$mode" = --write ]; then
            cat "$d/new" >"$h"
            echo "rewrote the points of $h"
        else
            echo "$h: its total is not the grader's (run make docs-tables):"
            diff "$h" "$d/new" | sed 's/^/    /' | head -n 20
            stale=1
        fi
    fi
done <"$d/labs"
# docs/grader.md's size table, between "<!-- size table -->" and "<!-- /size table -->": each
# lab's grader against its solution, counted with wc -l over grader/NN-name/*.[ch] and
# solutions/NN-name/*.[ch], so the figures the grader's design is held to cannot drift. A
# copy without solutions/ (the student kit, whose docs/grader.md has no such section) has
# nothing to count.
sized=""
if [ -d solutions ] && grep -q '^<!-- size table' docs/grader.md; then
    grep -q '^<!-- /size table -->$' docs/grader.md ||
        die "docs/grader.md has '<!-- size table' but no '<!-- /size table -->' after it"
    {
        echo "| lab | grader lines | solution lines | grader / solution |"
        echo "|-----|-------------:|---------------:|------------------:|"
        while IFS="$(printf '\t')" read -r dir _; do
            g=$(cat grader/"$dir"/*.[ch] | wc -l)
            s=$(cat solutions/"$dir"/*.[ch] 2>/dev/null | wc -l)
            [ "$s" -gt 0 ] || continue
            awk -v d="$dir" -v g="$g" -v s="$s" 'BEGIN { printf "| %s | %d | %d | %.1fx |\n", d, g, s, g / s }'
        done <"$d/labs"
    } >"$d/size"
    awk -v size="$d/size" '
        /^<!-- size table/ { print; while ((getline line < size) > 0) print line; skip = 1; next }
        /^<!-- \/size table -->$/ { skip = 0 }
        !skip { print }' docs/grader.md >"$d/new"
    if ! cmp -s docs/grader.md "$d/new"; then
        if [ "$mode" = --write ]; then
            cat "$d/new" >docs/grader.md
            echo "rewrote the size table of docs/grader.md"
        else
            echo "docs/grader.md: the size table is out of date (run make docs-tables):"
            diff docs/grader.md "$d/new" | sed 's/^/    /' | head -n 20
            stale=1
        fi
    fi
    sized=" and the size table of docs/grader.md"
fi
[ "$stale" = 0 ] || exit 1
echo "the lab tables of$checked$sized are up to date with grade --labs"
[ -z "$handouts" ] || echo "the totals of$handouts are the grader's"
