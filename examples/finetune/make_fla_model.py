#!/usr/bin/env python3
"""A tiny, freshly initialised flash-linear-attention 0.6.0 Gated DeltaNet model directory.

Usage: PYTHON examples/finetune/make_fla_model.py OUT_DIR

PYTHON is an environment with torch, transformers and fla 0.6.0 (docs/interop-fla.md has the
setup). Writes fla's save_pretrained output (config.json, model.safetensors): 2 layers of hidden
128, 2 heads of 64, the byte vocabulary of gdn's default corpus (258: bytes, bos 256, eos 257),
tied embeddings. The README's "Continue from a model" starts from it.
"""
import sys

import torch
from fla.models import GatedDeltaNetConfig, GatedDeltaNetForCausalLM

if len(sys.argv) != 2:
    sys.exit(__doc__)
torch.manual_seed(0)
config = GatedDeltaNetConfig(hidden_size=128, num_hidden_layers=2, num_heads=2, head_dim=64,
                             expand_v=1.0, vocab_size=258, bos_token_id=256, eos_token_id=257,
                             tie_word_embeddings=True)
GatedDeltaNetForCausalLM(config).save_pretrained(sys.argv[1])
print(f"wrote {sys.argv[1]}: {sum(p.numel() for p in GatedDeltaNetForCausalLM(config).parameters())} parameters")
