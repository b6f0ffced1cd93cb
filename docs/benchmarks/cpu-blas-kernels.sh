#!/bin/bash
cd "$(dirname "$0")/../.."
export OMP_WAIT_POLICY=passive
for round in $(seq 1 "${ROUNDS:-2}"); do
  for ct in Prescott auto; do
    if [ $ct = auto ]; then unset OPENBLAS_CORETYPE; else export OPENBLAS_CORETYPE=$ct; fi
    build-cpu/gdn train configs/default.yaml --set train.steps=30 --set train.log_every=10 --set train.eval_every=0 --set train.save_every=0 --set train.out_dir=/tmp/tput-run --overwrite --quiet > /tmp/tput-$ct-$round.log 2>&1
    echo "$round $ct $(tail -c 300 /tmp/tput-run/metrics.jsonl | tail -1)"
  done
done
