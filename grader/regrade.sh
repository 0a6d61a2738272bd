#!/bin/sh
# regrade.sh SUBMISSIONS CSV: grades a folder of submissions, one subfolder per student, with
# the same sandbox and the same flow as Gradescope (the autograder zip unpacked in a scratch
# root, setup.sh run once, then run_autograder per student), and writes CSV: one row per
# student with the visible and hidden score, the subtotal of every tag, the build status,
# the wall time, the sha256 of each graded file and the flags of a static check of the
# student's sources (constructors, fork/setsid/exec, /proc or environment probing, inline
# assembly, signal handlers and timers, descriptor tricks, addresses held as integers,
# includes outside what a lab may include). Flags are for a human to look at: they
# change no score. LAB limits the labs, SEED sets the hidden suite's seed (default: random,
# printed), TEST limits the tests as make grade TEST= does, BUDGET the seconds per student.
# The CSV is written whole at the end (renamed into place), never half.
set -u
usage="usage: make regrade SUBMISSIONS=dir/ CSV=grades.csv [LAB=NN] [SEED=N] [TEST=text] [BUDGET=s]"
subs=${1:-}
csv=${2:-}
if [ -z "$subs" ] || [ -z "$csv" ]; then
    echo "$usage" >&2
    exit 2
fi
if [ ! -d "$subs" ]; then
    echo "regrade: SUBMISSIONS=$subs is not a folder; it must hold one subfolder per student" >&2
    exit 2
fi
students=$(cd "$subs" && find . -mindepth 1 -maxdepth 1 -type d | sed 's|^\./||' | LC_ALL=C sort)
if [ -z "$students" ]; then
    echo "regrade: $subs holds no subfolder; put each student's files in $subs/STUDENT/" >&2
    exit 2
fi
csvdir=$(dirname "$csv")
if [ ! -d "$csvdir" ] || [ ! -w "$csvdir" ]; then
    echo "regrade: cannot write CSV=$csv: $csvdir is not a writable folder" >&2
    exit 2
fi
for tool in unzip sha256sum awk; do
    if ! command -v $tool >/dev/null 2>&1; then
        echo "regrade: needs $tool (apt-get install $( [ $tool = sha256sum ] && echo coreutils || echo $tool))" >&2
        exit 2
    fi
done
subs=$(cd "$subs" && pwd -P)

tmp=$(mktemp -d /tmp/pl-regrade-XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
chmod 755 "$tmp"
# REGRADE_ROOT: an autograder root already unpacked and set up (the kit's own test reuses
# the one its Gradescope replay built); otherwise one is built here.
if [ -n "${REGRADE_ROOT:-}" ]; then
    root=$REGRADE_ROOT
    seed=$(cat "$root/source/seed" 2>/dev/null || echo "as set up")
else
    root=$tmp/autograder
    mkdir -p "$root/source"
    seed=${SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
    SEED=$seed sh grader/gradescope/make_zip.sh "$tmp/zip" >/dev/null || exit 1
    unzip -q "$tmp/zip/autograder-${LAB:-all}.zip" -d "$root/source" || exit 1
    cp "$root/source/run_autograder" "$root/run_autograder"
    echo "regrade: building the autograder once"
    if ! PL_AUTOGRADER="$root" PL_SETUP_NO_APT=1 sh "$root/source/setup.sh" >"$tmp/setup.log" 2>&1; then
        tail -n 20 "$tmp/setup.log"
        echo "regrade: the autograder did not build; nothing graded" >&2
        exit 1
    fi
fi
export PL_AUTOGRADER="$root" PL_SANDBOX_EXCLUSIVE="${PL_SANDBOX_EXCLUSIVE:-0}"
export PL_AUTOGRADER_TEST="${TEST:-}" PL_GRADE_BUDGET="${BUDGET:-480}"
echo "regrade: hidden-suite seed $seed${LAB:+, lab $LAB}, ${TEST:+tests matching '$TEST', }budget ${PL_GRADE_BUDGET} s per student"

# flags FILE...: the static check's findings, ';'-separated (empty when none).
flags() {
    cat "$@" | awk '
        /__attribute__[ \t]*\(\([ \t]*(constructor|destructor)/ { f["constructor"] = 1 }
        /\.init_array|\.fini_array/                             { f["constructor"] = 1 }
        /(^|[^a-z_])(fork|vfork|setsid|daemon|clone|execv|execl|execvp|system|popen)[ \t]*\(/ { f["process"] = 1 }
        /"\/proc|\/proc\//                                      { f["proc"] = 1 }
        /(^|[^a-z_])(getenv|secure_getenv|environ)([^a-z_]|$)/  { f["environment"] = 1 }
        /(^|[^a-z_])(asm|__asm__)[ \t(]/                        { f["asm"] = 1 }
        /(^|[^a-z_])(signal|sigaction|setitimer|alarm|ualarm|timer_create)[ \t]*\(/ { f["signal"] = 1 }
        /_fileno|(^|[^a-z_])(fileno|fdopen|dup|dup2|dup3)[ \t]*\(/ { f["descriptor"] = 1 }
        /(^|[^a-z_])u?intptr_t([^a-z_]|$)/                      { f["address"] = 1 }
        /^[ \t]*#[ \t]*include[ \t]*"[^"]*(\/|\.\.)[^"]*"/      { f["include-path"] = 1 }
        /^[ \t]*#[ \t]*include[ \t]*"[^"]*\.c"/                 { f["include-source"] = 1 }
        END { s = ""; for (k in f) s = s (s == "" ? "" : ";") k; print s }'
}

rows=$tmp/rows
: >"$rows"
nl='
'
IFS=$nl
for student in $students; do
    IFS=' 	'"$nl"
    rm -rf "$root/submission" "$root/results"
    mkdir -p "$root/submission"
    cp -R "$subs/$student/." "$root/submission/"
    t0=$(date +%s)
    sh "$root/run_autograder" >"$tmp/out" 2>&1 </dev/null
    took=$(($(date +%s) - t0))
    res=$root/results/results.json
    graded=$(sed -n 's/^graded file: \([^ ]*\) (from \(.*\))$/\2/p' "$tmp/out")
    sums="" srcs=""
    for g in $graded; do
        sums="$sums${sums:+;}$g=$(sha256sum "$root/submission/$g" | cut -c1-64)"
        case $g in *.c) srcs="$srcs $root/submission/$g" ;; esac
    done
    # shellcheck disable=SC2086
    found=$( [ -n "$srcs" ] && flags $srcs)
    if grep -q "no .* found in the submission" "$tmp/out"; then build=missing-file
    elif [ -z "$graded" ]; then build=no-lab-file
    elif grep -q "the lab did not compile" "$res" 2>/dev/null; then build=failed
    elif [ ! -s "$res" ]; then build=no-results
    else build=ok
    fi
    # grade.c writes each test as one line with its score and one with its tags.
    [ -s "$res" ] || res=/dev/null
    awk -v student="$student" -v build="$build" -v took="$took" -v sums="$sums" -v flags="$found" '
        /"score":/ && /"max_score":/ {
            s = $0; sub(/.*"score": /, "", s); sub(/,.*/, "", s)
            m = $0; sub(/.*"max_score": /, "", m); sub(/,.*/, "", m)
        }
        /"tags": \[/ {
            t = $0; sub(/.*"tags": \["/, "", t); sub(/".*/, "", t)
            h = ($0 ~ /"hidden"\]/)
            if (h) { hs += s; hm += m } else { vs += s; vm += m }
            tag[t] += s
        }
        END {
            printf "%s\t%s\t%g\t%g\t%g\t%g\t%s\t%s\t%s", student, build, vs, vm, hs, hm, took, sums, flags
            for (k in tag) printf "\t%s=%g", k, tag[k]
            printf "\n"
        }' "$res" >>"$rows"
    echo "regrade: $student: $(tail -n 1 "$rows" | cut -f2-6 | awk -F'\t' '{ printf "%s, visible %g/%g, hidden %g/%g", $1, $2, $3, $4, $5 }') (${took} s)${found:+, flags: $found}"
done

# One column per tag seen in any row, in a fixed order, so every row has the same columns.
tags=$(cut -f10- "$rows" | tr '\t' '\n' | sed -n 's/=.*//p' | LC_ALL=C sort -u | tr '\n' ' ')
awk -F'\t' -v tags="$tags" '
    function q(s) { gsub(/"/, "\"\"", s); return (s ~ /[",;\n]/) ? "\"" s "\"" : s }
    BEGIN {
        n = split(tags, tag, " ")
        printf "student,build,visible_score,visible_max,hidden_score,hidden_max,wall_s,sha256,flags"
        for (i = 1; i <= n; i++) printf ",%s", tag[i]
        printf "\n"
    }
    {
        delete got
        for (i = 10; i <= NF; i++) { k = $i; sub(/=.*/, "", k); v = $i; sub(/^[^=]*=/, "", v); got[k] = v }
        printf "%s,%s,%s,%s,%s,%s,%s,%s,%s", q($1), $2, $3, $4, $5, $6, $7, q($8), q($9)
        for (i = 1; i <= n; i++) printf ",%s", (tag[i] in got) ? got[tag[i]] : 0
        printf "\n"
    }' "$rows" >"$csv.part" && mv "$csv.part" "$csv"
echo "regrade: wrote $csv ($(echo "$students" | wc -l) students)"
