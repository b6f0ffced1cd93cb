#!/usr/bin/env python3
"""The peer on a GPU: flash-linear-attention's Triton kernel chunk_gated_delta_rule (fla-core),
timed at the seed's shapes (B=4, H=8, T 512/2048/8192, K=V 64/128, bf16 and fp32, chunk 64) in
`gdn bench`'s JSON schema (impl "fla_chunk"), so its rows sit beside `gdn bench --device cuda
--preset seed`'s. The same inputs as scripts/torch_chunked_floor.py (k L2-normalised, g =
logsigmoid(x + 4), beta = sigmoid), CUDA events, L2 scrubbed before each timed call, the first
call (Triton's compile and autotune) reported as compile_s.

It checks fla first against a step-by-step fp64 recurrence on a small problem (self_check_rel_err)
and writes the JSON after every row, so a run stopped part-way keeps what it measured. Where
PyTorch, a CUDA device or fla-core is missing it says which and exits 77 (skipped).
    python3 scripts/bench_fla.py --out runs/gpu-check/bench-fla.json
A machine without network takes fla from wheels (pip download --no-deps fla-core):
    python3 -m pip install --no-deps --target /tmp/site fla_core-*.whl && PYTHONPATH=/tmp/site ...
"""
import argparse
import json
import os
import sys

SKIP = 77


def skip(why):
    print(f"bench_fla: skipped: {why}", flush=True)
    sys.exit(SKIP)


def write_json(path, doc):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="bench-fla.json")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seq", default="8192,2048,512", help="sequence lengths, in the order run")
    ap.add_argument("--dims", default="128,64")
    ap.add_argument("--dtypes", default="bfloat16,float32")
    a = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        skip(f"no PyTorch ({e})")
    if not torch.cuda.is_available():
        skip("no device (torch.cuda.is_available() is False)")
    try:
        from importlib.metadata import version

        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
        fla_version = version("fla-core")
    except Exception as e:  # ImportError, or fla failing on this Triton
        skip(f"fla-core not importable ({type(e).__name__}: {e})")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_chunked_floor import inputs, recurrent, time_ms

    def fla(q, k, v, g, beta, scale):
        return chunk_gated_delta_rule(q, k, v, g, beta, scale=scale)[0]

    # fla against the fp64 recurrence (fla computes fp32 inputs in fp32; its result cast back).
    q, k, v, g, beta, _ = inputs(1, 256, 2, 64, torch.float64, "cuda", seed=1)
    ref = recurrent(q, k, v, g, beta, 64 ** -0.5)
    got = fla(*(x.float() for x in (q, k, v, g, beta)), 64 ** -0.5).double()
    err = ((got - ref).abs().max() / ref.abs().max()).item()
    print(f"self-check: fla chunk_gated_delta_rule (fp32) vs fp64 recurrence: rel err {err:.2e}",
          flush=True)
    import triton

    seqs = [int(x) for x in a.seq.split(",")]
    dims = [int(x) for x in a.dims.split(",")]
    dtypes = a.dtypes.split(",")
    doc = {"device": {"backend": "gpu", "devices": ["cuda:0"], "gpu": torch.cuda.get_device_name(),
                      "framework": f"fla-core {fla_version}", "torch": torch.__version__,
                      "triton": triton.__version__, "torch_cuda": torch.version.cuda,
                      "self_check_rel_err": err},
           "config": {"device": "cuda", "batch": 4, "heads": 8, "seq_lens": seqs, "dims": dims,
                      "dtypes": dtypes, "impls": ["fla_chunk"], "modes": ["fwd", "fwd_bwd"],
                      "chunk_sizes": [64], "repeats": a.repeats},
           "results": []}
    scrub = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for dts in dtypes:
        dtype = getattr(torch, dts)
        for D in dims:
            for T in seqs:
                q, k, v, g, beta, do = inputs(4, T, 8, D, dtype, "cuda")
                for mode in ("fwd", "fwd_bwd"):
                    row = {"impl": "fla_chunk", "mode": mode, "batch": 4, "heads": 8, "seq": T,
                           "dk": D, "dv": D, "dtype": dts, "chunk_size": 64}
                    xs = [x.detach().requires_grad_(mode == "fwd_bwd") for x in (q, k, v, g, beta)]

                    def run():
                        for x in xs:
                            x.grad = None  # no accumulation kernels in the timing
                        o = fla(*xs, D ** -0.5)
                        if mode == "fwd_bwd":
                            o.backward(do)

                    torch.cuda.reset_peak_memory_stats()
                    try:
                        start = torch.cuda.Event(enable_timing=True)
                        stop = torch.cuda.Event(enable_timing=True)
                        start.record()
                        run()  # Triton compiles and autotunes here
                        stop.record()
                        torch.cuda.synchronize()
                        row["compile_s"] = start.elapsed_time(stop) / 1e3
                        row["median_ms"], row["q1_ms"], row["q3_ms"] = time_ms(run, a.repeats,
                                                                               scrub)
                        row["peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
                    except Exception as e:  # out of memory, a Triton failure: the row says so
                        row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                    doc["results"].append(row)
                    write_json(a.out, doc)
                    print(json.dumps(row), flush=True)
    failed = sum("error" in r for r in doc["results"])
    print(f"wrote {a.out} ({len(doc['results'])} rows, {failed} failed)")
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
