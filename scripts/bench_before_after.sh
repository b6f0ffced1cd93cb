#!/usr/bin/env bash
# Before/after a change on the CPU, alternately in one run (the machine is noisy): the kernel
# sweep of `gdn bench` (B=1 H=4 T=2048 K=V=64 fp32 fwd_bwd, every implementation) and 30 training
# steps of configs/default.yaml, ROUNDS times each. Build the old tree first, e.g.
#   git worktree add /tmp/gdn-before <rev> && (cd /tmp/gdn-before && GDN_BUILD_DIR=build-cpu \
#     GDN_CMAKE_ARGS="-DGDN_CUDA=OFF -DGDN_BUILD_TESTS=OFF" ./scripts/setup.sh)
# Usage: scripts/bench_before_after.sh OLD_GDN NEW_GDN OUT_DIR [ROUNDS]
set -euo pipefail
old=$1 new=$2 out=$3 rounds=${4:-3}
mkdir -p "$out"
export OMP_WAIT_POLICY=passive
cd "$(dirname "$0")/.."
for round in $(seq 1 "$rounds"); do
  for side in old new; do
    bin=$old
    [ "$side" = new ] && bin=$new
    "$bin" bench --impls recurrent,chunked,chunked_fat,fused,ssd --modes fwd_bwd --batch 1 \
      --heads 4 --seq 2048 --dims 64 --dtypes float32 --repeats 9 --no-reference \
      --out "$out/bench-$side-$round.json" > /dev/null 2>&1
    rm -rf "$out/train-$side-$round"
    "$bin" train configs/default.yaml --set train.steps=30 --set train.log_every=10 \
      --set train.eval_every=0 --set train.save_every=0 \
      --set train.out_dir="$out/train-$side-$round" --quiet > /dev/null 2>&1
    echo "round $round: $side done"
  done
done
python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
ms = {}
for side in ("old", "new"):
    for f in glob.glob(f"{out}/bench-{side}-*.json"):
        for r in json.load(open(f))["results"]:
            ms.setdefault((r["impl"], side), []).append(r["median_ms"])
print("| impl | before, best (ms) | after, best (ms) | after / before |")
print("| --- | --- | --- | --- |")
for impl in ("recurrent", "chunked", "chunked_fat", "fused", "ssd"):
    o, n = min(ms[(impl, "old")]), min(ms[(impl, "new")])
    print(f"| {impl} | {o:.1f} | {n:.1f} | {n / o:.3f} |")
tps, losses = {}, {}
for side in ("old", "new"):
    for d in sorted(glob.glob(f"{out}/train-{side}-*")):
        rows = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl")) if "tokens_per_s" in l]
        tps.setdefault(side, []).append(statistics.mean(r["tokens_per_s"] for r in rows if r["step"] > 10))
        losses.setdefault(side, []).append([r["loss"] for r in rows])
print()
print("training tokens/s (steps 11-30), per round: before", [round(x) for x in tps["old"]],
      "after", [round(x) for x in tps["new"]])
print(f"after / before (best of each): {max(tps['new']) / max(tps['old']):.3f}")
print("losses identical:", all(l == losses["old"][0] for l in losses["old"] + losses["new"]))
PY
