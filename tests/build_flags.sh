#!/bin/sh
# build_flags.sh: a user's build never stops on a warning, CI's always does. Reads the
# commands make would run (make -n, nothing built) for one object of each compiler the kit
# runs: mpicc (CPU and GPU builds), nvcc and its host compiler, the GPU stand-in's g++.
# Without WERROR none may pass -Werror; with WERROR=1 every one must.
set -u
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fails=0
# cmds WERROR: one command line per compiler, "WHAT: command".
cmds() {
    m="make -n -B --no-print-directory WERROR=$1"
    echo "mpicc: $($m BUILD_DIR="$t/c" "$t/c/obj/lib/rng.o" 2>/dev/null | grep -- '-c lib/rng.c')"
    echo "mpicc GPU=1: $($m GPU=1 BUILD_DIR="$t/g" "$t/g/obj/lib/rng.o" 2>/dev/null | grep -- '-c lib/rng.c')"
    echo "nvcc: $($m GPU=1 BUILD_DIR="$t/g" "$t/g/obj/lib/ops_gpu.o" 2>/dev/null | grep -- '-c lib/ops_gpu.cu')"
    echo "stand-in g++: $($m EMU=1 BUILD_DIR="$t/e" "$t/e/obj/tests/gpu_emu/kernel_emu.o" 2>/dev/null | grep -- '-c tests/gpu_emu/kernel_emu.cpp')"
    echo "stand-in mpicc: $($m EMU=1 BUILD_DIR="$t/e" "$t/e/obj/lib/rng.o" 2>/dev/null | grep -- '-c lib/rng.c')"
}
cmds 0 >"$t/user"
cmds 1 >"$t/ci"
while IFS= read -r l; do
    case "$l" in
        *": ") echo "FAIL: make -n printed no command for ${l%%:*}"; fails=$((fails + 1)) ;;
        *-Werror*) echo "FAIL: a user's build passes -Werror to ${l%%:*}: ${l#*: }"; fails=$((fails + 1)) ;;
    esac
done <"$t/user"
while IFS= read -r l; do
    case "$l" in
        *": ") echo "FAIL: make -n WERROR=1 printed no command for ${l%%:*}"; fails=$((fails + 1)) ;;
        *-Werror*) ;;
        *) echo "FAIL: WERROR=1 does not pass -Werror to ${l%%:*}: ${l#*: }"; fails=$((fails + 1)) ;;
    esac
done <"$t/ci"
# nvcc's own warnings too, not only its host compiler's.
grep -q '^nvcc: .*-Werror all-warnings' "$t/ci" || { echo "FAIL: WERROR=1 does not pass nvcc -Werror all-warnings"; fails=$((fails + 1)); }
[ $fails = 0 ] || exit 1
echo "WERROR: users' builds pass no -Werror; WERROR=1 passes it to mpicc, nvcc (and its host compiler) and the stand-in's g++"
