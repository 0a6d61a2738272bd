#!/bin/sh
# gpu_present.sh: whether this machine has an NVIDIA GPU that its driver shows and that
# CUDA_VISIBLE_DEVICES leaves visible. Exits 0 when it has; otherwise says so, for the
# command named in $1, and exits 2. `make bench-model GPU=1` and `make gpu-check` ask it
# before they build anything, so a machine without a GPU gets this line, not a CUDA error.
#
#     sh tests/gpu_present.sh "make gpu-check" [what to run instead]
what=${1:-this command}
instead=${2:-the CPU build (make, make test)}

why=""
if ! command -v nvidia-smi >/dev/null 2>&1; then
    why="no NVIDIA driver: nvidia-smi is not installed"
elif ! n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ') || [ "$n" -eq 0 ]; then
    why="nvidia-smi lists no GPU"
elif [ "${CUDA_VISIBLE_DEVICES+set}" = set ] &&
     { [ -z "$CUDA_VISIBLE_DEVICES" ] || [ "$CUDA_VISIBLE_DEVICES" = "-1" ]; }; then
    why="CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' hides every GPU"
fi
[ -z "$why" ] && exit 0
echo "$what: no GPU is present on this machine ($why). It runs the GPU build on an NVIDIA" \
     "GPU; here use $instead."
exit 2
