#!/bin/sh
# nccl_find.sh: the GPU build's NCCL search (lib/nccl_find.sh) on fake trees in a temporary
# folder: NCCL_HOME first, then the CUDA prefix, the system, a Python NCCL wheel (nvidia/nccl
# in the site folders a Python reports); an NCCL older than 2.18 passed over; the messages
# when NCCL_HOME is wrong and when there is none. Then the Makefile: its link line for
# GPU=1 names the library and rpath the search chose. Needs no GPU and no CUDA toolkit.
set -u
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# tree DIR VERSION LIBDIR: an NCCL install: DIR/include/nccl.h of VERSION, DIR/LIBDIR/libnccl.so.2.
tree() {
    mkdir -p "$1/include" "$1/$3"
    maj=${2%%.*} rest=${2#*.}
    printf '#define NCCL_MAJOR %s\n#define NCCL_MINOR %s\n#define NCCL_PATCH %s\n' \
        "$maj" "${rest%%.*}" "${rest#*.}" >"$1/include/nccl.h"
    : >"$1/$3/libnccl.so.2"
}
# find [VAR=value...]: the search with no system prefixes and only the Pythons given.
find_nccl() { env PL_NCCL_SYSTEM= PL_NCCL_PYTHONS= "$@" sh lib/nccl_find.sh "$t/cuda" 2>"$t/err"; }
# expect FIELD VALUE LINE
expect() {
    got=$(printf '%s\n' "$3" | tr ' ' '\n' | sed -n "s/^$1=//p")
    [ "$got" = "$2" ] || fail "$case: $1 is '$got', expected '$2' (line: $3)"
}

tree "$t/home" 2.21.5 lib
tree "$t/cuda" 2.28.9 lib64
mkdir -p "$t/site/nvidia" "$t/bin" "$t/empty"
tree "$t/site/nvidia/nccl" 2.27.3 lib
# A Python that reports $t/site as its site-packages, found as `python3` on PATH.
printf '#!/bin/sh\necho %s\n' "$t/site" >"$t/bin/python3"
chmod +x "$t/bin/python3"

case="NCCL_HOME before the CUDA prefix"
out=$(find_nccl NCCL_HOME="$t/home") || fail "$case: exit $?: $(cat "$t/err")"
expect from NCCL_HOME "$out"
expect version 2.21.5 "$out"
expect link "$t/home/lib/libnccl.so.2" "$out"
expect rpath "$t/home/lib" "$out"

case="an NCCL_HOME without NCCL is an error, not a fallback"
out=$(find_nccl NCCL_HOME="$t/empty")
rc=$?
[ $rc = 2 ] || fail "$case: exit $rc, expected 2 (out: $out)"
grep -q "NCCL_HOME=$t/empty: no include/nccl.h" "$t/err" || fail "$case: message: $(cat "$t/err")"

case="the CUDA prefix"
out=$(find_nccl) || fail "$case: exit $?: $(cat "$t/err")"
expect from cuda "$out"
expect include "$t/cuda/include" "$out"
expect link "$t/cuda/lib64/libnccl.so.2" "$out"

case="an NCCL older than 2.18 is passed over for the wheel of python3 on PATH"
tree "$t/cuda" 2.15.1 lib64
out=$(find_nccl PATH="$t/bin:$PATH" PL_NCCL_PYTHONS=python3) || fail "$case: exit $?: $(cat "$t/err")"
expect from "wheel:$t/bin/python3" "$out"
expect version 2.27.3 "$out"
expect home "$t/site/nvidia/nccl" "$out"
expect include "$t/site/nvidia/nccl/include" "$out"
expect link "$t/site/nvidia/nccl/lib/libnccl.so.2" "$out"
expect rpath "$t/site/nvidia/nccl/lib" "$out"

case="the second Python asked when the first has no wheel"
mkdir -p "$t/bin0"
printf '#!/bin/sh\necho %s\n' "$t/empty" >"$t/bin0/python3"
chmod +x "$t/bin0/python3"
out=$(find_nccl PL_NCCL_PYTHONS="$t/bin0/python3 $t/bin/python3") || fail "$case: exit $?"
expect from "wheel:$t/bin/python3" "$out"

# A real Python's own answer: its user site folder (PYTHONUSERBASE) holding a wheel.
if py=$(command -v python3) && user=$(PYTHONUSERBASE="$t/ub" "$py" -c 'import site; print(site.getusersitepackages())' 2>/dev/null); then
    case="a wheel in the user site folder python3 reports"
    tree "$user/nvidia/nccl" 2.26.2 lib
    out=$(find_nccl PYTHONUSERBASE="$t/ub" PL_NCCL_PYTHONS="$py") || fail "$case: exit $?: $(cat "$t/err")"
    expect link "$user/nvidia/nccl/lib/libnccl.so.2" "$out"
    expect version 2.26.2 "$out"
fi

case="none at all"
rm -rf "$t/cuda"
out=$(find_nccl PL_NCCL_PYTHONS="$t/bin0/python3")
rc=$?
[ $rc = 1 ] || fail "$case: exit $rc, expected 1 (out: $out)"
grep -q "NCCL not found" "$t/err" && grep -q "pip install nvidia-nccl-cu12" "$t/err" ||
    fail "$case: message: $(cat "$t/err")"

case="the Makefile links what the search found"
line=$(NCCL_HOME="$t/site/nvidia/nccl" make -n -B --no-print-directory GPU=1 \
    BUILD_DIR="$t/b" "$t/b/tests/test_core" 2>/dev/null | grep -- "-o $t/b/tests/test_core")
case "$line" in
    *" $t/site/nvidia/nccl/lib/libnccl.so.2 "*) ;;
    *) fail "$case: the link line does not name the wheel's libnccl.so.2: $line" ;;
esac
case "$line" in
    *"-Wl,-rpath,$t/site/nvidia/nccl/lib"*) ;;
    *) fail "$case: no rpath to the wheel's lib folder: $line" ;;
esac
case "$line" in *"-I$t/site/nvidia/nccl/include"*) ;; *) fail "$case: no -I of its include: $line" ;; esac

[ $fails = 0 ] || exit 1
echo "NCCL search: NCCL_HOME, CUDA prefix, a too-old NCCL passed over, python3's wheel, none; the Makefile links the choice"
