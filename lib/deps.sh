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
# g++: the tests' CUDA stand-in runs the GPU build's kernels as host C++ (make test-gpu-emu).
command -v g++ >/dev/null 2>&1 || need g++ g++
# The tools the kit runs: patch (the broken and alternative variants), perl (the GPU
# stand-in's kernels), zip and unzip (make gradescope, make regrade, the attack tests),
# python3 (make flake, the attack tests), pgrep (the launcher's tests).
command -v patch >/dev/null 2>&1 || need patch patch
command -v perl >/dev/null 2>&1 || need perl-base perl
command -v zip >/dev/null 2>&1 || need zip zip
command -v unzip >/dev/null 2>&1 || need unzip unzip
command -v python3 >/dev/null 2>&1 || need python3 python3
command -v pgrep >/dev/null 2>&1 || need procps pgrep
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
        # The same search as the Makefile's (lib/nccl_find.sh): what is reported is what is linked.
        found=$(sh "$(dirname "$0")/nccl_find.sh" "$cuda") || exit $?
        field() { printf '%s\n' "$found" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
        case $(field from) in
            NCCL_HOME) from="\$NCCL_HOME" ;;
            cuda) from="the CUDA prefix" ;;
            system) from="the system" ;;
            wheel:*) from="the NVIDIA NCCL wheel of $(field from | sed 's/^wheel://')" ;;
        esac
        note NCCL "$(field version) in $(field home) (from $from; links $(field link))"
        [ -f "$cuda/include/cublas_v2.h" ] && note cuBLAS "$cuda" ||
            { echo "error: cuBLAS headers not found under $cuda/include" >&2; exit 1; }
        # The driver matters only where the kit runs: a build node may have none.
        tk=$("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')
        if command -v nvidia-smi >/dev/null 2>&1 && drv=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1) && [ -n "$drv" ]; then
            dcuda=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\.[0-9]*\).*/\1/p' | head -n 1)
            note driver "$drv (runs CUDA ${dcuda:-?}; toolkit $tk)"
            if [ -n "$dcuda" ] && [ -n "$tk" ] && [ "$(printf '%s\n%s\n' "$tk" "$dcuda" | sort -V | head -n 1)" != "$tk" ]; then
                echo "warning: the NVIDIA driver supports CUDA $dcuda but the toolkit is $tk: programs built here fail on this node with 'CUDA driver version is insufficient'; update the driver, or build with a toolkit no newer than $dcuda (CUDA_HOME=...)" >&2
            fi
        else
            note driver "none on this node (building needs none; running needs an NVIDIA driver for CUDA $tk or newer)"
        fi
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
