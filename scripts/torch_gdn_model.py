#!/usr/bin/env python3
"""A PyTorch model of configs/default.yaml's architecture (fla's GatedDeltaNet math: q/k/v
projections, causal short convs with SiLU, L2-normalised q and k, beta = sigmoid, g =
-exp(A_log) softplus(a + dt_bias), the chunked gated delta rule of scripts/torch_chunked_floor.py,
gated RMSNorm, o_proj; pre-norm blocks with a SwiGLU MLP; tied embeddings; AdamW, fused where
PyTorch has it), of any width and depth, trained on random token batches on the CPU, eager or
torch.compile'd (--compile: inductor, static shapes, compiled in the warm-up steps): prints its
tokens/s, versions and BLAS as one JSON line. scripts/bench_train_cpu.sh runs it alternately
with `gdn train`, on PyPI's PyTorch (scripts/torch_venv.sh):
    $(scripts/torch_venv.sh) scripts/torch_gdn_model.py --seq 256 --batch 8 --steps 20 --compile
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_chunked_floor import chunked  # noqa: E402
from torch_peer import maybe_compile, versions  # noqa: E402


class ShortConv(nn.Module):
    """Depthwise causal conv over time, then SiLU (fla's ShortConvolution)."""

    def __init__(self, channels, size):
        super().__init__()
        self.size = size
        self.weight = nn.Parameter(torch.randn(channels, 1, size) * 0.02)

    def forward(self, x):  # [B, T, C]
        y = F.conv1d(F.pad(x.transpose(1, 2), (self.size - 1, 0)), self.weight, groups=x.shape[-1])
        return F.silu(y.transpose(1, 2))


class GatedDeltaNet(nn.Module):
    def __init__(self, d, heads, head_dim, conv_size=4):
        super().__init__()
        self.h, self.k = heads, head_dim
        kd = heads * head_dim
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(d, kd, bias=False) for _ in range(3))
        self.a_proj, self.b_proj = nn.Linear(d, heads, bias=False), nn.Linear(d, heads, bias=False)
        self.g_proj, self.o_proj = nn.Linear(d, kd, bias=False), nn.Linear(kd, d, bias=False)
        self.q_conv1d, self.k_conv1d, self.v_conv1d = (ShortConv(kd, conv_size) for _ in range(3))
        self.A_log = nn.Parameter(torch.log(torch.empty(heads).uniform_(1, 16)))
        self.dt_bias = nn.Parameter(torch.zeros(heads))
        self.o_norm = nn.Parameter(torch.ones(head_dim))

    def forward(self, x):
        B, T, _ = x.shape
        q = F.normalize(self.q_conv1d(self.q_proj(x)).view(B, T, self.h, self.k), dim=-1, eps=1e-6)
        k = F.normalize(self.k_conv1d(self.k_proj(x)).view(B, T, self.h, self.k), dim=-1, eps=1e-6)
        v = self.v_conv1d(self.v_proj(x)).view(B, T, self.h, self.k)
        beta = torch.sigmoid(self.b_proj(x))
        g = -self.A_log.exp() * F.softplus(self.a_proj(x) + self.dt_bias)
        o = chunked(q, k, v, g, beta, self.k ** -0.5)
        o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + 1e-6) * self.o_norm
        o = o * F.silu(self.g_proj(x).view(B, T, self.h, self.k))
        return self.o_proj(o.reshape(B, T, -1))


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Block(nn.Module):
    def __init__(self, d, heads, head_dim, inter):
        super().__init__()
        self.attn_norm, self.attn = RMSNorm(d), GatedDeltaNet(d, heads, head_dim)
        self.mlp_norm = RMSNorm(d)
        self.gate_proj, self.up_proj = nn.Linear(d, inter, bias=False), nn.Linear(d, inter, bias=False)
        self.down_proj = nn.Linear(inter, d, bias=False)

    def forward(self, x):
        h = x + self.attn(self.attn_norm(x))
        y = self.mlp_norm(h)
        return h + self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y))


class Model(nn.Module):
    def __init__(self, vocab=258, d=256, layers=4, heads=4, head_dim=64):
        super().__init__()
        inter = 256 * ((int(d * 4 * 2 / 3) + 255) // 256)  # fla's SwiGLU width
        self.embeddings = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Block(d, heads, head_dim, inter) for _ in range(layers))
        self.norm = RMSNorm(d)
        for m in self.modules():  # fla's init: N(0, initializer_range = 0.02)
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, ids, targets):
        x = self.embeddings(ids)
        for block in self.layers:
            x = block(x)
        logits = self.norm(x) @ self.embeddings.weight.t()  # tied head
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=20, help="timed steps (after 3 warm-up steps)")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (inductor)")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = Model(d=a.hidden, layers=a.layers, heads=a.heads, head_dim=a.head_dim)
    try:  # the fused CPU AdamW where this PyTorch has it (2.4+): the fastest it offers
        opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.1, fused=True)
        adamw = "fused"
    except (RuntimeError, TypeError):
        opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.1)
        adamw = "default"
    params = sum(p.numel() for p in model.parameters())
    ids = torch.randint(0, 258, (a.batch, a.seq + 1))
    forward = maybe_compile(model, a.compile)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = forward(ids[:, :-1], ids[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    w0 = time.perf_counter()
    for _ in range(3):
        step()
    warmup_s = time.perf_counter() - w0
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    s = time.perf_counter() - t0
    print(json.dumps({"impl": "torch_compile" if a.compile else "torch_eager", "batch": a.batch,
                      "seq": a.seq, "hidden": a.hidden, "layers": a.layers, "heads": a.heads,
                      "head_dim": a.head_dim, "params": params, "steps": a.steps,
                      "tokens_per_s": a.batch * a.seq * a.steps / s, "step_ms": 1e3 * s / a.steps,
                      "warmup_s": warmup_s, "loss": loss, "adamw": adamw, **versions()}))


if __name__ == "__main__":
    main()
