#!/bin/sh
# torch_ref.sh BUILD_DIR: dumps a dense and an MoE reference model with test_model and has
# tests/torch_ref.py compare them with the same model in PyTorch; skipped without torch.
set -e
b=${1:?usage: torch_ref.sh BUILD_DIR}
if [ ! -x /usr/bin/python3 ] || ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
    echo "skipped: python3-torch not installed"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$b/tests/test_model" --dump "$tmp/dense.bin"
"$b/tests/test_model" --dump "$tmp/moe.bin" --moe
/usr/bin/python3 tests/torch_ref.py "$tmp/dense.bin" "$tmp/moe.bin"
