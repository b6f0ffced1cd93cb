#!/usr/bin/env bash
# gdn's CPU attention against eager PyTorch math attention (scripts/torch_attention.py), fwd_bwd
# at B=1 H=4 D=64 fp32, alternately in one run, ROUNDS rounds, best of the rounds each: prints
# both times, the speed-up, and gdn's GFLOP/s as a fraction of the sgemm peak `gdn bench`
# knows (the best this machine has shown) and of the sgemm rate it measured in the same run
# (FLOPs as flash-attention counts them). Needs python3-torch (Debian). PyTorch runs on
# the same OpenBLAS kernels as gdn (OPENBLAS_CORETYPE, from the bench JSON's device.blas).
# Usage: scripts/bench_attention_cpu.sh [GDN] [OUT_DIR] [ROUNDS] [T ...]   (T default: 2048)
set -euo pipefail
cd "$(dirname "$0")/.."
gdn=${1:-build/gdn} out=${2:-runs/bench-attention} rounds=${3:-2}
shift $(($# < 3 ? $# : 3))
seqs=${*:-2048}
export OMP_WAIT_POLICY=passive
threads=$(nproc)
python=${PYTHON:-python3}  # with python3-torch (Debian: /usr/bin/python3)
mkdir -p "$out"
for T in $seqs; do
  for round in $(seq 1 "$rounds"); do
    "$gdn" bench --impls attention --modes fwd_bwd --batch 1 --heads 4 --seq "$T" --dims 64 \
      --dtypes float32 --repeats 5 --no-reference --out "$out/gdn-T$T-$round.json" > /dev/null 2>&1
    # PyTorch on the OpenBLAS kernels gdn runs (Debian's torch uses the system OpenBLAS, which
    # falls back to its Prescott kernels on CPUs newer than itself: kernels/cpu/blas_select.h).
    kernels=$("$python" -c "import json,sys; print(json.load(open(sys.argv[1]))['device'].get('blas', {}).get('kernels', ''))" "$out/gdn-T$T-$round.json")
    OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$kernels} "$python" scripts/torch_attention.py \
      --seq "$T" --heads 4 --dim 64 --repeats 5 --threads "$threads" \
      --out "$out/torch-T$T-$round.json" > /dev/null
    echo "T=$T round $round done" >&2
  done
done
"$python" - "$out" $seqs <<'PY'
import glob, json, sys
out, seqs = sys.argv[1], sys.argv[2:]
print(f"{'T':>6} {'gdn ms':>9} {'torch ms':>9} {'speed-up':>9} {'gdn GFLOP/s':>12} {'of peak':>8}"
      f" {'of sgemm now':>13}")
for T in seqs:
    gdn = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/gdn-T{T}-*.json"))]
    rows = [d["results"][0] for d in gdn]
    best = min(rows, key=lambda r: r["median_ms"])
    peak = max(d["device"].get("peak_gflops_fp32", 0) for d in gdn)
    torch_ms = min(json.load(open(f))["median_ms"] for f in glob.glob(f"{out}/torch-T{T}-*.json"))
    frac = best["gflops"] / peak if peak else float("nan")
    # The sgemm rate gdn bench measured at the start of the same run as the best row.
    now = best.get("frac_peak_this_run", float("nan"))
    print(f"{T:>6} {best['median_ms']:9.1f} {torch_ms:9.1f} {torch_ms / best['median_ms']:8.2f}x "
          f"{best['gflops']:12.2f} {100 * frac:7.1f}% {100 * now:12.1f}%")
PY
