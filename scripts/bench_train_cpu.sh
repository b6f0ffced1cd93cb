#!/usr/bin/env bash
# Training throughput on the CPU against the PyTorch a user would run instead: PyPI's current torch
# (MKL, oneDNN; scripts/torch_venv.sh makes its venv) running the same model
# (scripts/torch_gdn_model.py: the same architecture and parameter count, fp32, AdamW), eager and
# torch.compile'd, alternately with `gdn train` in one run, ROUNDS rounds, the best round of each:
#   default   configs/default.yaml (hidden 256, 4 layers, 4 heads of 64), B8 T256 and B8 T512
#   wide      hidden 512, 6 layers, 4 heads of 128, B2 T1024
# gdn's rate is its metrics' last window (10 steps after 20; gemm_bound_ms and of_gemm_bound from
# the same window); PyTorch's is 10 timed steps after 3 warm-up steps (which compile, for
# torch.compile). Prints a table of tokens/s and ratios and writes OUT_DIR/summary.json with the
# versions and BLAS of both sides.
# Usage: scripts/bench_train_cpu.sh [GDN] [OUT_DIR] [ROUNDS]   (PYTHON: another torch's python)
set -euo pipefail
cd "$(dirname "$0")/.."
gdn=${1:-build/gdn} out=${2:-runs/bench-train-cpu} rounds=${3:-2}
python=${PYTHON:-$(scripts/torch_venv.sh)}
threads=$(nproc)
mkdir -p "$out"
rm -f "$out"/*.json
# name | gdn overrides | torch sizes | batch | seq
shapes=(
  "default-T256||--hidden 256 --layers 4 --heads 4 --head-dim 64|8|256"
  "default-T512||--hidden 256 --layers 4 --heads 4 --head-dim 64|8|512"
  "wide-T1024|--set model.hidden_size=512 --set model.num_hidden_layers=6 --set model.head_dim=128|--hidden 512 --layers 6 --heads 4 --head-dim 128|2|1024"
)
for shape in "${shapes[@]}"; do
  IFS='|' read -r name sets sizes batch seq <<<"$shape"
  for round in $(seq 1 "$rounds"); do
    # shellcheck disable=SC2086
    "$gdn" train configs/default.yaml $sets --set data.seq_len="$seq" --set train.batch_size="$batch" \
      --set train.steps=30 --set train.log_every=10 --set train.eval_every=0 --set train.save_every=0 \
      --set train.out_dir="$out/gdn-run" --overwrite --quiet >"$out/gdn-$name-$round.log" 2>&1
    tail -1 "$out/gdn-run/metrics.jsonl" >"$out/gdn-$name-$round.json"
    for mode in eager compile; do
      flag=$([ $mode = compile ] && echo --compile || true)
      # shellcheck disable=SC2086
      "$python" scripts/torch_gdn_model.py $sizes --seq "$seq" --batch "$batch" --steps 10 \
        --threads "$threads" $flag >"$out/torch_$mode-$name-$round.json" 2>"$out/torch_$mode-$name-$round.log"
    done
    echo "$name round $round done" >&2
  done
done
"$python" - "$out" "${shapes[@]}" <<'PY'
import glob, json, os, sys
out, shapes = sys.argv[1], [s.split("|")[0] for s in sys.argv[2:]]
best = lambda pat: max((json.load(open(f)) for f in glob.glob(f"{out}/{pat}")),
                       key=lambda r: r["tokens_per_s"])
rows = []
print(f"{'shape':<14} {'gdn tok/s':>10} {'eager':>8} {'compile':>8} {'vs eager':>9} {'vs compile':>11}"
      f" {'of gemm bound':>14}")
for name in shapes:
    g, e, c = best(f"gdn-{name}-*.json"), best(f"torch_eager-{name}-*.json"), best(f"torch_compile-{name}-*.json")
    gt, et, ct = g["tokens_per_s"], e["tokens_per_s"], c["tokens_per_s"]
    bound = g.get("of_gemm_bound")
    print(f"{name:<14} {gt:10.0f} {et:8.0f} {ct:8.0f} {gt / et:8.2f}x {gt / ct:10.2f}x"
          f" {'' if bound is None else f'{100 * bound:13.1f}%'}")
    rows.append({"shape": name, "gdn": g, "torch_eager": e, "torch_compile": c,
                 "vs_eager": gt / et, "vs_compile": gt / ct})
peer = {k: rows[0]["torch_compile"].get(k) for k in ("torch", "blas", "mkl", "mkldnn", "cpu_capability", "threads")}
json.dump({"peer": peer, "cpu": open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].split(":", 1)[1].strip(),
           "rows": rows}, open(f"{out}/summary.json", "w"), indent=1)
print(f"peer: torch {peer['torch']} ({peer['blas']}, {peer['cpu_capability']}, {peer['threads']} threads)")
PY
