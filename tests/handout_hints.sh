#!/bin/sh
# handout_hints.sh BUILD_DIR: every lab's recipe lives in its own hints file, which a student
# opens on purpose. For each lab of `grade --labs`: docs/labs/NN-name-hints.md exists and
# links back to its handout; the handout says where it is (a link to it above section 1) and
# has no hints section of its own; no stub or header still points to a hints appendix.
set -eu
cd "$(dirname "$0")/.."
B=${1:?usage: sh tests/handout_hints.sh BUILD_DIR (e.g. build/cpu)}
[ -x "$B/bin/grade" ] || { echo "$B/bin/grade is not built; run make first" >&2; exit 2; }
bad=0
no() { echo "$*"; bad=1; }
labs=$("$B/bin/grade" --labs | cut -f1)
[ -n "$labs" ] || { echo "grade --labs listed no lab" >&2; exit 2; }
for dir in $labs; do
    h="docs/labs/$dir.md" hints="docs/labs/$dir-hints.md"
    [ -f "$hints" ] || { no "$hints is missing: the lab's hints live there"; continue; }
    grep -qF "]($dir.md)" "$hints" || no "$hints does not link back to its handout $dir.md"
    # The pointer: a link to the hints file before the handout's first numbered section.
    awk -v link="]($dir-hints.md)" '/^## 1\./ { exit } index($0, link) { found = 1 }
        END { exit !found }' "$h" || no "$h does not say above its section 1 where its hints are ($dir-hints.md)"
    if grep -qi '^## .*hint' "$h"; then
        no "$h still has a hints section: $(grep -i '^## .*hint' "$h" | head -n 1)"
    fi
done
if grep -rqi 'hints appendix' labs; then
    no "a stub or header still points to a hints appendix: $(grep -rli 'hints appendix' labs | tr '\n' ' ')"
fi
[ "$bad" = 0 ] || exit 1
echo "every lab's hints are in docs/labs/NN-name-hints.md, linked from its handout"
