#!/usr/bin/env bash
# The README's worked example (examples/finetune/run.sh) in a few steps: a model directory
# continued on the default corpus, then fine-tuned on prompt/completion pairs; gdn eval must report
# the loss of the completions (the loss mask), and every command must succeed.
# Usage: check_finetune_example.sh GDN SOURCE_DIR
set -euo pipefail
gdn=$1 root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$root"
out=$(examples/finetune/run.sh "$gdn" "$tmp" -- --set train.steps=4 \
  --set train.eval_every=2 --set train.eval_batches=2 --set train.save_every=4 \
  --set train.warmup_steps=1 2>&1)
echo "$out"
echo "$out" | grep -q '"loss_mask":"completions"' ||
  { echo "FAIL: gdn eval does not report the completions' loss" >&2; exit 1; }
echo "$out" | grep -q 'loss on completions only' ||
  { echo "FAIL: the fine-tuning run does not say its loss is masked" >&2; exit 1; }
echo "finetune example: OK"
