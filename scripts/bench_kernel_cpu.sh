#!/usr/bin/env bash
# A kernel of gdn on the CPU against the same computation in PyPI's current PyTorch
# (scripts/torch_venv.sh), eager and torch.compile'd, fwd_bwd at B=1 H=4 D=64 fp32, alternately in
# one run, ROUNDS rounds, best of the rounds each; prints the times, the speed-ups and gdn's
# GFLOP/s as a fraction of the sgemm rate `gdn bench` measured in the same run, and writes
# OUT_DIR/summary.json with both sides' versions. KIND:
#   attention  `gdn bench --impls attention` against F.scaled_dot_product_attention
#              (scripts/torch_attention.py); T default 2048 4096
#   gdr        `gdn bench --impls fused` against the chunked gated delta rule in torch ops
#              (scripts/torch_gdr_cpu.py); T default 2048 16384
#   kda        `gdn bench --op kda --impls chunked` against fla 0.6.0's naive_chunk_kda in torch
#              ops (scripts/torch_kda_cpu.py; PYTHON defaults to .venv-fla's, which has fla); T
#              default 2048
# Each PyTorch run has a time limit (TORCH_LIMIT_S, default 300): torch.compile unrolls the gdr's
# loop over chunks and at T16384 compiles for over 10 minutes; a timed-out row says so.
# Usage: scripts/bench_kernel_cpu.sh KIND [GDN] [OUT_DIR] [ROUNDS] [T ...]
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:?"KIND: attention or gdr"}
shift
gdn_args=""
case $kind in
  attention) impl=attention peer=scripts/torch_attention.py peer_args="--impl sdpa"
    peer_name=torch_sdpa default_seqs="2048 4096" ;;
  gdr) impl=fused peer=scripts/torch_gdr_cpu.py peer_args="" peer_name=torch_chunked
    default_seqs="2048 16384" ;;
  kda) impl=chunked gdn_args="--op kda" peer=scripts/torch_kda_cpu.py peer_args=""
    peer_name=torch_naive_chunk_kda default_seqs="2048"
    [ -x .venv-fla/bin/python ] && PYTHON=${PYTHON:-.venv-fla/bin/python} ;;
  *) echo "bench_kernel_cpu: KIND must be attention, gdr or kda, got '$kind'" >&2; exit 2 ;;
esac
gdn=${1:-build/gdn} out=${2:-runs/bench-$kind-cpu} rounds=${3:-2}
shift $(($# < 3 ? $# : 3))
seqs=${*:-$default_seqs}
threads=$(nproc)
python=${PYTHON:-$(scripts/torch_venv.sh)}
limit=${TORCH_LIMIT_S:-300}
mkdir -p "$out"
rm -f "$out"/*.json
for T in $seqs; do
  for round in $(seq 1 "$rounds"); do
    # shellcheck disable=SC2086
    "$gdn" bench $gdn_args --impls "$impl" --modes fwd_bwd --batch 1 --heads 4 --seq "$T" --dims 64 \
      --dtypes float32 --repeats 5 --no-reference --out "$out/gdn-T$T-$round.json" >/dev/null 2>&1
    for mode in eager compile; do
      flag=$([ $mode = compile ] && echo --compile || true)
      # shellcheck disable=SC2086
      timeout "$limit" "$python" "$peer" $peer_args $flag --seq "$T" --heads 4 --dim 64 \
        --repeats 5 --threads "$threads" --out "$out/torch_$mode-T$T-$round.json" >/dev/null 2>&1 ||
        echo "{\"impl\": \"${peer_name}_$mode\", \"seq\": $T, \"median_ms\": null, \"error\": \"not done in $limit s\"}" \
          >"$out/torch_$mode-T$T-$round.json"
    done
    echo "T=$T round $round done" >&2
  done
done
"$python" - "$out" "$peer_name" $seqs <<'PY'
import glob, json, sys
out, peer, seqs = sys.argv[1], sys.argv[2], sys.argv[3:]
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
    print(f"{T:>6} {g:8.1f} {ms(e):8.1f} {ms(c):9.1f} {ms(e) / g:8.2f}x {ms(c) / g:11.2f}x"
          f" {gdn['gflops']:12.1f} {100 * gdn.get('of_gemm_bound', float('nan')):12.1f}%")
    rows.append({"seq": T, "gdn": gdn, peer: e, f"{peer}_compile": c,
                 "vs_eager": ms(e) / g, "vs_compile": ms(c) / g})
first = rows[0][peer]
info = {k: first.get(k) for k in ("torch", "blas", "cpu_capability", "threads")}
json.dump({"peer": info, "rows": rows}, open(f"{out}/summary.json", "w"), indent=1)
print(f"peer: torch {info['torch']} ({info['blas']}, {info['cpu_capability']}, {info['threads']} threads)")
PY
