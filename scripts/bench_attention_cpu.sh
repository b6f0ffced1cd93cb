#!/usr/bin/env bash
# gdn's CPU attention against PyTorch's F.scaled_dot_product_attention, eager and compiled
# (scripts/bench_kernel_cpu.sh attention; its header has the details).
# Usage: scripts/bench_attention_cpu.sh [GDN] [OUT_DIR] [ROUNDS] [T ...]   (T default: 2048 4096)
exec "$(dirname "$0")/bench_kernel_cpu.sh" attention "$@"
