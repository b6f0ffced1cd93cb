#!/usr/bin/env python3
"""The gated delta rule as a PyTorch user writes it on the CPU: the chunked (WY / UT) form in
torch ops (scripts/torch_chunked_floor.py's `chunked`, autograd for the backward), eager or
torch.compile'd (--compile), fp32, timed fwd_bwd (or fwd) in the bench's JSON schema (impl
"torch_chunked", "_compile" added when compiled) with the torch version and BLAS, after checking
itself against the fp64 recurrence on a small problem. scripts/bench_gdr_cpu.sh runs it
alternately with `gdn bench --impls fused`, on PyPI's PyTorch (scripts/torch_venv.sh).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_chunked_floor import chunked, inputs, recurrent  # noqa: E402
from torch_peer import kernel_args, maybe_compile, report, time_calls  # noqa: E402


def main():
    a = kernel_args(argparse.ArgumentParser(description=__doc__.split("\n")[0])).parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    q, k, v, g, beta, _ = inputs(1, 128, 2, 32, torch.float64, "cpu", seed=1)
    ref = recurrent(q, k, v, g, beta, 32 ** -0.5)
    err = ((chunked(q, k, v, g, beta, 32 ** -0.5).double() - ref).abs().max() / ref.abs().max()).item()
    assert err < 1e-4, f"chunked against the recurrence: rel err {err}"
    run = maybe_compile(chunked, a.compile)
    q, k, v, g, beta, _ = inputs(a.batch, a.seq, a.heads, a.dim, torch.float32, "cpu")
    xs = [x.detach().requires_grad_(a.mode == "fwd_bwd") for x in (q, k, v, g, beta)]

    median, q1, q3 = time_calls(run, xs, a.mode, a.repeats, a.dim ** -0.5)
    report(a, "torch_chunked", chunk_size=64, median_ms=median, q1_ms=q1, q3_ms=q3,
           self_check_rel_err=err)


if __name__ == "__main__":
    main()
