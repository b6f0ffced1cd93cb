#!/usr/bin/env bash
# gdn's fused gated delta rule on the CPU against the same math in PyTorch ops
# (scripts/torch_gdr_cpu.py on PyPI's current torch, scripts/torch_venv.sh), eager and
# torch.compile'd, fwd_bwd at B=1 H=4 K=V=64 fp32, alternately in one run, ROUNDS rounds, best of
# the rounds each: prints the times, the speed-ups, and gdn's GFLOP/s as a fraction of the sgemm
# rate `gdn bench` measured in the same run (of_gemm_bound). Writes OUT_DIR/summary.json.
# Usage: scripts/bench_gdr_cpu.sh [GDN] [OUT_DIR] [ROUNDS] [T ...]   (T default: 2048 16384)
set -euo pipefail
cd "$(dirname "$0")/.."
gdn=${1:-build/gdn} out=${2:-runs/bench-gdr-cpu} rounds=${3:-2}
shift $(($# < 3 ? $# : 3))
seqs=${*:-2048 16384}
threads=$(nproc)
python=${PYTHON:-$(scripts/torch_venv.sh)}
mkdir -p "$out"
rm -f "$out"/*.json
for T in $seqs; do
  for round in $(seq 1 "$rounds"); do
    "$gdn" bench --impls fused --modes fwd_bwd --batch 1 --heads 4 --seq "$T" --dims 64 \
      --dtypes float32 --repeats 5 --no-reference --out "$out/gdn-T$T-$round.json" >/dev/null 2>&1
    for mode in eager compile; do
      flag=$([ $mode = compile ] && echo --compile || true)
      # torch.compile unrolls the loop over chunks: past a few thousand tokens it compiles for
      # many minutes (T16384: over 10), so each run has a time limit and a timed-out row says so.
      # shellcheck disable=SC2086
      timeout "${TORCH_LIMIT_S:-300}" "$python" scripts/torch_gdr_cpu.py $flag --seq "$T" \
        --heads 4 --dim 64 --repeats 5 --threads "$threads" \
        --out "$out/torch_$mode-T$T-$round.json" >/dev/null 2>&1 ||
        echo "{\"impl\": \"torch_chunked_$mode\", \"seq\": $T, \"median_ms\": null, \"error\": \"not done in ${TORCH_LIMIT_S:-300} s (torch.compile unrolls the chunk loop)\"}" \
          >"$out/torch_$mode-T$T-$round.json"
    done
    echo "T=$T round $round done" >&2
  done
done
"$python" - "$out" $seqs <<'PY'
import glob, json, sys
out, seqs = sys.argv[1], sys.argv[2:]
def fastest(pat):
    rows = [json.load(open(f)) for f in glob.glob(f"{out}/{pat}")]
    done = [r for r in rows if r.get("median_ms")]
    return min(done, key=lambda r: r["median_ms"]) if done else rows[0]
ms = lambda r: r["median_ms"] or float("nan")
print(f"{'T':>6} {'gdn ms':>8} {'eager':>8} {'compiled':>9} {'vs eager':>9} {'vs compiled':>12}"
      f" {'gdn GFLOP/s':>12} {'of sgemm now':>13}")
rows = []
for T in seqs:
    gdn = min((json.load(open(f))["results"][0] for f in glob.glob(f"{out}/gdn-T{T}-*.json")),
              key=lambda r: r["median_ms"])
    e, c = fastest(f"torch_eager-T{T}-*.json"), fastest(f"torch_compile-T{T}-*.json")
    g = gdn["median_ms"]
    print(f"{T:>6} {g:8.1f} {ms(e):8.1f} {ms(c):9.1f} {ms(e) / g:8.2f}x"
          f" {ms(c) / g:11.2f}x {gdn['gflops']:12.1f} {100 * gdn.get('of_gemm_bound', float('nan')):12.1f}%")
    rows.append({"seq": T, "gdn": gdn, "torch_chunked": e, "torch_chunked_compile": c})
peer = {k: rows[0]["torch_chunked"].get(k) for k in ("torch", "blas", "cpu_capability", "threads")}
json.dump({"peer": peer, "rows": rows}, open(f"{out}/summary.json", "w"), indent=1)
print(f"peer: torch {peer['torch']} ({peer['blas']}, {peer['cpu_capability']}, {peer['threads']} threads)")
PY
