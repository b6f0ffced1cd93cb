#!/usr/bin/env python3
"""Causal attention in PyTorch on the CPU, as a user would run it: F.scaled_dot_product_attention
(--impl sdpa, is_causal, PyTorch's fused CPU kernel: the peer), or the math written out,
softmax(Q K^T / sqrt(D) + causal mask) V (--impl math), eager or torch.compile'd (--compile),
autograd for the backward. Times fwd_bwd (or fwd) in the bench's JSON schema (impl
"torch_sdpa", "torch_math", "_compile" added when compiled), with the torch version and BLAS,
after checking both forms against a float64 loop on a small problem. scripts/bench_attention_cpu.sh
runs it alternately with `gdn bench --impls attention`, on PyPI's PyTorch (scripts/torch_venv.sh):
    $(scripts/torch_venv.sh) scripts/torch_attention.py --seq 2048 --heads 4 --dim 64 --out t.json
"""
import argparse
import math

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_peer import kernel_args, maybe_compile, report, time_calls  # noqa: E402


def math_attention(q, k, v, window=0):
    """q, k, v [B, H, T, D]: causal (and, with a window, banded) softmax attention."""
    T, D = q.shape[-2], q.shape[-1]
    scores = q @ k.transpose(-1, -2) / math.sqrt(D)
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    hidden = j > i
    if window > 0:
        hidden = hidden | (j <= i - window)
    scores = scores.masked_fill(hidden, float("-inf"))
    return scores.softmax(-1) @ v


def sdpa_attention(q, k, v, window=0):
    """PyTorch's fused scaled_dot_product_attention; a window as a boolean mask."""
    if window == 0:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    T = q.shape[-2]
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=(j <= i) & (j > i - window))


def check(window, attention):
    """`attention` against a query-by-query float64 loop."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 9, 4, dtype=torch.float64) for _ in range(3))
    o = attention(q, k, v, window)
    for t in range(9):
        lo = max(0, t - window + 1) if window > 0 else 0
        s = (q[..., t:t + 1, :] @ k[..., lo:t + 1, :].transpose(-1, -2)).squeeze(-2) / 2.0
        ref = (s.softmax(-1)[..., None] * v[..., lo:t + 1, :]).sum(-2)
        assert torch.allclose(o[..., t, :], ref, atol=1e-12), f"{attention.__name__} is wrong"


def main():
    ap = kernel_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    ap.add_argument("--window", type=int, default=0)
    ap.add_argument("--impl", choices=["sdpa", "math"], default="sdpa")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    attention = sdpa_attention if a.impl == "sdpa" else math_attention
    check(a.window, attention)
    run = maybe_compile(attention, a.compile)
    torch.manual_seed(1)
    shape = (a.batch, a.heads, a.seq, a.dim)
    q, k, v = (torch.randn(shape, requires_grad=a.mode == "fwd_bwd") for _ in range(3))

    median, q1, q3 = time_calls(run, [q, k, v], a.mode, a.repeats, a.window)
    report(a, f"torch_{a.impl}", window=a.window, median_ms=median, q1_ms=q1, q3_ms=q3)


if __name__ == "__main__":
    main()
