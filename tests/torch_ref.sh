#!/bin/sh
# torch_ref.sh BUILD_DIR: dumps a dense and an MoE reference model with test_model and has
# tests/torch_ref.py compare them with the same model in PyTorch. Without torch it exits 77,
# which the test harness reports as SKIP with the last line below as the reason.
set -e
b=${1:?usage: torch_ref.sh BUILD_DIR}
py=${PL_PYTHON:-/usr/bin/python3}
if [ ! -x "$py" ] || ! "$py" -c "import torch" 2>/dev/null; then
    echo "python3-torch is not installed (apt-get install python3-torch)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The default spread; a large one (softmax and GELU saturate) and a small one; embeddings
# small enough that layernorm's eps decides the output.
"$b/tests/test_model" --dump "$tmp/dense.bin"
"$b/tests/test_model" --dump "$tmp/moe.bin" --moe
"$b/tests/test_model" --dump "$tmp/dense-wide.bin" --std 1.5
"$b/tests/test_model" --dump "$tmp/dense-narrow.bin" --std 0.02
"$b/tests/test_model" --dump "$tmp/dense-eps.bin" --flat
"$b/tests/test_model" --dump "$tmp/moe-eps.bin" --moe --flat
"$py" tests/torch_ref.py "$tmp"/*.bin
