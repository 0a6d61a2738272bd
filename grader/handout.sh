#!/bin/sh
# handout.sh OUTDIR: builds OUTDIR/paralab-kit.tar.gz, the student kit of a course: the
# library, datasets, docs, the stubs in labs/, the grader's source (every lab's driver builds
# without solutions/: oracles and speed bounds come from the kit itself), and the tests that
# need no solution. Left out: solutions/, tests/broken and the lab checks that grade the
# solutions (tests/labs, tests/grader.tests), docs/instructor.md, the Gradescope packaging,
# .ci/, and every block of README.md, docs/grader.md and docs/design.md (its reference
# formulas, which the labs ask students to derive) between the lines
# "<!-- instructor -->" and "<!-- /instructor -->". Lines "<!-- kit" and "kit -->" are
# dropped, so what they enclose (a comment in the repository) shows in the kit.
set -eu
out=${1:-build/handout}
name=paralab-kit
stage="$out/stage/$name"
rm -rf "$out/stage" "$out/$name.tar.gz"
mkdir -p "$stage"
# What the kit may hold is grader/kit_rule.sh's rule, shared with `make gradescope`.
. grader/kit_rule.sh
kit_stage "$stage"
# The kit's own text: instructor blocks out, kit-only blocks in.
strip() {
    sed -e '/^<!-- instructor -->$/,/^<!-- \/instructor -->$/d' -e '/^<!-- kit$/d' \
        -e '/^kit -->$/d' "$1" >"$2"
}
strip README.md "$stage/README.md"
strip docs/grader.md "$stage/docs/grader.md"
strip docs/design.md "$stage/docs/design.md"
# CAPSTONE=1: the parts held back until Labs 4 and 5 are due go in too (kit_rule.sh); the
# lines of their markers go either way.
if [ "${CAPSTONE:-0}" = 1 ]; then
    for f in README.md docs/grader.md docs/design.md; do
        sed -e '/^<!-- capstone -->$/d' -e '/^<!-- \/capstone -->$/d' "$stage/$f" >"$stage/$f.tmp"
        mv "$stage/$f.tmp" "$stage/$f"
    done
else
    kit_hold_back "$stage"
fi
tar -C "$out/stage" -czf "$out/$name.tar.gz" "$name"
rm -rf "$out/stage"
echo "wrote $out/$name.tar.gz: the student kit (no solutions/); it unpacks into $name/, where"
echo "students run make grade (handing it out: docs/instructor.md, in this repository only)"
