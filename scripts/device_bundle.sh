#!/usr/bin/env bash
# Packs the CUDA programs for a lent GPU machine into .device_carry/bundle.tar.xz: gdn, every test
# CTest labels `gpu` (listed in gpu-tests.txt: CTest's labels, never a hand list), the kernel
# labs, the shared libraries a bare CUDA machine lacks (ldd minus the C/C++ runtime and the CUDA
# libraries; cuDNN and NCCL are opened at run time where found, never linked), this machine's
# loader and C/C++ runtime (used there only for an older glibc), and fla's wheels for the fla
# stage. scripts/gpu_check.sh runs it there.
# Usage:
#   scripts/device_bundle.sh [ARCH]        configure and build build-device/ for ARCH (default 90:
#                                          H100/H200) and pack it
#   scripts/device_bundle.sh --from DIR    pack what build dir DIR holds (building only what is
#                                          out of date); CI packs build/ to dry-run gpu_check.sh
# Environment: GDN_BUNDLE_XZ (xz level, default -6), GDN_FLA_WHEELS (a folder of wheels to carry;
# default: pip download fla-core and flash-linear-attention 0.6.0 when pip can; 0: none).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --from ]; then
  build=${2:?"--from needs a build dir"}
  [ -f "$build/CMakeCache.txt" ] || { echo "device_bundle: $build is not a CMake build dir" >&2; exit 1; }
else
  arch=${1:-90}
  build=build-device
  # The cuDNN frontend's headers (attention) are fetched here at configure time: nothing to carry.
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DGDN_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="$arch" >/dev/null
fi
gpu_tests=$(cd "$build" && ctest -N -L gpu | awk '/Test +#/ {print $3}')
[ -n "$gpu_tests" ] || { echo "device_bundle: ctest lists no test labelled gpu in $build" >&2; exit 1; }
labs=()  # the kernel labs exist in CUDA builds only
cmake --build "$build" --target help | grep -q "gdr_lab" && labs=(gdr_lab conv_lab)
targets=(gdn "${labs[@]}" $gpu_tests)
stubs=(stub_cudnn stub_nccl)  # tests/check_without_vendor_libraries.sh's stand-ins
cmake --build "$build" -j "${GDN_JOBS:-$(nproc)}" --target "${targets[@]}" "${stubs[@]}"
stage=.device_carry/stage
rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib"
for t in "${targets[@]}"; do
  f=$(find "$build" -maxdepth 2 -type f -name "$t" | head -n 1)
  [ -n "$f" ] || { echo "device_bundle: $t was not built in $build" >&2; exit 1; }
  cp "$f" "$stage/bin/" && strip "$stage/bin/$t"
done
printf '%s\n' $gpu_tests >"$stage/gpu-tests.txt"
mkdir -p "$stage/stub_libs" && cp "$build"/tests/stub_libs/lib*.so.* "$stage/stub_libs/"
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
# fla's wheels (pure Python; the GPU machine has PyTorch and Triton but no network).
mkdir -p "$stage/wheels"
wheels=${GDN_FLA_WHEELS:-}
if [ "$wheels" = 0 ]; then
  :
elif [ -n "$wheels" ]; then
  cp "$wheels"/*.whl "$stage/wheels/"
elif ! python3 -m pip download -q --no-deps -d "$stage/wheels" fla-core==0.6.0 \
  flash-linear-attention==0.6.0 >/dev/null 2>&1; then
  echo "device_bundle: could not download fla's wheels: the fla stage will skip" >&2
fi
tar -C "$stage" -cf - bin lib sys wheels stub_libs gpu-tests.txt | xz -T0 "${GDN_BUNDLE_XZ:--6}" \
  >.device_carry/bundle.tar.xz
rm -rf "$stage"
ls -la .device_carry/bundle.tar.xz
echo "device_bundle: $(echo "$gpu_tests" | wc -l) gpu tests: $(echo $gpu_tests)"
