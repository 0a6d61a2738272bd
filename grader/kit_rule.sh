# kit_rule.sh (sourced by handout.sh and gradescope/make_zip.sh): the one rule of what an
# artefact that leaves the instructor's repository may hold. The student kit and the
# Gradescope autograder (whose tree the code under test runs beside) are both staged by
# kit_stage; neither ever holds a solution, a solution-derived test or the instructor's notes.
KIT_PARTS="Makefile .gitignore lib datasets labs grader docs tests"
KIT_NEVER="solutions tests/broken tests/alt tests/labs tests/attacks tests/attacks.tests tests/grader.tests docs/instructor.md
docs/threats tests/review grader/gradescope .ci"

# kit_stage DEST: copies the kit's parts into DEST, then removes what may never leave.
kit_stage() {
    for d in $KIT_PARTS; do
        [ -e "$d" ] && cp -R "$d" "$1/"
    done
    for d in $KIT_NEVER; do
        rm -rf "${1:?}/$d"
    done
    if [ -n "$(find "$1" -path "*/solutions/*" -o -path "*/broken/*.patch" -o -path "*/review/*.patch" | head -n 1)" ]; then
        echo "kit_rule: a solution file reached $1; not packaged" >&2
        exit 1
    fi
}
