# kit_rule.sh (sourced by handout.sh and gradescope/make_zip.sh): the one rule of what an
# artefact that leaves the instructor's repository may hold. The student kit and the
# Gradescope autograder (whose tree the code under test runs beside) are both staged by
# kit_stage; neither ever holds a solution, a solution-derived test or the instructor's notes.
KIT_PARTS="Makefile .gitignore lib datasets labs grader docs tests"
KIT_NEVER="solutions tests/broken tests/alt tests/labs tests/attacks tests/attacks.tests tests/grader.tests docs/instructor.md
docs/threats tests/review grader/gradescope .ci"

# What gives away an earlier lab's answer, held back from the student kit until the
# instructor releases it (`make handout CAPSTONE=1`, after Labs 4 and 5 are due): the kit's
# TP+SP block (lib/sp_block, Lab 5's block as a library call) and the lab that composes it.
# The Gradescope autograder keeps them: students never see its tree.
KIT_LATER="labs/09-4d grader/09-4d docs/labs/09-4d.md docs/labs/09-4d-hints.md lib/sp_block.c
lib/sp_block.h tests/test_sp_block.c tests/sp_block.tests tests/judge/09-4d.c"
# Their rows in the lab tables of README.md, docs/grader.md and docs/design.md (ERE); prose
# about them sits between the lines "<!-- capstone -->" and "<!-- /capstone -->".
KIT_LATER_LINES='^\| (9 \| `labs/09-4d`|9 \| 4D capstone|09-4d \|)' 

# kit_hold_back DEST: removes KIT_LATER from a staged kit, their table rows and capstone blocks.
kit_hold_back() {
    for d in $KIT_LATER; do
        rm -rf "${1:?}/$d"
    done
    for f in README.md docs/grader.md docs/design.md; do
        [ -f "$1/$f" ] || continue
        grep -v -E "$KIT_LATER_LINES" "$1/$f" |
            sed -e '/^<!-- capstone -->$/,/^<!-- \/capstone -->$/d' >"$1/$f.tmp"
        mv "$1/$f.tmp" "$1/$f"
    done
}

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
