#!/usr/bin/env bash
# Training throughput on the CPU: `gdn train configs/default.yaml` against the eager PyTorch model
# of the same architecture (scripts/torch_gdn_model.py, the same 3.76M parameters, AdamW), B = 8
# at T = 256 and T = 512, alternately in one run, ROUNDS rounds, the best round each; prints
# tokens/s and the ratio. gdn's rate is its metrics' last window (10 steps after 20); PyTorch's is
# 10 timed steps after 3 warm-up steps on random tokens. PyTorch runs on the OpenBLAS kernels gdn
# selected (OPENBLAS_CORETYPE: Debian's torch uses the system OpenBLAS). Needs python3-torch.
# Usage: scripts/bench_train_cpu.sh [GDN] [OUT_DIR] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
gdn=${1:-build/gdn} out=${2:-runs/bench-train-cpu} rounds=${3:-2}
python=${PYTHON:-python3}  # with python3-torch (Debian: /usr/bin/python3)
# OMP_WAIT_POLICY is left to each program's default (or the caller's): passive waiting halves the
# eager model's rate at T = 512 (524 against 1124 tokens/s here; docs/benchmarks/cpu-training.md).
threads=$(nproc)
mkdir -p "$out"
# The kernels gdn runs, for PyTorch too.
"$gdn" bench --impls recurrent --modes fwd --seq 16 --dims 16 --repeats 1 --no-reference \
  --out "$out/device.json" > /dev/null 2>&1
kernels=$("$python" -c "import json,sys; print(json.load(open(sys.argv[1]))['device'].get('blas', {}).get('kernels', ''))" "$out/device.json")
for T in 256 512; do
  for round in $(seq 1 "$rounds"); do
    "$gdn" train configs/default.yaml --set data.seq_len="$T" --set train.steps=30 \
      --set train.log_every=10 --set train.eval_every=0 --set train.save_every=0 \
      --set train.out_dir="$out/gdn-run" --overwrite --quiet > "$out/gdn-T$T-$round.log" 2>&1
    tail -1 "$out/gdn-run/metrics.jsonl" > "$out/gdn-T$T-$round.json"
    OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$kernels} "$python" scripts/torch_gdn_model.py \
      --seq "$T" --batch 8 --steps 10 --threads "$threads" > "$out/torch-T$T-$round.json"
    echo "T=$T round $round done" >&2
  done
done
"$python" - "$out" <<'PY'
import glob, json, sys
out = sys.argv[1]
print(f"{'T':>5} {'gdn tok/s':>10} {'torch tok/s':>12} {'ratio':>7}")
for T in (256, 512):
    g = max(json.load(open(f))["tokens_per_s"] for f in glob.glob(f"{out}/gdn-T{T}-*.json"))
    t = max(json.load(open(f))["tokens_per_s"] for f in glob.glob(f"{out}/torch-T{T}-*.json"))
    print(f"{T:>5} {g:10.0f} {t:12.0f} {g / t:6.2f}x")
PY
