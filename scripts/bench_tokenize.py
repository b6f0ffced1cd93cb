#!/usr/bin/env python3
"""`gdn tokenize` against Hugging Face `tokenizers`' encode_batch, 2 threads, same documents.

Trains a 32K-vocabulary tokenizer of each family's pipeline (GPT-2, Llama 3, Qwen) with the
library on the Python standard library's sources, writes those sources as JSON Lines (a file a
document), then alternates, round by round: the whole `gdn tokenize --threads 2` process (start,
load, read, encode, write) and the library's from_file + encode_batch in this process
(RAYON_NUM_THREADS=2; the interpreter's start and the file reading not counted). Checks that the
ids are equal, and prints JSON in the form of docs/benchmarks/tokenize-cpu.json.

  .venv-tokenizers/bin/python scripts/bench_tokenize.py --gdn build/gdn [--mb 20] [--rounds 3]
"""
import argparse
import glob
import json
import os
import pathlib
import platform
import subprocess
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "2"  # before the library starts its pool
import tokenizers  # noqa: E402
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402

GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
          r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def family_tokenizer(family):
    tok = Tokenizer(models.BPE(ignore_merges=family == "llama3"))
    if family == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        if family == "qwen":
            tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    return tok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gdn", default="build/gdn")
    ap.add_argument("--mb", type=float, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", default="/tmp/gdn_bench_tokenize")
    a = ap.parse_args()
    work = pathlib.Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    lib = pathlib.Path(sys.base_prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    docs, size = [], 0
    for path in sorted(glob.glob(str(lib / "**" / "*.py"), recursive=True)):
        text = pathlib.Path(path).read_text(encoding="utf-8", errors="replace")
        docs.append(text)
        size += len(text.encode())
        if size >= a.mb * 1e6:
            break
    jsonl = work / "docs.jsonl"
    jsonl.write_text("".join(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in docs))
    results = []
    for family in ["gpt2", "llama3", "qwen"]:
        tok = family_tokenizer(family)
        trainer = trainers.BpeTrainer(vocab_size=32000, special_tokens=["<|endoftext|>"],
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                      show_progress=False)
        tok.train_from_iterator(docs[: max(1, len(docs) // 4)], trainer)
        tj = work / f"{family}.json"
        tok.save(str(tj))
        out = work / f"{family}.ids.jsonl"
        gdn_s, lib_s = [], []
        for _ in range(a.rounds):
            t = time.perf_counter()
            subprocess.run([a.gdn, "tokenize", "--tokenizer", str(tj), "--input", str(jsonl),
                            "--out", str(out), "--threads", "2"], check=True,
                           stderr=subprocess.DEVNULL)
            gdn_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            enc = Tokenizer.from_file(str(tj)).encode_batch(docs, add_special_tokens=False)
            lib_s.append(time.perf_counter() - t)
        with open(out, encoding="utf-8") as f:
            gdn_ids = [json.loads(line)["ids"] for line in f]
        same = gdn_ids == [e.ids for e in enc]
        results.append({
            "family": family, "vocab_size": tok.get_vocab_size(), "documents": len(docs),
            "mb": size / 1e6, "tokens": sum(len(e.ids) for e in enc), "ids_equal": same,
            "gdn_tokenize_process_s": min(gdn_s), "tokenizers_encode_batch_s": min(lib_s),
            "gdn_mb_per_s": size / 1e6 / min(gdn_s), "tokenizers_mb_per_s": size / 1e6 / min(lib_s),
            "gdn_speedup": min(lib_s) / min(gdn_s)})
    print(json.dumps({
        "command": "scripts/bench_tokenize.py --gdn build/gdn --mb %g --rounds %d" % (a.mb, a.rounds),
        "threads": 2, "tokenizers": tokenizers.__version__, "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(), "best_of_rounds": a.rounds,
        "results": results}, indent=1))
    sys.exit(0 if all(r["ids_equal"] for r in results) else 1)


if __name__ == "__main__":
    main()
