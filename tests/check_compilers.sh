#!/bin/sh
# check_compilers.sh: `make check-compilers`, run by .ci/run. Users' builds do not stop on a
# warning, so a warning that another distribution's compiler raises must be caught here:
# everything `make` and `make variants` build (library, programs, tests, grader drivers and
# variants) is built again with every warning an error (WERROR=1)
#   - with clang (CLANG, default clang-16, through mpicc: OMPI_CC), into build/cpu-clang;
#   - with gcc at -O2 -D_FORTIFY_SOURCE=3 (Ubuntu's gcc turns it on by default, and its
#     checked string functions let gcc see more truncations), into build/cpu-fortify;
# and, where nvcc exists, the GPU build the same two ways (compile and link only; nvcc's host
# compiler is clang for the first), into build/gpu-clang and build/gpu-fortify.
# build/cpu and build/gpu are left alone. Usage: MAKE=make sh tests/check_compilers.sh
set -eu
make=${MAKE:-make}
clang=${CLANG:-clang-16}
clangxx=$(echo "$clang" | sed 's/clang/clang++/')
fortify="-U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=3"

if ! command -v "$clang" >/dev/null 2>&1 || ! command -v "$clangxx" >/dev/null 2>&1; then
    echo "make check-compilers needs $clang and $clangxx (apt-get install $clang), or CLANG=another clang" >&2
    exit 2
fi

# The same search as the Makefile's: $CUDA_HOME, /usr/local/cuda, /usr/lib/cuda, then PATH.
gpu=0
if [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ] || [ -x /usr/lib/cuda/bin/nvcc ] ||
    command -v nvcc >/dev/null 2>&1; then
    gpu=1
fi

start=$(date +%s)
# step NAME BUILD_DIR COMMAND...
step() {
    name=$1 dir=$2
    shift 2
    t0=$(date +%s)
    echo "== $name ($dir)"
    "$@" || { echo "check-compilers: $name has warnings or errors (above)" >&2; exit 1; }
    # The labs' stubs are built as a student's code is (a failure there is a lab's failed
    # grade, not a failed build): each must still have linked.
    for p in grader/*/plan.c; do
        lab=$(basename "$(dirname "$p")")
        [ -x "$dir/grader/labs/$lab/driver" ] || {
            echo "check-compilers: $name: the stub of $lab did not build ($dir/grader/labs/$lab/build.log)" >&2
            exit 1
        }
    done
    echo "== $name: warning-free under -Werror ($(($(date +%s) - t0)) s)"
}
step "CPU build, $clang" build/cpu-clang \
    env OMPI_CC="$clang" $make --no-print-directory build-only build-variants WERROR=1 BUILD_DIR=build/cpu-clang
step "CPU build, gcc -O2 -D_FORTIFY_SOURCE=3" build/cpu-fortify \
    $make --no-print-directory build-only build-variants WERROR=1 BUILD_DIR=build/cpu-fortify HOST_FLAGS="$fortify"
if [ $gpu = 1 ]; then
    step "GPU build, $clang and nvcc -ccbin $clangxx" build/gpu-clang \
        env OMPI_CC="$clang" $make --no-print-directory build-only build-variants GPU=1 WERROR=1 \
        BUILD_DIR=build/gpu-clang NVCC_CCBIN="$clangxx"
    step "GPU build, gcc -O2 -D_FORTIFY_SOURCE=3" build/gpu-fortify \
        $make --no-print-directory build-only build-variants GPU=1 WERROR=1 BUILD_DIR=build/gpu-fortify \
        HOST_FLAGS="$fortify"
else
    echo "== GPU builds skipped: no nvcc on this machine"
fi
echo "check-compilers: every build warning-free with $clang and with gcc -D_FORTIFY_SOURCE=3 ($(($(date +%s) - start)) s)"
