#!/bin/sh
# deps.sh: checks what a paralab build needs, prints what it found, and installs what is
# missing from Debian/Ubuntu packages (as root, or through sudo without a password);
# otherwise prints the exact command to run. Usage: sh lib/deps.sh cpu|gpu
set -u
build=${1:-cpu}
missing=""
note() { printf '  %-10s %s\n' "$1" "$2"; }
need() { missing="$missing $1"; note "$2" "missing (package $1)"; }

echo "paralab: checking the $build build's tools"
if command -v gcc >/dev/null 2>&1; then note gcc "$(gcc -dumpfullversion 2>/dev/null)"; else need gcc gcc; fi
command -v make >/dev/null 2>&1 || need make make
command -v patch >/dev/null 2>&1 || need patch patch
if command -v pkg-config >/dev/null 2>&1; then :; else need pkg-config pkg-config; fi
if command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1; then
    note MPI "$(mpirun --version 2>/dev/null | head -n 1)"
else
    need "libopenmpi-dev openmpi-bin" MPI
fi
if pkg-config --exists openblas 2>/dev/null; then
    note OpenBLAS "$(pkg-config --modversion openblas)"
else
    need libopenblas-dev OpenBLAS
fi

if [ "$build" = gpu ]; then
    cuda=${CUDA_HOME:-}
    [ -n "$cuda" ] || for d in /usr/local/cuda /usr/lib/cuda; do [ -d "$d" ] && cuda=$d && break; done
    if [ -z "$cuda" ] && command -v nvcc >/dev/null 2>&1; then
        cuda=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
    fi
    if [ -n "$cuda" ] && [ -x "$cuda/bin/nvcc" ]; then
        note nvcc "$("$cuda/bin/nvcc" --version | tail -n 2 | head -n 1)"
        if [ -f "$cuda/include/nccl.h" ] || [ -f /usr/include/nccl.h ] || [ -f /usr/local/include/nccl.h ]; then
            note NCCL "$(grep -h -m1 -E '#define NCCL_VERSION_CODE' "$cuda/include/nccl.h" /usr/include/nccl.h /usr/local/include/nccl.h 2>/dev/null | head -n 1 | awk '{print $3}')"
        else
            echo "error: NCCL not found (nccl.h); install NVIDIA's libnccl-dev for your CUDA version" >&2
            exit 1
        fi
        [ -f "$cuda/include/cublas_v2.h" ] && note cuBLAS "$cuda" ||
            { echo "error: cuBLAS headers not found under $cuda/include" >&2; exit 1; }
    else
        echo "error: the GPU build needs the CUDA toolkit (nvcc); none found in /usr/local/cuda or \$CUDA_HOME." >&2
        echo "       Install NVIDIA's CUDA toolkit and NCCL (e.g. apt-get install nvidia-cuda-toolkit libnccl-dev), or build for the CPU with plain 'make'." >&2
        exit 1
    fi
fi

[ -z "$missing" ] && exit 0

cmd="apt-get install -y --no-install-recommends$missing"
if [ "$(id -u)" = 0 ]; then
    echo "paralab: installing:$missing"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive $cmd
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    echo "paralab: installing with sudo:$missing"
    sudo DEBIAN_FRONTEND=noninteractive apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive $cmd
else
    echo "error: missing packages. Install them with:" >&2
    echo "  sudo apt-get update && sudo $cmd" >&2
    exit 1
fi
