#!/usr/bin/env python3
"""The gated delta rule as a PyTorch user writes it on the CPU: the chunked (WY / UT) form in
torch ops (scripts/torch_chunked_floor.py's `chunked`, autograd for the backward), eager or
torch.compile'd (--compile), fp32, timed fwd_bwd (or fwd) in the bench's JSON schema (impl
"torch_chunked", "_compile" added when compiled) with the torch version and BLAS, after checking
itself against the fp64 recurrence on a small problem. scripts/bench_gdr_cpu.sh runs it
alternately with `gdn bench --impls fused`, on PyPI's PyTorch (scripts/torch_venv.sh).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_chunked_floor import chunked, inputs, recurrent  # noqa: E402
from torch_peer import maybe_compile, versions  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--mode", choices=["fwd", "fwd_bwd"], default="fwd_bwd")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    q, k, v, g, beta, _ = inputs(1, 128, 2, 32, torch.float64, "cpu", seed=1)
    ref = recurrent(q, k, v, g, beta, 32 ** -0.5)
    err = ((chunked(q, k, v, g, beta, 32 ** -0.5).double() - ref).abs().max() / ref.abs().max()).item()
    assert err < 1e-4, f"chunked against the recurrence: rel err {err}"
    run = maybe_compile(chunked, a.compile)
    q, k, v, g, beta, do = inputs(a.batch, a.seq, a.heads, a.dim, torch.float32, "cpu")
    xs = [x.detach().requires_grad_(a.mode == "fwd_bwd") for x in (q, k, v, g, beta)]

    def step():
        if a.mode == "fwd":
            with torch.no_grad():
                run(*xs, a.dim ** -0.5)
            return
        run(*xs, a.dim ** -0.5).backward(do)
        for x in xs:
            x.grad = None

    step()  # warm-up (compiles, with --compile)
    step()
    times = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    row = {"impl": "torch_chunked" + ("_compile" if a.compile else ""), "mode": a.mode,
           "batch": a.batch, "heads": a.heads, "seq": a.seq, "dk": a.dim, "dv": a.dim,
           "dtype": "float32", "chunk_size": 64, "median_ms": statistics.median(times),
           "q1_ms": times[len(times) // 4], "q3_ms": times[(3 * len(times)) // 4],
           "self_check_rel_err": err, **versions()}
    print(json.dumps(row))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(row, f, indent=1)


if __name__ == "__main__":
    main()
