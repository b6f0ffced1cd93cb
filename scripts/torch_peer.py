"""What the comparison scripts share about the PyTorch they race (scripts/torch_venv.sh): its
version, BLAS, CPU capability and threads, how a model or function is compiled for it, and how a
call is timed on the CPU."""
import json
import statistics
import time

import torch


def versions():
    """torch's version, its BLAS (MKL for PyPI's wheels), the vector ISA it dispatches to."""
    config = torch.__config__.show()
    blas = next((p.split("=", 1)[1] for p in config.replace(",", " ").split()
                 if p.startswith("BLAS_INFO=")), "unknown")
    return {"torch": torch.__version__, "blas": blas,
            "mkl": torch.backends.mkl.is_available(),
            "mkldnn": torch.backends.mkldnn.is_available(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "threads": torch.get_num_threads()}


def maybe_compile(fn, compile):
    """fn itself, or torch.compile'd with inductor and static shapes (the first calls compile)."""
    return torch.compile(fn, backend="inductor", dynamic=False) if compile else fn


def time_calls(fn, inputs, mode, repeats, *args):
    """fn(*inputs, *args) timed on the CPU: fwd under no_grad, or fwd_bwd (a fixed upstream
    gradient of ones, the inputs' grads cleared after each call). Two untimed calls first (the
    compile, with torch.compile); returns the median, q1 and q3 in ms."""
    def step():
        if mode == "fwd":
            with torch.no_grad():
                fn(*inputs, *args)
            return
        out = fn(*inputs, *args)
        out.backward(torch.ones_like(out))
        for x in inputs:
            x.grad = None

    step()
    step()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return statistics.median(times), times[len(times) // 4], times[(3 * len(times)) // 4]


def report(a, impl, **fields):
    """The bench's JSON row of a timed kernel (impl, "_compile" added when compiled; the shape of
    kernel_args; then `fields` and versions()): printed, and written to --out when given."""
    row = {"impl": impl + ("_compile" if a.compile else ""), "mode": a.mode, "batch": a.batch,
           "heads": a.heads, "seq": a.seq, "dk": a.dim, "dv": a.dim, "dtype": "float32",
           **fields, **versions()}
    print(json.dumps(row))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(row, f, indent=1)


def kernel_args(ap):
    """The command line both kernel scripts share (a shape, the mode, timing and compile)."""
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--mode", choices=["fwd", "fwd_bwd"], default="fwd_bwd")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: its default)")
    ap.add_argument("--compile", action="store_true", help="torch.compile it (inductor)")
    ap.add_argument("--out", help="write the JSON row here")
    return ap
