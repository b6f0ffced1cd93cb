#!/usr/bin/env bash
# Builds the CUDA programs for one GPU architecture (default 90: H100/H200) into build-device/
# and packs them, with the shared libraries they need that a bare CUDA machine lacks (ldd minus
# the C/C++ runtime and the CUDA libraries), into .device_carry/bundle.tar.xz: a machine with
# the CUDA toolkit but none of our Debian packages unpacks it and runs scripts/gpu_check.sh.
# Usage: scripts/device_bundle.sh [ARCH]
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${1:-90}
build=build-device
# The cuDNN frontend's headers (attention) are fetched here at configure time: nothing to carry.
targets=(gdn gdr_lab conv_lab test_cuda_gdr test_cuda_ops test_cuda_nn test_cuda_parity test_cuda_optim
  test_cuda_train test_cuda_dist test_cuda_attention test_cuda_attention_cudnn
  test_cuda_bench_attention)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DGDN_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" >/dev/null
cmake --build "$build" -j "${GDN_JOBS:-$(nproc)}" --target "${targets[@]}"
stage=.device_carry/stage
rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib"
for t in "${targets[@]}"; do
  f=$(find "$build" -maxdepth 2 -type f -name "$t" | head -n 1)
  cp "$f" "$stage/bin/" && strip "$stage/bin/$t"
done
# Every non-system, non-CUDA library any program loads (resolved here, copied by value).
for b in "$stage"/bin/*; do ldd "$b"; done | awk '/=> \//{print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
  grep -vE 'lib(cuda|cudart|cublas|cublasLt|curand|cudnn[^/]*|nccl|nvrtc|nvJitLink)\.so' |
  while read -r l; do cp -L "$l" "$stage/lib/"; done
# This machine's loader and C/C++ runtime, for a GPU machine with an older glibc: used there only
# then, through wrappers (scripts/gpu_check.sh), never put on its library path.
mkdir -p "$stage/sys"
for l in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libstdc++.so.6 libgcc_s.so.1 libpthread.so.0 \
  libdl.so.2 librt.so.1; do
  cp -L "$(ldconfig -p | awk -v n="$l" '$1 == n && /x86-64/ {print $NF; exit}')" "$stage/sys/"
done
getconf GNU_LIBC_VERSION | awk '{print $2}' >"$stage/sys/glibc-version"
tar -C "$stage" -cJf .device_carry/bundle.tar.xz bin lib sys
rm -rf "$stage"
ls -la .device_carry/bundle.tar.xz
