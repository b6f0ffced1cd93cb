#!/usr/bin/env python3
"""The floor a user would otherwise have: a straightforward PyTorch implementation of the chunked
gated delta rule (docs/design.md, "The gated delta rule", eager ops, autograd for the backward), timed on the seed's
shapes on a CUDA device, in the seed benchmark's JSON schema (impl "torch_chunked").

It first checks itself against a step-by-step recurrence in float64 on a small problem, then
times fwd and fwd_bwd (CUDA events, L2 scrubbed before each run). Runs where PyTorch is installed:
    python3 scripts/torch_chunked_floor.py --out runs/gpu-check/torch-floor.json
"""
import argparse
import json
import math
import statistics

import torch


def recurrent(q, k, v, g, beta, scale):
    """o_t = S_t^T (scale q_t), S_t = exp(g_t) S_{t-1} + k_t beta_t (v_t - (exp(g_t) S_{t-1})^T k_t)."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    S = q.new_zeros(B, H, K, V)
    out = []
    for t in range(T):
        S = S * torch.exp(g[:, t])[..., None, None]
        u = beta[:, t][..., None] * (v[:, t] - torch.einsum("bhkv,bhk->bhv", S, k[:, t]))
        S = S + torch.einsum("bhk,bhv->bhkv", k[:, t], u)
        out.append(torch.einsum("bhkv,bhk->bhv", S, scale * q[:, t]))
    return torch.stack(out, 1)


def chunked(q, k, v, g, beta, scale, C=64):
    """The WY/UT chunked form: per chunk A = (I + M)^-1, W = A Xw, U = A Xu, Vn = U - W S,
    O = (gamma Q) S + (Q K^T o Gam) Vn, S' = gamma_C S + K^T (e o Vn). T must be a multiple of C."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    n = T // C
    f32 = lambda x: x.float()
    q, k, v, g, beta = f32(q) * scale, f32(k), f32(v), f32(g), f32(beta)
    # [B, H, n, C, .]
    q, k, v = (x.reshape(B, n, C, H, -1).permute(0, 3, 1, 2, 4) for x in (q, k, v))
    g, beta = (x.reshape(B, n, C, H).permute(0, 3, 1, 2) for x in (g, beta))
    G = g.cumsum(-1)
    gamma = torch.exp(G)
    e = torch.exp(G[..., -1:] - G)
    lower = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    diff = (G[..., :, None] - G[..., None, :]).masked_fill(~lower, -math.inf)
    Gam = torch.exp(diff)
    M = (beta[..., None] * (k @ k.transpose(-1, -2)) * Gam).tril(-1)
    eye = torch.eye(C, device=q.device)
    A = torch.linalg.solve_triangular(eye + M, eye.expand_as(M), upper=False, unitriangular=True)
    W = A @ (beta[..., None] * gamma[..., None] * k)
    U = A @ (beta[..., None] * v)
    P = (q @ k.transpose(-1, -2)) * Gam
    S = q.new_zeros(B, H, K, V)
    outs = []
    for c in range(n):
        Vn = U[:, :, c] - W[:, :, c] @ S
        outs.append(gamma[:, :, c, :, None] * (q[:, :, c] @ S) + P[:, :, c] @ Vn)
        S = gamma[:, :, c, -1, None, None] * S + k[:, :, c].transpose(-1, -2) @ (e[:, :, c, :, None] * Vn)
    o = torch.stack(outs, 2)  # [B, H, n, C, V]
    return o.permute(0, 2, 3, 1, 4).reshape(B, T, H, V)


def inputs(B, T, H, D, dtype, device, seed=0):
    gen = torch.Generator(device="cpu").manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)
    q, k, v = r(B, T, H, D), r(B, T, H, D), r(B, T, H, D)
    k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    g = torch.nn.functional.logsigmoid(r(B, T, H) + 4)
    beta = torch.sigmoid(r(B, T, H))
    do = r(B, T, H, D)
    return [x.to(device=device, dtype=dtype) for x in (q, k, v, g, beta, do)]


def self_check(device):
    q, k, v, g, beta, _ = inputs(1, 128, 2, 32, torch.float64, device, seed=1)
    ref = recurrent(q, k, v, g, beta, 32 ** -0.5)
    got = chunked(q, k, v, g, beta, 32 ** -0.5, C=64).double()  # computes in fp32
    return ((got - ref).abs().max() / ref.abs().max()).item()


def time_ms(fn, repeats, scrub):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    ms = []
    for _ in range(repeats):
        scrub.zero_()
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        ms.append(start.elapsed_time(stop))
    ms.sort()
    q = statistics.quantiles(ms, n=4) if len(ms) > 1 else [ms[0]] * 3
    return statistics.median(ms), q[0], q[2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="torch-floor.json")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    device = "cuda"
    err = self_check(device)
    print(f"self-check: chunked vs recurrent (fp64) rel err {err:.2e}", flush=True)
    scrub = torch.empty(256 << 20, dtype=torch.uint8, device=device)
    results = []
    for dtype in (torch.bfloat16, torch.float32):
        for D in (64, 128):
            for T in (512, 2048, 8192):
                q, k, v, g, beta, do = inputs(4, T, 8, D, dtype, device)
                for mode in ("fwd", "fwd_bwd"):
                    xs = [x.detach().requires_grad_(mode == "fwd_bwd") for x in (q, k, v, g, beta)]

                    def run():
                        o = chunked(*xs, D ** -0.5)
                        if mode == "fwd_bwd":
                            o.backward(do.float())

                    torch.cuda.reset_peak_memory_stats()
                    try:
                        med, q1, q3 = time_ms(run, a.repeats, scrub)
                    except torch.OutOfMemoryError as e:
                        results.append({"impl": "torch_chunked", "mode": mode, "seq": T, "dk": D,
                                        "dtype": str(dtype).split(".")[-1], "error": str(e)[:200]})
                        continue
                    r = {"impl": "torch_chunked", "mode": mode, "batch": 4, "heads": 8, "seq": T,
                         "dk": D, "dv": D, "dtype": str(dtype).split(".")[-1], "chunk_size": 64,
                         "median_ms": med, "q1_ms": q1, "q3_ms": q3,
                         "peak_mb": torch.cuda.max_memory_allocated() / 2**20}
                    results.append(r)
                    print(json.dumps(r), flush=True)
    doc = {"device": {"framework": f"torch {torch.__version__}",
                      "gpu": torch.cuda.get_device_name(), "self_check_rel_err": err},
           "config": {"batch": 4, "heads": 8, "seq_lens": [512, 2048, 8192], "dims": [64, 128],
                      "impls": ["torch_chunked"], "chunk_sizes": [64], "repeats": a.repeats},
           "results": results}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
