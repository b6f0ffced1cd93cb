#!/usr/bin/env python3
"""Kimi Delta Attention as a PyTorch user runs it on the CPU: fla 0.6.0's own reference,
`naive_chunk_kda` (the chunked algorithm in PyTorch ops, autograd for the backward; loaded from the
installed fla package's naive.py of its kda ops, nothing else of fla imported), eager or torch.compile'd
(--compile), fp32, timed fwd_bwd (or fwd) in the bench's JSON schema (impl "torch_naive_chunk_kda",
"_compile" added when compiled) with the torch version and BLAS, after checking itself against
fla's naive_recurrent_kda in fp64 on a small problem. scripts/bench_kernel_cpu.sh kda runs it
alternately with `gdn bench --op kda --impls chunked`. Needs torch and fla 0.6.0 (the venv of
docs/interop-fla.md: PYTHON=.venv-fla/bin/python).
"""
import argparse
import importlib.util
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_peer import kernel_args, maybe_compile, report, time_calls  # noqa: E402


def fla_naive():
    """fla's naive.py of the kda ops as a module of its own (it imports only torch and einops)."""
    spec = importlib.util.find_spec("fla")
    if spec is None:
        sys.exit("torch_kda_cpu: fla is not installed in this python (docs/interop-fla.md)")
    path = os.path.join(os.path.dirname(spec.origin), "ops", "kda", "naive.py")
    module_spec = importlib.util.spec_from_file_location("fla_kda_naive", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def inputs(B, T, H, D, dtype, seed=0):
    """As the layer makes them: k L2-normalised, per-channel log decays, beta in (0, 1)."""
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)
    q, k, v = r(B, T, H, D), r(B, T, H, D), r(B, T, H, D)
    k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    g = torch.nn.functional.logsigmoid(r(B, T, H, D) + 4)
    beta = torch.sigmoid(r(B, T, H))
    return [x.to(dtype) for x in (q, k, v, g, beta)]


def main():
    a = kernel_args(argparse.ArgumentParser(description=__doc__.split("\n")[0])).parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    naive = fla_naive()
    chunk = lambda q, k, v, g, beta: naive.naive_chunk_kda(q, k, v, g, beta, chunk_size=64)[0]
    small = inputs(1, 128, 2, 32, torch.float64, seed=1)
    ref = naive.naive_recurrent_kda(*small)[0].double()
    err = ((chunk(*small).double() - ref).abs().max() / ref.abs().max()).item()
    assert err < 1e-4, f"naive_chunk_kda against naive_recurrent_kda: rel err {err}"
    run = maybe_compile(chunk, a.compile)
    xs = [x.detach().requires_grad_(a.mode == "fwd_bwd")
          for x in inputs(a.batch, a.seq, a.heads, a.dim, torch.float32)]
    median, q1, q3 = time_calls(run, xs, a.mode, a.repeats)
    report(a, "torch_naive_chunk_kda", chunk_size=64, median_ms=median, q1_ms=q1, q3_ms=q3,
           self_check_rel_err=err)


if __name__ == "__main__":
    main()
