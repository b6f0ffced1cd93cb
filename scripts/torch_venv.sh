#!/usr/bin/env bash
# The PyTorch a CPU user would run instead of gdn: `pip install torch numpy` from PyPI (current
# release: MKL and oneDNN, AVX-512 where the CPU has it, torch.compile), in a virtual environment
# of its own (.venv-torch/, gitignored; GDN_TORCH_VENV names another), made once and reused.
# Prints the environment's python; the comparison scripts record its versions and BLAS.
# Usage: PYTHON=$(scripts/torch_venv.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${GDN_TORCH_VENV:-.venv-torch}
if ! "$venv/bin/python" -c "import torch, numpy" 2>/dev/null; then
  echo "torch_venv: installing torch and numpy from PyPI into $venv (a few GB, once)" >&2
  python3 -m venv "$venv" >&2 ||
    { echo "torch_venv: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
  "$venv/bin/python" -m pip install -q --upgrade torch numpy >&2
fi
echo "$(cd "$venv" && pwd)/bin/python"
