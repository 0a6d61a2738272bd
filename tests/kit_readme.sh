#!/bin/sh
# kit_readme.sh: the student kit's README names only what the kit holds. Packs the kit as
# `make handout` does (grader/handout.sh, no build), unpacks it, and checks that every path
# its README.md names under one of the repository's folders (docs/..., labs/..., solutions/...)
# is in the kit (build/ is what `make` makes there; labs/NN-name/... stands for every lab),
# and that the README says which folder the kit unpacks into; with Lab 9 held back (make
# handout) and released (CAPSTONE=1).
set -eu
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
for capstone in 0 1; do
    rm -rf "$d/paralab-kit"
    CAPSTONE=$capstone sh grader/handout.sh "$d" >"$d/log" 2>&1 || { cat "$d/log"; exit 1; }
    tar -C "$d" -xzf "$d/paralab-kit.tar.gz"
    k="$d/paralab-kit"
    grep -q 'paralab-kit/' "$k/README.md" || { echo "the kit's README does not say that it unpacks into paralab-kit/"; exit 1; }
    grep -oE '(^|[^A-Za-z0-9_./-])(datasets|docs|grader|labs|lib|tests|solutions|\.ci)/[A-Za-z0-9_./-]*' \
        "$k/README.md" | sed -E 's/^[^A-Za-z.]//; s/[.]$//' | grep -v 'NN-' | sort -u >"$d/named"
    [ -s "$d/named" ] || { echo "found no path in the kit's README"; exit 1; }
    bad=0
    while IFS= read -r p; do
        [ -e "$k/$p" ] || { echo "the kit's README names $p, which is not in the kit"; bad=1; }
    done <"$d/named"
    [ "$bad" = 0 ] || exit 1
    echo "CAPSTONE=$capstone: the kit's README names $(wc -l <"$d/named") paths, all in the kit, and says where it unpacks"
done
