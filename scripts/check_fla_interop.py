#!/usr/bin/env python3
"""gdn checkpoints against flash-linear-attention (fla 0.6.0) itself: Gated DeltaNet and Kimi Delta
Attention (KDA) models, hybrid models included.

Usage: PYTHON scripts/check_fla_interop.py GDN_BINARY WORK_DIR   (CASES=a,b: only those cases)

PYTHON is an environment with torch, transformers, einops, triton and fla 0.6.0
(docs/interop-fla.md has the setup). Runs on the CPU in fp32, no GPU needed:

1. gdn -> fla. For each case `gdn forward CONFIG --set ... --save-weights DIR --logits` writes a
   model directory; fla loads it with GatedDeltaNetForCausalLM (KDAForCausalLM for model_type kda)
   .from_pretrained and with AutoModelForCausalLM (after `import fla`), and the check fails unless
   missing, unexpected and
   mismatched keys and error messages are all empty, every layer is the mixer config.json asks
   for (fla's Attention with gdn's heads, kv heads, bias, window and rope_theta, or GatedDeltaNet /
   KimiDeltaAttention)
   and the parameter counts agree. Then fla's logits on the same tokens are compared with gdn's,
   once on gdn's initial weights and once on the same directory with every tensor perturbed
   (norm weights away from 1, biases away from 0, O(1) logits), rerun through gdn.
2. fla -> gdn. A hybrid GatedDeltaNetConfig / KDAConfig built in Python (seeded random init,
   perturbed), save_pretrained, `gdn forward --weights DIR --logits`, compared with fla's logits.
3. KDA in fp64: a hybrid KDA model's loss and every parameter gradient from `gdn forward --dtype
   float64 --grads`, against fla's own modules in fp64 with each Triton kernel replaced by the
   PyTorch form of what it computes (fla's naive_recurrent_kda with the gate, L2 norm and beta
   sigmoid the kernel applies; the causal short conv; the gated RMSNorm; softmax attention), to
   1e-10 relative; once unpacked and once packed (cu_seqlens: fla runs each document alone).
Controls: fla's models with one convention changed must differ from gdn by far more than the
tolerance (an attention window one key wider, interleaved rotary pairs, KDA's other gate form).

Logits agree when max|gdn - fla| <= TOL * max|fla| (TOL = 1e-4, fp32: see docs/interop-fla.md).
Prints a report; exit status 0 when every check passed, 1 otherwise.

Only fla's *compute* on a CPU is patched, never the loading (names, shapes, config):
- TRITON_INTERPRET=1: fla's Triton kernels run in Triton's CPU interpreter.
- the Triton autotuner tries only the first config of each kernel (the interpreter has no
  benchmarker; the choice of tile sizes does not change the math).
- fla's GatedDeltaNet and KimiDeltaAttention layers run their fused recurrent kernel (mode
  'fused_recurrent', fla's own choice for inference up to 64 tokens): the chunked kernels do not run
  in the interpreter.
- fla.layers.attn.flash_attn_func, when the flash_attn package is absent, is a PyTorch softmax
  attention with flash-attn's semantics (causal, window_size=(left, right), GQA).
"""
from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # must precede the first import of triton

import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

warnings.filterwarnings("ignore")

TOL = 1e-4  # max|gdn - fla| / max|fla| for fp32 logits
SEQ = 100   # > 64 (fla runs its recurrent kernel at <= 64 tokens anyway), not a multiple of a chunk
BATCH = 2
PATCHES: list[str] = []

# --- Patch 1: the Triton autotuner. The interpreter has no benchmarker (no GPU driver), so
# autotuning fails before any kernel runs; keep only each kernel's first config.
import triton  # noqa: E402
import triton.runtime.autotuner as _autotuner  # noqa: E402

if os.environ.get("TRITON_INTERPRET") == "1":
    _prune = _autotuner.Autotuner.prune_configs
    _autotuner.Autotuner.prune_configs = lambda self, kwargs: _prune(self, kwargs)[:1]
    PATCHES.append("TRITON_INTERPRET=1 (fla's Triton kernels in Triton's CPU interpreter); the "
                   "autotuner keeps each kernel's first config (no benchmarker on a CPU)")

import fla  # noqa: E402  (registers gated_deltanet with the Auto classes)
import fla.layers.attn as fla_attn  # noqa: E402
import transformers  # noqa: E402
from fla.layers.attn import Attention  # noqa: E402
from fla.layers.gated_deltanet import GatedDeltaNet  # noqa: E402
from fla.layers.kda import KimiDeltaAttention  # noqa: E402
from fla.models import GatedDeltaNetConfig, GatedDeltaNetForCausalLM  # noqa: E402
from fla.models import KDAConfig, KDAForCausalLM  # noqa: E402

# model_type -> fla's config class, model class and mixer (the layers that are not attention).
FAMILIES = {"gated_deltanet": (GatedDeltaNetConfig, GatedDeltaNetForCausalLM, GatedDeltaNet),
            "kda": (KDAConfig, KDAForCausalLM, KimiDeltaAttention)}
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402


# --- Patch 3: flash_attn. fla's Attention refuses to build without flash_attn_func and calls it
# as flash_attn_func(q, k, v, causal=True, window_size=(-1, -1) or (w - 1, 0)) on [B, T, H, D]
# with fewer key/value heads (GQA: query head h reads kv head h // (H / HKV)). flash-attn's
# definition: query i sees key j iff j <= i (causal) and i - left <= j <= i + right (window).
def torch_flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False,
                          window_size=(-1, -1), **unused):
    assert dropout_p == 0.0 and not unused, unused
    B, T, H, D = q.shape
    S, HKV = k.shape[1], k.shape[2]
    k = k.repeat_interleave(H // HKV, dim=2)
    v = v.repeat_interleave(H // HKV, dim=2)
    scale = D ** -0.5 if softmax_scale is None else softmax_scale
    wide = torch.promote_types(q.dtype, torch.float32)  # fp64 stays fp64 (the fp64 check)
    s = torch.einsum("bihd,bjhd->bhij", q.to(wide), k.to(wide)) * scale
    i = torch.arange(T)[:, None] + (S - T)  # flash-attn aligns the last query with the last key
    j = torch.arange(S)[None, :]
    mask = torch.ones(T, S, dtype=torch.bool)
    if causal:
        mask &= j <= i
    if window_size[0] >= 0:
        mask &= j >= i - window_size[0]
    if window_size[1] >= 0:
        mask &= j <= i + window_size[1]
    p = s.masked_fill(~mask, float("-inf")).softmax(-1)
    return torch.einsum("bhij,bjhd->bihd", p, v.to(wide)).to(q.dtype)


def _no_varlen(*args, **kwargs):
    raise RuntimeError("flash_attn_varlen_func is not patched: this check passes no mask")


if os.environ.get("TRITON_INTERPRET") == "1":
    PATCHES.append("fla's GatedDeltaNet layers run mode='fused_recurrent' (fla's recurrent Triton "
                   "kernel): its chunked kernel does not run in Triton's interpreter")

if fla_attn.flash_attn_func is None:
    fla_attn.flash_attn_func = torch_flash_attn_func
    fla_attn.flash_attn_varlen_func = _no_varlen
    PATCHES.append("flash_attn is not installed: fla.layers.attn.flash_attn_func is a PyTorch "
                   "softmax attention with flash-attn's causal / window / GQA semantics")


# ------------------------------------------------------------------------------------------------
class Report:
    def __init__(self):
        self.rows = []
        self.failed = 0

    def check(self, case, what, ok, detail=""):
        ok = bool(ok)
        self.rows.append((case, what, ok, detail))
        self.failed += 0 if ok else 1
        print(f"  [{'PASS' if ok else 'FAIL'}] {case}: {what}" + (f"  {detail}" if detail else ""),
              flush=True)
        return ok


R = Report()


def run_gdn(gdn, args, cwd):
    p = subprocess.run([str(gdn), "forward", *map(str, args)], cwd=cwd, capture_output=True,
                       text=True)
    if p.returncode != 0:
        raise RuntimeError(f"gdn forward {' '.join(map(str, args))} failed ({p.returncode}):\n"
                           f"{p.stdout}{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def loading_info_empty(case, how, info):
    keys = ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs")
    bad = {k: sorted(map(str, info[k])) if k in info else "absent from the loading info"
           for k in keys if k not in info or info[k]}
    return R.check(case, f"{how}: no missing/unexpected/mismatched keys, no errors", not bad,
                   json.dumps(bad) if bad else "")


def attn_specs(cfg_attn, num_layers):
    """layer index -> fla's normalized attention spec (None: Gated DeltaNet)."""
    specs = {i: None for i in range(num_layers)}
    if cfg_attn is not None:
        for spec in [cfg_attn] if isinstance(cfg_attn, dict) else cfg_attn:
            for i in spec["layers"]:
                specs[i] = spec
    return specs


def check_structure(case, model, config_json):
    """Every layer is the mixer config.json asks for, with its sizes."""
    cfg = model.config
    d = cfg.hidden_size
    problems = []
    own = FAMILIES[config_json["model_type"]][2]
    specs = attn_specs(config_json.get("attn"), config_json["num_hidden_layers"])
    for i, layer in enumerate(model.model.layers):
        spec, mixer = specs[i], layer.attn
        if spec is None:
            if not isinstance(mixer, own):
                problems.append(f"layer {i}: {type(mixer).__name__}, expected {own.__name__}")
            continue
        if not isinstance(mixer, Attention):
            problems.append(f"layer {i}: {type(mixer).__name__}, expected Attention")
            continue
        hkv = spec.get("num_kv_heads") or spec["num_heads"]
        want = {"num_heads": spec["num_heads"], "num_kv_heads": hkv,
                "head_dim": d // spec["num_heads"], "qkv_bias": bool(spec.get("qkv_bias", False)),
                "window_size": spec.get("window_size"),
                "rope_theta": float(spec.get("rope_theta", 10000.0)),
                "q_proj.bias": bool(spec.get("qkv_bias", False)),
                "k_proj": (hkv * (d // spec["num_heads"]), d)}
        got = {"num_heads": mixer.num_heads, "num_kv_heads": mixer.num_kv_heads,
               "head_dim": mixer.head_dim, "qkv_bias": mixer.qkv_bias,
               "window_size": mixer.window_size, "rope_theta": float(mixer.rotary.base),
               "q_proj.bias": mixer.q_proj.bias is not None,
               "k_proj": tuple(mixer.k_proj.weight.shape)}
        for k in want:
            if want[k] != got[k]:
                problems.append(f"layer {i} {k}: fla {got[k]!r}, config.json {want[k]!r}")
    return R.check(case, "layer types and attention settings as config.json says", not problems,
                   "; ".join(problems))


def n_params(model):
    return sum(p.numel() for p in model.parameters())  # tied weights counted once


def fla_logits(model, tokens):
    model.eval()
    # --- Patch 2: fla's chunked gated-delta-rule kernel does not run in Triton 3.9's interpreter
    # (chunk_gated_delta_rule_fwd_kernel_h_blockdim64 calls `.to` on its loop index, a Python int
    # there). Its fused recurrent kernel, which fla itself runs for inference on <= 64 tokens,
    # does: every Gated DeltaNet layer runs in that mode (the same math, one token at a time).
    if os.environ.get("TRITON_INTERPRET") == "1":
        for m in model.modules():
            if isinstance(m, (GatedDeltaNet, KimiDeltaAttention)):
                m.mode = "fused_recurrent"
    with torch.no_grad():
        return model(torch.from_numpy(tokens[:, :-1])).logits.float().numpy()


def compare(case, what, gdn_logits, fla_out):
    err = np.abs(gdn_logits.astype(np.float64) - fla_out.astype(np.float64))
    scale = float(np.abs(fla_out).max())
    max_abs = float(err.max())
    rel = max_abs / scale
    # elementwise relative error where the logit is not tiny (informative only)
    big = np.abs(fla_out) > 1e-2 * scale
    max_rel_elem = float((err[big] / np.abs(fla_out[big])).max()) if big.any() else 0.0
    detail = (f"max|fla|={scale:.4g} max_abs={max_abs:.3g} max_abs/max|fla|={rel:.3g} "
              f"max_rel(|fla|>1% of max)={max_rel_elem:.3g}")
    R.check(case, f"{what}: logits agree (tol {TOL:g} x max|fla|)",
            gdn_logits.shape == fla_out.shape and rel <= TOL,
            detail if gdn_logits.shape == fla_out.shape else
            f"shapes gdn {gdn_logits.shape} fla {fla_out.shape}")
    return {"case": case, "what": what, "max_abs_logit": scale, "max_abs_err": max_abs,
            "max_abs_err_over_max_abs_logit": rel, "max_rel_err_elementwise": max_rel_elem}


def perturb(state, seed):
    """Every tensor moved by O(1) relative noise, so every parameter shows in the logits:
    norm weights around 1 (not exactly 1), biases non-zero, projections ~ 1/sqrt(fan_in)."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, t in state.items():
        n = torch.randn(t.shape, generator=g, dtype=torch.float32)
        if name.endswith("norm.weight"):
            t = 1.0 + 0.3 * n
        elif name.endswith(".bias") or name.endswith("dt_bias"):
            t = t + 0.3 * n
        elif name.endswith("A_log"):
            t = t + 0.3 * n
        elif name.endswith("conv1d.weight"):
            t = 0.5 * n
        elif name.endswith("embeddings.weight"):
            t = n
        elif t.dim() == 2:
            t = n / t.shape[1] ** 0.5
        else:
            t = t + 0.1 * n
        out[name] = t.to(torch.float32).contiguous()
    return out


def load_fla(case, directory, config_json, how_auto=True):
    config_cls, model_cls, _ = FAMILIES[config_json["model_type"]]
    model, info = model_cls.from_pretrained(directory, output_loading_info=True)
    loading_info_empty(case, f"{model_cls.__name__}.from_pretrained", info)
    if how_auto:
        cfg = AutoConfig.from_pretrained(directory)
        R.check(case, f"AutoConfig gives {config_cls.__name__}", isinstance(cfg, config_cls),
                type(cfg).__name__)
        auto, info = AutoModelForCausalLM.from_pretrained(directory, output_loading_info=True)
        R.check(case, f"AutoModelForCausalLM gives {model_cls.__name__}",
                isinstance(auto, model_cls), type(auto).__name__)
        loading_info_empty(case, "AutoModelForCausalLM.from_pretrained", info)
        del auto
    check_structure(case, model, config_json)
    # Every field the directory's config.json holds reads back into fla's config as written
    # (gdn's own "gdn" object and the dtype aside), the attention specs as fla normalizes them.
    diff = config_diff(json.loads((Path(directory) / "config.json").read_text()),
                       model.config.to_dict())
    R.check(case, "config.json fields read back by fla as written", not diff, "; ".join(diff))
    return model


def config_diff(written, read):
    ignore = ("gdn", "torch_dtype", "dtype", "transformers_version")
    return [f"{k}: {v!r} vs {read.get(k, '<absent>')!r}" for k, v in written.items()
            if k not in ignore and read.get(k, "<absent>") != v]


# ------------------------------------------------------------------------------------------------
# gdn -> fla cases: configs/hybrid.yaml made small. A: fla's dict form (GQA 4:2, defaults).
# B: the list form, every attention key away from its default in one entry (GQA 4:1, qkv_bias,
# a window shorter than the sequence, rope_theta 500), a second entry with MHA and rope_theta 1e6,
# plus an untied lm_head, GVA value heads, expand_v 2, the sigmoid output gate and negative
# eigenvalues on the Gated DeltaNet side.
SMALL = ["model.hidden_size=64", "model.head_dim=16", "model.num_heads=4", "model.chunk_size=32",
         "model.num_hidden_layers=4"]
# E, F: Kimi Delta Attention (model_type kda, its chunked kernel). E: a hybrid with GVA value
# heads and negative eigenvalues; F: the lower-bound gate (safe_gate), an untied lm_head.
KDA = ["model.model_type=kda", "model.kernel=chunked"]
GDN_CASES = {
    "gdn-A-dict": SMALL + ["model.attn={layers: [1, 3], num_heads: 4, num_kv_heads: 2}"],
    "gdn-E-kda": SMALL + KDA + ["model.attn={layers: [2], num_heads: 4, num_kv_heads: 2}",
                                "model.num_v_heads=8", "model.allow_neg_eigval=true"],
    "gdn-F-kda-bound": SMALL + KDA + ["model.attn=null", "model.lower_bound=-5.0",
                                      "model.safe_gate=true",
                                      "model.tie_word_embeddings=false"],
    "gdn-B-list": SMALL + [
        "model.attn=[{layers: [0], num_heads: 4, num_kv_heads: 1, qkv_bias: true, "
        "window_size: 16, rope_theta: 500.0}, {layers: [2], num_heads: 2, rope_theta: 1000000.0}]",
        "model.tie_word_embeddings=false", "model.num_v_heads=8", "model.expand_v=2.0",
        "model.output_gate_activation=sigmoid", "model.allow_neg_eigval=true"],
}


def gdn_to_fla(gdn, work, repo, tokens_path, tokens, case, sets, results):
    d = work / case
    args = [repo / "configs/hybrid.yaml"]
    for s in sets:
        args += ["--set", s]
    out = run_gdn(gdn, args + ["--tokens", tokens_path, "--save-weights", d / "model",
                               "--logits", d / "gdn.npy"], cwd=d)
    cj = json.loads((d / "model" / "config.json").read_text())
    model = load_fla(case, d / "model", cj)
    R.check(case, "parameter count", n_params(model) == out["params"],
            f"fla {n_params(model)} gdn {out['params']}")
    results.append(compare(case, "gdn's initial weights", np.load(d / "gdn.npy"),
                           fla_logits(model, tokens)))
    del model
    # The same directory with every tensor perturbed, through gdn again.
    shutil.copytree(d / "model", d / "perturbed")
    state = load_file(str(d / "model" / "model.safetensors"))
    save_file(perturb(state, seed=1), str(d / "perturbed" / "model.safetensors"),
              metadata={"format": "pt"})
    run_gdn(gdn, ["--weights", d / "perturbed", "--tokens", tokens_path, "--logits",
                  d / "gdn-perturbed.npy"], cwd=d)
    model = load_fla(case, d / "perturbed", cj, how_auto=False)
    gdn_perturbed = np.load(d / "gdn-perturbed.npy")
    results.append(compare(case, "perturbed weights", gdn_perturbed, fla_logits(model, tokens)))
    if case == "gdn-B-list":
        controls(case, model, tokens, gdn_perturbed)
    if case == "gdn-F-kda-bound":
        kda_gate_control(case, model, tokens, gdn_perturbed)
    del model


def controls(case, model, tokens, gdn_logits):
    """The comparison is sharp enough to see the mistakes it is for: fla's model with one
    attention convention changed must NOT match gdn (these rows pass when the error is large)."""
    attn = [m for m in model.modules() if isinstance(m, Attention)]
    mutations = {
        "window one key wider": lambda m: setattr(m, "window_size", m.window_size + 1)
        if m.window_size else None,
        "interleaved (GPT-J) rotary pairs": lambda m: setattr(m.rotary, "interleaved", True),
    }
    for what, mutate in mutations.items():
        saved = [(m.window_size, m.rotary.interleaved) for m in attn]
        for m in attn:
            mutate(m)
        err = float(np.abs(gdn_logits - fla_logits(model, tokens)).max() / np.abs(gdn_logits).max())
        for m, (w, il) in zip(attn, saved):
            m.window_size, m.rotary.interleaved = w, il
        R.check(case, f"control, fla with {what}: differs from gdn by > 100 x tol", err > 100 * TOL,
                f"max_abs/max|gdn|={err:.3g}")


def kda_gate_control(case, model, tokens, gdn_logits):
    """fla's KDA layers with the other gate form (softplus instead of the lower bound) must NOT
    match gdn's, which computes the bounded gate its config.json asks for."""
    layers = [m for m in model.modules() if isinstance(m, KimiDeltaAttention)]
    saved = [m.lower_bound for m in layers]
    for m in layers:
        m.lower_bound = None
    err = float(np.abs(gdn_logits - fla_logits(model, tokens)).max() / np.abs(gdn_logits).max())
    for m, lb in zip(layers, saved):
        m.lower_bound = lb
    R.check(case, "control, fla with the softplus gate: differs from gdn by > 100 x tol",
            err > 100 * TOL, f"max_abs/max|gdn|={err:.3g}")


# fla -> gdn cases: configs built in Python, fla's own random init (seeded), then perturbed.
FLA_BASE = dict(hidden_size=64, num_hidden_layers=4, num_heads=4, head_dim=16, expand_v=1.0,
                vocab_size=258, initializer_range=0.02)
FLA_CASES = {
    "fla-C-dict": dict(FLA_BASE, tie_word_embeddings=True,
                       attn={"layers": [3], "num_heads": 4, "num_kv_heads": 2}),
    "fla-D-list": dict(FLA_BASE, tie_word_embeddings=False, num_v_heads=8, expand_v=2.0,
                       # rope_theta an integer: fla keeps it so in config.json
                       attn=[{"layers": [0, 2], "num_heads": 8, "num_kv_heads": 2,
                              "qkv_bias": True, "window_size": 24, "rope_theta": 50000},
                             {"layers": [3], "num_heads": 4}]),
    "fla-G-kda": dict(FLA_BASE, model_type="kda", tie_word_embeddings=True, num_v_heads=8,
                      attn={"layers": [1], "num_heads": 4, "num_kv_heads": 1}),
}


def fla_to_gdn(gdn, work, tokens_path, tokens, case, kwargs, seed, results):
    d = work / case
    torch.manual_seed(seed)
    kwargs = dict(kwargs)
    config_cls, model_cls, _ = FAMILIES[kwargs.pop("model_type", "gated_deltanet")]
    config = config_cls(**kwargs)
    model = model_cls(config)
    with torch.no_grad():
        state = perturb({k: v for k, v in model.state_dict().items()
                         if not (config.tie_word_embeddings and k == "lm_head.weight")},
                        seed=10 + seed)
        model.load_state_dict(state, strict=False)
        if config.tie_word_embeddings:
            R.check(case, "lm_head tied to the embeddings",
                    model.lm_head.weight.data_ptr() == model.model.embeddings.weight.data_ptr())
    model.save_pretrained(d / "model")
    cj = json.loads((d / "model" / "config.json").read_text())
    ref = fla_logits(model, tokens)
    out = run_gdn(gdn, ["--weights", d / "model", "--tokens", tokens_path, "--logits",
                        d / "gdn.npy"], cwd=d)
    R.check(case, "parameter count", n_params(model) == out["params"],
            f"fla {n_params(model)} gdn {out['params']}")
    results.append(compare(case, "fla's save_pretrained, loaded by gdn", np.load(d / "gdn.npy"),
                           ref))
    # And back: gdn writes what it loaded; fla must load that too, to the same logits.
    run_gdn(gdn, ["--weights", d / "model", "--tokens", tokens_path, "--save-weights",
                  d / "resaved"], cwd=d)
    diff = config_diff(cj, json.loads((d / "resaved" / "config.json").read_text()))
    R.check(case, "gdn's re-saved config.json has fla's fields and values", not diff,
            "; ".join(diff))
    model2 = load_fla(case, d / "resaved", cj, how_auto=False)
    results.append(compare(case, "gdn's re-save of it, loaded by fla", ref,
                           fla_logits(model2, tokens)))
    del model, model2


# ------------------------------------------------------------------------------------------------
# KDA in fp64: fla's modules, each Triton kernel replaced by the PyTorch form of what it computes.
TOL64 = 1e-10  # max|gdn - fla| / max|fla| for the fp64 loss and every parameter gradient
KDA64_SETS = SMALL + KDA + ["model.attn={layers: [1], num_heads: 4, num_kv_heads: 2}",
                            "model.num_v_heads=8", "model.tie_word_embeddings=true"]
KDA64_CU = [0, 23, 24, 61, SEQ]  # documents of 23, 1, 37 and 39 tokens


def torch_kda(q, k, v, g, beta, A_log, dt_bias, initial_state=None, output_final_state=False,
              use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
              use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, safe_gate=False,
              lower_bound=None, cu_seqlens=None, **unused):
    """chunk_kda / fused_recurrent_kda as fla documents them, around fla's naive_recurrent_kda:
    l2norm(q, k) (fla's l2norm: x / sqrt(sum x^2 + 1e-6)), the gate (naive_kda_gate or
    naive_kda_lowerbound_gate), beta = sigmoid(b) (x2 with allow_neg_eigval)."""
    from fla.ops.kda.gate import naive_kda_gate, naive_kda_lowerbound_gate
    from fla.ops.kda.naive import naive_recurrent_kda
    assert initial_state is None and cu_seqlens is None and use_gate_in_kernel
    if use_qk_l2norm_in_kernel:
        q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    # fla's gate references compute in torch.float: keep fp64 as below.
    if lower_bound is None:
        g = _naive_fp64(naive_kda_gate, g, A_log, dt_bias, g.dtype)
    else:
        g = _naive_fp64(naive_kda_lowerbound_gate, g, A_log, dt_bias, lower_bound, g.dtype)
    if use_beta_sigmoid_in_kernel:
        beta = torch.sigmoid(beta) * (2.0 if allow_neg_eigval else 1.0)
    # naive_recurrent_kda computes in torch.float: keep fp64 by running it on fp64 inputs.
    with torch.autocast("cpu", enabled=False):
        o, _ = _naive_fp64(naive_recurrent_kda, q, k, v, g, beta)
    return o, None


def _naive_fp64(fn, *args):
    """fla's naive references cast to torch.float (x.float(), dtype=torch.float): run them with
    float meaning double."""
    saved_dtype, saved_method = torch.float, torch.Tensor.float
    try:
        torch.float = torch.float64
        torch.Tensor.float = torch.Tensor.double
        return fn(*args)
    finally:
        torch.float, torch.Tensor.float = saved_dtype, saved_method


def fp64_patches():
    """Each fla kernel the KDA hybrid runs, as PyTorch math (fp64 in, fp64 out)."""
    import fla.layers.kda as fla_kda
    import fla.modules.mlp as fla_mlp
    import fla.modules.rotary.ops as fla_rotary
    from fla.modules import FusedRMSNormGated, ShortConvolution
    from fla.modules.rotary.ops import rotary_embedding_ref
    import torch.nn.functional as F

    fla_kda.chunk_kda = fla_kda.fused_recurrent_kda = torch_kda
    fla_mlp.swiglu = lambda x, y: F.silu(x) * y

    def rotary(self, q, k, seqlen_offset=0, cu_seqlens=None, max_seqlen=None, **unused):
        """fla's rotary tables (inv_freq = base^(-2i/dim), angles t inv_freq), in fp64: fla builds
        them in fp32, which alone moves fp64 gradients by 1e-7."""
        assert cu_seqlens is None and seqlen_offset == 0 and self.scale is None
        inv_freq = 1.0 / self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float64)
                                       / self.dim)
        freqs = torch.outer(torch.arange(q.shape[1], dtype=torch.float64), inv_freq)
        cos, sin = freqs.cos().to(q.dtype), freqs.sin().to(q.dtype)
        return (rotary_embedding_ref(q, cos, sin, self.interleaved),
                rotary_embedding_ref(k, cos, sin, self.interleaved))
    fla_rotary.RotaryEmbedding.forward = rotary

    def conv(self, x, cache=None, output_final_state=False, cu_seqlens=None, **unused):
        assert cache is None and cu_seqlens is None
        T, W = x.shape[1], self.weight.shape[-1]
        y = F.conv1d(x.transpose(1, 2), self.weight, self.bias, padding=W - 1,
                     groups=x.shape[-1])[..., :T].transpose(1, 2)
        return (F.silu(y) if self.activation in ("silu", "swish") else y), None
    ShortConvolution.forward = conv

    def gated_norm(self, x, g, residual=None, prenorm=False, residual_in_fp32=False):
        assert residual is None and not prenorm
        y = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight
        return y * (torch.sigmoid(g) if self.activation == "sigmoid" else F.silu(g))
    FusedRMSNormGated.forward = gated_norm


def fla_fp64_loss_and_grads(directory, tokens, cu=None):
    """fla's KDAForCausalLM from `directory` in fp64 (unfused norms and MLP: torch's modules):
    mean next-token cross-entropy over every target, each document run alone when cu is given."""
    model = KDAForCausalLM.from_pretrained(directory, fuse_norm=False, fuse_swiglu=False,
                                           fuse_cross_entropy=False).double().train()
    x = torch.from_numpy(tokens)
    inputs, targets = x[:, :-1], x[:, 1:]
    if cu is None:
        logits = model(inputs).logits
    else:
        logits = torch.cat([model(inputs[:, a:b]).logits for a, b in zip(cu[:-1], cu[1:])], 1)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             targets.reshape(-1))
    loss.backward()
    grads = {n: p.grad.detach().numpy() for n, p in model.named_parameters()}
    return float(loss), grads


def kda_fp64(gdn, work, repo, tokens_path, tokens, results):
    case = "kda-fp64"
    d = work / case
    args = [repo / "configs/hybrid.yaml"]
    for s in KDA64_SETS:
        args += ["--set", s]
    run_gdn(gdn, args + ["--tokens", tokens_path, "--save-weights", d / "model"], cwd=d)
    shutil.copytree(d / "model", d / "perturbed")
    state = load_file(str(d / "model" / "model.safetensors"))
    save_file(perturb(state, seed=3), str(d / "perturbed" / "model.safetensors"),
              metadata={"format": "pt"})
    fp64_patches()
    one = tokens[:1]
    np.save(d / "one.npy", one)
    np.save(d / "cu.npy", np.array(KDA64_CU, dtype=np.int64))
    for what, tok, tok_path, cu in (("unpacked", tokens, tokens_path, None),
                                    ("packed (cu_seqlens)", one, d / "one.npy", KDA64_CU)):
        extra = ["--cu-seqlens", d / "cu.npy"] if cu else []
        out = run_gdn(gdn, ["--weights", d / "perturbed", "--tokens", tok_path, "--dtype",
                            "float64", "--grads", d / "grads.safetensors"] + extra, cwd=d)
        want_loss, want = fla_fp64_loss_and_grads(d / "perturbed", tok, cu)
        got = load_file(str(d / "grads.safetensors"))
        rel_loss = abs(out["loss"] - want_loss) / abs(want_loss)
        worst, worst_name = 0.0, ""
        missing = sorted(set(want) ^ set(got))
        for name in set(want) & set(got):
            a, b = got[name].double().numpy(), want[name]
            err = float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))
            if err > worst:
                worst, worst_name = err, name
        R.check(case, f"{what}: fp64 loss equals fla's math (tol {TOL64:g})", rel_loss <= TOL64,
                f"gdn {out['loss']:.15g} fla {want_loss:.15g} rel {rel_loss:.3g}")
        R.check(case, f"{what}: every parameter gradient equals fla's (tol {TOL64:g} x max)",
                not missing and worst <= TOL64,
                f"worst {worst_name} {worst:.3g}" + (f"; names differ: {missing}" if missing
                                                     else ""))
        results.append({"case": case, "what": f"fp64 {what}", "loss_rel_err": rel_loss,
                        "max_grad_rel_err": worst, "worst_grad": worst_name})


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    gdn = Path(sys.argv[1]).resolve()
    work = Path(sys.argv[2]).resolve()
    repo = Path(__file__).resolve().parent.parent
    work.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    versions = {"python": sys.version.split()[0], "torch": torch.__version__,
                "transformers": transformers.__version__, "triton": triton.__version__,
                "fla": getattr(fla, "__version__", "?"), "numpy": np.__version__}
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    print("patches (compute only):")
    for p in PATCHES:
        print(f"  - {p}")
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 258, size=(BATCH, SEQ + 1)).astype(np.int64)
    tokens_path = work / "tokens.npy"
    np.save(tokens_path, tokens)

    results = []
    runs = [(case, "gdn -> fla", gdn_to_fla, (gdn, work, repo, tokens_path, tokens, case, sets))
            for case, sets in GDN_CASES.items()]
    runs += [(case, "fla -> gdn", fla_to_gdn, (gdn, work, tokens_path, tokens, case, kw, seed))
             for seed, (case, kw) in enumerate(FLA_CASES.items())]
    # Last: it replaces fla's kernels by their PyTorch forms for the rest of the process.
    runs += [("kda-fp64", "gdn vs fla's math, fp64", kda_fp64,
              (gdn, work, repo, tokens_path, tokens))]
    if os.environ.get("CASES"):  # CASES=a,b: only these cases
        runs = [r for r in runs if r[0] in os.environ["CASES"].split(",")]
    for case, direction, fn, args in runs:
        print(f"{case} ({direction})", flush=True)
        shutil.rmtree(work / case, ignore_errors=True)
        (work / case).mkdir(parents=True)
        try:
            fn(*args, results)
        except Exception as e:  # a refusal by either side fails the case; the others still run
            R.check(case, "runs to the end", False, f"{type(e).__name__}: {e}")
    (work / "report.json").write_text(json.dumps(
        {"versions": versions, "patches": PATCHES, "tol": TOL, "tokens": list(tokens.shape),
         "results": results, "failed": R.failed,
         "checks": [{"case": c, "check": w, "ok": o, "detail": d} for c, w, o, d in R.rows]},
        indent=1))
    print()
    print(f"{'case':<12} {'logits of':<40} {'max|fla|':>9} {'max abs err':>12} {'/max|fla|':>10}")
    for r in results:
        if "loss_rel_err" in r:
            print(f"{r['case']:<12} {r['what']:<40} loss rel err {r['loss_rel_err']:.3g}, "
                  f"worst gradient {r['worst_grad']} {r['max_grad_rel_err']:.3g}")
            continue
        print(f"{r['case']:<12} {r['what']:<40} {r['max_abs_logit']:>9.4g} "
              f"{r['max_abs_err']:>12.3g} {r['max_abs_err_over_max_abs_logit']:>10.3g}")
    print(f"\n{len(R.rows) - R.failed} of {len(R.rows)} checks passed; report: "
          f"{work / 'report.json'}")
    sys.exit(1 if R.failed else 0)


if __name__ == "__main__":
    main()
