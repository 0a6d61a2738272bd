#!/bin/sh
# nccl_find.sh: where the GPU build finds NCCL. The Makefile links what it prints and
# lib/deps.sh reports it, so the build and `make deps GPU=1` always name the same NCCL.
#
#   sh lib/nccl_find.sh CUDA_PREFIX
#
# Looks, in this order, for include/nccl.h with libnccl.so.2 (or libnccl.so) beside it:
#   1. $NCCL_HOME (when set, it must hold NCCL: an NCCL_HOME without it is an error)
#   2. the CUDA prefix (NVIDIA's CUDA packages can install NCCL there)
#   3. /usr, then /usr/local (the distribution's or NVIDIA's libnccl-dev)
#   4. the nvidia/nccl folder of a Python environment's NVIDIA NCCL wheel (nvidia-nccl-cu12,
#      nvidia-nccl-cu13: what PyTorch installs), in the site folders of `python3` on PATH,
#      then of /usr/bin/python3. A wheel ships libnccl.so.2 and no libnccl.so.
# An NCCL older than 2.18 (the kit needs ncclCommSplit) is passed over, and said so.
#
# Prints one line, for the Makefile to read:
#   version=2.28.9 home=DIR include=DIR lib=DIR link=FILE rpath=DIR from=WHERE
# (link: the library's full path, libnccl.so.2 where it exists; rpath: the lib folder when
# it is not a system one; from: NCCL_HOME, cuda, system or wheel:PYTHON). Paths with spaces
# are not supported (make cannot carry them).
# Where none is found it says where it looked on stderr and exits 1; a bad NCCL_HOME, exit 2.
# For tests, PL_NCCL_SYSTEM (default "/usr /usr/local") and PL_NCCL_PYTHONS (default
# "python3 /usr/bin/python3") replace the system prefixes and the Pythons asked.
set -u
cuda=${1:-}
looked=""
skipped=""

# The lib folder of prefix $1 holding libnccl: lib64, lib, the multiarch folder.
lib_dir() {
    for d in "$1/lib64" "$1/lib" "$1/lib/$(gcc -print-multiarch 2>/dev/null)" \
        "$1/targets/$(uname -m)-linux/lib"; do
        if [ -e "$d/libnccl.so" ] || [ -e "$d/libnccl.so.2" ]; then echo "$d"; return 0; fi
    done
    return 1
}

# The header of prefix $1 (targets/ARCH-linux: where CUDA's own packages put it).
inc_dir() {
    for d in "$1/include" "$1/targets/$(uname -m)-linux/include"; do
        [ -f "$d/nccl.h" ] && { echo "$d"; return 0; }
    done
    return 1
}

# try PREFIX FROM: prints the line and returns 0 when PREFIX holds a usable NCCL.
try() {
    why="no such folder"
    [ -n "$1" ] && [ -d "$1" ] || return 1
    looked="$looked $1"
    why="no include/nccl.h"
    inc=$(inc_dir "$1") || return 1
    why="nccl.h but no lib/libnccl.so.2 beside it"
    lib=$(lib_dir "$1") || { skipped="$skipped
  $1: $why"; return 1; }
    nv() { sed -n "s/^#define NCCL_$1 *\([0-9]*\).*/\1/p" "$inc/nccl.h" | head -n 1; }
    maj=$(nv MAJOR) min=$(nv MINOR) pat=$(nv PATCH)
    if [ -z "$maj" ] || [ -z "$min" ] || [ "$maj" -lt 2 ] || { [ "$maj" -eq 2 ] && [ "$min" -lt 18 ]; }; then
        why="NCCL ${maj:-?}.${min:-?}.${pat:-?} is older than 2.18 (the kit needs ncclCommSplit)"
        skipped="$skipped
  $1: $why"
        return 1
    fi
    # By its full path: a wheel has no libnccl.so; the program records the soname either way.
    if [ -e "$lib/libnccl.so.2" ]; then link=$lib/libnccl.so.2; else link=$lib/libnccl.so; fi
    case "$lib" in
        /usr/lib | /usr/lib64 | /usr/lib/*-linux-gnu | /lib | /lib64 | /lib/*-linux-gnu) rpath= ;;
        *) rpath=$lib ;;
    esac
    printf 'version=%s.%s.%s home=%s include=%s lib=%s link=%s rpath=%s from=%s\n' \
        "$maj" "$min" "${pat:-0}" "$1" "$inc" "$lib" "$link" "$rpath" "$2"
    return 0
}

if [ -n "${NCCL_HOME:-}" ]; then
    if try "$NCCL_HOME" NCCL_HOME; then exit 0; fi
    echo "error: NCCL_HOME=$NCCL_HOME: $why; it must hold include/nccl.h of NCCL 2.18 or newer and lib/libnccl.so.2" >&2
    echo "       point NCCL_HOME at an NCCL install (the folder with include/ and lib/), or unset it to search" >&2
    exit 2
fi
try "$cuda" cuda && exit 0
for p in ${PL_NCCL_SYSTEM-/usr /usr/local}; do try "$p" system && exit 0; done

for py in ${PL_NCCL_PYTHONS-python3 /usr/bin/python3}; do
    command -v "$py" >/dev/null 2>&1 || continue
    sites=$("$py" -c 'import site, sys
dirs = site.getsitepackages() if hasattr(site, "getsitepackages") else []
user = site.getusersitepackages() if hasattr(site, "getusersitepackages") else ""
print("\n".join(dirs + ([user] if user else []) + [p for p in sys.path if p.endswith("-packages")]))' 2>/dev/null) || continue
    for s in $sites; do
        for w in "$s/nvidia/nccl" "$s"/nvidia/cu[0-9]*; do
            [ -d "$w" ] && try "$w" "wheel:$(command -v "$py")" && exit 0
        done
    done
done

echo "error: NCCL not found. Looked for include/nccl.h with libnccl.so.2 in:${looked:- (none of the places exist)}$skipped" >&2
echo "       (\$NCCL_HOME, the CUDA prefix, /usr, /usr/local, and nvidia/nccl in the site-packages of python3 and /usr/bin/python3)" >&2
echo "       Install NVIDIA's libnccl-dev for your CUDA version, or pip install nvidia-nccl-cu12 (or -cu13), or set NCCL_HOME" >&2
exit 1
