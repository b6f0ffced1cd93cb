#!/usr/bin/env bash
# A machine without a usable cuDNN or NCCL: with empty stand-ins for libcudnn.so.9 and
# libnccl.so.2 first on the library path (tests/empty_library.cpp), `gdn info` reports both
# not available (in a CUDA build) and a hybrid model (attention in one layer) trains on the CPU.
# Where a GPU is present, bf16 attention runs the flash kernel there, saying why once, and an
# explicit request for cuDNN's attention is refused naming what was found.
# Usage: check_without_vendor_libraries.sh GDN STUB_DIR SOURCE_DIR
set -euo pipefail
gdn=$1 stubs=$2 root=$3
export LD_LIBRARY_PATH=$stubs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
info=$("$gdn" info)
echo "$info"
if echo "$info" | grep -q "^cuda *: compiled in"; then
  for lib in cudnn nccl; do
    echo "$info" | grep -Eq "^$lib +: not available: .*lib$lib\.so\.[0-9]+ lacks" ||
      { echo "FAIL: gdn info does not report $lib as not available" >&2; exit 1; }
  done
fi
mkdir -p "$tmp/text"
for i in 1 2 3 4; do
  for j in $(seq 1 40); do echo "document $i line $j: the quick brown fox jumps over the lazy dog"; done >"$tmp/text/doc$i.txt"
done
"$gdn" train "${root}/configs/hybrid.yaml" --quiet \
  --set model.hidden_size=64 --set model.num_heads=2 --set model.head_dim=32 \
  --set model.num_hidden_layers=2 --set "model.attn={layers: [1], num_heads: 2, num_kv_heads: 1}" \
  --set model.kernel=chunked --set model.chunk_size=16 \
  --set data.seq_len=32 --set "data.inputs=[$tmp/text]" --set train.steps=3 \
  --set train.batch_size=2 --set train.eval_every=0 --set train.save_every=3 \
  --set train.warmup_steps=1 --set train.device=cpu --set "train.out_dir=$tmp/run"
test -s "$tmp/run/metrics.jsonl" || { echo "FAIL: the hybrid run wrote no metrics" >&2; exit 1; }
if echo "$info" | grep -Eq "^cuda devices: [1-9]"; then
  rc=0
  "$gdn" bench --device cuda --impls attention,attention_cudnn --dtypes bfloat16 --batch 1 \
    --heads 4 --seq 256 --dims 64 --modes fwd --repeats 1 --out "${tmp}/attention.json" \
    2>"$tmp/bench.err" || rc=$?
  cat "$tmp/bench.err"
  [ $rc = 2 ] || { echo "FAIL: the bench exited $rc, not 2 (the cudnn row fails)" >&2; exit 1; }
  grep -q "attention runs the flash kernel where cuDNN would: cuDNN is not available" \
    "$tmp/bench.err" || { echo "FAIL: no line saying why attention left cuDNN" >&2; exit 1; }
  python3 - "${tmp}/attention.json" <<'PY' || exit 1
import json, sys
rows = {r["impl"]: r for r in json.load(open(sys.argv[1]))["results"]}
a, c = rows["attention"], rows["attention_cudnn"]
assert "error" not in a and a.get("attention_kernel") == "flash", f"attention row: {a}"
assert "cuDNN is not available" in c.get("error", ""), f"attention_cudnn row: {c}"
print("PASS: on the GPU attention ran the flash kernel; cudnn was refused:", c["error"][:120])
PY
fi
echo "PASS: trained a hybrid model without cuDNN and NCCL"
