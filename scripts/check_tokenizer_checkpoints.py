#!/usr/bin/env python3
"""A run prepared with each fixture tokenizer.json trains, and its checkpoint loads in
transformers' AutoTokenizer with the ids gdn gives (outside CI: needs `tokenizers` and
`transformers`, e.g. the venv of scripts/make_tokenizer_fixtures.sh plus `pip install transformers`).

For each family under tests/data/tokenizers: `gdn train` a tiny model for 2 steps on the Python
json package's sources with data.tokenizer set to the family's tokenizer.json, then on the
checkpoint: AutoTokenizer ids (add_special_tokens=False) == `gdn tokenize --tokenizer CKPT` ids ==
tokenizers.Tokenizer ids for every fixture document, AutoTokenizer.decode == `gdn tokenize
--decode`, and config.json's bos/eos ids == AutoTokenizer's.

  scripts/check_tokenizer_checkpoints.py --gdn build/gdn [--work /tmp/gdn_tok_ckpt]
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys

import tokenizers
import transformers

ROOT = pathlib.Path(__file__).resolve().parent.parent
FAMILIES = ["gpt2", "llama3", "qwen", "llama2", "mistral"]


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def check_family(gdn, work, family):
    fixture = ROOT / "tests/data/tokenizers" / family
    run_dir = work / family
    config = work / f"{family}.yaml"
    config.write_text(f"""model:
  hidden_size: 32
  num_hidden_layers: 1
  num_heads: 2
  head_dim: 16
  vocab_size: 1280
data:
  inputs: [{sys.base_prefix}/lib/python{sys.version_info.major}.{sys.version_info.minor}/json]
  tokenizer: {fixture / 'tokenizer.json'}
  seq_len: 32
  val_fraction: 0.2
train:
  steps: 2
  batch_size: 2
  eval_every: 0
  save_every: 2
  out_dir: {run_dir}
""")
    run([gdn, "train", str(config), "--overwrite", "--quiet"])
    ckpt = run_dir / "checkpoints" / (run_dir / "latest").read_text().strip()
    texts = [json.loads(l)["text"] for l in (fixture / "cases.jsonl").read_text().split("\n") if l]
    inp = work / f"{family}.in.jsonl"
    inp.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts if t))
    ids_path, text_path = work / f"{family}.ids.jsonl", work / f"{family}.text.jsonl"
    run([gdn, "tokenize", "--tokenizer", str(ckpt), "--input", str(inp), "--out", str(ids_path)])
    run([gdn, "tokenize", "--decode", "--tokenizer", str(ckpt), "--input", str(ids_path),
         "--out", str(text_path)])
    gdn_ids = [json.loads(l)["ids"] for l in ids_path.read_text().split("\n") if l]
    gdn_text = [json.loads(l)["text"] for l in text_path.read_text().split("\n") if l]
    auto = transformers.AutoTokenizer.from_pretrained(str(ckpt))
    lib = tokenizers.Tokenizer.from_file(str(fixture / "tokenizer.json"))
    bad = 0
    for t, ids, dec in zip([t for t in texts if t], gdn_ids, gdn_text):
        a = auto.encode(t, add_special_tokens=False)
        b = lib.encode(t, add_special_tokens=False).ids
        if not (a == ids == b) or auto.decode(ids, skip_special_tokens=False) != dec:
            bad += 1
    cfg = json.loads((ckpt / "config.json").read_text())
    ids_agree = cfg["bos_token_id"] == auto.bos_token_id and cfg["eos_token_id"] == auto.eos_token_id
    return {"family": family, "documents": len(gdn_ids), "mismatches": bad,
            "bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"],
            "config_ids_agree_with_autotokenizer": ids_agree,
            "autotokenizer_class": type(auto).__name__}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gdn", default=str(ROOT / "build/gdn"))
    ap.add_argument("--work", default="/tmp/gdn_tok_ckpt")
    a = ap.parse_args()
    work = pathlib.Path(a.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    results = [check_family(a.gdn, work, f) for f in FAMILIES]
    print(json.dumps({"tokenizers": tokenizers.__version__, "transformers": transformers.__version__,
                      "results": results}, indent=1))
    ok = all(r["mismatches"] == 0 and r["config_ids_agree_with_autotokenizer"] for r in results)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
