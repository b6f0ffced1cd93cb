#!/usr/bin/env bash
# TensorBoard reads what `gdn train` writes to RUN_DIR/tb (outside CI: it needs PyPI). Installs
# `tensorboard` into a venv of its own (.venv-tensorboard/, gitignored; made once and reused),
# trains a tiny byte-level model for 6 steps (checkpoints at 4 and 6), resumes it from the step-4
# checkpoint to step 10 (a second events file, whose SessionLog START must drop the first file's
# steps 5 and 6 as metrics.jsonl drops them), and checks with TensorBoard's own EventAccumulator
# every tag, step and value against metrics.jsonl, and the config text against config.yaml
# (scripts/check_tensorboard.py). Prints its JSON summary; exit status 1 on a mismatch.
# Usage: scripts/check_tensorboard.sh [GDN] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
gdn=${1:-build/gdn} out=${2:-runs/check-tensorboard}
venv=.venv-tensorboard
if ! "$venv/bin/python" -c "import tensorboard" 2>/dev/null; then
  echo "check_tensorboard: installing tensorboard from PyPI into $venv (once)" >&2
  python3 -m venv "$venv" >&2 ||
    { echo "check_tensorboard: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
  "$venv/bin/python" -m pip install -q --upgrade tensorboard >&2
fi
rm -rf "$out"
mkdir -p "$out/corpus"
for f in 0 1 2 3 4 5; do
  for i in $(seq 0 199); do echo "the quick brown fox $(((i * 7 + f) % 13)) jumps"; done >"$out/corpus/doc$f.txt"
done
cat >"$out/tiny.yaml" <<EOF
model:
  hidden_size: 32
  num_hidden_layers: 2
  num_heads: 2
  head_dim: 16
  expand_v: 1.0
  vocab_size: 256
  kernel: chunked
  chunk_size: 16
data:
  inputs: [$out/corpus]
  tokenizer: byte
  seq_len: 24
  val_fraction: 0.2
train:
  steps: 6
  batch_size: 2
  lr: 3.0e-3
  warmup_steps: 2
  eval_every: 3
  eval_batches: 2
  save_every: 4
  log_every: 1
  out_dir: $out/run
  device: cpu
EOF
"$gdn" train "$out/tiny.yaml" --quiet >"$out/train-1.log" 2>&1 || { cat "$out/train-1.log" >&2; exit 1; }
"$gdn" train "$out/tiny.yaml" --resume "$out/run/checkpoints/step-000004" --set train.steps=10 \
  --quiet >"$out/train-2.log" 2>&1 || { cat "$out/train-2.log" >&2; exit 1; }
"$venv/bin/python" scripts/check_tensorboard.py "$out/run"
