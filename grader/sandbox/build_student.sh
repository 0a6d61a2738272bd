#!/bin/sh
# build_student.sh OUT LAB 'CFLAGS' 'LINK' SOURCE...: compiles a student's files for lab LAB
# in a scratch folder beside OUT that holds only them and the lab's public headers, with the
# include path limited to that folder, lib/ and datasets/, and links OUT. Before compiling,
# every file the sources include is checked against that allowlist (plus the system's own
# headers under /usr): a source that reaches anything else in the kit (a solution, the grader,
# a file by absolute or ../ path) is not compiled, and the rule it broke is said. CC is the
# compiler. Output is the build log; exit 1 when nothing was linked.
set -u
out=$1 lab=$2 cflags=$3 link=$4
shift 4
kit=$(pwd -P)
scratch="$(dirname "$out")/src"
rm -rf "$scratch"
mkdir -p "$scratch"
for h in labs/"$lab"/*.h; do
    [ -e "$h" ] && cp "$h" "$scratch/"
done
srcs=""
for s in "$@"; do
    cp "$s" "$scratch/"
    srcs="$srcs $scratch/$(basename "$s")"
done
scratch=$(cd "$scratch" && pwd -P)
flags="$cflags -I$scratch -I$kit/lib -I$kit/datasets"
# -MM lists every header outside the system's include folders, by the path it was found at.
# shellcheck disable=SC2086
deps=$(${CC:-cc} $flags -MM $srcs 2>&1) || {
    echo "$deps"
    exit 1
}
bad=$(echo "$deps" | tr ' \\' '\n\n' | grep -v ':$' | grep . | while read -r f; do
    case $(realpath -m "$f") in
        "$scratch"/* | "$kit"/lib/* | "$kit"/datasets/* | /usr/*) ;;
        *) echo "$f" ;;
    esac
done)
if [ -n "$bad" ]; then
    echo "$(echo "$@" | tr ' ' ',') not compiled: it includes files outside what a lab may include"
    echo "(its own folder's files, the lab's header, lib/ and datasets/ of the kit):"
    echo "$bad" | sed "s|^$scratch/||; s|^|  |"
    exit 1
fi
# shellcheck disable=SC2086
${CC:-cc} $flags -Wno-error $srcs $link -o "$out"
