#!/usr/bin/env bash
# The README's worked example, "Continue from a model", end to end:
#   1. a model directory (MODEL_DIR: fla's save_pretrained output, e.g. from make_fla_model.py;
#      without one, a freshly initialised gdn model of the same shape, written by a run of 0
#      learning rate),
#   2. continued pretraining on the default corpus (continue.yaml),
#   3. fine-tuning on prompt/completion pairs with the prompt masked (finetune.yaml),
#   4. the fine-tuned model's validation loss on the completions, and a sample.
# Usage: examples/finetune/run.sh GDN_BINARY WORK_DIR [MODEL_DIR] [-- --set k=v ...]
# Extra --set overrides go to both training runs (the test runs it with few steps).
set -euo pipefail
gdn=$(realpath "$1")
work=$2
shift 2
model=""
if [[ $# -gt 0 && $1 != "--" ]]; then
  model=$(realpath "$1")
  shift
fi
[[ $# -gt 0 && $1 == "--" ]] && shift
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
mkdir -p "$work"
work=$(realpath "$work")
cd "$repo"

if [[ -z $model ]]; then
  # fla's tiny model of make_fla_model.py, initialised by gdn: one step at learning rate 0.
  "$gdn" train configs/default.yaml --quiet --overwrite \
    --set model.hidden_size=128 --set model.num_hidden_layers=2 --set model.num_heads=2 \
    --set model.head_dim=64 --set train.steps=1 --set train.lr=0 --set train.min_lr=0 \
    --set train.warmup_steps=0 --set train.eval_every=0 --set train.save_every=1 \
    --set data.inputs="[examples/finetune/uppercase.jsonl]" --set train.out_dir="$work/base"
  model=$work/base
fi

"$gdn" train examples/finetune/continue.yaml --init-from "$model" --overwrite \
  --set train.out_dir="$work/continued" "$@"
"$gdn" train examples/finetune/finetune.yaml --init-from "$work/continued" --overwrite \
  --set train.out_dir="$work/finetuned" "$@"
"$gdn" eval "$work/finetuned"
"$gdn" generate "$work/finetuned" --prompt $'lower: gated delta rule\nupper:' --max-tokens 24 \
  --temperature 0
