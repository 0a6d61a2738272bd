#!/bin/sh
# review.sh BUILD_DIR [LAB]: `make test-review`. Grades every submission in tests/review/
# (LAB: one lab's, named as `make grade` names labs). Each is a student file written by a
# reviewer who had read the handout, header and solution but not the grader, kept as a patch
# on the lab's solution (NAME.patch); its first line says what a trustworthy grader does
# with it:
#     /* caught[ERE] | why it is wrong */   some test whose name matches ERE fails
#     /* pass | why it is right */          every test passes
# Tests timed on the wall clock (busbw, step time or throughput against the kit's parts) are
# left out of the verdict, both ways: this machine's noise decides them, not the code.
# One line per submission: CAUGHT, CAUGHT-ELSEWHERE (it fails, but not the test named),
# MISSED, OK, FALSE-FAIL or NO-BUILD (it did not compile or link: it proves nothing);
# exit 1 when any is MISSED, FALSE-FAIL or NO-BUILD. Logs in
# BUILD_DIR/review/. The drivers are built by `make review-build` (make test-review does).
set -u
B=${1:?usage: review.sh BUILD_DIR [LAB]}
sel=${2:-}
wall='busbw vs|step time vs compute|throughput vs compute|time vs the kit.s block'
dirs=$("$B/bin/grade" --labs ${sel:+--lab "$sel"} | cut -f1) || exit 2
mkdir -p "$B/review"
bad=0 n=0
for d in $dirs; do
    for f in tests/review/"$d"/*.patch; do
        [ -f "$f" ] || continue
        name=$(basename "$f" .patch)
        head=$(head -n 1 "$f")
        case "$head" in
        "/* caught["*) want=caught
            ere=$(printf '%s\n' "$head" | sed -e 's/^\/\* caught\[//' -e 's/\] |.*$//') ;;
        "/* pass "*) want=pass ere= ;;
        *) echo "$f: the first line must be /* caught[ERE] | why */ or /* pass | why */" >&2
            exit 2 ;;
        esac
        log="$B/review/$d-$name.log"
        "$B/bin/grade" --build "$B" --drivers "$B/grader/review/$name" --lab "$d" >"$log" 2>&1
        failed=$(sed -n 's/^== [^:]*: \(.*\) == FAIL.*$/\1/p' "$log" | grep -Ev "$wall")
        score=$(sed -n 's/^Score: //p' "$log" | tail -n 1)
        n=$((n + 1))
        if grep -q "the lab did not compile" "$log"; then
            # a submission that does not build proves nothing about the grader
            verdict=NO-BUILD bad=$((bad + 1))
        elif [ "$want" = pass ]; then
            if [ -z "$failed" ] && [ -n "$score" ]; then verdict=OK; else verdict=FALSE-FAIL bad=$((bad + 1)); fi
        elif [ -z "$failed" ]; then
            verdict=MISSED bad=$((bad + 1))
        elif printf '%s\n' "$failed" | grep -Eq -- "$ere"; then
            verdict=CAUGHT
        else
            verdict=CAUGHT-ELSEWHERE
        fi
        printf '%-9s %-18s %-44s %s\n' "$d" "$verdict" "$name" "${score:-no score} $(printf '%s\n' "$failed" | head -n 1)"
    done
done
echo "$n submissions graded, $bad missed or failed wrongly (logs in $B/review/)"
[ "$bad" -eq 0 ]
