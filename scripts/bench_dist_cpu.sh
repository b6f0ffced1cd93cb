#!/usr/bin/env bash
# Data-parallel throughput on this machine's CPU (docs/benchmarks/dist-cpu.md): configs/default.yaml
# at the same global batch (8 x 256 tokens per step), as 1 rank x 2 OpenMP threads and as
# 2 ranks (mpirun) x 1 thread, alternating, REPEATS times each; then the same 2-rank run with
# 1 MiB buckets (overlap). Prints tokens/s and the all-reduce share of the step per run, read
# from metrics.jsonl (the first logged window, the warm-up, is left out).
# Usage: scripts/bench_dist_cpu.sh [STEPS (30)] [REPEATS (3)]; expects build/ (or GDN_BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-30}
repeats=${2:-3}
gdn=${GDN_BUILD_DIR:-build}/gdn
out=${GDN_BENCH_DIR:-runs/bench-dist}
export OMP_WAIT_POLICY=passive
mpirun=(mpirun -np 2 --allow-run-as-root --oversubscribe --bind-to none)
common=(--quiet --set train.steps="$steps" --set train.log_every=10 --set train.eval_every=0
  --set train.save_every=0 --set train.device=cpu)
mkdir -p "$out"
# The corpus once (the first run prepares it), then every run reads the same shards.
if [ ! -f "$out/data/meta.json" ]; then
  OMP_NUM_THREADS=2 "$gdn" train configs/default.yaml "${common[@]}" --set train.steps=1 \
    --set train.out_dir="$out/prep" >/dev/null
  mv "$out/prep/data" "$out/data"
fi
common+=(--set data.dir="$out/data")
report() {  # run dir, label
  python3 - "$1" "$2" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
tps = [r["tokens_per_s"] for r in rows if "tokens_per_s" in r][1:]
dp = [r for r in rows if "allreduce_s" in r][1:]
line = f"{sys.argv[2]:<28} tokens/s {sum(tps) / len(tps):8.0f}"
if dp:
    step = sum(r["step_s"] for r in dp) / len(dp)
    comm = sum(r["allreduce_s"] for r in dp) / len(dp)
    wait = sum(r["allreduce_wait_s"] for r in dp) / len(dp)
    line += f"  step {step * 1e3:7.1f} ms  all-reduce {comm / step:6.1%}  blocked after backward {wait / step:6.1%}"
print(line, flush=True)
EOF
}
for i in $(seq "$repeats"); do
  rm -rf "$out/one" "$out/two" "$out/two-1mb"
  OMP_NUM_THREADS=2 "$gdn" train configs/default.yaml "${common[@]}" --set train.out_dir="$out/one" >/dev/null
  report "$out/one" "1 rank x 2 threads (#$i)"
  OMP_NUM_THREADS=1 "${mpirun[@]}" "$gdn" train configs/default.yaml "${common[@]}" \
    --set train.batch_size=4 --set train.out_dir="$out/two" >/dev/null
  report "$out/two" "2 ranks x 1 thread (#$i)"
  OMP_NUM_THREADS=1 "${mpirun[@]}" "$gdn" train configs/default.yaml "${common[@]}" \
    --set train.batch_size=4 --set dist.bucket_mb=1 --set train.out_dir="$out/two-1mb" >/dev/null
  report "$out/two-1mb" "2 ranks, 1 MiB buckets (#$i)"
done
