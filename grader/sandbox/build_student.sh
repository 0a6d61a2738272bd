#!/bin/sh
# build_student.sh OUT LAB 'CFLAGS' 'LINK' SOURCE...: compiles a student's files for lab LAB
# in a scratch folder beside OUT that holds only them and the lab's public headers, with the
# include path limited to that folder, lib/ and datasets/, and links OUT. Before compiling,
# every file the sources include is checked against that allowlist (plus the system's own
# headers under /usr): a source that reaches anything else in the kit (a solution, the grader,
# a file by absolute or ../ path) is not compiled, and the rule it broke is said. No code of
# the sources may run before main or after it (constructors, destructors, ifunc resolvers):
# a lab's code runs only when the grader calls it, after the report channel is set up. After
# linking, no global symbol the sources define may also be defined by a library the driver
# links (the C library, MPI, OpenBLAS, the kit's lib/): the definition would replace the
# library's for every caller, the grader's own report included (an fprintf that turns every
# verdict into a pass), so such a driver is removed and the symbols are named. CC is the
# compiler. The sources' undefined symbols go to symbols.txt beside OUT. Output is the build
# log; exit 1 when nothing was linked.
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
# Its diagnostics stay out of the list (clang through mpicc warns that -lmpi goes unused with
# -MM), and the student's code may warn here as when it is compiled below.
# shellcheck disable=SC2086
deps=$(${CC:-cc} $flags -Wno-error -MM $srcs 2>"$scratch.deps.err") || {
    cat "$scratch.deps.err"
    rm -f "$scratch.deps.err"
    exit 1
}
rm -f "$scratch.deps.err"
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
objs=""
for s in $srcs; do
    # shellcheck disable=SC2086
    ${CC:-cc} $flags -Wno-error -c "$s" -o "${s%.c}.o" || exit 1
    objs="$objs ${s%.c}.o"
done
# What the sources call, for the lab's symbol rules (grader/rules/symbols.h), beside OUT.
# shellcheck disable=SC2086
nm -u -P $objs | awk 'NF > 1 { print $1 }' | sort -u >"$(dirname "$out")/symbols.txt"
# (AddressSanitizer's own module constructors are the one exception: make grade ASAN=1 is a
# debugging aid on the student's machine, never how a grade is given.)
case " $cflags " in *" -fsanitize="*) sanitized=1 ;; *) sanitized=0 ;; esac
early=$([ "$sanitized" = 1 ] || for o in $objs; do
    readelf -S -W "$o" | awk '{ for (i = 1; i <= NF; i++)
        if ($i ~ /^\.(init_array|fini_array|preinit_array|ctors|dtors|init|fini)(\.|$)/) print $i }'
done | sort -u)
# shellcheck disable=SC2086
early="$early $(nm -P $objs | awk '$2 == "i" { print "ifunc " $1 }')"
if [ -n "$(echo $early)" ]; then
    echo "$(echo "$@" | tr ' ' ',') not linked: it has code that runs before main or after it"
    echo "($(echo $early | sed 's/ /, /g'): a constructor, a destructor or an ifunc). A lab's code"
    echo "runs only when the grader calls it: move that code into the lab's functions."
    exit 1
fi
# shellcheck disable=SC2086
${CC:-cc} $flags $objs $link -o "$out" || exit 1

# What the sources define against what the linked libraries define (dynamic symbols of the
# shared ones ldd finds, globals of the archives on the link line; versions stripped).
# shellcheck disable=SC2086
nm -g --defined-only -P $objs | awk 'NF > 1 { print $1 }' | sort -u >"$scratch/defined"
{
    ldd "$out" | awk '$3 ~ /^\// { print $3 }' | while read -r so; do
        nm -D --defined-only -P "$so" 2>/dev/null
    done
    for a in $link; do
        case $a in *.a) nm -g --defined-only -P "$a" 2>/dev/null ;; esac
    done
} | awk 'NF > 1 { sub(/@.*/, "", $1); print $1 }' | sort -u >"$scratch/libraries"
clash=$(comm -12 "$scratch/defined" "$scratch/libraries")
if [ -n "$clash" ]; then
    rm -f "$out"
    echo "$(echo "$@" | tr ' ' ',') not linked: it defines $(echo $clash | sed 's/ /, /g'),"
    echo "which a library the grader links already defines (the C library, MPI, OpenBLAS or"
    echo "the kit's lib/). Your definition would replace the library's for every caller, the"
    echo "grader's own included. Rename it, or make it static."
    exit 1
fi
