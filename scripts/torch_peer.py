"""What the comparison scripts record of the PyTorch they race (scripts/torch_venv.sh): its
version, BLAS, CPU capability and threads, and how a model or function is compiled for it."""
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
