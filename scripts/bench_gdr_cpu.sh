#!/usr/bin/env bash
# gdn's fused gated delta rule on the CPU against the chunked form in PyTorch ops, eager and
# compiled (scripts/bench_kernel_cpu.sh gdr; its header has the details).
# Usage: scripts/bench_gdr_cpu.sh [GDN] [OUT_DIR] [ROUNDS] [T ...]   (T default: 2048 16384)
exec "$(dirname "$0")/bench_kernel_cpu.sh" gdr "$@"
